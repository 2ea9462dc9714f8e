//! `flow_writer`, `event_writer` and `pcap_writer`: records, events and packets to files.
use std::fs::File;
use std::time::Duration;

use serde::Deserialize;
use std::sync::Arc;

use trawl_capture::Interface;
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, Msg, PathSetting, TimerId};
use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_packets::{CaptureWriter, StoredPacket};

use crate::messages::{Events, FlowBatch, PacketBatch, EVENTS, FLOWS, PACKETS};
use crate::output::{check_header, FileMode, OutputFile, TimeFormat};
use crate::series::TextFormat;

/// How often a writer looks whether SIGHUP asked it to reopen its file (soon enough that what
/// was written before the signal is in the rotated file when logrotate goes on) and whether
/// its buffer waited long enough to be written out ([`OutputFile::flush_if_stale`]).
pub(crate) const REOPEN_CHECK: Duration = Duration::from_millis(100);

/// Writes flow records as JSON lines or CSV (the fields of `trawl flows`).
pub struct FlowFileWriter {
    out: OutputFile,
    writer: RecordWriter,
    format: RecordFormat,
    /// The CSV columns are decided (and the header written): by the first batch (whether it
    /// has the `iface` column depends on it), at the end, or by the header of the file
    /// appended to.
    started: bool,
}

/// Settings of `flow_writer` and `event_writer`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriterSettings {
    /// Output file; `-` is standard output.
    pub path: String,
    /// `json` (default) or `csv` (flow records only).
    pub format: Option<TextFormat>,
    /// `append` (default: a restarted monitor keeps the records already written; a CSV
    /// header only into an empty file) or `truncate`.
    #[serde(default)]
    pub mode: FileMode,
    /// `ns` (default: integers) or `rfc3339` (text) for `first_ns` / `last_ns` (records) and
    /// the `*_ns` instants of events.
    #[serde(default)]
    pub time_format: TimeFormat,
    /// Flow records only: write the `fwd_payload` and `rev_payload` columns (hex), the bytes
    /// a `flow_meter` with `payload_bytes` keeps (default false).
    #[serde(default)]
    pub payload: bool,
    /// Flow records only: write the outer tunnel's columns `tunnel_type`, `tunnel_src`,
    /// `tunnel_dst`, `tunnel_id` (for meters with `tunnel = "inner"`; default false).
    #[serde(default)]
    pub tunnel: bool,
    /// Flow records only: write the fields of this feature level (the `features` of the
    /// `flow_meter`s feeding it; default `full`).
    #[serde(default)]
    pub features: Option<crate::meter::Features>,
    /// Flow records only: every record gets the collected fields (`sampling_rate`, `agent`,
    /// `in_if`, `out_if`) and CSV their columns (default false: JSON records have them only
    /// when they hold something, an sFlow record's; CSV has none).
    #[serde(default)]
    pub collected: bool,
    /// Flow records only: every record gets the enrichment fields (`src_as`, `dst_as`,
    /// `src_country`, `dst_country`) and CSV their columns (default false, as `collected`).
    #[serde(default)]
    pub enriched: bool,
    /// Flow records only: every record gets the interface name fields (`in_if_name`,
    /// `in_if_description`, `out_if_name`, `out_if_description`) and CSV their columns
    /// (default false, as `collected`).
    #[serde(default)]
    pub interface_names: bool,
    /// Flow records, CSV only: write the `app` and `app_source` columns (a `flow_meter` with
    /// `app` labels the records; JSON lines carry the fields of labelled records always).
    #[serde(default)]
    pub app: bool,
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
    const PATHS: &'static [PathSetting] = &[PathSetting::path("path")];
    // A new path: what is buffered goes to the old file, the records that follow to the new.
    const RELOADABLE: &'static [&'static str] = &["path"];

    fn reconfigure(&mut self, s: WriterSettings, ctx: &mut Ctx<'_>) -> Result<(), String> {
        let new = OutputFile::open(&s.path, s.mode)?;
        let old = std::mem::replace(&mut self.out, new);
        // The columns are decided: a file with data must have this header, an empty one gets it.
        let switched = if self.started {
            self.continue_columns()
        } else {
            self.adopt_header()
        };
        match switched {
            Ok(()) => {
                let mut old = old;
                let flushed = old.flush();
                old.settle(flushed, ctx);
                Ok(())
            }
            Err(e) => {
                self.out = old;
                Err(e)
            }
        }
    }

    fn build(s: WriterSettings, _env: &BuildEnv) -> Result<Self, String> {
        let format = match s.format.unwrap_or(TextFormat::Json) {
            TextFormat::Json => RecordFormat::Json,
            TextFormat::Csv => RecordFormat::Csv,
        };
        let mut w = FlowFileWriter {
            out: OutputFile::open(&s.path, s.mode)?,
            writer: RecordWriter::new(format, s.payload)
                .with_features(s.features.unwrap_or_default().into()),
            format,
            started: false,
        };
        w.writer
            .set_rfc3339_times(s.time_format == TimeFormat::Rfc3339);
        w.writer.set_tunnel_fields(s.tunnel);
        w.writer.set_extra_fields(s.collected, s.enriched);
        w.writer.set_interface_fields(s.interface_names);
        w.writer.set_app(s.app);
        w.adopt_header()?;
        Ok(w)
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        ctx.every(REOPEN_CHECK);
        Ok(())
    }

    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        match self.out.reopen_if_asked() {
            // A new file gets the header of the columns already chosen.
            Ok(true) if self.started && self.out.first_line().is_none() => {
                self.writer.write_header(self.out.buf())
            }
            Ok(_) => {}
            Err(e) => return ctx.fail(e),
        }
        self.out.flush_stale(ctx);
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<FlowBatch>() else {
            return;
        };
        self.name_records(b.iface.as_deref());
        if b.has_payload() {
            for r in b.with_payload() {
                self.writer.write(&r, self.out.buf());
            }
        } else {
            for r in &b.records {
                self.writer.write(r, self.out.buf());
            }
        }
        let written = self.out.written();
        self.out.settle(written, ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if !self.started {
            self.writer.write_header(self.out.buf());
        }
        let flushed = self.out.flush();
        self.out.settle(flushed, ctx);
    }
}

