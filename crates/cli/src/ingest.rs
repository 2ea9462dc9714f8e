//! `trawl ingest`: capture files → flow meter (records split at 5-minute boundaries) → the
//! flow database, with the per-second series and the alarms of the change detector and of the
//! packet detectors (`synflood`, `heavy_hitters`, as `trawl run --db` has them) beside it.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use trawl_compose::{Document, Policy};
use trawl_flow::FlowConfig;
use trawl_store::{Codec, IngestStats, Retention, BLOCK_NS};

use crate::flag::{parse_duration_ns, parse_size, topic, SummaryFormat};
use crate::plan::consumers::{Consumers, StoreOut};
use crate::plan::files::{FileInput, SOURCE};
use crate::plan::logs::Analysis;
use crate::plan::{self};
use crate::run::check_filter;

#[derive(Args, Debug)]
pub struct IngestArgs {
    /// Capture file to read (pcap, pcapng, HPCAP raw; gzip or zstd compressed). Repeat for
    /// several files, merged by packet time.
    #[arg(help_heading = topic::INPUT, short = 'r', long = "read", value_name = "FILE", required = true)]
    pub read: Vec<PathBuf>,
    /// The database directory (created if missing).
    #[arg(help_heading = topic::FLOW_DB, short = 'd', long = "db", value_name = "DIR")]
    pub db: PathBuf,
    /// Interface name the records are stored under (`DB/iface=NAME/...`).
    #[arg(
        help_heading = topic::FLOW_DB,
        short = 'i',
        long = "interface",
        alias = "iface",
        value_name = "NAME",
        default_value = "pcap"
    )]
    pub iface: String,
    /// Only packets matching this tcpdump filter expression (libpcap syntax).
    #[arg(help_heading = topic::FILTER, short = 'f', long = "filter", value_name = "BPF")]
    pub filter: Option<String>,
    /// Key tunnelled traffic on the outer or the innermost IP header; `inner` stores the
    /// outer tunnel's fields (`tunnel_type`, `tunnel_src`, `tunnel_dst`, `tunnel_id`).
    #[arg(help_heading = topic::METER, long, value_enum, default_value_t = crate::flows::Tunnel::Outer)]
    pub tunnel: crate::flows::Tunnel,
    /// Idle timeout of the flow meter.
    #[arg(help_heading = topic::METER, long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration_ns)]
    pub idle: u64,
    /// TCP linger after FIN both ways or RST.
    #[arg(help_heading = topic::METER, long = "tcp-linger", value_name = "DURATION", default_value = "2s", value_parser = parse_duration_ns)]
    pub tcp_linger: u64,
    /// What each flow record keeps (the database stores the fields of `minimal` at every
    /// level, and the round-trip fields the level has: the handshake halves at `standard`,
    /// all at `full`; docs/specs/store.md).
    #[arg(help_heading = topic::METER, long, value_enum, default_value_t = crate::flag::FeaturesArg::Full)]
    pub features: crate::flag::FeaturesArg,
    /// Flow table capacity.
    #[arg(help_heading = topic::METER, long, value_name = "FLOWS", default_value_t = 4 << 20)]
    pub capacity: usize,
    /// Block compression: zstd, zstd:LEVEL (1-22), lz4 or none.
    #[arg(help_heading = topic::FLOW_DB, long, value_name = "CODEC", default_value = "lz4")]
    pub codec: String,
    /// After ingesting, delete the blocks of days more than N days before today (UTC, wall
    /// clock), oldest first.
    #[arg(help_heading = topic::FLOW_DB, long = "db-keep-days", alias = "keep-days", value_name = "DAYS")]
    pub keep_days: Option<u32>,
    /// After ingesting, delete the oldest blocks until the database's blocks take at most this
    /// much disk (e.g. 50GiB).
    #[arg(help_heading = topic::FLOW_DB, long = "db-max-size", alias = "max-size", value_name = "SIZE", value_parser = parse_size)]
    pub max_size: Option<usize>,
    /// Do not watch the per-second series for changes (`series_change`; its alarms are
    /// stored in the database, `trawl alarms`). The series themselves are always stored.
    #[arg(help_heading = topic::FLOW_DB, long = "no-series-change")]
    pub no_series_change: bool,
    /// Do not watch for SYN floods (`synflood`, whose alarms name the victim and go into the
    /// database, `trawl alarms`; never with --anonymize, as its alarms name addresses).
    #[arg(help_heading = topic::FLOW_DB, long = "no-synflood")]
    pub no_synflood: bool,
    /// Do not store each minute's heaviest flows and hosts (`heavy_hitters`; its reports go
    /// into the database as alarms; never with --anonymize).
    #[arg(help_heading = topic::FLOW_DB, long = "no-heavy-hitters")]
    pub no_heavy_hitters: bool,
    /// Store neither the series nor their alarms, only the flow records (for measuring what
    /// they cost: bench/RESULTS.md).
    #[arg(help_heading = topic::FLOW_DB, long = "no-series-store", hide = true)]
    pub no_series_store: bool,
    /// Meter on N threads (1 to 64), each with its own flow table, the packets spread by a
    /// symmetric hash of their addresses (the database holds the same records as with one).
    #[arg(help_heading = topic::METER, long, value_name = "N", default_value_t = 1)]
    pub workers: usize,
    /// Summary on standard error.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    #[command(flatten)]
    pub anonymize: crate::flag::AnonymizeKey,
    // `--analyze` (`app`: the database's `app` and `app_source` columns, which `trawl query
    // ... app` groups by) and `--logs`.
    #[command(flatten)]
    pub analysis: crate::flag::AnalyzeArgs,
    #[command(flatten)]
    pub geo: crate::enrich::GeoArgs,
}

