//! Several capture files read as one stream in packet-time order (`trawl_capture::MergedFiles`,
//! mergecap's semantics), through the command line's filter compiled per file.
use std::path::PathBuf;
use std::time::Instant;

use trawl_bpf::FileFilters;
use trawl_capture::{reuse_records, FileSourceConfig, PacketRecord, SourceStats};
use trawl_flow::{FlowMeter, FlowSink, PacketOutcome};

use crate::args::HiInput;
use crate::run::{passes, Progress, RunReport, SNAPLEN};

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
