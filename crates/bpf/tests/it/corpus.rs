//! Whole-corpus differential sweep against libpcap: every capture libpcap can open in the
//! shared corpus (`trawl_testkit::corpus`: fails under CI when absent, a logged skip
//! elsewhere), a few expressions each.

use std::path::{Path, PathBuf};

use crate::differential::{compare, Tally};
use crate::oracle;

const EXPRESSIONS: &[&str] = &[
    "tcp port 80 or udp port 53",
    "vlan and tcp",
    "ip6 and not icmp6",
    "greater 1000",
    "ip[6:2] & 0x1fff != 0",
    "tcp[tcpflags] & (tcp-syn|tcp-fin) != 0",
    "mpls or pppoes",
];

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            // bench/ is one big merge of captures already in ndpi/: nothing new, much time.
            if p.file_name()
                .is_some_and(|n| n == "bench" || n == "expected")
            {
                continue;
            }
            walk(&p, out);
        } else if !matches!(
            p.extension().and_then(|e| e.to_str()),
            Some("txt" | "tsv" | "md" | "py" | "sh" | "json" | "gz" | "zst")
        ) {
            out.push(p);
        }
    }
}

#[test]
fn corpus_agrees_with_libpcap() {
    let Some(corpus) = trawl_testkit::corpus() else {
        return;
    };
    let mut files = Vec::new();
    walk(&corpus, &mut files);
    files.sort();
    let mut opened = 0;
    let mut tally = Tally::default();
    for path in &files {
        let Some(cap) = oracle::read(path) else {
            continue;
        };
        opened += 1;
        for expr in EXPRESSIONS {
            compare(path, &cap, expr, &mut tally);
        }
    }
    println!(
        "corpus: {opened} of {} files opened by libpcap, {} packet verdicts, {} accepted",
        files.len(),
        tally.packets,
        tally.accepted
    );
    assert!(opened > 100, "libpcap opened only {opened} corpus files");
    assert!(
        tally.mismatches.is_empty(),
        "{} disagreements with libpcap:\n{}",
        tally.mismatches.len(),
        tally.mismatches.join("\n")
    );
}
