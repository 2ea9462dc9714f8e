//! The final form of a query: groups sorted and limited, with totals over all groups.
use std::cmp::Ordering;
use std::time::Duration;

use crate::partial::{GroupKey, Metrics, PartialAggregate, ScanStats};
use crate::plan::Attribute;

/// Result order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortBy {
    /// Bytes both ways, descending.
    Bytes,
    /// Packets both ways, descending.
    Packets,
    /// Flow rows, descending.
    Flows,
    /// Time ascending (then bytes descending).
    Time,
}

impl SortBy {
    /// Parses `bytes`, `packets`, `flows` or `time`.
    pub fn parse(s: &str) -> Option<SortBy> {
        Some(match s {
            "bytes" => SortBy::Bytes,
            "packets" => SortBy::Packets,
            "flows" => SortBy::Flows,
            "time" => SortBy::Time,
            _ => return None,
        })
    }
}

/// A finished query.
#[derive(Clone, Debug)]
pub struct QueryResult {
    /// Grouped-by attributes.
    pub attributes: Vec<Attribute>,
    /// Groups in order, at most the limit.
    pub rows: Vec<(GroupKey, Metrics)>,
    /// Sums over every group (not only the rows shown).
    pub totals: Metrics,
    /// Groups before the limit.
    pub groups: u64,
    /// Scan counters.
    pub stats: ScanStats,
    /// Wall-clock time of the query (set by the caller).
    pub elapsed: Duration,
}

/// Row order on the metrics (and the time bucket for `SortBy::Time`); ties are broken by the
/// decoded key by the caller.
fn order(sort: SortBy, a: &(u64, u128, Metrics), b: &(u64, u128, Metrics)) -> Ordering {
    let desc = |x: u64, y: u64| y.cmp(&x);
    let (ma, mb) = (&a.2, &b.2);
    match sort {
        SortBy::Bytes => desc(ma.bytes(), mb.bytes()).then(desc(ma.packets(), mb.packets())),
        SortBy::Packets => desc(ma.packets(), mb.packets()).then(desc(ma.bytes(), mb.bytes())),
        SortBy::Flows => desc(ma.flows, mb.flows).then(desc(ma.bytes(), mb.bytes())),
        SortBy::Time => {
            let t = |c: u64| c & crate::partial::TIME_MASK;
            t(a.0).cmp(&t(b.0)).then(desc(ma.bytes(), mb.bytes()))
        }
    }
}

impl PartialAggregate {
    /// Sorts, keeps the first `limit` groups, and sums the totals. Works on the packed keys:
    /// only the rows kept are decoded.
    pub fn finish(self, sort: SortBy, limit: Option<usize>) -> QueryResult {
        let mut totals = Metrics::default();
        let mut groups = 0u64;
        // Ties are broken by the decoded key, so equal inputs give identical output.
        let cmp = |a: &(u64, u128, Metrics), b: &(u64, u128, Metrics)| {
            order(sort, a, b).then_with(|| self.decode(a.0, a.1).cmp(&self.decode(b.0, b.1)))
        };
        // Top-N in one pass with a buffer of at most 2N candidates, cut back to the best N
        // whenever it fills: no vector of every group.
        let keep = limit.unwrap_or(usize::MAX);
        let cap = keep.saturating_mul(2).max(1024);
        let mut rows: Vec<(u64, u128, Metrics)> = Vec::new();
        for (&c, m) in &self.maps {
            for (k, v) in m.iter() {
                totals.add(&v);
                groups += 1;
                if keep == 0 {
                    continue;
                }
                rows.push((c, k, v));
                if rows.len() >= cap && keep < rows.len() {
                    rows.select_nth_unstable_by(keep - 1, cmp);
                    rows.truncate(keep);
                }
            }
        }
        if keep < rows.len() {
            rows.select_nth_unstable_by(keep - 1, cmp);
        }
        rows.truncate(keep);
        rows.sort_unstable_by(cmp);
        let rows = rows
            .iter()
            .map(|&(c, k, m)| (self.decode(c, k), m))
            .collect();
        QueryResult {
            attributes: self.attributes.clone(),
            rows,
            totals,
            groups,
            stats: self.stats,
            elapsed: Duration::ZERO,
        }
    }
}
