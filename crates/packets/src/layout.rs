//! Where segments live: `DIR/YYYY-MM-DD/HH/<start_ns>_w<worker>_<iface>.pcap` (UTC, packet
//! time), each with its index beside it as `<same name>.idx`.
//!
//! The start time leads the name with a fixed width so that names sort in time order; the
//! interface comes last because interface names may contain `_`, `.` and `-`.
use std::path::{Path, PathBuf};

use trawl_time::Civil;

use crate::error::Error;

/// Width of the start-time field: enough digits for any `u64`.
const START_WIDTH: usize = 20;

/// The identity of a segment, as encoded in its file name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SegmentName {
    /// Timestamp of the segment's first packet (ns since the epoch).
    pub start_ns: u64,
    /// Capture worker that wrote it (0 for a capture file).
    pub worker: u16,
    /// Interface name (sanitised to `[A-Za-z0-9._:@+-]`, anything else becomes `_`).
    pub iface: String,
}

impl SegmentName {
    /// A name, sanitising `iface`.
    pub fn new(start_ns: u64, worker: u16, iface: &str) -> SegmentName {
        SegmentName {
            start_ns,
            worker,
            iface: sanitise(iface),
        }
    }

    /// `<start_ns>_w<worker>_<iface>.pcap`.
    pub fn file_name(&self) -> String {
        format!(
            "{:0width$}_w{}_{}.pcap",
            self.start_ns,
            self.worker,
            self.iface,
            width = START_WIDTH
        )
    }

    /// `YYYY-MM-DD/HH` of the start time.
    pub fn directory(&self) -> PathBuf {
        let c = Civil::from_unix_ns(self.start_ns);
        PathBuf::from(c.date()).join(format!("{:02}", c.hour))
    }

    /// The segment's path under `root`.
    pub fn path_in(&self, root: &Path) -> PathBuf {
        root.join(self.directory()).join(self.file_name())
    }

    /// Parses a file name written by [`SegmentName::file_name`].
    pub fn parse(file_name: &str) -> Option<SegmentName> {
        let stem = file_name.strip_suffix(".pcap")?;
        let (start, rest) = stem.split_once('_')?;
        let rest = rest.strip_prefix('w')?;
        let (worker, iface) = rest.split_once('_')?;
        if start.len() != START_WIDTH || iface.is_empty() {
            return None;
        }
        Some(SegmentName {
            start_ns: start.parse().ok()?,
            worker: worker.parse().ok()?,
            iface: iface.to_string(),
        })
    }
}

/// Makes an interface name safe for a file name.
pub(crate) fn sanitise(iface: &str) -> String {
    let s: String = iface
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._:@+-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    if s.is_empty() {
        "if".to_string()
    } else {
        s
    }
}

/// The index file of a segment: `<segment>.idx`.
pub(crate) fn index_path(segment: &Path) -> PathBuf {
    let mut s = segment.as_os_str().to_owned();
    s.push(".idx");
    PathBuf::from(s)
}

/// A segment found on disk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSegment {
    /// Its path.
    pub path: PathBuf,
    /// What its name says.
    pub name: SegmentName,
    /// Its size in bytes.
    pub bytes: u64,
    /// Whether its index exists (false: the segment is being written, or a crash left it).
    pub indexed: bool,
}

/// Every segment under `root`, in name order (start time, worker, interface). Files and
/// directories that do not follow the layout are ignored, so a store can share a directory
/// with other things.
pub fn list_segments(root: &Path) -> Result<Vec<StoredSegment>, Error> {
    list_segments_between(root, 0, u64::MAX)
}

/// The segments in hour directories that overlap `from_ns..to_ns` (by directory name only;
/// the caller checks the indexes).
pub fn list_segments_between(
    root: &Path,
    from_ns: u64,
    to_ns: u64,
) -> Result<Vec<StoredSegment>, Error> {
    const HOUR: u64 = 3600 * 1_000_000_000;
    let first_hour = from_ns / HOUR;
    let mut out = Vec::new();
    let days = match std::fs::read_dir(root) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io(root, "reading the store directory")(e)),
    };
    for day in days {
        let day = day.map_err(Error::io(root, "reading the store directory"))?;
        let Some(day_number) = date_dir_days(&day.file_name().to_string_lossy()) else {
            continue;
        };
        let day_path = day.path();
        let Ok(hours) = std::fs::read_dir(&day_path) else {
            continue;
        };
        for hour in hours.flatten() {
            let hour_name = hour.file_name();
            let hour_name = hour_name.to_string_lossy();
            if hour_name.len() != 2 || !hour_name.bytes().all(|b| b.is_ascii_digit()) {
                continue;
            }
            let hour_no = day_number * 24 + hour_name.parse::<u64>().unwrap_or(0);
            if hour_no < first_hour || hour_no.saturating_mul(HOUR) >= to_ns {
                continue;
            }
            let Ok(files) = std::fs::read_dir(hour.path()) else {
                continue;
            };
            for f in files.flatten() {
                let file_name = f.file_name();
                let Some(name) = SegmentName::parse(&file_name.to_string_lossy()) else {
                    continue;
                };
                // A segment may vanish between listing and stat (retention): skip it.
                let Ok(meta) = f.metadata() else {
                    continue;
                };
                let path = f.path();
                let indexed = index_path(&path).exists();
                out.push(StoredSegment {
                    path,
                    name,
                    bytes: meta.len(),
                    indexed,
                });
            }
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Whether `root` holds at least one segment (stops at the first): what makes a directory a
/// packet store.
pub fn has_segments(root: &Path) -> Result<bool, Error> {
    let days = match std::fs::read_dir(root) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io(root, "reading the store directory")(e)),
    };
    for day in days.flatten() {
        if date_dir_days(&day.file_name().to_string_lossy()).is_none() {
            continue;
        }
        let Ok(hours) = std::fs::read_dir(day.path()) else {
            continue;
        };
        for hour in hours.flatten() {
            let Ok(files) = std::fs::read_dir(hour.path()) else {
                continue;
            };
            let found = files
                .flatten()
                .any(|f| SegmentName::parse(&f.file_name().to_string_lossy()).is_some());
            if found {
                return Ok(true);
            }
        }
    }
    Ok(false)
}

/// Days since the epoch of a `YYYY-MM-DD` directory name.
fn date_dir_days(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let shaped = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if !shaped {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s[r].parse::<u32>().ok();
    let days = trawl_time::days_from_civil(num(0..4)? as i32, num(5..7)? as u8, num(8..10)? as u8);
    u64::try_from(days).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_sort_by_time() {
        let a = SegmentName::new(1_732_269_900_000_000_001, 3, "eth0.100_x");
        assert_eq!(a.file_name(), "01732269900000000001_w3_eth0.100_x.pcap");
        assert_eq!(SegmentName::parse(&a.file_name()), Some(a.clone()));
        assert_eq!(a.directory(), PathBuf::from("2024-11-22/10"));
        let b = SegmentName::new(999, 0, "lo");
        assert!(b.file_name() < a.file_name());
        assert_eq!(SegmentName::new(1, 0, "a/b c").iface, "a_b_c");
        assert_eq!(SegmentName::parse("x.pcap"), None);
        assert_eq!(SegmentName::parse("01732269900000000001_w3_.pcap"), None);
    }
}
