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
    #[error("filter expression {expr:?} for link type {}: {message}", link_type.0)]
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
    #[error("internal error compiling {expr:?} for link type {}: {detail}", link_type.0)]
    Internal {
        /// The expression being compiled.
        expr: String,
        /// The link type it was compiled for.
        link_type: LinkType,
        /// What went wrong.
        detail: String,
    },
}
