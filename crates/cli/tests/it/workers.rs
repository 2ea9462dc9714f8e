//! `--workers N` over capture files (`trawl flows|series|ingest -r F --workers N`): the
//! packets spread over N meters by a symmetric hash of their flow's addresses give the records,
//! rows and summary counts of one worker (records in another order).
use std::process::Output;

use super::{testdata, trawl};

/// Captures of many shapes (VLAN, QinQ, MPLS, GRE, IP-in-IP, fragments of IPv4 and IPv6, raw
/// IP, several interfaces, retransmissions), read as one stream merged by time.
const CAPTURES: &[&str] = &[
    "oracle/many-protocols.pcap.gz",
    "oracle/1kxun.pcap.gz",
    "oracle/ip4_fragments.pcap",
    "oracle/wireshark-retrans.pcap",
    "oracle/many_interfaces-1.pcapng",
    "pcaps/ipv6-frag.pcap",
    "pcaps/VlanPackets.pcap",
    "pcaps/802.1ad_QinQ.pcap",
    "pcaps/mpls-basic.pcap",
    "pcaps/GrePackets.cap",
    "pcaps/4in4tunnel.pcap",
    "pcaps/raw_ip.pcap",
    "pcaps/LINKTYPE_IPV6.pcap",
];

fn ok(out: Output) -> Output {
    assert!(
        out.status.success(),
        "trawl failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn summary(out: &Output) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stderr.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("summary is not JSON ({e}): {stderr}"))
}

/// The summary's counts that do not depend on how many tables the flows were spread over
/// (peaks and table sizes do).
fn counts(s: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    let keys = [
        "packets_read",
        "packets",
        "records",
        "flows_created",
        "decode",
        "end_reasons",
        "late_packets",
        "fragments_resolved",
        "fragments_unmatched",
        "series_rows",
        "series_late_packets",
    ];
    keys.iter()
        .map(|k| (k.to_string(), s[*k].clone()))
        .collect()
}

/// Asserts that two sorted outputs are equal, naming the first line that differs (not
/// printing thousands of records).
fn assert_same(got: &[String], want: &[String], what: &str) {
    if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "{what}: {} lines against {}; first difference at line {i}:\n  got  {:?}\n  want {:?}",
            got.len(),
            want.len(),
            got.get(i),
            want.get(i)
        );
    }
}

fn sorted_lines(out: &Output) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8(out.stdout.clone())
        .expect("UTF-8 output")
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

/// `trawl COMMAND -r FILES... ARGS --workers N --summary json`.
fn run(command: &str, files: &[String], args: &[&str], workers: usize) -> Output {
    let mut all: Vec<&str> = vec![command];
    for f in files {
        all.extend(["-r", f.as_str()]);
    }
    all.extend(args);
    let workers = workers.to_string();
    all.extend(["--workers", &workers, "--summary", "json"]);
    ok(trawl(&all))
}

fn captures() -> Vec<String> {
    CAPTURES.iter().map(|c| testdata(c)).collect()
}

/// The flow meters a command's composition has.
fn meters_planned(command: &str, files: &[String], workers: usize) -> usize {
    let out = run(command, files, &["--print-composition"], workers);
    String::from_utf8_lossy(&out.stdout)
        .matches("type = \"flow_meter\"")
        .count()
}

#[test]
fn flows_with_workers_are_one_workers_records() {
    let files = captures();
    assert_eq!(meters_planned("flows", &files, 3), 3);
    for tunnel in ["outer", "inner"] {
        let args = ["--tunnel", tunnel];
        let one = run("flows", &files, &args, 1);
        let three = run("flows", &files, &args, 3);
        let records = sorted_lines(&one);
        assert!(records.len() > 500, "{} records", records.len());
        assert_same(
            &sorted_lines(&three),
            &records,
            &format!("--tunnel {tunnel}"),
        );
        assert_eq!(counts(&summary(&three)), counts(&summary(&one)));
    }
}

#[test]
fn series_with_workers_sum_to_one_workers_rows() {
    let files = captures();
    assert_eq!(meters_planned("series", &files, 2), 2);
    let one = run("series", &files, &[], 1);
    let two = run("series", &files, &[], 2);
    assert!(!one.stdout.is_empty());
    assert_same(&sorted_lines(&two), &sorted_lines(&one), "rows");
    assert_eq!(counts(&summary(&two)), counts(&summary(&one)));
}

/// Ethernet + IPv4 + UDP from `src` to `dst` (last octets of 10.0.0.0/16 and 10.1.0.0/16).
fn udp_frame(src: u16, dst: u16, sport: u16, dport: u16, payload: usize) -> Vec<u8> {
    let mut f = vec![0u8; 14 + 20 + 8 + payload];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((20 + 8 + payload) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, (src >> 8) as u8, src as u8]);
    ip[16..20].copy_from_slice(&[10, 1, (dst >> 8) as u8, dst as u8]);
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&sport.to_be_bytes());
    udp[2..4].copy_from_slice(&dport.to_be_bytes());
    udp[4..6].copy_from_slice(&((8 + payload) as u16).to_be_bytes());
    f
}

