//! ICMP (RFC 792) and ICMPv6 (RFC 4443) message header: both start with type, code and
//! checksum, followed by 4 type-specific bytes (identifier and sequence number for echo).
//!
//! ```text
//!  0               1               2               3
//! +---------------+---------------+-------------------------------+
//! |     type      |     code      |           checksum            |
//! +---------------+---------------+-------------------------------+
//! |          identifier           |        sequence number        |  (echo; else type-specific)
//! +-------------------------------+-------------------------------+
//! ```
//! [`v4::counterpart`] and [`v6::counterpart`] pair request and answer types; flow keys use
//! them so that both directions of an exchange map to one flow.
use crate::field::{Field, Rest};
use crate::{read_u16, read_u32, Error};

/// Length of the header (type, code, checksum and the 4 type-specific bytes).
pub const HEADER_LEN: usize = 8;

mod field {
    use super::{Field, Rest};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Field = 2..4;
    pub const REST_OF_HEADER: Field = 4..8;
    pub const ECHO_IDENT: Field = 4..6;
    pub const ECHO_SEQNO: Field = 6..8;
    pub const PAYLOAD: Rest = 8..;
}

/// ICMPv4 message types.
pub mod v4 {
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 3;
    /// Redirect.
    pub const REDIRECT: u8 = 5;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Router advertisement.
    pub const ROUTER_ADVERTISEMENT: u8 = 9;
    /// Router solicitation.
    pub const ROUTER_SOLICITATION: u8 = 10;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 11;
    /// Parameter problem.
    pub const PARAMETER_PROBLEM: u8 = 12;
    /// Timestamp request.
    pub const TIMESTAMP: u8 = 13;
    /// Timestamp reply.
    pub const TIMESTAMP_REPLY: u8 = 14;
    /// Information request.
    pub const INFO_REQUEST: u8 = 15;
    /// Information reply.
    pub const INFO_REPLY: u8 = 16;
    /// Address mask request.
    pub const ADDRESS_MASK_REQUEST: u8 = 17;
    /// Address mask reply.
    pub const ADDRESS_MASK_REPLY: u8 = 18;

    /// The type that answers `ty` (or that `ty` answers): echo 8↔0, router solicitation and
    /// advertisement 10↔9, timestamp 13↔14, information 15↔16, address mask 17↔18.
    #[inline]
    pub const fn counterpart(ty: u8) -> Option<u8> {
        match ty {
            ECHO_REQUEST => Some(ECHO_REPLY),
            ECHO_REPLY => Some(ECHO_REQUEST),
            ROUTER_SOLICITATION => Some(ROUTER_ADVERTISEMENT),
            ROUTER_ADVERTISEMENT => Some(ROUTER_SOLICITATION),
            TIMESTAMP => Some(TIMESTAMP_REPLY),
            TIMESTAMP_REPLY => Some(TIMESTAMP),
            INFO_REQUEST => Some(INFO_REPLY),
            INFO_REPLY => Some(INFO_REQUEST),
            ADDRESS_MASK_REQUEST => Some(ADDRESS_MASK_REPLY),
            ADDRESS_MASK_REPLY => Some(ADDRESS_MASK_REQUEST),
            _ => None,
        }
    }
}

/// ICMPv6 message types.
pub mod v6 {
    /// Destination unreachable.
    pub const DEST_UNREACHABLE: u8 = 1;
    /// Packet too big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time exceeded.
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter problem.
    pub const PARAMETER_PROBLEM: u8 = 4;
    /// Echo request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo reply.
    pub const ECHO_REPLY: u8 = 129;
    /// Multicast listener query.
    pub const MLD_QUERY: u8 = 130;
    /// Multicast listener report.
    pub const MLD_REPORT: u8 = 131;
    /// Router solicitation.
    pub const ROUTER_SOLICITATION: u8 = 133;
    /// Router advertisement.
    pub const ROUTER_ADVERTISEMENT: u8 = 134;
    /// Neighbor solicitation.
    pub const NEIGHBOR_SOLICITATION: u8 = 135;
    /// Neighbor advertisement.
    pub const NEIGHBOR_ADVERTISEMENT: u8 = 136;

    /// The type that answers `ty` (or that `ty` answers): echo 128↔129, MLD query and report
    /// 130↔131, router solicitation and advertisement 133↔134, neighbor solicitation and
    /// advertisement 135↔136.
    #[inline]
    pub const fn counterpart(ty: u8) -> Option<u8> {
        match ty {
            ECHO_REQUEST => Some(ECHO_REPLY),
            ECHO_REPLY => Some(ECHO_REQUEST),
            MLD_QUERY => Some(MLD_REPORT),
            MLD_REPORT => Some(MLD_QUERY),
            ROUTER_SOLICITATION => Some(ROUTER_ADVERTISEMENT),
            ROUTER_ADVERTISEMENT => Some(ROUTER_SOLICITATION),
            NEIGHBOR_SOLICITATION => Some(NEIGHBOR_ADVERTISEMENT),
            NEIGHBOR_ADVERTISEMENT => Some(NEIGHBOR_SOLICITATION),
            _ => None,
        }
    }
}

/// A view of an ICMP or ICMPv6 message.
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

    /// Message type (see [`v4`], [`v6`]).
    #[inline]
    pub fn msg_type(&self) -> u8 {
        self.buffer.as_ref()[field::TYPE]
    }

    /// Message code.
    #[inline]
    pub fn msg_code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// Checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The 4 type-specific header bytes as one number.
    #[inline]
    pub fn rest_of_header(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::REST_OF_HEADER)
    }

    /// Echo identifier (meaningful for echo request and reply).
    #[inline]
    pub fn echo_ident(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_IDENT)
    }

    /// Echo sequence number (meaningful for echo request and reply).
    #[inline]
    pub fn echo_seq_no(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::ECHO_SEQNO)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Everything after the 8-byte header (echo data, or the offending packet of an error).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static ECHO: [u8; 12] = [
        0x08, 0x00, 0xf7, 0xfd, // echo request, code 0, checksum
        0x00, 0x01, 0x00, 0x01, // id 1, seq 1
        0x61, 0x62, 0x63, 0x64, // "abcd"
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&ECHO[..]).unwrap();
        assert_eq!(p.msg_type(), v4::ECHO_REQUEST);
        assert_eq!(p.msg_code(), 0);
        assert_eq!(p.checksum(), 0xf7fd);
        assert_eq!(p.rest_of_header(), 0x0001_0001);
        assert_eq!(p.echo_ident(), 1);
        assert_eq!(p.echo_seq_no(), 1);
        assert_eq!(p.payload(), b"abcd");
    }

    #[test]
    fn truncated_header() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&ECHO[..len]), Err(Error));
        }
    }

    #[test]
    fn counterparts_are_involutions() {
        for ty in 0..=255u8 {
            if let Some(c) = v4::counterpart(ty) {
                assert_eq!(v4::counterpart(c), Some(ty), "v4 {ty}");
            }
            if let Some(c) = v6::counterpart(ty) {
                assert_eq!(v6::counterpart(c), Some(ty), "v6 {ty}");
            }
        }
        assert_eq!(v4::counterpart(8), Some(0));
        assert_eq!(v4::counterpart(3), None);
        assert_eq!(v6::counterpart(128), Some(129));
        assert_eq!(v6::counterpart(1), None);
    }
}
