//! Where blocks live: `DB/iface=NAME/date=YYYY-MM-DD/HHMM.parquet` (and `HHMM_N.parquet` for
//! later parts of the same interval), with civil-date arithmetic on UTC nanoseconds.
use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// Length of a block's interval: 5 minutes, in ns.
pub const BLOCK_NS: u64 = 300 * 1_000_000_000;
/// One day in ns.
pub const DAY_NS: u64 = 86_400 * 1_000_000_000;
/// Extension of block files.
pub const BLOCK_EXT: &str = "parquet";

/// Start of the block interval holding `ts_ns`.
pub const fn block_start(ts_ns: u64) -> u64 {
    ts_ns - ts_ns % BLOCK_NS
}

/// A civil date (proleptic Gregorian, UTC).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Date {
    /// Year.
    pub year: i32,
    /// Month, 1..=12.
    pub month: u32,
    /// Day of month, 1..=31.
    pub day: u32,
}

impl Date {
    /// The UTC date of `ts_ns`.
    pub fn of(ts_ns: u64) -> Date {
        Date::from_days((ts_ns / DAY_NS) as i64)
    }

    /// The date `days` days after 1970-01-01.
    pub fn from_days(days: i64) -> Date {
        let (year, month, day) = trawl_time::civil_from_days(days);
        Date {
            year,
            month: u32::from(month),
            day: u32::from(day),
        }
    }

    /// Days since 1970-01-01.
    pub fn days(self) -> i64 {
        let small = |v: u32| u8::try_from(v).unwrap_or(u8::MAX);
        trawl_time::days_from_civil(self.year, small(self.month), small(self.day))
    }

    /// Midnight UTC of this date in ns, `None` before 1970.
    pub fn start_ns(self) -> Option<u64> {
        u64::try_from(self.days()).ok()?.checked_mul(DAY_NS)
    }

    /// Parses `YYYY-MM-DD`.
    pub fn parse(s: &str) -> Option<Date> {
        let b = s.as_bytes();
        if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let num = |r: std::ops::Range<usize>| -> Option<u32> {
            s.get(r)?.bytes().try_fold(0u32, |a, c| {
                c.is_ascii_digit().then(|| a * 10 + u32::from(c - b'0'))
            })
        };
        let d = Date {
            year: num(0..4)? as i32,
            month: num(5..7)?,
            day: num(8..10)?,
        };
        let ok = (1..=12).contains(&d.month) && d.day >= 1 && Date::from_days(d.days()) == d;
        ok.then_some(d)
    }
}

impl core::fmt::Display for Date {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }
}

/// Whether `name` may be used as an interface name in the layout: 1 to 64 characters of
/// `A-Z a-z 0-9 . _ -`, not starting with a dot (so it is one safe path component, and hive
/// partition readers see it unchanged).
pub fn valid_iface(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'.' | b'_' | b'-'))
}

/// The directory of an interface's day.
pub fn day_dir(db: &Path, iface: &str, date: Date) -> PathBuf {
    db.join(format!("iface={iface}"))
        .join(format!("date={date}"))
}

/// File name of part `part` (0 = the first) of the block starting at `start_ns`.
pub fn block_file_name(start_ns: u64, part: u32) -> String {
    let secs = (start_ns % DAY_NS) / 1_000_000_000;
    let (h, m) = (secs / 3600, secs % 3600 / 60);
    if part == 0 {
        format!("{h:02}{m:02}.{BLOCK_EXT}")
    } else {
        format!("{h:02}{m:02}_{part}.{BLOCK_EXT}")
    }
}

/// One block file of the database.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockRef {
    /// Interface name.
    pub iface: String,
    /// Start of the block's interval, ns since the Unix epoch.
    pub start_ns: u64,
    /// Part number (0 for `HHMM.parquet`, N for `HHMM_N.parquet`; K of a recent part).
    pub part: u32,
    /// Path of the file.
    pub path: PathBuf,
    /// Size in bytes.
    pub bytes: u64,
    /// A recent part of a block still open ([`crate::recent`]): rows a live writer published
    /// before writing their block.
    pub recent: bool,
}

/// Parses a block file name into (minutes of the day, part). `None` for anything else
/// (temporary files start with a dot and never match).
pub fn parse_block_name(name: &str) -> Option<(u32, u32)> {
    let stem = name.strip_suffix(BLOCK_EXT)?.strip_suffix('.')?;
    let (hhmm, part) = match stem.split_once('_') {
        Some((a, p)) if !p.is_empty() && p.bytes().all(|c| c.is_ascii_digit()) => {
            (a, p.parse().ok()?)
        }
        Some(_) => return None,
        None => (stem, 0),
    };
    if hhmm.len() != 4 || !hhmm.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let h: u32 = hhmm[..2].parse().ok()?;
    let m: u32 = hhmm[2..].parse().ok()?;
    (h < 24 && m < 60 && m.is_multiple_of(5)).then_some((h * 60 + m, part))
}

