//! `trawl anonymize` (issue 25): tshark, checksum validation on, sees the same checksum
//! verdicts in the output as in the input, frame by frame, and every address it decodes
//! (IP, ARP, ICMP quotes and redirects, neighbour discovery, tunnels) is the Crypto-PAn image
//! of the input's; `trawl flows` of the output equals that of the input under the mapping;
//! malformed frames are copied unchanged and counted; `--truncate-payload` and `--keep`.

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use trawl_anon::{Anonymizer, CryptoPan, Key, Prefix};

use super::{ok, s, testdata, trawl};

/// Captures of the repository with IPv4, IPv6, ARP, NDP, VLAN/QinQ, MPLS, PPPoE, SLL2, raw IP,
/// loopback, GRE (with keepalives), PPTP, VXLAN, IP-in-IP, fragments, pcapng with several
/// interfaces, and input checksums that are wrong (offloaded).
const CAPTURES: [&str; 17] = [
    "pcaps/802.1ad_QinQ.pcap",
    "pcaps/4in4tunnel.pcap",
    "pcaps/GrePackets-tunnels.pcap",
    "pcaps/Sll2Packet.pcap",
    "pcaps/VlanPackets.pcap",
    "pcaps/anon-v4.pcap.gz",
    "pcaps/ipv6_opt_fragments.pcap",
    "pcaps/many_interfaces-1.pcapng",
    "pcaps/mpls-basic.pcap",
    "pcaps/null_loopback.pcap",
    "pcaps/pppoe.pcap",
    "pcaps/pptp-gre.pcapng",
    "pcaps/raw_ip.pcap",
    "pcaps/various_gre.pcap",
    "pcaps/vxlan.pcap",
    "oracle/ip4_fragments.pcap",
    "oracle/v6-http.pcap",
];

/// Address fields tshark decodes; each may occur several times in a frame (tunnels, quotes).
const ADDRESS_FIELDS: [&str; 9] = [
    "ip.src",
    "ip.dst",
    "ipv6.src",
    "ipv6.dst",
    "arp.src.proto_ipv4",
    "arp.dst.proto_ipv4",
    "icmp.redir_gw",
    "icmpv6.nd.ns.target_address",
    "icmpv6.nd.na.target_address",
];

/// Checksum verdicts tshark gives with validation on (0 bad, 1 good, 2 unverified).
const CHECKSUM_FIELDS: [&str; 6] = [
    "ip.checksum.status",
    "tcp.checksum.status",
    "udp.checksum.status",
    "icmp.checksum.status",
    "icmpv6.checksum.status",
    "gre.checksum.status",
];

const KEY: [u8; 32] = *b"trawl issue 25 anonymize key 32B";

fn key_file(dir: &Path) -> PathBuf {
    let path = dir.join("key");
    let hex: String = KEY.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::write(&path, hex + "\n").unwrap();
    path
}

fn mapping(keep: Vec<Prefix>) -> Anonymizer {
    Anonymizer::new(CryptoPan::new(&Key::from_bytes(&KEY).unwrap()), keep)
}

