//! Diagnostics through `tracing`: one line per event on standard error, naming the component
//! that logged it (the event's target, such as `trawl_cli::subscribe`). The summaries and
//! reports a command prints on purpose are not logs and are written as they were.
//!
//! Level: `info` by default (notes, warnings and errors), `-q` errors only, `-v` adds debug
//! messages, `-vv` trace messages. Without `-v`/`-q`, `RUST_LOG` (tracing's filter syntax,
//! e.g. `RUST_LOG=trawl_compose=debug`) chooses instead.
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

/// Installs the subscriber for the process (before the command runs).
pub fn init(verbose: u8, quiet: bool) {
    let filter = match (quiet, verbose) {
        (true, _) => EnvFilter::new("error"),
        (false, 1) => EnvFilter::new("debug"),
        (false, 2..) => EnvFilter::new("trace"),
        (false, 0) => match std::env::var("RUST_LOG") {
            Ok(spec) if !spec.trim().is_empty() => EnvFilter::new(spec),
            _ => EnvFilter::new("info"),
        },
    };
    // A second initialisation (never in the binary) would fail: nothing to do then.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .without_time()
        .with_target(true)
        .try_init();
}
