//! The series and alarms topics of a `kafka://...?series=TOPIC&alarms=TOPIC` export
//! (`docs/specs/kafka.md`) read back, and written as `RowBinary` rows of the `series` and
//! `alarms` tables ([`crate::schema::SERIES_COLUMNS`], [`crate::schema::ALARM_COLUMNS`]).
//!
//! As for flow records, JSON and Protobuf are told apart by the first byte. The JSON messages
//! name no probe: the message key does (series and alarms are always keyed by the probe).
use serde::Deserialize;

use crate::message::{Item, Wire};
use crate::rowbinary::string;
use crate::Error;

fn bad(what: impl Into<String>) -> Error {
    Error::BadMessage(what.into())
}

/// One per-second row, as `trawl series -o json` prints it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(default)]
pub struct SeriesRow {
    /// Unix time of the second's start.
    pub second: u64,
    /// Packets.
    pub packets: u64,
    /// Wire bytes.
    pub bytes: u64,
    /// Flows with a packet in the second.
    pub active_flows: u64,
    /// Flows whose first packet fell in the second.
    pub new_flows: u64,
    /// Packets received by the interface.
    pub in_packets: u64,
    /// Bytes received.
    pub in_bytes: u64,
    /// Packets sent.
    pub out_packets: u64,
    /// Bytes sent.
    pub out_bytes: u64,
}

impl SeriesRow {
    /// The counters in table order (after `second`).
    fn counters(&self) -> [u64; 8] {
        [
            self.packets,
            self.bytes,
            self.active_flows,
            self.new_flows,
            self.in_packets,
            self.in_bytes,
            self.out_packets,
            self.out_bytes,
        ]
    }
}

/// A series message: the row, and the probe when the message names one (Protobuf `probe`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedSeries {
    /// The row.
    pub row: SeriesRow,
    /// The probe (Protobuf field 10).
    pub probe: Option<String>,
}

/// Reads one series message (a JSON row, or a `trawl.SeriesRow`).
pub fn parse_series(value: &[u8]) -> Result<ParsedSeries, Error> {
    match value.first() {
        Some(b'{') => {
            let row: SeriesRow =
                serde_json::from_slice(value).map_err(|e| bad(format!("JSON series row: {e}")))?;
            if row.second == 0 {
                return Err(bad("JSON series row without `second`"));
            }
            Ok(ParsedSeries { row, probe: None })
        }
        Some(_) => {
            let mut v = [0u64; 9];
            let mut probe = None;
            let mut w = Wire::new(value);
            while let Some((field, item)) = w.next()? {
                match (field, item) {
                    (1..=9, Item::Varint(x)) => v[field as usize - 1] = x,
                    (10, Item::Bytes(b)) => probe = Some(text(10, b)?.to_string()),
                    _ => {}
                }
            }
            if v[0] == 0 {
                // proto3 leaves out zeros, but a row always has its second.
                return Err(bad(
                    "Protobuf: no `second` (field 1): not a trawl.SeriesRow",
                ));
            }
            let [second, packets, bytes, active_flows, new_flows, in_packets, in_bytes, out_packets, out_bytes] =
                v;
            Ok(ParsedSeries {
                row: SeriesRow {
                    second,
                    packets,
                    bytes,
                    active_flows,
                    new_flows,
                    in_packets,
                    in_bytes,
                    out_packets,
                    out_bytes,
                },
                probe,
            })
        }
        None => Err(bad("an empty message")),
    }
}

fn text(field: u32, b: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(b).map_err(|_| bad(format!("Protobuf: field {field} is not UTF-8")))
}

/// An alarm message read back: the columns of the `alarms` table.
#[derive(Clone, Debug, PartialEq)]
pub struct ParsedAlarm {
    /// The detector (`detector` of the event, else recognised by its fields as the alarm
    /// store does: `victim` is `synflood`, `event = heavy_hitters`).
    pub detector: String,
    /// Packet time of the event (ns): Protobuf `ts_ns`; JSON: `detected_ns`, else `end_ns`,
    /// else `ts_ns` of the object (the JSON message carries no separate time).
    pub ts_ns: u64,
    /// Start of the anomaly: `onset_ns`, else `start_ns`, else `ts_ns`.
    pub start_ns: u64,
    /// End of the anomaly (`end_ns`), 0 when the event ends none.
    pub end_ns: u64,
    /// `rate`, else `peak_rate`, else 0.
    pub rate: f64,
    /// The event's JSON object.
    pub event: serde_json::Value,
    /// The probe (Protobuf field 5).
    pub probe: Option<String>,
}

