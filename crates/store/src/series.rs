//! Stored per-second series: the rows of `trawl series` ([`SeriesRow`]) kept beside the flow
//! database, per interface, with rollups to minutes and hours (`docs/specs/store.md`,
//! "Series").
//!
//! ```text
//! DB/series/iface=eth0/step=1s/date=2026-11-22/1200.parquet   seconds of 12:00-12:05 (parts 1200_1, ...)
//! DB/series/iface=eth0/step=1m/date=2026-11-22/1200.parquet   minutes of 12:00-13:00
//! DB/series/iface=eth0/step=1h/date=2026-11-22/0000.parquet   hours of the day
//! ```
//!
//! [`SeriesIngest`] writes them as packet time passes: a seconds file once its 5 minutes are
//! over, an hour's minute file once the hour is over, and the day's hour file again after every
//! hour. Rollups are derived from the stored seconds, never from memory, so a restarted
//! writer or a later part of a block cannot make them disagree: a rollup file records up to
//! which second it covers (`trawl.series.covers_until`), and [`read`] derives whatever lies
//! beyond that (or every period without a rollup file) from the finer level.
//!
//! A rollup row sums its seconds' counters, except `active_flows`, a gauge, which takes the
//! largest value of its seconds (the peak of flows active in one second).
//!
//! ```
//! use trawl_series::SeriesRow;
//! use trawl_store::series::{self, SeriesIngest, Step};
//!
//! let db = tempfile::tempdir().unwrap();
//! let mut w = SeriesIngest::open(db.path(), "eth0").unwrap();
//! let t = 1_763_812_800; // 2025-11-22 12:00:00 UTC
//! for s in 0..120 {
//!     w.push(&SeriesRow { second: t + s, packets: 2, bytes: 100, active_flows: 1 + s % 3, ..SeriesRow::default() });
//! }
//! w.finish().unwrap();
//! let ns = |s: u64| s * 1_000_000_000;
//! let secs = series::read(db.path(), Some("eth0"), ns(t), ns(t + 3600), Step::Second).unwrap();
//! assert_eq!(secs.len(), 120);
//! let mins = series::read(db.path(), None, ns(t), ns(t + 3600), Step::Minute).unwrap();
//! assert_eq!((mins.len(), mins[0].packets, mins[0].active_flows), (2, 120, 3));
//! ```
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::UInt64Type;
use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use trawl_series::SeriesRow;

use crate::error::{Error, Result};
use crate::layout::{block_file_name, parse_block_name, valid_iface, Date, BLOCK_EXT};
use crate::writer::{create_in_day_dir, make_day_dir, sync_dir, TMP_COUNTER};

/// Directory of the series under the database root.
pub const SERIES_DIR: &str = "series";
/// Version of the series files (`trawl.series.version`).
pub const SERIES_VERSION: u32 = 1;
const VERSION_KEY: &str = "trawl.series.version";
const COVERS_KEY: &str = "trawl.series.covers_until";

const MINUTE: u64 = 60;
const HOUR: u64 = 3600;
const DAY: u64 = 86_400;
/// Seconds of one seconds file (the flow store's block interval).
const FILE_SECONDS: u64 = 300;
const NS: u64 = 1_000_000_000;

/// Resolution of stored series rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    /// One row per second (`1s`).
    Second,
    /// One row per minute (`1m`).
    Minute,
    /// One row per hour (`1h`).
    Hour,
}

impl Step {
    /// Seconds per row.
    pub fn seconds(self) -> u64 {
        match self {
            Step::Second => 1,
            Step::Minute => MINUTE,
            Step::Hour => HOUR,
        }
    }

    /// The name in paths and flags: `1s`, `1m`, `1h`.
    pub fn name(self) -> &'static str {
        match self {
            Step::Second => "1s",
            Step::Minute => "1m",
            Step::Hour => "1h",
        }
    }

    /// Parses `1s`, `1m` or `1h`.
    pub fn parse(s: &str) -> Option<Step> {
        [Step::Second, Step::Minute, Step::Hour]
            .into_iter()
            .find(|st| st.name() == s)
    }

    /// Seconds covered by one file of this step.
    fn file_seconds(self) -> u64 {
        match self {
            Step::Second => FILE_SECONDS,
            Step::Minute => HOUR,
            Step::Hour => DAY,
        }
    }
}

