//! Multi-channel non-parametric CUSUM (Page's test without a distribution model, as in Wang,
//! Zhang and Shin, "Detecting SYN flooding attacks", INFOCOM 2002).
//!
//! Each channel sees one observation `x_n` per interval and keeps
//! `y_n = min(ceiling, max(0, y_{n−1} + x_n − (mean + drift)))`. The channel raises an alarm
//! when `y_n > threshold` and clears it when `y_n ≤ low`. `mean` is an exponentially weighted
//! average of `x` over the intervals in which the channel is not in alarm, so an attack does
//! not teach the detector that attack traffic is normal.
//!
//! The `ceiling` bounds how long an alarm outlives its cause: once `x` falls back to the
//! mean, `y` falls by at least `drift` per interval, so the alarm clears at most
//! `⌈(ceiling − low) / drift⌉` intervals after the change ends. Without it, the end of a long
//! flood would be reported as late as the flood had lasted.

/// Settings of a [`Cusum`]. Units are those of the observations (e.g. SYNs per interval).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CusumConfig {
    /// The increase over the mean that is tolerated without accumulating (Wang et al.'s `a`
    /// minus the mean): the smallest sustained change eventually detected.
    pub drift: f64,
    /// Alarm when `y` exceeds this.
    pub threshold: f64,
    /// Clear an alarm when `y` falls to this or below (0: when `y` returns to 0).
    pub low: f64,
    /// Upper clamp of `y`; at least `threshold`.
    pub ceiling: f64,
    /// EWMA weight of a new observation in the mean, in `(0, 1]`.
    pub alpha: f64,
    /// The mean before any observation.
    pub initial_mean: f64,
    /// Intervals at the start that only teach the mean, as their plain average (no
    /// accumulation, no alarm): without them a channel whose normal level is far above
    /// `initial_mean` alarms at once.
    pub warmup: u64,
}

impl Default for CusumConfig {
    fn default() -> Self {
        Self {
            drift: 10.0,
            threshold: 20.0,
            low: 0.0,
            ceiling: 40.0,
            alpha: 0.1,
            initial_mean: 0.0,
            // A detector starts cold: without a warm-up, every channel whose normal level is
            // above `drift` alarms at once and, as the mean learns only outside alarm, stays
            // there.
            warmup: 5,
        }
    }
}

/// What an update did to a channel's alarm state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// No change.
    None,
    /// The channel went into alarm.
    Raised,
    /// The channel left alarm.
    Cleared,
}

/// One CUSUM state per channel.
#[derive(Clone, Debug)]
pub struct Cusum {
    config: CusumConfig,
    y: Vec<f64>,
    mean: Vec<f64>,
    alarm: Vec<bool>,
    /// Interval number at which `y` last rose from 0: the estimated onset of the change.
    onset: Vec<u64>,
    /// Intervals seen so far (the number the next [`step`](Cusum::step) gets).
    interval: u64,
}

impl Cusum {
    /// `channels` channels with the same settings.
    ///
    /// # Panics
    /// When the settings are inconsistent (`threshold < low`, `ceiling < threshold`,
    /// `drift ≤ 0`, `alpha` outside `(0, 1]`).
    pub fn new(channels: usize, config: CusumConfig) -> Self {
        assert!(config.drift > 0.0, "drift must be positive");
        assert!(
            config.low <= config.threshold,
            "low must not exceed threshold"
        );
        assert!(
            config.ceiling >= config.threshold,
            "ceiling must be at least threshold"
        );
        assert!(
            config.alpha > 0.0 && config.alpha <= 1.0,
            "alpha must be in (0, 1]"
        );
        Self {
            config,
            y: vec![0.0; channels],
            mean: vec![config.initial_mean; channels],
            alarm: vec![false; channels],
            onset: vec![0; channels],
            interval: 0,
        }
    }

    /// The settings.
    pub fn config(&self) -> &CusumConfig {
        &self.config
    }

    /// Takes over new limits (`drift`, `threshold`, `low`, `ceiling`) while keeping every
    /// channel's sum, mean and alarm (a reloaded composition): a channel above the new
    /// threshold alarms at its next interval, one at or below the new `low` clears then. The
    /// other settings stay as they were.
    ///
    /// # Panics
    /// When the limits are inconsistent, as [`Cusum::new`].
    pub fn set_limits(&mut self, limits: CusumConfig) {
        let config = CusumConfig {
            drift: limits.drift,
            threshold: limits.threshold,
            low: limits.low,
            ceiling: limits.ceiling,
            ..self.config
        };
        // The same checks as a new detector's.
        let _ = Cusum::new(0, config);
        self.config = config;
    }

    /// Number of channels.
    pub fn channels(&self) -> usize {
        self.y.len()
    }

    /// Intervals seen so far.
    pub fn intervals(&self) -> u64 {
        self.interval
    }

    /// The cumulative sum of a channel.
    pub fn y(&self, ch: usize) -> f64 {
        self.y[ch]
    }

