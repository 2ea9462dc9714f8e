//! Helpers the blocks share: durations in settings, output files.
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;

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

/// Bytes collected before a write: large enough that writing costs one syscall per MiB.
const CHUNK: usize = 1 << 20;

/// A buffered output file (or standard output for `-`) that keeps the first write error
/// instead of failing each write, so a block can report it once.
pub struct OutputFile {
    buf: Vec<u8>,
    inner: Box<dyn Write + Send>,
    pub(crate) error: Option<io::Error>,
    path: String,
}

impl OutputFile {
    /// Creates (truncates) `path`; `-` is standard output.
    pub fn create(path: &str) -> Result<OutputFile, String> {
        let inner: Box<dyn Write + Send> = if path == "-" {
            Box::new(io::stdout())
        } else {
            Box::new(
                File::create(Path::new(path)).map_err(|e| format!("cannot create {path}: {e}"))?,
            )
        };
        Ok(OutputFile {
            buf: Vec::with_capacity(CHUNK * 2),
            inner,
            error: None,
            path: path.to_string(),
        })
    }

    /// The buffer to append to; call [`OutputFile::written`] after.
    #[inline]
    pub fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Writes the buffer out once it is large enough. Returns the error once, the first time.
    pub fn written(&mut self) -> Result<(), String> {
        if self.buf.len() >= CHUNK {
            return self.flush();
        }
        Ok(())
    }

    /// Writes everything buffered.
    pub fn flush(&mut self) -> Result<(), String> {
        if self.error.is_none() {
            if let Err(e) = self
                .inner
                .write_all(&self.buf)
                .and_then(|_| self.inner.flush())
            {
                self.buf.clear();
                let msg = format!("cannot write {}: {e}", self.path);
                self.error = Some(e);
                return Err(msg);
            }
        }
        self.buf.clear();
        Ok(())
    }
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
