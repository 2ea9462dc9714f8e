//! Writing a [`QueryResult`]: an aligned table for people (goQuery's layout: attributes,
//! packets and bytes per direction with their share of the total, totals, scan counters),
//! JSON for programs (`docs/query.md`), CSV for spreadsheets.
use std::borrow::Cow;
use std::io::{self, Write};

use serde_json::{json, Map, Value};
use trawl_flow::ProtoName;
use trawl_time::Zone;

use crate::partial::{GroupKey, Metrics};
use crate::plan::Attribute;
use crate::result::QueryResult;

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Aligned text.
    Table,
    /// One JSON document.
    Json,
    /// CSV with a header.
    Csv,
}

impl Format {
    /// Parses `table`, `json` or `csv`.
    pub fn parse(s: &str) -> Option<Format> {
        Some(match s {
            "table" => Format::Table,
            "json" => Format::Json,
            "csv" => Format::Csv,
            _ => return None,
        })
    }
}

/// `ns` as RFC 3339 UTC (`2026-11-22T12:05:00Z`): the form of the `time` attribute in JSON
/// and CSV, whatever zone the table shows.
pub fn rfc3339(ns: u64) -> String {
    trawl_time::rfc3339(ns, Zone::Utc, false)
}

fn attr_text(a: Attribute, k: &GroupKey, zone: Zone) -> String {
    match a {
        Attribute::Sip => k.sip.map(|x| x.to_string()),
        Attribute::Dip => k.dip.map(|x| x.to_string()),
        Attribute::Sport => k.sport.map(|x| x.to_string()),
        Attribute::Dport => k.dport.map(|x| x.to_string()),
        Attribute::Proto => k.proto.map(|p| ProtoName(p).to_string()),
        Attribute::Iface => k.iface.clone(),
        Attribute::Vlan => k.vlan.map(|x| x.to_string()),
        Attribute::Time => k.time_ns.map(|t| trawl_time::rfc3339(t, zone, false)),
        Attribute::Probe => k.probe.clone(),
        Attribute::App => k.app.clone(),
        Attribute::Sas => k.sas.map(|x| x.to_string()),
        Attribute::Das => k.das.map(|x| x.to_string()),
        Attribute::Scountry => k.scountry.clone(),
        Attribute::Dcountry => k.dcountry.clone(),
        Attribute::TunnelType => k.tunnel_type.clone(),
        Attribute::TunnelSrc => k.tunnel_src.clone(),
        Attribute::TunnelDst => k.tunnel_dst.clone(),
    }
    .unwrap_or_default()
}

/// An attribute's value in JSON: a number (`null` when absent) or text (borrowed where the
/// key holds it as text).
enum JsonValue<'a> {
    Number(Option<u64>),
    Text(Cow<'a, str>),
}

/// Which attributes JSON shows as numbers, and every value: what [`attr_json`] and
/// [`write_attr_json`] both write.
fn attr_value(a: Attribute, k: &GroupKey) -> JsonValue<'_> {
    match a {
        Attribute::Sport => JsonValue::Number(k.sport.map(u64::from)),
        Attribute::Dport => JsonValue::Number(k.dport.map(u64::from)),
        Attribute::Vlan => JsonValue::Number(k.vlan.map(u64::from)),
        Attribute::Sas => JsonValue::Number(k.sas.map(u64::from)),
        Attribute::Das => JsonValue::Number(k.das.map(u64::from)),
        Attribute::Probe => text(&k.probe),
        Attribute::Iface => text(&k.iface),
        Attribute::App => text(&k.app),
        Attribute::Scountry => text(&k.scountry),
        Attribute::Dcountry => text(&k.dcountry),
        Attribute::TunnelType => text(&k.tunnel_type),
        Attribute::TunnelSrc => text(&k.tunnel_src),
        Attribute::TunnelDst => text(&k.tunnel_dst),
        Attribute::Sip | Attribute::Dip | Attribute::Proto | Attribute::Time => {
            JsonValue::Text(Cow::Owned(attr_text(a, k, Zone::Utc)))
        }
    }
}

/// A key's text attribute (empty when absent), borrowed.
fn text(t: &Option<String>) -> JsonValue<'_> {
    JsonValue::Text(Cow::Borrowed(t.as_deref().unwrap_or_default()))
}

fn attr_json(a: Attribute, k: &GroupKey) -> Value {
    match attr_value(a, k) {
        JsonValue::Number(n) => json!(n),
        JsonValue::Text(t) => Value::String(t.into_owned()),
    }
}

fn metrics_json(m: &Metrics, obj: &mut Map<String, Value>) {
    obj.insert("fwd_packets".into(), json!(m.fwd_packets));
    obj.insert("rev_packets".into(), json!(m.rev_packets));
    obj.insert("fwd_bytes".into(), json!(m.fwd_bytes));
    obj.insert("rev_bytes".into(), json!(m.rev_bytes));
    obj.insert("flows".into(), json!(m.flows));
}

