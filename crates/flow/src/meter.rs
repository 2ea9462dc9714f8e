//! The flow meter: decode → key → table → update → expiry, per packet, without allocation.
use trawl_capture::PacketRecord;

use crate::config::{FeatureLevel, FlowConfig, SECOND_NS};
use crate::decode::{decode, tcp_flags, Decoded, FragmentKind, OutcomeCounters, ParseOutcome};
use crate::entry::{EntryStore, MeterEntry};
use crate::fragments::FragmentTracker;
use crate::key::{FlowKey, Side};
use crate::mini::MiniEntry;
use crate::record::{EndReason, FlowRecord};
use crate::standard::StandardEntry;
use crate::state::{closing_reason, FlowEntry, NIL};
use crate::table::{FlowTable, TICK_SHIFT};

/// Receives the records the meter emits.
pub trait FlowSink {
    /// Called once per record, in emission order.
    fn record(&mut self, record: &FlowRecord<'_>);
}

impl<F: FnMut(&FlowRecord<'_>)> FlowSink for F {
    fn record(&mut self, record: &FlowRecord<'_>) {
        self(record)
    }
}

/// What the meter did with one packet (consumed by the series counter).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketOutcome {
    /// The decoder's verdict.
    pub parse: ParseOutcome,
    /// The packet was counted in a flow.
    pub in_flow: bool,
    /// The packet started a new flow record (new flow, not an active-timeout continuation).
    pub new_flow: bool,
    /// The packet is its flow's first in this second of packet time.
    pub first_in_second: bool,
}

/// Counters of the meter. Invariant: `packets == outcomes.total()`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MeterStats {
    /// Packets given to the meter.
    pub packets: u64,
    /// Their wire bytes.
    pub wire_bytes: u64,
    /// Packets by decode outcome.
    pub outcomes: OutcomeCounters,
    /// Flows created.
    pub flows_created: u64,
    /// Records emitted, by [`EndReason`].
    pub records: [u64; EndReason::COUNT],
    /// Non-first fragments attributed to their flow's ports.
    pub fragments_resolved: u64,
    /// Non-first fragments whose first fragment was not seen (counted in a port-less flow).
    pub fragments_unmatched: u64,
    /// Packets whose timestamp was earlier than one already seen.
    pub late_packets: u64,
    /// Most flows in the table at once.
    pub peak_flows: u64,
}

impl MeterStats {
    /// Records emitted in total.
    pub fn records_total(&self) -> u64 {
        self.records.iter().sum()
    }

    /// Adds the counters of another meter (a parallel worker's). `peak_flows` becomes the sum
    /// of the peaks: an upper bound of the concurrent total, since the peaks need not coincide.
    pub fn merge(&mut self, other: &MeterStats) {
        self.packets += other.packets;
        self.wire_bytes += other.wire_bytes;
        self.outcomes.merge(&other.outcomes);
        self.flows_created += other.flows_created;
        for (a, b) in self.records.iter_mut().zip(other.records.iter()) {
            *a += b;
        }
        self.fragments_resolved += other.fragments_resolved;
        self.fragments_unmatched += other.fragments_unmatched;
        self.late_packets += other.late_packets;
        self.peak_flows += other.peak_flows;
    }
}

/// Packets between the stages of [`FlowMeter::process_batch`]: enough independent table
/// lookups in flight to hide memory latency, few enough that the prefetched lines are still
/// cached when the counting stage reaches them.
const PIPELINE_LEAD: usize = 16;
/// Packets the pipeline holds at once (a power of two, so the ring index is a mask).
const PIPELINE_RING: usize = (2 * PIPELINE_LEAD + 1).next_power_of_two();

/// One packet between the stages of [`FlowMeter::process_batch`].
#[derive(Clone, Copy, Default)]
struct Pending {
    decoded: Decoded,
    parse: ParseOutcome,
    key: FlowKey,
    hash: u64,
    side: Side,
}

/// A flow table's size, for the summary: what it holds at most, the memory that takes, and
/// the memory per concurrent flow, which only means something once the table was well used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableSize {
    /// Flows the table can hold.
    pub capacity: u64,
    /// Memory of the table at its capacity (reserved when it is made, filled as flows come):
    /// entries, index, free list, payload buffers, and the overflow records' pools.
    pub bytes: u64,
    /// Most flows in the table at once.
    pub peak_flows: u64,
    /// [`FlowMeter::bytes_per_flow`] at the end of the run.
    pub bytes_per_flow: u64,
}

impl TableSize {
    /// Memory per concurrent flow, when it means something: the table was at least a tenth
    /// full at its peak, and held at least a pool chunk of flows (below that, the first chunk
    /// of overflow records, allocated whole, is most of each flow's share). A run over a
    /// small capture gets `None` rather than a figure of thousands of bytes.
    pub fn per_flow(&self) -> Option<u64> {
        let meaningful = self.peak_flows.saturating_mul(10) >= self.capacity
            && self.peak_flows >= crate::state::POOL_CHUNK as u64;
        meaningful.then_some(self.bytes_per_flow)
    }

