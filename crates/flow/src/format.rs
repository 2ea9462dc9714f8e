//! Flow records as JSON lines and CSV, with the field names of `docs/specs/flow-record.md`.
//!
//! Hand-written rather than serde-derived: one record per flow at millions of flows per run,
//! formatted into a reused buffer with `itoa`/`ryu`, costs a fraction of a generic serializer.
use std::net::IpAddr;

use crate::record::{DirectionRecord, FlowRecord};

/// Output format of flow records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordFormat {
    /// One JSON object per line.
    Json,
    /// Comma-separated values with a header line.
    Csv,
}

/// Writes records into a byte buffer.
#[derive(Clone, Debug)]
pub struct RecordWriter {
    format: RecordFormat,
    /// Include the payload fields (only when payload capture is on).
    with_payload: bool,
    /// `"fwd_len_min":` etc., built once: the per-direction block is most of a record.
    dir_keys: [[Vec<u8>; 19]; 2],
}

/// Per-direction field suffixes, in output order, after the `fwd_`/`rev_` prefix.
const DIR_FIELDS: [&str; 20] = [
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
    "", // sentinel, not written
];

impl RecordWriter {
    /// A writer of `format`; `with_payload` adds `fwd_payload` / `rev_payload` (hex).
    pub fn new(format: RecordFormat, with_payload: bool) -> Self {
        let json = format == RecordFormat::Json;
        let keys = |dir: &str| -> [Vec<u8>; 19] {
            std::array::from_fn(|i| {
                if json {
                    format!(",\"{dir}_{}\":", DIR_FIELDS[i]).into_bytes()
                } else {
                    b",".to_vec()
                }
            })
        };
        RecordWriter {
            format,
            with_payload,
            dir_keys: [keys("fwd"), keys("rev")],
        }
    }

    /// The field names, in output order (the CSV header).
    pub fn field_names(&self) -> Vec<String> {
        let mut names: Vec<String> = [
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
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for dir in ["fwd", "rev"] {
            for f in DIR_FIELDS.iter().filter(|f| !f.is_empty()) {
                names.push(format!("{dir}_{f}"));
            }
        }
        names.push("first_lengths".into());
        names.push("first_iats_ns".into());
        if self.with_payload {
            names.push("fwd_payload".into());
            names.push("rev_payload".into());
        }
        names.push("end_reason".into());
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
    pub fn write(&self, r: &FlowRecord<'_>, out: &mut Vec<u8>) {
        let mut w = FieldWriter {
            out,
            json: self.format == RecordFormat::Json,
            first: true,
        };
        w.begin();
        w.ip("src_ip", r.src_ip);
        w.ip("dst_ip", r.dst_ip);
        w.uint("src_port", r.src_port as u64);
        w.uint("dst_port", r.dst_port as u64);
        w.name_field("proto");
        match r.proto_name().name() {
            Some(n) => w.quoted(n.as_bytes()),
            None => {
                let mut b = itoa::Buffer::new();
                w.quoted(b.format(r.proto).as_bytes());
            }
        }
        w.uint("vlan", r.vlan as u64);
        w.mac("src_mac", &r.src_mac);
        w.mac("dst_mac", &r.dst_mac);
        w.uint("first_ns", r.first_ns);
        w.uint("last_ns", r.last_ns);
        w.uint("fwd_packets", r.fwd.packets);
        w.uint("rev_packets", r.rev.packets);
        w.uint("fwd_bytes", r.fwd.bytes);
        w.uint("rev_bytes", r.rev.bytes);
        w.uint("fwd_ip_bytes", r.fwd.ip_bytes);
        w.uint("rev_ip_bytes", r.rev.ip_bytes);
        w.direction(&self.dir_keys[0], &r.fwd);
        w.direction(&self.dir_keys[1], &r.rev);
        w.int_list("first_lengths", &r.first_lengths[..r.first_count]);
        w.int_list("first_iats_ns", &r.first_iats_ns[..r.first_count]);
        if self.with_payload {
            w.hex("fwd_payload", r.fwd_payload);
            w.hex("rev_payload", r.rev_payload);
        }
        w.name_field("end_reason");
        w.quoted(r.end_reason.name().as_bytes());
        w.end();
    }
}

struct FieldWriter<'o> {
    out: &'o mut Vec<u8>,
    json: bool,
    first: bool,
}

impl FieldWriter<'_> {
    fn begin(&mut self) {
        if self.json {
            self.out.push(b'{');
        }
    }

    fn end(&mut self) {
        if self.json {
            self.out.push(b'}');
        }
        self.out.push(b'\n');
    }

    fn name_field(&mut self, name: &str) {
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        if self.json {
            self.out.push(b'"');
            self.out.extend_from_slice(name.as_bytes());
            self.out.extend_from_slice(b"\":");
        }
    }

