//! Retention: blocks older than a number of days, then the oldest blocks while the database
//! is over its disk budget, are deleted; days go oldest first.
use std::fs;
use std::path::Path;
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
    /// Block files deleted.
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
    let blocks = list_blocks(db, &BlockFilter::default())?;
    let today = now_ns / DAY_NS;
    let oldest_day = rules
        .max_age_days
        .map(|d| today.saturating_sub(u64::from(d)));
    let mut total: u64 = blocks.iter().map(|b| b.bytes).sum();
    for b in &blocks {
        let too_old = oldest_day.is_some_and(|d| b.start_ns / DAY_NS < d);
        let over = rules.max_bytes.is_some_and(|m| total > m);
        if !(too_old || over) {
            continue;
        }
        match fs::remove_file(&b.path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&b.path, e)),
        }
        total -= b.bytes;
        out.blocks_deleted += 1;
        out.bytes_deleted += b.bytes;
    }
    out.bytes_kept = total;
    out.temporaries_deleted = tidy(db)?;
    Ok(out)
}

/// Removes stale temporary files and empty day/interface directories; returns the number of
/// temporaries removed.
fn tidy(db: &Path) -> Result<u64> {
    let mut removed = 0;
    let now = SystemTime::now();
    for iface in fs::read_dir(db).map_err(|e| Error::io(db, e))?.flatten() {
        let ipath = iface.path();
        if !iface.file_name().to_string_lossy().starts_with("iface=") || !ipath.is_dir() {
            continue;
        }
        for day in fs::read_dir(&ipath)
            .map_err(|e| Error::io(&ipath, e))?
            .flatten()
        {
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
        let _ = fs::remove_dir(&ipath);
    }
    Ok(removed)
}
