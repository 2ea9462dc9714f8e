//! Internet checksums (RFC 1071) and their incremental update (RFC 1624).

/// Adds `data` as big-endian 16-bit words to a running 32-bit sum (odd trailing byte padded).
pub fn sum_words(mut sum: u32, data: &[u8]) -> u32 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    sum
}

/// Folds a running sum and complements it: the checksum to store.
pub fn finish(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ones-complement checksum of `data`; over a header that includes a valid checksum it is 0.
#[cfg(test)]
pub fn checksum(data: &[u8]) -> u16 {
    finish(sum_words(0, data))
}

/// Incremental update of checksum `hc` when the 16-bit words `old` become `new`
/// (RFC 1624 equation 3: HC' = ~(~HC + ~m + m')). A checksum that was wrong stays wrong, which
/// keeps the seed's damaged packets damaged in every copy.
pub fn checksum_update(hc: u16, old: &[u8], new: &[u8]) -> u16 {
    let mut sum = u32::from(!hc);
    for (o, n) in old.chunks_exact(2).zip(new.chunks_exact(2)) {
        sum += u32::from(!u16::from_be_bytes([o[0], o[1]]));
        sum += u32::from(u16::from_be_bytes([n[0], n[1]]));
    }
    finish(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The IPv4 header example from RFC 1071 errata / Wikipedia "IPv4 header checksum".
    const HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, // ver..proto
        0xb8, 0x61, // checksum
        0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7, // 192.168.0.1 -> 192.168.0.199
    ];

    #[test]
    fn known_header_checksum() {
        let mut h = HDR;
        h[10] = 0;
        h[11] = 0;
        assert_eq!(checksum(&h), 0xb861);
        assert_eq!(checksum(&HDR), 0);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(
            checksum(&[0x12, 0x34, 0x56]),
            checksum(&[0x12, 0x34, 0x56, 0x00])
        );
    }

    #[test]
    fn incremental_matches_full_recompute() {
        let mut h = HDR;
        let old = h[12..20].to_vec();
        h[13] ^= 0x5a;
        h[18] ^= 0xff;
        h[19] ^= 0x01;
        let inc = checksum_update(0xb861, &old, &h[12..20]);
        h[10] = 0;
        h[11] = 0;
        assert_eq!(inc, checksum(&h));
    }
}
