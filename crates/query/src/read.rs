//! Reading the columns a query needs from a block, one row group at a time, into buffers the
//! worker reuses: trawl's own column chunks are decoded straight from their pages by
//! `trawl_store::pages` (dictionary indices and counters into plain `u32`/`u64` buffers, the
//! dictionary read once per chunk); a chunk that decoder does not handle (another writer's
//! encoding or codec, optional columns, an unexpected type) is read through the `parquet`
//! crate's Arrow reader and converted to the same form. The choice is made per column chunk.
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Int16Type, Int32Type, Int64Type, Int8Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrayRef};
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};
use parquet::arrow::ProjectionMask;
use parquet::basic::Type as PhysicalType;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use trawl_store::hash::FxHashMap;
use trawl_store::pages::{
    Chunk, DictColumn, DictType, PageCodec, PageCursor, PageDecoder, PageError, Values,
};
use trawl_store::schema::col;

/// A column a query reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Col {
    Sip,
    Dip,
    Sport,
    Dport,
    Proto,
    Vlan,
    App,
    SrcAs,
    DstAs,
    SrcCountry,
    DstCountry,
    TunnelType,
    TunnelSrc,
    TunnelDst,
    FwdPackets,
    RevPackets,
    FwdBytes,
    RevBytes,
}

/// Dictionary-encoded columns, indexing [`RowGroup::dicts`] (the AS numbers are stored plain
/// and given a dictionary per row group when read, so that they are grouped and filtered
/// like the others).
pub(crate) const DICTS: usize = 14;

impl Col {
    pub(crate) const ALL: [Col; 18] = [
        Col::Sip,
        Col::Dip,
        Col::Sport,
        Col::Dport,
        Col::Proto,
        Col::Vlan,
        Col::App,
        Col::SrcAs,
        Col::DstAs,
        Col::SrcCountry,
        Col::DstCountry,
        Col::TunnelType,
        Col::TunnelSrc,
        Col::TunnelDst,
        Col::FwdPackets,
        Col::RevPackets,
        Col::FwdBytes,
        Col::RevBytes,
    ];

    /// The four counters, in [`RowGroup::counters`] order.
    pub(crate) const COUNTERS: [Col; 4] = [
        Col::FwdPackets,
        Col::RevPackets,
        Col::FwdBytes,
        Col::RevBytes,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Col::Sip => col::SRC_IP,
            Col::Dip => col::DST_IP,
            Col::Sport => col::SRC_PORT,
            Col::Dport => col::DST_PORT,
            Col::Proto => col::PROTO,
            Col::Vlan => col::VLAN,
            Col::App => col::APP,
            Col::SrcAs => col::SRC_AS,
            Col::DstAs => col::DST_AS,
            Col::SrcCountry => col::SRC_COUNTRY,
            Col::DstCountry => col::DST_COUNTRY,
            Col::TunnelType => col::TUNNEL_TYPE,
            Col::TunnelSrc => col::TUNNEL_SRC,
            Col::TunnelDst => col::TUNNEL_DST,
            Col::FwdPackets => col::FWD_PACKETS,
            Col::RevPackets => col::REV_PACKETS,
            Col::FwdBytes => col::FWD_BYTES,
            Col::RevBytes => col::REV_BYTES,
        }
    }

    pub(crate) fn of(name: &str) -> Option<Col> {
        Col::ALL.into_iter().find(|c| c.name() == name)
    }

    /// Index among the dictionary columns (addresses, ports, protocol, VLAN), or among the
    /// counters (`Err`).
    #[inline]
    pub(crate) fn slot(self) -> Result<usize, usize> {
        let i = self as usize;
        if i < DICTS {
            Ok(i)
        } else {
            Err(i - DICTS)
        }
    }

    fn physical(self) -> PhysicalType {
        match self {
            Col::Sip
            | Col::Dip
            | Col::Proto
            | Col::App
            | Col::SrcCountry
            | Col::DstCountry
            | Col::TunnelType
            | Col::TunnelSrc
            | Col::TunnelDst => PhysicalType::BYTE_ARRAY,
            Col::Sport | Col::Dport | Col::Vlan | Col::SrcAs | Col::DstAs => PhysicalType::INT32,
            _ => PhysicalType::INT64,
        }
    }

    /// Whether the column holds 32-bit numbers stored plain (AS numbers), not 16-bit ones
    /// stored as a dictionary.
    pub(crate) fn wide(self) -> bool {
        matches!(self, Col::SrcAs | Col::DstAs)
    }

    /// Whether blocks written before the column existed lack it (`app` and the later
    /// columns, `trawl_store::schema::LATER_COLUMNS`): their rows read as its empty value.
    pub(crate) fn later(self) -> bool {
        self == Col::App || trawl_store::schema::LATER_COLUMNS.contains(&self.name())
    }
}

