//! trawl's flow table against tshark's exact per-stream table (`*.tshark.txt`).
//!
//! Matching: both sides are grouped by (protocol, unordered endpoint pair); within a group the
//! flows are paired in time order and must agree on packets and frame bytes per direction,
//! first and last timestamp (ns), and SYN / SYN-ACK / FIN / RST counts.
//!
//! Documented differences from tshark's stream definition, each tested explicitly:
//! - tshark never splits a UDP stream and splits TCP streams only on port reuse; trawl also
//!   splits on its idle timeout. The comparison runs trawl with idle and active timeouts of a
//!   day so the definitions coincide (the timeouts themselves are tested elsewhere).
//! - tshark keeps packets that follow a TCP close in the same stream, however late; trawl
//!   exports a closed flow after its linger (default 2 s) and late packets (retransmitted
//!   FINs, keep-alives) start a new flow. The comparison lingers a day; the split itself is
//!   checked by `late_packets_after_close_start_a_new_flow`.
//! - tshark reassembles IP fragments and shows the transport header only on the reassembled
//!   frame; trawl counts every fragment in its flow (see `fragments_are_counted_per_packet`).
//! - trawl keys on the VLAN id, tshark does not: groups are compared after summing trawl's
//!   records of the same 5-tuple across VLANs (none of the oracle captures has such a case).
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use trawl_flow::decode::TunnelMode;
use trawl_flow::FlowConfig;
use trawl_testkit::{meter_file, oracle_flows, testdata, Metered, OracleFlow, TestFlow};

// Longer than any gap inside the oracle captures (4in4tunnel.pcap pauses for 26 hours).
const DAY_NS: u64 = 30 * 86_400 * 1_000_000_000;

type Endpoint = (IpAddr, u16);
type GroupKey = (u8, Endpoint, Endpoint);

fn group_key(proto: u8, a: Endpoint, b: Endpoint) -> GroupKey {
    if a <= b {
        (proto, a, b)
    } else {
        (proto, b, a)
    }
}

fn oracle_proto(p: &str) -> u8 {
    match p {
        "TCP" => 6,
        "UDP" => 17,
        other => panic!("unexpected oracle protocol {other}"),
    }
}

/// Compares one capture with the oracle beside it; returns the mismatches as readable lines.
fn compare(capture: &Path) -> (usize, Vec<String>) {
    let oracle = capture.with_file_name(format!(
        "{}.tshark.txt",
        capture.file_name().unwrap().to_string_lossy()
    ));
    compare_with(capture, &oracle, TunnelMode::Outer)
}

/// Compares a capture with an oracle file, keying tunnels as `tunnel` says.
fn compare_with(capture: &Path, oracle: &Path, tunnel: TunnelMode) -> (usize, Vec<String>) {
    let oracle = oracle_flows(oracle);
    let metered = meter_file(capture, day_config(tunnel));
    assert!(
        metered.error.is_none(),
        "{}: {:?}",
        capture.display(),
        metered.error
    );
    compare_flows(&metered, &oracle)
}

/// The comparison timeouts: a day, so trawl's flows end where tshark's streams do.
fn day_config(tunnel: TunnelMode) -> FlowConfig {
    let mut config = FlowConfig {
        idle_timeout_ns: DAY_NS,
        active_timeout_ns: DAY_NS,
        tcp_linger_ns: DAY_NS,
        ..FlowConfig::default()
    };
    config.decode.tunnel = tunnel;
    config
}

