//! The progress line of long commands (`flows`, `series`, `ingest`, `detect`, `dump`,
//! `collect -r`, `packets`): one line on standard error, redrawn at most four times a second,
//! with a bar, the read rate and the time left when the input's size is known. Only when
//! standard error is a terminal (or `--progress always`): a log file or a pipe gets nothing.
use std::io::IsTerminal;
use std::time::{Duration, Instant};

use trawl_compose::{BlockReport, Report};

use trawl_compose::human_rate;

/// How often the line is redrawn at most.
const REDRAW: Duration = Duration::from_millis(250);

/// Whether a progress line is drawn when the command has no `--progress` flag: when standard
/// error is a terminal.
pub fn on_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// One progress line.
pub struct ProgressLine {
    enabled: bool,
    started: Instant,
    last: Option<Instant>,
    drawn: bool,
}

impl ProgressLine {
    pub fn new(enabled: bool) -> ProgressLine {
        ProgressLine {
            enabled,
            started: Instant::now(),
            last: None,
            drawn: false,
        }
    }

    /// Whether a redraw is due now (the first one at once, then every [`REDRAW`]); callers
    /// gather their numbers only then.
    pub fn due(&mut self) -> bool {
        if !self.enabled {
            return false;
        }
        let now = Instant::now();
        if self.last.is_some_and(|l| now.duration_since(l) < REDRAW) {
            return false;
        }
        self.last = Some(now);
        true
    }

    /// Whether the line is drawn at all (callers skip gathering what only it needs).
    pub fn enabled(&self) -> bool {
        self.enabled
    }

    /// Seconds since the line was made (for rates).
    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64().max(1e-9)
    }

    /// Draws `text` after the bar of `done` of `total` input bytes (no bar when `total` is 0:
    /// standard input, a live feed).
    pub fn draw(&mut self, done: u64, total: u64, text: &str) {
        let bar = file_bar(done, total, self.elapsed_s());
        self.put(&bar, text);
    }

    /// Draws `text` after a bar of `done` of `total` of something that is not bytes (the
    /// packet time reached in a time window): the share and the time left, no byte rate.
    pub fn draw_position(&mut self, done: u64, total: u64, text: &str) {
        let bar = bar(done, total, self.elapsed_s(), None);
        self.put(&bar, text);
    }

    fn put(&mut self, bar: &str, text: &str) {
        eprint!("\r\x1b[K{bar}{text}");
        self.drawn = true;
    }

    /// Removes the line (before the summary is printed).
    pub fn clear(&mut self) {
        if self.drawn {
            eprint!("\r\x1b[K");
            self.drawn = false;
        }
    }
}

/// `[#####               ]  25% 12.5 MB/s ETA 0:42 `: the bar of `done` of `total` bytes read
/// in `secs` seconds, the rate and the time left at that rate; empty when `total` is unknown.
pub fn file_bar(done: u64, total: u64, secs: f64) -> String {
    bar(done, total, secs, Some("B"))
}

/// The bar, the share done, the rate in `unit`s per second (none without a unit) and the time
/// left at the rate so far.
fn bar(done: u64, total: u64, secs: f64, unit: Option<&str>) -> String {
    if total == 0 {
        return String::new();
    }
    let pct = (done as f64 / total as f64 * 100.0).min(100.0);
    let filled = (pct / 5.0) as usize;
    let rate = done as f64 / secs.max(1e-9);
    let eta = if rate > 0.0 {
        let left = (total.saturating_sub(done) as f64 / rate).round() as u64;
        format!("{}:{:02}", left / 60, left % 60)
    } else {
        "?".into()
    };
    let rate = unit.map_or_else(String::new, |u| format!("{}{u}/s ", human_rate(rate)));
    format!(
        "[{}{}] {pct:3.0}% {rate}ETA {eta} ",
        "#".repeat(filled),
        " ".repeat(20 - filled.min(20)),
    )
}

/// The progress of a composition reading files, from its source block's counters
/// (`progress_bytes` of `progress_total`) and `text` made from the whole report.
pub fn draw_composition(
    line: &mut ProgressLine,
    report: &Report,
    source: &str,
    text: impl Fn(&Report, &BlockReport, f64) -> Option<String>,
) {
    let Some(b) = report.block(source) else {
        return;
    };
    let c = |name: &str| b.counter(name).unwrap_or(0);
    if let Some(t) = text(report, b, line.elapsed_s()) {
        line.draw(c("progress_bytes"), c("progress_total"), &t);
    }
}

#[cfg(test)]
mod tests {
    use super::{bar, file_bar};

    #[test]
    fn bar_rate_and_time_left() {
        assert_eq!(file_bar(5, 0, 1.0), "");
        // A quarter in 10 s: 30 s left.
        let b = file_bar(25_000_000, 100_000_000, 10.0);
        assert!(b.starts_with("[#####               ]  25% "), "{b}");
        assert!(b.ends_with("B/s ETA 0:30 "), "{b}");
        assert!(file_bar(0, 10, 1.0).ends_with("ETA ? "));
        assert!(bar(50, 100, 10.0, None).ends_with("]  50% ETA 0:10 "));
    }
}
