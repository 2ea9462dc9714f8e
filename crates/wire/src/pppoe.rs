//! PPPoE session-stage header (RFC 2516) with the PPP protocol field that follows it.
//!
//! ```text
//!  0       1       2               4               6               8
//! +---+---+-------+---------------+---------------+---------------+--------
//! |ver|typ| code  | session id    | length        | PPP protocol  | payload
//! +---+---+-------+---------------+---------------+---------------+--------
//! ```
//! `length` counts the PPP frame (protocol field included). This view assumes an uncompressed
//! 2-byte PPP protocol field: RFC 2516 says protocol-field compression should not be used on
//! PPPoE, and compressed frames are not decoded.
use crate::field::{Field, Rest};
use crate::{read_u16, Error};

/// Length of the PPPoE session header plus the 2-byte PPP protocol field.
pub const HEADER_LEN: usize = 8;

mod field {
    use super::{Field, Rest};
    pub const VER_TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const SESSION_ID: Field = 2..4;
    pub const LENGTH: Field = 4..6;
    pub const PROTOCOL: Field = 6..8;
    pub const PAYLOAD: Rest = 8..;
}

/// PPP protocol numbers carried in PPPoE sessions.
pub mod protocol {
    /// IPv4.
    pub const IPV4: u16 = 0x0021;
    /// IPv6.
    pub const IPV6: u16 = 0x0057;
    /// Link control protocol.
    pub const LCP: u16 = 0xc021;
    /// IP control protocol.
    pub const IPCP: u16 = 0x8021;
    /// IPv6 control protocol.
    pub const IPV6CP: u16 = 0x8057;
}

/// A view of a PPPoE session header, the PPP protocol and the PPP payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the 8 header bytes. After success no accessor panics.
    /// The `length` field is not checked against the buffer: [`payload`](Packet::payload)
    /// clamps.
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_fixed(self.buffer.as_ref(), HEADER_LEN)
    }

    /// Version (1 for RFC 2516).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TYPE] >> 4
    }

    /// Type (1 for RFC 2516).
    #[inline]
    pub fn pppoe_type(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TYPE] & 0x0f
    }

    /// Code (0 in the session stage).
    #[inline]
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Session identifier.
    #[inline]
    pub fn session_id(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::SESSION_ID)
    }

    /// Length of the PPP frame (protocol field and payload).
    #[inline]
    pub fn length(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// PPP protocol of the payload (see [`protocol`]).
    #[inline]
    pub fn protocol(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::PROTOCOL)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The PPP payload, cut at `length` when the buffer is longer (Ethernet padding); the
    /// whole rest when `length` is too small to be meaningful.
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        let rest = &self.buffer.as_ref()[field::PAYLOAD];
        let stated = (self.length() as usize).saturating_sub(2);
        if self.length() >= 2 && stated < rest.len() {
            &rest[..stated]
        } else {
            rest
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SESSION: [u8; 14] = [
        0x11, //       version 1, type 1
        0x00, //       code: session data
        0x12, 0x34, // session id
        0x00, 0x04, // length: protocol + 2 bytes
        0x00, 0x21, // PPP protocol: IPv4
        0x45, 0x00, // payload
        0x00, 0x00, 0x00, 0x00, // Ethernet padding
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&SESSION[..]).unwrap();
        assert_eq!(p.version(), 1);
        assert_eq!(p.pppoe_type(), 1);
        assert_eq!(p.code(), 0);
        assert_eq!(p.session_id(), 0x1234);
        assert_eq!(p.length(), 4);
        assert_eq!(p.protocol(), protocol::IPV4);
        assert_eq!(p.payload(), &[0x45, 0x00]);
    }

    #[test]
    fn payload_length_beyond_buffer_is_clamped() {
        let mut bytes = SESSION;
        bytes[5] = 0xff;
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.payload().len(), 6);
        bytes[5] = 0x01; // below the protocol field: meaningless
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.payload().len(), 6);
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&SESSION[..len]), Err(Error));
        }
    }
}