/// A nanosecond pcap of `packets` (time, frame), written in the order given.
fn write_pcap(path: &std::path::Path, packets: &[(u64, Vec<u8>)]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    b.extend_from_slice(&2u16.to_le_bytes());
    b.extend_from_slice(&4u16.to_le_bytes());
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (ts, frame) in packets {
        b.extend_from_slice(&((ts / 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&((ts % 1_000_000_000) as u32).to_le_bytes());
        b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        b.extend_from_slice(&(frame.len() as u32).to_le_bytes());
        b.extend_from_slice(frame);
    }
    std::fs::write(path, b).unwrap();
}

/// 40 conversations over 30 s in 3,000 packets, some answered, with pauses longer than the
/// idle timeout and flows longer than the active timeout; every 9th packet is stamped 700 ms
/// before the packet ahead of it (out of order), and the file ends with the whole capture's
/// first 20 packets again (late by half a minute).
fn out_of_order_capture(path: &std::path::Path) {
    let mut state = 0x5eed_u64;
    let mut packets = Vec::new();
    let start = 1_700_000_000_000_000_000u64;
    for i in 0..3000u64 {
        let r = trawl_testkit::xorshift(&mut state);
        let conv = (r % 40) as u16;
        // Conversations 0-9 pause from 10 s to 16 s (idle timeout 4 s).
        let mut ts = start + i * 10_000_000;
        if conv < 10 && (10_000_000_000..16_000_000_000).contains(&(ts - start)) {
            continue;
        }
        if i % 9 == 8 {
            ts -= 700_000_000;
        }
        let reply = r >> 32 & 1 == 1 && !conv.is_multiple_of(3);
        let (a, b) = (conv * 7 + 1, 300 - conv);
        let frame = if reply {
            // Both directions, lanes by the pair's addresses.
            let mut f = udp_frame(a, b, 4000 + conv, 53, 20 + (r >> 40) as usize % 200);
            f[26..30].copy_from_slice(&[10, 1, (b >> 8) as u8, b as u8]);
            f[30..34].copy_from_slice(&[10, 0, (a >> 8) as u8, a as u8]);
            f[34..36].copy_from_slice(&53u16.to_be_bytes());
            f[36..38].copy_from_slice(&(4000 + conv).to_be_bytes());
            f
        } else {
            udp_frame(a, b, 4000 + conv, 53, 20 + (r >> 40) as usize % 200)
        };
        packets.push((ts, frame));
    }
    let again: Vec<_> = packets[..20].to_vec();
    packets.extend(again);
    write_pcap(path, &packets);
}

#[test]
fn workers_keep_one_meters_clock_on_out_of_order_packets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("disorder.pcap");
    out_of_order_capture(&path);
    let files = vec![path.to_string_lossy().into_owned()];
    let args = ["--idle", "4s", "--active", "7s"];
    let one = run("flows", &files, &args, 1);
    let s1 = summary(&one);
    assert!(s1["late_packets"].as_u64().unwrap() > 300, "{s1}");
    let records = sorted_lines(&one);
    assert!(records.len() > 80, "{} records", records.len());
    for workers in [2, 4] {
        let n = run("flows", &files, &args, workers);
        assert_same(&sorted_lines(&n), &records, &format!("--workers {workers}"));
        assert_eq!(counts(&summary(&n)), counts(&s1), "--workers {workers}");
    }
}

#[test]
fn ingest_with_workers_stores_one_workers_records() {
    let dir = tempfile::tempdir().unwrap();
    let files = captures();
    let mut answers = Vec::new();
    for workers in [1usize, 2] {
        let db = dir.path().join(format!("db{workers}"));
        let db = db.to_str().unwrap();
        let mut args: Vec<&str> = vec!["ingest", "-d", db, "--summary", "json"];
        for f in &files {
            args.extend(["-r", f.as_str()]);
        }
        let w = workers.to_string();
        args.extend(["--workers", &w]);
        let out = ok(trawl(&args));
        let s = summary(&out);
        let q = ok(trawl(&[
            "query",
            "-d",
            db,
            "sip,dip,sport,dport,proto,time",
            "-n",
            "0",
            "--format",
            "json",
            "--from",
            "1970-01-01T00:00:00Z",
            "--to",
            "2100-01-01T00:00:00Z",
        ]));
        let rows: serde_json::Value = serde_json::from_slice(&q.stdout).unwrap();
        let mut rows: Vec<String> = rows["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.to_string())
            .collect();
        rows.sort();
        answers.push((
            rows,
            s["store"]["records"].clone(),
            s["store"]["rows"].clone(),
        ));
    }
    assert!(answers[0].0.len() > 500, "{} rows", answers[0].0.len());
    assert_same(&answers[1].0, &answers[0].0, "stored groups");
    assert_eq!(
        (&answers[1].1, &answers[1].2),
        (&answers[0].1, &answers[0].2)
    );
}
