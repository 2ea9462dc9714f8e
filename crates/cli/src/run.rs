//! What the file and live commands share for their summaries: the input's numbers
//! ([`RunReport`]), the filter check and the exit code.
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};

use trawl_bpf::FilterSet;
use trawl_capture::live::LiveStats;
use trawl_capture::{LinkType, SourceStats};
use trawl_ring::ProducerStats;

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
    /// Switching duplicates removed.
    pub duplicates: u64,
    /// Shared rings' producer counters.
    pub ring: Option<ProducerStats>,
}

/// Checks the filter expression before any input is read, so a typo fails fast with
/// libpcap's message. Compiled for the largest snap length, so `greater`/`less` and loads
/// see whole packets.
pub fn check_filter(expr: &str) -> Result<FilterSet> {
    let mut set = FilterSet::new(expr, trawl_capture::MAX_SNAPLEN);
    set.prepare(LinkType::ETHERNET)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .context("invalid filter expression")?;
    Ok(set)
}

/// The exit code of a run: 1 when some input could not be read.
pub fn exit_code(report: &RunReport) -> ExitCode {
    if report.input_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
