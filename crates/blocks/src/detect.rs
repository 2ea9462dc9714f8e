//! `synflood`, `heavy_hitters` and `series_change`: the monitoring applications of
//! trawl-detect as blocks. All run on packet time, so a capture file replayed gives the
//! events the live run gave.
use std::net::IpAddr;

use serde::Deserialize;
use serde_json::{json, Value};
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, Pool, TimerId};
use trawl_detect::change::{ChangeConfig, ChangeDetector, ChangeEvent, TermConfig};
use trawl_detect::cusum::CusumConfig;
use trawl_detect::heavy::{HeavyConfig, HeavyHitters, HeavyReport, Selection, Summary};
use trawl_detect::synflood::{SynFloodConfig, SynFloodDetector, SynFloodEvent};
use trawl_flow::key::Side;
use trawl_flow::{FlowKey, ProtoName};

use crate::clock::{LiveClock, TICK};
use crate::messages::{Event, Events, PacketBatch, SeriesBatch, EVENTS, PACKETS, SERIES};
use crate::util::span;

/// Report interval of the detectors (`trawl detect --interval` and the blocks' `interval`):
/// packet time, below a millisecond every packet would end one.
const INTERVAL: trawl_time::Limit = trawl_time::Limit::new(
    "interval",
    trawl_time::Unit::Nanos,
    1_000_000,
    86_400_000_000_000,
);
/// Space-Saving counters of `heavy_hitters` (`--k`), allocated up front.
const K: trawl_time::Limit = trawl_time::Limit::new("k", trawl_time::Unit::Count, 1, 1 << 20);

/// A SYN-flood event as one JSON object (what `trawl detect synflood` prints).
pub fn synflood_json(e: &SynFloodEvent) -> Value {
    match *e {
        SynFloodEvent::Start {
            victim,
            onset_ns,
            detected_ns,
            rate,
        } => json!({
            "event": "start", "victim": victim.to_string(), "onset_ns": onset_ns,
            "detected_ns": detected_ns, "rate": rate,
        }),
        SynFloodEvent::End {
            victim,
            onset_ns,
            end_ns,
            peak_rate,
            syns,
            ref top_sources,
        } => json!({
            "event": "end", "victim": victim.to_string(), "onset_ns": onset_ns,
            "end_ns": end_ns, "peak_rate": peak_rate, "syns": syns,
            "top_sources": top_sources
                .iter()
                .map(|(ip, syns)| json!({"ip": ip.to_string(), "syns": syns}))
                .collect::<Vec<_>>(),
        }),
    }
}

fn synflood_time(e: &SynFloodEvent) -> u64 {
    match *e {
        SynFloodEvent::Start { detected_ns, .. } => detected_ns,
        SynFloodEvent::End { end_ns, .. } => end_ns,
    }
}

const PACKETS_IN: &[GateDef] = &[GateDef {
    name: "packets",
    ty: PACKETS,
    required: true,
    doc: "packets to watch",
}];

/// The SYN-flood detector: count-min sketch of SYNs per destination per interval and a
/// multi-channel CUSUM over its cells.
pub struct SynFlood {
    detector: SynFloodDetector,
    found: Vec<SynFloodEvent>,
    pool: Pool<Events>,
    alarms: Option<Counter>,
    syns: Option<Counter>,
    /// Packets observed and intervals closed (`trawl detect synflood`'s summary).
    packets: Option<Counter>,
    intervals: Option<Counter>,
    /// Live input: closes intervals (and ends alarms) when the link goes quiet.
    clock: LiveClock,
}

/// Settings of `synflood` (the defaults are `trawl detect synflood`'s).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynFloodSettings {
    /// Interval of the sketch (default 1s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub interval: Option<u64>,
    /// CUSUM alarm threshold in SYNs per interval.
    pub threshold: Option<f64>,
    /// CUSUM drift in SYNs per interval.
    pub drift: Option<f64>,
    /// CUSUM ceiling (default twice the threshold).
    pub ceiling: Option<f64>,
    /// Count-min relative error.
    pub epsilon: Option<f64>,
    /// Count-min failure probability.
    pub delta: Option<f64>,
}

