//! Compositions of blocks from the command line: `trawl run -c composition.toml` runs one,
//! `trawl check -c ...` validates it, `trawl blocks` lists the block types.
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, ValueEnum};
use trawl_compose::{Registry, Report};

use crate::args::{RunArgs, SummaryFormat};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The composition file to check.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub config: PathBuf,
}

#[derive(Args, Debug)]
pub struct BlocksArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = BlocksFormat::Text)]
    pub format: BlocksFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BlocksFormat {
    /// One paragraph per block type.
    Text,
    /// JSON: every type with its gates.
    Json,
}

/// Whether a `-c` file is a composition (it has `[[block]]` tables) rather than a `trawl run`
/// configuration.
pub fn is_composition(path: &Path) -> Result<bool> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read configuration {}", path.display()))?;
    // A file that does not parse is left to the parser that gives the better message: the
    // composition checker when it mentions blocks, else the configuration reader.
    Ok(match text.parse::<toml::Table>() {
        Ok(t) => t.contains_key("block") || t.contains_key("connection"),
        Err(_) => text.contains("[[block]]"),
    })
}

fn load(path: &Path, registry: &Registry) -> Result<trawl_compose::Plan> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read composition {}", path.display()))?;
    let cpus = trawl_capture::live::allowed_cpus();
    trawl_compose::plan(&text, &path.display().to_string(), registry, &cpus)
        .map_err(anyhow::Error::from)
}

/// `trawl check -c FILE`.
pub fn check(a: &CheckArgs) -> Result<ExitCode> {
    if !is_composition(&a.config)? {
        // A `trawl run` configuration: its reader checks it.
        let low = crate::args::LowArgs::try_parse_from([
            "trawl".as_ref(),
            "run".as_ref(),
            "-c".as_ref(),
            a.config.as_os_str(),
        ])?;
        let crate::args::Command::Run(args) = low.command else {
            unreachable!("parsed as run");
        };
        crate::config::RunPlan::new(&args)?;
        println!(
            "{}: a valid trawl run configuration (no [[block]] tables, so not a composition)",
            a.config.display()
        );
        return Ok(ExitCode::SUCCESS);
    }
    let plan = load(&a.config, &trawl_blocks::registry())?;
    print!("{}", plan.describe());
    println!(
        "{}: valid ({} blocks, {} connections, {} threads)",
        a.config.display(),
        plan.blocks.len(),
        plan.connections.len(),
        plan.threads.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `trawl blocks`.
pub fn blocks(a: &BlocksArgs) -> Result<ExitCode> {
    let registry = trawl_blocks::registry();
    match a.format {
        BlocksFormat::Text => {
            for b in registry.iter() {
                println!("{} — {}", b.type_name, b.summary);
                for (dir, gates) in [("in ", b.inputs), ("out", b.outputs)] {
                    for g in gates {
                        println!(
                            "  {dir} {:<10} {:<8} {}{}",
                            g.name,
                            g.ty.name,
                            g.doc,
                            if g.required { " (required)" } else { "" }
                        );
                    }
                }
            }
        }
        BlocksFormat::Json => {
            let gates = |gs: &[trawl_compose::GateDef]| {
                gs.iter()
                    .map(|g| {
                        serde_json::json!({
                            "name": g.name, "type": g.ty.name, "required": g.required, "doc": g.doc,
                        })
                    })
                    .collect::<Vec<_>>()
            };
            let list: Vec<_> = registry
                .iter()
                .map(|b| {
                    serde_json::json!({
                        "type": b.type_name, "summary": b.summary,
                        "inputs": gates(b.inputs), "outputs": gates(b.outputs),
                    })
                })
                .collect();
            println!("{}", serde_json::Value::Array(list));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `trawl run -c composition.toml`.
pub fn run(a: &RunArgs) -> Result<ExitCode> {
    let path = a.config.as_ref().expect("called with a composition");
    a.refuse_with_composition()?;
    let plan = load(path, &trawl_blocks::registry())?;
    let stop = crate::install_stop_signals()?;
    let running = trawl_compose::start(plan).map_err(anyhow::Error::msg)?;
    if let Some(user) = &a.user {
        match trawl_capture::live::drop_privileges(user) {
            Ok(_) => {}
            Err(e) => {
                running.stop();
                let _ = running.wait();
                bail!("cannot switch to user {user}: {e}");
            }
        }
    }
    let started = Instant::now();
    let deadline = a.duration.map(|ns| started + Duration::from_nanos(ns));
    let stats_every = a.stats_interval.map(Duration::from_nanos);
    let mut next_stats = stats_every.map(|d| started + d);
    let mut stopped = false;
    while !running.is_finished() {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        if !stopped && (stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d)) {
            running.stop();
            stopped = true;
        }
        if let (Some(every), Some(at)) = (stats_every, next_stats) {
            if now >= at {
                eprint!("{}", running.report().table());
                next_stats = Some(at + every);
            }
        }
    }
    let (failure, report) = match running.wait() {
        Ok(r) => (None, r),
        Err((f, r)) => (Some(f), r),
    };
    print_summary(a.summary, &report, failure.as_deref());
    if let Some(f) = failure {
        eprintln!("trawl: error: {f}");
        return Ok(ExitCode::from(1));
    }
    Ok(if report.blocks.iter().any(|b| b.errors > 0) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_summary(format: SummaryFormat, report: &Report, failure: Option<&str>) {
    match format {
        SummaryFormat::Text => eprint!("{}", report.table()),
        SummaryFormat::Json => {
            let mut v = serde_json::to_value(report).unwrap_or_default();
            if let Some(obj) = v.as_object_mut() {
                obj.insert("command".into(), "run (composition)".into());
                obj.insert("failure".into(), failure.into());
            }
            eprintln!("{v}");
        }
        SummaryFormat::None => {}
    }
}
