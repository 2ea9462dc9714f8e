//! Zero-copy views of the packet headers trawl decodes on its hot path.
//!
//! Every protocol module exports a `Packet<T: AsRef<[u8]>>` view over a byte buffer and a
//! `HEADER_LEN` constant; the crate root re-exports the views with a prefix
//! ([`EthernetPacket`], [`Ipv4Packet`], [`TcpPacket`], ...). The shape follows smoltcp:
//!
//! - `Packet::new_unchecked(buffer)` wraps the bytes without looking at them;
//! - `Packet::check_len()` verifies that the buffer is long enough for every accessor;
//! - `Packet::new_checked(buffer)` does both and is what untrusted bytes must go through.
//!
//! **Guarantee:** once `check_len` has succeeded on a view, no accessor of that view panics.
//! Each module documents what `check_len` verifies; views whose header length is stated in the
//! header (IPv4, TCP, GRE, ...) also document which accessors need only the fixed `HEADER_LEN`
//! bytes, so a decoder can read a header whose variable part was cut short by the snap length.
//!
//! Getters read big-endian fields straight from the buffer; nothing is copied or allocated.
//! The only error is the zero-sized [`Error`]: callers that must tell causes apart (truncated or
//! malformed) look at the lengths themselves.
//!
//! Modules: [`ethernet`] (with [`ethernet::ethertype`]), [`vlan`], [`mpls`], [`pppoe`],
//! [`linux_sll`], [`linux_sll2`], [`ipv4`], [`ipv6`] (with an extension-header walk), [`tcp`]
//! (with an option iterator), [`udp`], [`icmp`] (ICMPv4 and ICMPv6), [`sctp`], [`gre`],
//! [`vxlan`].
//!
//! # Example
//!
//! ```
//! use trawl_wire::{ethernet, EthernetPacket, Ipv4Packet, UdpPacket};
//!
//! let frame: [u8; 42] = [
//!     0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00,
//!     0x45, 0x00, 0x00, 0x1c, 0x00, 0x01, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00,
//!     0x0a, 0x00, 0x00, 0x01, 0x0a, 0x00, 0x00, 0x02,
//!     0x30, 0x39, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00,
//! ];
//! let eth = EthernetPacket::new_checked(&frame[..]).unwrap();
//! assert_eq!(eth.ethertype(), ethernet::ethertype::IPV4);
//! let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
//! assert_eq!(ip.src_addr(), [10, 0, 0, 1]);
//! let udp = UdpPacket::new_checked(ip.payload()).unwrap();
//! assert_eq!((udp.src_port(), udp.dst_port()), (12345, 53));
//! ```
#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use core::fmt;

/// The constructors every view shares; `check_len` is written per module.
macro_rules! view_constructors {
    () => {
        /// Wraps a buffer without checking its length. Accessors may panic until
        /// [`check_len`](Self::check_len) has succeeded.
        #[inline]
        pub const fn new_unchecked(buffer: T) -> Self {
            Packet { buffer }
        }

        /// Wraps a buffer and checks its length ([`check_len`](Self::check_len)): the
        /// constructor for untrusted bytes.
        #[inline]
        pub fn new_checked(buffer: T) -> Result<Self, crate::Error> {
            let packet = Self::new_unchecked(buffer);
            packet.check_len()?;
            Ok(packet)
        }

        /// Gives the buffer back.
        #[inline]
        pub fn into_inner(self) -> T {
            self.buffer
        }
    };
}

pub mod ethernet;
pub mod gre;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod linux_sll;
pub mod linux_sll2;
pub mod mpls;
pub mod pppoe;
pub mod sctp;
pub mod tcp;
pub mod udp;
pub mod vlan;
pub mod vxlan;

pub use ethernet::Packet as EthernetPacket;
pub use gre::Packet as GrePacket;
pub use icmp::Packet as IcmpPacket;
pub use ipv4::Packet as Ipv4Packet;
pub use ipv6::Packet as Ipv6Packet;
pub use linux_sll::Packet as LinuxSllPacket;
pub use linux_sll2::Packet as LinuxSll2Packet;
pub use mpls::Packet as MplsPacket;
pub use pppoe::Packet as PppoePacket;
pub use sctp::Packet as SctpPacket;
pub use tcp::Packet as TcpPacket;
pub use udp::Packet as UdpPacket;
pub use vlan::Packet as VlanPacket;
pub use vxlan::Packet as VxlanPacket;

/// The buffer is too short for the header (or the header states an impossible length).
///
/// Zero-sized on purpose: the hot path never builds error values with data in them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Error;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("truncated or malformed packet header")
    }
}

impl core::error::Error for Error {}

/// Byte ranges of header fields, as in smoltcp.
pub(crate) mod field {
    /// A fixed field: `start..end`.
    pub type Field = core::ops::Range<usize>;
    /// Everything from an offset on.
    pub type Rest = core::ops::RangeFrom<usize>;
}

/// The `check_len` of a header of fixed length: the buffer holds at least `header_len` bytes.
#[inline(always)]
pub(crate) fn check_fixed(buffer: &[u8], header_len: usize) -> Result<(), Error> {
    if buffer.len() < header_len {
        Err(Error)
    } else {
        Ok(())
    }
}

/// The `check_len` of a header with options (IPv4, TCP): the fixed part is there, the length
/// the header states (`stated_len`, read from the fixed part) covers at least the fixed part,
/// and the buffer holds all of it.
#[inline(always)]
pub(crate) fn check_with_options(
    buffer: &[u8],
    fixed_len: usize,
    stated_len: impl FnOnce() -> usize,
) -> Result<(), Error> {
    check_fixed(buffer, fixed_len)?;
    let header_len = stated_len();
    if header_len < fixed_len || buffer.len() < header_len {
        return Err(Error);
    }
    Ok(())
}

/// Reads a big-endian `u16` at `field` (two bytes).
#[inline(always)]
pub(crate) fn read_u16(data: &[u8], field: field::Field) -> u16 {
    let mut b = [0u8; 2];
    b.copy_from_slice(&data[field]);
    u16::from_be_bytes(b)
}

/// Reads a big-endian `u32` at `field` (four bytes).
#[inline(always)]
pub(crate) fn read_u32(data: &[u8], field: field::Field) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&data[field]);
    u32::from_be_bytes(b)
}

/// Copies a fixed-size field out.
#[inline(always)]
pub(crate) fn read_array<const N: usize>(data: &[u8], field: field::Field) -> [u8; N] {
    let mut b = [0u8; N];
    b.copy_from_slice(&data[field]);
    b
}

/// The Internet checksum (RFC 1071) of `data` folded to 16 bits, not complemented, starting
/// from `initial` (a partial sum such as a pseudo-header's).
pub fn internet_checksum(initial: u32, data: &[u8]) -> u16 {
    let mut sum = initial as u64;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u64) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_rfc1071_example() {
        // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(internet_checksum(0, &data), 0xddf2);
        // Odd length pads with a zero byte.
        assert_eq!(internet_checksum(0, &[0x01]), 0x0100);
    }

    #[test]
    fn error_is_zero_sized() {
        assert_eq!(core::mem::size_of::<Error>(), 0);
    }
}
