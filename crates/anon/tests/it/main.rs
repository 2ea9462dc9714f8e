//! trawl-anon's integration tests: the reference implementation's sample trace, agreement
//! with PyPI's yacryptopan, prefix preservation and key files.

mod key_file;
mod prefix_preserving;
mod reference;
mod yacryptopan;

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// A seeded generator (SplitMix64), so every run checks the same addresses.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn v4(&mut self) -> Ipv4Addr {
        Ipv4Addr::from(self.next_u64() as u32)
    }

    pub fn v6(&mut self) -> Ipv6Addr {
        Ipv6Addr::from(u128::from(self.next_u64()) << 64 | u128::from(self.next_u64()))
    }
}

/// Length of the common prefix of two addresses of one family, in bits.
pub fn common_prefix(a: IpAddr, b: IpAddr) -> u32 {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) ^ u32::from(b)).leading_zeros(),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a) ^ u128::from(b)).leading_zeros(),
        _ => panic!("{a} and {b} are of different families"),
    }
}

/// The workspace's testdata directory.
pub fn testdata() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}
