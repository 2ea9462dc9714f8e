//! Finding calls in the records `trawl voip` (`calls.jsonl`) and `trawl run --voip`
//! (`calls-YYYY-MM-DD.jsonl`, one file per UTC day of the calls' ends) wrote: by caller or
//! callee, as VoIPCallMon's lawful-interception front end looks calls up, and by time.
//!
//! A user given as `U` matches one side of a call (From for the caller, To for the callee)
//! when, ignoring case, it is that side's user part, its URI (with or without the scheme),
//! or part of its display name; a number (digits with `+`, spaces, `-`, `.`, parentheses)
//! also matches a user part with the same digits (`+49 30 1234` matches `49301234`).
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::Error;

/// Which side of a call the user must be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Side {
    /// Caller or callee.
    #[default]
    Either,
    /// The caller (From).
    Caller,
    /// The callee (To).
    Callee,
}

/// What calls to find.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallQuery {
    /// The user, number, URI or display name; `None` finds every call of the time range.
    pub user: Option<String>,
    /// Which side it must be.
    pub side: Side,
    /// Calls that overlap `[from_ns, to_ns)`: invited before `to_ns` and not ended before
    /// `from_ns`.
    pub from_ns: u64,
    /// End of the range, exclusive.
    pub to_ns: u64,
}

impl Default for CallQuery {
    fn default() -> Self {
        CallQuery {
            user: None,
            side: Side::Either,
            from_ns: 0,
            to_ns: u64::MAX,
        }
    }
}

impl CallQuery {
    /// Whether the call record `call` (a line of `calls.jsonl`) is one of those asked for.
    pub fn matches(&self, call: &Value) -> bool {
        let ns = |k: &str| call.get(k).and_then(Value::as_u64);
        let invite = ns("invite_ns").unwrap_or(0);
        let end = ns("end_ns").unwrap_or(invite);
        if invite >= self.to_ns || end < self.from_ns {
            return false;
        }
        let Some(user) = &self.user else {
            return true;
        };
        let side = |prefix: &str| {
            let s = |k: &str| {
                call.get(format!("{prefix}{k}"))
                    .and_then(Value::as_str)
                    .unwrap_or("")
            };
            user_matches(user, s(""), s("_display"), s("_user"))
        };
        match self.side {
            Side::Either => side("from") || side("to"),
            Side::Caller => side("from"),
            Side::Callee => side("to"),
        }
    }
}

/// Whether `want` names the party with this URI, display name and user part.
fn user_matches(want: &str, uri: &str, display: &str, user: &str) -> bool {
    let want = want.trim();
    if want.is_empty() {
        return false;
    }
    let scheme = |u: &str| {
        u.split_once(':')
            .filter(|(s, _)| ["sip", "sips", "tel"].contains(&s.to_ascii_lowercase().as_str()))
            .map_or(u, |(_, rest)| rest)
            .to_ascii_lowercase()
    };
    let lower = want.to_lowercase();
    if user.eq_ignore_ascii_case(want)
        || (!uri.is_empty() && scheme(uri) == scheme(want))
        || display.to_lowercase().contains(&lower)
    {
        return true;
    }
    let is_number = want
        .chars()
        .all(|c| c.is_ascii_digit() || "+-. ()".contains(c));
    let digits = |s: &str| -> String { s.chars().filter(char::is_ascii_digit).collect() };
    is_number && !digits(want).is_empty() && digits(want) == digits(user)
}

/// The files of call records in `dir`: `calls.jsonl` and the daily `calls-YYYY-MM-DD.jsonl`,
/// in name order, without the daily files of days that end before `from_ns` (their calls
/// all ended before it).
pub fn call_files(dir: &Path, from_ns: u64) -> Result<Vec<PathBuf>, Error> {
    let unreadable = |e: std::io::Error| Error::Records {
        path: dir.display().to_string(),
        line: 0,
        reason: e.to_string(),
    };
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(unreadable)? {
        let path = entry.map_err(unreadable)?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name == "calls.jsonl" {
            files.push(path);
            continue;
        }
        let day = name
            .strip_prefix("calls-")
            .and_then(|n| n.strip_suffix(".jsonl"))
            .and_then(day_start_ns);
        match day {
            Some(start) if start + DAY_NS <= from_ns => {}
            Some(_) => files.push(path),
            None => {}
        }
    }
    files.sort();
    Ok(files)
}

/// The calls of `dir`'s files that `query` asks for, by INVITE time.
pub fn find_calls(dir: &Path, query: &CallQuery) -> Result<Vec<Value>, Error> {
    let mut found = Vec::new();
    for file in call_files(dir, query.from_ns)? {
        let bad = |line: u64, reason: String| Error::Records {
            path: file.display().to_string(),
            line,
            reason,
        };
        let text = std::fs::read_to_string(&file).map_err(|e| bad(0, e.to_string()))?;
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let call: Value = serde_json::from_str(line)
                .map_err(|e| bad(n as u64 + 1, format!("not a call record: {e}")))?;
            if query.matches(&call) {
                found.push(call);
            }
        }
    }
    found.sort_by_key(|c| c.get("invite_ns").and_then(Value::as_u64).unwrap_or(0));
    Ok(found)
}

const DAY_NS: u64 = 86_400 * 1_000_000_000;

/// The start (ns since the epoch) of the UTC day `YYYY-MM-DD`.
fn day_start_ns(day: &str) -> Option<u64> {
    let mut parts = day.splitn(3, '-');
    let y: i64 = parts.next()?.parse().ok()?;
    let m: i64 = parts.next()?.parse().ok()?;
    let d: i64 = parts.next()?.parse().ok()?;
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || day.len() != 10 {
        return None;
    }
    // Days from the civil date (H. Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days).ok().map(|d| d * DAY_NS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn day_starts_are_utc_midnights() {
        assert_eq!(day_start_ns("1970-01-01"), Some(0));
        assert_eq!(
            day_start_ns("2026-11-27"),
            Some(1_795_737_600 * 1_000_000_000)
        );
        assert_eq!(
            day_start_ns("2024-02-29"),
            Some(1_709_164_800 * 1_000_000_000)
        );
        assert_eq!(day_start_ns("2026-13-01"), None);
        assert_eq!(day_start_ns("latest"), None);
    }

    #[test]
    fn users_match_by_user_part_uri_display_name_or_number() {
        let m = |want| user_matches(want, "sip:+49301234@a.org", "Alice Smith", "+49301234");
        assert!(m("+49301234"));
        assert!(m("+49 30 1234"));
        assert!(m("sip:+49301234@A.org"));
        assert!(m("+49301234@a.org"));
        assert!(m("alice"));
        assert!(!m("bob"));
        assert!(!m("4930123"), "a number is matched whole");
        assert!(!m(""));
    }
}
