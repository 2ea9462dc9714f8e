//! TCP header (RFC 9293) and its options.
//!
//! ```text
//!  0               1               2               3
//! +-------------------------------+-------------------------------+
//! |          source port          |       destination port        |
//! +-------------------------------+-------------------------------+
//! |                        sequence number                        |
//! |                    acknowledgment number                      |
//! +-------+-------+---------------+-------------------------------+
//! | offset| rsvd  |C E U A P R S F|            window             |
//! +-------+-------+---------------+-------------------------------+
//! |           checksum            |        urgent pointer         |
//! +-------------------------------+-------------------------------+
//! |                 options (offset > 5) ...                      |
//! +---------------------------------------------------------------+
//! ```
use crate::field::Field;
use crate::{read_u16, read_u32, Error};

/// Length of the header without options.
pub const HEADER_LEN: usize = 20;

mod field {
    use super::Field;
    pub const SRC_PORT: Field = 0..2;
    pub const DST_PORT: Field = 2..4;
    pub const SEQ_NUM: Field = 4..8;
    pub const ACK_NUM: Field = 8..12;
    pub const DATA_OFFSET: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WIN_SIZE: Field = 14..16;
    pub const CHECKSUM: Field = 16..18;
    pub const URGENT: Field = 18..20;
}

/// Flag bits of byte 13.
pub mod flags {
    /// No more data from sender.
    pub const FIN: u8 = 0x01;
    /// Synchronise sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push.
    pub const PSH: u8 = 0x08;
    /// Acknowledgment field significant.
    pub const ACK: u8 = 0x10;
    /// Urgent pointer significant.
    pub const URG: u8 = 0x20;
    /// ECN echo.
    pub const ECE: u8 = 0x40;
    /// Congestion window reduced.
    pub const CWR: u8 = 0x80;
}

/// A view of a TCP header and its payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    view_constructors!();

    /// Checks that the buffer holds the fixed header, that the data offset is at least 5 and
    /// that the buffer holds the whole header with options. After success no accessor panics.
    /// The fixed-header accessors (everything but `options`, `options_iter` and `payload`)
    /// need only [`HEADER_LEN`] bytes.
    #[inline]
    pub fn check_len(&self) -> Result<(), Error> {
        crate::check_with_options(self.buffer.as_ref(), HEADER_LEN, || self.header_len())
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

    /// Sequence number.
    #[inline]
    pub fn seq_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::SEQ_NUM)
    }

    /// Acknowledgment number.
    #[inline]
    pub fn ack_number(&self) -> u32 {
        read_u32(self.buffer.as_ref(), field::ACK_NUM)
    }

    /// Header length in bytes (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::DATA_OFFSET] >> 4) as usize) * 4
    }

    /// The eight flag bits CWR ECE URG ACK PSH RST SYN FIN (see [`flags`]).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// FIN flag.
    #[inline]
    pub fn fin(&self) -> bool {
        self.flags() & flags::FIN != 0
    }

    /// SYN flag.
    #[inline]
    pub fn syn(&self) -> bool {
        self.flags() & flags::SYN != 0
    }

    /// RST flag.
    #[inline]
    pub fn rst(&self) -> bool {
        self.flags() & flags::RST != 0
    }

    /// PSH flag.
    #[inline]
    pub fn psh(&self) -> bool {
        self.flags() & flags::PSH != 0
    }

    /// ACK flag.
    #[inline]
    pub fn ack(&self) -> bool {
        self.flags() & flags::ACK != 0
    }

    /// URG flag.
    #[inline]
    pub fn urg(&self) -> bool {
        self.flags() & flags::URG != 0
    }

    /// ECE flag.
    #[inline]
    pub fn ece(&self) -> bool {
        self.flags() & flags::ECE != 0
    }

    /// CWR flag.
    #[inline]
    pub fn cwr(&self) -> bool {
        self.flags() & flags::CWR != 0
    }

    /// Window (unscaled).
    #[inline]
    pub fn window_len(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::WIN_SIZE)
    }

    /// Checksum as stored.
    #[inline]
    pub fn checksum(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent_at(&self) -> u16 {
        read_u16(self.buffer.as_ref(), field::URGENT)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The option bytes (20 to data offset × 4).
    #[inline]
    pub fn options(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The options, parsed.
    #[inline]
    pub fn options_iter(&self) -> Options<'a> {
        Options::new(self.options())
    }

    /// Everything after the header (the caller cuts it to the length IP states).
    #[inline]
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// Option kinds.
pub mod option_kind {
    /// End of option list.
    pub const END: u8 = 0;
    /// No-operation (padding).
    pub const NOP: u8 = 1;
    /// Maximum segment size.
    pub const MSS: u8 = 2;
    /// Window scale.
    pub const WINDOW_SCALE: u8 = 3;
    /// SACK permitted.
    pub const SACK_PERMITTED: u8 = 4;
    /// SACK blocks.
    pub const SACK: u8 = 5;
    /// Timestamps.
    pub const TIMESTAMPS: u8 = 8;
}

/// One TCP option.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpOption<'a> {
    /// End of option list; the iterator stops after it.
    EndOfList,
    /// Padding.
    NoOperation,
    /// Maximum segment size.
    MaxSegmentSize(u16),
    /// Window scale shift count (as sent; RFC 7323 caps its use at 14).
    WindowScale(u8),
    /// SACK permitted.
    SackPermitted,
    /// SACK blocks, raw (pairs of 32-bit edges).
    Sack(&'a [u8]),
    /// Timestamps.
    Timestamps {
        /// Timestamp value.
        tsval: u32,
        /// Timestamp echo reply.
        tsecr: u32,
    },
    /// Any other option, or a known kind with the wrong length.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Option data (after kind and length).
        data: &'a [u8],
    },
}

/// Iterator over TCP options. Tolerant of malformed lists: an option whose length byte is
/// missing, below 2 or beyond the end yields one `Err(Error)`, then the iterator ends.
/// Options before the damage are still returned.
#[derive(Clone, Debug)]
pub struct Options<'a> {
    rest: &'a [u8],
}

