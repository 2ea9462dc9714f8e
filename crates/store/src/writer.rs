//! Writing blocks: rows buffered per (interface, 5-minute interval), sorted, encoded as
//! Parquet and published atomically.
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::hash::Hash;
use std::io::BufWriter;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow_array::types::Int32Type;
use arrow_array::{
    Array, ArrayRef, DictionaryArray, FixedSizeBinaryArray, Float64Array, Int32Array, RecordBatch,
    StringArray, UInt16Array, UInt32Array, UInt64Array, UInt8Array,
};
use arrow_buffer::{Buffer, OffsetBuffer, ScalarBuffer};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use trawl_flow::{FlowRecord, ProtoName};

use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::layout::{block_file_name, block_start, day_dir, valid_iface, BlockRef, Date, BLOCK_NS};
use crate::schema::{
    col, schema, StoredFlow, StoredRtt, DICTIONARY_COLUMNS, RTT_NS_COLUMNS, STORE_VERSION,
    U64_COLUMNS, VERSION_KEY,
};

/// Compression of block pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Zstandard at the given level (1..=22).
    Zstd(i32),
    /// LZ4 (Parquet `LZ4_RAW`).
    Lz4,
    /// No compression.
    None,
}

impl Codec {
    /// Parses `zstd`, `zstd:LEVEL`, `lz4` or `none`.
    pub fn parse(s: &str) -> Option<Codec> {
        match s {
            "zstd" => Some(Codec::Zstd(3)),
            "lz4" => Some(Codec::Lz4),
            "none" => Some(Codec::None),
            _ => {
                let level: i32 = s.strip_prefix("zstd:")?.parse().ok()?;
                (1..=22).contains(&level).then_some(Codec::Zstd(level))
            }
        }
    }
}

/// Settings of the writer.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Compression of the pages of the key columns (addresses, ports, protocol, flags, end
    /// reason); counters and times are bit-packed and not compressed further. Default LZ4:
    /// queries decode a third faster than with zstd and ingest stays above a million rows per
    /// second per core, for about a fifth more disk (`bench/RESULTS.md`).
    pub codec: Codec,
    /// Rows per Parquet row group (the unit of statistics pruning). Default 65,536.
    pub row_group_rows: usize,
    /// How long after the end of an interval its block stays open for records still to come
    /// (records leave the flow meter up to the idle timeout plus the TCP linger after their
    /// last packet). Default 40 s.
    pub grace_ns: u64,
    /// Most rows held in memory across all open blocks; past it the oldest block is written
    /// early (later rows of its interval go to a further part). Default 4 Mi rows (~400 MB).
    pub max_buffered_rows: usize,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            codec: Codec::Lz4,
            row_group_rows: 65_536,
            grace_ns: 40 * 1_000_000_000,
            max_buffered_rows: 4 << 20,
        }
    }
}

/// Counters of an [`Ingest`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IngestStats {
    /// Records given to the writer.
    pub records: u64,
    /// Records whose first and last packet lie in different block intervals (possible only for
    /// records not split by the meter, e.g. from a foreign exporter): stored in the block of
    /// their first packet.
    pub records_spanning: u64,
    /// Rows written.
    pub rows: u64,
    /// Block files written.
    pub blocks: u64,
    /// Of those, files that are a further part of an interval already on disk.
    pub extra_parts: u64,
    /// Bytes written (final file sizes).
    pub bytes: u64,
    /// Recent parts written ([`Ingest::publish_recent`]).
    pub recent_parts: u64,
}

impl IngestStats {
    /// Adds another writer's counters.
    pub fn merge(&mut self, o: &IngestStats) {
        self.records += o.records;
        self.records_spanning += o.records_spanning;
        self.rows += o.rows;
        self.blocks += o.blocks;
        self.extra_parts += o.extra_parts;
        self.bytes += o.bytes;
        self.recent_parts += o.recent_parts;
    }
}

/// An interface registered with [`Ingest::iface`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IfaceId(u32);

/// The store's entry point for every producer of flow records (capture files, the live
/// pipeline, a collector): records are pushed as they leave their meter, and a block is
/// written once the producer's clock has passed the end of its interval plus the grace time.
///
/// ```no_run
/// # fn demo(records: &[trawl_flow::FlowRecord<'_>], now_ns: u64) -> trawl_store::Result<()> {
/// let mut ingest = trawl_store::Ingest::open("/var/lib/trawl/db", trawl_store::StoreConfig::default())?;
/// let eth0 = ingest.iface("eth0")?;
/// for r in records {
///     ingest.push(eth0, r)?;
/// }
/// ingest.advance(now_ns)?; // writes the blocks that can no longer receive records
/// let stats = ingest.finish()?; // writes the rest
/// # Ok(()) }
/// ```
pub struct Ingest {
    db: PathBuf,
    config: StoreConfig,
    props: WriterProperties,
    ifaces: Vec<String>,
    open: BTreeMap<(u64, IfaceId), Vec<StoredFlow>>,
    /// Row buffers of written blocks, emptied, for the next blocks to fill.
    spare: Vec<Vec<StoredFlow>>,
    scratch: BlockScratch,
    /// Rows of the last block written: the capacity a new block's buffer starts with.
    rows_hint: usize,
    buffered: usize,
    stats: IngestStats,
    /// Open blocks with recent parts on disk.
    recent: BTreeMap<(u64, IfaceId), Recent>,
    /// Recent parts whose block is written, to remove once no query can still be reading
    /// them (when they were covered).
    covered: Vec<(Instant, Vec<PathBuf>)>,
}

/// The recent parts of an open block ([`crate::recent`]).
struct Recent {
    token: u64,
    /// Rows of the block in its parts (the first rows of its buffer).
    published: usize,
    parts: Vec<PathBuf>,
}

/// How long recent parts stay after their block is written: longer than a query takes
/// between listing the database and reading what it listed.
pub const RECENT_KEEP: Duration = Duration::from_secs(600);

