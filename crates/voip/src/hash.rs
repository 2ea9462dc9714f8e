//! A fast non-cryptographic hasher for the call and stream tables (FxHash's multiply-rotate).
//! Keys come from the network, so a flood could aim at collisions: the tables are bounded in
//! size, and the per-process random seed keeps crafted keys from colliding everywhere.
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// `HashMap` with [`FxBuild`].
pub type FxMap<K, V> = HashMap<K, V, FxBuild>;

/// Builds [`Fx`] hashers from one seed.
#[derive(Clone, Copy, Debug)]
pub struct FxBuild(u64);

impl Default for FxBuild {
    fn default() -> Self {
        // The address of a stack value differs per run (ASLR): cheap, good enough as a seed.
        let x = 0u8;
        FxBuild((&x as *const u8 as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
}

impl BuildHasher for FxBuild {
    type Hasher = Fx;
    fn build_hasher(&self) -> Fx {
        Fx(self.0)
    }
}

/// The hasher.
#[derive(Clone, Copy, Debug)]
pub struct Fx(u64);

const K: u64 = 0xf135_7aea_2e62_a9c5;

impl Hasher for Fx {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_u64(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut last = [0u8; 8];
            last[..rest.len()].copy_from_slice(rest);
            self.write_u64(u64::from_le_bytes(last));
        }
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(K);
    }
    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.write_u64(n as u64)
    }
    #[inline]
    fn write_u16(&mut self, n: u16) {
        self.write_u64(n as u64)
    }
    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.write_u64(n as u64)
    }
    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64)
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0.rotate_left(26)
    }
}
