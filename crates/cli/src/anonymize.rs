//! `trawl anonymize`: a capture file with every IP address it carries anonymized
//! (Crypto-PAn, `trawl_anon::PacketRewriter`), checksums updated, optionally cut after the
//! transport headers. A composition, as every command: `pcap_source` → `packet_anonymizer`
//! → `pcap_writer` (`--print-composition` shows it).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use serde::Serialize;
use trawl_anon::RewriteOutcome;
use trawl_capture::{FileFormat, FileSource};
use trawl_compose::{Document, Policy};

use crate::flag::{topic, SummaryFormat};
use crate::plan::files::FileInput;

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
    /// Print the composition of blocks these flags build (TOML, for `trawl check -c` and
    /// `trawl run -c`) instead of running it.
    #[arg(help_heading = topic::OUTPUT, long = "print-composition")]
    pub print_composition: bool,
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

/// The name of the rewriting block in `trawl anonymize`'s plan.
const ANON: &str = "anonymizer";
/// The name of its writer.
const OUT: &str = "out";

/// `trawl anonymize` as a composition; `pcapng` picks the output format.
fn plan(a: &AnonymizeArgs, pcapng: bool) -> Document {
    let mut doc = Document::new();
    let input = FileInput {
        files: vec![a.read.clone()],
        filter: None,
        format: None,
    };
    let packets = input.add(&mut doc);
    let _ = doc
        .block(ANON, "packet_anonymizer")
        .set("key", a.key.to_string_lossy().into_owned())
        .set_some("keep", crate::flag::keep_setting(&a.keep))
        .set_some("truncate_payload", a.truncate_payload.then_some(true));
    let _ = doc
        .block(OUT, "pcap_writer")
        .set("path", a.write.to_string_lossy().into_owned())
        .set_some("format", pcapng.then_some("pcapng"));
    let rewritten = format!("{ANON}.packets");
    doc.connect(&packets, &[&rewritten], Policy::Wait);
    doc.connect(&rewritten, &[&format!("{OUT}.packets")], Policy::Wait);
    doc
}

pub fn run(a: &AnonymizeArgs) -> Result<ExitCode> {
    // The key first: a missing or malformed key is the error, before any file is touched.
    crate::flag::anonymizer(&a.key, &a.keep)?;
    // pcapng in, pcapng out (its interface names and link types kept).
    let input = FileSource::open(&a.read)?.format();
    let pcapng = input == FileFormat::Pcapng || a.write.extension().is_some_and(|e| e == "pcapng");
    let doc = plan(a, pcapng);
    if a.print_composition {
        print!("{}", doc.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    let finished = crate::plan::run(&doc, None)?;
    let anon = finished.report.block(ANON);
    let count = |o: RewriteOutcome| anon.and_then(|b| b.counter(o.name())).unwrap_or(0);
    let mut report = Report {
        packets: RewriteOutcome::ALL.iter().map(|&o| count(o)).sum(),
        rewritten: count(RewriteOutcome::Rewritten),
        partial: count(RewriteOutcome::Partial),
        no_addresses: count(RewriteOutcome::NoAddresses),
        malformed: count(RewriteOutcome::Malformed),
        unsupported_link_type: count(RewriteOutcome::UnsupportedLinkType),
        input_errors: Vec::new(),
        elapsed_s: finished.elapsed.as_secs_f64(),
    };
    // What a block could not read or write (a truncated input, a second link type into a
    // pcap file), each named by the block's message.
    report.input_errors = finished
        .report
        .blocks
        .iter()
        .flat_map(|b| b.error_messages.iter().cloned())
        .collect();
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
