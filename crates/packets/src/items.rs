//! What the host index records about a packet: hashed addresses and ports ("items"), the same
//! function on the write side (per packet) and on the read side (per filter term).
//!
//! An item is a 32-bit hash of a kind and a value, built from MurmurHash3's 64-bit finaliser
//! `fmix64` (a few multiplies: it runs for every stored packet):
//! - address (16 bytes, IPv4 as `::ffff:a.b.c.d`), words `lo`, `hi` = the two halves read as
//!   little-endian u64: `fold(fmix64(fmix64(1 << 56 ^ lo) ^ hi))`;
//! - port: `fold(fmix64(2 << 56 | port))`;
//!
//! where `fold(h) = (h >> 32) ^ h` truncated to 32 bits. The hash is part of the on-disk
//! format (`docs/specs/packet-store.md`).
use trawl_capture::LinkType;
use trawl_flow::decode::{decode, DecodeConfig, Decoded};
use trawl_flow::key::FlowKey;

const KIND_ADDR: u64 = 1 << 56;
const KIND_PORT: u64 = 2 << 56;

/// MurmurHash3's 64-bit finaliser.
#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

#[inline]
fn fold(h: u64) -> u32 {
    ((h >> 32) ^ h) as u32
}

/// The item of an address (16-byte form, IPv4-mapped for IPv4).
#[inline]
pub fn addr_item(ip: &[u8; 16]) -> u32 {
    let lo = u64::from_le_bytes(ip[..8].try_into().expect("8 bytes"));
    let hi = u64::from_le_bytes(ip[8..].try_into().expect("8 bytes"));
    fold(fmix64(fmix64(KIND_ADDR ^ lo) ^ hi))
}

/// The item of a TCP/UDP/SCTP port.
#[inline]
pub fn port_item(port: u16) -> u32 {
    fold(fmix64(KIND_PORT | u64::from(port)))
}

/// What the dumper learns from decoding one packet.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Facts {
    /// Items of the packet; `None` when it could not be indexed (non-IP other than ARP, or
    /// undecodable): a chunk holding such a packet is never skipped by a host/port lookup.
    pub items: Option<([u32; 4], usize)>,
    /// Hash of the bidirectional flow key, when the packet has one (for the cutoff).
    pub flow_hash: Option<u64>,
}

/// Decodes once for both the host index and the cutoff.
pub(crate) struct FactFinder {
    config: DecodeConfig,
    decoded: Decoded,
    /// Whether to hash the flow key (only the cutoff needs it).
    flow_hash: bool,
}

impl FactFinder {
    pub fn new(flow_hash: bool) -> FactFinder {
        FactFinder {
            config: DecodeConfig::default(),
            decoded: Decoded::default(),
            flow_hash,
        }
    }

    pub fn facts(&mut self, link: LinkType, data: &[u8]) -> Facts {
        let outcome = decode(link, data, &self.config, &mut self.decoded);
        let d = &self.decoded;
        if !outcome.has_key() {
            return Facts {
                items: arp_items(link, data),
                flow_hash: None,
            };
        }
        let mut items = [addr_item(&d.src_ip), addr_item(&d.dst_ip), 0, 0];
        let mut n = 2;
        if matches!(d.proto, 6 | 17 | 132) {
            items[2] = port_item(d.src_port);
            items[3] = port_item(d.dst_port);
            n = 4;
        }
        Facts {
            items: Some((items, n)),
            flow_hash: self.flow_hash.then(|| FlowKey::from_decoded(d).0.hash()),
        }
    }
}

/// ARP on Ethernet: `host X` matches the sender and target protocol addresses, so they are
/// indexed too (IPv4 over Ethernet only; other ARP leaves the chunk unindexed).
fn arp_items(link: LinkType, data: &[u8]) -> Option<([u32; 4], usize)> {
    if link != LinkType::ETHERNET || data.len() < 42 || data[12..14] != [0x08, 0x06] {
        return None;
    }
    // htype 1 (Ethernet), ptype 0x0800, hlen 6, plen 4.
    if data[14..20] != [0x00, 0x01, 0x08, 0x00, 6, 4] {
        return None;
    }
    let mapped = |a: &[u8]| {
        let mut ip = [0u8; 16];
        ip[10] = 0xff;
        ip[11] = 0xff;
        ip[12..].copy_from_slice(a);
        addr_item(&ip)
    };
    Some(([mapped(&data[28..32]), mapped(&data[38..42]), 0, 0], 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_are_stable() {
        // Values pinned by the format spec (computed independently with a few lines of Python):
        // changing the hash breaks every stored index.
        let mut ip = [0u8; 16];
        ip[10] = 0xff;
        ip[11] = 0xff;
        ip[12..].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(addr_item(&ip), 0xd2fd_ede6);
        assert_eq!(port_item(80), 0x9ebf_fa4a);
    }
}
