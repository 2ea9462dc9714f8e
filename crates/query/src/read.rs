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
use trawl_store::pages::{Chunk, DictColumn, DictType, PageCodec, PageDecoder, PageError, Values};
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
    FwdPackets,
    RevPackets,
    FwdBytes,
    RevBytes,
}

/// Dictionary-encoded columns, indexing [`RowGroup::dicts`].
pub(crate) const DICTS: usize = 6;

impl Col {
    pub(crate) const ALL: [Col; 10] = [
        Col::Sip,
        Col::Dip,
        Col::Sport,
        Col::Dport,
        Col::Proto,
        Col::Vlan,
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
            Col::Sip | Col::Dip | Col::Proto => PhysicalType::BYTE_ARRAY,
            Col::Sport | Col::Dport | Col::Vlan => PhysicalType::INT32,
            _ => PhysicalType::INT64,
        }
    }
}

/// One row group's decoded columns (those the query reads).
#[derive(Default)]
pub(crate) struct RowGroup {
    pub(crate) rows: usize,
    /// Sip, dip, sport, dport, proto, vlan: the dictionary and per row an index into it.
    /// Port and VLAN dictionaries hold values in 0..=65535.
    pub(crate) dicts: [DictColumn; DICTS],
    /// Identity of each dictionary: a new value whenever one is loaded, so caches derived
    /// from a dictionary know when to start over.
    pub(crate) gens: [u64; DICTS],
    /// Forward and reverse packets, forward and reverse bytes.
    pub(crate) counters: [Values<u64>; 4],
    /// No row can match (the condition's first pass): nothing to aggregate.
    pub(crate) empty: bool,
}

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

/// Bytes read from the end of a block at once: its footer in one read.
const FOOTER_GUESS: u64 = 64 << 10;

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

/// Decodes columns of row groups; holds the page decoder's scratch and the read buffer.
pub(crate) struct ColumnReader {
    pages: PageDecoder,
    io: Vec<u8>,
    next_gen: u64,
    /// Decode every chunk through the general reader (`Query::direct_decoding` off).
    general_only: bool,
    /// Column chunks read by the general reader.
    pub(crate) general_chunks: u64,
}

impl ColumnReader {
    pub(crate) fn new(direct: bool) -> Self {
        ColumnReader {
            pages: PageDecoder::default(),
            io: Vec::new(),
            next_gen: 1,
            general_only: !direct,
            general_chunks: 0,
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
        let fail = |m: &dyn std::fmt::Display| format!("row group {g}, column {}: {m}", c.name());
        match self.load_direct(f, g, c, leaf, needed, out) {
            Ok(()) => {}
            Err(PageError::Unsupported(_)) => {
                self.general_chunks += 1;
                self.load_general(f, g, c, leaf, out)
                    .map_err(|e| fail(&e))?;
            }
            Err(e) => return Err(fail(&e)),
        }
        if let Ok(i) = c.slot() {
            out.gens[i] = self.next_gen;
            self.next_gen += 1;
        }
        Ok(())
    }

    fn load_direct(
        &mut self,
        f: &BlockFile,
        g: usize,
        c: Col,
        leaf: usize,
        needed: Option<&[bool]>,
        out: &mut RowGroup,
    ) -> Result<(), PageError> {
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
        if self.io.len() < len {
            self.io.resize(len, 0);
        }
        let bytes = &mut self.io[..len];
        f.file
            .read_exact_at(bytes, start)
            .map_err(|e| PageError::Corrupt {
                offset: start,
                message: e.to_string(),
            })?;
        let chunk = Chunk {
            bytes,
            offset: start,
            codec,
            rows,
        };
        match c.slot() {
            Ok(i) => {
                let ty = if c.physical() == PhysicalType::BYTE_ARRAY {
                    DictType::Bytes
                } else {
                    DictType::Int32
                };
                let d = &mut out.dicts[i];
                self.pages.dict_chunk(&chunk, ty, needed, d)?;
                // Ports and VLANs are 16-bit: anything else is left to the general reader
                // (which decides what it means).
                if ty == DictType::Int32 && d.ints().iter().any(|&v| !(0..=65535).contains(&v)) {
                    return unsupported("a 16-bit column with larger values");
                }
            }
            Err(j) => self.pages.u64_chunk(&chunk, needed, &mut out.counters[j])?,
        }
        Ok(())
    }

    /// Reads one column chunk through the `parquet` crate's Arrow reader.
    fn load_general(
        &mut self,
        f: &mut BlockFile,
        g: usize,
        c: Col,
        leaf: usize,
        out: &mut RowGroup,
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
        match c.slot() {
            Ok(i) if c.physical() == PhysicalType::BYTE_ARRAY => {
                strings_to_dict(&arrays, rows, &mut out.dicts[i])?
            }
            Ok(i) => ints_to_dict(&arrays, rows, &mut out.dicts[i])?,
            Err(j) => {
                let dst = out.counters[j].prepare(rows);
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