impl SynFloodSettings {
    /// The detector's configuration, or why these settings are invalid.
    pub fn config(&self) -> Result<SynFloodConfig, String> {
        let d = SynFloodConfig::default();
        let threshold = self.threshold.unwrap_or(d.cusum.threshold);
        let drift = self.drift.unwrap_or(d.cusum.drift);
        let ceiling = self.ceiling.unwrap_or(2.0 * threshold);
        let c = SynFloodConfig {
            interval_ns: self.interval.unwrap_or(d.interval_ns),
            epsilon: self.epsilon.unwrap_or(d.epsilon),
            delta: self.delta.unwrap_or(d.delta),
            cusum: CusumConfig {
                threshold,
                drift,
                ceiling,
                ..d.cusum
            },
            ..d
        };
        INTERVAL.check(c.interval_ns).map_err(|e| e.to_string())?;
        if drift <= 0.0 || threshold < 0.0 || ceiling < threshold {
            return Err("need drift > 0, threshold >= 0 and ceiling >= threshold".into());
        }
        if !(c.epsilon > 0.0 && c.epsilon < 1.0 && c.delta > 0.0 && c.delta < 1.0) {
            return Err("`epsilon` and `delta` must be in (0, 1)".into());
        }
        Ok(c)
    }
}

impl Block for SynFlood {
    const TYPE: &'static str = "synflood";
    const SUMMARY: &'static str =
        "detects SYN floods per victim address (count-min sketch + multi-channel CUSUM)";
    const INPUTS: &'static [GateDef] = PACKETS_IN;
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "alarms",
        ty: EVENTS,
        required: false,
        doc: "start and end of each flood: victim, onset, rate, SYNs",
    }];
    type Settings = SynFloodSettings;
    // The CUSUM's limits only: the sums and alarms stay valid. The interval and the sketch's
    // size would discard the counts gathered so far.
    const RELOADABLE: &'static [&'static str] = &["threshold", "drift", "ceiling"];

    fn check(s: &SynFloodSettings) -> Result<(), String> {
        s.config().map(|_| ())
    }

    fn reconfigure(&mut self, s: SynFloodSettings, _ctx: &mut Ctx<'_>) -> Result<(), String> {
        // Checked by the planner already; the limits are consistent.
        self.detector.set_cusum_limits(s.config()?.cusum);
        Ok(())
    }

    fn build(s: SynFloodSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(SynFlood {
            detector: SynFloodDetector::new(s.config()?),
            found: Vec::new(),
            pool: Pool::new(Events::default),
            alarms: None,
            syns: None,
            packets: None,
            intervals: None,
            clock: LiveClock::default(),
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.alarms = Some(ctx.counter("alarms"));
        self.syns = Some(ctx.counter("syns"));
        self.packets = Some(ctx.counter("packets"));
        self.intervals = Some(ctx.counter("intervals"));
        ctx.every(TICK);
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(packets) = msg.get::<PacketBatch>() else {
            return;
        };
        let mut newest = None;
        for pkt in packets.batch().iter() {
            newest = newest.max(Some(pkt.ts_ns));
            self.detector.observe_packet(&pkt, &mut self.found);
        }
        self.clock.observe(newest, packets.live);
        self.send(ctx);
    }

    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        // A flood that stops ends its alarm when its interval is over, not at the next packet.
        if let Some(now) = self.clock.now() {
            self.detector.advance_to(now, &mut self.found);
            self.send(ctx);
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.detector.finish(&mut self.found);
        self.send(ctx);
        // The victims whose alarm had not ended, one note each, for the summary.
        let active: Vec<String> = self.detector.active().map(|v| v.to_string()).collect();
        for victim in active {
            ctx.note(victim);
        }
    }
}

impl SynFlood {
    fn send(&mut self, ctx: &mut Ctx<'_>) {
        let stats = self.detector.stats();
        for (c, v) in [
            (&self.syns, stats.syns),
            (&self.packets, stats.packets),
            (&self.intervals, stats.intervals),
        ] {
            if let Some(c) = c {
                c.set(v);
            }
        }
        send_alarms(
            &mut self.found,
            self.alarms.as_ref(),
            &mut self.pool,
            ctx,
            |e| matches!(e, SynFloodEvent::Start { .. }),
            |e| Event {
                ts_ns: synflood_time(e),
                json: synflood_json(e),
            },
        );
    }
}

/// Per-interval heavy hitters by flow and by host, bytes and packets (Space-Saving).
pub struct HeavyHittersBlock {
    heavy: HeavyHitters,
    reports: Vec<HeavyReport>,
    pool: Pool<Events>,
    /// Time of the latest packet (or of the live clock): a report is raised when its
    /// interval closes, or at the end of the input for the last one, which then has not
    /// reached its nominal end.
    latest_ns: u64,
    /// Live input: reports an interval once the clock passes its end, also on a quiet link.
    clock: LiveClock,
}

/// Settings of `heavy_hitters`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeavySettings {
    /// Report interval (default 10s).
    #[serde(default = "ten_seconds", deserialize_with = "span")]
    pub interval: u64,
    /// Counters per summary (default 1024): counts are overestimated by at most N/k.
    #[serde(default = "default_k")]
    pub k: usize,
    /// Report the top N (default 10) ...
    pub top: Option<usize>,
    /// ... or everything over these thresholds (give both).
    pub min_bytes: Option<u64>,
    /// Packet threshold.
    pub min_packets: Option<u64>,
}

