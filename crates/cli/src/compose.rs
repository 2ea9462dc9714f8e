//! Compositions of blocks from the command line: `trawl run -c composition.toml` runs one,
//! `trawl check -c ...` validates it, `trawl blocks` lists the block types.
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use trawl_compose::Report;

use crate::config::RunArgs;
use crate::flag::{topic, SummaryFormat};

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// The composition file to check (`-` reads standard input, e.g. from
    /// `trawl run ... --print-composition`).
    #[arg(help_heading = topic::INPUT, short = 'c', long = "config", value_name = "FILE")]
    pub config: PathBuf,
    /// Override a setting of a block before checking: `--set BLOCK.KEY=VALUE`. Repeatable.
    #[arg(help_heading = topic::INPUT, long = "set", value_name = "BLOCK.KEY=VALUE")]
    pub set: Vec<String>,
}

#[derive(Args, Debug)]
pub struct BlocksArgs {
    /// Output format.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = BlocksFormat::Text)]
    pub format: BlocksFormat,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum BlocksFormat {
    /// One paragraph per block type.
    Text,
    /// JSON: every type with its gates.
    Json,
}

/// A composition's text, with what its messages call it and where its paths are relative to.
pub struct Composition {
    pub text: String,
    /// The file, or `(standard input)`.
    pub origin: String,
    /// A file's directory: the relative paths of its blocks' settings are relative to it.
    /// `None` (the working directory) for standard input and compositions built from flags.
    pub dir: Option<PathBuf>,
}

/// Reads a composition: the file, or standard input for `-`.
pub fn read_composition(path: &Path) -> Result<Composition> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .context("cannot read the composition from standard input")?;
        return Ok(Composition {
            text,
            origin: "(standard input)".into(),
            dir: None,
        });
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read composition {}", path.display()))?;
    Ok(Composition {
        text,
        origin: path.display().to_string(),
        // `x.toml` has the parent "": joined with it, paths stay as they are.
        dir: Some(path.parent().unwrap_or(Path::new("")).to_path_buf()),
    })
}

/// Refuses a `trawl run` configuration of the old format (`trawl.example.toml` before
/// compositions): `trawl run` speaks compositions only, and `trawl convert-config` writes the
/// composition of an old file.
fn refuse_old_configuration(text: &str, origin: &str) -> Result<()> {
    // A file that does not parse is left to the composition checker, which names the line.
    let Ok(table) = text.parse::<toml::Table>() else {
        return Ok(());
    };
    const OLD: [&str; 9] = [
        "capture", "ring", "flows", "series", "dump", "store", "export", "feeds", "ipfix",
    ];
    let old: Vec<&str> = OLD.into_iter().filter(|k| table.contains_key(*k)).collect();
    if !old.is_empty() && !table.contains_key("block") {
        bail!(
            "{origin} is a `trawl run` configuration of the old format ([{}]); `trawl run` and \
             `trawl check` read compositions only. Convert it once: \
             `trawl convert-config {origin} > monitor.toml`, then `trawl run -c monitor.toml` \
             (docs/specs/composition.md)",
            old.join("], [")
        );
    }
    Ok(())
}

/// Checks a composition, with the `--set` overrides applied. Its blocks' relative paths are
/// relative to its file's directory; those a `--set` gives stay relative to the working
/// directory, as every other path on the command line.
fn load(c: &Composition, sets: &[String]) -> Result<trawl_compose::Plan> {
    let (text, origin) = (c.text.as_str(), c.origin.as_str());
    refuse_old_configuration(text, origin)?;
    let registry = trawl_api::registry();
    let cpus = trawl_capture::live::allowed_cpus();
    if sets.is_empty() {
        // The text as it is: syntax errors name its own lines.
        let planned = match &c.dir {
            Some(dir) => trawl_compose::plan_relative_to(text, origin, dir, &registry, &cpus),
            None => trawl_compose::plan(text, origin, &registry, &cpus),
        };
        return planned.map_err(anyhow::Error::from);
    }
    let mut doc =
        trawl_compose::Document::parse(text).map_err(|e| anyhow::anyhow!("{origin}: {e}"))?;
    if let Some(dir) = &c.dir {
        doc.paths_relative_to(dir, &registry);
    }
    for s in sets {
        doc.set(s)?;
    }
    trawl_compose::plan(&doc.to_toml(), origin, &registry, &cpus).map_err(anyhow::Error::from)
}

