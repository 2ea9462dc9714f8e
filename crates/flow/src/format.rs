//! Flow records as JSON lines and CSV, with the field names of `docs/specs/flow-record.md`.
//!
//! Hand-written rather than serde-derived: a run emits millions of records, and most of a
//! record's cost used to be small variable-length copies (one `memcpy` call per key and per
//! number). Here each record is assembled in a fixed stack buffer: keys are literals whose
//! length the compiler knows, numbers are written digit by digit in place, and the record
//! reaches the output `Vec` in one copy.
use std::net::IpAddr;

use crate::config::FeatureLevel;
use crate::record::{DirectionRecord, FlowRecord, InterfaceInfo, RecordExtra};

/// Output format of flow records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordFormat {
    /// One JSON object per line.
    Json,
    /// Comma-separated values with a header line.
    Csv,
}

/// Writes records into a byte buffer.
#[derive(Clone)]
pub struct RecordWriter {
    format: RecordFormat,
    /// Include the payload fields (only when payload capture is on).
    with_payload: bool,
    /// The interface records are named with, and the `iface` field's value quoted and escaped
    /// for the format; `None`: records have no `iface` field (metered from files).
    iface: Option<(Box<str>, Vec<u8>)>,
    /// Where a record is assembled; kept across records so it is not cleared each time.
    scratch: Box<[u8; RECORD_MAX]>,
    /// `first_ns` / `last_ns` as RFC 3339 text (UTC, nanoseconds) instead of integers
    /// (`--time-format rfc3339`).
    rfc3339_times: bool,
    /// Write `tunnel_type`, `tunnel_src`, `tunnel_dst`, `tunnel_id` (`--tunnel inner`).
    tunnel_fields: bool,
    /// The fields written: those the meter's feature level keeps.
    features: FeatureLevel,
    /// Every record gets the collected fields (`sampling_rate` ...), not only those that
    /// have them (JSON), and CSV the columns.
    collected_fields: bool,
    /// Every record gets the enrichment fields (`src_as` ...), and CSV the columns.
    enriched_fields: bool,
    /// Every record gets the interface name fields (`in_if_name` ...), and CSV the columns.
    interface_fields: bool,
    /// CSV: the `app` and `app_source` columns (`--analyze app`); JSON writes the fields of
    /// every labelled record whatever this says.
    with_app: bool,
}

impl std::fmt::Debug for RecordWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordWriter")
            .field("format", &self.format)
            .field("with_payload", &self.with_payload)
            .field("iface", &self.iface.as_ref().map(|(name, _)| name))
            .finish_non_exhaustive()
    }
}

/// Per-direction field suffixes, in output order, after the `fwd_`/`rev_` prefix.
const DIR_FIELDS: [&str; 19] = [
    "len_min",
    "len_max",
    "len_mean",
    "len_std",
    "iat_min_ns",
    "iat_max_ns",
    "iat_mean_ns",
    "iat_std_ns",
    "syn",
    "syn_ack",
    "fin",
    "rst",
    "psh",
    "urg",
    "ece",
    "cwr",
    "tcp_flags",
    "zero_window",
    "retrans",
];

/// The per-direction fields of [`DIR_FIELDS`] a `standard` record keeps (in that order).
fn standard_dir_field(name: &str) -> bool {
    !matches!(
        name,
        "len_std" | "iat_std_ns" | "psh" | "urg" | "ece" | "cwr"
    )
}

/// The TCP round-trip fields, after `community_id`: the handshake's halves (`standard` and
/// `full`, the first [`HANDSHAKE_FIELDS`]), then the samples (`full`).
const RTT_FIELDS: [&str; 10] = [
    "fwd_rtt_handshake_ns",
    "rev_rtt_handshake_ns",
    "fwd_rtt_samples",
    "fwd_rtt_min_ns",
    "fwd_rtt_mean_ns",
    "fwd_rtt_max_ns",
    "rev_rtt_samples",
    "rev_rtt_min_ns",
    "rev_rtt_mean_ns",
    "rev_rtt_max_ns",
];

/// How many of [`RTT_FIELDS`] a `standard` record has.
const HANDSHAKE_FIELDS: usize = 2;

/// Where `iface` goes among [`HEAD_FIELDS`] when records have it: after `vlan`.
const IFACE_POSITION: usize = 6;

/// Longest `iface` value written, in characters (escaped, at most six bytes each).
const IFACE_CHARS: usize = 64;

/// `s` as a JSON string: quoted, with `"`, `\` and control characters escaped.
fn json_string(s: &str, out: &mut Vec<u8>) {
    out.push(b'"');
    for ch in s.chars() {
        match ch {
            '"' => out.extend_from_slice(b"\\\""),
            '\\' => out.extend_from_slice(b"\\\\"),
            c if (c as u32) < 0x20 => {
                out.extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes())
            }
            c => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
        }
    }
    out.push(b'"');
}

/// `s` as one CSV field (RFC 4180): quoted, with quotes doubled, when it holds a comma, a
/// quote or a line break.
fn csv_field(s: &str, out: &mut Vec<u8>) {
    if s.contains([',', '"', '\n', '\r']) {
        out.push(b'"');
        out.extend_from_slice(s.replace('"', "\"\"").as_bytes());
        out.push(b'"');
    } else {
        out.extend_from_slice(s.as_bytes());
    }
}

/// Fields before the per-direction blocks.
const HEAD_FIELDS: [&str; 16] = [
    "src_ip",
    "dst_ip",
    "src_port",
    "dst_port",
    "proto",
    "vlan",
    "src_mac",
    "dst_mac",
    "first_ns",
    "last_ns",
    "fwd_packets",
    "rev_packets",
    "fwd_bytes",
    "rev_bytes",
    "fwd_ip_bytes",
    "rev_ip_bytes",
];

/// A field's separator and JSON key as one literal: `key!("src_ip")` is `,"src_ip":`,
/// `key!("fwd_", "syn")` is `,"fwd_syn":`.
macro_rules! key {
    ($($part:expr),+) => {
        concat!(",\"", $($part),+, "\":").as_bytes()
    };
}

