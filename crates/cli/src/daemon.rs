//! `trawl run` (the monitor: capture into shared rings, flows and series to files) and
//! `trawl listen` (a client of another trawl's shared ring).
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use trawl_capture::{Direction, PcapWriter};
use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_ring::{Mode, Recv, SharedRing};
use trawl_series::{SeriesFormat, SeriesWriter};

use crate::args::{ListenArgs, OutputFormat, RunArgs, SummaryFormat};
use crate::config::RunPlan;
use crate::db_retention::DbRetention;
use crate::live;
use crate::run::Output;
use crate::summary;

pub fn run(a: &RunArgs) -> Result<ExitCode> {
    if let Some(path) = &a.config {
        if crate::compose::is_composition(path)? {
            return crate::compose::run(a);
        }
    }
    let plan = RunPlan::new(a)?;
    // A record file that cannot be appended to is refused before capture starts.
    for (path, header) in record_headers(&plan) {
        Output::check_appending(path, &header)?;
    }
    let (mut workers, kernel_filter) = live::open_workers(&plan.live, plan.filter.as_deref())?;
    let rings = live::attach_rings(
        &mut workers,
        plan.ring.as_ref(),
        plan.dedup_ns,
        plan.dump.is_some(),
    )?;
    // The store's writers listen before the first packet is captured, so none is missed.
    let dumpers = match &plan.dump {
        Some(p) => Some(crate::dump::RunDumpers::start(p, &rings)?),
        None => None,
    };
    // Output files are opened before privileges are dropped, like the sockets and rings;
    // appended to (a restarted monitor keeps its records) and reopened on SIGHUP.
    let mut flows_out = match &plan.flows {
        Some((path, fmt)) => Some((Output::appending(path, flows_header(*fmt))?, *fmt)),
        None => None,
    };
    let mut series_out = match &plan.series {
        Some((path, fmt)) => Some((Output::appending(path, series_header(*fmt))?, *fmt)),
        None => None,
    };
    // Exporters open their files and sockets before privileges are dropped too.
    let hub = plan.export.start(false)?;
    let mut series_feed = plan
        .export
        .open_series_feed(crate::export::ifindex(&plan.live.interfaces[0]))?;
    // The flow database's directory exists before privileges are dropped (like the outputs).
    if let Some(st) = &plan.store {
        std::fs::create_dir_all(&st.db)
            .with_context(|| format!("cannot create the flow database {}", st.db.display()))?;
    }
    live::drop_privileges(&plan.live)?;
    for (name, _) in rings.iter().filter(|(n, _)| !n.starts_with('(')) {
        eprintln!("trawl: publishing packets on ring '{name}' (trawl listen --ring {name})");
    }
    let n = workers.len();
    let timestamp_sources = live::timestamp_sources(&workers);
    let stop = crate::install_stop_signals()?;
    let outputs = live::Outputs {
        // The headers are in the files already (see `Output::appending`).
        flows: flows_out.as_mut().map(|(o, fmt)| (o, flow_writer(*fmt))),
        series: series_out.as_mut().map(|(o, fmt)| (o, series_writer(*fmt))),
        export: hub.as_ref(),
        series_feed: series_feed.as_mut(),
        store: plan.store.as_ref(),
    };
    let status = plan
        .stats_interval_ns
        .map(|ns| (Duration::from_nanos(ns), rings));
    let db_retention = plan
        .store
        .as_ref()
        .map(|st| DbRetention::start(st.db.clone(), st.retention));
    let outcome = live::run(
        &plan.live, &plan.flow, workers, outputs, stop, false, status,
    );
    // After the writers' last blocks: one more pass, then the totals.
    let db_retained = db_retention.map(DbRetention::finish);
    for out in [flows_out.map(|(o, _)| o), series_out.map(|(o, _)| o)]
        .into_iter()
        .flatten()
    {
        out.finish()?;
    }
    let report = outcome.report(&plan.live, n, kernel_filter, timestamp_sources);
    let reports = hub.map(|h| h.finish()).unwrap_or_default();
    let export_json = crate::export::report(a.summary, &reports, series_feed.as_ref());
    // Capture has stopped and closed the rings: the writers drain what is left and close
    // their segments.
    let (dump_errors, dump_json) = match dumpers {
        Some(d) => crate::dump::report_run_dumpers(a.summary, d),
        None => (Vec::new(), None),
    };
    summary::print_with(
        "run",
        a.summary,
        &report,
        &outcome.meter,
        outcome.table,
        Some(outcome.series),
        export_json
            .into_iter()
            .chain(dump_json.map(|v| ("dump", v)))
            .chain(outcome.store.as_ref().map(|st| {
                (
                    "store",
                    serde_json::json!({
                        "records": st.records,
                        "rows": st.rows,
                        "blocks": st.blocks,
                        "extra_parts": st.extra_parts,
                        "bytes": st.bytes,
                        "records_spanning": st.records_spanning,
                        "retention": db_retained.as_ref().map(crate::db_retention::summary_json),
                    }),
                )
            }))
            .collect(),
    );
    if a.summary == SummaryFormat::Text {
        if let Some(st) = &outcome.store {
            eprintln!(
                "trawl run: flow database: {} records in {} blocks ({} bytes)",
                st.records, st.blocks, st.bytes
            );
        }
    }
    if !dump_errors.is_empty() {
        return Ok(ExitCode::from(1));
    }
    Ok(crate::exit_code(&report))
}

