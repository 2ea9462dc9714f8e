//! Hourly logs (issue 23): the `hourly_writer` of `trawl run --logs DIR` puts each line into the
//! file of its own UTC hour (`DIR/dns-YYYY-MM-DDTHH.jsonl`), closes a file once its hour is
//! over, appends a late line to the closed file, and deletes whole old hours (retention). An
//! hour cannot be waited for: a capture whose packets are stamped hours apart (one DNS
//! exchange copied to chosen times) goes through the same blocks in a composition
//! (`pcap_source` → `dns_log` → `hourly_writer`), as a live run's packets would.
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{summary, testdata, trawl};

pub(crate) const HOUR_NS: u64 = 3_600 * 1_000_000_000;

/// A pcap (microseconds, little-endian) holding the packets of `capture` (a classic pcap
/// with microsecond stamps) copied once per time in `starts`: each copy's packets keep their
/// offsets from the capture's first packet.
pub(crate) fn restamped(capture: &str, starts: &[u64], out: &Path) {
    let bytes = std::fs::read(capture).unwrap();
    assert_eq!(
        &bytes[..4],
        &[0xd4, 0xc3, 0xb2, 0xa1],
        "{capture}: µs, little-endian"
    );
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    // (offset from the first packet in µs, the record's length fields and data)
    let mut packets: Vec<(u64, &[u8])> = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let us = u64::from(u32_at(at)) * 1_000_000 + u64::from(u32_at(at + 4));
        let caplen = u32_at(at + 8) as usize;
        packets.push((us, &bytes[at + 8..at + 16 + caplen]));
        at += 16 + caplen;
    }
    let first = packets[0].0;
    let mut pcap = bytes[..24].to_vec();
    for &start in starts {
        for (us, rest) in &packets {
            let t = start / 1_000 + (us - first);
            pcap.extend_from_slice(&((t / 1_000_000) as u32).to_le_bytes());
            pcap.extend_from_slice(&((t % 1_000_000) as u32).to_le_bytes());
            pcap.extend_from_slice(rest);
        }
    }
    std::fs::write(out, pcap).unwrap();
}

/// A composition reading `capture` into `dns_log` and an `hourly_writer` into `dir`.
fn composition(at: &Path, capture: &Path, dir: &Path, retention: Option<&str>) -> PathBuf {
    let retention = retention.map_or(String::new(), |r| format!("retention = \"{r}\""));
    let text = format!(
        r#"
        [[block]]
        name = "files"
        type = "pcap_source"
        files = ["{capture}"]

        [[block]]
        name = "dns"
        type = "dns_log"

        [[block]]
        name = "dns_out"
        type = "hourly_writer"
        dir = "{dir}"
        prefix = "dns"
        {retention}

        [[connection]]
        from = "files.packets"
        to = "dns.packets"

        [[connection]]
        from = "dns.events"
        to = "dns_out.events"
        "#,
        capture = capture.display(),
        dir = dir.display(),
    );
    let path = at.join("comp.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The `ts_ns` of each line of `path`.
fn times(path: &Path) -> Vec<u64> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["ts_ns"]
                .as_u64()
                .unwrap()
        })
        .collect()
}

