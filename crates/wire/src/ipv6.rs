//! IPv6 fixed header (RFC 8200) and a walk over its extension headers.
//!
//! ```text
//!  0               1               2               3
//! +-------+-------+-------+-------+-------------------------------+
//! |version| traffic class |           flow label                  |
//! +-------+---------------+-------+---------------+---------------+
//! |        payload length         |  next header  |   hop limit   |
//! +-------------------------------+---------------+---------------+
//! |                  source address (16 bytes)                    |
//! |                destination address (16 bytes)                 |
//! +---------------------------------------------------------------+
//! ```
//! [`walk_extension_headers`] steps over hop-by-hop, routing, fragment, destination options,
//! authentication (AH), mobility, HIP and shim6 headers to the upper-layer protocol; it stops at
//! ESP (encrypted: nothing further is readable), "no next header" and after a non-first
//! fragment header (what follows is the middle of a datagram, not a header).
use crate::field::Field;
use crate::ipv4::protocol;
use crate::{read_array, read_u16, read_u32, Error};

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

mod field {
    use super::Field;
    pub const VER_TC_FLOW: Field = 0..4;
    pub const LENGTH: Field = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Field = 8..24;
    pub const DST_ADDR: Field = 24..40;
}

/// Mobility header (RFC 6275), an extension header in the generic format.
pub const MOBILITY: u8 = 135;
/// Host identity protocol (RFC 7401), generic extension header format.
pub const HIP: u8 = 139;
/// Shim6 (RFC 5533), generic extension header format.
pub const SHIM6: u8 = 140;

/// A view of an IPv6 fixed header and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the 40-byte fixed header. After success no accessor
    /// panics. Not checked: the version, the payload length against the buffer
    /// ([`payload`](Packet::payload) clamps).
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_fixed(self.buffer.as_ref(), HEADER_LEN)
    }

    /// IP version (6 for a valid header).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Traffic class.
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (read_u32(self.buffer.as_ref(), field::VER_TC_FLOW) >> 20) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    /// Payload length (extension headers included) as stated; 0 for jumbograms and for
    /// segments captured before offload filled it in.
    #[inline]
    pub fn payload_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Protocol of the first header after the fixed one.
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> [u8; 16] {
        read_array(self.buffer.as_ref(), field::SRC_ADDR)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> [u8; 16] {
        read_array(self.buffer.as_ref(), field::DST_ADDR)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload (extension headers included): `payload length` bytes, or fewer when the
    /// buffer ends first; the whole rest when `payload length` is 0.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let rest = &self.buffer.as_ref()[HEADER_LEN..];
        let stated = self.payload_len() as usize;
        if stated != 0 && stated < rest.len() {
            &rest[..stated]
        } else {
            rest
        }
    }
}

/// What an IPv6 fragment header says.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Fragment {
    /// Identification (32 bits).
    pub ident: u32,
    /// Fragment offset in bytes (the 13-bit field × 8).
    pub offset: u16,
    /// More-fragments flag.
    pub more_frags: bool,
}

/// Where a walk over extension headers ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExtWalk {
    /// The protocol found after the last header stepped over (TCP, UDP, ICMPv6, ESP,
    /// "no next header", ...). When `complete` is false: the extension header that could not
    /// be read.
    pub protocol: u8,
    /// Offset of that header within the walked bytes.
    pub offset: usize,
    /// The (last) fragment header met on the way.
    pub fragment: Option<Fragment>,
    /// False when the walk stopped at an extension header cut short by the end of the bytes.
    pub complete: bool,
}

/// True for the next-header values [`walk_extension_headers`] steps over.
#[inline]
pub const fn is_extension_header(next_header: u8) -> bool {
    matches!(
        next_header,
        protocol::HOP_BY_HOP
            | protocol::IPV6_ROUTING
            | protocol::IPV6_FRAGMENT
            | protocol::AH
            | protocol::IPV6_DEST_OPTS
            | MOBILITY
            | HIP
            | SHIM6
    )
}

