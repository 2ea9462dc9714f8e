//! The part of a command's plan shared by capture files and live capture: given the gates that
//! emit packets (a `pcap_source`'s, or one per live worker), the consumers the flags ask for —
//! a `flow_meter` per gate, and the writers of its records and rows.
//!
//! ```text
//! file.packets ─▶ meter.packets ─┬─ meter.flows  ─▶ flows.flows    (flow_writer)
//!                                └─ meter.series ─▶ series.series  (series_writer)
//! ```
//! With several gates each has its own meter (`meter0`, `meter1`, ...); their records all go
//! to the one writer (and store), their rows through a `series_merge`. A flow database also
//! gets the rows (`series_store`) and, unless turned off, the change detector's alarms
//! (`series_change` → `alarm_store`). A Kafka destination with `series=` gets the rows too
//! (`export.series`), and one with `alarms=` the change detector's alarms (`export.alarms`;
//! the detector is added for it when no database has one).
use trawl_blocks::output::{TextFormat, TimeFormat};
use trawl_compose::{Document, Policy};
use trawl_flow::decode::TunnelMode;
use trawl_flow::FlowConfig;

use super::span;
use crate::export::ExportPlan;

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
#[derive(Clone, Debug, Default)]
pub struct Consumers {
    /// The flow meter's settings (`--idle`, `--active`, `--capacity`, `--tunnel`,
    /// `--payload-bytes`, ...).
    pub flow: FlowConfig,
    /// Flow records to this output.
    pub flows: Option<TextOut>,
    /// Per-second rows to this output.
    pub series: Option<TextOut>,
    /// Flow records into this flow database (the meter must then cut records at its 5-minute
    /// blocks: `flow.interval_align_ns` = `trawl_store::BLOCK_NS`).
    pub store: Option<StoreOut>,
    /// Flow records to exporters and the flow feed (`flow_export`).
    pub export: Option<ExportOut>,
    /// Per-second rows to a multicast feed (`series_feed`).
    pub series_feed: Option<SeriesFeedOut>,
    /// `--anonymize` and `--keep`: the meters anonymize their records, so every output gets
    /// them anonymized.
    pub anonymize: crate::flag::AnonymizeKey,
    /// Live capture on these interfaces (a gate's `iface` indexes them): records name their
    /// interface, exporters use its kernel index, feeds its group; meters run on the thread
    /// of their gate's source (pool `capture`), the rest on the pool `outputs`.
    pub interfaces: Vec<String>,
    /// `--analyze app`: the meters label records with their application, CSV writers add
    /// the columns.
    pub app: bool,
    /// `--geoip-asn`, `--geoip-country`: the meters enrich their records, CSV writers add
    /// the columns.
    pub geo: crate::enrich::GeoArgs,
}

/// A gate that emits packets, and where its source runs.
#[derive(Clone, Debug)]
pub struct PacketGate {
    /// `block.gate`.
    pub gate: String,
    /// Its interface: an index into [`Consumers::interfaces`] (0 for files).
    pub iface: usize,
    /// Its source's thread in the pool `capture` (live), where its meter runs too.
    pub thread: Option<usize>,
}

impl PacketGate {
    /// The one gate of capture files.
    pub fn files(gate: String) -> PacketGate {
        PacketGate {
            gate,
            iface: 0,
            thread: None,
        }
    }
}

/// Exporters of flow records (`--export`, `--flows-feed`): one `flow_export` block.
#[derive(Clone, Debug)]
pub struct ExportOut {
    /// As `--export` takes them; the flow feed as `feed:GROUP:PORT`.
    pub destinations: Vec<String>,
    pub pen: u32,
    /// Wait for slow exporters (files) instead of dropping records (live).
    pub lossless: bool,
    /// Multicast TTL and source address of the flow feed.
    pub feed_ttl: u32,
    pub feed_source: Option<std::net::Ipv4Addr>,
    /// A destination sends per-second rows (Kafka's `series=`), alarms (`alarms=`).
    pub series: bool,
    pub alarms: bool,
}

/// The series feed (`--series-feed`).
#[derive(Clone, Debug)]
pub struct SeriesFeedOut {
    /// `GROUP:PORT` of the first interface (the others: GROUP+n).
    pub group: String,
    pub pen: u32,
    pub ttl: u32,
    pub source: Option<std::net::Ipv4Addr>,
}