/// Compares metered flows with an oracle table; returns the oracle's size and the mismatches.
fn compare_flows(metered: &Metered, oracle: &[OracleFlow]) -> (usize, Vec<String>) {
    let mut theirs: BTreeMap<GroupKey, Vec<&OracleFlow>> = BTreeMap::new();
    for f in oracle {
        theirs
            .entry(group_key(oracle_proto(&f.proto), f.a, f.b))
            .or_default()
            .push(f);
    }
    let mut ours: BTreeMap<GroupKey, Vec<&TestFlow>> = BTreeMap::new();
    for f in metered
        .flows
        .iter()
        .filter(|f| f.proto == 6 || f.proto == 17)
    {
        ours.entry(group_key(f.proto, f.src, f.dst))
            .or_default()
            .push(f);
    }
    let mut problems = Vec::new();
    for (key, their) in &mut theirs {
        their.sort_by_key(|f| f.first_ns);
        let Some(our) = ours.get_mut(key) else {
            problems.push(format!(
                "{key:?}: tshark has {} flows, trawl none",
                their.len()
            ));
            continue;
        };
        our.sort_by_key(|f| f.first_ns);
        if our.len() != their.len() {
            problems.push(format!(
                "{key:?}: tshark has {} flows, trawl {}: {:?} vs {:?}",
                their.len(),
                our.len(),
                their
                    .iter()
                    .map(|f| (f.first_ns, f.pkts_ab + f.pkts_ba))
                    .collect::<Vec<_>>(),
                our.iter()
                    .map(|f| (f.first_ns, f.fwd.0 + f.rev.0))
                    .collect::<Vec<_>>()
            ));
            continue;
        }
        for (t, o) in their.iter().zip(our.iter()) {
            // Map tshark's A→B onto trawl's initiator→responder.
            let (ab, ba) = if o.src == t.a {
                (o.fwd, o.rev)
            } else {
                (o.rev, o.fwd)
            };
            let got = (ab, ba, o.first_ns, o.last_ns);
            let want = (
                (t.pkts_ab, t.bytes_ab),
                (t.pkts_ba, t.bytes_ba),
                t.first_ns,
                t.last_ns,
            );
            if got != want {
                problems.push(format!(
                    "{key:?} stream {}: trawl {got:?} tshark {want:?}",
                    t.stream
                ));
            }
            if let Some(c) = t.tcp_counts {
                if c != o.tcp_counts {
                    problems.push(format!(
                        "{key:?} stream {}: SYN/SYNACK/FIN/RST trawl {:?} tshark {c:?}",
                        t.stream, o.tcp_counts
                    ));
                }
            }
        }
    }
    for (key, our) in &ours {
        if !theirs.contains_key(key) {
            problems.push(format!(
                "{key:?}: trawl has {} flows, tshark none",
                our.len()
            ));
        }
    }
    (oracle.len(), problems)
}

fn check(name: &str) {
    assert_same(name, compare(&testdata(&format!("oracle/{name}"))));
}

