//! The bearer token: read once from its file, compared in constant time so that the time of
//! a refusal tells nothing about how much of a guess was right.
use std::path::Path;

use crate::Error;

/// The token requests must carry.
pub(crate) struct Token(Vec<u8>);

/// Shortest token accepted: a guessable token is no protection.
const MIN_LEN: usize = 16;

impl Token {
    /// Reads the token from `path`: its content without surrounding whitespace.
    pub(crate) fn load(path: &Path) -> Result<Token, Error> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::File {
            path: path.to_path_buf(),
            message: format!("cannot read the API token: {e}"),
        })?;
        let token = text.trim();
        if token.len() < MIN_LEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::File {
                path: path.to_path_buf(),
                message: format!(
                    "the API token must be at least {MIN_LEN} printable characters without \
                     spaces"
                ),
            });
        }
        Ok(Token(token.as_bytes().to_vec()))
    }

    /// Whether the `Authorization` header's value carries this token.
    pub(crate) fn accepts(&self, header: Option<&[u8]>) -> bool {
        let Some(given) = header.and_then(|h| h.strip_prefix(b"Bearer ")) else {
            return false;
        };
        constant_time_eq(given, &self.0)
    }
}

/// Compares every byte whatever the first difference (only the length shows in the time).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_match_exactly() {
        let t = Token(b"0123456789abcdef".to_vec());
        assert!(t.accepts(Some(b"Bearer 0123456789abcdef")));
        assert!(!t.accepts(Some(b"Bearer 0123456789abcdeF")));
        assert!(!t.accepts(Some(b"Bearer 0123456789abcde")));
        assert!(!t.accepts(Some(b"Basic 0123456789abcdef")));
        assert!(!t.accepts(None));
    }
}
