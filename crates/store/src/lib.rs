//! The flow database: flow records stored in Parquet blocks, one per interface and 5-minute
//! interval of packet time, under day directories
//! (`DB/iface=eth0/date=2026-11-22/1205.parquet`, specified in `docs/specs/store.md`).
//!
//! - [`Ingest`] is the entry point of every producer of records: it buffers rows per open
//!   block ([`StoredFlow`], the key, times and counters of a [`trawl_flow::FlowRecord`]) and
//!   writes each block with [`write_block`] once no more records can arrive for it.
//! - [`write_block`] publishes a block atomically (temporary file, fsync, link, fsync dir).
//! - [`list_blocks`] finds the blocks of a time range and interfaces from names alone;
//!   [`read_block`] reads one back whole through the `parquet` crate (the query engine,
//!   `trawl-query`, reads only the columns it needs), [`read_block_direct`] with [`pages`],
//!   the direct page decoder the query engine uses for trawl's own column chunks.
//! - [`retention::enforce`] deletes by age and disk budget, oldest first.
//! - [`series`] stores per-second series with minute and hour rollups beside the blocks,
//!   [`alarms`] the events of detection blocks; both are read back by time range.
//!
//! ```
//! use std::net::IpAddr;
//! use trawl_store::{list_blocks, read_block, BlockFilter, Ingest, StoreConfig, StoredFlow};
//!
//! let db = tempfile::tempdir().unwrap();
//! let mut ingest = Ingest::open(db.path(), StoreConfig::default()).unwrap();
//! let eth0 = ingest.iface("eth0").unwrap();
//! let t = 1_763_812_800_000_000_000; // 2025-11-22 12:00:00 UTC
//! let row = StoredFlow {
//!     src_ip: "10.0.0.1".parse::<IpAddr>().unwrap(),
//!     dst_ip: "10.0.0.2".parse::<IpAddr>().unwrap(),
//!     src_port: 40000, dst_port: 443, proto: 6, vlan: 0,
//!     first_ns: t + 1, last_ns: t + 2,
//!     fwd_packets: 3, rev_packets: 2, fwd_bytes: 300, rev_bytes: 200,
//!     fwd_ip_bytes: 258, rev_ip_bytes: 172, fwd_tcp_flags: 2, rev_tcp_flags: 18,
//!     end_reason: trawl_flow::EndReason::End,
//!     app: None, extra: Default::default(),
//! };
//! ingest.push_row(eth0, row).unwrap();
//! ingest.finish().unwrap();
//! let blocks = list_blocks(db.path(), &BlockFilter::default()).unwrap();
//! assert!(blocks[0].path.ends_with("iface=eth0/date=2025-11-22/1200.parquet"));
//! assert_eq!(read_block(&blocks[0].path).unwrap(), vec![row]);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod alarms;
mod error;
pub mod hash;
pub mod layout;
pub mod pages;
mod reader;
pub mod recent;
pub mod retention;
pub mod scan;
pub mod schema;
pub mod series;
mod writer;

pub use error::{Error, Result};
pub use layout::{
    list_blocks, list_blocks_and_strays, list_ifaces, BlockFilter, BlockRef, Listing, BLOCK_NS,
};
pub use reader::{block_shape, proto_number, read_block, read_block_direct};
pub use retention::Retention;
pub use schema::{StoredFlow, STORE_VERSION};
pub use writer::{encode_batch, write_block, Codec, IfaceId, Ingest, IngestStats, StoreConfig};
