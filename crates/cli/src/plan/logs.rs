//! The application-layer analysers of a plan (`trawl logs`, `trawl run --logs DIR
//! --analyze ...`): for each packet gate a `dns_log` block (DNS over UDP) and a `stream_log`
//! block (everything over TCP, reassembled once: TLS, HTTP, DNS over TCP; and QUIC's hellos),
//! and one writer per analyser: `event_writer` into `DIR/<name>.jsonl` (`trawl logs`), or
//! `hourly_writer` into `DIR/<name>-YYYY-MM-DDTHH.jsonl` (`trawl run --logs`, one file per
//! UTC hour of the lines' time, with retention). `stream_log` runs the analysers whose output
//! is connected; `dns_out` takes the lines of both blocks.
//!
//! ```text
//! gate0.packets ─┬─▶ dns0 ──────────────▶ dns_out
//!                └─▶ stream0 .dns ──────▶ dns_out
//!                            .tls ──────▶ tls_out
//!                            .http ─────▶ http_out (event_writer)
//! gate1.packets ─── ...
//! ```
//! With one gate the blocks are named `dns` and `stream` (what `trawl logs`' summary reads).
//! Live, an analyser runs on its gate's capture thread (a connection's packets all
//! come to one worker, the fanout being symmetric) and takes packets lossily: a slow analyser
//! loses packets (counted by the runtime), it does not hold capture back.
//!
//! `trawl flows` and `trawl ingest` add the same analysers beside their meters ([`Analysis`]):
//! their `--logs DIR` is one file per analyser, as `trawl logs -o DIR` writes, since a command
//! over files is not a monitor whose files must be closed and retained by the hour.
use std::path::{Path, PathBuf};

use anyhow::Result;
use trawl_compose::{Document, Policy, Report};

use crate::flag::{AnalyzeArgs, Analyzer, SummaryFormat};

/// What `--analyze` (and `--logs`) ask of a command that meters: application labels on the
/// records, logs beside them.
#[derive(Clone, Debug, Default)]
pub struct Analysis {
    /// `--analyze app`: the meters label records with their application.
    pub app: bool,
    /// `--logs DIR` and the log analysers of `--analyze`.
    pub logs: Option<LogsOut>,
}

impl Analysis {
    /// `--analyze` and `--logs` of `trawl flows` and `trawl ingest`, whose records always go
    /// somewhere (an output, exporters, the database). The logs hold addresses and names as
    /// captured: not beside anonymized records.
    pub fn of_args(a: &AnalyzeArgs, anonymized: bool) -> Result<Analysis> {
        let app = check(&a.analyze, a.logs.is_some(), true)?;
        if a.logs.is_some() && anonymized {
            anyhow::bail!(
                "--logs cannot be combined with --anonymize: the logs hold addresses and names \
                 as captured"
            );
        }
        Ok(Analysis {
            app,
            logs: a
                .logs
                .as_ref()
                .map(|dir| LogsOut::new(dir.clone(), &a.analyze)),
        })
    }

    /// Creates the logs' directory (before the run: its writers open their files in it).
    pub fn prepare(&self) -> Result<()> {
        use anyhow::Context;
        if let Some(l) = &self.logs {
            std::fs::create_dir_all(&l.dir)
                .with_context(|| format!("cannot create the logs directory {}", l.dir.display()))?;
        }
        Ok(())
    }
}

impl Analysis {
    /// The logs' part of a command's summary: the lines each analyser wrote, as a JSON
    /// section (`logs`: `dir`, `lines` by analyser) or a line of text.
    pub fn report(
        &self,
        format: SummaryFormat,
        report: &Report,
    ) -> Vec<(&'static str, serde_json::Value)> {
        let Some(logs) = &self.logs else {
            return Vec::new();
        };
        let lines = logs.lines(report);
        match format {
            SummaryFormat::None => Vec::new(),
            SummaryFormat::Json => vec![(
                "logs",
                serde_json::json!({ "dir": path_text(&logs.dir), "lines": lines }),
            )],
            SummaryFormat::Text => {
                let each: Vec<String> = logs
                    .analyzers
                    .iter()
                    .map(|a| format!("{} {} lines", a.name(), lines[a.name()]))
                    .collect();
                eprintln!("logs in {}: {}", logs.dir.display(), each.join(", "));
                Vec::new()
            }
        }
    }
}

/// `--analyze` of a command with `--logs` (`logs`) and flow records (`records`): each
/// analyser needs what it writes into (the logs need --logs, `app` flow records). Returns
/// whether records are labelled with their application.
pub fn check(given: &[Analyzer], logs: bool, records: bool) -> Result<bool> {
    let app = given.contains(&Analyzer::App);
    if let Some(a) = given.iter().find(|a| **a != Analyzer::App) {
        if !logs {
            anyhow::bail!("--analyze {}: writes logs, give --logs DIR", a.name());
        }
    }
    if app && !records {
        anyhow::bail!(
            "--analyze app labels flow records: give --flows FILE, --db DIR or --export DEST"
        );
    }
    if app && logs && given.iter().all(|a| *a == Analyzer::App) {
        anyhow::bail!(
            "--logs with --analyze app only writes no log: name the logs too \
             (--analyze app,dns,tls,http)"
        );
    }
    Ok(app)
}

