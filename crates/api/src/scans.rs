//! The scans of `/api/v1/query` and `/api/v1/partial` while they run: each one's
//! [`ScanControl`], so that a query past `query_timeout_s` (or whose client went away) is
//! stopped instead of scanning on for nobody, and the counters `/metrics` and
//! `/api/v1/status` show (`scans`): scans running, started, stopped early, blocks scanned.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use trawl_query::ScanControl;

/// The API's scans.
#[derive(Default)]
pub(crate) struct Scans {
    running: Mutex<Vec<Arc<ScanControl>>>,
    started: AtomicU64,
    /// Scans that ended because they were cancelled (past the timeout, client gone).
    cancelled: AtomicU64,
    /// Answered 503: past `query_timeout_s`.
    timed_out: AtomicU64,
    /// Blocks of the scans that ended.
    blocks_ended: AtomicU64,
}

/// The counters of [`Scans`] at one moment.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub(crate) struct ScanCounts {
    /// Scans running now.
    pub running: u64,
    /// Scans started.
    pub started: u64,
    /// Scans stopped before their end (cancelled).
    pub cancelled: u64,
    /// Queries answered 503 past their time.
    pub timed_out: u64,
    /// Blocks finished by every scan, the running ones' so far included.
    pub blocks: u64,
}

impl Scans {
    /// Registers a scan about to start; it is running until the guard is dropped.
    pub(crate) fn begin(self: &Arc<Self>) -> RunningScan {
        let control = Arc::new(ScanControl::default());
        self.started.fetch_add(1, Ordering::Relaxed);
        self.lock().push(control.clone());
        RunningScan {
            scans: self.clone(),
            control,
        }
    }

    /// A query answered 503: its scan is cancelled.
    pub(crate) fn timed_out(&self, control: &ScanControl) {
        self.timed_out.fetch_add(1, Ordering::Relaxed);
        control.cancel();
    }

    pub(crate) fn counts(&self) -> ScanCounts {
        let running = self.lock();
        let live: u64 = running.iter().map(|c| c.blocks_done()).sum();
        ScanCounts {
            running: running.len() as u64,
            started: self.started.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
            timed_out: self.timed_out.load(Ordering::Relaxed),
            blocks: self.blocks_ended.load(Ordering::Relaxed) + live,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Arc<ScanControl>>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A scan in the running list until dropped (at the end of its blocking task, so a scan
/// that goes on past its answer still counts as running).
pub(crate) struct RunningScan {
    scans: Arc<Scans>,
    pub(crate) control: Arc<ScanControl>,
}

impl Drop for RunningScan {
    fn drop(&mut self) {
        let mut running = self.scans.lock();
        running.retain(|c| !Arc::ptr_eq(c, &self.control));
        // Under the lock: `counts` sees the blocks either here or in the running list.
        let s = &self.scans;
        s.blocks_ended
            .fetch_add(self.control.blocks_done(), Ordering::Relaxed);
        if self.control.is_cancelled() {
            s.cancelled.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Cancels a scan when the request's handler goes away before its answer (the client
/// closed the connection): dropped with the handler's future. Harmless after the scan ended.
pub(crate) struct CancelOnDrop(pub(crate) Arc<ScanControl>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_running_scans_and_those_stopped_early() {
        let scans = Arc::new(Scans::default());
        let a = scans.begin();
        let b = scans.begin();
        assert_eq!(scans.counts().running, 2);
        scans.timed_out(&b.control);
        drop(b);
        drop(a);
        let c = scans.counts();
        assert_eq!(
            (c.running, c.started, c.cancelled, c.timed_out),
            (0, 2, 1, 1)
        );
    }
}
