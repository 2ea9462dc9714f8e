//! Conservation per IP direction: for every capture with a golden table in
//! `testdata/golden/ip-pairs/` (made by tshark with IP reassembly off, outermost header), the
//! packets and frame bytes trawl puts into flows, summed per (source, destination) address,
//! equal tshark's. This checks decoding through every link type and encapsulation, the
//! direction bookkeeping, and that every fragment lands in some flow.
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use trawl_flow::decode::ParseOutcome;
use trawl_flow::FlowConfig;
use trawl_testkit::{meter_file, testdata};

type Pairs = BTreeMap<(IpAddr, IpAddr), (u64, u64)>;

fn golden(name: &str) -> Pairs {
    let text = std::fs::read_to_string(testdata(&format!("golden/ip-pairs/{name}.tsv"))).unwrap();
    let mut pairs = Pairs::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let f: Vec<&str> = line.split('\t').collect();
        // tshark prints nothing for a field of a header it could not decode.
        let (Ok(s), Ok(d)) = (f[0].parse(), f[1].parse()) else {
            continue;
        };
        pairs.insert((s, d), (f[2].parse().unwrap(), f[3].parse().unwrap()));
    }
    pairs
}

fn capture(name: &str) -> PathBuf {
    let p = testdata(&format!("pcaps/{name}"));
    if p.exists() {
        p
    } else {
        testdata(&format!("oracle/{name}"))
    }
}

fn ours(name: &str) -> (Pairs, trawl_flow::MeterStats) {
    let m = meter_file(&capture(name), FlowConfig::default());
    let mut pairs = Pairs::new();
    for f in &m.flows {
        for (s, d, (p, b)) in [(f.src.0, f.dst.0, f.fwd), (f.dst.0, f.src.0, f.rev)] {
            if p > 0 {
                let e = pairs.entry((s, d)).or_default();
                e.0 += p;
                e.1 += b;
            }
        }
    }
    (pairs, m.stats)
}

fn check(name: &str) {
    let want = golden(name);
    let (got, stats) = ours(name);
    assert!(!want.is_empty(), "{name}: empty golden table");
    assert_eq!(
        got, want,
        "{name}: per-direction IP totals differ from tshark"
    );
    assert_eq!(
        stats.packets,
        stats.outcomes.total(),
        "{name}: every packet has an outcome"
    );
}

macro_rules! golden_cases {
    ($($test:ident => $file:literal,)*) => {
        $( #[test] fn $test() { check($file); } )*
        /// The captures whose `testdata/golden/ip-pairs/` tables the tests above compare.
        pub const CASES: &[&str] = &[$($file),*];
    };
}

golden_cases! {
    ipv4_fragments => "ip4_fragments.pcap",
    ipv4_fragments_socks => "socks5-http-302-frag.pcap",
    ipv6_fragments => "ipv6-frag.pcap",
    ipv6_extension_headers => "ipv6_opt_fragments.pcap",
    vlan => "VlanPackets.pcap",
    two_vlan_tags => "twovlan.pcap",
    mpls => "mpls-basic.pcap",
    pppoe_session => "pppoe.pcap",
    gre_outer => "various_gre.pcap",
    gre_outer_pcapplusplus => "GrePackets.cap",
    vxlan_outer => "vxlan.pcap",
    linux_sll => "babel.pcap",
    linux_sll2 => "Sll2Packet.pcap",
    bsd_null_loopback => "null_loopback.pcap",
    raw_ip => "raw_ip.pcap",
    linktype_ipv4 => "LINKTYPE_IPV4.pcap",
    linktype_ipv6 => "LINKTYPE_IPV6.pcap",
    android_mixed => "android.pcap",
    aerospike_vlan => "aerospike.pcap",
    dingtalk => "dingtalk.pcap",
    many_protocols => "many-protocols.pcap.gz",
    ndpi_1kxun => "1kxun.pcap.gz",
}

/// Tables compared by the tests below.
pub const SPECIAL: &[&str] = &["fuzz-2006-06-26-2594.pcap"];

/// A fuzzer-made capture: tshark decodes some IP headers trawl rejects as malformed or
/// truncated. Every address pair trawl reports must be one tshark reports with at least as
/// many packets, and what trawl leaves out is exactly what it counted as undecodable IP.
#[test]
fn fuzzed_capture_loses_only_counted_packets() {
    let name = "fuzz-2006-06-26-2594.pcap";
    let want = golden(name);
    let (got, stats) = ours(name);
    for (pair, (p, _)) in &got {
        let w = want.get(pair).map(|w| w.0).unwrap_or(0);
        assert!(*p <= w || w == 0, "{pair:?}: trawl {p} packets, tshark {w}");
    }
    let ours_total: u64 = got.values().map(|v| v.0).sum();
    let keyed = stats.outcomes.get(ParseOutcome::Ok)
        + stats.outcomes.get(ParseOutcome::TransportIncomplete)
        + stats.outcomes.get(ParseOutcome::Fragment);
    assert_eq!(ours_total, keyed, "every keyed packet is in a flow");
}
