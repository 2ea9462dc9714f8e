//! Commands as compositions: each command turns its flags into a [`Document`] (a composition
//! of blocks), runs it on the block runtime, and prints its report from the runtime's counters.
//! No command reads, meters, stores or writes in a loop of its own.
//!
//! - [`files`]: the `pcap_source` of `-r FILE...`;
//! - [`consumers`]: what consumes packets (meters, writers), shared with live capture;
//! - [`logs`]: the application-layer analysers and their log writers (`--logs`, `trawl logs`);
//! - here: running a plan ([`run`]), and reading the source's and the meters' counters back
//!   into the summary's numbers ([`input_report`], [`meters`]).
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use trawl_compose::{BlockReport, Document, MessageKind, Report};
use trawl_flow::{MeterStats, TableSize};
use trawl_series::SeriesStats;

use trawl_compose::human_rate;

use crate::flows::LiveInput;
use crate::progress::{draw_composition, ProgressLine};
use crate::run::{LiveReport, RunReport};

pub mod consumers;
pub mod files;
pub mod live;
pub mod logs;
pub mod voip;

/// A finished run: every counter, and how long it took.
pub struct Finished {
    pub report: Report,
    pub elapsed: Duration,
}

/// Plans `doc` as `trawl check -c` would the printed TOML and starts it, the blocks' messages
/// kept for the command's summary instead of printed as they happen.
fn start(doc: &Document) -> Result<trawl_compose::Running> {
    let registry = trawl_api::registry();
    let cpus = trawl_capture::live::allowed_cpus();
    let mut plan = trawl_compose::plan(&doc.to_toml(), "<command line>", &registry, &cpus)
        .map_err(anyhow::Error::from)?;
    plan.print_messages = false;
    trawl_compose::start(plan).map_err(|e| anyhow!(e))
}

/// Plans `doc` (as `trawl check -c` would the printed TOML), runs it to its end, and returns
/// its counters. The blocks' errors and warnings are not printed as they happen: the command
/// prints them in its summary. `progress` draws a progress line on standard error from the
/// counters of the source block named `source` while it runs. A composition that fails (an
/// output that cannot be written) is an error; a reader that went away (EPIPE) is not.
pub fn run(doc: &Document, progress: Option<&str>) -> Result<Finished> {
    let started = Instant::now();
    let running = start(doc)?;
    if let Some(source) = progress {
        let mut line = ProgressLine::new(true);
        while !running.is_finished() {
            std::thread::sleep(Duration::from_millis(50));
            if line.due() {
                draw_composition(&mut line, &running.report(), source, packets_text);
            }
        }
        line.clear();
    }
    let report = running.wait().map_err(|(e, _)| anyhow!(e))?;
    Ok(Finished {
        report,
        elapsed: started.elapsed(),
    })
}

/// Runs a live plan: like [`run`], until SIGINT/SIGTERM (a second one ends the process at
/// once), the plan's `--duration` or `--count`; switches to `--user` once every socket is
/// open, and prints the runtime's status line every `stats_interval`. `progress` draws the
/// packets captured so far on standard error (a terminal's).
pub fn run_live(doc: &Document, progress: bool) -> Result<Finished> {
    let stop = crate::signals::install_stop_signals()?;
    let started = Instant::now();
    let running = start(doc)?;
    let mut line = ProgressLine::new(progress);
    let mut draw = |r: &Report| {
        if line.due() {
            let text = live_text(r, line.elapsed_s());
            line.draw(0, 0, &text);
        }
    };
    let report = running
        .supervise_with(
            &stop,
            |r| eprintln!("{}", r.status_line()),
            progress.then_some(&mut draw as &mut dyn FnMut(&Report)),
        )
        .map_err(|(e, _)| anyhow!(e))?;
    line.clear();
    Ok(Finished {
        report,
        elapsed: started.elapsed(),
    })
}

/// The progress text of a live run: packets captured so far by every source and their rate,
/// the number of capture sources.
fn live_text(report: &Report, secs: f64) -> String {
    let sources = report.blocks.iter().filter(|b| b.source);
    let packets: u64 = sources.clone().filter_map(|b| b.counter("packets")).sum();
    format!(
        "{packets} packets ({}/s) on {} worker(s)",
        human_rate(packets as f64 / secs),
        sources.count()
    )
}

