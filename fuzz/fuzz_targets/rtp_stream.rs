//! Fuzzes RTP and RTCP parsing and stream statistics through the path `rtp_calls` uses,
//! batches of packets ([`Tracker::on_packets`], with its prefetching pipeline): the input is
//! cut into datagrams (a length byte, then that many bytes) sent between three endpoints (one
//! IPv6) at times that may jump or go back, some of them TCP or undecoded packets; a datagram
//! whose length byte is a multiple of 7 ends the batch. Nothing may panic or overflow; every stream
//! written has at least one packet, and the counts add up.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_voip::{rtp, Output, PacketKind, Packets, Tracker, TrackerConfig};

fuzz_target!(|data: &[u8]| {
    let cfg = TrackerConfig {
        max_streams: 4,
        orphan_packets: 1,
        ..TrackerConfig::default()
    };
    let mut table = Tracker::new(cfg).unwrap();
    let mut out = Output::default();
    let (a, b) = ("10.0.0.1:4000".parse().unwrap(), "10.0.0.2:4002".parse().unwrap());
    let c = "[2001:db8::2]:4004".parse().unwrap();
    let mut rest = data;
    let mut ts = 0u64;
    let mut report = rtp::Rtcp::default();
    let mut batch = Packets::default();
    let mut before_calls = 0;
    let mut taken = 0;
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        let (pkt, next) = tail.split_at(n);
        rest = next;
        // Time moves by the length byte, in steps up to a minute, backwards when it is odd.
        let step = (len as u64) * 250_000_000;
        ts = if len % 2 == 1 { ts.saturating_sub(step / 8) } else { ts + step };
        let _ = rtp::parse_rtp(pkt);
        rtp::parse_rtcp(pkt, &mut report);
        // IPv6 endpoints too: the table keeps them apart from the packed IPv4 pairs.
        let (src, dst) = match (len % 3, len % 5) {
            (0, _) => (b, a),
            (_, 0) => (c, a),
            _ => (a, b),
        };
        let kind = match len % 11 {
            5 => PacketKind::Other,
            9 => PacketKind::Ignored,
            _ => PacketKind::Media,
        };
        // The payload as a range of the input, as `sip` gives the batch's bytes.
        let start = pkt.as_ptr() as usize - data.as_ptr() as usize;
        match kind {
            PacketKind::Ignored => batch.push_ignored(ts),
            _ => batch.push(ts, src, dst, start, pkt.len(), kind),
        }
        if len % 7 == 0 || rest.is_empty() {
            table.on_packets(&batch, data, &mut out, |_, _, _| before_calls += 1);
            taken += batch.len();
            batch.clear();
        }
    }
    // Each packet is taken once, after its `before`.
    assert_eq!(before_calls, taken);
    let rtp_packets = table.stats().rtp_packets;
    table.finish(&mut out);
    assert!(out.streams.iter().all(|s| s.packets >= 1));
    assert!(out.streams.iter().map(|s| s.packets).sum::<u64>() <= rtp_packets);
});
