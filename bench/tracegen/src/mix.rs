//! Deterministic mixing functions: every "random" choice tracegen makes comes from these, with
//! fixed seeds, so the same command writes the same bytes on every machine.

/// SplitMix64's output function: a good 64-bit mix of `x` (also a counter-based PRNG:
/// `splitmix64(seed + i)` for successive `i`).
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A bijection on 24-bit values that maps 0 to 0 and spreads small neighbouring inputs far
/// apart. Used for per-copy address offsets: a bijection guarantees two different copies of one
/// flow never get the same offset, and spreading keeps XOR collisions between *different* seed
/// flows (which need `a1 ^ a2 == o1 ^ o2` on both endpoints) unlikely.
pub fn scramble24(x: u32) -> u32 {
    const MASK: u32 = 0x00ff_ffff;
    // Odd multipliers are invertible mod 2^24; xor-shifts to the right are invertible too.
    let mut v = x & MASK;
    v = v.wrapping_mul(0x9e_3779) & MASK;
    v ^= v >> 11;
    v = v.wrapping_mul(0x5b_d1e5) & MASK;
    v ^= v >> 13;
    v
}

/// Greatest common divisor.
pub fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scramble24_is_a_bijection_fixing_zero() {
        let mut seen = vec![false; 1 << 24];
        for x in 0..(1u32 << 24) {
            let y = scramble24(x) as usize;
            assert!(!seen[y], "collision at input {x}");
            seen[y] = true;
        }
        assert_eq!(scramble24(0), 0);
        assert!(
            scramble24(1) > 0xffff,
            "small inputs should spread: {}",
            scramble24(1)
        );
    }

    #[test]
    fn splitmix64_reference_values() {
        // First outputs of the reference SplitMix64 generator seeded with 0.
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(0x9e37_79b9_7f4a_7c15), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn gcd_basics() {
        assert_eq!(gcd(12, 18), 6);
        assert_eq!(gcd(1_200_000, 741_641), 1);
    }
}
