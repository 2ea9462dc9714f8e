//! `trawl voip -r FILE -o DIR`: SIP calls and their RTP streams from capture files, as a
//! composition (pcap_source -> sip -> rtp_calls -> two event writers) built in code and run by
//! the block runtime, so `trawl run -c` with the same blocks gives the same records.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use trawl_compose::{Document, Policy, Report};

use crate::flag::{parse_duration_ns, topic, TimeFormat};

pub const VOIP_HELP: &str = "Output: DIR/calls.jsonl (a record per call: Call-ID, From/To, user
agents, setup and answer times, duration, end reason, streams, worst MOS), DIR/rtp.jsonl (a
record per RTP stream: endpoints, SSRC, codec, packets, loss, duplicates, jitter, inter-arrival
and size statistics, RTCP loss and round trip, MOS) and DIR/anomalies.jsonl (INVITE floods,
failures, short calls and scans per source, from the `sip_anomaly` detector); fields in
docs/specs/voip.md. A JSON summary goes to standard error.

`trawl voip calls -r DIR` looks calls up in those files; `trawl voip audio` decodes a call's
G.711 to WAV.

Exit codes:
  0  success
  1  some input could not be read, or a block failed
  2  usage error";

pub mod audio;
pub mod calls;

#[derive(Args, Debug)]
pub struct VoipArgs {
    /// Look calls up in records already written, instead of reading capture files.
    #[command(subcommand)]
    pub command: Option<VoipCommand>,
    /// Capture files, merged by packet time into one stream.
    #[arg(help_heading = topic::INPUT, short = 'r', long = "read", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Directory for calls.jsonl and rtp.jsonl (created if missing; files are replaced).
    #[arg(help_heading = topic::OUTPUT, short = 'o', long = "output", value_name = "DIR", required = true)]
    pub out: Option<PathBuf>,
    /// Only RTP streams that SIP/SDP announced: no orphan streams found by heuristic.
    #[arg(help_heading = topic::DETECTOR, long)]
    pub no_orphans: bool,
    /// Calls held at once; beyond it the oldest call is evicted (and counted).
    #[arg(help_heading = topic::DETECTOR, long, value_name = "N")]
    pub max_calls: Option<usize>,
    /// A call with neither SIP nor RTP for this long ends as `timeout`.
    #[arg(help_heading = topic::DETECTOR, long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub call_timeout: Option<u64>,
    /// Print the composition this command runs and exit.
    #[arg(help_heading = topic::OUTPUT, long)]
    pub print_composition: bool,
    /// The records' instants (`invite_ns`, `first_ns`, ...): integers (ns since the epoch),
    /// or RFC 3339 text in UTC under the same names.
    #[arg(help_heading = topic::OUTPUT, long = "time-format", value_enum, default_value_t = TimeFormat::Ns)]
    pub time_format: TimeFormat,
}

#[derive(Subcommand, Debug)]
pub enum VoipCommand {
    /// Find calls by caller, callee, number or display name, and by time, in the records of
    /// `trawl voip -o DIR` or `trawl run --voip DIR` (table, JSON lines or CSV).
    Calls(calls::CallsArgs),
    /// Decode a call's G.711 (μ-law/A-law) RTP to a stereo WAV file (caller left, callee
    /// right), from the packet store or capture files; other codecs are named as not
    /// decodable, missing packets are silence (counted in the JSON summary).
    Audio(audio::AudioArgs),
}