/// The JSON document of `docs/query.md`.
pub fn to_json(r: &QueryResult) -> Value {
    let rows: Vec<Value> = r
        .rows
        .iter()
        .map(|(k, m)| {
            let mut o = Map::new();
            for &a in &r.attributes {
                o.insert(a.field().into(), attr_json(a, &k));
            }
            metrics_json(m, &mut o);
            Value::Object(o)
        })
        .collect();
    let mut doc = without_rows(r);
    doc["rows"] = Value::Array(rows);
    doc
}

/// Writes `doc` (a JSON object) with `r`'s rows as its member `rows`: the bytes
/// `serde_json::to_writer` writes for [`to_json`]'s document (with `doc`'s other members),
/// but row by row, never the rows as one document in memory (a fleet's `-n 0` answer holds
/// hundreds of thousands of them).
pub fn write_json_with_rows(
    mut doc: Value,
    r: &QueryResult,
    out: &mut dyn Write,
) -> io::Result<()> {
    // The document's own serialisation places `rows` among its members: a marker there,
    // replaced by the rows.
    const MARK: &str = "\u{1}trawl-rows\u{1}";
    doc["rows"] = Value::String(MARK.into());
    let text = serde_json::to_string(&doc)?;
    let quoted = serde_json::to_string(MARK)?;
    let (head, tail) = text
        .split_once(quoted.as_str())
        .ok_or_else(|| io::Error::other("the rows' place in the JSON document"))?;
    out.write_all(head.as_bytes())?;
    write_json_rows(r, out)?;
    out.write_all(tail.as_bytes())
}

/// The `rows` array of [`to_json`], written row by row; each row's members in the order a
/// `serde_json` object serialises them (sorted by name). The bytes are `serde_json`'s for
/// [`to_json`]'s rows, written without building a `Value` per member: a fleet's `-n 0`
/// answer is 120 k rows, written after its last probe answered.
fn write_json_rows(r: &QueryResult, out: &mut dyn Write) -> io::Result<()> {
    enum Field {
        Attr(Attribute),
        Metric(fn(&Metrics) -> u64),
    }
    let mut fields: Vec<(&str, Field)> = r
        .attributes
        .iter()
        .map(|&a| (a.field(), Field::Attr(a)))
        .collect();
    fields.extend([
        ("fwd_packets", Field::Metric(|m: &Metrics| m.fwd_packets)),
        ("rev_packets", Field::Metric(|m: &Metrics| m.rev_packets)),
        ("fwd_bytes", Field::Metric(|m: &Metrics| m.fwd_bytes)),
        ("rev_bytes", Field::Metric(|m: &Metrics| m.rev_bytes)),
        ("flows", Field::Metric(|m: &Metrics| m.flows)),
    ]);
    fields.sort_by(|a, b| a.0.cmp(b.0));
    fields.dedup_by(|a, b| a.0 == b.0);
    // Each member's `"name":`, and the comma before every one but the first, escaped once.
    let mut heads = Vec::with_capacity(fields.len());
    for (j, (name, _)) in fields.iter().enumerate() {
        let mut head = if j == 0 { vec![] } else { vec![b','] };
        serde_json::to_writer(&mut head, name)?;
        head.push(b':');
        heads.push(head);
    }
    // Rows `at`, written to `out` (the first row of all has no comma before it).
    let write_rows = |at: std::ops::Range<usize>, out: &mut dyn Write| -> io::Result<()> {
        let mut row = Vec::with_capacity(256);
        let mut i = at.start;
        r.rows.try_for_each_in(at, |k, m| {
            row.clear();
            row.extend_from_slice(if i == 0 { b"{" } else { b",{" });
            for ((_, field), head) in fields.iter().zip(&heads) {
                row.extend_from_slice(head);
                match field {
                    Field::Attr(a) => write_attr_json(*a, k, &mut row)?,
                    Field::Metric(get) => {
                        row.extend_from_slice(itoa::Buffer::new().format(get(m)).as_bytes())
                    }
                }
            }
            row.push(b'}');
            i += 1;
            out.write_all(&row)
        })
    };
    out.write_all(b"[")?;
    let n = r.rows.len();
    if n < crate::result::PARALLEL_ROWS {
        write_rows(0..n, out)?;
    } else {
        // A large answer's second half is formatted on another thread while the first is
        // written: the last step of a fleet's answer, with the other core idle by then.
        let mid = n / 2;
        let (low, high) = crate::result::on_two_threads(
            || write_rows(0..mid, out),
            || {
                let mut buf = Vec::with_capacity(1 << 20);
                write_rows(mid..n, &mut buf).map(|()| buf)
            },
        );
        low?;
        out.write_all(&high?)?;
    }
    out.write_all(b"]")
}

