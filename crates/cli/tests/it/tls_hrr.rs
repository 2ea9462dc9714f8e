//! TLS 1.3 HelloRetryRequests over TCP and QUIC (issue 23): the line of a connection whose server asked
//! the client to retry says so (`hrr`, `hrr_group`) and has the client's second ClientHello
//! (`retry_key_share`, `retry_ja4`) beside its first (`key_share`, `ja4`). Against tshark's
//! hellos of the streams with a HelloRetryRequest (goldens `*.hrr.tsv`, scripts/app-oracle.sh):
//! the committed `testdata/app/tls/hrr/ndpi--steam.pcapng` and the corpus's `reddit.pcap` and
//! `dnscrypt-v2-doh.pcap` (TCP), the committed `testdata/app/quic/hrr/ndpi--quic-29.pcap` and
//! the corpus's `quic-24.pcap` (QUIC: the second ClientHello in the client's next Initials). No other line of these captures has the
//! fields.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::testdata;

/// The RFC 8446 random of a HelloRetryRequest, as tshark prints it.
const HRR_RANDOM: &str = "cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c";

/// A hello frame of the golden.
struct Frame {
    port: u64,
    kind: u8,
    random: String,
    groups: Vec<u64>,
    selected: Option<u64>,
    ciphers: Vec<u64>,
    extensions: Vec<u64>,
}

fn numbers(col: &str) -> Vec<u64> {
    col.split(',')
        .filter(|s| !s.is_empty())
        .map(|s| match s.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).unwrap(),
            None => s.parse().unwrap(),
        })
        .collect()
}

/// The golden's frames by TCP stream, in order.
fn streams(golden: &Path) -> BTreeMap<u64, Vec<Frame>> {
    let text = std::fs::read_to_string(golden).unwrap();
    let mut by_stream: BTreeMap<u64, Vec<Frame>> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let c: Vec<&str> = line.split('\t').collect();
        let col = |i: usize| c.get(i).copied().unwrap_or("");
        by_stream
            .entry(col(0).parse().unwrap())
            .or_default()
            .push(Frame {
                port: col(1).parse().unwrap(),
                kind: col(2).parse().unwrap(),
                random: col(3).to_string(),
                groups: numbers(col(4)),
                selected: numbers(col(5)).first().copied(),
                ciphers: numbers(col(6)),
                extensions: numbers(col(7)),
            });
    }
    by_stream
}

fn grease(v: u64) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

/// JA4's cipher and extension counts (its characters 4-7) of a ClientHello tshark shows.
fn ja4_counts(f: &Frame) -> String {
    let n = |v: &[u64]| v.iter().filter(|&&x| !grease(x)).count().min(99);
    format!("{:02}{:02}", n(&f.ciphers), n(&f.extensions))
}

fn as_u64s(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not a list: {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

/// Compares one capture (its lines of IP protocol `proto`); returns the lines with a
/// HelloRetryRequest.
fn check(capture: &Path, golden: &Path, out: &Path, proto: u64) -> usize {
    let name = capture.file_name().unwrap().to_string_lossy().to_string();
    let (lines, _) = super::tls_log::logs(capture, out);
    let mut checked = 0;
    for (stream, frames) in streams(golden) {
        let hrr_at = frames
            .iter()
            .position(|f| f.kind == 2 && f.random == HRR_RANDOM)
            .unwrap_or_else(|| panic!("{name}: stream {stream} has no HelloRetryRequest"));
        let (first, hrr) = (&frames[hrr_at - 1], &frames[hrr_at]);
        let second = frames[hrr_at..]
            .iter()
            .find(|f| f.kind == 1)
            .unwrap_or_else(|| panic!("{name}: stream {stream}: no second ClientHello"));
        assert_eq!(
            (first.kind, first.random.as_str()),
            (1, second.random.as_str())
        );
        let line = lines
            .iter()
            .find(|l| l["src_port"].as_u64() == Some(first.port) && l["proto"] == proto)
            .unwrap_or_else(|| panic!("{name}: no line of client port {}", first.port));
        let at = format!("{name} stream {stream}: {line}");
        assert_eq!(line["hrr"], true, "{at}");
        assert_eq!(line["hrr_group"].as_u64(), hrr.selected, "{at}");
        assert_eq!(
            line["cipher"].as_u64(),
            hrr.ciphers.first().copied(),
            "{at}"
        );
        assert_eq!(as_u64s(&line["key_share"]), first.groups, "{at}");
        assert_eq!(as_u64s(&line["retry_key_share"]), second.groups, "{at}");
        let (ja4, retry) = (
            line["ja4"].as_str().unwrap(),
            line["retry_ja4"].as_str().unwrap(),
        );
        assert_eq!(&ja4[4..8], ja4_counts(first), "{at}");
        assert_eq!(&retry[4..8], ja4_counts(second), "{at}");
        assert!(line.get("retry_error").is_none(), "{at}");
        checked += 1;
    }
    let with_hrr = lines.iter().filter(|l| l.get("hrr").is_some()).count();
    let with_retry = lines
        .iter()
        .filter(|l| l.get("retry_ja4").is_some())
        .count();
    assert_eq!((with_hrr, with_retry), (checked, checked), "{name}: lines");
    checked
}

#[test]
fn tls_log_second_client_hello_after_a_hello_retry_request_equals_tsharks() {
    let tmp = tempfile::tempdir().unwrap();
    let cap = PathBuf::from(testdata("app/tls/hrr/ndpi--steam.pcapng"));
    let golden = PathBuf::from(format!("{}.hrr.tsv", cap.display()));
    assert_eq!(check(&cap, &golden, &tmp.path().join("steam"), 6), 2);
    let cap = PathBuf::from(testdata("app/quic/hrr/ndpi--quic-29.pcap"));
    let golden = PathBuf::from(format!("{}.hrr.tsv", cap.display()));
    assert_eq!(check(&cap, &golden, &tmp.path().join("quic-29"), 17), 1);
    let Some(root) = trawl_testkit::corpus() else {
        return;
    };
    let mut n = 0;
    for (c, dir, proto) in [
        ("reddit.pcap", "tls", 6),
        ("dnscrypt-v2-doh.pcap", "tls", 6),
        ("quic-24.pcap", "quic", 17),
    ] {
        let golden = PathBuf::from(testdata(&format!("app/{dir}/corpus/ndpi--{c}.hrr.tsv")));
        let cap = root.join("ndpi/default").join(c);
        n += check(&cap, &golden, &tmp.path().join(c), proto);
    }
    assert_eq!(n, 3, "HelloRetryRequests of the corpus captures");
}
