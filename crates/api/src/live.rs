//! The live per-second rows of the running composition, as the `http_api` block receives
//! them, per interface: the newest `capacity` seconds of each, bounded, so a long run holds an
//! hour, not a day.
use std::collections::{BTreeMap, VecDeque};

use trawl_series::SeriesRow;

/// The newest rows of each interface, oldest first.
pub(crate) struct LiveSeries {
    ifaces: BTreeMap<String, VecDeque<SeriesRow>>,
    capacity: usize,
}

impl LiveSeries {
    pub(crate) fn new(capacity: usize) -> LiveSeries {
        LiveSeries {
            ifaces: BTreeMap::new(),
            capacity: capacity.max(1),
        }
    }

    /// Adds rows of `iface` (in time order, as counters send them); the oldest go beyond the
    /// capacity.
    pub(crate) fn extend(&mut self, iface: &str, rows: &[SeriesRow]) {
        if rows.is_empty() {
            return;
        }
        if !self.ifaces.contains_key(iface) {
            let room = VecDeque::with_capacity(self.capacity.min(4096));
            self.ifaces.insert(iface.to_string(), room);
        }
        let Some(kept) = self.ifaces.get_mut(iface) else {
            return;
        };
        for r in rows {
            if kept.len() == self.capacity {
                kept.pop_front();
            }
            kept.push_back(*r);
        }
    }

    /// Per interface (of `ifaces`; every one when empty), its rows whose second is in
    /// `[from_s, to_s)`.
    pub(crate) fn between(
        &self,
        ifaces: &[String],
        from_s: u64,
        to_s: u64,
    ) -> Vec<(String, Vec<SeriesRow>)> {
        self.ifaces
            .iter()
            .filter(|(name, _)| ifaces.is_empty() || ifaces.contains(name))
            .map(|(name, rows)| {
                let rows = rows
                    .iter()
                    .filter(|r| r.second >= from_s && r.second < to_s)
                    .copied()
                    .collect();
                (name.clone(), rows)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(second: u64) -> SeriesRow {
        SeriesRow {
            second,
            packets: 1,
            ..SeriesRow::default()
        }
    }

    fn seconds(l: &LiveSeries, iface: &str) -> Vec<u64> {
        let all = l.between(&[iface.to_string()], 0, u64::MAX);
        all.iter()
            .flat_map(|(_, rows)| rows.iter().map(|r| r.second))
            .collect()
    }

    #[test]
    fn keeps_the_newest_seconds() {
        let mut l = LiveSeries::new(3);
        l.extend("eth0", &[row(1), row(2), row(3), row(4)]);
        assert_eq!(seconds(&l, "eth0"), [2, 3, 4]);
        assert_eq!(l.between(&[], 3, 4)[0].1.len(), 1);
    }

    #[test]
    fn keeps_each_interface_apart() {
        let mut l = LiveSeries::new(2);
        l.extend("eth0", &[row(1), row(2)]);
        l.extend("eth1", &[row(2), row(3), row(4)]);
        assert_eq!(seconds(&l, "eth0"), [1, 2]);
        assert_eq!(seconds(&l, "eth1"), [3, 4]);
        assert_eq!(l.between(&[], 0, u64::MAX).len(), 2);
        assert!(seconds(&l, "eth2").is_empty());
    }
}
