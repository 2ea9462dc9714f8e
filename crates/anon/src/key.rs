//! The 32-byte Crypto-PAn key and its file format.

use std::path::Path;

use crate::Error;

/// Length of a Crypto-PAn key: 16 bytes of AES-128 key, then 16 bytes the pad is made from.
pub const KEY_LEN: usize = 32;

/// A Crypto-PAn key. `Debug` does not show it, so it cannot leak into logs.
#[derive(Clone)]
pub struct Key([u8; KEY_LEN]);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    /// A key from 32 bytes in memory.
    pub fn from_bytes(bytes: &[u8]) -> Result<Key, Error> {
        let key: [u8; KEY_LEN] = bytes.try_into().map_err(|_| Error::KeyBytes(bytes.len()))?;
        Ok(Key(key))
    }

    /// Reads a key file: exactly 32 raw bytes, or 64 hex digits (either case) with optional
    /// whitespace (a trailing newline) around them. Generate one with
    /// `head -c 32 /dev/urandom > key` or `openssl rand -hex 32 > key`.
    pub fn from_file(path: &Path) -> Result<Key, Error> {
        let data = std::fs::read(path).map_err(|source| Error::ReadKey {
            path: path.to_owned(),
            source,
        })?;
        Key::parse(&data).map_err(|e| e.at(path))
    }

    /// The file's contents, raw or hex; errors carry an empty path for `from_file` to fill.
    fn parse(data: &[u8]) -> Result<Key, KeyFormat> {
        // 32 raw bytes win even when they happen to be text: a hex key is 64 characters.
        if data.len() == KEY_LEN {
            return Ok(Key(data.try_into().expect("checked length")));
        }
        let start = data
            .iter()
            .position(|b| !b.is_ascii_whitespace())
            .unwrap_or(data.len());
        let end = data
            .iter()
            .rposition(|b| !b.is_ascii_whitespace())
            .map_or(start, |e| e + 1);
        let text = &data[start..end];
        if text.len() != 2 * KEY_LEN {
            return Err(KeyFormat::Length(data.len()));
        }
        let mut key = [0u8; KEY_LEN];
        for (i, pair) in text.chunks_exact(2).enumerate() {
            let digit = |j: usize| {
                let c = pair[j];
                (c as char).to_digit(16).ok_or(KeyFormat::Hex {
                    offset: start + 2 * i + j,
                    found: c as char,
                })
            };
            key[i] = (digit(0)? << 4 | digit(1)?) as u8;
        }
        Ok(Key(key))
    }

    /// The 16 bytes of AES key.
    pub(crate) fn aes_key(&self) -> &[u8] {
        &self.0[..16]
    }

    /// The 16 bytes the pad is made from (encrypted with the AES key).
    pub(crate) fn pad_seed(&self) -> &[u8] {
        &self.0[16..]
    }
}

/// A format error before the file's path is attached.
enum KeyFormat {
    Length(usize),
    Hex { offset: usize, found: char },
}

impl KeyFormat {
    fn at(self, path: &Path) -> Error {
        let path = path.to_owned();
        match self {
            KeyFormat::Length(len) => Error::KeyLength { path, len },
            KeyFormat::Hex { offset, found } => Error::KeyHex {
                path,
                offset,
                found,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_raw_and_hex_agree() {
        let raw: Vec<u8> = (0..32).collect();
        let hex: String = raw.iter().map(|b| format!("{b:02X}")).collect();
        let a = Key::parse(&raw).ok().unwrap();
        let b = Key::parse(format!("  {hex}\n").as_bytes()).ok().unwrap();
        assert_eq!(a.0, b.0);
    }

    #[test]
    fn parse_rejects_bad_hex_and_length() {
        let mut hex = "ab".repeat(32);
        hex.replace_range(9..10, "g");
        assert!(matches!(
            Key::parse(hex.as_bytes()),
            Err(KeyFormat::Hex {
                offset: 9,
                found: 'g'
            })
        ));
        assert!(matches!(Key::parse(b"abcd\n"), Err(KeyFormat::Length(5))));
    }
}