impl FlowFileWriter {
    /// A reload moved the writer to another file after its columns were decided: an empty
    /// file gets the header, a CSV file with data must start with the same one.
    fn continue_columns(&mut self) -> Result<(), String> {
        let mut header = Vec::new();
        self.writer.write_header(&mut header);
        match self.out.first_line() {
            None => {
                self.out.buf().extend_from_slice(&header);
                Ok(())
            }
            Some(_) if self.format != RecordFormat::Csv => Ok(()),
            Some(line) => check_header(self.out.path(), Some(line), &header),
        }
    }

    /// Appending CSV to a file with data: its header decides the columns (with or without
    /// `iface`), and a file with other columns is refused.
    fn adopt_header(&mut self) -> Result<(), String> {
        let Some(line) = self.out.first_line() else {
            return Ok(());
        };
        if self.format != RecordFormat::Csv {
            return Ok(());
        }
        let named = self.writer.clone().with_iface("");
        let mut header = Vec::new();
        named.write_header(&mut header);
        if check_header(self.out.path(), Some(line), &header).is_ok() {
            self.writer = named;
        } else {
            header.clear();
            self.writer.write_header(&mut header);
            check_header(self.out.path(), Some(line), &header)?;
        }
        self.started = true;
        Ok(())
    }

    /// Names the interface of the records that follow (as `trawl flows -i` does): JSON per
    /// batch; CSV decides its columns with the first batch and then writes the name, or an
    /// empty cell for a batch without one, where its header put the column.
    fn name_records(&mut self, iface: Option<&str>) {
        if !self.started {
            self.started = true;
            self.writer.name_iface(iface);
            self.writer.write_header(self.out.buf());
            return;
        }
        match self.format {
            RecordFormat::Json => self.writer.name_iface(iface),
            // Only where the header put the column.
            RecordFormat::Csv if self.writer.has_iface() => {
                self.writer.set_iface(iface.unwrap_or(""))
            }
            RecordFormat::Csv => {}
        }
    }
}

