//! The flow key: a fixed 40-byte array with named offsets, normalised so that both directions
//! of a conversation produce the same key.
use crate::decode::Decoded;

/// Byte offsets of the key's fields.
pub mod field {
    /// A byte range in the key.
    pub type Field = core::ops::Range<usize>;
    /// Address of the lower endpoint (16 bytes, IPv4 mapped into IPv6).
    pub const LOW_IP: Field = 0..16;
    /// Address of the higher endpoint.
    pub const HIGH_IP: Field = 16..32;
    /// Port of the lower endpoint (big-endian).
    pub const LOW_PORT: Field = 32..34;
    /// Port of the higher endpoint (big-endian).
    pub const HIGH_PORT: Field = 34..36;
    /// IP protocol number.
    pub const PROTO: usize = 36;
    /// IP version (4 or 6).
    pub const IP_VERSION: usize = 37;
    /// VLAN id (big-endian, 0 = untagged).
    pub const VLAN: Field = 38..40;
}

/// Length of a [`FlowKey`] in bytes.
pub const KEY_LEN: usize = 40;

/// A bidirectional flow key. The endpoint that sorts lower (address, then port) is stored
/// first, so a packet and its reply map to the same key; [`Side`] tells which endpoint sent a
/// given packet.
#[derive(Clone, Copy, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub struct FlowKey(pub [u8; KEY_LEN]);

impl PartialEq for FlowKey {
    /// Five word compares: a derived `[u8; 40]` comparison becomes a `memcmp` call, which
    /// showed up in profiles of the table probe.
    #[inline]
    fn eq(&self, other: &Self) -> bool {
        let w = |k: &FlowKey, i: usize| {
            u64::from_ne_bytes(k.0[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
        };
        (0..KEY_LEN / 8).fold(true, |eq, i| eq & (w(self, i) == w(other, i)))
    }
}

/// Which endpoint of a normalised key sent a packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum Side {
    /// The lower endpoint (stored first in the key).
    #[default]
    Low = 0,
    /// The higher endpoint.
    High = 1,
}

impl Side {
    /// The other side.
    #[inline]
    pub fn flip(self) -> Side {
        match self {
            Side::Low => Side::High,
            Side::High => Side::Low,
        }
    }
}

impl Default for FlowKey {
    fn default() -> Self {
        FlowKey([0; KEY_LEN])
    }
}

impl FlowKey {
    /// Builds the normalised key of a decoded packet, and says which side sent it.
    ///
    /// Addresses are read and written as two 8-byte words: the decoder writes an IPv4-mapped
    /// address with two 8-byte stores, and a 16-byte load of it is not forwarded from them (it
    /// waits until they retire; that load was the hottest instruction of key building).
    #[inline]
    pub fn from_decoded(d: &Decoded) -> (FlowKey, Side) {
        let words = |ip: &[u8; 16]| -> [u64; 2] {
            [
                u64::from_ne_bytes(ip[..8].try_into().expect("8 bytes")),
                u64::from_ne_bytes(ip[8..].try_into().expect("8 bytes")),
            ]
        };
        let (src, dst) = (words(&d.src_ip), words(&d.dst_ip));
        // Byte order of the address, then the port: big-endian words compare like the bytes.
        let order = |w: [u64; 2], port: u16| (u64::from_be(w[0]), u64::from_be(w[1]), port);
        let src_low = order(src, d.src_port) <= order(dst, d.dst_port);
        let (lo, lo_port, hi, hi_port) = if src_low {
            (src, d.src_port, dst, d.dst_port)
        } else {
            (dst, d.dst_port, src, d.src_port)
        };
        let [lp0, lp1] = lo_port.to_be_bytes();
        let [hp0, hp1] = hi_port.to_be_bytes();
        let [v0, v1] = d.vlan.to_be_bytes();
        // The last word: ports, protocol, version, VLAN (the offsets of `field`).
        let tail = u64::from_ne_bytes([lp0, lp1, hp0, hp1, d.proto, d.ip_version, v0, v1]);
        let k: [u64; 5] = [lo[0], lo[1], hi[0], hi[1], tail];
        (
            FlowKey(bytemuck::cast(k)),
            if src_low { Side::Low } else { Side::High },
        )
    }

