//! `flow_export`: flow records to IPFIX, NetFlow v9/v5, JSON and Kafka destinations, through
//! the exporters of `trawl_export` (one thread per destination behind a bounded queue); and
//! per-second rows and alarms to the Kafka destinations that name topics for them.
use std::net::Ipv4Addr;
use std::time::Duration;

use serde::Deserialize;
use trawl_compose::{
    Block, BlockReport, BuildEnv, Counter, Ctx, GateDef, Msg, PathSetting, TimerId,
};
use trawl_export::{
    Alarm, Destination, ExportConfig, ExportHandle, ExportHub, ExporterReport, TemplateRefresh,
};

use crate::messages::{Events, FlowBatch, SeriesBatch, EVENTS, FLOWS, SERIES};
use crate::util::opt_span;

/// How long a partly filled batch of records waits before it goes to the exporters.
const FLUSH: Duration = Duration::from_millis(200);

/// Sends the flow records it receives to every destination.
pub struct FlowExport {
    hub: Option<ExportHub>,
    /// The handle of records that name none of `interfaces` (files: all of them).
    handle: Option<ExportHandle>,
    /// The handles of the records of each of `interfaces` (its kernel index the observation
    /// domain, its position the feed's group offset).
    handles: Vec<(String, ExportHandle)>,
    counters: Option<ExportCounters>,
}

struct ExportCounters {
    records: Counter,
    dropped_queue: Counter,
    dropped_send: Counter,
    messages: Counter,
    bytes: Counter,
    send_errors: Counter,
    /// Per destination, in the order of `destinations` (see [`export_report`]).
    each: Vec<DestinationCounters>,
}

/// The counters of one destination: `destination{N}.records`, ...
struct DestinationCounters {
    records: Counter,
    dropped_queue: Counter,
    dropped_send: Counter,
    messages: Counter,
    bytes: Counter,
    send_errors: Counter,
    gso_segment: Counter,
    spooled: Counter,
    spool_dropped: Counter,
    spool_resent: Counter,
    spool_pending: Counter,
    rejected: Counter,
    series_rows: Counter,
    alarms: Counter,
    dropped_extra: Counter,
}

/// The counter names of destination `i` (the `N` of `destination{N}.records`); the `spool_`
/// ones, `spooled`, `rejected`, `series_rows`, `alarms` and `dropped_extra` are Kafka's.
const DESTINATION_COUNTERS: [&str; 15] = [
    "records",
    "dropped_queue",
    "dropped_send",
    "messages",
    "bytes",
    "send_errors",
    "gso_segment",
    "spooled",
    "spool_dropped",
    "spool_resent",
    "spool_pending",
    "rejected",
    "series_rows",
    "alarms",
    "dropped_extra",
];

impl DestinationCounters {
    fn new(ctx: &mut Ctx<'_>, i: usize) -> DestinationCounters {
        let mut c = |name: &str| ctx.counter(&format!("destination{i}.{name}"));
        DestinationCounters {
            records: c(DESTINATION_COUNTERS[0]),
            dropped_queue: c(DESTINATION_COUNTERS[1]),
            dropped_send: c(DESTINATION_COUNTERS[2]),
            messages: c(DESTINATION_COUNTERS[3]),
            bytes: c(DESTINATION_COUNTERS[4]),
            send_errors: c(DESTINATION_COUNTERS[5]),
            gso_segment: c(DESTINATION_COUNTERS[6]),
            spooled: c(DESTINATION_COUNTERS[7]),
            spool_dropped: c(DESTINATION_COUNTERS[8]),
            spool_resent: c(DESTINATION_COUNTERS[9]),
            spool_pending: c(DESTINATION_COUNTERS[10]),
            rejected: c(DESTINATION_COUNTERS[11]),
            series_rows: c(DESTINATION_COUNTERS[12]),
            alarms: c(DESTINATION_COUNTERS[13]),
            dropped_extra: c(DESTINATION_COUNTERS[14]),
        }
    }

    fn set(&self, r: &ExporterReport) {
        self.records.set(r.records);
        self.dropped_queue.set(r.dropped_queue);
        self.dropped_send.set(r.dropped_send);
        self.messages.set(r.messages);
        self.bytes.set(r.bytes);
        self.send_errors.set(r.send_errors);
        self.gso_segment.set(r.gso_segment.map_or(0, u64::from));
        self.spooled.set(r.spooled);
        self.spool_dropped.set(r.spool_dropped);
        self.spool_resent.set(r.spool_resent);
        self.spool_pending.set(r.spool_pending);
        self.rejected.set(r.rejected);
        self.series_rows.set(r.series_rows);
        self.alarms.set(r.alarms);
        self.dropped_extra.set(r.dropped_extra);
    }
}

