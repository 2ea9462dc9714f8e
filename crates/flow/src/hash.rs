//! The one fast non-cryptographic hasher of the workspace (rustc-hash's `FxHasher`
//! multiply-rotate), for small fixed-size keys: addresses, flow keys, packed group keys.
//! SipHash costs more than the rest of an aggregation step on such keys.
//!
//! Two ways to build it:
//! - [`FxHashMap`] (`FxBuildHasher`): deterministic, for keys that come from the database (the
//!   store and the query engine), where nobody picks collisions in real time and the same
//!   input should hash the same in every run;
//! - [`SeededFxMap`] ([`SeededFxBuild`]): seeded once per process at random, for keys an
//!   attacker on the wire chooses (calls and streams, heavy-hitter summaries): tables are
//!   bounded, and the seed keeps crafted keys from colliding in every process alike.
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::sync::OnceLock;

/// The `FxHasher` multiply-rotate scheme, finished with a multiply so the high bits
/// `hashbrown` uses for its control bytes are well mixed.
#[derive(Clone, Copy, Default)]
pub struct FxHasher {
    hash: u64,
}

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

impl FxHasher {
    /// A hasher starting from `seed` instead of 0.
    #[inline]
    pub fn with_seed(seed: u64) -> FxHasher {
        FxHasher { hash: seed }
    }

    #[inline]
    fn add(&mut self, w: u64) {
        self.hash = (self.hash.rotate_left(5) ^ w).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or([0; 8])));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut b = [0u8; 8];
            b[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(b));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // Fold the high product bits down: Fx alone leaves the top bits weak for small keys.
        let h = u128::from(self.hash).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h as u64) ^ ((h >> 64) as u64)
    }
}

/// `BuildHasher` of the deterministic [`FxHasher`].
pub type FxBuildHasher = BuildHasherDefault<FxHasher>;

/// A `HashMap` with the deterministic [`FxHasher`].
pub type FxHashMap<K, V> = std::collections::HashMap<K, V, FxBuildHasher>;

/// Builds [`FxHasher`]s from this process's random seed ([`process_seed`]).
#[derive(Clone, Copy, Debug)]
pub struct SeededFxBuild(u64);

impl Default for SeededFxBuild {
    fn default() -> Self {
        SeededFxBuild(process_seed())
    }
}

impl BuildHasher for SeededFxBuild {
    type Hasher = FxHasher;
    #[inline]
    fn build_hasher(&self) -> FxHasher {
        FxHasher::with_seed(self.0)
    }
}

/// A `HashMap` with [`FxHasher`] seeded per process.
pub type SeededFxMap<K, V> = std::collections::HashMap<K, V, SeededFxBuild>;

/// A random seed drawn once per process (from the standard library's `RandomState`, which the
/// operating system seeds).
pub fn process_seed() -> u64 {
    static SEED: OnceLock<u64> = OnceLock::new();
    *SEED.get_or_init(|| {
        std::collections::hash_map::RandomState::new().hash_one(0x74_7261_776c_u64) | 1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_seeded_hashers_differ_only_by_the_seed() {
        let key = [7u8; 40];
        let fixed = FxBuildHasher::default();
        assert_eq!(fixed.hash_one(key), FxBuildHasher::default().hash_one(key));
        let seeded = SeededFxBuild::default();
        assert_eq!(seeded.hash_one(key), SeededFxBuild::default().hash_one(key));
        assert_ne!(seeded.hash_one(key), fixed.hash_one(key));
        let mut m: SeededFxMap<[u8; 16], u32> = SeededFxMap::default();
        m.insert([1; 16], 2);
        assert_eq!(m.get(&[1; 16]), Some(&2));
    }
}
