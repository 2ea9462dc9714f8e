//! trawl's HTTP API: the stored flows, packets and series of a probe, and the counters of its
//! running composition, over HTTP/1.1 (optionally TLS), read-only.
//!
//! - [`ApiConfig`]: where to listen, the bearer token and TLS files, the flow database and
//!   packet store to serve; [`ApiConfig::check`] refuses a non-loopback address without a
//!   token.
//! - [`Server`]: binds, starts a tokio runtime on threads of its own (never a capture core:
//!   it is started on the thread that builds the composition, before any pinning) and serves
//!   the routes of `routes` until [`Server::shutdown`].
//! - [`HttpApi`]: the `http_api` block; `trawl run --api ADDR:PORT` adds it, its `series` input
//!   takes the run's per-second rows, and it reads the composition's counters through
//!   [`trawl_compose::Reporter`]. `trawl serve` starts a [`Server`] without a composition.
//!
//! The endpoints are specified in docs/specs/api.md; the OpenAPI document is served at
//! `/api/v1/openapi.json`, the web console (`console`: embedded static files) at `/`.
//!
//! ```no_run
//! let config = trawl_api::ApiConfig {
//!     listen: "127.0.0.1:8080".into(),
//!     db: Some("/var/lib/trawl/db".into()),
//!     ..trawl_api::ApiConfig::default()
//! };
//! config.check().unwrap();
//! let server = trawl_api::Server::start(&config).unwrap();
//! println!("serving on {}", server.local_addr());
//! server.shutdown();
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod auth;
mod block;
mod calls;
mod config;
mod console;
mod coordinator;
mod error;
mod fleet_series;
mod fleet_stream;
mod live;
mod logs;
mod metrics;
mod params;
mod partial;
mod routes;
mod scans;
mod server;

pub use block::HttpApi;
pub use config::ApiConfig;
pub use error::Error;
pub use server::Server;

/// Every block type trawl ships: [`trawl_blocks::registry`] and the `http_api` block.
pub fn registry() -> trawl_compose::Registry {
    let mut r = trawl_blocks::registry();
    r.register::<HttpApi>();
    r
}
