//! trawl's flow records read back from Kafka messages: the value of a `kafka://` export
//! message (`docs/specs/kafka.md`), either a JSON object (a line of `trawl flows -o json`
//! without its newline) or a `trawl.FlowRecord` Protobuf message (`docs/specs/trawl.proto`).
//! The format is told from the first byte: `{` opens JSON, a Protobuf record opens with field
//! 1 (`src_ip`, tag byte 0x0a).
//!
//! A message of a `batch=` export holds many records ([`parse_each`]): JSON lines separated
//! by newlines, or `format=protobuf-delimited` records each after its length (a varint). A
//! delimited value cannot open with 0x0a (a record is longer than 10 bytes), and one that
//! opens with `{` (a record of 123 bytes) has the record's 0x0a next, which no JSON line
//! has. Avro's single-object marker `C3 01` is also the length of a 195-byte record: a value
//! is taken for Avro only when the marker is followed by the fingerprint of one of trawl's
//! published schemas.
use std::borrow::Cow;
use std::net::IpAddr;

use serde::Deserialize;
use trawl_flow::{
    App, AppLabel, AppSource, DirectionRecord, EndReason, FlowRecord, TunnelType, EARLY_PACKETS,
};

use crate::Error;

/// A record read from a message, with the fields a flow record has no room for (borrowed
/// from the message where they can be: no allocation per record).
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed<'a> {
    /// The flow record (no payload bytes).
    pub record: FlowRecord<'static>,
    /// The interface the record was metered on (`iface`), when the message names one.
    pub iface: Option<Cow<'a, str>>,
    /// The probe that sent it (Protobuf `probe`), when the message names one.
    pub probe: Option<Cow<'a, str>>,
}

impl Parsed<'_> {
    /// The interface name the record is stored under, in a flow database and in ClickHouse's
    /// `iface` column alike (so `trawl query` over either groups the same way): the record's
    /// `iface`, else its probe's name, else `default` (an empty name is none: a JSON record
    /// may write `"iface":""`, which Protobuf, leaving empty fields out, cannot).
    pub fn store_iface<'a>(&'a self, default: &'a str) -> &'a str {
        fn named<'s>(s: &'s Option<Cow<'_, str>>) -> Option<&'s str> {
            s.as_deref().filter(|s| !s.is_empty())
        }
        named(&self.iface)
            .or_else(|| named(&self.probe))
            .unwrap_or(default)
    }
}

/// What a topic holds: trawl's records (JSON or Protobuf), or GoFlow2's `FlowMessage`s.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TopicFormat {
    /// A `kafka://` export's records ([`parse`]).
    #[default]
    Trawl,
    /// `goflow2 -format=bin` ([`crate::goflow2::parse`]).
    GoFlow2,
}

impl TopicFormat {
    /// `trawl` or `goflow2`.
    pub fn from_name(s: &str) -> Option<TopicFormat> {
        match s {
            "trawl" => Some(TopicFormat::Trawl),
            "goflow2" => Some(TopicFormat::GoFlow2),
            _ => None,
        }
    }

    /// Reads one message value of a topic of this format.
    pub fn parse(self, value: &[u8]) -> Result<Parsed<'_>, Error> {
        match self {
            TopicFormat::Trawl => parse(value),
            TopicFormat::GoFlow2 => crate::goflow2::parse(value),
        }
    }

    /// Reads every record of one message value ([`parse_each`] for trawl's): `f` gets each
    /// record or the error of each record that is not one.
    pub fn parse_each(self, value: &[u8], f: &mut dyn FnMut(Result<Parsed<'_>, Error>)) {
        match self {
            TopicFormat::Trawl => parse_each(value, f),
            TopicFormat::GoFlow2 => f(crate::goflow2::parse(value)),
        }
    }
}

