//! Merging the series of parallel workers: rows of the same second are summed, and a second is
//! released once every worker has said it will send nothing earlier.
use std::collections::BTreeMap;

use crate::SeriesRow;

/// Sums the workers' rows per second and releases a second once every worker is past it.
#[derive(Debug)]
pub struct SeriesMerger {
    pending: BTreeMap<u64, SeriesRow>,
    watermarks: Vec<u64>,
    rows: u64,
}

impl SeriesMerger {
    /// A merger of `workers` streams, numbered `0..workers`.
    pub fn new(workers: usize) -> Self {
        SeriesMerger {
            pending: BTreeMap::new(),
            watermarks: vec![0; workers],
            rows: 0,
        }
    }

    /// Adds one worker's row.
    pub fn add(&mut self, row: SeriesRow) {
        let e = self.pending.entry(row.second).or_insert(SeriesRow {
            second: row.second,
            ..SeriesRow::default()
        });
        e.packets += row.packets;
        e.bytes += row.bytes;
        e.active_flows += row.active_flows;
        e.new_flows += row.new_flows;
        e.in_packets += row.in_packets;
        e.in_bytes += row.in_bytes;
        e.out_packets += row.out_packets;
        e.out_bytes += row.out_bytes;
    }

    /// Worker `worker` will send no row for a second before `second` (`u64::MAX`: it is done).
    pub fn watermark(&mut self, worker: usize, second: u64) {
        self.watermarks[worker] = self.watermarks[worker].max(second);
    }

    /// Emits, oldest first, every second all workers are past.
    pub fn drain(&mut self, mut emit: impl FnMut(&SeriesRow)) {
        let low = self.watermarks.iter().copied().min().unwrap_or(u64::MAX);
        while let Some(entry) = self.pending.first_entry() {
            if *entry.key() >= low {
                break;
            }
            emit(&entry.remove());
            self.rows += 1;
        }
    }

    /// Rows emitted so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merger_waits_for_every_worker() {
        let mut m = SeriesMerger::new(2);
        let row = |second, packets| SeriesRow {
            second,
            packets,
            ..SeriesRow::default()
        };
        m.add(row(10, 1));
        m.add(row(11, 2));
        m.watermark(0, 12);
        let mut out = Vec::new();
        m.drain(|r| out.push(*r));
        assert!(out.is_empty(), "worker 1 has not closed second 10");
        m.add(row(10, 5));
        m.watermark(1, 11);
        m.drain(|r| out.push(*r));
        assert_eq!(out, vec![row(10, 6)]);
        m.watermark(1, u64::MAX);
        m.drain(|r| out.push(*r));
        assert_eq!(out, vec![row(10, 6), row(11, 2)]);
        assert_eq!(m.rows(), 2);
    }
}
