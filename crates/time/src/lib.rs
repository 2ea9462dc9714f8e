//! Time for trawl's on-disk layouts and command lines, without a calendar dependency.
//!
//! Every timestamp in trawl is `u64` nanoseconds since the Unix epoch, UTC. This crate turns
//! them into civil dates (for `YYYY-MM-DD/HH` directories), shows them to people
//! ([`rfc3339`], UTC or the local zone of `TZ`), and parses what users type after every
//! command's time flags (`--from` / `--to`), in one place: RFC 3339 (`2026-11-22T10:05:00Z`,
//! `2026-11-22 10:05:00.25+01:00`), local wall-clock times without a zone (`2026-11-22 14:00`,
//! a bare date `2026-11-22`: in the zone of `TZ`, as goQuery reads them), epoch seconds
//! (`1732269900`, `1732269900.5`) or milli-, micro- and nanoseconds (told apart by size),
//! `now`, and relative forms counted back from "now" (`-15m`, `-1d4h`, `15m ago`); and, for
//! the same command lines and configuration files, spans (`30s`) and sizes (`64KiB`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::fmt;

pub mod limit;
mod zone;
pub use limit::{Limit, OutOfRange, Unit};
pub use zone::{rfc3339, Zone};

/// Nanoseconds per second.
pub const NS_PER_SEC: u64 = 1_000_000_000;

/// A civil (proleptic Gregorian, UTC) date and time of day.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Civil {
    /// Year (1970 and later for trawl timestamps).
    pub year: i32,
    /// Month, 1..=12.
    pub month: u8,
    /// Day of month, 1..=31.
    pub day: u8,
    /// Hour, 0..=23.
    pub hour: u8,
    /// Minute, 0..=59.
    pub minute: u8,
    /// Second, 0..=59.
    pub second: u8,
    /// Nanoseconds within the second.
    pub nanos: u32,
}

impl Civil {
    /// The civil time of `ns` nanoseconds since the epoch.
    pub fn from_unix_ns(ns: u64) -> Civil {
        let secs = ns / NS_PER_SEC;
        let days = (secs / 86_400) as i64;
        let rem = secs % 86_400;
        let (year, month, day) = civil_from_days(days);
        Civil {
            year,
            month,
            day,
            hour: (rem / 3600) as u8,
            minute: (rem % 3600 / 60) as u8,
            second: (rem % 60) as u8,
            nanos: (ns % NS_PER_SEC) as u32,
        }
    }

    /// Nanoseconds since the epoch, or `None` before 1970 or after 2554 (u64 overflow).
    pub fn to_unix_ns(&self) -> Option<u64> {
        let days = days_from_civil(self.year, self.month, self.day);
        let secs = days * 86_400
            + i64::from(self.hour) * 3600
            + i64::from(self.minute) * 60
            + i64::from(self.second);
        u64::try_from(secs)
            .ok()?
            .checked_mul(NS_PER_SEC)?
            .checked_add(u64::from(self.nanos))
    }

    /// `YYYY-MM-DD`.
    pub fn date(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

impl fmt::Display for Civil {
    /// RFC 3339 with nanoseconds, UTC: `2026-11-22T10:05:00.000000001Z`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}T{:02}:{:02}:{:02}.{:09}Z",
            self.date(),
            self.hour,
            self.minute,
            self.second,
            self.nanos
        )
    }
}

/// Days since 1970-01-01 of a civil date (Howard Hinnant's `days_from_civil`).
pub fn days_from_civil(year: i32, month: u8, day: u8) -> i64 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day number (inverse of [`days_from_civil`]).
pub fn civil_from_days(days: i64) -> (i32, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    (year, month, day)
}

/// Why a time could not be parsed: the input, the byte position of the problem, and what was
/// expected there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// The text given.
    pub input: String,
    /// Byte offset of the offending character.
    pub position: usize,
    /// What was expected.
    pub expected: &'static str,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid time '{}' at character {}: expected {} (forms: 2026-11-22T10:05:00Z, \
             '2026-11-22 14:00' (local, TZ), 1732269900, -15m, '1h ago', now)",
            self.input,
            self.position + 1,
            self.expected
        )
    }
}

impl std::error::Error for ParseError {}

/// Parses an instant as users write it; relative forms count back from `now_ns`, times
/// without a zone are wall-clock times in the local zone (`TZ`, else `/etc/localtime`).
pub fn parse_instant(input: &str, now_ns: u64) -> Result<u64, ParseError> {
    parse_instant_in(input, now_ns, &zone::local_offset_of)
}