    /// Adds the table of another worker: capacities, memory and peaks are summed (the peak
    /// as [`MeterStats::merge`] sums it), the per-flow figure is the larger one.
    pub fn merge(&mut self, other: &TableSize) {
        self.capacity += other.capacity;
        self.bytes += other.bytes;
        self.peak_flows += other.peak_flows;
        self.bytes_per_flow = self.bytes_per_flow.max(other.bytes_per_flow);
    }
}

/// The flow meter. One per worker; owns its table, whose entries are one cache line at
/// `minimal`, two at `standard` and five at `full` (docs/specs/flow-record.md, "Memory").
pub struct FlowMeter {
    inner: Inner,
}

/// The meter of each entry layout.
enum Inner {
    Full(Meter<FlowEntry>),
    Standard(Meter<StandardEntry>),
    Minimal(Meter<MiniEntry>),
}

/// Runs `$body` on the meter of either layout as `$m`.
macro_rules! each {
    ($self:expr, $m:ident => $body:expr) => {
        match $self {
            Inner::Full($m) => $body,
            Inner::Standard($m) => $body,
            Inner::Minimal($m) => $body,
        }
    };
}

impl FlowMeter {
    /// A meter with its table preallocated for `config.capacity` flows.
    pub fn new(config: FlowConfig) -> Self {
        let inner = match config.features {
            FeatureLevel::Full => Inner::Full(Meter::new(config)),
            FeatureLevel::Standard => Inner::Standard(Meter::new(config)),
            FeatureLevel::Minimal => Inner::Minimal(Meter::new(config)),
        };
        FlowMeter { inner }
    }

    /// The settings in use.
    pub fn config(&self) -> &FlowConfig {
        each!(&self.inner, m => &m.config)
    }

    /// Counters so far.
    pub fn stats(&self) -> &MeterStats {
        each!(&self.inner, m => &m.stats)
    }

    /// Flows currently in the table.
    pub fn active_flows(&self) -> usize {
        each!(&self.inner, m => m.table.len())
    }

    /// Memory the table uses per concurrent flow, in bytes: entry, index share, payload, and
    /// the overflow records of flows whose values outgrew the entry (long gaps, huge counts,
    /// IPv6 keys at `minimal`), spread over the most flows the table held at once.
    pub fn bytes_per_flow(&self) -> usize {
        each!(&self.inner, m => m.bytes_per_flow())
    }

    /// The table's size and use, for reports ([`TableSize`]).
    pub fn table_size(&self) -> TableSize {
        each!(&self.inner, m => m.table_size())
    }

    /// Meters one packet; records that expire meanwhile go to `sink`.
    #[inline]
    pub fn process<S: FlowSink>(&mut self, pkt: &PacketRecord<'_>, sink: &mut S) -> PacketOutcome {
        each!(&mut self.inner, m => m.process(pkt, sink))
    }

    /// Meters a batch of packets as a three-stage software pipeline, so that the memory the
    /// flow table needs arrives while other packets are worked on: packet `i + 2 * LEAD` is
    /// decoded and hashed (its index slot prefetched), packet `i + LEAD` probes the index (its
    /// entry's lines prefetched), and packet `i` is counted. Results are identical to calling
    /// [`FlowMeter::process`] on each packet in order (stages one and three keep packet
    /// order; stage two only prefetches); `after(i, outcome)` sees packet `i`'s outcome.
    pub fn process_batch<S: FlowSink, A: FnMut(usize, &PacketOutcome)>(
        &mut self,
        packets: &[PacketRecord<'_>],
        sink: &mut S,
        after: A,
    ) {
        each!(&mut self.inner, m => m.process_batch(packets, sink, after))
    }

    /// Moves packet time to `now`, expiring every flow whose deadline has passed.
    pub fn advance<S: FlowSink>(&mut self, now: u64, sink: &mut S) {
        each!(&mut self.inner, m => m.advance(now, sink))
    }

    /// Exports every flow (reason `end`) and empties the table; the meter can go on with new
    /// input afterwards (the next packet restarts the clock).
    pub fn flush<S: FlowSink>(&mut self, sink: &mut S) {
        each!(&mut self.inner, m => m.flush(sink))
    }
}

#[cfg(test)]
impl FlowMeter {
    /// The meter of a `full` meter.
    fn full(&self) -> &Meter<FlowEntry> {
        match &self.inner {
            Inner::Full(m) => m,
            _ => panic!("not a full meter"),
        }
    }
}

/// The meter over a table of entries `E`.
struct Meter<E: MeterEntry> {
    config: FlowConfig,
    table: FlowTable<E>,
    fragments: FragmentTracker,
    /// Scratch for [`FlowMeter::process_batch`], kept to avoid allocating per batch.
    pending: Vec<Pending>,
    stats: MeterStats,
    /// Latest packet time seen (ns); drives expiry.
    now: u64,
    started: bool,
    /// Payload bytes per entry and side, `capacity * 2 * payload_bytes` long when enabled.
    payload: Vec<u8>,
}

impl<E: MeterEntry> Meter<E> {
    fn new(config: FlowConfig) -> Self {
        let payload_bytes = config.payload_bytes.min(u16::MAX as usize);
        let config = FlowConfig {
            payload_bytes,
            ..config
        };
        let payload = if payload_bytes > 0 {
            vec![0; config.capacity * 2 * payload_bytes]
        } else {
            Vec::new()
        };
        Meter {
            table: FlowTable::new(
                config.capacity,
                E::TIMING_BESIDE && config.features.has_standard(),
            ),
            fragments: FragmentTracker::new(config.fragment_slots, config.fragment_timeout_ns),
            pending: Vec::with_capacity(PIPELINE_RING),
            stats: MeterStats::default(),
            now: 0,
            started: false,
            payload,
            config,
        }
    }