impl RecordWriter {
    /// A writer of `format`; `with_payload` adds `fwd_payload` / `rev_payload` (hex).
    pub fn new(format: RecordFormat, with_payload: bool) -> Self {
        RecordWriter {
            format,
            with_payload,
            iface: None,
            scratch: Box::new([0; RECORD_MAX]),
            rfc3339_times: false,
            tunnel_fields: false,
            features: FeatureLevel::Full,
            collected_fields: false,
            enriched_fields: false,
            interface_fields: false,
            with_app: false,
        }
    }

    /// Adds the outer tunnel's fields after the round-trip fields: `tunnel_type`,
    /// `tunnel_src`, `tunnel_dst`, `tunnel_id` (null in JSON, empty in CSV, for a flow that
    /// came through no tunnel). Set by `--tunnel inner`, the only mode in which records have a tunnel, so that
    /// records of the default mode keep their fields.
    pub fn set_tunnel_fields(&mut self, on: bool) {
        self.tunnel_fields = on;
    }

    /// Writes the fields a record of `level` keeps, no others (`docs/specs/flow-record.md`).
    pub fn set_features(&mut self, level: FeatureLevel) {
        self.features = level;
    }

    /// [`RecordWriter::set_features`] on a new writer.
    pub fn with_features(mut self, level: FeatureLevel) -> Self {
        self.set_features(level);
        self
    }

    /// Gives every record the collected fields (`sampling_rate`, `agent`, `in_if`, `out_if`)
    /// and the enrichment fields (`src_as`, `dst_as`, `src_country`, `dst_country`), after
    /// the round-trip and tunnel fields. Without it, JSON records have them only when they hold something
    /// (an sFlow record, an enriched one) and CSV has no such columns.
    pub fn set_extra_fields(&mut self, collected: bool, enriched: bool) {
        self.collected_fields = collected;
        self.enriched_fields = enriched;
    }

    /// Gives every record the interface name fields (`in_if_name`, `in_if_description`,
    /// `out_if_name`, `out_if_description`), last; without it JSON records have them only
    /// when a mapping named an interface, CSV never.
    pub fn set_interface_fields(&mut self, on: bool) {
        self.interface_fields = on;
    }

    /// Gives CSV records the `app` and `app_source` columns (after `community_id`; empty for a
    /// record without a label). JSON records have the fields when they have a label.
    pub fn set_app(&mut self, on: bool) {
        self.with_app = on;
    }

    /// Writes `first_ns` and `last_ns` as RFC 3339 text in UTC with nanoseconds
    /// (`"2026-11-26T14:00:00.000000001Z"`) instead of integers: for people and for tools that
    /// read timestamps as text. The names stay; the integers are the default.
    pub fn set_rfc3339_times(&mut self, on: bool) {
        self.rfc3339_times = on;
    }

    /// Gives every record written from now on the field `iface` (after `vlan`) with the value
    /// `name`: the interface a live meter captured its packets on. Each live worker meters one
    /// interface and has its own writer; an exporter that encodes several interfaces' records
    /// sets the name per batch. A CSV header written after this call has the column.
    pub fn set_iface(&mut self, name: &str) {
        if self
            .iface
            .as_ref()
            .is_some_and(|(current, _)| **current == *name)
        {
            return;
        }
        // A name is at most IFNAMSIZ bytes on Linux; longer text is cut so that a record
        // always fits its buffer.
        let cut: String = name.chars().take(IFACE_CHARS).collect();
        let mut text = Vec::with_capacity(cut.len() + 2);
        match self.format {
            RecordFormat::Json => json_string(&cut, &mut text),
            RecordFormat::Csv => csv_field(&cut, &mut text),
        }
        self.iface = Some((name.into(), text));
    }

    /// Names records with `name` from now on, or with none ([`RecordWriter::set_iface`]); cheap
    /// when the name stays the same, so a writer of several interfaces' batches calls it per
    /// batch.
    pub fn name_iface(&mut self, name: Option<&str>) {
        match name {
            Some(name) => self.set_iface(name),
            None => self.iface = None,
        }
    }

    /// Whether records get the `iface` field (and a CSV header the column).
    pub fn has_iface(&self) -> bool {
        self.iface.is_some()
    }

    /// [`RecordWriter::set_iface`] on a new writer.
    pub fn with_iface(mut self, name: &str) -> Self {
        self.set_iface(name);
        self
    }

    /// The field names, in output order (the CSV header).
    pub fn field_names(&self) -> Vec<String> {
        let level = self.features;
        let mut names: Vec<String> = HEAD_FIELDS
            .iter()
            .filter(|f| level.is_full() || !f.ends_with("_mac"))
            .map(|s| s.to_string())
            .collect();
        for dir in ["fwd", "rev"] {
            names.extend(
                DIR_FIELDS
                    .iter()
                    .filter(|f| match level {
                        FeatureLevel::Minimal => **f == "tcp_flags",
                        FeatureLevel::Standard => standard_dir_field(f),
                        FeatureLevel::Full => true,
                    })
                    .map(|f| format!("{dir}_{f}")),
            );
        }
        if self.iface.is_some() {
            names.insert(IFACE_POSITION, "iface".into());
        }
        if level.is_full() {
            names.push("first_lengths".into());
            names.push("first_iats_ns".into());
            if self.with_payload {
                names.push("fwd_payload".into());
                names.push("rev_payload".into());
            }
        }
        names.push("end_reason".into());
        names.push("community_id".into());
        if self.with_app {
            names.push("app".into());
            names.push("app_source".into());
        }
        let rtt_fields = match level {
            FeatureLevel::Minimal => 0,
            FeatureLevel::Standard => HANDSHAKE_FIELDS,
            FeatureLevel::Full => RTT_FIELDS.len(),
        };
        names.extend(RTT_FIELDS[..rtt_fields].iter().map(|f| f.to_string()));
        if self.tunnel_fields {
            names.extend(TUNNEL_FIELDS.iter().map(|f| f.to_string()));
        }
        if self.collected_fields {
            names.extend(COLLECTED_FIELDS.iter().map(|s| s.to_string()));
        }
        if self.enriched_fields {
            names.extend(ENRICHED_FIELDS.iter().map(|s| s.to_string()));
        }
        if self.interface_fields {
            names.extend(INTERFACE_FIELDS.iter().map(|s| s.to_string()));
        }
        names
    }