impl<'a> Options<'a> {
    /// Iterates over raw option bytes (for instance the part of an options area that a
    /// truncated capture holds).
    #[inline]
    pub const fn new(bytes: &'a [u8]) -> Self {
        Options { rest: bytes }
    }
}

impl<'a> Iterator for Options<'a> {
    type Item = Result<TcpOption<'a>, Error>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, after_kind) = self.rest.split_first()?;
        match kind {
            option_kind::END => {
                self.rest = &[];
                return Some(Ok(TcpOption::EndOfList));
            }
            option_kind::NOP => {
                self.rest = after_kind;
                return Some(Ok(TcpOption::NoOperation));
            }
            _ => {}
        }
        let len = match after_kind.first() {
            Some(&len) if len >= 2 && len as usize <= self.rest.len() => len as usize,
            _ => {
                self.rest = &[];
                return Some(Err(Error));
            }
        };
        let data = &self.rest[2..len];
        self.rest = &self.rest[len..];
        let option = match (kind, data) {
            (option_kind::MSS, &[a, b]) => TcpOption::MaxSegmentSize(u16::from_be_bytes([a, b])),
            (option_kind::WINDOW_SCALE, &[shift]) => TcpOption::WindowScale(shift),
            (option_kind::SACK_PERMITTED, &[]) => TcpOption::SackPermitted,
            (option_kind::SACK, _) if data.len().is_multiple_of(8) && !data.is_empty() => {
                TcpOption::Sack(data)
            }
            (option_kind::TIMESTAMPS, &[a, b, c, d, e, f, g, h]) => TcpOption::Timestamps {
                tsval: u32::from_be_bytes([a, b, c, d]),
                tsecr: u32::from_be_bytes([e, f, g, h]),
            },
            _ => TcpOption::Unknown { kind, data },
        };
        Some(Ok(option))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static SYN: [u8; 44] = [
        0xc3, 0x50, 0x00, 0x50, // 50000 -> 80
        0x01, 0x02, 0x03, 0x04, // seq
        0x00, 0x00, 0x00, 0x00, // ack
        0xa0, 0x02, 0xfa, 0xf0, // offset 10 (40 bytes), SYN, window 64240
        0x12, 0x34, 0x00, 0x00, // checksum, urgent
        0x02, 0x04, 0x05, 0xb4, // MSS 1460
        0x04, 0x02, 0x08, 0x0a, // SACK permitted, timestamps ...
        0x00, 0x00, 0x00, 0x01, //   tsval 1
        0x00, 0x00, 0x00, 0x00, //   tsecr 0
        0x01, 0x03, 0x03, 0x07, // NOP, window scale 7
        0x68, 0x69, 0x21, 0x0a, // payload "hi!\n"
    ];

