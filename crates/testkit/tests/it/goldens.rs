//! Every committed golden or oracle file is compared by some test: a table no test reads
//! checks nothing and rots (one did: an ip-pairs table generated for a misnamed capture).
use std::collections::BTreeSet;
use std::path::Path;

use trawl_testkit::testdata;

use crate::{community_id, ip_pairs, oracle, tcp_analysis, tcp_rtt};

/// Files beside the tables that are not tables.
const NOT_TABLES: &[&str] = &["README.md", "generate.sh", "regen.sh"];

/// The tables the tests of this binary compare, as paths under `testdata/`.
fn compared() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for name in oracle::ORACLE_CASES.iter().chain(oracle::ORACLE_SPECIAL) {
        out.insert(format!("oracle/{name}.tshark.txt"));
    }
    for name in oracle::EXTRA_CASES.iter().chain(oracle::EXTRA_SPECIAL) {
        out.insert(format!("golden/flows/{name}.tshark.txt"));
    }
    for name in ip_pairs::CASES.iter().chain(ip_pairs::SPECIAL) {
        out.insert(format!("golden/ip-pairs/{name}.tsv"));
    }
    for name in tcp_rtt::CASES {
        out.insert(format!("golden/tcp-rtt/{name}.tsv"));
    }
    for name in tcp_analysis::CASES {
        out.insert(format!("golden/tcp-analysis/{name}.tsv"));
    }
    for name in community_id::CASES {
        out.insert(format!("golden/community-id/{name}.tsv"));
    }
    // Not an oracle's table: the reports of the Space-Saving summaries before they were made
    // fast, which trawl-detect's `heavy_golden` test holds the new ones to.
    out.insert("golden/heavy-hitters/reports.txt".to_string());
    out
}

/// Tables committed under `testdata/`: everything in `golden/*/` and the `*.tshark.txt` of
/// `oracle/`. `golden/capture/` is checked the same way by the capture crate's tests
/// (`golden::every_capture_golden_is_compared`), which own its list.
fn committed() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let root = testdata("");
    let mut add = |dir: &Path, keep: &dyn Fn(&str) -> bool| {
        for e in std::fs::read_dir(dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.path().is_file() && !NOT_TABLES.contains(&name.as_str()) && keep(&name) {
                out.insert(
                    e.path()
                        .strip_prefix(&root)
                        .unwrap()
                        .to_string_lossy()
                        .into_owned(),
                );
            }
        }
    };
    add(&root.join("oracle"), &|n| n.ends_with(".tshark.txt"));
    for e in std::fs::read_dir(root.join("golden")).unwrap().flatten() {
        if e.file_name() != "capture" {
            add(&e.path(), &|_| true);
        }
    }
    out
}

#[test]
fn every_committed_golden_file_is_compared_by_a_test() {
    let (compared, committed) = (compared(), committed());
    let orphans: Vec<&String> = committed.difference(&compared).collect();
    assert!(
        orphans.is_empty(),
        "golden files no test compares (add them to a test's list, or delete them): {orphans:#?}"
    );
    let missing: Vec<&String> = compared.difference(&committed).collect();
    assert!(
        missing.is_empty(),
        "tests name tables that are not committed: {missing:#?}"
    );
    readme_counts_are_the_tests();
}

/// The README's "Correctness" counts are the lengths of the tests' lists.
fn readme_counts_are_the_tests() {
    let readme = std::fs::read_to_string(trawl_testkit::repo_root().join("README.md")).unwrap();
    let text = readme.split_whitespace().collect::<Vec<_>>().join(" ");
    let special =
        oracle::ORACLE_SPECIAL.len() + oracle::EXTRA_SPECIAL.len() + ip_pairs::SPECIAL.len();
    for phrase in [
        format!(
            "on the {} corpus captures that carry an oracle",
            oracle::ORACLE_CASES.len()
        ),
        format!(
            "on {} more tables generated for this repository",
            oracle::EXTRA_CASES.len()
        ),
        format!(
            "IP totals equal tshark's on {} captures",
            ip_pairs::CASES.len()
        ),
        format!("every connection of {} captures", tcp_analysis::CASES.len()),
        format!(
            "{special} more tables ({} corpus oracle, {} flow tables, {} IP-pair table)",
            oracle::ORACLE_SPECIAL.len(),
            oracle::EXTRA_SPECIAL.len(),
            ip_pairs::SPECIAL.len()
        ),
    ] {
        assert!(
            text.contains(&phrase),
            "README.md does not say {phrase:?}: update its counts"
        );
    }
}
