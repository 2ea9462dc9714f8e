//! `flow_writer` and `event_writer`: records and events to files or standard output.
use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, Msg};
use trawl_flow::format::{RecordFormat, RecordWriter};

use crate::messages::{Events, FlowBatch, EVENTS, FLOWS};
use crate::series::TextFormat;
use crate::util::OutputFile;

/// Writes flow records as JSON lines or CSV (the fields of `trawl flows`).
pub struct FlowFileWriter {
    out: OutputFile,
    writer: RecordWriter,
}

/// Settings of `flow_writer` and `event_writer`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriterSettings {
    /// Output file; `-` is standard output.
    pub path: String,
    /// `json` (default) or `csv` (flow records only).
    pub format: Option<TextFormat>,
}

impl Block for FlowFileWriter {
    const TYPE: &'static str = "flow_writer";
    const SUMMARY: &'static str =
        "writes flow records to a file or standard output (JSON lines or CSV, the fields of `trawl flows`)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "flows",
        ty: FLOWS,
        required: true,
        doc: "records to write (from any number of meters)",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = WriterSettings;

    fn build(s: WriterSettings, _env: &BuildEnv) -> Result<Self, String> {
        let format = match s.format.unwrap_or(TextFormat::Json) {
            TextFormat::Json => RecordFormat::Json,
            TextFormat::Csv => RecordFormat::Csv,
        };
        let mut out = OutputFile::create(&s.path)?;
        let writer = RecordWriter::new(format, false);
        writer.write_header(out.buf());
        Ok(FlowFileWriter { out, writer })
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<FlowBatch>() else {
            return;
        };
        for r in &b.records {
            self.writer.write(r, self.out.buf());
        }
        if let Err(e) = self.out.written() {
            ctx.fail(e);
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if let Err(e) = self.out.flush() {
            ctx.fail(e);
        }
    }
}

/// Writes events (alarms, reports) as JSON lines.
pub struct EventFileWriter {
    out: OutputFile,
}

impl Block for EventFileWriter {
    const TYPE: &'static str = "event_writer";
    const SUMMARY: &'static str = "writes events (alarms, reports) as JSON lines";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "events",
        ty: EVENTS,
        required: true,
        doc: "events to write",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = WriterSettings;

    fn check(s: &WriterSettings) -> Result<(), String> {
        match s.format {
            Some(TextFormat::Csv) => Err("events are written as JSON lines only".into()),
            _ => Ok(()),
        }
    }

    fn build(s: WriterSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(EventFileWriter {
            out: OutputFile::create(&s.path)?,
        })
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<Events>() else {
            return;
        };
        for e in &b.events {
            let buf = self.out.buf();
            // Writing JSON into a Vec cannot fail.
            let _ = serde_json::to_writer(&mut *buf, &e.json);
            buf.push(b'\n');
        }
        // Events are rare and wanted at once: flush every batch.
        if let Err(e) = self.out.flush() {
            ctx.fail(e);
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if let Err(e) = self.out.flush() {
            ctx.fail(e);
        }
    }
}
