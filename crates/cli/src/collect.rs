//! `trawl collect`: IPFIX, NetFlow v5/v9 and sFlow v5 in (UDP datagrams, IPFIX over TCP,
//! IPFIX files, or captures of such datagrams), trawl flow records out. One trawl can so be
//! the collector of others, of routers, switches and of softflowd.
//!
//! The work is a composition run on the block runtime: an `ipfix_source` feeding a
//! `flow_writer` and a `flow_store`. This module turns the flags into that composition
//! (`--print-composition` prints it) and prints the summary from the run's report.
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use trawl_compose::{BlockReport, Document, Policy, Report};
use trawl_export::DecodeErrorKind;

use crate::flag::{
    count_in, parse_duration_ns, parse_size, topic, OutputFormat, SummaryFormat, TimeFormat,
};
use crate::progress::{draw_composition, ProgressLine};

#[derive(Args, Debug)]
pub struct CollectArgs {
    /// Receive on this address: udp://HOST:PORT (IPFIX, NetFlow v9 and v5, sFlow v5 on one
    /// port; sflow://HOST:PORT is the same), or tcp://HOST:PORT (IPFIX over TCP); repeat for
    /// several.
    #[arg(help_heading = topic::INPUT, long, value_name = "URL", required_unless_present_any = ["read", "kafka"])]
    pub listen: Vec<String>,
    /// Decode an IPFIX file (RFC 5655: messages back to back, as `--export ipfix:PATH`
    /// writes), or a capture (pcap, pcapng) of sFlow / NetFlow / IPFIX datagrams (UDP to
    /// ports 6343, 2055, 9995, 9996, 4739), instead of listening; repeat for several (read one
    /// after the other).
    #[arg(
        help_heading = topic::INPUT,
        short = 'r',
        long = "read",
        value_name = "FILE",
        conflicts_with = "listen"
    )]
    pub read: Vec<PathBuf>,
    /// Consume trawl's flow records (JSON or Protobuf messages of a `kafka://` export) from
    /// this Kafka topic, BROKER[,BROKER...]/TOPIC, into the flow database (--db): offsets are
    /// committed only once the blocks holding their records are on disk (builds with the
    /// `kafka` feature). `TOPIC?format=goflow2`: GoFlow2's messages (`-format=bin`).
    #[arg(
        help_heading = topic::INPUT,
        long,
        value_name = "BROKERS/TOPIC",
        conflicts_with_all = ["listen", "read", "export", "count"],
        requires = "db"
    )]
    pub kafka: Option<String>,
    /// With --kafka: the consumer group whose offsets are committed.
    #[arg(help_heading = topic::INPUT, long = "kafka-group", value_name = "NAME", default_value = "trawl-collect")]
    pub kafka_group: String,
    /// With --kafka: stop once every partition is read to its end (a backlog loaded), instead
    /// of waiting for more.
    #[arg(help_heading = topic::RUN, long = "kafka-end", requires = "kafka")]
    pub kafka_end: bool,
    /// With --kafka: once the topic has been quiet this long, the blocks still open are
    /// written (later records of their intervals go to further parts) and their offsets
    /// committed.
    #[arg(help_heading = topic::FLOW_DB, long = "kafka-idle", value_name = "DURATION", value_parser = parse_duration_ns, default_value = "5s")]
    pub kafka_idle: u64,
    /// Output file (`-` for standard output).
    #[arg(help_heading = topic::OUTPUT, short = 'o', long = "output", value_name = "PATH", default_value = "-")]
    pub output: PathBuf,
    /// Output format: JSON lines, or CSV with a header line.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = OutputFormat::Json)]
    pub format: OutputFormat,
    /// `first_ns` / `last_ns` as integers (ns) or RFC 3339 text in UTC, same names.
    #[arg(help_heading = topic::OUTPUT, long = "time-format", value_enum, default_value_t = TimeFormat::Ns)]
    pub time_format: TimeFormat,
    /// Decode and count only, write no records (benchmarks; checking what an exporter sends).
    #[arg(help_heading = topic::OUTPUT, long = "no-output")]
    pub no_output: bool,
    /// Stop after this many flow records.
    #[arg(help_heading = topic::RUN, long, value_name = "N")]
    pub count: Option<u64>,
    /// Stop after this long (default: until SIGINT/SIGTERM).
    #[arg(help_heading = topic::RUN, long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub duration: Option<u64>,
    /// Private Enterprise Number whose elements are read as trawl's own.
    #[arg(help_heading = topic::INPUT, long, value_name = "N", default_value_t = trawl_export::ie::DEFAULT_PEN)]
    pub pen: u32,
    /// Most templates kept over all exporters (a bound against template floods), 1 to 1048576.
    #[arg(help_heading = topic::INPUT, long = "max-templates", value_name = "N", default_value = "4096", value_parser = count_in(MAX_TEMPLATES))]
    pub max_templates: usize,
    /// Also store the records in this flow database (`trawl query -d DIR`), one interface per
    /// exporter and observation domain (`exp-ADDRESS-DOMAIN`); records read from a file under
    /// the file's name without its extension (or `-i NAME`).
    #[arg(help_heading = topic::FLOW_DB, long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// With -r: the database interface of the records read from files (default: each
    /// file's name without its extension).
    #[arg(
        help_heading = topic::FLOW_DB,
        short = 'i',
        long = "interface",
        alias = "iface",
        value_name = "NAME",
        requires = "read"
    )]
    pub iface: Option<String>,
    /// Flow database retention: delete days older than this many days (checked every minute
    /// and at the end).
    #[arg(help_heading = topic::FLOW_DB, long = "db-keep-days", value_name = "DAYS", requires = "db")]
    pub db_keep_days: Option<u32>,
    /// Flow database retention: delete the oldest blocks beyond this size (e.g. `50GiB`).
    #[arg(help_heading = topic::FLOW_DB, long = "db-max-size", value_name = "SIZE", value_parser = parse_size, requires = "db")]
    pub db_max_size: Option<usize>,
    /// Store only the records, not the per-second series derived from them (`flow_series`:
    /// each record's packets and bytes spread evenly over its seconds; `trawl series -d`).
    #[arg(help_heading = topic::FLOW_DB, long = "no-series-store", requires = "db")]
    pub no_series_store: bool,
    /// UDP: after a receive that emptied the socket queues, wait this long before the next
    /// one, so that datagrams arriving one by one are read in batches rather than with a
    /// wake-up each (adds at most this much latency); only while the waits do gather several
    /// arrivals (not for trains, nor a slow trickle); 0 to read each as it comes.
    #[arg(help_heading = topic::INPUT, long = "recv-wait", value_name = "DURATION", value_parser = parse_duration_ns, default_value = "1ms")]
    pub recv_wait: u64,
    /// Summary on standard error at the end.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    /// Print the composition these flags build (TOML, for `trawl run -c`) and exit.
    #[arg(help_heading = topic::OUTPUT, long = "print-composition")]
    pub print_composition: bool,
    #[command(flatten)]
    pub anonymize: crate::flag::AnonymizeKey,
    #[command(flatten)]
    pub enrich: crate::enrich::EnrichArgs,
    /// Export the collected flow records (repeat for several), as `trawl flows --export`:
    /// ipfix+udp://HOST:PORT, json:/path, json+tcp://HOST:PORT,
    /// kafka://BROKER[,BROKER...]/TOPIC[?...] (builds with the `kafka` feature), ...
    #[arg(help_heading = topic::EXPORT, long = "export", value_name = "DEST")]
    pub export: Vec<String>,
}