    /// The tracked normal mean of a channel.
    pub fn mean(&self, ch: usize) -> f64 {
        self.mean[ch]
    }

    /// Whether a channel is in alarm.
    pub fn in_alarm(&self, ch: usize) -> bool {
        self.alarm[ch]
    }

    /// The interval number at which the channel's current rise began (meaningful while
    /// `y > 0`).
    pub fn onset(&self, ch: usize) -> u64 {
        self.onset[ch]
    }

    /// Feeds one interval: `xs[ch]` is channel `ch`'s observation. Calls `on_change` for every
    /// channel whose alarm state changed.
    ///
    /// # Panics
    /// When `xs` does not have one value per channel.
    pub fn step(&mut self, xs: &[u64], mut on_change: impl FnMut(usize, Transition)) {
        assert_eq!(xs.len(), self.y.len(), "one observation per channel");
        let n = self.interval;
        for (ch, &x) in xs.iter().enumerate() {
            // A quiet channel (nothing observed, nothing accumulated, nothing learned) stays as
            // it is: exactly what `update` would compute, without the arithmetic. Most cells
            // of a sparse sketch are quiet, so this is most of an interval close.
            if x == 0 && self.y[ch] == 0.0 && self.mean[ch] == 0.0 && n >= self.config.warmup {
                continue;
            }
            let t = self.update(ch, x as f64, n);
            if t != Transition::None {
                on_change(ch, t);
            }
        }
        self.interval += 1;
    }

    /// Counts `k` intervals in which every channel observed 0 without evaluating them: valid
    /// when every `y` is already 0 (zero observations then keep it there). The means are not
    /// decayed toward 0 over the skipped intervals, which only makes the detector more
    /// tolerant afterwards. Used to cross long idle gaps in constant time.
    pub fn skip_idle(&mut self, k: u64) {
        debug_assert!(self.y.iter().all(|&y| y == 0.0), "skip_idle with y > 0");
        self.interval += k;
    }

    /// Whether every channel's `y` is 0.
    pub fn all_zero(&self) -> bool {
        self.y.iter().all(|&y| y == 0.0)
    }

