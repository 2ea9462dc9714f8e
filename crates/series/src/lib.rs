//! Per-second series: packets, bytes, active flows and new flows for every second of packet
//! time, per direction where the source knows it.
//!
//! [`SeriesCounter::observe`] takes each packet with the flow meter's
//! [`PacketOutcome`], so a replayed capture yields exactly the series
//! the live run did. Rows leave in time order through a callback once their second can no
//! longer change: a small window of open seconds absorbs slightly reordered packets
//! (multi-queue capture), older stragglers are counted into the oldest open second and
//! reported as late.
//!
//! ```
//! use trawl_capture::Direction;
//! use trawl_flow::PacketOutcome;
//! use trawl_series::{SeriesConfig, SeriesCounter, SeriesRow};
//!
//! let mut rows = Vec::new();
//! let mut series = SeriesCounter::new(SeriesConfig::default());
//! let hit = PacketOutcome { in_flow: true, new_flow: true, first_in_second: true, ..Default::default() };
//! series.observe(10_000_000_000, 60, Direction::Unknown, &hit, &mut |r: &SeriesRow| rows.push(*r));
//! series.observe(12_500_000_000, 90, Direction::Inbound, &PacketOutcome::default(), &mut |r: &SeriesRow| rows.push(*r));
//! series.finish(&mut |r: &SeriesRow| rows.push(*r));
//! assert_eq!(rows.len(), 3); // seconds 10, 11 (empty) and 12
//! assert_eq!((rows[0].packets, rows[0].new_flows, rows[2].in_bytes), (1, 1, 90));
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod format;
mod merge;

pub use format::{SeriesFormat, SeriesWriter};
pub use merge::SeriesMerger;

use trawl_capture::Direction;
use trawl_flow::{PacketOutcome, SECOND_NS};

/// Settings of the series counter.
#[derive(Clone, Debug)]
pub struct SeriesConfig {
    /// Seconds kept open for reordered packets. Default 4.
    pub window_seconds: u64,
    /// Longest run of empty seconds written as zero rows; longer gaps are skipped (a capture
    /// file with hours between packets would otherwise print thousands of empty rows).
    /// Default 300.
    pub max_gap_fill_seconds: u64,
}

impl Default for SeriesConfig {
    fn default() -> Self {
        SeriesConfig {
            window_seconds: 4,
            max_gap_fill_seconds: 300,
        }
    }
}

/// One second of traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeriesRow {
    /// Unix time of the second's start.
    pub second: u64,
    /// Packets.
    pub packets: u64,
    /// Wire bytes.
    pub bytes: u64,
    /// Flows with at least one packet in this second.
    pub active_flows: u64,
    /// Flows whose first packet fell in this second.
    pub new_flows: u64,
    /// Packets received by the capturing interface (0 when the source does not know).
    pub in_packets: u64,
    /// Bytes received.
    pub in_bytes: u64,
    /// Packets sent by the capturing host.
    pub out_packets: u64,
    /// Bytes sent.
    pub out_bytes: u64,
}

/// Counters of the series counter itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeriesStats {
    /// Rows emitted.
    pub rows: u64,
    /// Packets older than the open window, counted into its oldest second.
    pub late_packets: u64,
    /// Empty seconds not written because their gap exceeded `max_gap_fill_seconds`.
    pub skipped_empty_seconds: u64,
}

/// Accumulates per-second rows from packets in (roughly) time order.
pub struct SeriesCounter {
    config: SeriesConfig,
    /// Open seconds `base .. base + window`, `rows[s % window]` for second `s`.
    rows: Vec<SeriesRow>,
    /// Oldest open second, `None` before the first packet.
    base: Option<u64>,
    /// Newest second that has seen a packet.
    newest: u64,
    stats: SeriesStats,
}

