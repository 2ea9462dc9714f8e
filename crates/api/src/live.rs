//! The live per-second rows of the running composition, as the `http_api` block receives
//! them: the newest `capacity` seconds, bounded, so a long run holds an hour, not a day.
use std::collections::VecDeque;

use trawl_series::SeriesRow;

/// The newest rows, oldest first.
pub(crate) struct LiveSeries {
    rows: VecDeque<SeriesRow>,
    capacity: usize,
}

impl LiveSeries {
    pub(crate) fn new(capacity: usize) -> LiveSeries {
        LiveSeries {
            rows: VecDeque::with_capacity(capacity.min(4096)),
            capacity: capacity.max(1),
        }
    }

    /// Adds rows (in time order, as counters send them); the oldest go beyond the capacity.
    pub(crate) fn extend(&mut self, rows: &[SeriesRow]) {
        for r in rows {
            if self.rows.len() == self.capacity {
                self.rows.pop_front();
            }
            self.rows.push_back(*r);
        }
    }

    /// Rows whose second is in `[from_s, to_s)`.
    pub(crate) fn between(&self, from_s: u64, to_s: u64) -> Vec<SeriesRow> {
        self.rows
            .iter()
            .filter(|r| r.second >= from_s && r.second < to_s)
            .copied()
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

    #[test]
    fn keeps_the_newest_seconds() {
        let mut l = LiveSeries::new(3);
        l.extend(&[row(1), row(2), row(3), row(4)]);
        let seconds: Vec<u64> = l.between(0, u64::MAX).iter().map(|r| r.second).collect();
        assert_eq!(seconds, [2, 3, 4]);
        assert_eq!(l.between(3, 4).len(), 1);
    }
}