/// Reads every record of one message value: one (as [`parse`]), or the many of a batched
/// message (JSON lines; delimited Protobuf). A bad JSON line is an error of its own and the
/// others are read; a delimited record whose length runs past the end ends the message (the
/// rest cannot be framed).
pub fn parse_each(value: &[u8], f: &mut dyn FnMut(Result<Parsed<'_>, Error>)) {
    match value {
        [b'{', second, ..] if *second != 0x0a => {
            for line in value.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
                f(parse_json(line));
            }
        }
        [] | [0x0a, ..] => f(parse(value)),
        _ if is_avro(value) => f(parse(value)),
        _ => {
            let mut w = Wire::new(value);
            while w.at < value.len() {
                let at = w.at;
                let len = w.varint().map(|n| n as usize);
                match len.and_then(|n| w.take(n)) {
                    Ok(record) => f(parse_protobuf(record)),
                    Err(e) => {
                        let why = match e {
                            Error::BadMessage(m) => m,
                            other => other.to_string(),
                        };
                        f(Err(bad(format!(
                            "delimited Protobuf, the record at byte {at}: {why}"
                        ))));
                        return;
                    }
                }
            }
        }
    }
}

/// Whether `value` opens with the single-object header (`C3 01` and the fingerprint) of one of
/// trawl's Avro schemas (`format=avro`).
fn is_avro(value: &[u8]) -> bool {
    use trawl_export::avro::{alarm_schema, flow_schema, series_schema};
    [flow_schema(), series_schema(), alarm_schema()]
        .iter()
        .any(|s| value.starts_with(&s.header))
}

/// Reads one message value (JSON or Protobuf, told by its first byte).
pub fn parse(value: &[u8]) -> Result<Parsed<'_>, Error> {
    match value.first() {
        Some(b'{') => parse_json(value),
        // Avro's single-object marker: `format=avro` is for readers other than trawl.
        Some(0xc3) if is_avro(value) => Err(bad(
            "an Avro message (format=avro): trawl's consumers read JSON and Protobuf",
        )),
        Some(_) => parse_protobuf(value),
        None => Err(Error::BadMessage("an empty message".into())),
    }
}

/// Declares the JSON object's fields (`docs/specs/flow-record.md`) with the per-direction
/// statistics of both directions (`fwd_len_min`, `rev_len_min`, ...), each defaulting to zero.
/// Fields trawl does not know are ignored, so records of a newer trawl still load.
macro_rules! json_record {
    ($($f:ident $r:ident: $t:ty => $field:ident),* $(,)?) => {
        #[derive(Deserialize)]
        struct JsonRecord<'a> {
            #[serde(borrow)]
            src_ip: Cow<'a, str>,
            #[serde(borrow)]
            dst_ip: Cow<'a, str>,
            #[serde(default)]
            src_port: u16,
            #[serde(default)]
            dst_port: u16,
            #[serde(borrow)]
            proto: Cow<'a, str>,
            #[serde(default)]
            vlan: u16,
            #[serde(default, borrow)]
            iface: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            probe: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            src_mac: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            dst_mac: Option<Cow<'a, str>>,
            first_ns: u64,
            last_ns: u64,
            #[serde(default)]
            fwd_packets: u64,
            #[serde(default)]
            rev_packets: u64,
            #[serde(default)]
            fwd_bytes: u64,
            #[serde(default)]
            rev_bytes: u64,
            #[serde(default)]
            fwd_ip_bytes: u64,
            #[serde(default)]
            rev_ip_bytes: u64,
            $(#[serde(default)] $f: $t, #[serde(default)] $r: $t,)*
            #[serde(default)]
            first_lengths: Vec<i64>,
            #[serde(default)]
            first_iats_ns: Vec<i64>,
            #[serde(default, borrow)]
            end_reason: Option<Cow<'a, str>>,
            // The TCP round trips (`standard` and `full` records): null when not measured.
            #[serde(default)]
            fwd_rtt_handshake_ns: Option<u64>,
            #[serde(default)]
            rev_rtt_handshake_ns: Option<u64>,
            #[serde(default)]
            fwd_rtt_samples: u32,
            #[serde(default)]
            rev_rtt_samples: u32,
            #[serde(default)]
            fwd_rtt_min_ns: Option<u64>,
            #[serde(default)]
            rev_rtt_min_ns: Option<u64>,
            #[serde(default)]
            fwd_rtt_mean_ns: Option<f64>,
            #[serde(default)]
            rev_rtt_mean_ns: Option<f64>,
            #[serde(default)]
            fwd_rtt_max_ns: Option<u64>,
            #[serde(default)]
            rev_rtt_max_ns: Option<u64>,
            // The application label, tunnel, collected and enrichment fields (present only
            // when the record has them, or null).
            #[serde(default, borrow)]
            app: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            app_source: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            tunnel_type: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            tunnel_src: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            tunnel_dst: Option<Cow<'a, str>>,
            #[serde(default)]
            tunnel_id: Option<u32>,
            #[serde(default)]
            sampling_rate: u32,
            #[serde(default, borrow)]
            agent: Option<Cow<'a, str>>,
            #[serde(default)]
            in_if: u32,
            #[serde(default)]
            out_if: u32,
            #[serde(default)]
            src_as: u32,
            #[serde(default)]
            dst_as: u32,
            #[serde(default, borrow)]
            src_country: Option<Cow<'a, str>>,
            #[serde(default, borrow)]
            dst_country: Option<Cow<'a, str>>,
        }

        impl JsonRecord<'_> {
            fn fill(&self, fwd: &mut DirectionRecord, rev: &mut DirectionRecord) {
                $(fwd.$field = self.$f as _; rev.$field = self.$r as _;)*
                fwd.rtt_handshake_ns = self.fwd_rtt_handshake_ns;
                rev.rtt_handshake_ns = self.rev_rtt_handshake_ns;
                fwd.rtt_samples = self.fwd_rtt_samples;
                rev.rtt_samples = self.rev_rtt_samples;
                fwd.rtt_min_ns = self.fwd_rtt_min_ns.unwrap_or(0);
                rev.rtt_min_ns = self.rev_rtt_min_ns.unwrap_or(0);
                fwd.rtt_mean_ns = self.fwd_rtt_mean_ns.unwrap_or(0.0);
                rev.rtt_mean_ns = self.rev_rtt_mean_ns.unwrap_or(0.0);
                fwd.rtt_max_ns = self.fwd_rtt_max_ns.unwrap_or(0);
                rev.rtt_max_ns = self.rev_rtt_max_ns.unwrap_or(0);
            }
        }
    };
}

