//! Fuzzes the certificate reader: any bytes as a DER certificate, and as the handshake records
//! that follow a ServerHello, cut into segments at points the first byte chooses. It must not
//! panic; the reader answers at most once, and the same answer in any segmentation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_app::tls::CertificateReader;
use trawl_app::x509::parse_certificate;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = parse_certificate(data) {
        assert!(c.not_before.ends_with('Z') && c.not_after.ends_with('Z'));
    }
    let whole = CertificateReader::default().push(data);
    let step = usize::from(data.first().copied().unwrap_or(1)).max(1);
    let mut split = CertificateReader::default();
    let mut got = None;
    for seg in data.chunks(step) {
        if let Some(r) = split.push(seg) {
            assert!(got.is_none(), "answered twice");
            got = Some(r);
        }
    }
    // Whole records decide the same way however they arrive.
    if let (Some(a), Some(b)) = (&whole, &got) {
        assert_eq!(a, b);
    }
});
