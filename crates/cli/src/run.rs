//! The driver shared by `trawl flows` and `trawl series`: files → filter → flow meter, with
//! input errors reported and counted, a progress line, and the numbers for the summary.
use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use trawl_bpf::{ByteOrder, FileFilters, FilterSet};
use trawl_capture::live::LiveStats;
use trawl_capture::{
    reuse_records, FileSource, FileSourceConfig, LinkType, PacketRecord, PacketSource, SourceStats,
};
use trawl_flow::{FlowMeter, FlowSink, PacketOutcome};
use trawl_ring::ProducerStats;

use crate::flows::HiInput;
use crate::progress::ProgressLine;

/// Snap length filters are compiled for: libpcap's maximum, so `greater`/`less` and loads see
/// whole packets.
pub(crate) const SNAPLEN: u32 = trawl_capture::MAX_SNAPLEN;

/// What happened during a run, for the summary.
#[derive(Debug, Default)]
pub struct RunReport {
    pub files_read: usize,
    pub files_failed: usize,
    /// One line per input error: file, offset, field.
    pub input_errors: Vec<String>,
    pub source: SourceStats,
    pub filter_rejected: u64,
    /// Warnings about the filter (link types it cannot apply to).
    pub filter_warnings: Vec<String>,
    pub elapsed: Duration,
    /// Live capture counters (None for files).
    pub live: Option<LiveReport>,
}

/// Counters of a live run, for the summary.
#[derive(Debug, Default, Clone)]
pub struct LiveReport {
    pub interfaces: Vec<String>,
    pub workers: usize,
    pub stats: LiveStats,
    pub kernel_filter: bool,
    pub user: Option<String>,
    /// Per worker socket: `hardware` when the NIC timestamps packets, else `software`.
    pub timestamp_sources: Vec<&'static str>,
    /// Switching duplicates removed (`trawl run --dedup`).
    pub duplicates: u64,
    /// Shared rings' producer counters (`trawl run`).
    pub ring: Option<ProducerStats>,
}

/// Buffered output that remembers the first write error (EPIPE ends the run quietly).
pub struct Output {
    buf: Vec<u8>,
    inner: Box<dyn Write>,
    error: Option<io::Error>,
}

const OUTPUT_CHUNK: usize = 1 << 20;

impl Output {
    pub fn new(inner: Box<dyn Write>) -> Self {
        Output {
            buf: Vec::with_capacity(OUTPUT_CHUNK * 2),
            inner,
            error: None,
        }
    }

    /// The buffer to append to; call [`Output::maybe_flush`] afterwards.
    #[inline]
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    #[inline]
    pub fn maybe_flush(&mut self) {
        if self.buf.len() >= OUTPUT_CHUNK {
            self.flush();
        }
    }

    pub fn flush(&mut self) {
        if self.error.is_none() {
            if let Err(e) = self
                .inner
                .write_all(&self.buf)
                .and_then(|_| self.inner.flush())
            {
                self.error = Some(e);
            }
        }
        self.buf.clear();
    }

    /// True once writing failed (the reader went away): the run can stop.
    pub fn failed(&self) -> bool {
        self.error.is_some()
    }