/// The composition `trawl voip` runs.
pub fn document(a: &VoipArgs) -> Document {
    let files: Vec<String> = a.files.iter().map(|f| f.display().to_string()).collect();
    // Required unless a subcommand is given (clap checks it).
    let out = a.out.clone().unwrap_or_default();
    let path = |name: &str| out.join(name).display().to_string();
    let mut doc = Document::new();
    doc.block("file", "pcap_source").set("files", files);
    doc.block("sip", "sip");
    doc.block("calls", "rtp_calls")
        .set("orphans", !a.no_orphans)
        .set_some("max_calls", a.max_calls.map(|n| n as i64))
        .set_some(
            "call_timeout",
            a.call_timeout.map(|ns| format!("{}ms", ns / 1_000_000)),
        );
    let times = (a.time_format != TimeFormat::Ns).then_some(a.time_format.name());
    doc.block("calls_out", "event_writer")
        .set("path", path("calls.jsonl"))
        .set("mode", "truncate")
        .set_some("time_format", times);
    doc.block("rtp_out", "event_writer")
        .set("path", path("rtp.jsonl"))
        .set("mode", "truncate")
        .set_some("time_format", times);
    doc.block("anomaly", "sip_anomaly");
    doc.block("anomalies_out", "event_writer")
        .set("path", path("anomalies.jsonl"))
        .set("mode", "truncate")
        .set_some("time_format", times);
    // SIP first: a batch's SDP reaches the table before the batch's RTP does.
    doc.connect(
        "file.packets",
        &["sip.packets", "calls.packets"],
        Policy::Wait,
    );
    doc.connect("sip.sip", &["calls.sip", "anomaly.sip"], Policy::Wait);
    doc.connect("anomaly.alarms", &["anomalies_out.events"], Policy::Wait);
    doc.connect("calls.calls", &["calls_out.events"], Policy::Wait);
    doc.connect("calls.streams", &["rtp_out.events"], Policy::Wait);
    doc
}

pub fn run(a: &VoipArgs) -> Result<ExitCode> {
    match &a.command {
        Some(VoipCommand::Calls(c)) => return calls::run(c),
        Some(VoipCommand::Audio(c)) => return audio::run(c),
        None => {}
    }
    let doc = document(a);
    let text = doc.to_toml();
    if a.print_composition {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let out = a.out.as_deref().context("-o DIR is required")?;
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create output directory {}", out.display()))?;
    let (failure, report) = run_composition(&text, true)?;
    eprintln!("{}", summary(&report, failure.as_deref()));
    let errors = report.blocks.iter().any(|b| b.errors > 0);
    Ok(if failure.is_some() || errors {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Plans and runs the composition `text`; its failure, if any, and its counters.
fn run_composition(text: &str, print_messages: bool) -> Result<(Option<String>, Report)> {
    let cpus = trawl_capture::live::allowed_cpus();
    let mut plan = trawl_compose::plan(text, "trawl voip", &trawl_api::registry(), &cpus)?;
    plan.print_messages = print_messages;
    let running = trawl_compose::start(plan).map_err(anyhow::Error::msg)?;
    Ok(match running.wait() {
        Ok(r) => (None, r),
        Err((f, r)) => (Some(f), r),
    })
}

/// Runs `trawl voip` without its summary (for `trawl voip audio`'s first pass): an error when
/// an input could not be read or a block failed.
fn run_quietly(a: &VoipArgs) -> Result<()> {
    let (failure, report) = run_composition(&document(a).to_toml(), false)?;
    if let Some(f) = failure {
        anyhow::bail!("{f}");
    }
    if let Some(b) = report.blocks.iter().find(|b| b.errors > 0) {
        anyhow::bail!(
            "{}: {}",
            b.name,
            b.error_messages.first().map_or("failed", String::as_str)
        );
    }
    Ok(())
}

/// The JSON summary: the call table's counters and what was written.
fn summary(report: &Report, failure: Option<&str>) -> serde_json::Value {
    let counter = |block: &str, name: &str| report.block(block).and_then(|b| b.counter(name));
    let items = |block: &str| report.block(block).map_or(0, |b| b.items_in);
    serde_json::json!({
        "command": "voip",
        "packets": items("sip"),
        "sip_messages": counter("sip", "messages"),
        "sip_malformed": counter("sip", "malformed"),
        "calls": counter("calls", "calls"),
        "calls_evicted": counter("calls", "calls_evicted"),
        "rtp_packets": counter("calls", "rtp_packets"),
        "rtcp_packets": counter("calls", "rtcp_packets"),
        "streams_refused": counter("calls", "streams_refused"),
        "call_records": items("calls_out"),
        "stream_records": items("rtp_out"),
        "anomalies": items("anomalies_out"),
        "elapsed_s": report.elapsed_s,
        "failure": failure,
    })
}
