//! CPU time stolen from a virtual machine's vCPUs (`steal` in `/proc/stat`): the hypervisor ran
//! something else while a vCPU was runnable. `trawl run`'s status line says how much since the
//! previous line, so that kernel drops in a VM can be told apart: the host's doing, not the
//! capture's (docs/deploy.md).

/// Steal shares since the previous sample.
#[derive(Debug, Default)]
pub struct StealMeter {
    /// Per CPU (`None`: the `cpu` total line): steal and total jiffies at the last sample.
    last: Vec<(Option<u32>, u64, u64)>,
}

/// Below this share nothing is said (rounding noise of an idle host).
const SHOWN_FROM_PERCENT: f64 = 0.05;

impl StealMeter {
    /// Reads `/proc/stat` now; the text to append to a status line, or `None` when no vCPU
    /// had time stolen since the last call (always on bare metal) or `/proc/stat` cannot be
    /// read.
    pub fn sample(&mut self) -> Option<String> {
        let text = std::fs::read_to_string("/proc/stat").ok()?;
        self.sample_text(&text)
    }

    fn sample_text(&mut self, stat: &str) -> Option<String> {
        let now = parse(stat);
        let previous = std::mem::replace(&mut self.last, now);
        let share = |cpu: Option<u32>| -> Option<f64> {
            let (_, s0, t0) = previous.iter().find(|e| e.0 == cpu)?;
            let (_, s1, t1) = self.last.iter().find(|e| e.0 == cpu)?;
            let total = t1.checked_sub(*t0).filter(|&t| t > 0)?;
            Some(100.0 * s1.saturating_sub(*s0) as f64 / total as f64)
        };
        let all = share(None)?;
        let worst = self
            .last
            .iter()
            .filter_map(|e| Some((e.0?, share(e.0)?)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        if all < SHOWN_FROM_PERCENT && worst.is_none_or(|w| w.1 < SHOWN_FROM_PERCENT) {
            return None;
        }
        Some(match worst {
            Some((cpu, pct)) => format!("cpu steal {all:.1}% (cpu{cpu} {pct:.1}%)"),
            None => format!("cpu steal {all:.1}%"),
        })
    }
}

/// The `cpu` and `cpuN` lines of `/proc/stat`: (CPU, steal, total) in jiffies. Total counts
/// user, nice, system, idle, iowait, irq, softirq and steal (guest time is already in user).
fn parse(stat: &str) -> Vec<(Option<u32>, u64, u64)> {
    stat.lines()
        .filter_map(|line| {
            let mut words = line.split_ascii_whitespace();
            let name = words.next()?.strip_prefix("cpu")?;
            let cpu = if name.is_empty() {
                None
            } else {
                Some(name.parse().ok()?)
            };
            let values: Vec<u64> = words.take(8).map(|w| w.parse().unwrap_or(0)).collect();
            let steal = *values.get(7)?;
            Some((cpu, steal, values.iter().sum()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "cpu  100 0 100 800 0 0 0 0 0 0\n\
                          cpu0 50 0 50 400 0 0 0 0 0 0\n\
                          cpu1 50 0 50 400 0 0 0 0 0 0\nintr 1 2 3\n";

    #[test]
    fn steal_is_shown_with_the_worst_vcpu() {
        let mut m = StealMeter::default();
        assert_eq!(m.sample_text(BEFORE), None, "no previous sample");
        // 200 jiffies later: cpu1 had 40 of its 100 stolen.
        let after = "cpu  150 0 110 900 0 0 0 40 0 0\n\
                     cpu0 75 0 55 470 0 0 0 0 0 0\n\
                     cpu1 75 0 55 430 0 0 0 40 0 0\n";
        assert_eq!(
            m.sample_text(after).as_deref(),
            Some("cpu steal 20.0% (cpu1 40.0%)")
        );
    }

    #[test]
    fn nothing_is_said_without_steal() {
        let mut m = StealMeter::default();
        m.sample_text(BEFORE);
        let after = "cpu  150 0 150 900 0 0 0 0 0 0\n\
                     cpu0 75 0 75 450 0 0 0 0 0 0\n\
                     cpu1 75 0 75 450 0 0 0 0 0 0\n";
        assert_eq!(m.sample_text(after), None);
    }
}