/// One row group's decoded columns (those the query reads).
#[derive(Default)]
pub(crate) struct RowGroup {
    pub(crate) rows: usize,
    /// Sip, dip, sport, dport, proto, vlan, app, the AS numbers, countries and tunnel
    /// columns: the dictionary and per row an index into it. Port and VLAN dictionaries hold
    /// values in 0..=65535, AS dictionaries any 32-bit number (as `i32` bits).
    pub(crate) dicts: [DictColumn; DICTS],
    /// Identity of each dictionary: a new value whenever one is loaded, so caches derived
    /// from a dictionary know when to start over.
    pub(crate) gens: [u64; DICTS],
    /// Forward and reverse packets, forward and reverse bytes.
    pub(crate) counters: [Values<u64>; 4],
    /// Decoded whole, for staging (the other row groups were aggregated as they were read,
    /// or had no row to aggregate).
    pub(crate) staged: bool,
    /// The rows the condition selects, for staging (`None`: all).
    pub(crate) sel: Option<Vec<bool>>,
}

/// The leaf index of a column the block does not have (only [`Col::later`] ones may be
/// missing).
pub(crate) const MISSING: usize = usize::MAX;

/// Largest row group decoded directly (a corrupt footer must not make the decoder allocate
/// without bound; larger row groups go to the general reader, which reads in batches).
const MAX_DIRECT_ROWS: usize = 1 << 22;

/// An open block: the file and its footer.
pub(crate) struct BlockFile {
    file: File,
    len: u64,
    pub(crate) meta: Arc<ParquetMetaData>,
    /// Built on first use by the general reader.
    arrow: Option<ArrowReaderMetadata>,
}

/// Bytes read from the end of a block at once: its footer in one read (trawl's are 4-6 KB).
const FOOTER_GUESS: u64 = 8 << 10;

impl BlockFile {
    /// Opens a block and parses its footer (one read for the footers trawl writes).
    pub(crate) fn open(path: &std::path::Path) -> Result<BlockFile, String> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        let len = file.metadata().map_err(|e| e.to_string())?.len();
        let mut want = len.min(FOOTER_GUESS);
        let meta = loop {
            let mut tail = vec![0u8; want as usize];
            file.read_exact_at(&mut tail, len - want)
                .map_err(|e| e.to_string())?;
            let mut r = ParquetMetaDataReader::new();
            match r.try_parse_sized(&bytes::Bytes::from(tail), len) {
                Ok(()) => break r.finish().map_err(|e| e.to_string())?,
                Err(ParquetError::NeedMoreData(n)) if (n as u64) > want && (n as u64) <= len => {
                    want = n as u64;
                }
                Err(e) => return Err(e.to_string()),
            }
        };
        Ok(BlockFile {
            file,
            len,
            meta: Arc::new(meta),
            arrow: None,
        })
    }

    /// The leaf index of column `name`.
    pub(crate) fn leaf(&self, name: &str) -> Option<usize> {
        self.meta
            .file_metadata()
            .schema_descr()
            .columns()
            .iter()
            .position(|c| c.name() == name)
    }
}

/// Decodes columns of row groups; holds the page decoder's scratch and the read buffers.
pub(crate) struct ColumnReader {
    pages: PageDecoder,
    /// Read buffers: one per counter read a page at a time, and one for everything else.
    io: [Vec<u8>; 5],
    /// Values of the current page of each counter read a page at a time.
    page_values: [Values<u64>; 4],
    next_gen: u64,
    /// Decode every chunk through the general reader (`Query::direct_decoding` off).
    general_only: bool,
    /// Column chunks read by the general reader.
    pub(crate) general_chunks: u64,
    /// Values of a plain 32-bit column (AS numbers) before they get a dictionary.
    plain: Values<i32>,
}

