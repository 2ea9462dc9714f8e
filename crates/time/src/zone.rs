//! Times shown to people: RFC 3339 in UTC, or in the local zone with its offset.
//!
//! The local zone is the C library's: `TZ` (a zone name such as `Europe/Berlin`, a POSIX rule,
//! or a TZif path), else `/etc/localtime`. Its rules come from chrono, already built for the
//! flow store's Arrow arrays, so trawl carries no zone table of its own.
use chrono::{LocalResult, NaiveDate, Offset, TimeZone};

use crate::{Civil, NS_PER_SEC};

/// Which clock a time is shown in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Zone {
    /// UTC, written with `Z` (the default: logs and tables compare across machines).
    #[default]
    Utc,
    /// The local zone of `TZ`, written with its offset (`+01:00`).
    Local,
}

/// `ns` since the epoch as RFC 3339: `2026-11-22T10:05:00Z` in UTC,
/// `2026-11-22T11:05:00+01:00` in the local zone; with `fraction`, nanoseconds too
/// (`10:05:00.000000001Z`).
pub fn rfc3339(ns: u64, zone: Zone, fraction: bool) -> String {
    let offset = match zone {
        Zone::Utc => 0,
        Zone::Local => local_offset_at(ns),
    };
    let shifted = (i128::from(ns) + i128::from(offset) * i128::from(NS_PER_SEC)).max(0);
    let c = Civil::from_unix_ns(u64::try_from(shifted).unwrap_or(u64::MAX));
    let mut out = format!("{}T{:02}:{:02}:{:02}", c.date(), c.hour, c.minute, c.second);
    if fraction {
        out.push_str(&format!(".{:09}", c.nanos));
    }
    match zone {
        Zone::Utc => out.push('Z'),
        Zone::Local => {
            let sign = if offset < 0 { '-' } else { '+' };
            let a = offset.unsigned_abs();
            out.push_str(&format!("{sign}{:02}:{:02}", a / 3600, a % 3600 / 60));
        }
    }
    out
}

/// The local zone's offset from UTC (seconds) at the instant `ns`.
fn local_offset_at(ns: u64) -> i32 {
    let ns = i64::try_from(ns).unwrap_or(i64::MAX);
    chrono::Local
        .timestamp_nanos(ns)
        .offset()
        .fix()
        .local_minus_utc()
}

/// The local zone's offset from UTC (seconds) for the wall-clock time `c`; `None` when the
/// zone skips that time (spring forward). A time the zone passes twice (fall back) takes the
/// earlier instant, as `date -d` does.
pub(crate) fn local_offset_of(c: &Civil) -> Option<i32> {
    let naive = NaiveDate::from_ymd_opt(c.year, u32::from(c.month), u32::from(c.day))?
        .and_hms_nano_opt(
            u32::from(c.hour),
            u32::from(c.minute),
            u32::from(c.second),
            c.nanos,
        )?;
    match chrono::Local.from_local_datetime(&naive) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => {
            Some(t.offset().fix().local_minus_utc())
        }
        LocalResult::None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_with_and_without_fraction() {
        let ns = 1_732_269_900 * NS_PER_SEC + 7;
        assert_eq!(rfc3339(ns, Zone::Utc, false), "2024-11-22T10:05:00Z");
        assert_eq!(
            rfc3339(ns, Zone::Utc, true),
            "2024-11-22T10:05:00.000000007Z"
        );
    }
}
