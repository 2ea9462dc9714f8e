//! SIGHUP on `trawl run -c FILE`: besides reopening the record files at their paths
//! (logrotate), the composition file is read and planned again, and what may change while it
//! runs (an output's path, a detector's threshold: each block's `RELOADABLE` settings) is
//! applied without losing state. Anything else is refused with one log line naming each
//! change, and the run goes on as it was (trawl_compose::Reloader; docs/deploy.md).
use std::path::PathBuf;

use trawl_blocks::output::Hangup;
use trawl_compose::{Plan, ReloadOutcome, Reloader};

/// Watches SIGHUP for a run of a composition file and reloads it.
pub struct ReloadOnHangup<F> {
    hangup: Hangup,
    path: PathBuf,
    /// Reads and plans the file again, with the run's flags (the caller's: this module
    /// uses no command's).
    replan: F,
    reloader: Reloader,
}

/// Starts watching SIGHUP before the composition is built (SIGHUP then no longer ends the
/// process): a signal that comes while blocks are being built reloads at the first tick.
pub fn watch() -> anyhow::Result<Hangup> {
    Ok(Hangup::watch()?)
}

impl<F: Fn() -> anyhow::Result<Plan>> ReloadOnHangup<F> {
    /// Reloads `path` as `replan` plans it through `reloader` on each SIGHUP `hangup` saw.
    pub fn new(hangup: Hangup, path: PathBuf, replan: F, reloader: Reloader) -> Self {
        ReloadOnHangup {
            hangup,
            path,
            replan,
            reloader,
        }
    }

    /// Reloads when SIGHUP arrived since the last call; says what happened on standard error
    /// (the journal, under systemd).
    pub fn tick(&self) {
        if self.hangup.take() {
            eprintln!("trawl: {}", self.reload());
        }
    }

    fn reload(&self) -> String {
        let origin = self.path.display();
        let plan = match (self.replan)() {
            Ok(p) => p,
            Err(e) => {
                // The checker lists its problems on lines of their own: one log line.
                let e = format!("{e:#}");
                let problems: Vec<&str> = e.lines().map(str::trim).collect();
                return format!(
                    "reload of {origin} refused: {}; the composition keeps running as it was",
                    problems.join("; ")
                );
            }
        };
        match self.reloader.reload(plan) {
            ReloadOutcome::Unchanged => format!("reload of {origin}: nothing changed"),
            ReloadOutcome::Applied(changes) => {
                format!("reload of {origin}: applied {}", changes.join(", "))
            }
            ReloadOutcome::Refused(why) => format!(
                "reload of {origin} refused, restart trawl to apply it: {}; the composition \
                 keeps running as it was",
                why.join("; ")
            ),
            ReloadOutcome::Failed { applied, errors } => format!(
                "reload of {origin}: applied {}; failed: {} (those blocks keep their settings)",
                if applied.is_empty() {
                    "nothing".to_string()
                } else {
                    applied.join(", ")
                },
                errors.join("; ")
            ),
        }
    }
}
