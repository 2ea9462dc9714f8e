//! Direct decoding of the column chunks a trawl block is made of (`docs/specs/store.md`):
//! page headers (Thrift compact protocol), uncompressed / LZ4_RAW / zstd pages, and the value
//! encodings trawl's writer emits — PLAIN dictionary pages, RLE/bit-packed dictionary indices
//! (RLE_DICTIONARY), DELTA_BINARY_PACKED or PLAIN 64-bit integers, PLAIN 32-bit integers —
//! straight into caller-owned buffers that are reused from chunk to chunk: no Arrow arrays, no
//! allocation or zero-filling per page, and a dictionary is read once per column chunk into
//! entries the caller resolves as it likes (the query engine parses each address once).
//!
//! [`PageDecoder`] holds the scratch (a decompressed page, the zstd context); its methods
//! take a [`Chunk`] (one column chunk's bytes, as read from the file) and fill a
//! [`DictColumn`] (dictionary + a [`Values`] of indices per row) or a [`Values`] of integers.
//!
//! Scope: required, non-nested columns (no definition or repetition levels), data pages v1
//! and v2. Anything else — another codec, encoding or page type, dictionary-encoded counters,
//! levels — is [`PageError::Unsupported`]: the caller decodes that chunk with the general
//! reader (the `parquet` crate's), so files written by other tools still read. Malformed
//! bytes are [`PageError::Corrupt`] with the file offset of the page, never a panic (fuzzed by
//! `fuzz/fuzz_targets/store_pages.rs`).
//!
//! ```
//! use trawl_store::pages::{Chunk, PageCodec, PageDecoder, Values};
//! // One DATA_PAGE (Thrift compact header) of three DELTA_BINARY_PACKED 64-bit values 5, 7, 9:
//! // block of 128 values in 4 miniblocks, total 3, first 5; min delta 2, bit widths 0.
//! let header = [0x15, 0x00, 0x15, 0x14, 0x15, 0x14, 0x2c, 0x15, 0x06, 0x15, 0x0a,
//!               0x15, 0x00, 0x15, 0x00, 0x00, 0x00];
//! let body = [0x80, 0x01, 0x04, 0x03, 0x0a, 0x04, 0x00, 0x00, 0x00, 0x00];
//! let bytes = [&header[..], &body[..]].concat();
//! let chunk = Chunk { bytes: &bytes, offset: 4, codec: PageCodec::None, rows: 3 };
//! let mut out = Values::default();
//! PageDecoder::default().u64_chunk(&chunk, None, &mut out).unwrap();
//! assert_eq!(out.as_slice(), [5, 7, 9]);
//! ```
use std::fmt;

use parquet::basic::Compression;

/// Largest page (decompressed) the direct decoder takes; larger ones go to the general reader
/// (trawl's pages are at most a few MB: the dictionary page limit is 8 MB).
const MAX_PAGE: usize = 64 << 20;

/// Page types (`PageType` in `parquet.thrift`).
const DATA_PAGE: i32 = 0;
const INDEX_PAGE: i32 = 1;
const DICTIONARY_PAGE: i32 = 2;
const DATA_PAGE_V2: i32 = 3;

/// Encodings (`Encoding` in `parquet.thrift`).
const PLAIN: i32 = 0;
const PLAIN_DICTIONARY: i32 = 2;
const DELTA_BINARY_PACKED: i32 = 5;
const RLE_DICTIONARY: i32 = 8;

/// How a column chunk's pages are compressed, among those the direct decoder handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PageCodec {
    /// Uncompressed (trawl's counters and times).
    None,
    /// LZ4 block format without framing (Parquet `LZ4_RAW`, trawl's default).
    Lz4Raw,
    /// Zstandard.
    Zstd,
}

impl PageCodec {
    /// The codec of a column chunk's metadata, if the direct decoder handles it.
    pub fn of(c: Compression) -> Option<PageCodec> {
        match c {
            Compression::UNCOMPRESSED => Some(PageCodec::None),
            Compression::LZ4_RAW => Some(PageCodec::Lz4Raw),
            Compression::ZSTD(_) => Some(PageCodec::Zstd),
            _ => None,
        }
    }
}

/// One column chunk of a row group, as stored.
#[derive(Clone, Copy, Debug)]
pub struct Chunk<'a> {
    /// The chunk's bytes (its `byte_range()` in the file): the dictionary page, if any, then
    /// the data pages.
    pub bytes: &'a [u8],
    /// File offset of `bytes[0]`, for error messages.
    pub offset: u64,
    /// Compression of the pages.
    pub codec: PageCodec,
    /// Rows of the row group: a required, flat column holds one value per row.
    pub rows: usize,
}

/// Why a chunk could not be decoded directly.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PageError {
    /// The chunk uses something the direct decoder does not implement (an encoding, a page
    /// type, levels, a huge page): decode it with the general reader.
    Unsupported(String),
    /// The bytes are malformed: `offset` is the file offset of the page (header) at fault.
    Corrupt {
        /// File offset of the page.
        offset: u64,
        /// What was wrong.
        message: String,
    },
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageError::Unsupported(m) => write!(f, "not handled by the direct decoder: {m}"),
            PageError::Corrupt { offset, message } => write!(f, "at offset {offset}: {message}"),
        }
    }
}

impl std::error::Error for PageError {}

/// A fault inside a page, before the page's offset is attached.
enum Fault {
    Unsupported(String),
    Corrupt(String),
}

impl From<&'static str> for Fault {
    fn from(m: &'static str) -> Self {
        Fault::Corrupt(m.to_string())
    }
}

/// A reusable buffer of decoded values: the first [`Values::len`] are valid. Growing it is the
/// only time memory is zeroed; refilling it with fewer or as many values costs nothing extra.
#[derive(Clone, Debug, Default)]
pub struct Values<T> {
    buf: Vec<T>,
    len: usize,
}

impl<T: Copy + Default> Values<T> {
    /// The values.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        &self.buf[..self.len]
    }

    /// Number of values.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Makes the buffer hold `n` values and returns them to be overwritten (their content is
    /// whatever was there before).
    pub fn prepare(&mut self, n: usize) -> &mut [T] {
        if self.buf.len() < n {
            self.buf.resize(n, T::default());
        }
        self.len = n;
        &mut self.buf[..n]
    }
}

/// Physical type of a dictionary-encoded column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DictType {
    /// BYTE_ARRAY (addresses, protocol and end-reason names).
    Bytes,
    /// INT32 (ports, VLAN).
    Int32,
}

