//! SCTP common header (RFC 9260).
//!
//! ```text
//!  0               1               2               3
//! +-------------------------------+-------------------------------+
//! |          source port          |       destination port        |
//! +-------------------------------+-------------------------------+
//! |                       verification tag                        |
//! |                           checksum                            |
//! +---------------------------------------------------------------+
//! ```
use crate::field::{Field, Rest};
use crate::{read_u16, read_u32, Error};

/// Length of the common header.
pub const HEADER_LEN: usize = 12;

mod field {
    use super::{Field, Rest};
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const VERIFICATION_TAG: Field = 4..8;
    pub const CHECKSUM: Field = 8..12;
    pub const CHUNKS: Rest = 12..;
}

/// A view of an SCTP common header and its chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the 12-byte common header. After success no accessor
    /// panics.
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

    /// Verification tag.
    #[inline]
    pub fn verification_tag(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::VERIFICATION_TAG)
    }

    /// CRC32c checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::CHECKSUM)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The chunks (everything after the common header).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::CHUNKS]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static INIT: [u8; 16] = [
        0x0b, 0x59, 0x0b, 0x59, // 2905 -> 2905
        0x00, 0x00, 0x00, 0x00, // verification tag 0 (INIT)
        0x12, 0x34, 0x56, 0x78, // checksum
        0x01, 0x00, 0x00, 0x14, // chunk: INIT, length 20 ...
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&INIT[..]).unwrap();
        assert_eq!(p.src_port(), 2905);
        assert_eq!(p.dst_port(), 2905);
        assert_eq!(p.verification_tag(), 0);
        assert_eq!(p.checksum(), 0x12345678);
        assert_eq!(p.payload(), &[0x01, 0x00, 0x00, 0x14]);
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&INIT[..len]), Err(Error));
        }
    }
}
