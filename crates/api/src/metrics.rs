//! `/metrics`: every counter of the running composition in the Prometheus text format
//! (version 0.0.4). Names follow `trawl_<name>_<unit>_total`; labels are bounded: `block`
//! and `type` (the composition's blocks), `interface` (when the block serves one), `queue`.
//!
//! - the runtime's counters of each block: `trawl_block_messages_in_total`, ...;
//! - each block's own counters as `trawl_<type>_<counter>` (`trawl_afpacket_source_kernel_drops`,
//!   `trawl_flow_store_blocks_written`): untyped, since some are gauges (active flows);
//! - each queue: `trawl_queue_pushed_total`, `..._dropped_total`, `..._waits_total`, and the
//!   gauges `trawl_queue_occupancy`, `trawl_queue_peak`, `trawl_queue_capacity`;
//! - the API's own query scans (also under `trawl serve`): `trawl_api_scans_running`,
//!   `trawl_api_scans_started_total`, `trawl_api_scans_cancelled_total`,
//!   `trawl_api_queries_timed_out_total`, `trawl_api_scan_blocks_total`.
use std::collections::BTreeMap;
use std::fmt::Write as _;

use trawl_compose::Report;

/// The exposition of `report`.
pub(crate) fn render(
    report: Option<&Report>,
    interfaces: &BTreeMap<String, String>,
    uptime_s: f64,
    scans: &crate::scans::ScanCounts,
) -> String {
    let mut out = String::new();
    family(
        &mut out,
        "trawl_uptime_seconds",
        "gauge",
        "Seconds the API has served.",
    );
    let _ = writeln!(out, "trawl_uptime_seconds {uptime_s}");
    let api: [(&str, &str, &str, u64); 5] = [
        (
            "trawl_api_scans_running",
            "gauge",
            "Query scans running now.",
            scans.running,
        ),
        (
            "trawl_api_scans_started_total",
            "counter",
            "Query scans started.",
            scans.started,
        ),
        (
            "trawl_api_scans_cancelled_total",
            "counter",
            "Query scans stopped before their end (past the timeout, or the client went away).",
            scans.cancelled,
        ),
        (
            "trawl_api_queries_timed_out_total",
            "counter",
            "Queries answered 503 past query_timeout_s.",
            scans.timed_out,
        ),
        (
            "trawl_api_scan_blocks_total",
            "counter",
            "Flow database blocks the query scans finished with.",
            scans.blocks,
        ),
    ];
    for (name, kind, help, value) in api {
        family(&mut out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
    let Some(report) = report else {
        return out;
    };
    let labels = |b: &trawl_compose::BlockReport| {
        let mut l = format!("block=\"{}\",type=\"{}\"", esc(&b.name), esc(&b.type_name));
        if let Some(i) = interfaces.get(&b.name) {
            let _ = write!(l, ",interface=\"{}\"", esc(i));
        }
        l
    };
    type Field = fn(&trawl_compose::BlockReport) -> f64;
    let runtime: [(&str, &str, Field); 7] = [
        ("messages_in", "Messages the block received.", |b| {
            b.msgs_in as f64
        }),
        ("items_in", "Items (packets, records, rows) in them.", |b| {
            b.items_in as f64
        }),
        ("messages_out", "Messages the block emitted.", |b| {
            b.msgs_out as f64
        }),
        ("items_out", "Items in them.", |b| b.items_out as f64),
        ("busy_seconds", "Time in the block's own code.", |b| {
            b.busy_ns as f64 / 1e9
        }),
        ("calls", "Calls into the block.", |b| b.calls as f64),
        (
            "errors",
            "Problems the block reported and went on after.",
            |b| b.errors as f64,
        ),
    ];
    for (name, help, value) in runtime {
        let metric = format!("trawl_block_{name}_total");
        family(&mut out, &metric, "counter", help);
        for b in &report.blocks {
            let _ = writeln!(out, "{metric}{{{}}} {}", labels(b), value(b));
        }
    }
    // The blocks' own counters, grouped into one family per type and counter.
    let mut own: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for b in &report.blocks {
        for (k, v) in &b.counters {
            let metric = format!("trawl_{}_{}", ident(&b.type_name), ident(k));
            own.entry(metric.clone())
                .or_default()
                .push(format!("{metric}{{{}}} {v}", labels(b)));
        }
    }
    for (metric, lines) in own {
        family(
            &mut out,
            &metric,
            "untyped",
            "A block's own counter (docs/blocks.md).",
        );
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
    let queues: Vec<_> = report.connections.iter().filter(|c| c.queued).collect();
    type QField = fn(&trawl_compose::ConnectionReport) -> u64;
    let queue: [(&str, &str, &str, QField); 6] = [
        (
            "trawl_queue_pushed_total",
            "counter",
            "Messages put into the queue.",
            |c| c.pushed,
        ),
        (
            "trawl_queue_dropped_total",
            "counter",
            "Messages dropped: queue full or receiver gone.",
            |c| c.dropped,
        ),
        (
            "trawl_queue_waits_total",
            "counter",
            "Times the sender waited for room.",
            |c| c.waits,
        ),
        (
            "trawl_queue_occupancy",
            "gauge",
            "Messages in the queue now.",
            |c| c.occupancy,
        ),
        (
            "trawl_queue_peak",
            "gauge",
            "Most messages found waiting at once.",
            |c| c.peak,
        ),
        (
            "trawl_queue_capacity",
            "gauge",
            "Capacity in messages.",
            |c| c.capacity as u64,
        ),
    ];
    for (metric, kind, help, value) in queue {
        family(&mut out, metric, kind, help);
        for c in &queues {
            let _ = writeln!(
                out,
                "{metric}{{queue=\"{} -> {}\",from=\"{}\",to=\"{}\"}} {}",
                esc(&c.from),
                esc(&c.to),
                esc(&c.from),
                esc(&c.to),
                value(c)
            );
        }
    }
    out
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// A metric name part: letters, digits and `_`.
fn ident(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// A label value with `\`, `"` and newlines escaped.
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