/// Writes events (alarms, reports) as JSON lines.
pub struct EventFileWriter {
    out: OutputFile,
    /// Top-level `*_ns` integers (the events' instants) as RFC 3339 text (`time_format`).
    rfc3339_times: bool,
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
    const PATHS: &'static [PathSetting] = &[PathSetting::path("path")];
    const RELOADABLE: &'static [&'static str] = &["path"];

    fn reconfigure(&mut self, s: WriterSettings, ctx: &mut Ctx<'_>) -> Result<(), String> {
        let mut old = std::mem::replace(&mut self.out, OutputFile::open(&s.path, s.mode)?);
        let flushed = old.flush();
        old.settle(flushed, ctx);
        Ok(())
    }

    fn check(s: &WriterSettings) -> Result<(), String> {
        match s.format {
            Some(TextFormat::Csv) => Err("events are written as JSON lines only".into()),
            _ if s.payload => Err("`payload` is a setting of flow records only".into()),
            _ if s.features.is_some() => Err("`features` is a setting of flow records only".into()),
            _ => Ok(()),
        }
    }

    fn build(s: WriterSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(EventFileWriter {
            out: OutputFile::open(&s.path, s.mode)?,
            rfc3339_times: s.time_format == TimeFormat::Rfc3339,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        ctx.every(REOPEN_CHECK);
        Ok(())
    }

    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        if let Err(e) = self.out.reopen_if_asked() {
            return ctx.fail(e);
        }
        self.out.flush_stale(ctx);
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<Events>() else {
            return;
        };
        for e in b.iter() {
            let buf = self.out.buf();
            e.write_json(self.rfc3339_times, buf);
            buf.push(b'\n');
        }
        // Events are rare and wanted at once: flush every batch.
        let flushed = self.out.flush();
        self.out.settle(flushed, ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        let flushed = self.out.flush();
        self.out.settle(flushed, ctx);
    }
}

/// `event` with its top-level `*_ns` integers as RFC 3339 text in UTC: an event's `_ns`
/// fields are instants (`onset_ns`, `start_ns`, a call's `invite_ns`, a stream's
/// `first_ns`); durations are named `_ms`.
pub(crate) fn rfc3339_instants(event: &serde_json::Value) -> serde_json::Value {
    let mut e = event.clone();
    if let Some(fields) = e.as_object_mut() {
        for (k, v) in fields.iter_mut() {
            if let (true, Some(ns)) = (k.ends_with("_ns"), v.as_u64()) {
                *v = trawl_time::rfc3339(ns, trawl_time::Zone::Utc, true).into();
            }
        }
    }
    e
}

/// Writes packets to a pcap file with nanosecond timestamps (like `tcpdump -w`), or to a
/// pcapng file that keeps every interface's name and link type.
pub struct PcapFileWriter {
    path: String,
    pcapng: bool,
    writer: Option<CaptureWriter<OutputFile>>,
    /// The names of the interfaces of `names_of` (the last batch's table): a file's unnamed
    /// interfaces are named by their index, as `trawl packets` names them.
    names: Vec<String>,
    names_of: Option<Arc<[Interface]>>,
}

/// The file format of `pcap_writer`.
#[derive(Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum CaptureFormat {
    /// pcap: one link type per file (packets of another are skipped and reported).
    #[default]
    Pcap,
    /// pcapng: interfaces declared as they come, with their names.
    Pcapng,
}

/// Settings of `pcap_writer`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapWriterSettings {
    /// The capture file to create; `-` is standard output.
    pub path: String,
    /// `pcap` (default) or `pcapng`.
    #[serde(default)]
    pub format: CaptureFormat,
}

impl Block for PcapFileWriter {
    const TYPE: &'static str = "pcap_writer";
    const SUMMARY: &'static str = "writes packets to a capture file with nanosecond timestamps: \
        pcap (one link type per file) or pcapng (interface names kept)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets to write",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = PcapWriterSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("path")];

