//! Flow records: what leaves the flow meter. Field names are the stable schema of
//! `docs/specs/flow-record.md`.
use std::net::IpAddr;

use crate::app_label::AppLabel;
use crate::community_id::{CommunityId, CommunityIdText, FlowTuple};
use crate::config::FeatureLevel;
use crate::decode::to_ip;
use crate::key::{FlowKey, Side};
use crate::state::{rare_index, DirStats, ExactDir, FlowEntry, Wides, EARLY_PACKETS};
use crate::timing::{RttSummary, TcpTiming};
use crate::tunnel::Tunnel;

/// Why a record left the flow table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum EndReason {
    /// No packet for the idle timeout.
    Idle = 0,
    /// The active timeout elapsed; the flow goes on in a new record.
    Active = 1,
    /// FIN seen from both sides (after the linger).
    Fin = 2,
    /// RST seen (after the linger).
    Rst = 3,
    /// The table was full and this flow had been idle the longest.
    Pressure = 4,
    /// The input ended (or the meter was flushed).
    End = 5,
}

impl EndReason {
    /// Number of reasons.
    pub const COUNT: usize = 6;
    /// All reasons in discriminant order.
    pub const ALL: [EndReason; Self::COUNT] = [
        EndReason::Idle,
        EndReason::Active,
        EndReason::Fin,
        EndReason::Rst,
        EndReason::Pressure,
        EndReason::End,
    ];

    /// The name used in records (`idle`, `active`, `fin`, `rst`, `pressure`, `end`).
    pub const fn name(self) -> &'static str {
        match self {
            EndReason::Idle => "idle",
            EndReason::Active => "active",
            EndReason::Fin => "fin",
            EndReason::Rst => "rst",
            EndReason::Pressure => "pressure",
            EndReason::End => "end",
        }
    }
}

/// Counters of one direction of a flow record.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DirectionRecord {
    /// Packets.
    pub packets: u64,
    /// Bytes on the wire (frame length, link header included).
    pub bytes: u64,
    /// Bytes of IP total length (what IPFIX octetDeltaCount counts).
    pub ip_bytes: u64,
    /// Smallest frame length (0 without packets).
    pub len_min: u32,
    /// Largest frame length.
    pub len_max: u32,
    /// Mean frame length.
    pub len_mean: f64,
    /// Population standard deviation of the frame length.
    pub len_std: f64,
    /// Smallest gap between consecutive packets of this direction, ns (0 with < 2 packets).
    pub iat_min_ns: u64,
    /// Largest gap, ns.
    pub iat_max_ns: u64,
    /// Mean gap, ns.
    pub iat_mean_ns: f64,
    /// Population standard deviation of the gaps, ns.
    pub iat_std_ns: f64,
    /// TCP segments with SYN and without ACK.
    pub syn: u32,
    /// TCP segments with SYN and ACK.
    pub syn_ack: u32,
    /// TCP segments with FIN.
    pub fin: u32,
    /// TCP segments with RST.
    pub rst: u32,
    /// TCP segments with PSH.
    pub psh: u32,
    /// TCP segments with URG.
    pub urg: u32,
    /// TCP segments with ECE.
    pub ece: u32,
    /// TCP segments with CWR.
    pub cwr: u32,
    /// Union of all TCP flags seen (IPFIX tcpControlBits).
    pub tcp_flags: u8,
    /// TCP segments advertising a zero window (RST excluded).
    pub zero_window: u32,
    /// TCP segments consuming sequence space (payload, SYN or FIN) that start in sequence space
    /// already sent; keep-alives excluded.
    pub retransmissions: u32,
    /// TCP: this direction's SYN (the initiator's SYN, the responder's SYN-ACK) until the
    /// other side acknowledged it, ns: forward SYN → SYN-ACK, reverse SYN-ACK → ACK (their sum
    /// is Wireshark's `tcp.analysis.initial_rtt`). `None` without a timed handshake or below
    /// the `standard` level.
    pub rtt_handshake_ns: Option<u64>,
    /// TCP round-trip samples of this direction: segments it sent, each timed until the other
    /// side's first ACK covering it (one at a time; none across a retransmission).
    pub rtt_samples: u32,
    /// Smallest sample, ns (0 without samples).
    pub rtt_min_ns: u64,
    /// Largest sample, ns.
    pub rtt_max_ns: u64,
    /// Mean of the samples, ns.
    pub rtt_mean_ns: f64,
}

