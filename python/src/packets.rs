//! `packets`: the stored packets of a time window (the packet store of `trawl run --dump`,
//! `trawl dump`), yielded one by one as `(ts_ns, iface, bytes)`.
//!
//! The store's reader calls back with every packet in time order; it runs on a thread of its
//! own and hands packets over in batches through a bounded channel, so a window of any size is
//! read with the memory of a few batches, and a consumer that stops early (breaks out of its
//! loop, drops the iterator) stops the reader.
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::types::PyBytes;
use trawl_packets::{PacketStore, Selection};

use crate::{trawl_error, without_gil};

/// Packets per message from the reader thread.
const BATCH: usize = 1024;

/// Messages buffered between the reader and Python.
const QUEUED: usize = 4;

/// One packet, owned.
type Packet = (u64, String, Vec<u8>);

/// What the reader thread sends: packets, or the error that ended the read.
enum Message {
    Packets(Vec<Packet>),
    Failed(String),
}

/// The iterator `trawl.packets` returns.
#[pyclass(module = "trawl._trawl")]
pub struct PacketIter {
    /// `None` once the reader is done.
    rx: Mutex<Option<Receiver<Message>>>,
    /// The current batch, reversed (popped from the end).
    pending: Vec<Packet>,
}

#[pymethods]
impl PacketIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<(u64, String, Py<PyBytes>)>> {
        loop {
            if let Some((ts, iface, data)) = self.pending.pop() {
                return Ok(Some((ts, iface, PyBytes::new(py, &data).unbind())));
            }
            let mut guard = self.rx.lock().expect("not poisoned");
            // Out of the slot while waiting (a receiver cannot be shared across threads); put
            // back unless the reader is done.
            let Some(rx) = guard.take() else {
                return Ok(None);
            };
            // Waiting for the reader without the GIL; Ctrl-C still interrupts between waits.
            let (rx, got) = without_gil(py, move |interrupt| loop {
                if let Err(e) = interrupt.check() {
                    return Ok((rx, Err(e)));
                }
                match rx.recv_timeout(std::time::Duration::from_millis(100)) {
                    Ok(m) => return Ok((rx, Ok(Some(m)))),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => continue,
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                        return Ok((rx, Ok(None)))
                    }
                }
            })?;
            match got? {
                Some(Message::Packets(mut batch)) => {
                    *guard = Some(rx);
                    batch.reverse();
                    self.pending = batch;
                }
                Some(Message::Failed(e)) => return Err(trawl_error(e)),
                None => return Ok(None),
            }
        }
    }
}

/// `trawl.packets`: see `trawl/__init__.py`. Times are ns since the epoch, already parsed.
#[pyfunction]
#[pyo3(signature = (store, start_ns, end_ns, filter, ifaces))]
pub fn packets(
    store: PathBuf,
    start_ns: u64,
    end_ns: u64,
    filter: Option<String>,
    ifaces: Vec<String>,
) -> PyResult<PacketIter> {
    if end_ns <= start_ns {
        return Err(trawl_error(
            "the time range is empty (end is not after start)",
        ));
    }
    let store = PacketStore::open(&store).map_err(trawl_error)?;
    let sel = Selection {
        from_ns: start_ns,
        to_ns: end_ns,
        ifaces,
        filter: filter.filter(|f| !f.trim().is_empty()),
    };
    if let Some(expr) = &sel.filter {
        // A bad expression fails here, at the call, not at the first `next()`.
        trawl_bpf::Filter::compile(
            expr,
            trawl_capture::LinkType::ETHERNET,
            trawl_capture::MAX_SNAPLEN,
        )
        .map_err(trawl_error)?;
    }
    let (tx, rx) = sync_channel(QUEUED);
    std::thread::Builder::new()
        .name("trawl-packets".into())
        .spawn(move || {
            let mut batch = Vec::with_capacity(BATCH);
            let read = store.read(&sel, |p| {
                batch.push((p.ts_ns, p.iface.to_string(), p.data.to_vec()));
                if batch.len() < BATCH {
                    return ControlFlow::Continue(());
                }
                let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                // The consumer went away: stop reading.
                match tx.send(Message::Packets(full)) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(_) => ControlFlow::Break(()),
                }
            });
            let last = match read {
                Ok(_) => Message::Packets(batch),
                Err(e) => Message::Failed(e.to_string()),
            };
            let _ = tx.send(last);
        })
        .map_err(|e| trawl_error(format!("cannot start the reader thread: {e}")))?;
    Ok(PacketIter {
        rx: Mutex::new(Some(rx)),
        pending: Vec::new(),
    })
}
