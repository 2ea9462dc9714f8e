//! Fuzzes the QUIC Initial reader: any bytes as datagrams of one connection, cut at points the
//! first bytes choose and sent by the client and the server in turn, and as the plaintext of an
//! Initial (its frames) and as CRYPTO data. It must not panic; a hello read is fingerprinted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_app::quic::{classify, crypto_frames, Connection, CryptoStream, QuicStats, Side};
use trawl_app::tls::HelloKind;

fuzz_target!(|data: &[u8]| {
    let _ = classify(data);
    let _ = crypto_frames(data);
    let mut conn = Connection::new();
    let mut stats = QuicStats::default();
    let step = usize::from(data.first().copied().unwrap_or(1)).max(1) * 8;
    for (i, d) in data.chunks(step).enumerate() {
        let side = if i % 2 == 0 { Side::Client } else { Side::Server };
        conn.datagram(side, d, &mut stats);
    }
    conn.datagram(Side::Client, data, &mut stats);
    for s in &conn.sides {
        if let Some(Ok(h)) = &s.outcome {
            let _ = (h.ja4(), h.ja4s(), h.version());
        }
    }
    // CRYPTO data at offsets the bytes give: bounded, never a panic.
    let mut stream = CryptoStream::default();
    for c in data.chunks(9) {
        if c.len() > 2 {
            let offset = u64::from(u16::from_be_bytes([c[0], c[1]]));
            let _ = stream.insert(offset, &c[2..]);
        }
    }
    let _ = stream.hello(HelloKind::Client);
    let _ = stream.hello(HelloKind::Server);
});