json_record! {
    fwd_len_min rev_len_min: u32 => len_min,
    fwd_len_max rev_len_max: u32 => len_max,
    fwd_len_mean rev_len_mean: f64 => len_mean,
    fwd_len_std rev_len_std: f64 => len_std,
    fwd_iat_min_ns rev_iat_min_ns: u64 => iat_min_ns,
    fwd_iat_max_ns rev_iat_max_ns: u64 => iat_max_ns,
    fwd_iat_mean_ns rev_iat_mean_ns: f64 => iat_mean_ns,
    fwd_iat_std_ns rev_iat_std_ns: f64 => iat_std_ns,
    fwd_syn rev_syn: u32 => syn,
    fwd_syn_ack rev_syn_ack: u32 => syn_ack,
    fwd_fin rev_fin: u32 => fin,
    fwd_rst rev_rst: u32 => rst,
    fwd_psh rev_psh: u32 => psh,
    fwd_urg rev_urg: u32 => urg,
    fwd_ece rev_ece: u32 => ece,
    fwd_cwr rev_cwr: u32 => cwr,
    fwd_tcp_flags rev_tcp_flags: u8 => tcp_flags,
    fwd_zero_window rev_zero_window: u32 => zero_window,
    fwd_retrans rev_retrans: u32 => retransmissions,
}

fn bad(what: impl Into<String>) -> Error {
    Error::BadMessage(what.into())
}

fn ip(field: &str, s: &str) -> Result<IpAddr, Error> {
    s.parse()
        .map_err(|_| bad(format!("`{field}` {s:?} is not an IP address")))
}

fn mac(field: &str, s: &str) -> Result<[u8; 6], Error> {
    let mut out = [0u8; 6];
    let mut parts = s.split(':');
    for b in &mut out {
        let p = parts.next().unwrap_or("");
        *b = u8::from_str_radix(p, 16)
            .map_err(|_| bad(format!("`{field}` {s:?} is not a MAC address")))?;
    }
    if parts.next().is_some() {
        return Err(bad(format!("`{field}` {s:?} is not a MAC address")));
    }
    Ok(out)
}