/// `--max-templates`: 0 would decode nothing.
const MAX_TEMPLATES: trawl_time::Limit =
    trawl_time::Limit::new("max_templates", trawl_time::Unit::Count, 1, 1 << 20);

/// The blocks' names in the composition.
const SOURCE: &str = "collect";
const WRITER: &str = "out";
const STORE: &str = "store";
const SERIES: &str = "series";
const SERIES_DB: &str = "series_db";
const EXPORT: &str = "export";

/// The composition the flags describe: the source and the writer on one thread (the writer is
/// a direct call per batch, as the collector's own loop was), the flow database on its own
/// thread behind a queue (block writes take longer than the socket's buffer lasts).
pub fn composition(a: &CollectArgs) -> Document {
    let mut doc = Document::new();
    // The runtime's budget and deadline, as every command's: the source takes each record
    // from the budget.
    if let Some(count) = a.count {
        doc.runtime("count", count.min(i64::MAX as u64) as i64);
    }
    if let Some(ns) = a.duration {
        doc.runtime("duration", span(ns));
    }
    doc.pool_of_threads("main", 1);
    if a.db.is_some() {
        doc.pool_of_threads("store", 1);
    }
    let to_strings =
        |v: &[PathBuf]| -> Vec<String> { v.iter().map(|p| p.display().to_string()).collect() };
    let mut source = doc
        .block(SOURCE, "ipfix_source")
        .on("main", None)
        .set("pen", i64::from(a.pen))
        .set("max_templates", a.max_templates as i64)
        .set("log_errors", false);
    source = a.anonymize.set_on(source);
    source = a.enrich.set_on(source);
    source = if a.read.is_empty() {
        source
            .set("listen", a.listen.clone())
            .set("recv_wait", span(a.recv_wait))
    } else {
        source
            .set("files", to_strings(&a.read))
            .set_some("iface", a.iface.clone())
    };
    let _ = source;
    let mut to = Vec::new();
    if !a.no_output {
        let collected = a.format == OutputFormat::Csv && sflow_input(a);
        doc.block(WRITER, "flow_writer")
            .on("main", None)
            .set("path", a.output.display().to_string())
            .set(
                "format",
                match a.format {
                    OutputFormat::Json => "json",
                    OutputFormat::Csv => "csv",
                },
            )
            .set("mode", "truncate")
            .set_some("collected", collected.then_some(true))
            .set_some(
                "enriched",
                (a.format == OutputFormat::Csv && a.enrich.geoip()).then_some(true),
            )
            .set_some(
                "interface_names",
                (a.format == OutputFormat::Csv && a.enrich.interfaces.is_some()).then_some(true),
            )
            .set_some(
                "time_format",
                (a.time_format != TimeFormat::Ns).then_some(a.time_format.name()),
            );
        to.push(format!("{WRITER}.flows"));
    }
    if let Some(db) = &a.db {
        doc.block(STORE, "flow_store")
            .on("store", None)
            .set("dir", db.display().to_string())
            .set_some("keep_days", a.db_keep_days.map(i64::from))
            .set_some("max_size", a.db_max_size.map(|b| b as i64));
        to.push(format!("{STORE}.flows"));
        if !a.no_series_store {
            // Per exporter (origin), as the records are stored.
            doc.block(SERIES, "flow_series").on("store", None);
            doc.block(SERIES_DB, "series_store")
                .on("store", None)
                .set("dir", db.display().to_string());
            doc.connect(
                &format!("{SERIES}.series"),
                &[&format!("{SERIES_DB}.series")],
                Policy::Wait,
            );
            to.push(format!("{SERIES}.flows"));
        }
    }
    if !a.export.is_empty() {
        // Files can wait for the exporters; a listening collector drops (counted) instead.
        doc.block(EXPORT, "flow_export")
            .on("main", None)
            .set("destinations", a.export.clone())
            .set("lossless", !a.read.is_empty());
        to.push(format!("{EXPORT}.flows"));
    }
    if !to.is_empty() {
        let to: Vec<&str> = to.iter().map(String::as_str).collect();
        doc.connect(&format!("{SOURCE}.flows"), &to, Policy::Wait);
    }
    doc
}