/// A dictionary-encoded column chunk: its dictionary and, per row, the index of the row's
/// value in it (every index is below [`DictColumn::dict_len`]).
#[derive(Clone, Debug, Default)]
pub struct DictColumn {
    /// Per row, the dictionary index of its value.
    pub keys: Values<u32>,
    /// BYTE_ARRAY entries: `data[start..end]`.
    spans: Vec<(u32, u32)>,
    data: Vec<u8>,
    /// INT32 entries.
    ints: Vec<i32>,
}

impl DictColumn {
    /// Entries in the dictionary.
    #[inline]
    pub fn dict_len(&self) -> usize {
        self.spans.len().max(self.ints.len())
    }

    /// Byte-array entry `i` (empty for an INT32 dictionary or beyond the end).
    #[inline]
    pub fn bytes(&self, i: usize) -> &[u8] {
        match self.spans.get(i) {
            Some(&(s, e)) => &self.data[s as usize..e as usize],
            None => &[],
        }
    }

    /// INT32 entry `i` (0 for a byte-array dictionary or beyond the end).
    #[inline]
    pub fn int(&self, i: usize) -> i32 {
        self.ints.get(i).copied().unwrap_or(0)
    }

    /// The INT32 entries.
    pub fn ints(&self) -> &[i32] {
        &self.ints
    }

    /// Empties the dictionary (the keys stay).
    pub fn clear_dict(&mut self) {
        self.spans.clear();
        self.data.clear();
        self.ints.clear();
    }

    /// Appends a byte-array entry.
    ///
    /// # Panics
    /// Panics when the entries add up to 4 GiB or more.
    pub fn push_bytes(&mut self, v: &[u8]) {
        let s = u32::try_from(self.data.len()).expect("dictionary below 4 GiB");
        self.data.extend_from_slice(v);
        let e = u32::try_from(self.data.len()).expect("dictionary below 4 GiB");
        self.spans.push((s, e));
    }

    /// Appends an INT32 entry.
    pub fn push_int(&mut self, v: i32) {
        self.ints.push(v);
    }
}

/// Decodes column chunks; holds the scratch reused from page to page.
#[derive(Default)]
pub struct PageDecoder {
    page: Vec<u8>,
    zstd: Option<zstd::bulk::Decompressor<'static>>,
}

