//! Fuzzes the shared TCP reassembly of the stream analysers (`stream_log`'s `TcpAnalysers`: one
//! connection table, TLS, HTTP and DNS over TCP on each connection): packets built from the
//! input between a few clients and servers on ports 53, 80 and 443, with any flags, sequence
//! numbers near each other (overlapping, retransmitted, out of order) and payloads that start
//! as a TLS record, an HTTP head, a DNS length prefix or anything, through a table of four
//! connections with small byte caps. It must not panic; the table holds at most its
//! connections and its out-of-order bytes stay within the total cap after every packet; after
//! the end nothing is held.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_blocks::stream_log::{StreamLogSettings, TcpAnalysers, Wanted};
use trawl_blocks::tcp_conns::TcpPacket;

const MAX_CONNS: usize = 4;
const MAX_TOTAL: usize = 256;

/// Payload starts the fuzzer can reach in one byte.
const STARTS: [&[u8]; 4] = [
    b"\x16\x03\x01\x00\x30\x01\x00\x00\x2c\x03\x03",
    b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n",
    b"\x00\x13\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00\x01a\x00\x00\x01\x00\x01",
];

fuzz_target!(|data: &[u8]| {
    let settings = StreamLogSettings {
        max_conns: MAX_CONNS,
        max_stream_bytes: 64,
        max_total_bytes: MAX_TOTAL,
        max_pending: 4,
    };
    let wanted = Wanted {
        tls: true,
        http: true,
        dns: true,
    };
    let mut t = TcpAnalysers::new(wanted, &settings);
    let mut rest = data;
    let mut ts_ns = 0u64;
    // Each packet: endpoints, flags, sequence, payload kind and length, then payload bytes.
    while rest.len() >= 5 {
        let (h, tail) = rest.split_at(5);
        let client =
            std::net::SocketAddr::from(([10, 0, 0, 1 + (h[0] & 3)], 40000 + u16::from(h[0] >> 6)));
        let server = std::net::SocketAddr::from((
            [10, 0, 1, 1],
            [53, 80, 443][usize::from(h[0] >> 2 & 3) % 3],
        ));
        let from_client = h[0] & 0x10 == 0;
        let (src, dst) = if from_client {
            (client, server)
        } else {
            (server, client)
        };
        let seq = u32::from(h[2]) * 8 + if from_client { 0 } else { 1 << 31 };
        let len = usize::from(h[3] % 64).min(tail.len());
        let (own, tail) = tail.split_at(len);
        let mut payload = Vec::new();
        if h[4] & 4 != 0 {
            payload.extend_from_slice(STARTS[usize::from(h[4] & 3)]);
        }
        payload.extend_from_slice(own);
        ts_ns += u64::from(h[4] >> 3) * 1000;
        let missing = u32::from(h[4] >> 6) * 3;
        t.packet(&TcpPacket {
            ts_ns,
            src,
            dst,
            seq,
            flags: h[1],
            data: &payload,
            missing,
        });
        assert!(t.conns() <= MAX_CONNS, "{} connections", t.conns());
        assert!(t.held() <= MAX_TOTAL, "{} bytes held", t.held());
        rest = tail;
    }
    t.finish();
    assert_eq!(t.held(), 0);
    assert_eq!(t.conns(), 0);
    let lines: usize = t.take().iter().map(Vec::len).sum();
    assert!(lines as u64 <= t.stats().conns * 64 + t.dns_stats().messages);
});
