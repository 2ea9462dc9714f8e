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

fn order(sort: SortBy, a: &(GroupKey, Metrics), b: &(GroupKey, Metrics)) -> Ordering {
    let desc = |x: u64, y: u64| y.cmp(&x);
    let primary = match sort {
        SortBy::Bytes => desc(a.1.bytes(), b.1.bytes()).then(desc(a.1.packets(), b.1.packets())),
        SortBy::Packets => desc(a.1.packets(), b.1.packets()).then(desc(a.1.bytes(), b.1.bytes())),
        SortBy::Flows => desc(a.1.flows, b.1.flows).then(desc(a.1.bytes(), b.1.bytes())),
        SortBy::Time => {
            a.0.time_ns
                .cmp(&b.0.time_ns)
                .then(desc(a.1.bytes(), b.1.bytes()))
        }
    };
    // Ties are broken by the key, so equal inputs give identical output.
    primary.then_with(|| a.0.cmp(&b.0))
}

impl PartialAggregate {
    /// Sorts, keeps the first `limit` groups, and sums the totals.
    pub fn finish(self, sort: SortBy, limit: Option<usize>) -> QueryResult {
        let mut totals = Metrics::default();
        for m in self.groups.values() {
            totals.add(m);
        }
        let groups = self.groups.len() as u64;
        let mut rows: Vec<(GroupKey, Metrics)> = self.groups.into_iter().collect();
        let cmp = |a: &(GroupKey, Metrics), b: &(GroupKey, Metrics)| order(sort, a, b);
        if let Some(l) = limit {
            if l < rows.len() {
                // Top-N without sorting every group.
                if l > 0 {
                    rows.select_nth_unstable_by(l - 1, cmp);
                }
                rows.truncate(l);
            }
        }
        rows.sort_unstable_by(cmp);
        QueryResult {
            attributes: self.attributes,
            rows,
            totals,
            groups,
            stats: self.stats,
            elapsed: Duration::ZERO,
        }
    }
}
