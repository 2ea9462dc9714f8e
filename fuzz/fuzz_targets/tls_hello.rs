//! Fuzzes the TLS hello reader: any bytes as the start of a TCP direction, cut into segments
//! at points the first bytes choose, and as a bare hello body of either kind. It must not
//! panic; the reader answers at most once, and a hello read from segments equals the hello read
//! from the whole bytes; fingerprints are computed for every hello. The reader of a second
//! hello (after a HelloRetryRequest) takes the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_app::tls::{parse_hello, CertificateReader, HelloKind, HelloReader};

fuzz_target!(|data: &[u8]| {
    let mut whole = HelloReader::new();
    let expected = whole.push(data);
    let step = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let mut split = HelloReader::new();
    let mut got = None;
    for seg in data.chunks(step) {
        if let Some(r) = split.push(seg) {
            assert!(got.is_none(), "answered twice");
            got = Some(r);
        }
    }
    // Bytes after the hello can only end the whole-input read earlier, never change the hello.
    if let (Some(Ok(a)), Some(Ok(b))) = (&expected, &got) {
        assert_eq!(a, b);
    }
    for h in [&expected, &got].into_iter().flatten().flatten() {
        let _ = (h.ja4(), h.ja4_r(), h.ja4s(), h.ja4s_r(), h.version());
    }
    // The same bytes as what a client sends after a HelloRetryRequest: ChangeCipherSpec
    // records passed over, then its second hello.
    let mut retry = HelloReader::after_retry(CertificateReader::default());
    let mut answers = 0;
    for seg in data.chunks(step) {
        answers += usize::from(retry.push(seg).is_some());
    }
    assert!(answers <= 1, "answered twice");
    for kind in [HelloKind::Client, HelloKind::Server] {
        if let Ok(h) = parse_hello(kind, data) {
            assert!(h.ja4().len() > 10 && h.ja4s().len() > 10);
        }
    }
});
