//! Linux "cooked" capture header, version 1 (`LINKTYPE_LINUX_SLL`, 113).
//!
//! ```text
//!  0       2       4       6                               14      16
//! +-------+-------+-------+-------------------------------+-------+--------
//! | pkt   | ARPHRD| addr  | link-layer address            | proto | payload
//! | type  | type  | len   | (first 8 bytes, zero padded)  |       |
//! +-------+-------+-------+-------------------------------+-------+--------
//! ```
//! `proto` is an EtherType for most hardware types (VLAN tags may follow it when the kernel did
//! not strip them).
use crate::field::{Field, Rest};
use crate::{read_u16, Error};

/// Length of the SLL header.
pub const HEADER_LEN: usize = 16;

mod field {
    use super::{Field, Rest};
    pub const PACKET_TYPE: Field = 0..2;
    pub const HARDWARE_TYPE: Field = 2..4;
    pub const ADDR_LEN: Field = 4..6;
    pub const ADDR: Field = 6..14;
    pub const PROTOCOL: Field = 14..16;
    pub const PAYLOAD: Rest = 16..;
}

/// Packet types (`PACKET_*` of `<linux/if_packet.h>`), shared by SLL and SLL2.
pub mod packet_type {
    /// Addressed to this host.
    pub const HOST: u16 = 0;
    /// Broadcast.
    pub const BROADCAST: u16 = 1;
    /// Multicast.
    pub const MULTICAST: u16 = 2;
    /// Addressed to another host (promiscuous mode).
    pub const OTHERHOST: u16 = 3;
    /// Sent by this host.
    pub const OUTGOING: u16 = 4;
}

/// `ARPHRD_*` hardware types that matter to decoders, shared by SLL and SLL2.
pub mod hardware_type {
    /// Ethernet: the address is a 6-byte MAC.
    pub const ETHER: u16 = 1;
    /// Loopback.
    pub const LOOPBACK: u16 = 772;
    /// IP-over-GRE tunnel device.
    pub const IPGRE: u16 = 778;
    /// No link-layer header (tun devices).
    pub const NONE: u16 = 0xfffe;
}

/// A view of an SLL header and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the 16-byte header. After success no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_fixed(self.buffer.as_ref(), HEADER_LEN)
    }

    /// Packet type (see [`packet_type`]).
    #[inline]
    pub fn packet_type(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PACKET_TYPE)
    }

    /// `ARPHRD_*` type of the capturing device (see [`hardware_type`]).
    #[inline]
    pub fn hardware_type(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::HARDWARE_TYPE)
    }

    /// Length of the link-layer source address as the kernel gave it (may exceed 8).
    #[inline]
    pub fn addr_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ADDR_LEN)
    }

    /// Protocol of the payload (an EtherType for most hardware types).
    #[inline]
    pub fn protocol(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PROTOCOL)
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

    static SLL: [u8; 18] = [
        0x00, 0x04, //                                     outgoing
        0x00, 0x01, //                                     ARPHRD_ETHER
        0x00, 0x06, //                                     address length 6
        0x02, 0x42, 0xac, 0x11, 0x00, 0x02, 0x00, 0x00, // address + padding
        0x08, 0x00, //                                     IPv4
        0x45, 0x00, //                                     payload
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&SLL[..]).unwrap();
        assert_eq!(p.packet_type(), packet_type::OUTGOING);
        assert_eq!(p.hardware_type(), hardware_type::ETHER);
        assert_eq!(p.addr_len(), 6);
        assert_eq!(p.addr(), &[0x02, 0x42, 0xac, 0x11, 0x00, 0x02]);
        assert_eq!(p.protocol(), 0x0800);
        assert_eq!(p.payload(), &[0x45, 0x00]);
    }

    #[test]
    fn long_address_is_capped() {
        let mut bytes = SLL;
        bytes[5] = 20;
        assert_eq!(Packet::new_checked(&bytes[..]).unwrap().addr().len(), 8);
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&SLL[..len]), Err(Error));
        }
    }
}
