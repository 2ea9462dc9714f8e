//! Differential test against libpcap on the committed captures: for every expression and
//! every capture, the packets `Filter::matches` accepts must be exactly those libpcap's own
//! filter accepts when reading the file (which also checks that `len` is the wire length).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use trawl_bpf::{Error, Filter};

use crate::oracle;

const EXPRESSIONS: &[&str] = &[
    "",
    "tcp",
    "udp port 53",
    "host 192.168.1.1",
    "net 10.0.0.0/8",
    "tcp[tcpflags] & tcp-syn != 0",
    "tcp[13] = 0x12",
    "ip6",
    "ip6 and tcp port 443",
    "ip6 protochain 17",
    "ip6[6] = 44",
    "vlan",
    "vlan and tcp",
    "vlan 1",
    "vlan and vlan",
    "icmp",
    "icmp6",
    "ip[6:2] & 0x1fff != 0",
    "ip and ip[0] & 0xf > 5",
    "greater 1000",
    "less 100",
    "len > 200 and udp",
    "ether broadcast",
    "ether multicast",
    "ip multicast",
    "ip broadcast",
    "port 443 or port 80",
    "not arp",
    "arp",
    "ip proto 47",
    "vlan and ip proto 47",
    "mpls",
    "mpls and icmp",
    "pppoes",
    "pppoes and tcp",
    "pppoed",
    "udp[8:2] = 0x4500",
    "ip[2:2] > 1500",
    "src portrange 1024-65535 and tcp",
    "stp",
];

fn pcaps_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pcaps")
}

/// Files of testdata/pcaps the differential test runs on (others' captures sit there too; the
/// test takes every capture libpcap can open).
fn captures() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(pcaps_dir())
        .expect("testdata/pcaps exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("pcap" | "pcapng" | "cap" | "dmp")
            )
        })
        .collect();
    files.sort();
    files
}

/// Outcome of comparing one expression on one capture.
#[derive(Default)]
pub struct Tally {
    pub packets: u64,
    pub accepted: u64,
    pub mismatches: Vec<String>,
}

/// Compares trawl's verdicts with libpcap's for `expr` over `cap`, read from `path`. Compile
/// errors must agree too, with the same message.
pub fn compare(path: &Path, cap: &oracle::Capture, expr: &str, tally: &mut Tally) {
    let ours = Filter::compile_for(expr, cap.link_type, 0, cap.byte_order);
    let theirs = oracle::accepted(path, cap, expr);
    match (ours, theirs) {
        (Ok(filter), Ok(verdicts)) => {
            for (i, (p, &expected)) in cap.packets.iter().zip(&verdicts).enumerate() {
                let got = filter.matches(&p.data, p.len);
                tally.packets += 1;
                tally.accepted += u64::from(got);
                if got != expected {
                    tally.mismatches.push(format!(
                        "{}: packet {} (caplen {}, len {}): {expr:?} trawl {got}, libpcap {expected}",
                        path.display(),
                        i + 1,
                        p.caplen,
                        p.len
                    ));
                }
            }
        }
        (Err(Error::Compile { message, .. }), Err(theirs)) => {
            if message != theirs {
                tally.mismatches.push(format!(
                    "{}: {expr:?}: trawl error {message:?}, libpcap error {theirs:?}",
                    path.display()
                ));
            }
        }
        (ours, theirs) => tally.mismatches.push(format!(
            "{}: {expr:?} (link type {}): trawl {:?}, libpcap {:?}",
            path.display(),
            cap.link_type.0,
            ours.map(|f| f.insns().len()),
            theirs.map(|v| v.len())
        )),
    }
}

#[test]
fn committed_captures_agree_with_libpcap() {
    let files = captures();
    assert!(
        files.len() >= 15,
        "expected the committed captures, found {files:?}"
    );
    let mut per_expr: BTreeMap<&str, Tally> = BTreeMap::new();
    let mut link_types = std::collections::BTreeSet::new();
    for path in &files {
        let Some(cap) = oracle::read(path) else {
            continue;
        };
        link_types.insert(cap.link_type.0);
        for expr in EXPRESSIONS {
            compare(path, &cap, expr, per_expr.entry(expr).or_default());
        }
    }
    let mut mismatches = Vec::new();
    for (expr, t) in &per_expr {
        println!("{expr:40} {:6} of {:6} accepted", t.accepted, t.packets);
        mismatches.extend(t.mismatches.iter().cloned());
    }
    assert!(
        mismatches.is_empty(),
        "{} disagreements with libpcap:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    // The captures must cover what the expressions are about, or this test proves little.
    for lt in [1, 0, 101, 113, 228, 229, 276] {
        assert!(
            link_types.contains(&lt),
            "no capture of link type {lt}: {link_types:?}"
        );
    }
    for expr in [
        "tcp",
        "udp port 53",
        "tcp[tcpflags] & tcp-syn != 0",
        "ip6",
        "ip6 protochain 17",
        "vlan and tcp",
        "vlan and vlan",
        "icmp",
        "ip[6:2] & 0x1fff != 0",
        "greater 1000",
        "ether broadcast",
        "port 443 or port 80",
        "arp",
        "ip proto 47",
        "vlan and ip proto 47",
        "mpls and icmp",
        "pppoes and tcp",
        "pppoed",
    ] {
        let t = &per_expr[expr];
        assert!(
            t.accepted > 0 && t.accepted < t.packets,
            "{expr:?} accepted {} of {}: the captures don't exercise it",
            t.accepted,
            t.packets
        );
    }
}

#[test]
fn hand_checked_verdicts() {
    // Independent of libpcap's verdicts: a few packet counts checked by hand with tshark.
    let count = |file: &str, expr: &str| {
        let path = pcaps_dir().join(file);
        let cap = oracle::read(&path).expect("readable");
        let f = Filter::compile_for(expr, cap.link_type, 0, cap.byte_order).expect("compiles");
        cap.packets
            .iter()
            .filter(|p| f.matches(&p.data, p.len))
            .count()
    };
    // VlanPackets.pcap: 24 of 26 frames are 802.1Q tagged; the 20 ICMP ones carry two tags,
    // so only `vlan and vlan and icmp` reaches them (each `vlan` moves the offsets by 4).
    assert_eq!(count("VlanPackets.pcap", ""), 26);
    assert_eq!(count("VlanPackets.pcap", "vlan"), 24);
    assert_eq!(count("VlanPackets.pcap", "vlan and vlan and icmp"), 20);
    assert_eq!(count("VlanPackets.pcap", "vlan and icmp"), 0);
    assert_eq!(count("VlanPackets.pcap", "icmp"), 0);
    // aerospike.pcap: 21 TCP packets under one tag.
    assert_eq!(count("aerospike.pcap", "vlan and tcp"), 21);
    // GrePackets.cap: 17 PPTP GRE packets.
    assert_eq!(count("GrePackets.cap", "ip proto 47"), 17);
    // various_gre.pcap: 30 GRE packets, all inside a VLAN.
    assert_eq!(count("various_gre.pcap", "vlan and ip proto 47"), 30);
    assert_eq!(count("various_gre.pcap", "ip proto 47"), 0);
    // pppoe.pcap: 10 IPv4/TCP packets in PPPoE sessions.
    assert_eq!(count("pppoe.pcap", "pppoes and tcp"), 10);
    assert_eq!(count("pppoe.pcap", "tcp"), 0); // tcp alone does not look inside PPPoE
                                               // mpls-basic.pcap: 17 MPLS packets.
    assert_eq!(count("mpls-basic.pcap", "mpls"), 17);
}
