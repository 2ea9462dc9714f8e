//! Series change detection: short- and long-term changes of packets, bytes and new flows per
//! second (as M³Omon's DetectPro watches its per-second series), each an alarm with its
//! onset, end, the rate that fired it and the baseline it departed from.
//!
//! Every metric has two channels, each a one-sided CUSUM (Page's test, as [`crate::cusum`])
//! on the **relative** excess over a learned baseline, so one setting serves a 1 Mbit/s and
//! a 10 Gbit/s link alike:
//!
//! - `z_n = (x_n − m) / max(m, floor)`, where `m` is the channel's baseline (an EWMA of `x`
//!   over the periods judged normal: an anomaly does not teach it that it is normal) and
//!   `floor` the metric's smallest baseline worth watching (a quiet link going from 2 to 20
//!   packets per second is not an alarm);
//! - `y_n = min(ceiling, max(0, y_{n−1} + min(z_n, cap) − drift))`; alarm when
//!   `y > threshold`, cleared when `y` falls back to 0 (at most `ceiling / drift` periods
//!   after the change ends). The `cap` makes an alarm need a change that lasts several
//!   periods, not one extreme second.
//!
//! The **short** term observes every second (a flood, a scan: fires within seconds); the
//! **long** term observes every minute's total (a level shift too slow or too small for the
//! short term). Each starts with a warm-up of periods that only learn the baseline.
//!
//! ```
//! use trawl_detect::change::{ChangeConfig, ChangeDetector, ChangeEvent, Metric};
//!
//! let mut d = ChangeDetector::new(ChangeConfig::default());
//! let mut events = Vec::new();
//! for s in 0..300u64 {
//!     let packets = if s < 200 { 1_000 } else { 20_000 }; // a step at second 200
//!     d.observe(1_000 + s, [packets, packets * 100, 10], &mut events);
//! }
//! let ChangeEvent::Start { metric, onset_ns, .. } = events[0] else { panic!() };
//! assert_eq!(metric, Metric::Packets);
//! assert_eq!(onset_ns, 1_200 * 1_000_000_000);
//! ```

const NS: u64 = 1_000_000_000;

/// What a channel watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Packets per second.
    Packets,
    /// Bytes per second.
    Bytes,
    /// New flows per second.
    Flows,
}

impl Metric {
    /// Its name in events: `packets`, `bytes`, `flows`.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Packets => "packets",
            Metric::Bytes => "bytes",
            Metric::Flows => "flows",
        }
    }
}

const METRICS: [Metric; 3] = [Metric::Packets, Metric::Bytes, Metric::Flows];

/// Which horizon a channel watches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Term {
    /// Every second.
    Short,
    /// Every minute's total.
    Long,
}

impl Term {
    /// Its name in events: `short`, `long`.
    pub fn name(self) -> &'static str {
        match self {
            Term::Short => "short",
            Term::Long => "long",
        }
    }
}

/// Settings of one horizon.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TermConfig {
    /// Seconds per observation (1 for the short term, 60 for the long).
    pub period: u64,
    /// Relative excess tolerated without accumulating (0.5: up to 50 % over the baseline).
    pub drift: f64,
    /// Alarm when the accumulated relative excess exceeds this.
    pub threshold: f64,
    /// Upper clamp of the accumulated excess (bounds how late the end is reported).
    pub ceiling: f64,
    /// The largest relative excess one period adds: an alarm needs a change that lasts
    /// (at least `threshold / (cap − drift)` periods), not one extreme period (a burst of
    /// connections in one second).
    pub cap: f64,
    /// EWMA weight of a normal period in the baseline.
    pub alpha: f64,
    /// Periods at the start that only learn the baseline.
    pub warmup: u64,
}