impl DirectionRecord {
    pub(crate) fn from_stats(d: &DirStats, x: &ExactDir, rtt: RttSummary) -> Self {
        let n = x.packets as f64;
        let (len_mean, len_std) = if x.packets == 0 {
            (0.0, 0.0)
        } else {
            let mean = x.bytes as f64 / n;
            (mean, (d.len_sumsq / n - mean * mean).max(0.0).sqrt())
        };
        let (iat_min_ns, iat_max_ns, iat_mean_ns, iat_std_ns) = if x.packets < 2 {
            (0, 0, 0.0, 0.0)
        } else {
            let gaps = (x.packets - 1) as f64;
            let mean = d.last_ns.saturating_sub(x.first_ns) as f64 / gaps;
            let std = (d.iat_sumsq / gaps - mean * mean).max(0.0).sqrt();
            (x.iat_min, x.iat_max, mean, std)
        };
        let c = &x.rare;
        DirectionRecord {
            packets: x.packets,
            bytes: x.bytes,
            ip_bytes: x.ip_bytes,
            len_min: if x.packets == 0 { 0 } else { x.len_min },
            len_max: if x.packets == 0 { 0 } else { x.len_max },
            len_mean,
            len_std,
            iat_min_ns,
            iat_max_ns,
            iat_mean_ns,
            iat_std_ns,
            syn: c[rare_index::SYN],
            syn_ack: c[rare_index::SYN_ACK],
            fin: c[rare_index::FIN],
            rst: c[rare_index::RST],
            psh: x.psh,
            urg: c[rare_index::URG],
            ece: c[rare_index::ECE],
            cwr: c[rare_index::CWR],
            tcp_flags: d.flags_or,
            zero_window: c[rare_index::ZERO_WINDOW],
            retransmissions: c[rare_index::RETRANS],
            rtt_handshake_ns: rtt.handshake_ns,
            rtt_samples: rtt.samples,
            rtt_min_ns: rtt.min_ns,
            rtt_max_ns: rtt.max_ns,
            rtt_mean_ns: rtt.mean_ns,
        }
    }

    /// What a record of `level` keeps of this direction: the other fields zero (`None`).
    pub fn project(&self, level: FeatureLevel) -> DirectionRecord {
        let minimal = DirectionRecord {
            packets: self.packets,
            bytes: self.bytes,
            ip_bytes: self.ip_bytes,
            tcp_flags: self.tcp_flags,
            ..DirectionRecord::default()
        };
        match level {
            FeatureLevel::Minimal => minimal,
            FeatureLevel::Standard => DirectionRecord {
                len_min: self.len_min,
                len_max: self.len_max,
                len_mean: self.len_mean,
                iat_min_ns: self.iat_min_ns,
                iat_max_ns: self.iat_max_ns,
                iat_mean_ns: self.iat_mean_ns,
                syn: self.syn,
                syn_ack: self.syn_ack,
                fin: self.fin,
                rst: self.rst,
                zero_window: self.zero_window,
                retransmissions: self.retransmissions,
                rtt_handshake_ns: self.rtt_handshake_ns,
                ..minimal
            },
            FeatureLevel::Full => *self,
        }
    }
}

/// One bidirectional flow record, initiator (src) → responder (dst).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowRecord<'a> {
    /// Initiator address.
    pub src_ip: IpAddr,
    /// Responder address.
    pub dst_ip: IpAddr,
    /// Initiator port (ICMP: type, see the decoding spec).
    pub src_port: u16,
    /// Responder port (ICMP: answer type or code).
    pub dst_port: u16,
    /// IP protocol number.
    pub proto: u8,
    /// VLAN id, 0 when untagged.
    pub vlan: u16,
    /// The outer tunnel the flow came through (`--tunnel inner`; none otherwise): of the
    /// initiator's first packet in the record, else of the responder's.
    pub tunnel: Tunnel,
    /// Initiator MAC address.
    pub src_mac: [u8; 6],
    /// Responder MAC address.
    pub dst_mac: [u8; 6],
    /// First packet, ns since the Unix epoch.
    pub first_ns: u64,
    /// Last packet, ns since the Unix epoch.
    pub last_ns: u64,
    /// Initiator → responder counters.
    pub fwd: DirectionRecord,
    /// Responder → initiator counters.
    pub rev: DirectionRecord,
    /// Frame lengths of the first packets, negative when sent by the responder.
    pub first_lengths: [i64; EARLY_PACKETS],
    /// Gaps before each of the first packets (ns; the first is 0), negative when the packet
    /// was sent by the responder.
    pub first_iats_ns: [i64; EARLY_PACKETS],
    /// How many entries of `first_lengths` / `first_iats_ns` are valid.
    pub first_count: usize,
    /// Leading transport payload bytes sent by the initiator (empty unless configured).
    pub fwd_payload: &'a [u8],
    /// Leading transport payload bytes sent by the responder.
    pub rev_payload: &'a [u8],
    /// Why the record was emitted.
    pub end_reason: EndReason,
    /// The application, when a classifier labelled the flow (`trawl_app::classify`; the
    /// meter leaves it `None`, the `flow_meter` block sets it with `app` on).
    pub app: Option<AppLabel>,
    /// What collection (sFlow sampling, agent, interfaces) and enrichment (AS numbers,
    /// countries) add; all zero on the records trawl meters itself.
    pub extra: RecordExtra,
}

