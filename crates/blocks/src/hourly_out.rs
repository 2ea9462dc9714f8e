//! `hourly_writer`: events as JSON lines into one file per UTC hour of their time, the logs of
//! `trawl run --logs DIR` (`DIR/dns-2026-11-27T13.jsonl`), named as `daily_writer` names the
//! VoIP records by day, so a monitor that runs for months leaves files an operator (and
//! `/api/v1/logs`) can read, move and delete by hour.
//!
//! A line goes into the file of its own time (`ts_ns`), not of the moment it is written: an
//! HTTP exchange is logged when its response ends, under the hour its request was made. So
//! several hours' files may be open at once. A file is closed (written out and fsynced) once
//! no line for its hour is expected any more: the newest line time seen is [`LATE`] past the
//! hour's end, or nothing was written into it for [`LATE`] (a monitor whose traffic stopped).
//! A line that comes later still is appended to the closed file, reopened (`reopened`).
//!
//! Retention (`retention`) deletes the files of whole hours that ended longer ago than it (by
//! the clock, as the flow database's retention), at the start, every minute and at the end.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, PathSetting, TimerId};

use crate::messages::{Events, EVENTS};
use crate::output::{FileMode, OutputFile, TimeFormat};
use crate::write::REOPEN_CHECK;

/// One hour in nanoseconds.
pub const HOUR_NS: u64 = 3_600 * 1_000_000_000;

/// How late a line may come for an hour before its file is closed: in line time past the
/// hour's end, and in idle time of the file. Requests unanswered for minutes, long HTTP
/// downloads and TLS handshakes of slow connections are logged within it.
pub const LATE: Duration = Duration::from_secs(300);

/// How often retention looks for old hours.
const RETENTION_CHECK: Duration = Duration::from_secs(60);

/// The start (ns) of the UTC hour holding `ns`.
pub fn hour_start(ns: u64) -> u64 {
    ns - ns % HOUR_NS
}

/// The file name of `prefix`'s lines of the hour holding `ns`: `dns-2026-11-27T13.jsonl`.
pub fn hour_file_name(prefix: &str, ns: u64) -> String {
    let c = trawl_time::Civil::from_unix_ns(ns);
    format!("{prefix}-{}T{:02}.jsonl", c.date(), c.hour)
}

/// The start (ns) of the hour a file of `prefix` holds, from its name (`None` for any other
/// file): the inverse of [`hour_file_name`].
pub fn hour_of_file(prefix: &str, name: &str) -> Option<u64> {
    let stamp = name
        .strip_prefix(prefix)?
        .strip_prefix('-')?
        .strip_suffix(".jsonl")?;
    // `YYYY-MM-DDTHH`, digits where digits belong.
    let b = stamp.as_bytes();
    let shape = b.len() == 13
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b.iter()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_digit());
    if !shape {
        return None;
    }
    let num = |r: std::ops::Range<usize>| stamp[r].parse::<u32>().ok();
    let (month, day, hour) = (num(5..7)?, num(8..10)?, num(11..13)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 {
        return None;
    }
    let civil = trawl_time::Civil {
        year: num(0..4)? as i32,
        month: month as u8,
        day: day as u8,
        hour: hour as u8,
        minute: 0,
        second: 0,
        nanos: 0,
    };
    let ns = civil.to_unix_ns()?;
    // A day past the month's end (`02-30`) names no hour.
    (hour_file_name(prefix, ns) == name).then_some(ns)
}

/// The hour files of `prefix` in `dir`, by hour start, oldest first.
pub fn hour_files(dir: &Path, prefix: &str) -> std::io::Result<BTreeMap<u64, PathBuf>> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(hour) = entry
            .file_name()
            .to_str()
            .and_then(|n| hour_of_file(prefix, n))
        {
            files.insert(hour, entry.path());
        }
    }
    Ok(files)
}

/// Writes events into `DIR/PREFIX-YYYY-MM-DDTHH.jsonl`, the hour (UTC) of each event's time.
pub struct HourlyWriter {
    dir: PathBuf,
    prefix: String,
    rfc3339_times: bool,
    retention_ns: Option<u64>,
    /// The open files by their hour's start.
    open: BTreeMap<u64, OpenHour>,
    /// The newest line time written.
    newest_ns: u64,
    /// The line time at which the first open file is to be closed (checked per line: a
    /// batch may span hours).
    next_close_ns: u64,
    retention_timer: Option<TimerId>,
    counters: Option<HourlyCounters>,
}