/// Whether the input may be sFlow (whose records have the collected fields, which CSV then
/// gets columns for): an `sflow://` listener, or a file that is no IPFIX file (a capture).
fn sflow_input(a: &CollectArgs) -> bool {
    use std::io::Read;
    let not_ipfix = |p: &PathBuf| {
        let mut head = [0u8; 2];
        std::fs::File::open(p)
            .and_then(|mut f| f.read_exact(&mut head))
            .is_ok_and(|()| head != [0, 10])
    };
    a.listen.iter().any(|l| l.starts_with("sflow://")) || a.read.iter().any(not_ipfix)
}

/// A duration as a composition writes it.
fn span(ns: u64) -> String {
    if ns.is_multiple_of(1_000_000_000) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else {
        format!("{ns}ns")
    }
}

pub fn run(a: &CollectArgs) -> Result<ExitCode> {
    let doc = composition(a);
    let text = doc.to_toml();
    if a.print_composition {
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let cpus = trawl_capture::live::allowed_cpus();
    let plan = trawl_compose::plan(&text, "collect", &trawl_api::registry(), &cpus)
        .map_err(anyhow::Error::from)?;
    let stop = crate::signals::install_stop_signals()?;
    let running = trawl_compose::start(plan).map_err(anyhow::Error::msg)?;
    // Files have a size to show progress against; a listening collector has no end. A
    // closed pipe on standard output is no failure: the writer stops the run cleanly, as the
    // end of the input would.
    let mut line = ProgressLine::new(!a.read.is_empty() && crate::progress::on_terminal());
    let mut progress = |r: &Report| {
        if line.due() {
            draw_composition(&mut line, r, SOURCE, |_, b, secs| {
                let records = b.counter("records").unwrap_or(0);
                Some(format!(
                    "{records} records ({}/s)",
                    trawl_compose::human_rate(records as f64 / secs)
                ))
            });
        }
    };
    let result = running.supervise_with(&stop, |_| {}, Some(&mut progress));
    line.clear();
    let (failure, report) = match result {
        Ok(r) => (None, r),
        Err((f, r)) => (Some(f), r),
    };
    let source = report
        .block(SOURCE)
        .context("the composition has no collector block")?;
    let mut errors = source.error_messages.clone();
    let mut failed = source.counter("input_failed").unwrap_or(0) > 0;
    let store_failed = failure
        .as_deref()
        .is_some_and(|f| f.starts_with(&format!("block `{STORE}`")));
    if let Some(f) = failure {
        failed = true;
        errors.push(f);
    }
    let store = report.block(STORE);
    if let Some(st) = store {
        // Retention's problems (the store's only errors that do not stop it).
        failed |= st.errors > 0;
        errors.extend(st.error_messages.iter().cloned());
    }
    if let (Some(st), SummaryFormat::Text) = (store, a.summary) {
        if !store_failed {
            eprintln!(
                "trawl collect: {} records stored in {} blocks ({} spanning blocks, \
                 stored by their first packet)",
                n(st, "records"),
                n(st, "blocks"),
                n(st, "records_spanning")
            );
        }
        if n(st, "retention_blocks_deleted") > 0 {
            eprintln!(
                "trawl collect: retention deleted {} blocks ({} bytes)",
                n(st, "retention_blocks_deleted"),
                n(st, "retention_bytes_deleted")
            );
        }
    }
    let exporters = report
        .block(EXPORT)
        .map(|b| trawl_blocks::export::export_report(b, &a.export))
        .unwrap_or_default();
    if !a.read.is_empty() {
        // The run waited for its exporters: records they lost fail it.
        let lost = crate::export::failures(&exporters);
        failed |= !lost.is_empty();
        errors.extend(lost);
    }
    print_summary(a, &report, source, store, &errors, &exporters);
    let decode_errors: u64 = DecodeErrorKind::ALL
        .iter()
        .map(|k| n(source, &trawl_blocks::ipfix::error_counter(*k)))
        .sum();
    Ok(if failed || decode_errors > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// A counter of a block's report (0 when it has none).
fn n(b: &BlockReport, name: &str) -> u64 {
    b.counter(name).unwrap_or(0)
}

fn print_summary(
    a: &CollectArgs,
    report: &Report,
    s: &BlockReport,
    store: Option<&BlockReport>,
    errors: &[String],
    exporters: &[trawl_export::ExporterReport],
) {
    // Text: the exporters' lines are printed now; JSON: their sections join the summary.
    let sections = crate::export::report(a.summary, exporters, None);
    let kinds: serde_json::Map<String, serde_json::Value> = DecodeErrorKind::ALL
        .iter()
        .map(|k| {
            let count = n(s, &trawl_blocks::ipfix::error_counter(*k));
            (k.name().to_string(), count.into())
        })
        .collect();
    let total_errors: u64 = kinds.values().filter_map(serde_json::Value::as_u64).sum();
    match a.summary {
        SummaryFormat::None => {}
        SummaryFormat::Json => {
            let retention = |st: &BlockReport| {
                let retention_errors: Vec<&String> = st.error_messages.iter().collect();
                serde_json::json!({
                    "blocks_deleted": n(st, "retention_blocks_deleted"),
                    "bytes_deleted": n(st, "retention_bytes_deleted"),
                    "errors": retention_errors,
                })
            };
            let mut v = serde_json::json!({
                "command": "collect",
                "messages_ipfix": n(s, "messages_ipfix"),
                "messages_v9": n(s, "messages_v9"),
                "messages_v5": n(s, "messages_v5"),
                "flows": n(s, "flows"),
                "records_written": n(s, "records"),
                "templates": n(s, "templates"),
                "withdrawals": n(s, "withdrawals"),
                "options_records": n(s, "options_records"),
                "sequence_missing": n(s, "sequence_missing"),
                "sequence_resets": n(s, "sequence_resets"),
                "sflow": sflow_summary(s),
                "capture": {
                    "datagrams": n(s, "capture_datagrams"),
                    "skipped": n(s, "capture_skipped"),
                },
                "errors": kinds,
                "error_messages": errors,
                "elapsed_s": report.elapsed_s,
                "udp": {
                    "receives": n(s, "udp_receives"),
                    "datagrams": n(s, "udp_datagrams"),
                    "trains": n(s, "udp_trains"),
                },
                "store": store.map(|st| serde_json::json!({
                    "records": n(st, "records"),
                    "rows": n(st, "rows"),
                    "blocks": n(st, "blocks"),
                    "extra_parts": n(st, "extra_parts"),
                    "bytes": n(st, "bytes"),
                    "records_spanning": n(st, "records_spanning"),
                    "retention": retention(st),
                })),
            });
            for (name, section) in sections {
                v[name] = section;
            }
            eprintln!("{v}");
        }
        SummaryFormat::Text => {
            eprintln!(
                "collect: {} IPFIX, {} NetFlow v9, {} NetFlow v5 messages; {} flow records ({} written); {} templates, {} withdrawn; {} errors",
                n(s, "messages_ipfix"),
                n(s, "messages_v9"),
                n(s, "messages_v5"),
                n(s, "flows"),
                n(s, "records"),
                n(s, "templates"),
                n(s, "withdrawals"),
                total_errors
            );
            print_sflow(s);
            let (missing, resets) = (n(s, "sequence_missing"), n(s, "sequence_resets"));
            if missing + resets > 0 {
                eprintln!(
                    "  sequence numbers: {missing} missing (IPFIX records, v5 flows, v9 packets), {resets} went back"
                );
            }
            for (k, v) in kinds.iter().filter(|(_, v)| v.as_u64() != Some(0)) {
                eprintln!("  {k}: {v}");
            }
            for e in errors {
                eprintln!("  {e}");
            }
        }
    }
}

/// The sFlow agents' interfaces whose counter samples came in (the block's notes).
fn sflow_interfaces(s: &BlockReport) -> Vec<serde_json::Value> {
    s.messages
        .iter()
        .filter(|m| m.kind == trawl_compose::MessageKind::Note)
        .filter_map(|m| {
            m.text
                .strip_prefix(trawl_blocks::ipfix::SFLOW_INTERFACE_NOTE)
        })
        .filter_map(|j| serde_json::from_str(j).ok())
        .collect()
}

/// The sFlow section of the JSON summary.
fn sflow_summary(s: &BlockReport) -> serde_json::Value {
    serde_json::json!({
        "datagrams": n(s, "messages_sflow"),
        "flow_samples": n(s, "sflow_flow_samples"),
        "counter_samples": n(s, "sflow_counter_samples"),
        "not_ip": n(s, "sflow_not_ip"),
        "skipped_samples": n(s, "sflow_skipped"),
        "interfaces": sflow_interfaces(s),
    })
}

/// Most agent interfaces the text summary lists (the JSON summary has them all).
const SFLOW_INTERFACES_SHOWN: usize = 20;

/// The text summary's sFlow lines (none when no sFlow came in).
fn print_sflow(s: &BlockReport) {
    if n(s, "messages_sflow") == 0 {
        return;
    }
    let interfaces = sflow_interfaces(s);
    eprintln!(
        "  sFlow: {} datagrams; {} flow samples ({} packet headers not IP), {} counter samples \
         from {} agent interfaces, {} samples of other formats skipped",
        n(s, "messages_sflow"),
        n(s, "sflow_flow_samples"),
        n(s, "sflow_not_ip"),
        n(s, "sflow_counter_samples"),
        interfaces.len(),
        n(s, "sflow_skipped")
    );
    for i in interfaces.iter().take(SFLOW_INTERFACES_SHOWN) {
        let num = |k: &str| i[k].as_u64().map_or("-".to_string(), |v| v.to_string());
        eprintln!(
            "    agent {} ifIndex {}: {} counter samples; in {} octets, {} packets; out {} octets, {} packets",
            i["agent"].as_str().unwrap_or("?"),
            num("if_index"),
            num("counter_samples"),
            num("in_octets"),
            num("in_packets"),
            num("out_octets"),
            num("out_packets")
        );
    }
    if interfaces.len() > SFLOW_INTERFACES_SHOWN {
        eprintln!(
            "    ... {} more (--summary json lists them all)",
            interfaces.len() - SFLOW_INTERFACES_SHOWN
        );
    }
}