/// Row buffers kept for reuse at most (one per interface of a busy probe is plenty).
const SPARE_ROW_BUFFERS: usize = 4;

impl Ingest {
    /// Opens (creating it if needed) the database directory `db` for writing.
    pub fn open(db: impl AsRef<Path>, config: StoreConfig) -> Result<Ingest> {
        let db = db.as_ref().to_path_buf();
        fs::create_dir_all(&db).map_err(|e| Error::io(&db, e))?;
        Ok(Ingest {
            props: config.writer_properties(),
            db,
            config,
            ifaces: Vec::new(),
            open: BTreeMap::new(),
            spare: Vec::new(),
            scratch: BlockScratch::default(),
            rows_hint: 0,
            buffered: 0,
            stats: IngestStats::default(),
            recent: BTreeMap::new(),
            covered: Vec::new(),
        })
    }

    /// The id of interface `name` (registered on first use).
    pub fn iface(&mut self, name: &str) -> Result<IfaceId> {
        if let Some(i) = self.ifaces.iter().position(|n| n == name) {
            return Ok(IfaceId(i as u32));
        }
        if !valid_iface(name) {
            return Err(Error::InvalidIface(name.to_string()));
        }
        self.ifaces.push(name.to_string());
        Ok(IfaceId(self.ifaces.len() as u32 - 1))
    }

    /// The blocks held in memory, not yet written: (interval start, interface). A block not
    /// listed any more was written (fsynced and published), so whatever fed it is durable:
    /// the Kafka consumer commits its offsets only then.
    pub fn open_blocks(&self) -> impl Iterator<Item = (u64, IfaceId)> + '_ {
        self.open.keys().copied()
    }

    /// Counters so far.
    pub fn stats(&self) -> &IngestStats {
        &self.stats
    }

    /// Adds a flow record of interface `iface`. Records should hold the packets of one block
    /// interval (a meter with `FlowConfig::interval_align_ns = BLOCK_NS` guarantees it); others
    /// are stored in the block of their first packet and counted in `records_spanning`.
    pub fn push(&mut self, iface: IfaceId, record: &FlowRecord<'_>) -> Result<()> {
        self.push_row(iface, StoredFlow::from(record))
    }

    /// Adds a row (see [`Ingest::push`]).
    pub fn push_row(&mut self, iface: IfaceId, row: StoredFlow) -> Result<()> {
        self.stats.records += 1;
        let start = block_start(row.first_ns);
        if block_start(row.last_ns) != start {
            self.stats.records_spanning += 1;
        }
        let (spare, hint) = (&mut self.spare, self.rows_hint);
        let rows = self.open.entry((start, iface)).or_insert_with(|| {
            // Room for a block like the last one: growing by doubling touches twice the
            // memory and copies the rows again.
            let mut rows = spare.pop().unwrap_or_default();
            room(&mut rows, hint);
            rows
        });
        if rows.len() == rows.capacity() {
            // Larger than the last block: grow by about a quarter (and at least 1024 rows),
            // not double.
            let n = rows.len() + rows.len() / 8 + 1024;
            room(rows, n);
        }
        rows.push(row);
        self.buffered += 1;
        if self.buffered > self.config.max_buffered_rows {
            if let Some((&key, _)) = self.open.iter().next() {
                self.write_open(key)?;
            }
        }
        Ok(())
    }

    /// The producer's clock reached `now_ns`: writes every block whose interval ended more than
    /// the grace time ago.
    pub fn advance(&mut self, now_ns: u64) -> Result<()> {
        while let Some((&key, _)) = self.open.iter().next() {
            if key.0 + BLOCK_NS + self.config.grace_ns > now_ns {
                break;
            }
            self.write_open(key)?;
        }
        Ok(())
    }

    /// Writes every open block and returns the counters. The recent parts the blocks cover
    /// are removed at once: the writer is going away.
    pub fn finish(mut self) -> Result<IngestStats> {
        self.flush()?;
        self.remove_covered(None);
        Ok(self.stats)
    }

    /// Publishes the rows of the open blocks that came since the last call as recent parts
    /// (one file per open block that has new rows), so that queries see them before their
    /// block is written; removes the recent parts covered more than `RECENT_KEEP` (10 minutes) ago.
    /// A live writer calls it every few seconds.
    pub fn publish_recent(&mut self) -> Result<()> {
        self.remove_covered(Some(RECENT_KEEP));
        for (&key, rows) in &self.open {
            let r = self.recent.entry(key).or_insert_with(|| Recent {
                token: crate::recent::new_token(),
                published: 0,
                parts: Vec::new(),
            });
            if rows.len() <= r.published {
                continue;
            }
            let mut new_rows = rows[r.published..].to_vec();
            let iface = &self.ifaces[key.1 .0 as usize];
            let name = crate::recent::recent_file_name(key.0, r.token, r.parts.len() as u32);
            let path = write_recent(
                &self.db,
                iface,
                key.0,
                &name,
                &mut new_rows,
                &self.props,
                &mut self.scratch,
            )?;
            r.published = rows.len();
            r.parts.push(path);
            self.stats.recent_parts += 1;
        }
        Ok(())
    }

    /// Removes the covered recent parts older than `age` (all with `None`).
    fn remove_covered(&mut self, age: Option<Duration>) {
        let now = Instant::now();
        self.covered.retain(|(at, parts)| {
            if age.is_some_and(|a| now.duration_since(*at) < a) {
                return true;
            }
            for p in parts {
                // Gone already (retention took its day): nothing to do.
                let _ = fs::remove_file(p);
            }
            false
        });
    }

    /// Writes every open block now (the writer stays usable).
    pub fn flush(&mut self) -> Result<()> {
        while let Some((&key, _)) = self.open.iter().next() {
            self.write_open(key)?;
        }
        Ok(())
    }

    fn write_open(&mut self, key: (u64, IfaceId)) -> Result<()> {
        let Some(mut rows) = self.open.remove(&key) else {
            return Ok(());
        };
        self.buffered -= rows.len();
        let recent = self.recent.remove(&key);
        let iface = &self.ifaces[key.1 .0 as usize];
        let block = write_block_with(
            &self.db,
            iface,
            key.0,
            &mut rows,
            &self.props,
            &mut self.scratch,
            recent.as_ref().map(|r| r.token),
        )?;
        if let Some(r) = recent.filter(|r| !r.parts.is_empty()) {
            self.covered.push((Instant::now(), r.parts));
        }
        self.stats.rows += rows.len() as u64;
        self.rows_hint = rows.len().min(self.config.max_buffered_rows);
        if self.spare.len() < SPARE_ROW_BUFFERS {
            rows.clear();
            self.spare.push(rows);
        }
        self.stats.blocks += 1;
        self.stats.extra_parts += u64::from(block.part > 0);
        self.stats.bytes += block.bytes;
        Ok(())
    }
}