    /// Writes the header line (CSV only; JSON has none).
    pub fn write_header(&self, out: &mut Vec<u8>) {
        if self.format == RecordFormat::Csv {
            out.extend_from_slice(self.field_names().join(",").as_bytes());
            out.push(b'\n');
        }
    }

    /// Appends one record (one line) to `out`.
    pub fn write(&mut self, r: &FlowRecord<'_>, out: &mut Vec<u8>) {
        match self.format {
            RecordFormat::Json => self.write_as::<true>(r, out),
            RecordFormat::Csv => self.write_as::<false>(r, out),
        }
    }

    /// One record in one format: a copy of the code per format, each without the other's
    /// branches (together they overflowed the instruction cache of a run).
    fn write_as<const JSON: bool>(&mut self, r: &FlowRecord<'_>, out: &mut Vec<u8>) {
        let json = JSON;
        let mut c = Cursor::<JSON> {
            buf: &mut self.scratch,
            pos: 0,
        };
        if json {
            c.lit(b"{");
        }
        c.first_key(key!("src_ip"));
        c.ip(r.src_ip);
        c.key(key!("dst_ip"));
        c.ip(r.dst_ip);
        c.key(key!("src_port"));
        c.uint(r.src_port as u64);
        c.key(key!("dst_port"));
        c.uint(r.dst_port as u64);
        c.key(key!("proto"));
        c.quote();
        match r.proto_name().name() {
            Some(n) => c.bytes(n.as_bytes()),
            None => c.uint(r.proto as u64),
        }
        c.quote();
        c.key(key!("vlan"));
        c.uint(r.vlan as u64);
        if let Some((_, text)) = &self.iface {
            c.key(key!("iface"));
            c.bytes(text);
        }
        let level = self.features;
        if level.is_full() {
            c.key(key!("src_mac"));
            c.mac(&r.src_mac);
            c.key(key!("dst_mac"));
            c.mac(&r.dst_mac);
        }
        c.key(key!("first_ns"));
        c.time(r.first_ns, self.rfc3339_times);
        c.key(key!("last_ns"));
        c.time(r.last_ns, self.rfc3339_times);
        c.key(key!("fwd_packets"));
        c.uint(r.fwd.packets);
        c.key(key!("rev_packets"));
        c.uint(r.rev.packets);
        c.key(key!("fwd_bytes"));
        c.uint(r.fwd.bytes);
        c.key(key!("rev_bytes"));
        c.uint(r.rev.bytes);
        c.key(key!("fwd_ip_bytes"));
        c.uint(r.fwd.ip_bytes);
        c.key(key!("rev_ip_bytes"));
        c.uint(r.rev.ip_bytes);
        if level.has_standard() {
            direction!(c, "fwd_", &r.fwd, level);
            direction!(c, "rev_", &r.rev, level);
        } else {
            c.key(key!("fwd_tcp_flags"));
            c.uint(r.fwd.tcp_flags as u64);
            c.key(key!("rev_tcp_flags"));
            c.uint(r.rev.tcp_flags as u64);
        }
        if level.is_full() {
            c.key(key!("first_lengths"));
            c.int_list(&r.first_lengths[..r.first_count]);
            c.key(key!("first_iats_ns"));
            c.int_list(&r.first_iats_ns[..r.first_count]);
        }
        if self.with_payload && level.is_full() {
            // Payload can be far larger than the stack buffer: hex it straight into `out`.
            c.key(key!("fwd_payload"));
            c.quote();
            c.drain_into(out);
            hex(r.fwd_payload, out);
            c.quote();
            c.key(key!("rev_payload"));
            c.quote();
            c.drain_into(out);
            hex(r.rev_payload, out);
            c.quote();
        }
        c.key(key!("end_reason"));
        c.quote();
        c.bytes(r.end_reason.name().as_bytes());
        c.quote();
        // After the fields of the first schema, as fields are only ever added at the end;
        // base64 needs no CSV quoting.
        c.key(key!("community_id"));
        c.quote();
        c.lit(r.community_id().as_bytes());
        c.quote();
        if json || self.with_app {
            c.app(r.app);
        }
        if level.has_standard() {
            c.key(key!("fwd_rtt_handshake_ns"));
            c.opt_uint(r.fwd.rtt_handshake_ns);
            c.key(key!("rev_rtt_handshake_ns"));
            c.opt_uint(r.rev.rtt_handshake_ns);
        }
        if level.is_full() {
            rtt!(c, "fwd_", &r.fwd);
            rtt!(c, "rev_", &r.rev);
        }
        // Last: only `--tunnel inner` adds them, so records of the default mode keep theirs.
        // JSON also for a record that has a tunnel without the writer being asked (one a
        // collector read from IPFIX).
        if self.tunnel_fields || (json && r.tunnel.is_some()) {
            tunnel_fields(&mut c, r);
        }
        if self.collected_fields || (json && r.extra.is_collected()) {
            extra_collected(&mut c, &r.extra);
        }
        if self.enriched_fields || (json && r.extra.is_enriched()) {
            extra_enriched(&mut c, &r.extra);
        }
        if self.interface_fields || (json && r.extra.has_interface_names()) {
            extra_interfaces(&mut c, &r.extra);
        }
        if json {
            c.lit(b"}");
        }
        c.lit(b"\n");
        c.drain_into(out);
    }
}

/// The collected fields, in output order (after `community_id`).
const COLLECTED_FIELDS: [&str; 4] = ["sampling_rate", "agent", "in_if", "out_if"];
/// The enrichment fields, after the collected ones.
const ENRICHED_FIELDS: [&str; 4] = ["src_as", "dst_as", "src_country", "dst_country"];