/// The fields of a flow record that collection and enrichment fill in
/// (`docs/specs/flow-record.md`, "Collected and enriched fields"). Zero (or `None`) means not
/// known: a metered record has none of them until enrichment adds AS numbers and countries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecordExtra {
    /// The record stands for sampled packets, 1 in this many (sFlow): its packet and byte
    /// counts are the samples' scaled by it. 0 when the counts are not sampled.
    pub sampling_rate: u32,
    /// The sFlow agent that sampled the packets (the address in its datagram header).
    pub agent: Option<IpAddr>,
    /// The exporter's input interface (SNMP ifIndex); 0 when not known.
    pub in_if: u32,
    /// The exporter's output interface (SNMP ifIndex); 0 when not known or several.
    pub out_if: u32,
    /// Autonomous system of the source address (enrichment); 0 when not known.
    pub src_as: u32,
    /// Autonomous system of the destination address; 0 when not known.
    pub dst_as: u32,
    /// ISO 3166 country code of the source address (two ASCII letters); zeros when not known.
    pub src_country: [u8; 2],
    /// Country of the destination address.
    pub dst_country: [u8; 2],
    /// Name and description of `in_if` (enrichment from an interface mapping file).
    pub in_if_info: Option<&'static InterfaceInfo>,
    /// Name and description of `out_if`.
    pub out_if_info: Option<&'static InterfaceInfo>,
}

/// An exporter interface's name and description, from a mapping file (`--interfaces`):
/// loaded once per run and never freed, so that records (which are `Copy`) can point at it.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct InterfaceInfo {
    /// Short name (`xe-0/0/1`, `Gi1/0/24`).
    pub name: Box<str>,
    /// Description (`uplink to transit A`).
    pub description: Box<str>,
}

impl RecordExtra {
    /// The text of a country code: its two letters, empty when not known (or not letters).
    pub fn country_text(code: &[u8; 2]) -> &str {
        match std::str::from_utf8(code) {
            Ok(s) if code.iter().all(u8::is_ascii_alphabetic) => s,
            _ => "",
        }
    }

    /// A country code from its text: two ASCII letters, or empty for not known (zeros);
    /// `None` for anything else.
    pub fn parse_country(s: &str) -> Option<[u8; 2]> {
        match s.as_bytes() {
            [] => Some([0; 2]),
            [a, b] if a.is_ascii_alphabetic() && b.is_ascii_alphabetic() => Some([*a, *b]),
            _ => None,
        }
    }

    /// Whether the record came from a sampler or an exporter that named an agent or
    /// interfaces (the collected fields are worth writing).
    pub fn is_collected(&self) -> bool {
        self.sampling_rate != 0 || self.agent.is_some() || self.in_if != 0 || self.out_if != 0
    }

    /// Whether enrichment found anything for the record.
    pub fn is_enriched(&self) -> bool {
        self.src_as != 0
            || self.dst_as != 0
            || self.src_country != [0; 2]
            || self.dst_country != [0; 2]
    }

    /// Whether an interface mapping named one of the record's interfaces.
    pub fn has_interface_names(&self) -> bool {
        self.in_if_info.is_some() || self.out_if_info.is_some()
    }
}

impl FlowRecord<'static> {
    /// A record with every field zero, addresses 0.0.0.0: what a collector fills in from a
    /// data record, and what tests and benchmarks start from.
    pub fn empty() -> Self {
        let zero = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
        FlowRecord {
            src_ip: zero,
            dst_ip: zero,
            src_port: 0,
            dst_port: 0,
            proto: 0,
            vlan: 0,
            tunnel: Default::default(),
            src_mac: [0; 6],
            dst_mac: [0; 6],
            first_ns: 0,
            last_ns: 0,
            fwd: Default::default(),
            rev: Default::default(),
            first_lengths: [0; EARLY_PACKETS],
            first_iats_ns: [0; EARLY_PACKETS],
            first_count: 0,
            fwd_payload: &[],
            rev_payload: &[],
            end_reason: EndReason::End,
            extra: RecordExtra::default(),
            app: None,
        }
    }
}

