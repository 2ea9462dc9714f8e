//! Times in and out (issue 19): every command that takes a time (`query`, `packets`,
//! `subscribe`) takes the same forms through one parser (RFC 3339, local wall-clock times in
//! `TZ`, epoch s/ms/us/ns, relative), and tables show RFC 3339 times, UTC or `--local`.
//! `date` (coreutils, its own zone code) is the oracle for wall-clock times.
//! <https://github.com/trawl/trawl/issues/19>
use std::process::{Command, Output};

use serde_json::Value;

use super::{ok, testdata};

const NS: u64 = 1_000_000_000;
/// 13 flows over 25 minutes (six 5-minute blocks), with quiet minutes between them.
const CAPTURE: &str = "oracle/sip.pcap";

fn trawl_tz(tz: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .env("TZ", tz)
        .args(args)
        .output()
        .expect("run trawl")
}

/// `date` formatting the instant `secs` in the zone `tz`.
fn date(tz: &str, secs: u64, format: &str) -> String {
    let out = Command::new("date")
        .env("TZ", tz)
        .args(["-d", &format!("@{secs}"), format])
        .output()
        .expect("run date");
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Every form naming the instant `secs`, with the `TZ` to read it in. The relative forms are
/// counted from now, so they name `secs` within the second or two a run takes: callers pick
/// instants with no packet near them.
fn forms(secs: u64) -> Vec<(String, &'static str)> {
    let ago = now_secs() - secs;
    vec![
        (date("UTC", secs, "+%Y-%m-%dT%H:%M:%SZ"), "UTC"),
        (
            date("Asia/Kolkata", secs, "+%Y-%m-%dT%H:%M:%S%:z"),
            "Europe/Berlin",
        ),
        (date("UTC", secs, "+%Y-%m-%d %H:%M:%S"), "UTC"),
        (
            date("Europe/Berlin", secs, "+%Y-%m-%d %H:%M:%S"),
            "Europe/Berlin",
        ),
        (
            date("America/New_York", secs, "+%Y-%m-%d %H:%M:%S"),
            "America/New_York",
        ),
        (secs.to_string(), "Asia/Kolkata"),
        ((secs * 1_000).to_string(), "UTC"),
        ((secs * 1_000_000).to_string(), "UTC"),
        ((secs * NS).to_string(), "UTC"),
        (format!("-{ago}s"), "UTC"),
        (format!("{ago}s ago"), "Europe/Berlin"),
        (format!("-{}d{}s", ago / 86_400, ago % 86_400), "UTC"),
    ]
}

/// Flow records (first, last ns) of the capture.
fn flow_times() -> Vec<(u64, u64)> {
    let out = ok(trawl_tz(
        "UTC",
        &["flows", "-r", &testdata(CAPTURE), "--summary", "none"],
    ));
    let mut v: Vec<(u64, u64)> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            (
                r["first_ns"].as_u64().unwrap(),
                r["last_ns"].as_u64().unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Two whole seconds in the middle of the two longest spans without a packet: a window
/// between them holds some packets and not all, and a second's drift moves no boundary
/// across a packet.
fn quiet_window() -> (u64, u64) {
    let flows = flow_times();
    let mut gaps: Vec<(u64, u64)> = Vec::new();
    let mut end = flows[0].1;
    for &(first, last) in &flows[1..] {
        if first > end {
            gaps.push((end, first));
        }
        end = end.max(last);
    }
    gaps.sort_by_key(|(a, b)| std::cmp::Reverse(b - a));
    assert!(
        gaps.len() >= 2 && gaps[1].1 - gaps[1].0 > 20 * NS,
        "{gaps:?}"
    );
    let mut mids: Vec<u64> = gaps[..2].iter().map(|(a, b)| (a + b) / 2 / NS).collect();
    mids.sort();
    (mids[0], mids[1])
}

/// Runs `run(from, to, tz)` with every form of the window's ends; all must agree with the
/// RFC 3339 one, which must differ from the unbounded result.
fn every_form_selects_the_same(
    window: (u64, u64),
    unbounded: &str,
    run: &dyn Fn(&str, &str, &str) -> String,
) {
    let from = forms(window.0);
    let to = forms(window.1);
    let want = run(&from[0].0, &to[0].0, "UTC");
    assert_ne!(want, unbounded, "the window selects");
    for ((f, tz), (t, _)) in from.iter().zip(&to) {
        assert_eq!(run(f, t, tz), want, "--from {f:?} --to {t:?} with TZ={tz}");
    }
}

#[test]
fn query_takes_every_time_form() {
    let db = tempfile::tempdir().unwrap();
    let dbs = db.path().to_str().unwrap();
    ok(trawl_tz(
        "UTC",
        &["ingest", "-r", &testdata(CAPTURE), "--db", dbs, "-i", "x"],
    ));
    // Blocks are whole 5 minutes: ends in the middle of a block are safe from drift.
    let (a, b) = quiet_window();
    let mid = |s: u64| s - s % 300 + 150;
    let query = |from: &str, to: &str, tz: &str| -> String {
        let mut args = vec![
            "query",
            "-d",
            dbs,
            "time,src_ip",
            "--format",
            "csv",
            "--limit",
            "0",
        ];
        if !from.is_empty() {
            args.extend(["--from", from, "--to", to]);
        }
        String::from_utf8(ok(trawl_tz(tz, &args)).stdout).unwrap()
    };
    every_form_selects_the_same((mid(a), mid(b)), &query("", "", "UTC"), &query);
}

#[test]
fn packets_takes_every_time_form() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store = store.to_str().unwrap();
    ok(trawl_tz(
        "UTC",
        &["dump", "-r", &testdata(CAPTURE), "-w", store],
    ));
    let out = dir.path().join("out.pcap");
    let packets = |from: &str, to: &str, tz: &str| -> String {
        let mut args = vec!["packets", "-r", store, "-w", out.to_str().unwrap()];
        if !from.is_empty() {
            args.extend(["--from", from, "--to", to]);
        }
        ok(trawl_tz(tz, &args));
        let bytes = std::fs::read(&out).unwrap();
        format!("{} bytes, {:x?}", bytes.len(), &bytes[bytes.len() - 16..])
    };
    every_form_selects_the_same(quiet_window(), &packets("", "", "UTC"), &packets);
}

#[test]
fn subscribe_takes_every_time_form() {
    let db = tempfile::tempdir().unwrap();
    let dbs = db.path().to_str().unwrap();
    ok(trawl_tz(
        "UTC",
        &["ingest", "-r", &testdata(CAPTURE), "--db", dbs, "-i", "x"],
    ));
    let subscribe = |from: &str, to: &str, tz: &str| -> String {
        let mut args = vec!["subscribe", "flows", "--db", dbs];
        if !from.is_empty() {
            args.extend(["--from", from, "--to", to]);
        }
        String::from_utf8(ok(trawl_tz(tz, &args)).stdout).unwrap()
    };
    every_form_selects_the_same(quiet_window(), &subscribe("", "", "UTC"), &subscribe);
}

#[test]
fn tables_show_rfc3339_times_in_utc_or_the_local_zone() {
    let db = tempfile::tempdir().unwrap();
    let dbs = db.path().to_str().unwrap();
    ok(trawl_tz(
        "UTC",
        &["ingest", "-r", &testdata(CAPTURE), "--db", dbs, "-i", "x"],
    ));
    let first = flow_times()[0].0;
    let block = first / NS - first / NS % 300;
    let table = |tz: &str, local: bool| -> String {
        let mut args = vec!["query", "-d", dbs, "time", "--sort", "time", "--limit", "1"];
        if local {
            args.push("--local");
        }
        String::from_utf8(ok(trawl_tz(tz, &args)).stdout).unwrap()
    };
    let utc = date("UTC", block, "+%Y-%m-%dT%H:%M:%SZ");
    let kolkata = date("Asia/Kolkata", block, "+%Y-%m-%dT%H:%M:%S%:z");
    let row = |t: &str| t.lines().nth(1).unwrap().to_string();
    assert!(row(&table("Asia/Kolkata", false)).starts_with(&utc));
    assert!(row(&table("Asia/Kolkata", true)).starts_with(&kolkata));
    // JSON stays in UTC with --local.
    let json = ok(trawl_tz(
        "Asia/Kolkata",
        &[
            "query", "-d", dbs, "time", "--sort", "time", "--limit", "1", "--format", "json",
            "--local",
        ],
    ));
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["rows"][0]["time"], utc.as_str());

    // subscribe's table: the first packet's time with nanoseconds.
    let sub = |local: bool| -> String {
        let mut args = vec![
            "subscribe",
            "flows",
            "--db",
            dbs,
            "--format",
            "table",
            "--count",
            "1",
        ];
        if local {
            args.push("--local");
        }
        String::from_utf8(ok(trawl_tz("America/New_York", &args)).stdout).unwrap()
    };
    let secs = first / NS;
    let frac = format!(".{:09}", first % NS);
    let utc = date("UTC", secs, "+%Y-%m-%dT%H:%M:%S") + &frac + "Z";
    let ny = date("America/New_York", secs, "+%Y-%m-%dT%H:%M:%S")
        + &frac
        + &date("America/New_York", secs, "+%:z");
    assert!(row(&sub(false)).starts_with(&utc), "{}", sub(false));
    assert!(row(&sub(true)).starts_with(&ny), "{}", sub(true));
}

#[test]
fn a_bad_time_names_the_forms() {
    for args in [
        &["query", "-d", "/nonexistent", "--from", "yesterday"][..],
        &[
            "packets",
            "-r",
            "/nonexistent",
            "-w",
            "/dev/null",
            "--to",
            "yesterday",
        ],
        &[
            "subscribe",
            "flows",
            "--db",
            "/nonexistent",
            "--from",
            "yesterday",
        ],
    ] {
        let out = trawl_tz("UTC", args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("ago") && err.contains("2026-11-22 14:00"),
            "{err}"
        );
    }
}

/// The JSON lines `args` print (standard output).
fn json_lines(args: &[&str]) -> Vec<Value> {
    String::from_utf8(ok(trawl_tz("Asia/Kolkata", args)).stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Every command writing records or rows takes `--time-format rfc3339`: the same records with
/// their times as RFC 3339 text in UTC (whatever `TZ` says), the same instants as the ns.
#[test]
fn json_times_are_ns_or_rfc3339_text_under_the_same_names() {
    let android = testdata("pcaps/android.pcap");
    let db = tempfile::tempdir().unwrap();
    let dbs = db.path().to_str().unwrap();
    // An IPFIX file of android.pcap's records, to collect.
    let ipfix = db.path().join("flows.ipfix");
    let ipfix = ipfix.to_str().unwrap();
    let export = format!("ipfix:{ipfix}");
    let to_ipfix = [
        "flows",
        "-r",
        &android,
        "-o",
        "/dev/null",
        "--export",
        &export,
    ];
    ok(trawl_tz("UTC", &to_ipfix));
    ok(trawl_tz(
        "UTC",
        &["ingest", "-r", &testdata(CAPTURE), "--db", dbs],
    ));
    let quiet = ["--summary", "none"];
    let cases: Vec<(Vec<&str>, &[&str])> = vec![
        (vec!["flows", "-r", &android], &["first_ns", "last_ns"]),
        // Through the CLI's own loop (payload bytes are not on the runtime yet).
        (
            vec!["flows", "-r", &android, "--payload-bytes", "4"],
            &["first_ns", "last_ns"],
        ),
        (vec!["series", "-r", &android], &["second"]),
        (vec!["collect", "-r", ipfix], &["first_ns", "last_ns"]),
        (
            vec!["subscribe", "flows", "--db", dbs],
            &["first_ns", "last_ns"],
        ),
        (
            vec!["detect", "heavy-hitters", "-r", &android],
            &["start_ns", "end_ns"],
        ),
    ];
    let mut checked = 0;
    for (args, fields) in cases {
        let with = |extra: &[&str]| {
            let mut a = args.clone();
            if a[0] != "subscribe" && a[0] != "detect" {
                a.extend_from_slice(&quiet);
            }
            a.extend_from_slice(extra);
            json_lines(&a)
        };
        let ns = with(&[]);
        let text = with(&["--time-format", "rfc3339"]);
        assert_eq!(ns.len(), text.len(), "{args:?}");
        assert!(!ns.is_empty(), "{args:?}");
        for (n, t) in ns.iter().zip(&text) {
            for f in fields {
                let scale = if *f == "second" { NS } else { 1 };
                let want = n[f].as_u64().unwrap() * scale;
                let got = t[f].as_str().unwrap_or_else(|| panic!("{args:?} {f}: {t}"));
                assert!(got.ends_with('Z'), "{got}");
                assert_eq!(trawl_time::parse_instant(got, 0).unwrap(), want, "{got}");
                checked += 1;
            }
            // Nothing else changes.
            let mut t = t.clone();
            for f in fields {
                t[f] = n[f].clone();
            }
            assert_eq!(&t, n, "{args:?}");
        }
    }
    // trawl voip's two files: every instant of calls and streams (null when not seen).
    let sip = testdata(CAPTURE);
    let voip = |dir: &str, extra: &[&str]| {
        let out = db.path().join(dir);
        let mut args = vec!["voip", "-r", &sip, "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        ok(trawl_tz("Asia/Kolkata", &args));
        let read = |f: &str| -> Vec<Value> {
            std::fs::read_to_string(out.join(f))
                .unwrap()
                .lines()
                .map(|l| serde_json::from_str(l).unwrap())
                .collect()
        };
        [read("calls.jsonl"), read("rtp.jsonl")]
    };
    let (ns, text) = (voip("ns", &[]), voip("text", &["--time-format", "rfc3339"]));
    for (n, t) in ns.iter().flatten().zip(text.iter().flatten()) {
        for (k, v) in n.as_object().unwrap() {
            match (k.ends_with("_ns"), v.as_u64()) {
                (true, Some(want)) => {
                    let got = t[k].as_str().unwrap();
                    assert_eq!(trawl_time::parse_instant(got, 0).unwrap(), want, "{k}");
                    checked += 1;
                }
                _ => assert_eq!(&t[k], v, "{k}"),
            }
        }
    }
    // One instant against `date`, the independent oracle.
    let first = &json_lines(&["flows", "-r", &android, "--time-format", "rfc3339"])[0];
    let ns = json_lines(&["flows", "-r", &android])[0]["first_ns"]
        .as_u64()
        .unwrap();
    let want = date("UTC", ns / NS, "+%Y-%m-%dT%H:%M:%S") + &format!(".{:09}Z", ns % NS);
    assert_eq!(first["first_ns"], want.as_str());
    assert!(checked > 100, "{checked}");
}
