//! `flow_writer`, `event_writer` and `pcap_writer`: records, events and packets to files.
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::sync::Arc;

use serde::Deserialize;
use trawl_capture::{LinkType, PcapWriter};
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, Msg};
use trawl_flow::format::{RecordFormat, RecordWriter};

use crate::messages::{Events, FlowBatch, PacketBatch, EVENTS, FLOWS, PACKETS};
use crate::series::TextFormat;
use crate::util::OutputFile;

/// Writes flow records as JSON lines or CSV (the fields of `trawl flows`).
pub struct FlowFileWriter {
    out: OutputFile,
    writer: RecordWriter,
    format: RecordFormat,
    /// The CSV header is written with the first batch (whether it has the `iface` column
    /// depends on it) or at the end.
    started: bool,
    /// The interface the writer names in records now.
    iface: Option<Arc<str>>,
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
        Ok(FlowFileWriter {
            out: OutputFile::create(&s.path)?,
            writer: RecordWriter::new(format, false),
            format,
            started: false,
            iface: None,
        })
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<FlowBatch>() else {
            return;
        };
        self.name_records(&b.iface);
        for r in &b.records {
            self.writer.write(r, self.out.buf());
        }
        if let Err(e) = self.out.written() {
            ctx.fail(e);
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if !self.started {
            self.writer.write_header(self.out.buf());
        }
        if let Err(e) = self.out.flush() {
            ctx.fail(e);
        }
    }
}

impl FlowFileWriter {
    /// Names the interface of the records that follow (as `trawl flows -i` does): JSON per
    /// batch; CSV decides its columns with the first batch and then writes the name, or an
    /// empty cell for a batch without one, where its header put the column.
    fn name_records(&mut self, iface: &Option<Arc<str>>) {
        if !self.started {
            self.started = true;
            if let Some(name) = iface {
                self.writer.set_iface(name);
            }
            self.writer.write_header(self.out.buf());
            self.iface.clone_from(iface);
            return;
        }
        if *iface == self.iface {
            return;
        }
        let csv_column = self.format == RecordFormat::Csv && self.iface_column();
        match iface {
            Some(name) if self.format == RecordFormat::Json || csv_column => {
                self.writer.set_iface(name)
            }
            None if csv_column => self.writer.set_iface(""),
            None => self.writer.clear_iface(),
            Some(_) => {}
        }
        self.iface.clone_from(iface);
    }

    /// Whether the CSV header has the `iface` column.
    fn iface_column(&self) -> bool {
        self.writer.field_names().iter().any(|f| f == "iface")
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

/// Writes packets to a pcap file with nanosecond timestamps (like `tcpdump -w`).
pub struct PcapFileWriter {
    path: String,
    writer: Option<PcapWriter<BufWriter<File>>>,
    link_type: Option<LinkType>,
}

/// Settings of `pcap_writer`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapWriterSettings {
    /// The pcap file to create.
    pub path: String,
}

impl Block for PcapFileWriter {
    const TYPE: &'static str = "pcap_writer";
    const SUMMARY: &'static str =
        "writes packets to a pcap file with nanosecond timestamps (one link type per file)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets to write",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = PcapWriterSettings;

    fn build(s: PcapWriterSettings, _env: &BuildEnv) -> Result<Self, String> {
        // Created now (before privileges are dropped); the header needs the first packet's
        // link type, so it is written then.
        File::create(&s.path).map_err(|e| format!("cannot create {}: {e}", s.path))?;
        Ok(PcapFileWriter {
            path: s.path,
            writer: None,
            link_type: None,
        })
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<PacketBatch>() else {
            return;
        };
        for p in b.batch().iter() {
            if self.writer.is_none() {
                match OpenOptions::new()
                    .write(true)
                    .truncate(true)
                    .open(&self.path)
                {
                    Ok(f) => match PcapWriter::new(
                        BufWriter::with_capacity(1 << 20, f),
                        p.link_type,
                        262_144,
                    ) {
                        Ok(w) => {
                            self.writer = Some(w);
                            self.link_type = Some(p.link_type);
                        }
                        Err(e) => return ctx.fail(format!("cannot write {}: {e}", self.path)),
                    },
                    Err(e) => return ctx.fail(format!("cannot open {}: {e}", self.path)),
                }
            }
            if self.link_type != Some(p.link_type) {
                ctx.error(format!(
                    "{}: a packet of link type {} skipped (the file holds {})",
                    self.path,
                    p.link_type.0,
                    self.link_type.map_or(0, |l| l.0)
                ));
                continue;
            }
            if let Some(w) = self.writer.as_mut() {
                if let Err(e) = w.write(p.ts_ns, p.wire_len, p.data) {
                    return ctx.fail(format!("cannot write {}: {e}", self.path));
                }
            }
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(w) = self.writer.take() {
            if let Err(e) = w.finish().and_then(|mut f| f.flush()) {
                ctx.fail(format!("cannot write {}: {e}", self.path));
            }
        }
    }
}
