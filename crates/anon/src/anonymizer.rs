//! Crypto-PAn for outputs: kept prefixes and a cache of recent addresses.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::{CryptoPan, Prefix};

/// Slots of the IPv4 cache (direct-mapped): a flow output's or a trace's busy addresses fit.
const V4_SLOTS: usize = 4096;
/// Slots of the IPv6 cache; an IPv6 address costs 128 AES blocks, four times an IPv4 one.
const V6_SLOTS: usize = 4096;

/// Anonymizes addresses for one output: Crypto-PAn, except inside the kept prefixes, with a
/// direct-mapped cache in front (a miss replaces the slot). Not shared between threads: each
/// output clones its own.
#[derive(Clone)]
pub struct Anonymizer {
    pan: CryptoPan,
    keep: Vec<Prefix>,
    v4: Box<[Option<(Ipv4Addr, Ipv4Addr)>]>,
    v6: Box<[Option<(Ipv6Addr, Ipv6Addr)>]>,
}

impl std::fmt::Debug for Anonymizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Anonymizer")
            .field("keep", &self.keep)
            .finish_non_exhaustive()
    }
}

impl Anonymizer {
    /// Crypto-PAn with `pan`, leaving addresses inside any of `keep` unchanged.
    ///
    /// Keeping prefixes is weaker: the kept part of the network shows as it is, and an
    /// anonymized outside address may equal a kept inside one.
    pub fn new(pan: CryptoPan, keep: Vec<Prefix>) -> Anonymizer {
        Anonymizer {
            pan,
            keep,
            v4: vec![None; V4_SLOTS].into_boxed_slice(),
            v6: vec![None; V6_SLOTS].into_boxed_slice(),
        }
    }

    /// The anonymized address (either family).
    pub fn ip(&mut self, addr: IpAddr) -> IpAddr {
        match addr {
            IpAddr::V4(a) => IpAddr::V4(self.v4(a)),
            IpAddr::V6(a) => IpAddr::V6(self.v6(a)),
        }
    }

    /// The anonymized IPv4 address.
    pub fn v4(&mut self, addr: Ipv4Addr) -> Ipv4Addr {
        // Fibonacci hashing: the top bits of the product mix every input bit.
        let slot = (u32::from(addr).wrapping_mul(0x9E37_79B9) >> 20) as usize % V4_SLOTS;
        match self.v4[slot] {
            Some((a, out)) if a == addr => out,
            _ => {
                let out = if self.kept(IpAddr::V4(addr)) {
                    addr
                } else {
                    self.pan.v4(addr)
                };
                self.v4[slot] = Some((addr, out));
                out
            }
        }
    }

    /// The anonymized IPv6 address.
    pub fn v6(&mut self, addr: Ipv6Addr) -> Ipv6Addr {
        let bits = u128::from(addr);
        let folded = (bits as u64) ^ ((bits >> 64) as u64);
        let slot = (folded.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 52) as usize % V6_SLOTS;
        match self.v6[slot] {
            Some((a, out)) if a == addr => out,
            _ => {
                let out = if self.kept(IpAddr::V6(addr)) {
                    addr
                } else {
                    self.pan.v6(addr)
                };
                self.v6[slot] = Some((addr, out));
                out
            }
        }
    }

    /// Anonymizes 4 or 16 address bytes in place (an address inside a packet); other lengths
    /// are a bug of the caller and left alone.
    pub fn bytes(&mut self, addr: &mut [u8]) {
        if let Ok(a) = <[u8; 4]>::try_from(&*addr) {
            addr.copy_from_slice(&self.v4(a.into()).octets());
        } else if let Ok(a) = <[u8; 16]>::try_from(&*addr) {
            addr.copy_from_slice(&self.v6(a.into()).octets());
        }
    }

    fn kept(&self, addr: IpAddr) -> bool {
        self.keep.iter().any(|p| p.contains(addr))
    }
}
