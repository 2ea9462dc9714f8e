//! `trawl._trawl`: the Rust side of trawl's Python package.
//!
//! Each function does its work with the GIL released ([`without_gil`]) and hands its result to
//! pyarrow as an Arrow C stream ([`arrow_out`]): the columns trawl built are the columns Python
//! sees, not a copy. The Python package (`trawl/__init__.py`) wraps these functions with
//! defaults, argument conversion and documentation.
//!
//! Modules: [`meter`] (capture files → flows and per-second series), [`db`] (the flow
//! database: queries, block listing), [`packets`] (the packet store).
use std::time::{Duration, Instant};

use pyo3::create_exception;
use pyo3::prelude::*;

mod arrow_out;
mod db;
mod meter;
mod packets;

create_exception!(
    _trawl,
    TrawlError,
    pyo3::exceptions::PyException,
    "An error trawl reported: an unreadable file, a bad filter, condition or time, a \
     database that is not one. The message is trawl's."
);

/// A trawl error as a Python exception, with trawl's message.
pub(crate) fn trawl_error(e: impl std::fmt::Display) -> PyErr {
    TrawlError::new_err(e.to_string())
}

/// How often long work takes the GIL back to let Python run its signal handlers.
const SIGNAL_CHECK_EVERY: Duration = Duration::from_millis(100);

/// Lets long work be interrupted: [`Interrupt::check`] returns Python's exception
/// (`KeyboardInterrupt` after Ctrl-C) once a signal handler raised one.
pub(crate) struct Interrupt {
    last: Instant,
}

impl Interrupt {
    fn new() -> Self {
        Interrupt {
            last: Instant::now(),
        }
    }

    /// Called between batches, without the GIL. Takes the GIL at most every
    /// [`SIGNAL_CHECK_EVERY`]: Python only notes a signal in its C handler and runs the
    /// Python-level handler (which raises `KeyboardInterrupt`) when asked with the GIL held.
    pub(crate) fn check(&mut self) -> PyResult<()> {
        if self.last.elapsed() < SIGNAL_CHECK_EVERY {
            return Ok(());
        }
        self.last = Instant::now();
        Python::attach(|py| py.check_signals())
    }
}

/// Runs `work` with the GIL released, so that other Python threads run meanwhile; `work` gets
/// an [`Interrupt`] to call between batches.
pub(crate) fn without_gil<T, F>(py: Python<'_>, work: F) -> PyResult<T>
where
    T: Send,
    F: FnOnce(&mut Interrupt) -> PyResult<T> + Send,
{
    py.detach(|| work(&mut Interrupt::new()))
}

#[pymodule]
fn _trawl(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("TrawlError", m.py().get_type::<TrawlError>())?;
    m.add_function(wrap_pyfunction!(meter::flows, m)?)?;
    m.add_function(wrap_pyfunction!(meter::series, m)?)?;
    m.add_function(wrap_pyfunction!(db::query, m)?)?;
    m.add_function(wrap_pyfunction!(db::blocks, m)?)?;
    m.add_function(wrap_pyfunction!(db::parse_time, m)?)?;
    m.add_class::<packets::PacketIter>()?;
    m.add_function(wrap_pyfunction!(packets::packets, m)?)?;
    Ok(())
}