/// The writer of `trawl run`'s flow records: live records carry their interface (each worker
/// sets its own name; the header only needs the column).
fn flow_writer(format: OutputFormat) -> RecordWriter {
    let format = match format {
        OutputFormat::Json => RecordFormat::Json,
        OutputFormat::Csv => RecordFormat::Csv,
    };
    RecordWriter::new(format, false).with_iface("")
}

/// The record files' paths and headers (CSV; empty for JSON lines).
fn record_headers(plan: &RunPlan) -> Vec<(&std::path::Path, Vec<u8>)> {
    let flows = plan
        .flows
        .iter()
        .map(|(p, f)| (p.as_path(), flows_header(*f)));
    let series = plan
        .series
        .iter()
        .map(|(p, f)| (p.as_path(), series_header(*f)));
    flows.chain(series).collect()
}

fn flows_header(format: OutputFormat) -> Vec<u8> {
    let mut header = Vec::new();
    flow_writer(format).write_header(&mut header);
    header
}

fn series_header(format: OutputFormat) -> Vec<u8> {
    let mut header = Vec::new();
    series_writer(format).write_header(&mut header);
    header
}

fn series_writer(format: OutputFormat) -> SeriesWriter {
    SeriesWriter::new(match format {
        OutputFormat::Json => SeriesFormat::Json,
        OutputFormat::Csv => SeriesFormat::Csv,
    })
}

pub fn listen(a: &ListenArgs) -> Result<ExitCode> {
    let mode = if a.lossless {
        Mode::Lossless
    } else {
        Mode::Lossy
    };
    let mut listener = if a.ring.contains('/') {
        SharedRing::open_at(std::path::Path::new(&a.ring))
            .and_then(|r| r.listen(mode))
            .with_context(|| format!("cannot attach to ring file {}", a.ring))?
    } else {
        SharedRing::attach(&a.ring, mode).with_context(|| {
            format!(
                "cannot attach to ring '{}' (is `trawl run` running with that ring?)",
                a.ring
            )
        })?
    };
    let stop = crate::install_stop_signals()?;
    let interfaces = listener.interfaces();
    let mut pcap = match &a.write {
        Some(path) => {
            let Some(first) = interfaces.first() else {
                bail!("ring '{}' names no interface yet", a.ring);
            };
            if interfaces.iter().any(|i| i.link_type != first.link_type) {
                bail!(
                    "ring '{}' carries several link types; a pcap file holds one",
                    a.ring
                );
            }
            let sink = std::io::BufWriter::with_capacity(1 << 20, crate::args::open_output(path)?);
            Some(PcapWriter::new(
                sink,
                first.link_type,
                first.snaplen.max(65_535),
            )?)
        }
        None => None,
    };
    let mut text = std::io::BufWriter::new(std::io::stdout().lock());
    let started = Instant::now();
    let deadline = a.duration.map(|d| started + Duration::from_nanos(d));
    let limit = a.count.unwrap_or(u64::MAX);
    let mut packets = 0u64;
    let mut closed = false;
    while packets < limit && !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        match listener.wait(Duration::from_millis(100))? {
            Recv::Ready(p) => {
                packets += 1;
                match pcap.as_mut() {
                    Some(w) => w.write(p.ts_ns, p.wire_len, p.data)?,
                    None => {
                        let dir = match p.direction {
                            Direction::Inbound => "in",
                            Direction::Outbound => "out",
                            Direction::Unknown => "-",
                        };
                        let name = interfaces
                            .get(usize::from(p.iface))
                            .and_then(|i| i.name.as_deref())
                            .unwrap_or("?");
                        let r = writeln!(
                            text,
                            "{}.{:09} {name} {dir} {} bytes (captured {})",
                            p.ts_ns / 1_000_000_000,
                            p.ts_ns % 1_000_000_000,
                            p.wire_len,
                            p.data.len()
                        );
                        if r.is_err() {
                            break;
                        }
                    }
                }
            }
            Recv::Empty => {}
            Recv::Closed => {
                closed = true;
                break;
            }
        }
    }
    listener.release();
    let _ = text.flush();
    if let Some(w) = pcap {
        w.finish()?;
    }
    let st = listener.stats();
    match a.summary {
        SummaryFormat::None => {}
        SummaryFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "command": "listen",
                "ring": a.ring,
                "mode": if a.lossless { "lossless" } else { "lossy" },
                "packets": packets,
                "records_read": st.records_read,
                "bytes_read": st.bytes_read,
                "records_missed": st.records_missed,
                "bytes_missed": st.bytes_missed,
                "ring_closed": closed,
                "elapsed_s": started.elapsed().as_secs_f64(),
            })
        ),
        SummaryFormat::Text => eprintln!(
            "trawl listen: {packets} packets from ring '{}' ({} missed){}",
            a.ring,
            st.records_missed,
            if closed {
                "; the producer closed the ring"
            } else {
                ""
            }
        ),
    }
    Ok(ExitCode::SUCCESS)
}