/// [`parse_instant`] with the local zone given as a function from a wall-clock time to its
/// offset from UTC in seconds (`None`: that time does not exist there, a daylight-saving gap).
fn parse_instant_in(
    input: &str,
    now_ns: u64,
    offset_of: &dyn Fn(&Civil) -> Option<i32>,
) -> Result<u64, ParseError> {
    let s = input.trim();
    let err = |position: usize, expected: &'static str| ParseError {
        input: input.to_string(),
        position: position + (input.len() - input.trim_start().len()),
        expected,
    };
    if s.is_empty() {
        return Err(err(0, "a time"));
    }
    if s == "now" {
        return Ok(now_ns);
    }
    if let Some(rel) = s.strip_prefix('-') {
        let back = parse_spans(rel).map_err(|(p, e)| err(p + 1, e))?;
        return Ok(now_ns.saturating_sub(back));
    }
    if let Some(rel) = s.strip_suffix("ago") {
        let back = parse_spans(rel.trim_end()).map_err(|(p, e)| err(p, e))?;
        return Ok(now_ns.saturating_sub(back));
    }
    let b = s.as_bytes();
    // A date has a '-' at index 4; everything else that starts with digits is epoch time.
    if b.len() >= 5 && b[4] == b'-' {
        return parse_rfc3339(s, offset_of).map_err(|(p, e)| err(p, e));
    }
    parse_epoch(s).map_err(|(p, e)| err(p, e))
}

/// Parses a duration flag or setting like `30s`, `500ms`, `2m`, `1.5h`, `1d`, `250us` (or
/// `250µs`), `10ns`, or a plain number of seconds, into nanoseconds. The command lines'
/// spelling: unlike [`parse_span`] a bare number is seconds, and errors are whole sentences.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let well_formed = num.matches('.').count() <= 1 && num.chars().any(|c| c.is_ascii_digit());
    if !well_formed {
        return Err(format!(
            "'{s}' is not a duration (examples: 30s, 500ms, 2m, 1h)"
        ));
    }
    let scale = match unit {
        "" | "s" => NS_PER_SEC,
        "ms" => 1_000_000,
        "us" | "µs" => 1_000,
        "ns" => 1,
        "m" => 60 * NS_PER_SEC,
        "h" => 3600 * NS_PER_SEC,
        "d" => 86_400 * NS_PER_SEC,
        other => {
            return Err(format!(
                "unknown duration unit '{other}' in '{s}' (use ns, us, ms, s, m, h, d)"
            ))
        }
    };
    decimal_scaled(num, scale).ok_or_else(|| format!("duration '{s}' out of range"))
}

/// Spans one after the other, added up: `15m`, `1d4h`, `1h30m` (goQuery's relative times).
fn parse_spans(s: &str) -> Result<u64, (usize, &'static str)> {
    const UNIT: &str = "a unit (ns, us, ms, s, m, h, d)";
    if s.is_empty() {
        return Err((0, "a span such as 15m"));
    }
    let mut total = 0u64;
    let mut at = 0;
    while at < s.len() {
        let rest = &s[at..];
        let unit_at = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or((s.len(), UNIT))?;
        let unit_end = rest[unit_at..]
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .map_or(rest.len(), |e| unit_at + e);
        let span = parse_span(&rest[..unit_end]).map_err(|(p, e)| (at + p, e))?;
        total = total.checked_add(span).ok_or((at, "a shorter span"))?;
        at += unit_end;
    }
    Ok(total)
}

/// Parses a size like `4096`, `64KiB`, `4MiB`, `1g`, `2TiB` into bytes. Units are binary
/// (`K`, `KiB` and `KB` all mean 1024), as ring, block and disk budget sizes are.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 65536, 64KiB, 4MiB)"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" | "kb" => 1 << 10,
        "m" | "mib" | "mb" => 1 << 20,
        "g" | "gib" | "gb" => 1 << 30,
        "t" | "tib" | "tb" => 1 << 40,
        other => {
            return Err(format!(
                "unknown size unit '{other}' in '{s}' (use KiB, MiB, GiB, TiB)"
            ))
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("size '{s}' out of range"))
}