impl StoreConfig {
    /// The Parquet writer settings of these blocks (for [`write_block`]).
    pub fn writer_properties(&self) -> WriterProperties {
        writer_properties(self)
    }
}

fn writer_properties(config: &StoreConfig) -> WriterProperties {
    let compression = match config.codec {
        Codec::Zstd(l) => Compression::ZSTD(ZstdLevel::try_new(l).unwrap_or_default()),
        Codec::Lz4 => Compression::LZ4_RAW,
        Codec::None => Compression::UNCOMPRESSED,
    };
    let mut b = WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(config.row_group_rows.max(1)))
        // Row-group min/max for pruning; page statistics would cost space without a reader
        // that uses them here.
        .set_statistics_enabled(EnabledStatistics::Chunk)
        // Counters and times are near-unique: a dictionary would only be built and dropped.
        .set_dictionary_enabled(false)
        // An IPv6-heavy row group of 64 Ki rows can hold ~2.5 MB of distinct address text;
        // the 1 MB default would fall back to plain pages and lose the dictionary.
        .set_dictionary_page_size_limit(8 << 20)
        .set_created_by(format!("trawl {}", env!("CARGO_PKG_VERSION")));
    for c in DICTIONARY_COLUMNS {
        b = b.set_column_dictionary_enabled(ColumnPath::from(c), true);
    }
    // Bit-packed deltas take these near-random counters to about their bit width, smaller
    // than zstd over plain 8-byte values, and a general-purpose codec on top would only cost
    // decompression time at query time (measured: bytes per row unchanged).
    // Counter and time columns: stored as bit-packed deltas, uncompressed.
    for c in U64_COLUMNS.into_iter().chain(RTT_NS_COLUMNS) {
        b = b
            .set_column_encoding(ColumnPath::from(c), Encoding::DELTA_BINARY_PACKED)
            .set_column_compression(ColumnPath::from(c), Compression::UNCOMPRESSED);
    }
    // Hash digests: incompressible and useless as min/max, so plain, raw and without
    // statistics (20 bytes a row).
    b.set_column_encoding(ColumnPath::from(col::COMMUNITY_ID), Encoding::PLAIN)
        .set_column_compression(
            ColumnPath::from(col::COMMUNITY_ID),
            Compression::UNCOMPRESSED,
        )
        .set_column_statistics_enabled(ColumnPath::from(col::COMMUNITY_ID), EnabledStatistics::None)
        .build()
}

/// Interns values of one dictionary column of a block. Rows arrive sorted by addresses, so
/// a value often repeats the previous row's: that one is checked before the index.
struct DictBuilder<T, I = FxHashMap<T, i32>> {
    index: I,
    values: Vec<T>,
    keys: Vec<i32>,
    /// The previous row's value and its key.
    last: Option<(T, i32)>,
}

/// Maps a column's distinct values to their dictionary keys.
trait DictIndex<T>: Default {
    fn clear(&mut self);
    /// The key of `v`, or `next` after recording it as the key of `v`.
    fn key_or_insert(&mut self, v: T, next: i32) -> i32;
}

impl<T: Hash + Eq> DictIndex<T> for FxHashMap<T, i32> {
    fn clear(&mut self) {
        std::collections::HashMap::clear(self);
    }
    #[inline]
    fn key_or_insert(&mut self, v: T, next: i32) -> i32 {
        *self.entry(v).or_insert(next)
    }
}

/// The index of a byte-valued column (protocol, end reason): a table of all 256 values.
struct ByteIndex([i32; 256]);

impl Default for ByteIndex {
    fn default() -> Self {
        ByteIndex([-1; 256])
    }
}

impl DictIndex<u8> for ByteIndex {
    fn clear(&mut self) {
        self.0 = [-1; 256];
    }
    #[inline]
    fn key_or_insert(&mut self, v: u8, next: i32) -> i32 {
        let k = &mut self.0[usize::from(v)];
        if *k < 0 {
            *k = next;
        }
        *k
    }
}

impl<T, I: Default> Default for DictBuilder<T, I> {
    fn default() -> Self {
        DictBuilder {
            index: I::default(),
            values: Vec::new(),
            keys: Vec::new(),
            last: None,
        }
    }
}

