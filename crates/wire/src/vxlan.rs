//! VXLAN header (RFC 7348), carried in UDP to port 4789; an Ethernet frame follows.
//!
//! ```text
//!  0               1               2               3
//! +-+-+-+-+-+-+-+-+-----------------------------------------------+
//! |R|R|R|R|I|R|R|R|                   reserved                    |
//! +-+-+-+-+-+-+-+-+-------------------------------+---------------+
//! |        VXLAN network identifier (VNI)         |   reserved    |
//! +-----------------------------------------------+---------------+
//! ```
use crate::field::{Field, Rest};
use crate::{read_u32, Error};

/// Length of the header.
pub const HEADER_LEN: usize = 8;

/// The IANA-assigned UDP destination port.
pub const PORT: u16 = 4789;

mod field {
    use super::{Field, Rest};
    pub const FLAGS: usize = 0;
    pub const VNI_RESERVED: Field = 4..8;
    pub const PAYLOAD: Rest = 8..;
}

/// A view of a VXLAN header and the frame it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the 8-byte header. After success no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_fixed(self.buffer.as_ref(), HEADER_LEN)
    }

    /// The flags byte.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// The I flag: the VNI is valid (must be set).
    #[inline]
    pub fn vni_present(&self) -> bool {
        self.flags() & 0x08 != 0
    }

    /// VXLAN network identifier (24 bits).
    #[inline]
    pub fn vni(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::VNI_RESERVED) >> 8
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The inner Ethernet frame.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static HEADER: [u8; 10] = [
        0x08, 0x00, 0x00, 0x00, // I flag
        0x00, 0x12, 0x34, 0x00, // VNI 0x1234
        0x00, 0x11, //             inner frame
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&HEADER[..]).unwrap();
        assert_eq!(p.flags(), 0x08);
        assert!(p.vni_present());
        assert_eq!(p.vni(), 0x1234);
        assert_eq!(p.payload(), &[0x00, 0x11]);
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&HEADER[..len]), Err(Error));
        }
    }
}