impl ExportOut {
    /// The exporters' block of `plan` (None without destinations). `lossless`: capture files
    /// wait for the exporters; live capture drops (counted) rather than wait.
    pub fn of(plan: &ExportPlan, lossless: bool) -> Option<ExportOut> {
        let feed = plan.destinations.iter().find_map(|d| match d {
            trawl_export::Destination::Feed(f) => Some(*f),
            _ => None,
        });
        let kafka = || {
            plan.destinations.iter().filter_map(|d| match d {
                trawl_export::Destination::Kafka(k) => Some(k),
                _ => None,
            })
        };
        plan.exports_flows().then(|| ExportOut {
            series: kafka().any(|k| k.series_topic.is_some()),
            alarms: kafka().any(|k| k.alarms_topic.is_some()),
            destinations: plan.destinations.iter().map(|d| d.to_string()).collect(),
            pen: plan.pen,
            lossless,
            feed_ttl: feed.map_or(1, |f| f.ttl),
            feed_source: feed.and_then(|f| f.source),
        })
    }
}

impl SeriesFeedOut {
    /// The series feed's block of `plan`.
    pub fn of(plan: &ExportPlan) -> Option<SeriesFeedOut> {
        plan.series_feed.map(|f| SeriesFeedOut {
            group: f.to_string(),
            pen: plan.pen,
            ttl: f.ttl,
            source: f.source,
        })
    }
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
    /// Store the per-second rows beside the records (`series_store`).
    pub series: bool,
    /// Watch the per-second rows for changes (`series_change`) and store its alarms.
    pub change: bool,
}

/// The names of what [`Consumers::add`] put into the document, for reading the report back.
#[derive(Clone, Debug, Default)]
pub struct Added {
    /// One `flow_meter` per packet gate, in the order of the gates.
    pub meters: Vec<String>,
    /// The `flow_export` block, with its destinations.
    pub export: Option<(String, Vec<String>)>,
    /// The `series_feed` blocks.
    pub series_feeds: Vec<String>,
}

/// The name of the exporters' block.
pub const EXPORT: &str = "export";

impl Consumers {
    /// Adds a `flow_meter` for each gate of `packet_gates` and the writers, exporters and
    /// feeds the outputs ask for.
    pub fn add(&self, doc: &mut Document, packet_gates: &[PacketGate]) -> Added {
        let live = !self.interfaces.is_empty();
        let meters: Vec<String> = match packet_gates {
            [_] => vec!["meter".to_string()],
            many => (0..many.len()).map(|i| format!("meter{i}")).collect(),
        };
        for (gate, meter) in packet_gates.iter().zip(&meters) {
            let b = flow_meter(doc, meter, &self.flow, gate.thread, &self.anonymize)
                .set_some("app", self.app.then_some(true));
            let _ = self.geo.set_on(b);
            doc.connect(&gate.gate, &[&format!("{meter}.packets")], Policy::Wait);
        }
        let outputs = self.flows.is_some()
            || self.series.is_some()
            || self.store.is_some()
            || self.export.is_some()
            || self.series_feed.is_some();
        // Live, the outputs have their own thread: capture threads only capture and meter.
        // So do those of meters on threads of their own (files with `--workers`): queues
        // from the reading thread to the meters and back would go round in a circle.
        let threaded = packet_gates.iter().any(|g| g.thread.is_some());
        let pool = ((live || threaded) && outputs).then(|| {
            doc.pool_of_threads(OUTPUTS, 1);
            OUTPUTS
        });
        let mut flow_inputs: Vec<String> = Vec::new();
        if let Some(out) = &self.flows {
            writer(doc, "flows", "flow_writer", out, pool)
                .set_some("payload", (self.flow.payload_bytes > 0).then_some(true))
                .set_some(
                    "tunnel",
                    (self.flow.decode.tunnel == TunnelMode::Inner).then_some(true),
                )
                .set_some("features", features(&self.flow))
                .set_some(
                    "app",
                    (self.app && out.format == TextFormat::Csv).then_some(true),
                )
                .set_some(
                    "enriched",
                    (self.geo.any() && out.format == TextFormat::Csv).then_some(true),
                );
            flow_inputs.push("flows.flows".into());
        }
        if let Some(s) = &self.store {
            on(doc.block("store", "flow_store"), pool)
                .set("dir", s.dir.as_str())
                .set("iface", s.iface.as_str())
                .set("codec", s.codec.as_str())
                .set("grace", span(s.grace_ns))
                .set_some("keep_days", s.keep_days.map(i64::from))
                .set_some("max_size", s.max_size.map(|b| b as i64));
            flow_inputs.push("store.flows".into());
        }
        let mut added = Added::default();
        if let Some(e) = &self.export {
            self.exporters(doc, e, pool);
            flow_inputs.push(format!("{EXPORT}.flows"));
            added.export = Some((EXPORT.to_string(), e.destinations.clone()));
        }
        if !flow_inputs.is_empty() {
            let to: Vec<&str> = flow_inputs.iter().map(String::as_str).collect();
            for m in &meters {
                doc.connect(&format!("{m}.flows"), &to, Policy::Wait);
            }
        }
        let mut series_inputs: Vec<String> = Vec::new();
        let export_alarms = self
            .export
            .as_ref()
            .filter(|e| e.alarms)
            .map(|_| format!("{EXPORT}.alarms"));
        let mut change_made = false;
        if let Some(s) = self.store.as_ref().filter(|s| s.series) {
            stored_series(doc, s, pool, &mut series_inputs, export_alarms.as_deref());
            change_made = s.change;
        }
        if self.export.as_ref().is_some_and(|e| e.series) {
            series_inputs.push(format!("{EXPORT}.series"));
        }
        if let Some(to) = export_alarms.as_deref().filter(|_| !change_made) {
            // The alarms of the change detector, which no database has made here.
            on(doc.block(EXPORT_CHANGE, "series_change"), pool);
            doc.connect(&format!("{EXPORT_CHANGE}.alarms"), &[to], Policy::Wait);
            series_inputs.push(format!("{EXPORT_CHANGE}.series"));
        }
        if let Some(out) = &self.series {
            writer(doc, "series", "series_writer", out, pool);
            series_inputs.push("series.series".into());
        }
        match &self.series_feed {
            // Several interfaces: each interface's rows to its own group (the rows of all
            // of them only to the writer).
            Some(f) if self.interfaces.len() > 1 => {
                for (i, iface) in self.interfaces.iter().enumerate() {
                    let name = format!("series_feed{i}");
                    self.series_feed_block(doc, &name, f, i, pool);
                    let mine: Vec<&String> = packet_gates
                        .iter()
                        .zip(&meters)
                        .filter(|(g, _)| g.iface == i)
                        .map(|(_, m)| m)
                        .collect();
                    let sum = format!("series_sum_{}", super::ident(iface));
                    rows_into(doc, &mine, &sum, &format!("{name}.series"), pool);
                    added.series_feeds.push(name);
                }
            }
            Some(f) => {
                self.series_feed_block(doc, "series_feed", f, 0, pool);
                series_inputs.push("series_feed.series".into());
                added.series_feeds.push("series_feed".into());
            }
            None => {}
        }
        if !series_inputs.is_empty() {
            let all: Vec<&String> = meters.iter().collect();
            let to: Vec<&str> = series_inputs.iter().map(String::as_str).collect();
            rows_into_all(doc, &all, "series_sum", &to, pool);
        }
        added.meters = meters;
        added
    }