impl<T: PartialEq + Copy, I: DictIndex<T>> DictBuilder<T, I> {
    /// Empties the builder for a block of `rows` rows, keeping its memory.
    fn reset(&mut self, rows: usize) {
        self.index.clear();
        self.values.clear();
        self.keys.clear();
        room(&mut self.keys, rows);
        self.last = None;
    }
    #[inline]
    fn push(&mut self, v: T) {
        let k = match self.last {
            Some((last, k)) if last == v => k,
            _ => {
                let n = self.values.len() as i32;
                let k = self.index.key_or_insert(v, n);
                if k == n {
                    self.values.push(v);
                }
                self.last = Some((v, k));
                k
            }
        };
        self.keys.push(k);
    }
    /// The column: the keys move into it (they come back through [`BlockScratch::reclaim`]),
    /// the values are written as text by `text` into one buffer.
    fn finish(&mut self, text: impl Fn(&T, &mut Vec<u8>)) -> ArrayRef {
        let mut bytes = Vec::with_capacity(self.values.len() * 12);
        let mut offsets = Vec::with_capacity(self.values.len() + 1);
        offsets.push(0i32);
        for v in &self.values {
            text(v, &mut bytes);
            offsets.push(bytes.len() as i32);
        }
        // A block's distinct values are far below 2 GiB of text (rows are bounded by
        // `max_buffered_rows`), and every piece written is UTF-8.
        let values = StringArray::new(
            OffsetBuffer::new(ScalarBuffer::from(offsets)),
            Buffer::from_vec(bytes),
            None,
        );
        let keys = Int32Array::new(ScalarBuffer::from(std::mem::take(&mut self.keys)), None);
        // Keys index `values` by construction.
        Arc::new(DictionaryArray::<Int32Type>::new(keys, Arc::new(values)))
    }
}

/// An address as plain integers: IPv6 or not, and the address's bits. Ordered as `IpAddr`
/// (IPv4 first, then IPv6, by value), several times faster to compare and hash than the enum,
/// and built in registers (reading an `IpAddr` just written to memory as a wider value stalls
/// on store forwarding).
type AddrOrd = (bool, u128);

#[inline]
fn addr_ord(ip: &IpAddr) -> AddrOrd {
    match ip {
        IpAddr::V4(a) => (false, u128::from(u32::from(*a))),
        IpAddr::V6(a) => (true, u128::from(*a)),
    }
}

/// [`ip_text`] of an [`AddrOrd`].
fn addr_text(a: &AddrOrd, out: &mut Vec<u8>) {
    let ip = match *a {
        // The low 32 bits hold the whole IPv4 address (built by `addr_ord`).
        (false, bits) => IpAddr::from(std::net::Ipv4Addr::from(bits as u32)),
        (true, bits) => IpAddr::from(std::net::Ipv6Addr::from(bits)),
    };
    ip_text(&ip, out);
}

/// Writes an address as text: IPv4 by hand (the formatting machinery cost as much as the
/// rest of building a dictionary), IPv6 through `Display` (RFC 5952 text, rarer).
fn ip_text(ip: &IpAddr, out: &mut Vec<u8>) {
    match ip {
        IpAddr::V4(a) => {
            for (i, o) in a.octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                if o >= 100 {
                    out.push(b'0' + o / 100);
                }
                if o >= 10 {
                    out.push(b'0' + o / 10 % 10);
                }
                out.push(b'0' + o % 10);
            }
        }
        IpAddr::V6(a) => {
            use std::io::Write;
            // Writing into a Vec cannot fail.
            let _ = write!(out, "{a}");
        }
    }
}

/// Sort key of a row: addresses as [`AddrOrd`], then ports and protocol, then the row's
/// position.
type SortKey = (AddrOrd, AddrOrd, u64, u32);

/// Sort key of a row with an IPv4 source, the usual row: the same order as [`SortKey`] in a
/// 256-bit integer (high, low), 32 bytes against 80, compared in two steps. Bits from the
/// top: source (32), destination is IPv6 (1), destination (128), ports and protocol (40),
/// row position ([`PACKED_ROW_BITS`]).
type PackedKey = (u128, u128);

/// Bits of a packed sort key that hold the row's position: blocks of up to 16 Mi rows (the
/// default `max_buffered_rows` is 4 Mi) sort by packed keys, larger ones by [`SortKey`].
const PACKED_ROW_BITS: u32 = 24;

fn packed_key(src: std::net::Ipv4Addr, dst: AddrOrd, tail: u64, row: u32) -> PackedKey {
    let (dst_v6, dst) = dst;
    let high = u128::from(u32::from(src)) << 96 | u128::from(dst_v6) << 95 | dst >> 33;
    let low = (dst & ((1 << 33) - 1)) << 95
        | u128::from(tail) << (95 - 40)
        | u128::from(row) << (95 - 40 - PACKED_ROW_BITS);
    (high, low)
}

fn packed_row(key: &PackedKey) -> u32 {
    (key.1 >> (95 - 40 - PACKED_ROW_BITS)) as u32 & ((1 << PACKED_ROW_BITS) - 1)
}

/// Buffers of one block's encoding, kept from block to block by [`Ingest`]: a probe writes
/// blocks all day, and taking fresh memory for each cost more than sorting and encoding it
/// (the allocator returns freed pages to the kernel in between, which zeroes them again on
/// the next touch).
#[derive(Default)]
pub struct BlockScratch {
    order: Vec<SortKey>,
    /// Sort keys of the rows with an IPv4 source.
    packed: Vec<PackedKey>,
    sorted: Vec<StoredFlow>,
    sip: DictBuilder<AddrOrd>,
    dip: DictBuilder<AddrOrd>,
    proto: DictBuilder<u8, ByteIndex>,
    reason: DictBuilder<u8, ByteIndex>,
    /// `app` and `app_source`: the application number and the source + 1 (0: no label).
    app: DictBuilder<u8, ByteIndex>,
    app_source: DictBuilder<u8, ByteIndex>,
    src_country: DictBuilder<[u8; 2]>,
    dst_country: DictBuilder<[u8; 2]>,
    tunnel_type: DictBuilder<u8, ByteIndex>,
    /// Outer addresses, `None` without a tunnel.
    tunnel_src: DictBuilder<Option<AddrOrd>>,
    tunnel_dst: DictBuilder<Option<AddrOrd>>,
    u64s: Vec<Vec<u64>>,
    u32s: Vec<Vec<u32>>,
    u16s: Vec<Vec<u16>>,
    u8s: Vec<Vec<u8>>,
}

