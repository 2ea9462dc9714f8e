//! Queries over the flow store (`trawl-store`): `syntax` (the condition language) → `plan`
//! (attributes, [`Query`], the condition compiled to single-column predicates) → `exec` (a
//! parallel map/reduce scan of the blocks; `read` decodes their columns, trawl's own pages
//! directly with `trawl_store::pages`) → [`PartialAggregate`] (mergeable, serialisable:
//! the unit a probe returns in a distributed query) → [`QueryResult`] (sorted, limited,
//! with totals) → `output` (table, JSON, CSV).
//!
//! ```
//! use trawl_query::{parse_attributes, scan, syntax, Query, SortBy};
//! # let db = tempfile::tempdir().unwrap();
//! let query = Query {
//!     attributes: parse_attributes("talk_conv").unwrap(),
//!     condition: Some(syntax::parse("dport = 443 and sip = 10.0.0.0/8").unwrap()),
//!     ..Query::default()
//! };
//! let partial = scan(db.path(), &query).unwrap(); // an empty database: no blocks
//! let result = partial.finish(SortBy::Bytes, Some(10));
//! assert_eq!(result.rows.len(), 0);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod agg;
mod control;
mod error;
pub mod exec;
pub mod output;
mod partial;
pub mod plan;
mod read;
mod result;
pub mod syntax;

pub use control::ScanControl;
pub use error::Error;
pub use exec::{scan, scan_blocks, scan_blocks_with, scan_with};
pub use partial::{
    GroupKey, Metrics, PartialAggregate, ScanStats, PARTIAL_JSON_VERSION, PARTIAL_MAGIC,
    PARTIAL_VERSION,
};
pub use plan::{parse_attributes, Attribute, Query};
pub use result::{QueryResult, Rows, SortBy};