pub fn run(a: &IngestArgs) -> Result<ExitCode> {
    let analysis = Analysis::of_args(&a.analysis, a.anonymize.key.is_some())?;
    let flow = FlowConfig {
        idle_timeout_ns: a.idle,
        tcp_linger_ns: a.tcp_linger,
        capacity: a.capacity,
        features: a.features.level(),
        // Every record then holds the packets of one block interval: time-range sums over
        // the store are exact.
        interval_align_ns: BLOCK_NS,
        decode: trawl_flow::decode::DecodeConfig {
            tunnel: a.tunnel.mode(),
        },
        ..FlowConfig::default()
    };
    crate::flag::check_flow_flags(&flow)?;
    if Codec::parse(&a.codec).is_none() {
        anyhow::bail!(
            "invalid --codec {:?} (zstd, zstd:LEVEL, lz4, none)",
            a.codec
        );
    }
    let filter = a.filter.clone().filter(|f| !f.trim().is_empty());
    if let Some(f) = &filter {
        check_filter(f)?;
    }
    let mut doc = Document::new();
    let gate = FileInput {
        files: a.read.clone(),
        filter,
        format: None,
    }
    .add(&mut doc);
    let tunnel = flow.decode.tunnel;
    let consumers = Consumers {
        flow,
        flows: None,
        series: None,
        store: Some(StoreOut {
            dir: a.db.to_string_lossy().into_owned(),
            iface: a.iface.clone(),
            codec: a.codec.clone(),
            // Records reach the store up to the idle timeout plus the linger after their
            // last packet; one wheel tick (67 ms) and a second of margin cover the expiry
            // resolution.
            grace_ns: a.idle + a.tcp_linger + 1_000_000_000,
            // Applied once, after the ingest, below (and said in the summary).
            keep_days: None,
            max_size: None,
            series: !a.no_series_store,
            change: !a.no_series_change,
        }),
        anonymize: a.anonymize.clone(),
        app: analysis.app,
        geo: a.geo.clone(),
        ..Consumers::default()
    };
    let workers = trawl_capture::live::limits::WORKERS
        .check_usize(a.workers)
        .map_err(crate::flag::flag_error)?;
    let gates = crate::plan::files::spread(&mut doc, gate.clone(), workers, tunnel);
    let added = consumers.add(&mut doc, &gates);
    crate::plan::files::set_lanes(&mut doc, &added.meters);
    // The detectors' events name addresses as captured: not beside anonymized records.
    if !a.no_series_store && a.anonymize.key.is_none() {
        packet_detectors(&mut doc, a, &gate);
    }
    if let Some(logs) = &analysis.logs {
        // On the reading thread, before `--workers` spreads the packets.
        logs.add(&mut doc, &[(gate.clone(), None)], None);
    }
    analysis.prepare()?;
    let finished = plan::run(&doc, crate::progress::on_terminal().then_some(SOURCE))?;
    let report = plan::input_report(&finished, SOURCE);
    let (meter, table, _) = plan::meters(&finished, &added.meters);
    let stats = store_stats(&finished);
    let retention = Retention {
        max_age_days: a.keep_days,
        max_bytes: a.max_size.map(|b| b as u64),
    };
    let retained = if retention == Retention::default() {
        None
    } else {
        Some(
            trawl_store::retention::enforce(&a.db, &retention, trawl_time::now_ns())
                .context("cannot apply retention")?,
        )
    };
    let logs = analysis.report(a.summary, &finished.report);
    crate::summary::print_with("ingest", a.summary, &report, &meter, table, None, logs);
    print_store(a.summary, &stats, report.elapsed.as_secs_f64());
    if let (Some(r), SummaryFormat::Text) = (retained, a.summary) {
        eprintln!(
            "retention: {} blocks ({} bytes) deleted, {} bytes kept",
            r.blocks_deleted, r.bytes_deleted, r.bytes_kept
        );
    }
    Ok(crate::run::exit_code(&report))
}

