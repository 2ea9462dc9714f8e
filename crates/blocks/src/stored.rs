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
    ingest: Option<SeriesIngest>,
    dir: PathBuf,
    counters: Option<[Counter; 4]>,
}

/// Settings of `series_store`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesStoreSettings {
    /// The database directory (the flow database's; created if needed).
    pub dir: PathBuf,
    /// Interface name the rows are stored under (`DIR/series/iface=NAME/...`).
    pub iface: String,
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
        check_iface(&s.iface)
    }

    fn build(s: SeriesStoreSettings, _env: &BuildEnv) -> Result<Self, String> {
        let ingest = SeriesIngest::open(&s.dir, &s.iface)
            .map_err(|e| format!("cannot open the series of {}: {e}", s.dir.display()))?;
        Ok(SeriesStore {
            ingest: Some(ingest),
            dir: s.dir,
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(["rows", "files", "rollups", "bytes"].map(|n| ctx.counter(n)));
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<SeriesBatch>() else {
            return;
        };
        let Some(ingest) = self.ingest.as_mut() else {
            return;
        };
        for r in &b.rows {
            ingest.push(r);
        }
        if let Err(e) = ingest.advance(b.watermark) {
            return ctx.fail(format_args!("series of {}: {e}", self.dir.display()));
        }
        let stats = ingest.stats();
        self.set_counters(&stats);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        let Some(ingest) = self.ingest.take() else {
            return;
        };
        match ingest.finish() {
            Ok(stats) => self.set_counters(&stats),
            Err(e) => ctx.fail(format_args!("series of {}: {e}", self.dir.display())),
        }
    }
}

impl SeriesStore {
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
            .extend(b.events.iter().map(|e| alarm_of(e, iface)));
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