/// Adds `r` into `into` (the same second from several parts, workers or interfaces: disjoint
/// packets, so every field adds up).
pub fn add(into: &mut SeriesRow, r: &SeriesRow) {
    into.packets += r.packets;
    into.bytes += r.bytes;
    into.active_flows += r.active_flows;
    into.new_flows += r.new_flows;
    into.in_packets += r.in_packets;
    into.in_bytes += r.in_bytes;
    into.out_packets += r.out_packets;
    into.out_bytes += r.out_bytes;
}

/// Rolls `r` (a finer row) into `into` (the coarser row holding it): counters add up,
/// `active_flows` keeps the largest value (a gauge: the same flow is active in many seconds).
pub fn roll(into: &mut SeriesRow, r: &SeriesRow) {
    let active = into.active_flows.max(r.active_flows);
    add(into, r);
    into.active_flows = active;
}

/// The directory of one interface's files of `step` for `date`.
pub fn day_dir(db: &Path, iface: &str, step: Step, date: Date) -> PathBuf {
    db.join(SERIES_DIR)
        .join(format!("iface={iface}"))
        .join(format!("step={}", step.name()))
        .join(format!("date={date}"))
}

/// The interfaces that have stored series, sorted.
pub fn list_ifaces(db: &Path) -> Result<Vec<String>> {
    let root = db.join(SERIES_DIR);
    let entries = match fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&root, e)),
    };
    let mut out: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let iface = name.strip_prefix("iface=")?;
            (valid_iface(iface) && e.path().is_dir()).then(|| iface.to_string())
        })
        .collect();
    out.sort();
    Ok(out)
}

/// Counters of a [`SeriesIngest`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeriesStoreStats {
    /// Per-second rows written.
    pub rows: u64,
    /// Seconds files written (parts included).
    pub files: u64,
    /// Rollup files written (minute and hour files, rewrites included).
    pub rollups: u64,
    /// Bytes of the files written.
    pub bytes: u64,
}

/// Writes one interface's per-second rows and their rollups.
pub struct SeriesIngest {
    db: PathBuf,
    iface: String,
    /// Rows of the open 5-minute files, by file start (s) and second.
    open: BTreeMap<u64, BTreeMap<u64, SeriesRow>>,
    /// Hours (start, s) with seconds written by this writer and no rollup since.
    dirty_hours: BTreeSet<u64>,
    /// Days (start, s) whose hour file is to be rewritten.
    dirty_days: BTreeSet<u64>,
    /// Hours whose rollups written before this writer began have been removed.
    invalidated: BTreeSet<u64>,
    stats: SeriesStoreStats,
}

impl SeriesIngest {
    /// A writer of interface `iface`'s series into the database at `db` (created if needed).
    pub fn open(db: impl AsRef<Path>, iface: &str) -> Result<SeriesIngest> {
        if !valid_iface(iface) {
            return Err(Error::InvalidIface(iface.to_string()));
        }
        let db = db.as_ref().to_path_buf();
        fs::create_dir_all(&db).map_err(|e| Error::io(&db, e))?;
        Ok(SeriesIngest {
            db,
            iface: iface.to_string(),
            open: BTreeMap::new(),
            dirty_hours: BTreeSet::new(),
            dirty_days: BTreeSet::new(),
            invalidated: BTreeSet::new(),
            stats: SeriesStoreStats::default(),
        })
    }

    /// Counters so far.
    pub fn stats(&self) -> SeriesStoreStats {
        self.stats
    }

    /// Buffers one row (rows of a second already buffered add up).
    pub fn push(&mut self, r: &SeriesRow) {
        let file = r.second - r.second % FILE_SECONDS;
        let e = self
            .open
            .entry(file)
            .or_default()
            .entry(r.second)
            .or_insert(SeriesRow {
                second: r.second,
                ..SeriesRow::default()
            });
        add(e, r);
    }

