//! The templates trawl exports: which fields, in which order, under which template id.
//! Fixed at compile time, so exporter and decoder (and `docs/specs/ipfix.md`) agree.
use trawl_flow::FeatureLevel;

use crate::ie::{Dir, Field};

/// A template: id and field list.
#[derive(Clone, Copy, Debug)]
pub struct TemplateDef {
    /// Template id (256 and up).
    pub id: u16,
    /// Fields in record order.
    pub fields: &'static [Field],
    /// Which protocol family the template is for (the record's address family decides).
    pub family: Family,
}

/// What a template carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// Flow records with IPv4 addresses.
    FlowV4,
    /// Flow records with IPv6 addresses.
    FlowV6,
    /// Per-second series rows.
    Series,
}

/// IPFIX template id of IPv4 flow records.
pub const FLOW_V4_ID: u16 = 256;
/// IPFIX template id of IPv6 flow records.
pub const FLOW_V6_ID: u16 = 257;
/// IPFIX template id of series rows.
pub const SERIES_ID: u16 = 258;
/// IPFIX template id of padding records (one variable-length paddingOctets field): the set
/// that fills a message to exactly the segment size under UDP segmentation offload.
pub const PADDING_ID: u16 = 259;
/// IPFIX template id of one-way flow records, IPv4 (`biflow=off`).
pub const ONE_WAY_V4_ID: u16 = 260;
/// IPFIX template id of one-way flow records, IPv6 (`biflow=off`).
pub const ONE_WAY_V6_ID: u16 = 261;
/// IANA element paddingOctets (RFC 7011 / IANA IPFIX registry).
pub const PADDING_OCTETS: u16 = 210;

macro_rules! flow_fields {
    ($src:expr, $dst:expr) => {
        &[
            $src,
            $dst,
            Field::SrcPort,
            Field::DstPort,
            Field::Proto,
            Field::Vlan,
            Field::SrcMac,
            Field::DstMac,
            Field::StartNs,
            Field::EndNs,
            Field::StartMs,
            Field::EndMs,
            Field::FlowEndReason,
            Field::TrawlEndReason,
            Field::Packets(Dir::Fwd),
            Field::IpBytes(Dir::Fwd),
            Field::FrameBytes(Dir::Fwd),
            Field::TcpFlags(Dir::Fwd),
            Field::Packets(Dir::Rev),
            Field::IpBytes(Dir::Rev),
            Field::FrameBytes(Dir::Rev),
            Field::TcpFlags(Dir::Rev),
            Field::Fin(Dir::Fwd),
            Field::Rst(Dir::Fwd),
            Field::Psh(Dir::Fwd),
            Field::Urg(Dir::Fwd),
            Field::Fin(Dir::Rev),
            Field::Rst(Dir::Rev),
            Field::Psh(Dir::Rev),
            Field::Urg(Dir::Rev),
            Field::LenMin(Dir::Fwd),
            Field::LenMax(Dir::Fwd),
            Field::LenMean(Dir::Fwd),
            Field::LenStd(Dir::Fwd),
            Field::IatMin(Dir::Fwd),
            Field::IatMax(Dir::Fwd),
            Field::IatMean(Dir::Fwd),
            Field::IatStd(Dir::Fwd),
            Field::Syn(Dir::Fwd),
            Field::SynAck(Dir::Fwd),
            Field::Ece(Dir::Fwd),
            Field::Cwr(Dir::Fwd),
            Field::ZeroWindow(Dir::Fwd),
            Field::Retrans(Dir::Fwd),
            Field::LenMin(Dir::Rev),
            Field::LenMax(Dir::Rev),
            Field::LenMean(Dir::Rev),
            Field::LenStd(Dir::Rev),
            Field::IatMin(Dir::Rev),
            Field::IatMax(Dir::Rev),
            Field::IatMean(Dir::Rev),
            Field::IatStd(Dir::Rev),
            Field::Syn(Dir::Rev),
            Field::SynAck(Dir::Rev),
            Field::Ece(Dir::Rev),
            Field::Cwr(Dir::Rev),
            Field::ZeroWindow(Dir::Rev),
            Field::Retrans(Dir::Rev),
            Field::FirstLengths,
            Field::FirstGaps,
            Field::CommunityId,
            Field::ApplicationId,
            Field::ApplicationName,
            Field::ApplicationSource,
        ]
    };
}

