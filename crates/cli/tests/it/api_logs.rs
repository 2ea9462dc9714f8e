//! `/api/v1/logs` (issue 23) of a live monitor: `trawl run -i IF --logs DIR --api` with a token,
//! two DNS captures replayed into a veth pair; the API answers the lines of the hourly files,
//! newest first, within `[from, to)`, `limit`ed (and says so), of one client with `filter=`,
//! behind the token; bad parameters are 400s naming them.
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::api::{get, Served};
use super::testdata;

/// The lines of the hourly DNS files in `dir`.
fn written(dir: &Path) -> Vec<Value> {
    let mut lines = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        assert!(
            name.starts_with("dns-") && name.ends_with(".jsonl"),
            "{name}"
        );
        let text = std::fs::read_to_string(&path).unwrap();
        lines.extend(
            text.lines()
                .map(|l| serde_json::from_str::<Value>(l).unwrap()),
        );
    }
    lines
}

fn ts(v: &Value) -> u64 {
    v["ts_ns"].as_u64().unwrap()
}

#[test]
fn api_logs_serves_the_monitor_s_hourly_lines_newest_first() {
    let lab = crate::live::lab();
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let token_file = dir.path().join("token");
    let token = "logs-t0ken-of-32-characters-xxxx";
    std::fs::write(&token_file, token).unwrap();
    let served = Served::start_with(
        std::process::Command::new(env!("CARGO_BIN_EXE_trawl")).args([
            "run",
            "-i",
            &lab.host,
            "--no-ring",
            "--logs",
            logs.to_str().unwrap(),
            "--analyze",
            "dns",
            "--api",
            "127.0.0.1:0",
            "--api-token-file",
            token_file.to_str().unwrap(),
            "--duration",
            "20s",
        ]),
        "HTTP API on ",
        "http://",
    );
    let bearer = format!("Authorization: Bearer {token}");
    let auth = ["-H", bearer.as_str()];
    let api = |query: &str| -> (u16, Value) {
        let (code, body) = get(&served.url(&format!("/api/v1/logs?{query}")), &auth);
        let v = serde_json::from_slice(&body).unwrap_or_else(|e| {
            panic!(
                "{query}: not JSON ({e}): {}",
                String::from_utf8_lossy(&body)
            )
        });
        (code, v)
    };
    // 10 exchanges of 10.200.2.11, 5 of 192.168.43.9.
    for c in [
        "app/dns/ndpi--dns_ambiguous_names.pcap",
        "app/dns/debian--dns_icmp.pcap",
    ] {
        lab.replay_into_host(Path::new(&testdata(c)), &["--topspeed"])
            .expect("replay");
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let all = loop {
        let (code, v) = api("type=dns&from=-1h");
        assert_eq!(code, 200, "{v}");
        if v["lines"].as_array().unwrap().len() == 15 {
            break v;
        }
        assert!(Instant::now() < deadline, "{v}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(all["type"], "dns");
    assert_eq!(all["truncated"], false);
    let lines = all["lines"].as_array().unwrap().clone();
    // Newest first, and the very lines of the files.
    let times: Vec<u64> = lines.iter().map(ts).collect();
    let mut sorted = times.clone();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted);
    let mut files = written(&logs);
    files.sort_by_key(|v| std::cmp::Reverse(ts(v)));
    assert_eq!(lines, files);

    // `limit`: the newest, and the answer says more matched.
    let (_, two) = api("type=dns&from=-1h&limit=2");
    assert_eq!(two["lines"].as_array().unwrap(), &lines[..2]);
    assert_eq!(two["truncated"], true);
    // `[from, to)` in ns: from the third newest (kept) to the newest (left out).
    let (_, window) = api(&format!("type=dns&from={}&to={}", times[2], times[0]));
    let got: Vec<u64> = window["lines"].as_array().unwrap().iter().map(ts).collect();
    let want: Vec<u64> = times
        .iter()
        .copied()
        .filter(|&t| t >= times[2] && t < times[0])
        .collect();
    assert_eq!(got, want);
    // `filter=` an address: the lines it is an end of.
    let (_, one) = api("type=dns&from=-1h&filter=192.168.43.9");
    let one = one["lines"].as_array().unwrap();
    assert_eq!(one.len(), 5, "{one:?}");
    assert!(one.iter().all(|l| l["src_ip"] == "192.168.43.9"));
    // ... or a Community ID: its flow's lines.
    let id = lines[0]["community_id"].as_str().unwrap();
    let (_, flow) = api(&format!(
        "type=dns&from=-1h&filter={}",
        id.replace('+', "%2B")
            .replace('/', "%2F")
            .replace('=', "%3D")
    ));
    let flow = flow["lines"].as_array().unwrap();
    assert!(!flow.is_empty() && flow.iter().all(|l| l["community_id"] == id));
    // Another type: none written.
    let (code, tls) = api("type=tls&from=-1h");
    assert_eq!((code, tls["lines"].as_array().unwrap().len()), (200, 0));

    for (query, parameter) in [
        ("from=-1h", "type"),
        ("type=smtp", "type"),
        ("type=dns&limit=0", "limit"),
        ("type=dns&limit=100000", "limit"),
        ("type=dns&filter=nobody", "filter"),
        ("type=dns&from=-1h&to=-2h", "to"),
        ("type=dns&sort=asc", "sort"),
    ] {
        let (code, v) = api(query);
        assert_eq!(
            (code, v["parameter"].as_str()),
            (400, Some(parameter)),
            "{query}: {v}"
        );
    }
    let (code, doc) = get(&served.url("/api/v1/openapi.json"), &auth);
    let doc: Value = serde_json::from_slice(&doc).unwrap();
    assert!(code == 200 && doc["paths"].get("/api/v1/logs").is_some());
    let (code, _) = get(&served.url("/api/v1/logs?type=dns"), &[]);
    assert_eq!(code, 401, "the logs are behind the token");
    let (status, stderr) = served.stop();
    assert!(status.success(), "{stderr}");
}