    /// Every row of a second before `watermark` (s) has been pushed: writes the seconds files
    /// that ended by then, the minute files of the hours that ended, and the hour files of
    /// their days.
    pub fn advance(&mut self, watermark: u64) -> Result<()> {
        while let Some(entry) = self.open.first_entry() {
            if *entry.key() + FILE_SECONDS > watermark {
                break;
            }
            let (start, rows) = entry.remove_entry();
            self.write_seconds(start, rows)?;
        }
        let ended: Vec<u64> = self
            .dirty_hours
            .iter()
            .copied()
            .take_while(|h| h + HOUR <= watermark)
            .collect();
        for h in ended {
            self.dirty_hours.remove(&h);
            self.roll_hour(h)?;
        }
        let days: Vec<u64> = std::mem::take(&mut self.dirty_days).into_iter().collect();
        for d in days {
            self.roll_day(d)?;
        }
        Ok(())
    }

    /// Writes everything buffered, and the rollups of every hour and day it touched (partial
    /// ones cover up to their last stored second; readers derive the rest).
    pub fn finish(mut self) -> Result<SeriesStoreStats> {
        self.advance(u64::MAX)?;
        Ok(self.stats)
    }

    fn write_seconds(&mut self, start: u64, rows: BTreeMap<u64, SeriesRow>) -> Result<()> {
        let hour = start - start % HOUR;
        if self.invalidated.insert(hour) {
            self.invalidate(hour)?;
        }
        let rows: Vec<SeriesRow> = rows.into_values().collect();
        let dir = day_dir(&self.db, &self.iface, Step::Second, Date::of(start * NS));
        let end = start + FILE_SECONDS;
        let path = write_file(&dir, &self.iface, Step::Second, start, end, &rows, false)?;
        self.stats.rows += rows.len() as u64;
        self.stats.files += 1;
        self.stats.bytes += file_len(&path)?;
        self.dirty_hours.insert(hour);
        Ok(())
    }

    /// Removes rollups of `hour` (and of its day) written before this writer added seconds
    /// to it: they may claim to cover seconds they do not hold.
    fn invalidate(&mut self, hour: u64) -> Result<()> {
        let day = hour - hour % DAY;
        for (step, start) in [(Step::Minute, hour), (Step::Hour, day)] {
            let path = rollup_path(&self.db, &self.iface, step, start);
            match fs::remove_file(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(&path, e)),
            }
        }
        self.dirty_days.insert(day);
        Ok(())
    }

    /// Writes the minute file of `hour` from its stored seconds.
    fn roll_hour(&mut self, hour: u64) -> Result<()> {
        let seconds = read_seconds(&self.db, &self.iface, hour, hour + HOUR)?;
        let covers = covered_until(&self.db, &self.iface, hour, hour + HOUR)?;
        let rows = rollup(seconds.values(), MINUTE);
        let dir = day_dir(&self.db, &self.iface, Step::Minute, Date::of(hour * NS));
        let path = write_file(&dir, &self.iface, Step::Minute, hour, covers, &rows, true)?;
        self.stats.rollups += 1;
        self.stats.bytes += file_len(&path)?;
        self.dirty_days.insert(hour - hour % DAY);
        Ok(())
    }

    /// Rewrites the hour file of `day` from its minute files (and the seconds beyond them).
    fn roll_day(&mut self, day: u64) -> Result<()> {
        let minutes = read_iface(&self.db, &self.iface, day, day + DAY, Step::Minute)?;
        // The hour file covers what its minutes do: up to the last minute file's coverage.
        let covers = (day..day + DAY)
            .step_by(HOUR as usize)
            .filter_map(|h| rollup_covers(&self.db, &self.iface, Step::Minute, h).transpose())
            .collect::<Result<Vec<u64>>>()?
            .into_iter()
            .max();
        let Some(covers) = covers else {
            return Ok(());
        };
        let rows: Vec<SeriesRow> = rollup(minutes.values().filter(|r| r.second < covers), HOUR);
        let dir = day_dir(&self.db, &self.iface, Step::Hour, Date::of(day * NS));
        let path = write_file(&dir, &self.iface, Step::Hour, day, covers, &rows, true)?;
        self.stats.rollups += 1;
        self.stats.bytes += file_len(&path)?;
        Ok(())
    }
}

fn file_len(path: &Path) -> Result<u64> {
    Ok(fs::metadata(path).map_err(|e| Error::io(path, e))?.len())
}