/// Which blocks [`list_blocks`] returns.
#[derive(Clone, Debug, Default)]
pub struct BlockFilter<'a> {
    /// Interfaces to include; empty for all.
    pub ifaces: &'a [String],
    /// Blocks starting at or after this (ns).
    pub from_ns: u64,
    /// Blocks starting before this (ns); `None` for no bound.
    pub to_ns: Option<u64>,
}

/// The interfaces present in the database, sorted.
pub fn list_ifaces(db: &Path) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let rd = fs::read_dir(db).map_err(|e| Error::io(db, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(db, e))?;
        if let Some(name) = ent
            .file_name()
            .to_str()
            .and_then(|n| n.strip_prefix("iface="))
        {
            if valid_iface(name) && ent.path().is_dir() {
                out.push(name.to_string());
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The blocks of the database matching `filter`, sorted by (start, iface, part). Only the day
/// directories of the time range are listed; names that are not block names are skipped
/// ([`list_blocks_and_strays`] says which).
pub fn list_blocks(db: &Path, filter: &BlockFilter<'_>) -> Result<Vec<BlockRef>> {
    list_blocks_and_strays(db, filter).map(|l| l.blocks)
}

/// What [`list_blocks_and_strays`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// The blocks, as [`list_blocks`] returns them.
    pub blocks: Vec<BlockRef>,
    /// Parquet files no query reads because of where they are or what they are called
    /// (`junk.parquet`, `2021.parquet`, `1203.parquet`, a file in the database's root or an
    /// interface directory), sorted: a user who put them there expects them read, so they are
    /// reported. Only the directories listed for the blocks are looked at; names starting with
    /// a dot (a writer's temporary files) are not strays.
    pub strays: Vec<PathBuf>,
}

/// A `.parquet` file that is not a block where it is.
fn is_stray(name: &std::ffi::OsStr) -> bool {
    name.to_str().is_none_or(|n| !n.starts_with('.'))
        && Path::new(name)
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case(BLOCK_EXT))
}

/// Parquet files directly in `dir` (root or interface directory, where no block lives).
fn strays_in(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(dir, e))?;
        if is_stray(&ent.file_name()) && !ent.path().is_dir() {
            out.push(ent.path());
        }
    }
    Ok(())
}

/// Adds to `out` the recent parts of `recent` that no block of their interval (among
/// `out[day_first..]`, this day directory's blocks) covers: a listing reads either an open
/// block's recent parts or the block that holds their rows, never both.
fn add_uncovered(
    out: &mut Vec<BlockRef>,
    day_first: usize,
    recent: Vec<(u64, u64, u32, PathBuf, u64)>,
    iface: &str,
) {
    if recent.is_empty() {
        return;
    }
    let starts: std::collections::BTreeSet<u64> = recent.iter().map(|r| r.0).collect();
    // Only the blocks of intervals that have recent parts are opened (their footers).
    let covered = crate::recent::covered_tokens(
        out[day_first..]
            .iter()
            .filter(|b| starts.contains(&b.start_ns))
            .map(|b| b.path.as_path()),
    );
    for (start_ns, token, part, path, bytes) in recent {
        if !covered.contains(&token) {
            out.push(BlockRef {
                iface: iface.to_string(),
                start_ns,
                part,
                path,
                bytes,
                recent: true,
            });
        }
    }
}

