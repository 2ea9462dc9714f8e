//! The crate's error type.

use crate::program::{Insn, Invalid};
use trawl_capture::LinkType;

/// What can go wrong when building a filter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// libpcap refused the expression for this link type: a syntax error (`tcp port`), a bad
    /// value (`host 999.1.1.1`), an unknown name (`foo`), or a primitive that makes no sense on
    /// the link type (`ether host ...` on raw IP). `message` is libpcap's own text.
    #[error("filter expression {} for link type {}: {message}", Shown(expr), link_type.0)]
    Compile {
        /// The expression as given.
        expr: String,
        /// The link type it was compiled for.
        link_type: LinkType,
        /// libpcap's message, verbatim.
        message: String,
    },

    /// A program handed to [`crate::Filter::from_insns`] breaks libpcap's validation rules.
    #[error("invalid BPF program: instruction {index} {insn}: {reason}")]
    InvalidProgram {
        /// Index of the offending instruction (the last one for [`Invalid::NoFinalRet`]).
        index: usize,
        /// The instruction itself (all zero for [`Invalid::Empty`]).
        insn: Insn,
        /// The rule it breaks.
        reason: Invalid,
    },

    /// libpcap handed back something this crate did not expect (an instruction it could not
    /// read, or a compiled program that fails validation). A bug: please report it.
    #[error("internal error compiling {} for link type {}: {detail}", Shown(expr), link_type.0)]
    Internal {
        /// The expression being compiled.
        expr: String,
        /// The link type it was compiled for.
        link_type: LinkType,
        /// What went wrong.
        detail: String,
    },
}

/// An expression as an error message shows it: quoted, and cut after
/// [`Shown::MAX_CHARS`] characters with its length said. A filter of thousands of `or host`
/// terms (which libpcap refuses with "memory exhausted") must not fill the terminal.
struct Shown<'a>(&'a str);

impl Shown<'_> {
    const MAX_CHARS: usize = 200;
}

impl std::fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0.char_indices().nth(Self::MAX_CHARS) {
            None => write!(f, "{:?}", self.0),
            Some((cut, _)) => write!(f, "{:?}... ({} bytes in all)", &self.0[..cut], self.0.len()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_expression_is_cut_in_messages() {
        let expr = vec!["host 10.0.0.1"; 5000].join(" or ");
        let e = Error::Compile {
            expr: expr.clone(),
            link_type: LinkType(1),
            message: "memory exhausted".into(),
        };
        let text = e.to_string();
        assert!(text.len() < 400, "{} bytes: {text}", text.len());
        assert!(
            text.contains(&format!("... ({} bytes in all)", expr.len())),
            "{text}"
        );
        assert!(
            text.ends_with("for link type 1: memory exhausted"),
            "{text}"
        );
        let short = Error::Compile {
            expr: "tcp port".into(),
            link_type: LinkType(1),
            message: "syntax error".into(),
        };
        assert_eq!(
            short.to_string(),
            "filter expression \"tcp port\" for link type 1: syntax error"
        );
    }
}