/// Settings of a [`ChangeDetector`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ChangeConfig {
    /// The short term (defaults: 1 s periods, drift 1, threshold 10, ceiling 20, cap 3,
    /// alpha 0.01, warm-up 120 s): a rate tripled over the baseline fires in 10 s, four times
    /// or more in 5 s; bursts that come and go within seconds (the normal texture of traffic,
    /// a client opening a hundred connections at once) do not accumulate enough.
    pub short: TermConfig,
    /// The long term (defaults: 60 s periods, drift 0.25, threshold 3, ceiling 6, cap 2,
    /// alpha 0.05, warm-up 15 min): a level 75 % over the baseline fires in 6 minutes, three
    /// times the baseline in 2.
    pub long: TermConfig,
    /// Smallest baseline per second of packets, bytes and new flows (defaults 100, 100 kB,
    /// 10): changes relative to less are measured against this.
    pub floor: [f64; 3],
}

impl Default for ChangeConfig {
    fn default() -> Self {
        ChangeConfig {
            short: TermConfig {
                period: 1,
                drift: 1.0,
                threshold: 10.0,
                ceiling: 20.0,
                cap: 3.0,
                alpha: 0.01,
                warmup: 120,
            },
            long: TermConfig {
                period: 60,
                drift: 0.25,
                threshold: 3.0,
                ceiling: 6.0,
                cap: 2.0,
                alpha: 0.05,
                warmup: 15,
            },
            floor: [100.0, 100_000.0, 10.0],
        }
    }
}

impl ChangeConfig {
    /// Why these settings cannot work, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        for (name, t) in [("short", &self.short), ("long", &self.long)] {
            if !(t.drift > 0.0 && t.threshold > 0.0 && t.ceiling >= t.threshold && t.cap > t.drift)
            {
                return Err(format!(
                    "{name} term: need drift > 0, threshold > 0, ceiling >= threshold and cap > drift"
                ));
            }
            if !(t.alpha > 0.0 && t.alpha <= 1.0) || t.period == 0 {
                return Err(format!("{name} term: need alpha in (0, 1] and a period"));
            }
        }
        if !self.floor.iter().all(|f| f.is_finite() && *f > 0.0) {
            return Err("floors must be positive".into());
        }
        Ok(())
    }
}

/// An alarm's start or end.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ChangeEvent {
    /// A channel went into alarm.
    Start {
        /// What changed.
        metric: Metric,
        /// Over which horizon.
        term: Term,
        /// Start of the period in which the accumulation began (ns).
        onset_ns: u64,
        /// End of the period that crossed the threshold (ns).
        detected_ns: u64,
        /// The rate of that period, per second: the rate that fired it.
        rate: f64,
        /// The baseline rate per second it departed from.
        baseline: f64,
    },
    /// A channel left alarm.
    End {
        /// What changed.
        metric: Metric,
        /// Over which horizon.
        term: Term,
        /// As in the start event.
        onset_ns: u64,
        /// End of the period in which the accumulation fell back to 0 (ns).
        end_ns: u64,
        /// The highest rate per second of the alarm's periods.
        peak_rate: f64,
        /// The baseline rate per second.
        baseline: f64,
    },
}

#[derive(Clone, Copy, Debug, Default)]
struct Channel {
    mean: f64,
    y: f64,
    alarm: bool,
    onset: u64,
    peak: f64,
    seen: u64,
}

struct Horizon {
    config: TermConfig,
    term: Term,
    channels: [Channel; 3],
    /// Start (s) of the period being summed, and its sums.
    open: Option<u64>,
    sums: [u64; 3],
}

impl Horizon {
    fn new(config: TermConfig, term: Term) -> Self {
        Horizon {
            config,
            term,
            channels: [Channel::default(); 3],
            open: None,
            sums: [0; 3],
        }
    }

    fn observe(&mut self, second: u64, xs: [u64; 3], floor: &[f64; 3], out: &mut Vec<ChangeEvent>) {
        let start = second - second % self.config.period;
        match self.open {
            Some(open) if open == start => {}
            Some(open) => {
                self.close(open, floor, out);
                self.open = Some(start);
            }
            None => self.open = Some(start),
        }
        for (s, x) in self.sums.iter_mut().zip(xs) {
            *s += x;
        }
    }

