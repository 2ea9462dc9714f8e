use std::io;
use std::path::PathBuf;

/// Errors of the packet store. Every variant names the file (and offset or field where one
/// applies), so a message alone says what to look at.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An I/O call failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
    /// A segment or index does not hold what its format says.
    #[error("{path}: offset {offset}: {field}: {detail}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Byte offset of the bad field.
        offset: u64,
        /// The field.
        field: &'static str,
        /// What is wrong with it.
        detail: String,
    },
    /// The filter expression does not compile.
    #[error("filter: {0}")]
    Filter(#[from] trawl_bpf::Error),
    /// A setting is out of range.
    #[error("invalid setting: {0}")]
    Config(String),
}

impl Error {
    pub(crate) fn io(
        path: impl Into<PathBuf>,
        op: &'static str,
    ) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, op, source }
    }
}
