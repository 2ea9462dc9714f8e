//! `trawl run -i IFACE --logs DIR --analyze ...` (issue 23): the analysers of `trawl logs` on
//! live capture, through the same blocks (`plan::logs`). Captures with TLS and HTTP are replayed
//! into a veth pair; the live logs equal `trawl logs -r` of the same files but for the times
//! (live replay stamps packets anew).
use std::path::Path;

use serde_json::Value;

use super::live::{lab, trawl_live, wait_json};
use super::{testdata, trawl};

/// The lines of `path` without the packet times, sorted.
fn timeless(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut v: Vec<String> = text
        .lines()
        .map(|l| {
            let mut j: Value = serde_json::from_str(l).unwrap();
            let o = j.as_object_mut().unwrap();
            for k in ["ts_ns", "first_ns", "rtt_ns"] {
                o.remove(k);
            }
            j.to_string()
        })
        .collect();
    v.sort();
    v
}

/// The hourly files of `prefix` in `dir` (`PREFIX-YYYY-MM-DDTHH.jsonl`).
fn hour_files(dir: &Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_str().unwrap();
            name.len() == prefix.len() + 20
                && name.starts_with(&format!("{prefix}-"))
                && name.ends_with(".jsonl")
        })
        .collect();
    files.sort();
    files
}

/// `trawl logs -r` of `captures` into `out`, TLS and HTTP.
fn file_logs(captures: &[String], out: &Path) {
    let mut args = vec!["logs", "-o", out.to_str().unwrap(), "--analyze", "tls,http"];
    for c in captures {
        args.extend(["-r", c.as_str()]);
    }
    let out = trawl(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn run_logs_equal_the_logs_of_the_replayed_files() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let live_dir = dir.path().join("live");
    let captures = [
        testdata("app/tls/arkime--curl-enabled-tls13.pcap"),
        testdata("app/http/arkime--http-301-get.pcap"),
    ];
    let run = trawl_live(&[
        "run",
        "-i",
        &lab.host,
        "--no-ring",
        "--duration",
        "3s",
        "--summary",
        "json",
        "--logs",
        live_dir.to_str().unwrap(),
        "--analyze",
        "tls,http",
    ]);
    // The sockets open before the first poll: a short pause is enough.
    std::thread::sleep(std::time::Duration::from_millis(700));
    for c in &captures {
        lab.replay_into_host(Path::new(c), &["--topspeed"])
            .expect("replay");
    }
    wait_json(run);

    let file_dir = dir.path().join("files");
    file_logs(&captures, &file_dir);
    for name in ["tls", "http"] {
        let want = timeless(&file_dir.join(format!("{name}.jsonl")));
        assert!(!want.is_empty(), "{name}: the files have lines");
        // Live, the lines are in the files of their hours (two if the run crossed one).
        let mut got = Vec::new();
        for f in hour_files(&live_dir, name) {
            got.extend(timeless(&f));
        }
        got.sort();
        assert_eq!(got, want, "{name}");
    }
    // Not asked for: not written.
    assert!(hour_files(&live_dir, "dns").is_empty());
    assert!(!file_dir.join("dns.jsonl").exists());
}

/// `trawl flows -i IFACE --workers 2 --logs DIR`: each capture worker's analysers, the one file
/// per analyser of a command (not hourly), equal to `trawl logs -r` of the replayed files but
/// for the times; the records are written beside them.
#[test]
fn flows_live_logs_equal_the_logs_of_the_replayed_files() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let live_dir = dir.path().join("live");
    let records = dir.path().join("flows.jsonl");
    let captures = [
        testdata("app/tls/arkime--curl-enabled-tls13.pcap"),
        testdata("app/http/arkime--http-301-get.pcap"),
    ];
    let run = trawl_live(&[
        "flows",
        "-i",
        &lab.host,
        "--workers",
        "2",
        "--duration",
        "3s",
        "--summary",
        "json",
        "-o",
        records.to_str().unwrap(),
        "--logs",
        live_dir.to_str().unwrap(),
        "--analyze",
        "tls,http",
    ]);
    std::thread::sleep(std::time::Duration::from_millis(700));
    for c in &captures {
        lab.replay_into_host(Path::new(c), &["--topspeed"])
            .expect("replay");
    }
    let (_, summary) = wait_json(run);
    let file_dir = dir.path().join("files");
    file_logs(&captures, &file_dir);
    for name in ["tls", "http"] {
        let want = timeless(&file_dir.join(format!("{name}.jsonl")));
        let got = timeless(&live_dir.join(format!("{name}.jsonl")));
        assert!(!want.is_empty(), "{name}: the files have lines");
        assert_eq!(got, want, "{name}");
        assert_eq!(
            summary["logs"]["lines"][name].as_u64(),
            Some(want.len() as u64)
        );
    }
    assert!(!live_dir.join("dns.jsonl").exists());
    let flows = std::fs::read_to_string(&records).unwrap();
    assert!(flows.lines().count() >= 2, "{flows}");
}
