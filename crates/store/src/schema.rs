//! The columns of a block: the flow-record field names of `docs/specs/flow-record.md`.
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use trawl_flow::community_id::FlowTuple;
use trawl_flow::{App, AppLabel, AppSource, DirectionRecord, EndReason, FlowRecord, EARLY_PACKETS};

/// Version of the block schema and layout (`docs/specs/store.md`), stored in each file's
/// key-value metadata under [`VERSION_KEY`].
pub const STORE_VERSION: u32 = 1;
/// Parquet key-value metadata key holding [`STORE_VERSION`].
pub const VERSION_KEY: &str = "trawl.store.version";

/// Column names, in file order.
pub mod col {
    /// Initiator address, text (dotted quad or RFC 5952), dictionary-encoded.
    pub const SRC_IP: &str = "src_ip";
    /// Responder address.
    pub const DST_IP: &str = "dst_ip";
    /// Initiator port.
    pub const SRC_PORT: &str = "src_port";
    /// Responder port.
    pub const DST_PORT: &str = "dst_port";
    /// Protocol name (`tcp`, `udp`, ...) or number as text.
    pub const PROTO: &str = "proto";
    /// VLAN id, 0 untagged.
    pub const VLAN: &str = "vlan";
    /// First packet of the row, ns.
    pub const FIRST_NS: &str = "first_ns";
    /// Last packet of the row, ns.
    pub const LAST_NS: &str = "last_ns";
    /// Initiator → responder packets.
    pub const FWD_PACKETS: &str = "fwd_packets";
    /// Responder → initiator packets.
    pub const REV_PACKETS: &str = "rev_packets";
    /// Initiator → responder frame bytes.
    pub const FWD_BYTES: &str = "fwd_bytes";
    /// Responder → initiator frame bytes.
    pub const REV_BYTES: &str = "rev_bytes";
    /// Initiator → responder IP bytes.
    pub const FWD_IP_BYTES: &str = "fwd_ip_bytes";
    /// Responder → initiator IP bytes.
    pub const REV_IP_BYTES: &str = "rev_ip_bytes";
    /// OR of the initiator's TCP flags.
    pub const FWD_TCP_FLAGS: &str = "fwd_tcp_flags";
    /// OR of the responder's TCP flags.
    pub const REV_TCP_FLAGS: &str = "rev_tcp_flags";
    /// Why the record ended.
    pub const END_REASON: &str = "end_reason";
    /// Community ID v1 (seed 0) of the row's key: the 20-byte SHA-1 digest, whose base64
    /// after `1:` is the text form of the flow records (the text would take 34 bytes a row).
    pub const COMMUNITY_ID: &str = "community_id";
    /// The application label (`http`, `tls`, ...; `trawl_flow::App::name`), empty without
    /// one. Blocks written before it have no such column: their rows have no label.
    pub const APP: &str = "app";
    /// How the label was found: `payload`, `port`, empty without a label.
    pub const APP_SOURCE: &str = "app_source";
}

/// The 64-bit time and counter columns (unsigned 64-bit integers, written bit-packed as
/// deltas, uncompressed).
pub(crate) const U64_COLUMNS: [&str; 8] = [
    col::FIRST_NS,
    col::LAST_NS,
    col::FWD_PACKETS,
    col::REV_PACKETS,
    col::FWD_BYTES,
    col::REV_BYTES,
    col::FWD_IP_BYTES,
    col::REV_IP_BYTES,
];

/// Columns stored dictionary-encoded (low cardinality per block; the query engine works on
/// the dictionary indices).
pub const DICTIONARY_COLUMNS: [&str; 9] = [
    col::SRC_IP,
    col::DST_IP,
    col::SRC_PORT,
    col::DST_PORT,
    col::PROTO,
    col::VLAN,
    col::END_REASON,
    col::APP,
    col::APP_SOURCE,
];

fn dict_utf8() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// The Arrow schema of a block (also embedded in each file, so Arrow readers get the address
/// columns as dictionary arrays).
pub fn schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    SCHEMA
        .get_or_init(|| {
            Arc::new(Schema::new(vec![
                Field::new(col::SRC_IP, dict_utf8(), false),
                Field::new(col::DST_IP, dict_utf8(), false),
                Field::new(col::SRC_PORT, DataType::UInt16, false),
                Field::new(col::DST_PORT, DataType::UInt16, false),
                Field::new(col::PROTO, dict_utf8(), false),
                Field::new(col::VLAN, DataType::UInt16, false),
                Field::new(col::FIRST_NS, DataType::UInt64, false),
                Field::new(col::LAST_NS, DataType::UInt64, false),
                Field::new(col::FWD_PACKETS, DataType::UInt64, false),
                Field::new(col::REV_PACKETS, DataType::UInt64, false),
                Field::new(col::FWD_BYTES, DataType::UInt64, false),
                Field::new(col::REV_BYTES, DataType::UInt64, false),
                Field::new(col::FWD_IP_BYTES, DataType::UInt64, false),
                Field::new(col::REV_IP_BYTES, DataType::UInt64, false),
                Field::new(col::FWD_TCP_FLAGS, DataType::UInt8, false),
                Field::new(col::REV_TCP_FLAGS, DataType::UInt8, false),
                Field::new(col::END_REASON, dict_utf8(), false),
                Field::new(col::COMMUNITY_ID, DataType::FixedSizeBinary(20), false),
                Field::new(col::APP, dict_utf8(), false),
                Field::new(col::APP_SOURCE, dict_utf8(), false),
            ]))
        })
        .clone()
}