fn extra_collected<const JSON: bool>(c: &mut Cursor<'_, JSON>, x: &RecordExtra) {
    c.key(key!("sampling_rate"));
    c.uint(u64::from(x.sampling_rate));
    c.key(key!("agent"));
    match x.agent {
        Some(a) => c.ip(a),
        None if JSON => c.lit(b"null"),
        None => {}
    }
    c.key(key!("in_if"));
    c.uint(u64::from(x.in_if));
    c.key(key!("out_if"));
    c.uint(u64::from(x.out_if));
}

fn extra_enriched<const JSON: bool>(c: &mut Cursor<'_, JSON>, x: &RecordExtra) {
    c.key(key!("src_as"));
    c.uint(u64::from(x.src_as));
    c.key(key!("dst_as"));
    c.uint(u64::from(x.dst_as));
    c.key(key!("src_country"));
    country(c, x.src_country);
    c.key(key!("dst_country"));
    country(c, x.dst_country);
}

/// The interface name fields, last.
const INTERFACE_FIELDS: [&str; 4] = [
    "in_if_name",
    "in_if_description",
    "out_if_name",
    "out_if_description",
];

/// Longest interface name or description written, in characters (escaped, at most six
/// bytes each): the record is assembled in a fixed buffer.
const INTERFACE_TEXT_CHARS: usize = 64;

