//! Addresses per second: Crypto-PAn alone (every address computed) and through the
//! `Anonymizer`'s cache on a flow-like mix (a few busy addresses, many rare ones).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use trawl_anon::{Anonymizer, CryptoPan, Key};

const N: usize = 4096;

/// Deterministic addresses: SplitMix64.
fn addresses(seed: u64) -> (Vec<Ipv4Addr>, Vec<Ipv6Addr>) {
    let mut s = seed;
    let mut next = || {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for i in 0..N {
        // Flow-like: every other address is one of 64 busy hosts.
        let r = if i % 2 == 0 { next() % 64 } else { next() };
        v4.push(Ipv4Addr::from(r as u32));
        v6.push(Ipv6Addr::from(
            u128::from(r) << 64 | u128::from(r.rotate_left(17)),
        ));
    }
    (v4, v6)
}

fn bench(c: &mut Criterion) {
    let key = Key::from_bytes(&[42; 32]).unwrap();
    let pan = CryptoPan::new(&key);
    let (v4, v6) = addresses(1);
    let mut g = c.benchmark_group("anonymize");
    g.throughput(Throughput::Elements(N as u64));
    g.bench_function("cryptopan_v4", |b| {
        b.iter(|| {
            v4.iter()
                .map(|a| u32::from(pan.v4(black_box(*a))))
                .sum::<u32>()
        })
    });
    g.bench_function("cryptopan_v6", |b| {
        b.iter(|| {
            v6.iter()
                .map(|a| u128::from(pan.v6(black_box(*a))))
                .sum::<u128>()
        })
    });
    let mut anon = Anonymizer::new(pan.clone(), Vec::new());
    g.bench_function("anonymizer_v4_flow_mix", |b| {
        b.iter(|| {
            v4.iter()
                .map(|a| u32::from(anon.v4(black_box(*a))))
                .sum::<u32>()
        })
    });
    g.bench_function("anonymizer_v6_flow_mix", |b| {
        b.iter(|| {
            v6.iter()
                .map(|a| u128::from(anon.v6(black_box(*a))))
                .sum::<u128>()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