    #[inline]
    fn update(&mut self, ch: usize, x: f64, n: u64) -> Transition {
        let c = &self.config;
        if n < c.warmup {
            // The plain average of the warm-up intervals: an EWMA from `initial_mean` would
            // still be far from the level after a few intervals (41 % of it after 5 at 0.1).
            self.mean[ch] += (x - self.mean[ch]) / (n + 1) as f64;
            return Transition::None;
        }
        let prev = self.y[ch];
        let y = (prev + x - (self.mean[ch] + c.drift)).clamp(0.0, c.ceiling);
        self.y[ch] = y;
        if prev == 0.0 && y > 0.0 {
            self.onset[ch] = n;
        }
        let was = self.alarm[ch];
        let now = if was { y > c.low } else { y > c.threshold };
        self.alarm[ch] = now;
        if !now {
            // Only intervals judged normal teach the mean. A mean decayed below 1e-9 is 0, so
            // a channel that fell silent becomes quiet (see `step`) instead of decaying
            // through subnormals for thousands of intervals.
            let m = self.mean[ch] + c.alpha * (x - self.mean[ch]);
            self.mean[ch] = if m < 1e-9 { 0.0 } else { m };
        }
        match (was, now) {
            (false, true) => Transition::Raised,
            (true, false) => Transition::Cleared,
            _ => Transition::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sketch::mix64;

    fn config() -> CusumConfig {
        CusumConfig {
            drift: 5.0,
            threshold: 30.0,
            low: 0.0,
            ceiling: 60.0,
            alpha: 0.2,
            initial_mean: 0.0,
            warmup: 15,
        }
    }

    /// Runs one channel over `xs`, returning the (interval, transition) pairs.
    fn run(xs: &[u64], config: CusumConfig) -> Vec<(usize, Transition)> {
        let mut c = Cusum::new(1, config);
        let mut out = Vec::new();
        for (n, &x) in xs.iter().enumerate() {
            c.step(&[x], |_, t| out.push((n, t)));
        }
        out
    }

    #[test]
    fn set_limits_keeps_the_sums_and_alarms_at_the_new_threshold() {
        // Warm up at 10, then 30 per interval: y grows (drift 5) but stays under
        // a threshold of 1000 for ever; the mean learns part of it, y ends near 39.
        let high = CusumConfig {
            threshold: 1000.0,
            ceiling: 2000.0,
            ..config()
        };
        let mut c = Cusum::new(1, high);
        let mut raised = Vec::new();
        for n in 0..20 {
            c.step(&[10], |_, t| raised.push((n, t)));
        }
        for n in 20..24 {
            c.step(&[30], |_, t| raised.push((n, t)));
        }
        assert!(raised.is_empty() && c.y(0) > 30.0, "{raised:?} {}", c.y(0));
        let y = c.y(0);
        c.set_limits(config());
        assert_eq!(
            (c.y(0), c.config().threshold, c.config().alpha),
            (y, 30.0, 0.2)
        );
        c.step(&[30], |_, t| raised.push((24, t)));
        assert_eq!(raised, [(24, Transition::Raised)]);
    }

    #[test]
    #[should_panic(expected = "ceiling must be at least threshold")]
    fn set_limits_refuses_inconsistent_limits() {
        let mut c = Cusum::new(1, config());
        c.set_limits(CusumConfig {
            ceiling: 1.0,
            ..config()
        });
    }

    #[test]
    fn step_change_raises_then_clears() {
        // 20 normal intervals around 10, then +40 for 10 intervals, then normal again.
        let mut xs = Vec::new();
        let mut s = 1u64;
        for n in 0..60 {
            s = mix64(s);
            let noise = s % 5; // 0..=4
            xs.push(8 + noise + if (20..30).contains(&n) { 40 } else { 0 });
        }
        let events = run(&xs, config());
        assert_eq!(events.len(), 2, "{events:?}");
        let (raised, t0) = events[0];
        assert_eq!(t0, Transition::Raised);
        // y gains ≥ 40 − 5 − noise spread per interval: over 30 after the first attack interval.
        assert_eq!(raised, 20);
        let (cleared, t1) = events[1];
        assert_eq!(t1, Transition::Cleared);
        // After the change ends y falls by ≥ drift − (max x − mean) ≈ 5 − 2 = 3 per interval
        // from at most the ceiling 60: cleared within 20 intervals.
        assert!((30..=50).contains(&cleared), "cleared at {cleared}");
    }

    #[test]
    fn stationary_noise_never_alarms() {
        let mut s = 99u64;
        let xs: Vec<u64> = (0..5000)
            .map(|_| {
                s = mix64(s);
                20 + s % 9 // mean 24, spread ±4 < drift
            })
            .collect();
        assert!(run(&xs, config()).is_empty());
    }

    #[test]
    fn mean_tracks_normal_intervals_only() {
        let mut c = Cusum::new(2, config());
        for _ in 0..100 {
            c.step(&[10, 10], |_, _| {});
        }
        assert!((c.mean(0) - 10.0).abs() < 0.01);
        // Channel 1 is attacked: its mean must not learn the attack level.
        let mut raised = Vec::new();
        for _ in 0..50 {
            c.step(&[10, 500], |ch, t| raised.push((ch, t)));
        }
        assert_eq!(raised, vec![(1, Transition::Raised)]);
        assert!(c.in_alarm(1));
        assert!(c.mean(1) < 110.0, "mean learned the attack: {}", c.mean(1));
        assert_eq!(c.y(1), config().ceiling);
        assert_eq!(c.onset(1), 100);
        assert!(!c.in_alarm(0));
    }

    #[test]
    fn slow_ramp_below_drift_is_tolerated_but_above_is_caught() {
        // x = mean + 4 (< drift 5): never accumulates.
        let xs = vec![4u64; 1000];
        let no_warmup = CusumConfig {
            warmup: 0,
            ..config()
        };
        assert!(run(&xs, no_warmup).is_empty());
        // x = 12 from a zero mean: +7 per interval minus what the mean learns before alarm.
        let xs = vec![12u64; 50];
        let ev = run(
            &xs,
            CusumConfig {
                alpha: 0.01,
                warmup: 0,
                ..config()
            },
        );
        assert_eq!(ev.first().map(|e| e.1), Some(Transition::Raised), "{ev:?}");
    }

    /// A channel that falls silent decays its mean to exactly 0 and then behaves like a fresh
    /// one: the quiet fast path changes nothing observable.
    #[test]
    fn silent_channel_becomes_quiet_and_still_detects() {
        let cfg = CusumConfig {
            warmup: 0,
            ..config()
        };
        let mut c = Cusum::new(1, cfg);
        for _ in 0..50 {
            c.step(&[4], |_, _| {});
        }
        assert!(c.mean(0) > 3.0);
        for _ in 0..300 {
            c.step(&[0], |_, _| {});
        }
        assert_eq!((c.mean(0), c.y(0)), (0.0, 0.0));
        let mut t = Vec::new();
        c.step(&[36], |_, tr| t.push(tr)); // y = 36 − 5 = 31 > 30
        assert_eq!(t, vec![Transition::Raised]);
        assert_eq!(c.onset(0), 350);
    }

    #[test]
    fn low_threshold_ends_alarm_sooner() {
        let mut xs = vec![100u64; 5];
        xs.extend(vec![0u64; 20]);
        let cfg = CusumConfig {
            warmup: 0,
            ..config()
        };
        let at_zero = run(&xs, cfg);
        let at_low = run(&xs, CusumConfig { low: 20.0, ..cfg });
        // Raised at the first interval (y clamps to the ceiling 60), mean still 0; then −5 per
        // quiet interval: y ≤ 20 after 8 quiet intervals, 0 after 12.
        assert_eq!(
            at_zero,
            vec![(0, Transition::Raised), (5 + 11, Transition::Cleared)]
        );
        assert_eq!(at_low[1], (5 + 7, Transition::Cleared));
    }
}
