//! Errors of the query engine.

/// What went wrong in a query.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The condition does not parse.
    #[error(transparent)]
    Syntax(#[from] crate::syntax::ParseError),
    /// The database could not be listed.
    #[error(transparent)]
    Store(#[from] trawl_store::Error),
    /// One block could not be read (the scan counts it and goes on with the others).
    #[error("{0}")]
    Block(String),
    /// The result would hold more groups than allowed.
    #[error("the result has more than {0} groups (the --max-groups limit): narrow the condition, the time range or the attributes, or raise the limit")]
    TooManyGroups(usize),
    /// A serialised partial aggregate could not be read or merged.
    #[error("partial aggregate: {0}")]
    Partial(String),
    /// The `probe` attribute, or a `probe`/`site`/`role` condition, in a query over one
    /// database (they name the probes of a fleet query).
    #[error("the probe attribute and probe, site and role conditions need a fleet query (trawl query --probes FILE or --probe URL)")]
    FleetOnly,
    /// The scan was cancelled through its [`crate::ScanControl`] (a query past its time).
    #[error("the scan was cancelled")]
    Cancelled,
    /// The attributes' values do not fit in a packed group key together
    /// (`partial::KEY_BITS`); the message names them and their widths.
    #[error("{0}")]
    KeyTooWide(String),
    /// A bug, please report.
    #[error("internal error, please report: {0}")]
    Internal(String),
}
