//! `trawl run` (a composition, or the monitor its flags build), `trawl convert-config` and
//! `trawl listen` (a client of another trawl's shared ring: a `ring_source` composition).
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use trawl_compose::{Document, Policy};

use crate::config::RunArgs;
use crate::flag::{parse_duration_ns, topic, SummaryFormat};

/// `trawl run`: a composition file (`-c`), or the default monitor built from the flags.
pub fn run(a: &RunArgs) -> Result<ExitCode> {
    if a.config.is_some() {
        return crate::compose::run(a);
    }
    let doc = monitor_document(a)?;
    if a.print_composition {
        print!("{}", doc.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    let plan = crate::config::RunPlan::new(a)?;
    if let Some(logs) = &plan.logs {
        std::fs::create_dir_all(&logs.dir)
            .with_context(|| format!("cannot create the logs directory {}", logs.dir.display()))?;
    }
    let rings: Vec<String> = match &plan.ring {
        Some((prefix, _)) => plan
            .live
            .interfaces
            .iter()
            .flat_map(|iface| (0..plan.live.workers).map(move |w| format!("{prefix}-{iface}-{w}")))
            .map(|name| format!("publishing packets on ring '{name}' (trawl listen --ring {name})"))
            .collect(),
        None => Vec::new(),
    };
    let composition = crate::compose::Composition {
        text: doc.to_toml(),
        origin: "the composition of trawl run's flags (--print-composition shows it)".into(),
        dir: None,
    };
    crate::compose::run_composition(&composition, a, &rings)
}

/// The composition `trawl run`'s flags (or an old configuration file) describe, with the
/// `--set` overrides applied.
fn monitor_document(a: &RunArgs) -> Result<trawl_compose::Document> {
    let plan = crate::config::RunPlan::new(a)?;
    let mut doc = crate::plan::live::monitor(&plan)?;
    for s in &a.set {
        doc.set(s)?;
    }
    Ok(doc)
}

/// `trawl convert-config OLD`: the composition of a `trawl run` configuration of the old
/// format (`[capture]`, `[flows]`, ...), on standard output.
pub fn convert_config(a: &ConvertArgs) -> Result<ExitCode> {
    let args = RunArgs::parse_line(["-c".as_ref(), a.config.as_os_str()])?;
    let doc = monitor_document(&args)?;
    println!(
        "# Converted by `trawl convert-config {}` from a trawl run configuration of the old\n\
         # format. Check it with `trawl check -c FILE`, run it with `trawl run -c FILE`.",
        a.config.display()
    );
    print!("{}", doc.to_toml());
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    /// The old `trawl run` configuration (`[capture]`, `[ring]`, `[flows]`, ...).
    pub config: std::path::PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct ListenArgs {
    /// The ring's name as `trawl run` printed it (e.g. `trawl-eth0-0`), or a path to the ring
    /// file.
    #[arg(help_heading = topic::INPUT, long, value_name = "NAME")]
    pub ring: String,
    /// Hold the producer back instead of missing packets when this listener falls behind.
    /// Use with care: a slow lossless listener makes the capture drop in the kernel.
    #[arg(help_heading = topic::INPUT, long)]
    pub lossless: bool,
    /// Write the packets to this pcap file (nanosecond timestamps; `-` for standard output)
    /// instead of printing a line per packet.
    #[arg(help_heading = topic::OUTPUT, short = 'w', long = "write", value_name = "PATH")]
    pub write: Option<PathBuf>,
    /// Stop after this many packets.
    #[arg(help_heading = topic::RUN, long, value_name = "N")]
    pub count: Option<u64>,
    /// Stop after this long.
    #[arg(help_heading = topic::RUN, long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub duration: Option<u64>,
    /// Summary on standard error at the end.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    /// Print packet times in the local zone (`TZ`) with its offset instead of UTC.
    #[arg(help_heading = topic::OUTPUT, long)]
    pub local: bool,
    /// Print the composition of blocks these flags build (TOML, for `trawl check -c` and
    /// `trawl run -c`) instead of running it.
    #[arg(help_heading = topic::OUTPUT, long = "print-composition")]
    pub print_composition: bool,
}

/// The name of the `ring_source` block in `trawl listen`'s plan.
const RING: &str = "ring";
/// The name of its output block (`pcap_writer` with `-w`, else `packet_printer`).
const OUT: &str = "out";

/// `trawl listen` as a composition: a `ring_source` into a `pcap_writer` (`-w`) or a
/// `packet_printer` (a line per packet), with `--count` and `--duration` as the run's own.
fn listen_plan(a: &ListenArgs) -> Document {
    let mut doc = Document::new();
    if let Some(count) = a.count {
        doc.runtime("count", count as i64);
    }
    if let Some(ns) = a.duration {
        doc.runtime("duration", crate::plan::span(ns));
    }
    let _ = doc
        .block(RING, "ring_source")
        .set("ring", a.ring.as_str())
        .set_some("mode", a.lossless.then_some("lossless"));
    let _ = match &a.write {
        Some(path) => doc
            .block(OUT, "pcap_writer")
            .set("path", path.display().to_string()),
        None => doc
            .block(OUT, "packet_printer")
            .set_some("local", a.local.then_some(true)),
    };
    doc.connect(
        &format!("{RING}.packets"),
        &[&format!("{OUT}.packets")],
        Policy::Wait,
    );
    doc
}

/// `trawl listen`.
pub fn listen(a: &ListenArgs) -> Result<ExitCode> {
    let doc = listen_plan(a);
    if a.print_composition {
        print!("{}", doc.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    let finished = crate::plan::run_live(&doc, false)?;
    let ring = finished.report.block(RING);
    let c = |name: &str| ring.and_then(|b| b.counter(name)).unwrap_or(0);
    // A packet the output could not take (a second link type into one pcap file).
    let errors: Vec<&String> = finished
        .report
        .blocks
        .iter()
        .flat_map(|b| &b.error_messages)
        .collect();
    for e in &errors {
        eprintln!("trawl: {e}");
    }
    let (packets, closed) = (c("packets"), c("ring_closed") == 1);
    match a.summary {
        SummaryFormat::None => {}
        SummaryFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "command": "listen",
                "ring": a.ring,
                "mode": if a.lossless { "lossless" } else { "lossy" },
                "packets": packets,
                "records_read": c("records_read"),
                "bytes_read": c("bytes_read"),
                "records_missed": c("records_missed"),
                "bytes_missed": c("bytes_missed"),
                "ring_closed": closed,
                "elapsed_s": finished.elapsed.as_secs_f64(),
            })
        ),
        SummaryFormat::Text => eprintln!(
            "trawl listen: {packets} packets from ring '{}' ({} missed){}",
            a.ring,
            c("records_missed"),
            if closed {
                "; the producer closed the ring"
            } else {
                ""
            }
        ),
    }
    Ok(if errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
