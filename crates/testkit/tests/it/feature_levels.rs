//! Feature levels (issue 26): the records of `minimal` and `standard` are projections of
//! `full`'s — the same records in the same order, each field a level keeps equal to `full`'s,
//! the others zero — over every committed capture and the corpus's merged benchmark seed.
use std::path::{Path, PathBuf};

use trawl_capture::{FileSource, PacketSource};
use trawl_flow::{FeatureLevel, FlowConfig, FlowMeter, FlowRecord};
use trawl_testkit::testdata;

/// The meter's settings of a comparison.
#[derive(Clone, Copy)]
struct Setting {
    capacity: usize,
    active_timeout_ns: u64,
}

/// A table large enough for any committed capture, the default timeouts.
const ROOMY: Setting = Setting {
    capacity: 1 << 16,
    active_timeout_ns: 1800 * 1_000_000_000,
};

/// A table of 64 flows (most flows leave under pressure) and a one-second active timeout
/// (long flows leave in many records): the paths a large table with long timeouts never takes.
const CRAMPED: Setting = Setting {
    capacity: 64,
    active_timeout_ns: 1_000_000_000,
};

/// The records of `capture` at `level` (empty payloads, so they own nothing).
fn records(capture: &Path, level: FeatureLevel) -> Vec<FlowRecord<'static>> {
    records_with(capture, level, ROOMY)
}

fn records_with(capture: &Path, level: FeatureLevel, setting: Setting) -> Vec<FlowRecord<'static>> {
    let mut m = FlowMeter::new(FlowConfig {
        capacity: setting.capacity,
        active_timeout_ns: setting.active_timeout_ns,
        features: level,
        ..FlowConfig::default()
    });
    let mut out = Vec::new();
    let mut sink = |r: &FlowRecord<'_>| {
        out.push(FlowRecord {
            fwd_payload: &[],
            rev_payload: &[],
            ..*r
        })
    };
    // Damaged captures end with a read error: what was read before it is compared.
    if let Ok(mut source) = FileSource::open(capture) {
        while let Ok(Some(batch)) = source.next_batch() {
            for pkt in batch.iter() {
                m.process(&pkt, &mut sink);
            }
        }
    }
    m.flush(&mut sink);
    out
}

/// Checks one capture; returns how many records it has.
fn check(capture: &Path) -> usize {
    check_with(capture, CRAMPED);
    check_with(capture, ROOMY)
}

fn check_with(capture: &Path, setting: Setting) -> usize {
    let full = records_with(capture, FeatureLevel::Full, setting);
    for level in [FeatureLevel::Minimal, FeatureLevel::Standard] {
        let got = records_with(capture, level, setting);
        assert_eq!(got.len(), full.len(), "{}: {level}", capture.display());
        for (i, (g, f)) in got.iter().zip(&full).enumerate() {
            assert_eq!(
                *g,
                f.project(level),
                "{}: {level}, record {i}",
                capture.display()
            );
        }
    }
    full.len()
}

fn captures(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            p.is_file() && !name.ends_with(".txt") && !name.ends_with(".md")
        })
        .collect();
    files.sort();
    files
}

#[test]
fn every_level_is_a_projection_of_full_on_the_committed_captures() {
    let mut files = captures(&testdata("pcaps"));
    files.extend(captures(&testdata("oracle")));
    assert!(files.len() > 50, "{} captures", files.len());
    let mut n = 0;
    // The handshake halves and the standard statistics are non-zero somewhere, so the
    // comparison is not between zeros only.
    let (mut halves, mut retrans) = (0, 0);
    for f in &files {
        n += check(f);
        for r in records(f, FeatureLevel::Standard) {
            halves += [r.fwd, r.rev]
                .iter()
                .filter(|d| d.rtt_handshake_ns.is_some())
                .count();
            retrans += r.fwd.retransmissions + r.rev.retransmissions;
        }
    }
    assert!(n > 1000, "{n} records");
    assert!(halves > 200, "{halves} handshake halves");
    assert!(retrans > 100, "{retrans} retransmissions");
}

#[test]
fn every_level_is_a_projection_of_full_on_the_corpus_seed() {
    let Some(corpus) = trawl_testkit::corpus() else {
        return;
    };
    let n = check(&corpus.join("bench/ndpi-default-ether-merged.pcap"));
    assert!(n > 5000, "{n} records");
}
