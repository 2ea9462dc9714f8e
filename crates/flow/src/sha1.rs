//! SHA-1 (FIPS 180-4), the hash Community ID v1 is defined over.
//!
//! Written out here rather than pulled in as a crate: it is 60 lines, has no configuration, and
//! the spec's test vectors check it end to end. Not for anything security-related.
//!
//! Every flow record written as text or stored gets its Community ID, so every record pays a
//! digest: on x86-64 processors with the SHA extensions (Intel since Goldmont and Ice Lake,
//! AMD since Zen) a block is compressed by them, 3-4 times faster than the portable rounds
//! (about 280 against 80 ns per Community ID on the project's VM), which stay for the others.

/// The SHA-1 digest of the concatenation of `parts`.
pub(crate) fn digest(parts: &[&[u8]]) -> [u8; 20] {
    let mut state = [
        0x6745_2301u32,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut total = 0usize;
    let mut block = [0u8; 64];
    let mut fill = 0;
    // Whole slices at a time (a Community ID's parts are 2 to 16 bytes; copying them byte by
    // byte cost a third of the digest).
    for &part in parts {
        total += part.len();
        let mut rest = part;
        while !rest.is_empty() {
            let n = rest.len().min(64 - fill);
            block[fill..fill + n].copy_from_slice(&rest[..n]);
            fill += n;
            rest = &rest[n..];
            if fill == 64 {
                compress(&mut state, &block);
                fill = 0;
            }
        }
    }
    // Padding: 0x80, zeros, then the message length in bits as a 64-bit big-endian number.
    block[fill] = 0x80;
    block[fill + 1..].fill(0);
    if fill >= 56 {
        compress(&mut state, &block);
        block = [0; 64];
    }
    block[56..].copy_from_slice(&((total as u64) * 8).to_be_bytes());
    compress(&mut state, &block);
    let mut out = [0u8; 20];
    for (chunk, word) in out.chunks_exact_mut(4).zip(state) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// One block, by the processor's SHA instructions when it has them.
#[inline]
fn compress(state: &mut [u32; 5], block: &[u8; 64]) {
    #[cfg(target_arch = "x86_64")]
    if sha_ni::available() {
        sha_ni::compress_checked(state, block);
        return;
    }
    compress_portable(state, block);
}

/// One block in portable code: the message schedule kept as a ring of 16 words and the 80
/// rounds as four loops of fixed function and constant (a choice by round number inside one
/// loop of 80 was a branch per round).
fn compress_portable(state: &mut [u32; 5], block: &[u8; 64]) {
    let mut w = [0u32; 16];
    for (wi, chunk) in w.iter_mut().zip(block.chunks_exact(4)) {
        *wi = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    let [mut a, mut b, mut c, mut d, mut e] = *state;
    // Word `i` of the schedule: the block's for the first 16, then from the ring
    // (w[i-3] ^ w[i-8] ^ w[i-14] ^ w[i-16], rotated), which it replaces.
    macro_rules! rounds {
        ($range:expr, $k:expr, $f:expr) => {
            for i in $range {
                let wi = if i < 16 {
                    w[i]
                } else {
                    let x = (w[(i + 13) & 15] ^ w[(i + 8) & 15] ^ w[(i + 2) & 15] ^ w[i & 15])
                        .rotate_left(1);
                    w[i & 15] = x;
                    x
                };
                let f: u32 = $f(b, c, d);
                let t = a
                    .rotate_left(5)
                    .wrapping_add(f)
                    .wrapping_add(e)
                    .wrapping_add($k)
                    .wrapping_add(wi);
                e = d;
                d = c;
                c = b.rotate_left(30);
                b = a;
                a = t;
            }
        };
    }
    rounds!(0..20, 0x5A82_7999, |b: u32, c: u32, d: u32| d
        ^ (b & (c ^ d)));
    rounds!(20..40, 0x6ED9_EBA1, |b: u32, c: u32, d: u32| b ^ c ^ d);
    rounds!(40..60, 0x8F1B_BCDC, |b: u32, c: u32, d: u32| (b & c)
        | (d & (b | c)));
    rounds!(60..80, 0xCA62_C1D6, |b: u32, c: u32, d: u32| b ^ c ^ d);
    for (s, v) in state.iter_mut().zip([a, b, c, d, e]) {
        *s = s.wrapping_add(v);
    }
}

/// The compression function by the x86-64 SHA extensions (`sha1rnds4`, `sha1nexte`,
/// `sha1msg1`, `sha1msg2`), four rounds per instruction; the sequence of Intel's white paper
/// "Intel SHA Extensions" (2013).
#[cfg(target_arch = "x86_64")]
mod sha_ni {
    use std::arch::x86_64::*;

    /// Whether this processor has the instructions (detected once, then a load).
    #[inline]
    pub(super) fn available() -> bool {
        std::arch::is_x86_feature_detected!("sha") && std::arch::is_x86_feature_detected!("sse4.1")
    }

    /// [`compress`] after [`available`] said yes.
    #[allow(unsafe_code)]
    #[inline]
    pub(super) fn compress_checked(state: &mut [u32; 5], block: &[u8; 64]) {
        debug_assert!(available());
        // SAFETY: `compress` only needs the processor to have the SHA and SSE4.1 instructions
        // it is compiled with, which the caller checked with `available()`; it touches no
        // memory but its arguments.
        unsafe { compress(state, block) }
    }

    /// Four rounds with the next four schedule words `wk`, E derived from the state `h1`
    /// held four rounds ago.
    macro_rules! rounds4 {
        ($h0:ident, $h1:ident, $wk:expr, $i:expr) => {
            _mm_sha1rnds4_epu32::<$i>($h0, _mm_sha1nexte_epu32($h1, $wk))
        };
    }
    /// The next four schedule words from the last sixteen.
    macro_rules! schedule {
        ($v0:expr, $v1:expr, $v2:expr, $v3:expr) => {
            _mm_sha1msg2_epu32(_mm_xor_si128(_mm_sha1msg1_epu32($v0, $v1), $v2), $v3)
        };
    }
    macro_rules! schedule_rounds4 {
        ($h0:ident, $h1:ident, $w0:expr, $w1:expr, $w2:expr, $w3:expr, $w4:expr, $i:expr) => {
            $w4 = schedule!($w0, $w1, $w2, $w3);
            $h1 = rounds4!($h0, $h1, $w4, $i);
        };
    }

    #[target_feature(enable = "sha,sse2,ssse3,sse4.1")]
    fn compress(state: &mut [u32; 5], block: &[u8; 64]) {
        let word = |i: usize| {
            i32::from_be_bytes([
                block[4 * i],
                block[4 * i + 1],
                block[4 * i + 2],
                block[4 * i + 3],
            ])
        };
        // Words i..i+4 with the first in the highest lane, as the instructions take them.
        let quad = |i: usize| _mm_set_epi32(word(i), word(i + 1), word(i + 2), word(i + 3));
        let s = state.map(|v| v as i32);
        let mut h0 = _mm_set_epi32(s[0], s[1], s[2], s[3]);
        let mut h1 = _mm_set_epi32(s[4], 0, 0, 0);
        let (abcd, e) = (h0, h1);
        let mut w0 = quad(0);
        let mut w1 = quad(4);
        let mut w2 = quad(8);
        let mut w3 = quad(12);
        let mut w4;
        // Rounds 0-19.
        h1 = _mm_sha1rnds4_epu32::<0>(h0, _mm_add_epi32(h1, w0));
        h0 = rounds4!(h1, h0, w1, 0);
        h1 = rounds4!(h0, h1, w2, 0);
        h0 = rounds4!(h1, h0, w3, 0);
        schedule_rounds4!(h0, h1, w0, w1, w2, w3, w4, 0);
        // Rounds 20-39.
        schedule_rounds4!(h1, h0, w1, w2, w3, w4, w0, 1);
        schedule_rounds4!(h0, h1, w2, w3, w4, w0, w1, 1);
        schedule_rounds4!(h1, h0, w3, w4, w0, w1, w2, 1);
        schedule_rounds4!(h0, h1, w4, w0, w1, w2, w3, 1);
        schedule_rounds4!(h1, h0, w0, w1, w2, w3, w4, 1);
        // Rounds 40-59.
        schedule_rounds4!(h0, h1, w1, w2, w3, w4, w0, 2);
        schedule_rounds4!(h1, h0, w2, w3, w4, w0, w1, 2);
        schedule_rounds4!(h0, h1, w3, w4, w0, w1, w2, 2);
        schedule_rounds4!(h1, h0, w4, w0, w1, w2, w3, 2);
        schedule_rounds4!(h0, h1, w0, w1, w2, w3, w4, 2);
        // Rounds 60-79.
        schedule_rounds4!(h1, h0, w1, w2, w3, w4, w0, 3);
        schedule_rounds4!(h0, h1, w2, w3, w4, w0, w1, 3);
        schedule_rounds4!(h1, h0, w3, w4, w0, w1, w2, 3);
        schedule_rounds4!(h0, h1, w4, w0, w1, w2, w3, 3);
        schedule_rounds4!(h1, h0, w0, w1, w2, w3, w4, 3);
        h0 = _mm_add_epi32(h0, abcd);
        h1 = _mm_sha1nexte_epu32(h1, e);
        state[0] = _mm_extract_epi32::<3>(h0) as u32;
        state[1] = _mm_extract_epi32::<2>(h0) as u32;
        state[2] = _mm_extract_epi32::<1>(h0) as u32;
        state[3] = _mm_extract_epi32::<0>(h0) as u32;
        state[4] = _mm_extract_epi32::<3>(h1) as u32;
    }
}

#[cfg(test)]
mod tests {
    use super::digest;

    fn hex(d: [u8; 20]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The processor's instructions and the portable rounds give the same blocks (on a
    /// processor without them, only the portable ones run: nothing to compare).
    #[test]
    fn sha_extensions_match_the_portable_rounds() {
        #[cfg(target_arch = "x86_64")]
        if super::sha_ni::available() {
            let mut x = 0x2545_f491_4f6c_dd1du64;
            for _ in 0..1000 {
                let mut block = [0u8; 64];
                for b in &mut block {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    *b = x as u8;
                }
                let mut state = [x as u32, (x >> 32) as u32, 7, 0xdead_beef, !(x as u32)];
                let mut portable = state;
                super::sha_ni::compress_checked(&mut state, &block);
                super::compress_portable(&mut portable, &block);
                assert_eq!(state, portable);
            }
        }
    }

    /// FIPS 180 examples, plus lengths around the padding boundary (55, 56, 64 bytes).
    #[test]
    fn fips_vectors() {
        assert_eq!(
            hex(digest(&[b"abc"])),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            hex(digest(&[b""])),
            "da39a3ee5e6b4b0d3255bfef95601890afd80709"
        );
        assert_eq!(
            hex(digest(&[
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            ])),
            "84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        let a = [b'a'; 1000];
        let mut parts: Vec<&[u8]> = Vec::new();
        for _ in 0..1000 {
            parts.push(&a);
        }
        assert_eq!(
            hex(digest(&parts)),
            "34aa973cd4c4daa4f61eeb2bdbad27316534016f"
        );
        // The same message cut into parts that straddle block boundaries.
        let msg: Vec<u8> = (0..200u8).collect();
        let whole = digest(&[&msg]);
        // Python's hashlib.sha1(bytes(range(200))).
        assert_eq!(hex(whole), "54d11e99127d159799dbce10f51a75e697780478");
        for cut in [1, 7, 55, 56, 63, 64, 65, 130] {
            let (x, y) = msg.split_at(cut);
            let (y, z) = y.split_at(y.len() / 2);
            assert_eq!(digest(&[x, y, z]), whole, "cut at {cut}");
        }
    }
}