/// A page as handed to a chunk's value decoder.
enum Page<'a> {
    /// The dictionary page: encoding, entries, body.
    Dict(i32, usize, &'a [u8]),
    /// A data page: encoding, first row, values, body.
    Data(i32, usize, usize, &'a [u8]),
    /// A data page not decoded because no row of it is needed: first row, values.
    Skipped(usize, usize),
}

impl PageDecoder {
    /// Decodes a dictionary-encoded chunk of physical type `ty` into `out`. With `needed`
    /// (one flag per row), data pages without a needed row are not decompressed or decoded:
    /// their rows get index 0.
    pub fn dict_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        ty: DictType,
        needed: Option<&[bool]>,
        out: &mut DictColumn,
    ) -> Result<(), PageError> {
        out.clear_dict();
        let mut have_dict = false;
        let DictColumn {
            keys,
            spans,
            data,
            ints,
        } = out;
        let keys = keys.prepare(chunk.rows);
        self.walk(chunk, needed, &mut |page| match page {
            Page::Dict(enc, n, body) => {
                if have_dict {
                    return Err("a second dictionary page".into());
                }
                if enc != PLAIN && enc != PLAIN_DICTIONARY {
                    return Err(Fault::Unsupported(format!(
                        "dictionary page encoding {enc}"
                    )));
                }
                have_dict = true;
                match ty {
                    DictType::Bytes => plain_byte_array_dict(body, n, spans, data),
                    DictType::Int32 => {
                        if n > body.len() / 4 {
                            return Err("dictionary page shorter than its entries".into());
                        }
                        ints.extend(
                            body.chunks_exact(4)
                                .take(n)
                                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]])),
                        );
                        Ok(())
                    }
                }
            }
            Page::Data(enc, row, n, body) => {
                if enc != RLE_DICTIONARY && enc != PLAIN_DICTIONARY {
                    return Err(Fault::Unsupported(format!(
                        "data page encoding {enc} in a dictionary column"
                    )));
                }
                if !have_dict {
                    return Err("data page before the dictionary page".into());
                }
                let (&width, rest) = body.split_first().ok_or("empty data page")?;
                let out = &mut keys[row..row + n];
                rle_hybrid(rest, usize::from(width), out)?;
                let len = spans.len().max(ints.len());
                if out.iter().fold(0, |m, &k| m.max(k)) as usize >= len && n > 0 {
                    return Err("dictionary index out of range".into());
                }
                Ok(())
            }
            Page::Skipped(row, n) => {
                keys[row..row + n].fill(0);
                Ok(())
            }
        })?;
        if chunk.rows > 0 && out.dict_len() == 0 {
            return Err(PageError::Corrupt {
                offset: chunk.offset,
                message: "rows but no dictionary entries".into(),
            });
        }
        Ok(())
    }

    /// Decodes a chunk of 64-bit integers (DELTA_BINARY_PACKED or PLAIN) into `out`, as
    /// unsigned (the bits of INT64). `needed` as for [`PageDecoder::dict_chunk`]; skipped
    /// rows get 0.
    pub fn u64_chunk(
        &mut self,
        chunk: &Chunk<'_>,
        needed: Option<&[bool]>,
        out: &mut Values<u64>,
    ) -> Result<(), PageError> {
        let out = out.prepare(chunk.rows);
        self.walk(chunk, needed, &mut |page| {
            let (row, n) = match page {
                Page::Data(_, row, n, _) | Page::Skipped(row, n) => (row, n),
                Page::Dict(..) => {
                    return Err(Fault::Unsupported(
                        "dictionary-encoded 64-bit integers".into(),
                    ))
                }
            };
            u64_values(page, &mut out[row..row + n])
        })
    }

    /// Decodes a chunk of PLAIN 32-bit integers (trawl's TCP flag columns) into `out`.
    pub fn i32_chunk(&mut self, chunk: &Chunk<'_>, out: &mut Values<i32>) -> Result<(), PageError> {
        let out = out.prepare(chunk.rows);
        self.walk(chunk, None, &mut |page| match page {
            Page::Data(PLAIN, row, n, body) => {
                if body.len() / 4 < n {
                    return Err("page shorter than its values".into());
                }
                for (o, c) in out[row..row + n].iter_mut().zip(body.chunks_exact(4)) {
                    *o = i32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
                Ok(())
            }
            Page::Dict(..) | Page::Data(..) | Page::Skipped(..) => Err(Fault::Unsupported(
                "32-bit integers other than PLAIN".into(),
            )),
        })
    }

    /// Walks the pages of `chunk`, handing each (decompressed) to `f` with the rows it holds.
    fn walk(
        &mut self,
        chunk: &Chunk<'_>,
        needed: Option<&[bool]>,
        f: &mut dyn FnMut(Page<'_>) -> Result<(), Fault>,
    ) -> Result<(), PageError> {
        let mut at = PageCursor::default();
        while self.step(chunk, &mut at, needed, f)? {}
        end_check(chunk, &at)
    }

    /// Hands the page at `at` to `f` and moves past it; false at the end of the chunk.
    fn step(
        &mut self,
        chunk: &Chunk<'_>,
        at: &mut PageCursor,
        needed: Option<&[bool]>,
        f: &mut dyn FnMut(Page<'_>) -> Result<(), Fault>,
    ) -> Result<bool, PageError> {
        let bytes = chunk.bytes;
        let pos = at.pos;
        if pos >= bytes.len() {
            return Ok(false);
        }
        let offset = chunk.offset + pos as u64;
        let corrupt = |m: String| PageError::Corrupt { offset, message: m };
        let (h, raw) = page_at(bytes, pos).map_err(corrupt)?;
        at.pos = pos + h.len + h.compressed;
        if h.uncompressed > MAX_PAGE {
            return Err(PageError::Unsupported(format!(
                "a page of {} bytes",
                h.uncompressed
            )));
        }
        let fault = |e: Fault| match e {
            Fault::Unsupported(m) => PageError::Unsupported(m),
            Fault::Corrupt(m) => corrupt(m),
        };
        match h.kind {
            DICTIONARY_PAGE => {
                let body = self
                    .body(chunk.codec, raw, h.uncompressed, true)
                    .map_err(fault)?;
                f(Page::Dict(h.encoding, h.num_values, body)).map_err(fault)?;
            }
            DATA_PAGE | DATA_PAGE_V2 => {
                let (row, n) = (at.row, h.num_values);
                if n > chunk.rows - row {
                    return Err(corrupt(format!(
                        "data pages hold more values than the row group's {} rows",
                        chunk.rows
                    )));
                }
                let wanted =
                    needed.is_none_or(|m| m.get(row..row + n).is_none_or(|s| s.contains(&true)));
                if !wanted {
                    f(Page::Skipped(row, n)).map_err(fault)?;
                } else {
                    let body = if h.kind == DATA_PAGE {
                        self.body(chunk.codec, raw, h.uncompressed, true)
                    } else {
                        if h.levels != 0 || h.num_nulls != 0 {
                            return Err(PageError::Unsupported(
                                "a data page with levels or nulls".into(),
                            ));
                        }
                        self.body(chunk.codec, raw, h.uncompressed, h.v2_compressed)
                    }
                    .map_err(fault)?;
                    f(Page::Data(h.encoding, row, n, body)).map_err(fault)?;
                }
                at.row += n;
            }
            INDEX_PAGE => {}
            k => return Err(corrupt(format!("unknown page type {k}"))),
        }
        Ok(true)
    }

    /// Whether [`PageDecoder::u64_page`] reads every page of `chunk`, judged from the page
    /// headers alone, before any value is decoded: when it does, a page-at-a-time read never
    /// stops half-way with [`PageError::Unsupported`]. A damaged header is
    /// [`PageError::Corrupt`].
    pub fn u64_pages_supported(&self, chunk: &Chunk<'_>) -> Result<bool, PageError> {
        let mut pos = 0;
        while pos < chunk.bytes.len() {
            let (h, _) = page_at(chunk.bytes, pos).map_err(|message| PageError::Corrupt {
                offset: chunk.offset + pos as u64,
                message,
            })?;
            pos += h.len + h.compressed;
            let ok = match h.kind {
                DATA_PAGE => true,
                DATA_PAGE_V2 => h.levels == 0 && h.num_nulls == 0,
                INDEX_PAGE => continue,
                _ => false,
            };
            if !ok
                || h.uncompressed > MAX_PAGE
                || !matches!(h.encoding, PLAIN | DELTA_BINARY_PACKED)
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Decodes the next data page of a chunk of 64-bit integers (as [`PageDecoder::u64_chunk`]
    /// does the whole chunk) into `out`, and returns the rows it holds; `None` after the last
    /// page. `at` starts as `PageCursor::default()`.
    pub fn u64_page(
        &mut self,
        chunk: &Chunk<'_>,
        at: &mut PageCursor,
        needed: Option<&[bool]>,
        out: &mut Values<u64>,
    ) -> Result<Option<std::ops::Range<usize>>, PageError> {
        let mut got = None;
        while got.is_none() {
            let more = self.step(chunk, at, needed, &mut |page| {
                let (row, n) = match page {
                    Page::Data(_, row, n, _) | Page::Skipped(row, n) => (row, n),
                    Page::Dict(..) => return Err(Fault::Unsupported("a dictionary page".into())),
                };
                u64_values(page, out.prepare(n))?;
                got = Some(row..row + n);
                Ok(())
            })?;
            if !more {
                end_check(chunk, at)?;
                return Ok(None);
            }
        }
        Ok(got)
    }

    /// The page body decompressed (or `raw` itself).
    fn body<'b>(
        &'b mut self,
        codec: PageCodec,
        raw: &'b [u8],
        size: usize,
        compressed: bool,
    ) -> Result<&'b [u8], Fault> {
        if codec == PageCodec::None || !compressed {
            return Ok(raw);
        }
        // LZ4 expands at most about 255 times: a header claiming more is damaged (and must
        // not make the decoder allocate for it).
        if codec == PageCodec::Lz4Raw && size > raw.len().saturating_mul(255).saturating_add(64) {
            return Err(Fault::Corrupt(format!(
                "a page of {} bytes cannot decompress to {size}",
                raw.len()
            )));
        }
        if self.page.len() < size {
            self.page.resize(size, 0);
        }
        let dst = &mut self.page[..size];
        let n = match codec {
            PageCodec::None => unreachable!("handled above"),
            PageCodec::Lz4Raw => lz4_flex::block::decompress_into(raw, dst)
                .map_err(|e| Fault::Corrupt(format!("lz4: {e}")))?,
            PageCodec::Zstd => {
                if self.zstd.is_none() {
                    self.zstd = Some(
                        zstd::bulk::Decompressor::new()
                            .map_err(|e| Fault::Unsupported(format!("zstd: {e}")))?,
                    );
                }
                let z = self.zstd.as_mut().ok_or("zstd")?;
                z.decompress_to_buffer(raw, dst)
                    .map_err(|e| Fault::Corrupt(format!("zstd: {e}")))?
            }
        };
        if n != size {
            return Err(Fault::Corrupt(format!(
                "page decompressed to {n} bytes, its header says {size}"
            )));
        }
        Ok(&self.page[..size])
    }
}

/// Where a page-at-a-time read of a chunk stands: the next page header, the rows read.
#[derive(Clone, Copy, Debug, Default)]
pub struct PageCursor {
    pos: usize,
    row: usize,
}

/// The header of the page at `bytes[pos..]` and its (compressed) body.
fn page_at(bytes: &[u8], pos: usize) -> Result<(PageHeader, &[u8]), String> {
    let h = page_header(&bytes[pos..]).map_err(|m| format!("page header: {m}"))?;
    let start = pos + h.len;
    let end = start
        .checked_add(h.compressed)
        .filter(|&e| e <= bytes.len())
        .ok_or("page extends beyond its column chunk")?;
    Ok((h, &bytes[start..end]))
}

/// After the last page: the data pages held a value per row.
fn end_check(chunk: &Chunk<'_>, at: &PageCursor) -> Result<(), PageError> {
    if at.row != chunk.rows {
        return Err(PageError::Corrupt {
            offset: chunk.offset,
            message: format!(
                "the column chunk holds {} values for {} rows",
                at.row, chunk.rows
            ),
        });
    }
    Ok(())
}

/// The values of a data page of 64-bit integers (DELTA_BINARY_PACKED or PLAIN; a skipped
/// page's are 0) into `dst`, one per value.
fn u64_values(page: Page<'_>, dst: &mut [u64]) -> Result<(), Fault> {
    match page {
        Page::Data(DELTA_BINARY_PACKED, _, _, body) => {
            delta_binary_packed(body, dst).map_err(Fault::from)
        }
        Page::Data(PLAIN, _, n, body) => {
            if body.len() / 8 < n {
                return Err("page shorter than its values".into());
            }
            for (o, c) in dst.iter_mut().zip(body.chunks_exact(8)) {
                *o = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            }
            Ok(())
        }
        Page::Data(enc, ..) => Err(Fault::Unsupported(format!(
            "data page encoding {enc} in a 64-bit column"
        ))),
        Page::Skipped(..) => {
            dst.fill(0);
            Ok(())
        }
        Page::Dict(..) => Err(Fault::Unsupported(
            "dictionary-encoded 64-bit integers".into(),
        )),
    }
}

/// A PLAIN BYTE_ARRAY dictionary page of `n` entries: each a 4-byte little-endian length and
/// the bytes.
fn plain_byte_array_dict(
    body: &[u8],
    n: usize,
    spans: &mut Vec<(u32, u32)>,
    data: &mut Vec<u8>,
) -> Result<(), Fault> {
    // Every entry takes at least its length prefix.
    if n > body.len() / 4 {
        return Err("dictionary page shorter than its entries".into());
    }
    // The body is kept whole and the entries point into it (past their prefixes).
    data.extend_from_slice(body);
    spans.reserve(n);
    let mut pos = 0usize;
    for _ in 0..n {
        let len = body
            .get(pos..pos + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
            .ok_or("dictionary entry beyond the page")?;
        let s = pos + 4;
        let e = s
            .checked_add(len)
            .filter(|&e| e <= body.len())
            .ok_or("dictionary entry beyond the page")?;
        spans.push((s as u32, e as u32));
        pos = e;
    }
    Ok(())
}

/// A page header's fields the decoder needs.
#[derive(Debug, Default, PartialEq, Eq)]
struct PageHeader {
    kind: i32,
    uncompressed: usize,
    compressed: usize,
    /// Bytes of the header itself.
    len: usize,
    num_values: usize,
    encoding: i32,
    /// Data page v2: bytes of repetition and definition levels, nulls, whether compressed.
    levels: usize,
    num_nulls: usize,
    v2_compressed: bool,
}

/// Thrift compact protocol field types.
const T_TRUE: u8 = 1;
const T_FALSE: u8 = 2;
const T_BYTE: u8 = 3;
const T_I16: u8 = 4;
const T_I32: u8 = 5;
const T_I64: u8 = 6;
const T_DOUBLE: u8 = 7;
const T_BINARY: u8 = 8;
const T_LIST: u8 = 9;
const T_SET: u8 = 10;
const T_MAP: u8 = 11;
const T_STRUCT: u8 = 12;

/// Nesting deeper than this in a page header is refused (real headers nest 3 levels).
const MAX_DEPTH: u32 = 16;

/// A reader of the Thrift compact protocol over a byte slice.
struct Thrift<'a> {
    b: &'a [u8],
    pos: usize,
}

impl Thrift<'_> {
    fn byte(&mut self) -> Result<u8, &'static str> {
        let v = *self.b.get(self.pos).ok_or("truncated")?;
        self.pos += 1;
        Ok(v)
    }

    fn varint(&mut self) -> Result<u64, &'static str> {
        uleb(self.b, &mut self.pos)
    }

    fn zigzag(&mut self) -> Result<i64, &'static str> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn i32(&mut self, ty: u8) -> Result<i32, &'static str> {
        if ty != T_I32 {
            return Err("field of an unexpected type");
        }
        i32::try_from(self.zigzag()?).map_err(|_| "integer out of range")
    }

    /// A non-negative 32-bit integer field.
    fn size(&mut self, ty: u8) -> Result<usize, &'static str> {
        usize::try_from(self.i32(ty)?).map_err(|_| "negative size")
    }

    /// The next field's id and type, or `None` at the end of the struct.
    fn field(&mut self, last: &mut i16) -> Result<Option<(i16, u8)>, &'static str> {
        let h = self.byte()?;
        if h == 0 {
            return Ok(None);
        }
        let (ty, delta) = (h & 0x0f, h >> 4);
        let id = if delta == 0 {
            i16::try_from(self.zigzag()?).map_err(|_| "field id out of range")?
        } else {
            last.checked_add(i16::from(delta))
                .ok_or("field id out of range")?
        };
        *last = id;
        Ok(Some((id, ty)))
    }

    /// Skips a value of type `ty` (`in_list`: booleans take a byte of their own).
    fn skip(&mut self, ty: u8, in_list: bool, depth: u32) -> Result<(), &'static str> {
        if depth > MAX_DEPTH {
            return Err("nested too deeply");
        }
        let remaining = self.b.len().saturating_sub(self.pos);
        match ty {
            T_TRUE | T_FALSE => {
                if in_list {
                    self.byte()?;
                }
            }
            T_BYTE => {
                self.byte()?;
            }
            T_I16 | T_I32 | T_I64 => {
                self.varint()?;
            }
            T_DOUBLE => {
                if remaining < 8 {
                    return Err("truncated");
                }
                self.pos += 8;
            }
            T_BINARY => {
                let n = self.varint()?;
                if n > remaining as u64 {
                    return Err("truncated");
                }
                self.pos += n as usize;
            }
            T_LIST | T_SET => {
                let h = self.byte()?;
                let et = h & 0x0f;
                let mut n = u64::from(h >> 4);
                if n == 15 {
                    n = self.varint()?;
                }
                // Every element takes at least a byte (except booleans outside lists).
                if n > remaining as u64 {
                    return Err("truncated");
                }
                for _ in 0..n {
                    self.skip(et, true, depth + 1)?;
                }
            }
            T_MAP => {
                let n = self.varint()?;
                if n > remaining as u64 {
                    return Err("truncated");
                }
                if n > 0 {
                    let kv = self.byte()?;
                    for _ in 0..n {
                        self.skip(kv >> 4, true, depth + 1)?;
                        self.skip(kv & 0x0f, true, depth + 1)?;
                    }
                }
            }
            T_STRUCT => {
                let mut last = 0;
                while let Some((_, t)) = self.field(&mut last)? {
                    self.skip(t, false, depth + 1)?;
                }
            }
            _ => return Err("unknown field type"),
        }
        Ok(())
    }
}