/// [`list_blocks`], and the stray Parquet files met on the way.
pub fn list_blocks_and_strays(db: &Path, filter: &BlockFilter<'_>) -> Result<Listing> {
    let ifaces = if filter.ifaces.is_empty() {
        list_ifaces(db)?
    } else {
        filter.ifaces.to_vec()
    };
    let first_day = filter.from_ns / DAY_NS;
    let mut out = Vec::new();
    let mut strays = Vec::new();
    strays_in(db, &mut strays)?;
    for iface in ifaces {
        let idir = db.join(format!("iface={iface}"));
        let rd = match fs::read_dir(&idir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(Error::io(&idir, e)),
        };
        for day in rd {
            let day = day.map_err(|e| Error::io(&idir, e))?;
            if is_stray(&day.file_name()) && !day.path().is_dir() {
                strays.push(day.path());
                continue;
            }
            let Some(date) = day
                .file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("date="))
                .and_then(Date::parse)
            else {
                continue;
            };
            let Some(day_start) = date.start_ns() else {
                continue;
            };
            if day_start / DAY_NS < first_day || filter.to_ns.is_some_and(|t| day_start >= t) {
                continue;
            }
            let ddir = day.path();
            let day_first = out.len();
            // Recent parts of open blocks: (start, token, part, path, bytes).
            let mut recent = Vec::new();
            for f in fs::read_dir(&ddir).map_err(|e| Error::io(&ddir, e))? {
                let f = f.map_err(|e| Error::io(&ddir, e))?;
                let name = f.file_name();
                let name = name.to_str();
                let (minute, part, token) = match name.and_then(parse_block_name) {
                    Some((minute, part)) => (minute, part, None),
                    None => match name.and_then(crate::recent::parse_recent_name) {
                        Some((minute, token, k)) => (minute, k, Some(token)),
                        None => {
                            if is_stray(&f.file_name()) {
                                strays.push(f.path());
                            }
                            continue;
                        }
                    },
                };
                let start_ns = day_start + u64::from(minute) * 60_000_000_000;
                if start_ns < filter.from_ns || filter.to_ns.is_some_and(|t| start_ns >= t) {
                    continue;
                }
                let bytes = f.metadata().map(|m| m.len()).unwrap_or(0);
                match token {
                    Some(token) => recent.push((start_ns, token, part, f.path(), bytes)),
                    None => out.push(BlockRef {
                        iface: iface.clone(),
                        start_ns,
                        part,
                        path: f.path(),
                        bytes,
                        recent: false,
                    }),
                }
            }
            add_uncovered(&mut out, day_first, recent, &iface);
        }
    }
    out.sort_by(|a, b| (a.start_ns, &a.iface, a.part).cmp(&(b.start_ns, &b.iface, b.part)));
    strays.sort();
    Ok(Listing {
        blocks: out,
        strays,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip() {
        for days in [-800_000i64, -1, 0, 1, 59, 365, 10_957, 20_414, 2_932_896] {
            let d = Date::from_days(days);
            assert_eq!(d.days(), days, "{d}");
            assert_eq!(
                Date::parse(&d.to_string()).filter(|_| days >= 0),
                (days >= 0).then_some(d)
            );
        }
        assert_eq!(
            Date::of(1_763_812_800 * 1_000_000_000).to_string(),
            "2025-11-22"
        );
        assert_eq!(
            Date::parse("2024-02-29").map(|d| d.to_string()).as_deref(),
            Some("2024-02-29")
        );
        assert_eq!(Date::parse("2023-02-29"), None);
        assert_eq!(Date::parse("2023-2-01"), None);
    }

    #[test]
    fn block_names() {
        let t = 1_763_769_600 * 1_000_000_000 + 12 * 3600 * 1_000_000_000 + 5 * 60_000_000_000;
        assert_eq!(block_file_name(t, 0), "1205.parquet");
        assert_eq!(block_file_name(t, 3), "1205_3.parquet");
        assert_eq!(parse_block_name("1205.parquet"), Some((725, 0)));
        assert_eq!(parse_block_name("1205_3.parquet"), Some((725, 3)));
        for bad in [
            "1203.parquet",
            "2400.parquet",
            ".1205.parquet.tmp",
            "1205_.parquet",
            "x.parquet",
        ] {
            assert_eq!(parse_block_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn parquet_files_that_are_no_blocks_are_listed_as_strays() {
        let db = tempfile::tempdir().unwrap();
        let day = day_dir(db.path(), "eth0", Date::parse("2026-11-22").unwrap());
        fs::create_dir_all(&day).unwrap();
        for name in [
            "1200.parquet",
            "1205_1.parquet",
            "junk.parquet",
            "2021.parquet",
        ] {
            fs::write(day.join(name), b"x").unwrap();
        }
        fs::write(day.join(".1210.parquet.1.tmp"), b"x").unwrap();
        fs::write(day.join("notes.txt"), b"x").unwrap();
        fs::write(db.path().join("flows.parquet"), b"x").unwrap();
        let l = list_blocks_and_strays(db.path(), &BlockFilter::default()).unwrap();
        assert_eq!(l.blocks.len(), 2);
        let names: Vec<String> = l
            .strays
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["flows.parquet", "2021.parquet", "junk.parquet"]);
    }

    #[test]
    fn iface_names() {
        assert!(valid_iface("eth0"));
        assert!(valid_iface("enp3s0.100"));
        for bad in ["", "a/b", "..", ".x", "a b", "ü"] {
            assert!(!valid_iface(bad), "{bad}");
        }
    }
}
