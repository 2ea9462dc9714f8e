//! `trawl voip` against tshark (issue 24): the RTP streams of `tshark -z rtp,streams` (RTP
//! heuristic on, so streams without signalling count too) with equal packets, loss and largest
//! inter-arrival delta and jitter within 0.1 ms; the calls of tshark's SIP fields with equal
//! Call-IDs, users and final status. Goldens: testdata/voip/*.{rtp-streams.txt,sip.tsv}, made by
//! scripts/voip-oracle.sh.
use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{testdata, trawl};

/// A stream as tshark's table gives it.
#[derive(Debug)]
struct TsharkStream {
    packets: u64,
    lost: i64,
    max_delta: f64,
    mean_jitter: f64,
    max_jitter: f64,
}

type StreamKey = (String, u16, String, u16, u32);

fn tshark_streams(golden: &str) -> BTreeMap<StreamKey, TsharkStream> {
    let text = std::fs::read_to_string(golden).expect("golden");
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let Some(ssrc_at) = f.iter().position(|w| w.starts_with("0x")) else {
            continue;
        };
        // Start, end, src, sport, dst, dport, SSRC, payload names (may contain spaces),
        // packets, lost, "(pct%)", min/mean/max delta, min/mean/max jitter[, X].
        let tail = &f[f.iter().position(|w| w.starts_with('(')).unwrap() - 2..];
        let key = (
            f[2].to_string(),
            f[3].parse().unwrap(),
            f[4].to_string(),
            f[5].parse().unwrap(),
            u32::from_str_radix(&f[ssrc_at][2..], 16).unwrap(),
        );
        out.insert(
            key,
            TsharkStream {
                packets: tail[0].parse().unwrap(),
                lost: tail[1].parse().unwrap(),
                max_delta: tail[5].parse().unwrap(),
                mean_jitter: tail[7].parse().unwrap(),
                max_jitter: tail[8].parse().unwrap(),
            },
        );
    }
    out
}

