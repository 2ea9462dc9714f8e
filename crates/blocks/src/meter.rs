//! `flow_meter`: packets in, bidirectional flow records and per-second series out.
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use trawl_app::classify::{classify, AppLabel, AppSource, PREFIX_BYTES};
use trawl_capture::{reuse_records, PacketRecord};
use trawl_compose::{Block, BlockReport, BuildEnv, Counter, Ctx, GateDef, Msg, Pool, TimerId};
use trawl_flow::decode::{DecodeConfig, OutcomeCounters, ParseOutcome, TunnelMode};
use trawl_flow::{
    EndReason, FeatureLevel, FlowConfig, FlowMeter, FlowRecord, MeterStats, TableSize,
};
use trawl_series::{SeriesConfig, SeriesCounter, SeriesRow, SeriesStats};

use crate::messages::{FlowBatch, PacketBatch, SeriesBatch, FLOWS, PACKETS, SERIES};
use crate::util::span;

/// Records collected before a flow batch is sent (or the flush period, whichever is first).
const FLOW_BATCH: usize = 256;

/// How far the clock of a live meter moves on a quiet link before it is sent without records.
const CLOCK_PERIOD_NS: u64 = 1_000_000_000;

/// The flow meter of one worker (its own table) and, when the `series` output is connected,
/// the per-second counter driven by the meter's verdicts.
pub struct FlowMeterBlock {
    meter: FlowMeter,
    series: Option<SeriesCounter>,
    scratch: Vec<PacketRecord<'static>>,
    out: FlowOut,
    rows: Vec<SeriesRow>,
    series_pool: Pool<SeriesBatch>,
    stream: u32,
    flush_every: Duration,
    /// Packet clock and the wall time when it last moved.
    clock: Option<(u64, Instant)>,
    live: bool,
    counters: Option<MeterCounters>,
    /// `lane`/`lanes`: which packets of the stream are this meter's.
    lane: Option<OwnLane>,
}

/// A meter's share of a stream spread over several meters.
struct OwnLane {
    lane: u8,
    lanes: usize,
    /// For batches that come without lanes (not through `packet_lanes`).
    hasher: crate::lanes::LaneHasher,
    computed: Vec<u8>,
}

struct MeterCounters {
    active: Counter,
    created: Counter,
    records: Counter,
    packets: Counter,
    /// The rest of [`MeterStats`], [`TableSize`] and [`SeriesStats`], for [`meter_report`].
    wire_bytes: Counter,
    decode: Vec<Counter>,
    end: Vec<Counter>,
    fragments_resolved: Counter,
    fragments_unmatched: Counter,
    late_packets: Counter,
    peak_flows: Counter,
    table_capacity: Counter,
    table_bytes: Counter,
    bytes_per_flow: Counter,
    series: Option<[Counter; 3]>,
}

impl MeterCounters {
    fn new(ctx: &mut Ctx<'_>, series: bool) -> MeterCounters {
        MeterCounters {
            active: ctx.counter("active_flows"),
            created: ctx.counter("flows_created"),
            records: ctx.counter("records"),
            packets: ctx.counter("packets"),
            wire_bytes: ctx.counter("wire_bytes"),
            decode: ParseOutcome::ALL
                .iter()
                .map(|o| ctx.counter(&format!("decode.{}", o.name())))
                .collect(),
            end: EndReason::ALL
                .iter()
                .map(|r| ctx.counter(&format!("end.{}", r.name())))
                .collect(),
            fragments_resolved: ctx.counter("fragments_resolved"),
            fragments_unmatched: ctx.counter("fragments_unmatched"),
            late_packets: ctx.counter("late_packets"),
            peak_flows: ctx.counter("peak_flows"),
            table_capacity: ctx.counter("table_capacity"),
            table_bytes: ctx.counter("table_bytes"),
            bytes_per_flow: ctx.counter("table_bytes_per_flow"),
            series: series.then(|| {
                [
                    ctx.counter("series_rows"),
                    ctx.counter("series_late_packets"),
                    ctx.counter("series_skipped_empty_seconds"),
                ]
            }),
        }
    }

