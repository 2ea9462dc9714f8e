//! `--analyze app` (issue 23): application labels on the records of `trawl flows`, in the flow
//! database of `trawl ingest`, and grouped by `trawl query ... app`.
use std::collections::BTreeMap;

use serde_json::Value;

use super::{testdata, trawl};

fn records(args: &[&str]) -> Vec<Value> {
    let out = trawl(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// SSH's records carry `app` `ssh` from payload (one record per conversation: the idle
/// timeout is longer than its pauses); without `--analyze app` there is no label.
#[test]
fn flows_analyze_app_labels_records_from_payload() {
    let cap = testdata("app/classify/ndpi--ssh.pcap");
    let with = records(&[
        "flows",
        "-r",
        &cap,
        "--analyze",
        "app",
        "--idle",
        "300s",
        "--summary",
        "none",
    ]);
    let ssh: Vec<&Value> = with.iter().filter(|r| r["proto"] == "tcp").collect();
    assert!(!ssh.is_empty());
    for r in &ssh {
        assert_eq!(
            (r["app"].as_str(), r["app_source"].as_str()),
            (Some("ssh"), Some("payload")),
            "{r}"
        );
    }
    let without = records(&["flows", "-r", &cap, "--summary", "none"]);
    assert!(without.iter().all(|r| r.get("app").is_none()));
    // CSV: the two columns last, empty for flows without a label.
    let out = trawl(&[
        "flows",
        "-r",
        &cap,
        "--analyze",
        "app",
        "--idle",
        "300s",
        "--format",
        "csv",
        "--summary",
        "none",
    ]);
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let head = lines.next().unwrap();
    assert!(head.contains(",community_id,app,app_source"), "{head}");
    let at = head.split(',').position(|n| n == "app").unwrap();
    for l in lines.filter(|l| l.contains(",tcp,")) {
        let cells: Vec<&str> = l.split(',').collect();
        assert_eq!(cells[at..at + 2], ["ssh", "payload"], "{l}");
    }
}

/// A flow cut by the active timeout keeps its payload label in the records after the first,
/// whose packets no longer start the conversation (the capture lasts 248 s).
#[test]
fn records_of_a_cut_flow_keep_the_payload_label() {
    let cap = testdata("app/classify/ndpi--ssh.pcap");
    let recs = records(&[
        "flows",
        "-r",
        &cap,
        "--analyze",
        "app",
        "--idle",
        "300s",
        "--active",
        "10s",
        "--summary",
        "none",
    ]);
    let long: Vec<&Value> = recs
        .iter()
        .filter(|r| r["proto"] == "tcp" && r["dst_port"] == 22)
        .collect();
    assert!(
        long.len() > 3,
        "the active timeout cuts the conversation: {}",
        long.len()
    );
    for r in long {
        assert_eq!(
            (r["app"].as_str(), r["app_source"].as_str()),
            (Some("ssh"), Some("payload")),
            "{r}"
        );
    }
}

/// The labels go into the database, and `trawl query ... app` sums the same packets per
/// application as the records of `trawl flows --analyze app`.
#[test]
fn query_groups_stored_records_by_app() {
    let caps = ["ndpi--pop3.pcap", "ndpi--imap.pcap", "ndpi--mqtt.pcap"]
        .map(|c| testdata(&format!("app/classify/{c}")));
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().to_str().unwrap();
    let mut want: BTreeMap<String, u64> = BTreeMap::new();
    for (i, cap) in caps.iter().enumerate() {
        let iface = format!("c{i}");
        let out = trawl(&[
            "ingest",
            "-r",
            cap,
            "-d",
            db,
            "-i",
            &iface,
            "--analyze",
            "app",
            "--summary",
            "none",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        for r in records(&["flows", "-r", cap, "--analyze", "app", "--summary", "none"]) {
            let app = r["app"].as_str().unwrap_or("").to_string();
            *want.entry(app).or_default() +=
                r["fwd_packets"].as_u64().unwrap() + r["rev_packets"].as_u64().unwrap();
        }
    }
    let out = trawl(&["query", "-d", db, "--format", "json", "--limit", "0", "app"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let got: BTreeMap<String, u64> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let packets = r["fwd_packets"].as_u64().unwrap() + r["rev_packets"].as_u64().unwrap();
            (r["app"].as_str().unwrap().to_string(), packets)
        })
        .collect();
    assert_eq!(got, want);
    for app in ["pop3", "imap", "mqtt"] {
        assert!(got.contains_key(app), "{app} missing: {got:?}");
    }
}