/// Per Call-ID with an INVITE: From user, To user, the last final response to an INVITE.
fn tshark_calls(golden: &str) -> BTreeMap<String, (String, String, u16)> {
    let text = std::fs::read_to_string(golden).expect("golden");
    let mut calls: BTreeMap<String, (String, String, u16)> = BTreeMap::new();
    let rows: Vec<Vec<&str>> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split('\t').collect())
        .collect();
    for r in &rows {
        if r[1] == "INVITE" && !calls.contains_key(r[0]) {
            calls.insert(r[0].to_string(), (r[4].to_string(), r[5].to_string(), 0));
        }
        let code: u16 = r[2].parse().unwrap_or(0);
        if code >= 200 && r[3] == "INVITE" {
            if let Some(c) = calls.get_mut(r[0]) {
                c.2 = code;
            }
        }
    }
    calls
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Runs `trawl voip` on `capture` (under testdata) and checks it against its goldens.
fn check_against_tshark(capture: &str, expect_calls: usize, expect_streams: usize) {
    let dir = tempfile::tempdir().unwrap();
    let input = testdata(capture);
    let out = trawl(&["voip", "-r", &input, "-o", dir.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let name = Path::new(capture).file_name().unwrap().to_str().unwrap();
    let golden = |ext: &str| testdata(&format!("voip/{name}.{ext}"));

    let expected = tshark_streams(&golden("rtp-streams.txt"));
    let streams = jsonl(&dir.path().join("rtp.jsonl"));
    assert_eq!(expected.len(), expect_streams, "{capture}: golden streams");
    assert_eq!(streams.len(), expected.len(), "{capture}: {streams:#?}");
    for s in &streams {
        let key = (
            s["src_ip"].as_str().unwrap().to_string(),
            s["src_port"].as_u64().unwrap() as u16,
            s["dst_ip"].as_str().unwrap().to_string(),
            s["dst_port"].as_u64().unwrap() as u16,
            s["ssrc"].as_u64().unwrap() as u32,
        );
        let t = expected
            .get(&key)
            .unwrap_or_else(|| panic!("{capture}: {key:?} not in tshark's streams"));
        // Where there is SIP, tshark found every stream through SDP: so must trawl.
        assert_eq!(s["orphan"] == true, expect_calls == 0, "{capture} {key:?}");
        assert_eq!(
            s["packets"].as_u64().unwrap(),
            t.packets,
            "{capture} {key:?}"
        );
        assert_eq!(s["lost"].as_i64().unwrap(), t.lost, "{capture} {key:?}");
        let near = |field: &str, want: f64, tol: f64| {
            let got = s[field].as_f64().unwrap();
            assert!(
                (got - want).abs() <= tol,
                "{capture} {key:?}: {field} {got} vs tshark {want}"
            );
        };
        near("iat_max_ms", t.max_delta, 0.001);
        near("jitter_max_ms", t.max_jitter, 0.1);
        near("jitter_mean_ms", t.mean_jitter, 0.1);
    }

    let expected = tshark_calls(&golden("sip.tsv"));
    let calls = jsonl(&dir.path().join("calls.jsonl"));
    assert_eq!(expected.len(), expect_calls, "{capture}: golden calls");
    let got: BTreeMap<String, &Value> = calls
        .iter()
        .map(|c| (c["call_id"].as_str().unwrap().to_string(), c))
        .collect();
    assert_eq!(got.len(), calls.len(), "{capture}: one record per Call-ID");
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        expected.keys().collect::<Vec<_>>(),
        "{capture}: calls"
    );
    for (id, (from, to, status)) in &expected {
        let c = got[id];
        assert_eq!(
            c["status"].as_u64().unwrap(),
            *status as u64,
            "{capture} {id}"
        );
        // tshark leaves the users of tel: URIs empty.
        if !from.is_empty() {
            assert_eq!(c["from_user"].as_str().unwrap(), from, "{capture} {id}");
        }
        if !to.is_empty() {
            assert_eq!(c["to_user"].as_str().unwrap(), to, "{capture} {id}");
        }
    }
}

#[test]
fn voip_sip_over_udp_matches_tshark() {
    check_against_tshark("oracle/sip.pcap", 4, 1);
}

#[test]
fn voip_volte_sip_over_tcp_in_gtp_matches_tshark() {
    check_against_tshark("voip/gtp-iphone.pcap", 1, 2);
}

/// RFC 7118 without TLS, captured from real sockets (scripts/sip-ws-capture.sh): the Upgrade,
/// masked client frames, a ping, two messages in one segment, a 200 OK over two frames.
#[test]
fn voip_sip_over_websocket_matches_tshark() {
    check_against_tshark("voip/sip-websocket.pcap", 1, 2);
}

#[test]
fn voip_fax_call_with_reinvites_matches_tshark() {
    check_against_tshark("voip/fax-call-t38-sip.pcap", 2, 2);
}

#[test]
fn voip_orphan_streams_match_tshark_heuristic() {
    check_against_tshark("voip/skinny.pcap", 0, 6);
    check_against_tshark("oracle/g711a.pcap", 0, 1);
}

#[test]
fn voip_orphan_streams_are_flagged_and_can_be_turned_off() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    let input = testdata("voip/skinny.pcap");
    assert!(trawl(&["voip", "-r", &input, "-o", d]).status.success());
    let streams = jsonl(&dir.path().join("rtp.jsonl"));
    assert!(streams
        .iter()
        .all(|s| s["orphan"] == true && s["call_id"].is_null()));
    let out = trawl(&["voip", "-r", &input, "-o", d, "--no-orphans"]);
    assert!(out.status.success());
    assert!(jsonl(&dir.path().join("rtp.jsonl")).is_empty());
}

