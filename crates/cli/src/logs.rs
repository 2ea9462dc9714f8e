//! `trawl logs -r FILE -o DIR`: application-layer logs from capture files (issue 23,
//! docs/specs/logs.md), as a composition (pcap_source -> dns_log (UDP), stream_log (TCP and
//! QUIC) -> event_writers, `plan::logs`) built in code and run by the block runtime, so `trawl run -c`
//! with the same blocks (and `trawl run --logs`) gives the same lines.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use trawl_compose::{Document, Report};

use crate::flag::{topic, Analyzer};
use crate::plan::logs::LogsOut;

pub const LOGS_HELP: &str = "Output: DIR/dns.jsonl (a line per DNS request/response pair over
UDP or TCP), DIR/tls.jsonl (a line per TCP connection with a TLS hello, and per QUIC connection
with a hello in its Initial packets: SNI, ALPN, version, cipher, JA4) and DIR/http.jsonl (a line per HTTP/1.x request/response pair), each with
community_id; fields in docs/specs/logs.md.
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
    /// Directory for dns.jsonl, tls.jsonl and http.jsonl (created if missing; files are
    /// replaced).
    #[arg(help_heading = topic::OUTPUT, short = 'o', long = "output", value_name = "DIR", required = true)]
    pub out: PathBuf,
    /// DNS requests waiting for their response at once; beyond it the oldest is written
    /// unanswered (and counted).
    #[arg(help_heading = topic::DETECTOR, long, value_name = "N")]
    pub max_pending: Option<usize>,
    /// TCP connections followed at once by the stream analysers (TLS, HTTP, DNS over TCP share
    /// them); beyond it the oldest is ended (and counted).
    #[arg(help_heading = topic::DETECTOR, long, value_name = "N")]
    pub max_conns: Option<usize>,
    /// The analysers to run (default all: dns,tls,http); only their files are written.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "LIST", value_enum, value_delimiter = ',')]
    pub analyze: Vec<Analyzer>,
    /// Print the composition this command runs and exit.
    #[arg(help_heading = topic::OUTPUT, long)]
    pub print_composition: bool,
}

/// The composition `trawl logs` runs.
pub fn document(a: &LogsArgs) -> Document {
    let files: Vec<String> = a.files.iter().map(|f| f.display().to_string()).collect();
    let mut doc = Document::new();
    doc.block("file", "pcap_source").set("files", files);
    let logs = LogsOut {
        max_pending: a.max_pending,
        max_conns: a.max_conns,
        ..LogsOut::new(a.out.clone(), &a.analyze)
    };
    logs.add(&mut doc, &[("file.packets".to_string(), None)], None);
    doc
}

pub fn run(a: &LogsArgs) -> Result<ExitCode> {
    if a.analyze == [Analyzer::App] {
        // A usage error, not an empty directory: the label is on flow records.
        anyhow::bail!(
            "--analyze app labels flow records (trawl flows/ingest --analyze app); trawl logs \
             writes the logs of dns, tls and http"
        );
    }
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
        // Every analyser takes every packet: any of those that ran says how many.
        "packets": items("dns").max(items(LogsOut::STREAM)),
        "dns": {
            "messages": counter("dns", "messages"),
            "truncated_header": counter("dns", "truncated_header"),
            "faults": counter("dns", "faults"),
            "joined": counter("dns", "joined"),
            "unmatched_responses": counter("dns", "unmatched_responses"),
            "evicted": counter("dns", "evicted"),
            "duplicate_requests": counter("dns", "duplicate_requests"),
            // DNS over TCP, read by the stream analysers' block.
            "tcp_messages": counter(LogsOut::STREAM, "dns_tcp_messages"),
            "tcp_joined": counter(LogsOut::STREAM, "dns_tcp_joined"),
            "tcp_lines": counter(LogsOut::STREAM, "dns_tcp_lines"),
            "lines": items("dns_out"),
        },
        "tls": tls_summary(report),
        "http": stream_summary(report, "http_out"),
        "elapsed_s": report.elapsed_s,
        "failure": failure,
    })
}

/// The shared reassembly's counters and QUIC's.
fn tls_summary(report: &Report) -> serde_json::Value {
    let mut v = stream_summary(report, "tls_out");
    let b = report.block(LogsOut::STREAM);
    for name in trawl_blocks::quic_conns::QUIC_COUNTERS {
        v[name] = b.and_then(|b| b.counter(name)).into();
    }
    v
}

/// The counters of the shared TCP reassembly (`stream_log`, the same for TLS and HTTP) and the
/// lines `writer` wrote.
fn stream_summary(report: &Report, writer: &str) -> serde_json::Value {
    let b = report.block(LogsOut::STREAM);
    let mut m = serde_json::Map::new();
    for name in trawl_blocks::stream_log::STREAM_COUNTERS {
        if name != "lines" {
            m.insert(name.into(), b.and_then(|b| b.counter(name)).into());
        }
    }
    let lines = report.block(writer).map_or(0, |b| b.items_in);
    m.insert("lines".into(), lines.into());
    serde_json::Value::Object(m)
}
