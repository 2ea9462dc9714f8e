//! The crate's one error type.

/// Why a SIP message or SDP body, a setting or a file of call records could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The message is cut short: its header block or `Content-Length` body is not all there
    /// (a stream reader waits for more bytes; a datagram is counted as malformed).
    #[error("SIP message incomplete")]
    Incomplete,
    /// The SIP start line or a header the call table uses is invalid (which one is said).
    #[error("SIP: {0}")]
    Sip(&'static str),
    /// An SDP line the media table uses is invalid (which one is said).
    #[error("SDP: {0}")]
    Sdp(&'static str),
    /// A setting of the call table is out of range (which one is said).
    #[error("setting `{0}` out of range")]
    Setting(&'static str),
    /// A file of call records could not be read, or a line of it is not a JSON object
    /// (`line` 0: the file or directory itself).
    #[error("{path}:{line}: {reason}")]
    Records {
        /// The file (or directory).
        path: String,
        /// Its line, from 1; 0 for the file as a whole.
        line: u64,
        /// What went wrong.
        reason: String,
    },
}