    fn build(s: PcapWriterSettings, _env: &BuildEnv) -> Result<Self, String> {
        // Created now (before privileges are dropped); written from the first packet on, or
        // as an empty capture file at the end. `-` is standard output, nothing to create.
        if s.path != "-" {
            File::create(&s.path).map_err(|e| format!("cannot create {}: {e}", s.path))?;
        }
        Ok(PcapFileWriter {
            path: s.path,
            pcapng: s.format == CaptureFormat::Pcapng,
            writer: None,
            names: Vec::new(),
            names_of: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        ctx.every(REOPEN_CHECK);
        Ok(())
    }

    /// Packets that waited a second in the buffer go to the file (a reader of a live
    /// capture's file sees them).
    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        if let Some(out) = self.writer.as_mut().and_then(CaptureWriter::get_mut) {
            out.flush_stale(ctx);
        }
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<PacketBatch>() else {
            return;
        };
        if self.writer.is_none() {
            match self.open() {
                Ok(w) => self.writer = Some(w),
                Err(e) => return ctx.fail(e),
            }
        }
        if !self
            .names_of
            .as_ref()
            .is_some_and(|t| Arc::ptr_eq(t, &b.interfaces))
        {
            self.names = b
                .interfaces
                .iter()
                .enumerate()
                .map(|(i, f)| f.name.clone().unwrap_or_else(|| i.to_string()))
                .collect();
            self.names_of = Some(b.interfaces.clone());
        }
        let w = self.writer.as_mut().expect("opened above");
        for p in b.batch().iter() {
            let stored = StoredPacket {
                ts_ns: p.ts_ns,
                wire_len: p.wire_len,
                link_type: p.link_type,
                data: p.data,
                iface: &self.names[usize::from(p.iface)],
                worker: 0,
            };
            match w.write(&stored) {
                Ok(()) => {}
                // A second link type into a pcap file: that packet is skipped.
                Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
                    ctx.error(format!("{}: a packet skipped: {e}", self.path));
                }
                Err(e) => return write_failed(&self.path, e, ctx),
            }
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        // Without packets the file is still a valid (empty) capture file, as tcpdump's.
        let writer = match self.writer.take() {
            Some(w) => w,
            None => match self.open() {
                Ok(w) => w,
                Err(e) => return ctx.fail(e),
            },
        };
        if let Err(e) = writer.into_sink().and_then(OutputFile::finish) {
            write_failed(&self.path, e, ctx);
        }
    }
}

impl PcapFileWriter {
    fn open(&self) -> Result<CaptureWriter<OutputFile>, String> {
        let f = OutputFile::create(std::path::Path::new(&self.path))
            .map_err(|e| format!("cannot open {}: {e}", self.path))?;
        CaptureWriter::new(f, self.pcapng).map_err(|e| format!("cannot write {}: {e}", self.path))
    }
}

/// A reader that went away (`-` into `tshark -c 10 -r -`) ends the run cleanly: there is no
/// one left to write for, and that is no failure (exit 0, as tcpdump). Any other error fails
/// the run.
fn write_failed(path: &str, e: std::io::Error, ctx: &mut Ctx<'_>) {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        ctx.stop();
    } else {
        ctx.fail(format!("cannot write {path}: {e}"));
    }
}

/// [`rfc3339_instants`] on an event written as JSON text (an object whose keys need no
/// escaping, as `rtp_calls` writes them): the same bytes as parsing it, converting and writing
/// it again, but without the `Value` and without a float parsed back (which might not come
/// back to the same bits).
pub(crate) fn rfc3339_instants_text(text: &[u8], out: &mut Vec<u8>) {
    let mut depth = 0usize;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let end = string_end(text, i);
                out.extend_from_slice(&text[i..end]);
                i = end;
                // A key of the top level naming an instant, and its value an integer.
                if depth == 1 && text[..end].ends_with(b"_ns\"") && text.get(i) == Some(&b':') {
                    let digits = text[i + 1..]
                        .iter()
                        .take_while(|b| b.is_ascii_digit())
                        .count();
                    let after = text.get(i + 1 + digits);
                    let ns = std::str::from_utf8(&text[i + 1..i + 1 + digits])
                        .ok()
                        .and_then(|d| d.parse::<u64>().ok());
                    if let (Some(ns), Some(b',' | b'}')) = (ns, after) {
                        out.extend_from_slice(b":\"");
                        out.extend_from_slice(
                            trawl_time::rfc3339(ns, trawl_time::Zone::Utc, true).as_bytes(),
                        );
                        out.push(b'"');
                        i += 1 + digits;
                    }
                }
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        out.push(text[i]);
        i += 1;
    }
}