impl<'a> FlowRecord<'a> {
    /// The record of a flow with `key`, initiated by `init`, with only what every level has:
    /// the key, `tunnel`, `[first_ns, last_ns]` and `reason` (counters zero: the caller adds
    /// its own).
    pub(crate) fn minimal(
        key: &FlowKey,
        init: Side,
        tunnel: Tunnel,
        [first_ns, last_ns]: [u64; 2],
        reason: EndReason,
    ) -> Self {
        let resp = init.flip();
        let v = key.ip_version();
        FlowRecord {
            src_ip: to_ip(v, &key.ip(init)),
            dst_ip: to_ip(v, &key.ip(resp)),
            src_port: key.port(init),
            dst_port: key.port(resp),
            proto: key.proto(),
            vlan: key.vlan(),
            tunnel,
            first_ns,
            last_ns,
            end_reason: reason,
            ..FlowRecord::empty()
        }
    }

    pub(crate) fn from_entry(
        e: &FlowEntry,
        wides: &Wides,
        timing: Option<&TcpTiming>,
        reason: EndReason,
        payload: [&'a [u8]; 2],
        level: FeatureLevel,
    ) -> Self {
        let init = e.initiator();
        let resp = init.flip();
        let mut first_lengths = [0i64; EARLY_PACKETS];
        let mut first_iats_ns = [0i64; EARLY_PACKETS];
        let init_high = init == Side::High;
        for i in 0..e.early_count as usize {
            let sent_by_high = e.early.high & (1 << i) != 0;
            let sign = if sent_by_high == init_high { 1 } else { -1 };
            let (len, iat) = e.early_packet(i, wides);
            first_lengths[i] = sign * len as i64;
            first_iats_ns[i] = sign * iat.min(i64::MAX as u64) as i64;
        }
        let timing = e.timing(timing);
        let rtt = |side: Side| {
            timing.map_or_else(RttSummary::default, |t| t.dirs[side as usize].summary())
        };
        let base = FlowRecord::minimal(
            &e.key,
            init,
            e.tunnel(wides),
            [e.first_ns(), e.record_last_ns()],
            reason,
        );
        let full = FlowRecord {
            src_mac: e.macs[init as usize],
            dst_mac: e.macs[resp as usize],
            fwd: DirectionRecord::from_stats(
                &e.dirs[init as usize],
                &e.exact(init as usize, wides),
                rtt(init),
            ),
            rev: DirectionRecord::from_stats(
                &e.dirs[resp as usize],
                &e.exact(resp as usize, wides),
                rtt(resp),
            ),
            first_lengths,
            first_iats_ns,
            first_count: e.early_count as usize,
            fwd_payload: payload[init as usize],
            rev_payload: payload[resp as usize],
            ..base
        };
        full.project(level)
    }

    /// What a record of `level` keeps ([`FeatureLevel`]): the fields it lacks zero or empty.
    /// The meter's records at a level are this projection of the `full` records.
    pub fn project(&self, level: FeatureLevel) -> FlowRecord<'a> {
        if level.is_full() {
            return *self;
        }
        FlowRecord {
            src_mac: [0; 6],
            dst_mac: [0; 6],
            fwd: self.fwd.project(level),
            rev: self.rev.project(level),
            first_lengths: [0; EARLY_PACKETS],
            first_iats_ns: [0; EARLY_PACKETS],
            first_count: 0,
            fwd_payload: &[],
            rev_payload: &[],
            ..*self
        }
    }

    /// The record's Community ID v1 with the default seed 0 (docs/specs/flow-record.md):
    /// computed on each call, from the key alone, so a consumer that writes it pays one SHA-1
    /// block per record and the meter nothing.
    pub fn community_id(&self) -> CommunityIdText {
        let tuple = FlowTuple {
            proto: self.proto,
            src_ip: self.src_ip,
            dst_ip: self.dst_ip,
            src_port: self.src_port,
            dst_port: self.dst_port,
        };
        CommunityIdText::from_digest(&CommunityId::default().digest_unchecked(&tuple))
    }

    /// Lowercase protocol name (`tcp`, `udp`, `icmp`, `icmpv6`, `sctp`, `gre`, ...) or the
    /// number for protocols without a name here.
    pub fn proto_name(&self) -> ProtoName {
        ProtoName(self.proto)
    }
}

/// Displays an IP protocol number as its lowercase name, or the number.
#[derive(Clone, Copy, Debug)]
pub struct ProtoName(pub u8);

impl ProtoName {
    /// The name, when trawl knows one.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            1 => "icmp",
            2 => "igmp",
            4 => "ipip",
            6 => "tcp",
            17 => "udp",
            41 => "ipv6",
            47 => "gre",
            50 => "esp",
            51 => "ah",
            58 => "icmpv6",
            89 => "ospf",
            103 => "pim",
            112 => "vrrp",
            132 => "sctp",
            136 => "udplite",
            _ => return None,
        })
    }
}

impl core::fmt::Display for ProtoName {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None => write!(f, "{}", self.0),
        }
    }
}