/// Where a decoded column goes.
enum Out<'o> {
    Dict(&'o mut DictColumn, DictType),
    Counter(&'o mut Values<u64>),
}

/// A counter column of a row group read a data page at a time (or whole, when the direct
/// decoder cannot read it page by page): rows `start..end` are in
/// [`ColumnReader::page_values`].
pub(crate) struct CounterPages {
    j: usize,
    g: usize,
    c: Col,
    /// Page by page: the chunk (in `io[j]`), where the read stands.
    paged: Option<(Located, PageCursor)>,
    pub(crate) start: usize,
    pub(crate) end: usize,
    done: bool,
}

impl ColumnReader {
    pub(crate) fn new(direct: bool) -> Self {
        ColumnReader {
            pages: PageDecoder::default(),
            io: Default::default(),
            page_values: Default::default(),
            next_gen: 1,
            general_only: !direct,
            general_chunks: 0,
            plain: Values::default(),
        }
    }

    /// Decodes column `c` (leaf `leaf`) of row group `g` into `out`. `needed`: one flag per
    /// row; pages without a needed row may be left undecoded (their rows hold index 0 or
    /// counter 0). Errors name the row group, the column and, for a damaged page, its offset.
    pub(crate) fn load(
        &mut self,
        f: &mut BlockFile,
        g: usize,
        c: Col,
        leaf: usize,
        needed: Option<&[bool]>,
        out: &mut RowGroup,
    ) -> Result<(), String> {
        if leaf == MISSING {
            // A column the block was written without (the `app` label or the enrichment and
            // tunnel columns, before they existed): one empty value (or 0) for every row.
            let Ok(i) = c.slot() else {
                return Err(format!("column {} missing", c.name()));
            };
            let d = &mut out.dicts[i];
            d.clear_dict();
            if c.physical() == PhysicalType::BYTE_ARRAY {
                d.push_bytes(b"");
            } else {
                d.push_int(0);
            }
            d.keys.prepare(out.rows).fill(0);
            out.gens[i] = self.next_gen;
            self.next_gen += 1;
            return Ok(());
        }
        let target = match c.slot() {
            Ok(i) => {
                let ty = if c.physical() == PhysicalType::BYTE_ARRAY {
                    DictType::Bytes
                } else {
                    DictType::Int32
                };
                Out::Dict(&mut out.dicts[i], ty)
            }
            Err(j) => Out::Counter(&mut out.counters[j]),
        };
        self.load_into(f, g, c, leaf, needed, target)?;
        if let Ok(i) = c.slot() {
            out.gens[i] = self.next_gen;
            self.next_gen += 1;
        }
        Ok(())
    }

    fn load_into(
        &mut self,
        f: &mut BlockFile,
        g: usize,
        c: Col,
        leaf: usize,
        needed: Option<&[bool]>,
        mut out: Out<'_>,
    ) -> Result<(), String> {
        let r = self.read_direct(f, g, c, leaf, 4).and_then(|at| {
            let chunk = at.chunk(&self.io[4]);
            match &mut out {
                Out::Dict(d, _) if c.wide() => {
                    self.pages.i32_chunk(&chunk, &mut self.plain)?;
                    ints_to_wide_dict(self.plain.as_slice().iter().copied(), d);
                    Ok(())
                }
                Out::Dict(d, ty) => {
                    self.pages.dict_chunk(&chunk, *ty, needed, d)?;
                    // Ports and VLANs are 16-bit: anything else is left to the general
                    // reader (which decides what it means).
                    if *ty == DictType::Int32 && d.ints().iter().any(|&v| !(0..=65535).contains(&v))
                    {
                        return Err(PageError::Unsupported("values beyond 16 bits".into()));
                    }
                    Ok(())
                }
                Out::Counter(v) => self.pages.u64_chunk(&chunk, needed, v),
            }
        });
        match r {
            Ok(()) => Ok(()),
            Err(PageError::Unsupported(_)) => {
                self.general_chunks += 1;
                self.load_general(f, g, c, leaf, out)
                    .map_err(|e| chunk_error(g, c, &e))
            }
            Err(e) => Err(chunk_error(g, c, &e)),
        }
    }

    /// Reads the bytes of column `c` of row group `g` into `io[buf]`, if the direct decoder
    /// may read it (its type, levels, codec and size).
    fn read_direct(
        &mut self,
        f: &BlockFile,
        g: usize,
        c: Col,
        leaf: usize,
        buf: usize,
    ) -> Result<Located, PageError> {
        let unsupported = |m: &str| Err(PageError::Unsupported(m.to_string()));
        if self.general_only {
            return unsupported("direct decoding off");
        }
        let rg = f.meta.row_group(g);
        let (cc, descr) = (
            rg.column(leaf),
            f.meta.file_metadata().schema_descr().column(leaf),
        );
        if cc.column_type() != c.physical()
            || descr.max_def_level() != 0
            || descr.max_rep_level() != 0
        {
            return unsupported("not a required column of trawl's type");
        }
        let Some(codec) = PageCodec::of(cc.compression()) else {
            return unsupported("codec");
        };
        let rows = usize::try_from(rg.num_rows()).unwrap_or(usize::MAX);
        if rows > MAX_DIRECT_ROWS {
            return unsupported("a large row group");
        }
        let (start, len) = cc.byte_range();
        if start.checked_add(len).is_none_or(|e| e > f.len) {
            return Err(PageError::Corrupt {
                offset: start,
                message: format!("column chunk of {len} bytes beyond the end of the file"),
            });
        }
        let len = len as usize;
        let io = &mut self.io[buf];
        if io.len() < len {
            io.resize(len, 0);
        }
        f.file
            .read_exact_at(&mut io[..len], start)
            .map_err(|e| PageError::Corrupt {
                offset: start,
                message: e.to_string(),
            })?;
        Ok(Located {
            offset: start,
            len,
            codec,
            rows,
        })
    }

    /// Opens counter `c` of row group `g` for reading a data page at a time with
    /// [`ColumnReader::next_counter_page`]: page by page when the direct decoder reads every
    /// page of it (checked from the headers first, so that the read cannot stop half-way
    /// for want of support), else decoded whole, as one page.
    pub(crate) fn open_counter(
        &mut self,
        f: &mut BlockFile,
        g: usize,
        c: Col,
        leaf: usize,
        needed: Option<&[bool]>,
    ) -> Result<CounterPages, String> {
        let j = c
            .slot()
            .err()
            .ok_or_else(|| format!("{} is not a counter", c.name()))?;
        let mut p = CounterPages {
            j,
            g,
            c,
            paged: None,
            start: 0,
            end: 0,
            done: false,
        };
        match self.read_direct(f, g, c, leaf, j) {
            Ok(at) => {
                let chunk = at.chunk(&self.io[j]);
                match self.pages.u64_pages_supported(&chunk) {
                    Ok(true) => {
                        p.paged = Some((at, PageCursor::default()));
                        return Ok(p);
                    }
                    Ok(false) => {}
                    Err(e) => return Err(chunk_error(g, c, &e)),
                }
            }
            Err(PageError::Unsupported(_)) => {}
            Err(e) => return Err(chunk_error(g, c, &e)),
        }
        let mut whole = std::mem::take(&mut self.page_values[j]);
        let r = self.load_into(f, g, c, leaf, needed, Out::Counter(&mut whole));
        p.end = whole.len();
        self.page_values[j] = whole;
        r.map(|()| p)
    }

    /// Moves `p` to its next page (rows `p.start..p.end`, values in
    /// [`ColumnReader::page_values`]); false after the last.
    pub(crate) fn next_counter_page(
        &mut self,
        p: &mut CounterPages,
        needed: Option<&[bool]>,
    ) -> Result<bool, String> {
        if p.done {
            return Ok(false);
        }
        let Some((at, cursor)) = &mut p.paged else {
            // Whole: the one "page" was read when opened.
            p.done = true;
            return Ok(true);
        };
        let chunk = at.chunk(&self.io[p.j]);
        match self
            .pages
            .u64_page(&chunk, cursor, needed, &mut self.page_values[p.j])
        {
            Ok(Some(rows)) => {
                (p.start, p.end) = (rows.start, rows.end);
                Ok(true)
            }
            Ok(None) => {
                p.done = true;
                Ok(false)
            }
            Err(e) => Err(chunk_error(p.g, p.c, &e)),
        }
    }

    /// The values of counter `j`'s current page.
    pub(crate) fn page_values(&self, j: usize) -> &[u64] {
        self.page_values[j].as_slice()
    }

    /// Reads one column chunk through the `parquet` crate's Arrow reader.
    fn load_general(
        &mut self,
        f: &mut BlockFile,
        g: usize,
        c: Col,
        leaf: usize,
        out: Out<'_>,
    ) -> Result<(), String> {
        let arm = match &f.arrow {
            Some(a) => a.clone(),
            None => {
                let a = ArrowReaderMetadata::try_new(f.meta.clone(), ArrowReaderOptions::new())
                    .map_err(|e| e.to_string())?;
                f.arrow = Some(a.clone());
                a
            }
        };
        let file = f.file.try_clone().map_err(|e| e.to_string())?;
        let mask = ProjectionMask::leaves(f.meta.file_metadata().schema_descr(), [leaf]);
        let reader = ParquetRecordBatchReaderBuilder::new_with_metadata(file, arm)
            .with_row_groups(vec![g])
            .with_projection(mask)
            .with_batch_size(65_536)
            .build()
            .map_err(|e| e.to_string())?;
        let mut arrays = Vec::new();
        for batch in reader {
            let batch = batch.map_err(|e| e.to_string())?;
            arrays.push(batch.column(0).clone());
        }
        let rows: usize = arrays.iter().map(|a| a.len()).sum();
        let want = usize::try_from(f.meta.row_group(g).num_rows()).unwrap_or(usize::MAX);
        if rows != want {
            return Err(format!("{rows} values for {want} rows"));
        }
        if arrays.iter().any(|a| a.null_count() > 0) {
            return Err("null values".into());
        }
        match out {
            Out::Dict(d, DictType::Bytes) => strings_to_dict(&arrays, rows, d)?,
            Out::Dict(d, DictType::Int32) if c.wide() => {
                let mut values = Vec::with_capacity(rows);
                for a in &arrays {
                    integers(
                        a,
                        &mut |_, v| {
                            values.push(v as u32 as i32);
                            Ok(())
                        },
                        i128::from(u32::MAX),
                        false,
                    )?;
                }
                ints_to_wide_dict(values.into_iter(), d);
            }
            Out::Dict(d, DictType::Int32) => ints_to_dict(&arrays, rows, d)?,
            Out::Counter(v) => {
                let dst = v.prepare(rows);
                let mut at = 0;
                for a in &arrays {
                    let n = a.len();
                    let mut put = |k: usize, v: i128| {
                        dst[at + k] = v as u64;
                        Ok(())
                    };
                    integers(a, &mut put, i128::from(u64::MAX), true)?;
                    at += n;
                }
            }
        }
        Ok(())
    }
}

/// A column chunk read into a buffer: where it was in the file, its codec and rows.
#[derive(Clone, Copy)]
struct Located {
    offset: u64,
    len: usize,
    codec: PageCodec,
    rows: usize,
}

impl Located {
    fn chunk<'b>(&self, buf: &'b [u8]) -> Chunk<'b> {
        Chunk {
            bytes: &buf[..self.len],
            offset: self.offset,
            codec: self.codec,
            rows: self.rows,
        }
    }
}

