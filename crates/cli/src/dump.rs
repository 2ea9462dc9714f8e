//! Packet storage commands: `trawl dump` (capture files into a packet store: a composition of
//! the `pcap_source` and the `dumper` block `trawl run --dump` uses) and `trawl packets` (a
//! time window out of a store, as pcap).
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Deserialize;
use trawl_blocks::output::OutputFile;
use trawl_capture::LinkType;
use trawl_compose::{BlockReport, Document, MessageKind, Policy};
use trawl_packets::{
    set_io_priority, Budget, CaptureWriter, CutoffStats, DumperConfig, DumperStats, IoPriority,
    PacketStore, RetentionStats, Selection,
};

use crate::flag::{parse_duration_ns, parse_size, topic, SummaryFormat};
use crate::plan::files::{FileInput, SOURCE};
use crate::progress::ProgressLine;

/// Settings of the packet store, shared by `trawl dump`, `trawl run --dump` and the `[dump]`
/// table of the configuration file (same names, `-` in options, `_` in the file).
#[derive(Args, Deserialize, Debug, Default, Clone)]
#[serde(deny_unknown_fields)]
pub struct StoreSettings {
    /// The store directory (configuration file `[dump] dir`; on the command line it is
    /// `--dump DIR` or `trawl dump -w DIR`).
    #[arg(skip)]
    pub dir: Option<PathBuf>,
    /// Close a segment before it exceeds this size (default 1GiB).
    #[arg(help_heading = topic::PACKET_STORE, long = "segment-size", value_name = "SIZE")]
    pub segment_size: Option<String>,
    /// Close a segment this long (packet time) after its first packet (default 60s); segments
    /// also end at every hour boundary.
    #[arg(help_heading = topic::PACKET_STORE, long = "segment-time", value_name = "DURATION")]
    pub segment_time: Option<String>,
    /// Bytes per disk write (multiple of 4KiB, default 4MiB).
    #[arg(help_heading = topic::PACKET_STORE, long = "write-block", value_name = "SIZE")]
    pub write_block: Option<String>,
    /// Keep only the first SIZE bytes of every flow (frame lengths, both directions).
    #[arg(help_heading = topic::PACKET_STORE, long, value_name = "SIZE")]
    pub cutoff: Option<String>,
    /// Index hashed addresses and ports per chunk (default true); host/port filtered
    /// retrieval then skips chunks without them.
    #[arg(help_heading = topic::PACKET_STORE, long = "host-index", value_name = "BOOL")]
    pub host_index: Option<bool>,
    /// Write with O_DIRECT where the filesystem supports it (default true).
    #[arg(help_heading = topic::PACKET_STORE, long = "direct-io", value_name = "BOOL")]
    pub direct_io: Option<bool>,
    /// Disk budget of the store: a size (`500GiB`) or a percentage of the volume (`80%`).
    /// The oldest segments are deleted to stay within it.
    #[arg(
        help_heading = topic::PACKET_STORE,
        long = "dump-max-size",
        alias = "retention-size",
        value_name = "SIZE|PCT%"
    )]
    pub retention_size: Option<String>,
    /// Delete segments whose packets are older than this (packet time, e.g. `7d`).
    #[arg(
        help_heading = topic::PACKET_STORE,
        long = "dump-max-age",
        alias = "retention-age",
        value_name = "DURATION"
    )]
    pub retention_age: Option<String>,
}

impl StoreSettings {
    /// `self` where given, else `other`.
    pub fn or(self, other: &StoreSettings) -> StoreSettings {
        let o = other.clone();
        StoreSettings {
            dir: self.dir.or(o.dir),
            segment_size: self.segment_size.or(o.segment_size),
            segment_time: self.segment_time.or(o.segment_time),
            write_block: self.write_block.or(o.write_block),
            cutoff: self.cutoff.or(o.cutoff),
            host_index: self.host_index.or(o.host_index),
            direct_io: self.direct_io.or(o.direct_io),
            retention_size: self.retention_size.or(o.retention_size),
            retention_age: self.retention_age.or(o.retention_age),
        }
    }
}

/// Checked store settings.
#[derive(Clone, Debug)]
pub struct StorePlan {
    pub dumper: DumperConfig,
    pub budget: Option<Budget>,
}

