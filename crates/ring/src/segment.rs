//! The mapping a ring lives in: anonymous for an in-process ring, a file (normally under
//! `/dev/shm`) for a shared one. Everything else in the crate reaches the ring through a
//! `Segment`, so both kinds share one code path.
use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use memmap2::{MmapOptions, MmapRaw};

use crate::layout::{self, Header, RecordHeader, MAGIC, REC_HDR, VERSION};
use crate::Error;

/// A mapped ring: header plus data area.
pub(crate) struct Segment {
    /// Keeps the mapping alive; all access goes through `base`.
    _map: MmapRaw,
    base: *mut u8,
    data: *mut u8,
    pub(crate) cap: u64,
    pub(crate) mask: u64,
    pub(crate) max_record: u32,
    /// The file a shared ring lives in.
    pub(crate) path: Option<PathBuf>,
}

// SAFETY: a `Segment` is a pointer into a mapping it owns (`_map`), which stays valid until the
// segment drops. All shared mutable state in the mapping is either atomics (the header) or data
// bytes whose access is governed by the ring protocol (a byte range is written only by the single
// producer and only while no listener holds a lease on it), so using the segment from several
// threads is sound.
unsafe impl Send for Segment {}
// SAFETY: see `Send` above; `&Segment` only hands out `&Header` (atomics) and raw data pointers
// whose use is `unsafe` at the call site.
unsafe impl Sync for Segment {}

impl Segment {
    /// Maps a fresh, zeroed anonymous ring of `total` bytes.
    pub(crate) fn anonymous(total: usize) -> Result<MmapRaw, Error> {
        // Populated up front, like the kernel's capture ring: page faults belong to start-up,
        // not to the first pass of capture.
        let map = MmapOptions::new()
            .len(total)
            .populate()
            .map_anon()
            .map_err(|source| Error::Io {
                path: PathBuf::from("<anonymous mapping>"),
                source,
            })?;
        Ok(map.into())
    }

    /// Maps `file` (already `total` bytes long) read-write and shared.
    pub(crate) fn map_file(file: &File, path: &Path) -> Result<MmapRaw, Error> {
        MmapOptions::new()
            .populate()
            .map_raw(file)
            .map_err(|source| Error::Io {
                path: path.to_path_buf(),
                source,
            })
    }

    /// Writes a fresh header into `map` (zeroed, at least `header_len + cap` bytes) and wraps
    /// it. The magic is stored last, with release ordering, so a process that sees it sees a
    /// complete header.
    pub(crate) fn init(
        map: MmapRaw,
        path: Option<PathBuf>,
        header_len: usize,
        cap: usize,
        max_record: u32,
    ) -> Self {
        debug_assert!(map.len() >= header_len + cap);
        // SAFETY: the mapping is at least a header long and page aligned; `Header` is atomics
        // only. Nobody else has the mapping yet.
        let h = unsafe { &*(map.as_ptr() as *const Header) };
        let pid = crate::sys::own_pid();
        h.version.store(VERSION, Ordering::Relaxed);
        h.header_len.store(header_len as u32, Ordering::Relaxed);
        h.capacity.store(cap as u64, Ordering::Relaxed);
        h.max_record.store(max_record, Ordering::Relaxed);
        h.slot_count.store(layout::SLOTS as u32, Ordering::Relaxed);
        h.record_header_len.store(REC_HDR as u32, Ordering::Relaxed);
        h.producer_pid.store(pid, Ordering::Relaxed);
        h.producer_start.store(
            crate::sys::process_start(pid).unwrap_or(0),
            Ordering::Relaxed,
        );
        for slot in &h.slots {
            slot.cursor.store(layout::CURSOR_LEFT, Ordering::Relaxed);
        }
        h.magic.store(MAGIC, Ordering::Release);
        Self::from_map(map, path)
    }

    /// Wraps a mapping whose header `init` wrote or `open` validated.
    fn from_map(map: MmapRaw, path: Option<PathBuf>) -> Self {
        let base = map.as_mut_ptr();
        // SAFETY: the mapping starts with a `Header` (size checked by the callers) and is page
        // aligned, so the reference is aligned and in bounds; `Header` is atomics only.
        let h = unsafe { &*(base as *const Header) };
        let header_len = h.header_len.load(Ordering::Relaxed) as usize;
        let cap = h.capacity.load(Ordering::Relaxed);
        let max_record = h.max_record.load(Ordering::Relaxed);
        // SAFETY: callers checked that `header_len + cap` bytes are mapped.
        let data = unsafe { base.add(header_len) };
        Segment {
            _map: map,
            base,
            data,
            cap,
            mask: cap - 1,
            max_record,
            path,
        }
    }

