//! Packet storage for trawl: every packet kept as long as the disk allows, any time window
//! retrievable in seconds (M³Omon's packet dumper and its offline packet loop).
//!
//! Writing: a [`Dumper`] takes packet records (from a ring listener or a capture file) and
//! writes nanosecond pcap *segments* under `DIR/YYYY-MM-DD/HH/`, in large page-aligned blocks
//! (O_DIRECT where the filesystem takes it) handed to an I/O thread, rotating by size, by time
//! and at every hour boundary. Each closed segment gets a sidecar index (`.idx`): time range and
//! an entry per chunk of packets with its offset, time range and the hashed addresses and ports
//! in it, so that time- and host-filtered retrieval reads only what it needs. A [`Retention`]
//! thread deletes the oldest segments to keep a disk budget and a maximum age; the optional
//! per-connection cutoff keeps only the first bytes of each flow. A segment left open by a crash
//! is cut back to its last complete record and indexed the next time its stream starts.
//!
//! Reading: [`PacketStore`] selects segments by time range and interface and [`PacketStore::read`]
//! calls back with every stored packet in time order that passes a BPF filter.
//!
//! Formats: `docs/specs/packet-store.md`.
#![deny(missing_docs)]
// Unsafe code is confined to the kernel interfaces in `sys.rs` (ioprio, fadvise, statvfs).
#![deny(unsafe_code)]

mod block;
mod capture_out;
mod cutoff;
mod dumper;
mod error;
mod index;
mod items;
mod layout;
mod pcapfile;
mod reader;
mod repair;
mod retention;
mod sys;
mod terms;

pub use capture_out::{choose_pcapng, mixed_list, CaptureWriter};
pub use cutoff::CutoffStats;
pub use dumper::{Dumper, DumperConfig, DumperStats, StreamId, MAX_PCAP_TS};
pub use error::Error;
pub use index::{Chunk, SegmentIndex};
pub use layout::{list_segments, SegmentName, StoredSegment};
pub use reader::{PacketStore, ReadStats, Selection, StoreSpan, StoredPacket};
pub use repair::{repair_segment, RepairReport};
pub use retention::{Budget, Retention, RetentionConfig, RetentionHandle, RetentionStats};
pub use sys::{set_cpu_nice, set_io_priority, IoPriority};
pub use terms::required_items;
