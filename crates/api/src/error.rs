//! The errors of starting the API.
use std::path::PathBuf;

/// Why the API could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting is wrong (an address that does not parse, a non-loopback address without a
    /// token, a TLS certificate without its key).
    #[error("{0}")]
    Config(String),
    /// A file named by a setting (token, certificate, key) could not be read or parsed.
    #[error("{path}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// The listening socket could not be made (address in use, not allowed).
    #[error("cannot listen on {addr}")]
    Listen {
        /// The address.
        addr: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The runtime's threads could not start.
    #[error("cannot start the API's threads")]
    Runtime(#[source] std::io::Error),
}
