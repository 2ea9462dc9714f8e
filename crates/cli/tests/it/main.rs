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
fn a_file_older_than_the_previous_one_resets_the_clock() {
    // tls13.pcap is from 2017, wireshark-retrans.pcap from 2009: read in that order, the older
    // file's flows would all look idle; the previous file's flows are closed first instead.
    let out = trawl(&[
        "flows",
        "-r",
        &testdata("oracle/tls13.pcap"),
        "-r",
        &testdata("oracle/wireshark-retrans.pcap"),
        "--summary",
        "json",
        "-o",
        "/dev/null",
    ]);
    assert!(out.status.success());
    let s = summary(&out);
    assert_eq!(s["time_resets"], 1);
    // One flow each, the retransmission capture's 108 packets in one record.
    assert_eq!(s["records"], 2);
    assert_eq!(s["end_reasons"]["end"], 2);
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
