//! The shared capture ring (HPCAP style): one [`Producer`] writes packet records into a
//! circular buffer, any number of [`Listener`]s (up to 64 at once) read them, each with its own
//! cursor.
//!
//! - A [`Mode::Lossless`] listener (a dumper) holds the producer back: before overwriting bytes
//!   the listener has not read, the producer waits for it.
//! - A [`Mode::Lossy`] listener (a monitoring application) never makes the producer wait for
//!   its *backlog*: the producer moves its cursor ahead and the skipped records and bytes are
//!   counted as missed ([`ListenerStats`]). The only thing a lossy listener can make the producer
//!   wait for is its *lease*, see below.
//!
//! Listeners read per packet ([`Listener::next`], [`Listener::wait`], [`Listener::for_each`]),
//! getting [`trawl_capture::PacketRecord`]s that point straight into the ring, or as a byte
//! stream of whole records ([`Listener::block`], then [`Listener::consume`]) so a block writer
//! can copy large runs at once. The producer writes records one at a time ([`Producer::push`],
//! [`Producer::push_batch`]) and makes them visible a batch at a time ([`Producer::publish`]).
//! [`Producer::close`] ends the stream: listeners drain what is left, then get [`Recv::Closed`].
//!
//! The same code serves rings inside one process ([`Producer::new`]: anonymous memory,
//! listeners from [`Producer::ring`]) and rings shared with other processes
//! ([`Producer::create_shared`]: a file `/dev/shm/trawl-ring-NAME`; clients call
//! [`SharedRing::attach`]). The layout of that file is versioned and specified in
//! `docs/specs/ring.md`.
//!
//! # Leases, and why the zero-copy references are sound
//!
//! Each listener slot has a *cursor*: the position (a byte count since the ring started) of the
//! first record the listener still needs. Bit 0 of the cursor is the *lease* bit. While a
//! listener reads, it holds the lease and its cursor follows it record by record (one release
//! store per record, before the record is handed out): the cursor is the start of the record the
//! application holds, or of the block it holds. The producer writes a byte only when every
//! cursor is at least a whole capacity behind it (as observed by an acquire load that the write
//! follows), so the bytes a listener may be reading are never written while it may read them:
//! the `&[u8]` of a record never aliases a write. The borrow checker keeps the record from
//! outliving the call that gives the lease up (every reading method takes `&mut self`).
//!
//! When the producer needs space held by a lossy listener:
//! - if the lease is not held (the listener is idle or waiting for data), it moves the cursor
//!   forward with a compare-exchange (the listener takes its lease with a compare-exchange on
//!   the same word, so exactly one of them wins) and counts the records passed over as missed;
//! - if the lease is held, it posts a request in the slot (a position, with the record and byte
//!   counts there) and waits. The listener checks for a request before every record; at its
//!   **next call into the ring** it jumps to the requested position and counts what it skipped.
//!   In per-packet reading that is the time the application spends on one record; in block
//!   reading, the time between [`Listener::block`] and [`Listener::consume`].
//!
//! So a lossy listener holds the producer up at most until its next call into the ring, and
//! only when it has fallen a whole ring behind. Missed records are counted exactly, without
//! reading them: the producer keeps checkpoints (published positions with the number of records
//! and bytes before them) and skips listeners only to checkpoints. A listener *process* that
//! dies while the producer waits for it is noticed after [`RingConfig::dead_after`] (1 s) and its
//! slot reclaimed; one that is stopped (SIGSTOP), or a thread that is descheduled, while holding
//! a record is waited for. [`Listener::release`] gives the lease up explicitly.
//!
//! Waiting never burns a core for long: a short spin, then a futex on a word in the mapping
//! (shared, so it works across processes), with a waiter count so that the side that would
//! wake does no system call when nobody sleeps. The producer wakes listeners once per publish.
//!
//! Duplicate removal ([`dedup::Dedup`], HPCAP §4.4) can be put in front of the ring with
//! [`Producer::set_dedup`].
//!
//! ```
//! use std::time::Duration;
//! use trawl_capture::{Direction, Interface, LinkType, RecordMeta};
//! use trawl_ring::{Mode, Producer, Recv, RingConfig};
//!
//! let mut producer = Producer::new(&RingConfig::with_capacity(1 << 20))?;
//! producer.add_interface(&Interface {
//!     link_type: LinkType::ETHERNET,
//!     snaplen: 65535,
//!     name: Some("eth0".into()),
//! })?;
//! let mut listener = producer.ring().listen(Mode::Lossy)?;
//!
//! let meta = RecordMeta { ts_ns: 1, wire_len: 60, ..RecordMeta::default() };
//! producer.push(&meta, &[0xab; 60])?;
//! producer.publish();
//! producer.close();
//!
//! let Recv::Ready(rec) = listener.wait(Duration::from_secs(1))? else { panic!() };
//! assert_eq!((rec.ts_ns, rec.data.len(), rec.link_type), (1, 60, LinkType::ETHERNET));
//! assert!(matches!(listener.next()?, Recv::Closed));
//! # Ok::<(), trawl_ring::Error>(())
//! ```
#![deny(missing_docs)]

