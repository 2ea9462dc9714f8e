//! The ring's memory layout, shared by every process that maps it. `docs/specs/ring.md` is the
//! contract; the `const` assertions at the bottom pin the offsets it documents.
//!
//! Every field of the header is an atomic, so a `&Header` over memory that another process
//! writes concurrently is sound: atomics are valid for any bit pattern and allow shared
//! mutation. Record bytes in the data area are plain memory; who may touch which bytes when is
//! the protocol described in the crate documentation.
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8};

/// `TRAWLRNG` in memory order.
pub(crate) const MAGIC: u64 = u64::from_ne_bytes(*b"TRAWLRNG");
/// Layout version; bumped on any incompatible change.
pub(crate) const VERSION: u32 = 1;
/// Listener slots in the header.
pub(crate) const SLOTS: usize = 64;
/// Entries of the interface table.
pub(crate) const IFACES: usize = 16;
/// Bytes of an interface name kept in the table.
pub(crate) const IFACE_NAME_LEN: usize = 16;
/// Bytes of a record header.
pub(crate) const REC_HDR: usize = 24;
/// Records start at multiples of this.
pub(crate) const ALIGN: usize = 8;
/// Smallest data area.
pub(crate) const MIN_CAPACITY: usize = 1 << 16;
/// Largest data area (positions must stay below 2^63 for a very long time).
pub(crate) const MAX_CAPACITY: usize = 1 << 40;

/// `Header::flags` bit: the producer closed the ring.
pub(crate) const FLAG_CLOSED: u32 = 1;

/// Slot states.
pub(crate) const SLOT_FREE: u32 = 0;
pub(crate) const SLOT_CLAIMED: u32 = 1;
pub(crate) const SLOT_ACTIVE: u32 = 2;

/// Slot modes.
pub(crate) const MODE_LOSSLESS: u32 = 1;
pub(crate) const MODE_LOSSY: u32 = 2;

/// Cursor bit 0: the listener holds a lease on everything from the cursor on.
pub(crate) const HELD: u64 = 1;
/// Cursor values with bit 63 set are not positions.
pub(crate) const SPECIAL: u64 = 1 << 63;
/// Cursor of a slot whose listener left (or was reclaimed).
pub(crate) const CURSOR_LEFT: u64 = SPECIAL | 2;
/// Cursor of a slot whose listener is joining and has no position yet.
pub(crate) const CURSOR_JOINING: u64 = SPECIAL | 4;

/// Indices into `Header::counters` (producer counters, written by the producer at each
/// publish).
pub(crate) mod counter {
    pub(crate) const RECORDS_WRITTEN: usize = 0;
    pub(crate) const BYTES_WRITTEN: usize = 1;
    pub(crate) const RECORDS_TRUNCATED: usize = 2;
    pub(crate) const DUPLICATES_DROPPED: usize = 3;
    pub(crate) const WAIT_COUNT: usize = 4;
    pub(crate) const WAIT_NS: usize = 5;
    pub(crate) const LOSSY_SKIPS: usize = 6;
    pub(crate) const LISTENERS_RECLAIMED: usize = 7;
    pub(crate) const PUBLISHES: usize = 8;
    pub(crate) const COUNT: usize = 16;
}

/// The fixed header at offset 0 of the mapping.
#[repr(C)]
pub(crate) struct Header {
    // 0: identity, written before the ring is shared, constant afterwards.
    pub magic: AtomicU64,
    pub version: AtomicU32,
    pub header_len: AtomicU32,
    pub capacity: AtomicU64,
    pub max_record: AtomicU32,
    pub slot_count: AtomicU32,
    pub record_header_len: AtomicU32,
    pub producer_pid: AtomicU32,
    pub producer_start: AtomicU64,
    pub flags: AtomicU32,
    pub iface_count: AtomicU32,
    _pad0: [u64; 1],
    // 64: what the producer publishes.
    pub write_pos: AtomicU64,
    pub data_seq: AtomicU32,
    pub data_waiters: AtomicU32,
    /// Seqlock over (`write_pos`, `pub_records`, `pub_bytes`): odd while the producer updates.
    pub pub_seq: AtomicU32,
    _pad1a: u32,
    /// Records before `write_pos` since the ring started.
    pub pub_records: AtomicU64,
    /// Captured bytes of those records.
    pub pub_bytes: AtomicU64,
    _pad1: [u64; 3],
    // 128: the producer waiting for space.
    pub space_seq: AtomicU32,
    pub space_waiters: AtomicU32,
    _pad2: [u64; 7],
    // 192: producer counters.
    pub counters: [AtomicU64; counter::COUNT],
    _pad3: [u64; 24],
    // 512: interface table.
    pub ifaces: [IfaceEntry; IFACES],
    // 1024: listener slots.
    pub slots: [Slot; SLOTS],
}

