//! IPv4 header (RFC 791).
//!
//! ```text
//!  0               1               2               3
//! +-------+-------+---------------+-------------------------------+
//! |version|  IHL  |  DSCP / ECN   |         total length          |
//! +-------+-------+---------------+-----+-------------------------+
//! |        identification         |flags|     fragment offset     |
//! +---------------+---------------+-----+-------------------------+
//! |      TTL      |   protocol    |        header checksum        |
//! +---------------+---------------+-------------------------------+
//! |                        source address                         |
//! |                      destination address                      |
//! |                   options (IHL > 5) ...                       |
//! +---------------------------------------------------------------+
//! ```
//! A capture often holds fewer bytes than `total length` says (snap length), and an Ethernet
//! frame may hold more (padding of short packets): [`Packet::check_len`] therefore does not
//! compare `total length` with the buffer, and [`Packet::payload`] clamps to both.
use crate::field::Field;
use crate::{internet_checksum, read_array, read_u16, Error};

/// Length of the header without options.
pub const HEADER_LEN: usize = 20;

mod field {
    use super::Field;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Field = 2..4;
    pub const IDENT: Field = 4..6;
    pub const FLG_OFF: Field = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Field = 10..12;
    pub const SRC_ADDR: Field = 12..16;
    pub const DST_ADDR: Field = 16..20;
}

/// IP protocol numbers (shared with IPv6 "next header").
pub mod protocol {
    /// IPv6 hop-by-hop options (IPv6 only).
    pub const HOP_BY_HOP: u8 = 0;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// IPv4 encapsulated in IP (IP-in-IP).
    pub const IPV4: u8 = 4;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 encapsulated in IP.
    pub const IPV6: u8 = 41;
    /// IPv6 routing header.
    pub const IPV6_ROUTING: u8 = 43;
    /// IPv6 fragment header.
    pub const IPV6_FRAGMENT: u8 = 44;
    /// GRE.
    pub const GRE: u8 = 47;
    /// Encapsulating security payload.
    pub const ESP: u8 = 50;
    /// Authentication header.
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// IPv6 "no next header".
    pub const IPV6_NO_NEXT: u8 = 59;
    /// IPv6 destination options.
    pub const IPV6_DEST_OPTS: u8 = 60;
    /// SCTP.
    pub const SCTP: u8 = 132;
}

