//! `series_merge` and `series_writer`: the per-second rows of parallel workers summed, and
//! written out.
use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, Msg, PathSetting, Pool, TimerId};
use trawl_series::{SeriesFormat, SeriesMerger, SeriesRow, SeriesWriter};

use crate::messages::{SeriesBatch, SERIES};
use crate::output::{check_header, first_line, FileMode, OutputFile, TimeFormat};
use crate::write::REOPEN_CHECK;

/// Sums the rows of every connected counter per second; a second leaves once every counter is
/// past it, so the merged series equals the series of all packets counted in one place.
pub struct SeriesMerge {
    merger: SeriesMerger,
    /// Stream numbers in the order they first appeared: the merger's slots.
    streams: Vec<u32>,
    slots: usize,
    rows: Vec<SeriesRow>,
    pool: Pool<SeriesBatch>,
    /// The interface the counters' rows name, while they agree.
    iface: Interface,
}

/// Which interface the summed rows belong to, from the batches of the counters.
#[derive(Default)]
enum Interface {
    /// No batch has named one yet.
    #[default]
    Unknown,
    One(std::sync::Arc<str>),
    /// Counters of different interfaces (or one that named none after rows): a sum over
    /// several.
    Several,
}

impl Interface {
    fn note(&mut self, b: &SeriesBatch) {
        match (&*self, &b.iface) {
            (Interface::Several, _) => {}
            // A counter without rows yet names nothing: it does not make the sum anonymous.
            (_, None) if b.rows.is_empty() => {}
            (Interface::Unknown, Some(n)) => *self = Interface::One(n.clone()),
            (Interface::One(cur), Some(n)) if cur == n => {}
            _ => *self = Interface::Several,
        }
    }

    fn name(&self) -> Option<std::sync::Arc<str>> {
        match self {
            Interface::One(n) => Some(n.clone()),
            _ => None,
        }
    }
}

impl Block for SeriesMerge {
    const TYPE: &'static str = "series_merge";
    const SUMMARY: &'static str =
        "sums the per-second rows of parallel flow meters into one series";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "series",
        ty: SERIES,
        required: true,
        doc: "rows of each worker (one connection per worker)",
    }];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "series",
        ty: SERIES,
        required: true,
        doc: "the summed rows, oldest first",
    }];
    type Settings = toml::Table;

    fn check(s: &toml::Table) -> Result<(), String> {
        match s.keys().next() {
            Some(k) => Err(format!("unknown setting `{k}` (series_merge has none)")),
            None => Ok(()),
        }
    }

    fn build(_s: toml::Table, env: &BuildEnv) -> Result<Self, String> {
        // One slot per connected counter: a counter not heard from yet holds every second
        // back, so nothing is released before all have spoken.
        let slots = env.input_connections[0];
        Ok(SeriesMerge {
            merger: SeriesMerger::new(slots),
            streams: Vec::new(),
            slots,
            rows: Vec::new(),
            pool: Pool::new(SeriesBatch::default),
            iface: Interface::Unknown,
        })
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<SeriesBatch>() else {
            return;
        };
        let slot = match self.streams.iter().position(|&s| s == b.stream) {
            Some(i) => i,
            None if self.streams.len() < self.slots => {
                self.streams.push(b.stream);
                self.streams.len() - 1
            }
            None => {
                ctx.error(format!(
                    "rows of more counters than connections ({}); stream {} ignored",
                    self.slots, b.stream
                ));
                return;
            }
        };
        self.iface.note(b);
        for r in &b.rows {
            self.merger.add(*r);
        }
        self.merger.watermark(slot, b.watermark);
        let rows = &mut self.rows;
        self.merger.drain(|r| rows.push(*r));
        self.send(ctx, 0);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        for i in 0..self.slots {
            self.merger.watermark(i, u64::MAX);
        }
        let rows = &mut self.rows;
        self.merger.drain(|r| rows.push(*r));
        self.send(ctx, u64::MAX);
    }
}