/// One interface: 32 bytes.
#[repr(C)]
pub(crate) struct IfaceEntry {
    pub link_type: AtomicU32,
    pub snaplen: AtomicU32,
    /// Bytes of `name` in use; 0 means no name.
    pub name_len: AtomicU32,
    _pad: u32,
    pub name: [AtomicU8; IFACE_NAME_LEN],
}

/// One listener slot: three cache lines, two written by the listener, the third by the
/// producer, so that neither side's stores evict the line the other reads on its hot path.
///
/// "cum" counts are totals since the ring started: `cum_records` at a position is the number of
/// records before it. They let either side count the records between two positions without
/// reading the records (see `docs/specs/ring.md`, "Counting what a lossy listener misses").
#[repr(C)]
pub(crate) struct Slot {
    // Listener's line.
    pub state: AtomicU32,
    pub mode: AtomicU32,
    pub pid: AtomicU32,
    _pad0: u32,
    pub pid_start: AtomicU64,
    pub cursor: AtomicU64,
    pub records_read: AtomicU64,
    pub bytes_read: AtomicU64,
    pub missed_records: AtomicU64,
    pub missed_bytes: AtomicU64,
    // Listener's second line: the cum counts at the cursor, valid while the lease is not held,
    // and the producer's `skipped_*` totals they already include.
    pub cum_records: AtomicU64,
    pub cum_bytes: AtomicU64,
    pub seen_skipped_records: AtomicU64,
    pub seen_skipped_bytes: AtomicU64,
    _pad1: [u64; 4],
    // Producer's line.
    /// Seqlock over the request (`want`, `want_records`, `want_bytes`).
    pub req_seq: AtomicU32,
    /// 1 while the producer moves this slot's cursor and updates `skipped_*`.
    pub busy: AtomicU32,
    /// The producer's request: move to this position (see the crate docs).
    pub want: AtomicU64,
    /// cum counts at `want` (meaningful for lossy listeners).
    pub want_records: AtomicU64,
    pub want_bytes: AtomicU64,
    /// Totals of what the producer skipped while the listener did not hold its lease.
    pub skipped_records: AtomicU64,
    pub skipped_bytes: AtomicU64,
    /// cum counts at the position the producer gave a joining listener.
    pub join_records: AtomicU64,
    pub join_bytes: AtomicU64,
}

/// A record header in the data area: 24 bytes, native byte order, at an 8-byte aligned offset.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub(crate) struct RecordHeader {
    /// Bytes from this header to the next record (header + data + padding), a multiple of 8;
    /// 0 marks a wrap: the next record starts at offset 0.
    pub len: u32,
    pub caplen: u32,
    pub ts_ns: u64,
    pub wire_len: u32,
    pub iface: u16,
    pub direction: u8,
    pub flags: u8,
}

/// Record length for `caplen` captured bytes.
#[inline]
pub(crate) const fn record_len(caplen: usize) -> usize {
    (REC_HDR + caplen + ALIGN - 1) & !(ALIGN - 1)
}

/// Header length rounded up to whole pages, so the data area starts page aligned.
pub(crate) fn header_len(page: usize) -> usize {
    std::mem::size_of::<Header>().div_ceil(page) * page
}

const _: () = {
    use std::mem::{offset_of, size_of};
    assert!(size_of::<RecordHeader>() == REC_HDR);
    assert!(size_of::<IfaceEntry>() == 32);
    assert!(size_of::<Slot>() == 192);
    assert!(offset_of!(Slot, cursor) == 24);
    assert!(offset_of!(Slot, cum_records) == 64);
    assert!(offset_of!(Slot, req_seq) == 128);
    assert!(offset_of!(Slot, want) == 136);
    assert!(offset_of!(Slot, join_bytes) == 184);
    assert!(offset_of!(Header, producer_start) == 40);
    assert!(offset_of!(Header, flags) == 48);
    assert!(offset_of!(Header, iface_count) == 52);
    assert!(offset_of!(Header, write_pos) == 64);
    assert!(offset_of!(Header, data_seq) == 72);
    assert!(offset_of!(Header, pub_seq) == 80);
    assert!(offset_of!(Header, pub_records) == 88);
    assert!(offset_of!(Header, pub_bytes) == 96);
    assert!(offset_of!(Header, space_seq) == 128);
    assert!(offset_of!(Header, counters) == 192);
    assert!(offset_of!(Header, ifaces) == 512);
    assert!(offset_of!(Header, slots) == 1024);
    assert!(size_of::<Header>() == 1024 + SLOTS * 192);
    assert!(offset_of!(RecordHeader, ts_ns) == 8);
    assert!(offset_of!(RecordHeader, wire_len) == 16);
    assert!(offset_of!(RecordHeader, iface) == 20);
    assert!(offset_of!(RecordHeader, direction) == 22);
};
