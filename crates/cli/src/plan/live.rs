//! The live part of a plan: `trawl run -i` (and a converted old-format configuration) as a
//! composition of blocks, the default monitor of `compositions/default.toml` built from flags.
//!
//! Per interface and worker an `afpacket_source` (a fanout group per interface when there are
//! several workers), on the `capture` pool, one thread per worker (pinned with `--cpus`). On the
//! worker's thread, called directly: its `flow_meter` (when anything consumes flows or series)
//! and its shared `ring` (`NAME-IFACE-WORKER`, as `trawl listen --ring` names it). On the
//! `outputs` pool, fed through queues: the flow and series writers, the flow database (one
//! `flow_store` per interface), the exporters (one `flow_export` per interface, its index the
//! IPFIX observation domain) and the packet store (`dumper`, lossless).
use anyhow::Result;
use trawl_capture::live::FanoutMode;
use trawl_compose::{Document, Policy};
use trawl_flow::decode::TunnelMode;

use super::consumers::{ExportOut, SeriesFeedOut};
use super::ident;
use crate::config::{RunPlan, StoreOutput};
use crate::flag::OutputFormat;
use crate::flows::LiveInput;

/// How often a live monitor's flow database publishes the rows of its open blocks.
const LIVE_RECENT: &str = "10s";

/// A duration as compositions write it, in the largest unit that says it exactly.
fn span(ns: u64) -> String {
    const S: u64 = 1_000_000_000;
    if ns > 0 && ns.is_multiple_of(86_400 * S) {
        format!("{}d", ns / (86_400 * S))
    } else if ns > 0 && ns.is_multiple_of(3_600 * S) {
        format!("{}h", ns / (3_600 * S))
    } else if ns > 0 && ns.is_multiple_of(60 * S) {
        format!("{}m", ns / (60 * S))
    } else if ns.is_multiple_of(S) {
        format!("{}s", ns / 1_000_000_000)
    } else if ns.is_multiple_of(1_000_000) {
        format!("{}ms", ns / 1_000_000)
    } else if ns.is_multiple_of(1_000) {
        format!("{}us", ns / 1_000)
    } else {
        format!("{ns}ns")
    }
}

/// A size as compositions write it: `64MiB` when it is a whole number of KiB/MiB/GiB.
fn size(bytes: u64) -> toml::Value {
    for (unit, shift) in [("GiB", 30), ("MiB", 20), ("KiB", 10)] {
        if bytes > 0 && bytes.is_multiple_of(1 << shift) {
            return format!("{}{unit}", bytes >> shift).into();
        }
    }
    toml::Value::Integer(bytes as i64)
}

fn format_name(f: OutputFormat) -> &'static str {
    match f {
        OutputFormat::Json => "json",
        OutputFormat::Csv => "csv",
    }
}

fn codec_name(c: trawl_store::Codec) -> String {
    match c {
        trawl_store::Codec::Lz4 => "lz4".into(),
        trawl_store::Codec::None => "none".into(),
        trawl_store::Codec::Zstd(level) => format!("zstd:{level}"),
    }
}

/// The fanout group of interface `i`'s workers: unique per interface and unlikely to meet
/// another process's group (as the capture loop numbered them), never 0.
fn fanout_group(i: usize) -> i64 {
    let g = (std::process::id() as u16)
        .wrapping_mul(64)
        .wrapping_add(i as u16);
    i64::from(g.max(1))
}

/// A capture worker of a live plan: its interface (an index into the `-i` list), its worker
/// number on it, its `afpacket_source` block and that block's thread in the pool `capture`.
#[derive(Clone, Debug)]
pub struct CaptureWorker {
    pub iface: usize,
    pub worker: usize,
    pub name: String,
    pub thread: usize,
}

