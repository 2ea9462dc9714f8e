//! The sample trace shipped with the Crypto-PAn reference implementation (Georgia Tech,
//! `sample.cpp`, `sample_trace_raw.txt`, `sample_trace_sanitized.txt`): 100 IPv4 addresses
//! before and after anonymization with the key in `sample.cpp`. Copied from yacryptopan's
//! repository; provenance in testdata/anon/README.md.

use std::net::Ipv4Addr;

use trawl_anon::{CryptoPan, Key};

/// The key of the reference distribution's `sample.cpp`.
const SAMPLE_KEY: [u8; 32] = [
    21, 34, 23, 141, 51, 164, 207, 128, 19, 10, 91, 22, 73, 144, 125, 16, 216, 152, 143, 131, 121,
    121, 101, 39, 98, 87, 76, 45, 42, 132, 34, 2,
];

/// The addresses (third tab-separated column) of a sample trace file.
fn addresses(name: &str) -> Vec<Ipv4Addr> {
    let path = crate::testdata().join("anon").join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .map(|line| {
            line.split('\t')
                .nth(2)
                .expect("three columns")
                .trim()
                .parse()
                .unwrap()
        })
        .collect()
}

#[test]
fn reference_sample_trace_reproduced_exactly() {
    let raw = addresses("sample_trace_raw.dat");
    let sanitized = addresses("sample_trace_sanitized.dat");
    assert_eq!(raw.len(), 100);
    assert_eq!(sanitized.len(), 100);
    let pan = CryptoPan::new(&Key::from_bytes(&SAMPLE_KEY).unwrap());
    for (i, (raw, expected)) in raw.iter().zip(&sanitized).enumerate() {
        assert_eq!(
            pan.v4(*raw),
            *expected,
            "line {} of the sample trace: {raw}",
            i + 1
        );
    }
}