/// The bytes `serde_json` writes for [`attr_json`]'s value, appended to `out`.
fn write_attr_json(a: Attribute, k: &GroupKey, out: &mut Vec<u8>) -> io::Result<()> {
    match attr_value(a, k) {
        JsonValue::Number(Some(n)) => {
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes())
        }
        JsonValue::Number(None) => out.extend_from_slice(b"null"),
        JsonValue::Text(t) => serde_json::to_writer(out, t.as_ref())?,
    }
    Ok(())
}

/// [`to_json`]'s document without its `rows`.
pub fn without_rows(r: &QueryResult) -> Value {
    let mut totals = Map::new();
    metrics_json(&r.totals, &mut totals);
    totals.insert("groups".into(), json!(r.groups));
    let s = &r.stats;
    json!({
        "totals": totals,
        "stats": {
            "blocks": s.blocks,
            "blocks_scanned": s.blocks_scanned,
            "blocks_pruned": s.blocks_pruned,
            "blocks_failed": s.blocks_failed,
            "row_groups": s.row_groups,
            "row_groups_pruned": s.row_groups_pruned,
            "rows_scanned": s.rows_scanned,
            "rows_matched": s.rows_matched,
            "bytes_scanned": s.bytes_scanned,
            "column_chunks_general": s.column_chunks_general,
            "duration_ms": r.elapsed.as_secs_f64() * 1e3,
            "errors": s.errors,
            "blocks_ignored": s.ignored_files.len(),
            "ignored_files": s.ignored_files,
        }
    })
}

/// Writes `r` in `format`; the table shows times in `zone` (JSON and CSV always in UTC).
pub fn write(r: &QueryResult, format: Format, zone: Zone, out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Json => {
            write_json_with_rows(without_rows(r), r, out)?;
            writeln!(out)
        }
        Format::Csv => {
            let mut header: Vec<&str> = r.attributes.iter().map(|a| a.field()).collect();
            header.extend([
                "fwd_packets",
                "rev_packets",
                "fwd_bytes",
                "rev_bytes",
                "flows",
            ]);
            writeln!(out, "{}", header.join(","))?;
            for (k, m) in r.rows.iter() {
                for a in &r.attributes {
                    write!(out, "{},", attr_text(*a, &k, Zone::Utc))?;
                }
                writeln!(
                    out,
                    "{},{},{},{},{}",
                    m.fwd_packets, m.rev_packets, m.fwd_bytes, m.rev_bytes, m.flows
                )?;
            }
            Ok(())
        }
        Format::Table => table(r, zone, out),
    }
}

/// Bytes with a binary unit, as goQuery shows them.
fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[u])
    }
}

fn human_count(n: u64) -> String {
    match n {
        0..=99_999 => n.to_string(),
        100_000..=99_999_999 => format!("{:.2} k", n as f64 / 1e3),
        _ => format!("{:.2} M", n as f64 / 1e6),
    }
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        "0.00".into()
    } else {
        format!("{:.2}", part as f64 * 100.0 / whole as f64)
    }
}

