//! Issue 20, the probe as a service: what a monitor serves while it runs (each interface's
//! live series; queries that time out stop scanning) and what it stores.
use std::process::Command;
use std::time::{Duration, Instant};

use crate::api::Served;

/// A GET with curl: the status and the body.
fn get(url: &str) -> (u16, Vec<u8>) {
    let body = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "60", "-o"])
        .arg(body.path())
        .args(["-w", "%{http_code}"])
        .arg(url)
        .output()
        .expect("curl (scripts/deps.sh installs it)");
    let code = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    assert!(
        code != 0,
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, std::fs::read(body.path()).unwrap())
}

fn get_json(url: &str) -> serde_json::Value {
    let (code, body) = get(url);
    assert_eq!(code, 200, "{url}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{url}: not JSON: {e}"))
}

fn trawl_ok(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .output()
        .expect("run trawl");
    assert!(
        out.status.success(),
        "trawl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The packets of an answer's rows.
fn packets(rows: &[serde_json::Value]) -> u64 {
    rows.iter().map(|r| r["packets"].as_u64().unwrap()).sum()
}

/// Issue 20: a monitor of two interfaces serves each one's own live rows in
/// `/api/v1/series` (`iface=` selects one; without it, each interface's rows, not their sum),
/// and they are the rows it stores for that interface.
#[test]
fn issue_20_live_series_of_two_interfaces_are_each_ones_own_and_the_stored_ones() {
    let (a, b) = (crate::live::lab(), crate::live::lab());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let served = Served::start_with(
        Command::new(env!("CARGO_BIN_EXE_trawl")).args([
            "run",
            "-i",
            &a.host,
            "-i",
            &b.host,
            "--no-ring",
            "--db",
            db.to_str().unwrap(),
            "--api",
            "127.0.0.1:0",
            "--duration",
            "60s",
        ]),
        "HTTP API on ",
        "http://",
    );
    let file = crate::live::pcap("android.pcap");
    assert_eq!(a.replay_into_host(&file, &["--topspeed"]).unwrap(), 500);
    assert_eq!(
        b.replay_into_host(&file, &["--topspeed", "--limit", "200"])
            .unwrap(),
        200
    );
    let rows_of = |query: &str| -> Vec<serde_json::Value> {
        get_json(&served.url(&format!("/api/v1/series{query}")))["rows"]
            .as_array()
            .unwrap()
            .clone()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let (rows_a, rows_b, all) = loop {
        let (ra, rb) = (
            rows_of(&format!("?iface={}", a.host)),
            rows_of(&format!("?iface={}", b.host)),
        );
        if packets(&ra) == 500 && packets(&rb) == 200 {
            break (ra, rb, rows_of(""));
        }
        assert!(
            Instant::now() < deadline,
            "{} and {} packets in the rows of {} and {}: {:?}",
            packets(&ra),
            packets(&rb),
            a.host,
            b.host,
            rows_of("")
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(rows_a.iter().all(|r| r["iface"] == a.host.as_str()));
    assert!(rows_b.iter().all(|r| r["iface"] == b.host.as_str()));
    // Without `iface`: both interfaces' rows, each under its name (the traffic is over, so
    // the same rows as asked one by one).
    let named = |host: &str| -> Vec<serde_json::Value> {
        all.iter().filter(|r| r["iface"] == host).cloned().collect()
    };
    assert_eq!(named(&a.host), rows_a);
    assert_eq!(named(&b.host), rows_b);
    assert_eq!(all.len(), rows_a.len() + rows_b.len(), "{all:?}");
    let (status, stderr) = served.stop();
    assert!(status.success(), "{stderr}");
    // Each interface's live rows are the rows stored for it.
    for (host, live) in [(&a.host, &rows_a), (&b.host, &rows_b)] {
        let stored: Vec<serde_json::Value> = trawl_ok(&[
            "series",
            "-d",
            db.to_str().unwrap(),
            "-i",
            host,
            "--format",
            "json",
        ])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
        assert!(!live.is_empty());
        for row in live {
            let mut r = row.clone();
            let o = r.as_object_mut().unwrap();
            o.remove("iface");
            assert_eq!(o.remove("source").unwrap(), "live");
            assert!(stored.contains(&r), "{host}: {r} is not stored: {stored:?}");
        }
    }
}
