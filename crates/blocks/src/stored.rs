//! `series_store` and `alarm_store`: per-second rows and detection events kept beside the
//! flow database (`trawl_store::series`, `trawl_store::alarms`), which `trawl series -d` and
//! `trawl alarms` read back.
//!
//! Retention of both is the flow database's: `flow_store`'s `keep_days` and `max_size` (and
//! `trawl ingest`'s flags) apply to the series and alarms of the same directory.
use std::path::PathBuf;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, PathSetting};
use trawl_store::alarms::{Alarm, AlarmWriter};
use trawl_store::series::{SeriesIngest, SeriesStoreStats};

use crate::messages::{Event, Events, SeriesBatch, EVENTS, SERIES};

/// Writes per-second rows with their minute and hour rollups under `DIR/series/`.
pub struct SeriesStore {
    /// The `iface` setting; None: each batch names its interface.
    iface: Option<String>,
    /// One writer per interface met (one with `iface`); emptied at the end.
    ingests: Vec<(String, SeriesIngest)>,
    finished: bool,
    /// What the writers finished so far wrote.
    done: SeriesStoreStats,
    dir: PathBuf,
    counters: Option<[Counter; 4]>,
}

/// Settings of `series_store`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesStoreSettings {
    /// The database directory (the flow database's; created if needed).
    pub dir: PathBuf,
    /// Interface name the rows are stored under (`DIR/series/iface=NAME/...`). Without it,
    /// each batch's interface (`SeriesBatch::iface`: `flow_series` names each exporter's)
    /// names its rows.
    pub iface: Option<String>,
}

impl Block for SeriesStore {
    const TYPE: &'static str = "series_store";
    const SUMMARY: &'static str =
        "stores per-second rows with 1-minute and 1-hour rollups beside the flow database (`trawl series -d`)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "series",
        ty: SERIES,
        required: true,
        doc: "rows of one interface (from one counter or a series_merge)",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = SeriesStoreSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("dir")];

    fn check(s: &SeriesStoreSettings) -> Result<(), String> {
        s.iface.as_deref().map_or(Ok(()), check_iface)
    }

    fn build(s: SeriesStoreSettings, _env: &BuildEnv) -> Result<Self, String> {
        let mut store = SeriesStore {
            iface: s.iface,
            ingests: Vec::new(),
            finished: false,
            done: SeriesStoreStats::default(),
            dir: s.dir,
            counters: None,
        };
        // The setting's interface opens at once: a directory that cannot be written fails the
        // composition before it starts.
        if let Some(iface) = store.iface.clone() {
            store.ingest(&iface)?;
        }
        Ok(store)
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(["rows", "files", "rollups", "bytes"].map(|n| ctx.counter(n)));
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<SeriesBatch>() else {
            return;
        };
        if self.finished {
            return;
        }
        let Some(iface) = self
            .iface
            .clone()
            .or_else(|| b.iface.as_deref().map(str::to_string))
        else {
            if b.rows.is_empty() {
                return;
            }
            return ctx.fail("rows that name no interface: set `iface` on this series_store");
        };
        let ingest = match self.ingest(&iface) {
            Ok(i) => i,
            Err(e) => return ctx.fail(e),
        };
        for r in &b.rows {
            ingest.push(r);
        }
        if let Err(e) = ingest.advance(b.watermark) {
            return ctx.fail(format_args!("series of {}: {e}", self.dir.display()));
        }
        self.set_counters(&self.stats());
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.finished = true;
        for (_, ingest) in std::mem::take(&mut self.ingests) {
            match ingest.finish() {
                Ok(stats) => self.done = sum(&self.done, &stats),
                Err(e) => ctx.fail(format_args!("series of {}: {e}", self.dir.display())),
            }
        }
        self.set_counters(&self.done);
    }
}

/// Two writers' counters added.
fn sum(a: &SeriesStoreStats, b: &SeriesStoreStats) -> SeriesStoreStats {
    SeriesStoreStats {
        rows: a.rows + b.rows,
        files: a.files + b.files,
        rollups: a.rollups + b.rollups,
        bytes: a.bytes + b.bytes,
    }
}

