//! Crypto-PAn itself: the one-time pad of an address, bit by bit from AES.

use std::net::{Ipv4Addr, Ipv6Addr};

use aes::cipher::{generic_array::GenericArray, BlockEncrypt, KeyInit};
use aes::{Aes128, Block};

use crate::Key;

/// Crypto-PAn with one key: a pure function of the address, so it can be shared or cloned.
#[derive(Clone)]
pub struct CryptoPan {
    cipher: Aes128,
    /// `AES(key[..16], key[16..])`: fills the bits past the prefix in every AES input.
    pad: u128,
}

impl CryptoPan {
    /// Crypto-PAn keyed as the reference implementation does.
    pub fn new(key: &Key) -> CryptoPan {
        let cipher = Aes128::new(GenericArray::from_slice(key.aes_key()));
        let mut pad = *Block::from_slice(key.pad_seed());
        cipher.encrypt_block(&mut pad);
        CryptoPan {
            cipher,
            pad: u128::from_be_bytes(pad.into()),
        }
    }

    /// The anonymized IPv4 address.
    pub fn v4(&self, addr: Ipv4Addr) -> Ipv4Addr {
        let bits = u32::from(addr);
        // An IPv4 address takes the first 32 bits of the 128-bit AES input.
        let pad = self.otp(u128::from(bits) << 96, 32) as u32;
        Ipv4Addr::from(bits ^ pad)
    }

    /// The anonymized IPv6 address.
    pub fn v6(&self, addr: Ipv6Addr) -> Ipv6Addr {
        let bits = u128::from(addr);
        Ipv6Addr::from(bits ^ self.otp(bits, 128))
    }

    /// The pad for the first `len` bits of `addr` (left-aligned in 128 bits), right-aligned:
    /// its bit for position `i` is the first bit of AES(the address's first `i` bits, then
    /// the pad's bits from `i` on). The `len` inputs do not depend on each other, so they
    /// go through AES as one batch, which AES-NI pipelines.
    fn otp(&self, addr: u128, len: usize) -> u128 {
        let mut blocks = [Block::default(); 128];
        for (pos, block) in blocks[..len].iter_mut().enumerate() {
            let keep = if pos == 0 {
                0
            } else {
                u128::MAX << (128 - pos)
            };
            let input = (addr & keep) | (self.pad & !keep);
            *block = input.to_be_bytes().into();
        }
        self.cipher.encrypt_blocks(&mut blocks[..len]);
        blocks[..len]
            .iter()
            .fold(0u128, |otp, b| otp << 1 | u128::from(b[0] >> 7))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The values yacryptopan's own self-test prints for the key 0, 1, ..., 31.
    #[test]
    fn yacryptopan_self_test() {
        let key: Vec<u8> = (0..32).collect();
        let pan = CryptoPan::new(&Key::from_bytes(&key).unwrap());
        assert_eq!(
            pan.v4("192.0.2.1".parse().unwrap()),
            "2.90.93.17".parse::<Ipv4Addr>().unwrap()
        );
        assert_eq!(
            pan.v6("2001:db8::1".parse().unwrap()),
            "dd92:2c44:3fc0:ff1e:7ff9:c7f0:8180:7e00"
                .parse::<Ipv6Addr>()
                .unwrap()
        );
    }
}
