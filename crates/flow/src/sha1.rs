//! SHA-1 (FIPS 180-4), the hash Community ID v1 is defined over: RustCrypto's `sha1`, which
//! on x86-64 compresses with the processor's SHA extensions when it has them (detected at run
//! time; Intel since Goldmont and Ice Lake, AMD since Zen) and with portable rounds elsewhere.
//! Every flow record written as text or stored gets its Community ID, so every record pays a
//! digest: with the extensions about 110 ns against 280 ns for the portable rounds trawl used
//! to carry (this VM). Not for anything security-related.
//!
//! A Community ID message is at most 40 bytes (seed, two IPv6 addresses, protocol, padding,
//! ports), one SHA-1 block with its padding: [`digest`] builds that block on the stack and
//! compresses it once, without the streaming hasher's buffering around it.
use sha1::digest::generic_array::GenericArray;
use sha1::{Digest, Sha1};

/// SHA-1's initial state (FIPS 180-4, 5.3.1).
const IV: [u32; 5] = [
    0x6745_2301,
    0xEFCD_AB89,
    0x98BA_DCFE,
    0x1032_5476,
    0xC3D2_E1F0,
];
/// The longest message one padded block holds: 64 bytes less the 0x80 byte and the 8-byte
/// length.
const ONE_BLOCK: usize = 55;

/// The SHA-1 digest of the concatenation of `parts`.
pub(crate) fn digest(parts: &[&[u8]]) -> [u8; 20] {
    let len: usize = parts.iter().map(|p| p.len()).sum();
    if len <= ONE_BLOCK {
        let mut block = [0u8; 64];
        let mut at = 0;
        for part in parts {
            block[at..at + part.len()].copy_from_slice(part);
            at += part.len();
        }
        block[at] = 0x80;
        block[56..].copy_from_slice(&(len as u64 * 8).to_be_bytes());
        let mut state = IV;
        sha1::compress(
            &mut state,
            core::slice::from_ref(GenericArray::from_slice(&block)),
        );
        let mut out = [0u8; 20];
        for (chunk, word) in out.chunks_exact_mut(4).zip(state) {
            chunk.copy_from_slice(&word.to_be_bytes());
        }
        return out;
    }
    let mut h = Sha1::new();
    for part in parts {
        h.update(part);
    }
    h.finalize().into()
}

#[cfg(test)]
mod tests {
    use super::digest;

    fn hex(d: [u8; 20]) -> String {
        d.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// The one-block path gives the streaming hasher's digest at every length it takes, and
    /// the lengths past it go to the hasher.
    #[test]
    fn one_block_equals_the_streaming_hasher() {
        use sha1::{Digest, Sha1};
        let msg: Vec<u8> = (0..80u8).map(|b| b.wrapping_mul(37)).collect();
        for len in 0..=msg.len() {
            let (x, y) = msg[..len].split_at(len / 3);
            assert_eq!(
                digest(&[x, y]),
                <[u8; 20]>::from(Sha1::digest(&msg[..len])),
                "{len} bytes"
            );
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
