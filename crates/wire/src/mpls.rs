//! MPLS label stack entry (RFC 3032).
//!
//! ```text
//!  0                   1                   2                   3
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! |                Label                  | TC  |S|      TTL      |
//! +-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//! ```
//! Entries repeat until one has the bottom-of-stack bit `S` set. MPLS does not say what the
//! payload is; decoders guess from its first nibble (4 = IPv4, 6 = IPv6).
use crate::field::{Field, Rest};
use crate::{read_u32, Error};

/// Length of one label stack entry.
pub const HEADER_LEN: usize = 4;

mod field {
    use super::{Field, Rest};
    pub const ENTRY: Field = 0..4;
    pub const PAYLOAD: Rest = 4..;
}

/// A view of one label stack entry and what follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the 4-byte entry. After success no accessor panics.
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_fixed(self.buffer.as_ref(), HEADER_LEN)
    }

    #[inline]
    fn entry(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::ENTRY)
    }

    /// The 20-bit label.
    #[inline]
    pub fn label(&self) -> u32 {
        self.entry() >> 12
    }

    /// Traffic class (3 bits, formerly EXP).
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        ((self.entry() >> 9) & 0x7) as u8
    }

    /// Bottom-of-stack bit: the payload follows this entry.
    #[inline]
    pub fn bottom_of_stack(&self) -> bool {
        self.entry() & 0x100 != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.entry() as u8
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Everything after this entry (the next entry, or the payload at bottom of stack).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static STACK: [u8; 9] = [
        0x00, 0x01, 0x2a, 0x40, // label 18, TC 5, not bottom, TTL 64
        0x00, 0x01, 0x31, 0xff, // label 19, TC 0, bottom, TTL 255
        0x45, //                   payload: IPv4
    ];

    #[test]
    fn deconstruct() {
        let first = Packet::new_checked(&STACK[..]).unwrap();
        assert_eq!(first.label(), 18);
        assert_eq!(first.traffic_class(), 5);
        assert!(!first.bottom_of_stack());
        assert_eq!(first.ttl(), 64);
        let second = Packet::new_checked(first.payload()).unwrap();
        assert_eq!(second.label(), 19);
        assert_eq!(second.traffic_class(), 0);
        assert!(second.bottom_of_stack());
        assert_eq!(second.ttl(), 255);
        assert_eq!(second.payload(), &[0x45]);
    }

    #[test]
    fn truncated_entry() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&STACK[..len]), Err(Error));
        }
    }
}