impl SeriesCounter {
    /// A counter with nothing open.
    pub fn new(config: SeriesConfig) -> Self {
        let window = config.window_seconds.max(1);
        SeriesCounter {
            config: SeriesConfig {
                window_seconds: window,
                ..config
            },
            rows: vec![SeriesRow::default(); window as usize],
            base: None,
            newest: 0,
            stats: SeriesStats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> SeriesStats {
        self.stats
    }

    fn slot(&self, second: u64) -> usize {
        (second % self.config.window_seconds) as usize
    }

    /// Counts one packet; rows that close meanwhile go to `emit`.
    #[inline]
    pub fn observe<F: FnMut(&SeriesRow)>(
        &mut self,
        ts_ns: u64,
        wire_len: u32,
        direction: Direction,
        outcome: &PacketOutcome,
        emit: &mut F,
    ) {
        let second = ts_ns / SECOND_NS;
        let window = self.config.window_seconds;
        let base = match self.base {
            None => {
                self.open(second, second + window);
                self.base = Some(second);
                self.newest = second;
                second
            }
            Some(b) => b,
        };
        let second = if second < base {
            self.stats.late_packets += 1;
            base
        } else {
            if second >= base + window {
                self.close_for(second, emit);
            }
            second
        };
        self.newest = self.newest.max(second);
        let slot = self.slot(second);
        let row = &mut self.rows[slot];
        row.packets += 1;
        row.bytes += wire_len as u64;
        match direction {
            Direction::Inbound => {
                row.in_packets += 1;
                row.in_bytes += wire_len as u64;
            }
            Direction::Outbound => {
                row.out_packets += 1;
                row.out_bytes += wire_len as u64;
            }
            Direction::Unknown => {}
        }
        if outcome.in_flow {
            row.active_flows += outcome.first_in_second as u64;
            row.new_flows += outcome.new_flow as u64;
        }
    }

    /// Moves the clock to `now_ns` without a packet, closing the seconds a packet at that time
    /// would close (live capture calls this when traffic pauses, so rows keep coming). The
    /// seconds passed are real, observed seconds: they are written as zero rows, and a series
    /// that has seen no packet yet starts at `now_ns`.
    pub fn advance<F: FnMut(&SeriesRow)>(&mut self, now_ns: u64, emit: &mut F) {
        let second = now_ns / SECOND_NS;
        let window = self.config.window_seconds;
        match self.base {
            None => {
                self.open(second, second + window);
                self.base = Some(second);
                self.newest = second;
            }
            Some(base) => {
                if second >= base + window {
                    self.close_for(second, emit);
                }
                self.newest = self.newest.max(second);
            }
        }
    }

    /// Every second before this one has been emitted (`None` before the first packet or
    /// [`SeriesCounter::advance`]).
    pub fn emitted_before(&self) -> Option<u64> {
        self.base
    }

    /// Resets seconds `from..to` to empty rows (`to - from <= window`).
    fn open(&mut self, from: u64, to: u64) {
        for s in from..to {
            let slot = self.slot(s);
            self.rows[slot] = SeriesRow {
                second: s,
                ..SeriesRow::default()
            };
        }
    }

    /// Makes room for a packet of `second` (beyond the open window): emits the seconds that
    /// leave the window, fills the empty run up to the new window with zero rows (unless the
    /// run is longer than `max_gap_fill_seconds`), and moves the window.
    fn close_for<F: FnMut(&SeriesRow)>(&mut self, second: u64, emit: &mut F) {
        let Some(base) = self.base else { return };
        let window = self.config.window_seconds;
        let empty_run = second - self.newest - 1;
        let skip_empty = empty_run > self.config.max_gap_fill_seconds;
        let new_base = if skip_empty {
            second
        } else {
            second + 1 - window
        };
        for s in base..new_base.min(base + window) {
            if skip_empty && s > self.newest {
                break;
            }
            let row = self.rows[self.slot(s)];
            emit(&row);
            self.stats.rows += 1;
        }
        if skip_empty {
            self.stats.skipped_empty_seconds += empty_run;
        } else {
            for s in (base + window)..new_base {
                emit(&SeriesRow {
                    second: s,
                    ..SeriesRow::default()
                });
                self.stats.rows += 1;
            }
        }
        // Seconds already open and still inside the new window keep their counts.
        self.open(new_base.max(base + window), new_base + window);
        self.base = Some(new_base);
    }

    /// Emits every open second up to the newest with traffic; the counter is then empty.
    pub fn finish<F: FnMut(&SeriesRow)>(&mut self, emit: &mut F) {
        if let Some(base) = self.base.take() {
            for s in base..=self.newest {
                let row = self.rows[self.slot(s)];
                emit(&row);
                self.stats.rows += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(packets: &[(u64, u32)], config: SeriesConfig) -> (Vec<SeriesRow>, SeriesStats) {
        let mut rows = Vec::new();
        let mut c = SeriesCounter::new(config);
        let o = PacketOutcome {
            in_flow: true,
            ..PacketOutcome::default()
        };
        for &(ts, len) in packets {
            c.observe(ts, len, Direction::Unknown, &o, &mut |r: &SeriesRow| {
                rows.push(*r)
            });
        }
        c.finish(&mut |r: &SeriesRow| rows.push(*r));
        (rows, c.stats())
    }

    const S: u64 = SECOND_NS;

    #[test]
    fn advance_closes_quiet_seconds_as_zero_rows() {
        let mut rows = Vec::new();
        let mut c = SeriesCounter::new(SeriesConfig::default());
        let o = PacketOutcome::default();
        c.advance(100 * S, &mut |r: &SeriesRow| rows.push(*r));
        assert_eq!(c.emitted_before(), Some(100));
        c.observe(101 * S, 60, Direction::Inbound, &o, &mut |r: &SeriesRow| {
            rows.push(*r)
        });
        c.advance(110 * S + 5, &mut |r: &SeriesRow| rows.push(*r));
        assert_eq!(c.emitted_before(), Some(107));
        let seconds: Vec<u64> = rows.iter().map(|r| r.second).collect();
        assert_eq!(seconds, (100..107).collect::<Vec<_>>());
        assert_eq!((rows[1].packets, rows[1].in_bytes), (1, 60));
        assert!(rows
            .iter()
            .filter(|r| r.second != 101)
            .all(|r| r.packets == 0));
        c.finish(&mut |r: &SeriesRow| rows.push(*r));
        assert_eq!(rows.last().map(|r| r.second), Some(110));
    }

    #[test]
    fn dense_rows_in_order_with_gaps_filled() {
        let (rows, _) = run(
            &[(100 * S, 1), (100 * S + 5, 2), (103 * S, 4), (110 * S, 8)],
            SeriesConfig::default(),
        );
        let seconds: Vec<u64> = rows.iter().map(|r| r.second).collect();
        assert_eq!(seconds, (100..=110).collect::<Vec<_>>());
        assert_eq!(rows[0].packets, 2);
        assert_eq!(rows[0].bytes, 3);
        assert_eq!(rows[3].bytes, 4);
        assert_eq!(rows[10].bytes, 8);
        assert_eq!(rows.iter().map(|r| r.packets).sum::<u64>(), 4);
    }

    #[test]
    fn reordered_within_window_lands_in_its_second() {
        let (rows, stats) = run(
            &[(100 * S, 1), (102 * S, 1), (101 * S, 7), (100 * S, 9)],
            SeriesConfig::default(),
        );
        assert_eq!(
            rows.iter().map(|r| r.bytes).collect::<Vec<_>>(),
            vec![10, 7, 1]
        );
        assert_eq!(stats.late_packets, 0);
    }

    #[test]
    fn stragglers_count_into_the_oldest_open_second() {
        let (rows, stats) = run(
            &[(100 * S, 1), (110 * S, 1), (100 * S, 5)],
            SeriesConfig::default(),
        );
        assert_eq!(stats.late_packets, 1);
        let total: u64 = rows.iter().map(|r| r.bytes).sum();
        assert_eq!(total, 7);
        // Every second appears once, in order.
        let seconds: Vec<u64> = rows.iter().map(|r| r.second).collect();
        let mut sorted = seconds.clone();
        sorted.dedup();
        assert_eq!(seconds, sorted);
        assert_eq!(seconds, (100..=110).collect::<Vec<_>>());
    }

    #[test]
    fn long_gaps_are_skipped_not_filled() {
        let cfg = SeriesConfig {
            max_gap_fill_seconds: 10,
            ..SeriesConfig::default()
        };
        let (rows, stats) = run(&[(100 * S, 1), (10_000 * S, 1)], cfg);
        assert_eq!(rows.len(), 2);
        assert!(stats.skipped_empty_seconds > 9000);
    }
}