    /// The `flow_export` block of `e`.
    fn exporters(&self, doc: &mut Document, e: &ExportOut, pool: Option<&str>) {
        let destinations: Vec<toml::Value> = e
            .destinations
            .iter()
            .map(|d| toml::Value::from(d.as_str()))
            .collect();
        let interfaces: Vec<toml::Value> = self
            .interfaces
            .iter()
            .map(|i| toml::Value::from(i.as_str()))
            .collect();
        let feed = e.destinations.iter().any(|d| d.starts_with("feed:"));
        on(doc.block(EXPORT, "flow_export"), pool)
            .set("destinations", toml::Value::Array(destinations))
            .set_some(
                "interfaces",
                (!interfaces.is_empty()).then_some(toml::Value::Array(interfaces)),
            )
            .set("pen", i64::from(e.pen))
            .set_some("lossless", e.lossless.then_some(true))
            .set_some("features", features(&self.flow))
            .set_some(
                "feed_ttl",
                (feed && e.feed_ttl != 1).then_some(i64::from(e.feed_ttl)),
            )
            .set_some(
                "feed_source",
                e.feed_source.filter(|_| feed).map(|a| a.to_string()),
            );
    }

    /// A `series_feed` block for interface `slot` (files: slot 0, observation domain 1).
    fn series_feed_block(
        &self,
        doc: &mut Document,
        name: &str,
        f: &SeriesFeedOut,
        slot: usize,
        pool: Option<&str>,
    ) {
        on(doc.block(name, "series_feed"), pool)
            .set("group", f.group.as_str())
            .set_some("slot", (slot > 0).then_some(slot as i64))
            .set_some("interface", self.interfaces.get(slot).map(String::as_str))
            .set_some("ttl", (f.ttl != 1).then_some(i64::from(f.ttl)))
            .set_some("source", f.source.map(|a| a.to_string()))
            .set("pen", i64::from(f.pen));
    }
}