    /// Forgets everything after a gap: alarms end at `end` (s), the baselines learn anew.
    fn reset(&mut self, end: u64, out: &mut Vec<ChangeEvent>) {
        for (i, ch) in self.channels.iter().enumerate() {
            if ch.alarm {
                out.push(ChangeEvent::End {
                    metric: METRICS[i],
                    term: self.term,
                    onset_ns: ch.onset * NS,
                    end_ns: end * NS,
                    peak_rate: ch.peak / self.config.period as f64,
                    baseline: ch.mean / self.config.period as f64,
                });
            }
        }
        self.channels = [Channel::default(); 3];
        self.open = None;
        self.sums = [0; 3];
    }

    fn close(&mut self, start: u64, floor: &[f64; 3], out: &mut Vec<ChangeEvent>) {
        let c = self.config;
        let per_second = c.period as f64;
        let sums = std::mem::take(&mut self.sums);
        for (i, ch) in self.channels.iter_mut().enumerate() {
            let x = sums[i] as f64;
            let metric = METRICS[i];
            if ch.seen < c.warmup {
                ch.mean += (x - ch.mean) / (ch.seen + 1) as f64;
                ch.seen += 1;
                continue;
            }
            let scale = ch.mean.max(floor[i] * per_second);
            let prev = ch.y;
            let z = ((x - ch.mean) / scale).min(c.cap);
            ch.y = (prev + z - c.drift).clamp(0.0, c.ceiling);
            if prev == 0.0 && ch.y > 0.0 {
                ch.onset = start;
                ch.peak = 0.0;
            }
            ch.peak = ch.peak.max(x);
            let end = (start + c.period) * NS;
            if !ch.alarm && ch.y > c.threshold {
                ch.alarm = true;
                out.push(ChangeEvent::Start {
                    metric,
                    term: self.term,
                    onset_ns: ch.onset * NS,
                    detected_ns: end,
                    rate: x / per_second,
                    baseline: ch.mean / per_second,
                });
            } else if ch.alarm && ch.y == 0.0 {
                ch.alarm = false;
                out.push(ChangeEvent::End {
                    metric,
                    term: self.term,
                    onset_ns: ch.onset * NS,
                    end_ns: end,
                    peak_rate: ch.peak / per_second,
                    baseline: ch.mean / per_second,
                });
            }
            if !ch.alarm {
                ch.mean += c.alpha * (x - ch.mean);
            }
        }
    }
}

/// Watches per-second packets, bytes and new flows for short- and long-term changes.
pub struct ChangeDetector {
    floor: [f64; 3],
    /// The last second observed.
    last: Option<u64>,
    short: Horizon,
    long: Horizon,
}

impl ChangeDetector {
    /// A detector that has seen nothing.
    ///
    /// # Panics
    /// When `config.check()` fails.
    pub fn new(config: ChangeConfig) -> Self {
        if let Err(e) = config.check() {
            panic!("invalid change detector settings: {e}");
        }
        ChangeDetector {
            floor: config.floor,
            last: None,
            short: Horizon::new(config.short, Term::Short),
            long: Horizon::new(config.long, Term::Long),
        }
    }

    /// Takes second `second`'s packets, bytes and new flows (seconds in increasing order).
    /// Events of the periods this closes go to `out`. A second missing between two given
    /// ones is a gap in the series (the series skips runs of more than 300 empty seconds: a
    /// capture file with a pause, files of different days): what comes after is other
    /// traffic, so alarms end at the gap and the baselines learn anew.
    pub fn observe(&mut self, second: u64, xs: [u64; 3], out: &mut Vec<ChangeEvent>) {
        if let Some(last) = self.last.filter(|&l| second > l + 1) {
            self.finish(out);
            self.short.reset(last + 1, out);
            self.long.reset(last + 1, out);
        }
        self.last = Some(second);
        self.short.observe(second, xs, &self.floor, out);
        self.long.observe(second, xs, &self.floor, out);
    }