/// Fails with every difference listed unless trawl and tshark agree on every flow.
fn assert_same(name: &str, (n, problems): (usize, Vec<String>)) {
    assert!(n > 0, "{name}: empty oracle");
    assert!(
        problems.is_empty(),
        "{name}: {} of {n} flows differ from tshark:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

macro_rules! oracle_cases {
    ($($test:ident => $file:literal;)*) => {
        $( #[test] fn $test() { check($file); } )*
        /// The captures of `testdata/oracle/` compared whole by the tests above.
        pub const ORACLE_CASES: &[&str] = &[$($file),*];
    };
}

oracle_cases! {
    tcp_handshake_nano => "tcp-handshake-nano.pcap";
    nanosecs_big_endian => "nanosecs_big_endian.pcap";
    wireshark_retrans => "wireshark-retrans.pcap";
    tls13 => "tls13.pcap";
    chrome_443 => "443-chrome.pcap";
    v6_http => "v6-http.pcap";
    dns_wiresharkrepo => "dns-wiresharkrepo.pcap";
    sip => "sip.pcap";
    g711a_rtp => "g711a.pcap";
    many_interfaces_pcapng => "many_interfaces-1.pcapng";
    ndpi_1kxun_gzip => "1kxun.pcap.gz";
    many_protocols_gzip => "many-protocols.pcap.gz";
}

/// Oracle tables of `testdata/oracle/` compared by the tests below, each with a documented
/// difference.
pub const ORACLE_SPECIAL: &[&str] = &["ip4_fragments.pcap"];

/// tshark reassembles the fragmented NFS replies and counts one frame per datagram; trawl
/// counts every fragment (the per-direction totals are checked against tshark with
/// reassembly off in `ip_pairs::ipv4_fragments`). Here: the same single flow; the client
/// (port 789, sending fragmented NFS calls) has all 50 fragments, the server's 3 replies are
/// whole.
#[test]
fn fragments_are_counted_per_packet() {
    let path = testdata("oracle/ip4_fragments.pcap");
    let (_, problems) = compare(&path);
    assert_eq!(problems.len(), 1, "{problems:?}");
    let m = meter_file(&path, FlowConfig::default());
    assert_eq!(m.stats.fragments_unmatched, 0);
    // tshark -o ip.defragment:FALSE -Y "ip.frag_offset>0" counts 41 non-first fragments.
    assert_eq!(m.stats.fragments_resolved, 41);
    let udp: Vec<&TestFlow> = m.flows.iter().filter(|f| f.proto == 17).collect();
    assert_eq!(udp.len(), 1);
    let f = udp[0];
    let (client, server) = if f.src.1 == 789 {
        (f.fwd, f.rev)
    } else {
        (f.rev, f.fwd)
    };
    assert_eq!(client, (50, 71220));
    assert_eq!(server, (3, 534));
}

/// With the default linger, the retransmitted FINs of one BBC connection that come seconds
/// after both FINs were seen form a second record; tshark keeps them in stream 0.
#[test]
fn late_packets_after_close_start_a_new_flow() {
    let m = meter_file(
        &testdata("oracle/many-protocols.pcap.gz"),
        FlowConfig::default(),
    );
    let mut parts: Vec<&TestFlow> = m
        .flows
        .iter()
        .filter(|f| f.src.1 == 55260 || f.dst.1 == 55260)
        .collect();
    parts.sort_by_key(|f| f.first_ns);
    let packets: Vec<u64> = parts.iter().map(|f| f.fwd.0 + f.rev.0).collect();
    assert_eq!(packets, vec![153, 4]);
    assert_eq!(parts[0].end_reason, "fin");
    assert!(parts[1].first_ns - parts[0].last_ns > 2_000_000_000);
}

/// Further captures whose exact flow tables were generated with the corpus tool `flows.py`
/// (tshark 4.0) into `testdata/golden/flows/`: link types, encapsulations, pcapng variants.
/// tshark keys tunnelled traffic on the innermost header, so tunnel captures are compared with
/// `--tunnel inner`. (`vxlan.pcap` is compared on its own below.)
fn check_extra(name: &str, tunnel: TunnelMode) {
    let capture = testdata(&format!("pcaps/{name}"));
    let oracle = testdata(&format!("golden/flows/{name}.tshark.txt"));
    assert_same(name, compare_with(&capture, &oracle, tunnel));
}

macro_rules! extra_cases {
    ($($test:ident => $file:literal $(, $tunnel:ident)?;)*) => {
        $( #[test] fn $test() { check_extra($file, extra_cases!(@mode $($tunnel)?)); } )*
        /// The captures whose `testdata/golden/flows/` tables the tests above compare whole.
        pub const EXTRA_CASES: &[&str] = &[$($file),*];
    };
    (@mode) => { TunnelMode::Outer };
    (@mode inner) => { TunnelMode::Inner };
}

extra_cases! {
    extra_ipip_inner => "4in4tunnel.pcap", inner;
    extra_gre_inner => "GrePackets-tunnels.pcap", inner;
    extra_gre_cap_inner => "GrePackets.cap", inner;
    extra_pptp_inner => "pptp-gre.pcapng", inner;
    // Issue 23's tunnels: ERSPAN II carrying VXLAN, Aruba's 802.11 in GRE, WCCP, ERSPAN II.
    extra_erspan_vxlan_inner => "gre-erspan-vxlan.pcap", inner;
    extra_aruba_gre_inner => "aruba-gre-80211http.pcap", inner;
    extra_wccp_inner => "wccp_redirect_gre.pcap", inner;
    extra_erspan_ii_inner => "erspan-type-ii-2.pcap", inner;
    extra_linktype_ipv4 => "LINKTYPE_IPV4.pcap";
    extra_linktype_ipv6 => "LINKTYPE_IPV6.pcap";
    extra_sll2 => "Sll2Packet.pcap";
    extra_sll => "babel.pcap";
    extra_null => "null_loopback.pcap";
    extra_raw_ip => "raw_ip.pcap";
    extra_vlan_aerospike => "aerospike.pcap";
    extra_two_vlans => "twovlan.pcap";
    extra_mpls => "mpls-basic.pcap";
    extra_pppoe => "pppoe.pcap";
    extra_android => "android.pcap";
    extra_dingtalk => "dingtalk.pcap";
    extra_anon_gzip => "anon-v4.pcap.gz";
    extra_http => "http-empty-useragent.pcap";
    extra_pcapng_be_006 => "gopacket-be-test006.pcapng";
    extra_pcapng_le_001 => "gopacket-le-test001.pcapng";
    extra_pcapng_le_006 => "gopacket-le-test006.pcapng";
    extra_pcapng_le_902 => "gopacket-le-test902.pcapng";
}

/// `pcapng-example.pcapng.zst` stamps one packet (frame 2, a SYN-ACK) 47 years after its
/// neighbours. trawl's clock is packet time, so that packet expires every flow idle since the
/// jump: the SYN before it becomes a one-packet record and the rest of the connection a second
/// one. tshark's stream ignores time. Everything else in the file matches tshark exactly.
#[test]
fn extra_pcapng_zstd_time_jump_splits_one_flow() {
    let name = "pcapng-example.pcapng.zst";
    let (n, problems) = compare_with(
        &testdata(&format!("pcaps/{name}")),
        &testdata(&format!("golden/flows/{name}.tshark.txt")),
        TunnelMode::Outer,
    );
    assert_eq!(n, 15);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].contains("40304") && problems[0].contains("tshark has 1 flows, trawl 2"));
}

/// Tables of `testdata/golden/flows/` compared by the tests below, each with a documented
/// difference.
pub const EXTRA_SPECIAL: &[&str] = &[
    "pcapng-example.pcapng.zst",
    "vxlan.pcap",
    "ipv6-frag.pcap",
    "ipv6_opt_fragments.pcap",
    "socks5-http-302-frag.pcap",
    "fuzz-2006-06-26-2594.pcap",
    "gopacket-le-test901.pcapng",
    "gopacket-be-test901.pcapng",
];

/// Fragmented datagrams: tshark reassembles them and puts only the frame that completes a
/// datagram into its stream (at that frame's time, with that frame's length); trawl counts
/// every fragment in the flow. So the flows are the same (key, number, TCP flag counts, last
/// packet), and the packets trawl counts beyond tshark's are exactly the non-first fragments it
/// resolved to their flow. (Frame bytes per direction, fragments included, are checked against
/// tshark with reassembly off in `ip_pairs`.)
#[test]
fn extra_fragmented_captures_differ_only_by_fragments() {
    for name in [
        "ipv6-frag.pcap",
        "ipv6_opt_fragments.pcap",
        "socks5-http-302-frag.pcap",
    ] {
        let oracle = oracle_flows(&testdata(&format!("golden/flows/{name}.tshark.txt")));
        let m = meter_file(
            &testdata(&format!("pcaps/{name}")),
            day_config(TunnelMode::Outer),
        );
        assert!(m.error.is_none(), "{name}: {:?}", m.error);
        let (n, problems) = compare_flows(&m, &oracle);
        assert!(
            problems
                .iter()
                .all(|p| p.contains(" stream ") && !p.contains("SYN")),
            "{name}: flows or TCP flags differ, not only counts: {problems:#?}"
        );
        assert!(!problems.is_empty(), "{name}: no fragment difference left?");
        let ours: Vec<&TestFlow> = m
            .flows
            .iter()
            .filter(|f| f.proto == 6 || f.proto == 17)
            .collect();
        assert_eq!(ours.len(), n, "{name}: flow count");
        let mut extra = 0;
        for t in &oracle {
            let o = ours
                .iter()
                .find(|o| {
                    group_key(o.proto, o.src, o.dst) == group_key(oracle_proto(&t.proto), t.a, t.b)
                })
                .unwrap_or_else(|| panic!("{name}: no flow for tshark stream {}", t.stream));
            let (ab, ba) = if o.src == t.a {
                (o.fwd, o.rev)
            } else {
                (o.rev, o.fwd)
            };
            assert!(
                ab.0 >= t.pkts_ab && ba.0 >= t.pkts_ba,
                "{name}: stream {}",
                t.stream
            );
            assert_eq!(
                o.last_ns, t.last_ns,
                "{name}: stream {} last packet",
                t.stream
            );
            extra += ab.0 - t.pkts_ab + ba.0 - t.pkts_ba;
        }
        assert_eq!(m.stats.fragments_unmatched, 0, "{name}");
        assert_eq!(
            extra, m.stats.fragments_resolved,
            "{name}: trawl's packets beyond tshark's are its non-first fragments"
        );
    }
}

/// pcapng spec suite test901: its second section has version 2.0, which trawl (like libpcap)
/// refuses, naming the offset; tshark reads on. The flows before the bad section equal
/// tshark's (the second section holds no TCP/UDP flow).
#[test]
fn extra_pcapng_bad_second_section_stops_with_an_error() {
    for name in ["gopacket-le-test901.pcapng", "gopacket-be-test901.pcapng"] {
        let oracle = oracle_flows(&testdata(&format!("golden/flows/{name}.tshark.txt")));
        let m = meter_file(
            &testdata(&format!("pcaps/{name}")),
            day_config(TunnelMode::Outer),
        );
        let error = m.error.clone().expect("the bad section is an error");
        assert!(
            error.contains("offset 492") && error.contains("version: 2.0"),
            "{name}: {error}"
        );
        assert_same(name, compare_flows(&m, &oracle));
    }
}

/// A fuzzer-made capture (damaged headers): of tshark's 242 streams, 240 equal trawl's flows.
/// The rest are headers damaged by the fuzzer that the two decode differently: two streams
/// where they disagree on which packets belong, and 10 flows trawl has and tshark has not
/// (most port-less: fragments and transport headers trawl keys without ports; the per-address
/// totals are checked in `ip_pairs::fuzzed_capture_loses_only_counted_packets`). Pinned, so any
/// change in how trawl decodes this file shows.
#[test]
fn extra_fuzzed_capture_differs_in_twelve_known_places() {
    let name = "fuzz-2006-06-26-2594.pcap";
    let (n, problems) = compare_with(
        &testdata(&format!("pcaps/{name}")),
        &testdata(&format!("golden/flows/{name}.tshark.txt")),
        TunnelMode::Outer,
    );
    assert_eq!(n, 242);
    let differing = problems.iter().filter(|p| p.contains(" stream ")).count();
    let only_ours = problems
        .iter()
        .filter(|p| p.contains("tshark none"))
        .count();
    assert_eq!(
        (differing, only_ours, problems.len()),
        (2, 10, 12),
        "{problems:#?}"
    );
}

/// `vxlan.pcap` carries ICMP and ARP in VXLAN: `flows.py` labels each UDP stream with the
/// innermost IP addresses (the ICMP packets', where there are any) and the outer UDP ports, a
/// key no flow meter uses. trawl keyed on the outer headers has the same streams: per stream
/// one flow with the same ports, packets, bytes, first and last packet; the addresses agree
/// where the tunnel carries no IP (ARP).
#[test]
fn extra_vxlan_streams_match_outer_flows() {
    let name = "vxlan.pcap";
    let oracle = oracle_flows(&testdata(&format!("golden/flows/{name}.tshark.txt")));
    let m = meter_file(
        &testdata(&format!("pcaps/{name}")),
        day_config(TunnelMode::Outer),
    );
    assert!(m.error.is_none(), "{:?}", m.error);
    let udp: Vec<&TestFlow> = m.flows.iter().filter(|f| f.proto == 17).collect();
    assert_eq!(udp.len(), oracle.len());
    let mut same_addresses = 0;
    for t in &oracle {
        let o = udp
            .iter()
            .find(|o| (o.src.1, o.dst.1, o.first_ns) == (t.a.1, t.b.1, t.first_ns))
            .unwrap_or_else(|| panic!("no trawl flow for tshark stream {}: {t:?}", t.stream));
        assert_eq!(
            (o.fwd, o.rev, o.last_ns),
            ((t.pkts_ab, t.bytes_ab), (t.pkts_ba, t.bytes_ba), t.last_ns),
            "stream {}",
            t.stream
        );
        same_addresses += usize::from((o.src.0, o.dst.0) == (t.a.0, t.b.0));
    }
    // The two ARP-carrying streams.
    assert_eq!(same_addresses, 2);
}
