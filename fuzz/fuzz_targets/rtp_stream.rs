//! Fuzzes RTP and RTCP parsing and stream statistics: the input is cut into datagrams (a
//! length byte, then that many bytes) sent from two endpoints at times that may jump or go
//! back. Nothing may panic or overflow; every stream written has at least one packet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_voip::{rtp, Output, Tracker, TrackerConfig};

fuzz_target!(|data: &[u8]| {
    let cfg = TrackerConfig {
        max_streams: 4,
        orphan_packets: 1,
        ..TrackerConfig::default()
    };
    let mut table = Tracker::new(cfg).unwrap();
    let mut out = Output::default();
    let (a, b) = ("10.0.0.1:4000".parse().unwrap(), "10.0.0.2:4002".parse().unwrap());
    let mut rest = data;
    let mut ts = 0u64;
    let mut report = rtp::Rtcp::default();
    while let Some((&len, tail)) = rest.split_first() {
        let n = (len as usize).min(tail.len());
        let (pkt, next) = tail.split_at(n);
        rest = next;
        // Time moves by the length byte, in steps up to a minute, backwards when it is odd.
        let step = (len as u64) * 250_000_000;
        ts = if len % 2 == 1 { ts.saturating_sub(step / 8) } else { ts + step };
        let _ = rtp::parse_rtp(pkt);
        rtp::parse_rtcp(pkt, &mut report);
        let (src, dst) = if len % 3 == 0 { (b, a) } else { (a, b) };
        table.on_udp(ts, src, dst, pkt, &mut out);
    }
    table.finish(&mut out);
    assert!(out.streams.iter().all(|s| s.packets >= 1));
});
