//! Flow and series export, and the collector side.
//!
//! - [`MessageEncoder`] builds IPFIX (RFC 7011, biflows per RFC 5103) and NetFlow v9
//!   messages from [`FlowRecord`](trawl_flow::FlowRecord)s with the templates of
//!   [`template`]; [`V5Encoder`] builds NetFlow v5 packets.
//! - [`ExportHub`] runs one thread per [`Destination`] (UDP, TCP, files, JSON lines,
//!   multicast feeds, Kafka with the `kafka` feature) behind bounded queues; producers push
//!   through an [`ExportHandle`]. Kafka messages the brokers do not take wait in a bounded
//!   on-disk [`spool`] (`docs/specs/kafka.md`).
//! - [`Decoder`] turns IPFIX, NetFlow v9 and v5 messages back into flow records (the
//!   collector), with a bounded template cache and counted errors.
//! - [`feed`]: multicast live feeds of flows and series, and the subscriber API with one
//!   callback shape for live and stored data.
//!
//! The wire format is specified in `docs/specs/ipfix.md`.
//!
//! ```
//! use trawl_export::{Decoder, DecoderConfig, Item, MessageEncoder, Protocol, TemplateRefresh};
//! use trawl_export::decode::empty_record;
//!
//! let mut rec = empty_record();
//! rec.src_ip = "10.0.0.1".parse().unwrap();
//! rec.dst_ip = "10.0.0.2".parse().unwrap();
//! rec.src_port = 1234;
//! rec.dst_port = 53;
//! rec.proto = 17;
//! rec.first_ns = 1_700_000_000_123_456_789;
//! rec.last_ns = 1_700_000_001_000_000_000;
//! rec.fwd.packets = 1;
//! rec.fwd.ip_bytes = 60;
//!
//! let mut enc = MessageEncoder::flows(Protocol::Ipfix, 1, 32473, 1472, TemplateRefresh::Once);
//! let mut messages = Vec::new();
//! enc.add_flow(&rec, 1_700_000_002, &mut |m: &[u8]| messages.push(m.to_vec()));
//! enc.flush(1_700_000_002, &mut |m: &[u8]| messages.push(m.to_vec()));
//!
//! let mut dec = Decoder::new(DecoderConfig::default());
//! let mut got = Vec::new();
//! let exporter = "127.0.0.1:9999".parse().unwrap();
//! for m in &messages {
//!     dec.decode(exporter, m, &mut |_, item| {
//!         if let Item::Flow(r) = item { got.push((r.src_port, r.dst_port, r.first_ns)); }
//!     });
//! }
//! assert_eq!(got, vec![(1234, 53, 1_700_000_000_123_456_789)]);
//! ```
// Unsafe code only where a kernel interface needs it, in `sys` (which allows it).
#![deny(unsafe_code)]
#![deny(missing_docs)]

pub mod avro;
pub mod decode;
mod destination;
pub mod encode;
mod exporter;
pub mod feed;
pub mod ie;
#[cfg(feature = "kafka")]
mod kafka;
pub mod pb;
pub mod sflow;
pub mod socket;
pub mod spool;
mod sys;
pub mod template;
mod text;
pub mod v5;

use std::path::PathBuf;

pub use decode::{
    DecodeError, DecodeErrorKind, Decoder, DecoderConfig, DecoderStats, Item, Origin,
    SflowInterface, SFLOW_VERSION,
};
pub use destination::{
    Biflow, Destination, FeedAddr, KafkaAcks, KafkaCompression, KafkaFormat, KafkaKey, KafkaTarget,
    DEFAULT_SPOOL_SIZE, MAX_KAFKA_BATCH,
};
pub use encode::{MessageEncoder, Protocol, TemplateRefresh};
pub use exporter::{
    Alarm, ExportConfig, ExportHandle, ExportHub, ExporterReport, UDP_MAX_MESSAGE_V4,
    UDP_MAX_MESSAGE_V6,
};
pub use v5::V5Encoder;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An `--export` / `[[export]]` destination or a feed address could not be understood.
    #[error("bad destination '{text}': {why}")]
    BadDestination {
        /// What was given.
        text: String,
        /// What is wrong with it.
        why: String,
    },
    /// A socket, file or thread could not be set up or used.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The system's error.
        source: std::io::Error,
    },
    /// The flow database could not be read.
    #[error("flow database: {0}")]
    Store(#[from] trawl_store::Error),
    /// A stored series file has a line that is not a series row.
    #[error("{}: line {line}: {why}", path.display())]
    BadSeriesFile {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
}
