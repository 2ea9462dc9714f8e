//! Stored alarms: the events of detection blocks (SYN floods, series changes, heavy-hitter
//! reports) kept beside the flow database as JSON lines, one file per day
//! (`DB/alarms/date=2026-11-22/alarms.jsonl`, `docs/specs/store.md`, "Alarms").
//!
//! JSON lines rather than Parquet: alarms are few, arrive one at a time and must be readable
//! as soon as they are raised (a Parquet file is written once, whole), and their attributes
//! differ per detector. Every [`AlarmWriter::append`] is one `write` of whole lines to a file
//! opened for appending, then `fsync`: a crash leaves at most a torn last line, which
//! [`read`] skips.
//!
//! ```
//! use trawl_store::alarms::{self, Alarm, AlarmWriter};
//!
//! let db = tempfile::tempdir().unwrap();
//! let t = 1_763_812_800_000_000_000; // 2025-11-22 12:00:00 UTC
//! let alarm = Alarm {
//!     detector: "synflood".into(), iface: Some("eth0".into()), ts_ns: t + 5,
//!     start_ns: t, end_ns: None, rate: Some(1200.0),
//!     event: serde_json::json!({"event": "start", "victim": "10.0.0.1"}),
//! };
//! AlarmWriter::new(db.path()).append(&[alarm.clone()]).unwrap();
//! assert_eq!(alarms::read(db.path(), t, t + 60_000_000_000).unwrap(), vec![alarm]);
//! ```
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::layout::{Date, DAY_NS};
use crate::writer::{make_day_dir, sync_dir};

/// Directory of the alarms under the database root.
pub const ALARMS_DIR: &str = "alarms";
/// Name of a day's file.
pub const ALARMS_FILE: &str = "alarms.jsonl";

/// One stored alarm.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Alarm {
    /// The detector that raised it: `synflood`, `series_change`, `heavy_hitters`, or the
    /// block type of another detector.
    pub detector: String,
    /// The interface whose traffic raised it (`None`: not known, e.g. a capture file).
    pub iface: Option<String>,
    /// Packet time of the event (ns): when it was raised, or when it ended for an end event.
    /// The alarm is stored in the day of this time.
    pub ts_ns: u64,
    /// Estimated start of the anomaly (ns).
    pub start_ns: u64,
    /// End of the anomaly (ns), on events that end one.
    pub end_ns: Option<u64>,
    /// The rate that fired it (the detector's unit: SYNs per interval, packets, bytes or
    /// flows per second), or the peak rate on an end event.
    pub rate: Option<f64>,
    /// The detector's event as its own output prints it (`trawl detect`): the attributes
    /// that name the cause (victim, metric, top sources).
    pub event: serde_json::Value,
}

/// Path of the alarm file of the day of `ts_ns`.
pub fn day_file(db: &Path, ts_ns: u64) -> PathBuf {
    db.join(ALARMS_DIR)
        .join(format!("date={}", Date::of(ts_ns)))
        .join(ALARMS_FILE)
}

/// Appends alarms to the day files of a database.
#[derive(Debug)]
pub struct AlarmWriter {
    db: PathBuf,
    written: u64,
}

impl AlarmWriter {
    /// A writer into the database at `db` (directories are made as alarms come).
    pub fn new(db: impl AsRef<Path>) -> AlarmWriter {
        AlarmWriter {
            db: db.as_ref().to_path_buf(),
            written: 0,
        }
    }

    /// Alarms written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends `alarms` to the files of their days and syncs them.
    pub fn append(&mut self, alarms: &[Alarm]) -> Result<()> {
        let mut i = 0;
        while i < alarms.len() {
            let day = alarms[i].ts_ns / DAY_NS;
            let mut lines = Vec::new();
            while i < alarms.len() && alarms[i].ts_ns / DAY_NS == day {
                serde_json::to_writer(&mut lines, &alarms[i])
                    .map_err(|e| Error::block(&self.db, e))?;
                lines.push(b'\n');
                i += 1;
            }
            self.append_lines(&day_file(&self.db, day * DAY_NS), &lines)?;
        }
        self.written += alarms.len() as u64;
        Ok(())
    }

    fn append_lines(&self, path: &Path, lines: &[u8]) -> Result<()> {
        let dir = path.parent().unwrap_or(&self.db);
        let fresh = !dir.is_dir();
        if fresh {
            make_day_dir(dir)?;
        }
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        // One write of whole lines: appends of concurrent writers do not interleave.
        f.write_all(lines).map_err(|e| Error::io(path, e))?;
        f.sync_data().map_err(|e| Error::io(path, e))?;
        if fresh {
            sync_dir(dir)?;
        }
        Ok(())
    }
}

/// The stored alarms whose `ts_ns` lies in `[from_ns, to_ns)`, oldest first (alarms of equal
/// time in the order they were written). A line that does not parse is an error naming the
/// file and line, except a last line without its newline (a write a crash interrupted).
pub fn read(db: &Path, from_ns: u64, to_ns: u64) -> Result<Vec<Alarm>> {
    let mut out = Vec::new();
    if to_ns <= from_ns {
        return Ok(out);
    }
    let mut day = from_ns / DAY_NS;
    let last = (to_ns - 1) / DAY_NS;
    let root = db.join(ALARMS_DIR);
    if !root.is_dir() {
        return Ok(out);
    }
    while day <= last {
        let path = day_file(db, day * DAY_NS);
        let text = match fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                day += 1;
                continue;
            }
            Err(e) => return Err(Error::io(&path, e)),
        };
        parse_day(&path, &text, from_ns, to_ns, &mut out)?;
        day += 1;
    }
    out.sort_by_key(|a| a.ts_ns);
    Ok(out)
}

fn parse_day(path: &Path, text: &[u8], from: u64, to: u64, out: &mut Vec<Alarm>) -> Result<()> {
    let complete = text.ends_with(b"\n");
    let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    for (n, line) in lines.iter().enumerate() {
        if line.is_empty() {
            continue;
        }
        let torn = !complete && n + 1 == lines.len();
        match serde_json::from_slice::<Alarm>(line) {
            Ok(a) if (from..to).contains(&a.ts_ns) => out.push(a),
            Ok(_) => {}
            Err(_) if torn => {}
            Err(e) => return Err(Error::block(path, format!("line {}: {e}", n + 1))),
        }
    }
    Ok(())
}

/// Every day file of alarms: (start of its day ns, path, bytes), for retention.
pub(crate) fn list_files(db: &Path) -> Result<Vec<(u64, PathBuf, u64)>> {
    let mut out = Vec::new();
    for day in crate::series::subdirs(&db.join(ALARMS_DIR), "date=")? {
        let start = day
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_prefix("date="))
            .and_then(Date::parse)
            .and_then(Date::start_ns);
        let path = day.join(ALARMS_FILE);
        if let (Some(start), Ok(m)) = (start, fs::metadata(&path)) {
            out.push((start, path, m.len()));
        }
    }
    Ok(out)
}