pub mod dedup;
mod layout;
mod listener;
mod producer;
mod segment;
mod sys;

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use trawl_capture::{Interface, LinkType};

pub use listener::{Block, BlockRecords, Listener};
pub use producer::Producer;

use layout::{counter, Header, HELD, IFACES, MODE_LOSSY, SLOT_ACTIVE, SPECIAL};
use segment::Segment;

/// How a listener reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Never misses a record: the producer waits for this listener when it falls a ring behind.
    Lossless,
    /// Is skipped ahead when it falls a ring behind; what it misses is counted.
    Lossy,
}

/// The outcome of a read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recv<T> {
    /// A record (or block).
    Ready(T),
    /// Nothing to read now (or before the timeout); more may come.
    Empty,
    /// The producer closed the ring and this listener has read everything: nothing will come.
    Closed,
}

/// Errors of the ring.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Creating, opening or mapping the ring's memory or file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file (or `<anonymous mapping>`).
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A shared ring name that is empty, too long, or has characters other than ASCII letters,
    /// digits, `-`, `_` and `.`.
    #[error("invalid ring name {name:?}: use 1-200 of [A-Za-z0-9._-]")]
    InvalidName {
        /// The name given.
        name: String,
    },
    /// A [`RingConfig`] value out of range.
    #[error("invalid ring configuration: {0}")]
    InvalidConfig(&'static str),
    /// The file is not a ring this build can read (wrong magic, version, or sizes).
    #[error("{}: not a trawl ring: {detail}", path.display())]
    NotARing {
        /// The file.
        path: PathBuf,
        /// What did not match.
        detail: String,
    },
    /// Creating a shared ring whose file belongs to a producer that is still running.
    #[error("{}: ring in use by producer pid {pid}", path.display())]
    InUse {
        /// The file.
        path: PathBuf,
        /// The running producer (0 if unknown: another producer won a race for the name).
        pid: u32,
    },
    /// Joining a ring whose listener slots are all taken.
    #[error("all {slots} listener slots of the ring are taken")]
    NoFreeSlot {
        /// Slots in the ring.
        slots: usize,
    },
    /// Adding an interface to a full interface table.
    #[error("the ring's interface table is full ({max} entries)")]
    TooManyInterfaces {
        /// Entries in the table.
        max: usize,
    },
    /// Pushing a record whose interface index is not in the ring's interface table.
    #[error("record names interface {iface}, which is not in the ring's interface table")]
    UnknownInterface {
        /// The index given.
        iface: u16,
    },
    /// Pushing after [`Producer::close`].
    #[error("the ring is closed")]
    Closed,
    /// A listener found a malformed record header: someone wrote over the shared data area.
    #[error("corrupt ring at position {position}: {detail}")]
    Corrupt {
        /// Position of the bad record.
        position: u64,
        /// What was wrong.
        detail: &'static str,
    },
    /// The producer reclaimed this listener's slot (it judged the listener's process dead,
    /// which happens when listener and producer are in different pid namespaces).
    #[error("listener slot {slot} was reclaimed by the producer")]
    Evicted {
        /// The slot.
        slot: usize,
    },
    /// The producer process is gone without closing the ring.
    #[error("ring producer (pid {pid}) died without closing the ring")]
    ProducerGone {
        /// The producer's pid.
        pid: u32,
    },
}

/// Settings of a new ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Bytes of the data area: a power of two, 64 KiB to 1 TiB.
    pub capacity: usize,
    /// Largest record in bytes (24-byte header + captured bytes + padding); longer packets are
    /// truncated. Default: a quarter of the capacity, at most 256 KiB + 24 bytes. At most a
    /// quarter of the capacity.
    pub max_record: Option<usize>,
    /// How far past what it needs the producer moves a lossy listener that is behind (bigger:
    /// fewer, larger skips), and how much progress it waits for from a lossless one before it
    /// is woken (bigger: fewer wake-ups). Default: capacity / 16.
    pub slack: Option<usize>,
    /// How long a listener in another process may block the producer before the producer
    /// checks whether that process is still alive (and then again at this interval).
    pub dead_after: Duration,
}

impl Default for RingConfig {
    fn default() -> Self {
        Self::with_capacity(64 << 20)
    }
}

