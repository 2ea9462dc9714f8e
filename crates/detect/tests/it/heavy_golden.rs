//! Heavy-hitter reports on committed corpus captures equal the golden file written by the
//! summaries before they were made fast (SipHash maps and a heap of counter indices, commit
//! a852023): same counts, errors, evictions and order of ties, for small `k` (constant
//! eviction) and the default 1024. `TRAWL_BLESS=1 cargo test -p trawl-detect --test it
//! heavy_golden` rewrites it (review the diff like code: the reports must not change).
use std::fmt::Write;

use trawl_capture::{FileSource, PacketSource};
use trawl_detect::heavy::{HeavyConfig, HeavyHitters, HeavyReport, Selection, Summary};
use trawl_detect::sketch::Counter;

const CAPTURES: [&str; 5] = [
    "pcaps/android.pcap",
    "oracle/v6-http.pcap",
    "oracle/sip.pcap",
    "oracle/1kxun.pcap.gz",
    "oracle/many-protocols.pcap.gz",
];

const GOLDEN: &str = "golden/heavy-hitters/reports.txt";

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn summary<K>(out: &mut String, name: &str, s: &Summary<K>, item: impl Fn(&K) -> String) {
    let _ = writeln!(
        out,
        "  {name} total={} bound={} complete={}",
        s.total, s.error_bound, s.complete
    );
    for Counter {
        item: i,
        count,
        error,
    } in &s.items
    {
        let _ = writeln!(out, "    {} {count} {error}", item(i));
    }
}

fn report(out: &mut String, r: &HeavyReport) {
    let _ = writeln!(out, " interval {}..{}", r.start_ns, r.end_ns);
    summary(out, "flow_bytes", &r.flow_bytes, |k| hex(&k.0));
    summary(out, "flow_packets", &r.flow_packets, |k| hex(&k.0));
    summary(out, "host_bytes", &r.host_bytes, |a| hex(a));
    summary(out, "host_packets", &r.host_packets, |a| hex(a));
}

/// Every capture under every configuration, as text.
fn reports() -> String {
    let mut out = String::from(
        "# generated — do not edit; `TRAWL_BLESS=1 cargo test -p trawl-detect --test it heavy_golden` to update\n",
    );
    for capture in CAPTURES {
        for (k, top, interval_s) in [(4, 4, 10), (16, 16, 10), (1024, 10, 10)] {
            let config = HeavyConfig {
                interval_ns: interval_s * 1_000_000_000,
                k,
                selection: Selection::Top(top),
                ..HeavyConfig::default()
            };
            let _ = writeln!(out, "{capture} k={k} top={top} interval={interval_s}s");
            let mut source = FileSource::open(trawl_testkit::testdata(capture)).unwrap();
            let mut hh = HeavyHitters::new(config);
            let mut reports = Vec::new();
            while let Some(batch) = source.next_batch().unwrap() {
                for pkt in batch.iter() {
                    hh.observe_packet(&pkt, &mut reports);
                }
            }
            hh.finish(&mut reports);
            assert!(!reports.is_empty(), "{capture}");
            for r in &reports {
                report(&mut out, r);
            }
        }
    }
    out
}

#[test]
fn heavy_hitter_reports_equal_the_golden_file_of_the_old_summaries() {
    let got = reports();
    let path = trawl_testkit::testdata(GOLDEN);
    if std::env::var_os("TRAWL_BLESS").is_some() {
        std::fs::write(&path, &got).unwrap();
    }
    let want = std::fs::read_to_string(&path).unwrap();
    // Line by line: the first difference is the message, not a wall of text.
    for (i, (g, w)) in got.lines().zip(want.lines()).enumerate() {
        assert_eq!(g, w, "{GOLDEN} line {}", i + 1);
    }
    assert_eq!(
        got.lines().count(),
        want.lines().count(),
        "{GOLDEN}: line count"
    );
}