fn extra_interfaces<const JSON: bool>(c: &mut Cursor<'_, JSON>, x: &RecordExtra) {
    fn name(i: Option<&'static InterfaceInfo>) -> &'static str {
        i.map_or("", |i| &i.name)
    }
    fn description(i: Option<&'static InterfaceInfo>) -> &'static str {
        i.map_or("", |i| &i.description)
    }
    c.key(key!("in_if_name"));
    c.text(name(x.in_if_info));
    c.key(key!("in_if_description"));
    c.text(description(x.in_if_info));
    c.key(key!("out_if_name"));
    c.text(name(x.out_if_info));
    c.key(key!("out_if_description"));
    c.text(description(x.out_if_info));
}

/// A country code as text: two letters, or empty when not known (or not letters).
fn country<const JSON: bool>(c: &mut Cursor<'_, JSON>, code: [u8; 2]) {
    c.quote();
    if code.iter().all(u8::is_ascii_alphabetic) {
        c.bytes(&code);
    }
    c.quote();
}

/// The outer tunnel's fields, in output order.
const TUNNEL_FIELDS: [&str; 4] = ["tunnel_type", "tunnel_src", "tunnel_dst", "tunnel_id"];

/// Writes the tunnel fields: null (JSON) or empty (CSV) when the flow had no tunnel.
fn tunnel_fields<const JSON: bool>(c: &mut Cursor<'_, JSON>, r: &FlowRecord<'_>) {
    let t = &r.tunnel;
    if !t.is_some() {
        for key in [
            key!("tunnel_type"),
            key!("tunnel_src"),
            key!("tunnel_dst"),
            key!("tunnel_id"),
        ] {
            c.key(key);
            if JSON {
                c.lit(b"null");
            }
        }
        return;
    }
    c.key(key!("tunnel_type"));
    c.quote();
    c.bytes(t.kind.name().as_bytes());
    c.quote();
    c.key(key!("tunnel_src"));
    c.ip(t.src_addr());
    c.key(key!("tunnel_dst"));
    c.ip(t.dst_addr());
    c.key(key!("tunnel_id"));
    c.uint(u64::from(t.id));
}

/// Writes one direction's TCP round-trip samples: count, then min/mean/max (null without
/// samples).
macro_rules! rtt {
    ($c:expr, $p:literal, $d:expr) => {{
        let c = &mut $c;
        let d: &DirectionRecord = $d;
        c.key(key!($p, "rtt_samples"));
        c.uint(d.rtt_samples as u64);
        let some = d.rtt_samples > 0;
        c.key(key!($p, "rtt_min_ns"));
        c.opt_uint(some.then_some(d.rtt_min_ns));
        c.key(key!($p, "rtt_mean_ns"));
        if some {
            c.float(d.rtt_mean_ns);
        } else {
            c.null();
        }
        c.key(key!($p, "rtt_max_ns"));
        c.opt_uint(some.then_some(d.rtt_max_ns));
    }};
}
use rtt;

/// Writes one direction's block with literal keys (`"fwd_len_min":` ...): the fields of
/// `$level` (`standard` or `full`).
macro_rules! direction {
    ($c:expr, $p:literal, $d:expr, $level:expr) => {{
        let c = &mut $c;
        let d: &DirectionRecord = $d;
        let full = $level.is_full();
        c.key(key!($p, "len_min"));
        c.uint(d.len_min as u64);
        c.key(key!($p, "len_max"));
        c.uint(d.len_max as u64);
        c.key(key!($p, "len_mean"));
        c.float(d.len_mean);
        if full {
            c.key(key!($p, "len_std"));
            c.float(d.len_std);
        }
        c.key(key!($p, "iat_min_ns"));
        c.uint(d.iat_min_ns);
        c.key(key!($p, "iat_max_ns"));
        c.uint(d.iat_max_ns);
        c.key(key!($p, "iat_mean_ns"));
        c.float(d.iat_mean_ns);
        if full {
            c.key(key!($p, "iat_std_ns"));
            c.float(d.iat_std_ns);
        }
        c.key(key!($p, "syn"));
        c.uint(d.syn as u64);
        c.key(key!($p, "syn_ack"));
        c.uint(d.syn_ack as u64);
        c.key(key!($p, "fin"));
        c.uint(d.fin as u64);
        c.key(key!($p, "rst"));
        c.uint(d.rst as u64);
        if full {
            c.key(key!($p, "psh"));
            c.uint(d.psh as u64);
            c.key(key!($p, "urg"));
            c.uint(d.urg as u64);
            c.key(key!($p, "ece"));
            c.uint(d.ece as u64);
            c.key(key!($p, "cwr"));
            c.uint(d.cwr as u64);
        }
        c.key(key!($p, "tcp_flags"));
        c.uint(d.tcp_flags as u64);
        c.key(key!($p, "zero_window"));
        c.uint(d.zero_window as u64);
        c.key(key!($p, "retrans"));
        c.uint(d.retransmissions as u64);
    }};
}
use direction;

/// Longest record without payload: 88 fields of at most ~45 bytes of key and value, two IPv6
/// addresses and two lists of ten 20-digit numbers stay far below this.
const RECORD_MAX: usize = 8192;

// The numbers' 20-byte write window may run past the last digit; the buffer has the slack.
const _: () = assert!(RECORD_MAX > 4096 + 20);

/// Assembles one record in a stack buffer, as JSON or CSV.
struct Cursor<'b, const JSON: bool> {
    buf: &'b mut [u8; RECORD_MAX],
    pos: usize,
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Decimal text of every byte value: up to three digits, then the digit count.
const OCTETS: [[u8; 4]; 256] = {
    let mut t = [[0u8; 4]; 256];
    let mut v = 0;
    while v < 256 {
        t[v] = if v >= 100 {
            [
                b'0' + (v / 100) as u8,
                b'0' + (v / 10 % 10) as u8,
                b'0' + (v % 10) as u8,
                3,
            ]
        } else if v >= 10 {
            [b'0' + (v / 10) as u8, b'0' + (v % 10) as u8, 0, 2]
        } else {
            [b'0' + v as u8, 0, 0, 1]
        };
        v += 1;
    }
    t
};

/// "00".."99", for writing two digits per division.
const DIGIT_PAIRS: &[u8; 200] = b"\
0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

impl<const JSON: bool> Cursor<'_, JSON> {
    /// Appends bytes whose length is usually a compile-time constant (keys, punctuation).
    #[inline(always)]
    fn lit(&mut self, s: &[u8]) {
        self.buf[self.pos..self.pos + s.len()].copy_from_slice(s);
        self.pos += s.len();
    }

    /// Appends short runtime bytes (names); a loop, not a `memcpy` call.
    #[inline]
    fn bytes(&mut self, s: &[u8]) {
        for &b in s {
            self.buf[self.pos] = b;
            self.pos += 1;
        }
    }

    /// The separator and, in JSON, the quoted key: `json` is [`key!`]'s `,"name":`, copied
    /// whole (one store sequence rather than four copies of their own).
    #[inline(always)]
    fn key(&mut self, json: &[u8]) {
        self.lit(if JSON { json } else { b"," });
    }

    /// The first field's key: no separator.
    #[inline(always)]
    fn first_key(&mut self, json: &[u8]) {
        if JSON {
            self.lit(&json[1..]);
        }
    }

    #[inline(always)]
    fn quote(&mut self) {
        if JSON {
            self.lit(b"\"");
        }
    }

    /// Text from a mapping file (at most [`INTERFACE_TEXT_CHARS`] characters): a JSON string,
    /// or a CSV field quoted when it needs to be.
    fn text(&mut self, s: &str) {
        let cut = s
            .char_indices()
            .nth(INTERFACE_TEXT_CHARS)
            .map_or(s, |(i, _)| &s[..i]);
        let mut out = Vec::with_capacity(cut.len() + 2);
        if JSON {
            json_string(cut, &mut out);
        } else {
            csv_field(cut, &mut out);
        }
        self.bytes(&out);
    }

    /// `app` and `app_source` (after `community_id`): in JSON only when labelled, in CSV as
    /// two fields, empty without a label. Names need no quoting in either.
    fn app(&mut self, label: Option<crate::AppLabel>) {
        match label {
            Some(l) => {
                self.key(key!("app"));
                self.quote();
                self.bytes(l.app.name().as_bytes());
                self.quote();
                self.key(key!("app_source"));
                self.quote();
                self.bytes(l.source.name().as_bytes());
                self.quote();
            }
            None if !JSON => self.lit(b",,"),
            None => {}
        }
    }

    /// A time: ns since the epoch, or RFC 3339 text (a string in JSON).
    fn time(&mut self, ns: u64, rfc3339: bool) {
        if rfc3339 {
            self.quote();
            self.bytes(trawl_time::rfc3339(ns, trawl_time::Zone::Utc, true).as_bytes());
            self.quote();
        } else {
            self.uint(ns);
        }
    }

    /// Writes the digits in place, backwards from the end of the number, two per division,
    /// inside one fixed 20-byte window (one bounds check per number).
    #[inline(always)]
    fn uint(&mut self, mut v: u64) {
        // Most fields of a record are small counters, many of them zero.
        if v < 10 {
            self.buf[self.pos] = b'0' + v as u8;
            self.pos += 1;
            return;
        }
        let n = (v.ilog10() as usize + 1).min(20);
        let window: &mut [u8; 20] = (&mut self.buf[self.pos..self.pos + 20])
            .try_into()
            .expect("20-byte window");
        // Four digits per division: half the dependent multiply chain of two-at-a-time, and the
        // two pairs of a chunk are independent work.
        let mut i = n;
        while v >= 10_000 && i >= 4 {
            let chunk = (v % 10_000) as usize;
            v /= 10_000;
            let (hi, lo) = ((chunk / 100) * 2, (chunk % 100) * 2);
            i -= 4;
            window[i] = DIGIT_PAIRS[hi];
            window[i + 1] = DIGIT_PAIRS[hi + 1];
            window[i + 2] = DIGIT_PAIRS[lo];
            window[i + 3] = DIGIT_PAIRS[lo + 1];
        }
        // At most four digits left.
        if v >= 100 && i >= 2 {
            let pair = (v % 100) as usize * 2;
            v /= 100;
            i -= 2;
            window[i] = DIGIT_PAIRS[pair];
            window[i + 1] = DIGIT_PAIRS[pair + 1];
        }
        if v >= 10 && i >= 2 {
            window[i - 2] = DIGIT_PAIRS[v as usize * 2];
            window[i - 1] = DIGIT_PAIRS[v as usize * 2 + 1];
        } else if i >= 1 {
            window[i - 1] = b'0' + v as u8;
        }
        self.pos += n;
    }

    /// JSON `null`, or an empty CSV field.
    #[inline]
    fn null(&mut self) {
        if JSON {
            self.lit(b"null");
        }
    }

    /// A number, or null.
    #[inline]
    fn opt_uint(&mut self, v: Option<u64>) {
        match v {
            Some(v) => self.uint(v),
            None => self.null(),
        }
    }

    #[inline]
    fn int(&mut self, v: i64) {
        if v < 0 {
            self.lit(b"-");
        }
        self.uint(v.unsigned_abs());
    }

    /// Non-negative statistics with at most 3 decimals; whole values without a fraction.
    fn float(&mut self, v: f64) {
        // Short flows leave many statistics at zero.
        if v == 0.0 {
            self.lit(b"0");
            return;
        }
        // `+ 0.5` then truncation rounds half up like `round()` for the non-negative values
        // here, without the libm call `round()` compiles to on baseline x86-64.
        let milli = v * 1000.0 + 0.5;
        if !(0.5..1.8e19).contains(&milli) {
            // Not reachable for lengths and gaps; kept exact for anything else.
            let mut b = ryu::Buffer::new();
            self.bytes(b.format(v).as_bytes());
            return;
        }
        let milli = milli as u64;
        self.uint(milli / 1000);
        let frac = (milli % 1000) as usize;
        if frac != 0 {
            // Dot and three digits in one 4-byte store; trailing zeros dropped by the length
            // (60.5, not 60.500).
            let (hi, lo) = ((frac / 10) * 2, frac % 10);
            let window: &mut [u8; 4] = (&mut self.buf[self.pos..self.pos + 4])
                .try_into()
                .expect("4-byte window");
            *window = [b'.', DIGIT_PAIRS[hi], DIGIT_PAIRS[hi + 1], b'0' + lo as u8];
            self.pos += if lo != 0 {
                4
            } else if !frac.is_multiple_of(100) {
                3
            } else {
                2
            };
        }
    }

    fn ip(&mut self, ip: IpAddr) {
        self.quote();
        match ip {
            IpAddr::V4(v4) => {
                for (i, o) in v4.octets().iter().enumerate() {
                    // Each octet from a table: its digits, then a dot, as one 4-byte store;
                    // the length drops the dot after the last octet.
                    let [d0, d1, d2, len] = OCTETS[*o as usize];
                    let window: &mut [u8; 4] = (&mut self.buf[self.pos..self.pos + 4])
                        .try_into()
                        .expect("4-byte window");
                    *window = [d0, d1, d2, b'.'];
                    window[len as usize] = b'.';
                    self.pos += len as usize + usize::from(i < 3);
                }
            }
            IpAddr::V6(v6) => {
                use std::io::Write;
                let mut tmp = [0u8; 48];
                let mut w = &mut tmp[..];
                // Writing into a 48-byte slice cannot fail: an IPv6 text form is at most 45.
                let _ = write!(w, "{v6}");
                let n = 48 - w.len();
                self.bytes(&tmp[..n]);
            }
        }
        self.quote();
    }

    fn mac(&mut self, mac: &[u8; 6]) {
        self.quote();
        for (i, b) in mac.iter().enumerate() {
            if i > 0 {
                self.lit(b":");
            }
            self.buf[self.pos] = HEX[(b >> 4) as usize];
            self.buf[self.pos + 1] = HEX[(b & 15) as usize];
            self.pos += 2;
        }
        self.quote();
    }

    fn int_list(&mut self, values: &[i64]) {
        self.lit(if JSON { b"[" } else { b"\"" });
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.lit(if JSON { b"," } else { b" " });
            }
            self.int(*v);
        }
        self.lit(if JSON { b"]" } else { b"\"" });
    }

    /// Moves what is assembled so far to `out` and starts over.
    fn drain_into(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.buf[..self.pos]);
        self.pos = 0;
    }
}