impl BlockScratch {
    /// Takes back the buffers of a written batch's columns (those no longer shared).
    fn reclaim(&mut self, batch: RecordBatch) {
        let columns: Vec<ArrayRef> = batch.columns().to_vec();
        drop(batch);
        for c in columns {
            let any = c.as_any();
            if let Some(a) = any.downcast_ref::<UInt64Array>().cloned() {
                drop(c);
                if let Ok(v) = a.into_parts().1.into_inner().into_vec::<u64>() {
                    self.u64s.push(v);
                }
            } else if let Some(a) = any.downcast_ref::<UInt32Array>().cloned() {
                drop(c);
                if let Ok(v) = a.into_parts().1.into_inner().into_vec::<u32>() {
                    self.u32s.push(v);
                }
            } else if let Some(a) = any.downcast_ref::<UInt16Array>().cloned() {
                drop(c);
                if let Ok(v) = a.into_parts().1.into_inner().into_vec::<u16>() {
                    self.u16s.push(v);
                }
            } else if let Some(a) = any.downcast_ref::<UInt8Array>().cloned() {
                drop(c);
                if let Ok(v) = a.into_parts().1.into_inner().into_vec::<u8>() {
                    self.u8s.push(v);
                }
            } else if let Some(a) = any.downcast_ref::<DictionaryArray<Int32Type>>().cloned() {
                drop(c);
                let (_, keys, _) = a.keys().clone().into_parts();
                drop(a);
                if let Ok(v) = keys.into_inner().into_vec::<i32>() {
                    let spare = [
                        &mut self.sip.keys,
                        &mut self.dip.keys,
                        &mut self.proto.keys,
                        &mut self.reason.keys,
                    ]
                    .into_iter()
                    .find(|k| k.capacity() == 0);
                    if let Some(k) = spare {
                        *k = v;
                    }
                }
            }
        }
    }
}

/// A column of `rows` through `f`, in a reused buffer.
/// Makes room for `n` items in `v`, with an eighth more (for the next block, or the next rows
/// of this one), as an exact reservation. `Vec`'s own growth
/// doubles: a block a little larger than the buffer it lands in leaves a buffer twice its
/// size behind, and the row buffers and this scratch trade places block after block, so in a
/// long run every buffer ends up doubled (a soak's RSS rose in steps of one block's rows).
fn room<T>(v: &mut Vec<T>, n: usize) {
    if v.capacity() < n {
        let keep = v.len();
        let want = n.saturating_add(n / 8);
        v.reserve_exact(want - keep);
    }
}

fn column<T: Copy, A: From<Vec<T>> + Array + 'static>(
    pool: &mut Vec<Vec<T>>,
    rows: &[StoredFlow],
    f: impl Fn(&StoredFlow) -> T,
) -> ArrayRef {
    let mut v = pool.pop().unwrap_or_default();
    v.clear();
    room(&mut v, rows.len());
    v.extend(rows.iter().map(f));
    Arc::new(A::from(v))
}

/// Sorts `rows` (by addresses, then ports: runs of equal dictionary indices compress well and
/// row-group statistics on addresses become narrow) and encodes them as one record batch.
pub fn encode_batch(rows: &mut [StoredFlow]) -> Result<RecordBatch> {
    let mut scratch = BlockScratch::default();
    let mut owned = rows.to_vec();
    let batch = encode_sorted(&mut owned, &mut scratch)?;
    rows.copy_from_slice(&owned);
    Ok(batch)
}

