//! Retrieval: the packets of a time range (and interfaces, and a BPF filter) in time order,
//! reading only the chunks the indexes say can hold them (M³Omon's offline packet loop).
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use trawl_bpf::FilterSet;
use trawl_capture::LinkType;

use crate::error::Error;
use crate::index::SegmentIndex;
use crate::layout::{has_segments, index_path, list_segments_between, StoredSegment};
use crate::pcapfile::{is_padding, parse_file_header, parse_record, PcapHeader, Stop, MAX_CAPLEN};
use crate::terms::required_items;

const HOUR_NS: u64 = 3600 * 1_000_000_000;
/// Read window: large sequential reads, whatever the chunk size.
const WINDOW: usize = 4 << 20;

/// What to retrieve.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// First instant (inclusive, ns since the epoch).
    pub from_ns: u64,
    /// Last instant (exclusive).
    pub to_ns: u64,
    /// Interface names (as in segment names); empty: all.
    pub ifaces: Vec<String>,
    /// tcpdump filter expression.
    pub filter: Option<String>,
}

/// A stored packet handed to the caller.
#[derive(Clone, Copy, Debug)]
pub struct StoredPacket<'a> {
    /// Timestamp, ns since the epoch.
    pub ts_ns: u64,
    /// Length on the wire.
    pub wire_len: u32,
    /// Link type of `data`.
    pub link_type: LinkType,
    /// The stored bytes.
    pub data: &'a [u8],
    /// Interface name.
    pub iface: &'a str,
    /// Worker that wrote it.
    pub worker: u16,
}

/// What a read did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Segments whose time range meets the selection.
    pub segments_selected: u64,
    /// Of those, segments without an index (being written, or left by a crash): read whole.
    pub segments_unindexed: u64,
    /// Chunks of the selected segments.
    pub chunks_total: u64,
    /// Chunks skipped because their time range misses the selection.
    pub chunks_skipped_time: u64,
    /// Chunks skipped because the host index proves no packet can match the filter.
    pub chunks_skipped_index: u64,
    /// Bytes read from segment files.
    pub bytes_read: u64,
    /// Packets looked at.
    pub packets_scanned: u64,
    /// Packets handed to the caller.
    pub packets_matched: u64,
    /// Problems met (damaged index or segment), one line each; the rest was still read.
    pub errors: Vec<String>,
}

/// What a store holds: its segments' interfaces and time span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreSpan {
    /// Segment files.
    pub segments: u64,
    /// Earliest packet (from the indexes; a segment without one counts from its name).
    pub first_ns: u64,
    /// Latest packet (from the indexes; a segment without one counts to its name's start).
    pub last_ns: u64,
    /// Interface names, sorted.
    pub ifaces: Vec<String>,
}

/// A packet store directory, for reading.
pub struct PacketStore {
    dir: PathBuf,
}

