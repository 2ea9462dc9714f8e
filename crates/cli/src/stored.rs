//! Reading back what the monitors store beside the flow database: `trawl series -d DB`
//! (per-second rows and their rollups) and `trawl alarms -d DB` (the detectors' alarms).
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use trawl_blocks::output::OutputFile;
use trawl_series::{SeriesFormat, SeriesWriter};
use trawl_store::alarms::{self, Alarm};
use trawl_store::series::{self, Step};
use trawl_time::Zone;

use crate::flag::{parse_time, topic, OutputFormat, TimeFormat};

/// `--step` of `trawl series -d`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepArg {
    /// One row per second.
    #[value(name = "1s")]
    Second,
    /// One row per minute (the 1-minute rollups).
    #[value(name = "1m")]
    Minute,
    /// One row per hour (the 1-hour rollups).
    #[value(name = "1h")]
    Hour,
}

impl StepArg {
    fn step(self) -> Step {
        match self {
            StepArg::Second => Step::Second,
            StepArg::Minute => Step::Minute,
            StepArg::Hour => Step::Hour,
        }
    }
}

/// The stored-series flags of `trawl series`.
#[derive(Args, Debug)]
pub struct StoredSeriesArgs {
    /// Read the series stored in this flow database (by `trawl ingest`, `trawl run --db`)
    /// instead of metering packets; `-i` then names a stored interface (default: all,
    /// summed).
    #[arg(help_heading = topic::FLOW_DB, short = 'd', long = "db", value_name = "DIR", conflicts_with = "read")]
    pub db: Option<PathBuf>,
    /// With -d: start of the time range (the forms of `trawl query --from`; default: the
    /// beginning).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_time, requires = "db")]
    pub from: Option<u64>,
    /// With -d: end of the time range, exclusive (default: now).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_time, requires = "db")]
    pub to: Option<u64>,
    /// With -d: one row per second, or the rows of the 1-minute or 1-hour rollups (counters
    /// summed, `active_flows` the peak second).
    #[arg(help_heading = topic::FLOW_DB, long, value_enum, default_value_t = StepArg::Second, requires = "db")]
    pub step: StepArg,
}

/// The time range of `--from`/`--to`, checked.
fn range(from: Option<u64>, to: Option<u64>) -> Result<(u64, u64)> {
    let from = from.unwrap_or(0);
    let to = to.unwrap_or_else(trawl_time::now_ns);
    if to <= from {
        bail!("the time range is empty (--to is not after --from)");
    }
    Ok((from, to))
}

/// Where and how `trawl series -d` writes its rows (`trawl series`' output flags).
pub struct SeriesOut<'a> {
    pub path: &'a Path,
    pub format: OutputFormat,
    pub time_format: TimeFormat,
}

/// `trawl series -d DB`: stored rows of `ifaces` (none: all summed; one at most).
pub fn series(
    a: &StoredSeriesArgs,
    db: &Path,
    ifaces: &[String],
    out: &SeriesOut<'_>,
) -> Result<ExitCode> {
    let iface = match ifaces {
        [] => None,
        [one] => Some(one.as_str()),
        _ => bail!("trawl series -d reads one interface (-i NAME) or all summed (no -i)"),
    };
    if !db.is_dir() {
        bail!("no database at {}", db.display());
    }
    let (from, to) = range(a.from, a.to)?;
    let rows = series::read(db, iface, from, to, a.step.step())
        .with_context(|| format!("cannot read the series of {}", db.display()))?;
    let format = match out.format {
        OutputFormat::Json => SeriesFormat::Json,
        OutputFormat::Csv => SeriesFormat::Csv,
    };
    let writer =
        SeriesWriter::new(format).with_rfc3339_times(out.time_format == TimeFormat::Rfc3339);
    let mut file = OutputFile::create(out.path).context("cannot write output")?;
    writer.write_header(file.buf());
    for r in &rows {
        writer.write(r, file.buf());
        // A reader that went away (EPIPE) ends the output early; other errors show at the end.
        if file.written().is_err() && file.closed() {
            break;
        }
    }
    file.finish().context("cannot write output")?;
    Ok(ExitCode::SUCCESS)
}

/// `trawl alarms` output formats.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlarmFormat {
    /// A table for people.
    Table,
    /// One JSON object per alarm and line.
    Json,
    /// Comma-separated values with a header line (the event as JSON text).
    Csv,
}