/// A view of an IPv4 header and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the fixed header, that IHL is at least 5 and that the
    /// buffer holds the whole header with options. After success no accessor panics.
    ///
    /// Not checked: the version (read [`version`](Self::version)), the total length against
    /// the header length or the buffer ([`payload`](Packet::payload) clamps), the checksum.
    /// The fixed-header accessors (everything but `options` and `payload`) need only
    /// [`HEADER_LEN`] bytes.
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_with_options(self.buffer.as_ref(), HEADER_LEN, || self.header_len())
    }

    /// IP version (4 for a valid header).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::VER_IHL] & 0x0f) as usize) * 4
    }

    /// Differentiated services code point.
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification bits.
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length (header and payload) as stated; 0 on packets captured before TCP
    /// segmentation offload filled it in.
    #[inline]
    pub fn total_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::IDENT)
    }

    /// Don't-fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x4000 != 0
    }

    /// More-fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) & 0x2000 != 0
    }

    /// Fragment offset in bytes (the 13-bit field × 8).
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::FLG_OFF) << 3
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload (see [`protocol`]).
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> [u8; 4] {
        read_array(self.buffer.as_ref(), field::SRC_ADDR)
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> [u8; 4] {
        read_array(self.buffer.as_ref(), field::DST_ADDR)
    }

    /// True when the header checksum is correct. Opt-in (the hot path does not call it);
    /// always true when built for fuzzing so fuzzers reach the code behind it.
    pub fn verify_checksum(&self) -> bool {
        if cfg!(fuzzing) {
            return true;
        }
        let data = self.buffer.as_ref();
        internet_checksum(0, &data[..self.header_len()]) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The options (bytes 20 to IHL × 4).
    #[inline]
    pub fn options(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The payload: from the end of the header to `total length`, or to the end of the buffer
    /// when that comes first (snap length). Empty when `total length` is below the header
    /// length; the whole rest when `total length` is 0 (offloaded segments).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let data = self.buffer.as_ref();
        let start = self.header_len();
        let total = self.total_len() as usize;
        let end = if total == 0 {
            data.len()
        } else {
            total.clamp(start, data.len())
        };
        &data[start..end]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static PACKET: [u8; 28] = [
        0x45, 0x00, 0x00, 0x18, // v4, IHL 5, total length 24
        0x1c, 0x46, 0x40, 0x00, // ident 0x1c46, DF
        0x40, 0x06, 0xb2, 0x0a, // TTL 64, TCP, checksum
        0xac, 0x10, 0x0a, 0x63, // 172.16.10.99
        0xac, 0x10, 0x0a, 0x0c, // 172.16.10.12
        0xaa, 0xbb, 0xcc, 0xdd, // payload
        0x00, 0x00, 0x00, 0x00, // Ethernet padding
    ];

    static WITH_OPTIONS: [u8; 26] = [
        0x46, 0x00, 0x00, 0x1a, // IHL 6, total length 26
        0x00, 0x01, 0x20, 0x03, // ident 1, MF, offset 3 (24 bytes)
        0x01, 0x11, 0x00, 0x00, // TTL 1, UDP
        0x0a, 0x00, 0x00, 0x01, // 10.0.0.1
        0x0a, 0x00, 0x00, 0x02, // 10.0.0.2
        0x94, 0x04, 0x00, 0x00, // router alert option
        0x12, 0x34, //             payload
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&PACKET[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.dscp(), 0);
        assert_eq!(p.ecn(), 0);
        assert_eq!(p.total_len(), 24);
        assert_eq!(p.ident(), 0x1c46);
        assert!(p.dont_frag());
        assert!(!p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), protocol::TCP);
        assert_eq!(p.checksum(), 0xb20a);
        assert_eq!(p.src_addr(), [172, 16, 10, 99]);
        assert_eq!(p.dst_addr(), [172, 16, 10, 12]);
        assert!(p.verify_checksum());
        assert_eq!(p.options(), &[]);
        // Padding is not payload.
        assert_eq!(p.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
    }

    #[test]
    fn deconstruct_options_and_fragment() {
        let p = Packet::new_checked(&WITH_OPTIONS[..]).unwrap();
        assert_eq!(p.header_len(), 24);
        assert!(p.more_frags());
        assert!(!p.dont_frag());
        assert_eq!(p.frag_offset(), 24);
        assert_eq!(p.options(), &[0x94, 0x04, 0x00, 0x00]);
        assert_eq!(p.payload(), &[0x12, 0x34]);
        assert!(!p.verify_checksum());
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&PACKET[..len]), Err(Error));
        }
        // Options cut short.
        for len in 20..24 {
            assert_eq!(Packet::new_checked(&WITH_OPTIONS[..len]), Err(Error));
        }
    }

    #[test]
    fn truncated_payload_is_clamped() {
        let p = Packet::new_checked(&PACKET[..22]).unwrap();
        assert_eq!(p.payload(), &[0xaa, 0xbb]);
    }

    #[test]
    fn ihl_below_five_is_rejected() {
        let mut bytes = PACKET;
        bytes[0] = 0x44;
        assert_eq!(Packet::new_checked(&bytes[..]), Err(Error));
    }

    #[test]
    fn total_length_below_header_gives_empty_payload() {
        let mut bytes = PACKET;
        bytes[3] = 0x10;
        assert_eq!(Packet::new_checked(&bytes[..]).unwrap().payload(), &[]);
        bytes[3] = 0x00; // 0: offloaded segment, length unknown
        assert_eq!(Packet::new_checked(&bytes[..]).unwrap().payload().len(), 8);
    }
}
