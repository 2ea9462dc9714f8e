//! `trawl detect`: the monitoring applications over capture files or live capture, events as
//! JSON lines (the same detectors and the same JSON as the `synflood` and `heavy_hitters`
//! blocks).
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::{Args, Subcommand};
use serde_json::Value;
use trawl_blocks::detect::{HeavySettings, SynFloodSettings};
use trawl_compose::{Document, MessageKind, Policy};
use trawl_detect::cusum::CusumConfig;
use trawl_detect::synflood::SynFloodConfig;

use crate::flag::{parse_duration_ns, topic, TimeFormat};
use crate::flows::{LiveArgs, LiveInput};
use crate::plan::files::{FileInput, SOURCE};
use crate::plan::{self, span, Finished};

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
    /// The events' times (`onset_ns`, `start_ns`, ...): integers (ns since the epoch), or
    /// RFC 3339 text in UTC under the same names.
    #[arg(help_heading = topic::OUTPUT, long = "time-format", value_enum, default_value_t = TimeFormat::Ns, global = true)]
    pub time_format: TimeFormat,
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

/// Where a detector's packets come from: capture files, or live capture (`-i`).
#[derive(Args, Debug)]
pub struct DetectInput {
    /// Capture files, merged by packet time into one stream.
    #[arg(
        help_heading = topic::INPUT,
        short = 'r',
        long = "read",
        value_name = "FILE",
        required_unless_present = "interface"
    )]
    pub read: Vec<PathBuf>,
    #[command(flatten)]
    pub live: LiveArgs,
}

#[derive(Args, Debug)]
pub struct SynfloodArgs {
    #[command(flatten)]
    pub input: DetectInput,
    /// Interval length (e.g. 1s, 500ms).
    #[arg(help_heading = topic::DETECTOR, long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration_ns)]
    pub interval: u64,
    /// Alarm when a cell's CUSUM exceeds this (SYNs per interval).
    #[arg(help_heading = topic::DETECTOR, long, default_value_t = CusumConfig::default().threshold)]
    pub threshold: f64,
    /// SYNs per interval over the learned mean that do not accumulate.
    #[arg(help_heading = topic::DETECTOR, long, default_value_t = CusumConfig::default().drift)]
    pub drift: f64,
    /// Upper clamp of the CUSUM, bounding how long an alarm outlives the flood (default twice
    /// the threshold).
    #[arg(help_heading = topic::DETECTOR, long)]
    pub ceiling: Option<f64>,
    /// Count-min relative error.
    #[arg(help_heading = topic::DETECTOR, long, default_value_t = SynFloodConfig::default().epsilon)]
    pub epsilon: f64,
    /// Count-min failure probability.
    #[arg(help_heading = topic::DETECTOR, long, default_value_t = SynFloodConfig::default().delta)]
    pub delta: f64,
}

#[derive(Args, Debug)]
pub struct HeavyArgs {
    #[command(flatten)]
    pub input: DetectInput,
    /// Report interval, in packet time (e.g. 10s, 1m).
    #[arg(help_heading = topic::DETECTOR, long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration_ns)]
    pub interval: u64,
    /// Counters per summary: counts are overestimated by at most N/k.
    #[arg(help_heading = topic::DETECTOR, long, default_value_t = 1024)]
    pub k: usize,
    /// Report the top N of each summary (the default, 10) ...
    #[arg(help_heading = topic::DETECTOR, long, conflicts_with_all = ["min_bytes", "min_packets"])]
    pub top: Option<usize>,
    /// ... or every item over this many bytes (with --min-packets).
    #[arg(help_heading = topic::DETECTOR, long, requires = "min_packets")]
    pub min_bytes: Option<u64>,
    /// ... and this many packets.
    #[arg(help_heading = topic::DETECTOR, long, requires = "min_bytes")]
    pub min_packets: Option<u64>,
}

