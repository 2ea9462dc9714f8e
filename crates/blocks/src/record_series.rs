//! `flow_series`: per-second rows from flow records, for series where no packets are seen
//! (`trawl collect --db`: the exporters' records). A record's packets and bytes are spread
//! evenly over the seconds from its first to its last packet (whole units: the remainder goes
//! to its first seconds, so the rows sum to the record exactly); it is active in each of those
//! seconds and new in the first. Records do not say which way a packet crossed the exporter's
//! interface, so the in/out fields stay 0.
//!
//! Records end up to the exporter's active timeout after their first packet and arrive after
//! that: a second is sent once the records' clock (`FlowBatch::clock_ns`, the newest record
//! end) is `grace` past it. A record later than that still counts: its rows go out with the
//! next batch (a stored second then gets a further part, which readers add up).
//!
//! A record adds a constant to each of its seconds (its share of packets and bytes, the flow
//! counted active), plus one to its first few seconds (the remainders): each interface holds
//! the seconds not sent yet as steps (the change from the second before), so that a record
//! costs a few additions however many seconds it spans, and the rows are summed up when
//! sent. (Adding into a row per second cost 16 ordered-map lookups per record of the export
//! bench's, whose records span 15 seconds on average: most of `collect --db`'s time.)
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, Msg, Pool};
use trawl_flow::FlowRecord;
use trawl_series::SeriesRow;

use crate::messages::{FlowBatch, SeriesBatch, FLOWS, SERIES};

const NS: u64 = 1_000_000_000;

/// Spreads flow records over their seconds, one series per interface (origin).
pub struct FlowSeries {
    grace_ns: u64,
    /// The settings' interface; None: each batch's origin (or interface) names it.
    iface: Option<Arc<str>>,
    /// Rows not sent yet, per interface.
    open: BTreeMap<Arc<str>, Seconds>,
    clock: u64,
    pool: Pool<SeriesBatch>,
}

/// Settings of `flow_series`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSeriesSettings {
    /// How long after a second its rows wait for records still to come (default 5m: records
    /// of exporters with active timeouts up to that are counted in their own part).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub grace: Option<u64>,
    /// Interface name of the rows; without it, each batch's origin (`ipfix_source`: one per
    /// exporter and observation domain, or per file) or interface names them.
    pub iface: Option<String>,
}

/// Default of `grace`.
const GRACE_NS: u64 = 300 * NS;

impl Block for FlowSeries {
    const TYPE: &'static str = "flow_series";
    const SUMMARY: &'static str =
        "per-second rows from flow records (packets and bytes spread evenly over each record's seconds)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "flows",
        ty: FLOWS,
        required: true,
        doc: "flow records (collected ones: each batch names its origin)",
    }];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "series",
        ty: SERIES,
        required: true,
        doc: "rows per interface, each batch naming its interface (`SeriesBatch::iface`)",
    }];
    type Settings = FlowSeriesSettings;

    fn build(s: FlowSeriesSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(FlowSeries {
            grace_ns: s.grace.unwrap_or(GRACE_NS),
            iface: s.iface.map(Arc::from),
            open: BTreeMap::new(),
            clock: 0,
            pool: Pool::new(SeriesBatch::default),
        })
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<FlowBatch>() else {
            return;
        };
        let named = self
            .iface
            .clone()
            .or_else(|| b.origin.clone())
            .or_else(|| b.iface.clone());
        let Some(iface) = named else {
            return ctx.error("records that name no interface: set `iface` on this flow_series");
        };
        let seconds = self.open.entry(iface).or_default();
        for r in &b.records {
            seconds.add(r);
        }
        self.clock = self.clock.max(b.clock_ns);
        let until = self.clock.saturating_sub(self.grace_ns) / NS;
        self.send(until, false, ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.send(u64::MAX, true, ctx);
    }
}

impl FlowSeries {
    /// Sends every interface's rows of the seconds before `until`, and `until` as its
    /// watermark.
    fn send(&mut self, until: u64, last: bool, ctx: &mut Ctx<'_>) {
        for (iface, seconds) in &mut self.open {
            if !seconds.has_rows_before(until) && !last {
                continue;
            }
            let mut slot = self.pool.take();
            let out = slot.get_mut();
            out.rows.clear();
            seconds.take_before(until, &mut out.rows);
            out.watermark = until;
            out.last = last;
            out.stream = 0;
            out.iface = Some(iface.clone());
            ctx.emit(0, slot.into_msg());
        }
    }
}