    /// Flushes and reports the first error. A closed pipe is not an error.
    pub fn finish(mut self) -> Result<()> {
        self.flush();
        match self.error {
            Some(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
            Some(e) => Err(e).context("cannot write output"),
            None => Ok(()),
        }
    }
}

/// Checks the filter expression before any input is read, so a typo fails fast with
/// libpcap's message.
pub fn check_filter(expr: &str) -> Result<FilterSet> {
    let mut set = FilterSet::new(expr, SNAPLEN);
    set.prepare(LinkType::ETHERNET)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("invalid filter expression")?;
    Ok(set)
}

/// Reads the input through the filter into `meter`: one file, or several merged by packet
/// time ([`drive_merged`]). `sink` receives flow records; `after` sees every packet that
/// passed the filter with the meter's verdict. `stop` is polled between batches (output
/// closed).
pub fn drive<S: FlowSink, A: FnMut(&PacketRecord<'_>, &PacketOutcome)>(
    input: &HiInput,
    meter: &mut FlowMeter,
    sink: &mut S,
    mut after: A,
    stop: &dyn Fn() -> bool,
) -> RunReport {
    let config = FileSourceConfig {
        format: input.forced_format,
        ..FileSourceConfig::default()
    };
    // One file (or standard input, which cannot be merged) keeps this loop over the reader's
    // own batches: the merge copies each record's metadata, a cost one file does not need.
    if input.files.len() > 1 {
        return drive_merged(input, &config, meter, sink, after, stop);
    }
    let started = Instant::now();
    let mut report = RunReport::default();
    let mut progress = Progress::new(input.progress);
    'files: for path in &input.files {
        let opened = if path.as_os_str() == "-" {
            FileSource::from_reader("<stdin>", io::stdin(), config.clone())
        } else {
            FileSource::with_config(path, config.clone())
        };
        let mut source = match opened {
            Ok(s) => s,
            Err(e) => {
                report.files_failed += 1;
                report.input_errors.push(e.to_string());
                continue;
            }
        };
        report.files_read += 1;
        // Compiled per file: BSD loopback headers hold the address family in the byte order
        // of the machine that wrote the file, and libpcap's program must match it.
        let order = ByteOrder::of_file(source.big_endian());
        let mut filter = input
            .filter
            .as_deref()
            .map(|e| FilterSet::new_for(e, SNAPLEN, order));
        let mut spare: Vec<PacketRecord<'static>> = Vec::with_capacity(config.batch_size);
        loop {
            let batch = match source.next_batch() {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(e) => {
                    report.input_errors.push(e.to_string());
                    break;
                }
            };
            // The filter runs per packet; the survivors go to the meter as one batch so its
            // lookups overlap.
            let mut selected = reuse_records(std::mem::take(&mut spare));
            match filter.as_mut() {
                // Without a filter the records go straight into the batch: built on the stack
                // for the filter's sake and copied from there, each record stalled on store
                // forwarding (2 % of a run).
                None => selected.extend(batch.iter()),
                Some(f) => {
                    for pkt in batch.iter() {
                        if passes(f, &pkt, path, &mut report.filter_warnings) {
                            selected.push(pkt);
                        } else {
                            report.filter_rejected += 1;
                        }
                    }
                }
            }
            meter.process_batch(&selected, sink, |i, o| after(&selected[i], o));
            spare = reuse_records(selected);
            progress.tick(meter, &source.stats(), source.progress(), &report);
            if stop() {
                report.source.add(&source.stats());
                break 'files;
            }
        }
        report.source.add(&source.stats());
    }
    meter.flush(sink);
    progress.done();
    report.elapsed = started.elapsed();
    report
}

/// Whether `pkt` (of the file `path`) passes `filter`. The first packet of a link type the
/// expression cannot be compiled for adds a warning; such packets never pass.
#[inline]
pub(crate) fn passes(
    filter: &mut FilterSet,
    pkt: &PacketRecord<'_>,
    path: &std::path::Path,
    warnings: &mut Vec<String>,
) -> bool {
    match filter.matches(pkt.link_type, pkt.data, pkt.wire_len) {
        Ok(keep) => keep,
        Err(e) => {
            warnings.push(format!(
                "{}: packets of link type {} never match: {e}",
                path.display(),
                pkt.link_type.0
            ));
            false
        }
    }
}

/// The progress line of the CLI's own file loop ([`crate::progress::ProgressLine`]).
pub(crate) struct Progress {
    line: ProgressLine,
}

impl Progress {
    pub(crate) fn new(enabled: bool) -> Self {
        Progress {
            line: ProgressLine::new(enabled),
        }
    }

