//! Merging the partial aggregates of many probes, as the coordinator does: `PROBES` partials of
//! `GROUPS` conversations each (half of them seen by every probe, half by that probe alone),
//! in their binary form; reports the decode and merge times one after the other, the wall time
//! of the coordinator's path (answers decoded on one thread per core while one thread merges
//! each as it comes), and the merged groups.
//!
//!     cargo bench -p trawl-fleet --bench merge -- [PROBES] [GROUPS]   (default 50 100000)
use std::time::Instant;

use trawl_query::{parse_attributes, PartialAggregate};

/// The binary answer of probe `p`: `groups` conversations.
fn probe_answer(p: u32, groups: u32) -> Vec<u8> {
    let mut doc = String::from(r#"{"version":1,"attributes":["sip","dip"],"groups":["#);
    for i in 0..groups {
        // Even groups are common to all probes; odd ones are the probe's own.
        let owner = if i % 2 == 0 { 0 } else { p + 1 };
        let (a, b) = (i >> 8, i & 0xff);
        if i > 0 {
            doc.push(',');
        }
        doc.push_str(&format!(
            r#"{{"key":{{"sip":"10.{}.{a_hi}.{a_lo}","dip":"172.16.{owner_hi}.{b}"}},"fwd_packets":{i},"rev_packets":1,"fwd_bytes":{},"rev_bytes":64,"flows":1}}"#,
            owner & 0xff,
            u64::from(i) * 100,
            a_hi = (a >> 8) & 0xff,
            a_lo = a & 0xff,
            owner_hi = (owner >> 8) & 0xff,
        ));
    }
    doc.push_str(r#"],"stats":{"blocks":1,"blocks_scanned":1,"blocks_pruned":0,"blocks_failed":0,"row_groups":1,"row_groups_pruned":0,"rows_scanned":1,"rows_matched":1,"bytes_scanned":1,"errors":[]}}"#);
    let p = PartialAggregate::from_json(&doc, usize::MAX).expect("generated document");
    p.to_bytes()
}

fn main() {
    let args: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let probes = args.first().copied().unwrap_or(50);
    let groups = args.get(1).copied().unwrap_or(100_000);
    let answers: Vec<Vec<u8>> = (0..probes).map(|p| probe_answer(p, groups)).collect();
    let bytes: usize = answers.iter().map(Vec::len).sum();
    let attrs = parse_attributes("talk_conv").unwrap();
    let max_groups = 10_000_000;
    let started = Instant::now();
    let decoded: Vec<PartialAggregate> = answers
        .iter()
        .map(|a| PartialAggregate::from_bytes(a, max_groups).expect("decodes"))
        .collect();
    let decode = started.elapsed();
    let started = Instant::now();
    let mut merged = PartialAggregate::new(attrs.clone(), max_groups);
    for d in decoded {
        merged.merge(d).expect("merges");
    }
    let merge = started.elapsed();
    let pipelined = as_the_coordinator(&answers, &attrs, max_groups, merged.len());
    println!(
        "{{\"probes\":{probes},\"groups_per_probe\":{groups},\"answer_bytes_total\":{bytes},\"decode_s\":{:.3},\"merge_s\":{:.3},\"pipelined_s\":{:.3},\"decode_threads\":{},\"merged_groups\":{}}}",
        decode.as_secs_f64(),
        merge.as_secs_f64(),
        pipelined.as_secs_f64(),
        decode_threads(),
        merged.len()
    );
}

/// Threads decoding answers as the coordinator's runtime does (its blocking pool has one per
/// answer; the cores bound it): one per core.
fn decode_threads() -> usize {
    std::thread::available_parallelism().map_or(2, |n| n.get())
}

/// The coordinator's path: answers decoded on [`decode_threads`] threads while the calling
/// thread merges each as it is decoded (its table sized after the first, as the coordinator's
/// is); the wall time until the merge is complete.
fn as_the_coordinator(
    answers: &[Vec<u8>],
    attrs: &[trawl_query::Attribute],
    max_groups: usize,
    want: usize,
) -> std::time::Duration {
    let started = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    let mut merged = PartialAggregate::new(attrs.to_vec(), max_groups);
    std::thread::scope(|s| {
        for _ in 0..decode_threads() {
            let (tx, next) = (tx.clone(), &next);
            s.spawn(move || loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some(a) = answers.get(i) else { break };
                let p = PartialAggregate::from_bytes(a, max_groups).expect("decodes");
                if tx.send(p).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        let mut waiting = answers.len();
        for (n, p) in rx.into_iter().enumerate() {
            waiting -= 1;
            let before = merged.len();
            merged.merge(p).expect("merges");
            if n == 1 && waiting > 0 {
                // As the coordinator's merger: sized once, after the second answer, for the
                // union the answers still to come will make.
                let added = merged.len() - before;
                merged.reserve((merged.len() + added * waiting).min(max_groups));
            }
        }
    });
    let took = started.elapsed();
    assert_eq!(merged.len(), want, "the same merge as one thread's");
    took
}