    /// Every statistic of the meter (and its series counter) into the counters.
    fn publish(&self, meter: &FlowMeter, series: Option<&SeriesCounter>) {
        let s = meter.stats();
        self.active.set(meter.active_flows() as u64);
        self.created.set(s.flows_created);
        self.records.set(s.records_total());
        self.packets.set(s.packets);
        self.wire_bytes.set(s.wire_bytes);
        for (c, o) in self.decode.iter().zip(ParseOutcome::ALL) {
            c.set(s.outcomes.get(o));
        }
        for (c, n) in self.end.iter().zip(s.records) {
            c.set(n);
        }
        self.fragments_resolved.set(s.fragments_resolved);
        self.fragments_unmatched.set(s.fragments_unmatched);
        self.late_packets.set(s.late_packets);
        self.peak_flows.set(s.peak_flows);
        let t = meter.table_size();
        self.table_capacity.set(t.capacity);
        self.table_bytes.set(t.bytes);
        self.bytes_per_flow.set(t.bytes_per_flow);
        if let (Some(c), Some(series)) = (&self.series, series) {
            let st = series.stats();
            c[0].set(st.rows);
            c[1].set(st.late_packets);
            c[2].set(st.skipped_empty_seconds);
        }
    }
}

/// What a `flow_meter` block counted, read back from its report: the meter's statistics, its
/// table, and its series counter's (when its `series` output was connected). Commands print
/// their summaries from this.
pub fn meter_report(b: &BlockReport) -> (MeterStats, TableSize, Option<SeriesStats>) {
    let c = |name: &str| b.counter(name).unwrap_or(0);
    let mut outcomes = OutcomeCounters::default();
    for o in ParseOutcome::ALL {
        outcomes.0[o as usize] = c(&format!("decode.{}", o.name()));
    }
    let mut records = [0u64; EndReason::COUNT];
    for r in EndReason::ALL {
        records[r as usize] = c(&format!("end.{}", r.name()));
    }
    let stats = MeterStats {
        packets: c("packets"),
        wire_bytes: c("wire_bytes"),
        outcomes,
        flows_created: c("flows_created"),
        records,
        fragments_resolved: c("fragments_resolved"),
        fragments_unmatched: c("fragments_unmatched"),
        late_packets: c("late_packets"),
        peak_flows: c("peak_flows"),
    };
    let table = TableSize {
        capacity: c("table_capacity"),
        bytes: c("table_bytes"),
        peak_flows: stats.peak_flows,
        bytes_per_flow: c("table_bytes_per_flow"),
    };
    let series = b.counter("series_rows").map(|rows| SeriesStats {
        rows,
        late_packets: c("series_late_packets"),
        skipped_empty_seconds: c("series_skipped_empty_seconds"),
    });
    (stats, table, series)
}