impl SeriesMerge {
    fn send(&mut self, ctx: &mut Ctx<'_>, watermark: u64) {
        if self.rows.is_empty() && watermark != u64::MAX {
            return;
        }
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.rows.clear();
        std::mem::swap(&mut out.rows, &mut self.rows);
        out.watermark = watermark.min(out.rows.last().map_or(0, |r| r.second + 1));
        out.last = watermark == u64::MAX;
        out.stream = 0;
        out.iface = self.iface.name();
        ctx.emit(0, slot.into_msg());
    }
}

/// Writes series rows as CSV or JSON lines.
pub struct SeriesFileWriter {
    out: OutputFile,
    writer: SeriesWriter,
    /// The header is in the file (written, or there already when appending).
    header: bool,
}

/// Settings of `series_writer`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesWriterSettings {
    /// Output file; `-` is standard output.
    pub path: String,
    /// `json` (lines; the default, as everywhere) or `csv`.
    #[serde(default)]
    pub format: TextFormat,
    /// `append` (default: a restarted monitor keeps the rows already written; the CSV header
    /// only into an empty file, and a file with other columns is refused) or `truncate`.
    #[serde(default)]
    pub mode: FileMode,
    /// `ns` (default: `second` as an integer) or `rfc3339` (text).
    #[serde(default)]
    pub time_format: TimeFormat,
}

fn series_format(f: TextFormat) -> SeriesFormat {
    match f {
        TextFormat::Csv => SeriesFormat::Csv,
        TextFormat::Json => SeriesFormat::Json,
    }
}

/// The header line a writer of this format puts first (empty for JSON lines).
fn series_header(f: TextFormat) -> Vec<u8> {
    let mut header = Vec::new();
    SeriesWriter::new(series_format(f)).write_header(&mut header);
    header
}

pub use crate::output::TextFormat;

impl Block for SeriesFileWriter {
    const TYPE: &'static str = "series_writer";
    const SUMMARY: &'static str =
        "writes per-second rows to a file or standard output (CSV or JSON lines)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "series",
        ty: SERIES,
        required: true,
        doc: "rows to write (from one counter or a series_merge)",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = SeriesWriterSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("path")];

    /// A file of other columns is refused when the composition is checked, before any block
    /// opens its output (a refused run must leave no new files behind); `build` checks again
    /// what it opened.
    fn check(s: &SeriesWriterSettings) -> Result<(), String> {
        if s.mode != FileMode::Append || s.path == "-" {
            return Ok(());
        }
        let first = first_line(std::path::Path::new(&s.path))
            .map_err(|e| format!("cannot read {}: {e}", s.path))?;
        check_header(&s.path, first.as_deref(), &series_header(s.format))
    }

    fn build(s: SeriesWriterSettings, _env: &BuildEnv) -> Result<Self, String> {
        let out = OutputFile::open(&s.path, s.mode)?;
        let writer = SeriesWriter::new(series_format(s.format))
            .with_rfc3339_times(s.time_format == TimeFormat::Rfc3339);
        check_header(out.path(), out.first_line(), &series_header(s.format))?;
        Ok(SeriesFileWriter {
            header: out.first_line().is_some(),
            out,
            writer,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        ctx.every(REOPEN_CHECK);
        Ok(())
    }

    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        match self.out.reopen_if_asked() {
            Ok(true) => {
                // Into a new (empty) file the header goes first, as into the first one.
                if self.out.first_line().is_none() {
                    self.header = true;
                    self.writer.write_header(self.out.buf());
                }
            }
            Ok(false) => {}
            Err(e) => return ctx.fail(e),
        }
        self.out.flush_stale(ctx);
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<SeriesBatch>() else {
            return;
        };
        if !self.header {
            self.header = true;
            self.writer.write_header(self.out.buf());
        }
        for r in &b.rows {
            self.writer.write(r, self.out.buf());
        }
        let written = self.out.written();
        self.out.settle(written, ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if !self.header {
            self.writer.write_header(self.out.buf());
        }
        let flushed = self.out.flush();
        self.out.settle(flushed, ctx);
    }
}