/// Parses a `PageHeader` (Thrift compact) at the start of `buf`.
fn page_header(buf: &[u8]) -> Result<PageHeader, &'static str> {
    let mut t = Thrift { b: buf, pos: 0 };
    let mut h = PageHeader {
        kind: -1,
        v2_compressed: true,
        ..PageHeader::default()
    };
    let (mut unc, mut comp, mut values) = (None, None, None);
    let mut last = 0;
    while let Some((id, ty)) = t.field(&mut last)? {
        match (id, ty) {
            (1, _) => h.kind = t.i32(ty)?,
            (2, _) => unc = Some(t.size(ty)?),
            (3, _) => comp = Some(t.size(ty)?),
            // DataPageHeader, DictionaryPageHeader, DataPageHeaderV2.
            (5 | 7 | 8, T_STRUCT) => {
                let mut last = 0;
                while let Some((fid, fty)) = t.field(&mut last)? {
                    match (id, fid) {
                        (_, 1) => values = Some(t.size(fty)?),
                        (5 | 7, 2) | (8, 4) => h.encoding = t.i32(fty)?,
                        (8, 2) => h.num_nulls = t.size(fty)?,
                        (8, 5 | 6) => {
                            h.levels = h.levels.saturating_add(t.size(fty)?);
                        }
                        (8, 7) if fty == T_TRUE || fty == T_FALSE => {
                            h.v2_compressed = fty == T_TRUE;
                        }
                        _ => t.skip(fty, false, 1)?,
                    }
                }
            }
            _ => t.skip(ty, false, 0)?,
        }
    }
    h.uncompressed = unc.ok_or("no uncompressed size")?;
    h.compressed = comp.ok_or("no compressed size")?;
    if matches!(h.kind, DATA_PAGE | DICTIONARY_PAGE | DATA_PAGE_V2) {
        h.num_values = values.ok_or("no value count")?;
    }
    if h.levels > h.uncompressed {
        return Err("levels longer than the page");
    }
    h.uncompressed -= h.levels;
    h.len = t.pos;
    Ok(h)
}

