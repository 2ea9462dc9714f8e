//! The crate's one error type.

/// Why an application-layer message could not be read. Variants that concern a message name the
/// byte offset (from the start of the message) and the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A Community ID was asked for two addresses of different families.
    #[error("community id: source and destination addresses are of different families")]
    CommunityIdFamily,
    /// A DNS message is malformed at `offset` (from the start of the message, after a TCP
    /// length prefix) while reading `field`.
    #[error("dns: {kind} at offset {offset} ({field})")]
    Dns {
        /// Byte offset of the fault in the message.
        offset: usize,
        /// The field being read (`header`, `qname`, `rr.rdata`, `mx.exchange`, ...).
        field: &'static str,
        /// What is wrong.
        kind: DnsErrorKind,
    },
}

/// What is wrong in a DNS message; the discriminant indexes [`crate::dns::DnsStats::faults`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[repr(u8)]
pub enum DnsErrorKind {
    /// The message ends inside the field.
    #[error("truncated")]
    Truncated = 0,
    /// A name follows more compression pointers than a name can need (a loop).
    #[error("compression pointer loop")]
    PointerLoop = 1,
    /// A compression pointer points past the end of the message.
    #[error("compression pointer out of bounds")]
    PointerOutOfBounds = 2,
    /// A label length byte has the reserved top bits 01 or 10 (extended label types).
    #[error("bad label type")]
    BadLabelType = 3,
    /// A name is longer than 255 bytes in wire form.
    #[error("name too long")]
    NameTooLong = 4,
}
