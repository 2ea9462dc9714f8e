//! Series rows as JSON lines or CSV. Field names are specified in `docs/specs/series.md`.
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
}

impl SeriesWriter {
    /// A writer of `format`.
    pub fn new(format: SeriesFormat) -> Self {
        SeriesWriter { format }
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