/// IPFIX flow record template, IPv4.
pub const IPFIX_FLOW_V4: TemplateDef = TemplateDef {
    id: FLOW_V4_ID,
    fields: flow_fields!(Field::SrcIpv4, Field::DstIpv4),
    family: Family::FlowV4,
};

/// IPFIX flow record template, IPv6.
pub const IPFIX_FLOW_V6: TemplateDef = TemplateDef {
    id: FLOW_V6_ID,
    fields: flow_fields!(Field::SrcIpv6, Field::DstIpv6),
    family: Family::FlowV6,
};

/// Groups of optional fields that a biflow template (256/257) gains at its end when a record
/// has them, each set of groups under a template id of its own ([`extended_flow`]): records
/// without round-trip times, tunnel or enrichment keep the base template, and collectors
/// that know none of trawl's enterprise elements see no more of them than before.
pub mod ext {
    /// TCP round-trip fields (`*_rtt_*`): the record has a timed handshake or samples.
    pub const RTT: u8 = 1;
    /// The outer tunnel (`--tunnel inner`).
    pub const TUNNEL: u8 = 2;
    /// Enrichment: AS numbers and countries.
    pub const GEO: u8 = 4;
    /// Every combination (1..=ALL).
    pub const ALL: u8 = 7;
}

/// Template id of the biflow template with the extension groups `mask` (1..=[`ext::ALL`]):
/// 262 (IPv4) and 263 (IPv6) for mask 1, two ids more for each mask after it, up to 275.
pub const fn extended_flow_id(mask: u8, v6: bool) -> u16 {
    EXTENDED_BASE_ID + 2 * (mask as u16 - 1) + v6 as u16
}

/// First id of the extended biflow templates.
pub const EXTENDED_BASE_ID: u16 = 262;

const RTT_FIELDS: [Field; 10] = [
    Field::RttHandshake(Dir::Fwd),
    Field::RttSamples(Dir::Fwd),
    Field::RttMin(Dir::Fwd),
    Field::RttMax(Dir::Fwd),
    Field::RttMean(Dir::Fwd),
    Field::RttHandshake(Dir::Rev),
    Field::RttSamples(Dir::Rev),
    Field::RttMin(Dir::Rev),
    Field::RttMax(Dir::Rev),
    Field::RttMean(Dir::Rev),
];
const TUNNEL_FIELDS: [Field; 4] = [
    Field::TunnelType,
    Field::TunnelSrc,
    Field::TunnelDst,
    Field::TunnelId,
];
const GEO_FIELDS: [Field; 4] = [
    Field::SrcAs,
    Field::DstAs,
    Field::SrcCountry,
    Field::DstCountry,
];