/// What to analyse and where the logs go.
#[derive(Clone, Debug)]
pub struct LogsOut {
    pub dir: std::path::PathBuf,
    /// Without duplicates, in [`Analyzer::ALL`] order.
    pub analyzers: Vec<Analyzer>,
    /// One file per UTC hour, appended to (a monitor), or one file per analyser truncated
    /// (`trawl logs`).
    pub hourly: bool,
    /// With `hourly`: delete the files of hours that ended longer ago (`--logs-retention`).
    pub retention_ns: Option<u64>,
    /// `--max-pending` of `dns_log` (and of DNS over TCP in `stream_log`).
    pub max_pending: Option<usize>,
    /// `--max-conns` of `stream_log`.
    pub max_conns: Option<usize>,
}

impl LogsOut {
    /// The logs of the analysers of `given` (empty: all of them) in `dir`: one file per
    /// analyser, replaced (a command over files; a monitor sets `hourly`).
    pub fn new(dir: PathBuf, given: &[Analyzer]) -> LogsOut {
        LogsOut {
            dir,
            analyzers: LogsOut::selection(given),
            hourly: false,
            retention_ns: None,
            max_pending: None,
            max_conns: None,
        }
    }

    /// The lines each analyser's writer wrote (`{"dns": N, ...}`), for a command's summary.
    pub fn lines(&self, report: &Report) -> serde_json::Value {
        let lines = |a: &Analyzer| {
            report
                .block(&Self::writer_name(*a))
                .map_or(0, |b| b.items_in)
        };
        self.analyzers
            .iter()
            .map(|a| (a.name().to_string(), lines(a).into()))
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    /// `--analyze` as given (empty: all of them) into the analysers, in order.
    pub fn selection(given: &[Analyzer]) -> Vec<Analyzer> {
        Analyzer::ALL
            .into_iter()
            .filter(|a| given.is_empty() || given.contains(a))
            .collect()
    }

    /// The writer block of an analyser.
    pub fn writer_name(a: Analyzer) -> String {
        format!("{}_out", a.name())
    }

    /// The stream analysers' block of a single gate (`trawl logs`' summary reads it).
    pub const STREAM: &'static str = "stream";

    /// Block `base` of gate `i` of `n`.
    fn block_name(base: &str, i: usize, n: usize) -> String {
        if n == 1 {
            base.to_string()
        } else {
            format!("{base}{i}")
        }
    }

    /// Adds the analysers of each gate (`block.gate`, with the capture thread it runs on when
    /// live) and their writers (on `pool` when given).
    pub fn add(&self, doc: &mut Document, gates: &[(String, Option<usize>)], pool: Option<&str>) {
        for &a in &self.analyzers {
            let mut w = if self.hourly {
                doc.block(&Self::writer_name(a), "hourly_writer")
                    .set("dir", path_text(&self.dir))
                    .set("prefix", a.name())
                    .set_some("retention", self.retention_ns.map(span))
            } else {
                doc.block(&Self::writer_name(a), "event_writer")
                    .set("path", path_text(&self.dir.join(a.file())))
                    .set("mode", "truncate")
            };
            if let Some(p) = pool {
                w = w.on(p, Some(0));
            }
            let _ = w;
        }
        if self.analyzers.is_empty() {
            return;
        }
        for (i, (gate, thread)) in gates.iter().enumerate() {
            // Files wait for the analysers; live capture does not (see the module doc).
            let policy = if thread.is_some() {
                Policy::Drop
            } else {
                Policy::Wait
            };
            // (block, its output gate) of each analyser's lines.
            let mut outputs = Vec::new();
            if self.analyzers.contains(&Analyzer::Dns) {
                let name = Self::block_name("dns", i, gates.len());
                let mut b = doc
                    .block(&name, "dns_log")
                    .set_some("max_pending", self.max_pending.map(|n| n as i64));
                if thread.is_some() {
                    b = b.on("capture", *thread);
                }
                let _ = b;
                doc.connect(gate, &[&format!("{name}.packets")], policy);
                outputs.push((Analyzer::Dns, format!("{name}.events")));
            }
            // One block for everything read over TCP (and QUIC): a connection is reassembled
            // once for all its analysers (crates/blocks/src/stream_log.rs).
            let name = Self::block_name(Self::STREAM, i, gates.len());
            let mut b = doc
                .block(&name, "stream_log")
                .set_some("max_conns", self.max_conns.map(|n| n as i64))
                .set_some("max_pending", self.max_pending.map(|n| n as i64));
            if thread.is_some() {
                b = b.on("capture", *thread);
            }
            let _ = b;
            doc.connect(gate, &[&format!("{name}.packets")], policy);
            for &a in &self.analyzers {
                if a != Analyzer::App {
                    outputs.push((a, format!("{name}.{}", a.name())));
                }
            }
            for (a, from) in outputs {
                doc.connect(
                    &from,
                    &[&format!("{}.events", Self::writer_name(a))],
                    Policy::Wait,
                );
            }
        }
    }
}

/// A retention in whole seconds, as the block's setting reads it.
fn span(ns: u64) -> String {
    format!("{}s", ns / 1_000_000_000)
}

fn path_text(p: &Path) -> String {
    p.display().to_string()
}