    fn bytes_per_flow(&self) -> usize {
        let overflow = self.table.wides.bytes() / (self.stats.peak_flows.max(1) as usize);
        self.table.bytes_per_flow() + 2 * self.config.payload_bytes + overflow
    }

    fn table_size(&self) -> TableSize {
        let slot = self.table.bytes_per_flow() + 2 * self.config.payload_bytes;
        let capacity = self.table.capacity() as u64;
        TableSize {
            capacity,
            bytes: capacity * slot as u64 + self.table.wides.bytes() as u64,
            peak_flows: self.stats.peak_flows,
            bytes_per_flow: self.bytes_per_flow() as u64,
        }
    }

    #[inline]
    fn process<S: FlowSink>(&mut self, pkt: &PacketRecord<'_>, sink: &mut S) -> PacketOutcome {
        let mut pending = Pending::default();
        self.prepare(pkt, &mut pending);
        self.account(pkt, &pending, sink)
    }

    fn process_batch<S: FlowSink, A: FnMut(usize, &PacketOutcome)>(
        &mut self,
        packets: &[PacketRecord<'_>],
        sink: &mut S,
        mut after: A,
    ) {
        let mut ring = std::mem::take(&mut self.pending);
        if ring.len() < PIPELINE_RING {
            ring.resize(PIPELINE_RING, Pending::default());
        }
        let n = packets.len();
        for step in 0..n + 2 * PIPELINE_LEAD {
            if step < n {
                let p = &mut ring[step % PIPELINE_RING];
                self.prepare(&packets[step], p);
                if p.parse.has_key() {
                    self.table.prefetch_slot(p.hash);
                }
            }
            if let Some(i) = step.checked_sub(PIPELINE_LEAD).filter(|&i| i < n) {
                let p = &ring[i % PIPELINE_RING];
                if p.parse.has_key() {
                    self.table.prefetch_candidates(
                        p.hash,
                        p.side as usize,
                        self.config.features,
                        p.decoded.tcp_valid,
                    );
                }
            }
            if let Some(i) = step.checked_sub(2 * PIPELINE_LEAD) {
                let outcome = self.account(&packets[i], &ring[i % PIPELINE_RING], sink);
                after(i, &outcome);
            }
        }
        self.pending = ring;
    }

    /// Stage one: decode, resolve fragment ports, key and hash. Depends on no flow state, so it
    /// can run ahead of the updates.
    #[inline]
    fn prepare(&mut self, pkt: &PacketRecord<'_>, p: &mut Pending) {
        p.parse = decode(pkt.link_type, pkt.data, &self.config.decode, &mut p.decoded);
        if !p.parse.has_key() {
            return;
        }
        let d = &mut p.decoded;
        match d.fragment {
            FragmentKind::First => self.fragments.remember(d, pkt.ts_ns),
            FragmentKind::NonFirst => match self.fragments.lookup(d, pkt.ts_ns) {
                Some((sp, dp)) => {
                    d.src_port = sp;
                    d.dst_port = dp;
                    self.stats.fragments_resolved += 1;
                }
                None => self.stats.fragments_unmatched += 1,
            },
            FragmentKind::None => {}
        }
        let (key, side) = FlowKey::from_decoded(d);
        p.hash = key.hash();
        p.key = key;
        p.side = side;
    }

    /// Stage three: moves time on, finds or creates the flow, counts the packet.
    #[inline]
    fn account<S: FlowSink>(
        &mut self,
        pkt: &PacketRecord<'_>,
        p: &Pending,
        sink: &mut S,
    ) -> PacketOutcome {
        let ts = pkt.ts_ns;
        self.stats.packets += 1;
        self.stats.wire_bytes += pkt.wire_len as u64;
        if ts > self.now || !self.started {
            self.advance(ts, sink);
        } else if ts < self.now {
            self.stats.late_packets += 1;
        }
        let parse = p.parse;
        self.stats.outcomes.count(parse);
        if !parse.has_key() {
            return PacketOutcome {
                parse,
                ..PacketOutcome::default()
            };
        }
        let d = &p.decoded;
        let mut new_flow = false;
        let idx = match self.table.find(&p.key, p.hash) {
            Some(idx) => match self.ends_before(idx, d, ts) {
                Some(reason) => {
                    self.end(idx, reason, sink);
                    new_flow = true;
                    self.create(p, ts, sink)
                }
                None => {
                    if self.active_timeout_due(idx, ts) {
                        self.emit(idx, EndReason::Active, sink);
                    }
                    idx
                }
            },
            None => {
                new_flow = true;
                self.create(p, ts, sink)
            }
        };
        let entry = &mut self.table.entries[idx as usize];
        let was_closing = entry.is_closing();
        // The flow's first packet in this second: its record's first, or the first since the
        // second of its latest packet (a late packet from an earlier second counts there).
        let first_in_second =
            entry.is_empty_record() || entry.last_ns() / SECOND_NS != ts / SECOND_NS;
        let level = self.config.features;
        let timing = (E::TIMING_BESIDE && d.tcp_valid && level.has_standard())
            .then(|| self.table.timing.get_mut(idx as usize))
            .flatten();
        entry.update(
            d,
            p.side,
            ts,
            pkt.wire_len,
            &mut self.table.wides,
            level,
            timing,
        );
        if !was_closing && entry.is_closing() {
            let deadline = entry.last_ns().saturating_add(self.config.tcp_linger_ns);
            self.table.unschedule(idx);
            self.table.schedule(idx, deadline);
        }
        if self.config.payload_bytes > 0 {
            self.keep_payload(idx, p.side, d, pkt.data);
        }
        PacketOutcome {
            parse,
            in_flow: true,
            new_flow,
            first_in_second,
        }
    }

    /// Whether the flow at `idx` ends before a packet at `ts`, and why.
    #[inline]
    fn ends_before(&self, idx: u32, d: &Decoded, ts: u64) -> Option<EndReason> {
        let e = &self.table.entries[idx as usize];
        // Past the idle timeout, or the linger of a closing flow.
        let expired = ts > self.deadline(e);
        if e.is_closing() {
            // A new SYN on a closed connection is the next connection on the same ports.
            let syn_only =
                d.tcp_valid && d.tcp.flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN;
            (expired || syn_only).then(|| closing_reason(e.state()))
        } else {
            expired.then_some(EndReason::Idle)
        }
    }

    /// Whether the flow at `idx` has run past the active timeout, or (with
    /// `interval_align_ns`) into a later aligned interval than its record's first packet, and
    /// must emit a record before counting a packet at `ts`. Checked per packet rather than by a
    /// timer: a flow without packets is idle-expired first whenever the idle timeout is the
    /// shorter one, and a record that receives no packet past a boundary holds only packets of
    /// one interval already.
    #[inline]
    fn active_timeout_due(&self, idx: u32, ts: u64) -> bool {
        let e = &self.table.entries[idx as usize];
        if e.is_empty_record() {
            return false;
        }
        let align = self.config.interval_align_ns;
        // `>`, not `!=`: a late packet from an earlier interval joins the open record rather
        // than splitting it backwards (late packets are counted in `late_packets`).
        ts.saturating_sub(e.first_ns()) >= self.config.active_timeout_ns
            || (align != 0 && ts / align > e.first_ns() / align)
    }

    fn create<S: FlowSink>(&mut self, p: &Pending, ts: u64, sink: &mut S) -> u32 {
        if self.table.is_full() {
            self.evict_one(sink);
        }
        let idx = self.table.insert(&p.key, p.hash);
        self.table.entries[idx as usize].start(&p.decoded, p.side, ts, &mut self.table.wides);
        self.table
            .schedule(idx, ts.saturating_add(self.config.idle_timeout_ns));
        self.stats.flows_created += 1;
        self.stats.peak_flows = self.stats.peak_flows.max(self.table.len() as u64);
        idx
    }

    /// Emits the record of `idx` without removing the flow; resets its counters when the reason
    /// is `Active` (the flow goes on).
    fn emit<S: FlowSink>(&mut self, idx: u32, reason: EndReason, sink: &mut S) {
        let e = &self.table.entries[idx as usize];
        let n = self.config.payload_bytes;
        let payload: [&[u8]; 2] = if n == 0 {
            [&[], &[]]
        } else {
            let base = idx as usize * 2 * n;
            let [low, high] = e.payload_len();
            [
                &self.payload[base..base + low as usize],
                &self.payload[base + n..base + n + high as usize],
            ]
        };
        sink.record(&e.record(
            &self.table.wides,
            self.table.timing.get(idx as usize),
            reason,
            payload,
            self.config.features,
        ));
        self.stats.records[reason as usize] += 1;
        if reason == EndReason::Active {
            self.table.entries[idx as usize].reset_counters(&mut self.table.wides);
        }
    }

    fn end<S: FlowSink>(&mut self, idx: u32, reason: EndReason, sink: &mut S) {
        // The removal starts at the key's index slot, a cache miss of its own: fetched while
        // the record is built and written.
        let hash = self.table.key_hash(idx);
        self.table.prefetch_slot(hash);
        self.emit(idx, reason, sink);
        self.table.remove(idx, hash);
    }

    /// The time after which the flow at `idx` expires if no packet comes.
    #[inline]
    fn deadline(&self, e: &E) -> u64 {
        let timeout = if e.is_closing() {
            self.config.tcp_linger_ns
        } else {
            self.config.idle_timeout_ns
        };
        e.last_ns().saturating_add(timeout)
    }

    fn advance<S: FlowSink>(&mut self, now: u64, sink: &mut S) {
        let now_tick = now >> TICK_SHIFT;
        if !self.started {
            self.started = true;
            self.now = now;
            self.table.processed_tick = now_tick;
            return;
        }
        if now <= self.now {
            return;
        }
        self.now = now;
        let mut tick = self.table.processed_tick;
        // After a long gap one rotation visits every slot, hence every flow.
        tick = tick.max(now_tick.saturating_sub(FlowTable::<E>::wheel_slots()));
        while tick < now_tick {
            let mut cur = self.table.take_slot(tick);
            // Slots this loop reschedules into must be ahead of the one being processed.
            self.table.processed_tick = tick + 1;
            while cur != NIL {
                let next = self.table.entries[cur as usize].wheel_next();
                // Expired flows come in runs: the next one's lines load while this one's
                // record is written.
                self.table.prefetch_record(next);
                let e = &self.table.entries[cur as usize];
                let deadline = self.deadline(e);
                if deadline <= now {
                    let reason = if e.is_closing() {
                        closing_reason(e.state())
                    } else {
                        EndReason::Idle
                    };
                    self.end(cur, reason, sink);
                } else {
                    self.table.unschedule(cur);
                    self.table.schedule(cur, deadline);
                }
                cur = next;
            }
            tick += 1;
        }
        self.table.processed_tick = now_tick;
    }

    /// Exports the flow that has been idle the longest (table pressure).
    fn evict_one<S: FlowSink>(&mut self, sink: &mut S) {
        let start = self.table.processed_tick;
        let end = start + FlowTable::<E>::wheel_slots();
        let mut from = start;
        while let Some(tick) = self.table.next_scheduled_tick(from, end) {
            let mut cur = self.table.slot_head(tick);
            while cur != NIL {
                let next = self.table.entries[cur as usize].wheel_next();
                let deadline = self.deadline(&self.table.entries[cur as usize]);
                if (deadline >> TICK_SHIFT) <= tick {
                    // Under pressure every new flow evicts one: the next victim is most
                    // likely `next`, its lines load until the next new flow comes.
                    self.table.prefetch_record(next);
                    self.end(cur, EndReason::Pressure, sink);
                    return;
                }
                // Scheduled lazily earlier than its real deadline: put it where it belongs.
                self.table.unschedule(cur);
                self.table.schedule(cur, deadline);
                cur = next;
            }
            from = tick + 1;
        }
        // Every flow's deadline lies beyond one rotation (timeouts longer than the wheel):
        // take the first flow of the earliest non-empty slot.
        let tick = self
            .table
            .next_scheduled_tick(start, end)
            .expect("evict_one called on a table with no scheduled flow");
        self.end(self.table.slot_head(tick), EndReason::Pressure, sink);
    }

    fn flush<S: FlowSink>(&mut self, sink: &mut S) {
        let live = self.table.live_oldest_first();
        for &[_, idx] in live.iter() {
            self.emit(idx as u32, EndReason::End, sink);
        }
        self.table.clear();
        self.started = false;
    }

    fn keep_payload(&mut self, idx: u32, side: Side, d: &Decoded, data: &[u8]) {
        let n = self.config.payload_bytes;
        let start = (d.payload_offset as usize).min(data.len());
        let avail = (d.payload_len as usize).min(data.len() - start);
        let e = &mut self.table.entries[idx as usize];
        let have = e.payload_len()[side as usize] as usize;
        let take = avail.min(n - have);
        if take == 0 {
            return;
        }
        let base = idx as usize * 2 * n + side as usize * n + have;
        self.payload[base..base + take].copy_from_slice(&data[start..start + take]);
        e.add_payload_len(side as usize, take as u16);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_capture::{Direction, LinkType};

    const S: u64 = SECOND_NS;

    /// Ethernet + IPv4 + TCP (20-byte header) frame from 10.0.0.`a`:`sport` to 10.0.0.`b`:`dport`.
    fn tcp_frame(a: u8, sport: u16, b: u8, dport: u16, flags: u8) -> Vec<u8> {
        let mut f = vec![0u8; 54];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[16..18].copy_from_slice(&40u16.to_be_bytes());
        f[22] = 64;
        f[23] = 6;
        f[26..30].copy_from_slice(&[10, 0, 0, a]);
        f[30..34].copy_from_slice(&[10, 0, 0, b]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f[46] = 0x50;
        f[47] = flags;
        f[48] = 0xff;
        f
    }

    struct Run {
        meter: FlowMeter,
        records: Vec<(u16, u16, u64, u64, EndReason)>,
    }

    impl Run {
        fn new(config: FlowConfig) -> Self {
            Run {
                meter: FlowMeter::new(config),
                records: Vec::new(),
            }
        }
        fn packet(&mut self, ts: u64, frame: &[u8]) -> PacketOutcome {
            let pkt = PacketRecord {
                ts_ns: ts,
                wire_len: frame.len() as u32,
                iface: 0,
                direction: Direction::Unknown,
                link_type: LinkType::ETHERNET,
                data: frame,
            };
            let records = &mut self.records;
            self.meter
                .process(&pkt, &mut |r: &FlowRecord<'_>| records.push(summary(r)))
        }
        fn flush(&mut self) {
            let records = &mut self.records;
            self.meter
                .flush(&mut |r: &FlowRecord<'_>| records.push(summary(r)));
        }
    }

    fn summary(r: &FlowRecord<'_>) -> (u16, u16, u64, u64, EndReason) {
        (
            r.src_port,
            r.dst_port,
            r.fwd.packets,
            r.rev.packets,
            r.end_reason,
        )
    }

    const SYN: u8 = tcp_flags::SYN;
    const SYN_ACK: u8 = tcp_flags::SYN | tcp_flags::ACK;
    const ACK: u8 = tcp_flags::ACK;
    const FIN_ACK: u8 = tcp_flags::FIN | tcp_flags::ACK;

    #[test]
    fn idle_timeout_expires_by_the_wheel() {
        let mut r = Run::new(FlowConfig::default());
        let o = r.packet(100 * S, &tcp_frame(1, 40000, 2, 80, ACK));
        assert!(o.new_flow && o.in_flow && o.first_in_second);
        r.packet(101 * S, &tcp_frame(2, 80, 1, 40000, ACK));
        // Another flow keeps time moving past the idle timeout of the first.
        r.packet(120 * S, &tcp_frame(3, 5000, 4, 53, ACK));
        assert!(r.records.is_empty());
        r.packet(132 * S, &tcp_frame(3, 5000, 4, 53, ACK));
        assert_eq!(r.records, vec![(40000, 80, 1, 1, EndReason::Idle)]);
        assert_eq!(r.meter.active_flows(), 1);
    }

    #[test]
    fn packet_after_idle_gap_starts_a_new_record() {
        let mut r = Run::new(FlowConfig::default());
        r.packet(100 * S, &tcp_frame(1, 40000, 2, 80, ACK));
        let o = r.packet(200 * S, &tcp_frame(1, 40000, 2, 80, ACK));
        assert!(o.new_flow);
        r.flush();
        assert_eq!(r.records.len(), 2);
        assert_eq!(r.records[0].4, EndReason::Idle);
        assert_eq!(r.records[1].4, EndReason::End);
    }

    #[test]
    fn active_timeout_splits_a_long_flow() {
        let config = FlowConfig {
            active_timeout_ns: 10 * S,
            ..FlowConfig::default()
        };
        let mut r = Run::new(config);
        for i in 0..25 {
            r.packet(100 * S + i * S, &tcp_frame(1, 40000, 2, 80, ACK));
        }
        r.flush();
        let reasons: Vec<EndReason> = r.records.iter().map(|x| x.4).collect();
        assert_eq!(
            reasons,
            vec![EndReason::Active, EndReason::Active, EndReason::End]
        );
        let total: u64 = r.records.iter().map(|x| x.2 + x.3).sum();
        assert_eq!(total, 25);
        assert_eq!(r.records[0].2, 10);
    }

    #[test]
    fn aligned_intervals_split_records_at_boundaries() {
        let config = FlowConfig {
            interval_align_ns: 300 * S,
            ..FlowConfig::default()
        };
        let mut r = Run::new(config);
        let mut times = Vec::new();
        // One packet every 20 s from 280 s to 920 s: boundaries at 300, 600 and 900 s.
        let mut t = 280 * S;
        while t <= 920 * S {
            r.packet(t, &tcp_frame(1, 40000, 2, 80, ACK));
            times.push(t);
            t += 20 * S;
        }
        r.flush();
        let per_interval: Vec<u64> = [0u64, 1, 2, 3]
            .iter()
            .map(|i| times.iter().filter(|&&t| t / (300 * S) == *i).count() as u64)
            .collect();
        let got: Vec<u64> = r.records.iter().map(|x| x.2).collect();
        assert_eq!(got, per_interval);
        assert_eq!(r.records[0].4, EndReason::Active);
        assert_eq!(r.records[3].4, EndReason::End);
    }

    #[test]
    fn fin_both_ways_lingers_then_exports() {
        let mut r = Run::new(FlowConfig::default());
        r.packet(100 * S, &tcp_frame(1, 40000, 2, 80, SYN));
        r.packet(100 * S + 1, &tcp_frame(2, 80, 1, 40000, SYN_ACK));
        r.packet(100 * S + 2, &tcp_frame(1, 40000, 2, 80, FIN_ACK));
        r.packet(100 * S + 3, &tcp_frame(2, 80, 1, 40000, FIN_ACK));
        r.packet(100 * S + 4, &tcp_frame(1, 40000, 2, 80, ACK));
        // The linger is 2 s: another flow's packet at +3 s lets the wheel export it.
        r.packet(103 * S, &tcp_frame(3, 1, 4, 2, ACK));
        assert_eq!(r.records, vec![(40000, 80, 3, 2, EndReason::Fin)]);
    }

    #[test]
    fn syn_on_a_closed_connection_is_the_next_connection() {
        let mut r = Run::new(FlowConfig::default());
        r.packet(100 * S, &tcp_frame(1, 40000, 2, 80, SYN));
        r.packet(
            100 * S + 1,
            &tcp_frame(2, 80, 1, 40000, tcp_flags::RST | tcp_flags::ACK),
        );
        let o = r.packet(100 * S + 2, &tcp_frame(1, 40000, 2, 80, SYN));
        assert!(o.new_flow);
        r.flush();
        assert_eq!(
            r.records,
            vec![
                (40000, 80, 1, 1, EndReason::Rst),
                (40000, 80, 1, 0, EndReason::End)
            ]
        );
    }

    #[test]
    fn table_pressure_evicts_the_longest_idle() {
        let config = FlowConfig {
            capacity: 3,
            ..FlowConfig::default()
        };
        let mut r = Run::new(config);
        r.packet(100 * S, &tcp_frame(1, 1, 2, 80, ACK));
        r.packet(101 * S, &tcp_frame(1, 2, 2, 80, ACK));
        r.packet(102 * S, &tcp_frame(1, 3, 2, 80, ACK));
        // Flow 1 becomes the most recent; flow 2 is now idle the longest.
        r.packet(103 * S, &tcp_frame(1, 1, 2, 80, ACK));
        r.packet(104 * S, &tcp_frame(1, 4, 2, 80, ACK));
        assert_eq!(r.records, vec![(2, 80, 1, 0, EndReason::Pressure)]);
        assert_eq!(r.meter.active_flows(), 3);
        assert_eq!(r.meter.stats().records[EndReason::Pressure as usize], 1);
    }

    #[test]
    fn pressure_always_evicts_a_flow_with_the_earliest_deadline() {
        // 300 flows through a table of 40, at random times: every eviction must take a flow
        // whose idle deadline falls in the earliest tick of all live flows (the wheel's
        // resolution), found however far ahead in the wheel that tick lies.
        let config = FlowConfig {
            capacity: 40,
            ..FlowConfig::default()
        };
        let mut r = Run::new(config);
        let mut last_seen: std::collections::HashMap<u16, u64> = Default::default();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut ts = 1000 * S;
        let mut evictions = 0;
        for _ in 0..5000 {
            trawl_testkit::xorshift(&mut rng);
            ts += rng % (S / 5);
            let port = 1000 + (rng >> 40) as u16 % 300;
            let before = r.records.len();
            r.packet(ts, &tcp_frame(1, port, 2, 80, ACK));
            for rec in &r.records[before..] {
                if rec.4 != EndReason::Pressure {
                    continue;
                }
                evictions += 1;
                let idle = r.meter.config().idle_timeout_ns;
                let tick = |last: u64| (last + idle) >> TICK_SHIFT;
                let earliest = *last_seen.values().min().expect("live flows");
                let evicted = last_seen[&rec.0];
                assert!(
                    tick(evicted) <= tick(earliest),
                    "evicted a flow last seen at {evicted}, one was idle since {earliest}"
                );
            }
            for rec in &r.records[before..] {
                last_seen.remove(&rec.0);
            }
            last_seen.insert(port, ts);
        }
        assert!(evictions > 1000, "{evictions} evictions");
        assert_eq!(r.meter.active_flows(), 40);
    }

    #[test]
    fn timestamps_near_the_end_of_time_do_not_overflow() {
        let mut r = Run::new(FlowConfig::default());
        r.packet(u64::MAX - 5, &tcp_frame(1, 1, 2, 80, ACK));
        r.packet(u64::MAX, &tcp_frame(1, 1, 2, 80, FIN_ACK));
        r.packet(u64::MAX, &tcp_frame(2, 80, 1, 1, tcp_flags::RST));
        r.flush();
        assert_eq!(r.records.len(), 1);
        assert_eq!(r.records[0].2 + r.records[0].3, 3);
    }

    /// `tcp_frame` carrying `payload`.
    fn tcp_frame_with(a: u8, sport: u16, b: u8, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut f = tcp_frame(a, sport, b, dport, flags);
        f[16..18].copy_from_slice(&(40 + payload.len() as u16).to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn payload_bytes_are_kept_per_direction_up_to_the_limit() {
        let config = FlowConfig {
            payload_bytes: 6,
            capacity: 16,
            ..FlowConfig::default()
        };
        let mut meter = FlowMeter::new(config);
        let packets = [
            tcp_frame_with(1, 40000, 2, 80, tcp_flags::SYN, b""),
            tcp_frame_with(1, 40000, 2, 80, ACK, b"GET "),
            tcp_frame_with(2, 80, 1, 40000, ACK, b"HTTP/1.1 200"),
            tcp_frame_with(1, 40000, 2, 80, ACK, b"/x"),
            tcp_frame_with(1, 40000, 2, 80, ACK, b"more"),
        ];
        let mut got = Vec::new();
        let mut sink =
            |r: &FlowRecord<'_>| got.push((r.fwd_payload.to_vec(), r.rev_payload.to_vec()));
        for (i, f) in packets.iter().enumerate() {
            let pkt = PacketRecord {
                ts_ns: S + i as u64,
                wire_len: f.len() as u32,
                iface: 0,
                direction: Direction::Unknown,
                link_type: LinkType::ETHERNET,
                data: f,
            };
            meter.process(&pkt, &mut sink);
        }
        meter.flush(&mut sink);
        assert_eq!(got, vec![(b"GET /x".to_vec(), b"HTTP/1".to_vec())]);
        assert_eq!(
            meter.bytes_per_flow(),
            meter.full().table.bytes_per_flow() + 12
        );
    }

    #[test]
    fn table_size_gives_per_flow_bytes_only_for_a_well_used_table() {
        let size = |capacity, peak_flows| TableSize {
            capacity,
            bytes: 0,
            peak_flows,
            bytes_per_flow: 332,
        };
        // A small capture on the default table: a few hundred flows of four million.
        assert_eq!(size(4 << 20, 300).per_flow(), None);
        // A small table, full, but of fewer flows than one chunk of overflow records.
        assert_eq!(size(100, 90).per_flow(), None);
        assert_eq!(size(1 << 20, 1 << 17).per_flow(), Some(332));
        assert_eq!(size(1 << 20, (1 << 20) / 10 - 1).per_flow(), None);
        let meter = FlowMeter::new(FlowConfig {
            capacity: 1000,
            ..FlowConfig::default()
        });
        let t = meter.table_size();
        assert_eq!(t.capacity, 1000);
        assert_eq!(t.bytes, 1000 * meter.full().table.bytes_per_flow() as u64);
        // At the default capacity: minimal's one line and two index slots, standard's two
        // lines and the same; full's five lines,
        // the timing record's two and the same index share.
        let per_flow = |features| {
            FlowMeter::new(FlowConfig {
                features,
                ..FlowConfig::default()
            })
            .bytes_per_flow()
        };
        assert_eq!(per_flow(crate::FeatureLevel::Minimal), 64 + 8);
        assert_eq!(per_flow(crate::FeatureLevel::Standard), 128 + 8);
        assert_eq!(per_flow(crate::FeatureLevel::Full), 320 + 128 + 8);
    }

    #[test]
    fn non_ip_is_counted_not_keyed() {
        let mut r = Run::new(FlowConfig::default());
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let o = r.packet(S, &arp);
        assert!(!o.in_flow);
        assert_eq!(o.parse, ParseOutcome::NonIp);
        assert_eq!(r.meter.stats().outcomes.get(ParseOutcome::NonIp), 1);
        assert_eq!(r.meter.stats().packets, 1);
    }

    #[test]
    fn heuristic_orients_server_first_packets() {
        let mut r = Run::new(FlowConfig::default());
        // First packet seen is the server's answer from port 443 to an ephemeral port.
        r.packet(S, &tcp_frame(2, 443, 1, 50000, ACK));
        r.flush();
        assert_eq!(r.records, vec![(50000, 443, 0, 1, EndReason::End)]);
    }
}
