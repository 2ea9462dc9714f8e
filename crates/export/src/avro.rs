//! Flow records, per-second series rows and alarms as Avro (`format=avro` of a `kafka://`
//! destination, `docs/specs/kafka.md`): Avro's *single-object encoding* (Avro 1.8+): the two
//! bytes `C3 01`, the schema's 8-byte CRC-64-AVRO (Rabin) fingerprint, little-endian, then
//! the record in Avro's binary encoding. No schema registry is needed: a reader finds the
//! schema by its fingerprint among the published ones (`docs/specs/avro/*.avsc`, each in
//! Parsing Canonical Form, which is what the fingerprint is taken of).
//!
//! Hand-written, as the Protobuf encoder is: the fields are those of the JSON lines with
//! their names; unsigned counters are Avro `long` (no counter reaches 2^63), addresses and
//! MACs their text, `first_lengths`/`first_iats_ns` arrays of `long`.
use std::fmt::Write as _;
use std::sync::OnceLock;

use trawl_flow::{DirectionRecord, FlowRecord};
use trawl_series::SeriesRow;

use crate::exporter::Alarm;

/// An Avro type of a field.
#[derive(Clone, Copy)]
enum Ty {
    Long,
    Double,
    Str,
    LongArray,
    /// `["null","long"]`, and the same for the others: a field a record may not have.
    OptLong,
    OptDouble,
    OptStr,
}

impl Ty {
    fn canonical(self) -> &'static str {
        match self {
            Ty::Long => "\"long\"",
            Ty::Double => "\"double\"",
            Ty::Str => "\"string\"",
            Ty::LongArray => "{\"type\":\"array\",\"items\":\"long\"}",
            Ty::OptLong => "[\"null\",\"long\"]",
            Ty::OptDouble => "[\"null\",\"double\"]",
            Ty::OptStr => "[\"null\",\"string\"]",
        }
    }
}

/// One direction's statistics, after `fwd_`/`rev_` (the JSON lines' names and order).
const DIRECTION: [(&str, Ty); 19] = [
    ("len_min", Ty::Long),
    ("len_max", Ty::Long),
    ("len_mean", Ty::Double),
    ("len_std", Ty::Double),
    ("iat_min_ns", Ty::Long),
    ("iat_max_ns", Ty::Long),
    ("iat_mean_ns", Ty::Double),
    ("iat_std_ns", Ty::Double),
    ("syn", Ty::Long),
    ("syn_ack", Ty::Long),
    ("fin", Ty::Long),
    ("rst", Ty::Long),
    ("psh", Ty::Long),
    ("urg", Ty::Long),
    ("ece", Ty::Long),
    ("cwr", Ty::Long),
    ("tcp_flags", Ty::Long),
    ("zero_window", Ty::Long),
    ("retrans", Ty::Long),
];

/// The fields of `trawl.FlowRecord`, in order.
fn flow_fields() -> Vec<(String, Ty)> {
    let mut f: Vec<(String, Ty)> = [
        ("src_ip", Ty::Str),
        ("dst_ip", Ty::Str),
        ("src_port", Ty::Long),
        ("dst_port", Ty::Long),
        ("proto", Ty::Long),
        ("vlan", Ty::Long),
        ("iface", Ty::Str),
        ("src_mac", Ty::Str),
        ("dst_mac", Ty::Str),
        ("first_ns", Ty::Long),
        ("last_ns", Ty::Long),
        ("fwd_packets", Ty::Long),
        ("rev_packets", Ty::Long),
        ("fwd_bytes", Ty::Long),
        ("rev_bytes", Ty::Long),
        ("fwd_ip_bytes", Ty::Long),
        ("rev_ip_bytes", Ty::Long),
    ]
    .iter()
    .map(|(n, t)| (n.to_string(), *t))
    .collect();
    for dir in ["fwd", "rev"] {
        f.extend(DIRECTION.iter().map(|(n, t)| (format!("{dir}_{n}"), *t)));
    }
    f.extend([
        ("first_lengths".to_string(), Ty::LongArray),
        ("first_iats_ns".to_string(), Ty::LongArray),
        ("end_reason".to_string(), Ty::Str),
        ("probe".to_string(), Ty::Str),
        // Last, as in the JSON and Protobuf forms: Community ID v1 (`1:` + base64).
        ("community_id".to_string(), Ty::Str),
    ]);
    // Added for issues 22/23, in the order of trawl.proto's fields 61-84: null (or 0, "")
    // when the record has none, as in the JSON lines.
    f.extend(
        [
            ("app", Ty::OptStr),
            ("app_source", Ty::OptStr),
            ("fwd_rtt_handshake_ns", Ty::OptLong),
            ("rev_rtt_handshake_ns", Ty::OptLong),
        ]
        .map(|(n, t)| (n.to_string(), t)),
    );
    for dir in ["fwd", "rev"] {
        f.extend(
            [
                ("rtt_samples", Ty::Long),
                ("rtt_min_ns", Ty::OptLong),
                ("rtt_max_ns", Ty::OptLong),
                ("rtt_mean_ns", Ty::OptDouble),
            ]
            .map(|(n, t)| (format!("{dir}_{n}"), t)),
        );
    }
    f.extend(
        [
            ("tunnel_type", Ty::OptStr),
            ("tunnel_src", Ty::OptStr),
            ("tunnel_dst", Ty::OptStr),
            ("tunnel_id", Ty::OptLong),
            ("sampling_rate", Ty::Long),
            ("agent", Ty::OptStr),
            ("in_if", Ty::Long),
            ("out_if", Ty::Long),
            ("src_as", Ty::Long),
            ("dst_as", Ty::Long),
            ("src_country", Ty::Str),
            ("dst_country", Ty::Str),
        ]
        .map(|(n, t)| (n.to_string(), t)),
    );
    f
}