impl StorePlan {
    pub fn new(dir: &Path, s: &StoreSettings) -> Result<StorePlan> {
        let mut c = DumperConfig::new(dir);
        let size = |v: &Option<String>, key: &str| -> Result<Option<u64>> {
            v.as_deref()
                .map(|t| {
                    parse_size(t)
                        .map(|v| v as u64)
                        .map_err(|e| anyhow::anyhow!("{key}: {e}"))
                })
                .transpose()
        };
        let duration = |v: &Option<String>, key: &str| -> Result<Option<u64>> {
            v.as_deref()
                .map(|t| parse_duration_ns(t).map_err(|e| anyhow::anyhow!("{key}: {e}")))
                .transpose()
        };
        if let Some(v) = size(&s.segment_size, "segment-size")? {
            c.segment_bytes = v;
        }
        if let Some(v) = duration(&s.segment_time, "segment-time")? {
            c.segment_ns = v;
        }
        if let Some(v) = size(&s.write_block, "write-block")? {
            c.block_bytes = v as usize;
        }
        c.cutoff_bytes = size(&s.cutoff, "cutoff")?;
        c.host_index = s.host_index.unwrap_or(true);
        c.direct_io = s.direct_io.unwrap_or(true);
        let budget = match s.retention_size.as_deref() {
            None => None,
            Some(t) => Some(match t.trim().strip_suffix('%') {
                Some(p) => {
                    let p: f64 = p
                        .trim()
                        .parse()
                        .map_err(|_| anyhow::anyhow!("dump-max-size: '{t}' is not a percentage"))?;
                    if !(0.0..=100.0).contains(&p) || p == 0.0 {
                        bail!("dump-max-size: {p}% is not between 0 and 100");
                    }
                    Budget::Percent(p)
                }
                None => Budget::Bytes(size(&s.retention_size, "dump-max-size")?.unwrap_or(0)),
            }),
        };
        // Checked here, applied by the `dumper` block.
        duration(&s.retention_age, "dump-max-age")?;
        Ok(StorePlan { dumper: c, budget })
    }

    /// Refuses a disk budget that leaves no room for the `writers` segments open at once.
    pub fn check_room(&self, writers: usize) -> Result<()> {
        let reserve = self.dumper.segment_bytes.saturating_mul(writers as u64);
        if let Some(Budget::Bytes(b)) = self.budget {
            if b <= reserve {
                bail!(
                    "dump-max-size {b} bytes leaves no room: it must exceed the segments being \
                     written ({writers} x segment-size {} bytes)",
                    self.dumper.segment_bytes
                );
            }
        }
        Ok(())
    }
}

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// Capture file to store (pcap, pcapng, HPCAP raw; gzip/zstd). Repeat for several.
    #[arg(help_heading = topic::INPUT, short = 'r', long = "read", value_name = "FILE", required = true)]
    pub read: Vec<PathBuf>,
    /// The packet store directory.
    #[arg(help_heading = topic::PACKET_STORE, short = 'w', long = "write", value_name = "DIR")]
    pub dir: PathBuf,
    /// Only packets matching this tcpdump filter expression.
    #[arg(help_heading = topic::FILTER, short = 'f', long = "filter", value_name = "BPF")]
    pub filter: Option<String>,
    /// Interface name for packets whose file names none (pcap files); default `if0`, `if1`...
    #[arg(help_heading = topic::INPUT, short = 'i', long = "interface", alias = "iface", value_name = "NAME")]
    pub iface: Option<String>,
    /// Write on a thread of its own, the packets handed to it through the runtime's queue, as
    /// `trawl run --dump` does live (default: the reading thread writes them, which needs one
    /// core instead of two).
    #[arg(help_heading = topic::PACKET_STORE, long = "via-ring")]
    pub via_ring: bool,
    #[command(flatten)]
    pub store: StoreSettings,
    /// Summary on standard error at the end.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    /// Print the composition of blocks these flags build (TOML, for `trawl check -c` and
    /// `trawl run -c`) instead of running it.
    #[arg(help_heading = topic::OUTPUT, long = "print-composition")]
    pub print_composition: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoClass {
    /// Only when nobody else uses the disk.
    Idle,
    /// Best effort, lowest level.
    Low,
    /// Leave the priority alone.
    Normal,
}