impl RingConfig {
    /// Defaults with a data area of `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        RingConfig {
            capacity,
            max_record: None,
            slack: None,
            dead_after: Duration::from_secs(1),
        }
    }

    /// Checks the values; returns capacity, max record and header length.
    fn validate(&self) -> Result<(usize, u32, usize), Error> {
        let cap = self.capacity;
        if !cap.is_power_of_two() || !(layout::MIN_CAPACITY..=layout::MAX_CAPACITY).contains(&cap) {
            return Err(Error::InvalidConfig(
                "capacity must be a power of two from 64 KiB to 1 TiB",
            ));
        }
        let max_record = self
            .max_record
            .unwrap_or((cap / 4).min((256 << 10) + layout::REC_HDR));
        let max_record = max_record & !(layout::ALIGN - 1);
        if max_record < layout::REC_HDR + 8 || max_record > cap / 4 {
            return Err(Error::InvalidConfig(
                "max_record must be at least 32 bytes and at most capacity / 4",
            ));
        }
        Ok((cap, max_record as u32, layout::header_len(sys::page_size())))
    }
}

/// The producer's counters. Monotonic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProducerStats {
    /// Records written into the ring.
    pub records_written: u64,
    /// Captured bytes of those records.
    pub bytes_written: u64,
    /// Records cut to the ring's largest record.
    pub records_truncated: u64,
    /// Records the duplicate filter dropped.
    pub duplicates_dropped: u64,
    /// Times the producer had to wait for a listener (a lossless one behind, or a lossy one's
    /// lease).
    pub wait_count: u64,
    /// Nanoseconds spent in those waits.
    pub wait_ns: u64,
    /// Times the producer moved an idle lossy listener's cursor over its backlog.
    pub lossy_skips: u64,
    /// Slots freed because their listener's process was gone.
    pub listeners_reclaimed: u64,
    /// Publishes that made new records visible.
    pub publishes: u64,
}

impl ProducerStats {
    /// Adds another producer's counters (rings of parallel capture workers).
    pub fn merge(&mut self, other: &ProducerStats) {
        self.records_written += other.records_written;
        self.bytes_written += other.bytes_written;
        self.records_truncated += other.records_truncated;
        self.duplicates_dropped += other.duplicates_dropped;
        self.wait_count += other.wait_count;
        self.wait_ns += other.wait_ns;
        self.lossy_skips += other.lossy_skips;
        self.listeners_reclaimed += other.listeners_reclaimed;
        self.publishes += other.publishes;
    }

    fn from_array(c: &[u64; counter::COUNT]) -> Self {
        ProducerStats {
            records_written: c[counter::RECORDS_WRITTEN],
            bytes_written: c[counter::BYTES_WRITTEN],
            records_truncated: c[counter::RECORDS_TRUNCATED],
            duplicates_dropped: c[counter::DUPLICATES_DROPPED],
            wait_count: c[counter::WAIT_COUNT],
            wait_ns: c[counter::WAIT_NS],
            lossy_skips: c[counter::LOSSY_SKIPS],
            listeners_reclaimed: c[counter::LISTENERS_RECLAIMED],
            publishes: c[counter::PUBLISHES],
        }
    }
}

/// A listener's counters. For a listener that has read to the end of a closed ring,
/// `records_read + records_missed` is the number of records published after it joined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ListenerStats {
    /// Records read.
    pub records_read: u64,
    /// Captured bytes of those records.
    pub bytes_read: u64,
    /// Records skipped because the listener (lossy) fell a ring behind.
    pub records_missed: u64,
    /// Captured bytes of those records.
    pub bytes_missed: u64,
}

/// One active listener slot as the producer (or any process mapping the ring) sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListenerInfo {
    /// Slot index.
    pub slot: usize,
    /// Lossless or lossy.
    pub mode: Mode,
    /// The listener's process.
    pub pid: u32,
    /// Its cursor (as last reported; a reading listener reports once per batch).
    pub position: u64,
    /// Published bytes beyond its cursor.
    pub backlog: u64,
    /// Its counters as last reported.
    pub stats: ListenerStats,
}

/// A handle on a ring (in-process or shared), from which listeners join. Cheap to clone; `Send`
/// and `Sync`.
#[derive(Clone)]
pub struct Ring {
    seg: Arc<Segment>,
}

impl Ring {
    /// Joins as a new listener, starting at the current write position (it sees records
    /// published from now on).
    pub fn listen(&self, mode: Mode) -> Result<Listener, Error> {
        Listener::join(self.seg.clone(), mode)
    }

    /// Bytes of the data area.
    pub fn capacity(&self) -> usize {
        self.seg.cap_usize()
    }

    /// Largest record in bytes (header included).
    pub fn max_record(&self) -> usize {
        self.seg.max_record as usize
    }