/// `trawl check -c FILE`.
pub fn check(a: &CheckArgs) -> Result<ExitCode> {
    let c = read_composition(&a.config)?;
    let origin = &c.origin;
    let plan = load(&c, &a.set)?;
    print!("{}", plan.describe());
    println!(
        "{origin}: valid ({} blocks, {} connections, {} threads)",
        plan.blocks.len(),
        plan.connections.len(),
        plan.threads.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `trawl blocks`.
pub fn blocks(a: &BlocksArgs) -> Result<ExitCode> {
    let registry = trawl_api::registry();
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
    run_composition(&read_composition(path)?, a, &[])
}

/// The run's own flags over the composition's `[runtime]` table: `--duration`, `--count`,
/// `--stats-interval`, `--user`.
fn apply_run_flags(plan: &mut trawl_compose::Plan, a: &RunArgs) {
    let control = &mut plan.control;
    control.duration_ns = a.duration.or(control.duration_ns);
    control.count = a.count.or(control.count);
    control.stats_interval_ns = a.stats_interval.or(control.stats_interval_ns);
    control.user = a.user.clone().or(control.user.take());
}

/// Runs a composition (a file's, or the one `trawl run`'s flags built) with the run's
/// own flags: `--set`, and `--duration`, `--count`, `--stats-interval`, `--user` over the
/// `[runtime]` table. `announce` is said on standard error once every block is built (the
/// shared rings exist then).
pub fn run_composition(c: &Composition, a: &RunArgs, announce: &[String]) -> Result<ExitCode> {
    let mut plan = load(c, &a.set)?;
    apply_run_flags(&mut plan, a);
    let stop = crate::signals::install_stop_signals()?;
    // Under systemd (Type=notify): readiness, status lines, watchdog pings, stopping.
    let mut notifier = crate::notify::Notifier::from_env();
    let mut steal = crate::steal::StealMeter::default();
    steal.sample();
    // A composition file is reread on SIGHUP; one built from flags only reopens its files.
    let hangup = match (&c.dir, &a.config) {
        (Some(_), Some(path)) => Some((crate::reload::watch()?, path.clone())),
        _ => None,
    };
    let running = trawl_compose::start(plan).map_err(anyhow::Error::msg)?;
    for line in announce {
        eprintln!("trawl: {line}");
    }
    let reload = hangup.map(|(hangup, path)| {
        let file = path.clone();
        let replan = move || {
            let mut plan = load(&read_composition(&file)?, &a.set)?;
            apply_run_flags(&mut plan, a);
            Ok(plan)
        };
        crate::reload::ReloadOnHangup::new(hangup, path, replan, running.reloader())
    });
    let outcome = match notifier.as_mut() {
        None => {
            let mut tick = |_: &Report| {
                if let Some(r) = &reload {
                    r.tick();
                }
            };
            // Called with the counters every 50 ms: only when there is something to do.
            let tick: Option<&mut dyn FnMut(&Report)> = match reload {
                Some(_) => Some(&mut tick),
                None => None,
            };
            running.supervise_with(
                &stop,
                |report| eprintln!("{}", status_line(report, &mut steal)),
                tick,
            )
        }
        Some(n) => {
            n.ready();
            let n = std::cell::RefCell::new(n);
            let status = |report: &Report| {
                let line = status_line(report, &mut steal);
                eprintln!("{line}");
                n.borrow().status(&line);
            };
            // The supervisor's loop (every 50 ms) pings the watchdog: a monitor whose main
            // thread is stuck stops pinging.
            let mut tick = |_: &Report| {
                let mut n = n.borrow_mut();
                if stop.load(std::sync::atomic::Ordering::Relaxed) {
                    n.stopping();
                }
                n.tick();
                if let Some(r) = &reload {
                    r.tick();
                }
            };
            running.supervise_with(&stop, status, Some(&mut tick))
        }
    };
    if let Some(n) = notifier.as_mut() {
        n.stopping();
    }
    let (failure, report) = match outcome {
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

/// The run's status line, with the vCPU time stolen since the last one when there was any.
fn status_line(report: &Report, steal: &mut crate::steal::StealMeter) -> String {
    let mut line = report.status_line();
    if let Some(stolen) = steal.sample() {
        line.push_str("; ");
        line.push_str(&stolen);
    }
    line
}

fn print_summary(format: SummaryFormat, report: &Report, failure: Option<&str>) {
    match format {
        SummaryFormat::Text => eprint!("{}", report.table()),
        SummaryFormat::Json => {
            let mut v = serde_json::to_value(report).unwrap_or_default();
            if let Some(obj) = v.as_object_mut() {
                obj.insert("command".into(), "run".into());
                obj.insert("failure".into(), failure.into());
                // What the sources captured, summed (also in each source block's counters).
                let sum = |name: &str| -> u64 {
                    report
                        .blocks
                        .iter()
                        .filter(|b| b.source)
                        .filter_map(|b| b.counter(name))
                        .sum()
                };
                for key in ["packets", "kernel_packets", "kernel_drops"] {
                    obj.insert(key.into(), sum(key).into());
                }
            }
            eprintln!("{v}");
        }
        SummaryFormat::None => {}
    }
}