/// The capture part of every live plan (`trawl run -i`, `flows -i`, `series -i`): the run's
/// `--count`, `--duration` and `--user`, the pool `capture` (one thread per worker, pinned
/// with `--cpus`), and per interface and worker an `afpacket_source` (a fanout group per
/// interface when there are several workers).
pub fn capture(
    doc: &mut Document,
    live: &LiveInput,
    filter: Option<&str>,
    dedup_ns: u64,
) -> Vec<CaptureWorker> {
    let workers = live.workers;
    let total = live.interfaces.len() * workers;
    if let Some(count) = live.count {
        doc.runtime("count", count as i64);
    }
    if let Some(ns) = live.duration_ns {
        doc.runtime("duration", span(ns));
    }
    if let Some(user) = &live.user {
        doc.runtime("user", user.as_str());
    }
    let cores: Vec<usize> = live.cpus.iter().copied().take(total).collect();
    if cores.is_empty() {
        doc.pool_of_threads("capture", total);
    } else {
        doc.pool_on_cores("capture", &cores);
    }
    let capture_threads = if cores.is_empty() { total } else { cores.len() };
    let mut added = Vec::new();
    for (i, iface) in live.interfaces.iter().enumerate() {
        for w in 0..workers {
            let thread = added.len() % capture_threads;
            let name = format!("cap_{}_{w}", ident(iface));
            let s = &live.socket;
            let mut b = doc
                .block(&name, "afpacket_source")
                .on("capture", Some(thread))
                .set("interface", iface.as_str())
                .set("snaplen", i64::from(s.snaplen))
                .set("block_size", size(s.block_size as u64))
                .set("blocks", s.block_count as i64)
                .set("promiscuous", s.promiscuous)
                .set_some("filter", filter)
                .set_some("dedup", (dedup_ns > 0).then(|| span(dedup_ns)));
            if s.timestamps == trawl_capture::live::TimestampMode::Software {
                b = b.set("timestamps", "software");
            }
            if workers > 1 {
                b = b.set("fanout", fanout_group(i)).set(
                    "fanout_mode",
                    match live.fanout {
                        FanoutMode::Symmetric => "symmetric",
                        FanoutMode::KernelHash => "kernel",
                    },
                );
            }
            let _ = b;
            added.push(CaptureWorker {
                iface: i,
                worker: w,
                name,
                thread,
            });
        }
    }
    added
}

/// An interface's rows into the database (`series_store`), and through the change detector
/// into its alarms (`series_change` → `alarm_store`, and `export_alarms` when its exporter
/// sends them): its workers' rows summed first.
fn stored_series(
    doc: &mut Document,
    st: &StoreOutput,
    iface: &str,
    meter_names: &[(usize, String)],
    live: &LiveInput,
    export_alarms: Option<&str>,
) {
    let id = ident(iface);
    let dir = st.db.display().to_string();
    let sum = format!("series_db_sum_{id}");
    let series = format!("series_db_{id}");
    doc.block(&sum, "series_merge").on("outputs", Some(0));
    doc.block(&series, "series_store")
        .on("outputs", Some(0))
        .set("dir", dir.as_str())
        .set("iface", iface);
    let mut to = vec![format!("{series}.series")];
    if st.change {
        let change = format!("change_{id}");
        doc.block(&change, "series_change").on("outputs", Some(0));
        let store = alarm_store(doc, st, iface);
        let mut alarms_to = vec![store.as_str()];
        alarms_to.extend(export_alarms);
        doc.connect(&format!("{change}.alarms"), &alarms_to, Policy::Wait);
        to.push(format!("{change}.series"));
    }
    let to: Vec<&str> = to.iter().map(String::as_str).collect();
    rows_of_iface(doc, &sum, &to, iface, meter_names, live);
}

/// The rows of `iface`'s workers summed by a `series_merge` named `sum` into `to`.
fn rows_of_iface(
    doc: &mut Document,
    sum: &str,
    to: &[&str],
    iface: &str,
    meter_names: &[(usize, String)],
    live: &LiveInput,
) {
    doc.connect(&format!("{sum}.series"), to, Policy::Wait);
    let mine = live.interfaces.iter().position(|i| i == iface);
    for (_, meter) in meter_names.iter().filter(|(i, _)| Some(*i) == mine) {
        doc.connect(
            &format!("{meter}.series"),
            &[&format!("{sum}.series")],
            Policy::Wait,
        );
    }
}

/// The `alarm_store` of an interface (made by the first detector that needs it): its input.
fn alarm_store(doc: &mut Document, st: &StoreOutput, iface: &str) -> String {
    let alarms = format!("alarms_{}", ident(iface));
    if doc.block_table(&alarms).is_none() {
        doc.block(&alarms, "alarm_store")
            .on("outputs", Some(0))
            .set("dir", st.db.display().to_string())
            .set("iface", iface);
    }
    format!("{alarms}.events")
}