/// Rows of `period` seconds rolled from finer rows (in time order).
fn rollup<'a>(rows: impl Iterator<Item = &'a SeriesRow>, period: u64) -> Vec<SeriesRow> {
    let mut out: Vec<SeriesRow> = Vec::new();
    for r in rows {
        let start = r.second - r.second % period;
        match out.last_mut() {
            Some(last) if last.second == start => roll(last, r),
            _ => {
                let mut row = SeriesRow {
                    second: start,
                    ..SeriesRow::default()
                };
                roll(&mut row, r);
                out.push(row);
            }
        }
    }
    out
}

fn schema() -> SchemaRef {
    let names = [
        "second",
        "packets",
        "bytes",
        "active_flows",
        "new_flows",
        "in_packets",
        "in_bytes",
        "out_packets",
        "out_bytes",
    ];
    Arc::new(Schema::new(
        names
            .iter()
            .map(|n| Field::new(*n, DataType::UInt64, false))
            .collect::<Vec<_>>(),
    ))
}

fn fields(r: &SeriesRow) -> [u64; 9] {
    [
        r.second,
        r.packets,
        r.bytes,
        r.active_flows,
        r.new_flows,
        r.in_packets,
        r.in_bytes,
        r.out_packets,
        r.out_bytes,
    ]
}

fn rollup_path(db: &Path, iface: &str, step: Step, start: u64) -> PathBuf {
    day_dir(db, iface, step, Date::of(start * NS)).join(block_file_name(start * NS, 0))
}

/// Writes `rows` (of `step`, the file starting at `start` s and covering up to `covers`)
/// atomically: a temporary dot-file, synced, then linked to the first free part name
/// (seconds files: parts add up) or renamed over the previous file (rollups: derived, so
/// replaced).
fn write_file(
    dir: &Path,
    iface: &str,
    step: Step,
    start: u64,
    covers: u64,
    rows: &[SeriesRow],
    replace: bool,
) -> Result<PathBuf> {
    if !dir.is_dir() {
        make_day_dir(dir)?;
    }
    let tmp = dir.join(format!(
        ".{}.{}.{}.tmp",
        block_file_name(start * NS, 0),
        std::process::id(),
        TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = write_tmp(&tmp, iface, step, start, covers, rows).and_then(|()| {
        if replace {
            let path = dir.join(block_file_name(start * NS, 0));
            fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
            sync_dir(dir)?;
            Ok(path)
        } else {
            publish(&tmp, dir, start)
        }
    });
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result
}

fn publish(tmp: &Path, dir: &Path, start: u64) -> Result<PathBuf> {
    let mut part = 0u32;
    loop {
        let path = dir.join(block_file_name(start * NS, part));
        match fs::hard_link(tmp, &path) {
            Ok(()) => {
                fs::remove_file(tmp).map_err(|e| Error::io(tmp, e))?;
                sync_dir(dir)?;
                return Ok(path);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => part += 1,
            Err(e) => return Err(Error::io(&path, e)),
        }
    }
}

fn write_tmp(
    tmp: &Path,
    iface: &str,
    step: Step,
    start: u64,
    covers: u64,
    rows: &[SeriesRow],
) -> Result<()> {
    let columns: Vec<ArrayRef> = (0..9)
        .map(|i| {
            Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|r| fields(r)[i]),
            )) as ArrayRef
        })
        .collect();
    let batch = RecordBatch::try_new(schema(), columns).map_err(|e| Error::block(tmp, e))?;
    let props = WriterProperties::builder()
        .set_compression(Compression::LZ4_RAW)
        .set_key_value_metadata(Some(vec![
            KeyValue::new(VERSION_KEY.to_string(), SERIES_VERSION.to_string()),
            KeyValue::new("trawl.iface".to_string(), iface.to_string()),
            KeyValue::new("trawl.series.step".to_string(), step.name().to_string()),
            KeyValue::new("trawl.series.start".to_string(), start.to_string()),
            KeyValue::new(COVERS_KEY.to_string(), covers.to_string()),
        ]))
        .build();
    let file = create_in_day_dir(tmp)?;
    let mut w = ArrowWriter::try_new(BufWriter::new(file), schema(), Some(props))
        .map_err(|e| Error::block(tmp, e))?;
    w.write(&batch).map_err(|e| Error::block(tmp, e))?;
    let buf = w.into_inner().map_err(|e| Error::block(tmp, e))?;
    let file = buf
        .into_inner()
        .map_err(|e| Error::io(tmp, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io(tmp, e))
}

/// One series file: its rows and how far it covers (s).
fn read_file(path: &Path) -> Result<(Vec<SeriesRow>, u64)> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| Error::block(path, e))?;
    let meta = builder.metadata().file_metadata().key_value_metadata();
    let value = |key: &str| {
        meta.and_then(|kv| kv.iter().find(|k| k.key == key))
            .and_then(|k| k.value.as_deref())
            .and_then(|v| v.parse::<u64>().ok())
    };
    if value(VERSION_KEY).is_some_and(|v| v > u64::from(SERIES_VERSION)) {
        return Err(Error::block(path, "series file of a newer version"));
    }
    let covers = value(COVERS_KEY).unwrap_or(u64::MAX);
    let reader = builder.build().map_err(|e| Error::block(path, e))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| Error::block(path, e))?;
        let cols: Vec<&UInt64Array> = (0..9)
            .map(|i| {
                batch
                    .columns()
                    .get(i)
                    .and_then(|c| c.as_primitive_opt::<UInt64Type>())
                    .ok_or_else(|| Error::block(path, format!("column {i} missing or not UInt64")))
            })
            .collect::<Result<_>>()?;
        for i in 0..batch.num_rows() {
            let v = |c: usize| cols[c].value(i);
            rows.push(SeriesRow {
                second: v(0),
                packets: v(1),
                bytes: v(2),
                active_flows: v(3),
                new_flows: v(4),
                in_packets: v(5),
                in_bytes: v(6),
                out_packets: v(7),
                out_bytes: v(8),
            });
        }
    }
    Ok((rows, covers))
}

