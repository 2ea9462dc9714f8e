//! Flow database retention for the commands that write one as they go.
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use trawl_store::retention::RetentionOutcome;
use trawl_store::Retention;

/// What retention deleted over a run, and the errors it met.
pub type Retained = (RetentionOutcome, Vec<String>);

/// The flow database's retention while `trawl run --db` or `trawl collect --db` goes: a thread
/// applies the rules every minute (deleting never waits on the writers, which only ever add
/// files).
pub struct DbRetention {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<Retained>,
    db: PathBuf,
    rules: Retention,
}

impl DbRetention {
    /// Starts applying `rules` to the database `db` (a thread that idles when there are none).
    pub fn start(db: PathBuf, rules: Retention) -> DbRetention {
        use std::sync::atomic::Ordering;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread_db = db.clone();
        let active = rules != Retention::default();
        let thread = std::thread::spawn(move || {
            let mut total = RetentionOutcome::default();
            let mut errors = Vec::new();
            let mut last = Instant::now() - Duration::from_secs(60);
            while active && !flag.load(Ordering::Relaxed) {
                if last.elapsed() >= Duration::from_secs(60) {
                    last = Instant::now();
                    apply(&thread_db, &rules, &mut total, &mut errors);
                }
                std::thread::sleep(Duration::from_millis(250));
            }
            (total, errors)
        });
        DbRetention {
            stop,
            thread,
            db,
            rules,
        }
    }

    /// Stops the thread, applies the rules once more (after the writers' last blocks) and
    /// returns what was deleted over the run and the errors.
    pub fn finish(self) -> Retained {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let (mut total, mut errors) = self.thread.join().unwrap_or_else(|_| {
            (
                Default::default(),
                vec!["the retention thread panicked".into()],
            )
        });
        if self.rules != Retention::default() {
            apply(&self.db, &self.rules, &mut total, &mut errors);
        }
        (total, errors)
    }
}

fn apply(db: &Path, rules: &Retention, total: &mut RetentionOutcome, errors: &mut Vec<String>) {
    match trawl_store::retention::enforce(db, rules, trawl_time::now_ns()) {
        Ok(o) => {
            total.blocks_deleted += o.blocks_deleted;
            total.bytes_deleted += o.bytes_deleted;
            total.temporaries_deleted += o.temporaries_deleted;
            total.bytes_kept = o.bytes_kept;
        }
        // Reported once in the summary; the next pass tries again.
        Err(e) if errors.is_empty() => errors.push(format!("flow database retention: {e}")),
        Err(_) => {}
    }
}

/// The `retention` object of a JSON summary.
pub fn summary_json((out, errors): &Retained) -> serde_json::Value {
    serde_json::json!({
        "blocks_deleted": out.blocks_deleted,
        "bytes_deleted": out.bytes_deleted,
        "errors": errors,
    })
}
