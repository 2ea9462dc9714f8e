//! Prefix preservation, property style: for seeded random pairs sharing a prefix of every
//! length, the anonymized pair shares a prefix of exactly that length.

use std::net::IpAddr;

use trawl_anon::{Anonymizer, CryptoPan, Key};

use crate::{common_prefix, Rng};

/// A second address sharing exactly `len` leading bits with `bits` (of `width`).
fn with_common_prefix(bits: u128, len: u32, width: u32, rng: &mut Rng) -> u128 {
    if len == width {
        return bits;
    }
    let flip = 1u128 << (width - 1 - len);
    let low_mask = flip - 1;
    let random_low = (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) & low_mask;
    ((bits ^ flip) & !low_mask) | random_low
}

#[test]
fn anonymization_preserves_common_prefix_length() {
    let mut rng = Rng::new(0x5eed_0001);
    let key: Vec<u8> = (0..32).map(|_| rng.next_u64() as u8).collect();
    let mut anon = Anonymizer::new(CryptoPan::new(&Key::from_bytes(&key).unwrap()), Vec::new());
    for _ in 0..200 {
        for len in 0..=32 {
            let a = rng.next_u64() as u32;
            let b = with_common_prefix(u128::from(a), len, 32, &mut rng) as u32;
            let (a, b) = (IpAddr::from(a.to_be_bytes()), IpAddr::from(b.to_be_bytes()));
            assert_eq!(common_prefix(a, b), len);
            assert_eq!(common_prefix(anon.ip(a), anon.ip(b)), len, "{a} and {b}");
        }
        for len in (0..=128).step_by(3) {
            let a = u128::from(rng.v6());
            let b = with_common_prefix(a, len, 128, &mut rng);
            let (a, b) = (IpAddr::from(a.to_be_bytes()), IpAddr::from(b.to_be_bytes()));
            assert_eq!(common_prefix(a, b), len);
            assert_eq!(common_prefix(anon.ip(a), anon.ip(b)), len, "{a} and {b}");
        }
    }
}

#[test]
fn kept_prefixes_unchanged_and_others_anonymized() {
    let key = Key::from_bytes(&[9; 32]).unwrap();
    let keep = vec!["10.0.0.0/8".parse().unwrap(), "fd00::/8".parse().unwrap()];
    let mut anon = Anonymizer::new(CryptoPan::new(&key), keep);
    let plain = CryptoPan::new(&key);
    let mut rng = Rng::new(7);
    for _ in 0..1000 {
        let a = rng.v4();
        let expected = if a.octets()[0] == 10 { a } else { plain.v4(a) };
        assert_eq!(anon.v4(a), expected);
        let mut b = a.octets();
        b[0] = 10;
        assert_eq!(anon.v4(b.into()), std::net::Ipv4Addr::from(b));
        let mut c = rng.v6().octets();
        c[0] = 0xfd;
        assert_eq!(anon.v6(c.into()), std::net::Ipv6Addr::from(c));
    }
}

#[test]
fn cache_returns_what_crypto_pan_computes() {
    // More distinct addresses than cache slots, each asked twice, so hits and evictions both
    // happen.
    let key = Key::from_bytes(&[3; 32]).unwrap();
    let mut anon = Anonymizer::new(CryptoPan::new(&key), Vec::new());
    let plain = CryptoPan::new(&key);
    let mut rng = Rng::new(11);
    let addrs: Vec<_> = (0..10_000).map(|_| (rng.v4(), rng.v6())).collect();
    for (v4, v6) in addrs.iter().chain(&addrs) {
        assert_eq!(anon.v4(*v4), plain.v4(*v4));
        assert_eq!(anon.v6(*v6), plain.v6(*v6));
    }
}
