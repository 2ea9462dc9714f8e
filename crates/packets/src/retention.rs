//! Retention: a thread that deletes the oldest segments so the store stays within a disk budget
//! and a maximum age, and the volume never fills. It runs beside the writers and only ever
//! takes a short lock they also take when a segment closes, so deleting never stalls writing.
//!
//! Ages are measured in packet time: a segment is too old when its last packet is more than
//! `max_age` older than the newest packet stored, so a replayed capture ages like live traffic.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::error::Error;
use crate::index::SegmentIndex;
use crate::layout::{index_path, list_segments};
use crate::sys;

/// How much disk the store may use.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Budget {
    /// Bytes of segments and indexes.
    Bytes(u64),
    /// Percent of the size of the volume holding the store.
    Percent(f64),
}

/// Settings of a [`Retention`] thread.
#[derive(Clone, Debug)]
pub struct RetentionConfig {
    /// Root directory of the store.
    pub dir: PathBuf,
    /// Disk budget, if any.
    pub budget: Option<Budget>,
    /// Maximum age (packet time), if any.
    pub max_age_ns: Option<u64>,
    /// Room kept for the segments being written (writers × segment size): closed segments may
    /// use the budget minus this, and the volume keeps at least this much free.
    pub reserve_bytes: u64,
    /// How often the thread checks even without news.
    pub interval: Duration,
}

/// Counters of retention.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionStats {
    /// Segments deleted to keep the budget.
    pub deleted_for_budget: u64,
    /// Segments deleted for their age.
    pub deleted_for_age: u64,
    /// Segments deleted because the volume was running out of space.
    pub deleted_for_space: u64,
    /// Bytes deleted (segments and indexes).
    pub bytes_deleted: u64,
    /// Deletions that failed (the segment is forgotten, the error is logged once).
    pub errors: u64,
    /// Bytes stored now (closed segments and their indexes).
    pub stored_bytes: u64,
    /// Closed segments stored now.
    pub stored_segments: u64,
}

#[derive(Clone, Copy)]
struct Entry {
    bytes: u64,
    last_ts: u64,
}