const SERIES_FIELDS: [&str; 9] = [
    "second",
    "packets",
    "bytes",
    "active_flows",
    "new_flows",
    "in_packets",
    "in_bytes",
    "out_packets",
    "out_bytes",
];

fn series_fields() -> Vec<(String, Ty)> {
    let mut f: Vec<(String, Ty)> = SERIES_FIELDS
        .iter()
        .map(|n| (n.to_string(), Ty::Long))
        .collect();
    f.push(("probe".into(), Ty::Str));
    f
}

fn alarm_fields() -> Vec<(String, Ty)> {
    [
        ("ts_ns", Ty::Long),
        ("detector", Ty::Str),
        ("event", Ty::Str),
        ("json", Ty::Str),
        ("probe", Ty::Str),
    ]
    .iter()
    .map(|(n, t)| (n.to_string(), *t))
    .collect()
}

/// A record schema in Parsing Canonical Form (Avro specification, "Schema Resolution":
/// full name, no namespace or doc, keys in the order name, type, fields).
fn canonical(name: &str, fields: &[(String, Ty)]) -> String {
    let mut s = format!("{{\"name\":\"{name}\",\"type\":\"record\",\"fields\":[");
    for (i, (n, t)) in fields.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        let _ = write!(s, "{{\"name\":\"{n}\",\"type\":{}}}", t.canonical());
    }
    s.push_str("]}");
    s
}

/// The CRC-64-AVRO (Rabin) fingerprint of `bytes` (Avro specification, "Schema
/// Fingerprints").
pub fn fingerprint(bytes: &[u8]) -> u64 {
    const EMPTY: u64 = 0xc15d_213a_a4d7_a795;
    static TABLE: OnceLock<[u64; 256]> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u64; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut fp = i as u64;
            for _ in 0..8 {
                fp = (fp >> 1) ^ (EMPTY & (fp & 1).wrapping_neg());
            }
            *slot = fp;
        }
        t
    });
    bytes.iter().fold(EMPTY, |fp, &b| {
        (fp >> 8) ^ table[((fp ^ u64::from(b)) & 0xff) as usize]
    })
}

/// A published schema: its canonical form and the single-object header.
pub struct Schema {
    /// Parsing Canonical Form (the `.avsc` file of `docs/specs/avro/`).
    pub canonical: String,
    /// `C3 01` and the fingerprint.
    pub header: [u8; 10],
}

fn schema(name: &str, fields: &[(String, Ty)]) -> Schema {
    let canonical = canonical(name, fields);
    let mut header = [0u8; 10];
    header[0] = 0xc3;
    header[1] = 0x01;
    header[2..].copy_from_slice(&fingerprint(canonical.as_bytes()).to_le_bytes());
    Schema { canonical, header }
}

/// `trawl.FlowRecord`.
pub fn flow_schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| schema("trawl.FlowRecord", &flow_fields()))
}

/// `trawl.SeriesRow`.
pub fn series_schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| schema("trawl.SeriesRow", &series_fields()))
}

/// `trawl.Alarm`.
pub fn alarm_schema() -> &'static Schema {
    static S: OnceLock<Schema> = OnceLock::new();
    S.get_or_init(|| schema("trawl.Alarm", &alarm_fields()))
}