/// An unsigned LEB128 varint at `*pos`.
#[inline]
fn uleb(buf: &[u8], pos: &mut usize) -> Result<u64, &'static str> {
    let mut v = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *buf.get(*pos).ok_or("truncated varint")?;
        *pos += 1;
        if shift == 63 && b > 1 {
            return Err("varint overflows 64 bits");
        }
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(v);
        }
        shift += 7;
        if shift > 63 {
            return Err("varint overflows 64 bits");
        }
    }
}

/// Unpacks 32 values of `W` bits each (least significant bit first, Parquet's bit packing)
/// from the start of `buf` (its first `4 * W` bytes; the rest is slack) and hands them to
/// `f(j, value)` in order. With `W` a constant every shift and offset is one, so the loop
/// unrolls to straight-line code.
#[inline(always)]
fn unpack32<const W: usize>(buf: &[u8; PAD], mut f: impl FnMut(usize, u64)) {
    if W == 0 {
        for j in 0..32 {
            f(j, 0);
        }
        return;
    }
    let mask = u64::MAX >> (64 - W);
    for j in 0..32 {
        let bit = j * W;
        let (b, s) = (bit / 8, bit % 8);
        let w = &buf[b..b + 8];
        let mut v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]) >> s;
        if s + W > 64 {
            v |= u64::from(buf[b + 8]) << (64 - s);
        }
        f(j, v & mask);
    }
}

/// 32 dictionary indices of `W` bits.
fn indices32<const W: usize>(buf: &[u8; PAD], out: &mut [u32; 32]) {
    unpack32::<W>(buf, |j, v| out[j] = v as u32);
}

/// 32 DELTA_BINARY_PACKED values of a miniblock of `W`-bit deltas: each the previous plus
/// `min_delta` plus its delta. Returns the last.
fn deltas32<const W: usize>(
    buf: &[u8; PAD],
    mut last: u64,
    min_delta: u64,
    out: &mut [u64; 32],
) -> u64 {
    unpack32::<W>(buf, |j, v| {
        last = last.wrapping_add(min_delta).wrapping_add(v);
        out[j] = last;
    });
    last
}

/// Input of [`unpack32`]: 32 values of up to 64 bits plus a word of slack.
const PAD: usize = 4 * 64 + 8;

