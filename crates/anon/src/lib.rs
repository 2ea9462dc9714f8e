//! Prefix-preserving IP address anonymization for trawl's outputs and packets.
//!
//! [`CryptoPan`] is Crypto-PAn (Xu, Fan, Ammar, Moon, ICNP 2002): an address is XORed with a
//! one-time pad whose bit *i* is the first bit of `AES(key, the first i bits of the address,
//! completed by a secret pad)`, so two addresses sharing a *k*-bit prefix share exactly a *k*-bit
//! prefix after anonymization, and one key maps the same address the same way in every trace.
//! The 32-byte [`Key`] is read from a file (32 raw bytes or 64 hex digits,
//! [`Key::from_file`]); its first 16 bytes are the AES key, the last 16 encrypted give the pad,
//! as in the reference implementation, whose sample trace the tests reproduce.
//!
//! [`Anonymizer`] is what outputs use: Crypto-PAn plus the prefixes to keep unchanged
//! (`--keep 10.0.0.0/8`, [`Prefix`]) and a small cache of recent addresses, because flows and
//! packets repeat the same few addresses.
//!
//! ```
//! use std::net::Ipv4Addr;
//! use trawl_anon::{Anonymizer, CryptoPan, Key};
//!
//! let key = Key::from_bytes(&[7u8; 32]).unwrap();
//! let mut anon = Anonymizer::new(CryptoPan::new(&key), vec!["10.0.0.0/8".parse().unwrap()]);
//! let a = anon.v4(Ipv4Addr::new(192, 0, 2, 1));
//! let b = anon.v4(Ipv4Addr::new(192, 0, 2, 200));
//! // Same /24 in, same /24 out (at least: the first differing bit is bit 24).
//! assert_eq!(a.octets()[..3], b.octets()[..3]);
//! assert_ne!(a, b);
//! // Kept prefixes stay as they are.
//! assert_eq!(anon.v4(Ipv4Addr::new(10, 1, 2, 3)), Ipv4Addr::new(10, 1, 2, 3));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod anonymizer;
mod checksum;
mod cryptopan;
mod key;
pub mod packet;
mod prefix;

pub use anonymizer::Anonymizer;
pub use cryptopan::CryptoPan;
pub use key::{Key, KEY_LEN};
pub use packet::{PacketRewriter, RewriteOutcome};
pub use prefix::Prefix;

use std::path::PathBuf;

/// What can go wrong reading a key or a prefix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The key file could not be read (missing, no permission, ...).
    #[error("key file {}: {source}", path.display())]
    ReadKey {
        /// The key file.
        path: PathBuf,
        /// Why it could not be read.
        source: std::io::Error,
    },
    /// The key file holds neither 32 bytes nor 64 hex digits (whitespace around them allowed).
    #[error("key file {}: {len} bytes, expected 32 raw bytes or 64 hex digits", path.display())]
    KeyLength {
        /// The key file.
        path: PathBuf,
        /// How many bytes it holds (after trimming whitespace, for a text key).
        len: usize,
    },
    /// The key file has 64 characters but one of them is not a hex digit.
    #[error("key file {}: byte {offset} ({found:?}) is not a hex digit", path.display())]
    KeyHex {
        /// The key file.
        path: PathBuf,
        /// Offset of the offending byte in the file.
        offset: usize,
        /// The byte found there, as a character.
        found: char,
    },
    /// A key given as bytes in memory is not 32 bytes long.
    #[error("key of {0} bytes, expected 32")]
    KeyBytes(usize),
    /// A `--keep` prefix is not `ADDRESS/LENGTH` with a length the family allows.
    #[error("prefix {text:?}: {reason}")]
    Prefix {
        /// The text given.
        text: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}
