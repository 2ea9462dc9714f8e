//! Ethernet II / IEEE 802.3 frame header (without the FCS, which captures rarely carry).
//!
//! ```text
//!  0                   6                  12        14
//! +-------------------+-------------------+---------+--------
//! | destination MAC   | source MAC        | type    | payload
//! +-------------------+-------------------+---------+--------
//! ```
//! A type value of 1500 or less is an 802.3 length and the payload starts with an LLC header
//! ([`ethertype::is_length`]).
use crate::field::{Field, Rest};
use crate::{read_array, read_u16, Error};

/// Length of the Ethernet header.
pub const HEADER_LEN: usize = 14;

mod field {
    use super::{Field, Rest};
    pub const DESTINATION: Field = 0..6;
    pub const SOURCE: Field = 6..12;
    pub const ETHERTYPE: Field = 12..14;
    pub const PAYLOAD: Rest = 14..;
}

/// EtherType values trawl dispatches on (and a few it recognises to count as non-IP).
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// IEEE 802.1Q VLAN tag (customer tag).
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service tag (QinQ).
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard QinQ service tag used by many switches.
    pub const QINQ_9100: u16 = 0x9100;
    /// MPLS unicast.
    pub const MPLS_UNICAST: u16 = 0x8847;
    /// MPLS multicast.
    pub const MPLS_MULTICAST: u16 = 0x8848;
    /// PPPoE discovery stage.
    pub const PPPOE_DISCOVERY: u16 = 0x8863;
    /// PPPoE session stage.
    pub const PPPOE_SESSION: u16 = 0x8864;
    /// Transparent Ethernet bridging (Ethernet carried in GRE, NVGRE).
    pub const TRANSPARENT_ETHERNET_BRIDGING: u16 = 0x6558;
    /// LLDP.
    pub const LLDP: u16 = 0x88cc;
    /// Largest value that is an 802.3 length rather than an EtherType.
    pub const MAX_LENGTH: u16 = 1500;

    /// True when the type field of an Ethernet header is an 802.3 length (the payload is an
    /// LLC frame), false when it is an EtherType.
    #[inline]
    pub const fn is_length(value: u16) -> bool {
        value <= MAX_LENGTH
    }

    /// True for the tag protocol identifiers of a VLAN tag (802.1Q, 802.1ad, 0x9100).
    #[inline]
    pub const fn is_vlan_tag(value: u16) -> bool {
        matches!(value, VLAN | QINQ | QINQ_9100)
    }
}

/// A view of an Ethernet header and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the 14-byte header. After success no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_fixed(self.buffer.as_ref(), HEADER_LEN)
    }

    /// Destination MAC address.
    #[inline]
    pub fn dst_addr(&self) -> [u8; 6] {
        read_array(self.buffer.as_ref(), field::DESTINATION)
    }

    /// Source MAC address.
    #[inline]
    pub fn src_addr(&self) -> [u8; 6] {
        read_array(self.buffer.as_ref(), field::SOURCE)
    }

    /// The EtherType, or the 802.3 length when [`ethertype::is_length`] holds.
    #[inline]
    pub fn ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Length of the header (always [`HEADER_LEN`]).
    #[inline]
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Everything after the header (VLAN tags included: this view does not skip them).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static FRAME: [u8; 18] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, // destination
        0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, // source
        0x08, 0x00, //                         IPv4
        0xde, 0xad, 0xbe, 0xef, //             payload
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&FRAME[..]).unwrap();
        assert_eq!(p.dst_addr(), [0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(p.src_addr(), [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb]);
        assert_eq!(p.ethertype(), ethertype::IPV4);
        assert_eq!(p.header_len(), 14);
        assert_eq!(p.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(p.into_inner().len(), 18);
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&FRAME[..len]), Err(Error), "len {len}");
        }
        assert_eq!(Packet::new_checked(&FRAME[..14]).unwrap().payload(), &[]);
    }

    #[test]
    fn ethertype_classes() {
        assert!(ethertype::is_length(0x0026));
        assert!(ethertype::is_length(1500));
        assert!(!ethertype::is_length(0x0600));
        assert!(ethertype::is_vlan_tag(0x8100));
        assert!(ethertype::is_vlan_tag(0x88a8));
        assert!(ethertype::is_vlan_tag(0x9100));
        assert!(!ethertype::is_vlan_tag(0x0800));
    }
}
