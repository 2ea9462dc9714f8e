//! The flow meter.
//!
//! Packets ([`trawl_capture::PacketRecord`]) go through [`decode()`](decode::decode) into a
//! caller-owned [`Decoded`](decode::Decoded), are keyed by a normalised bidirectional
//! [`FlowKey`], and update a flow entry in a preallocated table. Flows leave as
//! [`FlowRecord`]s on idle or active timeout, TCP close, table pressure, or end of input, through
//! a [`FlowSink`]. [`format`](mod@format) writes records as JSON lines or CSV.
//!
//! ```
//! use trawl_capture::{Direction, LinkType, PacketRecord};
//! use trawl_flow::{FlowConfig, FlowMeter, FlowRecord};
//!
//! // An Ethernet/IPv4/UDP packet 10.0.0.1:1234 -> 10.0.0.2:53 with 4 payload bytes.
//! let frame: &[u8] = &[
//!     0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00, // Ethernet
//!     0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, // IPv4
//!     0x04, 0xd2, 0, 53, 0, 12, 0, 0, // UDP
//!     1, 2, 3, 4,
//! ];
//! let mut meter = FlowMeter::new(FlowConfig { capacity: 1024, ..FlowConfig::default() });
//! let pkt = PacketRecord {
//!     ts_ns: 1_700_000_000_000_000_000,
//!     wire_len: frame.len() as u32,
//!     iface: 0,
//!     direction: Direction::Unknown,
//!     link_type: LinkType::ETHERNET,
//!     data: frame,
//! };
//! let mut records = Vec::new();
//! let mut sink = |r: &FlowRecord<'_>| records.push((r.src_port, r.dst_port, r.fwd.packets));
//! meter.process(&pkt, &mut sink);
//! meter.flush(&mut sink);
//! assert_eq!(records, vec![(1234, 53, 1)]);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod app_label;
pub mod community_id;
mod config;
pub mod decode;
mod entry;
pub mod format;
mod fragments;
pub mod hash;
pub mod key;
mod meter;
mod mini;
mod record;
mod sha1;
mod standard;
mod state;
mod table;
mod timing;
pub mod tunnel;

pub use app_label::{App, AppLabel, AppSource};
pub use community_id::{CommunityId, CommunityIdText};
pub use config::{limits, FeatureLevel, FlowConfig, SECOND_NS};
pub use key::FlowKey;
pub use meter::{FlowMeter, FlowSink, MeterStats, PacketOutcome, TableSize};
pub use record::{DirectionRecord, EndReason, FlowRecord, InterfaceInfo, ProtoName, RecordExtra};
pub use state::EARLY_PACKETS;
pub use tunnel::{Tunnel, TunnelType};

/// Largest flow-table capacity (`FlowConfig::capacity`) the index can address.
pub const MAX_CAPACITY: usize = table::MAX_CAPACITY;
