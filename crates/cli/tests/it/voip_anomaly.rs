//! The VoIP anomaly detector (issue 24): a generated capture with a normal proxy, an INVITE
//! flood answered busy, a burst of short calls and a SIPVicious-like scan raises exactly those
//! alarms, with their sources; the corpus's real SIP captures raise none; `trawl run --db
//! --voip` stores its alarms (`trawl alarms`).
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::{testdata, trawl};

const SECOND: u64 = 1_000_000_000;
const PROXY: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 1);
const SERVER: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 2);
const FLOODER: Ipv4Addr = Ipv4Addr::new(10, 9, 9, 9);
const DIALER: Ipv4Addr = Ipv4Addr::new(10, 7, 7, 7);
const SCANNER: Ipv4Addr = Ipv4Addr::new(10, 8, 8, 8);

/// A SIP message in a UDP datagram: (time, from, to, text).
type Datagram = (u64, Ipv4Addr, Ipv4Addr, String);

fn udp_frame(from: Ipv4Addr, to: Ipv4Addr, data: &[u8]) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (20 + 8 + data.len()) as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&from.octets());
    f.extend_from_slice(&to.octets());
    let sum: u32 = f[14..34]
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&5060u16.to_be_bytes());
    f.extend_from_slice(&5060u16.to_be_bytes());
    f.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(data);
    f
}