/// One interface's seconds not sent yet.
#[derive(Default)]
struct Seconds {
    /// The second of `steps[0]`.
    base: u64,
    /// Per second from `base`: how its packets, bytes and active flows differ from the
    /// second before's (two's complement: a record's end subtracts), and its new flows.
    steps: VecDeque<Step>,
    /// Packets, bytes and active flows of the second before `base` (what `steps` add to).
    carry: Step,
    /// Seconds before this one were sent.
    sent_until: u64,
    /// Rows of seconds already sent, from records that came later: they go out with the next
    /// batch, as a further part of their seconds.
    late: BTreeMap<u64, SeriesRow>,
}

/// The change of one second's counters from the second before (wrapping), and its new flows.
#[derive(Clone, Copy, Default)]
struct Step {
    packets: u64,
    bytes: u64,
    active: u64,
    new: u64,
}

/// A count spread evenly over `n` seconds: `each` in every second and one more in the first
/// `extra` (the rows sum to the count exactly).
#[derive(Clone, Copy)]
struct Share {
    each: u64,
    extra: u64,
}

impl Share {
    fn of(count: u64, n: u64) -> Share {
        Share {
            each: count / n,
            extra: count % n,
        }
    }
    /// The share of the `i`-th second.
    fn at(self, i: u64) -> u64 {
        self.each + u64::from(i < self.extra)
    }
}

impl Seconds {
    /// Adds `r`'s packets and bytes, spread evenly over its seconds.
    fn add(&mut self, r: &FlowRecord<'_>) {
        let first = r.first_ns / NS;
        let last = (r.last_ns / NS).max(first);
        let n = last - first + 1;
        let packets = Share::of(r.fwd.packets + r.rev.packets, n);
        let bytes = Share::of(r.fwd.bytes + r.rev.bytes, n);
        // Seconds already sent: rows of their own (rare, a record later than the grace).
        if first < self.sent_until {
            for second in first..=last.min(self.sent_until - 1) {
                let i = second - first;
                let row = self.late.entry(second).or_insert(SeriesRow {
                    second,
                    ..SeriesRow::default()
                });
                row.packets += packets.at(i);
                row.bytes += bytes.at(i);
                row.active_flows += 1;
                row.new_flows += u64::from(i == 0);
            }
        }
        let lo = first.max(self.sent_until);
        if lo > last {
            return;
        }
        if self.steps.is_empty() {
            // Nothing held (no record reaches the seconds before `base`, so `carry` is 0):
            // start at this record, not at the end of a gap.
            self.base = lo;
        } else if lo < self.base {
            // Only before the first rows went out (afterwards `base` is `sent_until`): an
            // earlier record than the first one held.
            for _ in lo..self.base {
                self.steps.push_front(Step::default());
            }
            self.base = lo;
        }
        // Up to the second after the record's last, where its shares end.
        let end = (last + 2 - self.base) as usize;
        if self.steps.len() < end {
            self.steps.resize(end, Step::default());
        }
        let at = |second: u64| (second - self.base) as usize;
        let (lo_i, end_i) = (at(lo), at(last + 1));
        for (share, field) in [
            (packets, (|s| &mut s.packets) as fn(&mut Step) -> &mut u64),
            (bytes, |s| &mut s.bytes),
        ] {
            let f = field(&mut self.steps[lo_i]);
            *f = f.wrapping_add(share.each);
            let f = field(&mut self.steps[end_i]);
            *f = f.wrapping_sub(share.each);
            // The remainder: one more in each of the seconds `first..first + extra` held.
            let extra_end = first + share.extra;
            if extra_end > lo {
                let f = field(&mut self.steps[lo_i]);
                *f = f.wrapping_add(1);
                let f = field(&mut self.steps[at(extra_end)]);
                *f = f.wrapping_sub(1);
            }
        }
        self.steps[lo_i].active = self.steps[lo_i].active.wrapping_add(1);
        self.steps[end_i].active = self.steps[end_i].active.wrapping_sub(1);
        if first == lo {
            self.steps[lo_i].new += 1;
        }
    }

    /// Whether any row of a second before `until` is held.
    fn has_rows_before(&self, until: u64) -> bool {
        !self.late.is_empty() || (!self.steps.is_empty() && self.base < until)
    }