/// [`encode_batch`] with reused buffers: `rows` is replaced by its sorted copy.
fn encode_sorted(rows: &mut Vec<StoredFlow>, s: &mut BlockScratch) -> Result<RecordBatch> {
    let tail = |r: &StoredFlow| {
        u64::from(r.dst_port) << 24 | u64::from(r.src_port) << 8 | u64::from(r.proto)
    };
    s.packed.clear();
    s.order.clear();
    room(&mut s.packed, rows.len());
    let packable = rows.len() < 1 << PACKED_ROW_BITS;
    for (i, r) in rows.iter().enumerate() {
        match r.src_ip {
            IpAddr::V4(src) if packable => {
                s.packed
                    .push(packed_key(src, addr_ord(&r.dst_ip), tail(r), i as u32));
            }
            _ => s
                .order
                .push((addr_ord(&r.src_ip), addr_ord(&r.dst_ip), tail(r), i as u32)),
        }
    }
    // IPv4 sources sort before IPv6 ones (the `IpAddr` order), so the two sorted parts
    // concatenate.
    s.packed.sort_unstable();
    s.order.sort_unstable();
    s.sorted.clear();
    room(&mut s.sorted, rows.len());
    s.sorted
        .extend(s.packed.iter().map(|k| rows[packed_row(k) as usize]));
    s.sorted.extend(s.order.iter().map(|o| rows[o.3 as usize]));
    std::mem::swap(rows, &mut s.sorted);
    debug_assert!(rows
        .windows(2)
        .all(|w| (w[0].src_ip, w[0].dst_ip) <= (w[1].src_ip, w[1].dst_ip)));
    let n = rows.len();
    s.sip.reset(n);
    s.dip.reset(n);
    s.proto.reset(n);
    s.reason.reset(n);
    s.app.reset(n);
    s.app_source.reset(n);
    s.src_country.reset(n);
    s.dst_country.reset(n);
    s.tunnel_type.reset(n);
    s.tunnel_src.reset(n);
    s.tunnel_dst.reset(n);
    for r in rows.iter() {
        s.sip.push(addr_ord(&r.src_ip));
        s.dip.push(addr_ord(&r.dst_ip));
        s.proto.push(r.proto);
        s.reason.push(r.end_reason as u8);
        s.app.push(r.app.map_or(0, |l| l.app as u8));
        s.app_source.push(r.app.map_or(0, |l| l.source as u8 + 1));
        let x = &r.extra;
        s.src_country.push(x.src_country);
        s.dst_country.push(x.dst_country);
        let t = &x.tunnel;
        s.tunnel_type.push(t.kind as u8);
        let outer = |a: IpAddr| t.is_some().then(|| addr_ord(&a));
        s.tunnel_src.push(outer(t.src_addr()));
        s.tunnel_dst.push(outer(t.dst_addr()));
    }
    let country = |c: &[u8; 2], out: &mut Vec<u8>| {
        out.extend_from_slice(trawl_flow::RecordExtra::country_text(c).as_bytes());
    };
    let outer_text = |a: &Option<AddrOrd>, out: &mut Vec<u8>| {
        if let Some(a) = a {
            addr_text(a, out);
        }
    };
    let name = |t: &dyn std::fmt::Display, out: &mut Vec<u8>| {
        use std::io::Write;
        // Writing into a Vec cannot fail.
        let _ = write!(out, "{t}");
    };
    let (u64s, u32s, u16s, u8s) = (&mut s.u64s, &mut s.u32s, &mut s.u16s, &mut s.u8s);
    let mut columns: Vec<ArrayRef> = vec![
        s.sip.finish(addr_text),
        s.dip.finish(addr_text),
        column::<_, UInt16Array>(u16s, rows, |r| r.src_port),
        column::<_, UInt16Array>(u16s, rows, |r| r.dst_port),
        s.proto.finish(|p, out| name(&ProtoName(*p), out)),
        column::<_, UInt16Array>(u16s, rows, |r| r.vlan),
        column::<_, UInt64Array>(u64s, rows, |r| r.first_ns),
        column::<_, UInt64Array>(u64s, rows, |r| r.last_ns),
        column::<_, UInt64Array>(u64s, rows, |r| r.fwd_packets),
        column::<_, UInt64Array>(u64s, rows, |r| r.rev_packets),
        column::<_, UInt64Array>(u64s, rows, |r| r.fwd_bytes),
        column::<_, UInt64Array>(u64s, rows, |r| r.rev_bytes),
        column::<_, UInt64Array>(u64s, rows, |r| r.fwd_ip_bytes),
        column::<_, UInt64Array>(u64s, rows, |r| r.rev_ip_bytes),
        column::<_, UInt8Array>(u8s, rows, |r| r.fwd_tcp_flags),
        column::<_, UInt8Array>(u8s, rows, |r| r.rev_tcp_flags),
        s.reason.finish(|&r, out| {
            let reason = trawl_flow::EndReason::ALL
                .get(r as usize)
                .map_or("end", |e| e.name());
            out.extend_from_slice(reason.as_bytes());
        }),
        community_ids(rows)?,
        s.app.finish(|&a, out| {
            let name = trawl_flow::App::from_id(a).map_or("", |a| a.name());
            out.extend_from_slice(name.as_bytes());
        }),
        s.app_source.finish(|&v, out| {
            let name = match v {
                1 => trawl_flow::AppSource::Payload.name(),
                2 => trawl_flow::AppSource::Port.name(),
                _ => "",
            };
            out.extend_from_slice(name.as_bytes());
        }),
        column::<_, UInt32Array>(u32s, rows, |r| r.extra.src_as),
        column::<_, UInt32Array>(u32s, rows, |r| r.extra.dst_as),
        s.src_country.finish(country),
        s.dst_country.finish(country),
    ];
    let directions: [fn(&StoredFlow) -> &StoredRtt; 2] =
        [|r| &r.extra.fwd_rtt, |r| &r.extra.rev_rtt];
    for rtt in directions {
        columns.extend(rtt_columns(u64s, u32s, rows, rtt));
    }
    columns.extend([
        s.tunnel_type.finish(|&t, out| {
            out.extend_from_slice(trawl_flow::TunnelType::from_u8(t).name().as_bytes());
        }),
        s.tunnel_src.finish(outer_text),
        s.tunnel_dst.finish(outer_text),
        column::<_, UInt32Array>(u32s, rows, |r| r.extra.tunnel.id),
    ]);
    RecordBatch::try_new(schema(), columns).map_err(|e| Error::Block {
        path: PathBuf::new(),
        message: format!("internal error, please report: {e}"),
    })
}

/// The five round-trip columns of one direction (`rtt` picks it), in file order: the
/// handshake (null without one), the samples, and their minimum, maximum and mean (null
/// without samples).
fn rtt_columns(
    u64s: &mut Vec<Vec<u64>>,
    u32s: &mut Vec<Vec<u32>>,
    rows: &[StoredFlow],
    rtt: fn(&StoredFlow) -> &StoredRtt,
) -> [ArrayRef; 5] {
    let sampled = |r: &StoredFlow| rtt(r).samples > 0;
    let mut ns = |f: &dyn Fn(&StoredRtt) -> Option<u64>| -> ArrayRef {
        let values = column::<_, UInt64Array>(u64s, rows, |r| f(rtt(r)).unwrap_or(0));
        with_nulls(values, rows, |r| f(rtt(r)).is_some())
    };
    let handshake = ns(&|t| t.handshake_ns);
    let min = ns(&|t| (t.samples > 0).then_some(t.min_ns));
    let max = ns(&|t| (t.samples > 0).then_some(t.max_ns));
    let mean = Arc::new(Float64Array::from_iter_values(
        rows.iter().map(|r| rtt(r).mean_ns),
    ));
    [
        handshake,
        column::<_, UInt32Array>(u32s, rows, |r| rtt(r).samples),
        min,
        max,
        with_nulls(mean, rows, sampled),
    ]
}

/// `array` (one value per row) with the rows where `valid` is false null; as it is when no
/// row is null (no validity bitmap is written then).
fn with_nulls(
    array: ArrayRef,
    rows: &[StoredFlow],
    valid: impl Fn(&StoredFlow) -> bool,
) -> ArrayRef {
    if rows.iter().all(&valid) {
        return array;
    }
    let nulls = arrow_buffer::NullBuffer::from_iter(rows.iter().map(valid));
    // Same length, and the values' type allows nulls (the schema's fields are nullable).
    match array.to_data().into_builder().nulls(Some(nulls)).build() {
        Ok(data) => arrow_array::make_array(data),
        Err(_) => array,
    }
}