type Indices32 = fn(&[u8; PAD], &mut [u32; 32]);
type Deltas32 = fn(&[u8; PAD], u64, u64, &mut [u64; 32]) -> u64;

macro_rules! per_width {
    ($f:ident as $t:ty: $($w:literal)*) => { [$($f::<$w> as $t,)*] };
}

/// [`indices32`] for each bit width 0..=32.
static INDICES32: [Indices32; 33] = per_width!(indices32 as Indices32:
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
);

/// [`deltas32`] for each bit width 0..=64.
static DELTAS32: [Deltas32; 65] = per_width!(deltas32 as Deltas32:
    0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
    33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61 62
    63 64
);

/// The input of 32 `width`-bit values at `src[off..]`, of which the first `take` are needed:
/// the bytes in place when the page has room past them, else a zero-padded copy in `pad`.
#[inline]
fn window<'b>(
    src: &'b [u8],
    off: usize,
    width: usize,
    take: usize,
    pad: &'b mut [u8; PAD],
) -> Result<&'b [u8; PAD], &'static str> {
    if let Some(w) = src.get(off..off.saturating_add(PAD)) {
        return Ok(w.try_into().unwrap_or(pad));
    }
    let rest = src.get(off..).unwrap_or(&[]);
    let avail = rest.len().min(4 * width);
    if avail * 8 < take * width {
        return Err("bit-packed values beyond the page");
    }
    // Bytes past `avail` are stale but only feed values past `take`.
    pad[..avail].copy_from_slice(&rest[..avail]);
    Ok(pad)
}

/// Decodes `out.len()` values of Parquet's RLE/bit-packed hybrid encoding of `width`-bit
/// integers (without the length prefix: as in a dictionary-indices data page).
fn rle_hybrid(buf: &[u8], width: usize, out: &mut [u32]) -> Result<(), &'static str> {
    if width > 32 {
        return Err("bit width beyond 32");
    }
    let unpack = INDICES32[width];
    let n = out.len();
    let vbytes = width.div_ceil(8);
    let (mut pos, mut i) = (0usize, 0usize);
    let mut pad = [0u8; PAD];
    let mut tail = [0u32; 32];
    while i < n {
        let h = uleb(buf, &mut pos)?;
        if h & 1 == 1 {
            // Bit-packed: (h >> 1) groups of 8 values.
            let groups = usize::try_from(h >> 1).map_err(|_| "run too long")?;
            let values = groups.checked_mul(8).ok_or("run too long")?;
            let bytes = groups.checked_mul(width).ok_or("run too long")?;
            let take = values.min(n - i);
            let mut k = 0;
            while k < take {
                let c = (take - k).min(32);
                // k is a multiple of 32: 4 * width bytes per 32 values.
                let w = window(buf, pos + k / 32 * 4 * width, width, c, &mut pad)?;
                match out.get_mut(i + k..i + k + 32) {
                    Some(dst) if c == 32 => unpack(w, dst.try_into().unwrap_or(&mut tail)),
                    _ => {
                        unpack(w, &mut tail);
                        out[i + k..i + k + c].copy_from_slice(&tail[..c]);
                    }
                }
                k += c;
            }
            i += take;
            pos = pos.saturating_add(bytes);
        } else {
            let count = h >> 1;
            if count == 0 {
                return Err("empty run");
            }
            let v = buf
                .get(pos..pos + vbytes)
                .ok_or("run value beyond the page")?;
            pos += vbytes;
            let v = v.iter().rev().fold(0u64, |acc, &b| acc << 8 | u64::from(b));
            if v >> width != 0 {
                return Err("run value wider than the bit width");
            }
            let take = usize::try_from(count).unwrap_or(usize::MAX).min(n - i);
            out[i..i + take].fill(v as u32);
            i += take;
        }
    }
    Ok(())
}

/// Largest DELTA_BINARY_PACKED block accepted (writers use 128 or 256 values).
const MAX_DELTA_BLOCK: u64 = 1 << 16;

/// Decodes a DELTA_BINARY_PACKED stream of exactly `out.len()` 64-bit values (wrapping
/// arithmetic, as the bits of INT64).
fn delta_binary_packed(buf: &[u8], out: &mut [u64]) -> Result<(), &'static str> {
    let mut pos = 0usize;
    let block = uleb(buf, &mut pos)?;
    let minis = uleb(buf, &mut pos)?;
    let total = uleb(buf, &mut pos)?;
    let first = zigzag(uleb(buf, &mut pos)?);
    if total != out.len() as u64 {
        return Err("value count differs from the page header's");
    }
    if block == 0
        || block > MAX_DELTA_BLOCK
        || !block.is_multiple_of(128)
        || minis == 0
        || !block.is_multiple_of(minis)
        || !(block / minis).is_multiple_of(32)
    {
        return Err("invalid block layout");
    }
    let (minis, per_mini) = (minis as usize, (block / minis) as usize);
    let n = out.len();
    if n == 0 {
        return Ok(());
    }
    out[0] = first;
    let mut last = first;
    let mut i = 1;
    let mut pad = [0u8; PAD];
    let mut tail = [0u64; 32];
    while i < n {
        let min_delta = zigzag(uleb(buf, &mut pos)?);
        let widths = buf
            .get(pos..pos + minis)
            .ok_or("miniblock bit widths beyond the page")?;
        pos += minis;
        for &w in widths {
            if i >= n {
                break;
            }
            let w = usize::from(w);
            let unpack = *DELTAS32.get(w).ok_or("miniblock bit width beyond 64")?;
            let take = per_mini.min(n - i);
            let mut k = 0;
            while k < take {
                let c = (take - k).min(32);
                let src = window(buf, pos + k / 32 * 4 * w, w, c, &mut pad)?;
                match out.get_mut(i..i + 32) {
                    Some(dst) if c == 32 => {
                        last = unpack(src, last, min_delta, dst.try_into().unwrap_or(&mut tail));
                    }
                    _ => {
                        unpack(src, last, min_delta, &mut tail);
                        out[i..i + c].copy_from_slice(&tail[..c]);
                        last = tail[c - 1];
                    }
                }
                i += c;
                k += c;
            }
            // A miniblock is padded to its full size, except that none follow the last one.
            pos = pos.saturating_add(per_mini / 8 * w);
        }
    }
    Ok(())
}

