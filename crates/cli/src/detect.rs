//! `trawl detect`: the monitoring applications over capture files, events as JSON lines (the
//! same detectors and the same JSON as the `synflood` and `heavy_hitters` blocks).
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use serde_json::Value;
use trawl_blocks::detect::{heavy_json, synflood_json, HeavySettings, SynFloodSettings};
use trawl_capture::{reuse_records, FileSourceConfig, PacketRecord};
use trawl_detect::cusum::CusumConfig;
use trawl_detect::heavy::HeavyHitters;
use trawl_detect::synflood::{SynFloodConfig, SynFloodDetector};

use crate::args::parse_duration_ns;
use trawl_capture::MergedFiles;

pub const DETECT_HELP: &str = "Output: one JSON object per line,
  {\"event\":\"start\",\"victim\":...,\"onset_ns\":...,\"detected_ns\":...,\"rate\":...}
  {\"event\":\"end\",\"victim\":...,\"onset_ns\":...,\"end_ns\":...,\"peak_rate\":...,\"syns\":...}
then a JSON summary on standard error. Rates are SYN/s. Thresholds are in SYNs per interval.

Exit codes:
  0  success (also when the output pipe is closed early)
  1  some input could not be read (the rest was processed)
  2  usage error";

pub const HEAVY_HELP: &str = "Output: one JSON object per interval,
  {\"event\":\"heavy_hitters\",\"start_ns\":...,\"end_ns\":...,\"flows_by_bytes\":S,
   \"flows_by_packets\":S,\"hosts_by_bytes\":S,\"hosts_by_packets\":S}
where each summary S is {\"total\":N,\"error_bound\":N/k,\"complete\":bool,
\"items\":[{\"item\":...,\"count\":...,\"error\":...}]}: a count overestimates the true
value by at most its error (<= N/k). Then a JSON summary on standard error.

Exit codes:
  0  success (also when the output pipe is closed early)
  1  some input could not be read (the rest was processed)
  2  usage error";

#[derive(Args, Debug)]
pub struct DetectArgs {
    #[command(subcommand)]
    pub app: DetectApp,
}

#[derive(Subcommand, Debug)]
pub enum DetectApp {
    /// SYN floods: a count-min sketch of SYNs per destination per interval and a CUSUM per
    /// sketch cell; reports each victim's alarm start and end.
    #[command(after_help = DETECT_HELP)]
    Synflood(SynfloodArgs),
    /// Heavy hitters: the top flows and hosts by bytes and packets per interval
    /// (Space-Saving), or every one over a threshold.
    #[command(name = "heavy-hitters", after_help = HEAVY_HELP)]
    HeavyHitters(HeavyArgs),
}

#[derive(Args, Debug)]
pub struct SynfloodArgs {
    /// Capture files, merged by packet time into one stream.
    #[arg(short = 'r', long = "read", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Interval length (e.g. 1s, 500ms).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration_ns)]
    pub interval: u64,
    /// Alarm when a cell's CUSUM exceeds this (SYNs per interval).
    #[arg(long, default_value_t = CusumConfig::default().threshold)]
    pub threshold: f64,
    /// SYNs per interval over the learned mean that do not accumulate.
    #[arg(long, default_value_t = CusumConfig::default().drift)]
    pub drift: f64,
    /// Upper clamp of the CUSUM, bounding how long an alarm outlives the flood (default twice
    /// the threshold).
    #[arg(long)]
    pub ceiling: Option<f64>,
    /// Count-min relative error.
    #[arg(long, default_value_t = SynFloodConfig::default().epsilon)]
    pub epsilon: f64,
    /// Count-min failure probability.
    #[arg(long, default_value_t = SynFloodConfig::default().delta)]
    pub delta: f64,
}

#[derive(Args, Debug)]
pub struct HeavyArgs {
    /// Capture files, merged by packet time into one stream.
    #[arg(short = 'r', long = "read", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Report interval, in packet time (e.g. 10s, 1m).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration_ns)]
    pub interval: u64,
    /// Counters per summary: counts are overestimated by at most N/k.
    #[arg(long, default_value_t = 1024)]
    pub k: usize,
    /// Report the top N of each summary (the default, 10) ...
    #[arg(long, conflicts_with_all = ["min_bytes", "min_packets"])]
    pub top: Option<usize>,
    /// ... or every item over this many bytes (with --min-packets).
    #[arg(long, requires = "min_packets")]
    pub min_bytes: Option<u64>,
    /// ... and this many packets.
    #[arg(long, requires = "min_bytes")]
    pub min_packets: Option<u64>,
}

pub fn run(args: &DetectArgs) -> Result<ExitCode> {
    match &args.app {
        DetectApp::Synflood(a) => {
            let config = SynFloodSettings {
                interval: Some(a.interval),
                threshold: Some(a.threshold),
                drift: Some(a.drift),
                ceiling: a.ceiling,
                epsilon: Some(a.epsilon),
                delta: Some(a.delta),
            }
            .config()
            .map_err(anyhow::Error::msg)?;
            let mut det = SynFloodDetector::new(config);
            let mut found = Vec::new();
            let outcome = each_packet(&a.files, |p, out| {
                match p {
                    Some(p) => det.observe_packet(p, &mut found),
                    None => det.finish(&mut found),
                }
                out.extend(found.drain(..).map(|e| synflood_json(&e)));
            })?;
            let stats = det.stats();
            let still_active: Vec<String> = det.active().map(|v| v.to_string()).collect();
            outcome.finish(serde_json::json!({
                "command": "detect synflood",
                "packets": stats.packets,
                "syns": stats.syns,
                "intervals": stats.intervals,
                "active_at_end": still_active,
            }))
        }
        DetectApp::HeavyHitters(a) => {
            let config = HeavySettings {
                interval: a.interval,
                k: a.k,
                top: a.top,
                min_bytes: a.min_bytes,
                min_packets: a.min_packets,
            }
            .config()
            .map_err(anyhow::Error::msg)?;
            let mut heavy = HeavyHitters::new(config);
            let mut reports = Vec::new();
            let mut packets = 0u64;
            let outcome = each_packet(&a.files, |p, out| {
                match p {
                    Some(p) => {
                        packets += 1;
                        heavy.observe_packet(p, &mut reports);
                    }
                    None => heavy.finish(&mut reports),
                }
                out.extend(reports.drain(..).map(|r| heavy_json(&r)));
            })?;
            outcome.finish(serde_json::json!({
                "command": "detect heavy-hitters",
                "packets": packets,
            }))
        }
    }
}

/// What reading the files gave: events written and files that failed.
struct Outcome {
    events: u64,
    read_errors: Vec<String>,
}

impl Outcome {
    /// Prints the summary (`fields` plus events and read errors) and picks the exit code.
    fn finish(self, mut fields: Value) -> Result<ExitCode> {
        if let Some(obj) = fields.as_object_mut() {
            obj.insert("events".into(), self.events.into());
            obj.insert("read_errors".into(), self.read_errors.clone().into());
        }
        eprintln!("{fields}");
        Ok(if self.read_errors.is_empty() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(1)
        })
    }
}

/// Reads `files` as one stream merged by packet time, calling `step` with each packet and once with `None` at the
/// end; it may add events, which are written as JSON lines to standard output as they come.
fn each_packet(
    files: &[PathBuf],
    mut step: impl FnMut(Option<&PacketRecord<'_>>, &mut Vec<Value>),
) -> Result<Outcome> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut events = Vec::new();
    let mut outcome = Outcome {
        events: 0,
        read_errors: Vec::new(),
    };
    let mut merged = MergedFiles::open(files, &FileSourceConfig::default());
    let mut batch = Vec::new();
    loop {
        let mut records = reuse_records(std::mem::take(&mut batch));
        if merged.next_batch(&mut records, |_, _| true).is_none() {
            break;
        }
        for pkt in &records {
            step(Some(pkt), &mut events);
        }
        batch = reuse_records(records);
        if !write_events(&mut out, &mut events, &mut outcome.events)? {
            break;
        }
    }
    outcome.read_errors = std::mem::take(&mut merged.errors);
    step(None, &mut events);
    write_events(&mut out, &mut events, &mut outcome.events)?;
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write the events")
        }
        _ => Ok(outcome),
    }
}

/// Writes and drains `events`; false when the output pipe closed (the run ends quietly).
fn write_events(out: &mut impl Write, events: &mut Vec<Value>, lines: &mut u64) -> Result<bool> {
    for v in events.drain(..) {
        match writeln!(out, "{v}") {
            Ok(()) => *lines += 1,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(false),
            Err(e) => return Err(e).context("cannot write the events"),
        }
    }
    Ok(true)
}