/// The packet detectors of `trawl run --db` (`synflood`, `heavy_hitters` once a minute), each
/// unless turned off, fed by `gate` (lossless: files wait), their events into the database's
/// `alarm_store` (the change detector's, or one of their own).
fn packet_detectors(doc: &mut Document, a: &IngestArgs, gate: &str) {
    use crate::plan::consumers::ALARMS;
    let detectors = [
        (!a.no_synflood, "synflood", "synflood", "alarms"),
        (!a.no_heavy_hitters, "heavy", "heavy_hitters", "reports"),
    ];
    for (on, name, type_name, out) in detectors {
        if !on {
            continue;
        }
        doc.block(name, type_name).set_some(
            "interval",
            (type_name == "heavy_hitters").then_some(crate::plan::live::HEAVY_INTERVAL),
        );
        if doc.block_table(ALARMS).is_none() {
            doc.block(ALARMS, "alarm_store")
                .set("dir", a.db.to_string_lossy().into_owned())
                .set("iface", a.iface.as_str());
        }
        let store = format!("{ALARMS}.events");
        doc.connect(&format!("{name}.{out}"), &[&store], Policy::Wait);
        doc.connect(gate, &[&format!("{name}.packets")], Policy::Wait);
    }
}

/// The `flow_store` block's counters.
fn store_stats(f: &plan::Finished) -> IngestStats {
    let b = f.report.block("store");
    let c = |name: &str| b.and_then(|b| b.counter(name)).unwrap_or(0);
    IngestStats {
        records: c("records"),
        records_spanning: c("records_spanning"),
        rows: c("rows"),
        blocks: c("blocks"),
        extra_parts: c("extra_parts"),
        bytes: c("bytes"),
        recent_parts: c("recent_parts"),
    }
}

fn print_store(format: SummaryFormat, s: &IngestStats, secs: f64) {
    match format {
        SummaryFormat::None => {}
        SummaryFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "store": {
                    "records": s.records,
                    "records_spanning": s.records_spanning,
                    "rows": s.rows,
                    "blocks": s.blocks,
                    "extra_parts": s.extra_parts,
                    "bytes": s.bytes,
                }
            })
        ),
        SummaryFormat::Text => eprintln!(
            "store: {} rows in {} blocks ({} further parts), {} bytes ({:.1} bytes/row), {:.2} s",
            s.rows,
            s.blocks,
            s.extra_parts,
            s.bytes,
            s.bytes as f64 / s.rows.max(1) as f64,
            secs
        ),
    }
}