#[inline]
fn zigzag(v: u64) -> u64 {
    (v >> 1) ^ (v & 1).wrapping_neg()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs `values` of `width` bits, LSB first.
    fn pack(values: &[u64], width: usize) -> Vec<u8> {
        let mut out = vec![0u8; (values.len() * width).div_ceil(8) + 8];
        for (j, &v) in values.iter().enumerate() {
            for b in 0..width {
                if v >> b & 1 == 1 {
                    let bit = j * width + b;
                    out[bit / 8] |= 1 << (bit % 8);
                }
            }
        }
        out.truncate((values.len() * width).div_ceil(8));
        out
    }

    fn uleb_bytes(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }

    #[test]
    fn unpack_every_width() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for w in 0..=64usize {
            let vals: Vec<u64> = (0..32)
                .map(|_| {
                    trawl_testkit::xorshift(&mut seed);
                    if w == 64 {
                        seed
                    } else {
                        seed & ((1u64 << w) - 1)
                    }
                })
                .collect();
            let packed = pack(&vals, w);
            let mut pad = [0u8; PAD];
            let mut out = [0u64; 32];
            let src = window(&packed, 0, w, 32, &mut pad).unwrap();
            // Deltas from 0 with a minimum of 0: the running sums of the values.
            DELTAS32[w](src, 0, 0, &mut out);
            let sums: Vec<u64> = vals
                .iter()
                .scan(0u64, |a, &v| {
                    *a = a.wrapping_add(v);
                    Some(*a)
                })
                .collect();
            assert_eq!(&out[..], &sums[..], "width {w}");
            if w <= 32 {
                let mut idx = [0u32; 32];
                INDICES32[w](src, &mut idx);
                assert!(
                    idx.iter().zip(&vals).all(|(&a, &b)| u64::from(a) == b),
                    "{w}"
                );
            }
        }
    }

    #[test]
    fn parse_rle_hybrid() {
        // RLE run of 10 × 5 (width 3: one value byte), then one bit-packed group of 8.
        let mut buf = vec![10 << 1, 5];
        buf.push(1 << 1 | 1);
        buf.extend(pack(&[0, 1, 2, 3, 4, 5, 6, 7], 3));
        let mut out = vec![0u32; 18];
        rle_hybrid(&buf, 3, &mut out).unwrap();
        assert_eq!(out, [5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 0, 1, 2, 3, 4, 5, 6, 7]);
        // Fewer values wanted than the runs hold.
        let mut out = vec![0u32; 12];
        rle_hybrid(&buf, 3, &mut out).unwrap();
        assert_eq!(out[10..], [0, 1]);
        // Bit-packed runs longer than 32 values, width 13.
        let vals: Vec<u64> = (0..200).map(|i| (i * 37) % 8000).collect();
        let mut buf = uleb_bytes(25 << 1 | 1);
        buf.extend(pack(&vals, 13));
        let mut out = vec![0u32; 200];
        rle_hybrid(&buf, 13, &mut out).unwrap();
        assert!(out.iter().zip(&vals).all(|(&a, &b)| u64::from(a) == b));
        // Width 0: a single dictionary entry.
        let mut out = vec![9u32; 5];
        rle_hybrid(&[5 << 1], 0, &mut out).unwrap();
        assert_eq!(out, [0; 5]);
    }

    #[test]
    fn truncated_rle_hybrid() {
        let mut buf = vec![1 << 1 | 1];
        buf.extend(pack(&[1, 2, 3, 4, 5, 6, 7, 0], 3));
        let mut out = vec![0u32; 8];
        for cut in 0..buf.len() {
            assert!(rle_hybrid(&buf[..cut], 3, &mut out).is_err(), "{cut}");
        }
        assert_eq!(rle_hybrid(&[0], 3, &mut out), Err("empty run"));
        assert_eq!(
            rle_hybrid(&[2, 9], 3, &mut out),
            Err("run value wider than the bit width")
        );
        assert!(rle_hybrid(&[2, 0], 33, &mut out).is_err());
    }

    fn delta_encode(vals: &[u64], block: usize, minis: usize) -> Vec<u8> {
        let mut out = uleb_bytes(block as u64);
        out.extend(uleb_bytes(minis as u64));
        out.extend(uleb_bytes(vals.len() as u64));
        let zz = |v: i64| ((v << 1) ^ (v >> 63)) as u64;
        out.extend(uleb_bytes(zz(vals.first().copied().unwrap_or(0) as i64)));
        let deltas: Vec<i64> = vals
            .windows(2)
            .map(|w| w[1].wrapping_sub(w[0]) as i64)
            .collect();
        let per = block / minis;
        for b in deltas.chunks(block) {
            let min = *b.iter().min().unwrap();
            out.extend(uleb_bytes(zz(min)));
            let rel: Vec<u64> = b.iter().map(|&d| d.wrapping_sub(min) as u64).collect();
            let minis_used = rel.chunks(per).count();
            let widths: Vec<usize> = (0..minis)
                .map(|m| {
                    rel.chunks(per)
                        .nth(m)
                        .map_or(0, |c| 64 - c.iter().max().unwrap().leading_zeros() as usize)
                })
                .collect();
            out.extend(widths.iter().map(|&w| w as u8));
            for (m, c) in rel.chunks(per).enumerate().take(minis_used) {
                let mut c = c.to_vec();
                c.resize(per, 0);
                out.extend(pack(&c, widths[m]));
            }
        }
        out
    }

    #[test]
    fn parse_delta_binary_packed() {
        let cases: Vec<Vec<u64>> = vec![
            vec![],
            vec![42],
            (0..1000).map(|i| i * i).collect(),
            (0..300)
                .map(|i| if i % 2 == 0 { u64::MAX - i } else { i })
                .collect(),
            (0..129)
                .map(|i| 1_763_251_200_000_000_000 + i * 7_919)
                .collect(),
        ];
        for vals in &cases {
            for (block, minis) in [(128, 4), (256, 8), (128, 1)] {
                let enc = delta_encode(vals, block, minis);
                let mut out = vec![0u64; vals.len()];
                delta_binary_packed(&enc, &mut out).unwrap();
                assert_eq!(&out, vals, "{block}/{minis}");
                // Every truncation is an error (the full stream is needed for its values),
                // never a panic.
                for cut in 0..enc.len() {
                    let _ = delta_binary_packed(&enc[..cut], &mut out);
                }
            }
        }
        let mut out = vec![0u64; 3];
        assert!(delta_binary_packed(&delta_encode(&[1, 2], 128, 4), &mut out).is_err());
        // Block layouts that break the format's rules.
        for (b, m) in [(0u64, 1u64), (100, 4), (128, 0), (128, 3), (128, 8)] {
            let mut enc = uleb_bytes(b);
            enc.extend(uleb_bytes(m));
            enc.extend([3, 2]);
            assert!(delta_binary_packed(&enc, &mut out).is_err(), "{b}/{m}");
        }
    }

    /// A Thrift compact `PageHeader` for a v1 data page (or a dictionary page).
    fn header(kind: i32, unc: usize, comp: usize, values: usize, enc: i32) -> Vec<u8> {
        let zz = |v: i64| uleb_bytes(((v << 1) ^ (v >> 63)) as u64);
        let mut h = vec![0x15];
        h.extend(zz(i64::from(kind)));
        h.push(0x15);
        h.extend(zz(unc as i64));
        h.push(0x15);
        h.extend(zz(comp as i64));
        // Field 5 (data page header) or 7 (dictionary page header), a struct.
        h.push(if kind == DICTIONARY_PAGE { 0x4c } else { 0x2c });
        h.push(0x15);
        h.extend(zz(values as i64));
        h.push(0x15);
        h.extend(zz(i64::from(enc)));
        h.push(0x00);
        h.push(0x00);
        h
    }

    #[test]
    fn parse_page_headers() {
        let h = header(DATA_PAGE, 100, 90, 12, RLE_DICTIONARY);
        let p = page_header(&h).unwrap();
        assert_eq!(
            (
                p.kind,
                p.uncompressed,
                p.compressed,
                p.num_values,
                p.encoding,
                p.len
            ),
            (DATA_PAGE, 100, 90, 12, RLE_DICTIONARY, h.len())
        );
        for cut in 0..h.len() {
            assert!(page_header(&h[..cut]).is_err(), "{cut}");
        }
        // Unknown fields of every type are skipped: field 9 a list of two structs, 10 a
        // binary, 11 a double, 12 a map.
        let mut x = h[..h.len() - 1].to_vec();
        x.extend([0x19, 0x2c, 0x00, 0x00]);
        x.extend([0x18, 0x02, b'h', b'i']);
        x.extend([0x17, 0, 0, 0, 0, 0, 0, 0, 0]);
        x.extend([0x1b, 0x01, 0x55, 0x02, 0x04]);
        x.push(0x00);
        let q = page_header(&x).unwrap();
        assert_eq!((q.num_values, q.len), (12, x.len()));
        // Deep nesting is refused, not recursed into.
        let mut deep = vec![0x1c];
        deep.extend(std::iter::repeat_n(0x1c, 100));
        assert!(page_header(&deep).is_err());
    }

    #[test]
    fn chunks_of_dictionary_pages() {
        // Dictionary page: "a", "bc"; data page: indices 1, 0, 1 (width 1, one RLE group).
        let dict: Vec<u8> = [&1u32.to_le_bytes()[..], b"a", &2u32.to_le_bytes(), b"bc"].concat();
        let mut data = vec![1u8, 1 << 1 | 1];
        data.extend(pack(&[1, 0, 1, 0, 0, 0, 0, 0], 1));
        let mut bytes = header(DICTIONARY_PAGE, dict.len(), dict.len(), 2, PLAIN);
        bytes.extend(&dict);
        bytes.extend(header(DATA_PAGE, data.len(), data.len(), 3, RLE_DICTIONARY));
        bytes.extend(&data);
        let chunk = Chunk {
            bytes: &bytes,
            offset: 1000,
            codec: PageCodec::None,
            rows: 3,
        };
        let mut d = PageDecoder::default();
        let mut out = DictColumn::default();
        d.dict_chunk(&chunk, DictType::Bytes, None, &mut out)
            .unwrap();
        assert_eq!(out.keys.as_slice(), [1, 0, 1]);
        assert_eq!(
            (out.bytes(0), out.bytes(1), out.dict_len()),
            (&b"a"[..], &b"bc"[..], 2)
        );
        // The data page skipped: indices 0.
        d.dict_chunk(&chunk, DictType::Bytes, Some(&[false; 3]), &mut out)
            .unwrap();
        assert_eq!(out.keys.as_slice(), [0, 0, 0]);
        // More rows than values, and fewer.
        for rows in [2, 4] {
            let e = d
                .dict_chunk(&Chunk { rows, ..chunk }, DictType::Bytes, None, &mut out)
                .unwrap_err();
            assert!(matches!(e, PageError::Corrupt { .. }), "{e}");
        }
        // An index beyond the dictionary.
        let mut wide = vec![2u8, 1 << 1 | 1];
        wide.extend(pack(&[1, 3, 0, 0, 0, 0, 0, 0], 2));
        let mut two = header(DICTIONARY_PAGE, dict.len(), dict.len(), 2, PLAIN);
        two.extend(&dict);
        two.extend(header(DATA_PAGE, wide.len(), wide.len(), 3, RLE_DICTIONARY));
        two.extend(&wide);
        let e = d
            .dict_chunk(
                &Chunk {
                    bytes: &two,
                    ..chunk
                },
                DictType::Bytes,
                None,
                &mut out,
            )
            .unwrap_err();
        assert!(e.to_string().contains("out of range"), "{e}");
        // Every truncation: an error with the offset of the page at fault, never a panic.
        for cut in 0..bytes.len() {
            let e = d
                .dict_chunk(
                    &Chunk {
                        bytes: &bytes[..cut],
                        ..chunk
                    },
                    DictType::Bytes,
                    None,
                    &mut out,
                )
                .unwrap_err();
            match e {
                PageError::Corrupt { offset, .. } => assert!(offset >= 1000, "{offset}"),
                PageError::Unsupported(m) => panic!("{cut}: {m}"),
            }
        }
        // A PLAIN data page: not handled here, for the general reader.
        let mut plain = header(DICTIONARY_PAGE, dict.len(), dict.len(), 2, PLAIN);
        plain.extend(&dict);
        plain.extend(header(DATA_PAGE, 4, 4, 1, PLAIN));
        plain.extend(1u32.to_le_bytes());
        let e = d
            .dict_chunk(
                &Chunk {
                    bytes: &plain,
                    rows: 1,
                    ..chunk
                },
                DictType::Bytes,
                None,
                &mut out,
            )
            .unwrap_err();
        assert!(matches!(e, PageError::Unsupported(_)), "{e}");
    }
}