/// Parses a span like `15m`, `2h`, `1d`, `30s`, `500ms`, `1.5h` into nanoseconds.
pub fn parse_span(s: &str) -> Result<u64, (usize, &'static str)> {
    let unit_at = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or((s.len(), "a unit (ns, us, ms, s, m, h, d)"))?;
    let (num, unit) = s.split_at(unit_at);
    let scale: u64 = match unit {
        "ns" => 1,
        "us" => 1_000,
        "ms" => 1_000_000,
        "s" => NS_PER_SEC,
        "m" => 60 * NS_PER_SEC,
        "h" => 3600 * NS_PER_SEC,
        "d" => 86_400 * NS_PER_SEC,
        _ => return Err((unit_at, "a unit (ns, us, ms, s, m, h, d)")),
    };
    decimal_scaled(num, scale).ok_or((0, "a number"))
}

/// `num` (digits with at most one '.') times `scale`, exactly for integer parts.
fn decimal_scaled(num: &str, scale: u64) -> Option<u64> {
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if int.is_empty() && frac.is_empty() {
        return None;
    }
    if !int.bytes().all(|c| c.is_ascii_digit()) || !frac.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let whole: u64 = if int.is_empty() { 0 } else { int.parse().ok()? };
    let mut total = whole.checked_mul(scale)?;
    let mut unit = scale;
    for d in frac.bytes().take(18) {
        unit /= 10;
        total = total.checked_add(u64::from(d - b'0') * unit)?;
    }
    Some(total)
}

/// Epoch time: seconds (with a fraction), or a whole number of milli-, micro- or nanoseconds
/// told apart by size: 10^11 seconds is the year 5138, so a larger number is a finer unit.
fn parse_epoch(s: &str) -> Result<u64, (usize, &'static str)> {
    if let Some(p) = s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        return Err((p, "a digit of epoch seconds"));
    }
    if !s.contains('.') {
        let n: u64 = s.parse().map_err(|_| (0, "epoch seconds, ms, us or ns"))?;
        let scale = match n {
            0..=99_999_999_999 => NS_PER_SEC,
            100_000_000_000..=99_999_999_999_999 => 1_000_000,
            100_000_000_000_000..=99_999_999_999_999_999 => 1_000,
            _ => 1,
        };
        return n.checked_mul(scale).ok_or((0, "a time before 2554"));
    }
    decimal_scaled(s, NS_PER_SEC).ok_or((0, "epoch seconds"))
}

/// RFC 3339 / ISO 8601 subset: `YYYY-MM-DD[(T| )HH:MM[:SS[.frac]]][Z|±HH:MM]`; without a zone,
/// a wall-clock time in the zone `offset_of` describes.
fn parse_rfc3339(
    s: &str,
    offset_of: &dyn Fn(&Civil) -> Option<i32>,
) -> Result<u64, (usize, &'static str)> {
    let b = s.as_bytes();
    let digits = |at: usize, n: usize| -> Result<u32, (usize, &'static str)> {
        let mut v = 0u32;
        for i in at..at + n {
            match b.get(i) {
                Some(c) if c.is_ascii_digit() => v = v * 10 + u32::from(c - b'0'),
                _ => return Err((i.min(b.len()), "a digit")),
            }
        }
        Ok(v)
    };
    let lit = |at: usize, c: u8, what: &'static str| -> Result<(), (usize, &'static str)> {
        if b.get(at) == Some(&c) {
            Ok(())
        } else {
            Err((at.min(b.len()), what))
        }
    };
    let year = digits(0, 4)? as i32;
    lit(4, b'-', "'-'")?;
    let month = digits(5, 2)? as u8;
    if !(1..=12).contains(&month) {
        return Err((5, "a month 01-12"));
    }
    lit(7, b'-', "'-'")?;
    let day = digits(8, 2)? as u8;
    if day == 0 || day > days_in_month(year, month) {
        return Err((8, "a day of that month"));
    }
    let mut c = Civil {
        year,
        month,
        day,
        hour: 0,
        minute: 0,
        second: 0,
        nanos: 0,
    };
    let mut i = 10;
    let mut offset_s: Option<i64> = None;
    if i < b.len() {
        if b[i] != b'T' && b[i] != b't' && b[i] != b' ' {
            return Err((i, "'T' or a space before the time"));
        }
        c.hour = digits(i + 1, 2)? as u8;
        if c.hour > 23 {
            return Err((i + 1, "an hour 00-23"));
        }
        lit(i + 3, b':', "':'")?;
        c.minute = digits(i + 4, 2)? as u8;
        if c.minute > 59 {
            return Err((i + 4, "minutes 00-59"));
        }
        i += 6;
        if b.get(i) == Some(&b':') {
            c.second = digits(i + 1, 2)? as u8;
            // 60 is a leap second: trawl's clock (like the kernel's) has none, so it folds
            // into the next second's start.
            if c.second > 60 {
                return Err((i + 1, "seconds 00-60"));
            }
            i += 3;
            if b.get(i) == Some(&b'.') {
                let start = i + 1;
                let mut end = start;
                while end < b.len() && b[end].is_ascii_digit() {
                    end += 1;
                }
                if end == start {
                    return Err((start, "digits of a fraction"));
                }
                let mut ns = 0u32;
                let mut unit = 100_000_000u32;
                for &d in &b[start..end.min(start + 9)] {
                    ns += u32::from(d - b'0') * unit;
                    unit /= 10;
                }
                c.nanos = ns;
                i = end;
            }
        }
        match b.get(i) {
            None => {}
            Some(b'Z') | Some(b'z') if i + 1 == b.len() => offset_s = Some(0),
            Some(&sign @ (b'+' | b'-')) => {
                let h = digits(i + 1, 2)?;
                lit(i + 3, b':', "':' in the zone offset")?;
                let m = digits(i + 4, 2)?;
                if h > 23 || m > 59 || i + 6 != b.len() {
                    return Err((i, "a zone offset ±HH:MM at the end"));
                }
                let off = i64::from(h * 3600 + m * 60);
                offset_s = Some(if sign == b'+' { off } else { -off });
            }
            Some(_) => return Err((i, "'Z', a zone offset, or the end")),
        }
    }
    let leap = u64::from(c.second == 60);
    c.second -= leap as u8;
    let offset_s = match offset_s {
        Some(o) => o,
        None => i64::from(offset_of(&c).ok_or((
            0,
            "a wall-clock time that exists in the local zone (this one is skipped by a \
             daylight-saving change; give a zone offset)",
        ))?),
    };
    let local = c.to_unix_ns().ok_or((0, "a time between 1970 and 2554"))? + leap * NS_PER_SEC;
    let utc = local as i128 - i128::from(offset_s) * i128::from(NS_PER_SEC);
    u64::try_from(utc).map_err(|_| (0, "a time after 1970"))
}