fn long(v: i64, out: &mut Vec<u8>) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

fn ulong(v: u64, out: &mut Vec<u8>) {
    long(v.min(i64::MAX as u64) as i64, out);
}

fn double(v: f64, out: &mut Vec<u8>) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn string(s: &[u8], out: &mut Vec<u8>) {
    long(s.len() as i64, out);
    out.extend_from_slice(s);
}

/// A string written by `body`, its length patched in front (one byte when below 64).
fn text(out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.push(0);
    body(out);
    let len = out.len() - at - 1;
    if len < 64 {
        out[at] = (len as u8) << 1;
    } else {
        let mut prefix = Vec::with_capacity(3);
        long(len as i64, &mut prefix);
        out.splice(at..at + 1, prefix);
    }
}

fn array(v: &[i64], out: &mut Vec<u8>) {
    if !v.is_empty() {
        long(v.len() as i64, out);
        for x in v {
            long(*x, out);
        }
    }
    long(0, out);
}

fn direction(d: &DirectionRecord, out: &mut Vec<u8>) {
    ulong(u64::from(d.len_min), out);
    ulong(u64::from(d.len_max), out);
    double(d.len_mean, out);
    double(d.len_std, out);
    ulong(d.iat_min_ns, out);
    ulong(d.iat_max_ns, out);
    double(d.iat_mean_ns, out);
    double(d.iat_std_ns, out);
    for c in [
        d.syn,
        d.syn_ack,
        d.fin,
        d.rst,
        d.psh,
        d.urg,
        d.ece,
        d.cwr,
        u32::from(d.tcp_flags),
        d.zero_window,
        d.retransmissions,
    ] {
        ulong(u64::from(c), out);
    }
}

fn mac(m: &[u8; 6], out: &mut Vec<u8>) {
    // 17 characters: zigzag 34.
    out.push(34);
    crate::text::mac(m, out);
}

/// Appends `r` as one single-object-encoded `trawl.FlowRecord`.
pub fn encode_flow(r: &FlowRecord<'_>, iface: Option<&str>, probe: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&flow_schema().header);
    text(out, |o| crate::text::ip(r.src_ip, o));
    text(out, |o| crate::text::ip(r.dst_ip, o));
    for v in [r.src_port, r.dst_port, u16::from(r.proto), r.vlan] {
        ulong(u64::from(v), out);
    }
    string(iface.unwrap_or("").as_bytes(), out);
    mac(&r.src_mac, out);
    mac(&r.dst_mac, out);
    for v in [
        r.first_ns,
        r.last_ns,
        r.fwd.packets,
        r.rev.packets,
        r.fwd.bytes,
        r.rev.bytes,
        r.fwd.ip_bytes,
        r.rev.ip_bytes,
    ] {
        ulong(v, out);
    }
    direction(&r.fwd, out);
    direction(&r.rev, out);
    array(&r.first_lengths[..r.first_count], out);
    array(&r.first_iats_ns[..r.first_count], out);
    string(r.end_reason.name().as_bytes(), out);
    string(probe.as_bytes(), out);
    string(r.community_id().as_bytes(), out);
    let label = r.app;
    opt(label.map(|l| l.app.name()), out, |n, o| {
        string(n.as_bytes(), o)
    });
    opt(label.map(|l| l.source.name()), out, |n, o| {
        string(n.as_bytes(), o)
    });
    opt(r.fwd.rtt_handshake_ns, out, ulong);
    opt(r.rev.rtt_handshake_ns, out, ulong);
    for d in [&r.fwd, &r.rev] {
        let sampled = d.rtt_samples > 0;
        ulong(u64::from(d.rtt_samples), out);
        opt(sampled.then_some(d.rtt_min_ns), out, ulong);
        opt(sampled.then_some(d.rtt_max_ns), out, ulong);
        opt(sampled.then_some(d.rtt_mean_ns), out, double);
    }
    let t = r.tunnel.is_some().then_some(r.tunnel);
    opt(t.map(|t| t.kind.name()), out, |n, o| {
        string(n.as_bytes(), o)
    });
    opt(t, out, |t, o| text(o, |o| crate::text::ip(t.src_addr(), o)));
    opt(t, out, |t, o| text(o, |o| crate::text::ip(t.dst_addr(), o)));
    opt(t.map(|t| t.id), out, |id, o| ulong(u64::from(id), o));
    let x = &r.extra;
    ulong(u64::from(x.sampling_rate), out);
    opt(x.agent, out, |a, o| text(o, |o| crate::text::ip(a, o)));
    for v in [x.in_if, x.out_if, x.src_as, x.dst_as] {
        ulong(u64::from(v), out);
    }
    for c in [&x.src_country, &x.dst_country] {
        let known = c.iter().all(u8::is_ascii_alphabetic);
        string(if known { &c[..] } else { b"" }, out);
    }
}