/// The files of one day directory of `step`: (start s, path), parts included, by start.
fn list_day(db: &Path, iface: &str, step: Step, day: u64) -> Result<Vec<(u64, PathBuf)>> {
    let dir = day_dir(db, iface, step, Date::of(day * NS));
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(&dir, e)),
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.ends_with(BLOCK_EXT) {
            continue;
        }
        if let Some((minutes, _part)) = parse_block_name(name) {
            out.push((day + u64::from(minutes) * 60, e.path()));
        }
    }
    out.sort();
    Ok(out)
}

/// The stored seconds of `iface` in `[from, to)` (s), parts summed.
fn read_seconds(db: &Path, iface: &str, from: u64, to: u64) -> Result<BTreeMap<u64, SeriesRow>> {
    let mut out = BTreeMap::new();
    let mut day = from - from % DAY;
    while day < to {
        for (start, path) in list_day(db, iface, Step::Second, day)? {
            if start + FILE_SECONDS <= from || start >= to {
                continue;
            }
            for r in read_file(&path)?.0 {
                if (from..to).contains(&r.second) {
                    add(
                        out.entry(r.second).or_insert(SeriesRow {
                            second: r.second,
                            ..SeriesRow::default()
                        }),
                        &r,
                    );
                }
            }
        }
        day += DAY;
    }
    Ok(out)
}

/// How far the seconds files of `[from, to)` reach: the end of the last file (s), or `from`.
fn covered_until(db: &Path, iface: &str, from: u64, to: u64) -> Result<u64> {
    let mut until = from;
    let mut day = from - from % DAY;
    while day < to {
        for (start, _) in list_day(db, iface, Step::Second, day)? {
            if start >= from && start < to {
                until = until.max(start + FILE_SECONDS);
            }
        }
        day += DAY;
    }
    Ok(until.min(to))
}

/// The coverage of the rollup file of `step` starting at `start` (s), `None` without one.
fn rollup_covers(db: &Path, iface: &str, step: Step, start: u64) -> Result<Option<u64>> {
    let path = rollup_path(db, iface, step, start);
    if !path.is_file() {
        return Ok(None);
    }
    Ok(Some(read_file(&path)?.1))
}

