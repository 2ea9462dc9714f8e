//! `flow_export`: flow records to IPFIX, NetFlow v9/v5 and JSON destinations, through the
//! exporters of `trawl_export` (one thread per destination behind a bounded queue).
use std::time::Duration;

use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, PathSetting, TimerId};
use trawl_export::{Destination, ExportConfig, ExportHandle, ExportHub, TemplateRefresh};

use crate::messages::{FlowBatch, FLOWS};
use crate::util::opt_span;

/// How long a partly filled batch of records waits before it goes to the exporters.
const FLUSH: Duration = Duration::from_millis(200);

/// Sends the flow records it receives to every destination.
pub struct FlowExport {
    hub: Option<ExportHub>,
    handle: Option<ExportHandle>,
    counters: Option<ExportCounters>,
}

struct ExportCounters {
    records: Counter,
    dropped_queue: Counter,
    dropped_send: Counter,
    messages: Counter,
    bytes: Counter,
    send_errors: Counter,
}

/// Settings of `flow_export`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowExportSettings {
    /// Where to send, as `trawl run --export` takes them: `ipfix+udp://HOST:PORT`,
    /// `ipfix+tcp://HOST:PORT`, `ipfix:/path/file.ipfix`, `netflow9+udp://HOST:PORT`,
    /// `netflow5+udp://HOST:PORT`, `json:/path`, `json:-`, `json+tcp://HOST:PORT`.
    pub destinations: Vec<String>,
    /// IPFIX observation domain of the records (default 1, as `trawl` uses for files).
    pub domain: Option<u32>,
    /// Take the observation domain from this interface's kernel index instead (as `trawl run`
    /// does for live capture).
    pub interface: Option<String>,
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
}

impl FlowExportSettings {
    fn destinations(&self) -> Result<Vec<Destination>, String> {
        self.destinations
            .iter()
            .map(|d| {
                d.parse::<Destination>()
                    .map_err(|e| format!("destination {d:?}: {e}"))
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
            ..d
        }
    }
}

/// The kernel's index of an interface: the observation domain of its records.
fn ifindex(name: &str) -> Option<u32> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

impl Block for FlowExport {
    const TYPE: &'static str = "flow_export";
    const SUMMARY: &'static str =
        "exports flow records to IPFIX, NetFlow v9/v5 and JSON destinations (UDP, TCP, files)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "flows",
        ty: FLOWS,
        required: true,
        doc: "records to export (from any number of meters)",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = FlowExportSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::destination("destinations")];

    fn check(s: &FlowExportSettings) -> Result<(), String> {
        if s.destinations.is_empty() {
            return Err("`destinations` is empty".into());
        }
        s.destinations()?;
        if s.domain.is_some() && s.interface.is_some() {
            return Err("give `domain` or `interface`, not both".into());
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
        let hub = ExportHub::start(&s.destinations()?, &s.config()).map_err(|e| e.to_string())?;
        let handle = hub.handle(domain, 0, FLUSH);
        Ok(FlowExport {
            hub: Some(hub),
            handle: Some(handle),
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
        });
        ctx.every(FLUSH / 2);
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, _ctx: &mut Ctx<'_>) {
        let (Some(b), Some(h)) = (msg.get::<FlowBatch>(), self.handle.as_mut()) else {
            return;
        };
        h.set_iface(b.iface.as_deref());
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
        }
        for r in reports {
            if let Some(e) = r.last_error {
                ctx.error(format_args!(
                    "export {}: {} send errors, last: {e}",
                    r.destination, r.send_errors
                ));
            }
        }
    }
}