/// Settings of `flow_meter`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowMeterSettings {
    /// Idle timeout, 1ms to 1d (default 30s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub idle: Option<u64>,
    /// Active timeout, 1ms to 7d (default 30m).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub active: Option<u64>,
    /// Records also end at multiples of this interval, 1s to 1d (the store uses 5m); default
    /// off.
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub interval: Option<u64>,
    /// How long a TCP flow lingers after FIN from both sides or RST, up to 1h (default 2s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub tcp_linger: Option<u64>,
    /// Most concurrent flows, 1 to 67108862 (default 4 Mi).
    pub capacity: Option<usize>,
    /// `outer` (default) or `inner`: which IP header of a tunnel keys the flow.
    #[serde(default)]
    pub tunnel: Tunnel,
    /// Bytes of transport payload kept of each direction's first packets and sent with the
    /// records (`trawl flows --payload-bytes`), 0 to 65535 (default 0).
    pub payload_bytes: Option<usize>,
    /// Label every record with its application (`app`, `app_source`; `trawl_app::classify`)
    /// from the first [`PREFIX_BYTES`] payload bytes of each direction, which the meter then
    /// keeps per flow (`2 × PREFIX_BYTES` bytes per table slot) whatever `payload_bytes` sends
    /// on. Default off.
    #[serde(default)]
    pub app: bool,
    /// Seconds the series counter keeps open for late packets (default 4).
    pub series_window: Option<u64>,
    /// Longest a flow record waits in a partly filled batch (default 100ms).
    #[serde(default = "default_flush", deserialize_with = "span")]
    pub flush: u64,
    /// Key file (32 bytes raw or 64 hex digits): records leave the meter with their
    /// addresses anonymized (Crypto-PAn). Not with `payload_bytes`, which are not.
    pub anonymize: Option<std::path::PathBuf>,
    /// With `anonymize`: prefixes whose addresses stay as they are (`10.0.0.0/8`).
    #[serde(default)]
    pub keep: Vec<String>,
    /// A MaxMind DB (GeoLite2-ASN, DB-IP ASN): every record gets `src_as` and `dst_as`, looked
    /// up before `anonymize` changes the addresses (`trawl flows --geoip-asn`).
    pub geoip_asn: Option<std::path::PathBuf>,
    /// A MaxMind DB with countries (GeoLite2-Country, DB-IP Country): `src_country`,
    /// `dst_country`.
    pub geoip_country: Option<std::path::PathBuf>,
    /// What records keep: `minimal`, `standard` or `full` (default; `trawl flows
    /// --features`, docs/specs/flow-record.md).
    #[serde(default)]
    pub features: Features,
    /// With `lanes`: this meter's lane, `0..lanes` (`trawl flows -r F --workers N`).
    pub lane: Option<usize>,
    /// How many meters share the packet stream, each metering the packets of its `lane`
    /// (as `packet_lanes` tags them, or computed here); default 1, every packet.
    pub lanes: Option<usize>,
}

/// A feature level ([`FeatureLevel`]) as settings spell it.
#[derive(Deserialize, Default, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Features {
    /// Key, times, packets and bytes, TCP flag unions, end reason.
    Minimal,
    /// `minimal` + lengths, gaps, TCP event counts, round-trip times.
    Standard,
    /// Everything.
    #[default]
    Full,
}

impl From<Features> for FeatureLevel {
    fn from(f: Features) -> FeatureLevel {
        match f {
            Features::Minimal => FeatureLevel::Minimal,
            Features::Standard => FeatureLevel::Standard,
            Features::Full => FeatureLevel::Full,
        }
    }
}

/// `lane` and `lanes` agree: a lane among 1 to 64 lanes.
fn check_lane(lane: Option<usize>, lanes: Option<usize>) -> Result<(), String> {
    let max = crate::lanes::MAX_LANES;
    match (lane, lanes) {
        (_, Some(n)) if !(1..=max).contains(&n) => {
            Err(format!("`lanes` must be 1 to {max}, not {n}"))
        }
        (Some(l), Some(n)) if l >= n => Err(format!("`lane` {l} is not below `lanes` {n}")),
        (Some(_), None) => Err("`lane` needs `lanes`".into()),
        _ => Ok(()),
    }
}

/// Tunnel keying.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum Tunnel {
    /// The outermost IP header.
    #[default]
    Outer,
    /// The innermost.
    Inner,
}

fn default_flush() -> u64 {
    100_000_000
}

impl FlowMeterSettings {
    fn config(&self) -> FlowConfig {
        let d = FlowConfig::default();
        FlowConfig {
            idle_timeout_ns: self.idle.unwrap_or(d.idle_timeout_ns),
            active_timeout_ns: self.active.unwrap_or(d.active_timeout_ns),
            tcp_linger_ns: self.tcp_linger.unwrap_or(d.tcp_linger_ns),
            interval_align_ns: self.interval.unwrap_or(0),
            capacity: self.capacity.unwrap_or(d.capacity),
            // The classifier's prefix is kept when `app` asks for more than is sent on.
            payload_bytes: match self.app {
                true => self.payload_bytes.unwrap_or(0).max(PREFIX_BYTES),
                false => self.payload_bytes.unwrap_or(0),
            },
            features: self.features.into(),
            decode: DecodeConfig {
                tunnel: match self.tunnel {
                    Tunnel::Outer => TunnelMode::Outer,
                    Tunnel::Inner => TunnelMode::Inner,
                },
            },
            ..d
        }
    }
}

