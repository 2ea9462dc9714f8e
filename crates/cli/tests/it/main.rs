//! The `trawl` binary end to end: outputs parse, summaries add up, errors say what and where,
//! exit codes are the documented ones.
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn trawl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .output()
        .expect("run trawl")
}

fn testdata(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

fn summary(out: &Output) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("summary is not JSON ({e}): {stderr}"))
}

/// `out` of a run that must succeed (its standard error shown when it did not).
fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A path as the argument text of a command.
fn s(p: &std::path::Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn flows_json_records_add_up_to_the_summary() {
    let sample = testdata("oracle/many-protocols.pcap.gz");
    let out = trawl(&["flows", "-r", &sample, "--summary", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = summary(&out);
    let records: Vec<serde_json::Value> = String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is a JSON object"))
        .collect();
    assert_eq!(records.len() as u64, s["records"].as_u64().unwrap());
    let packets: u64 = records
        .iter()
        .map(|r| r["fwd_packets"].as_u64().unwrap() + r["rev_packets"].as_u64().unwrap())
        .sum();
    let d = &s["decode"];
    let keyed = d["ok"].as_u64().unwrap()
        + d["transport_incomplete"].as_u64().unwrap()
        + d["fragment"].as_u64().unwrap();
    assert_eq!(packets, keyed);
    assert_eq!(s["packets"], s["packets_read"]);
    assert!(records
        .iter()
        .any(|r| r["proto"] == "tcp" && r["dst_port"] == 80));
}

#[test]
fn csv_has_one_header_and_equal_width_rows() {
    let out = trawl(&[
        "flows",
        "-r",
        &testdata("oracle/tls13.pcap"),
        "--format",
        "csv",
        "--summary",
        "none",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(header.starts_with("src_ip,dst_ip,src_port,dst_port,proto,"));
    let width = header.split(',').count();
    for l in lines {
        assert_eq!(l.split(',').count(), width, "{l}");
    }
}

#[test]
fn filter_selects_packets_and_bad_filter_is_a_usage_error() {
    let sample = testdata("oracle/many-protocols.pcap.gz");
    let out = trawl(&[
        "flows",
        "-r",
        &sample,
        "-f",
        "udp port 53",
        "--summary",
        "json",
    ]);
    assert!(out.status.success());
    let s = summary(&out);
    assert!(s["filter_rejected"].as_u64().unwrap() > 0);
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["proto"], "udp");
        assert!(r["src_port"] == 53 || r["dst_port"] == 53, "{r}");
    }
    let bad = trawl(&["flows", "-r", &sample, "-f", "tcp port"]);
    assert_eq!(bad.status.code(), Some(2));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(
        err.contains("syntax error") && err.contains("tcp port"),
        "{err}"
    );
}

#[test]
fn unreadable_input_is_reported_and_the_rest_is_processed() {
    let out = trawl(&[
        "flows",
        "-r",
        "/nonexistent/trace.pcap",
        "-r",
        &testdata("pcaps/test_damaged.pcap"),
        "-r",
        &testdata("oracle/tls13.pcap"),
        "--summary",
        "json",
        "-o",
        "/dev/null",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let s = summary(&out);
    assert_eq!(s["files_failed"], 1);
    assert_eq!(s["files_read"], 2);
    let errors: Vec<&str> = s["input_errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("/nonexistent/trace.pcap"));
    assert!(
        errors[1].contains("test_damaged.pcap") && errors[1].contains("offset"),
        "{errors:?}"
    );
    // tls13.pcap's six packets were still metered after the broken files.
    assert!(s["packets"].as_u64().unwrap() >= 6);
}

#[test]
fn standard_input_and_series() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["series", "-r", "-", "--format", "csv", "--summary", "json"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let bytes = std::fs::read(testdata("oracle/wireshark-retrans.pcap")).unwrap();
    child.stdin.take().unwrap().write_all(&bytes).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let rows: Vec<Vec<u64>> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    // 108 packets in one TCP connection over 31 seconds: dense rows, packets add up, the
    // connection is new exactly once.
    assert_eq!(rows.iter().map(|r| r[1]).sum::<u64>(), 108);
    assert_eq!(rows.iter().map(|r| r[4]).sum::<u64>(), 1);
    assert!(rows.windows(2).all(|w| w[1][0] == w[0][0] + 1));
    assert_eq!(
        summary(&out)["series_rows"].as_u64().unwrap(),
        rows.len() as u64
    );
}

#[test]
fn closed_pipe_ends_quietly() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args([
            "flows",
            "-r",
            &testdata("oracle/1kxun.pcap.gz"),
            "--summary",
            "none",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read one line, then hang up.
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    let _ = std::io::Read::read(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn files_given_out_of_time_order_are_read_in_time_order() {
    // tls13.pcap is from 2017, wireshark-retrans.pcap from 2009: given in that order they are
    // still read as one stream in packet time, the 2009 flow first (closed by idle time when
    // the 2017 packets come, eight years later), exactly as the file mergecap makes of them.
    let (late, early) = (
        testdata("oracle/tls13.pcap"),
        testdata("oracle/wireshark-retrans.pcap"),
    );
    let out = trawl(&["flows", "-r", &late, "-r", &early, "--summary", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = summary(&out);
    assert_eq!(s["files_read"], 2);
    assert_eq!(s["records"], 2);
    assert_eq!(s["packets"], 114);
    let dir = scratch_dir("merge-order");
    let merged = dir.join("merged.pcap");
    mergecap(&merged, &[&early, &late]);
    let one = trawl(&["flows", "-r", merged.to_str().unwrap(), "--summary", "none"]);
    assert!(one.status.success());
    assert!(!out.stdout.is_empty());
    assert!(
        out.stdout == one.stdout,
        "records differ from the mergecap file's"
    );
    let first: serde_json::Value = serde_json::from_str(
        std::str::from_utf8(&out.stdout)
            .unwrap()
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert!(
        first["first_ns"].as_u64().unwrap() < 1_300_000_000_000_000_000,
        "{first}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A fresh directory for one test's files.
fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("trawl-it-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Merges capture files with Wireshark's mergecap (the independent oracle of merging). On
/// equal times mergecap takes the packet of the file named last, so callers name files in
/// the reverse of trawl's order, which takes the file named first.
fn mergecap(out: &std::path::Path, inputs: &[&str]) {
    let status = Command::new("mergecap")
        .args(["-F", "pcap", "-w"])
        .arg(out)
        .args(inputs)
        .status()
        .expect("mergecap is required (scripts/deps.sh installs tshark and wireshark-common)");
    assert!(status.success());
}

/// Splits a capture with a tshark display filter into a pcap file.
fn tshark_split(input: &str, display_filter: &str, out: &std::path::Path) {
    let status = Command::new("tshark")
        .args(["-r", input, "-Y", display_filter, "-F", "pcap", "-w"])
        .arg(out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("tshark is required (scripts/deps.sh installs it)");
    assert!(status.success());
}

#[test]
fn several_files_are_merged_by_packet_time() {
    // A capture split into its odd and even frames (as two taps split a link) meters exactly as
    // the file mergecap makes of the two, and every flow's counters equal the original's (the
    // original's 102 runs of equal timestamps can come back in another order, so the early
    // packets' lists may differ; nothing else can). The series is the original's, byte for
    // byte, whichever file is named first.
    let orig = testdata("oracle/many-protocols.pcap.gz");
    let dir = scratch_dir("merge-split");
    let (odd, even) = (dir.join("odd.pcap"), dir.join("even.pcap"));
    tshark_split(&orig, "frame.number % 2 == 1", &odd);
    tshark_split(&orig, "frame.number % 2 == 0", &even);
    let (odd, even) = (odd.to_str().unwrap(), even.to_str().unwrap());
    let merged = dir.join("merged.pcap");
    mergecap(&merged, &[even, odd]);

    let two = trawl(&["flows", "-r", odd, "-r", even, "--summary", "json"]);
    assert!(
        two.status.success(),
        "{}",
        String::from_utf8_lossy(&two.stderr)
    );
    let s = summary(&two);
    assert_eq!(s["files_read"], 2);
    assert_eq!(s["packets"], 4709);
    assert_eq!(s["late_packets"], 0);
    let one = trawl(&["flows", "-r", merged.to_str().unwrap(), "--summary", "none"]);
    assert!(one.status.success());
    assert!(
        two.stdout == one.stdout,
        "records differ from the mergecap file's"
    );
    // A filter (compiled per file) keeps of the merged stream what it keeps of the mergecap
    // file.
    let filtered = |args: &[&str]| {
        let out = trawl(&[&["flows", "-f", "udp", "--summary", "json"], args].concat());
        assert!(out.status.success());
        let s = summary(&out);
        (out.stdout, s["filter_rejected"].as_u64().unwrap())
    };
    let (two_udp, two_rejected) = filtered(&["-r", odd, "-r", even]);
    let (one_udp, one_rejected) = filtered(&["-r", merged.to_str().unwrap()]);
    assert!(!two_udp.is_empty() && two_rejected > 0);
    assert!(
        two_udp == one_udp,
        "filtered records differ from the mergecap file's"
    );
    assert_eq!(two_rejected, one_rejected);

    let counters = |out: &[u8]| -> Vec<String> {
        let mut v: Vec<String> = std::str::from_utf8(out)
            .unwrap()
            .lines()
            .map(|l| {
                let r: serde_json::Value = serde_json::from_str(l).unwrap();
                let f = |k: &str| r[k].to_string();
                [
                    "src_ip",
                    "dst_ip",
                    "src_port",
                    "dst_port",
                    "proto",
                    "first_ns",
                    "last_ns",
                    "fwd_packets",
                    "rev_packets",
                    "fwd_bytes",
                    "rev_bytes",
                    "end_reason",
                ]
                .map(f)
                .join(" ")
            })
            .collect();
        v.sort();
        v
    };
    let original = trawl(&["flows", "-r", &orig, "--summary", "none"]);
    assert_eq!(counters(&two.stdout), counters(&original.stdout));
    assert_eq!(counters(&two.stdout).len(), 258);

    let series = |files: &[&str]| -> Vec<u8> {
        let mut args = vec!["series", "--format", "csv", "--summary", "none"];
        for f in files {
            args.extend(["-r", f]);
        }
        let out = trawl(&args);
        assert!(out.status.success());
        out.stdout
    };
    let want = series(&[&orig]);
    assert!(want.len() > 100);
    assert!(series(&[odd, even]) == want);
    assert!(series(&[even, odd]) == want);

    // The detectors read the same merged stream.
    let detect = |files: &[&str]| -> Vec<u8> {
        let mut args = vec!["detect", "heavy-hitters", "--interval", "1s"];
        for f in files {
            args.extend(["-r", f]);
        }
        let out = trawl(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        out.stdout
    };
    let events = detect(&[merged.to_str().unwrap()]);
    assert!(events.len() > 1000);
    assert!(detect(&[odd, even]) == events);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_file_among_several_is_counted_and_the_rest_merged() {
    let out = trawl(&[
        "flows",
        "-r",
        &testdata("oracle/tls13.pcap"),
        "-r",
        "/nonexistent/x.pcap",
        "-r",
        &testdata("oracle/wireshark-retrans.pcap"),
        "-f",
        "tcp",
        "--summary",
        "json",
        "-o",
        "/dev/null",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let s = summary(&out);
    assert_eq!(s["files_failed"], 1);
    assert_eq!(s["files_read"], 2);
    assert_eq!(s["packets"], 114);
    assert!(
        s["input_errors"][0]
            .as_str()
            .unwrap()
            .contains("/nonexistent/x.pcap"),
        "{s}"
    );
}

#[test]
fn standard_input_is_not_merged_with_other_files() {
    let out = trawl(&["flows", "-r", "-", "-r", &testdata("oracle/tls13.pcap")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("standard input"));
}

#[test]
fn series_splits_directions_where_the_capture_records_them() {
    // pcapng epb_flags: tshark counts 10 inbound frames (9889 bytes) and 9 outbound (754).
    let out = trawl(&[
        "series",
        "-r",
        &testdata("pcaps/mpeg-direction.pcapng"),
        "--format",
        "json",
        "--summary",
        "none",
    ]);
    assert!(out.status.success());
    let (mut inp, mut inb, mut outp, mut outb, mut all) = (0, 0, 0, 0, 0);
    for line in String::from_utf8(out.stdout).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        inp += r["in_packets"].as_u64().unwrap();
        inb += r["in_bytes"].as_u64().unwrap();
        outp += r["out_packets"].as_u64().unwrap();
        outb += r["out_bytes"].as_u64().unwrap();
        all += r["packets"].as_u64().unwrap();
    }
    assert_eq!((inp, inb, outp, outb, all), (10, 9889, 9, 754, 19));
}

/// Rewrites a little-endian µs pcap of BSD loopback frames as a big-endian machine would have
/// written it: every header field big-endian, and the 4-byte address family too (host order).
fn big_endian_copy(little: &[u8]) -> Vec<u8> {
    let u32le = |b: &[u8]| u32::from_le_bytes(b[..4].try_into().unwrap());
    let mut out = Vec::with_capacity(little.len());
    out.extend_from_slice(&0xa1b2_c3d4u32.to_be_bytes());
    out.extend_from_slice(&2u16.to_be_bytes());
    out.extend_from_slice(&4u16.to_be_bytes());
    for field in [8, 12, 16, 20] {
        out.extend_from_slice(&u32le(&little[field..]).to_be_bytes());
    }
    let mut at = 24;
    while at + 16 <= little.len() {
        let caplen = u32le(&little[at + 8..]) as usize;
        for field in [0, 4, 8, 12] {
            out.extend_from_slice(&u32le(&little[at + field..]).to_be_bytes());
        }
        let data = &little[at + 16..at + 16 + caplen];
        out.extend_from_slice(&u32le(data).to_be_bytes());
        out.extend_from_slice(&data[4..]);
        at += 16 + caplen;
    }
    out
}

#[test]
fn filters_on_loopback_follow_the_byte_order_of_the_file() {
    // IPv4 (AF 2), IPv6 (AF 30) and one Ethertype-style header: the big-endian copy of the
    // file must filter exactly like the original. (Without compiling for the file's byte
    // order, this test fails: the program reads the family in the wrong order.)
    let little = testdata("pcaps/null_loopback.pcap");
    let bytes = std::fs::read(&little).unwrap();
    let big = std::env::temp_dir().join(format!("trawl-be-loopback-{}.pcap", std::process::id()));
    std::fs::write(&big, big_endian_copy(&bytes)).unwrap();
    let run = |path: &str, expr: &str| {
        let out = trawl(&[
            "flows",
            "-r",
            path,
            "-f",
            expr,
            "--summary",
            "json",
            "-o",
            "/dev/null",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let s = summary(&out);
        (
            s["packets"].as_u64().unwrap(),
            s["filter_rejected"].as_u64().unwrap(),
            s["records"].as_u64().unwrap(),
        )
    };
    let big = big.to_string_lossy().into_owned();
    for expr in ["ip", "ip6", "udp", "tcp port 443"] {
        assert_eq!(run(&little, expr), run(&big, expr), "filter {expr:?}");
    }
    // And the filters do select: `ip` keeps some packets and drops others.
    let (kept, dropped, _) = run(&little, "ip");
    assert!(kept > 0 && dropped > 0, "{kept} kept, {dropped} dropped");
    std::fs::remove_file(&big).unwrap();
}

#[test]
fn series_of_files_out_of_time_order_are_one_increasing_stream() {
    // tls13.pcap (2017, 6 packets) named before wireshark-retrans.pcap (2009, 108 packets):
    // the 2009 seconds come first, then the 2017 ones; no packet is late.
    let out = trawl(&[
        "series",
        "-r",
        &testdata("oracle/tls13.pcap"),
        "-r",
        &testdata("oracle/wireshark-retrans.pcap"),
        "--format",
        "csv",
        "--summary",
        "json",
    ]);
    assert!(out.status.success());
    let s = summary(&out);
    assert_eq!(s["series_late_packets"], 0);
    let rows: Vec<Vec<u64>> = String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.iter().map(|r| r[1]).sum::<u64>(), 114);
    assert!(rows[0][0] < 1_300_000_000, "{:?}", rows[0]);
    assert!(rows.last().unwrap()[0] > 1_400_000_000);
    assert!(rows.windows(2).all(|w| w[1][0] > w[0][0]));
}

mod anonymize;
mod api;
mod api_logs;
mod app_label;
mod app_live;
mod central;
mod cli;
mod compose;
mod console;
mod depth;
mod detect;
mod dump;
mod enrich;
mod export;
mod features;
mod fields;
mod fleet;
mod http_log;
mod kafka;
mod kafka_batch;
mod live;
mod logs;
mod logs_flows;
mod logs_hourly;
mod logs_live;
mod modules;
mod outputs;
mod progress;
mod query_attrs;
mod quic_log;
mod reload;
mod service;
mod sflow;
mod store;
mod stored;
mod svc;
mod times;
mod tls_cert;
mod tls_hrr;
mod tls_log;
mod tunnels;
mod voip;
mod voip_anomaly;
mod voip_audio;
mod voip_live;
mod voip_lookup;
mod voip_sipp;
mod voip_tcp;
mod workers;

/// Issue 27 item 12: every numeric and duration setting of the meter and the capture has one
/// allowed range, and a value outside it is refused (exit 2) with the range, not accepted
/// (`--active 0s` gave a record per packet) nor clamped (`--payload-bytes` beyond 65535).
#[test]
fn out_of_range_flags_are_refused_with_the_allowed_range() {
    let pcap = testdata("pcaps/android.pcap");
    let file = ["flows", "-r", pcap.as_str()];
    let live = ["flows", "-i", "lo", "--duration", "1s"];
    let cases: &[(&[&str], &[&str], &str)] = &[
        (
            &file,
            &["--idle", "0s"],
            "--idle must be between 1ms and 1d (got 0s)",
        ),
        (
            &file,
            &["--active", "0s"],
            "--active must be between 1ms and 7d (got 0s)",
        ),
        (
            &file,
            &["--tcp-linger", "2h"],
            "--tcp-linger must be between 0s and 1h (got 2h)",
        ),
        (
            &file,
            &["--capacity", "0"],
            "--capacity must be between 1 and 67108862 (got 0)",
        ),
        (
            &file,
            &["--payload-bytes", "99999999999"],
            "--payload-bytes must be between 0 and 65535 (got 99999999999)",
        ),
        (
            &file,
            &["--payload-bytes", "65535"],
            "--payload-bytes must be at most 2048 with a capacity of 4194304 flows",
        ),
        (
            &live,
            &["--snaplen", "10"],
            "--snaplen must be between 64 and 256KiB (got 10)",
        ),
        (
            &live,
            &["--block-size", "5000"],
            "--block-size must be a power of two between 4KiB and 1GiB (got 5000)",
        ),
        (
            &live,
            &["--blocks", "1"],
            "--blocks must be between 2 and 65536 (got 1)",
        ),
        (
            &live,
            &["--workers", "65"],
            "--workers must be between 1 and 64 (got 65)",
        ),
        (
            &["detect", "synflood", "-r", pcap.as_str()],
            &["--interval", "0s"],
            "`interval` must be between 1ms and 1d (got 0s)",
        ),
        (
            &["detect", "heavy-hitters", "-r", pcap.as_str()],
            &["--k", "99999999999"],
            "`k` must be between 1 and 1048576 (got 99999999999)",
        ),
        (
            &["run", "-i", "lo", "--duration", "1s", "--no-ring"],
            &["--stats-interval", "0s"],
            "--stats-interval must be between 100ms and 1d (got 0s)",
        ),
        (
            &["collect", "-r", "/nonexistent.ipfix"],
            &["--max-templates", "0"],
            "--max-templates must be between 1 and 1048576 (got 0)",
        ),
        (
            &["ingest", "-r", pcap.as_str(), "-d", "/nonexistent/db"],
            &["--idle", "0s"],
            "--idle must be between 1ms and 1d (got 0s)",
        ),
    ];
    for (command, flags, message) in cases {
        let args: Vec<&str> = command.iter().chain(flags.iter()).copied().collect();
        let out = trawl(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing metered");
    }
    // The limits themselves are allowed.
    for flags in [["--active", "1ms"], ["--payload-bytes", "2048"]] {
        let args: Vec<&str> = file.iter().chain(flags.iter()).copied().collect();
        let out = trawl(&[&args[..], &["--summary", "none"]].concat());
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