/// A pcap file (ns timestamps) of `datagrams`, sorted by time.
fn write_pcap(path: &Path, mut datagrams: Vec<Datagram>) {
    datagrams.sort_by_key(|d| d.0);
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    b.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (ts, from, to, text) in &datagrams {
        let f = udp_frame(*from, *to, text.as_bytes());
        b.extend_from_slice(&((ts / SECOND) as u32).to_le_bytes());
        b.extend_from_slice(&((ts % SECOND) as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&f);
    }
    std::fs::write(path, b).unwrap();
}

fn request(method: &str, user: &str, call_id: &str, cseq: u32, ua: &str) -> String {
    format!(
        "{method} sip:{user}@b.org SIP/2.0\r\nVia: SIP/2.0/UDP x;branch=z9hG4bK{call_id}\r\n\
         Call-ID: {call_id}\r\nFrom: <sip:caller@a.org>;tag=a\r\nTo: <sip:{user}@b.org>\r\n\
         CSeq: {cseq} {method}\r\nUser-Agent: {ua}\r\nContent-Length: 0\r\n\r\n"
    )
}

fn response(code: u16, reason: &str, user: &str, call_id: &str, cseq: u32, method: &str) -> String {
    format!(
        "SIP/2.0 {code} {reason}\r\nVia: SIP/2.0/UDP x;branch=z9hG4bK{call_id}\r\n\
         Call-ID: {call_id}\r\nFrom: <sip:caller@a.org>;tag=a\r\nTo: <sip:{user}@b.org>;tag=b\r\n\
         CSeq: {cseq} {method}\r\nContent-Length: 0\r\n\r\n"
    )
}

/// Calls from `from` to the server, `rate` per second over `[start_s, end_s)`: INVITE, the
/// answer `code` 10 ms later, and for answered calls a BYE `hold_ms` after the answer.
fn calls(
    out: &mut Vec<Datagram>,
    t0: u64,
    from: Ipv4Addr,
    rate: u64,
    (start_s, end_s): (u64, u64),
    code: u16,
    hold_ms: u64,
) {
    let n = rate * (end_s - start_s);
    for i in 0..n {
        let t = t0 + start_s * SECOND + i * SECOND / rate;
        let id = format!("{from}-{i}");
        out.push((t, from, SERVER, request("INVITE", "bob", &id, 1, "phone")));
        let (reason, answered) = if code == 200 {
            ("OK", true)
        } else {
            ("Busy Here", false)
        };
        let answer = t + 10_000_000;
        out.push((
            answer,
            SERVER,
            from,
            response(code, reason, "bob", &id, 1, "INVITE"),
        ));
        if answered {
            out.push((
                answer + hold_ms * 1_000_000,
                from,
                SERVER,
                request("BYE", "bob", &id, 2, "phone"),
            ));
        }
    }
}

/// A scan of `users` extensions from the scanner at `at_s`, 20 ms apart, each answered 404.
fn scan(out: &mut Vec<Datagram>, t0: u64, at_s: u64, users: u64) {
    for u in 0..users {
        let t = t0 + at_s * SECOND + u * 20_000_000;
        let (user, id) = (format!("{}", 1000 + u), format!("scan-{u}"));
        out.push((
            t,
            SCANNER,
            SERVER,
            request("OPTIONS", &user, &id, 1, "friendly-scanner"),
        ));
        out.push((
            t + 5_000_000,
            SERVER,
            SCANNER,
            response(404, "Not Found", &user, &id, 1, "OPTIONS"),
        ));
    }
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `trawl voip -r capture`'s anomalies.
fn anomalies(capture: &str, dir: &Path) -> Vec<Value> {
    let o = trawl(&["voip", "-r", capture, "-o", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    jsonl(&dir.join("anomalies.jsonl"))
}

/// (kind or `scan`, source) of the alarms raised.
fn raised(events: &[Value]) -> Vec<(String, String)> {
    let mut r: Vec<(String, String)> = events
        .iter()
        .filter(|e| e["event"] != "end")
        .map(|e| {
            let kind = e["kind"].as_str().unwrap_or(e["event"].as_str().unwrap());
            (kind.to_string(), e["source"].as_str().unwrap().to_string())
        })
        .collect();
    r.sort();
    r
}

#[test]
fn voip_anomaly_finds_floods_short_calls_and_scans_by_source() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = 1_700_000_000 * SECOND;
    let mut d = Vec::new();
    calls(&mut d, t0, PROXY, 2, (0, 25), 200, 60_000);
    calls(&mut d, t0, FLOODER, 100, (8, 11), 486, 0);
    calls(&mut d, t0, DIALER, 40, (12, 15), 200, 100);
    scan(&mut d, t0, 17, 50);
    let capture = dir.path().join("attacks.pcap");
    write_pcap(&capture, d);
    let events = anomalies(capture.to_str().unwrap(), &dir.path().join("out"));
    let want: Vec<(String, String)> = [
        ("failures", FLOODER),
        ("invite_flood", DIALER),
        ("invite_flood", FLOODER),
        ("scan", SCANNER),
        ("short_calls", DIALER),
    ]
    .iter()
    .map(|(k, s)| (k.to_string(), s.to_string()))
    .collect();
    assert_eq!(raised(&events), want, "{events:#?}");
    for e in &events {
        assert_eq!(e["detector"], "sip_anomaly");
    }
    // The flood's alarm starts after it begins and ends after it stops.
    let flood: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "invite_flood" && e["source"] == FLOODER.to_string())
        .collect();
    assert_eq!(flood.len(), 2, "{flood:#?}");
    let detected = flood[0]["detected_ns"].as_u64().unwrap();
    assert!(
        (t0 + 8 * SECOND..=t0 + 10 * SECOND).contains(&detected),
        "{detected}"
    );
    assert!(flood[1]["end_ns"].as_u64().unwrap() > t0 + 11 * SECOND);
    let s = events.iter().find(|e| e["event"] == "scan").unwrap();
    assert_eq!(s["user_agent"], "friendly-scanner");
    assert_eq!(s["to_users"], 20, "reported at the limit: {s}");
}

#[test]
fn voip_anomaly_is_silent_on_real_sip_captures() {
    let dir = tempfile::tempdir().unwrap();
    for (i, capture) in [
        "oracle/sip.pcap",
        "voip/gtp-iphone.pcap",
        "voip/fax-call-t38-sip.pcap",
    ]
    .iter()
    .enumerate()
    {
        let events = anomalies(&testdata(capture), &dir.path().join(i.to_string()));
        assert!(events.is_empty(), "{capture}: {events:#?}");
    }
}

#[test]
fn voip_anomaly_alarms_of_a_live_run_are_stored() {
    let lab = crate::live::lab();
    let dir = tempfile::tempdir().unwrap();
    // No normal traffic to learn from: no warm-up, so the flood and scan of one replayed
    // burst alarm at once.
    let mut d = Vec::new();
    let t0 = 1_700_000_000 * SECOND;
    calls(&mut d, t0, FLOODER, 300, (0, 1), 486, 0);
    scan(&mut d, t0, 1, 30);
    let capture = dir.path().join("burst.pcap");
    write_pcap(&capture, d);
    let db = dir.path().join("db");
    let child = crate::live::trawl_live(&[
        "run",
        "-i",
        &lab.host,
        "--no-ring",
        "--db",
        db.to_str().unwrap(),
        "--voip",
        dir.path().join("voip").to_str().unwrap(),
        "--set",
        "voip_anomaly.warmup=0",
        "--summary",
        "json",
    ]);
    std::thread::sleep(Duration::from_millis(700));
    lab.replay_into_host(&capture, &["--topspeed"])
        .expect("tcpreplay");
    std::thread::sleep(Duration::from_millis(1500));
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let (_, summary) = crate::live::wait_json(child);
    let o = trawl(&["alarms", "-d", db.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let alarms: Vec<Value> = String::from_utf8(o.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|a: &Value| a["detector"] == "sip_anomaly")
        .collect();
    let stored: Vec<(String, String)> = raised(
        &alarms
            .iter()
            .map(|a| a["event"].clone())
            .collect::<Vec<_>>(),
    );
    assert!(
        stored.contains(&("invite_flood".into(), FLOODER.to_string()))
            && stored.contains(&("scan".into(), SCANNER.to_string())),
        "{alarms:#?}\n{summary}"
    );
    assert!(alarms.iter().all(|a| a["iface"] == lab.host.as_str()));
}
