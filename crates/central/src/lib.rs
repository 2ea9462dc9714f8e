//! The central tier: trawl's flow records on their way from Kafka into a flow database or
//! ClickHouse, and queries over ClickHouse.
//!
//! - [`message`]: a Kafka message's value (JSON or Protobuf, as `kafka://` exports write
//!   them) back into a [`FlowRecord`](trawl_flow::FlowRecord).
//! - [`OffsetTracker`]: which offsets may be committed, given which records the sink has made
//!   durable; `consumer` (feature `kafka`): the librdkafka consumer that commits them.
//! - [`goflow2`]: GoFlow2's `FlowMessage`s (`goflow2 -format=bin`) as one-way records.
//! - [`series_alarms`]: the series and alarms topics' messages, and their table rows.
//! - [`schema`]: the ClickHouse DDL per server generation; [`rowbinary`]: rows for
//!   `INSERT ... FORMAT RowBinary`, [`native`]: those rows as a sorted `Native` block; [`http`]: the HTTP interface; [`sql`]: the query
//!   language as SQL, and the answer back into a [`QueryResult`](trawl_query::QueryResult).
//!
//! ```
//! use trawl_central::{message, rowbinary};
//! let line = br#"{"src_ip":"10.0.0.1","dst_ip":"10.0.0.2","src_port":1,"dst_port":53,"proto":"udp","first_ns":1,"last_ns":2}"#;
//! let parsed = message::parse(line).unwrap();
//! assert_eq!(parsed.record.proto, 17);
//! let mut row = Vec::new();
//! rowbinary::flow_row(&parsed.record, "probe-1", parsed.store_iface("kafka"), &mut row);
//! assert!(!row.is_empty());
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

#[cfg(feature = "kafka")]
pub mod consumer;
pub mod goflow2;
pub mod http;
pub mod message;
pub mod native;
mod offsets;
pub mod rowbinary;
pub mod schema;
pub mod series_alarms;
pub mod sql;

pub use offsets::OffsetTracker;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A Kafka message's value is not a trawl flow record (JSON or Protobuf).
    #[error("not a flow record: {0}")]
    BadMessage(String),
    /// A `BROKERS/TOPIC` source could not be understood.
    #[error("bad Kafka source '{text}': {why}")]
    BadSource {
        /// What was given.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// The Kafka client failed (creating the consumer, consuming, committing).
    #[error("Kafka: {what}: {why}")]
    Kafka {
        /// What was being done.
        what: String,
        /// librdkafka's message.
        why: String,
    },
    /// A ClickHouse URL could not be understood.
    #[error("bad ClickHouse URL '{url}': {why}")]
    BadUrl {
        /// What was given.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The connection to ClickHouse failed.
    #[error("ClickHouse {url}: cannot {what}: {source}")]
    Http {
        /// The server.
        url: String,
        /// What was being done.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// ClickHouse answered with an error.
    #[error("ClickHouse {url} answered {status}: {message}")]
    Server {
        /// The server.
        url: String,
        /// HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// ClickHouse's answer to a query is not what the query asked for.
    #[error("unexpected ClickHouse answer: {what}")]
    BadAnswer {
        /// What was wrong.
        what: String,
    },
}