struct OpenHour {
    out: OutputFile,
    written_at: Instant,
    /// Its file was closed before (a late line).
    reopened: bool,
}

struct HourlyCounters {
    closed: Counter,
    reopened: Counter,
    deleted: Counter,
}

/// Settings of `hourly_writer`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HourlyWriterSettings {
    /// Directory of the files (created if missing).
    pub dir: String,
    /// The files' name before the hour: `dns` writes `dns-2026-11-27T13.jsonl`.
    pub prefix: String,
    /// `ns` (default: integers) or `rfc3339` for the events' top-level `*_ns` instants.
    #[serde(default)]
    pub time_format: TimeFormat,
    /// Delete the files of hours that ended longer ago than this (e.g. `7d`; default: keep
    /// everything).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub retention: Option<u64>,
}

impl Block for HourlyWriter {
    const TYPE: &'static str = "hourly_writer";
    const SUMMARY: &'static str = "writes events as JSON lines into one file per UTC hour of \
        their time (PREFIX-YYYY-MM-DDTHH.jsonl), closing each when its hour is over, with \
        retention";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "events",
        ty: EVENTS,
        required: true,
        doc: "events to write, each into the file of its hour",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = HourlyWriterSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("dir")];

    fn check(s: &HourlyWriterSettings) -> Result<(), String> {
        let bad = |c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if s.prefix.is_empty() || s.prefix.contains(bad) {
            return Err(format!(
                "prefix `{}`: letters, digits, `_` and `-` only",
                s.prefix
            ));
        }
        if s.retention.is_some_and(|r| r < HOUR_NS) {
            return Err("retention: at least 1h (whole hours are deleted)".into());
        }
        Ok(())
    }

    fn build(s: HourlyWriterSettings, _env: &BuildEnv) -> Result<Self, String> {
        std::fs::create_dir_all(&s.dir).map_err(|e| format!("cannot create {}: {e}", s.dir))?;
        Ok(HourlyWriter {
            dir: PathBuf::from(s.dir),
            prefix: s.prefix,
            rfc3339_times: s.time_format == TimeFormat::Rfc3339,
            retention_ns: s.retention,
            open: BTreeMap::new(),
            newest_ns: 0,
            next_close_ns: u64::MAX,
            retention_timer: None,
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(HourlyCounters {
            closed: ctx.counter("files_closed"),
            reopened: ctx.counter("files_reopened"),
            deleted: ctx.counter("retention_files_deleted"),
        });
        ctx.every(REOPEN_CHECK);
        if self.retention_ns.is_some() {
            self.enforce_retention(ctx);
            self.retention_timer = Some(ctx.every(RETENTION_CHECK));
        }
        Ok(())
    }

    fn timer(&mut self, timer: TimerId, ctx: &mut Ctx<'_>) {
        if Some(timer) == self.retention_timer {
            return self.enforce_retention(ctx);
        }
        for o in self.open.values_mut() {
            if let Err(e) = o.out.reopen_if_asked() {
                return ctx.fail(e);
            }
            o.out.flush_stale(ctx);
        }
        self.close_finished(ctx);
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<Events>() else {
            return;
        };
        let rfc3339_times = self.rfc3339_times;
        for e in b.iter() {
            let ts_ns = e.ts_ns();
            let hour = hour_start(ts_ns);
            let o = match self.file_of(hour) {
                Ok(o) => o,
                Err(err) => return ctx.fail(err),
            };
            o.written_at = Instant::now();
            let buf = o.out.buf();
            e.write_json(rfc3339_times, buf);
            buf.push(b'\n');
            // Only a line that moves time on closes files (a late line's file waits for the
            // batch's end: several late lines of a burst are written into it at once).
            if ts_ns > self.newest_ns {
                self.newest_ns = ts_ns;
                if self.newest_ns >= self.next_close_ns {
                    self.close_finished(ctx);
                }
            }
        }
        // Logs are read while the monitor runs: flush every batch, as event_writer does.
        for o in self.open.values_mut() {
            let flushed = o.out.flush();
            o.out.settle(flushed, ctx);
        }
        self.close_finished(ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        let hours: Vec<u64> = self.open.keys().copied().collect();
        for hour in hours {
            self.close(hour, ctx);
        }
        if self.retention_ns.is_some() {
            self.enforce_retention(ctx);
        }
    }
}

impl HourlyWriter {
    /// The open file of `hour`, opened (appending: a restarted monitor, or a late line for a
    /// closed hour, adds to what is there) if it is not.
    fn file_of(&mut self, hour: u64) -> Result<&mut OpenHour, String> {
        if !self.open.contains_key(&hour) {
            let path = self.dir.join(hour_file_name(&self.prefix, hour));
            // A file of an hour already over that exists was closed by this run or an
            // earlier one: this line is late.
            let reopened = hour + HOUR_NS <= self.newest_ns && path.exists();
            let out = OutputFile::open(&path.display().to_string(), FileMode::Append)?;
            let late_ns = LATE.as_nanos() as u64;
            self.next_close_ns = self.next_close_ns.min(hour + HOUR_NS + late_ns);
            self.open.insert(
                hour,
                OpenHour {
                    out,
                    written_at: Instant::now(),
                    reopened,
                },
            );
        }
        Ok(self.open.get_mut(&hour).expect("inserted above"))
    }

    /// Closes the files no line is expected for any more (see the module doc).
    fn close_finished(&mut self, ctx: &mut Ctx<'_>) {
        let late_ns = LATE.as_nanos() as u64;
        let done: Vec<u64> = self
            .open
            .iter()
            .filter(|(&hour, o)| {
                hour + HOUR_NS + late_ns <= self.newest_ns || o.written_at.elapsed() >= LATE
            })
            .map(|(&hour, _)| hour)
            .collect();
        for hour in done {
            self.close(hour, ctx);
        }
        self.next_close_ns = self
            .open
            .keys()
            .next()
            .map_or(u64::MAX, |&hour| hour + HOUR_NS + late_ns);
    }

    /// Writes out the file of `hour`, fsyncs it (a closed hour is on disk, whatever happens to
    /// the monitor later) and forgets it.
    fn close(&mut self, hour: u64, ctx: &mut Ctx<'_>) {
        let Some(o) = self.open.remove(&hour) else {
            return;
        };
        let path = o.out.path().to_string();
        if let Err(e) = o.out.finish() {
            return ctx.fail(format!("cannot write {path}: {e}"));
        }
        // fsync acts on the file, whichever descriptor asks.
        if let Err(e) = std::fs::File::open(&path).and_then(|f| f.sync_all()) {
            ctx.error(format!("cannot sync {path}: {e}"));
        }
        if let Some(c) = &self.counters {
            c.closed.add(1);
            if o.reopened {
                c.reopened.add(1);
            }
        }
    }

    /// Deletes the files of the hours that ended more than `retention` ago (not one still
    /// open: a late line is being written into it).
    fn enforce_retention(&mut self, ctx: &mut Ctx<'_>) {
        let Some(retention) = self.retention_ns else {
            return;
        };
        let cutoff = trawl_time::now_ns().saturating_sub(retention);
        let files = match hour_files(&self.dir, &self.prefix) {
            Ok(f) => f,
            Err(e) => return ctx.error(format!("log retention: {}: {e}", self.dir.display())),
        };
        for (hour, path) in files {
            if hour + HOUR_NS > cutoff || self.open.contains_key(&hour) {
                continue;
            }
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    if let Some(c) = &self.counters {
                        c.deleted.add(1);
                    }
                }
                Err(e) => ctx.error(format!("log retention: {}: {e}", path.display())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hour_files_are_named_by_utc_hour_and_read_back() {
        // 2026-11-27T13:59:59.999Z and one millisecond later.
        let late = 1_795_823_999_999_000_000 - 10 * HOUR_NS;
        assert_eq!(hour_file_name("dns", late), "dns-2026-11-27T13.jsonl");
        assert_eq!(
            hour_file_name("dns", late + 1_000_000),
            "dns-2026-11-27T14.jsonl"
        );
        assert_eq!(
            hour_of_file("dns", "dns-2026-11-27T13.jsonl"),
            Some(hour_start(late))
        );
        for other in [
            "tls-2026-11-27T13.jsonl",
            "dns-2026-11-27T24.jsonl",
            "dns-2026-02-30T01.jsonl",
            "dns-2026-11-27.jsonl",
            "dns-2026-11-27T13.jsonl.gz",
            "dns-x026-11-27T13.jsonl",
        ] {
            assert_eq!(hour_of_file("dns", other), None, "{other}");
        }
    }
}