/// The rollup file of `step` starting at `start` (s): its rows and coverage, if present.
fn read_rollup(
    db: &Path,
    iface: &str,
    step: Step,
    start: u64,
) -> Result<Option<(Vec<SeriesRow>, u64)>> {
    let path = rollup_path(db, iface, step, start);
    match read_file(&path) {
        Ok(r) => Ok(Some(r)),
        Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Rows of `step` of one interface whose start lies in `[from, to)` (s), by start.
fn read_iface(
    db: &Path,
    iface: &str,
    from: u64,
    to: u64,
    step: Step,
) -> Result<BTreeMap<u64, SeriesRow>> {
    if step == Step::Second {
        return read_seconds(db, iface, from, to);
    }
    let finer = if step == Step::Hour {
        Step::Minute
    } else {
        Step::Second
    };
    let span = step.file_seconds();
    let mut out = BTreeMap::new();
    let mut file = from - from % span;
    while file < to {
        let (mut rows, covers) = read_rollup(db, iface, step, file)?.unwrap_or((Vec::new(), file));
        rows.retain(|r| r.second < covers);
        // Beyond the rollup's coverage: derived from the finer level.
        if covers < file + span {
            let finer_rows = read_iface(db, iface, covers, file + span, finer)?;
            let derived = rollup(finer_rows.values(), step.seconds());
            for d in derived {
                match rows.last_mut() {
                    Some(last) if last.second == d.second => roll(last, &d),
                    _ => rows.push(d),
                }
            }
        }
        for r in rows {
            if (from..to).contains(&r.second) {
                out.insert(r.second, r);
            }
        }
        file += span;
    }
    Ok(out)
}

/// The stored rows of `step` whose start lies in `[from_ns, to_ns)`, oldest first: of
/// interface `iface`, or with `None` the rows of every interface summed per period (each
/// interface's `active_flows` peak added up). Rows are as dense as the stored seconds (a
/// period without any stored second has no row). Rollups are read where written, derived
/// from the finer level where not (an hour still in progress, a writer that stopped).
pub fn read(
    db: &Path,
    iface: Option<&str>,
    from_ns: u64,
    to_ns: u64,
    step: Step,
) -> Result<Vec<SeriesRow>> {
    let ifaces = match iface {
        Some(i) if !valid_iface(i) => return Err(Error::InvalidIface(i.to_string())),
        Some(i) => vec![i.to_string()],
        None => list_ifaces(db)?,
    };
    let from = from_ns / NS;
    let to = to_ns.div_ceil(NS);
    let mut total: BTreeMap<u64, SeriesRow> = BTreeMap::new();
    for i in &ifaces {
        for (s, r) in read_iface(db, i, from, to, step)? {
            match total.get_mut(&s) {
                Some(t) => add(t, &r),
                None => {
                    total.insert(s, r);
                }
            }
        }
    }
    Ok(total.into_values().collect())
}

/// Every series file of the database (seconds and rollups, all interfaces): (start ns, path,
/// bytes), for retention. A rollup starts with its hour or day.
pub(crate) fn list_files(db: &Path) -> Result<Vec<(u64, PathBuf, u64)>> {
    let mut out = Vec::new();
    let root = db.join(SERIES_DIR);
    for iface in subdirs(&root, "iface=")? {
        for step in subdirs(&iface, "step=")? {
            for day in subdirs(&step, "date=")? {
                let Some(date) = day
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_prefix("date="))
                    .and_then(Date::parse)
                    .and_then(Date::start_ns)
                else {
                    continue;
                };
                let entries = fs::read_dir(&day).map_err(|e| Error::io(&day, e))?;
                for e in entries.flatten() {
                    let name = e.file_name();
                    let Some((minutes, _)) = name.to_str().and_then(parse_block_name) else {
                        continue;
                    };
                    let bytes = e.metadata().map(|m| m.len()).unwrap_or(0);
                    out.push((date + u64::from(minutes) * 60 * NS, e.path(), bytes));
                }
            }
        }
    }
    Ok(out)
}

/// The directories in `dir` whose names start with `prefix` (none when `dir` is missing).
pub(crate) fn subdirs(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>> {
    let entries = match fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    Ok(entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(prefix) && e.path().is_dir())
        .map(|e| e.path())
        .collect())
}