/// The input part of a live run's summary from its `afpacket_source` blocks (`sources`):
/// what the sockets delivered, the kernel's counters, the filter's rejections, each
/// worker's errors.
pub fn live_report(f: &Finished, live: &LiveInput, sources: &[String]) -> RunReport {
    let mut r = RunReport {
        elapsed: f.elapsed,
        ..RunReport::default()
    };
    let mut l = LiveReport {
        interfaces: live.interfaces.clone(),
        workers: sources.len(),
        user: live.user.clone(),
        ..LiveReport::default()
    };
    for b in sources.iter().filter_map(|n| f.report.block(n)) {
        let c = |name: &str| b.counter(name).unwrap_or(0);
        r.source.records += c("records");
        r.source.captured_bytes += c("captured_bytes");
        r.source.wire_bytes += c("wire_bytes");
        r.source.truncated_records += c("truncated_records");
        r.filter_rejected += c("filter_rejected");
        l.duplicates += c("duplicates");
        let s = &mut l.stats;
        s.kernel_packets += c("kernel_packets");
        s.kernel_drops += c("kernel_drops");
        s.kernel_freezes += c("kernel_freezes");
        s.losing_blocks += c("losing_blocks");
        s.loopback_outgoing += c("loopback_outgoing");
        s.hardware_timestamps += c("hardware_timestamps");
        s.vlan_restored += c("vlan_restored");
        s.interface_down += c("interface_down");
        s.reopened += c("reopened");
        let [hardware, kernel] = trawl_blocks::live::HOW_COUNTERS;
        l.timestamp_sources.push(if c(hardware) == 1 {
            "hardware"
        } else {
            "software"
        });
        l.kernel_filter |= c(kernel) == 1;
        r.input_errors.extend(b.error_messages.iter().cloned());
    }
    r.live = Some(l);
    r
}

/// A block name from an interface name: letters, digits, `_` and `-` only.
pub(crate) fn ident(iface: &str) -> String {
    iface
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Formats nanoseconds as a span the blocks' settings read (`30s`, `2m`, `1500ms`): the
/// largest unit that says it exactly.
pub fn span(ns: u64) -> String {
    const UNITS: [(u64, &str); 6] = [
        (86_400_000_000_000, "d"),
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
    ];
    for (scale, unit) in UNITS {
        if ns > 0 && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// The input part of the summary from the counters and messages of the `pcap_source` named
/// `source`: files read and failed, what the readers delivered, the filter's rejections and
/// warnings, and each input error (file, offset, what was wrong).
pub fn input_report(f: &Finished, source: &str) -> RunReport {
    let mut r = RunReport {
        elapsed: f.elapsed,
        ..RunReport::default()
    };
    let Some(b) = f.report.block(source) else {
        return r;
    };
    let c = |name: &str| b.counter(name).unwrap_or(0);
    r.files_read = c("files") as usize;
    r.files_failed = c("files_failed") as usize;
    r.source.records = c("records");
    r.source.captured_bytes = c("captured_bytes");
    r.source.wire_bytes = c("wire_bytes");
    r.source.truncated_records = c("truncated_records");
    r.source.skipped_blocks = c("skipped_blocks");
    r.filter_rejected = c("filter_rejected");
    for m in &b.messages {
        match m.kind {
            MessageKind::Warning => r.filter_warnings.push(m.text.clone()),
            MessageKind::Error => r.input_errors.push(m.text.clone()),
            MessageKind::Note => {}
        }
    }
    r
}

/// The meters' statistics, their tables and series counters summed over the `flow_meter`
/// blocks named `names` (the workers of one run).
pub fn meters(f: &Finished, names: &[String]) -> (MeterStats, TableSize, Option<SeriesStats>) {
    let mut stats = MeterStats::default();
    let mut table = TableSize::default();
    let mut series: Option<SeriesStats> = None;
    for b in names.iter().filter_map(|n| f.report.block(n)) {
        let (s, t, r) = trawl_blocks::meter::meter_report(b);
        stats.merge(&s);
        table.merge(&t);
        if let Some(r) = r {
            let sum = series.get_or_insert_with(SeriesStats::default);
            sum.rows += r.rows;
            sum.late_packets += r.late_packets;
            sum.skipped_empty_seconds += r.skipped_empty_seconds;
        }
    }
    (stats, table, series)
}

/// The progress text of a file command: files, packets and their rate, megabytes, and the
/// meters' active flows (when the plan has meters).
fn packets_text(report: &Report, source: &BlockReport, secs: f64) -> Option<String> {
    let c = |name: &str| source.counter(name).unwrap_or(0);
    let packets = c("records");
    if packets == 0 {
        return None;
    }
    let meters = report.blocks.iter().filter(|b| b.type_name == "flow_meter");
    let active: u64 = meters
        .clone()
        .map(|b| b.counter("active_flows").unwrap_or(0))
        .sum();
    let flows = if meters.count() > 0 {
        format!(", {active} active flows")
    } else {
        String::new()
    };
    Some(format!(
        "file {}, {} packets ({}/s), {} MB{flows}",
        c("files"),
        packets,
        human_rate(packets as f64 / secs),
        c("captured_bytes") / 1_000_000,
    ))
}

#[cfg(test)]
mod tests {
    use super::span;

    #[test]
    fn spans_use_the_largest_exact_unit() {
        assert_eq!(span(30_000_000_000), "30s");
        assert_eq!(span(1_800_000_000_000), "30m");
        assert_eq!(span(2_500_000_000), "2500ms");
        assert_eq!(span(86_400_000_000_000), "1d");
        assert_eq!(span(7), "7ns");
        assert_eq!(span(0), "0ns");
    }
}
