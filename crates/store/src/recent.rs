//! Recent parts: what a live writer holds of a block that is still open, published every few
//! seconds so that a query sees flows minutes before their block is written (a block is
//! written when its 5-minute interval and the grace after it have passed).
//!
//! A writer gives each open block a random token. Every few seconds it writes the rows that
//! came since its last publication to `.HHMM-TOKEN-K.recent` (a Parquet file like a block,
//! named so that Parquet readers of the database directory skip it: a dot-name that does not
//! end in `.parquet`). When it writes the block itself, the block's key-value metadata
//! `trawl.recent_token = TOKEN` says that the block holds every row of those parts. A reader
//! reads the recent parts of a token no block of its interval names, and never both: a
//! listing made before the block was written reads the parts, one made after reads the
//! block. The writer removes the parts it covered some minutes later (long enough for a query
//! that listed them to have read them); parts of a writer that died before its block are
//! the only copy of their rows, and stay read (docs/specs/store.md).
use std::collections::HashSet;
use std::fs::File;
use std::path::Path;

use parquet::file::reader::{FileReader, SerializedFileReader};

use crate::layout::block_file_name;

/// Key of a block's Parquet key-value metadata naming the token whose recent parts it holds.
pub const TOKEN_KEY: &str = "trawl.recent_token";
/// Extension of recent parts.
pub const RECENT_EXT: &str = "recent";

/// File name of recent part `k` (0 = the first) of token `token` of the block starting at
/// `start_ns`.
pub fn recent_file_name(start_ns: u64, token: u64, k: u32) -> String {
    let block = block_file_name(start_ns, 0);
    format!(".{}-{token:016x}-{k}.{RECENT_EXT}", &block[..4])
}

/// Parses a recent part's file name into (minutes of the day, token, part).
pub fn parse_recent_name(name: &str) -> Option<(u32, u64, u32)> {
    let stem = name
        .strip_prefix('.')?
        .strip_suffix(RECENT_EXT)?
        .strip_suffix('.')?;
    let mut it = stem.split('-');
    let (hhmm, token, k) = (it.next()?, it.next()?, it.next()?);
    if it.next().is_some() || token.len() != 16 {
        return None;
    }
    let minute = crate::layout::parse_block_name(&format!("{hhmm}.{}", crate::layout::BLOCK_EXT))
        .filter(|&(_, part)| part == 0)?
        .0;
    let token = u64::from_str_radix(token, 16).ok()?;
    let k = k
        .bytes()
        .all(|c| c.is_ascii_digit())
        .then(|| k.parse().ok())
        .flatten()?;
    Some((minute, token, k))
}

/// The token a block file names as covered, if any (its footer's key-value metadata). A file
/// that cannot be read names none: the query reading it reports it.
pub fn covered_token(block: &Path) -> Option<u64> {
    let reader = SerializedFileReader::new(File::open(block).ok()?).ok()?;
    let kv = reader.metadata().file_metadata().key_value_metadata()?;
    let value = kv.iter().find(|k| k.key == TOKEN_KEY)?.value.as_deref()?;
    u64::from_str_radix(value, 16).ok()
}

/// The tokens the blocks `blocks` name as covered.
pub fn covered_tokens<'a>(blocks: impl IntoIterator<Item = &'a Path>) -> HashSet<u64> {
    blocks.into_iter().filter_map(covered_token).collect()
}

/// A token for a new open block: unique across writers and restarts in practice (process id,
/// the time and a counter, mixed).
pub fn new_token() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut x = now
        ^ (u64::from(std::process::id()) << 40)
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // splitmix64's finaliser: neighbouring inputs give unrelated tokens.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_others_are_refused() {
        let start = 1_764_000_000_000_000_000u64; // some 5-minute boundary
        let start = start - start % crate::layout::BLOCK_NS;
        let name = recent_file_name(start, 0x0123_4567_89ab_cdef, 7);
        assert!(name.starts_with('.') && name.ends_with(".recent"), "{name}");
        let (minute, token, k) = parse_recent_name(&name).unwrap();
        assert_eq!(
            u64::from(minute) * 60_000_000_000,
            start % crate::layout::DAY_NS
        );
        assert_eq!((token, k), (0x0123_4567_89ab_cdef, 7));
        for bad in [
            "1205.parquet",
            ".1205-0123456789abcdef-1.parquet",
            ".1205-0123456789abcde-1.recent",
            ".1203-0123456789abcdef-1.recent",
            ".1205-0123456789abcdef-x.recent",
            ".1205-0123456789abcdef-1-2.recent",
            "1205-0123456789abcdef-1.recent",
        ] {
            assert_eq!(parse_recent_name(bad), None, "{bad}");
        }
    }

    #[test]
    fn tokens_differ() {
        let a: HashSet<u64> = (0..1000).map(|_| new_token()).collect();
        assert_eq!(a.len(), 1000);
    }
}