/// `YYYY-MM-DDTHH` of an instant, computed apart from trawl's code (by `date`).
fn hour_name(ns: u64) -> String {
    let out = std::process::Command::new("date")
        .args([
            "-u",
            "-d",
            &format!("@{}", ns / 1_000_000_000),
            "+%Y-%m-%dT%H",
        ])
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn run_logs_rotate_by_the_hour_of_each_line_and_old_hours_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    // Hours before now (retention counts from the clock): the exchange at the end of hour H,
    // in H+1, in H+2, then once more late for H (its file closed by then: H+2 is past H+1's
    // end plus the 5 minutes late lines are waited for).
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let h = now - now % HOUR_NS - 4 * HOUR_NS;
    let starts = [
        h + HOUR_NS - 1_000_000_000,
        h + HOUR_NS + 1_800 * 1_000_000_000,
        h + 2 * HOUR_NS + 600 * 1_000_000_000,
        h + HOUR_NS - 2_000_000_000,
    ];
    let capture = dir.path().join("hours.pcap");
    restamped(&testdata("app/dns/arkime--dns-mx.pcap"), &starts, &capture);
    // A file of an hour long gone, and one of another log type: retention takes the first.
    let old = logs.join(format!("dns-{}.jsonl", hour_name(h - 30 * HOUR_NS)));
    let other = logs.join(format!("tls-{}.jsonl", hour_name(h - 30 * HOUR_NS)));
    std::fs::write(&old, "{}\n").unwrap();
    std::fs::write(&other, "{}\n").unwrap();

    let comp = composition(dir.path(), &capture, &logs, Some("1d"));
    let out = trawl(&["run", "-c", comp.to_str().unwrap(), "--summary", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let file = |ns: u64| logs.join(format!("dns-{}.jsonl", hour_name(ns)));
    let mut want_h = vec![starts[0], starts[3]];
    want_h.sort_unstable();
    let mut got_h = times(&file(h));
    got_h.sort_unstable();
    assert_eq!(got_h, want_h, "hour H: its line and the late one");
    assert_eq!(times(&file(h + HOUR_NS)), [starts[1]]);
    assert_eq!(times(&file(h + 2 * HOUR_NS)), [starts[2]]);
    assert!(!old.exists(), "retention deleted the old hour");
    assert!(other.exists(), "another prefix is not this writer's");
    let mut names: Vec<String> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names.len(), 4, "{names:?}");

    // H closed while H+2's line was written; the late line reopened it.
    let s = summary(&out);
    let writer = s["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "dns_out")
        .unwrap()
        .clone();
    let counter = |name: &str| {
        writer["counters"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c[0] == name)
            .and_then(|c| c[1].as_u64())
    };
    assert_eq!(counter("files_reopened"), Some(1), "{writer}");
    assert_eq!(counter("files_closed"), Some(4), "{writer}");
    assert_eq!(counter("retention_files_deleted"), Some(1), "{writer}");
}

/// The lines in the hourly DNS files of `dir` (`.1` files, logrotate's, left out).
fn hourly_lines(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| std::fs::read_to_string(p).unwrap().lines().count())
        .sum()
}

/// Polls until the hourly DNS files of `dir` hold `n` lines.
fn wait_lines(dir: &Path, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !dir.exists() || hourly_lines(dir) < n {
        assert!(std::time::Instant::now() < deadline, "{n} lines never came");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// logrotate's way on a live monitor: the hour's file renamed, SIGHUP; the lines of before
/// are in the renamed file, those of after in a new file at the path, none lost or doubled.
#[test]
fn run_logs_reopen_their_hour_files_on_sighup() {
    use std::process::Command;
    let lab = super::live::lab();
    let dir = tempfile::tempdir().unwrap();
    let logs = dir.path().join("logs");
    let child = super::live::trawl_live(&[
        "run",
        "-i",
        &lab.host,
        "--no-ring",
        "--summary",
        "json",
        "--logs",
        logs.to_str().unwrap(),
        "--analyze",
        "dns",
    ]);
    let signal = |sig: &str| {
        let ok = Command::new("kill")
            .args([sig, &child.id().to_string()])
            .status()
            .unwrap()
            .success();
        assert!(ok);
    };
    std::thread::sleep(std::time::Duration::from_millis(700));
    // 5 exchanges, then 10.
    let first = testdata("app/dns/debian--dns_icmp.pcap");
    let second = testdata("app/dns/ndpi--dns_ambiguous_names.pcap");
    lab.replay_into_host(Path::new(&first), &["--topspeed"])
        .expect("replay");
    wait_lines(&logs, 5);
    let mut rotated = Vec::new();
    for e in std::fs::read_dir(&logs).unwrap() {
        let path = e.unwrap().path();
        let moved = path.with_extension("jsonl.1");
        std::fs::rename(&path, &moved).unwrap();
        rotated.push(moved);
    }
    signal("-HUP");
    std::thread::sleep(std::time::Duration::from_millis(500));
    lab.replay_into_host(Path::new(&second), &["--topspeed"])
        .expect("replay");
    wait_lines(&logs, 10);
    signal("-INT");
    super::live::wait_json(child);
    let before: usize = rotated
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap().lines().count())
        .sum();
    assert_eq!((before, hourly_lines(&logs)), (5, 10));
}