    /// The published write position (bytes since the ring started).
    pub fn write_position(&self) -> u64 {
        self.seg.header().write_pos.load(Ordering::Acquire)
    }

    /// Whether the producer closed the ring.
    pub fn is_closed(&self) -> bool {
        self.seg.header().flags.load(Ordering::Acquire) & layout::FLAG_CLOSED != 0
    }

    /// The producer's pid.
    pub fn producer_pid(&self) -> u32 {
        self.seg.header().producer_pid.load(Ordering::Relaxed)
    }

    /// The file of a shared ring.
    pub fn path(&self) -> Option<&Path> {
        self.seg.path.as_deref()
    }

    /// The producer's counters as of its last publish.
    pub fn stats(&self) -> ProducerStats {
        let mut c = [0; counter::COUNT];
        for (v, a) in c.iter_mut().zip(self.seg.header().counters.iter()) {
            *v = a.load(Ordering::Relaxed);
        }
        ProducerStats::from_array(&c)
    }

    /// Every active listener slot with its position and counters.
    pub fn listeners(&self) -> Vec<ListenerInfo> {
        let h = self.seg.header();
        let end = h.write_pos.load(Ordering::Acquire);
        let mut out = Vec::new();
        for (i, s) in h.slots.iter().enumerate() {
            if s.state.load(Ordering::Acquire) != SLOT_ACTIVE {
                continue;
            }
            let c = s.cursor.load(Ordering::Acquire);
            if c & SPECIAL != 0 {
                continue;
            }
            let position = c & !HELD;
            out.push(ListenerInfo {
                slot: i,
                mode: if s.mode.load(Ordering::Relaxed) == MODE_LOSSY {
                    Mode::Lossy
                } else {
                    Mode::Lossless
                },
                pid: s.pid.load(Ordering::Relaxed),
                position,
                backlog: end.saturating_sub(position),
                stats: ListenerStats {
                    records_read: s.records_read.load(Ordering::Relaxed),
                    bytes_read: s.bytes_read.load(Ordering::Relaxed),
                    records_missed: s.missed_records.load(Ordering::Relaxed)
                        + s.skipped_records.load(Ordering::Relaxed),
                    bytes_missed: s.missed_bytes.load(Ordering::Relaxed)
                        + s.skipped_bytes.load(Ordering::Relaxed),
                },
            });
        }
        out
    }

    /// The ring's interface table as far as the producer filled it.
    pub fn interfaces(&self) -> Vec<Interface> {
        read_interfaces(self.seg.header())
    }
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring")
            .field("capacity", &self.seg.cap)
            .field("path", &self.seg.path)
            .field("write_position", &self.write_position())
            .finish()
    }
}

/// Rings shared between processes through files under `/dev/shm`.
#[derive(Clone, Copy, Debug)]
pub struct SharedRing;

impl SharedRing {
    /// The file of ring `name`: `/dev/shm/trawl-ring-NAME`.
    pub fn path(name: &str) -> Result<PathBuf, Error> {
        let ok = !name.is_empty()
            && name.len() <= 200
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && name != "."
            && name != "..";
        if !ok {
            return Err(Error::InvalidName {
                name: name.to_string(),
            });
        }
        Ok(PathBuf::from(format!("/dev/shm/trawl-ring-{name}")))
    }

    /// Maps the shared ring `name` (created by [`Producer::create_shared`]).
    pub fn open(name: &str) -> Result<Ring, Error> {
        Self::open_at(&Self::path(name)?)
    }

    /// Maps the shared ring in file `path`.
    pub fn open_at(path: &Path) -> Result<Ring, Error> {
        Ok(Ring {
            seg: Arc::new(Segment::open(path)?),
        })
    }

    /// Maps the shared ring `name` and joins it as a listener.
    pub fn attach(name: &str, mode: Mode) -> Result<Listener, Error> {
        Self::open(name)?.listen(mode)
    }
}

/// Reads the interface table.
fn read_interfaces(h: &Header) -> Vec<Interface> {
    let n = (h.iface_count.load(Ordering::Acquire) as usize).min(IFACES);
    h.ifaces[..n]
        .iter()
        .map(|e| {
            let len = (e.name_len.load(Ordering::Relaxed) as usize).min(layout::IFACE_NAME_LEN);
            let name: Vec<u8> = e.name[..len]
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect();
            Interface {
                link_type: LinkType(e.link_type.load(Ordering::Relaxed) as u16),
                snaplen: e.snaplen.load(Ordering::Relaxed),
                name: (len > 0).then(|| String::from_utf8_lossy(&name).into_owned()),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_cross_threads() {
        fn send<T: Send>() {}
        fn sync<T: Sync>() {}
        send::<Producer>();
        send::<Listener>();
        send::<Ring>();
        sync::<Ring>();
    }
}