/// The `community_id` column: each row's digest, computed here at block end (one SHA-1 block
/// per row) rather than carried through the meter.
fn community_ids(rows: &[StoredFlow]) -> Result<ArrayRef> {
    let mut bytes = Vec::with_capacity(rows.len() * 20);
    for r in rows {
        bytes.extend_from_slice(&r.community_id_digest());
    }
    let array = FixedSizeBinaryArray::try_new(20, Buffer::from_vec(bytes), None).map_err(|e| {
        Error::Block {
            path: PathBuf::new(),
            message: format!("internal error, please report: {e}"),
        }
    })?;
    Ok(Arc::new(array))
}

/// Distinguishes the temporary files of concurrent writes in one process.
pub(crate) static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Writes `rows` as a block of interface `iface` starting at `start_ns` and publishes it
/// atomically: the file is written under a temporary dot-name in the day directory, synced,
/// linked to the first free name of `HHMM.parquet`, `HHMM_1.parquet`, ... (a hard link never
/// replaces an existing file), unlinked from the temporary name, and the directory synced. A
/// crash at any point leaves either no block file or a complete one; at worst a temporary
/// dot-file that readers skip and [`crate::retention`] removes.
pub fn write_block(
    db: &Path,
    iface: &str,
    start_ns: u64,
    rows: &mut [StoredFlow],
    props: &WriterProperties,
) -> Result<BlockRef> {
    let mut owned = rows.to_vec();
    let block = write_block_with(
        db,
        iface,
        start_ns,
        &mut owned,
        props,
        &mut BlockScratch::default(),
        None,
    )?;
    rows.copy_from_slice(&owned);
    Ok(block)
}

/// [`write_block`] with reused buffers; `rows` ends up sorted. `covers`: the token of the
/// recent parts this block holds every row of.
fn write_block_with(
    db: &Path,
    iface: &str,
    start_ns: u64,
    rows: &mut Vec<StoredFlow>,
    props: &WriterProperties,
    scratch: &mut BlockScratch,
    covers: Option<u64>,
) -> Result<BlockRef> {
    if !valid_iface(iface) {
        return Err(Error::InvalidIface(iface.to_string()));
    }
    let start_ns = block_start(start_ns);
    let dir = day_dir(db, iface, Date::of(start_ns));
    if !dir.is_dir() {
        make_day_dir(&dir)?;
    }
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        block_file_name(start_ns, 0),
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = write_tmp(&tmp, iface, start_ns, rows, props, scratch, covers)
        .and_then(|()| publish(&tmp, &dir, start_ns));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    let (path, part) = result?;
    let bytes = fs::metadata(&path).map_err(|e| Error::io(&path, e))?.len();
    Ok(BlockRef {
        iface: iface.to_string(),
        start_ns,
        part,
        path,
        bytes,
        recent: false,
    })
}

/// Writes a recent part named `name` into the block's day directory (through a temporary
/// file renamed into place: readers see it whole or not at all).
fn write_recent(
    db: &Path,
    iface: &str,
    start_ns: u64,
    name: &str,
    rows: &mut Vec<StoredFlow>,
    props: &WriterProperties,
    scratch: &mut BlockScratch,
) -> Result<PathBuf> {
    let dir = day_dir(db, iface, Date::of(start_ns));
    if !dir.is_dir() {
        make_day_dir(&dir)?;
    }
    let tmp = dir.join(format!(
        "{name}.{}.{}.tmp",
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let path = dir.join(name);
    let result = write_tmp(&tmp, iface, start_ns, rows, props, scratch, None)
        .and_then(|()| fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e)));
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map(|()| path)
}

fn write_tmp(
    tmp: &Path,
    iface: &str,
    start_ns: u64,
    rows: &mut Vec<StoredFlow>,
    props: &WriterProperties,
    scratch: &mut BlockScratch,
    covers: Option<u64>,
) -> Result<()> {
    let batch = encode_sorted(rows, scratch)?;
    let file = create_in_day_dir(tmp)?;
    let mut props = props.clone();
    let mut kv = vec![
        KeyValue::new(VERSION_KEY.to_string(), STORE_VERSION.to_string()),
        KeyValue::new("trawl.iface".to_string(), iface.to_string()),
        KeyValue::new("trawl.block_start_ns".to_string(), start_ns.to_string()),
    ];
    if let Some(token) = covers {
        kv.push(KeyValue::new(
            crate::recent::TOKEN_KEY.to_string(),
            format!("{token:016x}"),
        ));
    }
    props = props
        .into_builder()
        .set_key_value_metadata(Some(kv))
        .build();
    let mut w = ArrowWriter::try_new(
        BufWriter::with_capacity(1 << 20, file),
        schema(),
        Some(props),
    )
    .map_err(|e| Error::block(tmp, e))?;
    w.write(&batch).map_err(|e| Error::block(tmp, e))?;
    let buf = w.into_inner().map_err(|e| Error::block(tmp, e))?;
    scratch.reclaim(batch);
    let file = buf
        .into_inner()
        .map_err(|e| Error::io(tmp, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io(tmp, e))
}

/// Creates a day directory and the directories above it, durably: the new directory entries
/// must survive a crash like the block file will.
pub(crate) fn make_day_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    for d in [dir.parent(), dir.parent().and_then(Path::parent)]
        .into_iter()
        .flatten()
    {
        sync_dir(d)?;
    }
    Ok(())
}

/// Creates the temporary file of a block. A retention pass removes the day directories it
/// finds empty, so one can vanish between its creation and the file's (seen when retention
/// runs beside a writer): it is then made again.
pub(crate) fn create_in_day_dir(tmp: &Path) -> Result<File> {
    let mut tries = 0;
    loop {
        match File::create(tmp) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && tries < 3 => {
                tries += 1;
                if let Some(dir) = tmp.parent() {
                    make_day_dir(dir)?;
                }
            }
            r => return r.map_err(|e| Error::io(tmp, e)),
        }
    }
}

