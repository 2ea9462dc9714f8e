//! Allowed ranges of numeric settings, one rule for every place a setting is given: the
//! command line (`--idle`), `trawl run`'s configuration (`flows.idle`) and compositions
//! (`idle` of `flow_meter`). A library checks its own settings with a [`Limit`] and returns
//! [`OutOfRange`], which names the setting as the library spells it; each front end says it
//! again in its own spelling ([`OutOfRange::spelled`]).
use std::fmt;

/// How values of a setting are written in messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A plain number.
    Count,
    /// Bytes (`64KiB` where exact).
    Bytes,
    /// Nanoseconds, written as a span (`30s`, `500ms`).
    Nanos,
}

/// The allowed values of one setting.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    /// The setting's name in snake case (`tcp_linger`).
    pub name: &'static str,
    /// Unit of `min` and `max`.
    pub unit: Unit,
    /// Smallest value allowed (besides 0 when `zero_is_off`).
    pub min: u64,
    /// Largest value allowed.
    pub max: u64,
    /// 0 is also allowed and means "off".
    pub zero_is_off: bool,
    /// Only powers of two.
    pub power_of_two: bool,
}

impl Limit {
    /// `min..=max` in `unit`.
    pub const fn new(name: &'static str, unit: Unit, min: u64, max: u64) -> Limit {
        Limit {
            name,
            unit,
            min,
            max,
            zero_is_off: false,
            power_of_two: false,
        }
    }

    /// Also allows 0, meaning off.
    pub const fn or_zero(mut self) -> Limit {
        self.zero_is_off = true;
        self
    }

    /// Only powers of two.
    pub const fn power_of_two(mut self) -> Limit {
        self.power_of_two = true;
        self
    }

    /// `value` if allowed, else the error naming the allowed range.
    pub fn check(&self, value: u64) -> Result<u64, OutOfRange> {
        let in_range = (self.min..=self.max).contains(&value)
            && (!self.power_of_two || value.is_power_of_two());
        if in_range || (self.zero_is_off && value == 0) {
            return Ok(value);
        }
        Err(OutOfRange {
            name: self.name,
            value: self.show(value),
            allowed: self.allowed(),
        })
    }

    /// Like [`Limit::check`] for a `usize` setting.
    pub fn check_usize(&self, value: usize) -> Result<usize, OutOfRange> {
        self.check(value as u64).map(|v| v as usize)
    }

    /// The allowed values in words: `between 1ms and 1d`.
    pub fn allowed(&self) -> String {
        let mut s = format!(
            "between {} and {}",
            self.show(self.min),
            self.show(self.max)
        );
        if self.power_of_two {
            s = format!("a power of two {s}");
        }
        if self.zero_is_off {
            s = format!("0 (off) or {s}");
        }
        s
    }

    fn show(&self, v: u64) -> String {
        match self.unit {
            Unit::Count => v.to_string(),
            Unit::Bytes => show_bytes(v),
            Unit::Nanos => show_span(v),
        }
    }
}

/// `65536` as `64KiB`, `1048576` as `1MiB`; other values as plain bytes.
fn show_bytes(v: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if v >= 1 << shift && v.is_multiple_of(1 << shift) {
            return format!("{}{unit}", v >> shift);
        }
    }
    v.to_string()
}

/// A span in the largest unit that writes it exactly (`90s`, `5m`, `250ms`).
fn show_span(ns: u64) -> String {
    const UNITS: [(u64, &str); 7] = [
        (86_400_000_000_000, "d"),
        (3_600_000_000_000, "h"),
        (60_000_000_000, "m"),
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    if ns == 0 {
        return "0s".into();
    }
    let (n, unit) = UNITS
        .iter()
        .find(|(n, _)| ns.is_multiple_of(*n))
        .expect("1 divides everything");
    format!("{}{unit}", ns / n)
}

/// A setting outside its allowed range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOfRange {
    /// The setting (snake case, as the library calls it).
    pub name: &'static str,
    /// The value given, in the setting's unit.
    pub value: String,
    /// The allowed values in words.
    pub allowed: String,
}

impl OutOfRange {
    /// The message with the setting spelled as the front end spells it (`--tcp-linger`,
    /// `` `tcp_linger` ``, `flows.tcp_linger`).
    pub fn spelled(&self, name: &str) -> String {
        format!("{name} must be {} (got {})", self.allowed, self.value)
    }

    /// The command-line flag of the setting: `--tcp-linger`.
    pub fn flag(&self) -> String {
        format!("--{}", self.name.replace('_', "-"))
    }
}

impl fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.spelled(&format!("`{}`", self.name)))
    }
}

impl std::error::Error for OutOfRange {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_checked_and_said_in_the_setting_s_unit() {
        let idle = Limit::new("idle", Unit::Nanos, 1_000_000, 86_400_000_000_000);
        assert_eq!(idle.check(30_000_000_000), Ok(30_000_000_000));
        let e = idle.check(0).unwrap_err();
        assert_eq!(e.to_string(), "`idle` must be between 1ms and 1d (got 0s)");
        assert_eq!(e.flag(), "--idle");
        let block = Limit::new("block_size", Unit::Bytes, 4096, 1 << 30).power_of_two();
        assert_eq!(
            block.check(5000).unwrap_err().spelled("--block-size"),
            "--block-size must be a power of two between 4KiB and 1GiB (got 5000)"
        );
        let interval =
            Limit::new("interval", Unit::Nanos, 1_000_000_000, 86_400_000_000_000).or_zero();
        assert_eq!(interval.check(0), Ok(0));
        assert_eq!(
            interval.check(5).unwrap_err().allowed,
            "0 (off) or between 1s and 1d"
        );
    }
}
