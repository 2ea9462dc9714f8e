//! A scan's link to whoever started it: a flag that stops it early, and how far it got.
//!
//! The API answers a query that runs past its time limit with 503; without a way in, the scan
//! would go on to its end on the server's threads, for nobody. The workers look at the flag
//! before every block and every row group, so a cancelled scan ends within one row group's
//! decoding ([`crate::Error::Cancelled`]) and frees its threads.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Shared between a scan ([`crate::scan_with`]) and its caller, who may cancel it.
#[derive(Debug, Default)]
pub struct ScanControl {
    cancelled: AtomicBool,
    blocks_done: AtomicU64,
}

impl ScanControl {
    /// Asks the scan to stop: it ends with [`crate::Error::Cancelled`] at its next row group.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::Relaxed);
    }

    /// Whether [`ScanControl::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::Relaxed)
    }

    /// Blocks the scan has finished with (scanned, pruned or failed) so far.
    pub fn blocks_done(&self) -> u64 {
        self.blocks_done.load(Ordering::Relaxed)
    }

    pub(crate) fn block_done(&self) {
        self.blocks_done.fetch_add(1, Ordering::Relaxed);
    }
}