impl Block for FlowMeterBlock {
    const TYPE: &'static str = "flow_meter";
    const PATHS: &'static [trawl_compose::PathSetting] = &[
        trawl_compose::PathSetting::path("geoip_asn"),
        trawl_compose::PathSetting::path("geoip_country"),
    ];
    const SUMMARY: &'static str =
        "meters packets into bidirectional flow records (its own flow table) and per-second series";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets of one worker (both directions of a conversation)",
    }];
    const OUTPUTS: &'static [GateDef] = &[
        GateDef {
            name: "flows",
            ty: FLOWS,
            required: false,
            doc:
                "flow records as they end (idle, active, FIN/RST, pressure, interval, end of input)",
        },
        GateDef {
            name: "series",
            ty: SERIES,
            required: false,
            doc: "per-second rows: packets, bytes, active and new flows, per direction",
        },
    ];
    type Settings = FlowMeterSettings;

    fn check(s: &FlowMeterSettings) -> Result<(), String> {
        // The meter's own limits: the same rule as `--idle`, `--active`, `--capacity`.
        s.config().check().map_err(|e| e.to_string())?;
        crate::anon::check(s.anonymize.as_deref(), &s.keep)?;
        check_lane(s.lane, s.lanes)?;
        if s.anonymize.is_some() && s.payload_bytes.unwrap_or(0) > 0 {
            // Payload bytes hold addresses and names anonymization cannot reach.
            return Err("`payload_bytes` cannot be combined with `anonymize`".into());
        }
        Ok(())
    }

    fn build(s: FlowMeterSettings, env: &BuildEnv) -> Result<Self, String> {
        let series = (env.output_connections[1] > 0).then(|| {
            SeriesCounter::new(SeriesConfig {
                window_seconds: s
                    .series_window
                    .unwrap_or(SeriesConfig::default().window_seconds),
                ..SeriesConfig::default()
            })
        });
        Ok(FlowMeterBlock {
            meter: FlowMeter::new(s.config()),
            series,
            scratch: Vec::with_capacity(1024),
            out: FlowOut {
                pending: FlowBatch {
                    records: Vec::with_capacity(FLOW_BATCH),
                    ..FlowBatch::default()
                },
                payload: s.payload_bytes.unwrap_or(0),
                app: s.app,
                labels: Labels::default(),
                pool: Pool::new(FlowBatch::default),
                stream: env.index as u32,
                clock: 0,
                sent_clock: 0,
                iface: Naming::Unknown,
                anon: crate::anon::anonymizer(s.anonymize.as_deref(), &s.keep)?,
                enrich: trawl_geo::Enricher::open(&trawl_geo::EnrichFiles {
                    asn: s.geoip_asn,
                    country: s.geoip_country,
                    interfaces: None,
                })
                .map_err(|e| e.to_string())?,
            },
            rows: Vec::new(),
            series_pool: Pool::new(SeriesBatch::default),
            stream: env.index as u32,
            flush_every: Duration::from_nanos(s.flush),
            clock: None,
            live: false,
            counters: None,
            lane: match (s.lane, s.lanes) {
                (lane, Some(lanes)) if lanes > 1 => Some(OwnLane {
                    lane: lane.unwrap_or(0) as u8,
                    lanes,
                    hasher: crate::lanes::LaneHasher::new(lanes, s.tunnel),
                    computed: Vec::new(),
                }),
                _ => None,
            },
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(MeterCounters::new(ctx, self.series.is_some()));
        ctx.every(self.flush_every);
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(packets) = msg.get::<PacketBatch>() else {
            return;
        };
        if packets.live {
            // Before metering: records this batch ends already belong to the interface.
            self.out.iface.note(&packets.interfaces);
        }
        let batch = packets.batch();
        let mut selected = reuse_records(std::mem::take(&mut self.scratch));
        let latest = match self.lane.take() {
            None => {
                selected.extend(batch.iter());
                self.meter_packets(&selected, ctx);
                selected.iter().map(|p| p.ts_ns).max()
            }
            Some(mut own) => {
                let lanes = match packets.lanes_of(own.lanes) {
                    Some(lanes) => lanes,
                    None => {
                        own.hasher.fill(&batch, &mut own.computed);
                        &own.computed[..]
                    }
                };
                let latest = self.meter_lane(&batch, lanes, own.lane, &mut selected, ctx);
                self.lane = Some(own);
                latest
            }
        };
        // The clock moves only once the whole batch is metered: records sent while it was
        // being metered carry the time up to which packets had been processed before it.
        if let Some(ts) = latest {
            let ts = self.clock.map_or(ts, |(c, _)| c.max(ts));
            self.clock = Some((ts, Instant::now()));
            self.out.clock = ts;
        }
        self.live |= packets.live;
        self.scratch = reuse_records(selected);
        if !self.rows.is_empty() {
            self.send_series(ctx, false);
        }
    }

    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        // Live input that paused: move the packet clock on by the wall time since the last
        // packet, so idle flows end and empty seconds close. Files never do this.
        if let (true, Some((ts, at))) = (self.live, self.clock) {
            let now = ts + at.elapsed().as_nanos() as u64;
            self.advance(now, ctx);
        }
        self.send_flows(ctx);
        if self.live {
            // No records on a quiet link: the clock still goes down, so the flow store
            // closes its blocks on time, not when later traffic ends a flow.
            self.out.send_clock(ctx);
        }
        if !self.rows.is_empty() || self.live {
            self.send_series(ctx, false);
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        // The end-of-input flush claims no time: a store must not close blocks between its
        // batches (late packets' flows are among them); it writes everything at its finish.
        self.out.clock = 0;
        let out = &mut self.out;
        self.meter.flush(&mut |r: &FlowRecord<'_>| out.push(r, ctx));
        if let Some(series) = self.series.as_mut() {
            let rows = &mut self.rows;
            series.finish(&mut |r: &SeriesRow| rows.push(*r));
        }
        self.send_flows(ctx);
        if self.series.is_some() {
            self.send_series(ctx, true);
        }
    }
}

impl FlowMeterBlock {
    /// Meters `packets` (in order) into the table and the series counter.
    fn meter_packets(&mut self, packets: &[PacketRecord<'_>], ctx: &mut Ctx<'_>) {
        let out = &mut self.out;
        let mut sink = |r: &FlowRecord<'_>| out.push(r, ctx);
        match self.series.as_mut() {
            Some(series) => {
                let rows = &mut self.rows;
                self.meter.process_batch(packets, &mut sink, |i, o| {
                    let p = &packets[i];
                    series.observe(p.ts_ns, p.wire_len, p.direction, o, &mut |r: &SeriesRow| {
                        rows.push(*r)
                    });
                });
            }
            None => self.meter.process_batch(packets, &mut sink, |_, _| {}),
        }
    }

    /// Meters the packets of `batch` whose lane is `lane` (`selected`: scratch), with the
    /// clock of a meter that sees them all: before a packet older than one of another lane
    /// already seen (out of order), the clock first moves to that time, as one meter's would
    /// have (so late packets, active-timeout restarts and expiry are the same); after the
    /// batch, to its latest packet. Returns the latest packet time of the batch.
    fn meter_lane<'a>(
        &mut self,
        batch: &trawl_capture::Batch<'a>,
        lanes: &[u8],
        lane: u8,
        selected: &mut Vec<PacketRecord<'a>>,
        ctx: &mut Ctx<'_>,
    ) -> Option<u64> {
        let mut seen = self.clock.map(|(c, _)| c);
        let mut metered_to = seen.unwrap_or(0);
        let mut latest = None;
        // Other lanes' packets give only their times: the whole record is read for this
        // lane's alone (a meter of N sees every packet of the stream).
        for (i, (m, &l)) in batch.metas().iter().zip(lanes).enumerate() {
            let ts = m.ts_ns;
            if l == lane {
                if let Some(t) = seen.filter(|&t| ts < t && metered_to < t) {
                    self.meter_packets(selected, ctx);
                    selected.clear();
                    self.advance(t, ctx);
                    metered_to = t;
                }
                metered_to = metered_to.max(ts);
                selected.push(batch.get(i));
            }
            seen = Some(seen.map_or(ts, |t| t.max(ts)));
            latest = Some(latest.map_or(ts, |t: u64| t.max(ts)));
        }
        self.meter_packets(selected, ctx);
        if let Some(t) = seen.filter(|&t| t > metered_to) {
            self.advance(t, ctx);
        }
        latest
    }

    fn advance(&mut self, now: u64, ctx: &mut Ctx<'_>) {
        self.out.clock = self.out.clock.max(now);
        let out = &mut self.out;
        self.meter
            .advance(now, &mut |r: &FlowRecord<'_>| out.push(r, ctx));
        if let Some(series) = self.series.as_mut() {
            let rows = &mut self.rows;
            series.advance(now, &mut |r: &SeriesRow| rows.push(*r));
        }
    }

    fn send_flows(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(c) = &self.counters {
            c.publish(&self.meter, self.series.as_ref());
        }
        self.out.send(ctx);
    }

    fn send_series(&mut self, ctx: &mut Ctx<'_>, last: bool) {
        let Some(series) = self.series.as_ref() else {
            return;
        };
        let mut slot = self.series_pool.take();
        let out = slot.get_mut();
        out.rows.clear();
        std::mem::swap(&mut out.rows, &mut self.rows);
        out.stream = self.stream;
        out.iface = self.out.iface.name();
        out.watermark = if last {
            u64::MAX
        } else {
            series.emitted_before().unwrap_or(0)
        };
        out.last = last;
        ctx.emit(1, slot.into_msg());
    }
}

/// Records on their way out: a batch is sent as soon as it is full, also in the middle of a
/// flush or a long expiry, so the block never holds more than one batch.
struct FlowOut {
    /// Records (and their payload bytes) not sent yet.
    pending: FlowBatch,
    /// Payload bytes of each direction sent on with a record (`payload_bytes`; 0: none).
    payload: usize,
    /// Label records with their application (`app`).
    app: bool,
    /// The payload labels of flows whose records were cut (`app`).
    labels: Labels,
    pool: Pool<FlowBatch>,
    stream: u32,
    /// The meter's packet clock (ns), sent with every batch.
    clock: u64,
    /// The clock of the last batch sent.
    sent_clock: u64,
    /// The interface the meter's packets come from, sent with every batch.
    iface: Naming,
    /// `anonymize`: applied to every record as it is queued.
    anon: Option<trawl_anon::Anonymizer>,
    /// `geoip_asn`, `geoip_country`: applied to every record as it is queued, before `anon`.
    enrich: Option<trawl_geo::Enricher>,
}

/// Which interface a meter's records belong to, learnt from its live packet batches.
#[derive(Default)]
enum Naming {
    /// No live packets yet (or only files: records name no interface).
    #[default]
    Unknown,
    One(Arc<str>),
    /// Packets of several interfaces (or of an unnamed one) share this meter's table.
    Several,
}

impl Naming {
    /// Takes note of the interface table of a live batch.
    fn note(&mut self, interfaces: &[trawl_capture::Interface]) {
        let name = match interfaces {
            [one] => one.name.as_deref(),
            _ => None,
        };
        match (&*self, name) {
            (Naming::Several, _) => {}
            (Naming::One(cur), Some(n)) if **cur == *n => {}
            (Naming::Unknown, Some(n)) => *self = Naming::One(n.into()),
            _ => *self = Naming::Several,
        }
    }

    fn name(&self) -> Option<Arc<str>> {
        match self {
            Naming::One(n) => Some(n.clone()),
            _ => None,
        }
    }
}

impl FlowOut {
    #[inline]
    fn push(&mut self, r: &FlowRecord<'_>, ctx: &mut Ctx<'_>) {
        if self.app {
            let label = self.labels.label(r);
            // Only what `payload_bytes` asks for goes on; the rest was the classifier's.
            let cut = |p: &[u8]| -> usize { p.len().min(self.payload) };
            let labelled = FlowRecord {
                app: label,
                fwd_payload: &r.fwd_payload[..cut(r.fwd_payload)],
                rev_payload: &r.rev_payload[..cut(r.rev_payload)],
                ..*r
            };
            self.pending.push(&labelled, self.payload > 0);
        } else {
            self.pending.push(r, self.payload > 0);
        }
        if let (Some(enrich), Some(queued)) = (&mut self.enrich, self.pending.records.last_mut()) {
            enrich.record(queued, None);
        }
        if let (Some(anon), Some(queued)) = (&mut self.anon, self.pending.records.last_mut()) {
            crate::anon::record(anon, queued);
        }
        if self.pending.records.len() >= FLOW_BATCH {
            self.send(ctx);
        }
    }

    fn send(&mut self, ctx: &mut Ctx<'_>) {
        if self.pending.records.is_empty() {
            return;
        }
        if !ctx.is_connected(0) {
            self.pending.clear();
            return;
        }
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.clear();
        std::mem::swap(&mut out.records, &mut self.pending.records);
        std::mem::swap(&mut out.payload, &mut self.pending.payload);
        std::mem::swap(&mut out.payload_lens, &mut self.pending.payload_lens);
        out.clock_ns = self.clock;
        out.stream = self.stream;
        out.iface = self.iface.name();
        self.sent_clock = self.clock;
        ctx.emit(0, slot.into_msg());
    }

    /// An empty batch carrying the clock, when it moved a second or more since the last
    /// batch sent (stores close blocks to the second; receivers need no more).
    fn send_clock(&mut self, ctx: &mut Ctx<'_>) {
        if !self.pending.records.is_empty()
            || self.clock < self.sent_clock.saturating_add(CLOCK_PERIOD_NS)
            || !ctx.is_connected(0)
        {
            return;
        }
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.clear();
        out.clock_ns = self.clock;
        out.stream = self.stream;
        out.iface = self.iface.name();
        self.sent_clock = self.clock;
        ctx.emit(0, slot.into_msg());
    }
}

/// The flow's identity in a record, for [`Labels`].
type RecordKey = (std::net::IpAddr, std::net::IpAddr, u16, u16, u8, u16);

/// Application labels of records: the classifier's, and for a record continuing a flow that
/// the active timeout or an interval cut (its payload prefix went with the first record), the
/// payload label of the record before. Holds one entry per cut flow with a payload label
/// until its last record: bounded by the table's capacity, about 64 bytes each.
#[derive(Default)]
struct Labels {
    carried: std::collections::HashMap<RecordKey, AppLabel>,
}

impl Labels {
    fn label(&mut self, r: &FlowRecord<'_>) -> Option<AppLabel> {
        let key = (r.src_ip, r.dst_ip, r.src_port, r.dst_port, r.proto, r.vlan);
        let mut label = classify(
            r.proto,
            r.src_port,
            r.dst_port,
            r.fwd_payload,
            r.rev_payload,
        );
        let from_payload = label.is_some_and(|l| l.source == AppSource::Payload);
        if r.end_reason == EndReason::Active {
            if from_payload {
                self.carried.insert(key, label.expect("a payload label"));
            } else if let Some(l) = self.carried.get(&key) {
                label = Some(*l);
            }
        } else if let Some(l) = self.carried.remove(&key) {
            if !from_payload {
                label = Some(l);
            }
        }
        label
    }
}
