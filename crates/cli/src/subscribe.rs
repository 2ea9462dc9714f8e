//! `trawl subscribe flows|series`: prints a live multicast feed, or stored data (flows from a
//! flow database, series from a series file), through the subscriber API of
//! `trawl_export::feed`.
use std::io::Write;
use std::net::Ipv4Addr;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use trawl_blocks::output::OutputFile;
use trawl_export::feed::{self, FlowDatabase, FlowSource, LiveOptions, SeriesSource};
use trawl_export::FeedAddr;
use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_series::{SeriesFormat, SeriesWriter};

use trawl_time::{Zone, NS_PER_SEC};

use crate::flag::{parse_duration_ns, parse_time, topic, TimeFormat};

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Flows,
    Series,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Table,
}

#[derive(Args, Debug)]
pub struct SubscribeArgs {
    /// What to print.
    #[arg(value_enum)]
    pub kind: Kind,
    /// The feed: multicast GROUP:PORT (as given to --flows-feed / --series-feed).
    #[arg(help_heading = topic::INPUT, long, value_name = "GROUP:PORT", required_unless_present_any = ["file", "db"])]
    pub feed: Option<String>,
    /// Stored series instead of a live feed: a file `trawl series` wrote (JSON lines or CSV).
    #[arg(help_heading = topic::INPUT, long, value_name = "PATH", conflicts_with_all = ["feed", "db"])]
    pub file: Option<PathBuf>,
    /// Stored flows instead of a live feed: a flow database (`trawl run --db`, `trawl ingest`,
    /// `trawl collect --db`), in order of first packet. Its records carry what the database
    /// keeps (key, times, packet and byte counters, TCP flags, end reason); the per-flow
    /// statistics of live records are 0.
    #[arg(help_heading = topic::INPUT, long, value_name = "DIR", conflicts_with = "feed")]
    pub db: Option<PathBuf>,
    /// With --db: only these interfaces (comma-separated; default all).
    #[arg(
        help_heading = topic::FILTER,
        short = 'i',
        long = "interface",
        alias = "iface",
        value_name = "IFACE,...",
        value_delimiter = ',',
        requires = "db"
    )]
    pub ifaces: Vec<String>,
    /// Join the group on the interface with this local address (default: the route's).
    #[arg(help_heading = topic::INPUT, long = "interface-address", value_name = "ADDR")]
    pub interface_address: Option<Ipv4Addr>,
    /// The feed of the n-th capture interface (its group is GROUP+n).
    #[arg(help_heading = topic::INPUT, long, value_name = "N", default_value_t = 0)]
    pub slot: u16,
    /// Only records from this time on: the forms of every command's time flags (RFC 3339,
    /// `2026-11-22 14:00` in `TZ`, epoch seconds or ms/us/ns, `-15m`, `15m ago`).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_time)]
    pub from: Option<u64>,
    /// Only records before this time (same forms).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_time)]
    pub to: Option<u64>,
    /// Output: JSON lines (the fields of flow-record.md / series.md) or an aligned table.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = Format::Json)]
    pub format: Format,
    /// Show the table's times in the local zone (`TZ`) with its offset instead of UTC.
    #[arg(help_heading = topic::OUTPUT, long)]
    pub local: bool,
    /// JSON times (`first_ns`, `last_ns`, a row's `second`): integers, or RFC 3339 text in
    /// UTC under the same names.
    #[arg(help_heading = topic::OUTPUT, long = "time-format", value_enum, default_value_t = TimeFormat::Ns)]
    pub time_format: TimeFormat,
    /// Stop after this many records.
    #[arg(help_heading = topic::RUN, long, value_name = "N")]
    pub count: Option<u64>,
    /// Stop after this long.
    #[arg(help_heading = topic::RUN, long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub duration: Option<u64>,
    /// Private Enterprise Number of trawl's elements in the feed.
    #[arg(help_heading = topic::INPUT, long, value_name = "N")]
    pub pen: Option<u32>,
}

