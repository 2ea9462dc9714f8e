//! The columns of a block: the flow-record field names of `docs/specs/flow-record.md`.
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use trawl_flow::community_id::FlowTuple;
use trawl_flow::{
    App, AppLabel, AppSource, DirectionRecord, EndReason, FlowRecord, RecordExtra, Tunnel,
    EARLY_PACKETS,
};

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
    /// Autonomous system of the source address (enrichment), 0 when not known. This and the
    /// columns after it were added later: blocks written before have none of them, and
    /// trawl's readers give their rows the values of "not known".
    pub const SRC_AS: &str = "src_as";
    /// Autonomous system of the destination address.
    pub const DST_AS: &str = "dst_as";
    /// ISO 3166 country of the source address (two letters), empty when not known.
    pub const SRC_COUNTRY: &str = "src_country";
    /// Country of the destination address.
    pub const DST_COUNTRY: &str = "dst_country";
    /// TCP handshake round trip, initiator's SYN → responder's SYN-ACK, ns; null without one.
    pub const FWD_RTT_HANDSHAKE_NS: &str = "fwd_rtt_handshake_ns";
    /// Round-trip samples of the initiator's segments.
    pub const FWD_RTT_SAMPLES: &str = "fwd_rtt_samples";
    /// Smallest sample, ns; null without samples.
    pub const FWD_RTT_MIN_NS: &str = "fwd_rtt_min_ns";
    /// Largest sample, ns; null without samples.
    pub const FWD_RTT_MAX_NS: &str = "fwd_rtt_max_ns";
    /// Mean of the samples, ns; null without samples.
    pub const FWD_RTT_MEAN_NS: &str = "fwd_rtt_mean_ns";
    /// Handshake round trip, SYN-ACK → initiator's ACK, ns; null without one.
    pub const REV_RTT_HANDSHAKE_NS: &str = "rev_rtt_handshake_ns";
    /// Round-trip samples of the responder's segments.
    pub const REV_RTT_SAMPLES: &str = "rev_rtt_samples";
    /// Smallest sample, ns; null without samples.
    pub const REV_RTT_MIN_NS: &str = "rev_rtt_min_ns";
    /// Largest sample, ns; null without samples.
    pub const REV_RTT_MAX_NS: &str = "rev_rtt_max_ns";
    /// Mean of the samples, ns; null without samples.
    pub const REV_RTT_MEAN_NS: &str = "rev_rtt_mean_ns";
    /// The outer tunnel's type (`gre`, `vxlan`, ...), empty without one (`--tunnel inner`).
    pub const TUNNEL_TYPE: &str = "tunnel_type";
    /// The outer IP header's source address, empty without a tunnel.
    pub const TUNNEL_SRC: &str = "tunnel_src";
    /// The outer IP header's destination address, empty without a tunnel.
    pub const TUNNEL_DST: &str = "tunnel_dst";
    /// The tunnel's id (GRE key, VNI, TEID, ...), 0 without one.
    pub const TUNNEL_ID: &str = "tunnel_id";
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
pub const DICTIONARY_COLUMNS: [&str; 14] = [
    col::SRC_IP,
    col::DST_IP,
    col::SRC_PORT,
    col::DST_PORT,
    col::PROTO,
    col::VLAN,
    col::END_REASON,
    col::APP,
    col::APP_SOURCE,
    col::SRC_COUNTRY,
    col::DST_COUNTRY,
    col::TUNNEL_TYPE,
    col::TUNNEL_SRC,
    col::TUNNEL_DST,
];

/// The round-trip columns holding nanoseconds (optional unsigned 64-bit integers, written as
/// the counters are).
pub(crate) const RTT_NS_COLUMNS: [&str; 6] = [
    col::FWD_RTT_HANDSHAKE_NS,
    col::FWD_RTT_MIN_NS,
    col::FWD_RTT_MAX_NS,
    col::REV_RTT_HANDSHAKE_NS,
    col::REV_RTT_MIN_NS,
    col::REV_RTT_MAX_NS,
];

/// The columns added after the first blocks of version 1 were written: `app` and
/// `app_source` first, then these. A block written before has none of them.
pub const LATER_COLUMNS: [&str; 18] = [
    col::SRC_AS,
    col::DST_AS,
    col::SRC_COUNTRY,
    col::DST_COUNTRY,
    col::FWD_RTT_HANDSHAKE_NS,
    col::FWD_RTT_SAMPLES,
    col::FWD_RTT_MIN_NS,
    col::FWD_RTT_MAX_NS,
    col::FWD_RTT_MEAN_NS,
    col::REV_RTT_HANDSHAKE_NS,
    col::REV_RTT_SAMPLES,
    col::REV_RTT_MIN_NS,
    col::REV_RTT_MAX_NS,
    col::REV_RTT_MEAN_NS,
    col::TUNNEL_TYPE,
    col::TUNNEL_SRC,
    col::TUNNEL_DST,
    col::TUNNEL_ID,
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
                Field::new(col::SRC_AS, DataType::UInt32, false),
                Field::new(col::DST_AS, DataType::UInt32, false),
                Field::new(col::SRC_COUNTRY, dict_utf8(), false),
                Field::new(col::DST_COUNTRY, dict_utf8(), false),
                Field::new(col::FWD_RTT_HANDSHAKE_NS, DataType::UInt64, true),
                Field::new(col::FWD_RTT_SAMPLES, DataType::UInt32, false),
                Field::new(col::FWD_RTT_MIN_NS, DataType::UInt64, true),
                Field::new(col::FWD_RTT_MAX_NS, DataType::UInt64, true),
                Field::new(col::FWD_RTT_MEAN_NS, DataType::Float64, true),
                Field::new(col::REV_RTT_HANDSHAKE_NS, DataType::UInt64, true),
                Field::new(col::REV_RTT_SAMPLES, DataType::UInt32, false),
                Field::new(col::REV_RTT_MIN_NS, DataType::UInt64, true),
                Field::new(col::REV_RTT_MAX_NS, DataType::UInt64, true),
                Field::new(col::REV_RTT_MEAN_NS, DataType::Float64, true),
                Field::new(col::TUNNEL_TYPE, dict_utf8(), false),
                Field::new(col::TUNNEL_SRC, dict_utf8(), false),
                Field::new(col::TUNNEL_DST, dict_utf8(), false),
                Field::new(col::TUNNEL_ID, DataType::UInt32, false),
            ]))
        })
        .clone()
}