impl PacketStore {
    /// Opens the store at `dir` (which must exist).
    pub fn open(dir: impl Into<PathBuf>) -> Result<PacketStore, Error> {
        let dir = dir.into();
        std::fs::metadata(&dir).map_err(Error::io(&dir, "opening the packet store"))?;
        Ok(PacketStore { dir })
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether the directory holds a segment at all (a packet store, or something else?);
    /// stops at the first one found.
    pub fn has_segments(&self) -> Result<bool, Error> {
        has_segments(&self.dir)
    }

    /// What the store holds; `None` when the directory holds no segment at all (it is not a
    /// packet store, or nothing was ever stored in it). Reads every index's header: for
    /// messages, not for every read.
    pub fn span(&self) -> Result<Option<StoreSpan>, Error> {
        let segs = list_segments_between(&self.dir, 0, u64::MAX)?;
        let mut span: Option<StoreSpan> = None;
        for seg in segs {
            let (first, last) = match seg.indexed {
                true => match SegmentIndex::read_time_range(&index_path(&seg.path)) {
                    Ok((_, _, 0)) | Err(_) => (seg.name.start_ns, seg.name.start_ns),
                    Ok((first, last, _)) => (first, last),
                },
                false => (seg.name.start_ns, seg.name.start_ns),
            };
            let s = span.get_or_insert(StoreSpan {
                segments: 0,
                first_ns: first,
                last_ns: last,
                ifaces: Vec::new(),
            });
            s.segments += 1;
            s.first_ns = s.first_ns.min(first);
            s.last_ns = s.last_ns.max(last);
            if !s.ifaces.contains(&seg.name.iface) {
                s.ifaces.push(seg.name.iface);
            }
        }
        if let Some(s) = span.as_mut() {
            s.ifaces.sort();
        }
        Ok(span)
    }

    /// The link types of the segments the selection's time range and interfaces meet, with
    /// the interface of each, before reading a packet: a writer that can hold one link type
    /// per file decides its format from them. (The filter is not applied: a link type listed
    /// here may yield no packet.) Unreadable segments are left out; [`PacketStore::read`]
    /// reports them.
    pub fn link_types(&self, sel: &Selection) -> Result<Vec<(String, LinkType)>, Error> {
        let candidates =
            list_segments_between(&self.dir, sel.from_ns.saturating_sub(HOUR_NS), sel.to_ns)?;
        let mut out: Vec<(String, LinkType)> = Vec::new();
        for seg in candidates {
            if (!sel.ifaces.is_empty() && !sel.ifaces.contains(&seg.name.iface))
                || seg.name.start_ns >= sel.to_ns
            {
                continue;
            }
            if seg.indexed {
                if let Ok((first, last, packets)) =
                    SegmentIndex::read_time_range(&index_path(&seg.path))
                {
                    if packets == 0 || last < sel.from_ns || first >= sel.to_ns {
                        continue;
                    }
                }
            }
            let Ok(file) = File::open(&seg.path) else {
                continue;
            };
            let mut head = [0u8; 24];
            let got = file.read_at(&mut head, 0).unwrap_or(0);
            let Ok(header) = parse_file_header(&seg.path, &head[..got]) else {
                continue;
            };
            let entry = (seg.name.iface, header.link);
            if !out.contains(&entry) {
                out.push(entry);
            }
        }
        Ok(out)
    }

    /// Calls `f` with every packet of the selection, in time order across interfaces and
    /// workers, until the end or until `f` breaks.
    pub fn read(
        &self,
        sel: &Selection,
        mut f: impl FnMut(&StoredPacket<'_>) -> ControlFlow<()>,
    ) -> Result<ReadStats, Error> {
        let mut stats = ReadStats::default();
        let required = sel
            .filter
            .as_deref()
            .map(required_items)
            .unwrap_or_default();
        let filter = match &sel.filter {
            Some(expr) => {
                // Compile once up front so a bad expression fails before any reading.
                let mut fs = FilterSet::new(expr, MAX_CAPLEN);
                fs.prepare(LinkType::ETHERNET)?;
                Some(fs)
            }
            None => None,
        };
        // Segments never span an hour boundary (of packet time), so an hour of slack before
        // `from` finds every segment that can hold packets of the selection.
        let candidates =
            list_segments_between(&self.dir, sel.from_ns.saturating_sub(HOUR_NS), sel.to_ns)?;
        let mut streams: Vec<Cursor> = Vec::new();
        for seg in candidates {
            if !sel.ifaces.is_empty() && !sel.ifaces.contains(&seg.name.iface) {
                continue;
            }
            if seg.name.start_ns >= sel.to_ns {
                continue;
            }
            let Some(plan) = plan_segment(seg, sel, &required, &mut stats) else {
                continue;
            };
            let key = (plan.seg.name.worker, plan.seg.name.iface.clone());
            match streams.iter_mut().find(|c| c.key == key) {
                Some(c) => c.plans.push(plan),
                None => streams.push(Cursor::new(key, plan, filter.clone(), sel)),
            }
        }
        let mut heap = BinaryHeap::new();
        for (i, c) in streams.iter_mut().enumerate() {
            if let Some(ts) = c.advance(&mut stats) {
                heap.push(Reverse((ts, i)));
            }
        }
        while let Some(Reverse((_, i))) = heap.pop() {
            let c = &mut streams[i];
            let (rec, start) = c.current.expect("a cursor in the heap has a packet");
            let pkt = StoredPacket {
                ts_ns: rec.ts_ns,
                wire_len: rec.wire_len,
                link_type: c.header.link,
                data: &c.buf[start..start + rec.caplen as usize],
                iface: &c.key.1,
                worker: c.key.0,
            };
            stats.packets_matched += 1;
            if f(&pkt).is_break() {
                break;
            }
            if let Some(ts) = c.advance(&mut stats) {
                heap.push(Reverse((ts, i)));
            }
        }
        for c in streams {
            if let Some(fs) = &c.filter {
                if fs.unsupported_packets() > 0 {
                    stats.errors.push(format!(
                        "{} packets of {} had a link type the filter does not compile for",
                        fs.unsupported_packets(),
                        c.key.1
                    ));
                }
            }
        }
        Ok(stats)
    }
}

/// One segment to read: the byte ranges that may hold selected packets.
struct SegmentPlan {
    seg: StoredSegment,
    ranges: Vec<(u64, u64)>,
    /// Read through its index: ranges end exactly at records, so zero headers are records.
    indexed: bool,
}

fn plan_segment(
    seg: StoredSegment,
    sel: &Selection,
    required: &[u32],
    stats: &mut ReadStats,
) -> Option<SegmentPlan> {
    let index = if seg.indexed {
        // The header first: most segments of a store are outside a window, and their chunk
        // tables (about 1% of the data) need not be read at all.
        if let Ok((first, last, packets)) = SegmentIndex::read_time_range(&index_path(&seg.path)) {
            if packets == 0 || last < sel.from_ns || first >= sel.to_ns {
                return None;
            }
        }
        match SegmentIndex::read(&index_path(&seg.path)) {
            Ok(i) => Some(i),
            Err(e) => {
                stats
                    .errors
                    .push(format!("{e} (reading the whole segment instead)"));
                None
            }
        }
    } else {
        None
    };
    let Some(index) = index else {
        stats.segments_selected += 1;
        stats.segments_unindexed += 1;
        return Some(SegmentPlan {
            ranges: vec![(crate::pcapfile::FILE_HEADER_LEN, u64::MAX)],
            seg,
            indexed: false,
        });
    };
    if index.packets == 0 || index.last_ts < sel.from_ns || index.first_ts >= sel.to_ns {
        return None;
    }
    stats.segments_selected += 1;
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for (i, c) in index.chunks.iter().enumerate() {
        stats.chunks_total += 1;
        if c.max_ts < sel.from_ns || c.min_ts >= sel.to_ns {
            stats.chunks_skipped_time += 1;
            continue;
        }
        if !index.chunk_may_match(i, required) {
            stats.chunks_skipped_index += 1;
            continue;
        }
        let (start, end) = (c.offset, index.chunk_end(i));
        match ranges.last_mut() {
            Some(r) if r.1 == start => r.1 = end,
            _ => ranges.push((start, end)),
        }
    }
    if let Some(problem) = cut_short(&seg, &index, &ranges) {
        stats.errors.push(problem);
    }
    (!ranges.is_empty()).then_some(SegmentPlan {
        seg,
        ranges,
        indexed: true,
    })
}

/// The problem of a segment shorter than its index says, when the selection needs some of
/// the missing bytes: the reader stops at the end of the file (the records before it are
/// read), so the rest of the selection's packets there are lost, and the caller must hear it.
fn cut_short(seg: &StoredSegment, index: &SegmentIndex, ranges: &[(u64, u64)]) -> Option<String> {
    let len = seg.bytes;
    if len >= index.segment_len || !ranges.iter().any(|r| r.1 > len) {
        return None;
    }
    // The chunks reaching past the end: the first may be partly there.
    let first_cut = index
        .chunks
        .iter()
        .enumerate()
        .position(|(i, _)| index.chunk_end(i) > len)?;
    let lost = &index.chunks[first_cut..];
    let packets: u64 = lost.iter().map(|c| u64::from(c.packets)).sum();
    let from = lost
        .iter()
        .map(|c| c.min_ts)
        .min()
        .unwrap_or(index.first_ts);
    let to = lost.iter().map(|c| c.max_ts).max().unwrap_or(index.last_ts);
    Some(format!(
        "{}: the segment is {len} bytes, its index says {}: bytes {len}..{} are missing, with up \
         to {packets} packets of {} .. {} (chunks {first_cut} to {} of {}); the packets before \
         were read",
        seg.path.display(),
        index.segment_len,
        index.segment_len,
        trawl_time::Civil::from_unix_ns(from),
        trawl_time::Civil::from_unix_ns(to),
        index.chunks.len() - 1,
        index.chunks.len(),
    ))
}

/// Reads one stream's segments in order, record by record, from its planned ranges.
struct Cursor {
    key: (u16, String),
    plans: Vec<SegmentPlan>,
    plan: usize,
    range: usize,
    file: Option<File>,
    header: PcapHeader,
    filter: Option<FilterSet>,
    from_ns: u64,
    to_ns: u64,
    buf: Vec<u8>,
    /// File offset of `buf[0]`.
    pos: u64,
    filled: usize,
    at: usize,
    /// End of the range being read (clamped to the file length).
    end: u64,
    current: Option<(crate::pcapfile::Rec, usize)>,
}

impl Cursor {
    fn new(
        key: (u16, String),
        plan: SegmentPlan,
        filter: Option<FilterSet>,
        sel: &Selection,
    ) -> Cursor {
        Cursor {
            key,
            plans: vec![plan],
            plan: 0,
            range: 0,
            file: None,
            header: PcapHeader {
                swapped: false,
                nanos: true,
                snaplen: 0,
                link: LinkType::ETHERNET,
            },
            filter,
            from_ns: sel.from_ns,
            to_ns: sel.to_ns,
            buf: Vec::new(),
            pos: 0,
            filled: 0,
            at: 0,
            end: 0,
            current: None,
        }
    }

    /// Moves to the next selected packet; returns its timestamp.
    fn advance(&mut self, stats: &mut ReadStats) -> Option<u64> {
        loop {
            match self.next_record(stats) {
                Ok(Some((rec, start))) => {
                    stats.packets_scanned += 1;
                    if rec.ts_ns < self.from_ns || rec.ts_ns >= self.to_ns {
                        continue;
                    }
                    if let Some(fs) = self.filter.as_mut() {
                        let data = &self.buf[start..start + rec.caplen as usize];
                        match fs.matches(self.header.link, data, rec.wire_len) {
                            Ok(true) => {}
                            Ok(false) => continue,
                            Err(e) => {
                                stats.errors.push(format!(
                                    "{}: filter: {e}",
                                    self.plans[self.plan].seg.path.display()
                                ));
                                continue;
                            }
                        }
                    }
                    self.current = Some((rec, start));
                    return Some(rec.ts_ns);
                }
                Ok(None) => {
                    self.current = None;
                    return None;
                }
                Err(e) => {
                    // A damaged segment: report it, go on with the next one.
                    stats.errors.push(e.to_string());
                    self.file = None;
                    self.plan += 1;
                    self.range = 0;
                }
            }
        }
    }

    /// The next whole record of the planned ranges (record, offset of its data in `buf`).
    fn next_record(
        &mut self,
        stats: &mut ReadStats,
    ) -> Result<Option<(crate::pcapfile::Rec, usize)>, Error> {
        loop {
            if self.file.is_none() && !self.open_next()? {
                return Ok(None);
            }
            if self.filled - self.at >= 16 {
                let hdr: &[u8; 16] = self.buf[self.at..self.at + 16]
                    .try_into()
                    .expect("16 bytes");
                if !self.plans[self.plan].indexed && hdr.iter().all(|&b| b == 0) {
                    let offset = self.pos + self.at as u64;
                    match is_padding(offset, &self.buf[self.at..self.filled], self.end) {
                        // Flush padding of a segment being written: its readable part ends.
                        Some(true) => {
                            self.next_range();
                            continue;
                        }
                        Some(false) => {}
                        None => {
                            if !self.refill(stats)? {
                                self.next_range();
                            }
                            continue;
                        }
                    }
                }
                match parse_record(&self.header, hdr) {
                    Ok(rec) => {
                        let total = 16 + rec.caplen as usize;
                        if self.filled - self.at >= total {
                            let start = self.at + 16;
                            self.at += total;
                            return Ok(Some((rec, start)));
                        }
                        // The buffer starts small for small files: grow it to hold the record.
                        if self.buf.len() < total {
                            self.buf.resize(total, 0);
                        }
                    }
                    Err(stop) => {
                        let field = match stop {
                            Stop::Bad(f) => f,
                            Stop::Padding => "record header",
                        };
                        return Err(Error::Corrupt {
                            path: self.plans[self.plan].seg.path.clone(),
                            offset: self.pos + self.at as u64,
                            field,
                            detail: "bad record header; the rest of the segment is skipped".into(),
                        });
                    }
                }
            }
            // At the end of a range; a record cut by the end of the file is one being written
            // (or torn by a crash): the readable part ends before it.
            if !self.refill(stats)? {
                self.next_range();
            }
        }
    }

    /// Reads more of the current range; false at its end.
    fn refill(&mut self, stats: &mut ReadStats) -> Result<bool, Error> {
        self.buf.copy_within(self.at..self.filled, 0);
        self.filled -= self.at;
        self.pos += self.at as u64;
        self.at = 0;
        let from = self.pos + self.filled as u64;
        let want_end = self.end.min(self.pos + self.buf.len() as u64);
        if from >= want_end {
            return Ok(false);
        }
        let file = self.file.as_ref().expect("open");
        let dst = &mut self.buf[self.filled..(want_end - self.pos) as usize];
        let n = loop {
            match file.read_at(dst, from) {
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                r => break r,
            }
        }
        .map_err(Error::io(
            &self.plans[self.plan].seg.path,
            "reading the segment",
        ))?;
        stats.bytes_read += n as u64;
        self.filled += n;
        Ok(n > 0)
    }

    fn next_range(&mut self) {
        self.range += 1;
        self.filled = 0;
        self.at = 0;
        if self.range < self.plans[self.plan].ranges.len() {
            self.seek_range();
        } else {
            self.file = None;
            self.plan += 1;
            self.range = 0;
        }
    }

    fn seek_range(&mut self) {
        let (start, end) = self.plans[self.plan].ranges[self.range];
        self.pos = start;
        self.filled = 0;
        self.at = 0;
        let len = self
            .file
            .as_ref()
            .and_then(|f| f.metadata().ok())
            .map_or(0, |m| m.len());
        self.end = end.min(len);
    }

    /// Opens the next planned segment; false when there is none.
    fn open_next(&mut self) -> Result<bool, Error> {
        let (path, file) = loop {
            let Some(plan) = self.plans.get(self.plan) else {
                return Ok(false);
            };
            let path = plan.seg.path.clone();
            match File::open(&path) {
                Ok(f) => break (path, f),
                // Deleted by retention since it was listed: nothing to read there any more.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => self.plan += 1,
                Err(e) => return Err(Error::io(&path, "opening the segment")(e)),
            }
        };
        let mut head = [0u8; 24];
        let got = file.read_at(&mut head, 0).unwrap_or(0);
        self.header = parse_file_header(&path, &head[..got])?;
        crate::sys::advise(&file, 0, 0, crate::sys::SEQUENTIAL);
        // Window-sized reads, but no 4 MiB buffer for a small file; records that do not fit
        // grow it.
        let len = file.metadata().map_or(0, |m| m.len());
        let want = (len as usize).clamp(64 << 10, WINDOW);
        if self.buf.len() < want {
            self.buf.resize(want, 0);
        }
        self.file = Some(file);
        self.range = 0;
        self.seek_range();
        Ok(true)
    }
}
