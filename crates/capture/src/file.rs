//! Capture-file sources. (Interface fixed here; the implementation is being written.)
use std::path::Path;

use crate::{Batch, Error, Interface, PacketSource, SourceStats};

/// Container format of a capture file, detected from its magic number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileFormat {
    /// Classic libpcap format, microsecond or nanosecond timestamps, either byte order.
    Pcap,
    /// pcapng, any number of interfaces and sections.
    Pcapng,
    /// HPCAP raw: 12-byte records `u32 sec, u32 nsec, u16 caplen, u16 len`.
    HpcapRaw,
}

/// Settings of a [`FileSource`].
#[derive(Clone, Debug)]
pub struct FileSourceConfig {
    /// Maximum records per batch.
    pub batch_size: usize,
}

impl Default for FileSourceConfig {
    fn default() -> Self {
        FileSourceConfig { batch_size: 256 }
    }
}

/// Reads a capture file (see crate docs for formats).
pub struct FileSource {
    _private: (),
}

impl FileSource {
    /// Opens `path`, detecting the format (and gzip/zstd compression) from its first bytes.
    pub fn open(path: impl AsRef<Path>) -> Result<FileSource, Error> {
        Self::with_config(path, FileSourceConfig::default())
    }

    /// Opens `path` with explicit settings.
    pub fn with_config(
        _path: impl AsRef<Path>,
        _config: FileSourceConfig,
    ) -> Result<FileSource, Error> {
        unimplemented!("file source being written")
    }

    /// The detected container format.
    pub fn format(&self) -> FileFormat {
        unimplemented!()
    }
}

impl PacketSource for FileSource {
    fn next_batch(&mut self) -> Result<Option<Batch<'_>>, Error> {
        unimplemented!()
    }
    fn interfaces(&self) -> &[Interface] {
        unimplemented!()
    }
    fn stats(&self) -> SourceStats {
        unimplemented!()
    }
}
