//! Linux "cooked" capture header, version 2 (`LINKTYPE_LINUX_SLL2`, 276).
//!
//! ```text
//!  0       2       4               8       10  11  12                              20
//! +-------+-------+---------------+-------+---+---+-------------------------------+--------
//! | proto | rsvd  | interface idx | ARPHRD|pkt|len| link-layer address (8 bytes)  | payload
//! +-------+-------+---------------+-------+---+---+-------------------------------+--------
//! ```
//! Packet and hardware type values are those of [`crate::linux_sll`].
use crate::field::{Field, Rest};
use crate::{read_u16, read_u32, Error};

/// Length of the SLL2 header.
pub const HEADER_LEN: usize = 20;

mod field {
    use super::{Field, Rest};
    pub const PROTOCOL: Field = 0..2;
    pub const INTERFACE_INDEX: Field = 4..8;
    pub const HARDWARE_TYPE: Field = 8..10;
    pub const PACKET_TYPE: usize = 10;
    pub const ADDR_LEN: usize = 11;
    pub const ADDR: Field = 12..20;
    pub const PAYLOAD: Rest = 20..;
}

/// A view of an SLL2 header and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the 20-byte header. After success no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_fixed(self.buffer.as_ref(), HEADER_LEN)
    }

    /// Protocol of the payload (an EtherType for most hardware types).
    #[inline]
    pub fn protocol(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PROTOCOL)
    }

    /// Interface index on the capturing host.
    #[inline]
    pub fn interface_index(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::INTERFACE_INDEX)
    }

    /// `ARPHRD_*` type of the capturing device.
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::HARDWARE_TYPE)
    }

    /// Packet type (one byte here, same values as SLL v1).
    #[inline]
    pub fn packet_type(&self) -> u8 {
        self.buffer.as_ref()[field::PACKET_TYPE]
    }

    /// Length of the link-layer source address as the kernel gave it.
    #[inline]
    pub fn addr_len(&self) -> u8 {
        self.buffer.as_ref()[field::ADDR_LEN]
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The stored link-layer source address: `addr_len` bytes, at most 8.
    #[inline]
    pub fn addr(&self) -> &'a [u8] {
        let len = (self.addr_len() as usize).min(8);
        &self.buffer.as_ref()[field::ADDR][..len]
    }

    /// Everything after the header.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SLL2: [u8; 22] = [
        0x86, 0xdd, //                                     IPv6
        0x00, 0x00, //                                     reserved
        0x00, 0x00, 0x00, 0x03, //                         interface 3
        0x00, 0x01, //                                     ARPHRD_ETHER
        0x00, //                                           to us
        0x06, //                                           address length
        0x02, 0x42, 0xac, 0x11, 0x00, 0x02, 0x00, 0x00, // address + padding
        0x60, 0x00, //                                     payload
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&SLL2[..]).unwrap();
        assert_eq!(p.protocol(), 0x86dd);
        assert_eq!(p.interface_index(), 3);
        assert_eq!(p.hardware_type(), 1);
        assert_eq!(p.packet_type(), 0);
        assert_eq!(p.addr_len(), 6);
        assert_eq!(p.addr(), &[0x02, 0x42, 0xac, 0x11, 0x00, 0x02]);
        assert_eq!(p.payload(), &[0x60, 0x00]);
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&SLL2[..len]), Err(Error));
        }
    }
}