fn ten_seconds() -> u64 {
    10_000_000_000
}

fn default_k() -> usize {
    1024
}

impl HeavySettings {
    /// The configuration, or why these settings are invalid.
    pub fn config(&self) -> Result<HeavyConfig, String> {
        let selection = match (self.top, self.min_bytes, self.min_packets) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err("give either `top` or `min_bytes` + `min_packets`".into())
            }
            (top, None, None) => Selection::Top(top.unwrap_or(10)),
            (None, Some(bytes), Some(packets)) => Selection::Threshold { bytes, packets },
            (None, _, _) => return Err("`min_bytes` and `min_packets` go together".into()),
        };
        INTERVAL.check(self.interval).map_err(|e| e.to_string())?;
        K.check_usize(self.k).map_err(|e| e.to_string())?;
        if let Selection::Top(n) = selection {
            if n == 0 || n > self.k {
                return Err(format!("`top` must be between 1 and k ({})", self.k));
            }
        }
        Ok(HeavyConfig {
            interval_ns: self.interval,
            k: self.k,
            selection,
            ..HeavyConfig::default()
        })
    }
}

impl Block for HeavyHittersBlock {
    const TYPE: &'static str = "heavy_hitters";
    const SUMMARY: &'static str =
        "reports the top flows and hosts by bytes and packets each interval (Space-Saving, error <= N/k)";
    const INPUTS: &'static [GateDef] = PACKETS_IN;
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "reports",
        ty: EVENTS,
        required: false,
        doc: "one report per interval with its error bounds",
    }];
    type Settings = HeavySettings;

    fn check(s: &HeavySettings) -> Result<(), String> {
        s.config().map(|_| ())
    }

    fn build(s: HeavySettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(HeavyHittersBlock {
            heavy: HeavyHitters::new(s.config()?),
            reports: Vec::new(),
            pool: Pool::new(Events::default),
            latest_ns: 0,
            clock: LiveClock::default(),
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        ctx.every(TICK);
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(packets) = msg.get::<PacketBatch>() else {
            return;
        };
        let mut newest = None;
        for pkt in packets.batch().iter() {
            newest = newest.max(Some(pkt.ts_ns));
            self.heavy.observe_packet(&pkt, &mut self.reports);
        }
        self.latest_ns = self.latest_ns.max(newest.unwrap_or(0));
        self.clock.observe(newest, packets.live);
        self.send(ctx);
    }

    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        if let Some(now) = self.clock.now() {
            // Raised at the clock's time: the report of an interval the clock closed is
            // dated at its end, as one a later packet closes.
            self.latest_ns = self.latest_ns.max(now);
            self.heavy.advance_to(now, &mut self.reports);
            self.send(ctx);
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.heavy.finish(&mut self.reports);
        self.send(ctx);
    }
}

impl HeavyHittersBlock {
    fn send(&mut self, ctx: &mut Ctx<'_>) {
        if self.reports.is_empty() {
            return;
        }
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.events.clear();
        // The event's time is when it was raised: the end of its interval, but for the last
        // report of a stopped input the last packet, not a minute in the future (where a
        // query of the alarms up to now would not find it).
        let latest = self.latest_ns;
        out.events.extend(self.reports.drain(..).map(|r| Event {
            ts_ns: r.end_ns.min(latest.max(r.start_ns)),
            json: heavy_json(&r),
        }));
        ctx.emit(0, slot.into_msg());
    }
}

fn addr(bytes: [u8; 16]) -> String {
    let v6 = std::net::Ipv6Addr::from(bytes);
    match v6.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4).to_string(),
        None => IpAddr::V6(v6).to_string(),
    }
}

