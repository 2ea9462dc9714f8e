//! `trawl run --analyze app` (issue 23): the live monitor labels its flow records as `trawl
//! flows --analyze app` does, in `--flows` and in the database (`trawl query ... app`).
//! Captures whose labels nDPI gives from payload (`testdata/app/classify/*.ndpi.tsv`) are
//! replayed into a veth pair.
use std::collections::BTreeSet;
use std::path::Path;

use serde_json::Value;

use super::live::{lab, trawl_live, wait_for_capture, wait_json};
use super::{testdata, trawl};

const CAPTURES: [&str; 3] = ["ndpi--pop3.pcap", "ndpi--imap.pcap", "ndpi--mqtt.pcap"];

/// A conversation (its two ends in order) and its label.
type Labelled = (String, String, Option<String>, Option<String>);

fn labels(records: &str) -> BTreeSet<Labelled> {
    records
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            let end = |ip: &str, port: &str| format!("{}:{}", r[ip].as_str().unwrap(), r[port]);
            let (a, b) = (end("src_ip", "src_port"), end("dst_ip", "dst_port"));
            let text = |k: &str| r[k].as_str().map(String::from);
            (
                a.clone().min(b.clone()),
                a.max(b),
                text("app"),
                text("app_source"),
            )
        })
        .collect()
}

#[test]
fn run_analyze_app_labels_live_records_and_the_database() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let flows = dir.path().join("flows.jsonl");
    let db = dir.path().join("db");
    let run = trawl_live(&[
        "run",
        "-i",
        &lab.host,
        "--no-ring",
        "--duration",
        "3s",
        "--summary",
        "json",
        "--flows",
        flows.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
        "--analyze",
        "app",
    ]);
    wait_for_capture(run.id());
    let mut want = BTreeSet::new();
    for c in CAPTURES {
        let cap = testdata(&format!("app/classify/{c}"));
        lab.replay_into_host(Path::new(&cap), &["--topspeed"])
            .expect("replay");
        let out = trawl(&["flows", "-r", &cap, "--analyze", "app", "--summary", "none"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        want.extend(labels(&String::from_utf8(out.stdout).unwrap()));
    }
    wait_json(run);

    // The records of the replayed files, labelled alike (a conversation may be cut into
    // several records live: the database cuts at its 5-minute blocks).
    let got = labels(&std::fs::read_to_string(&flows).unwrap());
    assert_eq!(got, want);
    // nDPI's payload labels are among them.
    for c in CAPTURES {
        let golden =
            std::fs::read_to_string(testdata(&format!("app/classify/{c}.ndpi.tsv"))).unwrap();
        for line in golden.lines().filter(|l| !l.starts_with('#')) {
            let f: Vec<&str> = line.split('\t').collect();
            let (a, b) = (format!("{}:{}", f[1], f[2]), format!("{}:{}", f[3], f[4]));
            let label = f[5].to_lowercase();
            let key = (a.clone().min(b.clone()), a.max(b));
            assert!(
                got.iter().any(|g| (g.0.clone(), g.1.clone()) == key
                    && g.2.as_deref() == Some(label.as_str())
                    && g.3.as_deref() == Some("payload")),
                "{c}: {line} not labelled {label} from payload: {got:?}"
            );
        }
    }

    // The database has the labels: `trawl query ... app` groups by them.
    let out = trawl(&[
        "query",
        "-d",
        db.to_str().unwrap(),
        "--format",
        "json",
        "--limit",
        "0",
        "app",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let apps: BTreeSet<&str> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["app"].as_str().unwrap())
        .collect();
    for app in ["pop3", "imap", "mqtt"] {
        assert!(apps.contains(app), "{app} missing: {apps:?}");
    }
}

/// Each analyser needs what it writes into.
#[test]
fn run_analyze_refuses_analysers_without_their_output() {
    for (args, says) in [
        (&["--analyze", "app"][..], "labels flow records"),
        (&["--analyze", "dns"][..], "give --logs DIR"),
        (
            &[
                "--analyze",
                "app",
                "--logs",
                "/nonexistent/logs",
                "--flows",
                "-",
            ][..],
            "writes no log",
        ),
    ] {
        let mut argv = vec!["run", "-i", "lo", "--duration", "1s"];
        argv.extend(args);
        let out = trawl(&argv);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(says),
            "{args:?}: {stderr}"
        );
    }
}