/// The fields of extension groups `mask` in template order (round trip, tunnel, enrichment).
pub fn extension_fields(mask: u8) -> impl Iterator<Item = Field> {
    let groups: [(u8, &'static [Field]); 3] = [
        (ext::RTT, &RTT_FIELDS),
        (ext::TUNNEL, &TUNNEL_FIELDS),
        (ext::GEO, &GEO_FIELDS),
    ];
    groups
        .into_iter()
        .filter(move |(bit, _)| mask & bit != 0)
        .flat_map(|(_, f)| f.iter().copied())
}

/// The biflow template of `v6` records with the extension groups `mask` (0: the base
/// template 256/257): the base fields, then each group's.
pub fn extended_flow(mask: u8, v6: bool) -> TemplateDef {
    static ALL: std::sync::OnceLock<Vec<TemplateDef>> = std::sync::OnceLock::new();
    let base = if v6 { IPFIX_FLOW_V6 } else { IPFIX_FLOW_V4 };
    if mask == 0 {
        return base;
    }
    let all = ALL.get_or_init(|| {
        let mut v = Vec::new();
        for m in 1..=ext::ALL {
            for t in [IPFIX_FLOW_V4, IPFIX_FLOW_V6] {
                let v6 = t.family == Family::FlowV6;
                let fields: Vec<Field> = t
                    .fields
                    .iter()
                    .copied()
                    .chain(extension_fields(m))
                    .collect();
                v.push(TemplateDef {
                    id: extended_flow_id(m, v6),
                    // Built once per process, kept for its lifetime like the static ones.
                    fields: Box::leak(fields.into_boxed_slice()),
                    family: t.family,
                });
            }
        }
        v
    });
    all[2 * usize::from(mask - 1) + usize::from(v6)]
}

/// First id of the biflow templates of the `minimal` level; `standard`'s start
/// [`LEVEL_IDS`] later. Each level has a base template per address family and one per
/// combination of extension groups, laid out as 256/257 and 262–275 are for `full`.
pub const LEVEL_BASE_ID: u16 = 276;
/// Ids each level below `full` takes (2 base + 2 per extension mask).
pub const LEVEL_IDS: u16 = 2 + 2 * ext::ALL as u16;

/// Template id of the biflow template of `level` (`minimal` or `standard`) with extension
/// groups `mask` (0: its base template).
pub const fn level_flow_id(level: FeatureLevel, mask: u8, v6: bool) -> u16 {
    let base = match level {
        FeatureLevel::Minimal => LEVEL_BASE_ID,
        _ => LEVEL_BASE_ID + LEVEL_IDS,
    };
    let after_base = if mask == 0 { 0 } else { 2 * mask as u16 };
    base + after_base + v6 as u16
}

/// Whether a record of `level` has field `f` (`docs/specs/flow-record.md`'s feature levels):
/// `minimal` keeps the key, times, end reason, counts and flag unions per direction, the
/// Community ID, the application label, and the extension groups (tunnel, enrichment);
/// `standard` adds the length and gap minimum, maximum and mean, the TCP event counts
/// `full` has but PSH, URG, ECE and CWR, and the handshake's round-trip halves; `full` keeps
/// all (the round-trip samples too).
pub fn kept_by(level: FeatureLevel, f: Field) -> bool {
    let minimal = matches!(
        f,
        Field::SrcIpv4
            | Field::SrcIpv6
            | Field::DstIpv4
            | Field::DstIpv6
            | Field::SrcPort
            | Field::DstPort
            | Field::Proto
            | Field::Vlan
            | Field::StartNs
            | Field::EndNs
            | Field::StartMs
            | Field::EndMs
            | Field::FlowEndReason
            | Field::TrawlEndReason
            | Field::Packets(_)
            | Field::IpBytes(_)
            | Field::FrameBytes(_)
            | Field::TcpFlags(_)
            | Field::CommunityId
            | Field::ApplicationId
            | Field::ApplicationName
            | Field::ApplicationSource
    ) || TUNNEL_FIELDS.contains(&f)
        || GEO_FIELDS.contains(&f);
    let standard = matches!(
        f,
        Field::LenMin(_)
            | Field::LenMax(_)
            | Field::LenMean(_)
            | Field::IatMin(_)
            | Field::IatMax(_)
            | Field::IatMean(_)
            | Field::Syn(_)
            | Field::SynAck(_)
            | Field::Fin(_)
            | Field::Rst(_)
            | Field::ZeroWindow(_)
            | Field::Retrans(_)
            | Field::RttHandshake(_)
    );
    match level {
        FeatureLevel::Minimal => minimal,
        FeatureLevel::Standard => minimal || standard,
        FeatureLevel::Full => true,
    }
}

/// The biflow template of `level` for `v6` records with extension groups `mask`: `full`'s
/// ([`extended_flow`]) with only the fields the level keeps, under the level's own id
/// ([`level_flow_id`]); for `full`, [`extended_flow`] itself.
pub fn level_flow(level: FeatureLevel, mask: u8, v6: bool) -> TemplateDef {
    if level.is_full() {
        return extended_flow(mask, v6);
    }
    static ALL: std::sync::OnceLock<Vec<TemplateDef>> = std::sync::OnceLock::new();
    let all = ALL.get_or_init(|| {
        let mut v = Vec::new();
        for level in [FeatureLevel::Minimal, FeatureLevel::Standard] {
            for mask in 0..=ext::ALL {
                for v6 in [false, true] {
                    let full = extended_flow(mask, v6);
                    let fields: Vec<Field> = full
                        .fields
                        .iter()
                        .copied()
                        .filter(|&f| kept_by(level, f))
                        .collect();
                    v.push(TemplateDef {
                        id: level_flow_id(level, mask, v6),
                        // Built once per process, kept for its lifetime like the static ones.
                        fields: Box::leak(fields.into_boxed_slice()),
                        family: full.family,
                    });
                }
            }
        }
        v
    });
    let per_level = 2 * (usize::from(ext::ALL) + 1);
    let level_index = usize::from(level.has_standard());
    all[level_index * per_level + 2 * usize::from(mask) + usize::from(v6)]
}

/// The fields of a one-way flow record (`biflow=off`): the biflow template without any
/// reverse element (RFC 5103's, or trawl's `rev_` ones) and without the first packets'
/// signed lengths and gaps, which only mean something for both directions together. Each
/// direction of a biflow travels as a record of its own, its sender as the source.
macro_rules! one_way_fields {
    ($src:expr, $dst:expr) => {
        &[
            $src,
            $dst,
            Field::SrcPort,
            Field::DstPort,
            Field::Proto,
            Field::Vlan,
            Field::SrcMac,
            Field::DstMac,
            Field::StartNs,
            Field::EndNs,
            Field::StartMs,
            Field::EndMs,
            Field::FlowEndReason,
            Field::TrawlEndReason,
            Field::Packets(Dir::Fwd),
            Field::IpBytes(Dir::Fwd),
            Field::FrameBytes(Dir::Fwd),
            Field::TcpFlags(Dir::Fwd),
            Field::Fin(Dir::Fwd),
            Field::Rst(Dir::Fwd),
            Field::Psh(Dir::Fwd),
            Field::Urg(Dir::Fwd),
            Field::LenMin(Dir::Fwd),
            Field::LenMax(Dir::Fwd),
            Field::LenMean(Dir::Fwd),
            Field::LenStd(Dir::Fwd),
            Field::IatMin(Dir::Fwd),
            Field::IatMax(Dir::Fwd),
            Field::IatMean(Dir::Fwd),
            Field::IatStd(Dir::Fwd),
            Field::Syn(Dir::Fwd),
            Field::SynAck(Dir::Fwd),
            Field::Ece(Dir::Fwd),
            Field::Cwr(Dir::Fwd),
            Field::ZeroWindow(Dir::Fwd),
            Field::Retrans(Dir::Fwd),
        ]
    };
}

/// IPFIX one-way flow record template, IPv4 (`biflow=off`).
pub const IPFIX_ONE_WAY_V4: TemplateDef = TemplateDef {
    id: ONE_WAY_V4_ID,
    fields: one_way_fields!(Field::SrcIpv4, Field::DstIpv4),
    family: Family::FlowV4,
};

/// IPFIX one-way flow record template, IPv6 (`biflow=off`).
pub const IPFIX_ONE_WAY_V6: TemplateDef = TemplateDef {
    id: ONE_WAY_V6_ID,
    fields: one_way_fields!(Field::SrcIpv6, Field::DstIpv6),
    family: Family::FlowV6,
};

/// IPFIX series row template.
pub const IPFIX_SERIES: TemplateDef = TemplateDef {
    id: SERIES_ID,
    fields: &[
        Field::SeriesSecond,
        Field::SeriesPackets,
        Field::SeriesBytes,
        Field::SeriesActiveFlows,
        Field::SeriesNewFlows,
        Field::SeriesInPackets,
        Field::SeriesInBytes,
        Field::SeriesOutPackets,
        Field::SeriesOutBytes,
    ],
    family: Family::Series,
};

macro_rules! v9_fields {
    ($src:expr, $dst:expr) => {
        &[
            $src,
            $dst,
            Field::SrcPort,
            Field::DstPort,
            Field::Proto,
            Field::Vlan,
            Field::SrcMac,
            Field::DstMac,
            Field::UptimeStart,
            Field::UptimeEnd,
            Field::Packets(Dir::Fwd),
            Field::IpBytes(Dir::Fwd),
            Field::V9OutPackets,
            Field::V9OutBytes,
            Field::TcpFlags(Dir::Fwd),
        ]
    };
}

/// NetFlow v9 flow template, IPv4. v9 has no reverse elements: the responder's packets and
/// bytes travel as OUT_PKTS/OUT_BYTES (as Cisco ASA's NSEL does), TCP_FLAGS is the union of
/// both directions, times are milliseconds of system uptime.
pub const V9_FLOW_V4: TemplateDef = TemplateDef {
    id: FLOW_V4_ID,
    fields: v9_fields!(Field::SrcIpv4, Field::DstIpv4),
    family: Family::FlowV4,
};

/// NetFlow v9 flow template, IPv6.
pub const V9_FLOW_V6: TemplateDef = TemplateDef {
    id: FLOW_V6_ID,
    fields: v9_fields!(Field::SrcIpv6, Field::DstIpv6),
    family: Family::FlowV6,
};

/// Length of a field in a NetFlow v9 template (v9 has no variable-length fields; TCP_FLAGS is
/// one byte there).
pub fn v9_len(f: Field) -> u16 {
    match f {
        Field::TcpFlags(_) => 1,
        other => other.spec().len,
    }
}
