//! The final form of a query: groups sorted and limited, with totals over all groups.
use std::borrow::Cow;
use std::cmp::Ordering;
use std::ops::Range;
use std::time::Duration;

use crate::agg::AggTable;
use crate::partial::{GroupKey, Layout, Metrics, PartialAggregate, ScanStats};
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
    pub rows: Rows,
    /// Sums over every group (not only the rows shown).
    pub totals: Metrics,
    /// Groups before the limit.
    pub groups: u64,
    /// Scan counters.
    pub stats: ScanStats,
    /// Wall-clock time of the query (set by the caller).
    pub elapsed: Duration,
}

/// A result's rows, in order: decoded keys, or the packed keys of the aggregate they came
/// from, decoded one at a time as they are read. A fleet's `-n 0` answer is 120 k rows:
/// decoding every one into a ~280-byte [`GroupKey`] of one fresh vector (memory the kernel
/// clears first), and moving those around a sort, was most of its time after the last probe
/// answered.
#[derive(Clone, Debug)]
pub struct Rows(Repr);

#[derive(Clone, Debug)]
enum Repr {
    Decoded(Vec<(GroupKey, Metrics)>),
    Packed {
        /// The aggregate's names and attributes (its groups dropped).
        from: Box<PartialAggregate>,
        layout: Layout,
        rows: Vec<(u64, u128, Metrics)>,
    },
}

impl Rows {
    /// Number of rows.
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Decoded(v) => v.len(),
            Repr::Packed { rows, .. } => rows.len(),
        }
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The rows in order (a packed row's key decoded as it is read).
    pub fn iter(&self) -> impl Iterator<Item = (Cow<'_, GroupKey>, &Metrics)> + '_ {
        let (decoded, packed) = match &self.0 {
            Repr::Decoded(v) => (Some(v), None),
            Repr::Packed { from, layout, rows } => (None, Some((from, layout, rows))),
        };
        let decoded = decoded
            .into_iter()
            .flatten()
            .map(|(k, m)| (Cow::Borrowed(k), m));
        let packed = packed.into_iter().flat_map(|(from, layout, rows)| {
            rows.iter()
                .map(move |(c, k, m)| (Cow::Owned(from.decode(layout, *c, *k)), m))
        });
        decoded.chain(packed)
    }

    /// Calls `f` with rows `at` in order (past the end: none), stopping at its first error; a
    /// packed row is decoded into one key reused from row to row (no allocation per row).
    pub fn try_for_each_in<E>(
        &self,
        at: Range<usize>,
        mut f: impl FnMut(&GroupKey, &Metrics) -> Result<(), E>,
    ) -> Result<(), E> {
        match &self.0 {
            Repr::Decoded(v) => v
                .get(at)
                .unwrap_or(&[])
                .iter()
                .try_for_each(|(k, m)| f(k, m)),
            Repr::Packed { from, layout, rows } => {
                let mut key = GroupKey::default();
                rows.get(at)
                    .unwrap_or(&[])
                    .iter()
                    .try_for_each(|(c, k, m)| {
                        from.decode_into(layout, *c, *k, &mut key);
                        f(&key, m)
                    })
            }
        }
    }

    /// The rows decoded, in order, to be changed in place (a packed form is decoded once).
    pub fn decoded_mut(&mut self) -> &mut Vec<(GroupKey, Metrics)> {
        if let Repr::Packed { .. } = self.0 {
            self.0 = Repr::Decoded(self.to_vec());
        }
        match &mut self.0 {
            Repr::Decoded(v) => v,
            Repr::Packed { .. } => unreachable!("decoded just above"),
        }
    }

    /// The rows decoded, in order.
    pub fn to_vec(&self) -> Vec<(GroupKey, Metrics)> {
        self.iter().map(|(k, m)| (k.into_owned(), *m)).collect()
    }
}

impl From<Vec<(GroupKey, Metrics)>> for Rows {
    fn from(rows: Vec<(GroupKey, Metrics)>) -> Rows {
        Rows(Repr::Decoded(rows))
    }
}

impl IntoIterator for Rows {
    type Item = (GroupKey, Metrics);
    type IntoIter = std::vec::IntoIter<(GroupKey, Metrics)>;

    /// The rows decoded, in order.
    fn into_iter(self) -> Self::IntoIter {
        match self.0 {
            Repr::Decoded(v) => v.into_iter(),
            Repr::Packed { .. } => self.to_vec().into_iter(),
        }
    }
}

impl FromIterator<(GroupKey, Metrics)> for Rows {
    fn from_iter<I: IntoIterator<Item = (GroupKey, Metrics)>>(rows: I) -> Rows {
        Rows(Repr::Decoded(rows.into_iter().collect()))
    }
}

impl PartialEq for Rows {
    fn eq(&self, other: &Rows) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

/// Rows at least this many are sorted (and written: `output`) on two threads.
pub(crate) const PARALLEL_ROWS: usize = 1 << 14;

/// Runs `here` on this thread and `there` on another at once, and returns both results (a
/// panic of either is this thread's): the large answers' last steps use the second core,
/// idle by then (the probes and scans that kept it busy are done).
pub(crate) fn on_two_threads<A, B: Send>(
    here: impl FnOnce() -> A,
    there: impl FnOnce() -> B + Send,
) -> (A, B) {
    std::thread::scope(|s| {
        let there = s.spawn(there);
        let a = here();
        (
            a,
            there
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p)),
        )
    })
}