/// A flow of a report, in the flow record's vocabulary (`*_ip`, `*_port`, `proto` by name,
/// `vlan`). Its two ends are `a` and `b`, not `src` and `dst`: the key is normalised (lower
/// endpoint first) and a sketch never learns who started the conversation.
fn flow_json(k: &FlowKey) -> Value {
    json!({
        "a_ip": addr(k.ip(Side::Low)), "a_port": k.port(Side::Low),
        "b_ip": addr(k.ip(Side::High)), "b_port": k.port(Side::High),
        "proto": ProtoName(k.proto()).to_string(), "vlan": k.vlan(),
    })
}

fn summary_json<K>(s: &Summary<K>, item: impl Fn(&K) -> Value) -> Value {
    json!({
        "total": s.total,
        "error_bound": s.error_bound,
        "complete": s.complete,
        "items": s.items.iter().map(|c| json!({
            "item": item(&c.item), "count": c.count, "error": c.error,
        })).collect::<Vec<_>>(),
    })
}

/// A heavy-hitter report as one JSON object.
pub fn heavy_json(r: &HeavyReport) -> Value {
    json!({
        "event": "heavy_hitters",
        "start_ns": r.start_ns,
        "end_ns": r.end_ns,
        "flows_by_bytes": summary_json(&r.flow_bytes, flow_json),
        "flows_by_packets": summary_json(&r.flow_packets, flow_json),
        "hosts_by_bytes": summary_json(&r.host_bytes, |a| json!(addr(*a))),
        "hosts_by_packets": summary_json(&r.host_packets, |a| json!(addr(*a))),
    })
}

/// A series change event as one JSON object (`detector` names it: stored alarms tell it
/// from the other detectors' by it).
pub fn change_json(e: &ChangeEvent) -> Value {
    match *e {
        ChangeEvent::Start {
            metric,
            term,
            onset_ns,
            detected_ns,
            rate,
            baseline,
        } => json!({
            "detector": "series_change", "event": "start", "metric": metric.name(),
            "term": term.name(), "onset_ns": onset_ns, "detected_ns": detected_ns,
            "rate": rate, "baseline": baseline,
        }),
        ChangeEvent::End {
            metric,
            term,
            onset_ns,
            end_ns,
            peak_rate,
            baseline,
        } => json!({
            "detector": "series_change", "event": "end", "metric": metric.name(),
            "term": term.name(), "onset_ns": onset_ns, "end_ns": end_ns,
            "peak_rate": peak_rate, "baseline": baseline,
        }),
    }
}

fn change_time(e: &ChangeEvent) -> u64 {
    match *e {
        ChangeEvent::Start { detected_ns, .. } => detected_ns,
        ChangeEvent::End { end_ns, .. } => end_ns,
    }
}

/// Short- and long-term change detection on the per-second series (docs/detect.md).
pub struct SeriesChange {
    detector: ChangeDetector,
    found: Vec<ChangeEvent>,
    pool: Pool<Events>,
    alarms: Option<Counter>,
}