/// tshark's fields, one row a frame (tab-separated, repeated values comma-separated).
fn tshark(file: &Path, fields: &[&str]) -> Vec<Vec<String>> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r", s(file), "-T", "fields", "-E", "occurrence=a"]);
    for pref in [
        "ip.check_checksum:TRUE",
        "tcp.check_checksum:TRUE",
        "udp.check_checksum:TRUE",
    ] {
        cmd.args(["-o", pref]);
    }
    for f in fields {
        cmd.args(["-e", f]);
    }
    let out = cmd
        .stderr(Stdio::null())
        .output()
        .expect("tshark runs (scripts/deps.sh)");
    assert!(out.status.success(), "tshark failed on {}", file.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

/// Maps each comma-separated address of a tshark field.
fn map_field(anon: &mut Anonymizer, field: &str) -> String {
    field
        .split(',')
        .map(|a| match a.parse::<IpAddr>() {
            Ok(ip) => anon.ip(ip).to_string(),
            Err(_) => a.to_string(),
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn anonymize(input: &Path, output: &Path, extra: &[&str]) -> serde_json::Value {
    let dir = output.parent().unwrap();
    let key = key_file(dir);
    let mut args = vec![
        "anonymize",
        "-r",
        s(input),
        "-w",
        s(output),
        "--key",
        s(&key),
    ];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--summary", "json"]);
    let out = ok(trawl(&args));
    let stderr = String::from_utf8_lossy(&out.stderr);
    serde_json::from_str(stderr.lines().last().unwrap()).unwrap()
}

/// The output's checksum verdicts equal the input's frame by frame (good stays good, a
/// checksum wrong in the input stays wrong), and its addresses are the input's mapped.
fn assert_checksums_kept_and_addresses_mapped(input: &Path, output: &Path, keep: Vec<Prefix>) {
    assert_rewritten_but(input, output, keep, &[]);
}

/// As above; the frames numbered in `unchanged` (from 1) must keep their addresses.
fn assert_rewritten_but(input: &Path, output: &Path, keep: Vec<Prefix>, unchanged: &[usize]) {
    let sums_in = tshark(input, &CHECKSUM_FIELDS);
    let sums_out = tshark(output, &CHECKSUM_FIELDS);
    assert_eq!(
        sums_in.len(),
        sums_out.len(),
        "{}: frame count",
        input.display()
    );
    for (i, (a, b)) in sums_in.iter().zip(&sums_out).enumerate() {
        assert_eq!(
            a,
            b,
            "{} frame {}: checksum verdicts {CHECKSUM_FIELDS:?}",
            input.display(),
            i + 1
        );
    }
    let mut anon = mapping(keep);
    let addrs_in = tshark(input, &ADDRESS_FIELDS);
    let addrs_out = tshark(output, &ADDRESS_FIELDS);
    let mut mapped = 0;
    for (i, (a, b)) in addrs_in.iter().zip(&addrs_out).enumerate() {
        let expected: Vec<String> = match unchanged.contains(&(i + 1)) {
            true => a.clone(),
            false => a.iter().map(|f| map_field(&mut anon, f)).collect(),
        };
        assert_eq!(
            &expected,
            b,
            "{} frame {}: {ADDRESS_FIELDS:?}",
            input.display(),
            i + 1
        );
        mapped += a.iter().filter(|f| !f.is_empty()).count();
    }
    assert!(mapped > 0, "{}: no address seen", input.display());
}

#[test]
fn anonymize_keeps_tshark_checksum_verdicts_and_maps_every_address() {
    let dir = tempfile::tempdir().unwrap();
    for capture in CAPTURES {
        let input = PathBuf::from(testdata(capture));
        let output = dir.path().join("out.pcapng");
        let summary = anonymize(&input, &output, &[]);
        assert_eq!(summary["malformed"], 0, "{capture}: {summary}");
        assert_checksums_kept_and_addresses_mapped(&input, &output, Vec::new());
    }
}

#[test]
fn anonymize_rewrites_quotes_tunnels_and_ndp_with_checksums_right() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("crafted.pcap");
    crafted::write(&input);
    let output = dir.path().join("out.pcap");
    let summary = anonymize(&input, &output, &[]);
    assert_eq!(summary["packets"], crafted::FRAMES as u64, "{summary}");
    assert_eq!(summary["malformed"], 1, "{summary}");
    assert_eq!(
        summary["rewritten"],
        crafted::FRAMES as u64 - 1,
        "{summary}"
    );
    // Every checksum tshark can verify is good in the input but the one made wrong on purpose.
    let sums = tshark(&input, &CHECKSUM_FIELDS);
    let bad = sums
        .iter()
        .filter(|row| row.iter().any(|f| f.split(',').any(|v| v == "0")))
        .count();
    assert_eq!(bad, 1, "{sums:?}");
    assert_rewritten_but(&input, &output, Vec::new(), &[crafted::FRAMES]);
    // The malformed frame is copied byte for byte.
    let frames = |p: &Path| tshark(p, &["frame.number", "data.data", "frame.cap_len"]);
    assert_eq!(frames(&input).last(), frames(&output).last());
}

#[test]
fn anonymize_keep_leaves_the_kept_prefix_alone() {
    let dir = tempfile::tempdir().unwrap();
    let input = PathBuf::from(testdata("pcaps/anon-v4.pcap.gz"));
    let output = dir.path().join("out.pcap");
    anonymize(
        &input,
        &output,
        &["--keep", "207.209.4.0/24", "--keep", "192.168.0.0/16"],
    );
    let keep = vec![
        "207.209.4.0/24".parse().unwrap(),
        "192.168.0.0/16".parse().unwrap(),
    ];
    assert_checksums_kept_and_addresses_mapped(&input, &output, keep);
    let kept = tshark(&output, &["ip.src"])
        .iter()
        .filter(|r| r[0].starts_with("207.209.4."))
        .count();
    assert!(kept > 0);
}

#[test]
fn anonymize_truncate_payload_cuts_after_the_transport_header() {
    let dir = tempfile::tempdir().unwrap();
    let input = PathBuf::from(testdata("oracle/1kxun.pcap.gz"));
    let output = dir.path().join("out.pcap");
    anonymize(&input, &output, &["--truncate-payload"]);
    let fields = [
        "frame.len",
        "frame.cap_len",
        "tcp.hdr_len",
        "ip.hdr_len",
        "tcp.len",
    ];
    let rows_in = tshark(&input, &fields);
    let rows_out = tshark(&output, &fields);
    let mut cut = 0;
    for (a, b) in rows_in.iter().zip(&rows_out) {
        assert_eq!(a[0], b[0], "the wire length is kept");
        if !b[2].is_empty() {
            let headers = 14 + b[3].parse::<usize>().unwrap() + b[2].parse::<usize>().unwrap();
            assert_eq!(
                b[1].parse::<usize>().unwrap(),
                headers.min(a[1].parse().unwrap()),
                "{a:?} {b:?}"
            );
            cut += usize::from(a[4] != "0");
        }
    }
    assert!(cut > 100, "segments with payload were cut: {cut}");
}

/// `trawl flows` of the anonymized capture equals `trawl flows` of the original with every
/// address mapped (records compared as sorted sets: output order follows the flow table).
#[test]
fn anonymize_flows_of_output_equal_flows_of_input_under_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    for capture in [
        "oracle/many-protocols.pcap.gz",
        "pcaps/vxlan.pcap",
        "pcaps/4in4tunnel.pcap",
    ] {
        let input = PathBuf::from(testdata(capture));
        let output = dir.path().join("out.pcap");
        anonymize(&input, &output, &[]);
        for tunnel in ["outer", "inner"] {
            let flows = |p: &Path| -> Vec<serde_json::Value> {
                let out = ok(trawl(&[
                    "flows",
                    "-r",
                    s(p),
                    "--tunnel",
                    tunnel,
                    "--summary",
                    "none",
                ]));
                String::from_utf8(out.stdout)
                    .unwrap()
                    .lines()
                    .map(|l| serde_json::from_str(l).unwrap())
                    .collect()
            };
            let mut anon = mapping(Vec::new());
            let mut expected: Vec<String> = flows(&input)
                .into_iter()
                .map(|mut r| {
                    // The outer tunnel's addresses (`--tunnel inner`) are rewritten too.
                    for f in ["src_ip", "dst_ip", "tunnel_src", "tunnel_dst"] {
                        let Some(ip) = r[f].as_str().map(|s| s.parse::<IpAddr>().unwrap()) else {
                            continue;
                        };
                        r[f] = anon.ip(ip).to_string().into();
                    }
                    community_id_of_mapped(&mut r);
                    r.to_string()
                })
                .collect();
            let mut got: Vec<String> = flows(&output).iter().map(|r| r.to_string()).collect();
            expected.sort();
            got.sort();
            assert!(!got.is_empty());
            assert_eq!(got, expected, "{capture} --tunnel {tunnel}");
        }
    }
}

/// Frames built here, checksums computed here: ICMP and ICMPv6 errors quoting UDP and TCP,
/// an ICMP redirect, neighbour solicitation, GRE with a checksum, VXLAN with outer and inner
/// UDP checksums, a TCP segment whose checksum is wrong, and an IPv4 header cut short.
mod crafted {
    use std::path::Path;

    use trawl_capture::{LinkType, PcapWriter};

    pub const FRAMES: usize = 8;

    const A4: [u8; 4] = [192, 0, 2, 1];
    const B4: [u8; 4] = [198, 51, 100, 2];
    const GW4: [u8; 4] = [192, 0, 2, 254];
    const A6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const B6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    fn checksum(data: &[u8]) -> u16 {
        let mut sum: u32 = data
            .chunks(2)
            .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    /// Fills the checksum at `field` of `seg`, over `pseudo` then `seg`.
    fn with_checksum(pseudo: &[u8], mut seg: Vec<u8>, field: usize) -> Vec<u8> {
        let c = checksum(&[pseudo, &seg].concat());
        seg[field..field + 2].copy_from_slice(&c.to_be_bytes());
        seg
    }

    fn pseudo4(src: [u8; 4], dst: [u8; 4], proto: u8, len: usize) -> Vec<u8> {
        [&src[..], &dst, &[0, proto], &(len as u16).to_be_bytes()].concat()
    }

    fn pseudo6(src: [u8; 16], dst: [u8; 16], next: u8, len: usize) -> Vec<u8> {
        [
            &src[..],
            &dst,
            &(len as u32).to_be_bytes(),
            &[0, 0, 0, next],
        ]
        .concat()
    }

    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
        let len = (20 + payload.len()) as u16;
        let mut h = [
            &[0x45, 0][..],
            &len.to_be_bytes(),
            &[0, 1, 0, 0, 64, proto, 0, 0],
            &src,
            &dst,
        ]
        .concat();
        let c = checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        [h, payload.to_vec()].concat()
    }

    fn ipv6(next: u8, src: [u8; 16], dst: [u8; 16], payload: &[u8]) -> Vec<u8> {
        let len = payload.len() as u16;
        [
            &[0x60, 0, 0, 0][..],
            &len.to_be_bytes(),
            &[next, 64],
            &src,
            &dst,
            payload,
        ]
        .concat()
    }

    fn udp(pseudo: impl Fn(usize) -> Vec<u8>, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let len = 8 + payload.len();
        let seg = [
            &sport.to_be_bytes()[..],
            &dport.to_be_bytes(),
            &(len as u16).to_be_bytes(),
            &[0, 0],
            payload,
        ]
        .concat();
        with_checksum(&pseudo(len), seg, 6)
    }

    fn tcp(pseudo: impl Fn(usize) -> Vec<u8>, payload: &[u8]) -> Vec<u8> {
        let seg = [
            &[
                0x9c, 0x40, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0,
            ][..],
            payload,
        ]
        .concat();
        with_checksum(&pseudo(seg.len()), seg, 16)
    }

    fn icmp(pseudo: &[u8], ty: u8, code: u8, rest: [u8; 4], body: &[u8]) -> Vec<u8> {
        let msg = [&[ty, code, 0, 0][..], &rest, body].concat();
        with_checksum(pseudo, msg, 2)
    }

    fn eth(ty: u16, payload: &[u8]) -> Vec<u8> {
        [
            &[2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2][..],
            &ty.to_be_bytes(),
            payload,
        ]
        .concat()
    }

    fn frames() -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        // 1. ICMP port unreachable quoting the UDP datagram (header + 8 bytes, as routers do).
        let dns = ipv4(
            17,
            B4,
            A4,
            &udp(|l| pseudo4(B4, A4, 17, l), 5353, 53, b"query payload"),
        );
        let icmp1 = icmp(&[], 3, 3, [0; 4], &dns[..28]);
        frames.push(eth(0x0800, &ipv4(1, A4, B4, &icmp1)));
        // 2. ICMPv6 time exceeded quoting a whole TCP segment.
        let seg6 = ipv6(
            6,
            B6,
            A6,
            &tcp(|l| pseudo6(B6, A6, 6, l), b"GET / HTTP/1.1\r\n"),
        );
        let icmp2 = icmp(&pseudo6(A6, B6, 58, 8 + seg6.len()), 3, 0, [0; 4], &seg6);
        frames.push(eth(0x86dd, &ipv6(58, A6, B6, &icmp2)));
        // 3. ICMP redirect to a gateway, quoting a TCP header.
        let seg4 = ipv4(6, A4, B4, &tcp(|l| pseudo4(A4, B4, 6, l), b""));
        let icmp3 = icmp(&[], 5, 1, GW4, &seg4[..28]);
        frames.push(eth(0x0800, &ipv4(1, GW4, A4, &icmp3)));
        // 4. Neighbour solicitation for B6.
        let ns = icmp(&pseudo6(A6, B6, 58, 24), 135, 0, [0; 4], &B6);
        frames.push(eth(0x86dd, &ipv6(58, A6, B6, &ns)));
        // 5. GRE with a checksum around IPv4/TCP.
        let inner = ipv4(6, B4, A4, &tcp(|l| pseudo4(B4, A4, 6, l), b"tunnelled"));
        let gre = with_checksum(
            &[],
            [&[0x80, 0, 0x08, 0x00, 0, 0, 0, 0][..], &inner].concat(),
            4,
        );
        frames.push(eth(0x0800, &ipv4(47, GW4, B4, &gre)));
        // 6. VXLAN with outer and inner UDP checksums.
        let inner = eth(
            0x0800,
            &ipv4(
                17,
                A4,
                B4,
                &udp(|l| pseudo4(A4, B4, 17, l), 1000, 2000, b"inner"),
            ),
        );
        let vx = [&[0x08, 0, 0, 0, 0, 0, 42, 0][..], &inner].concat();
        frames.push(eth(
            0x0800,
            &ipv4(
                17,
                GW4,
                B4,
                &udp(|l| pseudo4(GW4, B4, 17, l), 40000, 4789, &vx),
            ),
        ));
        // 7. A TCP segment whose checksum is wrong in the input (and must stay wrong).
        let mut bad = tcp(|l| pseudo4(A4, B4, 6, l), b"data");
        bad[17] ^= 0x5a;
        frames.push(eth(0x0800, &ipv4(6, A4, B4, &bad)));
        // 8. An IPv4 header cut after 16 bytes: copied unchanged.
        frames.push(eth(0x0800, &ipv4(6, A4, B4, &[])[..16]));
        assert_eq!(frames.len(), FRAMES);
        frames
    }

    pub fn write(path: &Path) {
        let file = std::fs::File::create(path).unwrap();
        let mut w = PcapWriter::new(file, LinkType::ETHERNET, 65535).unwrap();
        for (i, f) in frames().iter().enumerate() {
            w.write(
                1_700_000_000_000_000_000 + i as u64 * 1_000_000,
                f.len() as u32,
                f,
            )
            .unwrap();
        }
        w.finish().unwrap();
    }
}

/// Recomputes a mapped record's `community_id` (when it has one) from its mapped key. An
/// anonymized record's Community ID hashes the anonymized addresses (the original's would let
/// anyone holding the plain records undo the mapping by joining on it), so the expected
/// record's ID is that of the mapped key: trawl's Community ID is checked against tshark's
/// in trawl-testkit's community-id goldens.
fn community_id_of_mapped(r: &mut serde_json::Value) {
    if r.get("community_id").is_none() {
        return;
    }
    let ip = |f: &str| -> IpAddr { r[f].as_str().unwrap().parse().unwrap() };
    let port = |f: &str| r[f].as_u64().unwrap_or(0) as u16;
    let proto = match &r["proto"] {
        serde_json::Value::Number(n) => n.as_u64().unwrap() as u8,
        v => {
            let name = v.as_str().unwrap();
            (0..=255u8)
                .find(|p| trawl_flow::ProtoName(*p).name() == Some(name))
                .unwrap_or_else(|| name.parse().unwrap())
        }
    };
    let tuple = trawl_flow::community_id::FlowTuple {
        proto,
        src_ip: ip("src_ip"),
        dst_ip: ip("dst_ip"),
        src_port: port("src_port"),
        dst_port: port("dst_port"),
    };
    let digest = trawl_flow::CommunityId::default().digest_unchecked(&tuple);
    r["community_id"] = trawl_flow::CommunityIdText::from_digest(&digest)
        .as_str()
        .into();
}

/// Records (JSON lines) of a command's standard output or a file, with `fields` mapped (when
/// `anon`), each as its JSON text, sorted.
fn records(text: &str, fields: &[&str], mut anon: Option<&mut Anonymizer>) -> Vec<String> {
    let mut rows: Vec<String> = text
        .lines()
        .map(|l| {
            let mut r: serde_json::Value = serde_json::from_str(l).unwrap();
            if let Some(anon) = anon.as_deref_mut() {
                for f in fields {
                    if let Some(ip) = r[f].as_str().and_then(|t| t.parse::<IpAddr>().ok()) {
                        r[f] = anon.ip(ip).to_string().into();
                    }
                }
                community_id_of_mapped(&mut r);
            }
            r.to_string()
        })
        .collect();
    rows.sort();
    rows
}

/// `trawl flows --anonymize` (`--keep`) writes the records `trawl flows` writes, with the
/// addresses mapped; exporters get the same records (the meter anonymizes them once).
#[test]
fn flows_with_anonymize_equal_flows_without_under_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    let capture = testdata("oracle/many-protocols.pcap.gz");
    let plain = ok(trawl(&["flows", "-r", &capture, "--summary", "none"]));
    let plain = String::from_utf8(plain.stdout).unwrap();
    for keep in [None, Some("10.0.0.0/8")] {
        let ipfix = dir.path().join("anon.ipfix");
        let json = dir.path().join("anon.json");
        let mut args = vec![
            "flows",
            "-r",
            &capture,
            "--summary",
            "none",
            "--anonymize",
            s(&key),
        ];
        let export = format!("ipfix:{}", ipfix.display());
        args.extend(["--export", &export, "-o", s(&json)]);
        if let Some(k) = keep {
            args.extend(["--keep", k]);
        }
        ok(trawl(&args));
        let got = records(&std::fs::read_to_string(&json).unwrap(), &[], None);
        assert!(got.len() > 100);
        let prefixes: Vec<Prefix> = keep.iter().map(|k| k.parse().unwrap()).collect();
        let mut anon = mapping(prefixes);
        let expected = records(&plain, &["src_ip", "dst_ip"], Some(&mut anon));
        assert_eq!(got.len(), expected.len());
        let differ = got.iter().zip(&expected).find(|(g, e)| g != e);
        assert!(differ.is_none(), "--keep {keep:?}: {differ:?}");
        assert_ne!(got, records(&plain, &[], None));
        if keep.is_some() {
            assert!(
                got.iter().any(|r| r.contains("\"src_ip\":\"10.0.0.1\"")),
                "kept"
            );
        }
        // The IPFIX export carries the anonymized records too: collected back, they match.
        let collected = ok(trawl(&["collect", "-r", s(&ipfix), "--summary", "none"]));
        let collected = records(&String::from_utf8(collected.stdout).unwrap(), &[], None);
        let addresses = |rows: &[String]| -> Vec<(String, String)> {
            let mut v: Vec<(String, String)> = rows
                .iter()
                .map(|r| {
                    let r: serde_json::Value = serde_json::from_str(r).unwrap();
                    (r["src_ip"].to_string(), r["dst_ip"].to_string())
                })
                .collect();
            v.sort();
            v
        };
        assert_eq!(addresses(&collected), addresses(&got));
    }
}

