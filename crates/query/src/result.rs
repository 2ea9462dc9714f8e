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
        let l = self.layout();
        let cmp = |a: &(u64, u128, Metrics), b: &(u64, u128, Metrics)| {
            order(sort, a, b)
                .then_with(|| self.decode(&l, a.0, a.1).cmp(&self.decode(&l, b.0, b.1)))
        };
        // Top-N in one pass with a buffer of at most 2N candidates, cut back to the best N
        // whenever it fills: no vector of every group.
        let keep = limit.unwrap_or(usize::MAX);
        let cap = keep.saturating_mul(2).max(1024);
        let mut rows: Vec<(u64, u128, Metrics)> = Vec::new();
        // The worst of the best `keep` after the last cut: a group whose metrics alone order
        // it after that one can never be among them, and is passed over without a push (and
        // without the key decoding that breaking ties costs).
        let mut worst: Option<(u64, u128, Metrics)> = None;
        for (&c, m) in &self.maps {
            for (k, v) in m.iter() {
                totals.add(&v);
                groups += 1;
                if keep == 0 {
                    continue;
                }
                let group = (c, k, v);
                if worst.is_some_and(|w| order(sort, &group, &w) == Ordering::Greater) {
                    continue;
                }
                rows.push(group);
                if rows.len() >= cap && keep < rows.len() {
                    rows.select_nth_unstable_by(keep - 1, cmp);
                    rows.truncate(keep);
                    // After the cut the last one is the worst kept.
                    worst = rows.last().copied();
                }
            }
        }
        if keep < rows.len() {
            rows.select_nth_unstable_by(keep - 1, cmp);
        }
        rows.truncate(keep);
        // The rows kept are decoded once each, then sorted: a decode per comparison of tied
        // rows (a name cloned per interface or probe) made a large answer's sort cost
        // O(n log n) decodes (120 k rows of `dport,probe`: most tie on their metrics).
        let mut rows: Vec<((u64, u128, Metrics), GroupKey)> = rows
            .into_iter()
            .map(|r| (r, self.decode(&l, r.0, r.1)))
            .collect();
        rows.sort_unstable_by(|a, b| order(sort, &a.0, &b.0).then_with(|| a.1.cmp(&b.1)));
        let rows = rows.into_iter().map(|((_, _, m), key)| (key, m)).collect();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` groups by destination port whose bytes repeat every 7 ports: most groups tie with
    /// many others on their metrics.
    fn tied(n: u16) -> PartialAggregate {
        let groups: Vec<serde_json::Value> = (0..n)
            .map(|p| {
                serde_json::json!({"key": {"dport": p}, "fwd_packets": 1, "rev_packets": 0,
                    "fwd_bytes": u64::from(p % 7) * 100, "rev_bytes": 0, "flows": 1})
            })
            .collect();
        let doc = serde_json::json!({
            "version": crate::partial::PARTIAL_JSON_VERSION,
            "attributes": ["dport"],
            "groups": groups,
            "stats": crate::partial::ScanStats::default(),
        });
        PartialAggregate::from_json(&doc.to_string(), 1 << 20).unwrap()
    }

    #[test]
    fn the_top_n_is_the_head_of_the_whole_order_also_among_ties() {
        // More groups than the 1,024-row buffer, so the top-N cuts it several times.
        let groups = tied(3000);
        for sort in [SortBy::Bytes, SortBy::Flows] {
            let all = groups.clone().finish(sort, None);
            assert_eq!(all.rows.len(), 3000);
            for keep in [1, 10, 713, 1100, 2999] {
                let top = groups.clone().finish(sort, Some(keep));
                assert_eq!(top.rows, all.rows[..keep], "{sort:?} top {keep}");
                assert_eq!((top.totals, top.groups), (all.totals, 3000));
            }
        }
    }
}