fn table(r: &QueryResult, zone: Zone, out: &mut dyn Write) -> io::Result<()> {
    let mut header: Vec<String> = r.attributes.iter().map(|a| a.field().to_string()).collect();
    let first_metric = header.len();
    header.extend(
        [
            "flows",
            "fwd_packets",
            "rev_packets",
            "%",
            "fwd_bytes",
            "rev_bytes",
            "%",
        ]
        .map(String::from),
    );
    let t = &r.totals;
    let mut lines: Vec<Vec<String>> = vec![header];
    for (k, m) in r.rows.iter() {
        let mut l: Vec<String> = r
            .attributes
            .iter()
            .map(|a| attr_text(*a, &k, zone))
            .collect();
        l.extend([
            human_count(m.flows),
            human_count(m.fwd_packets),
            human_count(m.rev_packets),
            pct(m.packets(), t.packets()),
            human_bytes(m.fwd_bytes),
            human_bytes(m.rev_bytes),
            pct(m.bytes(), t.bytes()),
        ]);
        lines.push(l);
    }
    let mut total_line: Vec<String> = vec![String::new(); first_metric];
    if let Some(f) = total_line.first_mut() {
        *f = "total".into();
    }
    total_line.extend([
        human_count(t.flows),
        human_count(t.fwd_packets),
        human_count(t.rev_packets),
        String::new(),
        human_bytes(t.fwd_bytes),
        human_bytes(t.rev_bytes),
        String::new(),
    ]);
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|c| {
            lines
                .iter()
                .chain(std::iter::once(&total_line))
                .map(|l| l[c].len())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let print = |out: &mut dyn Write, l: &[String]| -> io::Result<()> {
        let cells: Vec<String> = l
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i < first_metric {
                    format!("{c:<w$}")
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        writeln!(out, "{}", cells.join("  ").trim_end())
    };
    for l in &lines {
        print(out, l)?;
    }
    let rule: usize = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
    writeln!(out, "{}", "-".repeat(rule))?;
    print(out, &total_line)?;
    let s = &r.stats;
    writeln!(
        out,
        "\n{} of {} groups shown. Scanned {} rows ({} matched) in {} of {} blocks ({} pruned by statistics, {} failed), {} row groups pruned; {:.1} ms.",
        r.rows.len(),
        r.groups,
        s.rows_scanned,
        s.rows_matched,
        s.blocks_scanned,
        s.blocks,
        s.blocks_pruned,
        s.blocks_failed,
        s.row_groups_pruned,
        r.elapsed.as_secs_f64() * 1e3
    )?;
    for e in &s.errors {
        writeln!(out, "error: {e}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_units() {
        assert_eq!(
            rfc3339(1_763_812_800_000_000_000 + 305_000_000_000),
            "2025-11-22T12:05:05Z"
        );
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.50 KiB");
        assert_eq!(pct(1, 3), "33.33");
        assert_eq!(pct(1, 0), "0.00");
    }

    /// A result of `n` rows grouped by every attribute, with addresses of both families,
    /// names that need escaping and missing values.
    fn result(n: u64) -> QueryResult {
        let rows = (0..n)
            .map(|i| {
                let key = GroupKey {
                    time_ns: Some(1_763_812_800_000_000_000 + i * 300_000_000_000),
                    iface: Some(format!("eth{i}\"q\t\u{1}\\")),
                    sip: Some(std::net::IpAddr::from([10, 0, (i >> 8) as u8, i as u8])),
                    dip: (i % 3 != 0)
                        .then(|| std::net::IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, 0, i as u16])),
                    sport: Some(i as u16),
                    dport: Some(443),
                    proto: Some([6, 17, 1, 250][(i % 4) as usize]),
                    vlan: (i % 2 == 0).then_some(100),
                    probe: Some(format!("p{i}")),
                    app: None,
                    sas: Some(13335 + i as u32),
                    das: (i % 2 == 1).then_some(u32::MAX),
                    scountry: Some(if i % 2 == 0 { "DE" } else { "" }.into()),
                    dcountry: Some("US".into()),
                    tunnel_type: Some(if i % 3 == 0 { "" } else { "vxlan" }.into()),
                    tunnel_src: Some(if i % 3 == 0 {
                        String::new()
                    } else {
                        format!("192.0.2.{i}")
                    }),
                    tunnel_dst: Some("2001:db8::1".into()),
                };
                let m = Metrics {
                    fwd_packets: i,
                    rev_packets: u64::MAX - i,
                    fwd_bytes: i * 1500,
                    rev_bytes: 0,
                    flows: 1,
                };
                (key, m)
            })
            .collect();
        QueryResult {
            attributes: vec![
                Attribute::Time,
                Attribute::Iface,
                Attribute::Sip,
                Attribute::Dip,
                Attribute::Sport,
                Attribute::Dport,
                Attribute::Proto,
                Attribute::Vlan,
                Attribute::Probe,
                Attribute::Sas,
                Attribute::Das,
                Attribute::Scountry,
                Attribute::Dcountry,
                Attribute::TunnelType,
                Attribute::TunnelSrc,
                Attribute::TunnelDst,
            ],
            rows,
            totals: Metrics::default(),
            groups: n,
            stats: crate::partial::ScanStats::default(),
            elapsed: std::time::Duration::from_millis(12),
        }
    }

    #[test]
    fn json_rows_written_one_by_one_are_the_documents_bytes() {
        // The last: enough rows for two threads to write them.
        for n in [0, 1, 7, crate::result::PARALLEL_ROWS as u64 + 3] {
            let r = result(n);
            let mut streamed = Vec::new();
            write(&r, Format::Json, Zone::Utc, &mut streamed).unwrap();
            let whole = format!("{}\n", serde_json::to_string(&to_json(&r)).unwrap());
            assert_eq!(String::from_utf8(streamed).unwrap(), whole, "{n} rows");
            // With members of another document around them (a fleet's).
            let mut doc = without_rows(&r);
            doc["incomplete"] = json!(false);
            doc["probes"] = json!([{"name": "a"}]);
            let mut streamed = Vec::new();
            write_json_with_rows(doc.clone(), &r, &mut streamed).unwrap();
            doc["rows"] = to_json(&r)["rows"].take();
            assert_eq!(String::from_utf8(streamed).unwrap(), doc.to_string());
        }
    }
}
