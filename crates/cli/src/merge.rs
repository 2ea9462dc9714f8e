//! Several capture files read as one stream in packet-time order, as mergecap merges them: the
//! two directions of a link captured by two taps, several interfaces captured apart, or a
//! rotated capture given in any order all meter as the traffic they recorded.
//!
//! Each file's first packet time is read first (the file is then closed again); files are
//! opened when the merge reaches their first packet, and closed at their end, so a day of
//! rotated files keeps one or two open, not all. Among the open files the packet with the
//! earliest time goes next; a file's own order is kept (its reordered packets are not sorted).
//! Ties go to the file given first on the command line.
use std::path::{Path, PathBuf};
use std::time::Instant;

use trawl_bpf::{ByteOrder, FilterSet};
use trawl_capture::{
    reuse_records, FileSource, FileSourceConfig, Interface, PacketRecord, PacketSource, RecordMeta,
    SharedBytes, SourceStats,
};
use trawl_flow::{FlowMeter, FlowSink, PacketOutcome};

use crate::args::HiInput;
use crate::run::{add_stats, passes, Progress, RunReport, SNAPLEN};

/// Packets handed out at once (the meter's lookups overlap within a batch).
const MERGED_BATCH: usize = 256;

/// An input file waiting for the merge to reach its first packet.
struct Pending {
    /// Position on the command line (ties between equal times go to the earlier file).
    order: usize,
    path: PathBuf,
    first_ts: u64,
}

/// An open file: the batch it read last (metadata copied, bytes shared with the reader, so
/// the reader can go on while these records are still in use).
struct Cursor {
    order: usize,
    path: PathBuf,
    source: FileSource,
    metas: Vec<RecordMeta>,
    bytes: SharedBytes,
    interfaces: Vec<Interface>,
}

impl Cursor {
    /// Reads the next batch; false at the end of the file (an error ends it too, reported).
    fn refill(&mut self, errors: &mut Vec<String>) -> bool {
        loop {
            match self.source.next_shared_batch() {
                Ok(Some((batch, _))) if batch.is_empty() => continue,
                Ok(Some((batch, bytes))) => {
                    self.metas.clear();
                    self.metas.extend_from_slice(batch.metas());
                    if self.interfaces.len() != batch.interfaces().len() {
                        self.interfaces = batch.interfaces().to_vec();
                    }
                    self.bytes = bytes;
                    return true;
                }
                Ok(None) => return false,
                Err(e) => {
                    errors.push(e.to_string());
                    return false;
                }
            }
        }
    }

    fn record(&self, i: usize) -> PacketRecord<'_> {
        let m = &self.metas[i];
        PacketRecord {
            ts_ns: m.ts_ns,
            wire_len: m.wire_len,
            iface: m.iface,
            direction: m.direction,
            link_type: self.interfaces[usize::from(m.iface)].link_type,
            data: &self.bytes[m.offset..m.offset + m.caplen as usize],
        }
    }
}