/// A protocol as the JSON lines write it: a name trawl knows, or the number.
pub fn proto_number(s: &str) -> Option<u8> {
    if let Ok(n) = s.parse() {
        return Some(n);
    }
    (0..=255u8).find(|p| trawl_flow::ProtoName(*p).name() == Some(s))
}

/// An end reason by its name.
pub fn end_reason(s: &str) -> Option<EndReason> {
    EndReason::ALL.into_iter().find(|r| r.name() == s)
}

fn early(field: &str, v: &[i64]) -> Result<[i64; EARLY_PACKETS], Error> {
    if v.len() > EARLY_PACKETS {
        return Err(bad(format!(
            "`{field}` has {} entries, at most {EARLY_PACKETS}",
            v.len()
        )));
    }
    let mut out = [0; EARLY_PACKETS];
    out[..v.len()].copy_from_slice(v);
    Ok(out)
}

fn parse_json(value: &[u8]) -> Result<Parsed<'_>, Error> {
    let j: JsonRecord<'_> =
        serde_json::from_slice(value).map_err(|e| bad(format!("JSON record: {e}")))?;
    let proto = proto_number(&j.proto)
        .ok_or_else(|| bad(format!("`proto` {:?} is no protocol", j.proto)))?;
    let mut fwd = DirectionRecord {
        packets: j.fwd_packets,
        bytes: j.fwd_bytes,
        ip_bytes: j.fwd_ip_bytes,
        ..DirectionRecord::default()
    };
    let mut rev = DirectionRecord {
        packets: j.rev_packets,
        bytes: j.rev_bytes,
        ip_bytes: j.rev_ip_bytes,
        ..DirectionRecord::default()
    };
    j.fill(&mut fwd, &mut rev);
    if j.first_lengths.len() != j.first_iats_ns.len() {
        return Err(bad("`first_lengths` and `first_iats_ns` differ in length"));
    }
    let record = FlowRecord {
        src_ip: ip("src_ip", &j.src_ip)?,
        dst_ip: ip("dst_ip", &j.dst_ip)?,
        src_port: j.src_port,
        dst_port: j.dst_port,
        proto,
        vlan: j.vlan,
        tunnel: Default::default(),
        src_mac: j.src_mac.map_or(Ok([0; 6]), |m| mac("src_mac", &m))?,
        dst_mac: j.dst_mac.map_or(Ok([0; 6]), |m| mac("dst_mac", &m))?,
        first_ns: j.first_ns,
        last_ns: j.last_ns,
        fwd,
        rev,
        first_lengths: early("first_lengths", &j.first_lengths)?,
        first_iats_ns: early("first_iats_ns", &j.first_iats_ns)?,
        first_count: j.first_lengths.len(),
        fwd_payload: &[],
        rev_payload: &[],
        end_reason: match j.end_reason.as_deref() {
            None => EndReason::End,
            Some(s) => end_reason(s).ok_or_else(|| bad(format!("`end_reason` {s:?}")))?,
        },
        extra: trawl_flow::RecordExtra {
            sampling_rate: j.sampling_rate,
            agent: j.agent.as_deref().map(|a| ip("agent", a)).transpose()?,
            in_if: j.in_if,
            out_if: j.out_if,
            src_as: j.src_as,
            dst_as: j.dst_as,
            src_country: country("src_country", j.src_country.as_deref().unwrap_or(""))?,
            dst_country: country("dst_country", j.dst_country.as_deref().unwrap_or(""))?,
            ..Default::default()
        },
        app: label(
            j.app.as_deref().and_then(App::from_name),
            j.app_source.as_deref().and_then(AppSource::from_name),
        ),
    };
    let mut record = record;
    if let Some(kind) = j.tunnel_type.as_deref() {
        record.tunnel.kind = TunnelType::from_name(kind);
        if let Some(a) = j.tunnel_src.as_deref() {
            record.tunnel.set_addr(true, ip("tunnel_src", a)?);
        }
        if let Some(a) = j.tunnel_dst.as_deref() {
            record.tunnel.set_addr(false, ip("tunnel_dst", a)?);
        }
        record.tunnel.id = j.tunnel_id.unwrap_or(0);
    }
    Ok(Parsed {
        record,
        iface: j.iface,
        probe: j.probe,
    })
}