    /// Address of one side (16 bytes, IPv4-mapped for IPv4).
    #[inline]
    pub fn ip(&self, side: Side) -> [u8; 16] {
        let r = match side {
            Side::Low => field::LOW_IP,
            Side::High => field::HIGH_IP,
        };
        self.0[r].try_into().expect("16-byte field")
    }

    /// Port of one side (ICMP: see the decoder's port convention).
    #[inline]
    pub fn port(&self, side: Side) -> u16 {
        let r = match side {
            Side::Low => field::LOW_PORT,
            Side::High => field::HIGH_PORT,
        };
        u16::from_be_bytes([self.0[r.start], self.0[r.start + 1]])
    }

    /// IP protocol number.
    #[inline]
    pub fn proto(&self) -> u8 {
        self.0[field::PROTO]
    }

    /// IP version, 4 or 6.
    #[inline]
    pub fn ip_version(&self) -> u8 {
        self.0[field::IP_VERSION]
    }

    /// VLAN id, 0 when untagged.
    #[inline]
    pub fn vlan(&self) -> u16 {
        u16::from_be_bytes([self.0[field::VLAN.start], self.0[field::VLAN.start + 1]])
    }

    /// A 64-bit hash of the key: five word-sized multiply-xorshift rounds and a final mix.
    /// Not keyed: the table bounds probe lengths by its load factor, and an attacker who can
    /// craft colliding keys can at worst slow one probe sequence (counted as probe length).
    #[inline]
    pub fn hash(&self) -> u64 {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut h: u64 = 0x243F_6A88_85A3_08D3;
        for chunk in self.0.chunks_exact(8) {
            let w = u64::from_le_bytes(chunk.try_into().expect("8-byte chunk"));
            h = (h ^ w).wrapping_mul(K);
            h ^= h >> 29;
        }
        // fmix64 from MurmurHash3: spreads the entropy into the high bits the table uses.
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
}

impl core::fmt::Debug for FlowKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let v = self.ip_version();
        write!(
            f,
            "FlowKey({} {}:{} <-> {}:{} vlan {})",
            self.proto(),
            crate::decode::to_ip(v, &self.ip(Side::Low)),
            self.port(Side::Low),
            crate::decode::to_ip(v, &self.ip(Side::High)),
            self.port(Side::High),
            self.vlan()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Decoded {
        let mut d = Decoded {
            ip_version: 4,
            proto: 6,
            src_port: sport,
            dst_port: dport,
            vlan: 7,
            ..Decoded::default()
        };
        d.src_ip[10] = 0xff;
        d.src_ip[11] = 0xff;
        d.dst_ip = d.src_ip;
        d.src_ip[12..].copy_from_slice(&src);
        d.dst_ip[12..].copy_from_slice(&dst);
        d
    }

    #[test]
    fn both_directions_give_the_same_key() {
        let a = decoded([10, 0, 0, 1], 40000, [10, 0, 0, 2], 80);
        let b = decoded([10, 0, 0, 2], 80, [10, 0, 0, 1], 40000);
        let (ka, sa) = FlowKey::from_decoded(&a);
        let (kb, sb) = FlowKey::from_decoded(&b);
        assert_eq!(ka, kb);
        assert_eq!(ka.hash(), kb.hash());
        assert_eq!(sa, sb.flip());
        assert_eq!(sa, Side::Low);
        assert_eq!(ka.port(Side::Low), 40000);
        assert_eq!(ka.port(Side::High), 80);
        assert_eq!(ka.vlan(), 7);
        assert_eq!(ka.proto(), 6);
    }

    #[test]
    fn same_address_orders_by_port() {
        let a = decoded([10, 0, 0, 1], 9, [10, 0, 0, 1], 5);
        let (k, s) = FlowKey::from_decoded(&a);
        assert_eq!(s, Side::High);
        assert_eq!(k.port(Side::Low), 5);
    }

    #[test]
    fn distinct_keys_hash_apart() {
        let mut seen = std::collections::HashSet::new();
        for p in 0..10_000u16 {
            let (k, _) = FlowKey::from_decoded(&decoded([10, 0, 0, 1], p, [10, 0, 0, 2], 80));
            seen.insert(k.hash() >> 40);
        }
        // 10k keys into 2^24 buckets of the top bits: collisions should be rare.
        assert!(seen.len() > 9_990, "{}", seen.len());
    }
}