/// A `["null", T]` union: branch 0 (null) or branch 1 and the value.
fn opt<T>(v: Option<T>, out: &mut Vec<u8>, put: impl FnOnce(T, &mut Vec<u8>)) {
    match v {
        None => long(0, out),
        Some(v) => {
            long(1, out);
            put(v, out);
        }
    }
}

/// Appends `r` as one single-object-encoded `trawl.SeriesRow`.
pub fn encode_series(r: &SeriesRow, probe: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&series_schema().header);
    for v in [
        r.second,
        r.packets,
        r.bytes,
        r.active_flows,
        r.new_flows,
        r.in_packets,
        r.in_bytes,
        r.out_packets,
        r.out_bytes,
    ] {
        ulong(v, out);
    }
    string(probe.as_bytes(), out);
}

/// Appends `a` as one single-object-encoded `trawl.Alarm` (the fields of `trawl.proto`'s
/// `Alarm`).
pub fn encode_alarm(a: &Alarm, probe: &str, out: &mut Vec<u8>) {
    out.extend_from_slice(&alarm_schema().header);
    let field = |k: &str| a.json.get(k).and_then(|v| v.as_str()).unwrap_or("");
    ulong(a.ts_ns, out);
    string(field("detector").as_bytes(), out);
    string(field("event").as_bytes(), out);
    string(a.json.to_string().as_bytes(), out);
    string(probe.as_bytes(), out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::empty_record;

    #[test]
    fn fingerprint_of_the_specification_examples() {
        // The fingerprint of "null"'s canonical form, as the Avro Java library computes it
        // (SchemaNormalization.parsingFingerprint64 of Schema.create(NULL)).
        assert_eq!(fingerprint(b"\"null\""), 0x63dd_24e7_cc25_8f8a);
    }

    #[test]
    fn published_schemas_are_the_encoders() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/specs/avro");
        let kafka_md = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/specs/kafka.md"
        ))
        .unwrap();
        for (file, s) in [
            ("FlowRecord.avsc", flow_schema()),
            ("SeriesRow.avsc", series_schema()),
            ("Alarm.avsc", alarm_schema()),
        ] {
            let text = std::fs::read_to_string(format!("{dir}/{file}")).unwrap();
            assert_eq!(text.trim_end(), s.canonical, "{file}");
            // docs/specs/kafka.md names each fingerprint as the header's bytes.
            let hex: String = s.header[2..].iter().map(|b| format!("{b:02x}")).collect();
            assert!(
                kafka_md.contains(&format!("`{hex}`")),
                "{file}: {hex} not in kafka.md"
            );
        }
    }

    #[test]
    fn emit_small_record() {
        let mut r = empty_record();
        r.src_ip = "10.0.0.1".parse().unwrap();
        r.dst_ip = "10.0.0.2".parse().unwrap();
        r.src_port = 1234;
        r.proto = 17;
        r.first_lengths[0] = -60;
        r.first_count = 1;
        let mut out = Vec::new();
        encode_flow(&r, None, "p", &mut out);
        assert_eq!(&out[..10], &flow_schema().header);
        // "10.0.0.1" (length 8, zigzag 16), then "10.0.0.2", src_port 1234 (zigzag 2468).
        assert_eq!(&out[10..19], b"\x1010.0.0.1");
        assert_eq!(&out[19..28], b"\x1010.0.0.2");
        assert_eq!(&out[28..30], &[0xa4, 0x13]);
        // first_lengths [-60]: one item (2), -60 (119), end (0); first_iats_ns [0];
        // end_reason "end"; probe "p"; the Community ID (30 characters: zigzag 60).
        let id = r.community_id();
        let mut tail = b"\x02\x77\x00\x02\x00\x00\x06end\x02p".to_vec();
        tail.push(60);
        tail.extend_from_slice(id.as_bytes());
        // Then the fields of issues 22/23, each null, 0 or "": one byte each (24).
        tail.extend_from_slice(&[0; 24]);
        assert_eq!(id.as_bytes().len(), 30);
        assert!(out.ends_with(&tail));
    }
}