#[derive(Args, Debug)]
pub struct PacketsArgs {
    /// The packet store directory to read (`-r`, as tcpdump reads a file; `trawl dump -w`
    /// writes it).
    #[arg(help_heading = topic::INPUT, short = 'r', long = "read", alias = "dir", value_name = "DIR")]
    pub dir: PathBuf,
    /// First instant: RFC 3339 (`2026-11-22T10:05:00Z`), a local wall-clock time in `TZ`
    /// (`2026-11-22 14:00`), epoch seconds (or ms/us/ns), or relative (`-15m`, `15m ago`).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = crate::flag::parse_time)]
    pub from: Option<u64>,
    /// End (exclusive), same forms; default: no end.
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = crate::flag::parse_time)]
    pub to: Option<u64>,
    /// Only packets matching this tcpdump filter expression.
    #[arg(help_heading = topic::FILTER, short = 'f', long = "filter", value_name = "BPF")]
    pub filter: Option<String>,
    /// Only packets of this interface (repeat for several).
    #[arg(help_heading = topic::FILTER, short = 'i', long = "interface", value_name = "IFACE")]
    pub interface: Vec<String>,
    /// Write the packets to this capture file (`-`: standard output, e.g. into `tshark -r -`).
    #[arg(help_heading = topic::OUTPUT, short = 'w', long = "write", value_name = "PATH")]
    pub write: PathBuf,
    /// pcap (one link type) or pcapng (interfaces kept, link types may mix); default pcapng
    /// for a `.pcapng` file name or when the selection mixes link types, else pcap.
    #[arg(help_heading = topic::OUTPUT, long, value_enum)]
    pub format: Option<CaptureFormat>,
    /// Stop after this many packets.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "N")]
    pub count: Option<u64>,
    /// I/O priority of the reading: `idle` leaves the disk to capture entirely, `low` is the
    /// lowest best-effort level.
    #[arg(help_heading = topic::INPUT, long = "io-priority", value_enum, default_value_t = IoClass::Low)]
    pub io_priority: IoClass,
    /// Summary on standard error at the end.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
}