fn hex(bytes: &[u8], out: &mut Vec<u8>) {
    out.reserve(bytes.len() * 2);
    for b in bytes {
        out.push(HEX[(b >> 4) as usize]);
        out.push(HEX[(b & 15) as usize]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::EndReason;

    fn record() -> FlowRecord<'static> {
        FlowRecord {
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "2001:db8::1".parse().unwrap(),
            src_port: 40000,
            dst_port: 443,
            proto: 6,
            vlan: 0,
            tunnel: Default::default(),
            src_mac: [0, 1, 2, 3, 4, 0xff],
            dst_mac: [0; 6],
            first_ns: 1,
            last_ns: 2,
            fwd: DirectionRecord {
                packets: 3,
                bytes: 180,
                len_mean: 60.0,
                len_std: 1.5,
                ..Default::default()
            },
            rev: DirectionRecord::default(),
            first_lengths: [60, -70, 0, 0, 0, 0, 0, 0, 0, 0],
            first_iats_ns: [0, -5, 0, 0, 0, 0, 0, 0, 0, 0],
            first_count: 2,
            fwd_payload: b"GET",
            rev_payload: b"",
            end_reason: EndReason::Fin,
            extra: Default::default(),
            app: None,
        }
    }

    #[test]
    fn json_is_valid_and_complete() {
        let mut w = RecordWriter::new(RecordFormat::Json, true);
        let mut out = Vec::new();
        w.write(&record(), &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let obj = v.as_object().unwrap();
        let names = w.field_names();
        assert_eq!(obj.len(), names.len());
        for n in &names {
            assert!(obj.contains_key(n), "missing {n}");
        }
        assert_eq!(v["proto"], "tcp");
        assert_eq!(v["src_mac"], "00:01:02:03:04:ff");
        assert_eq!(v["fwd_len_std"], 1.5);
        assert_eq!(v["fwd_len_mean"], 60);
        assert_eq!(v["first_lengths"], serde_json::json!([60, -70]));
        assert_eq!(v["fwd_payload"], "474554");
        assert_eq!(v["end_reason"], "fin");
        assert_eq!(v["dst_ip"], "2001:db8::1");
    }

    /// `app` and `app_source` follow `community_id`: in JSON when labelled, in CSV as
    /// columns of a writer with `set_app` (empty without a label).
    #[test]
    fn app_label_fields_after_community_id() {
        use crate::{App, AppLabel, AppSource};
        let mut r = record();
        r.app = Some(AppLabel {
            app: App::Tls,
            source: AppSource::Port,
        });
        let mut w = RecordWriter::new(RecordFormat::Json, false);
        let mut out = Vec::new();
        w.write(&r, &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            (v["app"].as_str(), v["app_source"].as_str()),
            (Some("tls"), Some("port"))
        );
        let mut csv = RecordWriter::new(RecordFormat::Csv, false);
        csv.set_app(true);
        let (mut head, mut rows) = (Vec::new(), Vec::new());
        csv.write_header(&mut head);
        csv.write(&r, &mut rows);
        r.app = None;
        csv.write(&r, &mut rows);
        let head = String::from_utf8(head).unwrap();
        assert!(head.contains(",community_id,app,app_source,"), "{head}");
        let at = head.split(',').position(|n| n == "app").unwrap();
        let rows = String::from_utf8(rows).unwrap();
        let lines: Vec<Vec<&str>> = rows.lines().map(|l| l.split(',').collect()).collect();
        assert_eq!(lines[0][at..at + 2], ["tls", "port"], "{rows}");
        assert_eq!(lines[1][at..at + 2], ["", ""], "{rows}");
        assert!(lines.iter().all(|l| l.len() == head.split(',').count()));
    }

    /// The spec's first vector (testdata/app/community-id/readme-tables.tsv): TCP
    /// 1.2.3.4:1122 -> 5.6.7.8:3344, from either side, follows `end_reason` in JSON and CSV.
    #[test]
    fn community_id_follows_end_reason_and_is_symmetric() {
        let mut r = record();
        (r.src_ip, r.dst_ip) = ("1.2.3.4".parse().unwrap(), "5.6.7.8".parse().unwrap());
        (r.src_port, r.dst_port) = (1122, 3344);
        let mut flipped = r;
        (flipped.src_ip, flipped.dst_ip) = (r.dst_ip, r.src_ip);
        (flipped.src_port, flipped.dst_port) = (r.dst_port, r.src_port);
        for rec in [r, flipped] {
            let mut w = RecordWriter::new(RecordFormat::Json, false);
            let mut out = Vec::new();
            w.write(&rec, &mut out);
            let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(v["community_id"], "1:wCb3OG7yAFWelaUydu0D+125CLM=");
            let mut w = RecordWriter::new(RecordFormat::Csv, false);
            let mut out = Vec::new();
            w.write_header(&mut out);
            w.write(&rec, &mut out);
            let text = String::from_utf8(out).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert!(
                lines[0].contains(",end_reason,community_id,"),
                "{}",
                lines[0]
            );
            assert!(
                lines[1].contains(",fin,1:wCb3OG7yAFWelaUydu0D+125CLM=,"),
                "{}",
                lines[1]
            );
        }
    }

    /// Each level writes exactly the fields its `field_names` lists, in that order (the CSV
    /// header), JSON and CSV alike; what a level lacks is absent, what has no value is null.
    #[test]
    fn each_level_writes_its_own_fields() {
        let mut r = record();
        r.fwd.rtt_handshake_ns = Some(1500);
        r.fwd.rtt_samples = 2;
        r.fwd.rtt_min_ns = 1000;
        r.fwd.rtt_max_ns = 2000;
        r.fwd.rtt_mean_ns = 1500.0;
        let mut counts = Vec::new();
        for level in FeatureLevel::ALL {
            let r = r.project(level);
            let mut w = RecordWriter::new(RecordFormat::Json, level.is_full())
                .with_features(level)
                .with_iface("eth0");
            let mut out = Vec::new();
            w.write(&r, &mut out);
            let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
            let names = w.field_names();
            assert_eq!(v.as_object().unwrap().len(), names.len(), "{level}");
            for n in &names {
                assert!(v.get(n).is_some(), "{level}: missing {n}");
            }
            let mut w = RecordWriter::new(RecordFormat::Csv, level.is_full())
                .with_features(level)
                .with_iface("eth0");
            let mut out = Vec::new();
            w.write_header(&mut out);
            w.write(&r, &mut out);
            let text = String::from_utf8(out).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines[0], names.join(","), "{level}");
            // No field of this record holds a comma (the first lists are space-separated).
            assert_eq!(
                lines[1].split(',').count(),
                names.len(),
                "{level}: {}",
                lines[1]
            );
            if level.is_full() {
                assert_eq!(v["fwd_rtt_mean_ns"], 1500);
                assert!(v["rev_rtt_min_ns"].is_null());
                assert_eq!(v["rev_rtt_samples"], 0);
            } else {
                assert!(v.get("fwd_rtt_samples").is_none());
            }
            if level.has_standard() {
                assert_eq!(v["fwd_rtt_handshake_ns"], 1500);
                assert!(v["rev_rtt_handshake_ns"].is_null());
            } else {
                assert!(v.get("fwd_rtt_samples").is_none());
                assert!(v.get("fwd_len_min").is_none());
                assert_eq!(v["fwd_packets"], 3);
            }
            assert_eq!(v.get("src_mac").is_some(), level.is_full());
            assert_eq!(v.get("fwd_len_std").is_some(), level.is_full());
            counts.push(names.len());
        }
        assert_eq!(counts, vec![19, 45, 71]);
    }

    #[test]
    fn numbers_format_exactly() {
        let mut buf = [0; RECORD_MAX];
        let mut c = Cursor::<true> {
            buf: &mut buf,
            pos: 0,
        };
        for v in [
            0u64,
            9,
            10,
            99,
            100,
            999,
            1000,
            9999,
            10_000,
            12345,
            100_000_000,
            1_700_000_000_123_456_789,
            u32::MAX as u64,
            u64::MAX,
        ] {
            c.pos = 0;
            c.uint(v);
            assert_eq!(&c.buf[..c.pos], v.to_string().as_bytes());
        }
        for (v, want) in [
            (60.0, "60"),
            (60.5, "60.5"),
            (1.25, "1.25"),
            (0.001, "0.001"),
            (2.0004, "2"),
            (1e12 / 3.0, "333333333333.333"),
        ] {
            c.pos = 0;
            c.float(v);
            assert_eq!(std::str::from_utf8(&c.buf[..c.pos]).unwrap(), want, "{v}");
        }
        c.pos = 0;
        c.int(-42);
        assert_eq!(&c.buf[..c.pos], b"-42");
        for ip in [
            "0.0.0.0",
            "10.0.0.1",
            "192.168.100.255",
            "1.22.133.4",
            "255.255.255.255",
        ] {
            let mut c = Cursor::<false> {
                buf: &mut buf,
                pos: 0,
            };
            c.ip(ip.parse().unwrap());
            assert_eq!(std::str::from_utf8(&c.buf[..c.pos]).unwrap(), ip);
        }
    }

    #[test]
    fn rfc3339_times_replace_first_and_last_only() {
        for (format, quote) in [(RecordFormat::Json, "\""), (RecordFormat::Csv, "")] {
            let mut w = RecordWriter::new(format, false);
            w.set_rfc3339_times(true);
            let mut out = Vec::new();
            w.write(&record(), &mut out);
            let text = String::from_utf8(out).unwrap();
            let r = record();
            for ns in [r.first_ns, r.last_ns] {
                let t = trawl_time::rfc3339(ns, trawl_time::Zone::Utc, true);
                assert!(text.contains(&format!("{quote}{t}{quote}")), "{text}");
                assert!(!text.contains(&format!("_ns\":{ns},")), "{text}");
            }
        }
    }

    #[test]
    fn tunnel_fields_only_when_asked_null_without_a_tunnel() {
        use crate::tunnel::{Tunnel, TunnelType};
        let mut r = record();
        let mut w = RecordWriter::new(RecordFormat::Json, false);
        let mut out = Vec::new();
        w.write(&r, &mut out);
        assert!(!String::from_utf8_lossy(&out).contains("tunnel"));
        w.set_tunnel_fields(true);
        out.clear();
        w.write(&r, &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["tunnel_type"], serde_json::Value::Null);
        assert_eq!(v["tunnel_id"], serde_json::Value::Null);
        let mut src = [0u8; 16];
        src[10..].copy_from_slice(&[0xff, 0xff, 192, 0, 2, 1]);
        r.tunnel = Tunnel {
            kind: TunnelType::GtpU,
            ip_version: 4,
            id: 0xdead_beef,
            src_ip: src,
            dst_ip: std::net::Ipv6Addr::LOCALHOST.octets(),
        };
        r.tunnel.ip_version = 4;
        out.clear();
        w.write(&r, &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["tunnel_type"], "gtpu");
        assert_eq!(v["tunnel_src"], "192.0.2.1");
        assert_eq!(v["tunnel_id"], 0xdead_beef_u64);
        // CSV: the header names the columns, empty values without a tunnel.
        let mut w = RecordWriter::new(RecordFormat::Csv, false);
        w.set_tunnel_fields(true);
        let mut header = Vec::new();
        w.write_header(&mut header);
        assert!(String::from_utf8_lossy(&header)
            .trim_end()
            .ends_with(",rev_rtt_max_ns,tunnel_type,tunnel_src,tunnel_dst,tunnel_id"));
        let mut row = Vec::new();
        w.write(&record(), &mut row);
        let row = String::from_utf8_lossy(&row);
        let cells: Vec<&str> = row.trim_end().split(',').collect();
        let names = String::from_utf8_lossy(&header)
            .trim_end()
            .split(',')
            .count();
        assert_eq!(cells.len(), names, "{row}");
        assert_eq!(cells[names - 4..], ["", "", "", ""], "{row}");
    }

    #[test]
    fn csv_row_matches_header() {
        let mut w = RecordWriter::new(RecordFormat::Csv, false);
        let mut out = Vec::new();
        w.write_header(&mut out);
        w.write(&record(), &mut out);
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let row: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(header.len(), row.len());
        let get = |n: &str| row[header.iter().position(|h| *h == n).unwrap()];
        assert_eq!(get("src_port"), "40000");
        assert_eq!(get("first_iats_ns"), "\"0 -5\"");
        assert_eq!(get("end_reason"), "fin");
    }

    #[test]
    fn iface_field_only_when_named_and_escaped() {
        let mut out = Vec::new();
        // Without a name: no field (records metered from files).
        let mut plain = RecordWriter::new(RecordFormat::Json, false);
        plain.write(&record(), &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert!(v.get("iface").is_none());
        assert!(!plain.field_names().contains(&"iface".to_string()));
        for name in ["eth0", "we\"ird\\na,me\u{1}", "ünï"] {
            out.clear();
            let mut w = RecordWriter::new(RecordFormat::Json, false).with_iface(name);
            w.write(&record(), &mut out);
            let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
            assert_eq!(v["iface"], name);
            let names = w.field_names();
            assert_eq!(v.as_object().unwrap().len(), names.len());
            assert_eq!(
                names[names.iter().position(|n| n == "vlan").unwrap() + 1],
                "iface"
            );
        }
        // CSV: the header gets the column, a name with a comma or quote is quoted.
        for (name, want) in [("eth1", "eth1"), ("a,b\"c", "\"a,b\"\"c\"")] {
            out.clear();
            let mut w = RecordWriter::new(RecordFormat::Csv, false).with_iface(name);
            w.write_header(&mut out);
            w.write(&record(), &mut out);
            let text = String::from_utf8(out.clone()).unwrap();
            let mut lines = text.lines();
            let header: Vec<&str> = lines.next().unwrap().split(',').collect();
            let row = lines.next().unwrap();
            let at = header.iter().position(|h| *h == "iface").unwrap();
            assert_eq!(header[at - 1], "vlan");
            let cells: Vec<&str> = row.splitn(at + 1, ',').collect();
            assert!(cells[at].starts_with(want), "{name}: {row}");
        }
        // A name longer than any interface's is cut, so the record still fits its buffer.
        out.clear();
        let mut w = RecordWriter::new(RecordFormat::Json, false).with_iface(&"\"".repeat(5000));
        w.write(&record(), &mut out);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["iface"].as_str().unwrap().len(), IFACE_CHARS);
    }
}
