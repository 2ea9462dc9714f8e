//! What the host index records about a packet: hashed addresses and ports ("items"), the same
//! function on the write side (per packet) and on the read side (per filter term).
//!
//! An item is the 64-bit FNV-1a hash of a kind byte followed by the value, folded to 32 bits
//! (high half XOR low half). Addresses are 16 bytes (IPv4 as `::ffff:a.b.c.d`), ports 2 bytes
//! big-endian. The hash is part of the on-disk format (`docs/specs/packet-store.md`).
use trawl_capture::LinkType;
use trawl_flow::decode::{decode, DecodeConfig, Decoded};
use trawl_flow::key::FlowKey;

const KIND_ADDR: u8 = 1;
const KIND_PORT: u8 = 2;

fn fnv1a(kind: u8, bytes: &[u8]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in std::iter::once(&kind).chain(bytes) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    ((h >> 32) ^ h) as u32
}

/// The item of an address (16-byte form, IPv4-mapped for IPv4).
pub fn addr_item(ip: &[u8; 16]) -> u32 {
    fnv1a(KIND_ADDR, ip)
}

/// The item of a TCP/UDP/SCTP port.
pub fn port_item(port: u16) -> u32 {
    fnv1a(KIND_PORT, &port.to_be_bytes())
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
}

impl FactFinder {
    pub fn new() -> FactFinder {
        FactFinder {
            config: DecodeConfig::default(),
            decoded: Decoded::default(),
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
            flow_hash: Some(FlowKey::from_decoded(d).0.hash()),
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
    fn the_hash_is_fnv1a_64_folded() {
        // Published FNV-1a 64 test vectors: "a" and "foobar".
        let fold = |h: u64| ((h >> 32) ^ h) as u32;
        assert_eq!(fnv1a(b'a', &[]), fold(0xaf63_dc4c_8601_ec8c));
        assert_eq!(fnv1a(b'f', b"oobar"), fold(0x8594_4171_f739_67e8));
    }

    #[test]
    fn items_are_stable() {
        // Values pinned by the format spec (computed independently with a few lines of Python):
        // changing the hash breaks every stored index.
        let mut ip = [0u8; 16];
        ip[10] = 0xff;
        ip[11] = 0xff;
        ip[12..].copy_from_slice(&[10, 0, 0, 1]);
        assert_eq!(addr_item(&ip), 0x5baa_11a3);
        assert_eq!(port_item(80), 0x9f7f_4685);
    }
}
