//! The crate's one error type.

/// Why an application-layer message could not be read. Variants that concern a message name the
/// byte offset (from the start of the message) and the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
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
    /// A TLS hello could not be read: `offset` is in the direction's stream for record-level
    /// faults, in the hello body for the hello's own fields.
    #[error("tls: {kind} at offset {offset} ({field})")]
    Tls {
        /// Byte offset of the fault.
        offset: usize,
        /// The field being read (`record.type`, `cipher_suites`, `server_name.host_name`, ...).
        field: &'static str,
        /// What is wrong.
        kind: TlsErrorKind,
    },
    /// A QUIC Initial packet or its CRYPTO stream could not be read: `offset` is in the packet
    /// for header and frame faults, in the CRYPTO stream for its bounds and the hello's type.
    #[error("quic: {kind} at offset {offset} ({field})")]
    Quic {
        /// Byte offset of the fault.
        offset: usize,
        /// The field being read (`dcid`, `token`, `length`, `sample`, `payload`, `frame.type`,
        /// `crypto.length`, `crypto.offset`, `handshake.type`, ...).
        field: &'static str,
        /// What is wrong.
        kind: QuicErrorKind,
    },
    /// A certificate could not be read: `offset` is in the certificate's DER bytes (or, for
    /// the Certificate message around it, in the handshake stream after the ServerHello).
    #[error("x509: {kind} at offset {offset} ({field})")]
    X509 {
        /// Byte offset of the fault.
        offset: usize,
        /// The element being read (`tbsCertificate`, `issuer`, `notBefore`, `certificate_list`,
        /// ...).
        field: &'static str,
        /// What is wrong.
        kind: X509ErrorKind,
    },
    /// An HTTP/1.x stream could not be read further: `offset` is in the direction's stream.
    #[error("http: {kind} at offset {offset} ({field})")]
    Http {
        /// Byte offset of the fault in the stream.
        offset: usize,
        /// The field being read (`request_line`, `status_line`, `header`, `content-length`,
        /// `chunk_size`, `head`).
        field: &'static str,
        /// What is wrong.
        kind: HttpErrorKind,
    },
}

/// What is wrong in an HTTP/1.x stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[repr(u8)]
pub enum HttpErrorKind {
    /// The bytes do not start an HTTP/1.x request or response.
    #[error("not HTTP/1.x")]
    NotHttp = 0,
    /// A Content-Length that is not a number, a chunk size that is not hexadecimal.
    #[error("malformed")]
    Malformed = 1,
    /// A head longer than 64 KiB or a chunk-size line longer than 1 KiB.
    #[error("too large")]
    TooLarge = 2,
}

/// What is wrong in a QUIC Initial packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[repr(u8)]
pub enum QuicErrorKind {
    /// A field runs past the end of the packet or its payload.
    #[error("truncated")]
    Truncated = 0,
    /// A connection ID longer than 20 bytes, a frame an Initial may not carry, a CRYPTO stream
    /// that does not start with the expected hello.
    #[error("malformed")]
    Malformed = 1,
    /// The packet does not authenticate with the Initial keys.
    #[error("decryption failed")]
    Decryption = 2,
    /// CRYPTO data past 16 KiB or in more than 64 separate ranges.
    #[error("too large")]
    TooLarge = 3,
}

/// What is wrong in a certificate or the Certificate message holding it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[repr(u8)]
pub enum X509ErrorKind {
    /// An element runs past its enclosing one.
    #[error("truncated")]
    Truncated = 0,
    /// An unexpected tag, a length form DER does not allow, a time not in UTCTime or
    /// GeneralizedTime form.
    #[error("malformed")]
    Malformed = 1,
    /// A certificate over 64 KiB, or handshake messages past the reading budget.
    #[error("too large")]
    TooLarge = 2,
}

/// What is wrong in a TLS hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[repr(u8)]
pub enum TlsErrorKind {
    /// A field runs past the end of its enclosing length.
    #[error("truncated")]
    Truncated = 0,
    /// The stream does not start with a TLS handshake record holding a hello (another
    /// protocol, an SSLv2 hello, a record version other than 3.x).
    #[error("not a TLS handshake")]
    NotHandshake = 1,
    /// A record or the hello is longer than the bounds (16 KiB + 2 KiB, 64 KiB).
    #[error("too large")]
    TooLarge = 2,
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
