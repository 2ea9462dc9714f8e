//! Retention: blocks, stored series and alarm files older than a number of days, then the
//! oldest of them while the database is over its disk budget, are deleted; days go oldest
//! first.
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use crate::error::{Error, Result};
use crate::layout::{list_blocks, BlockFilter, DAY_NS};

/// Retention settings. `None` disables a rule.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    /// Keep days whose date is at most this many days before the day of `now`.
    pub max_age_days: Option<u32>,
    /// Keep the database's block files within this many bytes.
    pub max_bytes: Option<u64>,
}

/// What [`enforce`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    /// Files deleted: flow blocks, series files and alarm day files.
    pub blocks_deleted: u64,
    /// Their bytes.
    pub bytes_deleted: u64,
    /// Leftover temporary files (of writes a crash interrupted) deleted.
    pub temporaries_deleted: u64,
    /// Bytes of block files kept.
    pub bytes_kept: u64,
}

/// Temporary files older than this belong to an interrupted write, not a running one.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);

/// Applies `rules` to the database at `db` as of `now_ns` (ns since the epoch): first every
/// block of a day older than `max_age_days`, then, while the blocks add up to more than
/// `max_bytes`, the oldest block (by interval start, across interfaces), so whole days go
/// oldest first. Empty day and interface directories are removed, and stale temporary files
/// of interrupted writes.
pub fn enforce(db: &Path, rules: &Retention, now_ns: u64) -> Result<RetentionOutcome> {
    let mut out = RetentionOutcome::default();
    // Flow blocks, stored series and alarm files, oldest first: the rules apply to them
    // together (`docs/specs/store.md`, "Retention").
    let mut files: Vec<(u64, PathBuf, u64)> = list_blocks(db, &BlockFilter::default())?
        .into_iter()
        .map(|b| (b.start_ns, b.path, b.bytes))
        .collect();
    files.extend(crate::series::list_files(db)?);
    files.extend(crate::alarms::list_files(db)?);
    files.sort_by_key(|f| f.0);
    let today = now_ns / DAY_NS;
    let oldest_day = rules
        .max_age_days
        .map(|d| today.saturating_sub(u64::from(d)));
    let mut total: u64 = files.iter().map(|f| f.2).sum();
    for (start_ns, path, bytes) in &files {
        let too_old = oldest_day.is_some_and(|d| start_ns / DAY_NS < d);
        let over = rules.max_bytes.is_some_and(|m| total > m);
        if !(too_old || over) {
            continue;
        }
        match fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(path, e)),
        }
        total -= bytes;
        out.blocks_deleted += 1;
        out.bytes_deleted += bytes;
    }
    out.bytes_kept = total;
    out.temporaries_deleted = tidy(db)?;
    for iface in crate::series::subdirs(&db.join(crate::series::SERIES_DIR), "iface=")? {
        for step in crate::series::subdirs(&iface, "step=")? {
            out.temporaries_deleted += tidy_days(&step)?;
            let _ = fs::remove_dir(&step);
        }
        let _ = fs::remove_dir(&iface);
    }
    out.temporaries_deleted += tidy_days(&db.join(crate::alarms::ALARMS_DIR))?;
    Ok(out)
}

/// Removes stale temporary files and empty day/interface directories of the flow blocks;
/// returns the number of temporaries removed.
fn tidy(db: &Path) -> Result<u64> {
    let mut removed = 0;
    for iface in fs::read_dir(db).map_err(|e| Error::io(db, e))?.flatten() {
        let ipath = iface.path();
        if !iface.file_name().to_string_lossy().starts_with("iface=") || !ipath.is_dir() {
            continue;
        }
        removed += tidy_days(&ipath)?;
        let _ = fs::remove_dir(&ipath);
    }
    Ok(removed)
}

/// Removes stale temporary files in the `date=` directories of `parent`, and those
/// directories once empty; returns the number of temporaries removed.
fn tidy_days(parent: &Path) -> Result<u64> {
    let mut removed = 0;
    let now = SystemTime::now();
    let days = match fs::read_dir(parent) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(Error::io(parent, e)),
    };
    for day in days.flatten() {
        let dpath = day.path();
        if !day.file_name().to_string_lossy().starts_with("date=") || !dpath.is_dir() {
            continue;
        }
        for f in fs::read_dir(&dpath)
            .map_err(|e| Error::io(&dpath, e))?
            .flatten()
        {
            let name = f.file_name();
            let name = name.to_string_lossy();
            let stale = f
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age > STALE_TEMPORARY);
            if name.starts_with('.')
                && name.ends_with(".tmp")
                && stale
                && fs::remove_file(f.path()).is_ok()
            {
                removed += 1;
            }
        }
        // Fails (and is left) unless empty.
        let _ = fs::remove_dir(&dpath);
    }
    Ok(removed)
}
