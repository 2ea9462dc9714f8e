//! Writing a [`QueryResult`]: an aligned table for people (goQuery's layout: attributes,
//! packets and bytes per direction with their share of the total, totals, scan counters),
//! JSON for programs (`docs/query.md`), CSV for spreadsheets.
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
    }
    .unwrap_or_default()
}

fn attr_json(a: Attribute, k: &GroupKey) -> Value {
    match a {
        Attribute::Sport => json!(k.sport),
        Attribute::Dport => json!(k.dport),
        Attribute::Vlan => json!(k.vlan),
        _ => Value::String(attr_text(a, k, Zone::Utc)),
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
                o.insert(a.field().into(), attr_json(a, k));
            }
            metrics_json(m, &mut o);
            Value::Object(o)
        })
        .collect();
    let mut totals = Map::new();
    metrics_json(&r.totals, &mut totals);
    totals.insert("groups".into(), json!(r.groups));
    let s = &r.stats;
    json!({
        "rows": rows,
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
            serde_json::to_writer(&mut *out, &to_json(r))?;
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
            for (k, m) in &r.rows {
                for a in &r.attributes {
                    write!(out, "{},", attr_text(*a, k, Zone::Utc))?;
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
    for (k, m) in &r.rows {
        let mut l: Vec<String> = r
            .attributes
            .iter()
            .map(|a| attr_text(*a, k, zone))
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
}
