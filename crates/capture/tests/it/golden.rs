//! Records compared with tshark's view of the same files (testdata/golden/capture/*.tsv,
//! made by testdata/golden/capture/regen.sh).
use std::collections::BTreeMap;
use std::fs;

use crate::{pcap, read, repo_root, Rec};

/// Every capture with a golden file.
const CASES: &[&str] = &[
    "android.pcap",
    "nanosecs_big_endian.pcap",
    "microsecs_big_endian.pcap",
    "tcp-handshake-nano.pcap",
    "null_loopback.pcap",
    "raw_ip.pcap",
    "babel.pcap",
    "Sll2Packet.pcap",
    "LINKTYPE_IPV4.pcap",
    "anon-v4.pcap.gz",
    "many_interfaces-1.pcapng",
    "pcapng-example.pcapng.zst",
    "gopacket-le-test001.pcapng",
    "gopacket-le-test006.pcapng",
    "gopacket-le-test010.pcapng",
    "gopacket-le-test016.pcapng",
    "gopacket-le-test100.pcapng",
    "gopacket-le-test101.pcapng",
    "gopacket-le-test202.pcapng",
    "gopacket-le-test902.pcapng",
    "gopacket-be-test006.pcapng",
    "gopacket-be-test202.pcapng",
];

/// Parses tshark's `frame.time_epoch` ("1439753725.701607000") into ns without going through
/// a float, which could not hold today's epoch at ns precision. Empty (a packet without a
/// timestamp, e.g. a pcapng Simple Packet Block) is 0. Times past `u64::MAX` ns (year 2554;
/// garbage timestamps in some files) saturate, as the reader's do.
pub fn parse_epoch_ns(s: &str) -> u64 {
    if s.is_empty() {
        return 0;
    }
    let (sec, frac) = s.split_once('.').unwrap_or((s, ""));
    assert!(frac.len() <= 9, "more than ns precision: {s}");
    let frac_ns: u128 = if frac.is_empty() {
        0
    } else {
        frac.parse::<u128>().unwrap() * 10u128.pow(9 - frac.len() as u32)
    };
    let ns = sec.parse::<u128>().unwrap() * 1_000_000_000 + frac_ns;
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// A golden record: ts_ns, caplen, len, (section, interface id within the section).
type Golden = (u64, u32, u32, (u32, u16));

/// The golden records, and how many lines were tshark frames that are not packets (pcapng
/// custom and other blocks tshark shows as frames without an interface).
pub fn parse_golden(text: &str, pcapng: bool) -> (Vec<Golden>, usize) {
    let mut recs = Vec::new();
    let mut non_packets = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split('\t').collect();
        assert_eq!(cols.len(), 5, "bad golden line {line:?}");
        if pcapng && cols[3].is_empty() {
            non_packets += 1;
            continue;
        }
        let num = |c: &str| if c.is_empty() { 0 } else { c.parse().unwrap() };
        let iface = (num(cols[4]) as u32, num(cols[3]));
        recs.push((
            parse_epoch_ns(cols[0]),
            cols[1].parse().unwrap(),
            cols[2].parse().unwrap(),
            iface,
        ));
    }
    (recs, non_packets)
}

#[test]
fn parse_epoch_exactly() {
    assert_eq!(
        parse_epoch_ns("1766361926.167647291"),
        1_766_361_926_167_647_291
    );
    assert_eq!(parse_epoch_ns("1.5"), 1_500_000_000);
    assert_eq!(parse_epoch_ns("7"), 7_000_000_000);
    assert_eq!(parse_epoch_ns(""), 0);
    assert_eq!(parse_epoch_ns("18446744073204.126329000"), u64::MAX);
}

#[test]
fn records_match_tshark() {
    let mut checked = 0;
    for name in CASES {
        let golden_path = repo_root().join(format!("testdata/golden/capture/{name}.tsv"));
        let text = fs::read_to_string(&golden_path)
            .unwrap_or_else(|e| panic!("{}: {e}", golden_path.display()));
        let out = read(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(out.error.is_none(), "{name}: {:?}", out.error);
        let (want, non_packets) = parse_golden(&text, name.contains(".pcapng"));
        assert_eq!(out.records.len(), want.len(), "{name}: record count");
        // tshark numbers interfaces per section, the reader across the file: the mapping must
        // be a function, one-to-one, and keep (section, id) order.
        let mut iface_map = BTreeMap::new();
        for (i, (r, w)) in out.records.iter().zip(&want).enumerate() {
            let r: &Rec = r;
            assert_eq!(
                (r.ts_ns, r.caplen, r.wire_len),
                (w.0, w.1, w.2),
                "{name}: record {} (ts_ns, caplen, len)",
                i + 1
            );
            let global = *iface_map.entry(w.3).or_insert(r.iface);
            assert_eq!(
                global,
                r.iface,
                "{name}: record {}: interface {:?}",
                i + 1,
                w.3
            );
        }
        let globals: Vec<u16> = iface_map.values().copied().collect();
        assert!(
            globals.windows(2).all(|p| p[0] < p[1]),
            "{name}: interface mapping {iface_map:?}"
        );
        assert!(
            out.stats.skipped_blocks >= non_packets as u64,
            "{name}: tshark shows {non_packets} non-packet blocks, we skipped {}",
            out.stats.skipped_blocks
        );
        let caplen: u64 = want.iter().map(|w| u64::from(w.1)).sum();
        assert_eq!(out.stats.captured_bytes, caplen, "{name}");
        checked += 1;
    }
    assert_eq!(checked, CASES.len());
    assert!(pcap(CASES[0]).exists());
}

/// Every table in `testdata/golden/capture/` is one of [`CASES`]: a table no test reads checks
/// nothing. (The tables of the other `testdata/golden/` directories are checked the same way
/// in the testkit's `goldens` test.)
#[test]
fn every_capture_golden_is_compared() {
    let dir = repo_root().join("testdata/golden/capture");
    let mut orphans = Vec::new();
    for e in fs::read_dir(&dir).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "regen.sh" {
            continue;
        }
        let capture = name.strip_suffix(".tsv").unwrap_or(&name);
        if !CASES.contains(&capture) {
            orphans.push(name);
        }
    }
    assert!(
        orphans.is_empty(),
        "{}: no test compares {orphans:?}",
        dir.display()
    );
}
