//! IEEE 802.1Q / 802.1ad VLAN tag: the 4 bytes that follow a tag protocol identifier.
//!
//! ```text
//!  0       2       4
//! +-------+-------+--------
//! | TCI   | type  | payload
//! +-------+-------+--------
//! TCI = priority (3 bits) | drop eligible (1) | VLAN id (12)
//! ```
//! The tag protocol identifier itself (0x8100, 0x88a8, 0x9100) is the EtherType of the header
//! before; `type` is the EtherType of what follows (possibly another tag).
use crate::field::{Field, Rest};
use crate::{read_u16, Error};

/// Length of a tag (TCI and inner type).
pub const HEADER_LEN: usize = 4;

mod field {
    use super::{Field, Rest};
    pub const TCI: Field = 0..2;
    pub const ETHERTYPE: Field = 2..4;
    pub const PAYLOAD: Rest = 4..;
}

/// A view of one VLAN tag and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the 4-byte tag. After success no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_fixed(self.buffer.as_ref(), HEADER_LEN)
    }

    /// The whole tag control information field.
    #[inline]
    pub fn tci(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::TCI)
    }

    /// Priority code point (3 bits).
    #[inline]
    pub fn priority(&self) -> u8 {
        (self.tci() >> 13) as u8
    }

    /// Drop eligible indicator (formerly CFI).
    #[inline]
    pub fn drop_eligible(&self) -> bool {
        self.tci() & 0x1000 != 0
    }

    /// VLAN identifier (12 bits).
    #[inline]
    pub fn vlan_id(&self) -> u16 {
        self.tci() & 0x0fff
    }

    /// EtherType of the payload (or of the next tag).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ETHERTYPE)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Everything after the tag.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static TAG: [u8; 6] = [
        0xb0, 0x64, // priority 5, DEI 1, VLAN 100
        0x86, 0xdd, // IPv6
        0x60, 0x00, // payload
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&TAG[..]).unwrap();
        assert_eq!(p.priority(), 5);
        assert!(p.drop_eligible());
        assert_eq!(p.vlan_id(), 100);
        assert_eq!(p.ethertype(), 0x86dd);
        assert_eq!(p.payload(), &[0x60, 0x00]);
    }

    #[test]
    fn truncated_tag() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&TAG[..len]), Err(Error));
        }
    }
}
