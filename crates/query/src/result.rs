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
        let mut rows: Vec<(u64, u128, Metrics)> = Vec::with_capacity(cap.min(self.len()));
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
        // O(n log n) decodes (120 k rows of `dport,probe`: most tie on their metrics). The
        // sort orders 4-byte positions, and the decoded rows are then put in that order in
        // place: a decoded key is ~280 bytes, and moving 120 k of them around a sort and into
        // a second vector (fresh memory the kernel clears first) was most of a fleet's `-n 0`
        // answer's time after its last probe.
        let mut decoded: Vec<(GroupKey, Metrics)> = rows
            .iter()
            .map(|r| (self.decode(&l, r.0, r.1), r.2))
            .collect();
        let mut at: Vec<u32> = (0..rows.len() as u32).collect();
        at.sort_unstable_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            order(sort, &rows[a], &rows[b]).then_with(|| decoded[a].0.cmp(&decoded[b].0))
        });
        permute(&mut decoded, &mut at);
        let rows = decoded;
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

/// Puts `v` in the order `at` gives (`v[i]` becomes the old `v[at[i]]`) in place, following
/// each cycle of the permutation once; `at` is left the identity.
fn permute<T>(v: &mut [T], at: &mut [u32]) {
    for start in 0..v.len() {
        let mut cur = start;
        loop {
            let from = at[cur] as usize;
            at[cur] = cur as u32;
            if from == start {
                break;
            }
            v.swap(cur, from);
            cur = from;
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

    #[test]
    fn permute_puts_every_element_where_the_order_says() {
        let mut seed = 7u64;
        for n in [0usize, 1, 2, 3, 10, 257] {
            let mut at: Vec<u32> = (0..n as u32).collect();
            // A pseudo-random permutation (Fisher-Yates with an LCG).
            for i in (1..n).rev() {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                at.swap(i, (seed >> 33) as usize % (i + 1));
            }
            let want: Vec<u32> = at.iter().map(|&i| i * 10).collect();
            let mut v: Vec<u32> = (0..n as u32).map(|i| i * 10).collect();
            permute(&mut v, &mut at);
            assert_eq!(v, want, "{n}");
            assert!(at.iter().enumerate().all(|(i, &a)| a as usize == i));
        }
    }
}
