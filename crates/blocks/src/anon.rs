//! The `anonymize` and `keep` settings of the blocks that emit flow records (`flow_meter`,
//! `ipfix_source`): with them, every record leaves the block with its addresses anonymized
//! (Crypto-PAn, `trawl-anon`), so every consumer (writers, flow database, exporters, feeds)
//! gets anonymized records from one place (docs/specs/anonymization.md).

use std::path::Path;

use trawl_anon::{Anonymizer, CryptoPan, Key, Prefix};
use trawl_flow::FlowRecord;

/// Checks `keep` (prefixes, only with a key), as `check` does before anything is built.
pub fn check(key: Option<&Path>, keep: &[String]) -> Result<(), String> {
    if key.is_none() && !keep.is_empty() {
        return Err("`keep` needs `anonymize` (the key file)".into());
    }
    for p in keep {
        p.parse::<Prefix>().map_err(|e| format!("`keep`: {e}"))?;
    }
    Ok(())
}

/// The anonymizer of a block's settings: None without a key file; the key is read now, so a
/// missing or malformed key stops the composition before it runs.
pub fn anonymizer(key: Option<&Path>, keep: &[String]) -> Result<Option<Anonymizer>, String> {
    check(key, keep)?;
    let Some(path) = key else { return Ok(None) };
    let key = Key::from_file(path).map_err(|e| format!("`anonymize`: {e}"))?;
    let keep = keep
        .iter()
        .map(|p| p.parse().expect("checked above"))
        .collect();
    Ok(Some(Anonymizer::new(CryptoPan::new(&key), keep)))
}

/// Anonymizes a record's addresses in place.
#[inline]
pub fn record(anon: &mut Anonymizer, r: &mut FlowRecord<'_>) {
    r.src_ip = anon.ip(r.src_ip);
    r.dst_ip = anon.ip(r.dst_ip);
}