/// Sorts `rows` by `cmp`: a large answer on two threads (split at its median, each half
/// sorted by one).
fn sort_rows<T: Send>(rows: &mut [T], cmp: impl Fn(&T, &T) -> Ordering + Sync) {
    if rows.len() < PARALLEL_ROWS {
        rows.sort_unstable_by(cmp);
        return;
    }
    let mid = rows.len() / 2;
    rows.select_nth_unstable_by(mid, &cmp);
    let (low, high) = rows.split_at_mut(mid);
    on_two_threads(
        || low.sort_unstable_by(&cmp),
        || high.sort_unstable_by(&cmp),
    );
}

/// One pass of a top-N over `groups`: their totals and count, and the best `keep` of them in
/// no order (all of them when `keep` is unlimited; `hint`: how many that is, for the
/// vector's capacity). A buffer of at most 2N candidates, cut back to the best N whenever it
/// fills: no vector of every group.
fn top(
    groups: impl Iterator<Item = (u64, u128, Metrics)>,
    sort: SortBy,
    keep: usize,
    hint: usize,
    cmp: impl Fn(&(u64, u128, Metrics), &(u64, u128, Metrics)) -> Ordering,
) -> (Metrics, u64, Vec<(u64, u128, Metrics)>) {
    let mut totals = Metrics::default();
    let mut count = 0u64;
    let cap = keep.saturating_mul(2).max(1024);
    let mut rows = Vec::with_capacity(cap.min(hint.max(1024)));
    // The worst of the best `keep` after the last cut: a group whose metrics alone order it
    // after that one can never be among them, and is passed over without a push.
    let mut worst: Option<(u64, u128, Metrics)> = None;
    // `for_each`, not a `for` loop: the groups come through flattened and chained iterators
    // (contexts, partitions, slots), whose `fold` runs each level as its own loop where
    // `next` goes through every level per group (the fleet bench's top 10 of 944 k groups:
    // 37-49 ms from the last answer merged to the first byte out, 52-138 with `next`).
    groups.for_each(|group| {
        totals.add(&group.2);
        count += 1;
        if keep == 0 || worst.is_some_and(|w| order(sort, &group, &w) == Ordering::Greater) {
            return;
        }
        rows.push(group);
        if rows.len() >= cap && keep < rows.len() {
            rows.select_nth_unstable_by(keep - 1, &cmp);
            rows.truncate(keep);
            // After the cut the last one is the worst kept.
            worst = rows.last().copied();
        }
    });
    (totals, count, rows)
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
    /// Sorts, keeps the first `limit` groups, and sums the totals. Works on the packed keys,
    /// ties broken in the decoded keys' order (without decoding them); the rows
    /// kept stay packed, decoded as they are read ([`Rows`]).
    pub fn finish(mut self, sort: SortBy, limit: Option<usize>) -> QueryResult {
        let l = self.layout();
        let keep = limit.unwrap_or(usize::MAX);
        // Every group's key, for the order's ranks of text compared as text (tunnel
        // addresses): only those attributes need the keys ahead of the order.
        let texts = [Attribute::TunnelSrc, Attribute::TunnelDst];
        let all_keys: Vec<(u64, u128)> = if texts.iter().any(|a| self.attributes.contains(a)) {
            self.maps
                .iter()
                .flat_map(|(&c, m)| m.iter().map(move |(k, _)| (c, k)))
                .collect()
        } else {
            Vec::new()
        };
        let keys = self.key_order(&l, &all_keys);
        drop(all_keys);
        let cmp = |a: &(u64, u128, Metrics), b: &(u64, u128, Metrics)| {
            order(sort, a, b).then_with(|| keys.cmp((a.0, a.1), (b.0, b.1)))
        };
        let maps = &self.maps;
        let groups_of = |parts: Range<usize>| {
            maps.iter()
                .flat_map(move |(&c, m)| m.iter_parts(parts.clone()).map(move |(k, v)| (c, k, v)))
        };
        let all = 0..AggTable::PARTS;
        let (totals, groups, mut rows) = if keep < PARALLEL_ROWS && self.len() >= PARALLEL_ROWS {
            // A short top-N of a large table (a fleet's merged answer: a million groups)
            // on two threads, half of the partitions each, their best joined.
            let (low, high) = (all.start..all.end / 2, all.end / 2..all.end);
            let (a, b) = on_two_threads(
                || top(groups_of(low), sort, keep, 0, cmp),
                || top(groups_of(high), sort, keep, 0, cmp),
            );
            let mut totals = a.0;
            totals.add(&b.0);
            let mut rows = a.2;
            rows.extend(b.2);
            (totals, a.1 + b.1, rows)
        } else {
            top(groups_of(all), sort, keep, self.len(), cmp)
        };
        if keep < rows.len() {
            rows.select_nth_unstable_by(keep - 1, cmp);
        }
        rows.truncate(keep);
        sort_rows(&mut rows, cmp);
        drop(keys);
        // The groups stay with the names the rows decode with: freeing a large table is
        // left until the answer is out.
        let stats = std::mem::take(&mut self.stats);
        QueryResult {
            attributes: self.attributes.clone(),
            rows: Rows(Repr::Packed {
                from: Box::new(self),
                layout: l,
                rows,
            }),
            totals,
            groups,
            stats,
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
                assert_eq!(
                    top.rows.to_vec(),
                    all.rows.to_vec()[..keep],
                    "{sort:?} top {keep}"
                );
                assert_eq!((top.totals, top.groups), (all.totals, 3000));
            }
        }
    }

    /// Groups of `attributes` with keys drawn from small pools (so many share a value and
    /// the order goes on to the next attribute), every group one flow of the same size: most
    /// rows tie on their metrics, and their order is the keys'.
    fn varied(attributes: &[&str], n: usize) -> PartialAggregate {
        let names = ["eth1", "", "b", "eth0", "A", "é", "eth10"];
        let ips = [
            "10.0.0.2",
            "9.0.0.1",
            "::1",
            "2001:db8::1",
            "fe80::",
            "0.0.0.0",
            "10.0.0.10",
        ];
        let apps = ["", "dns", "http", "tls", "ssh", "quic"];
        let countries = ["", "DE", "US", "AZ", "ZA"];
        let tunnels = ["", "gre", "vxlan", "gtpu", "teredo", "ipip"];
        let mut seed = 99u64;
        let mut pick = |len: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % len
        };
        let groups: Vec<serde_json::Value> = (0..n)
            .map(|_| {
                let mut key = serde_json::Map::new();
                for &a in attributes {
                    let v = match a {
                        "time" => {
                            serde_json::json!((pick(4) as u64 + 1_000) * trawl_store::BLOCK_NS)
                        }
                        "iface" | "probe" => serde_json::json!(names[pick(names.len())]),
                        "sip" | "dip" => serde_json::json!(ips[pick(ips.len())]),
                        "tunnel_src" | "tunnel_dst" => {
                            let i = pick(ips.len() + 1);
                            serde_json::json!(ips.get(i).copied().unwrap_or(""))
                        }
                        "sport" | "dport" => {
                            serde_json::json!([53, 443, 80, 8080, 0, 65535, 22][pick(7)])
                        }
                        "proto" => serde_json::json!([6, 17, 1][pick(3)]),
                        "vlan" => serde_json::json!([0, 7, 4000][pick(3)]),
                        "sas" | "das" => {
                            serde_json::json!([0u32, 3320, 15169, u32::MAX, 7][pick(5)])
                        }
                        "app" => serde_json::json!(apps[pick(apps.len())]),
                        "scountry" | "dcountry" => {
                            serde_json::json!(countries[pick(countries.len())])
                        }
                        "tunnel_type" => serde_json::json!(tunnels[pick(tunnels.len())]),
                        other => panic!("no values for {other}"),
                    };
                    key.insert(
                        if a == "time" {
                            "time_ns".into()
                        } else {
                            a.into()
                        },
                        v,
                    );
                }
                serde_json::json!({"key": key, "fwd_packets": 1, "rev_packets": 0,
                    "fwd_bytes": 100, "rev_bytes": 0, "flows": 1})
            })
            .collect();
        let doc = serde_json::json!({
            "version": crate::partial::PARTIAL_JSON_VERSION,
            "attributes": attributes,
            "groups": groups,
            "stats": crate::partial::ScanStats::default(),
        });
        PartialAggregate::from_json(&doc.to_string(), 1 << 20).unwrap()
    }

    /// Attribute lists whose values [`varied`] draws: every attribute, in key orders of their
    /// own, each list within a packed key's bits.
    const ATTRIBUTE_SETS: [&[&str]; 4] = [
        &[
            "time",
            "iface",
            "sip",
            "dip",
            "probe",
            "app",
            "scountry",
            "tunnel_type",
        ],
        &[
            "tunnel_src",
            "tunnel_dst",
            "dcountry",
            "sport",
            "vlan",
            "proto",
        ],
        &["das", "sas", "dport"],
        &["dport", "probe"],
    ];

    /// The first of `rows` not where [`SortBy::Bytes`] puts it: bytes descending, then
    /// packets, then the decoded key.
    fn first_out_of_order(rows: &[(GroupKey, Metrics)]) -> Option<usize> {
        let mut sorted = rows.to_vec();
        sorted.sort_by(|a, b| {
            (b.1.bytes(), b.1.packets())
                .cmp(&(a.1.bytes(), a.1.packets()))
                .then_with(|| a.0.cmp(&b.0))
        });
        rows.iter().zip(&sorted).position(|(a, b)| a != b)
    }

    #[test]
    fn rows_tied_on_their_metrics_are_in_the_decoded_keys_order() {
        for attributes in ATTRIBUTE_SETS {
            let groups = varied(attributes, 2000);
            let result = groups.clone().finish(SortBy::Bytes, None);
            let rows = result.rows.to_vec();
            assert!(rows.len() > 40, "{attributes:?}: {} groups", rows.len());
            assert_eq!(first_out_of_order(&rows), None, "{attributes:?}");
            // The top-N cuts keep the same order.
            let top = groups.finish(SortBy::Bytes, Some(37)).rows.to_vec();
            assert_eq!(top, rows[..37], "{attributes:?}");
        }
    }

    #[test]
    fn a_large_answer_sorted_on_two_threads_is_in_the_whole_order() {
        let groups = tied(40_000);
        let rows = groups.clone().finish(SortBy::Bytes, None).rows.to_vec();
        assert!(rows.len() >= PARALLEL_ROWS);
        assert_eq!(first_out_of_order(&rows), None);
        // A short top-N of it: on two threads, half of the partitions each.
        let all = groups.clone().finish(SortBy::Bytes, None);
        for keep in [1, 10, 713, PARALLEL_ROWS - 1] {
            let top = groups.clone().finish(SortBy::Bytes, Some(keep));
            assert_eq!(top.rows.to_vec(), rows[..keep], "top {keep}");
            assert_eq!((top.totals, top.groups), (all.totals, 40_000));
        }
    }

    #[test]
    fn packed_rows_written_through_one_reused_key_are_the_decoded_rows() {
        for attributes in ATTRIBUTE_SETS {
            let r = varied(attributes, 2000).finish(SortBy::Bytes, None);
            let mut written = Vec::new();
            crate::output::write(
                &r,
                crate::output::Format::Json,
                trawl_time::Zone::Utc,
                &mut written,
            )
            .unwrap();
            let whole = format!("{}\n", crate::output::to_json(&r));
            assert_eq!(String::from_utf8(written).unwrap(), whole, "{attributes:?}");
        }
    }
}
