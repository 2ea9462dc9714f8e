//! Errors of the store.
use std::path::{Path, PathBuf};

/// What went wrong in the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or directory of the database could not be read, written, synced or renamed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// A block could not be encoded or decoded as Parquet (corrupt or foreign file).
    #[error("{}: {message}", path.display())]
    Block {
        /// The block file.
        path: PathBuf,
        /// The Parquet or Arrow library's description.
        message: String,
    },
    /// An interface name that cannot be a path component of the layout.
    #[error("invalid interface name {0:?}: use 1 to 64 characters of A-Z a-z 0-9 . _ -, not starting with a dot")]
    InvalidIface(String),
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn block(path: &Path, e: impl std::fmt::Display) -> Error {
        Error::Block {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }
}

/// Result with the store's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
