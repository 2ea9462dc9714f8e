//! `trawl voip calls -r DIR`: calls looked up by caller, callee, number or display name and
//! by time in the records of `trawl voip` (`calls.jsonl`) and `trawl run --voip` (the daily
//! `calls-YYYY-MM-DD.jsonl`), as VoIPCallMon's lawful-interception front end does.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde_json::Value;
use trawl_blocks::output::OutputFile;
use trawl_voip::lookup::{find_calls, CallQuery, Side};

use crate::flag::{parse_time, topic};

/// Output format of `trawl voip calls`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum CallsFormat {
    /// Aligned columns for reading.
    Table,
    /// The call records as they are stored, one JSON object per line.
    Json,
    /// Comma-separated values with a header line (the table's columns).
    Csv,
}

#[derive(Args, Debug)]
pub struct CallsArgs {
    /// The directory `trawl voip -o` or `trawl run --voip` wrote.
    #[arg(help_heading = topic::INPUT, short = 'r', long = "read", alias = "dir", value_name = "DIR")]
    pub dir: PathBuf,
    /// The caller's or callee's user part, number, URI or display name (a part of it).
    #[arg(help_heading = topic::FILTER, long, value_name = "USER")]
    pub user: Option<String>,
    /// With --user: only calls where the user is the caller (From).
    #[arg(help_heading = topic::FILTER, long, requires = "user", conflicts_with = "to_user")]
    pub from_user: bool,
    /// With --user: only calls where the user is the callee (To).
    #[arg(help_heading = topic::FILTER, long, requires = "user")]
    pub to_user: bool,
    /// Calls that had not ended by this time (the forms of `trawl query --from`).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_time)]
    pub from: Option<u64>,
    /// Calls invited before this time (exclusive).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_time)]
    pub to: Option<u64>,
    /// Output format.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = CallsFormat::Table)]
    pub format: CallsFormat,
}

/// The query of the flags.
pub fn query(a: &CallsArgs) -> Result<CallQuery> {
    let (from_ns, to_ns) = (a.from.unwrap_or(0), a.to.unwrap_or(u64::MAX));
    if to_ns <= from_ns {
        bail!("the time range is empty (--to is not after --from)");
    }
    let side = match (a.from_user, a.to_user) {
        (true, _) => Side::Caller,
        (_, true) => Side::Callee,
        _ => Side::Either,
    };
    Ok(CallQuery {
        user: a.user.clone(),
        side,
        from_ns,
        to_ns,
    })
}

/// `trawl voip calls`.
pub fn run(a: &CallsArgs) -> Result<ExitCode> {
    if !a.dir.is_dir() {
        bail!("no VoIP records at {} (not a directory)", a.dir.display());
    }
    let found = find_calls(&a.dir, &query(a)?)
        .with_context(|| format!("cannot read the calls of {}", a.dir.display()))?;
    let mut out = OutputFile::create(std::path::Path::new("-")).context("standard output")?;
    match a.format {
        CallsFormat::Json => {
            for c in &found {
                serde_json::to_writer(&mut *out.buf(), c)?;
                out.buf().push(b'\n');
            }
        }
        CallsFormat::Csv => {
            let buf = out.buf();
            buf.extend_from_slice(COLUMNS.join(",").as_bytes());
            buf.push(b'\n');
            for c in &found {
                let cells: Vec<String> = row(c).iter().map(|v| csv_cell(v)).collect();
                buf.extend_from_slice(cells.join(",").as_bytes());
                buf.push(b'\n');
            }
        }
        CallsFormat::Table => table(&found, out.buf()),
    }
    out.finish().context("cannot write output")?;
    Ok(ExitCode::SUCCESS)
}

/// The columns of the table and of CSV.
const COLUMNS: [&str; 11] = [
    "invite",
    "from_user",
    "from_display",
    "to_user",
    "to_display",
    "duration_s",
    "end_reason",
    "status",
    "streams",
    "worst_mos",
    "call_id",
];

/// A call's cells, in [`COLUMNS`] order.
fn row(c: &Value) -> [String; 11] {
    let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let n = |k: &str| c.get(k).map_or(String::new(), |v| v.to_string());
    let invite = c
        .get("invite_ns")
        .and_then(Value::as_u64)
        .map_or(String::new(), |ns| {
            trawl_time::rfc3339(ns, trawl_time::Zone::Utc, false)
        });
    let duration = c
        .get("duration_ms")
        .and_then(Value::as_f64)
        .map_or(String::new(), |ms| format!("{:.1}", ms / 1000.0));
    let mos = c
        .get("worst_mos")
        .and_then(Value::as_f64)
        .map_or("-".to_string(), |m| format!("{m:.2}"));
    [
        invite,
        s("from_user"),
        s("from_display"),
        s("to_user"),
        s("to_display"),
        duration,
        s("end_reason"),
        n("status"),
        n("streams"),
        mos,
        s("call_id"),
    ]
}

fn csv_cell(v: &str) -> String {
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

fn table(found: &[Value], out: &mut Vec<u8>) {
    let mut rows: Vec<[String; 11]> = vec![COLUMNS.map(String::from)];
    rows.extend(found.iter().map(row));
    let mut widths = [0usize; 11];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    for r in &rows {
        let mut line = String::new();
        for (i, (w, c)) in widths.iter().zip(r).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            let pad = w - c.chars().count();
            line.push_str(c);
            line.push_str(&" ".repeat(pad));
        }
        out.extend_from_slice(line.trim_end().as_bytes());
        out.push(b'\n');
    }
}