fn chunk_error(g: usize, c: Col, e: &dyn std::fmt::Display) -> String {
    format!("row group {g}, column {}: {e}", c.name())
}

/// Calls `f(row, value)` for each value of an integer array (`wrap`: 64-bit values are taken
/// as their bits, so INT64 holding UINT64 reads like the Arrow reader's `UInt64`); values
/// outside `0..=max` are an error.
fn integers(
    a: &ArrayRef,
    f: &mut dyn FnMut(usize, i128) -> Result<(), String>,
    max: i128,
    wrap: bool,
) -> Result<(), String> {
    macro_rules! each {
        ($t:ty, $bits:expr) => {
            if let Some(p) = a.as_primitive_opt::<$t>() {
                for (k, &v) in p.values().iter().enumerate() {
                    let v = i128::from(v);
                    let v = if wrap && $bits && v < 0 {
                        v + (1i128 << 64)
                    } else {
                        v
                    };
                    if !(0..=max).contains(&v) {
                        return Err(format!("value {v} out of range"));
                    }
                    f(k, v)?;
                }
                return Ok(());
            }
        };
    }
    each!(UInt64Type, false);
    each!(Int64Type, true);
    each!(UInt32Type, false);
    each!(Int32Type, false);
    each!(UInt16Type, false);
    each!(Int16Type, false);
    each!(UInt8Type, false);
    each!(Int8Type, false);
    Err(format!("unexpected type {}", a.data_type()))
}