fn days_in_month(year: i32, month: u8) -> u8 {
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 => 29,
        2 => 28,
        _ => 31,
    }
}

/// The current wall-clock time in ns since the epoch.
pub fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_or_as_seconds() {
        assert_eq!(parse_duration_ns("30s"), Ok(30_000_000_000));
        assert_eq!(parse_duration_ns("30"), Ok(30_000_000_000));
        assert_eq!(parse_duration_ns(" 1.5m "), Ok(90_000_000_000));
        assert_eq!(parse_duration_ns(".5s"), Ok(500_000_000));
        assert_eq!(parse_duration_ns("250ms"), Ok(250_000_000));
        assert_eq!(parse_duration_ns("250µs"), Ok(250_000));
        assert_eq!(parse_duration_ns("1h"), Ok(3_600_000_000_000));
        assert_eq!(parse_duration_ns("0.1s"), Ok(100_000_000), "exact, not f64");
        assert!(parse_duration_ns("5 parsecs")
            .unwrap_err()
            .contains("unit ' parsecs'"));
        assert!(parse_duration_ns("")
            .unwrap_err()
            .contains("is not a duration"));
        assert!(parse_duration_ns("-5s")
            .unwrap_err()
            .contains("is not a duration"));
        assert!(parse_duration_ns("1.2.3s").is_err());
        assert!(parse_duration_ns("99999999999999d")
            .unwrap_err()
            .contains("out of range"));
    }

    #[test]
    fn sizes_parse_with_binary_units() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(64 << 10));
        assert_eq!(parse_size(" 4M "), Ok(4 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        assert!(parse_size("4 parsecs").is_err());
        assert!(parse_size("MiB").is_err());
        assert!(parse_size("99999999999TiB").is_err());
    }

    const NOW: u64 = 1_732_269_900 * NS_PER_SEC; // 2024-11-22T10:05:00Z

    #[test]
    fn civil_round_trips_every_day_for_six_centuries() {
        for d in -1000..200_000i64 {
            let (y, m, day) = civil_from_days(d);
            assert_eq!(days_from_civil(y, m, day), d);
            assert!(day >= 1 && day <= days_in_month(y, m));
        }
    }

    #[test]
    fn known_dates() {
        let c = Civil::from_unix_ns(NOW + 7);
        assert_eq!(c.to_string(), "2024-11-22T10:05:00.000000007Z");
        assert_eq!(
            Civil::from_unix_ns(951_782_400 * NS_PER_SEC).date(),
            "2000-02-29"
        );
        assert_eq!(Civil::from_unix_ns(0).date(), "1970-01-01");
    }

    #[test]
    fn parses_every_form() {
        let p = |s: &str| parse_instant_in(s, NOW, &|_| Some(0)).unwrap();
        assert_eq!(p("2024-11-22T10:05:00Z"), NOW);
        assert_eq!(p("2024-11-22t10:05:00z"), NOW);
        assert_eq!(p("2024-11-22 10:05"), NOW);
        assert_eq!(p("2024-11-22T11:05:00+01:00"), NOW);
        assert_eq!(p("2024-11-22T09:35:00-00:30"), NOW);
        assert_eq!(p("2024-11-22T10:05:00.123456789123Z"), NOW + 123_456_789);
        assert_eq!(p("2024-11-22T10:04:60Z"), NOW);
        assert_eq!(p("2024-11-22"), NOW - (10 * 3600 + 5 * 60) * NS_PER_SEC);
        assert_eq!(p("1732269900"), NOW);
        assert_eq!(p("1732269900.25"), NOW + 250_000_000);
        assert_eq!(p(" now "), NOW);
        assert_eq!(p("-15m"), NOW - 900 * NS_PER_SEC);
        assert_eq!(p("-1.5h"), NOW - 5400 * NS_PER_SEC);
        assert_eq!(p("-2d"), NOW - 2 * 86_400 * NS_PER_SEC);
        assert_eq!(p("-250ms"), NOW - 250_000_000);
    }

    /// A zone one hour east of UTC, for wall-clock times without `TZ`.
    fn plus_one(_: &Civil) -> Option<i32> {
        Some(3600)
    }

    #[test]
    fn wall_clock_times_without_a_zone_are_local() {
        let p = |s: &str| parse_instant_in(s, NOW, &plus_one).unwrap();
        assert_eq!(p("2024-11-22 11:05"), NOW);
        assert_eq!(p("2024-11-22T11:05:00"), NOW);
        assert_eq!(p("2024-11-22"), NOW - (11 * 3600 + 5 * 60) * NS_PER_SEC);
        // A zone given wins over the local one.
        assert_eq!(p("2024-11-22T10:05:00Z"), NOW);
        assert_eq!(p("2024-11-22T12:05:00+02:00"), NOW);
        let gap = parse_instant_in("2024-11-22 11:05", NOW, &|_| None).unwrap_err();
        assert!(gap.expected.contains("daylight-saving"), "{gap}");
    }

    #[test]
    fn epoch_units_are_told_apart_by_size() {
        let p = |s: &str| parse_instant(s, NOW).unwrap();
        assert_eq!(p("1732269900"), NOW);
        assert_eq!(p("1732269900250"), NOW + 250_000_000);
        assert_eq!(p("1732269900250000"), NOW + 250_000_000);
        assert_eq!(p("1732269900250000001"), NOW + 250_000_001);
        assert_eq!(p("0"), 0);
    }

    #[test]
    fn relative_times_combine_units_and_read_ago() {
        let p = |s: &str| parse_instant(s, NOW).unwrap();
        assert_eq!(p("-1d4h"), NOW - 28 * 3600 * NS_PER_SEC);
        assert_eq!(p("-1h30m"), NOW - 5400 * NS_PER_SEC);
        assert_eq!(p("15m ago"), NOW - 900 * NS_PER_SEC);
        assert_eq!(p("1h30m ago"), NOW - 5400 * NS_PER_SEC);
        assert_eq!(p("2d ago"), NOW - 2 * 86_400 * NS_PER_SEC);
        assert!(parse_instant("ago", NOW).is_err());
        assert!(parse_instant("-1h30", NOW).is_err());
        assert!(parse_instant("5 parsecs ago", NOW).is_err());
    }

    #[test]
    fn errors_point_at_the_offending_character() {
        let e = |s: &str| parse_instant(s, NOW).unwrap_err();
        assert_eq!(e("2024-13-01").position, 5);
        assert_eq!(e("2024-02-30").position, 8);
        assert_eq!(e("2024-11-22X10:00").position, 10);
        assert_eq!(e("2024-11-22T25:00").position, 11);
        assert_eq!(e("2024-11-22T10:00:00+0100").position, 22);
        assert_eq!(e("2024-11-22T10:00:00Zjunk").position, 19);
        assert_eq!(e("-15x").position, 3);
        assert_eq!(e("-15").position, 3);
        assert_eq!(e("17322a").position, 5);
        assert_eq!(e("").position, 0);
        let msg = e("2024-13-01").to_string();
        assert!(
            msg.contains("character 6") && msg.contains("month"),
            "{msg}"
        );
    }
}
