//! `daily_writer`: events as JSON lines into one file per UTC day of their time, the call and
//! stream records of `trawl run --voip DIR` (`DIR/calls-2026-11-27.jsonl`), so a monitor that
//! runs for months leaves files an operator can read, move and delete by day.
use std::path::PathBuf;

use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, Msg, PathSetting, TimerId};

use crate::messages::{Events, EVENTS};
use crate::output::{FileMode, OutputFile, TimeFormat};
use crate::write::REOPEN_CHECK;

/// Writes events into `DIR/PREFIX-YYYY-MM-DD.jsonl`, the day (UTC) of each event's time.
pub struct DailyWriter {
    dir: PathBuf,
    prefix: String,
    rfc3339_times: bool,
    /// The open file and its day (`YYYY-MM-DD`).
    open: Option<(String, OutputFile)>,
}

/// Settings of `daily_writer`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DailyWriterSettings {
    /// Directory of the files (created if missing).
    pub dir: String,
    /// The files' name before the date: `calls` writes `calls-2026-11-27.jsonl` (not
    /// `name`: that is the block's name in a composition).
    pub prefix: String,
    /// `ns` (default: integers) or `rfc3339` for the events' top-level `*_ns` instants.
    #[serde(default)]
    pub time_format: TimeFormat,
}

/// The UTC day of an instant, `YYYY-MM-DD`.
pub fn day_of(ns: u64) -> String {
    let mut t = trawl_time::rfc3339(ns, trawl_time::Zone::Utc, false);
    t.truncate(10);
    t
}

impl Block for DailyWriter {
    const TYPE: &'static str = "daily_writer";
    const SUMMARY: &'static str =
        "writes events as JSON lines into one file per UTC day of their time (PREFIX-YYYY-MM-DD.jsonl)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "events",
        ty: EVENTS,
        required: true,
        doc: "events to write, each into the file of its day",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = DailyWriterSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("dir")];

    fn check(s: &DailyWriterSettings) -> Result<(), String> {
        let bad = |c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if s.prefix.is_empty() || s.prefix.contains(bad) {
            return Err(format!(
                "prefix `{}`: letters, digits, `_` and `-` only",
                s.prefix
            ));
        }
        Ok(())
    }

    fn build(s: DailyWriterSettings, _env: &BuildEnv) -> Result<Self, String> {
        std::fs::create_dir_all(&s.dir).map_err(|e| format!("cannot create {}: {e}", s.dir))?;
        Ok(DailyWriter {
            dir: PathBuf::from(s.dir),
            prefix: s.prefix,
            rfc3339_times: s.time_format == TimeFormat::Rfc3339,
            open: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        ctx.every(REOPEN_CHECK);
        Ok(())
    }

    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        if let Some((_, out)) = &mut self.open {
            if let Err(e) = out.reopen_if_asked() {
                return ctx.fail(e);
            }
            out.flush_stale(ctx);
        }
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<Events>() else {
            return;
        };
        for e in b.iter() {
            let day = day_of(e.ts_ns());
            if let Err(err) = self.switch_to(&day) {
                return ctx.fail(err);
            }
            let Some((_, out)) = &mut self.open else {
                return;
            };
            let buf = out.buf();
            e.write_json(self.rfc3339_times, buf);
            buf.push(b'\n');
        }
        // Calls end a few a second: flush every batch, as event_writer does.
        if let Some((_, out)) = &mut self.open {
            let flushed = out.flush();
            out.settle(flushed, ctx);
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if let Some((_, out)) = &mut self.open {
            let flushed = out.flush();
            out.settle(flushed, ctx);
        }
    }
}

impl DailyWriter {
    /// Makes the file of `day` the open one (appending: a restarted monitor, or an event of
    /// an earlier day arriving late, adds to what is there).
    fn switch_to(&mut self, day: &str) -> Result<(), String> {
        if matches!(&self.open, Some((d, _)) if d == day) {
            return Ok(());
        }
        if let Some((_, mut out)) = self.open.take() {
            out.flush()?;
        }
        let path = self.dir.join(format!("{}-{day}.jsonl", self.prefix));
        let out = OutputFile::open(&path.display().to_string(), FileMode::Append)?;
        self.open = Some((day.to_string(), out));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::day_of;

    #[test]
    fn days_are_utc_dates() {
        assert_eq!(day_of(0), "1970-01-01");
        // 2026-11-27T23:59:59.999Z and one millisecond later.
        let late = 1_795_823_999_999_000_000;
        assert_eq!(day_of(late), "2026-11-27");
        assert_eq!(day_of(late + 1_000_000), "2026-11-28");
    }
}
