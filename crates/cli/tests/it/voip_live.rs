//! `trawl run --voip DIR` (issue 24): the SIPp call of `voip_sipp` captured live by the
//! monitor gives the calls and streams `trawl voip -r` finds in dumpcap's capture of the same
//! traffic; a call still in progress when the monitor stops is written as `shutdown`.
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::api::{get_json, Served};
use super::voip_sipp::{capture, jsonl, stop, voip, SippLab};

/// Every record of `DIR/NAME-*.jsonl` (the monitor's daily files), in file order.
fn daily_records(dir: &Path, name: &str) -> Vec<Value> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let f = p.file_name().unwrap().to_string_lossy();
            f.starts_with(&format!("{name}-")) && f.ends_with(".jsonl")
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no {name}-YYYY-MM-DD.jsonl in {dir:?}");
    files.iter().flat_map(|f| jsonl(f)).collect()
}

/// Lines in `DIR/NAME-*.jsonl` so far (none when there are no such files yet).
fn count_lines(dir: &Path, name: &str) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("{name}-"))
        })
        .map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .lines()
                .count()
        })
        .sum()
}

/// The fields a live capture and a capture file of the same packets agree on (times may
/// differ by the two sockets' timestamps, so those are left out; durations are compared
/// to the millisecond).
fn call_key(c: &Value) -> String {
    let fields = [
        "call_id",
        "from",
        "to",
        "caller",
        "callee",
        "status",
        "end_reason",
        "streams",
        "rtp_packets",
    ];
    let mut key: Vec<String> = fields.iter().map(|f| c[*f].to_string()).collect();
    key.push(format!("{:.0}", c["duration_ms"].as_f64().unwrap()));
    key.join(" ")
}

fn stream_key(s: &Value) -> String {
    let fields = [
        "call_id",
        "src_ip",
        "src_port",
        "dst_ip",
        "dst_port",
        "ssrc",
        "codec",
        "packets",
        "bytes",
        "lost",
        "duplicated",
        "out_of_order",
    ];
    let key: Vec<String> = fields.iter().map(|f| s[*f].to_string()).collect();
    key.join(" ")
}

fn sorted(records: &[Value], key: fn(&Value) -> String) -> Vec<String> {
    let mut keys: Vec<String> = records.iter().map(key).collect();
    keys.sort();
    keys
}

#[test]
fn voip_live_run_finds_the_calls_trawl_voip_finds_in_a_capture_of_them() {
    let sipp = SippLab::new();
    let (lab, dir) = (&sipp.lab, sipp.dir.path());
    let out = dir.join("voip");
    let monitor = Served::start_with(
        Command::new(env!("CARGO_BIN_EXE_trawl")).args([
            "run",
            "-i",
            &lab.host,
            "--no-ring",
            "--voip",
            out.to_str().unwrap(),
            "--api",
            "127.0.0.1:0",
            "--summary",
            "json",
        ]),
        "HTTP API on ",
        "http://",
    );
    // Its socket opens as the composition starts; give it a moment (as the live tests do).
    std::thread::sleep(Duration::from_millis(700));
    let cap = dir.join("calls.pcap");
    let dumpcap = capture(&lab.host, &cap);
    sipp.call(1);
    stop(dumpcap);

    // Written as it ends (BYE, then the table's 2 s linger on the wall clock once packets
    // stop), not only when the monitor stops.
    let deadline = Instant::now() + Duration::from_secs(10);
    while count_lines(&out, "calls") == 0 {
        assert!(Instant::now() < deadline, "the ended call was not written");
        std::thread::sleep(Duration::from_millis(100));
    }

    // The same call again up to its BYE (replayed): in progress when the monitor stops.
    let bye = Command::new("tshark")
        .args([
            "-Y",
            "sip.Method == \"BYE\"",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-r",
        ])
        .arg(&cap)
        .output()
        .unwrap();
    let bye: u64 = String::from_utf8_lossy(&bye.stdout)
        .lines()
        .next()
        .expect("a BYE in the capture")
        .parse()
        .unwrap();
    let unended = dir.join("unended.pcap");
    let ok = Command::new("editcap")
        .args(["-r"])
        .arg(&cap)
        .arg(&unended)
        .arg(format!("1-{}", bye - 1))
        .status()
        .unwrap();
    assert!(ok.success());
    lab.replay_into_host(&unended, &["--topspeed"])
        .expect("tcpreplay");
    // The API: the replayed call in progress (sent every second), the first one finished.
    let deadline = Instant::now() + Duration::from_secs(5);
    let active = loop {
        let answer = get_json(&monitor.url("/api/v1/calls?active=1"));
        let calls = answer["calls"].as_array().unwrap().clone();
        if !calls.is_empty() || Instant::now() > deadline {
            break calls;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let finished = get_json(&monitor.url("/api/v1/calls"));
    let (status, stderr) = monitor.stop();
    assert!(status.success(), "{stderr}");
    let summary = stderr.lines().last().unwrap_or_default().to_string();

    let (want_calls, want_streams) = voip(&cap, &dir.join("file"));
    assert_eq!(want_calls.len(), 1, "{want_calls:#?}");
    let calls = daily_records(&out, "calls");
    let streams = daily_records(&out, "rtp");
    assert_eq!(calls.len(), 2, "{calls:#?}\n{summary}");
    assert_eq!(
        sorted(&calls[..1], call_key),
        sorted(&want_calls, call_key),
        "{summary}"
    );
    let (first, again): (Vec<Value>, Vec<Value>) = streams
        .into_iter()
        .partition(|s| s["last_ns"].as_u64() <= calls[0]["end_ns"].as_u64());
    assert_eq!(
        sorted(&first, stream_key),
        sorted(&want_streams, stream_key)
    );
    // The replayed call: answered, its streams measured, ended by the monitor's stop.
    let open = &calls[1];
    assert_eq!(open["call_id"], want_calls[0]["call_id"]);
    assert_eq!(open["end_reason"], "shutdown", "{open}");
    assert_eq!(open["status"], 200, "{open}");
    assert!(
        !again.is_empty() && open["streams"] == again.len(),
        "{open}"
    );

    assert_eq!(active.len(), 1, "{active:#?}");
    assert_eq!(active[0]["call_id"], open["call_id"]);
    assert_eq!(active[0]["end_reason"], "active");
    assert_eq!(active[0]["invite_ns"], open["invite_ns"]);
    assert_eq!(finished["calls"].as_array().unwrap(), &calls[..1]);
}