fn publish(tmp: &Path, dir: &Path, start_ns: u64) -> Result<(PathBuf, u32)> {
    let mut part = 0u32;
    loop {
        let path = dir.join(block_file_name(start_ns, part));
        match fs::hard_link(tmp, &path) {
            Ok(()) => {
                fs::remove_file(tmp).map_err(|e| Error::io(tmp, e))?;
                sync_dir(dir)?;
                return Ok((path, part));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => part += 1,
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_day_directory_removed_under_the_writer_is_made_again() {
        // Retention removes empty day directories; the writer may have made one just before.
        let db = tempfile::tempdir().unwrap();
        let dir = db.path().join("iface=eth0").join("date=2026-11-23");
        make_day_dir(&dir).unwrap();
        fs::remove_dir(&dir).unwrap();
        fs::remove_dir(dir.parent().unwrap()).unwrap();
        let tmp = dir.join(".1200.parquet.1.0.tmp");
        create_in_day_dir(&tmp).unwrap();
        assert!(tmp.is_file());
    }

    /// A row of `i` with addresses and ports drawn from `next`: mostly IPv4, some IPv6 (with
    /// low-valued ones such as `::5`, which are numerically below IPv4 addresses but sort
    /// after them), few distinct values so that rows share keys and differ only late in them.
    fn mixed_row(next: &mut impl FnMut() -> u64) -> StoredFlow {
        let addr = |next: &mut dyn FnMut() -> u64| -> IpAddr {
            let r = next();
            match r % 8 {
                0 => IpAddr::from(std::net::Ipv6Addr::from(u128::from(r % 5))),
                1 => IpAddr::from(std::net::Ipv6Addr::from(u128::from(r) << 64 | 7)),
                _ => IpAddr::from(std::net::Ipv4Addr::from((r % 6) as u32 * 0x2a00_0001)),
            }
        };
        StoredFlow {
            src_ip: addr(next),
            dst_ip: addr(next),
            src_port: (next() % 3) as u16 * 30_000,
            dst_port: (next() % 3) as u16 * 443,
            proto: [6, 17, 1, 255][(next() % 4) as usize],
            vlan: 0,
            first_ns: next(),
            last_ns: next(),
            fwd_packets: next() % 10,
            rev_packets: 0,
            fwd_bytes: 0,
            rev_bytes: 0,
            fwd_ip_bytes: 0,
            rev_ip_bytes: 0,
            fwd_tcp_flags: 0,
            rev_tcp_flags: 0,
            end_reason: trawl_flow::EndReason::ALL[(next() % 3) as usize],
            app: None,
            extra: Default::default(),
        }
    }

    #[test]
    fn packed_keys_sort_like_the_general_key() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || trawl_testkit::xorshift(&mut state);
        let rows: Vec<StoredFlow> = (0..3000).map(|_| mixed_row(&mut next)).collect();
        let tail = |r: &StoredFlow| {
            u64::from(r.dst_port) << 24 | u64::from(r.src_port) << 8 | u64::from(r.proto)
        };
        let mut general = Vec::new();
        let mut packed = Vec::new();
        for (i, r) in rows.iter().enumerate() {
            let row = (i * 5591) as u32 % (1 << PACKED_ROW_BITS);
            if let IpAddr::V4(src) = r.src_ip {
                let key = packed_key(src, addr_ord(&r.dst_ip), tail(r), row);
                assert_eq!(packed_row(&key), row);
                general.push((
                    (addr_ord(&r.src_ip), addr_ord(&r.dst_ip), tail(r), row),
                    key,
                ));
                packed.push(key);
            }
        }
        assert!(general.len() > 1000, "most sources are IPv4");
        general.sort_unstable_by_key(|g| g.0);
        packed.sort_unstable();
        let by_general: Vec<PackedKey> = general.iter().map(|g| g.1).collect();
        assert_eq!(by_general, packed);
    }

    #[test]
    fn encoded_blocks_are_sorted_and_their_dictionaries_give_each_row_its_values() {
        use arrow_array::cast::AsArray;
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || trawl_testkit::xorshift(&mut state);
        let rows: Vec<StoredFlow> = (0..5000).map(|_| mixed_row(&mut next)).collect();
        let mut scratch = BlockScratch::default();
        // Twice through the same scratch: the second block must not see the first's values.
        for block in [&rows[..2000], &rows[2000..]] {
            let mut sorted = block.to_vec();
            let batch = encode_sorted(&mut sorted, &mut scratch).unwrap();
            let mut expected = block.to_vec();
            expected.sort_by_key(|r| (r.src_ip, r.dst_ip, r.dst_port, r.src_port, r.proto));
            let key = |r: &StoredFlow| (r.src_ip, r.dst_ip, r.dst_port, r.src_port, r.proto);
            assert_eq!(
                sorted.iter().map(key).collect::<Vec<_>>(),
                expected.iter().map(key).collect::<Vec<_>>()
            );
            let text = |c: usize, i: usize| -> String {
                let d = batch.column(c).as_dictionary::<Int32Type>();
                let values = d.values().as_string::<i32>();
                values.value(d.keys().value(i) as usize).to_string()
            };
            for (i, r) in sorted.iter().enumerate() {
                assert_eq!(text(0, i), r.src_ip.to_string());
                assert_eq!(text(1, i), r.dst_ip.to_string());
                assert_eq!(text(4, i), ProtoName(r.proto).to_string());
                assert_eq!(text(16, i), r.end_reason.name());
            }
            scratch.reclaim(batch);
        }
    }

    #[test]
    fn codecs_parse() {
        assert_eq!(Codec::parse("zstd"), Some(Codec::Zstd(3)));
        assert_eq!(Codec::parse("zstd:9"), Some(Codec::Zstd(9)));
        assert_eq!(Codec::parse("lz4"), Some(Codec::Lz4));
        assert_eq!(Codec::parse("zstd:0"), None);
        assert_eq!(Codec::parse("gzip"), None);
    }
}