/// One stored row: the key, times and counters of a flow record within one block interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StoredFlow {
    /// Initiator address.
    pub src_ip: IpAddr,
    /// Responder address.
    pub dst_ip: IpAddr,
    /// Initiator port.
    pub src_port: u16,
    /// Responder port.
    pub dst_port: u16,
    /// IP protocol number.
    pub proto: u8,
    /// VLAN id.
    pub vlan: u16,
    /// First packet, ns.
    pub first_ns: u64,
    /// Last packet, ns.
    pub last_ns: u64,
    /// Initiator → responder packets.
    pub fwd_packets: u64,
    /// Responder → initiator packets.
    pub rev_packets: u64,
    /// Initiator → responder frame bytes.
    pub fwd_bytes: u64,
    /// Responder → initiator frame bytes.
    pub rev_bytes: u64,
    /// Initiator → responder IP bytes.
    pub fwd_ip_bytes: u64,
    /// Responder → initiator IP bytes.
    pub rev_ip_bytes: u64,
    /// OR of the initiator's TCP flags.
    pub fwd_tcp_flags: u8,
    /// OR of the responder's TCP flags.
    pub rev_tcp_flags: u8,
    /// Why the record ended.
    pub end_reason: EndReason,
    /// The application label, if the meter labelled the record (`--analyze app`).
    pub app: Option<AppLabel>,
}

impl StoredFlow {
    /// The Community ID v1 digest (seed 0) of the row's key, as the `community_id` column
    /// stores it: the same as its flow record's ([`FlowRecord::community_id`]).
    pub fn community_id_digest(&self) -> [u8; 20] {
        trawl_flow::CommunityId::default().digest_unchecked(&FlowTuple {
            proto: self.proto,
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            src_port: self.src_port,
            dst_port: self.dst_port,
        })
    }

    /// The row as a flow record (the shape the subscriber API hands out for live and stored
    /// flows alike). What the database does not keep is zero or empty: MAC addresses, the
    /// per-direction statistics (lengths, gaps, flag counts, zero windows,
    /// retransmissions), the first packets' lengths and gaps, payload bytes.
    pub fn to_record(&self) -> FlowRecord<'static> {
        let dir = |packets, bytes, ip_bytes, tcp_flags| DirectionRecord {
            packets,
            bytes,
            ip_bytes,
            tcp_flags,
            ..DirectionRecord::default()
        };
        FlowRecord {
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            src_port: self.src_port,
            dst_port: self.dst_port,
            proto: self.proto,
            vlan: self.vlan,
            tunnel: Default::default(),
            src_mac: [0; 6],
            dst_mac: [0; 6],
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            fwd: dir(
                self.fwd_packets,
                self.fwd_bytes,
                self.fwd_ip_bytes,
                self.fwd_tcp_flags,
            ),
            rev: dir(
                self.rev_packets,
                self.rev_bytes,
                self.rev_ip_bytes,
                self.rev_tcp_flags,
            ),
            first_lengths: [0; EARLY_PACKETS],
            first_iats_ns: [0; EARLY_PACKETS],
            first_count: 0,
            fwd_payload: &[],
            rev_payload: &[],
            end_reason: self.end_reason,
            extra: Default::default(),
            app: self.app,
        }
    }
}

impl From<&FlowRecord<'_>> for StoredFlow {
    fn from(r: &FlowRecord<'_>) -> Self {
        StoredFlow {
            src_ip: r.src_ip,
            dst_ip: r.dst_ip,
            src_port: r.src_port,
            dst_port: r.dst_port,
            proto: r.proto,
            vlan: r.vlan,
            first_ns: r.first_ns,
            last_ns: r.last_ns,
            fwd_packets: r.fwd.packets,
            rev_packets: r.rev.packets,
            fwd_bytes: r.fwd.bytes,
            rev_bytes: r.rev.bytes,
            fwd_ip_bytes: r.fwd.ip_bytes,
            rev_ip_bytes: r.rev.ip_bytes,
            fwd_tcp_flags: r.fwd.tcp_flags,
            rev_tcp_flags: r.rev.tcp_flags,
            end_reason: r.end_reason,
            app: r.app,
        }
    }
}

/// The `app` and `app_source` columns' text of a label (both empty without one).
pub fn app_text(label: Option<AppLabel>) -> (&'static str, &'static str) {
    label.map_or(("", ""), |l| (l.app.name(), l.source.name()))
}

/// A label from the `app` and `app_source` columns' text: `Ok(None)` for two empty values,
/// an error naming the value for text no label has.
pub fn app_from_text(app: &str, source: &str) -> Result<Option<AppLabel>, String> {
    if app.is_empty() && source.is_empty() {
        return Ok(None);
    }
    let a = App::from_name(app).ok_or_else(|| format!("column app: unknown value {app:?}"))?;
    let s = AppSource::from_name(source)
        .ok_or_else(|| format!("column app_source: unknown value {source:?}"))?;
    Ok(Some(AppLabel { app: a, source: s }))
}
