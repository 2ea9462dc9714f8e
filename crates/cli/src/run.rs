//! The driver shared by `trawl flows` and `trawl series`: files → filter → flow meter, with
//! input errors reported and counted, a progress line, and the numbers for the summary.
use std::io::{self, Write};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use trawl_bpf::{ByteOrder, FilterSet};
use trawl_capture::{
    reuse_records, FileSource, FileSourceConfig, LinkType, PacketRecord, PacketSource, SourceStats,
};
use trawl_flow::{FlowMeter, FlowSink, PacketOutcome};

use crate::args::HiInput;
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
    pub live: Option<crate::live::LiveReport>,
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
/// time ([`crate::merge`]). `sink` receives flow records; `after` sees every packet that
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
        return crate::merge::drive_merged(input, &config, meter, sink, after, stop);
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
            human(packets as f64 / self.line.elapsed_s()),
            (report.source.captured_bytes + current.captured_bytes) / 1_000_000,
            meter.active_flows()
        );
        self.line.draw(done, total, &text);
    }

    pub(crate) fn done(&mut self) {
        self.line.clear();
    }
}

pub use trawl_compose::human_rate as human;
