//! SIGINT and SIGTERM for every command that runs until stopped.
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};

/// SIGINT and SIGTERM ask the capture to stop (flows are flushed, files closed whole); a
/// second SIGINT or SIGTERM ends the process at once.
pub fn install_stop_signals() -> Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [SIGINT, SIGTERM] {
        // Registered first, so it sees the flag still clear on the first signal.
        signal_hook::flag::register_conditional_shutdown(sig, 130, stop.clone())
            .context("cannot install signal handlers")?;
        signal_hook::flag::register(sig, stop.clone()).context("cannot install signal handlers")?;
    }
    Ok(stop)
}
