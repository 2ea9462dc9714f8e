//! UDP header (RFC 768).
//!
//! ```text
//!  0               1               2               3
//! +-------------------------------+-------------------------------+
//! |          source port          |       destination port        |
//! +-------------------------------+-------------------------------+
//! |            length             |           checksum            |
//! +-------------------------------+-------------------------------+
//! ```
use crate::field::Field;
use crate::{read_u16, Error};

/// Length of the header.
pub const HEADER_LEN: usize = 8;

mod field {
    use super::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const CHECKSUM: Field = 6..8;
}

/// A view of a UDP header and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the 8-byte header. After success no accessor panics.
    /// The length field is not checked ([`payload`](Packet::payload) clamps).
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_fixed(self.buffer.as_ref(), HEADER_LEN)
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length of header and payload as stated.
    #[inline]
    pub fn len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// True when the stated length is zero (IPv6 jumbograms; invalid otherwise).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checksum as stored (0: not computed, IPv4 only).
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload: up to the stated length, or to the end of the buffer when that comes
    /// first; the whole rest when the stated length is below 8.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let rest = &self.buffer.as_ref()[HEADER_LEN..];
        let len = self.len() as usize;
        if len >= HEADER_LEN && len - HEADER_LEN < rest.len() {
            &rest[..len - HEADER_LEN]
        } else {
            rest
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static DATAGRAM: [u8; 14] = [
        0xbf, 0x00, 0x00, 0x35, // 48896 -> 53
        0x00, 0x0c, 0x12, 0x4d, // length 12, checksum
        0x01, 0x02, 0x03, 0x04, // payload
        0x00, 0x00, //             padding
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&DATAGRAM[..]).unwrap();
        assert_eq!(p.src_port(), 48896);
        assert_eq!(p.dst_port(), 53);
        assert_eq!(p.len(), 12);
        assert!(!p.is_empty());
        assert_eq!(p.checksum(), 0x124d);
        assert_eq!(p.payload(), &[1, 2, 3, 4]);
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&DATAGRAM[..len]), Err(Error));
        }
        assert_eq!(
            Packet::new_checked(&DATAGRAM[..10]).unwrap().payload(),
            &[1, 2]
        );
    }

    #[test]
    fn bad_length_gives_rest() {
        let mut bytes = DATAGRAM;
        bytes[5] = 3;
        assert_eq!(Packet::new_checked(&bytes[..]).unwrap().payload().len(), 6);
    }
}