/// Where the JSON string starting at `text[start]` (a quote) ends: after its closing quote.
fn string_end(text: &[u8], start: usize) -> usize {
    let mut i = start + 1;
    while i < text.len() {
        match text[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `flow_writer` writes for batches named `names` in turn, one record each.
    fn written(format: RecordFormat, names: &[Option<&str>]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out");
        let mut w = FlowFileWriter {
            out: OutputFile::open(path.to_str().unwrap(), FileMode::Append).unwrap(),
            writer: RecordWriter::new(format, false),
            format,
            started: false,
        };
        // Any record: the test is about the `iface` field around it.
        let record = trawl_export::decode::empty_record();
        for name in names {
            w.name_records(*name);
            w.writer.write(&record, w.out.buf());
        }
        w.out.flush().unwrap();
        std::fs::read_to_string(&path).unwrap()
    }

    #[test]
    fn csv_keeps_the_columns_of_its_first_batch_and_json_names_each_batch() {
        // CSV with a named first batch: the column, then an empty cell for an unnamed batch.
        let text = written(RecordFormat::Csv, &[Some("eth0"), None, Some("eth1")]);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let at = header.iter().position(|h| *h == "iface").unwrap();
        let cells: Vec<&str> = lines.map(|l| l.split(',').nth(at).unwrap()).collect();
        assert_eq!(cells, ["eth0", "", "eth1"]);
        // CSV with an unnamed first batch: no column, and a later name cannot add one.
        let text = written(RecordFormat::Csv, &[None, Some("eth0")]);
        assert!(!text.lines().next().unwrap().contains("iface"));
        assert!(!text.contains("eth0"));
        assert_eq!(
            text.lines()
                .map(|l| l.split(',').count())
                .collect::<Vec<_>>(),
            // The flow record's 68 fields (58 up to community_id, 10 round-trip fields)
            // without `iface`.
            vec![68; 3]
        );
        // JSON names each record after its batch.
        let text = written(RecordFormat::Json, &[None, Some("eth0"), None]);
        let names: Vec<Option<String>> = text
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v.get("iface").map(|n| n.as_str().unwrap().to_string())
            })
            .collect();
        assert_eq!(names, [None, Some("eth0".to_string()), None]);
    }

    /// The text path gives the bytes of the `Value` path, on records as `rtp_calls` writes
    /// them and on objects with instants in strings, nested objects and other numbers.
    #[test]
    fn rfc3339_instants_text_is_the_value_path() {
        let mut texts: Vec<String> = vec![
            r#"{"a_ns":0,"b":{"c_ns":5},"d_ns":-3,"e_ns":1.5,"f":"\"g_ns\":7","h_ns":18446744073709551615,"i_ns":[1],"j_ns":null}"#.into(),
            r#"{"x\\_ns":1,"y_ns":"2026","z_ns":1795823999999000001}"#.into(),
            "{}".into(),
        ];
        let call = trawl_voip::CallRecord {
            call_id: "c\"1".into(),
            from: "sip:a@b".into(),
            from_display: "A_ns\":1".into(),
            from_user: String::new(),
            to: String::new(),
            to_display: String::new(),
            to_user: String::new(),
            caller: "10.0.0.1:5060".into(),
            callee: "10.0.0.2:5060".into(),
            caller_agent: String::new(),
            callee_agent: String::new(),
            tcp: false,
            invite_ns: 1_795_823_999_999_000_001,
            ringing_ns: None,
            answer_ns: Some(1_795_824_000_000_000_000),
            end_ns: 0,
            setup_ms: None,
            answer_ms: Some(0.5),
            duration_ms: 1.0 / 3.0,
            end_reason: "timeout",
            status: 200,
            reinvites: 0,
            streams: 0,
            rtp_packets: 0,
            worst_mos: None,
        };
        let mut out = Vec::new();
        call.write_json(&mut out);
        texts.push(String::from_utf8(out).unwrap());
        for text in &texts {
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            let want = serde_json::to_string(&rfc3339_instants(&value)).unwrap();
            let mut got = Vec::new();
            rfc3339_instants_text(text.as_bytes(), &mut got);
            assert_eq!(String::from_utf8(got).unwrap(), want, "{text}");
        }
    }
}