/// Heavy hitters are stored as alarms once a minute: every 10 s (the block's default) would
/// be 8,640 reports a day in the alarm list an operator reads.
pub(crate) const HEAVY_INTERVAL: &str = "1m";

/// The packet detectors of an interface (`synflood`, `heavy_hitters`, each unless turned off)
/// on the outputs thread, fed by every worker of the interface (`sources`), their events into
/// the interface's `alarm_store`. Their queues drop (counted) rather than hold capture back:
/// detection is best effort, the packet store is the lossless record.
fn packet_detectors(doc: &mut Document, st: &StoreOutput, iface: &str, sources: &[&str]) {
    let id = ident(iface);
    let detectors = [
        (st.synflood, format!("synflood_{id}"), "synflood", "alarms"),
        (
            st.heavy_hitters,
            format!("heavy_{id}"),
            "heavy_hitters",
            "reports",
        ),
    ];
    for (on, name, type_name, out) in detectors {
        if !on {
            continue;
        }
        doc.block(&name, type_name).on("outputs", Some(0)).set_some(
            "interval",
            (type_name == "heavy_hitters").then_some(HEAVY_INTERVAL),
        );
        let store = alarm_store(doc, st, iface);
        doc.connect(&format!("{name}.{out}"), &[&store], Policy::Wait);
        for source in sources {
            doc.connect(
                &format!("{source}.packets"),
                &[&format!("{name}.packets")],
                Policy::Drop,
            );
        }
    }
}

/// An interface's rows (`series=`) and alarms (`alarms=`) to its exporter, when a Kafka
/// destination sends them: its workers' rows summed, and a change detector of its own unless
/// the database's (`stored_series`) already sends its alarms there.
fn exported_series(
    doc: &mut Document,
    e: &ExportOut,
    iface: &str,
    meter_names: &[(usize, String)],
    live: &LiveInput,
    stored_change: bool,
) {
    let id = ident(iface);
    let mut to = Vec::new();
    if e.series {
        to.push(format!("export_{id}.series"));
    }
    if e.alarms && !stored_change {
        let change = format!("export_change_{id}");
        doc.block(&change, "series_change").on("outputs", Some(0));
        doc.connect(
            &format!("{change}.alarms"),
            &[&format!("export_{id}.alarms")],
            Policy::Wait,
        );
        to.push(format!("{change}.series"));
    }
    if to.is_empty() {
        return;
    }
    let sum = format!("export_series_sum_{id}");
    doc.block(&sum, "series_merge").on("outputs", Some(0));
    let to: Vec<&str> = to.iter().map(String::as_str).collect();
    rows_of_iface(doc, &sum, &to, iface, meter_names, live);
}

