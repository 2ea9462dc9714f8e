//! `trawl detect`: the detection applications of `trawl-detect` over capture files, events as
//! JSON lines.
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use trawl_capture::{FileSource, PacketSource};
use trawl_detect::cusum::CusumConfig;
use trawl_detect::synflood::{SynFloodConfig, SynFloodDetector, SynFloodEvent};

use crate::args::parse_duration_ns;

pub const DETECT_HELP: &str = "Output: one JSON object per line,
  {\"event\":\"start\",\"victim\":...,\"onset_ns\":...,\"detected_ns\":...,\"rate\":...}
  {\"event\":\"end\",\"victim\":...,\"onset_ns\":...,\"end_ns\":...,\"peak_rate\":...,\"syns\":...}
then a JSON summary on standard error. Rates are SYN/s. Thresholds are in SYNs per interval.

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
}

#[derive(Args, Debug)]
pub struct SynfloodArgs {
    /// Capture files, read in order as one stream.
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

pub fn run(args: &DetectArgs) -> Result<ExitCode> {
    match &args.app {
        DetectApp::Synflood(a) => synflood(a),
    }
}

fn synflood(a: &SynfloodArgs) -> Result<ExitCode> {
    anyhow::ensure!(a.interval > 0, "--interval must be positive");
    anyhow::ensure!(a.drift > 0.0, "--drift must be positive");
    anyhow::ensure!(a.threshold >= 0.0, "--threshold must not be negative");
    anyhow::ensure!(
        a.epsilon > 0.0 && a.epsilon < 1.0 && a.delta > 0.0 && a.delta < 1.0,
        "--epsilon and --delta must be in (0, 1)"
    );
    let ceiling = a.ceiling.unwrap_or(2.0 * a.threshold);
    anyhow::ensure!(
        ceiling >= a.threshold,
        "--ceiling must be at least --threshold"
    );
    let config = SynFloodConfig {
        interval_ns: a.interval,
        epsilon: a.epsilon,
        delta: a.delta,
        cusum: CusumConfig {
            threshold: a.threshold,
            drift: a.drift,
            ceiling,
            ..CusumConfig::default()
        },
        ..SynFloodConfig::default()
    };
    let mut det = SynFloodDetector::new(config);
    let mut events = Vec::new();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut read_errors = Vec::new();
    let mut lines = 0u64;
    'files: for path in &a.files {
        let mut source = match FileSource::open(path) {
            Ok(s) => s,
            Err(e) => {
                read_errors.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        loop {
            match source.next_batch() {
                Ok(Some(batch)) => {
                    for pkt in batch.iter() {
                        det.observe_packet(&pkt, &mut events);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    read_errors.push(format!("{}: {e}", path.display()));
                    break;
                }
            }
            if !write_events(&mut out, &mut events, &mut lines)? {
                break 'files;
            }
        }
    }
    det.finish(&mut events);
    write_events(&mut out, &mut events, &mut lines)?;
    match out.flush() {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            return Err(e).context("cannot write the events")
        }
        _ => {}
    }
    let stats = det.stats();
    let still_active: Vec<String> = det.active().map(|v| v.to_string()).collect();
    let summary = serde_json::json!({
        "command": "detect synflood",
        "packets": stats.packets,
        "syns": stats.syns,
        "intervals": stats.intervals,
        "events": lines,
        "active_at_end": still_active,
        "read_errors": read_errors,
    });
    eprintln!("{summary}");
    Ok(if read_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Writes and drains `events`; false when the output pipe closed (the run ends quietly).
fn write_events(
    out: &mut impl Write,
    events: &mut Vec<SynFloodEvent>,
    lines: &mut u64,
) -> Result<bool> {
    for e in events.drain(..) {
        let v = trawl_blocks::detect::synflood_json(&e);
        match writeln!(out, "{v}") {
            Ok(()) => *lines += 1,
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(false),
            Err(e) => return Err(e).context("cannot write the events"),
        }
    }
    Ok(true)
}