    pub(crate) fn tick(
        &mut self,
        meter: &FlowMeter,
        current: &SourceStats,
        file_progress: Option<(u64, u64)>,
        report: &RunReport,
    ) {
        let packets = report.source.records + current.records;
        if packets == 0 || !self.line.due() {
            return;
        }
        let (done, total) = file_progress.unwrap_or((0, 0));
        let text = format!(
            "file {}, {} packets ({}/s), {} MB, {} active flows",
            report.files_read,
            packets,
            trawl_compose::human_rate(packets as f64 / self.line.elapsed_s()),
            (report.source.captured_bytes + current.captured_bytes) / 1_000_000,
            meter.active_flows()
        );
        self.line.draw(done, total, &text);
    }

    pub(crate) fn done(&mut self) {
        self.line.clear();
    }
}

/// The exit code of a run: 1 when some input could not be read.
pub fn exit_code(report: &RunReport) -> ExitCode {
    if report.input_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

// Several capture files read as one stream in packet-time order
// (`trawl_capture::MergedFiles`, mergecap's semantics), through the command line's filter
// compiled per file. (Once merge.rs, which imported this module's pieces while this module
// called it: one driver split in two files that named each other.)

/// Capture files merged by packet time, through an optional filter.
pub struct MergedFiles {
    files: trawl_capture::MergedFiles,
    /// The filter, compiled per file: BSD loopback headers hold the address family in the
    /// byte order of the machine that wrote the file.
    filters: Option<FileFilters>,
    /// Packets the filter rejected, and link types it cannot apply to.
    pub filter_rejected: u64,
    pub filter_warnings: Vec<String>,
}

impl MergedFiles {
    /// Looks at each file's first packet; files that cannot be opened are counted and
    /// reported, not fatal.
    pub fn open(files: &[PathBuf], config: &FileSourceConfig, filter: Option<&str>) -> Self {
        MergedFiles {
            files: trawl_capture::MergedFiles::open(files, config),
            filters: filter.map(|e| FileFilters::new(e, SNAPLEN)),
            filter_rejected: 0,
            filter_warnings: Vec::new(),
        }
    }

    /// Fills `out` (emptied first) with the next packets in time order that pass the filter.
    /// False once every file is read.
    pub fn next_batch<'a>(&'a mut self, out: &mut Vec<PacketRecord<'a>>) -> bool {
        let MergedFiles {
            files,
            filters,
            filter_rejected,
            filter_warnings,
        } = self;
        let Some(filters) = filters.as_mut() else {
            return files.next_batch(out, |_, _| true).is_some();
        };
        files
            .next_batch(out, |pkt, file| {
                let f = filters.for_file(file.order, file.big_endian);
                let keep = passes(f, pkt, file.path, filter_warnings);
                *filter_rejected += u64::from(!keep);
                keep
            })
            .is_some()
    }

    /// Counters of every file so far.
    pub fn stats(&self) -> SourceStats {
        self.files.stats()
    }

    /// Bytes read of all files' bytes, for progress displays.
    pub fn progress(&self) -> (u64, u64) {
        self.files.progress()
    }

    pub fn files_read(&self) -> usize {
        self.files.files_read
    }

    pub fn files_failed(&self) -> usize {
        self.files.files_failed
    }

    /// Errors of files that could not be opened or read to their end.
    pub fn take_errors(&mut self) -> Vec<String> {
        std::mem::take(&mut self.files.errors)
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
    let mut spare: Vec<PacketRecord<'static>> = Vec::with_capacity(config.batch_size);
    loop {
        let mut selected = reuse_records(std::mem::take(&mut spare));
        if !files.next_batch(&mut selected) {
            break;
        }
        meter.process_batch(&selected, sink, |i, o| after(&selected[i], o));
        spare = reuse_records(selected);
        report.files_read = files.files_read();
        progress.tick(meter, &files.stats(), Some(files.progress()), &report);
        if stop() {
            break;
        }
    }
    report.source = files.stats();
    report.files_read = files.files_read();
    report.files_failed = files.files_failed();
    report.input_errors = files.take_errors();
    report.filter_rejected = files.filter_rejected;
    report.filter_warnings = std::mem::take(&mut files.filter_warnings);
    meter.flush(sink);
    progress.done();
    report.elapsed = started.elapsed();
    report
}