/// The monitor `plan` describes, as a composition.
pub fn monitor(plan: &RunPlan) -> Result<Document> {
    let live = &plan.live;
    // Live capture drops records (counted) rather than wait for a slow exporter; the flow
    // feed is one more destination of the exporters (`feed:GROUP:PORT`).
    let export = ExportOut::of(&plan.export, false);
    let feed = export
        .as_ref()
        .filter(|e| e.destinations.iter().any(|d| d.starts_with("feed:")));
    let series_feed = SeriesFeedOut::of(&plan.export);
    let meters = plan.flows.is_some()
        || plan.api.is_some()
        || plan.series.is_some()
        || plan.store.is_some()
        || export.is_some()
        || series_feed.is_some();
    let outputs_needed =
        meters || plan.dump_settings.is_some() || plan.logs.is_some() || plan.voip.is_some();

    let mut doc = Document::new();
    let workers_added = capture(&mut doc, live, plan.filter.as_deref(), plan.dedup_ns);
    if let Some(ns) = plan.stats_interval_ns {
        doc.runtime("stats_interval", span(ns));
    }
    if outputs_needed {
        doc.pool_of_threads("outputs", 1);
    }

    let mut sources = Vec::new();
    let mut threads = Vec::new();
    let mut meter_names: Vec<(usize, String)> = Vec::new();
    for cw in workers_added {
        let (i, w, thread, name) = (cw.iface, cw.worker, cw.thread, cw.name);
        let iface = &live.interfaces[i];
        if meters {
            let meter = format!("meter_{}_{w}", ident(iface));
            let f = &plan.flow;
            let b = doc.block(&meter, "flow_meter");
            let b = plan
                .anonymize
                .set_on(b)
                .on("capture", Some(thread))
                .set("idle", span(f.idle_timeout_ns))
                .set("active", span(f.active_timeout_ns))
                .set("tcp_linger", span(f.tcp_linger_ns))
                .set("capacity", f.capacity as i64)
                .set_some(
                    "tunnel",
                    (f.decode.tunnel == TunnelMode::Inner).then_some("inner"),
                )
                // The flow database needs records cut at its 5-minute blocks; the other
                // outputs then get the same cut records (as the capture loop did).
                .set_some("interval", plan.store.is_some().then_some("5m"))
                .set_some("features", super::consumers::features(f))
                .set_some("app", plan.app.then_some(true));
            let _ = plan.geo.set_on(b);
            meter_names.push((i, meter));
        }
        if let Some((prefix, ring_size)) = &plan.ring {
            doc.block(&format!("ring_{}_{w}", ident(iface)), "ring")
                .on("capture", Some(thread))
                .set("ring", format!("{prefix}-{iface}-{w}"))
                .set("capacity", size(*ring_size as u64));
        }
        if !meters && plan.ring.is_none() && plan.dump_settings.is_none() && plan.logs.is_none() {
            // Nothing consumes the packets: a capture that counts them (the summary's
            // `packets`), as `trawl run` without outputs always did.
            doc.block(&format!("count_{}_{w}", ident(iface)), "count")
                .on("capture", Some(thread));
        }
        sources.push((i, w, name));
        threads.push(thread);
    }
    if let Some(d) = &plan.dump_settings {
        crate::dump::add_dumper(&mut doc, "dump", Some("outputs"), d);
    }
    if let Some(logs) = &plan.logs {
        // Each worker's analysers on its capture thread, the writers on `outputs`.
        let gates: Vec<(String, Option<usize>)> = sources
            .iter()
            .zip(&threads)
            .map(|((_, _, name), t)| (format!("{name}.packets"), Some(*t)))
            .collect();
        logs.add(&mut doc, &gates, Some("outputs"));
    }
    if let Some(dir) = &plan.voip {
        let names: Vec<&str> = sources.iter().map(|(_, _, n)| n.as_str()).collect();
        super::voip::add(&mut doc, dir, &names);
        if let Some(st) = &plan.store {
            // One detector for the run's SIP: its alarms under the first interface.
            let store = alarm_store(&mut doc, st, &live.interfaces[0]);
            super::voip::anomalies(&mut doc, &store);
        }
    }
    if let Some((path, format)) = &plan.flows {
        doc.block("flows_out", "flow_writer")
            .on("outputs", Some(0))
            .set("path", path.display().to_string())
            .set("format", format_name(*format))
            .set_some("features", super::consumers::features(&plan.flow))
            .set_some(
                "app",
                (plan.app && *format == OutputFormat::Csv).then_some(true),
            )
            .set_some(
                "enriched",
                (plan.geo.any() && *format == OutputFormat::Csv).then_some(true),
            );
    }
    // Several interfaces: the API gets each one's rows summed apart (`api_series`).
    let api_per_iface = plan.api.is_some() && live.interfaces.len() > 1;
    let series_merge = plan.series.is_some()
        || (plan.api.is_some() && !api_per_iface)
        || (series_feed.is_some() && live.interfaces.len() == 1);
    if series_merge {
        doc.block("series", "series_merge").on("outputs", Some(0));
    }
    if let Some((path, format)) = &plan.series {
        doc.block("series_out", "series_writer")
            .on("outputs", Some(0))
            .set("path", path.display().to_string())
            .set("format", format_name(*format));
    }
    for iface in &live.interfaces {
        if let Some(st) = &plan.store {
            let mut b = doc
                .block(&format!("store_{}", ident(iface)), "flow_store")
                .on("outputs", Some(0))
                .set("dir", st.db.display().to_string())
                .set("iface", iface.as_str())
                .set("codec", codec_name(st.config.codec))
                // Live: the console and the API see flows seconds after they end, not when
                // their 5-minute block is written.
                .set("recent", LIVE_RECENT)
                .set_some("keep_days", st.retention.max_age_days.map(i64::from));
            if let Some(max) = st.retention.max_bytes {
                b = b.set("max_size", size(max));
            }
            let _ = b;
        }
        let export_alarms = export
            .as_ref()
            .filter(|e| e.alarms)
            .map(|_| format!("export_{}.alarms", ident(iface)));
        if let Some(st) = &plan.store {
            stored_series(
                &mut doc,
                st,
                iface,
                &meter_names,
                live,
                export_alarms.as_deref(),
            );
            let mine: Vec<&str> = sources
                .iter()
                .filter(|(i, _, _)| live.interfaces[*i] == *iface)
                .map(|(_, _, name)| name.as_str())
                .collect();
            // Their events name addresses as captured: not beside anonymized records (as
            // `trawl ingest --anonymize`).
            if plan.anonymize.key.is_none() {
                packet_detectors(&mut doc, st, iface, &mine);
            }
        }
        if let Some(e) = &export {
            let stored_change = plan.store.as_ref().is_some_and(|st| st.change);
            exported_series(&mut doc, e, iface, &meter_names, live, stored_change);
            let destinations: Vec<toml::Value> = e
                .destinations
                .iter()
                .map(|d| toml::Value::from(d.as_str()))
                .collect();
            let b = doc
                .block(&format!("export_{}", ident(iface)), "flow_export")
                .on("outputs", Some(0))
                .set("destinations", destinations)
                .set_some("features", super::consumers::features(&plan.flow));
            // With the flow feed, the records of interface n go to the feed's group + n.
            let b = match feed {
                None => b.set("interface", iface.as_str()),
                Some(f) => b
                    .set(
                        "interfaces",
                        toml::Value::Array(
                            live.interfaces
                                .iter()
                                .map(|i| toml::Value::from(i.as_str()))
                                .collect(),
                        ),
                    )
                    .set_some(
                        "feed_ttl",
                        (f.feed_ttl != 1).then_some(i64::from(f.feed_ttl)),
                    )
                    .set_some("feed_source", f.feed_source.map(|a| a.to_string())),
            };
            b.set("pen", i64::from(e.pen));
        }
    }
    if let Some(f) = &series_feed {
        // One interface: the rows of all its workers; several: each interface's rows to its
        // own group (as `trawl series -i` sends them).
        for (i, iface) in live.interfaces.iter().enumerate() {
            let name = if live.interfaces.len() == 1 {
                "series_feed".to_string()
            } else {
                format!("series_feed_{}", ident(iface))
            };
            doc.block(&name, "series_feed")
                .on("outputs", Some(0))
                .set("group", f.group.as_str())
                .set_some("slot", (i > 0).then_some(i as i64))
                .set("interface", iface.as_str())
                .set_some("ttl", (f.ttl != 1).then_some(i64::from(f.ttl)))
                .set_some("source", f.source.map(|a| a.to_string()))
                .set("pen", i64::from(f.pen));
            if live.interfaces.len() == 1 {
                doc.connect("series.series", &[&format!("{name}.series")], Policy::Wait);
            } else {
                let sum = format!("series_{}", ident(iface));
                doc.block(&sum, "series_merge").on("outputs", Some(0));
                for (_, meter) in meter_names.iter().filter(|(m, _)| *m == i) {
                    doc.connect(
                        &format!("{meter}.series"),
                        &[&format!("{sum}.series")],
                        Policy::Wait,
                    );
                }
                doc.connect(
                    &format!("{sum}.series"),
                    &[&format!("{name}.series")],
                    Policy::Wait,
                );
            }
        }
    }

    for (i, w, source) in &sources {
        let iface = &live.interfaces[*i];
        let out = format!("{source}.packets");
        if meters {
            doc.connect(
                &out,
                &[&format!("meter_{}_{w}.packets", ident(iface))],
                Policy::Wait,
            );
        }
        if plan.ring.is_some() {
            doc.connect(
                &out,
                &[&format!("ring_{}_{w}.packets", ident(iface))],
                Policy::Wait,
            );
        }
        if !meters && plan.ring.is_none() && plan.dump_settings.is_none() && plan.logs.is_none() {
            doc.connect(
                &out,
                &[&format!("count_{}_{w}.in", ident(iface))],
                Policy::Wait,
            );
        }
        if plan.dump_settings.is_some() {
            // The packet store is lossless: a slow disk holds capture back (kernel drops).
            doc.connect(&out, &["dump.packets"], Policy::Wait);
        }
    }
    for (i, meter) in &meter_names {
        let iface = ident(&live.interfaces[*i]);
        let mut to: Vec<String> = Vec::new();
        if plan.flows.is_some() {
            to.push("flows_out.flows".into());
        }
        if plan.store.is_some() {
            to.push(format!("store_{iface}.flows"));
        }
        if export.is_some() {
            to.push(format!("export_{iface}.flows"));
        }
        if !to.is_empty() {
            let to: Vec<&str> = to.iter().map(String::as_str).collect();
            doc.connect(&format!("{meter}.flows"), &to, Policy::Wait);
        }
        if series_merge {
            doc.connect(&format!("{meter}.series"), &["series.series"], Policy::Wait);
        }
    }
    if plan.series.is_some() {
        doc.connect("series.series", &["series_out.series"], Policy::Wait);
    }
    if let Some(api) = &plan.api {
        add_api(&mut doc, plan, api, &sources, &meter_names);
        if api_per_iface {
            api_series(&mut doc, &meter_names, live);
        } else {
            doc.connect("series.series", &[&format!("{API}.series")], Policy::Wait);
        }
        if plan.voip.is_some() {
            super::voip::serve_active(&mut doc, API);
        }
    }
    Ok(doc)
}