pub fn dump(a: &DumpArgs) -> Result<ExitCode> {
    // The settings are checked as the command line names them, before anything runs.
    let store_plan = StorePlan::new(&a.dir, &a.store)?;
    store_plan.dumper.validate()?;
    store_plan.check_room(1)?;
    if let Some(f) = &a.filter {
        crate::run::check_filter(f)?;
    }
    let doc = dump_plan(a);
    if a.print_composition {
        print!("{}", doc.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    let finished = crate::plan::run(&doc, crate::progress::on_terminal().then_some(SOURCE))?;
    let input = crate::plan::input_report(&finished, SOURCE);
    let store = finished.report.block(STORE);
    let retention = a.store.retention_size.is_some() || a.store.retention_age.is_some();
    let (stats, retention) = store_report(store, retention);
    let mut errors = input.input_errors.clone();
    errors.extend(store.iter().flat_map(|b| b.error_messages.iter().cloned()));
    // Segments a killed writer left open, repaired when their stream started again.
    let store_warnings: Vec<String> = store
        .iter()
        .flat_map(|b| &b.messages)
        .filter(|m| m.kind == MessageKind::Warning)
        .map(|m| m.text.clone())
        .collect();
    for e in &errors {
        eprintln!("trawl: {e}");
    }
    let secs = finished.elapsed.as_secs_f64();
    let (read, filtered, r) = (
        input.source.records,
        input.filter_rejected,
        retention.as_ref(),
    );
    match a.summary {
        SummaryFormat::None => {}
        SummaryFormat::Json => {
            let mut json = dump_json(&stats, r, read, filtered, secs, &errors);
            // Only where a filter could not apply to a file (before issue 19 that refused the
            // run), so the summary is otherwise as it was.
            if !input.filter_warnings.is_empty() {
                json["filter_warnings"] = serde_json::json!(input.filter_warnings);
            }
            if !store_warnings.is_empty() {
                json["store_warnings"] = serde_json::json!(store_warnings);
            }
            eprintln!("{json}");
        }
        SummaryFormat::Text => {
            print_dump_text(&stats, r, filtered, secs, &errors);
            for w in input.filter_warnings.iter().chain(&store_warnings) {
                eprintln!("  warning: {w}");
            }
        }
    }
    Ok(if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// The dumper block's counters as the store's statistics (and retention's, when it ran).
fn store_report(
    store: Option<&BlockReport>,
    retention: bool,
) -> (DumperStats, Option<RetentionStats>) {
    let c = |name: &str| store.and_then(|b| b.counter(name)).unwrap_or(0);
    let stats = DumperStats {
        packets: c("packets"),
        bytes: c("bytes"),
        segments: c("segments"),
        truncated: c("truncated"),
        timestamps_clamped: c("timestamps_clamped"),
        repaired: c("segments_repaired"),
        repaired_bytes_cut: c("repaired_bytes_cut"),
        cutoff: CutoffStats {
            packets_cut: c("cutoff_packets"),
            bytes_cut: c("cutoff_bytes"),
            flows_cut: c("cutoff_flows"),
            evictions: c("cutoff_evictions"),
        },
        direct_io: c("direct_io") != 0,
    };
    let retention = retention.then(|| RetentionStats {
        deleted_for_budget: c("deleted_for_budget"),
        deleted_for_age: c("deleted_for_age"),
        deleted_for_space: c("deleted_for_space"),
        bytes_deleted: c("bytes_deleted"),
        errors: c("retention_errors"),
        stored_bytes: c("stored_bytes"),
        stored_segments: c("stored_segments"),
    });
    (stats, retention)
}

/// The name of the `dumper` block in `trawl dump`'s plan (as in the monitor's).
const STORE: &str = "dump";

/// `trawl dump` as a composition: the files' `pcap_source` (merged by time, the filter
/// compiled per file, unnamed interfaces named after `--iface`) into a `dumper`. With
/// `--via-ring` the dumper runs on a thread of its own and the packets cross to it through
/// the runtime's queue, as the monitor's capture threads hand them to its store.
fn dump_plan(a: &DumpArgs) -> Document {
    let mut doc = Document::new();
    let input = FileInput {
        files: a.read.clone(),
        filter: a.filter.clone(),
        format: None,
    };
    let gate = input.add(&mut doc);
    // As `trawl dump` always named them: `--iface NAME` for each file's first unnamed
    // interface (NAME1, NAME2... for the others), else if0, if1... by their place in the file.
    let unnamed = a.iface.clone().unwrap_or_else(|| "if{}".to_string());
    if let Some(t) = doc.block_table(SOURCE) {
        t.insert("iface".into(), unnamed.into());
    }
    if a.via_ring {
        doc.pool_of_threads("outputs", 1);
    }
    let mut s = a.store.clone();
    s.dir = Some(a.dir.clone());
    add_dumper(&mut doc, STORE, a.via_ring.then_some("outputs"), &s);
    doc.connect(&gate, &[&format!("{STORE}.packets")], Policy::Wait);
    doc
}

/// A `dumper` block named `name` with the store settings `s` (its `dir` set), on the first
/// thread of `pool` if given, as `trawl dump` and the monitor (`trawl run --dump`) store
/// packets.
pub fn add_dumper(doc: &mut Document, name: &str, pool: Option<&str>, s: &StoreSettings) {
    let dir = s.dir.as_ref().expect("a store has a directory");
    let mut b = doc.block(name, "dumper");
    if let Some(pool) = pool {
        b = b.on(pool, Some(0));
    }
    let _ = b
        .set("dir", dir.display().to_string())
        .set_some("segment_size", s.segment_size.as_deref())
        .set_some("segment_time", s.segment_time.as_deref())
        .set_some("write_block", s.write_block.as_deref())
        .set_some("cutoff", s.cutoff.as_deref())
        .set_some("host_index", s.host_index)
        .set_some("direct_io", s.direct_io)
        .set_some("retention_size", s.retention_size.as_deref())
        .set_some("retention_age", s.retention_age.as_deref());
}

/// The store's counters as a JSON object (the `trawl dump` summary, the `dump` section of the
/// `trawl run` summary).
fn dump_json(
    s: &DumperStats,
    r: Option<&RetentionStats>,
    packets_in: u64,
    filtered_out: u64,
    secs: f64,
    errors: &[String],
) -> serde_json::Value {
    serde_json::json!({
        "command": "dump",
        "packets_read": packets_in,
        "packets_filtered_out": filtered_out,
        "packets_written": s.packets,
        "bytes_written": s.bytes,
        "segments": s.segments,
        "direct_io": s.direct_io,
        "records_truncated": s.truncated,
        "timestamps_clamped": s.timestamps_clamped,
        "segments_repaired": s.repaired,
        "repaired_bytes_cut": s.repaired_bytes_cut,
        "cutoff": {
            "packets_cut": s.cutoff.packets_cut,
            "bytes_cut": s.cutoff.bytes_cut,
            "flows_cut": s.cutoff.flows_cut,
            "evictions": s.cutoff.evictions,
        },
        "retention": r.map(|r| serde_json::json!({
            "deleted_for_budget": r.deleted_for_budget,
            "deleted_for_age": r.deleted_for_age,
            "deleted_for_space": r.deleted_for_space,
            "bytes_deleted": r.bytes_deleted,
            "stored_bytes": r.stored_bytes,
            "stored_segments": r.stored_segments,
            "errors": r.errors,
        })),
        "seconds": secs,
        "errors": errors,
    })
}

fn print_dump_text(
    s: &DumperStats,
    r: Option<&RetentionStats>,
    filtered_out: u64,
    secs: f64,
    errors: &[String],
) {
    let mb = s.bytes as f64 / 1e6;
    let rate = if secs > 0.0 {
        format!(" in {secs:.2} s, {:.0} MB/s", mb / secs)
    } else {
        String::new()
    };
    eprintln!(
        "trawl dump: {} packets, {:.1} MB in {} segments ({}){rate}",
        s.packets,
        mb,
        s.segments,
        if s.direct_io { "O_DIRECT" } else { "buffered" },
    );
    if filtered_out > 0 {
        eprintln!("  {filtered_out} packets did not match the filter");
    }
    if s.repaired > 0 {
        eprintln!(
            "  repaired {} segment(s) left open by a crash ({} bytes of torn tail cut)",
            s.repaired, s.repaired_bytes_cut
        );
    }
    if s.timestamps_clamped > 0 {
        eprintln!(
            "  {} timestamps after 2106 stored as 2106-02-07T06:28:15.999999999Z (pcap's limit)",
            s.timestamps_clamped
        );
    }
    if s.cutoff.packets_cut > 0 {
        eprintln!(
            "  cutoff: {} packets ({} bytes) of {} flows not stored",
            s.cutoff.packets_cut, s.cutoff.bytes_cut, s.cutoff.flows_cut
        );
    }
    if let Some(r) = r {
        eprintln!(
            "  retention: {} segments deleted ({} budget, {} age, {} space), {} bytes; {} segments / {} bytes stored",
            r.deleted_for_budget + r.deleted_for_age + r.deleted_for_space,
            r.deleted_for_budget,
            r.deleted_for_age,
            r.deleted_for_space,
            r.bytes_deleted,
            r.stored_segments,
            r.stored_bytes
        );
    }
    for e in errors {
        eprintln!("  error: {e}");
    }
}

pub fn packets(a: &PacketsArgs) -> Result<ExitCode> {
    let from = a.from.unwrap_or(0);
    let to = a.to.unwrap_or(u64::MAX);
    if to <= from {
        bail!("--to must be after --from");
    }
    if let Some(f) = &a.filter {
        crate::run::check_filter(f)?;
    }
    match a.io_priority {
        IoClass::Idle => set_io_priority(IoPriority::Idle)?,
        IoClass::Low => set_io_priority(IoPriority::BestEffort(7))?,
        IoClass::Normal => {}
    }
    let store = PacketStore::open(&a.dir)?;
    if !store.has_segments()? && !is_empty_dir(&a.dir)? {
        bail!(
            "{} holds no trawl packet store (no segment under YYYY-MM-DD/HH/)",
            a.dir.display()
        );
    }
    let sel = Selection {
        from_ns: from,
        to_ns: to,
        ifaces: a.interface.clone(),
        filter: a.filter.clone(),
    };
    let started = Instant::now();
    // Decided before the file is created: a pcap file holds one link type.
    let pcapng = choose_pcapng(a, &store.link_types(&sel)?)?;
    let sink = OutputFile::create(&a.write)
        .with_context(|| format!("cannot create output file {}", a.write.display()))?;
    let mut writer = CaptureWriter::new(sink, pcapng)?;
    let mut failure: Option<anyhow::Error> = None;
    let mut written = 0u64;
    let limit = a.count.unwrap_or(u64::MAX);
    // Progress by packet time through the part of the window the store holds: the reader
    // goes through it in time order.
    let mut line = ProgressLine::new(crate::progress::on_terminal());
    let span = match line.enabled().then(|| store.span()).transpose()?.flatten() {
        Some(s) => (from.max(s.first_ns), to.min(s.last_ns)),
        None => (0, 0),
    };
    let stats = store.read(&sel, |p| {
        if written >= limit {
            return ControlFlow::Break(());
        }
        if line.due() {
            let done = p.ts_ns.saturating_sub(span.0);
            let rate = trawl_compose::human_rate(written as f64 / line.elapsed_s());
            let text = format!("{written} packets ({rate}/s)");
            line.draw_position(done, span.1.saturating_sub(span.0), &text);
        }
        match writer.write(p) {
            Ok(()) => {
                written += 1;
                ControlFlow::Continue(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ControlFlow::Break(()),
            Err(e) => {
                failure = Some(e.into());
                ControlFlow::Break(())
            }
        }
    })?;
    line.clear();
    if let Some(e) = failure {
        return Err(e);
    }
    writer.finish()?;
    let window_empty = stats.segments_selected == 0
        || (stats.segments_unindexed == 0 && stats.chunks_skipped_time == stats.chunks_total);
    if written == 0 && window_empty {
        eprintln!("trawl: note: {}", empty_window_note(&store, a)?);
    }
    let secs = started.elapsed().as_secs_f64();
    let json = serde_json::json!({
        "command": "packets",
        "packets_written": written,
        "packets_scanned": stats.packets_scanned,
        "segments_selected": stats.segments_selected,
        "segments_unindexed": stats.segments_unindexed,
        "chunks_total": stats.chunks_total,
        "chunks_skipped_time": stats.chunks_skipped_time,
        "chunks_skipped_index": stats.chunks_skipped_index,
        "bytes_read": stats.bytes_read,
        "seconds": secs,
        "errors": stats.errors,
    });
    match a.summary {
        SummaryFormat::None => {}
        SummaryFormat::Json => eprintln!("{json}"),
        SummaryFormat::Text => {
            eprintln!(
                "trawl packets: {written} packets written; {} segments, {} of {} chunks read \
                 ({} skipped by time, {} by the host index), {:.1} MB read in {:.2} s",
                stats.segments_selected,
                stats.chunks_total - stats.chunks_skipped_time - stats.chunks_skipped_index,
                stats.chunks_total,
                stats.chunks_skipped_time,
                stats.chunks_skipped_index,
                stats.bytes_read as f64 / 1e6,
                secs
            );
            for e in &stats.errors {
                eprintln!("  problem: {e}");
            }
        }
    }
    Ok(if stats.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Whether `dir` has no entry at all: a store whose every segment retention deleted (or that
/// never got one) is that, and is not mistaken for some other directory.
pub fn is_empty_dir(dir: &Path) -> Result<bool> {
    let mut entries =
        std::fs::read_dir(dir).with_context(|| format!("cannot read {}", dir.display()))?;
    Ok(entries.next().is_none())
}

/// What a selection without packets is next to: the span and interfaces the store holds.
fn empty_window_note(store: &PacketStore, a: &PacketsArgs) -> Result<String> {
    let Some(span) = store.span()? else {
        return Ok(format!(
            "{} is empty: no segment stored yet, or retention deleted them all",
            a.dir.display()
        ));
    };
    Ok(format!(
        "no stored packet in the time range{}; the store holds {} .. {} (interfaces {})",
        if a.interface.is_empty() {
            ""
        } else {
            " and interfaces"
        },
        trawl_time::Civil::from_unix_ns(span.first_ns),
        trawl_time::Civil::from_unix_ns(span.last_ns),
        span.ifaces.join(", ")
    ))
}

/// Whether `trawl packets` writes pcapng: when asked (`--format pcapng`, a `.pcapng` name), or
/// when the selection's segments mix link types and pcap was not forced; `--format pcap` over
/// mixed link types is refused before the file is created.
fn choose_pcapng(a: &PacketsArgs, links: &[(String, LinkType)]) -> Result<bool> {
    let asked = match a.format {
        Some(f) => Some(f == CaptureFormat::Pcapng),
        None if a.write.extension().is_some_and(|e| e == "pcapng") => Some(true),
        None => None,
    };
    let pcapng = trawl_packets::choose_pcapng(asked, links)
        .map_err(|e| anyhow::anyhow!("{e} (--format pcapng, a .pcapng file, or -i)"))?;
    if pcapng && asked.is_none() {
        eprintln!(
            "trawl: note: the selection mixes link types ({}): writing pcapng to {}",
            trawl_packets::mixed_list(links),
            a.write.display()
        );
    }
    Ok(pcapng)
}

/// The capture file `trawl packets` writes.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    /// Classic pcap, nanosecond timestamps: one link type per file.
    Pcap,
    /// pcapng: one interface block per stored interface (names kept), link types may mix.
    Pcapng,
}
