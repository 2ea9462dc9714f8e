//! The `trawl` command-line tool.
mod args;
#[cfg(test)]
mod cli_doc;
mod collect;
mod compose;
mod config;
mod daemon;
mod detect;
mod dump;
mod export;
mod flag;
mod flows;
mod generate;
mod ingest;
mod live;
mod log;
mod plan;
mod progress;
mod query;
mod run;
mod signals;
mod subscribe;
mod summary;
mod voip;

use std::cell::Cell;
use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, Parser};
use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_flow::{FlowMeter, FlowRecord};
use trawl_series::{SeriesConfig, SeriesCounter, SeriesFormat, SeriesRow, SeriesWriter};

use args::{Command, LowArgs};
use flag::OutputFormat;
use flows::{HiInput, LiveInput};
use run::{check_filter, drive, exit_code, Output, RunReport};

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
        Command::Dump(a) => dump::dump(&a),
        Command::Packets(a) => dump::packets(&a),
        Command::Flows(a) => {
            let input = HiInput::from_low(&a.input, a.payload_bytes)?;
            if let Some(f) = &input.filter {
                check_filter(f)?;
            }
            let format = match a.out.format {
                OutputFormat::Json => RecordFormat::Json,
                OutputFormat::Csv => RecordFormat::Csv,
            };
            let mut writer = RecordWriter::new(format, a.payload_bytes > 0);
            writer.set_rfc3339_times(a.out.time_format == flag::TimeFormat::Rfc3339);
            if input.live.is_some() {
                // Live records carry their interface (each worker sets its own name; the
                // header only needs the column).
                writer.set_iface("");
            }
            let plan = export::ExportPlan::from_args(&a.export)?;
            let composed = input.live.is_none() && !plan.exports_flows() && a.payload_bytes == 0;
            refuse_print_composition(&input, composed)?;
            if composed {
                return files_command("flows", &input, &a.out, false);
            }
            // With exporters, standard output carries records only when asked (-o FILE).
            let main_output = !plan.exports_flows() || a.out.output.as_os_str() != "-";
            let mut out = Output::new(flag::open_output(&a.out.output)?);
            writer.write_header(out.buf());
            let hub = plan.start(input.live.is_none())?;
            if let Some(live) = &input.live {
                let outputs = live::Outputs {
                    flows: main_output.then_some((&mut out, writer)),
                    series: None,
                    export: hub.as_ref(),
                    series_feed: None,
                    store: None,
                };
                let (report, outcome) = run_live(&input, live, outputs)?;
                out.finish()?;
                let reports = hub.map(|h| h.finish()).unwrap_or_default();
                summary::print_with(
                    "flows",
                    input.summary,
                    &report,
                    &outcome.meter,
                    outcome.table,
                    None,
                    export::report(input.summary, &reports, None),
                );
                return Ok(exit_code(&report));
            }
            let mut meter = FlowMeter::new(input.flow.clone());
            // The sink owns the output while the run goes; a closed pipe ends the run early.
            let broken = Cell::new(false);
            let mut handle = hub
                .as_ref()
                .map(|h| export::handle(h, export::FILE_DOMAIN, 0));
            let mut sink = |r: &FlowRecord<'_>| {
                if main_output {
                    writer.write(r, out.buf());
                    out.maybe_flush();
                    broken.set(out.failed());
                }
                if let Some(h) = handle.as_mut() {
                    h.push(r);
                }
            };
            let report = drive(&input, &mut meter, &mut sink, |_, _| {}, &|| broken.get());
            drop(handle);
            out.finish()?;
            let reports = hub.map(|h| h.finish()).unwrap_or_default();
            summary::print_with(
                "flows",
                input.summary,
                &report,
                meter.stats(),
                meter.table_size(),
                None,
                export::report(input.summary, &reports, None),
            );
            Ok(file_exit_code(&report, &reports, input.summary))
        }
        Command::Series(a) => {
            let input = HiInput::from_low(&a.input, 0)?;
            if let Some(f) = &input.filter {
                check_filter(f)?;
            }
            let format = match a.out.format {
                OutputFormat::Json => SeriesFormat::Json,
                OutputFormat::Csv => SeriesFormat::Csv,
            };
            let writer = SeriesWriter::new(format)
                .with_rfc3339_times(a.out.time_format == flag::TimeFormat::Rfc3339);
            let plan = export::ExportPlan::from_args(&a.export)?;
            let composed =
                input.live.is_none() && !plan.exports_flows() && plan.series_feed.is_none();
            refuse_print_composition(&input, composed)?;
            if composed {
                return files_command("series", &input, &a.out, true);
            }
            let hub = plan.start(input.live.is_none())?;
            let mut out = Output::new(flag::open_output(&a.out.output)?);
            writer.write_header(out.buf());
            if let Some(live) = &input.live {
                // The merged series of all interfaces: domain and group of the first one.
                let domain = export::ifindex(&live.interfaces[0]);
                let mut feed = plan.open_series_feed(domain)?;
                let outputs = live::Outputs {
                    flows: None,
                    series: Some((&mut out, writer)),
                    export: hub.as_ref(),
                    series_feed: feed.as_mut(),
                    store: None,
                };
                let (report, outcome) = run_live(&input, live, outputs)?;
                out.finish()?;
                let reports = hub.map(|h| h.finish()).unwrap_or_default();
                summary::print_with(
                    "series",
                    input.summary,
                    &report,
                    &outcome.meter,
                    outcome.table,
                    Some(outcome.series),
                    export::report(input.summary, &reports, feed.as_ref()),
                );
                return Ok(exit_code(&report));
            }
            let mut meter = FlowMeter::new(input.flow.clone());
            let mut series = SeriesCounter::new(SeriesConfig::default());
            let broken = Cell::new(false);
            let mut feed = plan.open_series_feed(export::FILE_DOMAIN)?;
            let mut emit = |r: &SeriesRow| {
                writer.write(r, out.buf());
                out.maybe_flush();
                broken.set(out.failed());
                if let Some(f) = feed.as_mut() {
                    f.send(r);
                }
            };
            let mut handle = hub
                .as_ref()
                .map(|h| export::handle(h, export::FILE_DOMAIN, 0));
            let mut discard = |r: &FlowRecord<'_>| {
                if let Some(h) = handle.as_mut() {
                    h.push(r);
                }
            };
            let report = drive(
                &input,
                &mut meter,
                &mut discard,
                |pkt, outcome| {
                    series.observe(pkt.ts_ns, pkt.wire_len, pkt.direction, outcome, &mut emit)
                },
                &|| broken.get(),
            );
            series.finish(&mut emit);
            drop(handle);
            out.finish()?;
            let reports = hub.map(|h| h.finish()).unwrap_or_default();
            summary::print_with(
                "series",
                input.summary,
                &report,
                meter.stats(),
                meter.table_size(),
                Some(series.stats()),
                export::report(input.summary, &reports, feed.as_ref()),
            );
            Ok(file_exit_code(&report, &reports, input.summary))
        }
        Command::Run(a) => daemon::run(&a),
        Command::ConvertConfig(a) => daemon::convert_config(&a),
        Command::Listen(a) => daemon::listen(&a),
        Command::Collect(a) => collect::run(&a),
        Command::Subscribe(a) => subscribe::run(&a),
        Command::Ingest(a) => ingest::run(&a),
        Command::Query(a) => query::run(&a),
        Command::Detect(a) => detect::run(&a),
        Command::Check(a) => compose::check(&a),
        Command::Blocks(a) => compose::blocks(&a),
        Command::Voip(a) => voip::run(&a),
        Command::Completions(a) => generate::completions(&a, LowArgs::command()),
        Command::Man(a) => generate::man(&a, LowArgs::command()),
    }
}

