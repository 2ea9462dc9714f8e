//! The end-of-run summary on standard error: text for people, JSON for scripts and tests.
use trawl_flow::decode::ParseOutcome;
use trawl_flow::{EndReason, MeterStats, TableSize};
use trawl_series::SeriesStats;

use crate::flag::SummaryFormat;
use trawl_compose::human_rate;

use crate::run::RunReport;

/// The rare parts of the capture line: said only when they happened.
fn live_notes(s: &trawl_capture::live::LiveStats) -> String {
    let mut notes = String::new();
    if s.loopback_outgoing > 0 {
        notes += &format!(
            "; {} outgoing loopback copies skipped (each packet counted once)",
            s.loopback_outgoing
        );
    }
    if s.interface_down > 0 {
        notes += &format!("; interface went down {} time(s)", s.interface_down);
    }
    notes
}

/// The summary of a run that metered: text, or one JSON object with `extra`'s sections
/// (exporters, logs, `trawl run`'s packet store and flow database), whatever the run had.
pub fn print_with(
    command: &str,
    format: SummaryFormat,
    report: &RunReport,
    m: &MeterStats,
    table: TableSize,
    series: Option<SeriesStats>,
    extra: Vec<(&str, serde_json::Value)>,
) {
    match format {
        SummaryFormat::None => {}
        SummaryFormat::Json => {
            let outcomes: serde_json::Map<String, serde_json::Value> = ParseOutcome::ALL
                .iter()
                .map(|o| (o.name().to_string(), m.outcomes.get(*o).into()))
                .collect();
            let reasons: serde_json::Map<String, serde_json::Value> = EndReason::ALL
                .iter()
                .map(|r| (r.name().to_string(), m.records[*r as usize].into()))
                .collect();
            let mut v = serde_json::json!({
                "command": command,
                "files_read": report.files_read,
                "files_failed": report.files_failed,
                "input_errors": report.input_errors,
                "packets_read": report.source.records,
                "captured_bytes": report.source.captured_bytes,
                "wire_bytes_read": report.source.wire_bytes,
                "truncated_records": report.source.truncated_records,
                "skipped_blocks": report.source.skipped_blocks,
                "filter_rejected": report.filter_rejected,
                "filter_warnings": report.filter_warnings,
                "packets": m.packets,
                // False for `trawl run` without flow or series outputs: packets counted only.
                "flows_metered": !(m.packets > 0 && m.outcomes.total() == 0),
                "bytes": m.wire_bytes,
                "decode": outcomes,
                "flows_created": m.flows_created,
                "records": m.records_total(),
                "end_reasons": reasons,
                "fragments_resolved": m.fragments_resolved,
                "fragments_unmatched": m.fragments_unmatched,
                "late_packets": m.late_packets,
                "peak_flows": m.peak_flows,
                "table_capacity": table.capacity,
                "table_bytes": table.bytes,
                // null unless the table was well used (see TableSize::per_flow).
                "bytes_per_flow": table.per_flow(),
                "elapsed_s": report.elapsed.as_secs_f64(),
            });
            if let Some(l) = &report.live {
                v["live"] = serde_json::json!({
                    "interfaces": l.interfaces,
                    "workers": l.workers,
                    "kernel_packets": l.stats.kernel_packets,
                    "kernel_drops": l.stats.kernel_drops,
                    // On loopback the kernel shows each packet twice; the leaving copy is
                    // skipped (and counted here), as libpcap does.
                    "loopback_outgoing_skipped": l.stats.loopback_outgoing,
                    "kernel_freezes": l.stats.kernel_freezes,
                    "hardware_timestamps": l.stats.hardware_timestamps,
                    "vlan_tags_restored": l.stats.vlan_restored,
                    "interface_down": l.stats.interface_down,
                    "reopened": l.stats.reopened,
                    "kernel_filter": l.kernel_filter,
                    "user": l.user,
                    "duplicates_removed": l.duplicates,
                    "timestamp_sources": l.timestamp_sources,
                });
                if let Some(r) = &l.ring {
                    v["live"]["ring"] = serde_json::json!({
                        "records_written": r.records_written,
                        "bytes_written": r.bytes_written,
                        "records_truncated": r.records_truncated,
                        "producer_waits": r.wait_count,
                        "producer_wait_ns": r.wait_ns,
                        "lossy_skips": r.lossy_skips,
                        "listeners_reclaimed": r.listeners_reclaimed,
                    });
                }
            }
            if let Some(s) = series {
                v["series_rows"] = s.rows.into();
                v["series_late_packets"] = s.late_packets.into();
                v["series_skipped_empty_seconds"] = s.skipped_empty_seconds.into();
            }
            for (key, value) in extra {
                v[key] = value;
            }
            eprintln!("{v}");
        }
        SummaryFormat::Text => {
            let secs = report.elapsed.as_secs_f64().max(1e-9);
            eprintln!(
                "trawl {command}: {} packets, {} bytes, {} flows ({} records) in {:.2} s ({} packets/s)",
                m.packets,
                m.wire_bytes,
                m.flows_created,
                m.records_total(),
                secs,
                human_rate(m.packets as f64 / secs)
            );
            if m.packets > 0 && m.outcomes.total() == 0 {
                // `trawl run` with no flow or series output counts packets only.
                eprintln!("  flows not metered: no flow or series output was asked for");
            } else {
                let outcomes: Vec<String> = ParseOutcome::ALL
                    .iter()
                    .filter(|o| m.outcomes.get(**o) > 0)
                    .map(|o| format!("{} {}", o.name(), m.outcomes.get(*o)))
                    .collect();
                eprintln!("  decode: {}", outcomes.join(", "));
                let reasons: Vec<String> = EndReason::ALL
                    .iter()
                    .filter(|r| m.records[**r as usize] > 0)
                    .map(|r| format!("{} {}", r.name(), m.records[*r as usize]))
                    .collect();
                eprintln!("  records by end reason: {}", reasons.join(", "));
            }
            match &report.live {
                Some(l) => eprintln!(
                    "  capture: {} on {} worker(s); kernel saw {} packets, dropped {} ({} ring freezes); {} truncated (snaplen), {} hardware timestamps, {} VLAN tags restored{}",
                    l.interfaces.join(", "),
                    l.workers,
                    l.stats.kernel_packets,
                    l.stats.kernel_drops,
                    l.stats.kernel_freezes,
                    report.source.truncated_records,
                    l.stats.hardware_timestamps,
                    l.stats.vlan_restored,
                    live_notes(&l.stats)
                ),
                None => eprintln!(
                    "  input: {} files read, {} failed, {} truncated records (snaplen), {} blocks skipped",
                    report.files_read,
                    report.files_failed,
                    report.source.truncated_records,
                    report.source.skipped_blocks
                ),
            }
            if report.filter_rejected > 0 || !report.filter_warnings.is_empty() {
                eprintln!("  filter: {} packets rejected", report.filter_rejected);
            }
            if m.fragments_resolved + m.fragments_unmatched > 0 {
                eprintln!(
                    "  fragments: {} attributed, {} without their first fragment",
                    m.fragments_resolved, m.fragments_unmatched
                );
            }
            eprintln!(
                "  flow table: {} flows ({} MiB at capacity), peak {} concurrent{}; {} late packets",
                table.capacity,
                table.bytes.div_ceil(1 << 20),
                m.peak_flows,
                table
                    .per_flow()
                    .map(|b| format!(", {b} bytes per flow"))
                    .unwrap_or_default(),
                m.late_packets
            );
            if let Some(s) = series {
                eprintln!(
                    "  series: {} rows, {} late packets, {} empty seconds not written",
                    s.rows, s.late_packets, s.skipped_empty_seconds
                );
            }
            for w in &report.filter_warnings {
                eprintln!("  warning: {w}");
            }
            for e in &report.input_errors {
                eprintln!("  error: {e}");
            }
        }
    }
}
