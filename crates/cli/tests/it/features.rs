//! `--features minimal|standard|full` (issue 26): what `trawl flows` writes at each level,
//! the round-trip times it adds (issue 23), and the settings it refuses.
//! <https://github.com/trawl/trawl/issues/26>
use serde_json::Value;

use super::{testdata, trawl};

fn flows(args: &[&str]) -> String {
    let capture = testdata("oracle/tcp-handshake-nano.pcap");
    let mut all = vec!["flows", "-r", capture.as_str(), "--summary", "none"];
    all.extend_from_slice(args);
    let out = trawl(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn issue_26_each_level_writes_its_fields_and_full_the_handshake_rtt() {
    let full: Value = serde_json::from_str(flows(&[]).lines().next().unwrap()).unwrap();
    // tshark's tcp.analysis.initial_rtt of this connection is 0.127609669 s.
    let fwd = full["fwd_rtt_handshake_ns"].as_u64().unwrap();
    let rev = full["rev_rtt_handshake_ns"].as_u64().unwrap();
    assert_eq!(fwd + rev, 127_609_669, "{full}");
    assert_eq!(fwd, 127_521_774, "SYN → SYN-ACK");
    let standard: Value =
        serde_json::from_str(flows(&["--features", "standard"]).lines().next().unwrap()).unwrap();
    let minimal: Value =
        serde_json::from_str(flows(&["--features", "minimal"]).lines().next().unwrap()).unwrap();
    for (k, v) in standard.as_object().unwrap() {
        assert_eq!(full[k], *v, "standard's {k} is full's");
    }
    for (k, v) in minimal.as_object().unwrap() {
        assert_eq!(full[k], *v, "minimal's {k} is full's");
    }
    assert!(standard.get("fwd_len_std").is_none() && standard.get("src_mac").is_none());
    // standard keeps the handshake's halves, full alone the per-direction samples.
    assert_eq!(
        standard["fwd_rtt_handshake_ns"],
        full["fwd_rtt_handshake_ns"]
    );
    assert!(
        standard.get("fwd_rtt_samples").is_none() && full["fwd_rtt_samples"].as_u64() > Some(0)
    );
    assert!(minimal.get("fwd_rtt_samples").is_none() && minimal.get("fwd_syn").is_none());
    assert_eq!(minimal.as_object().unwrap().len(), 18);
    let header = |args: &[&str]| flows(args).lines().next().unwrap().to_string();
    assert_eq!(
        header(&["--features", "minimal", "--format", "csv"]),
        "src_ip,dst_ip,src_port,dst_port,proto,vlan,first_ns,last_ns,fwd_packets,rev_packets,\
         fwd_bytes,rev_bytes,fwd_ip_bytes,rev_ip_bytes,fwd_tcp_flags,rev_tcp_flags,end_reason,\
         community_id"
    );
}

#[test]
fn issue_26_payload_bytes_need_the_full_level() {
    let capture = testdata("oracle/tcp-handshake-nano.pcap");
    let out = trawl(&[
        "flows",
        "-r",
        &capture,
        "--features",
        "standard",
        "--payload-bytes",
        "8",
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("with features standard"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn issue_26_a_meter_level_is_in_the_printed_composition_only_when_not_full() {
    let capture = testdata("oracle/tcp-handshake-nano.pcap");
    let text = |args: &[&str]| {
        let mut all = vec!["flows", "-r", capture.as_str(), "--print-composition"];
        all.extend_from_slice(args);
        String::from_utf8(trawl(&all).stdout).unwrap()
    };
    assert!(!text(&[]).contains("features"));
    let minimal = text(&["--features", "minimal"]);
    assert_eq!(
        minimal.matches("features = \"minimal\"").count(),
        2,
        "{minimal}"
    );
}