/// `trawl collect --anonymize` and `trawl ingest --anonymize` / `trawl query --anonymize`:
/// the same records and rows as without, mapped; the database written by an anonymizing
/// ingest holds no original address.
#[test]
fn collect_ingest_and_query_with_anonymize_equal_without_under_the_mapping() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    let capture = testdata("oracle/many-protocols.pcap.gz");
    let ipfix = dir.path().join("plain.ipfix");
    let export = format!("ipfix:{}", ipfix.display());
    ok(trawl(&[
        "flows",
        "-r",
        &capture,
        "--summary",
        "none",
        "-o",
        "/dev/null",
        "--export",
        &export,
    ]));
    let collect = |extra: &[&str]| {
        let mut args = vec!["collect", "-r", s(&ipfix), "--summary", "none"];
        args.extend_from_slice(extra);
        String::from_utf8(ok(trawl(&args)).stdout).unwrap()
    };
    let mut anon = mapping(Vec::new());
    assert_eq!(
        records(&collect(&["--anonymize", s(&key)]), &[], None),
        records(&collect(&[]), &["src_ip", "dst_ip"], Some(&mut anon))
    );

    let plain_db = dir.path().join("plain_db");
    let anon_db = dir.path().join("anon_db");
    ok(trawl(&[
        "ingest",
        "-r",
        &capture,
        "-d",
        s(&plain_db),
        "--summary",
        "none",
    ]));
    ok(trawl(&[
        "ingest",
        "-r",
        &capture,
        "-d",
        s(&anon_db),
        "--summary",
        "none",
        "--anonymize",
        s(&key),
    ]));
    let query = |db: &Path, extra: &[&str]| -> Vec<String> {
        let mut args = vec![
            "query",
            "-d",
            s(db),
            "talk_conv",
            "--format",
            "json",
            "--limit",
            "0",
        ];
        args.extend_from_slice(extra);
        let out = String::from_utf8(ok(trawl(&args)).stdout).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let mut rows: Vec<String> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.to_string())
            .collect();
        rows.sort();
        rows
    };
    let mapped = |rows: Vec<String>| -> Vec<String> {
        let mut anon = mapping(Vec::new());
        records(&rows.join("\n"), &["src_ip", "dst_ip"], Some(&mut anon))
    };
    let plain = query(&plain_db, &[]);
    assert!(plain.len() > 10);
    let stored = query(&anon_db, &[]);
    assert_eq!(
        stored,
        mapped(plain.clone()),
        "database ingested with --anonymize"
    );
    assert_eq!(
        query(&plain_db, &["--anonymize", s(&key)]),
        stored,
        "query --anonymize"
    );
    assert!(!stored.iter().any(|r| r.contains("\"10.0.0.1\"")));
}

