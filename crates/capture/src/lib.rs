//! Packet sources for trawl.
//!
//! A [`PacketSource`] turns an interface or a file into [`Batch`]es of [`PacketRecord`]s, each
//! with a nanosecond timestamp, caplen, wire length, interface index and direction. Batches
//! borrow the source's buffer, so nothing is copied before aggregation and nothing is allocated
//! per packet.
//!
//! [`FileSource`] reads pcap (µs/ns, both byte orders), pcapng, HPCAP raw, and gzip- or
//! zstd-compressed variants of them, detected from their first bytes.
//!
//! ```no_run
//! use trawl_capture::{FileSource, PacketSource};
//! let mut src = FileSource::open("trace.pcap")?;
//! while let Some(batch) = src.next_batch()? {
//!     for pkt in batch.iter() {
//!         println!("{} {} bytes", pkt.ts_ns, pkt.wire_len);
//!     }
//! }
//! # Ok::<(), trawl_capture::Error>(())
//! ```
// Unsafe code is confined to the kernel interface of live capture (`live/sys.rs`).
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod error;
mod file;
#[cfg(target_os = "linux")]
pub mod live;
mod merge;
mod record;
mod write;

pub use error::{Error, ErrorKind};
pub use file::{FileFormat, FileSource, FileSourceConfig, SharedBytes};
pub use merge::{name_unnamed, MergedFile, MergedFiles};
pub use record::{
    reuse_records, Batch, Direction, Interface, LinkType, PacketRecord, RecordMeta, TimestampNs,
};
pub use write::{pcap_file_header, pcap_record_header, PcapWriter, PcapngWriter};

/// libpcap's largest snapshot length (`MAXIMUM_SNAPLEN`): the default snap length of live
/// capture, the largest caplen a file record may have for ordinary link types, the snap length
/// filters are compiled for (so `greater`/`less` see whole packets) and written into pcap
/// headers. The one definition every crate uses.
pub const MAX_SNAPLEN: u32 = 262_144;

/// Counters every source keeps. Monotonic over the life of the source.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SourceStats {
    /// Records delivered in batches.
    pub records: u64,
    /// Captured bytes delivered (sum of caplen).
    pub captured_bytes: u64,
    /// Wire bytes of the delivered records (sum of wire length).
    pub wire_bytes: u64,
    /// Records with caplen < wire length (cut by a snaplen).
    pub truncated_records: u64,
    /// Input errors that ended or skipped part of the input (file corrupt, truncated tail).
    pub errors: u64,
    /// Blocks skipped because trawl does not use them (pcapng blocks of unknown or ignored type).
    pub skipped_blocks: u64,
}

impl SourceStats {
    /// Adds another source's counters (several files read as one input).
    pub fn add(&mut self, s: &SourceStats) {
        self.records += s.records;
        self.captured_bytes += s.captured_bytes;
        self.wire_bytes += s.wire_bytes;
        self.truncated_records += s.truncated_records;
        self.errors += s.errors;
        self.skipped_blocks += s.skipped_blocks;
    }
}

/// A producer of packet batches.
///
/// Contract: `next_batch` returns `Ok(Some(batch))` with at least one record while input
/// remains, `Ok(None)` at the end. When the input turns out to be broken, the source first
/// delivers every record before the damage, then returns `Err` once (naming file, offset and
/// field), and `Ok(None)` from then on. Live sources may return an empty batch on a timeout.
pub trait PacketSource {
    /// The next batch, borrowing the source until the following call.
    fn next_batch(&mut self) -> Result<Option<Batch<'_>>, Error>;

    /// Interfaces seen so far; records' `iface` fields index this table.
    fn interfaces(&self) -> &[Interface];

    /// Counters so far.
    fn stats(&self) -> SourceStats;
}
