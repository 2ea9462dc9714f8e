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
use crate::run::{add_stats, Progress, RunReport, SNAPLEN};

/// Packets handed to the meter at once (its lookups overlap within a batch).
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
    fn open(p: &Pending, config: &FileSourceConfig) -> Result<Cursor, String> {
        let source = FileSource::with_config(&p.path, config.clone()).map_err(|e| e.to_string())?;
        Ok(Cursor {
            order: p.order,
            path: p.path.clone(),
            source,
            metas: Vec::new(),
            bytes: SharedBytes::default(),
            interfaces: Vec::new(),
        })
    }

    /// Reads the next batch; false at the end of the file (an error ends it too, reported).
    fn refill(&mut self, report: &mut RunReport) -> bool {
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
                    report.input_errors.push(e.to_string());
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

/// The first packet time of a file, or why it cannot be read. A file without packets gives
/// `None` (it is read, counted and done).
fn first_time(
    path: &Path,
    config: &FileSourceConfig,
    report: &mut RunReport,
) -> Result<Option<u64>, String> {
    let mut source = FileSource::with_config(path, config.clone()).map_err(|e| e.to_string())?;
    loop {
        match source.next_batch() {
            Ok(Some(b)) if b.is_empty() => continue,
            Ok(Some(b)) => return Ok(Some(b.metas()[0].ts_ns)),
            Ok(None) => {
                add_stats(&mut report.source, &source.stats());
                return Ok(None);
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// [`crate::run::drive`] over several files merged by packet time (standard input cannot be
/// one of them: it cannot be read twice).
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
    let report = &mut report;
    let mut progress = Progress::new(input.progress);
    let (files, filter) = (&input.files, input.filter.as_deref());
    let mut pending = Vec::new();
    let mut total_len = 0u64;
    for (order, path) in files.iter().enumerate() {
        match first_time(path, config, report) {
            Ok(Some(first_ts)) => {
                total_len += std::fs::metadata(path).map_or(0, |m| m.len());
                pending.push(Pending {
                    order,
                    path: path.clone(),
                    first_ts,
                });
            }
            Ok(None) => report.files_read += 1,
            Err(e) => {
                report.files_failed += 1;
                report.input_errors.push(e);
            }
        }
    }
    // Latest first, so the next file to open is popped off the end.
    pending.sort_by_key(|p| std::cmp::Reverse((p.first_ts, p.order)));

    // Open files with their read positions and filters, kept apart from the cursors so that
    // a batch can borrow the cursors' bytes while positions move.
    let mut open: Vec<Cursor> = Vec::new();
    let mut pos: Vec<usize> = Vec::new();
    let mut filters: Vec<Option<FilterSet>> = Vec::new();
    let mut finished = SourceStats::default();
    let mut finished_len = 0u64;
    let mut spare: Vec<PacketRecord<'static>> = Vec::with_capacity(MERGED_BATCH);
    loop {
        // Open every file whose first packet is not later than the earliest open packet.
        let earliest_open = (0..open.len()).map(|i| open[i].metas[pos[i]].ts_ns).min();
        while let Some(p) = pending.last() {
            if earliest_open.is_some_and(|t| p.first_ts > t) {
                break;
            }
            let p = pending.pop().expect("just seen");
            match Cursor::open(&p, config) {
                Ok(mut c) => {
                    report.files_read += 1;
                    if c.refill(report) {
                        // Compiled per file: BSD loopback headers hold the address family in
                        // the byte order of the machine that wrote the file.
                        let order = if c.source.big_endian() {
                            ByteOrder::Big
                        } else {
                            ByteOrder::Little
                        };
                        filters.push(filter.map(|e| FilterSet::new_for(e, SNAPLEN, order)));
                        open.push(c);
                        pos.push(0);
                    } else {
                        add_stats(&mut finished, &c.source.stats());
                    }
                }
                Err(e) => {
                    report.files_failed += 1;
                    report.input_errors.push(e);
                }
            }
            if earliest_open.is_none() {
                // Nothing was open: the earliest pending file alone sets the time.
                break;
            }
        }
        if open.is_empty() {
            if pending.is_empty() {
                break;
            }
            continue;
        }
        let next_pending = pending.last().map(|p| p.first_ts);

        // Take packets in time order until a file's batch runs out (it must be read again,
        // which the records borrowed from it forbid) or the batch is full.
        let mut selected = reuse_records(std::mem::take(&mut spare));
        let mut exhausted = None;
        while selected.len() < MERGED_BATCH {
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
                Some(f) => match f.matches(pkt.link_type, pkt.data, pkt.wire_len) {
                    Ok(k) => k,
                    Err(e) => {
                        report.filter_warnings.push(format!(
                            "{}: packets of link type {} never match: {e}",
                            open[best].path.display(),
                            pkt.link_type.0
                        ));
                        false
                    }
                },
            };
            if keep {
                selected.push(pkt);
            } else {
                report.filter_rejected += 1;
            }
            if pos[best] == open[best].metas.len() {
                exhausted = Some(best);
                break;
            }
        }
        meter.process_batch(&selected, sink, |i, o| after(&selected[i], o));
        spare = reuse_records(selected);

        if let Some(i) = exhausted {
            pos[i] = 0;
            if !open[i].refill(report) {
                let c = open.swap_remove(i);
                pos.swap_remove(i);
                filters.swap_remove(i);
                add_stats(&mut finished, &c.source.stats());
                finished_len += c.source.progress().map_or(0, |(_, total)| total);
            }
        }
        let mut current = finished;
        let mut done_len = finished_len;
        for c in &open {
            add_stats(&mut current, &c.source.stats());
            done_len += c.source.progress().map_or(0, |(done, _)| done);
        }
        progress.tick(meter, &current, Some((done_len, total_len)), report);
        if stop() {
            break;
        }
    }
    for c in &open {
        add_stats(&mut finished, &c.source.stats());
    }
    add_stats(&mut report.source, &finished);
    meter.flush(sink);
    progress.done();
    report.elapsed = started.elapsed();
    std::mem::take(report)
}
