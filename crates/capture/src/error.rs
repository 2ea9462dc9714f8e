//! Errors of packet sources.
use std::path::PathBuf;

/// What went wrong, without where.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// Reading the file failed at the OS level.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The first bytes match no supported capture format.
    #[error("not a capture file this reader knows (magic {magic:02x?})")]
    UnknownFormat {
        /// The first bytes of the file (up to 4).
        magic: Vec<u8>,
    },
    /// A header or record field holds a value the format forbids; `field` names it.
    #[error("invalid {field}: {detail}")]
    InvalidField {
        /// The field, e.g. `pcap header version` or `pcapng block total length`.
        field: &'static str,
        /// What was found and what was expected.
        detail: String,
    },
    /// The input ended in the middle of a header or record.
    #[error("truncated {what}: needed {needed} bytes, {available} left")]
    Truncated {
        /// What was being read (e.g. `record header`, `packet data`).
        what: &'static str,
        /// Bytes needed.
        needed: u64,
        /// Bytes available.
        available: u64,
    },
    /// Decompressing a gzip or zstd file failed.
    #[error("decompression failed: {0}")]
    Decompress(String),
    /// The reader got into a state it should never reach: a bug, please report it.
    #[error("internal error (a bug, please report): {0}")]
    Internal(&'static str),
    /// `inner` happened in a compressed file: the error's offset counts decompressed bytes.
    #[error("{inner} (in a {codec}-compressed file; the offset counts decompressed bytes)")]
    Compressed {
        /// `gzip` or `zstd`.
        codec: &'static str,
        /// What went wrong in the decompressed stream.
        inner: Box<ErrorKind>,
    },
}

impl ErrorKind {
    /// The error itself, with any [`ErrorKind::Compressed`] wrapper removed: what to match on.
    pub fn root(&self) -> &ErrorKind {
        match self {
            ErrorKind::Compressed { inner, .. } => inner.root(),
            other => other,
        }
    }
}

/// A source error with where it happened: the file and the byte offset (in the decompressed
/// stream for compressed files).
#[derive(Debug, thiserror::Error)]
#[error("{}: offset {offset}: {kind}", path.display())]
pub struct Error {
    /// The file being read.
    pub path: PathBuf,
    /// Byte offset of the offending header or record.
    pub offset: u64,
    /// What went wrong.
    pub kind: ErrorKind,
}