/// Reads one alarm message (the event's JSON object, or a `trawl.Alarm`).
pub fn parse_alarm(value: &[u8]) -> Result<ParsedAlarm, Error> {
    let (json, ts, probe) = match value.first() {
        Some(b'{') => {
            let j: serde_json::Value =
                serde_json::from_slice(value).map_err(|e| bad(format!("JSON alarm: {e}")))?;
            (j, None, None)
        }
        Some(_) => {
            let (mut ts, mut probe) = (None, None);
            let mut json: Option<serde_json::Value> = None;
            let mut w = Wire::new(value);
            while let Some((field, item)) = w.next()? {
                match (field, item) {
                    (1, Item::Varint(x)) => ts = Some(x),
                    (4, Item::Bytes(b)) => {
                        json = Some(
                            serde_json::from_slice(b)
                                .map_err(|e| bad(format!("Protobuf alarm's `json`: {e}")))?,
                        )
                    }
                    (5, Item::Bytes(b)) => probe = Some(text(5, b)?.to_string()),
                    _ => {}
                }
            }
            let json =
                json.ok_or_else(|| bad("Protobuf: no `json` (field 4): not a trawl.Alarm"))?;
            (json, ts, probe)
        }
        None => return Err(bad("an empty message")),
    };
    if !json.is_object() {
        return Err(bad("the alarm is not a JSON object"));
    }
    let u = |k: &str| json.get(k).and_then(serde_json::Value::as_u64);
    let f = |k: &str| json.get(k).and_then(serde_json::Value::as_f64);
    let s = |k: &str| json.get(k).and_then(serde_json::Value::as_str);
    let ts_ns = ts
        .or(u("detected_ns"))
        .or(u("end_ns"))
        .or(u("ts_ns"))
        .ok_or_else(|| bad("JSON alarm without a time (`detected_ns`, `end_ns`, `ts_ns`)"))?;
    let detector = match s("detector") {
        Some(d) => d.to_string(),
        None if s("event") == Some("heavy_hitters") => "heavy_hitters".into(),
        None if json.get("victim").is_some() => "synflood".into(),
        None => "unknown".into(),
    };
    Ok(ParsedAlarm {
        detector,
        ts_ns,
        start_ns: u("onset_ns").or(u("start_ns")).unwrap_or(ts_ns),
        end_ns: u("end_ns").unwrap_or(0),
        rate: f("rate").or(f("peak_rate")).unwrap_or(0.0),
        event: json,
        probe,
    })
}

/// `Date` and `DateTime` of a time in seconds.
fn date_time(secs: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(&((secs / 86_400) as u16).to_le_bytes());
    out.extend_from_slice(&(secs as u32).to_le_bytes());
}

/// Appends one row of the series table.
pub fn series_row(r: &SeriesRow, probe: &str, iface: &str, out: &mut Vec<u8>) {
    date_time(r.second, out);
    string(probe, out);
    string(iface, out);
    for v in r.counters() {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Appends one row of the alarms table.
pub fn alarm_row(a: &ParsedAlarm, probe: &str, iface: &str, out: &mut Vec<u8>) {
    date_time(a.ts_ns / 1_000_000_000, out);
    string(probe, out);
    string(iface, out);
    string(&a.detector, out);
    for v in [a.ts_ns, a.start_ns, a.end_ns] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&a.rate.to_le_bytes());
    string(&a.event.to_string(), out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_series_json_and_protobuf() {
        let p = parse_series(br#"{"second":1700000000,"packets":2,"bytes":120,"active_flows":1,"new_flows":1,"in_packets":0,"in_bytes":0,"out_packets":0,"out_bytes":0}"#).unwrap();
        assert_eq!(
            (p.row.second, p.row.bytes, p.probe),
            (1_700_000_000, 120, None)
        );
        // second = 5, packets = 2, probe "p"
        let p = parse_series(b"\x08\x05\x10\x02\x52\x01p").unwrap();
        assert_eq!((p.row.second, p.row.packets), (5, 2));
        assert_eq!(p.probe.as_deref(), Some("p"));
        assert!(parse_series(b"{}").is_err());
        assert!(parse_series(b"\x10\x02").is_err(), "no second");
    }

    #[test]
    fn parse_alarm_times_and_columns() {
        let a = parse_alarm(br#"{"detector":"series_change","event":"end","onset_ns":5,"end_ns":9,"peak_rate":2.5}"#).unwrap();
        assert_eq!((a.ts_ns, a.start_ns, a.end_ns, a.rate), (9, 5, 9, 2.5));
        let a = parse_alarm(
            br#"{"event":"start","victim":"10.0.0.1","onset_ns":5,"detected_ns":7,"rate":3}"#,
        )
        .unwrap();
        assert_eq!((a.detector.as_str(), a.ts_ns, a.end_ns), ("synflood", 7, 0));
        // ts_ns = 11, json = {"x":1}, probe "p": the time comes from field 1.
        let a = parse_alarm(b"\x08\x0b\x22\x07{\"x\":1}\x2a\x01p").unwrap();
        assert_eq!((a.ts_ns, a.detector.as_str()), (11, "unknown"));
        assert_eq!(a.probe.as_deref(), Some("p"));
        assert!(parse_alarm(br#"{"event":"start"}"#).is_err(), "no time");
    }

    #[test]
    fn emit_series_row_layout() {
        let r = SeriesRow {
            second: 86_400,
            packets: 3,
            ..SeriesRow::default()
        };
        let mut out = Vec::new();
        series_row(&r, "p", "i", &mut out);
        assert_eq!(&out[..10], &[1, 0, 0x80, 0x51, 0x01, 0, 1, b'p', 1, b'i']);
        assert_eq!(&out[10..18], &3u64.to_le_bytes());
        assert_eq!(out.len(), 10 + 8 * 8);
    }
}
