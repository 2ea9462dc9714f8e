//! Which Kafka offsets may be committed: those of records that are durable in the sink.
//!
//! A consumer holds each record in a *bin* until the sink has made it durable (a flow
//! database block, keyed by interval and interface, written and fsynced; a ClickHouse insert
//! acknowledged). Bins are made durable in any order, so the committable position of a
//! partition is the lowest offset still held in any bin, or one past the last offset seen when
//! none is held. Committing only that position means a crash loses nothing: what was not yet
//! durable is read again (and what was durable past the position arrives twice: at least
//! once).
use std::collections::BTreeMap;

/// Offsets held per bin and partition, and the positions committed.
#[derive(Debug)]
pub struct OffsetTracker<K: Ord> {
    /// Per partition: one past the last offset seen.
    seen: BTreeMap<i32, i64>,
    /// Per bin, per partition: the lowest offset it holds.
    held: BTreeMap<K, BTreeMap<i32, i64>>,
    /// Per partition: the position last committed.
    committed: BTreeMap<i32, i64>,
}

impl<K: Ord> Default for OffsetTracker<K> {
    fn default() -> Self {
        OffsetTracker {
            seen: BTreeMap::new(),
            held: BTreeMap::new(),
            committed: BTreeMap::new(),
        }
    }
}

impl<K: Ord + Clone> OffsetTracker<K> {
    /// A record at `offset` of `partition` that needs nothing more (a message that is not a
    /// record, counted and skipped).
    pub fn seen(&mut self, partition: i32, offset: i64) {
        let s = self.seen.entry(partition).or_insert(offset + 1);
        *s = (*s).max(offset + 1);
    }

    /// A record at `offset` of `partition` went into `bin`, not durable yet.
    pub fn hold(&mut self, bin: &K, partition: i32, offset: i64) {
        self.seen(partition, offset);
        let parts = match self.held.get_mut(bin) {
            Some(p) => p,
            None => self.held.entry(bin.clone()).or_default(),
        };
        let low = parts.entry(partition).or_insert(offset);
        *low = (*low).min(offset);
    }

    /// Every bin `open` does not keep was made durable: its records no longer hold their
    /// partitions back.
    pub fn release_unless(&mut self, mut open: impl FnMut(&K) -> bool) {
        self.held.retain(|k, _| open(k));
    }

    /// Every bin is durable (an insert that took everything held).
    pub fn release_all(&mut self) {
        self.held.clear();
    }

    /// Bins holding records.
    pub fn bins(&self) -> usize {
        self.held.len()
    }

    /// The positions to commit now: per partition, the lowest offset held, or one past the
    /// last seen; only partitions whose position moved since the last commit.
    pub fn to_commit(&self) -> Vec<(i32, i64)> {
        let mut pos = self.seen.clone();
        for parts in self.held.values() {
            for (p, low) in parts {
                if let Some(x) = pos.get_mut(p) {
                    *x = (*x).min(*low);
                }
            }
        }
        pos.into_iter()
            .filter(|(p, o)| self.committed.get(p) != Some(o))
            .collect()
    }

    /// `positions` were committed.
    pub fn committed(&mut self, positions: &[(i32, i64)]) {
        for (p, o) in positions {
            self.committed.insert(*p, *o);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn position_waits_for_the_oldest_open_bin() {
        let mut t = OffsetTracker::<u64>::default();
        // Partition 0: offsets 0-2 in bin 1, 3-4 in bin 2; partition 1: 0 in bin 2.
        for o in 0..3 {
            t.hold(&1, 0, o);
        }
        for o in 3..5 {
            t.hold(&2, 0, o);
        }
        t.hold(&2, 1, 0);
        assert_eq!(t.to_commit(), vec![(0, 0), (1, 0)]);
        // Bin 2 durable first: partition 0 still waits for bin 1, partition 1 moves on.
        t.release_unless(|k| *k == 1);
        assert_eq!(t.to_commit(), vec![(0, 0), (1, 1)]);
        t.committed(&[(0, 0), (1, 1)]);
        assert_eq!(t.to_commit(), vec![]);
        t.release_unless(|_| false);
        assert_eq!(t.to_commit(), vec![(0, 5)]);
        // A skipped message moves its partition too.
        t.seen(1, 1);
        assert_eq!(t.to_commit(), vec![(0, 5), (1, 2)]);
    }
}