/// The report of each destination of a `flow_export` block (in the order of its
/// `destinations`), read back from its counters and messages: what `trawl flows --export`
/// prints in its summary. `destinations` are the block's `destinations` setting.
pub fn export_report(b: &BlockReport, destinations: &[String]) -> Vec<ExporterReport> {
    destinations
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let name = d
                .parse::<Destination>()
                .map_or_else(|_| d.clone(), |d| d.to_string());
            let c = |n: &str| b.counter(&format!("destination{i}.{n}")).unwrap_or(0);
            let said = |what: &str| {
                let prefix = format!("export {name}: ");
                b.messages.iter().find_map(|m| {
                    let rest = m.text.strip_prefix(&prefix)?;
                    rest.split_once(what).map(|(_, e)| e.to_string())
                })
            };
            ExporterReport {
                records: c("records"),
                dropped_queue: c("dropped_queue"),
                dropped_send: c("dropped_send"),
                messages: c("messages"),
                bytes: c("bytes"),
                // Not a counter of the block: the summaries print the records handed in
                // and the drops.
                records_delivered: None,
                send_errors: c("send_errors"),
                last_error: said(LAST_ERROR),
                gso_segment: u16::try_from(c("gso_segment")).ok().filter(|s| *s > 0),
                gso_refused: said(GSO_OFF),
                spooled: c("spooled"),
                spool_dropped: c("spool_dropped"),
                spool_resent: c("spool_resent"),
                spool_pending: c("spool_pending"),
                rejected: c("rejected"),
                rejected_reasons: rejected_reasons(b, &name),
                series_rows: c("series_rows"),
                alarms: c("alarms"),
                dropped_extra: c("dropped_extra"),
                destination: name,
            }
        })
        .collect()
}

/// What the block's messages say before a destination's last error, before why UDP
/// segmentation offload was off, and before the count of messages a Kafka destination
/// refused for one reason (read back by [`export_report`]).
const LAST_ERROR: &str = "last error: ";
const GSO_OFF: &str = "UDP segmentation offload off: ";
const REJECTED: &str = "rejected ";

/// The reasons of destination `name`'s rejected messages, from the block's messages
/// `export NAME: rejected N: REASON`.
fn rejected_reasons(b: &BlockReport, name: &str) -> Vec<(String, u64)> {
    let prefix = format!("export {name}: {REJECTED}");
    b.messages
        .iter()
        .filter_map(|m| {
            let (n, reason) = m.text.strip_prefix(&prefix)?.split_once(": ")?;
            Some((reason.to_string(), n.parse().ok()?))
        })
        .collect()
}

/// Settings of `flow_export`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowExportSettings {
    /// Where to send, as `trawl run --export` takes them: `ipfix+udp://HOST:PORT`,
    /// `ipfix+tcp://HOST:PORT`, `ipfix:/path/file.ipfix`, `netflow9+udp://HOST:PORT`,
    /// `netflow5+udp://HOST:PORT`, `json:/path`, `json:-`, `json+tcp://HOST:PORT`,
    /// `kafka://BROKER[,BROKER...]/TOPIC[?key=probe|flow&format=json|protobuf&spool=DIR&...]`
    /// (builds with the `kafka` feature; `docs/specs/kafka.md`).
    pub destinations: Vec<String>,
    /// IPFIX observation domain of the records (default 1, as `trawl` uses for files).
    pub domain: Option<u32>,
    /// Take the observation domain from this interface's kernel index instead (as `trawl run`
    /// does for live capture).
    pub interface: Option<String>,
    /// Records of several interfaces: those of interface N of this list (named by their
    /// meter) go with its kernel index as observation domain and, to a multicast feed, to
    /// the feed's group plus N (as `trawl flows -i A -i B` does).
    #[serde(default)]
    pub interfaces: Vec<String>,
    /// Multicast TTL of `feed:` destinations (default 1: the link only).
    pub feed_ttl: Option<u32>,
    /// Send `feed:` destinations from this local IPv4 address (its interface carries them).
    pub feed_source: Option<Ipv4Addr>,
    /// Private Enterprise Number of trawl's own IPFIX elements (default 32473).
    pub pen: Option<u32>,
    /// Wait for room when an exporter's queue is full instead of dropping (counted). Capture
    /// files can wait; live capture should not (default false).
    #[serde(default)]
    pub lossless: bool,
    /// Templates are sent again on UDP after this long (default 60s)...
    #[serde(default, deserialize_with = "opt_span")]
    pub template_refresh: Option<u64>,
    /// ... or after this many messages (default 1000), whichever comes first.
    pub template_refresh_messages: Option<u32>,
    /// Largest UDP message, IPFIX and v9 (default: what a 1500-byte MTU carries, 1472 bytes to
    /// IPv4 collectors, 1452 to IPv6).
    pub udp_max_message: Option<usize>,
    /// Batches of 256 records each exporter's queue holds before records are dropped
    /// (default 256).
    pub queue: Option<usize>,
    /// The feature level of the records (the `features` of the `flow_meter`s feeding it;
    /// default `full`): IPFIX biflows go under the level's own templates, JSON lines have the
    /// level's fields.
    #[serde(default)]
    pub features: Option<crate::meter::Features>,
}