struct State {
    /// Closed segments by (start time, path): the first is the oldest.
    segments: BTreeMap<(u64, PathBuf), Entry>,
    total: u64,
    newest_ts: u64,
    stats: RetentionStats,
    stop: bool,
    last_error: Option<String>,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

/// Cheap handle writers use to report closed segments.
#[derive(Clone)]
pub struct RetentionHandle {
    shared: Arc<Shared>,
}

impl RetentionHandle {
    /// A segment (at `path`, first packet at `start_ns`, `bytes` long, last packet at
    /// `last_ts`) was closed with its index.
    pub fn closed(&self, path: &Path, start_ns: u64, bytes: u64, last_ts: u64) {
        let bytes = bytes + std::fs::metadata(index_path(path)).map_or(0, |m| m.len());
        let mut s = self.shared.state.lock().expect("not poisoned");
        if let Some(old) = s
            .segments
            .insert((start_ns, path.to_path_buf()), Entry { bytes, last_ts })
        {
            s.total -= old.bytes;
        }
        s.total += bytes;
        s.newest_ts = s.newest_ts.max(last_ts);
        drop(s);
        self.shared.wake.notify_one();
    }
}

/// The retention thread.
pub struct Retention {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl Retention {
    /// Scans the store for closed segments and starts the thread (which enforces the limits at
    /// once: a store over budget shrinks before the first new packet is written).
    pub fn start(config: RetentionConfig) -> Result<Retention, Error> {
        let mut segments = BTreeMap::new();
        let mut total = 0;
        let mut newest_ts = 0;
        for seg in list_segments(&config.dir)? {
            if !seg.indexed {
                continue; // being written, or to be repaired by its writer
            }
            let idx = index_path(&seg.path);
            let (last_ts, idx_bytes) = match SegmentIndex::read(&idx) {
                Ok(i) => (i.last_ts, std::fs::metadata(&idx).map_or(0, |m| m.len())),
                // A damaged index: the name still gives the start time; age it by that.
                Err(_) => (seg.name.start_ns, 0),
            };
            let bytes = seg.bytes + idx_bytes;
            total += bytes;
            newest_ts = newest_ts.max(last_ts);
            segments.insert((seg.name.start_ns, seg.path), Entry { bytes, last_ts });
        }
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                segments,
                total,
                newest_ts,
                stats: RetentionStats::default(),
                stop: false,
                last_error: None,
            }),
            wake: Condvar::new(),
        });
        let sh = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("trawl-retention".into())
            .spawn(move || retention_loop(&config, &sh))
            .map_err(Error::io("", "starting the retention thread"))?;
        Ok(Retention {
            shared,
            handle: Some(handle),
        })
    }

    /// A handle for writers.
    pub fn handle(&self) -> RetentionHandle {
        RetentionHandle {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> RetentionStats {
        let s = self.shared.state.lock().expect("not poisoned");
        let mut st = s.stats;
        st.stored_bytes = s.total;
        st.stored_segments = s.segments.len() as u64;
        st
    }

    /// The last deletion error, if any.
    pub fn last_error(&self) -> Option<String> {
        self.shared
            .state
            .lock()
            .expect("not poisoned")
            .last_error
            .clone()
    }

    /// Enforces the limits once more and stops the thread.
    pub fn stop(mut self) -> RetentionStats {
        self.halt();
        self.stats()
    }

    fn halt(&mut self) {
        self.shared.state.lock().expect("not poisoned").stop = true;
        self.shared.wake.notify_one();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Drop for Retention {
    fn drop(&mut self) {
        self.halt();
    }
}

#[derive(Clone, Copy)]
enum Why {
    Budget,
    Age,
    Space,
}

fn retention_loop(config: &RetentionConfig, shared: &Shared) {
    let mut state = shared.state.lock().expect("not poisoned");
    loop {
        // Decide under the lock, delete outside it.
        while let Some((path, why)) = next_victim(config, &state) {
            let key = state
                .segments
                .keys()
                .next()
                .cloned()
                .expect("a victim exists");
            let entry = state.segments.remove(&key).expect("present");
            state.total -= entry.bytes;
            drop(state);
            let result = delete_segment(&path);
            state = shared.state.lock().expect("not poisoned");
            match result {
                Ok(()) => {
                    state.stats.bytes_deleted += entry.bytes;
                    match why {
                        Why::Budget => state.stats.deleted_for_budget += 1,
                        Why::Age => state.stats.deleted_for_age += 1,
                        Why::Space => state.stats.deleted_for_space += 1,
                    }
                }
                Err(e) => {
                    state.stats.errors += 1;
                    state.last_error = Some(e.to_string());
                }
            }
        }
        if state.stop {
            return;
        }
        state = shared
            .wake
            .wait_timeout(state, config.interval)
            .expect("not poisoned")
            .0;
    }
}

/// The oldest segment if a limit says it must go.
fn next_victim(config: &RetentionConfig, s: &State) -> Option<(PathBuf, Why)> {
    let ((_, path), oldest) = s.segments.iter().next()?;
    if let Some(max_age) = config.max_age_ns {
        if oldest.last_ts.saturating_add(max_age) < s.newest_ts {
            return Some((path.clone(), Why::Age));
        }
    }
    if let Some(budget) = config.budget {
        let limit = match budget {
            Budget::Bytes(b) => b,
            Budget::Percent(p) => match sys::volume_space(&config.dir) {
                Ok((size, _)) => (size as f64 * p / 100.0) as u64,
                Err(_) => u64::MAX,
            },
        };
        if s.total + config.reserve_bytes > limit {
            return Some((path.clone(), Why::Budget));
        }
    }
    if let Ok((_, free)) = sys::volume_space(&config.dir) {
        if free < config.reserve_bytes {
            return Some((path.clone(), Why::Space));
        }
    }
    None
}

fn delete_segment(path: &Path) -> Result<(), Error> {
    // Index first: a segment without index is one being written or to repair, never a stray
    // index without its segment.
    match std::fs::remove_file(index_path(path)) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(index_path(path), "deleting the index")(e)),
    }
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io(path, "deleting the segment")(e)),
    }
    // Empty hour and day directories go too (fails harmlessly when not empty).
    if let Some(hour) = path.parent() {
        if std::fs::remove_dir(hour).is_ok() {
            if let Some(day) = hour.parent() {
                let _ = std::fs::remove_dir(day);
            }
        }
    }
    Ok(())
}