#[derive(Args, Debug)]
pub struct AlarmsArgs {
    /// The database directory.
    #[arg(
        help_heading = topic::INPUT,
        short = 'd',
        long = "db",
        value_name = "DIR",
        default_value = "/var/lib/trawl/db"
    )]
    pub db: PathBuf,
    /// Start of the time range (the forms of `trawl query --from`; default: the beginning).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_time)]
    pub from: Option<u64>,
    /// End of the time range, exclusive (default: now).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_time)]
    pub to: Option<u64>,
    /// Only alarms of this interface.
    #[arg(help_heading = topic::FILTER, short = 'i', long = "interface", alias = "iface", value_name = "NAME")]
    pub iface: Option<String>,
    /// Output format.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = AlarmFormat::Table)]
    pub format: AlarmFormat,
    /// Output file (`-` for standard output).
    #[arg(help_heading = topic::OUTPUT, short = 'o', long = "output", value_name = "PATH", default_value = "-")]
    pub output: PathBuf,
}

/// `trawl alarms`.
pub fn alarms(a: &AlarmsArgs) -> Result<ExitCode> {
    if !a.db.is_dir() {
        bail!("no database at {}", a.db.display());
    }
    let (from, to) = range(a.from, a.to)?;
    let mut found = alarms::read(&a.db, from, to)
        .with_context(|| format!("cannot read the alarms of {}", a.db.display()))?;
    if let Some(i) = &a.iface {
        found.retain(|al| al.iface.as_deref() == Some(i.as_str()));
    }
    let mut file = OutputFile::create(&a.output).context("cannot write output")?;
    match a.format {
        AlarmFormat::Json => {
            for al in &found {
                serde_json::to_writer(&mut *file.buf(), al)?;
                file.buf().push(b'\n');
            }
        }
        AlarmFormat::Csv => {
            file.buf()
                .extend_from_slice(CSV_HEADER.join(",").as_bytes());
            file.buf().push(b'\n');
            for al in &found {
                let event = al.event.to_string().replace('"', "\"\"");
                let line = format!(
                    "{},{},{},{},{},{},{},\"{event}\"\n",
                    al.detector,
                    al.iface.as_deref().unwrap_or(""),
                    al.ts_ns,
                    al.start_ns,
                    al.end_ns.map(|v| v.to_string()).unwrap_or_default(),
                    al.rate.map(|v| v.to_string()).unwrap_or_default(),
                    cause(al),
                );
                file.buf().extend_from_slice(line.as_bytes());
            }
        }
        AlarmFormat::Table => table(&found, file.buf()),
    }
    file.finish().context("cannot write output")?;
    Ok(ExitCode::SUCCESS)
}

/// Columns of `trawl alarms --format csv`.
const CSV_HEADER: [&str; 8] = [
    "detector", "iface", "ts_ns", "start_ns", "end_ns", "rate", "cause", "event",
];

/// What an alarm is about, in a few words: the victim of a flood (and, at its end, its top
/// sources), the metric and horizon of a series change.
fn cause(a: &Alarm) -> String {
    let s = |k: &str| a.event.get(k).and_then(|v| v.as_str());
    let sources: Vec<&str> = a
        .event
        .get("top_sources")
        .and_then(|v| v.as_array())
        .map(|l| l.iter().filter_map(|s| s.get("ip")?.as_str()).collect())
        .unwrap_or_default();
    match (s("victim"), s("metric"), s("term")) {
        (Some(v), _, _) if !sources.is_empty() => {
            format!("victim {v} from {}", sources.join(" "))
        }
        (Some(v), _, _) => format!("victim {v}"),
        (None, Some(m), Some(t)) => format!("{m} {t}-term"),
        _ => String::new(),
    }
    .replace(',', ";")
}

fn table(found: &[Alarm], out: &mut Vec<u8>) {
    let time = |ns: u64| trawl_time::rfc3339(ns, Zone::Utc, false);
    let mut rows: Vec<[String; 7]> =
        vec![["time", "detector", "event", "iface", "start", "end", "rate"].map(String::from)];
    for a in found {
        let event = a.event.get("event").and_then(|v| v.as_str()).unwrap_or("");
        rows.push([
            time(a.ts_ns),
            a.detector.clone(),
            event.to_string(),
            a.iface.clone().unwrap_or_else(|| "-".into()),
            time(a.start_ns),
            a.end_ns.map_or_else(|| "-".into(), time),
            a.rate.map_or_else(|| "-".into(), |r| format!("{r:.1}")),
        ]);
    }
    let mut widths = [0usize; 7];
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.len());
        }
    }
    for (n, r) in rows.iter().enumerate() {
        let mut line = String::new();
        for (i, (w, c)) in widths.iter().zip(r).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(&format!("{c:<w$}"));
        }
        let cause = if n == 0 {
            "cause".to_string()
        } else {
            cause(&found[n - 1])
        };
        line.push_str("  ");
        line.push_str(&cause);
        out.extend_from_slice(line.trim_end().as_bytes());
        out.push(b'\n');
    }
}