    /// Closes the open periods (end of input): a partial last minute is judged as it is, so
    /// it is not closed (a minute of 10 seconds is no evidence of a drop or a rise).
    pub fn finish(&mut self, out: &mut Vec<ChangeEvent>) {
        if let Some(open) = self.short.open.take() {
            self.short.close(open, &self.floor, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rates: impl Iterator<Item = u64>) -> Vec<ChangeEvent> {
        let mut d = ChangeDetector::new(ChangeConfig::default());
        let mut out = Vec::new();
        for (s, p) in rates.enumerate() {
            d.observe(s as u64, [p, p * 500, p / 50], &mut out);
        }
        d.finish(&mut out);
        out
    }

    #[test]
    fn a_steady_noisy_rate_raises_nothing() {
        // ±40 % noise around 5,000 packets per second for an hour.
        let noise = (0..3600u64).map(|s| 5_000 + (s * 7919 % 4001) - 2000);
        assert_eq!(run(noise), vec![]);
    }

    #[test]
    fn a_step_fires_short_and_long_term_and_ends_when_it_stops() {
        // 30 minutes at 2,000/s, 10 minutes at 6,000/s, 50 minutes back at 2,000/s.
        let rate = |s: u64| {
            if (1800..2400).contains(&s) {
                6_000
            } else {
                2_000
            }
        };
        let out = run((0..5400).map(rate));
        let starts: Vec<(Metric, Term, u64)> = out
            .iter()
            .filter_map(|e| match *e {
                ChangeEvent::Start {
                    metric,
                    term,
                    onset_ns,
                    ..
                } => Some((metric, term, onset_ns / NS)),
                _ => None,
            })
            .collect();
        assert!(
            starts.contains(&(Metric::Packets, Term::Short, 1800)),
            "{out:?}"
        );
        assert!(
            starts.contains(&(Metric::Packets, Term::Long, 1800)),
            "{out:?}"
        );
        // Every alarm ends, within the ceiling's bound after the step ends.
        for e in &out {
            if let ChangeEvent::End {
                metric,
                end_ns,
                peak_rate,
                ..
            } = *e
            {
                assert!((2400..2400 + 60 * 25).contains(&(end_ns / NS)), "{e:?}");
                if metric == Metric::Packets {
                    assert!(peak_rate >= 5_999.0, "{e:?}");
                }
            }
        }
        let ends = out
            .iter()
            .filter(|e| matches!(e, ChangeEvent::End { .. }))
            .count();
        assert_eq!(ends, starts.len());
    }

    #[test]
    fn a_gap_ends_alarms_and_the_baseline_learns_anew() {
        let mut d = ChangeDetector::new(ChangeConfig::default());
        let mut out = Vec::new();
        let mut feed = |d: &mut ChangeDetector, range: std::ops::Range<u64>, p: u64| {
            for s in range {
                d.observe(s, [p, p * 500, 0], &mut out);
            }
        };
        feed(&mut d, 0..200, 1_000);
        feed(&mut d, 200..230, 10_000);
        // Other traffic an hour later, ten times busier: learned, not an alarm.
        feed(&mut d, 3_830..4_200, 100_000);
        let ends: Vec<u64> = out
            .iter()
            .filter_map(|e| match *e {
                ChangeEvent::End { end_ns, .. } => Some(end_ns / NS),
                _ => None,
            })
            .collect();
        let starts = out.len() - ends.len();
        assert_eq!(starts, 2, "packets and bytes: {out:?}");
        assert_eq!(ends, vec![230, 230]);
    }

    #[test]
    fn a_quiet_link_under_its_floor_raises_nothing() {
        // 2 packets per second, then 60: far over the baseline, under the floor's scale.
        let out = run((0..600).map(|s| if s > 300 { 60 } else { 2 }));
        assert_eq!(out, vec![]);
    }
}