/// One stored row: the key, times and counters of a flow record within one block interval.
#[derive(Clone, Copy, Debug, PartialEq)]
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
    /// Enrichment, round trips and tunnel (all "not known" by default).
    pub extra: StoredExtra,
}

/// The fields of a row beyond the key, counters and label: what enrichment, the `standard`
/// level and `--tunnel inner` add to a record. The default is a record without any.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StoredExtra {
    /// Autonomous system of the source address, 0 when not known.
    pub src_as: u32,
    /// Autonomous system of the destination address, 0 when not known.
    pub dst_as: u32,
    /// Country of the source address (two ASCII letters), zeros when not known.
    pub src_country: [u8; 2],
    /// Country of the destination address.
    pub dst_country: [u8; 2],
    /// Round trips of the initiator's segments.
    pub fwd_rtt: StoredRtt,
    /// Round trips of the responder's segments.
    pub rev_rtt: StoredRtt,
    /// The outer tunnel (type `None` without one).
    pub tunnel: Tunnel,
}

/// One direction's round-trip fields ([`DirectionRecord`]'s `rtt_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StoredRtt {
    /// Handshake half, ns; `None` without a timed handshake.
    pub handshake_ns: Option<u64>,
    /// Samples taken.
    pub samples: u32,
    /// Smallest sample, ns (0 without samples).
    pub min_ns: u64,
    /// Largest sample, ns.
    pub max_ns: u64,
    /// Mean of the samples, ns.
    pub mean_ns: f64,
}

impl StoredRtt {
    fn of(d: &DirectionRecord) -> StoredRtt {
        StoredRtt {
            handshake_ns: d.rtt_handshake_ns,
            samples: d.rtt_samples,
            min_ns: d.rtt_min_ns,
            max_ns: d.rtt_max_ns,
            mean_ns: d.rtt_mean_ns,
        }
    }

    /// Sets the round-trip fields of `d`.
    fn apply(&self, d: &mut DirectionRecord) {
        d.rtt_handshake_ns = self.handshake_ns;
        d.rtt_samples = self.samples;
        d.rtt_min_ns = self.min_ns;
        d.rtt_max_ns = self.max_ns;
        d.rtt_mean_ns = self.mean_ns;
    }
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
    /// retransmissions), the first packets' lengths and gaps, payload bytes, the collected
    /// fields (sampling rate, agent, interfaces).
    pub fn to_record(&self) -> FlowRecord<'static> {
        let dir = |packets, bytes, ip_bytes, tcp_flags, rtt: &StoredRtt| {
            let mut d = DirectionRecord {
                packets,
                bytes,
                ip_bytes,
                tcp_flags,
                ..DirectionRecord::default()
            };
            rtt.apply(&mut d);
            d
        };
        let x = &self.extra;
        FlowRecord {
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            src_port: self.src_port,
            dst_port: self.dst_port,
            proto: self.proto,
            vlan: self.vlan,
            tunnel: x.tunnel,
            src_mac: [0; 6],
            dst_mac: [0; 6],
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            fwd: dir(
                self.fwd_packets,
                self.fwd_bytes,
                self.fwd_ip_bytes,
                self.fwd_tcp_flags,
                &x.fwd_rtt,
            ),
            rev: dir(
                self.rev_packets,
                self.rev_bytes,
                self.rev_ip_bytes,
                self.rev_tcp_flags,
                &x.rev_rtt,
            ),
            first_lengths: [0; EARLY_PACKETS],
            first_iats_ns: [0; EARLY_PACKETS],
            first_count: 0,
            fwd_payload: &[],
            rev_payload: &[],
            end_reason: self.end_reason,
            extra: RecordExtra {
                src_as: x.src_as,
                dst_as: x.dst_as,
                src_country: x.src_country,
                dst_country: x.dst_country,
                ..RecordExtra::default()
            },
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
            extra: StoredExtra {
                src_as: r.extra.src_as,
                dst_as: r.extra.dst_as,
                src_country: r.extra.src_country,
                dst_country: r.extra.dst_country,
                fwd_rtt: StoredRtt::of(&r.fwd),
                rev_rtt: StoredRtt::of(&r.rev),
                // Only a tunnel's fields are kept (`tunnel_*` columns are empty without one).
                tunnel: if r.tunnel.is_some() {
                    r.tunnel
                } else {
                    Tunnel::default()
                },
            },
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
