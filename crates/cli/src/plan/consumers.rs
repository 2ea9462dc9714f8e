//! The part of a command's plan shared by capture files and live capture: given the gates that
//! emit packets (a `pcap_source`'s, or one per live worker), the consumers the flags ask for —
//! a `flow_meter` per gate, and the writers of its records and rows.
//!
//! ```text
//! file.packets ─▶ meter.packets ─┬─ meter.flows  ─▶ flows.flows    (flow_writer)
//!                                └─ meter.series ─▶ series.series  (series_writer)
//! ```
//! With several gates each has its own meter (`meter0`, `meter1`, ...); their records all go
//! to the one writer (and store), their rows through a `series_merge`.
use trawl_blocks::output::{TextFormat, TimeFormat};
use trawl_compose::{Document, Policy};
use trawl_flow::decode::TunnelMode;
use trawl_flow::FlowConfig;

use super::span;

/// A text output of a command: `-o PATH` (`-` is standard output) in `--format`.
#[derive(Clone, Debug)]
pub struct TextOut {
    pub path: String,
    pub format: TextFormat,
    /// `--time-format`.
    pub time_format: TimeFormat,
    /// Append to what the file holds (a monitor's record file) instead of truncating it (a
    /// one-shot command's output, as `tcpdump -w`).
    pub append: bool,
}

/// What consumes the packets: the meter's settings and where its records and rows go.
#[derive(Clone, Debug)]
pub struct Consumers {
    /// The flow meter's settings (`--idle`, `--active`, `--capacity`, `--tunnel`, ...).
    pub flow: FlowConfig,
    /// Flow records to this output.
    pub flows: Option<TextOut>,
    /// Per-second rows to this output.
    pub series: Option<TextOut>,
    /// Flow records into this flow database (the meter must then cut records at its 5-minute
    /// blocks: `flow.interval_align_ns` = `trawl_store::BLOCK_NS`).
    pub store: Option<StoreOut>,
}

/// A flow database the records go into (`flow_store`).
#[derive(Clone, Debug)]
pub struct StoreOut {
    pub dir: String,
    /// The interface name the records are stored under.
    pub iface: String,
    /// `lz4`, `zstd`, `zstd:LEVEL` or `none`.
    pub codec: String,
    /// How long after its interval a block stays open for records still to come.
    pub grace_ns: u64,
    /// Retention the block applies every minute and at its end.
    pub keep_days: Option<u32>,
    pub max_size: Option<u64>,
}

/// The names of what [`Consumers::add`] put into the document, for reading the report back.
#[derive(Clone, Debug, Default)]
pub struct Added {
    /// One `flow_meter` per packet gate, in the order of the gates.
    pub meters: Vec<String>,
}

impl Consumers {
    /// Adds a `flow_meter` for each gate of `packet_gates` (`block.gate`) and the writers the
    /// outputs ask for.
    pub fn add(&self, doc: &mut Document, packet_gates: &[String]) -> Added {
        let meters: Vec<String> = match packet_gates {
            [_] => vec!["meter".to_string()],
            many => (0..many.len()).map(|i| format!("meter{i}")).collect(),
        };
        for (gate, meter) in packet_gates.iter().zip(&meters) {
            flow_meter(doc, meter, &self.flow);
            doc.connect(gate, &[&format!("{meter}.packets")], Policy::Wait);
        }
        if let Some(out) = &self.flows {
            writer(doc, "flows", "flow_writer", out);
            for m in &meters {
                doc.connect(&format!("{m}.flows"), &["flows.flows"], Policy::Wait);
            }
        }
        if let Some(s) = &self.store {
            doc.block("store", "flow_store")
                .set("dir", s.dir.as_str())
                .set("iface", s.iface.as_str())
                .set("codec", s.codec.as_str())
                .set("grace", span(s.grace_ns))
                .set_some("keep_days", s.keep_days.map(i64::from))
                .set_some("max_size", s.max_size.map(|b| b as i64));
            for m in &meters {
                doc.connect(&format!("{m}.flows"), &["store.flows"], Policy::Wait);
            }
        }
        if let Some(out) = &self.series {
            writer(doc, "series", "series_writer", out);
            if let [m] = &meters[..] {
                doc.connect(&format!("{m}.series"), &["series.series"], Policy::Wait);
            } else {
                doc.block("series_sum", "series_merge");
                for m in &meters {
                    doc.connect(&format!("{m}.series"), &["series_sum.series"], Policy::Wait);
                }
                doc.connect("series_sum.series", &["series.series"], Policy::Wait);
            }
        }
        Added { meters }
    }
}

/// A `flow_meter` block named `name` with the settings of `flow` (only those it has:
/// payload bytes are not carried by flow batches).
pub fn flow_meter(doc: &mut Document, name: &str, flow: &FlowConfig) {
    let tunnel = match flow.decode.tunnel {
        TunnelMode::Outer => "outer",
        TunnelMode::Inner => "inner",
    };
    doc.block(name, "flow_meter")
        .set("idle", span(flow.idle_timeout_ns))
        .set("active", span(flow.active_timeout_ns))
        .set("tcp_linger", span(flow.tcp_linger_ns))
        .set_some(
            "interval",
            (flow.interval_align_ns > 0).then(|| span(flow.interval_align_ns)),
        )
        .set("capacity", flow.capacity as i64)
        .set("tunnel", tunnel);
}

/// A writer block (`flow_writer`, `series_writer`) for `out`.
fn writer(doc: &mut Document, name: &str, type_name: &str, out: &TextOut) {
    doc.block(name, type_name)
        .set("path", out.path.as_str())
        .set("format", out.format.name())
        .set("mode", if out.append { "append" } else { "truncate" })
        // Only when asked: the printed composition of the default stays as it was.
        .set_some(
            "time_format",
            (out.time_format != TimeFormat::Ns).then_some(out.time_format.name()),
        );
}
