//! `trawl anonymize`: a capture file with every IP address it carries anonymized
//! (Crypto-PAn, `trawl_anon::PacketRewriter`), checksums updated, optionally cut after the
//! transport headers. A file-to-file transform: it meters nothing, so it reads the file
//! straight from a `FileSource` instead of planning a composition.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;
use serde::Serialize;
use trawl_anon::{PacketRewriter, RewriteOutcome};
use trawl_blocks::output::OutputFile;
use trawl_capture::{FileFormat, FileSource, PacketSource};
use trawl_packets::{CaptureWriter, StoredPacket};

use crate::flag::{topic, SummaryFormat};

#[derive(Args, Debug)]
pub struct AnonymizeArgs {
    /// The capture file to read (pcap or pcapng, also gzip- or zstd-compressed).
    #[arg(help_heading = topic::INPUT, short = 'r', long = "read", value_name = "PATH")]
    pub read: PathBuf,
    /// The capture file to write (`-`: standard output): pcapng when the input is pcapng or
    /// the name ends in `.pcapng`, else pcap.
    #[arg(help_heading = topic::OUTPUT, short = 'w', long = "write", value_name = "PATH")]
    pub write: PathBuf,
    /// The key file: 32 random bytes, raw or as 64 hex digits (`head -c 32 /dev/urandom >
    /// KEY`); the same key maps addresses the same way in every trace and output.
    #[arg(help_heading = topic::INPUT, long, value_name = "KEYFILE")]
    pub key: PathBuf,
    /// Leave addresses inside this prefix unchanged (e.g. `10.0.0.0/8`; repeat for several).
    /// Weaker: it shows the kept network as it is, and an anonymized outside address may
    /// equal a kept one.
    #[arg(help_heading = topic::OUTPUT, long = "keep", value_name = "PREFIX")]
    pub keep: Vec<trawl_anon::Prefix>,
    /// Cut every packet after its innermost transport header (after an ICMP error's quoted
    /// headers): payloads (DNS answers, HTTP hosts, ...) carry addresses and names Crypto-PAn
    /// does not rewrite. The original length is kept as the wire length.
    #[arg(help_heading = topic::OUTPUT, long)]
    pub truncate_payload: bool,
    /// Summary on standard error at the end.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
}

/// What `--summary json` prints: packets per outcome of the rewriter.
#[derive(Serialize, Default)]
struct Report {
    packets: u64,
    rewritten: u64,
    partial: u64,
    no_addresses: u64,
    malformed: u64,
    unsupported_link_type: u64,
    input_errors: Vec<String>,
    elapsed_s: f64,
}

pub fn run(a: &AnonymizeArgs) -> Result<ExitCode> {
    let started = Instant::now();
    let anon = crate::flag::anonymizer(&a.key, &a.keep)?;
    let mut rewriter = PacketRewriter::new(anon, a.truncate_payload);
    let mut src = FileSource::open(&a.read)?;
    let pcapng =
        src.format() == FileFormat::Pcapng || a.write.extension().is_some_and(|e| e == "pcapng");
    let sink = OutputFile::create(&a.write)
        .with_context(|| format!("cannot create output file {}", a.write.display()))?;
    let mut out = CaptureWriter::new(sink, pcapng)?;
    let mut report = Report::default();
    loop {
        let batch = match src.next_batch() {
            Ok(Some(batch)) => batch,
            Ok(None) => break,
            Err(e) => {
                report.input_errors.push(e.to_string());
                break;
            }
        };
        for p in batch.iter() {
            let iface = &batch.interfaces()[usize::from(p.iface)];
            let name = iface.name.clone().unwrap_or_else(|| p.iface.to_string());
            let (_, data) = rewriter.rewrite(p.link_type.0, p.data);
            out.write(&StoredPacket {
                ts_ns: p.ts_ns,
                wire_len: p.wire_len,
                link_type: p.link_type,
                data,
                iface: &name,
                worker: 0,
            })?;
            report.packets += 1;
        }
    }
    out.finish()?;
    let counts = rewriter.counters();
    let count = |o: RewriteOutcome| counts[o as usize];
    report.rewritten = count(RewriteOutcome::Rewritten);
    report.partial = count(RewriteOutcome::Partial);
    report.no_addresses = count(RewriteOutcome::NoAddresses);
    report.malformed = count(RewriteOutcome::Malformed);
    report.unsupported_link_type = count(RewriteOutcome::UnsupportedLinkType);
    report.elapsed_s = started.elapsed().as_secs_f64();
    for e in &report.input_errors {
        eprintln!("trawl: {e}");
    }
    print_summary(a.summary, &report);
    Ok(if report.input_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

fn print_summary(format: SummaryFormat, r: &Report) {
    match format {
        SummaryFormat::None => {}
        SummaryFormat::Json => {
            eprintln!("{}", serde_json::to_string(r).expect("a report serializes"));
        }
        SummaryFormat::Text => eprintln!(
            "trawl: anonymized {} packets in {:.2} s: {} rewritten, {} partial (a tunnel \
             payload or ICMP quote left as is), {} without addresses, {} malformed and {} of \
             unsupported link types (copied unchanged)",
            r.packets,
            r.elapsed_s,
            r.rewritten,
            r.partial,
            r.no_addresses,
            r.malformed,
            r.unsupported_link_type
        ),
    }
}
