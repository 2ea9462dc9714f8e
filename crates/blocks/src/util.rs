//! Helpers the blocks share: durations and sizes in settings.
use serde::{Deserialize, Deserializer};
pub use trawl_time::parse_size;

/// Deserializes a span such as `30s`, `500ms`, `5m` into nanoseconds.
pub fn span<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let s = String::deserialize(d)?;
    parse_span(&s).map_err(serde::de::Error::custom)
}

/// Like [`span`], for an optional setting.
pub fn opt_span<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let s = Option::<String>::deserialize(d)?;
    s.map(|s| parse_span(&s).map_err(serde::de::Error::custom))
        .transpose()
}

fn parse_span(s: &str) -> Result<u64, String> {
    trawl_time::parse_span(s.trim()).map_err(|(at, wanted)| {
        format!("`{s}` is not a duration: expected {wanted} at character {at} (examples: 30s, 500ms, 5m, 1h)")
    })
}

/// A size in settings: a number of bytes, or a string such as `64KiB`, `4MiB`, `1GiB`
/// (K/M/G/T are binary, as ring and segment sizes are).
#[derive(Deserialize)]
#[serde(untagged)]
enum RawSize {
    Bytes(u64),
    Text(String),
}

/// Deserializes a size (see [`parse_size`]) into bytes.
pub fn size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match RawSize::deserialize(d)? {
        RawSize::Bytes(n) => Ok(n),
        RawSize::Text(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

/// Like [`size`], for an optional setting.
pub fn opt_size<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    size(d).map(Some)
}
