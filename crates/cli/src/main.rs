//! The `trawl` command-line tool.
mod args;
mod run;
mod summary;

use std::cell::Cell;
use std::process::ExitCode;

use anyhow::Result;
use clap::Parser;
use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_flow::{FlowMeter, FlowRecord};
use trawl_series::{SeriesConfig, SeriesCounter, SeriesFormat, SeriesRow, SeriesWriter};

use args::{Command, HiInput, LowArgs, OutputFormat};
use run::{check_filter, drive, Event, Output};

fn main() -> ExitCode {
    let low = LowArgs::parse();
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
            let mut out = Output::new(args::open_output(&a.out.output)?);
            writer.write_header(out.buf());
            let mut meter = FlowMeter::new(input.flow.clone());
            // The sink owns the output while the run goes; a closed pipe ends the run early.
            let broken = Cell::new(false);
            let mut sink = |r: &FlowRecord<'_>| {
                writer.write(r, out.buf());
                out.maybe_flush();
                broken.set(out.failed());
            };
            let report = drive(&input, &mut meter, &mut sink, |_| {}, &|| broken.get());
            out.finish()?;
            summary::print("flows", input.summary, &report, &meter, None);
            Ok(exit_code(&report))
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
            let writer = SeriesWriter::new(format);
            let mut out = Output::new(args::open_output(&a.out.output)?);
            writer.write_header(out.buf());
            let mut meter = FlowMeter::new(input.flow.clone());
            let mut series = SeriesCounter::new(SeriesConfig::default());
            let broken = Cell::new(false);
            let mut emit = |r: &SeriesRow| {
                writer.write(r, out.buf());
                out.maybe_flush();
                broken.set(out.failed());
            };
            let mut discard = |_: &FlowRecord<'_>| {};
            let report = drive(
                &input,
                &mut meter,
                &mut discard,
                |event| match event {
                    Event::Packet(pkt, outcome) => {
                        series.observe(pkt.ts_ns, pkt.wire_len, pkt.direction, outcome, &mut emit)
                    }
                    // Rows of the earlier file end here; the older file's seconds follow.
                    Event::TimeReset => series.finish(&mut emit),
                },
                &|| broken.get(),
            );
            series.finish(&mut emit);
            out.finish()?;
            summary::print(
                "series",
                input.summary,
                &report,
                &meter,
                Some(series.stats()),
            );
            Ok(exit_code(&report))
        }
    }
}

fn exit_code(report: &run::RunReport) -> ExitCode {
    if report.input_errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