/// `--print-composition` prints what runs on the block runtime; live capture, exporters and
/// `--payload-bytes` do not run there yet: refused rather than ignored.
fn refuse_print_composition(input: &HiInput, composed: bool) -> Result<()> {
    if input.print_composition && !composed {
        anyhow::bail!(
            "--print-composition: only capture files (-r) without --export, feeds or \
             --payload-bytes run as a composition so far"
        );
    }
    Ok(())
}

/// `trawl flows -r` and `trawl series -r` as a composition: the files' `pcap_source`, a flow
/// meter, and the writer of its records (or of its per-second rows).
fn files_command(
    command: &str,
    input: &HiInput,
    out: &flows::OutputArgs,
    series: bool,
) -> Result<ExitCode> {
    let mut doc = trawl_compose::Document::new();
    let files = plan::files::FileInput {
        files: input.files.clone(),
        filter: input.filter.clone(),
        format: input.forced_format,
    };
    let gate = files.add(&mut doc);
    let text = plan::consumers::TextOut {
        path: out.output.to_string_lossy().into_owned(),
        format: out.format,
        time_format: out.time_format,
        append: false,
    };
    let consumers = plan::consumers::Consumers {
        flow: input.flow.clone(),
        flows: (!series).then(|| text.clone()),
        series: series.then_some(text),
        store: None,
    };
    let added = consumers.add(&mut doc, &[gate]);
    if input.print_composition {
        print!("{}", doc.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    let source = plan::files::SOURCE;
    let finished = plan::run(&doc, input.progress.then_some(source))?;
    let report = plan::input_report(&finished, source);
    let (meter, table, series) = plan::meters(&finished, &added.meters);
    summary::print(command, input.summary, &report, &meter, table, series);
    Ok(exit_code(&report))
}

/// Captures live until SIGINT/SIGTERM, `--duration` or `--count`, then flushes every flow and
/// lets the caller close the outputs whole.
fn run_live(
    input: &HiInput,
    live: &LiveInput,
    outputs: live::Outputs<'_>,
) -> Result<(RunReport, live::LiveOutcome)> {
    let (workers, kernel_filter) = live::open_workers(live, input.filter.as_deref())?;
    live::drop_privileges(live)?;
    let n = workers.len();
    let timestamp_sources = live::timestamp_sources(&workers);
    let stop = signals::install_stop_signals()?;
    let outcome = live::run(
        live,
        &input.flow,
        workers,
        outputs,
        stop,
        input.progress,
        None,
    );
    let report = outcome.report(live, n, kernel_filter, timestamp_sources);
    Ok((report, outcome))
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