#[test]
fn voip_streams_belong_to_their_call_and_set_its_worst_mos() {
    let dir = tempfile::tempdir().unwrap();
    let input = testdata("voip/gtp-iphone.pcap");
    let out = trawl(&["voip", "-r", &input, "-o", dir.path().to_str().unwrap()]);
    assert!(out.status.success());
    let calls = jsonl(&dir.path().join("calls.jsonl"));
    let streams = jsonl(&dir.path().join("rtp.jsonl"));
    let call = &calls[0];
    assert_eq!(call["streams"], 2);
    assert_eq!(call["end_reason"], "bye_callee");
    assert!(call["answer_ns"].as_u64().unwrap() > call["invite_ns"].as_u64().unwrap());
    assert!(streams
        .iter()
        .all(|s| s["call_id"] == call["call_id"] && s["codec"] == "AMR"));
    let worst = streams
        .iter()
        .map(|s| s["mos"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    assert_eq!(call["worst_mos"].as_f64().unwrap(), worst);
}

#[test]
fn voip_print_composition_is_a_composition_trawl_check_accepts() {
    let input = testdata("oracle/sip.pcap");
    let out = trawl(&["voip", "-r", &input, "-o", "outdir", "--print-composition"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for block in ["pcap_source", "\"sip\"", "rtp_calls", "event_writer"] {
        assert!(text.contains(block), "{block} missing:\n{text}");
    }
    assert!(text.contains("outdir/calls.jsonl") && text.contains("outdir/rtp.jsonl"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("voip.toml");
    std::fs::write(&file, &text).unwrap();
    let check = trawl(&["check", "-c", file.to_str().unwrap()]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
}

/// `--stats-every`: a line at each second of packet time the capture crosses and one at its
/// end, whose counters are the records'; the records are those of a run without it.
#[test]
fn voip_stats_lines_follow_packet_time_and_end_with_the_records_totals() {
    let input = testdata("voip/fax-call-t38-sip.pcap");
    let dir = tempfile::tempdir().unwrap();
    let (plain, with) = (dir.path().join("plain"), dir.path().join("stats"));
    for (out, extra) in [(&plain, &[][..]), (&with, &["--stats-every", "1s"][..])] {
        let mut args = vec!["voip", "-r", &input, "-o", out.to_str().unwrap()];
        args.extend(extra);
        let run = trawl(&args);
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    }
    for file in ["calls.jsonl", "rtp.jsonl"] {
        let read = |d: &Path| std::fs::read(d.join(file)).unwrap();
        assert_eq!(read(&plain), read(&with), "{file}");
    }
    assert!(!plain.join("stats.jsonl").exists());
    let lines = jsonl(&with.join("stats.jsonl"));
    let (end, seconds) = lines.split_last().expect("stats lines");
    assert_eq!(end["end"], true);
    let streams = jsonl(&with.join("rtp.jsonl"));
    let first = streams
        .iter()
        .map(|s| s["first_ns"].as_u64().unwrap())
        .min()
        .unwrap();
    let last = streams
        .iter()
        .map(|s| s["last_ns"].as_u64().unwrap())
        .max()
        .unwrap();
    // The fax call's media has a packet in every second from its first to its last.
    let (from, to) = (first / 1_000_000_000 + 1, last / 1_000_000_000);
    let crossed: Vec<u64> = seconds
        .iter()
        .map(|l| l["ts_ns"].as_u64().unwrap())
        .filter(|&t| t > first && t <= last)
        .collect();
    assert_eq!(
        crossed,
        (from..=to).map(|s| s * 1_000_000_000).collect::<Vec<_>>()
    );
    let mut cpu = 0.0;
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["end"], i + 1 == lines.len(), "{l}");
        let (user, system) = (
            l["cpu_user_s"].as_f64().unwrap(),
            l["cpu_system_s"].as_f64().unwrap(),
        );
        let total = l["cpu_s"].as_f64().unwrap();
        assert!((total - user - system).abs() < 1e-9 && total >= cpu, "{l}");
        cpu = total;
        assert!(l["max_rss_kb"].as_u64().unwrap() > 0);
        if i > 0 {
            assert!(l["ts_ns"].as_u64() > lines[i - 1]["ts_ns"].as_u64(), "{l}");
        }
    }
    assert!(end["ts_ns"].as_u64().unwrap() >= last);
    let calls = jsonl(&with.join("calls.jsonl"));
    assert_eq!(end["calls"].as_u64().unwrap(), calls.len() as u64);
    let packets: u64 = streams.iter().map(|s| s["packets"].as_u64().unwrap()).sum();
    assert_eq!(end["rtp_packets"].as_u64().unwrap(), packets);
    assert_eq!(end["active_calls"].as_u64().unwrap(), calls.len() as u64);
}