/// `trawl run --anonymize` puts the key on every worker's meter, so the monitor's every
/// output (flow file, database, exporters) gets anonymized records.
#[test]
fn run_anonymize_sets_the_key_on_every_meter() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    let out = ok(trawl(&[
        "run",
        "-i",
        "lo",
        "--workers",
        "2",
        "--flows",
        "/dev/null",
        "--no-ring",
        "--anonymize",
        s(&key),
        "--keep",
        "10.0.0.0/8",
        "--print-composition",
    ]));
    let text = String::from_utf8(out.stdout).unwrap();
    let doc: toml::Value = toml::from_str(&text).unwrap();
    let meters: Vec<&toml::Value> = doc["block"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"].as_str() == Some("flow_meter"))
        .collect();
    assert_eq!(meters.len(), 2, "{text}");
    for m in meters {
        assert_eq!(m["anonymize"].as_str(), Some(s(&key)), "{text}");
        assert_eq!(
            m["keep"].as_array().unwrap()[0].as_str(),
            Some("10.0.0.0/8")
        );
    }
}

/// `trawl anonymize` is a composition (`pcap_source` → `packet_anonymizer` → `pcap_writer`,
/// pcapng kept for pcapng input), and an input damaged part way is reported naming the file,
/// exits 1, and the packets read before the damage are all written, anonymized.
#[test]
fn anonymize_is_a_composition_and_keeps_what_a_damaged_input_held() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    let pcapng = testdata("pcaps/many_interfaces-1.pcapng");
    let out = ok(trawl(&[
        "anonymize",
        "-r",
        &pcapng,
        "-w",
        "x.pcapng",
        "--key",
        s(&key),
        "--print-composition",
    ]));
    let plan = String::from_utf8(out.stdout).unwrap();
    for line in [
        "type = \"pcap_source\"",
        "type = \"packet_anonymizer\"",
        "type = \"pcap_writer\"",
        "format = \"pcapng\"",
    ] {
        assert!(plan.contains(line), "{line} missing from:\n{plan}");
    }

    // A pcap cut in the middle of a packet: tshark reads the complete ones before the cut.
    let whole = std::fs::read(testdata("oracle/v6-http.pcap")).unwrap();
    let damaged = dir.path().join("damaged.pcap");
    std::fs::write(&damaged, &whole[..whole.len() * 2 / 3]).unwrap();
    // tshark reads what precedes the cut and then fails ("cut short"): its status is not
    // the point here, its rows are.
    let rows = Command::new("tshark")
        .args([
            "-n",
            "-r",
            s(&damaged),
            "-T",
            "fields",
            "-E",
            "occurrence=a",
        ])
        .args(["-e", "ipv6.src", "-e", "ipv6.dst"])
        .stderr(Stdio::null())
        .output()
        .expect("tshark runs (scripts/deps.sh)");
    let readable: Vec<Vec<String>> = String::from_utf8(rows.stdout)
        .unwrap()
        .lines()
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect();
    assert!(
        readable.len() > 3,
        "{} packets before the cut",
        readable.len()
    );
    let output = dir.path().join("out.pcap");
    let run = trawl(&[
        "anonymize",
        "-r",
        s(&damaged),
        "-w",
        s(&output),
        "--key",
        s(&key),
        "--summary",
        "json",
    ]);
    assert_eq!(run.status.code(), Some(1), "{run:?}");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("damaged.pcap"), "{stderr}");
    let summary: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(summary["packets"], readable.len() as u64, "{summary}");
    let mut anon = mapping(Vec::new());
    let mapped: Vec<Vec<String>> = readable
        .iter()
        .map(|row| row.iter().map(|f| map_field(&mut anon, f)).collect())
        .collect();
    assert_eq!(tshark(&output, &["ipv6.src", "ipv6.dst"]), mapped);
}

/// `trawl run --db --anonymize` stores anonymized records, so it runs no detector whose
/// alarms would name the captured addresses beside them (synflood's victim, heavy hitters'
/// hosts), as `trawl ingest --anonymize` does; without --anonymize both run.
#[test]
fn run_with_anonymize_stores_no_alarm_naming_captured_addresses() {
    let dir = tempfile::tempdir().unwrap();
    let key = key_file(dir.path());
    let db = dir.path().join("db");
    let composition = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "-i",
            "lo",
            "--no-ring",
            "--db",
            db.to_str().unwrap(),
            "--print-composition",
        ];
        args.extend_from_slice(extra);
        let out = trawl(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let detectors = |doc: &str| {
        ["\"synflood\"", "\"heavy_hitters\""]
            .iter()
            .filter(|t| doc.contains(&format!("type = {t}")))
            .count()
    };
    assert_eq!(detectors(&composition(&[])), 2);
    let anonymized = composition(&["--anonymize", key.to_str().unwrap()]);
    assert_eq!(detectors(&anonymized), 0, "{anonymized}");
    assert!(anonymized.contains("type = \"flow_store\""), "{anonymized}");
}