/// The first packet time of a file (`None` for a file without packets), and its counters
/// when that is all it holds.
fn first_time(
    path: &Path,
    config: &FileSourceConfig,
) -> Result<(Option<u64>, SourceStats), String> {
    let mut source = FileSource::with_config(path, config.clone()).map_err(|e| e.to_string())?;
    loop {
        match source.next_batch() {
            Ok(Some(b)) if b.is_empty() => continue,
            Ok(Some(b)) => return Ok((Some(b.metas()[0].ts_ns), SourceStats::default())),
            Ok(None) => return Ok((None, source.stats())),
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Capture files read as one stream in packet-time order, through an optional filter.
pub struct MergedFiles {
    config: FileSourceConfig,
    filter: Option<String>,
    /// Latest first, so the next file to open is popped off the end.
    pending: Vec<Pending>,
    // Open files with their read positions and filters, kept apart from the cursors so that
    // a batch can borrow the cursors' bytes while positions move.
    open: Vec<Cursor>,
    pos: Vec<usize>,
    filters: Vec<Option<FilterSet>>,
    /// A file whose batch the last call used up: read on at the next call (the records handed
    /// out borrowed that batch).
    exhausted: Option<usize>,
    finished: SourceStats,
    finished_len: u64,
    total_len: u64,
    /// Files opened (including those without packets) and files that could not be read.
    pub files_read: usize,
    pub files_failed: usize,
    /// Errors of files that could not be opened or read to their end.
    pub errors: Vec<String>,
    /// Packets the filter rejected, and link types it cannot apply to.
    pub filter_rejected: u64,
    pub filter_warnings: Vec<String>,
}

impl MergedFiles {
    /// Looks at each file's first packet (standard input cannot be one of them: it cannot be
    /// read twice). Files that cannot be opened are counted and reported, not fatal.
    pub fn open(files: &[PathBuf], config: &FileSourceConfig, filter: Option<&str>) -> Self {
        let mut m = MergedFiles {
            config: config.clone(),
            filter: filter.map(str::to_owned),
            pending: Vec::new(),
            open: Vec::new(),
            pos: Vec::new(),
            filters: Vec::new(),
            exhausted: None,
            finished: SourceStats::default(),
            finished_len: 0,
            total_len: 0,
            files_read: 0,
            files_failed: 0,
            errors: Vec::new(),
            filter_rejected: 0,
            filter_warnings: Vec::new(),
        };
        for (order, path) in files.iter().enumerate() {
            match first_time(path, config) {
                Ok((Some(first_ts), _)) => {
                    m.total_len += std::fs::metadata(path).map_or(0, |md| md.len());
                    m.pending.push(Pending {
                        order,
                        path: path.clone(),
                        first_ts,
                    });
                }
                Ok((None, stats)) => {
                    m.files_read += 1;
                    add_stats(&mut m.finished, &stats);
                }
                Err(e) => {
                    m.files_failed += 1;
                    m.errors.push(e);
                }
            }
        }
        m.pending
            .sort_by_key(|p| std::cmp::Reverse((p.first_ts, p.order)));
        m
    }

    /// Fills `out` (emptied first) with the next packets in time order that pass the filter:
    /// up to a batch, fewer where a file's batch ends. False once every file is read.
    pub fn next_batch<'a>(&'a mut self, out: &mut Vec<PacketRecord<'a>>) -> bool {
        out.clear();
        if let Some(i) = self.exhausted.take() {
            self.pos[i] = 0;
            if !self.open[i].refill(&mut self.errors) {
                let c = self.open.swap_remove(i);
                self.pos.swap_remove(i);
                self.filters.swap_remove(i);
                add_stats(&mut self.finished, &c.source.stats());
                self.finished_len += c.source.progress().map_or(0, |(_, total)| total);
            }
        }
        self.open_due();
        if self.open.is_empty() {
            return false;
        }
        let next_pending = self.pending.last().map(|p| p.first_ts);
        let MergedFiles {
            open, pos, filters, ..
        } = self;
        let open: &'a [Cursor] = open;
        while out.len() < MERGED_BATCH {
            let mut best = 0;
            for i in 1..open.len() {
                let (a, b) = (&open[i], &open[best]);
                if (a.metas[pos[i]].ts_ns, a.order) < (b.metas[pos[best]].ts_ns, b.order) {
                    best = i;
                }
            }
            let ts = open[best].metas[pos[best]].ts_ns;
            if next_pending.is_some_and(|t| t <= ts) {
                break; // a file not open yet starts earlier (or as early: it opens first)
            }
            let pkt = open[best].record(pos[best]);
            pos[best] += 1;
            let keep = match filters[best].as_mut() {
                None => true,
                Some(f) => passes(f, &pkt, &open[best].path, &mut self.filter_warnings),
            };
            if keep {
                out.push(pkt);
            } else {
                self.filter_rejected += 1;
            }
            if pos[best] == open[best].metas.len() {
                self.exhausted = Some(best);
                break;
            }
        }
        true
    }

    /// Opens every file whose first packet is not later than the earliest open packet (the
    /// earliest pending file when none is open).
    fn open_due(&mut self) {
        loop {
            let earliest_open = (0..self.open.len())
                .map(|i| self.open[i].metas[self.pos[i]].ts_ns)
                .min();
            let Some(p) = self.pending.last() else { return };
            if earliest_open.is_some_and(|t| p.first_ts > t) {
                return;
            }
            let p = self.pending.pop().expect("just seen");
            let source = match FileSource::with_config(&p.path, self.config.clone()) {
                Ok(s) => s,
                Err(e) => {
                    self.files_failed += 1;
                    self.errors.push(e.to_string());
                    continue;
                }
            };
            self.files_read += 1;
            let mut c = Cursor {
                order: p.order,
                path: p.path,
                source,
                metas: Vec::new(),
                bytes: SharedBytes::default(),
                interfaces: Vec::new(),
            };
            if !c.refill(&mut self.errors) {
                add_stats(&mut self.finished, &c.source.stats());
                continue;
            }
            // Compiled per file: BSD loopback headers hold the address family in the byte
            // order of the machine that wrote the file.
            let order = if c.source.big_endian() {
                ByteOrder::Big
            } else {
                ByteOrder::Little
            };
            self.filters.push(
                self.filter
                    .as_deref()
                    .map(|e| FilterSet::new_for(e, SNAPLEN, order)),
            );
            self.open.push(c);
            self.pos.push(0);
        }
    }

    /// Counters of every file so far.
    pub fn stats(&self) -> SourceStats {
        let mut s = self.finished;
        for c in &self.open {
            add_stats(&mut s, &c.source.stats());
        }
        s
    }

    /// Bytes read of all files' bytes, for progress displays.
    pub fn progress(&self) -> (u64, u64) {
        let done = self.finished_len
            + self
                .open
                .iter()
                .map(|c| c.source.progress().map_or(0, |(d, _)| d))
                .sum::<u64>();
        (done, self.total_len)
    }
}

/// [`crate::run::drive`] over several files merged by packet time.
pub fn drive_merged<S: FlowSink, A: FnMut(&PacketRecord<'_>, &PacketOutcome)>(
    input: &HiInput,
    config: &FileSourceConfig,
    meter: &mut FlowMeter,
    sink: &mut S,
    mut after: A,
    stop: &dyn Fn() -> bool,
) -> RunReport {
    let started = Instant::now();
    let mut report = RunReport::default();
    let mut progress = Progress::new(input.progress);
    let mut files = MergedFiles::open(&input.files, config, input.filter.as_deref());
    let mut spare: Vec<PacketRecord<'static>> = Vec::with_capacity(MERGED_BATCH);
    loop {
        let mut selected = reuse_records(std::mem::take(&mut spare));
        if !files.next_batch(&mut selected) {
            break;
        }
        meter.process_batch(&selected, sink, |i, o| after(&selected[i], o));
        spare = reuse_records(selected);
        report.files_read = files.files_read;
        progress.tick(meter, &files.stats(), Some(files.progress()), &report);
        if stop() {
            break;
        }
    }
    report.source = files.stats();
    report.files_read = files.files_read;
    report.files_failed = files.files_failed;
    report.input_errors = std::mem::take(&mut files.errors);
    report.filter_rejected = files.filter_rejected;
    report.filter_warnings = std::mem::take(&mut files.filter_warnings);
    meter.flush(sink);
    progress.done();
    report.elapsed = started.elapsed();
    report
}