    /// Opens and validates an existing shared ring file.
    pub(crate) fn open(path: &Path) -> Result<Self, Error> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        let file_len = file.metadata().map_err(io)?.len();
        let not_a_ring = |detail: String| Error::NotARing {
            path: path.to_path_buf(),
            detail,
        };
        if file_len < std::mem::size_of::<Header>() as u64 {
            return Err(not_a_ring(format!(
                "{file_len} bytes, shorter than the header"
            )));
        }
        let map = Self::map_file(&file, path)?;
        // SAFETY: the file is at least one header long (checked above) and the mapping is page
        // aligned; `Header` is atomics only, valid for any bytes.
        let h = unsafe { &*(map.as_ptr() as *const Header) };
        let magic = h.magic.load(Ordering::Acquire);
        if magic != MAGIC {
            return Err(not_a_ring(format!(
                "magic {:02x?}, expected \"TRAWLRNG\"",
                magic.to_ne_bytes()
            )));
        }
        let version = h.version.load(Ordering::Relaxed);
        if version != VERSION {
            return Err(not_a_ring(format!(
                "layout version {version}, this build reads {VERSION}"
            )));
        }
        let header_len = h.header_len.load(Ordering::Relaxed) as u64;
        let cap = h.capacity.load(Ordering::Relaxed);
        let max_record = h.max_record.load(Ordering::Relaxed) as u64;
        if header_len < std::mem::size_of::<Header>() as u64
            || !cap.is_power_of_two()
            || cap < layout::MIN_CAPACITY as u64
            || cap > layout::MAX_CAPACITY as u64
            || header_len + cap != file_len
            || max_record < REC_HDR as u64 + 8
            || max_record > cap / 4
            || h.record_header_len.load(Ordering::Relaxed) as usize != REC_HDR
            || h.slot_count.load(Ordering::Relaxed) as usize != layout::SLOTS
        {
            return Err(not_a_ring(format!(
                "inconsistent header (header_len {header_len}, capacity {cap}, max_record \
                 {max_record}, file {file_len} bytes)"
            )));
        }
        Ok(Self::from_map(map, Some(path.to_path_buf())))
    }

    /// The header.
    #[inline]
    pub(crate) fn header(&self) -> &Header {
        // SAFETY: `base` points at the start of a live mapping that begins with a `Header`
        // (checked when the segment was made); `Header` holds only atomics, so shared access from
        // several threads and processes is sound.
        unsafe { &*(self.base as *const Header) }
    }

    /// Capacity as `usize`.
    #[inline]
    pub(crate) fn cap_usize(&self) -> usize {
        self.cap as usize
    }

    /// Reads the record header at data offset `o`.
    ///
    /// # Safety
    /// `o` must be a multiple of 8 with `o + REC_HDR <= cap`, and no one may be writing those
    /// bytes (the caller holds a lease on them, or is the producer).
    #[inline]
    pub(crate) unsafe fn read_header(&self, o: usize) -> RecordHeader {
        debug_assert!(o.is_multiple_of(8) && o + REC_HDR <= self.cap_usize());
        // SAFETY: in bounds and 8-aligned per the contract (the data area is page aligned), and
        // `RecordHeader` is plain integers, valid for any bytes.
        unsafe { std::ptr::read(self.data.add(o) as *const RecordHeader) }
    }

    /// The bytes `o..o + len` of the data area.
    ///
    /// # Safety
    /// `o + len <= cap`, and for as long as the returned slice lives, no one may write those bytes:
    /// the caller holds a lease that keeps the producer away from them.
    #[inline]
    pub(crate) unsafe fn bytes(&self, o: usize, len: usize) -> &[u8] {
        debug_assert!(o + len <= self.cap_usize());
        // SAFETY: per the contract the range is in bounds and not written while borrowed.
        unsafe { std::slice::from_raw_parts(self.data.add(o), len) }
    }

    /// Raw pointer to data offset `o`, for the producer's writes.
    ///
    /// # Safety
    /// `o <= cap`.
    #[inline]
    pub(crate) unsafe fn data_ptr(&self, o: usize) -> *mut u8 {
        // SAFETY: in bounds per the contract.
        unsafe { self.data.add(o) }
    }

    /// What is at position `p`: a record (its header validated), or the end of the buffer's
    /// usable part (a wrap marker, or a tail too short for a header), in which case the next
    /// record starts `skip` bytes further, at offset 0.
    ///
    /// # Safety
    /// Position `p` must be published and not being written (the caller holds a lease covering
    /// it, or is the producer).
    #[inline]
    pub(crate) unsafe fn at(&self, p: u64) -> Result<At, Error> {
        let o = (p & self.mask) as usize;
        let tail = self.cap_usize() - o;
        if tail < REC_HDR {
            return Ok(At::Wrap(tail as u64));
        }
        // SAFETY: `o` is 8-aligned (positions are) with a whole header before the end, and the
        // caller's contract keeps writers away.
        let h = unsafe { self.read_header(o) };
        if h.len == 0 {
            return Ok(At::Wrap(tail as u64));
        }
        if h.len as usize != layout::record_len(h.caplen as usize)
            || h.len > self.max_record
            || h.len as usize > tail
        {
            return Err(Error::Corrupt {
                position: p,
                detail: "record header length out of bounds",
            });
        }
        Ok(At::Record(h))
    }

    /// Walks whole records from `from` (a record boundary) to the first boundary at or after
    /// `target`, never past `limit` (a published boundary). Returns that boundary and the records
    /// and captured bytes passed over.
    ///
    /// # Safety
    /// `from..limit` must be published and not being written.
    pub(crate) unsafe fn walk(&self, from: u64, target: u64, limit: u64) -> Result<Walk, Error> {
        let mut w = Walk {
            pos: from,
            records: 0,
            bytes: 0,
        };
        while w.pos < target && w.pos < limit {
            // SAFETY: `w.pos` lies in `from..limit`, covered by the caller's contract.
            match unsafe { self.at(w.pos)? } {
                At::Wrap(skip) => w.pos += skip,
                At::Record(h) => {
                    w.pos += h.len as u64;
                    w.records += 1;
                    w.bytes += h.caplen as u64;
                }
            }
        }
        if w.pos > limit {
            return Err(Error::Corrupt {
                position: w.pos,
                detail: "record runs past the write position",
            });
        }
        Ok(w)
    }
}

/// What a position holds.
#[derive(Clone, Copy, Debug)]
pub(crate) enum At {
    /// A record.
    Record(RecordHeader),
    /// No record before the end of the buffer: skip this many bytes to offset 0.
    Wrap(u64),
}

/// The result of [`Segment::walk`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Walk {
    /// The boundary reached.
    pub pos: u64,
    /// Records passed over.
    pub records: u64,
    /// Their captured bytes.
    pub bytes: u64,
}