impl SeriesStore {
    /// The writer of `iface`, opened when first met.
    fn ingest(&mut self, iface: &str) -> Result<&mut SeriesIngest, String> {
        let at = match self.ingests.iter().position(|(n, _)| n == iface) {
            Some(at) => at,
            None => {
                check_iface(iface)?;
                let ingest = SeriesIngest::open(&self.dir, iface).map_err(|e| {
                    format!("cannot open the series of {}: {e}", self.dir.display())
                })?;
                self.ingests.push((iface.to_string(), ingest));
                self.ingests.len() - 1
            }
        };
        Ok(&mut self.ingests[at].1)
    }

    /// Every writer's counters so far.
    fn stats(&self) -> SeriesStoreStats {
        self.ingests
            .iter()
            .fold(self.done, |acc, (_, i)| sum(&acc, &i.stats()))
    }

    fn set_counters(&self, s: &SeriesStoreStats) {
        if let Some([rows, files, rollups, bytes]) = &self.counters {
            rows.set(s.rows);
            files.set(s.files);
            rollups.set(s.rollups);
            bytes.set(s.bytes);
        }
    }
}

fn check_iface(iface: &str) -> Result<(), String> {
    if trawl_store::layout::valid_iface(iface) {
        return Ok(());
    }
    Err(format!(
        "`iface` {iface:?} is not a valid interface name (letters, digits, `.`, `_`, `-`; not starting with `.`)"
    ))
}

/// Appends detection events, as alarms, under `DIR/alarms/`.
pub struct AlarmStore {
    writer: AlarmWriter,
    iface: Option<Arc<str>>,
    dir: PathBuf,
    alarms: Vec<Alarm>,
    stored: Option<Counter>,
}

/// Settings of `alarm_store`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlarmStoreSettings {
    /// The database directory (the flow database's; created if needed).
    pub dir: PathBuf,
    /// The interface whose traffic the detectors watch (stored with each alarm).
    pub iface: Option<String>,
}

impl Block for AlarmStore {
    const TYPE: &'static str = "alarm_store";
    const SUMMARY: &'static str =
        "stores the events of detection blocks as alarms beside the flow database (`trawl alarms`)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "events",
        ty: EVENTS,
        required: true,
        doc: "events of synflood, series_change, heavy_hitters (any number of connections)",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = AlarmStoreSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("dir")];

    fn check(s: &AlarmStoreSettings) -> Result<(), String> {
        s.iface.as_deref().map_or(Ok(()), check_iface)
    }

    fn build(s: AlarmStoreSettings, _env: &BuildEnv) -> Result<Self, String> {
        std::fs::create_dir_all(&s.dir)
            .map_err(|e| format!("cannot create {}: {e}", s.dir.display()))?;
        Ok(AlarmStore {
            writer: AlarmWriter::new(&s.dir),
            iface: s.iface.map(Arc::from),
            dir: s.dir,
            alarms: Vec::new(),
            stored: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.stored = Some(ctx.counter("alarms"));
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<Events>() else {
            return;
        };
        self.alarms.clear();
        let iface = self.iface.as_deref();
        self.alarms
            .extend(b.iter().map(|e| alarm_of(&e.to_event(), iface)));
        if let Err(e) = self.writer.append(&self.alarms) {
            return ctx.fail(format_args!("alarms of {}: {e}", self.dir.display()));
        }
        if let Some(c) = &self.stored {
            c.set(self.writer.written());
        }
    }
}

/// An event of a detection block as a stored alarm: its detector recognised by its fields
/// (`detector` when it names itself, as `series_change` does; `victim`: `synflood`;
/// `event = "heavy_hitters"`), its start, end and rate from the fields each detector uses.
pub fn alarm_of(e: &Event, iface: Option<&str>) -> Alarm {
    let j = &e.json;
    let u = |k: &str| j.get(k).and_then(Value::as_u64);
    let f = |k: &str| j.get(k).and_then(Value::as_f64);
    let detector = match j.get("detector").and_then(Value::as_str) {
        Some(d) => d.to_string(),
        None if j.get("event").and_then(Value::as_str) == Some("heavy_hitters") => {
            "heavy_hitters".into()
        }
        None if j.get("victim").is_some() => "synflood".into(),
        None => "unknown".into(),
    };
    Alarm {
        detector,
        iface: iface.map(str::to_string),
        ts_ns: e.ts_ns,
        start_ns: u("onset_ns").or(u("start_ns")).unwrap_or(e.ts_ns),
        end_ns: u("end_ns"),
        rate: f("rate").or(f("peak_rate")),
        event: j.clone(),
    }
}
