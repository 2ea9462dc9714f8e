//! SHA-1 (FIPS 180-4), the hash Community ID v1 is defined over: RustCrypto's `sha1`, which
//! on x86-64 compresses with the processor's SHA extensions when it has them (detected at run
//! time; Intel since Goldmont and Ice Lake, AMD since Zen) and with portable rounds elsewhere.
//! Every flow record written as text or stored gets its Community ID, so every record pays a
//! digest: with the extensions about 110 ns against 280 ns for the portable rounds trawl used
//! to carry (this VM). Not for anything security-related.
use sha1::{Digest, Sha1};

/// The SHA-1 digest of the concatenation of `parts`.
pub(crate) fn digest(parts: &[&[u8]]) -> [u8; 20] {
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