    /// A string value; quoted in JSON, bare in CSV (values here never hold commas or quotes).
    fn quoted(&mut self, v: &[u8]) {
        if self.json {
            self.out.push(b'"');
        }
        self.out.extend_from_slice(v);
        if self.json {
            self.out.push(b'"');
        }
    }

    fn uint(&mut self, name: &str, v: u64) {
        self.name_field(name);
        self.uint_value(v);
    }

    fn uint_value(&mut self, v: u64) {
        let mut b = itoa::Buffer::new();
        self.out.extend_from_slice(b.format(v).as_bytes());
    }

    fn float_value(&mut self, v: f64) {
        // Whole numbers print without a fraction; others with at most 3 decimals, which keeps
        // lines short and is finer than any length (bytes) or gap (ns) resolution.
        if v.fract() == 0.0 && v.abs() < 1e15 {
            self.uint_value(v as u64);
        } else {
            let mut b = ryu::Buffer::new();
            let rounded = (v * 1000.0).round() / 1000.0;
            self.out.extend_from_slice(b.format(rounded).as_bytes());
        }
    }

    fn ip(&mut self, name: &str, ip: IpAddr) {
        use std::io::Write;
        self.name_field(name);
        if self.json {
            self.out.push(b'"');
        }
        match ip {
            // Dotted quads by hand: `Display` goes through the formatting machinery, which
            // profiles showed as a tenth of record formatting.
            IpAddr::V4(v4) => {
                for (i, o) in v4.octets().iter().enumerate() {
                    if i > 0 {
                        self.out.push(b'.');
                    }
                    self.out
                        .extend_from_slice(itoa::Buffer::new().format(*o).as_bytes());
                }
            }
            // Writing into a Vec cannot fail.
            IpAddr::V6(v6) => {
                let _ = write!(self.out, "{v6}");
            }
        }
        if self.json {
            self.out.push(b'"');
        }
    }

    fn mac(&mut self, name: &str, mac: &[u8; 6]) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.name_field(name);
        let mut s = [0u8; 17];
        for (i, b) in mac.iter().enumerate() {
            s[i * 3] = HEX[(b >> 4) as usize];
            s[i * 3 + 1] = HEX[(b & 15) as usize];
            if i < 5 {
                s[i * 3 + 2] = b':';
            }
        }
        self.quoted(&s);
    }

    fn hex(&mut self, name: &str, bytes: &[u8]) {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        self.name_field(name);
        if self.json {
            self.out.push(b'"');
        }
        for b in bytes {
            self.out.push(HEX[(b >> 4) as usize]);
            self.out.push(HEX[(b & 15) as usize]);
        }
        if self.json {
            self.out.push(b'"');
        }
    }

    fn int_list(&mut self, name: &str, values: &[i64]) {
        self.name_field(name);
        self.out.push(if self.json { b'[' } else { b'"' });
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                self.out.push(if self.json { b',' } else { b' ' });
            }
            let mut b = itoa::Buffer::new();
            self.out.extend_from_slice(b.format(*v).as_bytes());
        }
        self.out.push(if self.json { b']' } else { b'"' });
    }

    fn direction(&mut self, keys: &[Vec<u8>; 19], d: &DirectionRecord) {
        let ints: [(usize, u64); 15] = [
            (0, d.len_min as u64),
            (1, d.len_max as u64),
            (4, d.iat_min_ns),
            (5, d.iat_max_ns),
            (8, d.syn as u64),
            (9, d.syn_ack as u64),
            (10, d.fin as u64),
            (11, d.rst as u64),
            (12, d.psh as u64),
            (13, d.urg as u64),
            (14, d.ece as u64),
            (15, d.cwr as u64),
            (16, d.tcp_flags as u64),
            (17, d.zero_window as u64),
            (18, d.retransmissions as u64),
        ];
        let floats: [(usize, f64); 4] = [
            (2, d.len_mean),
            (3, d.len_std),
            (6, d.iat_mean_ns),
            (7, d.iat_std_ns),
        ];
        // Emit in DIR_FIELDS order.
        let (mut ii, mut fi) = (0, 0);
        for (pos, key) in keys.iter().enumerate() {
            self.out.extend_from_slice(key);
            if fi < floats.len() && floats[fi].0 == pos {
                self.float_value(floats[fi].1);
                fi += 1;
            } else {
                self.uint_value(ints[ii].1);
                ii += 1;
            }
        }
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
        }
    }

    #[test]
    fn json_is_valid_and_complete() {
        let w = RecordWriter::new(RecordFormat::Json, true);
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

    #[test]
    fn csv_row_matches_header() {
        let w = RecordWriter::new(RecordFormat::Csv, false);
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
}