/// Walks the extension headers at the start of `data` (an IPv6 payload), the first of type
/// `next_header`. Never panics; every step consumes at least 8 bytes, so the walk is bounded
/// by `data.len() / 8`.
pub fn walk_extension_headers(next_header: u8, data: &[u8]) -> ExtWalk {
    let mut walk = ExtWalk {
        protocol: next_header,
        offset: 0,
        fragment: None,
        complete: true,
    };
    loop {
        let rest = &data[walk.offset..];
        let len = match walk.protocol {
            protocol::IPV6_FRAGMENT => {
                let Some(h) = rest.get(..8) else {
                    walk.complete = false;
                    return walk;
                };
                let off_flags = u16::from_be_bytes([h[2], h[3]]);
                let fragment = Fragment {
                    ident: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
                    offset: off_flags & !0x7,
                    more_frags: off_flags & 0x1 != 0,
                };
                walk.fragment = Some(fragment);
                walk.protocol = h[0];
                walk.offset += 8;
                if fragment.offset != 0 {
                    // The rest is the middle of a datagram, not headers.
                    return walk;
                }
                continue;
            }
            protocol::AH => match rest.get(1) {
                Some(&l) => (l as usize + 2) * 4,
                None => 0,
            },
            p if is_extension_header(p) => match rest.get(1) {
                Some(&l) => (l as usize + 1) * 8,
                None => 0,
            },
            _ => return walk,
        };
        if len == 0 || rest.len() < len {
            walk.complete = false;
            return walk;
        }
        walk.protocol = rest[0];
        walk.offset += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static PACKET: [u8; 52] = [
        0x60, 0x12, 0x34, 0x56, // v6, traffic class 0x01, flow label 0x23456
        0x00, 0x0c, 0x11, 0x40, // payload length 12, UDP, hop limit 64
        0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // 2001:db8::1
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, //
        0x20, 0x01, 0x0d, 0xb8, 0x00, 0x00, 0x00, 0x00, // 2001:db8::2
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, //
        0x04, 0xd2, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, // UDP 1234 -> 53
        0xde, 0xad, 0xbe, 0xef, //                         UDP payload
    ];

    /// Hop-by-hop (8), AH (16), fragment (8, offset 0, M), destination options (16), TCP.
    static CHAIN: [u8; 52] = [
        0x33, 0x00, 0x05, 0x02, 0x00, 0x00, 0x01, 0x00, // HBH -> AH, router alert + pad
        0x2c, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, // AH -> frag, len 2 = 16 bytes
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, //   SPI 0x100, seq 1, ICV ...
        0x3c, 0x00, 0x00, 0x01, 0xca, 0xfe, 0xba, 0xbe, // frag -> dest opts, off 0, M
        0x06, 0x01, 0x01, 0x0c, 0x00, 0x00, 0x00, 0x00, // dest opts -> TCP, 16 bytes
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //   PadN
        0x00, 0x50, 0x01, 0xbb, //                         TCP header begins
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0x01);
        assert_eq!(p.flow_label(), 0x23456);
        assert_eq!(p.payload_len(), 12);
        assert_eq!(p.next_header(), protocol::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr()[..4], [0x20, 0x01, 0x0d, 0xb8]);
        assert_eq!(p.src_addr()[15], 1);
        assert_eq!(p.dst_addr()[15], 2);
        assert_eq!(p.payload().len(), 12);
        let walk = walk_extension_headers(p.next_header(), p.payload());
        assert_eq!(
            walk,
            ExtWalk {
                protocol: protocol::UDP,
                offset: 0,
                fragment: None,
                complete: true
            }
        );
    }

    #[test]
    fn payload_is_clamped() {
        let p = Packet::new_checked(&PACKET[..44]).unwrap();
        assert_eq!(p.payload().len(), 4);
        let mut padded = [0u8; 60];
        padded[..52].copy_from_slice(&PACKET);
        let p = Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(p.payload().len(), 12);
        padded[5] = 0; // jumbogram / offload: everything
        let p = Packet::new_checked(&padded[..]).unwrap();
        assert_eq!(p.payload().len(), 20);
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&PACKET[..len]), Err(Error));
        }
    }

    #[test]
    fn walk_chain() {
        let walk = walk_extension_headers(protocol::HOP_BY_HOP, &CHAIN);
        assert_eq!(walk.protocol, protocol::TCP);
        assert_eq!(walk.offset, 48);
        assert!(walk.complete);
        assert_eq!(
            walk.fragment,
            Some(Fragment {
                ident: 0xcafebabe,
                offset: 0,
                more_frags: true
            })
        );
    }

    #[test]
    fn walk_stops_after_non_first_fragment() {
        let mut chain = CHAIN;
        chain[26] = 0x05; // fragment offset 0x5 << 3 ... field 0x0501: offset 0x500, M
        let walk = walk_extension_headers(protocol::HOP_BY_HOP, &chain);
        assert_eq!(walk.protocol, protocol::IPV6_DEST_OPTS);
        assert_eq!(walk.offset, 32);
        assert!(walk.complete);
        assert_eq!(walk.fragment.unwrap().offset, 0x0500);
    }

    #[test]
    fn walk_stops_at_esp_and_no_next() {
        let walk = walk_extension_headers(protocol::ESP, &CHAIN);
        assert_eq!((walk.protocol, walk.offset, walk.complete), (50, 0, true));
        let walk = walk_extension_headers(protocol::IPV6_NO_NEXT, &[]);
        assert_eq!((walk.protocol, walk.offset, walk.complete), (59, 0, true));
    }

    #[test]
    fn truncated_walk() {
        // Cut at every length inside the chain: never panics, stops at the header cut short.
        let expect = [(0, 0), (8, 51), (24, 44), (32, 60)];
        for len in 0..48 {
            let walk = walk_extension_headers(protocol::HOP_BY_HOP, &CHAIN[..len]);
            assert!(!walk.complete, "len {len}");
            let (offset, proto) = expect.iter().rev().find(|(o, _)| *o <= len).unwrap();
            // A header that starts exactly at the cut is the one reported.
            assert_eq!((walk.offset, walk.protocol), (*offset, *proto), "len {len}");
        }
        let walk = walk_extension_headers(protocol::HOP_BY_HOP, &CHAIN[..48]);
        assert!(walk.complete);
    }
}
