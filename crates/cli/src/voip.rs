//! `trawl voip -r FILE -o DIR`: SIP calls and their RTP streams from capture files, as a
//! composition (pcap_source -> sip -> rtp_calls -> two event writers) built in code and run by
//! the block runtime, so `trawl run -c` with the same blocks gives the same records.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use trawl_compose::{Document, Report};

use crate::flag::{parse_duration_ns, topic, TimeFormat};

pub const VOIP_HELP: &str = "Output: DIR/calls.jsonl (a record per call: Call-ID, From/To, user
agents, setup and answer times, duration, end reason, streams, worst MOS), DIR/rtp.jsonl (a
record per RTP stream: endpoints, SSRC, codec, packets, loss, duplicates, jitter, inter-arrival
and size statistics, RTCP loss and round trip, MOS) and DIR/anomalies.jsonl (INVITE floods,
failures, short calls and scans per source, from the `sip_anomaly` detector); with
`--stats-every`, DIR/stats.jsonl (the process's CPU time, peak memory and the call table's
counters at each multiple of the span in packet time and at the end); fields in
docs/specs/voip.md. A JSON summary goes to standard error.

`trawl voip calls -r DIR` looks calls up in those files; `trawl voip audio` decodes a call's
G.711 to WAV.

Exit codes:
  0  success
  1  some input could not be read, or a block failed
  2  usage error";

pub mod audio;
pub mod calls;
pub mod records;
use records::Records;

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
    /// Write DIR/stats.jsonl: a line each time the packets' time crosses a multiple of this
    /// span (since the epoch) and one at the input's end, with the process's CPU time so far
    /// (every thread), its peak memory and the call table's counters.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub stats_every: Option<u64>,
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
    records::document(&Records {
        files: &a.files,
        // Required unless a subcommand is given (clap checks it).
        out: a.out.as_deref().unwrap_or(std::path::Path::new("")),
        orphans: !a.no_orphans,
        max_calls: a.max_calls,
        call_timeout_ns: a.call_timeout,
        stats_every_ns: a.stats_every,
        time_format: a.time_format,
    })
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
    let (failure, report) = records::run_composition(&text, true)?;
    eprintln!("{}", summary(&report, failure.as_deref()));
    let errors = report.blocks.iter().any(|b| b.errors > 0);
    Ok(if failure.is_some() || errors {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
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