/// The name of the `http_api` block of `trawl run --api`.
pub const API: &str = "api";

/// Each interface's rows summed apart into the API (`series_api_IFACE`): a merge's rows name
/// their interface when all its meters' do, so `/api/v1/series` serves every interface's own.
fn api_series(doc: &mut Document, meter_names: &[(usize, String)], live: &LiveInput) {
    for iface in &live.interfaces {
        let sum = format!("series_api_{}", ident(iface));
        doc.block(&sum, "series_merge").on("outputs", Some(0));
        let to = format!("{API}.series");
        rows_of_iface(doc, &sum, &[&to], iface, meter_names, live);
    }
}

/// The `http_api` block of `trawl run --api` on the outputs thread: it serves the run's flow
/// database and packet store, each interface's rows, and names each capture source's and
/// meter's interface in `/metrics`.
fn add_api(
    doc: &mut Document,
    plan: &RunPlan,
    api: &trawl_api::ApiConfig,
    sources: &[(usize, usize, String)],
    meters: &[(usize, String)],
) {
    let interfaces = &plan.live.interfaces;
    let mut labels = toml::Table::new();
    for (i, w, source) in sources {
        let iface = &interfaces[*i];
        labels.insert(source.clone(), iface.as_str().into());
        if plan.ring.is_some() {
            labels.insert(format!("ring_{}_{w}", ident(iface)), iface.as_str().into());
        }
    }
    for (i, meter) in meters {
        labels.insert(meter.clone(), interfaces[*i].as_str().into());
    }
    for iface in interfaces {
        for kind in ["store", "export"] {
            labels.insert(format!("{kind}_{}", ident(iface)), iface.as_str().into());
        }
    }
    let path = |p: &std::path::Path| p.display().to_string();
    doc.block(API, "http_api")
        .on("outputs", Some(0))
        .set("listen", api.listen.as_str())
        .set_some("token_file", api.token_file.as_deref().map(path))
        .set_some("tls_cert", api.tls_cert.as_deref().map(path))
        .set_some("tls_key", api.tls_key.as_deref().map(path))
        .set_some(
            "query_timeout_s",
            (api.query_timeout_s != trawl_api::ApiConfig::default().query_timeout_s)
                .then_some(api.query_timeout_s as i64),
        )
        .set_some("db", plan.store.as_ref().map(|s| path(&s.db)))
        .set_some("voip", plan.voip.as_deref().map(path))
        .set_some("logs", plan.logs.as_ref().map(|l| path(&l.dir)))
        .set_some(
            "packets",
            plan.dump_settings
                .as_ref()
                .and_then(|d| d.dir.as_deref())
                .map(path),
        )
        .set(
            "iface",
            match interfaces.as_slice() {
                [one] => one.as_str(),
                _ => "all",
            },
        )
        .set("block_interfaces", toml::Value::Table(labels));
}
