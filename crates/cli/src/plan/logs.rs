//! The application-layer analysers of a plan (`trawl logs`, `trawl run --logs DIR
//! --analyze ...`): for each packet gate one block per analyser (`dns_log`, `tls_log`,
//! `http_log`), and one writer per analyser: `event_writer` into `DIR/<name>.jsonl` (`trawl
//! logs`), or `hourly_writer` into `DIR/<name>-YYYY-MM-DDTHH.jsonl` (`trawl run --logs`, one
//! file per UTC hour of the lines' time, with retention).
//!
//! ```text
//! gate0.packets ─┬─▶ dns0 ─┐
//!                ├─▶ tls0 ─┼─▶ dns_out, tls_out, http_out (event_writer)
//! gate1.packets ─┴─▶ ...  ─┘
//! ```
//! With one gate the analysers are named `dns`, `tls`, `http` (what `trawl logs`' summary
//! reads). Live, an analyser runs on its gate's capture thread (a connection's packets all
//! come to one worker, the fanout being symmetric) and takes packets lossily: a slow analyser
//! loses packets (counted by the runtime), it does not hold capture back.
use std::path::Path;

use trawl_compose::{Document, Policy};

use crate::flag::Analyzer;

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
    /// `--max-pending` of `dns_log`.
    pub max_pending: Option<usize>,
    /// `--max-conns` of the stream analysers.
    pub max_conns: Option<usize>,
}

impl LogsOut {
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

    /// The analyser blocks of gate `i` of `n`.
    pub fn block_name(a: Analyzer, i: usize, n: usize) -> String {
        if n == 1 {
            a.name().to_string()
        } else {
            format!("{}{i}", a.name())
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
            for (i, (gate, thread)) in gates.iter().enumerate() {
                let name = Self::block_name(a, i, gates.len());
                let mut b = doc.block(&name, a.block_type());
                b = match a {
                    Analyzer::Dns => b.set_some("max_pending", self.max_pending.map(|n| n as i64)),
                    Analyzer::Tls | Analyzer::Http => {
                        b.set_some("max_conns", self.max_conns.map(|n| n as i64))
                    }
                    // Not a log: `selection` leaves it out.
                    Analyzer::App => b,
                };
                if thread.is_some() {
                    b = b.on("capture", *thread);
                }
                let _ = b;
                // Files wait for the analysers; live capture does not (see the module doc).
                let policy = if thread.is_some() {
                    Policy::Drop
                } else {
                    Policy::Wait
                };
                doc.connect(gate, &[&format!("{name}.packets")], policy);
                doc.connect(
                    &format!("{name}.events"),
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
