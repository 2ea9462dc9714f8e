//! SIP over TCP with segments out of order (issue 24): a generated capture of one call whose
//! messages are split over segments, some captured before the segments that precede them, is
//! read as the same call as the capture in order: every message parsed, none malformed.
use std::net::Ipv4Addr;
use std::path::Path;

use serde_json::Value;

use super::trawl;

const ALICE: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 0, 0, 1), 5060);
const BOB: (Ipv4Addr, u16) = (Ipv4Addr::new(10, 0, 0, 2), 5060);

/// One TCP segment: from, to, sequence number, bytes.
struct Segment {
    from: (Ipv4Addr, u16),
    to: (Ipv4Addr, u16),
    seq: u32,
    data: Vec<u8>,
}

/// An Ethernet/IPv4/TCP frame (PSH+ACK) carrying `s`.
fn frame(s: &Segment) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x08, 0x00];
    let total = (20 + 20 + s.data.len()) as u16;
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&total.to_be_bytes());
    ip.extend_from_slice(&[0, 1, 0x40, 0, 64, 6, 0, 0]);
    ip.extend_from_slice(&s.from.0.octets());
    ip.extend_from_slice(&s.to.0.octets());
    let sum: u32 = ip
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&s.from.1.to_be_bytes());
    f.extend_from_slice(&s.to.1.to_be_bytes());
    f.extend_from_slice(&s.seq.to_be_bytes());
    f.extend_from_slice(&1u32.to_be_bytes());
    f.extend_from_slice(&[0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    f.extend_from_slice(&s.data);
    f
}

/// A pcap file of `segments`, in that order, 10 ms apart.
fn write_pcap(path: &Path, segments: &[&Segment]) {
    let mut b = Vec::new();
    b.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    b.extend_from_slice(&[2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(&65535u32.to_le_bytes());
    b.extend_from_slice(&1u32.to_le_bytes());
    for (i, s) in segments.iter().enumerate() {
        let f = frame(s);
        b.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        b.extend_from_slice(&(i as u32 * 10_000).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&(f.len() as u32).to_le_bytes());
        b.extend_from_slice(&f);
    }
    std::fs::write(path, b).unwrap();
}

fn message(start: &str, cseq: &str, body: &str, to_tag: bool) -> String {
    let to_tag = if to_tag { ";tag=b1" } else { "" };
    format!(
        "{start}\r\nVia: SIP/2.0/TCP 10.0.0.1:5060;branch=z9hG4bK1\r\nCall-ID: tcp-call-1\r\n\
         From: \"Alice\" <sip:alice@a.org>;tag=a1\r\nTo: <sip:bob@b.org>{to_tag}\r\nCSeq: {cseq}\r\n\
         Content-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

fn sdp(ip: &str, port: u16) -> String {
    format!(
        "v=0\r\no=- 1 1 IN IP4 {ip}\r\ns=-\r\nc=IN IP4 {ip}\r\nt=0 0\r\nm=audio {port} RTP/AVP 0\r\n"
    )
}

/// The call's messages as segments: each direction's bytes numbered on from its own initial
/// sequence number, the INVITE, its 200 and the BYE each split in pieces.
fn call_segments() -> Vec<Segment> {
    let mut out = Vec::new();
    let mut seq = [1000u32, 7_000_000u32];
    let mut send = |dir: usize, text: String, cuts: &[usize]| {
        let (from, to) = if dir == 0 { (ALICE, BOB) } else { (BOB, ALICE) };
        let bytes = text.into_bytes();
        let mut at = 0;
        for end in cuts.iter().copied().chain([bytes.len()]) {
            out.push(Segment {
                from,
                to,
                seq: seq[dir],
                data: bytes[at..end].to_vec(),
            });
            seq[dir] += (end - at) as u32;
            at = end;
        }
    };
    let invite = message(
        "INVITE sip:bob@b.org SIP/2.0",
        "1 INVITE",
        &sdp("10.0.0.1", 40000),
        false,
    );
    send(0, invite, &[60, 200]);
    let ok = message("SIP/2.0 200 OK", "1 INVITE", &sdp("10.0.0.2", 50000), true);
    send(1, ok, &[40, 150]);
    send(
        0,
        message("ACK sip:bob@b.org SIP/2.0", "1 ACK", "", true),
        &[],
    );
    send(
        0,
        message("BYE sip:bob@b.org SIP/2.0", "2 BYE", "", true),
        &[30],
    );
    send(1, message("SIP/2.0 200 OK", "2 BYE", "", true), &[]);
    out
}

/// `trawl voip` on `capture`: the summary and the calls.
fn voip(capture: &Path, out: &Path) -> (Value, Vec<Value>) {
    let o = trawl(&[
        "voip",
        "-r",
        capture.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let summary = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    let calls = std::fs::read_to_string(out.join("calls.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (summary, calls)
}

#[test]
fn voip_sip_over_tcp_segments_out_of_order_are_put_back_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let segs = call_segments();
    assert_eq!(segs.len(), 10);
    // Captured: INVITE 1, 3, 2 (and 2 again, retransmitted); 200 1, 3, 2; ACK; BYE 2, 1; 200.
    let order = [0, 2, 1, 1, 3, 5, 4, 6, 8, 7, 9];
    let reordered: Vec<&Segment> = order.iter().map(|&i| &segs[i]).collect();
    let in_order: Vec<&Segment> = segs.iter().collect();
    let (a, b) = (
        dir.path().join("reordered.pcap"),
        dir.path().join("in-order.pcap"),
    );
    write_pcap(&a, &reordered);
    write_pcap(&b, &in_order);

    let (summary, calls) = voip(&a, &dir.path().join("a"));
    assert_eq!(summary["sip_messages"], 5, "{summary}");
    assert_eq!(summary["sip_malformed"], 0, "{summary}");
    assert_eq!(calls.len(), 1, "{calls:#?}");
    let c = &calls[0];
    assert_eq!(
        (
            &c["call_id"],
            &c["from_user"],
            &c["to_user"],
            &c["status"],
            &c["end_reason"]
        ),
        (
            &"tcp-call-1".into(),
            &"alice".into(),
            &"bob".into(),
            &200.into(),
            &"bye_caller".into()
        ),
        "{c}"
    );
    assert_eq!(c["tcp"], true);
    // The call the capture in order gives, but for the instants (a message is complete when
    // its last segment arrives).
    let (_, same) = voip(&b, &dir.path().join("b"));
    let strip = |c: &Value| {
        let mut c = c.clone();
        for k in [
            "invite_ns",
            "ringing_ns",
            "answer_ns",
            "end_ns",
            "setup_ms",
            "answer_ms",
            "duration_ms",
        ] {
            c.as_object_mut().unwrap().remove(k);
        }
        c
    };
    assert_eq!(strip(c), strip(&same[0]));
}