    /// Moves the rows of the seconds before `until` into `out`, oldest first: the late rows,
    /// then the seconds some record was active in.
    fn take_before(&mut self, until: u64, out: &mut Vec<SeriesRow>) {
        out.extend(std::mem::take(&mut self.late).into_values());
        let take = until.saturating_sub(self.base).min(self.steps.len() as u64) as usize;
        let mut now = self.carry;
        for (i, step) in self.steps.drain(..take).enumerate() {
            now.packets = now.packets.wrapping_add(step.packets);
            now.bytes = now.bytes.wrapping_add(step.bytes);
            now.active = now.active.wrapping_add(step.active);
            // Seconds no record was active in have no row.
            if now.active != 0 {
                out.push(SeriesRow {
                    second: self.base + i as u64,
                    packets: now.packets,
                    bytes: now.bytes,
                    active_flows: now.active,
                    new_flows: step.new,
                    ..SeriesRow::default()
                });
            }
        }
        self.carry = now;
        self.base += take as u64;
        self.sent_until = self.sent_until.max(until);
        if self.steps.is_empty() {
            self.carry = Step::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(first_ns: u64, last_ns: u64, packets: u64, bytes: u64) -> FlowRecord<'static> {
        let mut r = trawl_export::decode::empty_record();
        r.first_ns = first_ns;
        r.last_ns = last_ns;
        r.fwd.packets = packets;
        r.fwd.bytes = bytes;
        r
    }

    fn rows(rows: &[SeriesRow]) -> Vec<(u64, u64, u64, u64, u64)> {
        rows.iter()
            .map(|r| (r.second, r.packets, r.bytes, r.active_flows, r.new_flows))
            .collect()
    }

    #[test]
    fn a_record_spreads_evenly_and_sums_to_itself() {
        let mut r = record(10 * NS + 500, 13 * NS + 7, 7, 1001);
        r.rev.packets = 3;
        let mut s = Seconds::default();
        s.add(&r);
        let mut out = Vec::new();
        s.take_before(u64::MAX, &mut out);
        assert_eq!(
            rows(&out),
            vec![
                (10, 3, 251, 1, 1),
                (11, 3, 250, 1, 0),
                (12, 2, 250, 1, 0),
                (13, 2, 250, 1, 0)
            ]
        );
    }

    /// Seconds no record covers have no row; a record later than the seconds already sent
    /// gets rows of its own for them, sent with the next batch.
    #[test]
    fn gaps_have_no_rows_and_late_records_add_parts() {
        let mut s = Seconds::default();
        s.add(&record(100 * NS, 101 * NS, 2, 20));
        s.add(&record(104 * NS, 104 * NS, 1, 10));
        let mut out = Vec::new();
        s.take_before(103, &mut out);
        assert_eq!(rows(&out), vec![(100, 1, 10, 1, 1), (101, 1, 10, 1, 0)]);
        // 102..=105: 102 was sent (empty), 103.. not yet.
        s.add(&record(102 * NS, 105 * NS, 4, 40));
        out.clear();
        s.take_before(u64::MAX, &mut out);
        assert_eq!(
            rows(&out),
            vec![
                (102, 1, 10, 1, 1),
                (103, 1, 10, 1, 0),
                (104, 2, 20, 2, 1),
                (105, 1, 10, 1, 0)
            ]
        );
    }

    /// The rows the steps sum up are the rows of adding each record into each of its seconds
    /// (the way this block did it before), for records in any order, late ones and sends in
    /// between included.
    #[test]
    fn steps_give_the_rows_of_adding_second_by_second() {
        fn reference(r: &FlowRecord<'_>, open: &mut BTreeMap<u64, SeriesRow>) {
            let first = r.first_ns / NS;
            let last = (r.last_ns / NS).max(first);
            let n = last - first + 1;
            let (p, b) = (r.fwd.packets, r.fwd.bytes);
            for (i, second) in (first..=last).enumerate() {
                let i = i as u64;
                let row = open.entry(second).or_insert(SeriesRow {
                    second,
                    ..SeriesRow::default()
                });
                row.packets += p / n + u64::from(i < p % n);
                row.bytes += b / n + u64::from(i < b % n);
                row.active_flows += 1;
                row.new_flows += u64::from(i == 0);
            }
        }
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..50 {
            let mut s = Seconds::default();
            let mut open = BTreeMap::new();
            let (mut got, mut want) = (Vec::new(), Vec::new());
            let mut clock = 1_000u64;
            for _ in 0..400 {
                // Starts up to 40 s before the clock (some before the seconds sent), spans
                // up to 20 s.
                let first = (clock - next() % 40) * NS + next() % NS;
                let last = first + (next() % 20) * NS + next() % NS;
                let r = record(first, last, next() % 100, next() % 100_000);
                s.add(&r);
                reference(&r, &mut open);
                clock += next() % 3;
                if next() % 8 == 0 {
                    let until = clock - 25;
                    s.take_before(until, &mut got);
                    let keep = open.split_off(&until);
                    want.extend(std::mem::replace(&mut open, keep).into_values());
                }
            }
            s.take_before(u64::MAX, &mut got);
            want.extend(open.into_values());
            assert_eq!(rows(&got), rows(&want));
        }
    }
}
