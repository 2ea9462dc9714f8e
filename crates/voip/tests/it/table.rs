//! The call table at scale: bounded under an INVITE flood, and RTP streams found through SDP.
use std::net::SocketAddr;

use trawl_voip::{sip, Output, SipEvent, Tracker, TrackerConfig};

fn invite(i: u32, with_sdp: bool) -> Vec<u8> {
    let sdp = format!(
        "v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.{}.{}\r\nt=0 0\r\nm=audio {} RTP/AVP 0\r\n",
        (i >> 8) & 0xff,
        i & 0xff,
        10000 + 2 * (i % 20000)
    );
    let body = if with_sdp { sdp.as_str() } else { "" };
    format!(
        "INVITE sip:bob{i}@b.org SIP/2.0\r\nCall-ID: call-{i}\r\nFrom: <sip:alice{i}@a.org>;tag=a{i}\r\n\
         To: <sip:bob{i}@b.org>\r\nCSeq: 1 INVITE\r\nContent-Type: application/sdp\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn invite_flood_stays_within_max_calls_oldest_evicted_and_counted() {
    let cfg = TrackerConfig {
        max_calls: 1000,
        ..TrackerConfig::default()
    };
    let mut t = Tracker::new(cfg).unwrap();
    let mut out = Output::default();
    for i in 0..10_000u32 {
        let bytes = invite(i, false);
        let m = sip::parse(&bytes).unwrap();
        let ev = SipEvent::new(
            1_000_000 * i as u64,
            addr("10.9.9.9:5060"),
            addr("10.0.0.2:5060"),
            false,
            &m,
        );
        t.on_sip(&ev, &mut out);
        assert!(t.stats().active_calls <= 1000);
    }
    let s = t.stats();
    assert_eq!(
        (s.calls, s.calls_evicted, s.active_calls),
        (10_000, 9_000, 1_000)
    );
    assert_eq!(out.calls.len(), 9_000);
    assert!(out.calls.iter().all(|c| c.end_reason == "evicted"));
    assert_eq!(out.calls[0].call_id, "call-0", "the oldest goes first");
    t.finish(&mut out);
    assert_eq!(out.calls.len(), 10_000);
}

#[test]
fn rtp_to_an_sdp_endpoint_joins_its_call_and_counts_loss() {
    let mut t = Tracker::new(TrackerConfig::default()).unwrap();
    let mut out = Output::default();
    let bytes = invite(7, true);
    let m = sip::parse(&bytes).unwrap();
    let ev = SipEvent::new(0, addr("10.9.9.9:5060"), addr("10.0.0.2:5060"), false, &m);
    t.on_sip(&ev, &mut out);
    let dst = addr("10.0.0.7:10014");
    // 50 packets of 20 ms, numbers 10 and 11 dropped.
    for seq in (0u16..50).filter(|s| !(10..12).contains(s)) {
        let mut pkt = vec![0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42];
        pkt[2..4].copy_from_slice(&seq.to_be_bytes());
        pkt[4..8].copy_from_slice(&(seq as u32 * 160).to_be_bytes());
        pkt.extend_from_slice(&[0xff; 160]);
        t.on_udp(
            seq as u64 * 20_000_000,
            addr("10.5.5.5:20000"),
            dst,
            &pkt,
            &mut out,
        );
    }
    t.finish(&mut out);
    let s = &out.streams[0];
    assert_eq!(s.call_id.as_deref(), Some("call-7"));
    assert_eq!((s.packets, s.expected, s.lost), (48, 50, 2));
    assert_eq!(s.codec, "PCMU");
    assert_eq!(s.jitter_max_ms, 0.0);
    assert_eq!(out.calls[0].streams, 1);
    assert!(
        out.calls[0].worst_mos.unwrap() < 4.4,
        "4% loss lowers the MOS"
    );
}

fn rtp(seq: u16) -> Vec<u8> {
    let mut pkt = vec![0x80, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 42];
    pkt[2..4].copy_from_slice(&seq.to_be_bytes());
    pkt[4..8].copy_from_slice(&(seq as u32 * 160).to_be_bytes());
    pkt.extend_from_slice(&[0xd5; 160]);
    pkt
}

/// SIPp's uac_pcap plays the same capture, SSRC included, from the same media port in every
/// call: consecutive calls must still each get their own stream.
#[test]
fn consecutive_calls_reusing_media_port_and_ssrc_get_a_stream_each() {
    let mut t = Tracker::new(TrackerConfig::default()).unwrap();
    let mut out = Output::default();
    let (a, b) = (addr("10.9.9.9:5060"), addr("10.0.0.2:5060"));
    let (rtp_src, rtp_dst) = (addr("10.9.9.9:6000"), addr("10.0.0.7:10014"));
    let mut now = 0u64;
    for call in 0..2u64 {
        let bytes = invite(7, true);
        let text = String::from_utf8(bytes)
            .unwrap()
            .replace("call-7", &format!("call-7-{call}"));
        let m = sip::parse(text.as_bytes()).unwrap();
        t.on_sip(&SipEvent::new(now, a, b, false, &m), &mut out);
        for seq in 0..100u16 {
            now += 20_000_000;
            t.on_udp(now, rtp_src, rtp_dst, &rtp(seq), &mut out);
        }
        let bye = format!(
            "BYE sip:bob7@b.org SIP/2.0\r\nCall-ID: call-7-{call}\r\nFrom: <sip:alice7@a.org>;tag=a7\r\n\
             To: <sip:bob7@b.org>\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n"
        );
        let m = sip::parse(bye.as_bytes()).unwrap();
        t.on_sip(&SipEvent::new(now, a, b, false, &m), &mut out);
        now += 100_000_000;
    }
    t.finish(&mut out);
    assert_eq!(out.calls.len(), 2);
    assert_eq!(out.streams.len(), 2, "{:#?}", out.streams);
    for (i, s) in out.streams.iter().enumerate() {
        assert_eq!(s.call_id.as_deref(), Some(format!("call-7-{i}").as_str()));
        assert_eq!((s.packets, s.lost), (100, 0));
    }
    assert!(out
        .calls
        .iter()
        .all(|c| c.streams == 1 && c.end_reason == "bye_caller"));
}

/// RTCP: an SR from the media sender, then the receiver's RR naming it (LSR) 100 ms later with
/// a DLSR of 40 ms: a 60 ms round trip, and the reported loss and jitter on the sender's stream.
#[test]
fn rtcp_sr_and_rr_give_round_trip_loss_and_jitter() {
    let mut t = Tracker::new(TrackerConfig::default()).unwrap();
    let mut out = Output::default();
    let m = invite(7, true);
    let m = sip::parse(&m).unwrap();
    t.on_sip(
        &SipEvent::new(0, addr("10.9.9.9:5060"), addr("10.0.0.2:5060"), false, &m),
        &mut out,
    );
    let (src, dst) = (addr("10.5.5.5:20000"), addr("10.0.0.7:10014"));
    for seq in 0..10u16 {
        t.on_udp(seq as u64 * 20_000_000, src, dst, &rtp(seq), &mut out);
    }
    // SR from SSRC 42 (the stream's), NTP 0x0001_2345.6789_0000: LSR 0x2345_6789.
    #[rustfmt::skip]
    let sr = [
        0x80, 200, 0, 6, 0, 0, 0, 42,
        0x00, 0x01, 0x23, 0x45, 0x67, 0x89, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0x06, 0x40,
    ];
    t.on_udp(
        200_000_000,
        addr("10.5.5.5:20001"),
        addr("10.0.0.7:10015"),
        &sr,
        &mut out,
    );
    // RR from SSRC 7 about 42: fraction 1/256, 2 lost, jitter 80 units, DLSR 40 ms.
    let dlsr = (40u32 << 16) / 1000;
    let mut rr = vec![0x81, 201, 0, 7, 0, 0, 0, 7, 0, 0, 0, 42, 1, 0, 0, 2];
    rr.extend_from_slice(&[0, 0, 0, 9, 0, 0, 0, 80, 0x23, 0x45, 0x67, 0x89]);
    rr.extend_from_slice(&dlsr.to_be_bytes());
    t.on_udp(
        300_000_000,
        addr("10.0.0.7:10015"),
        addr("10.5.5.5:20001"),
        &rr,
        &mut out,
    );
    t.finish(&mut out);
    let s = &out.streams[0];
    assert_eq!(s.rtcp_reports, 1);
    assert_eq!(s.rtcp_lost, Some(2));
    assert_eq!(s.rtcp_fraction_lost, Some(1.0 / 256.0));
    assert_eq!(s.rtcp_jitter_ms, Some(10.0), "80 units at 8 kHz");
    let rtt = s.rtt_ms.unwrap();
    assert!((rtt - 60.0).abs() < 0.1, "{rtt}");
}

/// A BYE for call `i` of [`invite`], from the caller.
fn bye(i: u32) -> Vec<u8> {
    format!(
        "BYE sip:bob{i}@b.org SIP/2.0\r\nCall-ID: call-{i}\r\nFrom: <sip:alice{i}@a.org>;tag=a{i}\r\n\
         To: <sip:bob{i}@b.org>;tag=b{i}\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n"
    )
    .into_bytes()
}

#[test]
fn calls_in_progress_are_listed_as_active_and_end_as_shutdown_when_a_monitor_stops() {
    let mut t = Tracker::new(TrackerConfig::default()).unwrap();
    let mut out = Output::default();
    let (a, b) = (addr("10.9.9.9:5060"), addr("10.0.0.2:5060"));
    for (i, msg) in [(1, invite(1, false)), (2, invite(2, false)), (1, bye(1))] {
        let m = sip::parse(&msg).unwrap();
        t.on_sip(&SipEvent::new(i as u64 * 1_000, a, b, false, &m), &mut out);
    }
    // Listing the calls leaves them in the table.
    let active = t.active_records();
    let reasons: Vec<(&str, &str)> = active
        .iter()
        .map(|c| (c.call_id.as_str(), c.end_reason))
        .collect();
    assert_eq!(reasons, [("call-1", "bye_caller"), ("call-2", "active")]);
    assert_eq!(t.stats().active_calls, 2);
    assert!(out.calls.is_empty());
    // Stopping: the call still in progress ends as `shutdown`, the ended one keeps its BYE.
    t.finish_as("shutdown", &mut out);
    let mut ended: Vec<(&str, &str)> = out
        .calls
        .iter()
        .map(|c| (c.call_id.as_str(), c.end_reason))
        .collect();
    ended.sort();
    assert_eq!(ended, [("call-1", "bye_caller"), ("call-2", "shutdown")]);
}

/// Timeouts come from deadline queues: a call kept alive by RTP alone times out
/// `call_timeout` after its last packet (not its INVITE), one ended by BYE `linger` after it,
/// an orphan stream `stream_timeout` after its last packet; each is written by the first
/// sweep (once a second of packet time) after its deadline, and calls due together in slot
/// order.
#[test]
fn timeouts_follow_the_last_packet_and_calls_due_together_end_in_slot_order() {
    const S: u64 = 1_000_000_000;
    let cfg = TrackerConfig {
        call_timeout_ns: 10 * S,
        linger_ns: 2 * S,
        stream_timeout_ns: 5 * S,
        ..TrackerConfig::default()
    };
    let mut t = Tracker::new(cfg).unwrap();
    let mut out = Output::default();
    let (a, b) = (addr("10.9.9.9:5060"), addr("10.0.0.2:5060"));
    for i in [1, 2, 3] {
        let bytes = invite(i, true);
        let m = sip::parse(&bytes).unwrap();
        t.on_sip(&SipEvent::new(0, a, b, false, &m), &mut out);
    }
    // Call 1: RTP every second up to 20 s, then nothing. Call 2: answered at 1 s, a BYE at
    // 3 s. Call 3: nothing after its INVITE. An orphan stream: packets up to 4 s.
    let ok = b"SIP/2.0 200 OK\r\nCall-ID: call-2\r\nFrom: <sip:alice2@a.org>;tag=a2\r\n\
        To: <sip:bob2@b.org>;tag=b2\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n";
    let m = sip::parse(ok).unwrap();
    t.on_sip(&SipEvent::new(S, b, a, false, &m), &mut out);
    let bytes = bye(2);
    let m = sip::parse(&bytes).unwrap();
    t.on_sip(&SipEvent::new(3 * S, a, b, false, &m), &mut out);
    let ended = |out: &Output| {
        let mut ids: Vec<(String, &str)> = out
            .calls
            .iter()
            .map(|c| (c.call_id.clone(), c.end_reason))
            .collect();
        ids.sort();
        ids
    };
    let mut last_len = 0;
    let mut when = Vec::new();
    for sec in 0..=40u64 {
        if sec <= 20 {
            let p = rtp(sec as u16);
            t.on_udp(
                sec * S,
                addr("10.5.5.5:20000"),
                addr("10.0.0.1:10002"),
                &p,
                &mut out,
            );
        }
        if sec <= 4 {
            let p = rtp(sec as u16);
            t.on_udp(
                sec * S + 1,
                addr("10.7.7.7:30000"),
                addr("10.8.8.8:30002"),
                &p,
                &mut out,
            );
        }
        t.advance(sec * S + S / 2, &mut out);
        if out.calls.len() != last_len {
            when.push((sec, out.calls.last().unwrap().call_id.clone()));
            last_len = out.calls.len();
        }
    }
    assert_eq!(
        ended(&out),
        vec![
            ("call-1".to_string(), "timeout"),
            ("call-2".to_string(), "bye_caller"),
            ("call-3".to_string(), "timeout"),
        ]
    );
    // Deadlines: BYE at 3 s + 2 s linger; call 3's INVITE at 0 + 10 s; call 1's last RTP at
    // 20 s + 10 s. The sweep runs once a second of packet time, after a deadline (strictly):
    // here at whole seconds (the RTP) while RTP comes, then at half seconds (`advance`).
    let at = |id: &str| when.iter().find(|(_, c)| c == id).map(|(s, _)| *s);
    assert_eq!(at("call-2"), Some(6), "{when:?}");
    assert_eq!(at("call-3"), Some(11), "{when:?}");
    assert_eq!(at("call-1"), Some(30), "{when:?}");
    let call1 = out.calls.iter().find(|c| c.call_id == "call-1").unwrap();
    assert_eq!(call1.end_ns, 20 * S, "a timeout ends at the last packet");
    let orphan: Vec<_> = out.streams.iter().filter(|s| s.orphan).collect();
    assert_eq!(
        orphan.len(),
        1,
        "the orphan written once, after 4 s + 5 s idle"
    );
    assert_eq!(orphan[0].packets, 5);
}

/// The end of the input written in parts gives the records of one `finish`, in the same
/// order, never more than a part (and a call's streams) held at once.
#[test]
fn finish_in_parts_writes_what_finish_does_a_part_at_a_time() {
    let build = || {
        let mut t = Tracker::new(TrackerConfig::default()).unwrap();
        let mut out = Output::default();
        for i in 0..50u32 {
            let m = invite(i, true);
            let m = sip::parse(&m).unwrap();
            let ev = SipEvent::new(
                u64::from(i),
                addr("10.9.9.9:5060"),
                addr("10.0.0.2:5060"),
                false,
                &m,
            );
            t.on_sip(&ev, &mut out);
            let dst = SocketAddr::new(format!("10.0.0.{i}").parse().unwrap(), 10000 + 2 * i as u16);
            for seq in 0..3 {
                t.on_udp(
                    1_000 + u64::from(seq),
                    addr("10.5.5.5:20000"),
                    dst,
                    &rtp(seq),
                    &mut out,
                );
            }
        }
        // An orphan stream too.
        for seq in 0..5 {
            t.on_udp(
                2_000 + u64::from(seq),
                addr("10.6.6.6:30000"),
                addr("10.7.7.7:30002"),
                &rtp(seq),
                &mut out,
            );
        }
        assert!(out.is_empty());
        t
    };
    let mut whole = Output::default();
    build().finish(&mut whole);
    assert_eq!((whole.calls.len(), whole.streams.len()), (50, 51));
    let (mut calls, mut streams, mut parts) = (Vec::new(), Vec::new(), 0);
    let mut out = Output::default();
    build().finish_in_parts("active_at_end", &mut out, 7, |out| {
        assert!(out.len() <= 7 + 1, "{} records held", out.len());
        parts += 1;
        calls.append(&mut out.calls);
        streams.append(&mut out.streams);
    });
    calls.append(&mut out.calls);
    streams.append(&mut out.streams);
    assert!(parts >= 101 / 8, "{parts} parts");
    assert_eq!((calls, streams), (whole.calls, whole.streams));
}

/// `finish` drops the indexes whole rather than entry by entry: the table is empty after it
/// and takes the same call, stream and orphan again as new ones.
#[test]
fn after_finish_the_table_is_empty_and_takes_the_same_calls_again() {
    let mut t = Tracker::new(TrackerConfig::default()).unwrap();
    let (a, b) = (addr("10.9.9.9:5060"), addr("10.0.0.2:5060"));
    let (src, dst) = (addr("10.5.5.5:20000"), addr("10.0.0.7:10014"));
    let (orphan_src, orphan_dst) = (addr("10.6.6.6:30000"), addr("10.7.7.7:30002"));
    for round in 0..3u64 {
        let mut out = Output::default();
        let t0 = round * 1_000 * 1_000_000_000;
        let m = invite(7, true);
        let m = sip::parse(&m).unwrap();
        t.on_sip(&SipEvent::new(t0, a, b, false, &m), &mut out);
        for seq in 0..10u16 {
            let at = t0 + 1 + u64::from(seq) * 20_000_000;
            t.on_udp(at, src, dst, &rtp(seq), &mut out);
            if seq < 5 {
                t.on_udp(at + 1, orphan_src, orphan_dst, &rtp(seq), &mut out);
            }
        }
        let s = t.stats();
        assert_eq!((s.active_calls, s.active_streams), (1, 2), "round {round}");
        t.finish(&mut out);
        let s = t.stats();
        assert_eq!((s.active_calls, s.active_streams), (0, 0), "round {round}");
        assert_eq!(out.calls.len(), 1, "round {round}");
        assert_eq!((out.calls[0].streams, out.calls[0].rtp_packets), (1, 10));
        let mut streams: Vec<_> = out
            .streams
            .iter()
            .map(|s| (s.call_id.as_deref(), s.orphan, s.packets, s.lost))
            .collect();
        streams.sort();
        assert_eq!(
            streams,
            [(None, true, 5, 0), (Some("call-7"), false, 10, 0)],
            "round {round}"
        );
    }
}

/// Streams are told apart by both endpoints and the SSRC whatever the address family: IPv4
/// keys are compared packed in the hot entry, IPv6 ones in the stream; interleaved streams
/// that differ in one part only each keep their own packets.
#[test]
fn ipv4_and_ipv6_streams_differing_in_one_part_keep_their_own_packets() {
    let mut t = Tracker::new(TrackerConfig::default()).unwrap();
    let mut out = Output::default();
    let keys = [
        ("10.0.0.1:4000", "10.0.0.2:4002", 1u32),
        ("10.0.0.1:4000", "10.0.0.2:4002", 2),
        ("10.0.0.2:4002", "10.0.0.1:4000", 1),
        ("10.0.0.1:4000", "10.0.0.3:4002", 1),
        ("[2001:db8::1]:4000", "[2001:db8::2]:4002", 1),
        ("[2001:db8::1]:4000", "[2001:db8::2]:4002", 2),
        ("[2001:db8::1]:4000", "10.0.0.2:4002", 1),
        ("[::ffff:10.0.0.1]:4000", "[::ffff:10.0.0.2]:4002", 1),
    ];
    for round in 0..(20 + keys.len() as u16) {
        for (k, (src, dst, ssrc)) in keys.iter().enumerate() {
            // Stream k sends 20 + k packets.
            if round >= 20 + k as u16 {
                continue;
            }
            let mut pkt = rtp(round);
            pkt[8..12].copy_from_slice(&ssrc.to_be_bytes());
            t.on_udp(
                u64::from(round) * 20_000_000 + k as u64,
                addr(src),
                addr(dst),
                &pkt,
                &mut out,
            );
        }
    }
    t.finish(&mut out);
    assert_eq!(out.streams.len(), keys.len());
    for (k, (src, dst, ssrc)) in keys.iter().enumerate() {
        let s = out
            .streams
            .iter()
            .find(|s| {
                (
                    s.src_ip.as_str(),
                    s.src_port,
                    s.dst_ip.as_str(),
                    s.dst_port,
                    s.ssrc,
                ) == (
                    &addr(src).ip().to_string()[..],
                    addr(src).port(),
                    &addr(dst).ip().to_string()[..],
                    addr(dst).port(),
                    *ssrc,
                )
            })
            .unwrap_or_else(|| panic!("stream {k} missing: {:#?}", out.streams));
        assert_eq!(
            (s.packets, s.lost, s.duplicated),
            (20 + k as u64, 0, 0),
            "{k}"
        );
        assert!(s.orphan);
    }
}