/// The rows into the database beside the records (`series_store`), and, when asked, through
/// the change detector into its alarms (`series_change` → `alarm_store`, and `export_alarms`
/// when an exporter sends them).
fn stored_series(
    doc: &mut Document,
    s: &StoreOut,
    pool: Option<&str>,
    inputs: &mut Vec<String>,
    export_alarms: Option<&str>,
) {
    on(doc.block(SERIES_DB, "series_store"), pool)
        .set("dir", s.dir.as_str())
        .set("iface", s.iface.as_str());
    inputs.push(format!("{SERIES_DB}.series"));
    if s.change {
        on(doc.block(CHANGE, "series_change"), pool);
        on(doc.block(ALARMS, "alarm_store"), pool)
            .set("dir", s.dir.as_str())
            .set("iface", s.iface.as_str());
        let store = format!("{ALARMS}.events");
        let mut to = vec![store.as_str()];
        to.extend(export_alarms);
        doc.connect(&format!("{CHANGE}.alarms"), &to, Policy::Wait);
        inputs.push(format!("{CHANGE}.series"));
    }
}

/// The names of the stored series' blocks.
pub const SERIES_DB: &str = "series_db";
pub const CHANGE: &str = "change";
pub const ALARMS: &str = "alarms";
/// The change detector whose alarms only exporters take (no database).
pub const EXPORT_CHANGE: &str = "export_change";

/// The pool of the outputs of a live plan.
pub const OUTPUTS: &str = "outputs";

/// Places a block on `pool`'s thread, when there is one.
fn on<'a>(
    b: trawl_compose::BlockBuilder<'a>,
    pool: Option<&str>,
) -> trawl_compose::BlockBuilder<'a> {
    match pool {
        Some(p) => b.on(p, Some(0)),
        None => b,
    }
}

/// The rows of `meters` into `to`: straight from one meter, through a `series_merge` named
/// `sum` from several.
fn rows_into(doc: &mut Document, meters: &[&String], sum: &str, to: &str, pool: Option<&str>) {
    rows_into_all(doc, meters, sum, &[to], pool);
}

fn rows_into_all(
    doc: &mut Document,
    meters: &[&String],
    sum: &str,
    to: &[&str],
    pool: Option<&str>,
) {
    if let [m] = meters {
        doc.connect(&format!("{m}.series"), to, Policy::Wait);
        return;
    }
    on(doc.block(sum, "series_merge"), pool);
    for m in meters {
        doc.connect(
            &format!("{m}.series"),
            &[&format!("{sum}.series")],
            Policy::Wait,
        );
    }
    doc.connect(&format!("{sum}.series"), to, Policy::Wait);
}

/// A `flow_meter` block named `name` with the settings of `flow`, on capture thread `thread`
/// when live.
pub fn flow_meter<'a>(
    doc: &'a mut Document,
    name: &str,
    flow: &FlowConfig,
    thread: Option<usize>,
    anonymize: &crate::flag::AnonymizeKey,
) -> trawl_compose::BlockBuilder<'a> {
    let tunnel = match flow.decode.tunnel {
        TunnelMode::Outer => "outer",
        TunnelMode::Inner => "inner",
    };
    let mut b = doc.block(name, "flow_meter");
    if thread.is_some() {
        b = b.on("capture", thread);
    }
    b = anonymize.set_on(b);
    b.set("idle", span(flow.idle_timeout_ns))
        .set("active", span(flow.active_timeout_ns))
        .set("tcp_linger", span(flow.tcp_linger_ns))
        .set_some(
            "interval",
            (flow.interval_align_ns > 0).then(|| span(flow.interval_align_ns)),
        )
        .set("capacity", flow.capacity as i64)
        .set("tunnel", tunnel)
        .set_some(
            "payload_bytes",
            (flow.payload_bytes > 0).then_some(flow.payload_bytes as i64),
        )
        .set_some("features", features(flow))
}

/// The `features` setting of meters and flow writers: only when not the default, so the
/// printed composition of the default stays as it was.
pub fn features(flow: &FlowConfig) -> Option<&'static str> {
    (!flow.features.is_full()).then_some(flow.features.name())
}

/// A writer block (`flow_writer`, `series_writer`) for `out`.
fn writer<'a>(
    doc: &'a mut Document,
    name: &str,
    type_name: &str,
    out: &TextOut,
    pool: Option<&str>,
) -> trawl_compose::BlockBuilder<'a> {
    on(doc.block(name, type_name), pool)
        .set("path", out.path.as_str())
        .set("format", out.format.name())
        .set("mode", if out.append { "append" } else { "truncate" })
        // Only when asked: the printed composition of the default stays as it was.
        .set_some(
            "time_format",
            (out.time_format != TimeFormat::Ns).then_some(out.time_format.name()),
        )
}
