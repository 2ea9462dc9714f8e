//! The packet clock of a block fed by live capture: the newest packet time while packets
//! come, moved on by the wall time elapsed since then while the link is quiet, so that
//! intervals, reports and store blocks close on time instead of waiting for a later packet
//! (issue 20: on a quiet link the last 5-minute block of `run --db` was not stored).
//!
//! Only live batches start it: over files time is the packets' alone, so a replayed capture
//! gives the results the live run gave.
use std::time::{Duration, Instant};

/// How often the detectors look at their live clock: a tenth of a second, as the meter's
/// flush, so an interval closes at most that late.
pub const TICK: Duration = Duration::from_millis(100);

/// Packet time, and the wall time when it last moved.
#[derive(Default)]
pub struct LiveClock {
    last: Option<(u64, Instant)>,
}

impl LiveClock {
    /// Takes note of a batch's newest packet time (`live`: from a live capture; file batches
    /// leave the clock alone).
    pub fn observe(&mut self, newest_ns: Option<u64>, live: bool) {
        if let (true, Some(ts)) = (live, newest_ns) {
            let ts = self.last.map_or(ts, |(c, _)| c.max(ts));
            self.last = Some((ts, Instant::now()));
        }
    }

    /// Packet time now: the newest packet's plus the wall time since it came. `None` before
    /// the first live packet.
    pub fn now(&self) -> Option<u64> {
        self.last
            .map(|(ts, at)| ts.saturating_add(at.elapsed().as_nanos() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_on_with_wall_time_only_once_live() {
        let mut c = LiveClock::default();
        c.observe(Some(1_000), false);
        assert_eq!(c.now(), None, "files do not start it");
        c.observe(Some(5_000_000_000), true);
        std::thread::sleep(Duration::from_millis(20));
        let now = c.now().unwrap();
        assert!(now >= 5_020_000_000, "{now}");
        c.observe(Some(1), true);
        assert!(c.now().unwrap() >= 5_000_000_000, "never goes back");
    }
}
