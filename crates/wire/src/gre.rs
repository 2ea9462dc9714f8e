//! GRE header (RFC 2784 with the key and sequence extensions of RFC 2890; the RFC 1701
//! routing bit and the enhanced GRE of PPTP, RFC 2637, are recognised for length only).
//!
//! ```text
//!  0               1               2               3
//! +-+-+-+-+-+-----+-+-------+-----+-------------------------------+
//! |C|R|K|S|s|Recur|A| flags | ver |         protocol type         |
//! +-+-+-+-+-+-----+-+-------+-----+-------------------------------+
//! |   checksum (if C or R)        |   offset / reserved1 (same)   |
//! |                          key (if K)                           |
//! |                    sequence number (if S)                     |
//! |          acknowledgment number (version 1, if A)              |
//! +---------------------------------------------------------------+
//! ```
//! With R set, RFC 1701 source-route entries follow the header; [`Packet::payload`] does not
//! skip them, so decoders should not look inside such packets ([`Packet::routing_present`]).
use crate::field::Field;
use crate::{read_u16, read_u32, Error};

/// Length of the header without optional fields.
pub const HEADER_LEN: usize = 4;

mod field {
    use super::Field;
    pub const FLAGS_VERSION: Field = 0..2;
    pub const PROTOCOL: Field = 2..4;
}

const CHECKSUM_PRESENT: u16 = 0x8000;
const ROUTING_PRESENT: u16 = 0x4000;
const KEY_PRESENT: u16 = 0x2000;
const SEQUENCE_PRESENT: u16 = 0x1000;
const ACK_PRESENT: u16 = 0x0080;

/// A view of a GRE header and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the header with the optional fields its flags announce.
    /// After success no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.header_len() {
            Err(Error)
        } else {
            Ok(())
        }
    }

    #[inline]
    fn flags_version(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::FLAGS_VERSION)
    }

    /// Checksum (and offset) fields present: C flag, or the RFC 1701 R flag.
    #[inline]
    pub fn checksum_present(&self) -> bool {
        self.flags_version() & (CHECKSUM_PRESENT | ROUTING_PRESENT) != 0
    }

    /// RFC 1701 routing present (deprecated by RFC 2784).
    #[inline]
    pub fn routing_present(&self) -> bool {
        self.flags_version() & ROUTING_PRESENT != 0
    }

    /// Key field present.
    #[inline]
    pub fn key_present(&self) -> bool {
        self.flags_version() & KEY_PRESENT != 0
    }

    /// Sequence number field present.
    #[inline]
    pub fn sequence_present(&self) -> bool {
        self.flags_version() & SEQUENCE_PRESENT != 0
    }

    /// Acknowledgment number present (version 1 only).
    #[inline]
    pub fn ack_present(&self) -> bool {
        self.version() == 1 && self.flags_version() & ACK_PRESENT != 0
    }

    /// Version: 0 for GRE, 1 for PPTP's enhanced GRE.
    #[inline]
    pub fn version(&self) -> u8 {
        (self.flags_version() & 0x7) as u8
    }

    /// EtherType of the payload (0x0800 IPv4, 0x86dd IPv6, 0x6558 Ethernet, 0x880b PPP).
    #[inline]
    pub fn protocol_type(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PROTOCOL)
    }

    /// Header length with the optional fields the flags announce.
    #[inline]
    pub fn header_len(&self) -> usize {
        HEADER_LEN
            + 4 * (self.checksum_present() as usize
                + self.key_present() as usize
                + self.sequence_present() as usize
                + self.ack_present() as usize)
    }

    #[inline]
    fn key_offset(&self) -> usize {
        HEADER_LEN + 4 * self.checksum_present() as usize
    }

    #[inline]
    fn sequence_offset(&self) -> usize {
        self.key_offset() + 4 * self.key_present() as usize
    }

    /// The checksum, when present.
    #[inline]
    pub fn checksum(&self) -> Option<u16> {
        self.checksum_present()
            .then(|| read_u16(self.buffer.as_ref(), 4..6))
    }

    /// The key, when present (version 1: payload length and call id).
    #[inline]
    pub fn key(&self) -> Option<u32> {
        let at = self.key_offset();
        self.key_present()
            .then(|| read_u32(self.buffer.as_ref(), at..at + 4))
    }

    /// The sequence number, when present.
    #[inline]
    pub fn sequence_number(&self) -> Option<u32> {
        let at = self.sequence_offset();
        self.sequence_present()
            .then(|| read_u32(self.buffer.as_ref(), at..at + 4))
    }

    /// The acknowledgment number, when present (version 1).
    #[inline]
    pub fn ack_number(&self) -> Option<u32> {
        let at = self.sequence_offset() + 4 * self.sequence_present() as usize;
        self.ack_present()
            .then(|| read_u32(self.buffer.as_ref(), at..at + 4))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Everything after the header and its optional fields.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static PLAIN: [u8; 6] = [
        0x00, 0x00, 0x08, 0x00, // no flags, version 0, IPv4
        0x45, 0x00, //             payload
    ];

    static ALL_FIELDS: [u8; 17] = [
        0xb0, 0x00, 0x65, 0x58, // C K S, version 0, transparent Ethernet bridging
        0xab, 0xcd, 0x00, 0x00, // checksum, reserved1
        0x00, 0x00, 0x00, 0x2a, // key 42
        0x00, 0x00, 0x00, 0x07, // sequence 7
        0x02, //                   payload
    ];

    static PPTP: [u8; 17] = [
        0x30, 0x81, 0x88, 0x0b, // K S, A, version 1, PPP
        0x00, 0x10, 0x12, 0x34, // payload length 16, call id 0x1234
        0x00, 0x00, 0x00, 0x05, // sequence 5
        0x00, 0x00, 0x00, 0x04, // ack 4
        0xff, //                   payload
    ];

    #[test]
    fn deconstruct_plain() {
        let p = Packet::new_checked(&PLAIN[..]).unwrap();
        assert_eq!(p.version(), 0);
        assert_eq!(p.protocol_type(), 0x0800);
        assert_eq!(p.header_len(), 4);
        assert!(!p.checksum_present() && !p.key_present() && !p.sequence_present());
        assert!(!p.routing_present() && !p.ack_present());
        assert_eq!(
            (p.checksum(), p.key(), p.sequence_number()),
            (None, None, None)
        );
        assert_eq!(p.payload(), &[0x45, 0x00]);
    }

    #[test]
    fn deconstruct_all_fields() {
        let p = Packet::new_checked(&ALL_FIELDS[..]).unwrap();
        assert_eq!(p.header_len(), 16);
        assert_eq!(p.protocol_type(), 0x6558);
        assert_eq!(p.checksum(), Some(0xabcd));
        assert_eq!(p.key(), Some(42));
        assert_eq!(p.sequence_number(), Some(7));
        assert_eq!(p.ack_number(), None);
        assert_eq!(p.payload(), &[0x02]);
    }

    #[test]
    fn deconstruct_pptp() {
        let p = Packet::new_checked(&PPTP[..]).unwrap();
        assert_eq!(p.version(), 1);
        assert_eq!(p.header_len(), 16);
        assert_eq!(p.key(), Some(0x0010_1234));
        assert_eq!(p.sequence_number(), Some(5));
        assert_eq!(p.ack_number(), Some(4));
        assert_eq!(p.payload(), &[0xff]);
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&PLAIN[..len]), Err(Error));
        }
        for len in 0..16 {
            assert_eq!(Packet::new_checked(&ALL_FIELDS[..len]), Err(Error));
            assert_eq!(Packet::new_checked(&PPTP[..len]), Err(Error));
        }
    }
}
