//! The `trawl` command-line tool.
mod anonymize;
mod args;
mod central;
#[cfg(test)]
mod cli_doc;
mod collect;
mod compose;
mod config;
mod daemon;
mod detect;
mod dump;
mod enrich;
mod export;
mod flag;
mod flows;
mod generate;
mod ingest;
mod log;
mod logs;
mod notify;
mod plan;
mod progress;
mod query;
mod reload;
mod run;
mod serve;
mod signals;
mod steal;
mod stored;
mod subscribe;
mod summary;
mod voip;

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, Parser};

use args::{Command, LowArgs};
use flows::HiInput;
use run::{check_filter, exit_code, RunReport};

/// mimalloc rather than glibc's allocator: `trawl query` decodes every block into fresh
/// buffers of a few hundred KB, which glibc serves from `mmap` and returns at each free, so
/// each block paid page faults and zeroing (a quarter of a top-N query's time); mimalloc keeps
/// them. The packet paths allocate nothing per packet and are indifferent.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let low = LowArgs::parse();
    log::init(low.verbose, low.quiet);
    match run(low) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("trawl: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(low: LowArgs) -> Result<ExitCode> {
    match low.command {
        Command::Anonymize(a) => anonymize::run(&a),
        Command::Dump(a) => dump::dump(&a),
        Command::Packets(a) => dump::packets(&a),
        Command::Flows(a) => {
            if a.payload_bytes > 0 && a.out.anonymize.key.is_some() {
                // Payloads hold addresses and names that anonymization does not reach.
                anyhow::bail!("--payload-bytes cannot be combined with --anonymize");
            }
            let input = HiInput::from_low(&a.input, a.payload_bytes)?;
            let analysis =
                plan::logs::Analysis::of_args(&a.analysis, a.out.anonymize.key.is_some())?;
            meter_command("flows", &input, &a.out, &a.export, &analysis, false, &a.geo)
        }
        Command::Series(a) if a.stored.db.is_some() => {
            let db = a.stored.db.as_deref().unwrap_or(std::path::Path::new(""));
            let out = stored::SeriesOut {
                path: &a.out.output,
                format: a.out.format,
                time_format: a.out.time_format,
            };
            stored::series(&a.stored, db, &a.input.live.interface, &out)
        }
        Command::Series(a) => {
            let input = HiInput::from_low(&a.input, 0)?;
            let no_geo = enrich::GeoArgs::default();
            let none = plan::logs::Analysis::default();
            meter_command("series", &input, &a.out, &a.export, &none, true, &no_geo)
        }
        Command::Run(a) => daemon::run(&a),
        Command::ConvertConfig(a) => daemon::convert_config(&a),
        Command::Listen(a) => daemon::listen(&a),
        Command::Collect(a) if a.kafka.is_some() => central::collect(&a),
        Command::Collect(a) => collect::run(&a),
        Command::Subscribe(a) => subscribe::run(&a),
        Command::Ingest(a) => ingest::run(&a),
        Command::Query(a) if a.clickhouse.is_some() => central::query(&a),
        Command::Query(a) => query::run(&a),
        Command::Clickhouse(a) => central::clickhouse(&a),
        Command::Alarms(a) => stored::alarms(&a),
        Command::Serve(a) => serve::serve(&a),
        Command::Detect(a) => detect::run(&a),
        Command::Check(a) => compose::check(&a),
        Command::Blocks(a) => compose::blocks(&a),
        Command::Voip(a) => voip::run(&a),
        Command::Logs(a) => logs::run(&a),
        Command::Completions(a) => generate::completions(&a, LowArgs::command()),
        Command::Man(a) => generate::man(&a, LowArgs::command()),
    }
}

