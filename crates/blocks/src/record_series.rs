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
use std::collections::BTreeMap;
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
    /// Rows not sent yet, per interface and second.
    open: BTreeMap<Arc<str>, BTreeMap<u64, SeriesRow>>,
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
        let rows = self.open.entry(iface).or_default();
        for r in &b.records {
            spread(r, rows);
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
        for (iface, rows) in &mut self.open {
            let keep = match until {
                u64::MAX => BTreeMap::new(),
                _ => rows.split_off(&until),
            };
            let done = std::mem::replace(rows, keep);
            if done.is_empty() && !last {
                continue;
            }
            let mut slot = self.pool.take();
            let out = slot.get_mut();
            out.rows.clear();
            out.rows.extend(done.into_values());
            out.watermark = until;
            out.last = last;
            out.stream = 0;
            out.iface = Some(iface.clone());
            ctx.emit(0, slot.into_msg());
        }
    }
}

/// Adds `r`'s packets and bytes, spread evenly over its seconds, into `rows`.
fn spread(r: &FlowRecord<'_>, rows: &mut BTreeMap<u64, SeriesRow>) {
    let first = r.first_ns / NS;
    let last = (r.last_ns / NS).max(first);
    let n = last - first + 1;
    let packets = r.fwd.packets + r.rev.packets;
    let bytes = r.fwd.bytes + r.rev.bytes;
    for (i, second) in (first..=last).enumerate() {
        let i = i as u64;
        let row = rows.entry(second).or_insert(SeriesRow {
            second,
            ..SeriesRow::default()
        });
        // The remainder in the first seconds: the rows add up to the record.
        row.packets += packets / n + u64::from(i < packets % n);
        row.bytes += bytes / n + u64::from(i < bytes % n);
        row.active_flows += 1;
        row.new_flows += u64::from(i == 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_spreads_evenly_and_sums_to_itself() {
        let mut r = trawl_export::decode::empty_record();
        r.first_ns = 10 * NS + 500;
        r.last_ns = 13 * NS + 7;
        r.fwd.packets = 7;
        r.rev.packets = 3;
        r.fwd.bytes = 1001;
        let mut rows = BTreeMap::new();
        spread(&r, &mut rows);
        let got: Vec<(u64, u64, u64, u64, u64)> = rows
            .values()
            .map(|r| (r.second, r.packets, r.bytes, r.active_flows, r.new_flows))
            .collect();
        assert_eq!(
            got,
            vec![
                (10, 3, 251, 1, 1),
                (11, 3, 250, 1, 0),
                (12, 2, 250, 1, 0),
                (13, 2, 250, 1, 0)
            ]
        );
    }
}