    #[test]
    fn deconstruct() {
        let p = Packet::new_checked(&SYN[..]).unwrap();
        assert_eq!(p.src_port(), 50000);
        assert_eq!(p.dst_port(), 80);
        assert_eq!(p.seq_number(), 0x01020304);
        assert_eq!(p.ack_number(), 0);
        assert_eq!(p.header_len(), 40);
        assert_eq!(p.flags(), flags::SYN);
        assert!(p.syn() && !p.ack() && !p.fin() && !p.rst());
        assert!(!p.psh() && !p.urg() && !p.ece() && !p.cwr());
        assert_eq!(p.window_len(), 64240);
        assert_eq!(p.checksum(), 0x1234);
        assert_eq!(p.urgent_at(), 0);
        assert_eq!(p.options().len(), 20);
        assert_eq!(p.payload(), b"hi!\n");
        let mut it = p.options_iter();
        assert_eq!(it.next(), Some(Ok(TcpOption::MaxSegmentSize(1460))));
        assert_eq!(it.next(), Some(Ok(TcpOption::SackPermitted)));
        assert_eq!(
            it.next(),
            Some(Ok(TcpOption::Timestamps { tsval: 1, tsecr: 0 }))
        );
        assert_eq!(it.next(), Some(Ok(TcpOption::NoOperation)));
        assert_eq!(it.next(), Some(Ok(TcpOption::WindowScale(7))));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn truncated_header() {
        for len in 0..40 {
            assert_eq!(Packet::new_checked(&SYN[..len]), Err(Error), "len {len}");
        }
        // The fixed header alone is readable with new_unchecked.
        let p = Packet::new_unchecked(&SYN[..20]);
        assert_eq!(p.flags(), flags::SYN);
    }

    #[test]
    fn data_offset_below_five_is_rejected() {
        let mut bytes = SYN;
        bytes[12] = 0x40;
        assert_eq!(Packet::new_checked(&bytes[..]), Err(Error));
    }

    #[test]
    fn malformed_options_end_the_list() {
        // MSS, then an option of length 1, then bytes that must not be read.
        let bytes = [0x02, 0x04, 0x05, 0xb4, 0x08, 0x01, 0x02, 0x04];
        let mut it = Options::new(&bytes);
        assert_eq!(it.next(), Some(Ok(TcpOption::MaxSegmentSize(1460))));
        assert_eq!(it.next(), Some(Err(Error)));
        assert_eq!(it.next(), None);
        // Length past the end.
        let mut it = Options::new(&[0x08, 0x0a, 0x00]);
        assert_eq!(it.next(), Some(Err(Error)));
        assert_eq!(it.next(), None);
        // Kind without a length byte.
        let mut it = Options::new(&[0x01, 0x02]);
        assert_eq!(it.next(), Some(Ok(TcpOption::NoOperation)));
        assert_eq!(it.next(), Some(Err(Error)));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn wrong_length_known_option_is_unknown() {
        let bytes = [0x02, 0x03, 0x05, 0x05, 0x0a, 1, 2, 3, 4, 5, 6, 7, 8];
        let mut it = Options::new(&bytes);
        assert_eq!(
            it.next(),
            Some(Ok(TcpOption::Unknown {
                kind: 2,
                data: &[0x05]
            }))
        );
        assert_eq!(it.next(), Some(Ok(TcpOption::Sack(&bytes[5..]))));
        assert_eq!(it.next(), None);
    }

    #[test]
    fn end_of_list_stops() {
        let mut it = Options::new(&[0x00, 0x02, 0x04, 0x05, 0xb4]);
        assert_eq!(it.next(), Some(Ok(TcpOption::EndOfList)));
        assert_eq!(it.next(), None);
    }
}