impl FlowExportSettings {
    fn destinations(&self) -> Result<Vec<Destination>, String> {
        self.destinations
            .iter()
            .map(|d| {
                let mut d = d
                    .parse::<Destination>()
                    .map_err(|e| format!("destination {d:?}: {e}"))?;
                if let Destination::Feed(f) = &mut d {
                    f.ttl = self.feed_ttl.unwrap_or(f.ttl);
                    f.source = self.feed_source.or(f.source);
                }
                Ok(d)
            })
            .collect()
    }

    fn config(&self) -> ExportConfig {
        let d = ExportConfig::default();
        let udp_refresh = match (self.template_refresh, self.template_refresh_messages) {
            (None, None) => d.udp_refresh,
            (interval, messages) => TemplateRefresh::Periodic {
                interval: Duration::from_nanos(interval.unwrap_or(60_000_000_000)),
                messages: messages.unwrap_or(1000),
            },
        };
        ExportConfig {
            pen: self.pen.unwrap_or(d.pen),
            udp_max_message: self.udp_max_message.or(d.udp_max_message),
            udp_refresh,
            queue_batches: self.queue.unwrap_or(d.queue_batches),
            flush_interval: FLUSH,
            lossless: self.lossless,
            level: self.features.unwrap_or_default().into(),
            ..d
        }
    }
}

impl FlowExport {
    fn series(&mut self, msg: &Msg) {
        if let (Some(b), Some(hub)) = (msg.get::<SeriesBatch>(), &self.hub) {
            hub.push_series(&b.rows);
        }
    }

    fn alarms(&mut self, msg: &Msg) {
        let (Some(b), Some(hub)) = (msg.get::<Events>(), &self.hub) else {
            return;
        };
        let alarms: Vec<Alarm> = b
            .iter()
            .map(|e| {
                let e = e.to_event();
                Alarm {
                    ts_ns: e.ts_ns,
                    json: e.json,
                }
            })
            .collect();
        hub.push_alarms(&alarms);
    }
}