/// `trawl flows` and `trawl series` as a composition: the source part (the files'
/// `pcap_source`, or an `afpacket_source` per interface and worker), a flow meter per source,
/// and the writer of its records (or of its per-second rows), the exporters and the feeds,
/// and the application-layer analysers of `--logs` on the sources' packets. Files and live
/// capture differ only in the source part.
fn meter_command(
    command: &str,
    input: &HiInput,
    out: &flows::OutputArgs,
    export: &export::ExportArgs,
    analysis: &plan::logs::Analysis,
    series: bool,
    geo: &enrich::GeoArgs,
) -> Result<ExitCode> {
    if let Some(f) = &input.filter {
        check_filter(f)?;
    }
    let exports = export::ExportPlan::from_args(export)?;
    let mut doc = trawl_compose::Document::new();
    let (gates, sources, log_gates) = match &input.live {
        None => {
            let files = plan::files::FileInput {
                files: input.files.clone(),
                filter: input.filter.clone(),
                format: input.forced_format,
            };
            let gate = files.add(&mut doc);
            let gates = plan::files::spread(
                &mut doc,
                gate.clone(),
                input.workers,
                input.flow.decode.tunnel,
            );
            // The analysers take the file's packets before `--workers` spreads them, on the
            // reading thread.
            (
                gates,
                vec![plan::files::SOURCE.to_string()],
                vec![(gate, None)],
            )
        }
        Some(live) => {
            let workers = plan::live::capture(&mut doc, live, input.filter.as_deref(), 0);
            let gates = workers
                .iter()
                .map(|w| plan::consumers::PacketGate {
                    gate: format!("{}.packets", w.name),
                    iface: w.iface,
                    thread: Some(w.thread),
                })
                .collect();
            let log_gates = workers
                .iter()
                .map(|w| (format!("{}.packets", w.name), Some(w.thread)))
                .collect();
            (
                gates,
                workers.into_iter().map(|w| w.name).collect(),
                log_gates,
            )
        }
    };
    let text = plan::consumers::TextOut {
        path: out.output.to_string_lossy().into_owned(),
        format: out.format,
        time_format: out.time_format,
        append: false,
    };
    // With exporters, standard output carries records only when asked (-o FILE).
    let main_output = !exports.exports_flows() || out.output.as_os_str() != "-";
    let consumers = plan::consumers::Consumers {
        flow: input.flow.clone(),
        flows: (!series && main_output).then(|| text.clone()),
        series: series.then_some(text),
        store: None,
        export: plan::consumers::ExportOut::of(&exports, input.live.is_none()),
        series_feed: plan::consumers::SeriesFeedOut::of(&exports),
        anonymize: out.anonymize.clone(),
        interfaces: input
            .live
            .as_ref()
            .map(|l| l.interfaces.clone())
            .unwrap_or_default(),
        app: analysis.app,
        geo: geo.clone(),
    };
    let added = consumers.add(&mut doc, &gates);
    if input.live.is_none() {
        plan::files::set_lanes(&mut doc, &added.meters);
    }
    if let Some(logs) = &analysis.logs {
        // Live, the log writers go with the other outputs (the flow writer's or the
        // exporters' pool: flows always has one of them).
        let pool = input.live.is_some().then_some(plan::consumers::OUTPUTS);
        logs.add(&mut doc, &log_gates, pool);
    }
    if input.print_composition {
        print!("{}", doc.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    analysis.prepare()?;
    let (finished, report) = match &input.live {
        None => {
            let source = plan::files::SOURCE;
            let finished = plan::run(&doc, input.progress.then_some(source))?;
            let report = plan::input_report(&finished, source);
            (finished, report)
        }
        Some(live) => {
            let finished = plan::run_live(&doc, input.progress)?;
            let report = plan::live_report(&finished, live, &sources);
            (finished, report)
        }
    };
    let (meter, table, mut series_stats) = plan::meters(&finished, &added.meters);
    if let (Some(s), Some(b)) = (series_stats.as_mut(), finished.report.block("series")) {
        // The rows written: several workers' rows are summed into one per second.
        s.rows = b.items_in;
    }
    let exporters = added
        .export
        .as_ref()
        .and_then(|(name, d)| {
            let b = finished.report.block(name)?;
            Some(trawl_blocks::export::export_report(b, d))
        })
        .unwrap_or_default();
    let feed = (!added.series_feeds.is_empty()).then(|| {
        let mut f = export::FeedReport::default();
        for b in added
            .series_feeds
            .iter()
            .filter_map(|n| finished.report.block(n))
        {
            f.rows += b.counter("rows").unwrap_or(0);
            f.send_errors += b.counter("send_errors").unwrap_or(0);
        }
        f
    });
    let mut extra = export::report(input.summary, &exporters, feed);
    extra.extend(analysis.report(input.summary, &finished.report));
    summary::print_with(
        command,
        input.summary,
        &report,
        &meter,
        table,
        series_stats,
        extra,
    );
    Ok(match input.live {
        None => file_exit_code(&report, &exporters, input.summary),
        Some(_) => exit_code(&report),
    })
}

/// The exit code of a run over capture files with exporters: 1 also when an exporter failed
/// to send records (the run waited for its exporters, so none had to be lost), each named
/// with its error (on standard error, unless the JSON summary, which has the exporters' errors,
/// is all that should be there).
fn file_exit_code(
    report: &RunReport,
    exporters: &[trawl_export::ExporterReport],
    summary: flag::SummaryFormat,
) -> ExitCode {
    let failures = export::failures(exporters);
    if summary != flag::SummaryFormat::Json {
        for f in &failures {
            eprintln!("trawl: error: {f}");
        }
    }
    if failures.is_empty() {
        exit_code(report)
    } else {
        ExitCode::from(1)
    }
}