pub fn run(args: &DetectArgs) -> Result<ExitCode> {
    match &args.app {
        DetectApp::Synflood(a) => {
            // Checked here for the flags' own message before anything is read.
            SynFloodSettings {
                interval: Some(a.interval),
                threshold: Some(a.threshold),
                drift: Some(a.drift),
                ceiling: a.ceiling,
                epsilon: Some(a.epsilon),
                delta: Some(a.delta),
            }
            .config()
            .map_err(anyhow::Error::msg)?;
            let (mut doc, input) = Input::new(&a.input.read, &a.input.live)?;
            doc.block("detector", "synflood")
                .set("interval", span(a.interval))
                .set("threshold", a.threshold)
                .set("drift", a.drift)
                .set_some("ceiling", a.ceiling)
                .set("epsilon", a.epsilon)
                .set("delta", a.delta);
            let f = run_detector(doc, &input, "detector.alarms", args.time_format)?;
            let det = f.report.block("detector");
            let c = |name: &str| det.and_then(|b| b.counter(name)).unwrap_or(0);
            let still_active: Vec<String> = det
                .map(|b| {
                    b.messages
                        .iter()
                        .filter(|m| m.kind == MessageKind::Note)
                        .map(|m| m.text.clone())
                        .collect()
                })
                .unwrap_or_default();
            finish(
                &f,
                serde_json::json!({
                    "command": "detect synflood",
                    "packets": c("packets"),
                    "syns": c("syns"),
                    "intervals": c("intervals"),
                    "active_at_end": still_active,
                }),
            )
        }
        DetectApp::HeavyHitters(a) => {
            HeavySettings {
                interval: a.interval,
                k: a.k,
                top: a.top,
                min_bytes: a.min_bytes,
                min_packets: a.min_packets,
            }
            .config()
            .map_err(anyhow::Error::msg)?;
            let (mut doc, input) = Input::new(&a.input.read, &a.input.live)?;
            doc.block("detector", "heavy_hitters")
                .set("interval", span(a.interval))
                .set("k", a.k as i64)
                .set_some("top", a.top.map(|n| n as i64))
                .set_some("min_bytes", a.min_bytes.map(|n| n as i64))
                .set_some("min_packets", a.min_packets.map(|n| n as i64));
            let f = run_detector(doc, &input, "detector.reports", args.time_format)?;
            let packets = f.report.block("detector").map_or(0, |b| b.items_in);
            finish(
                &f,
                serde_json::json!({
                    "command": "detect heavy-hitters",
                    "packets": packets,
                }),
            )
        }
    }
}

/// Where the detector's packets come from: the capture files (merged by packet time into one
/// stream, no filter) or live capture (an `afpacket_source` per interface and worker, as
/// `trawl run -i` builds them).
enum Input {
    Files(String),
    Live(Vec<String>),
}

impl Input {
    /// A document with the input's blocks in it.
    fn new(files: &[PathBuf], live: &LiveArgs) -> Result<(Document, Input)> {
        let mut doc = Document::new();
        if live.interface.is_empty() {
            let files = FileInput {
                files: files.to_vec(),
                filter: None,
                format: None,
            };
            let gate = files.add(&mut doc);
            return Ok((doc, Input::Files(gate)));
        }
        let live = LiveInput::from_low(live)?;
        let gates = plan::live::capture(&mut doc, &live, None, 0)
            .into_iter()
            .map(|c| format!("{}.packets", c.name))
            .collect();
        Ok((doc, Input::Live(gates)))
    }
}

/// Connects the source to the detector and its events to standard output, and runs it: over
/// files to their end, live until a signal, `--duration` or `--count`.
fn run_detector(
    mut doc: Document,
    input: &Input,
    events: &str,
    times: TimeFormat,
) -> Result<Finished> {
    let gates = match input {
        Input::Files(gate) => std::slice::from_ref(gate),
        Input::Live(gates) => gates.as_slice(),
    };
    for gate in gates {
        doc.connect(gate, &["detector.packets"], Policy::Wait);
    }
    doc.block("events", "event_writer")
        .set("path", "-")
        .set("mode", "truncate")
        .set_some(
            "time_format",
            (times != TimeFormat::Ns).then_some(times.name()),
        );
    doc.connect(events, &["events.events"], Policy::Wait);
    match input {
        Input::Files(_) => plan::run(&doc, crate::progress::on_terminal().then_some(SOURCE)),
        Input::Live(_) => plan::run_live(&doc, crate::progress::on_terminal()),
    }
}

/// Prints the summary (`fields` plus events written and read errors) and picks the exit code.
fn finish(f: &Finished, mut fields: Value) -> Result<ExitCode> {
    let read_errors = plan::input_report(f, SOURCE).input_errors;
    let events = f.report.block("events").map_or(0, |b| b.items_in);
    if let Some(obj) = fields.as_object_mut() {
        obj.insert("events".into(), events.into());
        obj.insert("read_errors".into(), read_errors.clone().into());
    }
    eprintln!("{fields}");
    Ok(if read_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
