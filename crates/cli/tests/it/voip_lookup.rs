//! `trawl voip calls -r DIR` (issue 24): calls looked up by user and time in the records
//! `trawl voip` wrote, against the same filter applied by hand to `calls.jsonl`.
use std::path::Path;

use serde_json::Value;

use super::{testdata, trawl};

fn jsonl(text: &str) -> Vec<Value> {
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `trawl voip -r sip.pcap -o DIR` (four calls): its call records.
fn records(dir: &Path) -> Vec<Value> {
    let input = testdata("oracle/sip.pcap");
    let out = trawl(&["voip", "-r", &input, "-o", dir.to_str().unwrap()]);
    assert!(out.status.success());
    jsonl(&std::fs::read_to_string(dir.join("calls.jsonl")).unwrap())
}

/// `trawl voip calls -r DIR ARGS --format json`: the Call-IDs found, in output order.
fn found(dir: &Path, args: &[&str]) -> Vec<String> {
    let mut argv = vec!["voip", "calls", "-r", dir.to_str().unwrap()];
    argv.extend_from_slice(args);
    argv.extend_from_slice(&["--format", "json"]);
    let out = trawl(&argv);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    jsonl(&String::from_utf8(out.stdout).unwrap())
        .iter()
        .map(|c| c["call_id"].as_str().unwrap().to_string())
        .collect()
}

/// The Call-IDs of `calls` that `keep` keeps, by INVITE time.
fn expected(calls: &[Value], keep: impl Fn(&Value) -> bool) -> Vec<String> {
    let mut kept: Vec<&Value> = calls.iter().filter(|c| keep(c)).collect();
    kept.sort_by_key(|c| c["invite_ns"].as_u64());
    kept.iter()
        .map(|c| c["call_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn voip_calls_finds_calls_by_caller_callee_and_time() {
    let dir = tempfile::tempdir().unwrap();
    let calls = records(dir.path());
    assert_eq!(calls.len(), 4);
    let user = |c: &Value, side: &str, u: &str| c[format!("{side}_user")] == u;

    let either = expected(&calls, |c| {
        user(c, "from", "35104723") || user(c, "to", "35104723")
    });
    assert_eq!(either.len(), 2, "the capture's caller of two calls");
    assert_eq!(found(dir.path(), &["--user", "35104723"]), either);
    assert_eq!(
        found(dir.path(), &["--user", "35104723", "--from-user"]),
        either
    );
    assert!(found(dir.path(), &["--user", "35104723", "--to-user"]).is_empty());
    let callee = expected(&calls, |c| user(c, "to", "0097239287044"));
    assert_eq!(callee.len(), 2);
    assert_eq!(
        found(dir.path(), &["--user", "0097239287044", "--to-user"]),
        callee
    );
    // A number written with spaces and a plus is the same number.
    assert_eq!(found(dir.path(), &["--user", "+35 104 723"]), either);

    // Time: calls invited before the second of the third call's INVITE, and those not ended
    // before it.
    let mut invites: Vec<u64> = calls
        .iter()
        .map(|c| c["invite_ns"].as_u64().unwrap())
        .collect();
    invites.sort();
    let t = invites[2] / 1_000_000_000;
    let t_ns = t * 1_000_000_000;
    let before = expected(&calls, |c| c["invite_ns"].as_u64().unwrap() < t_ns);
    let after = expected(&calls, |c| c["end_ns"].as_u64().unwrap() >= t_ns);
    assert!(!before.is_empty() && !after.is_empty() && before.len() < 4);
    assert_eq!(found(dir.path(), &["--to", &t.to_string()]), before);
    assert_eq!(found(dir.path(), &["--from", &t.to_string()]), after);
    assert_eq!(found(dir.path(), &[]), expected(&calls, |_| true));
}

#[test]
fn voip_calls_prints_a_table_and_csv_and_reads_the_daily_files() {
    let dir = tempfile::tempdir().unwrap();
    let calls = records(dir.path());
    // The monitor's daily files are read beside calls.jsonl.
    let moved = dir.path().join("calls-2009-01-01.jsonl");
    std::fs::rename(dir.path().join("calls.jsonl"), &moved).unwrap();
    let d = dir.path().to_str().unwrap();
    let out = trawl(&["voip", "calls", "-r", d, "--user", "voi18062"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "header and one call:\n{text}");
    assert!(lines[0].starts_with("invite") && lines[0].contains("call_id"));
    let call = calls.iter().find(|c| c["from_user"] == "voi18062").unwrap();
    assert!(lines[1].contains(call["call_id"].as_str().unwrap()));
    let out = trawl(&["voip", "calls", "-r", d, "--format", "csv"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert_eq!(text.lines().count(), 1 + calls.len());
    assert!(text.starts_with("invite,from_user,from_display,to_user,"));
    // Errors name what is wrong.
    std::fs::write(
        dir.path().join("calls-2009-01-02.jsonl"),
        "{\"call_id\":1}\nnot json\n",
    )
    .unwrap();
    let out = trawl(&["voip", "calls", "-r", d]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("calls-2009-01-02.jsonl:2"), "{err}");
}

#[test]
fn voip_api_calls_answer_what_trawl_voip_calls_finds() {
    use super::api::{get, get_json, Served};
    let dir = tempfile::tempdir().unwrap();
    let calls = records(dir.path());
    let d = dir.path().to_str().unwrap();
    let served = Served::start_with(
        std::process::Command::new(env!("CARGO_BIN_EXE_trawl")).args([
            "serve",
            "--voip",
            d,
            "--api",
            "127.0.0.1:0",
        ]),
        "serving on http://",
        "http://",
    );
    let ids = |answer: &Value| -> Vec<String> {
        assert_eq!(answer["active"], false);
        answer["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["call_id"].as_str().unwrap().to_string())
            .collect()
    };
    let all = get_json(&served.url("/api/v1/calls"));
    assert_eq!(ids(&all), expected(&calls, |_| true));
    // The records as written, not a summary of them.
    let first = &all["calls"][0];
    let stored = calls
        .iter()
        .find(|c| c["call_id"] == first["call_id"])
        .unwrap();
    assert_eq!(first, stored);
    for (query, args) in [
        ("user=35104723", vec!["--user", "35104723"]),
        (
            "user=35104723&role=callee",
            vec!["--user", "35104723", "--to-user"],
        ),
        (
            "user=0097239287044&role=callee",
            vec!["--user", "0097239287044", "--to-user"],
        ),
        ("user=%2B35%20104%20723", vec!["--user", "+35 104 723"]),
        ("user=voi18062", vec!["--user", "voi18062"]),
    ] {
        let answer = get_json(&served.url(&format!("/api/v1/calls?{query}")));
        assert_eq!(ids(&answer), found(dir.path(), &args), "{query}");
    }
    let (code, body) = get(&served.url("/api/v1/calls?role=boss&user=x"), &[]);
    assert_eq!(code, 400);
    assert!(String::from_utf8_lossy(&body).contains("\"parameter\":\"role\""));
    // Calls in progress are a monitor's: `trawl serve` has none.
    let (code, _) = get(&served.url("/api/v1/calls?active=1"), &[]);
    assert_eq!(code, 404);
    let (status, _) = served.stop();
    assert!(status.success());
}
