//! Errors of a fleet query that stop it whole (a probe's failure only marks that probe).
use std::path::PathBuf;

/// Why a fleet query could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The probes file (or a file it names: a token, a CA) is missing or wrong.
    #[error("{path}: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        message: String,
    },
    /// A probe given on the command line (`--probe`) or in the file is wrong (a URL that does
    /// not parse, a duplicate name).
    #[error("probe {probe:?}: {message}")]
    Probe {
        /// The probe's name or URL.
        probe: String,
        /// What was wrong.
        message: String,
    },
    /// The merged answer would hold more groups than allowed, or probes answered with
    /// different attributes.
    #[error(transparent)]
    Query(#[from] trawl_query::Error),
    /// The runtime's threads could not start.
    #[error("cannot start the fleet query's threads")]
    Runtime(#[source] std::io::Error),
}
