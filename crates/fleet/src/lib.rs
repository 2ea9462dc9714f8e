//! Fleet queries (goProbe's global query; docs/specs/distributed.md): one query, many probes.
//!
//! - [`Fleet`] (`config`): the probes of a `probes.toml` (name, URL, token and CA files,
//!   `site` and `role` tags) or of `--probe URL`, with the per-probe timeout, the concurrency
//!   and the connection retries.
//! - `condition`: the `probe`, `site` and `role` comparisons of a condition resolved per probe;
//!   a probe the condition excludes is not asked.
//! - `client`: one probe's `GET /api/v1/partial` over HTTP/1.1 (TLS when `https`), connection
//!   retries with back-off, a deadline over the whole exchange.
//! - [`run`] (`fanout`): asks the probes concurrently, decodes each binary partial aggregate
//!   ([`trawl_query::PartialAggregate::from_bytes`]) and merges them as they arrive into one
//!   [`FleetAnswer`], with a [`ProbeReport`] per probe (ok, timeout, refused, error, skipped).
//!
//! ```no_run
//! let mut fleet = trawl_fleet::Fleet::default();
//! fleet.add_url("fra1=http://127.0.0.1:8080").unwrap();
//! let query = trawl_query::Query {
//!     attributes: trawl_query::parse_attributes("talk_conv,probe").unwrap(),
//!     ..trawl_query::Query::default()
//! };
//! let answer = trawl_fleet::run(&fleet, &query).unwrap();
//! let incomplete = answer.incomplete();
//! let result = answer.partial.finish(trawl_query::SortBy::Bytes, Some(10));
//! println!("{} rows, incomplete: {incomplete}", result.rows.len());
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod client;
pub mod condition;
mod config;
mod error;
mod fanout;

pub use config::{Endpoint, Fleet, Probe, ProbeConfig};
pub use error::Error;
pub use fanout::{encode, incomplete, run, run_with, write_json, FleetAnswer, ProbeReport, Status};
