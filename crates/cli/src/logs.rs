//! `trawl logs -r FILE -o DIR`: application-layer logs from capture files (issue 23,
//! docs/specs/logs.md), as a composition (pcap_source -> dns_log -> event_writer) built in
//! code and run by the block runtime, so `trawl run -c` with the same blocks gives the same
//! lines.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use trawl_compose::{Document, Policy, Report};

use crate::flag::topic;

pub const LOGS_HELP: &str = "Output: DIR/dns.jsonl (a line per DNS request/response pair over
UDP, with community_id); fields in docs/specs/logs.md. TLS and HTTP logs are not written yet.
A JSON summary goes to standard error.

Exit codes:
  0  success
  1  some input could not be read, or a block failed
  2  usage error";

#[derive(Args, Debug)]
pub struct LogsArgs {
    /// Capture files, merged by packet time into one stream.
    #[arg(help_heading = topic::INPUT, short = 'r', long = "read", value_name = "FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// Directory for dns.jsonl (created if missing; files are replaced).
    #[arg(help_heading = topic::OUTPUT, short = 'o', long = "output", value_name = "DIR", required = true)]
    pub out: PathBuf,
    /// DNS requests waiting for their response at once; beyond it the oldest is written
    /// unanswered (and counted).
    #[arg(help_heading = topic::DETECTOR, long, value_name = "N")]
    pub max_pending: Option<usize>,
    /// Print the composition this command runs and exit.
    #[arg(help_heading = topic::OUTPUT, long)]
    pub print_composition: bool,
}

/// The composition `trawl logs` runs.
pub fn document(a: &LogsArgs) -> Document {
    let files: Vec<String> = a.files.iter().map(|f| f.display().to_string()).collect();
    let mut doc = Document::new();
    doc.block("file", "pcap_source").set("files", files);
    doc.block("dns", "dns_log")
        .set_some("max_pending", a.max_pending.map(|n| n as i64));
    doc.block("dns_out", "event_writer")
        .set("path", a.out.join("dns.jsonl").display().to_string())
        .set("mode", "truncate");
    doc.connect("file.packets", &["dns.packets"], Policy::Wait);
    doc.connect("dns.events", &["dns_out.events"], Policy::Wait);
    doc
}

pub fn run(a: &LogsArgs) -> Result<ExitCode> {
    let doc = document(a);
    let text = doc.to_toml();
    if a.print_composition {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    std::fs::create_dir_all(&a.out)
        .with_context(|| format!("cannot create output directory {}", a.out.display()))?;
    let cpus = trawl_capture::live::allowed_cpus();
    let plan = trawl_compose::plan(&text, "trawl logs", &trawl_api::registry(), &cpus)?;
    let running = trawl_compose::start(plan).map_err(anyhow::Error::msg)?;
    let (failure, report) = match running.wait() {
        Ok(r) => (None, r),
        Err((f, r)) => (Some(f), r),
    };
    eprintln!("{}", summary(&report, failure.as_deref()));
    let errors = report.blocks.iter().any(|b| b.errors > 0);
    Ok(if failure.is_some() || errors {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The JSON summary: the DNS analyser's counters and the lines written.
fn summary(report: &Report, failure: Option<&str>) -> serde_json::Value {
    let counter = |block: &str, name: &str| report.block(block).and_then(|b| b.counter(name));
    let items = |block: &str| report.block(block).map_or(0, |b| b.items_in);
    serde_json::json!({
        "command": "logs",
        "packets": items("dns"),
        "dns": {
            "messages": counter("dns", "messages"),
            "truncated_header": counter("dns", "truncated_header"),
            "faults": counter("dns", "faults"),
            "joined": counter("dns", "joined"),
            "unmatched_responses": counter("dns", "unmatched_responses"),
            "evicted": counter("dns", "evicted"),
            "duplicate_requests": counter("dns", "duplicate_requests"),
            "lines": items("dns_out"),
        },
        "elapsed_s": report.elapsed_s,
        "failure": failure,
    })
}