/// Settings of `series_change` (docs/detect.md explains them; the defaults are
/// conservative: a monitor raises alarms for changes an operator would call one).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesChangeSettings {
    /// Short term (per second): relative excess over the baseline tolerated (default 1.0).
    pub short_drift: Option<f64>,
    /// Short term: accumulated relative excess that raises an alarm (default 10).
    pub short_threshold: Option<f64>,
    /// Long term (per minute): relative excess tolerated (default 0.25).
    pub long_drift: Option<f64>,
    /// Long term: accumulated relative excess that raises an alarm (default 3).
    pub long_threshold: Option<f64>,
    /// Smallest baseline of packets per second watched (default 100).
    pub floor_packets: Option<f64>,
    /// Smallest baseline of bytes per second (default 100000).
    pub floor_bytes: Option<f64>,
    /// Smallest baseline of new flows per second (default 10).
    pub floor_flows: Option<f64>,
}

impl SeriesChangeSettings {
    /// The detector's configuration, or why these settings are invalid.
    pub fn config(&self) -> Result<ChangeConfig, String> {
        let d = ChangeConfig::default();
        let term = |t: TermConfig, drift: Option<f64>, threshold: Option<f64>| {
            let threshold = threshold.unwrap_or(t.threshold);
            TermConfig {
                drift: drift.unwrap_or(t.drift),
                threshold,
                ceiling: 2.0 * threshold,
                ..t
            }
        };
        let c = ChangeConfig {
            short: term(d.short, self.short_drift, self.short_threshold),
            long: term(d.long, self.long_drift, self.long_threshold),
            floor: [
                self.floor_packets.unwrap_or(d.floor[0]),
                self.floor_bytes.unwrap_or(d.floor[1]),
                self.floor_flows.unwrap_or(d.floor[2]),
            ],
        };
        c.check()?;
        Ok(c)
    }
}

impl Block for SeriesChange {
    const TYPE: &'static str = "series_change";
    const SUMMARY: &'static str =
        "detects short- and long-term changes of packets, bytes and new flows per second (relative CUSUMs)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "series",
        ty: SERIES,
        required: true,
        doc: "per-second rows of one interface (from one counter or a series_merge)",
    }];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "alarms",
        ty: EVENTS,
        required: false,
        doc: "start and end of each change: metric, term, onset, rate, baseline",
    }];
    type Settings = SeriesChangeSettings;

    fn check(s: &SeriesChangeSettings) -> Result<(), String> {
        s.config().map(|_| ())
    }

    fn build(s: SeriesChangeSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(SeriesChange {
            detector: ChangeDetector::new(s.config()?),
            found: Vec::new(),
            pool: Pool::new(Events::default),
            alarms: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.alarms = Some(ctx.counter("alarms"));
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<SeriesBatch>() else {
            return;
        };
        for r in &b.rows {
            self.detector
                .observe(r.second, [r.packets, r.bytes, r.new_flows], &mut self.found);
        }
        self.send(ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.detector.finish(&mut self.found);
        self.send(ctx);
    }
}

impl SeriesChange {
    fn send(&mut self, ctx: &mut Ctx<'_>) {
        send_alarms(
            &mut self.found,
            self.alarms.as_ref(),
            &mut self.pool,
            ctx,
            |e| matches!(e, ChangeEvent::Start { .. }),
            |e| Event {
                ts_ns: change_time(e),
                json: change_json(e),
            },
        );
    }
}

/// Sends a detector's events found since the last call (none: nothing sent) as one pooled
/// message, counting those that start an alarm (`is_start`) on `alarms`.
fn send_alarms<E>(
    found: &mut Vec<E>,
    alarms: Option<&Counter>,
    pool: &mut Pool<Events>,
    ctx: &mut Ctx<'_>,
    is_start: impl Fn(&E) -> bool,
    event: impl Fn(&E) -> Event,
) {
    if found.is_empty() {
        return;
    }
    if let Some(c) = alarms {
        c.add(found.iter().filter(|e| is_start(e)).count() as u64);
    }
    let mut slot = pool.take();
    let out = slot.get_mut();
    out.events.clear();
    out.events.extend(found.drain(..).map(|e| event(&e)));
    ctx.emit(0, slot.into_msg());
}