/// The kernel's index of an interface: the observation domain of its records.
pub(crate) fn ifindex(name: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

impl Block for FlowExport {
    const TYPE: &'static str = "flow_export";
    const SUMMARY: &'static str =
        "exports flow records to IPFIX, NetFlow v9/v5, JSON (UDP, TCP, files) and Kafka destinations";
    const INPUTS: &'static [GateDef] = &[
        GateDef {
            name: "flows",
            ty: FLOWS,
            required: true,
            doc: "records to export (from any number of meters)",
        },
        GateDef {
            name: "series",
            ty: SERIES,
            required: false,
            doc: "per-second rows, for Kafka destinations with `series=TOPIC`",
        },
        GateDef {
            name: "alarms",
            ty: EVENTS,
            required: false,
            doc: "alarms, for Kafka destinations with `alarms=TOPIC`",
        },
    ];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = FlowExportSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::destination("destinations")];

    fn check(s: &FlowExportSettings) -> Result<(), String> {
        if s.destinations.is_empty() {
            return Err("`destinations` is empty".into());
        }
        s.destinations()?;
        let ways = [
            s.domain.is_some(),
            s.interface.is_some(),
            !s.interfaces.is_empty(),
        ];
        if ways.iter().filter(|w| **w).count() > 1 {
            return Err("give one of `domain`, `interface` and `interfaces`".into());
        }
        if s.udp_max_message
            .is_some_and(|m| !(512..=65_507).contains(&m))
        {
            return Err("`udp_max_message` must be between 512 and 65507".into());
        }
        if s.template_refresh == Some(0) || s.template_refresh_messages == Some(0) {
            return Err(
                "`template_refresh` and `template_refresh_messages` must be positive".into(),
            );
        }
        if s.queue == Some(0) {
            return Err("`queue` must be at least 1".into());
        }
        Ok(())
    }

    fn build(s: FlowExportSettings, _env: &BuildEnv) -> Result<Self, String> {
        let domain = match &s.interface {
            Some(name) => {
                ifindex(name).ok_or_else(|| format!("no interface named {name:?} (`interface`)"))?
            }
            None => s.domain.unwrap_or(1),
        };
        let mut handles = Vec::new();
        for (slot, name) in s.interfaces.iter().enumerate() {
            let domain = ifindex(name)
                .ok_or_else(|| format!("no interface named {name:?} (`interfaces`)"))?;
            let slot = u16::try_from(slot).map_err(|_| "too many `interfaces`".to_string())?;
            handles.push((name.clone(), slot, domain));
        }
        let hub = ExportHub::start(&s.destinations()?, &s.config()).map_err(|e| e.to_string())?;
        let handle = hub.handle(domain, 0, FLUSH);
        let handles = handles
            .into_iter()
            .map(|(name, slot, domain)| {
                let h = hub.handle(domain, slot, FLUSH).with_iface(&name);
                (name, h)
            })
            .collect();
        Ok(FlowExport {
            hub: Some(hub),
            handle: Some(handle),
            handles,
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(ExportCounters {
            records: ctx.counter("records"),
            dropped_queue: ctx.counter("dropped_queue"),
            dropped_send: ctx.counter("dropped_send"),
            messages: ctx.counter("messages"),
            bytes: ctx.counter("bytes"),
            send_errors: ctx.counter("send_errors"),
            each: (0..self.hub.as_ref().map_or(0, |h| h.snapshot().len()))
                .map(|i| DestinationCounters::new(ctx, i))
                .collect(),
        });
        ctx.every(FLUSH / 2);
        Ok(())
    }

    fn receive(&mut self, input: usize, msg: &Msg, _ctx: &mut Ctx<'_>) {
        match input {
            1 => return self.series(msg),
            2 => return self.alarms(msg),
            _ => {}
        }
        let Some(b) = msg.get::<FlowBatch>() else {
            return;
        };
        let own = b
            .iface
            .as_deref()
            .and_then(|i| self.handles.iter().position(|(name, _)| name == i));
        let h = match own {
            Some(i) => &mut self.handles[i].1,
            None => match self.handle.as_mut() {
                Some(h) => {
                    h.set_iface(b.iface.as_deref());
                    h
                }
                None => return,
            },
        };
        for r in &b.records {
            h.push(r);
        }
        if let Some(c) = &self.counters {
            c.records.add(b.records.len() as u64);
        }
    }

    fn timer(&mut self, _timer: TimerId, _ctx: &mut Ctx<'_>) {
        if let Some(h) = self.handle.as_mut() {
            h.tick();
        }
        for (_, h) in self.handles.iter_mut() {
            h.tick();
        }
        if let (Some(c), Some(hub)) = (&self.counters, &self.hub) {
            // Live, a collector that refuses shows in the counters while the run goes.
            let now = hub.snapshot();
            c.dropped_queue
                .set(now.iter().map(|r| r.dropped_queue).sum());
            c.dropped_send.set(now.iter().map(|r| r.dropped_send).sum());
            c.send_errors.set(now.iter().map(|r| r.send_errors).sum());
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(mut h) = self.handle.take() {
            h.flush();
        }
        for (_, mut h) in self.handles.drain(..) {
            h.flush();
        }
        let Some(hub) = self.hub.take() else {
            return;
        };
        // Waits for every exporter to send what it holds.
        let reports = hub.finish();
        if let Some(c) = &self.counters {
            c.dropped_queue
                .set(reports.iter().map(|r| r.dropped_queue).sum());
            c.dropped_send
                .set(reports.iter().map(|r| r.dropped_send).sum());
            c.messages.set(reports.iter().map(|r| r.messages).sum());
            c.bytes.set(reports.iter().map(|r| r.bytes).sum());
            c.send_errors
                .set(reports.iter().map(|r| r.send_errors).sum());
            for (each, r) in c.each.iter().zip(&reports) {
                each.set(r);
            }
        }
        for r in reports {
            if let Some(e) = r.last_error {
                ctx.error(format_args!(
                    "export {}: {} send errors, {LAST_ERROR}{e}",
                    r.destination, r.send_errors
                ));
            }
            if let Some(e) = r.gso_refused {
                ctx.note(format_args!("export {}: {GSO_OFF}{e}", r.destination));
            }
            for (reason, n) in &r.rejected_reasons {
                ctx.note(format_args!(
                    "export {}: {REJECTED}{n}: {reason}",
                    r.destination
                ));
            }
        }
    }
}
