//! The composition `trawl voip` runs (capture files → `sip` → `rtp_calls` and `sip_anomaly`
//! → the record files), built in code; `trawl voip` and the first pass of `trawl voip audio`
//! both run it.
use std::path::{Path, PathBuf};

use anyhow::Result;
use trawl_compose::{Document, Policy, Report};

use crate::flag::TimeFormat;

/// What to read and where to write.
pub struct Records<'a> {
    pub files: &'a [PathBuf],
    pub out: &'a Path,
    pub orphans: bool,
    pub max_calls: Option<usize>,
    pub call_timeout_ns: Option<u64>,
    /// A stats line in `stats.jsonl` at every multiple of this span of packet time.
    pub stats_every_ns: Option<u64>,
    pub time_format: TimeFormat,
}

/// The composition.
pub fn document(r: &Records<'_>) -> Document {
    let files: Vec<String> = r.files.iter().map(|f| f.display().to_string()).collect();
    let path = |name: &str| r.out.join(name).display().to_string();
    let mut doc = Document::new();
    doc.block("file", "pcap_source").set("files", files);
    doc.block("sip", "sip");
    doc.block("calls", "rtp_calls")
        .set("orphans", r.orphans)
        .set_some("max_calls", r.max_calls.map(|n| n as i64))
        .set_some(
            "call_timeout",
            r.call_timeout_ns.map(|ns| format!("{}ms", ns / 1_000_000)),
        )
        .set_some("stats_every", r.stats_every_ns.map(|ns| format!("{ns}ns")));
    let times = (r.time_format != TimeFormat::Ns).then_some(r.time_format.name());
    for (name, file) in [
        ("calls_out", "calls.jsonl"),
        ("rtp_out", "rtp.jsonl"),
        ("anomalies_out", "anomalies.jsonl"),
    ]
    .into_iter()
    .chain(r.stats_every_ns.map(|_| ("stats_out", "stats.jsonl")))
    {
        doc.block(name, "event_writer")
            .set("path", path(file))
            .set("mode", "truncate")
            .set_some("time_format", times);
    }
    doc.block("anomaly", "sip_anomaly");
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
    if r.stats_every_ns.is_some() {
        doc.connect("calls.stats", &["stats_out.events"], Policy::Wait);
    }
    doc
}

/// Plans and runs the composition `text`; its failure, if any, and its counters.
pub fn run_composition(text: &str, print_messages: bool) -> Result<(Option<String>, Report)> {
    let cpus = trawl_capture::live::allowed_cpus();
    let mut plan = trawl_compose::plan(text, "trawl voip", &trawl_api::registry(), &cpus)?;
    plan.print_messages = print_messages;
    let running = trawl_compose::start(plan).map_err(anyhow::Error::msg)?;
    Ok(match running.wait() {
        Ok(r) => (None, r),
        Err((f, r)) => (Some(f), r),
    })
}

/// Runs the composition without a summary (`trawl voip audio`'s first pass): an error when
/// an input could not be read or a block failed.
pub fn run_quietly(r: &Records<'_>) -> Result<()> {
    let (failure, report) = run_composition(&document(r).to_toml(), false)?;
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
