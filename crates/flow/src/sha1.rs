//! SHA-1 (FIPS 180-4), the hash Community ID v1 is defined over.
//!
//! Written out here rather than pulled in as a crate: it is 60 lines, has no configuration, and
//! the spec's test vectors check it end to end. Not for anything security-related.

/// The SHA-1 digest of the concatenation of `parts`.
pub(crate) fn digest(parts: &[&[u8]]) -> [u8; 20] {
    let mut state = [
        0x6745_2301u32,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let total: usize = parts.iter().map(|p| p.len()).sum();
    let mut block = [0u8; 64];
    let mut fill = 0;
    for &byte in parts.iter().flat_map(|p| p.iter()) {
        block[fill] = byte;
        fill += 1;
        if fill == 64 {
            compress(&mut state, &block);
            fill = 0;
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

fn compress(state: &mut [u32; 5], block: &[u8; 64]) {
    let mut w = [0u32; 80];
    for (i, chunk) in block.chunks_exact(4).enumerate() {
        w[i] = u32::from_be_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    for i in 16..80 {
        w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
    }
    let [mut a, mut b, mut c, mut d, mut e] = *state;
    for (i, &wi) in w.iter().enumerate() {
        let (f, k) = match i {
            0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
            20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
            40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
            _ => (b ^ c ^ d, 0xCA62_C1D6),
        };
        let t = a
            .rotate_left(5)
            .wrapping_add(f)
            .wrapping_add(e)
            .wrapping_add(k)
            .wrapping_add(wi);
        e = d;
        d = c;
        c = b.rotate_left(30);
        b = a;
        a = t;
    }
    for (s, v) in state.iter_mut().zip([a, b, c, d, e]) {
        *s = s.wrapping_add(v);
    }
}

#[cfg(test)]
mod tests {
    use super::digest;

    fn hex(d: [u8; 20]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
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
    }
}