pub fn run(a: &SubscribeArgs) -> Result<ExitCode> {
    let limit = a.count.unwrap_or(u64::MAX);
    let options = LiveOptions {
        interface: a.interface_address,
        slot: a.slot,
        stop: Some(crate::signals::install_stop_signals()?),
        deadline: a.duration.map(|d| Instant::now() + Duration::from_nanos(d)),
        pen: a.pen,
    };
    let from = a.from.unwrap_or(0);
    let to = a.to.unwrap_or(u64::MAX);
    let zone = if a.local { Zone::Local } else { Zone::Utc };
    let rfc3339 = a.time_format == TimeFormat::Rfc3339;
    let mut out = OutputFile::create(std::path::Path::new("-"))?;
    let mut buf = Vec::with_capacity(4096);
    let mut seen = 0u64;
    let mut closed = false;
    let mut write = |buf: &mut Vec<u8>| -> ControlFlow<()> {
        seen += 1;
        // Live output: each record as it comes.
        let r = out.write_all(buf).and_then(|_| Write::flush(&mut out));
        buf.clear();
        if r.is_err() {
            closed = true;
            return ControlFlow::Break(());
        }
        if seen >= limit {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    };
    let report = match a.kind {
        Kind::Flows => {
            let database = a.db.as_ref().map(|db| FlowDatabase {
                db: db.clone(),
                ifaces: a.ifaces.clone(),
            });
            let source = match (&a.feed, &database) {
                (Some(f), _) => FlowSource::Live(FeedAddr::parse(f).context("--feed")?, options),
                (None, Some(d)) => FlowSource::Stored(d),
                (None, None) => {
                    bail!("give --feed GROUP:PORT or --db DIR (--file holds series rows)")
                }
            };
            let mut writer = RecordWriter::new(RecordFormat::Json, false);
            writer.set_rfc3339_times(rfc3339);
            if a.format == Format::Table {
                println!(
                    "{:<35} {:<6} {:>47} {:>47} {:>11} {:>11} {:>10} {:>10} end_reason",
                    "first",
                    "proto",
                    "src_ip:src_port",
                    "dst_ip:dst_port",
                    "fwd_packets",
                    "rev_packets",
                    "fwd_bytes",
                    "rev_bytes"
                );
            }
            feed::for_each_flow(source, from..to, |r| {
                match a.format {
                    Format::Json => writer.write(r, &mut buf),
                    Format::Table => {
                        let line = format!(
                            "{:<35} {:<6} {:>47} {:>47} {:>11} {:>11} {:>10} {:>10} {}\n",
                            trawl_time::rfc3339(r.first_ns, zone, true),
                            r.proto_name().to_string(),
                            format!("{}:{}", r.src_ip, r.src_port),
                            format!("{}:{}", r.dst_ip, r.dst_port),
                            r.fwd.packets,
                            r.rev.packets,
                            r.fwd.bytes,
                            r.rev.bytes,
                            r.end_reason.name()
                        );
                        buf.extend_from_slice(line.as_bytes());
                    }
                }
                write(&mut buf)
            })?
        }
        Kind::Series => {
            let source = match (&a.feed, &a.file) {
                (Some(f), _) => SeriesSource::Live(FeedAddr::parse(f).context("--feed")?, options),
                (None, Some(p)) => SeriesSource::Stored(p.clone()),
                (None, None) if a.db.is_some() => {
                    bail!("the flow database holds flows: `trawl subscribe flows --db`; stored series: --file PATH")
                }
                (None, None) => bail!("give --feed GROUP:PORT or --file PATH"),
            };
            let writer = SeriesWriter::new(SeriesFormat::Json).with_rfc3339_times(rfc3339);
            if a.format == Format::Table {
                println!(
                    "{:<25} {:>10} {:>14} {:>12} {:>10}",
                    "second", "packets", "bytes", "active_flows", "new_flows"
                );
            }
            // Rows are whole seconds: those starting within [from, to).
            let seconds = from.div_ceil(NS_PER_SEC)..to.div_ceil(NS_PER_SEC);
            feed::for_each_series(source, seconds, |r| {
                match a.format {
                    Format::Json => writer.write(r, &mut buf),
                    Format::Table => buf.extend_from_slice(
                        format!(
                            "{:<25} {:>10} {:>14} {:>12} {:>10}\n",
                            trawl_time::rfc3339(r.second.saturating_mul(NS_PER_SEC), zone, false),
                            r.packets,
                            r.bytes,
                            r.active_flows,
                            r.new_flows
                        )
                        .as_bytes(),
                    ),
                }
                write(&mut buf)
            })?
        }
    };
    if report.decoder.sequence_missing > 0 {
        tracing::warn!(
            "the feed's sequence numbers say {} record(s) did not arrive (UDP loss)",
            report.decoder.sequence_missing
        );
    }
    if report.decoder.total_errors() > 0 {
        tracing::warn!(
            "{} undecodable datagram(s) on the feed; first: {}",
            report.decoder.total_errors(),
            report
                .first_error
                .as_ref()
                .map_or_else(String::new, |e| e.to_string())
        );
    }
    let _ = closed;
    Ok(ExitCode::SUCCESS)
}