/// Reads Protobuf wire format: varints, fixed64, length-delimited; fixed32 skipped.
pub(crate) struct Wire<'a> {
    b: &'a [u8],
    at: usize,
}

pub(crate) enum Item<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Skip,
}

impl<'a> Wire<'a> {
    pub(crate) fn new(b: &'a [u8]) -> Wire<'a> {
        Wire { b, at: 0 }
    }

    /// The varint at the start and where it ends, if the value opens with one.
    pub(crate) fn varint_at_start(&mut self) -> Option<(u64, usize)> {
        self.at = 0;
        let v = self.varint().ok()?;
        Some((v, self.at))
    }

    fn varint(&mut self) -> Result<u64, Error> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.b.get(self.at) else {
                return Err(bad(format!(
                    "Protobuf: a varint cut short at byte {}",
                    self.at
                )));
            };
            self.at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Ok(v);
            }
        }
        Err(bad(format!(
            "Protobuf: a varint too long at byte {}",
            self.at
        )))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let Some(end) = end else {
            return Err(bad(format!(
                "Protobuf: a field of {n} bytes at byte {} runs past the end ({})",
                self.at,
                self.b.len()
            )));
        };
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    pub(crate) fn next(&mut self) -> Result<Option<(u32, Item<'a>)>, Error> {
        if self.at >= self.b.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = (key >> 3) as u32;
        let item = match key & 7 {
            0 => Item::Varint(self.varint()?),
            1 => Item::Fixed64(u64::from_le_bytes(
                self.take(8)?.try_into().unwrap_or([0; 8]),
            )),
            2 => {
                let n = self.varint()? as usize;
                Item::Bytes(self.take(n)?)
            }
            5 => {
                self.take(4)?;
                Item::Skip
            }
            w => {
                return Err(bad(format!(
                    "Protobuf: wire type {w} of field {field} at byte {}",
                    self.at
                )))
            }
        };
        Ok(Some((field, item)))
    }
}

fn text(field: u32, b: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(b).map_err(|_| bad(format!("Protobuf: field {field} is not UTF-8")))
}

/// Packed sint64 values into `out`; returns how many.
fn zigzag_list(field: u32, b: &[u8], out: &mut [i64; EARLY_PACKETS]) -> Result<usize, Error> {
    let mut w = Wire { b, at: 0 };
    let mut n = 0;
    while w.at < b.len() {
        let v = w.varint()?;
        let slot = out.get_mut(n).ok_or_else(|| {
            bad(format!(
                "Protobuf: field {field} has more than {EARLY_PACKETS} entries"
            ))
        })?;
        *slot = (v >> 1) as i64 ^ -((v & 1) as i64);
        n += 1;
    }
    Ok(n)
}

/// One direction's field (fields 18-36 forward, 37-55 reverse, in `pb.rs`'s order).
fn direction_field(d: &mut DirectionRecord, i: u32, item: &Item<'_>) {
    let v = match item {
        Item::Varint(v) => *v,
        Item::Fixed64(bits) => {
            let f = f64::from_bits(*bits);
            match i {
                2 => d.len_mean = f,
                3 => d.len_std = f,
                6 => d.iat_mean_ns = f,
                7 => d.iat_std_ns = f,
                _ => {}
            }
            return;
        }
        _ => return,
    };
    let n = v as u32;
    match i {
        0 => d.len_min = n,
        1 => d.len_max = n,
        4 => d.iat_min_ns = v,
        5 => d.iat_max_ns = v,
        8 => d.syn = n,
        9 => d.syn_ack = n,
        10 => d.fin = n,
        11 => d.rst = n,
        12 => d.psh = n,
        13 => d.urg = n,
        14 => d.ece = n,
        15 => d.cwr = n,
        16 => d.tcp_flags = v as u8,
        17 => d.zero_window = n,
        18 => d.retransmissions = n,
        _ => {}
    }
}

/// Fields 65-68 (`fwd_`) or 69-72 (`rev_`): round-trip samples, min, max, mean.
fn rtt_field(d: &mut DirectionRecord, i: u32, item: &Item<'_>) {
    match (i, item) {
        (0, Item::Varint(v)) => d.rtt_samples = *v as u32,
        (1, Item::Varint(v)) => d.rtt_min_ns = *v,
        (2, Item::Varint(v)) => d.rtt_max_ns = *v,
        (3, Item::Fixed64(bits)) => d.rtt_mean_ns = f64::from_bits(*bits),
        _ => {}
    }
}