/// Builds a dictionary column from integer arrays (16-bit values).
fn ints_to_dict(arrays: &[ArrayRef], rows: usize, d: &mut DictColumn) -> Result<(), String> {
    d.clear_dict();
    let keys = d.keys.prepare(rows);
    let mut index = vec![u32::MAX; 1 << 16];
    let mut values = Vec::new();
    let mut at = 0;
    for a in arrays {
        integers(
            a,
            &mut |k, v| {
                let slot = &mut index[v as usize];
                if *slot == u32::MAX {
                    *slot = values.len() as u32;
                    values.push(v as i32);
                }
                keys[at + k] = *slot;
                Ok(())
            },
            65_535,
            false,
        )?;
        at += a.len();
    }
    for v in values {
        d.push_int(v);
    }
    Ok(())
}

/// Builds a dictionary column from 32-bit values (AS numbers, as `i32` bits): one entry per
/// distinct value, in the order first met.
fn ints_to_wide_dict(values: impl ExactSizeIterator<Item = i32>, d: &mut DictColumn) {
    d.clear_dict();
    let keys = d.keys.prepare(values.len());
    let mut index: FxHashMap<i32, u32> = FxHashMap::default();
    let mut entries = Vec::new();
    for (k, v) in keys.iter_mut().zip(values) {
        *k = *index.entry(v).or_insert_with(|| {
            entries.push(v);
            entries.len() as u32 - 1
        });
    }
    for v in entries {
        d.push_int(v);
    }
}

