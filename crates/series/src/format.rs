//! Series rows as JSON lines or CSV. Field names are specified in `docs/specs/series.md`.
use trawl_time::Zone;

use crate::SeriesRow;

/// Output format of series rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeriesFormat {
    /// One JSON object per line.
    Json,
    /// Comma-separated values with a header line.
    Csv,
}

/// Field names in output order.
pub const FIELDS: [&str; 9] = [
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

/// Writes rows into a byte buffer.
#[derive(Clone, Copy, Debug)]
pub struct SeriesWriter {
    format: SeriesFormat,
    /// `second` as RFC 3339 text (UTC) instead of an integer (`--time-format rfc3339`).
    rfc3339_times: bool,
}

impl SeriesWriter {
    /// A writer of `format`.
    pub fn new(format: SeriesFormat) -> Self {
        SeriesWriter {
            format,
            rfc3339_times: false,
        }
    }

    /// Writes `second` as RFC 3339 text in UTC (`"2026-11-26T14:00:00Z"`) instead of an
    /// integer; the name stays.
    pub fn with_rfc3339_times(mut self, on: bool) -> Self {
        self.rfc3339_times = on;
        self
    }

    /// The header line (CSV only).
    pub fn write_header(&self, out: &mut Vec<u8>) {
        if self.format == SeriesFormat::Csv {
            out.extend_from_slice(FIELDS.join(",").as_bytes());
            out.push(b'\n');
        }
    }

    /// Appends one row.
    pub fn write(&self, r: &SeriesRow, out: &mut Vec<u8>) {
        let values = [
            r.second,
            r.packets,
            r.bytes,
            r.active_flows,
            r.new_flows,
            r.in_packets,
            r.in_bytes,
            r.out_packets,
            r.out_bytes,
        ];
        let json = self.format == SeriesFormat::Json;
        if json {
            out.push(b'{');
        }
        for (i, (name, v)) in FIELDS.iter().zip(values).enumerate() {
            if i > 0 {
                out.push(b',');
            }
            if json {
                out.push(b'"');
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(b"\":");
            }
            if i == 0 && self.rfc3339_times {
                let text = trawl_time::rfc3339(v.saturating_mul(1_000_000_000), Zone::Utc, false);
                if json {
                    out.push(b'"');
                }
                out.extend_from_slice(text.as_bytes());
                if json {
                    out.push(b'"');
                }
                continue;
            }
            out.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
        }
        if json {
            out.push(b'}');
        }
        out.push(b'\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_times_replace_the_second_only() {
        let r = SeriesRow {
            second: 1_764_165_600,
            packets: 2,
            ..SeriesRow::default()
        };
        let row = |format| {
            let mut out = Vec::new();
            SeriesWriter::new(format)
                .with_rfc3339_times(true)
                .write(&r, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert!(row(SeriesFormat::Json)
            .starts_with("{\"second\":\"2025-11-26T14:00:00Z\",\"packets\":2,"));
        assert!(row(SeriesFormat::Csv).starts_with("2025-11-26T14:00:00Z,2,"));
    }

    #[test]
    fn json_and_csv_agree() {
        let r = SeriesRow {
            second: 5,
            packets: 2,
            bytes: 120,
            active_flows: 1,
            ..SeriesRow::default()
        };
        let mut j = Vec::new();
        SeriesWriter::new(SeriesFormat::Json).write(&r, &mut j);
        let v: serde_json::Value = serde_json::from_slice(&j).unwrap();
        assert_eq!(v["bytes"], 120);
        assert_eq!(v.as_object().unwrap().len(), FIELDS.len());
        let mut c = Vec::new();
        let w = SeriesWriter::new(SeriesFormat::Csv);
        w.write_header(&mut c);
        w.write(&r, &mut c);
        assert_eq!(String::from_utf8(c).unwrap(), "second,packets,bytes,active_flows,new_flows,in_packets,in_bytes,out_packets,out_bytes\n5,2,120,1,0,0,0,0,0\n");
    }
}