/// A country code: two ASCII letters (or empty: not known).
fn country(field: &str, s: &str) -> Result<[u8; 2], Error> {
    trawl_flow::RecordExtra::parse_country(s)
        .ok_or_else(|| bad(format!("`{field}` {s:?} is not a country code")))
}

/// The application label of `app` and `app_source` (none without both).
fn label(app: Option<App>, source: Option<AppSource>) -> Option<AppLabel> {
    Some(AppLabel {
        app: app?,
        source: source?,
    })
}

fn parse_protobuf(value: &[u8]) -> Result<Parsed<'_>, Error> {
    let mut r = FlowRecord::empty();
    let (mut iface, mut probe) = (None, None);
    let (mut lengths, mut iats) = (0, 0);
    let (mut app, mut app_source) = (None, None);
    let mut w = Wire { b: value, at: 0 };
    let mut seen_src = false;
    while let Some((field, item)) = w.next()? {
        match (field, &item) {
            (1, Item::Bytes(b)) => {
                r.src_ip = ip("src_ip", text(1, b)?)?;
                seen_src = true;
            }
            (2, Item::Bytes(b)) => r.dst_ip = ip("dst_ip", text(2, b)?)?,
            (3, Item::Varint(v)) => r.src_port = *v as u16,
            (4, Item::Varint(v)) => r.dst_port = *v as u16,
            (5, Item::Varint(v)) => r.proto = *v as u8,
            (6, Item::Varint(v)) => r.vlan = *v as u16,
            (7, Item::Bytes(b)) => iface = Some(Cow::Borrowed(text(7, b)?)),
            (8, Item::Bytes(b)) => r.src_mac = mac("src_mac", text(8, b)?)?,
            (9, Item::Bytes(b)) => r.dst_mac = mac("dst_mac", text(9, b)?)?,
            (10, Item::Varint(v)) => r.first_ns = *v,
            (11, Item::Varint(v)) => r.last_ns = *v,
            (12, Item::Varint(v)) => r.fwd.packets = *v,
            (13, Item::Varint(v)) => r.rev.packets = *v,
            (14, Item::Varint(v)) => r.fwd.bytes = *v,
            (15, Item::Varint(v)) => r.rev.bytes = *v,
            (16, Item::Varint(v)) => r.fwd.ip_bytes = *v,
            (17, Item::Varint(v)) => r.rev.ip_bytes = *v,
            (18..=36, _) => direction_field(&mut r.fwd, field - 18, &item),
            (37..=55, _) => direction_field(&mut r.rev, field - 37, &item),
            (56, Item::Bytes(b)) => lengths = zigzag_list(56, b, &mut r.first_lengths)?,
            (57, Item::Bytes(b)) => iats = zigzag_list(57, b, &mut r.first_iats_ns)?,
            (58, Item::Bytes(b)) => {
                let s = text(58, b)?;
                r.end_reason = end_reason(s).ok_or_else(|| bad(format!("`end_reason` {s:?}")))?;
            }
            (59, Item::Bytes(b)) => probe = Some(Cow::Borrowed(text(59, b)?)),
            (61, Item::Bytes(b)) => app = App::from_name(text(61, b)?),
            (62, Item::Bytes(b)) => app_source = AppSource::from_name(text(62, b)?),
            (63, Item::Varint(v)) => r.fwd.rtt_handshake_ns = Some(*v),
            (64, Item::Varint(v)) => r.rev.rtt_handshake_ns = Some(*v),
            (65..=68, _) => rtt_field(&mut r.fwd, field - 65, &item),
            (69..=72, _) => rtt_field(&mut r.rev, field - 69, &item),
            (73, Item::Bytes(b)) => r.tunnel.kind = TunnelType::from_name(text(73, b)?),
            (74, Item::Bytes(b)) => r.tunnel.set_addr(true, ip("tunnel_src", text(74, b)?)?),
            (75, Item::Bytes(b)) => r.tunnel.set_addr(false, ip("tunnel_dst", text(75, b)?)?),
            (76, Item::Varint(v)) => r.tunnel.id = *v as u32,
            (77, Item::Varint(v)) => r.extra.sampling_rate = *v as u32,
            (78, Item::Bytes(b)) => r.extra.agent = Some(ip("agent", text(78, b)?)?),
            (79, Item::Varint(v)) => r.extra.in_if = *v as u32,
            (80, Item::Varint(v)) => r.extra.out_if = *v as u32,
            (81, Item::Varint(v)) => r.extra.src_as = *v as u32,
            (82, Item::Varint(v)) => r.extra.dst_as = *v as u32,
            (83, Item::Bytes(b)) => r.extra.src_country = country("src_country", text(83, b)?)?,
            (84, Item::Bytes(b)) => r.extra.dst_country = country("dst_country", text(84, b)?)?,
            // Fields of a newer trawl.proto.
            _ => {}
        }
    }
    if !seen_src {
        // proto3 leaves out empty strings, but a record always has an address: whatever
        // this is, it is not a trawl.FlowRecord.
        return Err(bad(
            "Protobuf: no `src_ip` (field 1): not a trawl.FlowRecord",
        ));
    }
    if lengths != iats {
        return Err(bad("`first_lengths` and `first_iats_ns` differ in length"));
    }
    r.first_count = lengths;
    r.app = label(app, app_source);
    Ok(Parsed {
        record: r,
        iface,
        probe,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = r#"{"src_ip":"10.0.0.1","dst_ip":"2001:db8::2","src_port":1234,"dst_port":53,"proto":"udp","vlan":7,"iface":"eth0","src_mac":"00:11:22:33:44:55","dst_mac":"66:77:88:99:aa:bb","first_ns":1700000000000000001,"last_ns":1700000000500000000,"fwd_packets":2,"rev_packets":1,"fwd_bytes":200,"rev_bytes":90,"fwd_ip_bytes":172,"rev_ip_bytes":76,"fwd_len_min":90,"fwd_len_max":110,"fwd_len_mean":100.5,"fwd_len_std":10,"fwd_iat_min_ns":5,"fwd_iat_max_ns":5,"fwd_iat_mean_ns":5,"fwd_iat_std_ns":0,"fwd_syn":0,"fwd_syn_ack":0,"fwd_fin":0,"fwd_rst":0,"fwd_psh":0,"fwd_urg":0,"fwd_ece":0,"fwd_cwr":0,"fwd_tcp_flags":0,"fwd_zero_window":0,"fwd_retrans":3,"rev_len_min":90,"first_lengths":[90,-90,110],"first_iats_ns":[0,-2,3],"end_reason":"idle"}"#;

    #[test]
    fn parse_json_line() {
        let p = parse(LINE.as_bytes()).unwrap();
        let r = &p.record;
        assert_eq!(r.src_ip.to_string(), "10.0.0.1");
        assert_eq!(r.dst_ip.to_string(), "2001:db8::2");
        assert_eq!((r.src_port, r.dst_port, r.proto, r.vlan), (1234, 53, 17, 7));
        assert_eq!(r.src_mac, [0, 0x11, 0x22, 0x33, 0x44, 0x55]);
        assert_eq!(r.fwd.len_mean, 100.5);
        assert_eq!(r.fwd.retransmissions, 3);
        assert_eq!(r.rev.len_min, 90);
        assert_eq!(&r.first_lengths[..r.first_count], &[90, -90, 110]);
        assert_eq!(r.end_reason, EndReason::Idle);
        assert_eq!(p.iface.as_deref(), Some("eth0"));
        assert_eq!(p.store_iface("dflt"), "eth0");
    }

    /// An empty `iface` names no interface: the probe's name comes next, as for a Protobuf
    /// record (which cannot carry an empty field), then the default.
    #[test]
    fn store_iface_skips_empty_names() {
        let line = |extra: &str| {
            format!(
                r#"{{{extra}"src_ip":"10.0.0.1","dst_ip":"10.0.0.2","proto":"udp","first_ns":1,"last_ns":2}}"#
            )
        };
        let p = |l: &str| parse(l.as_bytes()).unwrap().store_iface("dflt").to_string();
        assert_eq!(p(&line(r#""iface":"","probe":"p1","#)), "p1");
        assert_eq!(p(&line(r#""iface":"","probe":"","#)), "dflt");
        assert_eq!(p(&line(r#""iface":"e1","probe":"p1","#)), "e1");
        assert_eq!(p(&line("")), "dflt");
    }

    fn ports(value: &[u8]) -> Vec<Result<u16, String>> {
        let mut got = Vec::new();
        parse_each(value, &mut |p| {
            got.push(p.map(|p| p.record.src_port).map_err(|e| e.to_string()))
        });
        got
    }

    /// Batched messages: JSON lines each read (a bad one an error of its own), delimited
    /// Protobuf records each read, also when the first one's length is `{` (123) or Avro's
    /// marker `C3 01` (195: `trawl clickhouse load` refused a bench's message as Avro).
    #[test]
    fn parse_each_splits_batched_messages() {
        let other = LINE.replace("\"src_port\":1234", "\"src_port\":1235");
        let value = format!("{LINE}\n{{\"src_ip\":\"x\"}}\n{other}");
        let got = ports(value.as_bytes());
        assert_eq!(got.len(), 3, "{got:?}");
        assert_eq!((&got[0], &got[2]), (&Ok(1234), &Ok(1235)));
        assert!(
            got[1].as_ref().unwrap_err().contains("JSON record"),
            "{got:?}"
        );
        // A single record, as before.
        assert_eq!(ports(LINE.as_bytes()), [Ok(1234)]);

        // A small record, so that a probe name can bring it to 123 bytes.
        let mut r = trawl_export::decode::empty_record();
        (r.src_ip, r.dst_ip) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        (r.src_port, r.proto) = (1234, 6);
        let mut value = Vec::new();
        let probe = (1..200)
            .map(|n| "p".repeat(n))
            .find(|p| {
                value.clear();
                trawl_export::pb::encode_flow_delimited(&r, None, p, &mut value);
                value[0] == b'{'
            })
            .expect("a probe name that makes the record 123 bytes long");
        let mut single = Vec::new();
        trawl_export::pb::encode_flow(&r, None, &probe, &mut single);
        assert_eq!(ports(&single), [Ok(1234)]);
        r.src_port = 7;
        trawl_export::pb::encode_flow_delimited(&r, Some("eth1"), "p", &mut value);
        assert_eq!(ports(&value), [Ok(1234), Ok(7)]);
        let mut avro_like = Vec::new();
        let mut r195 = r;
        r195.src_port = 1234;
        (1..300)
            .map(|n| "p".repeat(n))
            .find(|p| {
                avro_like.clear();
                trawl_export::pb::encode_flow_delimited(&r195, None, p, &mut avro_like);
                avro_like.starts_with(&[0xc3, 0x01])
            })
            .expect("a probe name that makes the record 195 bytes long");
        trawl_export::pb::encode_flow_delimited(&r, None, "p", &mut avro_like);
        assert_eq!(ports(&avro_like), [Ok(1234), Ok(7)]);
        // A real Avro message is still named as one.
        let avro = [&trawl_export::avro::flow_schema().header[..], &[0, 1, 2]].concat();
        let e = ports(&avro);
        assert!(
            e[0].as_ref().unwrap_err().contains("an Avro message"),
            "{e:?}"
        );
        // A length past the end: an error, and the end of the message.
        value.extend_from_slice(&[100, 0x0a, 1]);
        let got = ports(&value);
        assert_eq!(got.len(), 3, "{got:?}");
        let e = got[2].as_ref().unwrap_err();
        assert!(e.contains("delimited Protobuf, the record at byte"), "{e}");
    }

    #[test]
    fn truncated_and_garbage_are_errors_naming_the_field() {
        assert!(parse(b"").is_err());
        let e =
            parse(br#"{"src_ip":"x","dst_ip":"1.1.1.1","proto":"tcp","first_ns":1,"last_ns":1}"#)
                .unwrap_err()
                .to_string();
        assert!(e.contains("src_ip"), "{e}");
        let e = parse(b"\x0a\x20short").unwrap_err().to_string();
        assert!(e.contains("runs past the end"), "{e}");
        assert!(parse(b"\x08\x01").is_err(), "no src_ip");
    }
}