/// The values of a string or binary array, by row.
fn byte_values(a: &dyn Array) -> Option<Vec<&[u8]>> {
    if let Some(s) = a.as_string_opt::<i32>() {
        return Some(s.iter().map(|v| v.unwrap_or("").as_bytes()).collect());
    }
    if let Some(s) = a.as_string_opt::<i64>() {
        return Some(s.iter().map(|v| v.unwrap_or("").as_bytes()).collect());
    }
    if let Some(s) = a.as_string_view_opt() {
        return Some(s.iter().map(|v| v.unwrap_or("").as_bytes()).collect());
    }
    if let Some(s) = a.as_binary_opt::<i32>() {
        return Some(s.iter().map(|v| v.unwrap_or(b"")).collect());
    }
    if let Some(s) = a.as_binary_opt::<i64>() {
        return Some(s.iter().map(|v| v.unwrap_or(b"")).collect());
    }
    if let Some(s) = a.as_binary_view_opt() {
        return Some(s.iter().map(|v| v.unwrap_or(b"")).collect());
    }
    None
}

/// Builds a dictionary column from string arrays, plain or dictionary-encoded (entries
/// interned: one per distinct value).
fn strings_to_dict(arrays: &[ArrayRef], rows: usize, d: &mut DictColumn) -> Result<(), String> {
    let mut index: FxHashMap<Vec<u8>, u32> = FxHashMap::default();
    let mut entries: Vec<Vec<u8>> = Vec::new();
    let mut keys = Vec::with_capacity(rows);
    let mut intern = |v: &[u8]| -> u32 {
        *index.entry(v.to_vec()).or_insert_with(|| {
            entries.push(v.to_vec());
            entries.len() as u32 - 1
        })
    };
    for a in arrays {
        if let Some(dict) = a.as_any_dictionary_opt() {
            let values = byte_values(dict.values().as_ref())
                .ok_or_else(|| format!("unexpected type {}", a.data_type()))?;
            let ids: Vec<u32> = values.iter().map(|v| intern(v)).collect();
            for key in dict.normalized_keys() {
                keys.push(*ids.get(key).ok_or("dictionary index out of range")?);
            }
        } else {
            let values = byte_values(a.as_ref())
                .ok_or_else(|| format!("unexpected type {}", a.data_type()))?;
            keys.extend(values.into_iter().map(&mut intern));
        }
    }
    if keys.len() != rows {
        return Err(format!("{} values for {rows} rows", keys.len()));
    }
    d.clear_dict();
    for e in &entries {
        d.push_bytes(e);
    }
    d.keys.prepare(rows).copy_from_slice(&keys);
    Ok(())
}
