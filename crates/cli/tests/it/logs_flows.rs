//! `trawl flows --logs DIR` and `trawl ingest --logs DIR` (issue 23): the analysers of `trawl
//! logs` run in the same pass as the flow meter, from the same plan code. Over captures with
//! DNS, TLS (with a server certificate), QUIC and HTTP, the logs must be byte for byte those of
//! `trawl logs` on the same files, and the records (the flow output, the database's
//! conversations) those of the same command without `--logs`.
use std::path::Path;
use std::process::Output;

use super::{ok, s, summary, testdata, trawl};

/// Captures merged into one input: each analyser has lines.
fn captures() -> Vec<String> {
    [
        "app/dns/arkime--curl-enabled-tls13.pcap",
        "app/tls/ndpi--selfsigned.pcap",
        "app/quic/ndpi--quic-23.pcap",
        "app/http/pcapplusplus--input.pcap",
    ]
    .iter()
    .map(|c| testdata(c))
    .collect()
}

/// `-r FILE` for each capture, then `rest`.
fn args<'a>(command: &'a str, files: &'a [String], rest: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec![command];
    for f in files {
        a.extend(["-r", f.as_str()]);
    }
    a.extend_from_slice(rest);
    a
}

/// The three log files of `dir`.
fn logs(dir: &Path) -> Vec<(String, String)> {
    ["dns.jsonl", "tls.jsonl", "http.jsonl"]
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(dir.join(f))
                .unwrap_or_else(|e| panic!("{}/{f}: {e}", dir.display()));
            (f.to_string(), text)
        })
        .collect()
}

/// The lines each analyser wrote, as the summary's `logs.lines` gives them.
fn line_counts(logs: &[(String, String)]) -> serde_json::Value {
    logs.iter()
        .map(|(f, text)| {
            let name = f.trim_end_matches(".jsonl").to_string();
            (name, text.lines().count().into())
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

#[test]
fn flows_and_ingest_with_logs_write_trawl_logs_lines_and_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let files = captures();
    ok(trawl(&args("logs", &files, &["-o", s(&d.join("logs"))])));
    let want = logs(&d.join("logs"));
    for (f, text) in &want {
        assert!(text.lines().count() >= 1, "{f} of trawl logs is empty");
    }
    assert!(want[1].1.contains("cert_subject") && want[1].1.contains("\"quic\""));

    // flows, with and without --logs, and with the packets spread over two meters.
    let flows = |extra: &[&str], out: &str| -> Output {
        let out = d.join(out);
        let mut rest = vec!["-o", s(&out), "--summary", "json"];
        rest.extend_from_slice(extra);
        ok(trawl(&args("flows", &files, &rest)))
    };
    let with = flows(&["--logs", s(&d.join("flows_logs"))], "with.jsonl");
    flows(&[], "without.jsonl");
    let records = |f: &str| std::fs::read_to_string(d.join(f)).unwrap();
    assert!(records("with.jsonl").lines().count() >= 5);
    assert_eq!(records("with.jsonl"), records("without.jsonl"));
    assert_eq!(logs(&d.join("flows_logs")), want, "trawl flows --logs");
    let sum = summary(&with);
    assert_eq!(sum["logs"]["lines"], line_counts(&want), "{sum}");

    let spread = flows(
        &[
            "--logs",
            s(&d.join("flows_workers_logs")),
            "--workers",
            "2",
            "--analyze",
            "app,dns,tls,http",
        ],
        "workers.jsonl",
    );
    assert_eq!(
        logs(&d.join("flows_workers_logs")),
        want,
        "trawl flows --workers 2 --logs"
    );
    let sorted = |f: &str| {
        let mut l: Vec<String> = records(f).lines().map(String::from).collect();
        l.sort();
        l
    };
    let labelled = sorted("workers.jsonl");
    assert_eq!(labelled.len(), sorted("without.jsonl").len());
    assert!(
        labelled.iter().all(|r| r.contains("\"app\"")),
        "--analyze app"
    );
    assert_eq!(summary(&spread)["logs"]["lines"], line_counts(&want));

    // ingest, with and without --logs: the same conversations in the database.
    let ingest = |db: &str, extra: &[&str]| -> Output {
        let mut rest = vec!["-d", db, "--summary", "json"];
        rest.extend_from_slice(extra);
        ok(trawl(&args("ingest", &files, &rest)))
    };
    let (db_with, db_without) = (d.join("db_with"), d.join("db_without"));
    let out = ingest(s(&db_with), &["--logs", s(&d.join("ingest_logs"))]);
    ingest(s(&db_without), &[]);
    assert_eq!(logs(&d.join("ingest_logs")), want, "trawl ingest --logs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let run: serde_json::Value = stderr
        .lines()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .unwrap_or_else(|| panic!("no JSON summary: {stderr}"));
    assert_eq!(run["logs"]["lines"], line_counts(&want), "{run}");
    // The rows and totals (the query's stats have its duration).
    let conversations = |db: &Path| -> (serde_json::Value, serde_json::Value) {
        let out = ok(trawl(&[
            "query",
            "-d",
            s(db),
            "talk_conv",
            "--format",
            "json",
            "--limit",
            "0",
        ]));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (v["rows"].clone(), v["totals"].clone())
    };
    let stored = conversations(&db_with);
    assert!(stored.0.as_array().unwrap().len() >= 3, "{stored:?}");
    assert_eq!(stored, conversations(&db_without));
}

#[test]
fn log_analysers_need_logs_and_logs_are_not_anonymized() {
    let files = captures();
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    let logs_dir = dir.path().join("logs");
    for command in ["flows", "ingest"] {
        let db = dir.path().join(format!("db_{command}"));
        let base: Vec<&str> = if command == "ingest" {
            vec!["-d", s(&db)]
        } else {
            Vec::new()
        };
        let mut rest = base.clone();
        rest.extend(["--analyze", "tls"]);
        let out = trawl(&args(command, &files, &rest));
        assert_eq!(out.status.code(), Some(2), "{command} --analyze tls");
        assert!(String::from_utf8_lossy(&out.stderr).contains("give --logs DIR"));

        let mut rest = base.clone();
        rest.extend(["--logs", s(&logs_dir), "--anonymize", s(&key)]);
        let out = trawl(&args(command, &files, &rest));
        assert_eq!(out.status.code(), Some(2), "{command} --logs --anonymize");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--anonymize"));

        let mut rest = base;
        rest.extend(["--logs", s(&logs_dir), "--analyze", "app"]);
        let out = trawl(&args(command, &files, &rest));
        assert_eq!(out.status.code(), Some(2), "{command} --logs --analyze app");
        assert!(!logs_dir.exists(), "nothing written on a usage error");
    }
}
