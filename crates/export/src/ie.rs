//! Information elements: every field trawl puts into IPFIX / NetFlow v9 records, with its
//! element id, owner (IANA, RFC 5103 reverse, or trawl's enterprise number) and encoding.
//! The templates of [`crate::template`] are lists of these; `docs/specs/ipfix.md` documents
//! the same table (a test checks that every element here is in the spec).

/// Private Enterprise Number of RFC 5103's reverse information elements.
pub const REVERSE_PEN: u32 = 29305;
/// Default Private Enterprise Number of trawl's own elements: 32473 is the documentation PEN
/// of RFC 5612, so nobody mistakes trawl's elements for a registered vendor's.
pub const DEFAULT_PEN: u32 = 32473;
/// Bit set on an enterprise element id to name its reverse direction (RFC 5103 section 6.2).
pub const REVERSE_BIT: u16 = 0x4000;
/// Length of the communityId element: the text form (`1:` and 28 base64 characters).
pub const COMMUNITY_ID_LEN: u16 = trawl_flow::community_id::TEXT_LEN as u16;
/// Length of the applicationId element (RFC 6759): classification engine 6 (user-defined)
/// and a 2-byte selector, the application's number (`trawl_flow::App`); all zero without a
/// label.
pub const APPLICATION_ID_LEN: u16 = 3;
/// The classification engine of trawl's application numbers (RFC 6759: 6, USER-Defined).
pub const APPLICATION_ENGINE: u8 = 6;
/// A handshake round trip that was not timed (`None` in the record): all ones, as 0 ns is a
/// possible measurement between packets with the same timestamp.
pub const RTT_NONE: u64 = u64::MAX;
/// Length that marks a variable-length field in a template (RFC 7011 section 7).
pub const VARLEN: u16 = 0xffff;

/// Direction of a per-direction counter: initiator → responder or the reverse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// Initiator → responder (`fwd_*`).
    Fwd,
    /// Responder → initiator (`rev_*`).
    Rev,
}

/// A field of a flow record or series row as it travels in IPFIX / NetFlow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is documented in `spec()` and docs/specs/ipfix.md
pub enum Field {
    SrcIpv4,
    DstIpv4,
    SrcIpv6,
    DstIpv6,
    SrcPort,
    DstPort,
    Proto,
    Vlan,
    SrcMac,
    DstMac,
    StartNs,
    EndNs,
    StartMs,
    EndMs,
    FlowEndReason,
    Packets(Dir),
    IpBytes(Dir),
    FrameBytes(Dir),
    TcpFlags(Dir),
    Fin(Dir),
    Rst(Dir),
    Psh(Dir),
    Urg(Dir),
    LenMin(Dir),
    LenMax(Dir),
    LenMean(Dir),
    LenStd(Dir),
    IatMin(Dir),
    IatMax(Dir),
    IatMean(Dir),
    IatStd(Dir),
    Syn(Dir),
    SynAck(Dir),
    Ece(Dir),
    Cwr(Dir),
    ZeroWindow(Dir),
    Retrans(Dir),
    TrawlEndReason,
    FirstLengths,
    FirstGaps,
    CommunityId,
    ApplicationId,
    ApplicationName,
    ApplicationSource,
    RttHandshake(Dir),
    RttSamples(Dir),
    RttMin(Dir),
    RttMax(Dir),
    RttMean(Dir),
    TunnelType,
    TunnelSrc,
    TunnelDst,
    TunnelId,
    SrcAs,
    DstAs,
    SrcCountry,
    DstCountry,
    SeriesSecond,
    SeriesPackets,
    SeriesBytes,
    SeriesActiveFlows,
    SeriesNewFlows,
    SeriesInPackets,
    SeriesInBytes,
    SeriesOutPackets,
    SeriesOutBytes,
    // Read by the collector from other exporters, never written by trawl's IPFIX:
    StartSec,
    EndSec,
    StartUs,
    EndUs,
    UptimeStart,
    UptimeEnd,
    SystemInitMs,
    PacketsTotal,
    OctetsTotal,
    V9OutBytes,
    V9OutPackets,
}

/// Who defines an element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// IANA's registry (no enterprise number on the wire).
    Iana,
    /// RFC 5103 reverse of an IANA element (PEN 29305, same id).
    IanaReverse,
    /// trawl's enterprise elements (configurable PEN; the reverse direction sets bit 0x4000).
    Trawl,
}

/// How an element is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Element name (IANA's name, or trawl's for enterprise elements).
    pub name: &'static str,
    /// Element id (without the enterprise bit; with [`REVERSE_BIT`] for trawl's reverse ones).
    pub id: u16,
    /// Who defines it.
    pub owner: Owner,
    /// Length in bytes, or [`VARLEN`].
    pub len: u16,
    /// IPFIX abstract data type.
    pub ty: &'static str,
}

const fn iana(name: &'static str, id: u16, len: u16, ty: &'static str) -> Spec {
    Spec {
        name,
        id,
        owner: Owner::Iana,
        len,
        ty,
    }
}

const fn trawl(name: &'static str, id: u16, len: u16, ty: &'static str) -> Spec {
    Spec {
        name,
        id,
        owner: Owner::Trawl,
        len,
        ty,
    }
}

/// Per-direction element: IANA ones reverse through PEN 29305, trawl's through bit 0x4000.
fn directed(d: Dir, s: Spec) -> Spec {
    match (d, s.owner) {
        (Dir::Fwd, _) => s,
        (Dir::Rev, Owner::Iana) => Spec {
            owner: Owner::IanaReverse,
            ..s
        },
        (Dir::Rev, _) => Spec {
            id: s.id | REVERSE_BIT,
            ..s
        },
    }
}

impl Field {
    /// The element that carries this field in IPFIX.
    pub fn spec(self) -> Spec {
        use Field::*;
        match self {
            SrcIpv4 => iana("sourceIPv4Address", 8, 4, "ipv4Address"),
            DstIpv4 => iana("destinationIPv4Address", 12, 4, "ipv4Address"),
            SrcIpv6 => iana("sourceIPv6Address", 27, 16, "ipv6Address"),
            DstIpv6 => iana("destinationIPv6Address", 28, 16, "ipv6Address"),
            SrcPort => iana("sourceTransportPort", 7, 2, "unsigned16"),
            DstPort => iana("destinationTransportPort", 11, 2, "unsigned16"),
            Proto => iana("protocolIdentifier", 4, 1, "unsigned8"),
            Vlan => iana("vlanId", 58, 2, "unsigned16"),
            SrcMac => iana("sourceMacAddress", 56, 6, "macAddress"),
            DstMac => iana("destinationMacAddress", 80, 6, "macAddress"),
            StartNs => iana("flowStartNanoseconds", 156, 8, "dateTimeNanoseconds"),
            EndNs => iana("flowEndNanoseconds", 157, 8, "dateTimeNanoseconds"),
            StartMs => iana("flowStartMilliseconds", 152, 8, "dateTimeMilliseconds"),
            EndMs => iana("flowEndMilliseconds", 153, 8, "dateTimeMilliseconds"),
            FlowEndReason => iana("flowEndReason", 136, 1, "unsigned8"),
            Packets(d) => directed(d, iana("packetDeltaCount", 2, 8, "unsigned64")),
            IpBytes(d) => directed(d, iana("octetDeltaCount", 1, 8, "unsigned64")),
            FrameBytes(d) => directed(d, iana("layer2OctetDeltaCount", 352, 8, "unsigned64")),
            TcpFlags(d) => directed(d, iana("tcpControlBits", 6, 2, "unsigned16")),
            Fin(d) => directed(d, iana("tcpFinTotalCount", 219, 4, "unsigned64")),
            Rst(d) => directed(d, iana("tcpRstTotalCount", 220, 4, "unsigned64")),
            Psh(d) => directed(d, iana("tcpPshTotalCount", 221, 4, "unsigned64")),
            Urg(d) => directed(d, iana("tcpUrgTotalCount", 223, 4, "unsigned64")),
            LenMin(d) => directed(d, trawl("frameLengthMinimum", 1, 4, "unsigned32")),
            LenMax(d) => directed(d, trawl("frameLengthMaximum", 2, 4, "unsigned32")),
            LenMean(d) => directed(d, trawl("frameLengthMean", 3, 8, "float64")),
            LenStd(d) => directed(d, trawl("frameLengthStdDev", 4, 8, "float64")),
            IatMin(d) => directed(
                d,
                trawl("interArrivalMinimumNanoseconds", 5, 8, "unsigned64"),
            ),
            IatMax(d) => directed(
                d,
                trawl("interArrivalMaximumNanoseconds", 6, 8, "unsigned64"),
            ),
            IatMean(d) => directed(d, trawl("interArrivalMeanNanoseconds", 7, 8, "float64")),
            IatStd(d) => directed(d, trawl("interArrivalStdDevNanoseconds", 8, 8, "float64")),
            Syn(d) => directed(d, trawl("tcpSynWithoutAckCount", 9, 4, "unsigned32")),
            SynAck(d) => directed(d, trawl("tcpSynAckCount", 10, 4, "unsigned32")),
            Ece(d) => directed(d, trawl("tcpEceCount", 11, 4, "unsigned32")),
            Cwr(d) => directed(d, trawl("tcpCwrCount", 12, 4, "unsigned32")),
            ZeroWindow(d) => directed(d, trawl("tcpZeroWindowCount", 13, 4, "unsigned32")),
            Retrans(d) => directed(d, trawl("tcpRetransmissionCount", 14, 4, "unsigned32")),
            TrawlEndReason => trawl("trawlEndReason", 20, 1, "unsigned8"),
            FirstLengths => trawl("firstPacketLengths", 21, VARLEN, "octetArray"),
            FirstGaps => trawl("firstPacketGapsNanoseconds", 22, VARLEN, "octetArray"),
            CommunityId => trawl("communityId", 23, COMMUNITY_ID_LEN, "string"),
            ApplicationId => iana("applicationId", 95, APPLICATION_ID_LEN, "octetArray"),
            ApplicationName => iana("applicationName", 96, VARLEN, "string"),
            ApplicationSource => trawl("applicationSource", 24, 1, "unsigned8"),
            RttHandshake(d) => {
                directed(d, trawl("tcpHandshakeRttNanoseconds", 25, 8, "unsigned64"))
            }
            RttSamples(d) => directed(d, trawl("tcpRttSampleCount", 26, 4, "unsigned32")),
            RttMin(d) => directed(d, trawl("tcpRttMinimumNanoseconds", 27, 8, "unsigned64")),
            RttMax(d) => directed(d, trawl("tcpRttMaximumNanoseconds", 28, 8, "unsigned64")),
            RttMean(d) => directed(d, trawl("tcpRttMeanNanoseconds", 29, 8, "float64")),
            TunnelType => trawl("tunnelType", 36, 1, "unsigned8"),
            TunnelSrc => trawl("tunnelSourceAddress", 37, 16, "ipv6Address"),
            TunnelDst => trawl("tunnelDestinationAddress", 38, 16, "ipv6Address"),
            TunnelId => trawl("tunnelId", 39, 4, "unsigned32"),
            SrcAs => iana("bgpSourceAsNumber", 16, 4, "unsigned32"),
            DstAs => iana("bgpDestinationAsNumber", 17, 4, "unsigned32"),
            SrcCountry => trawl("sourceCountryCode", 40, 2, "string"),
            DstCountry => trawl("destinationCountryCode", 41, 2, "string"),
            SeriesSecond => iana("observationTimeSeconds", 322, 4, "dateTimeSeconds"),
            SeriesPackets => iana("packetDeltaCount", 2, 8, "unsigned64"),
            SeriesBytes => iana("layer2OctetDeltaCount", 352, 8, "unsigned64"),
            SeriesActiveFlows => trawl("activeFlowCount", 30, 8, "unsigned64"),
            SeriesNewFlows => trawl("newFlowCount", 31, 8, "unsigned64"),
            SeriesInPackets => trawl("inboundPacketDeltaCount", 32, 8, "unsigned64"),
            SeriesInBytes => trawl("inboundLayer2OctetDeltaCount", 33, 8, "unsigned64"),
            SeriesOutPackets => trawl("outboundPacketDeltaCount", 34, 8, "unsigned64"),
            SeriesOutBytes => trawl("outboundLayer2OctetDeltaCount", 35, 8, "unsigned64"),
            StartSec => iana("flowStartSeconds", 150, 4, "dateTimeSeconds"),
            EndSec => iana("flowEndSeconds", 151, 4, "dateTimeSeconds"),
            StartUs => iana("flowStartMicroseconds", 154, 8, "dateTimeMicroseconds"),
            EndUs => iana("flowEndMicroseconds", 155, 8, "dateTimeMicroseconds"),
            UptimeStart => iana("flowStartSysUpTime", 22, 4, "unsigned32"),
            UptimeEnd => iana("flowEndSysUpTime", 21, 4, "unsigned32"),
            SystemInitMs => iana("systemInitTimeMilliseconds", 160, 8, "dateTimeMilliseconds"),
            PacketsTotal => iana("packetTotalCount", 86, 8, "unsigned64"),
            OctetsTotal => iana("octetTotalCount", 85, 8, "unsigned64"),
            V9OutBytes => iana("OUT_BYTES (NetFlow v9)", 23, 8, "unsigned64"),
            V9OutPackets => iana("OUT_PKTS (NetFlow v9)", 24, 8, "unsigned64"),
        }
    }

    /// The enterprise number written for this field (0 for IANA's own elements).
    pub fn pen(self, trawl_pen: u32) -> u32 {
        match self.spec().owner {
            Owner::Iana => 0,
            Owner::IanaReverse => REVERSE_PEN,
            Owner::Trawl => trawl_pen,
        }
    }
}

/// The flow fields of a record, for reverse lookups while decoding: `(field, pen, id)` for the
/// elements trawl knows how to read into a record.
pub fn lookup(pen: u32, id: u16, trawl_pen: u32) -> Option<Field> {
    use Field::*;
    if pen == 0 {
        return Some(match id {
            8 => SrcIpv4,
            12 => DstIpv4,
            27 => SrcIpv6,
            28 => DstIpv6,
            7 => SrcPort,
            11 => DstPort,
            4 => Proto,
            58 => Vlan,
            56 => SrcMac,
            80 => DstMac,
            156 => StartNs,
            157 => EndNs,
            152 => StartMs,
            153 => EndMs,
            136 => FlowEndReason,
            2 => Packets(Dir::Fwd),
            1 => IpBytes(Dir::Fwd),
            352 => FrameBytes(Dir::Fwd),
            6 => TcpFlags(Dir::Fwd),
            219 => Fin(Dir::Fwd),
            220 => Rst(Dir::Fwd),
            221 => Psh(Dir::Fwd),
            223 => Urg(Dir::Fwd),
            322 => SeriesSecond,
            150 => StartSec,
            151 => EndSec,
            154 => StartUs,
            155 => EndUs,
            22 => UptimeStart,
            21 => UptimeEnd,
            160 => SystemInitMs,
            86 => PacketsTotal,
            85 => OctetsTotal,
            95 => ApplicationId,
            96 => ApplicationName,
            16 => SrcAs,
            17 => DstAs,
            _ => return None,
        });
    }
    if pen == REVERSE_PEN {
        return Some(match id {
            2 => Packets(Dir::Rev),
            1 => IpBytes(Dir::Rev),
            352 => FrameBytes(Dir::Rev),
            6 => TcpFlags(Dir::Rev),
            219 => Fin(Dir::Rev),
            220 => Rst(Dir::Rev),
            221 => Psh(Dir::Rev),
            223 => Urg(Dir::Rev),
            _ => return None,
        });
    }
    if pen != trawl_pen {
        return None;
    }
    let d = if id & REVERSE_BIT != 0 {
        Dir::Rev
    } else {
        Dir::Fwd
    };
    Some(match id & !REVERSE_BIT {
        1 => LenMin(d),
        2 => LenMax(d),
        3 => LenMean(d),
        4 => LenStd(d),
        5 => IatMin(d),
        6 => IatMax(d),
        7 => IatMean(d),
        8 => IatStd(d),
        9 => Syn(d),
        10 => SynAck(d),
        11 => Ece(d),
        12 => Cwr(d),
        13 => ZeroWindow(d),
        14 => Retrans(d),
        20 if d == Dir::Fwd => TrawlEndReason,
        21 if d == Dir::Fwd => FirstLengths,
        22 if d == Dir::Fwd => FirstGaps,
        23 if d == Dir::Fwd => CommunityId,
        24 if d == Dir::Fwd => ApplicationSource,
        25 => RttHandshake(d),
        26 => RttSamples(d),
        27 => RttMin(d),
        28 => RttMax(d),
        29 => RttMean(d),
        30 if d == Dir::Fwd => SeriesActiveFlows,
        31 if d == Dir::Fwd => SeriesNewFlows,
        32 if d == Dir::Fwd => SeriesInPackets,
        33 if d == Dir::Fwd => SeriesInBytes,
        34 if d == Dir::Fwd => SeriesOutPackets,
        35 if d == Dir::Fwd => SeriesOutBytes,
        36 if d == Dir::Fwd => TunnelType,
        37 if d == Dir::Fwd => TunnelSrc,
        38 if d == Dir::Fwd => TunnelDst,
        39 if d == Dir::Fwd => TunnelId,
        40 if d == Dir::Fwd => SrcCountry,
        41 if d == Dir::Fwd => DstCountry,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::{ext, extended_flow, IPFIX_FLOW_V4, IPFIX_FLOW_V6, IPFIX_SERIES};

    /// `docs/specs/ipfix.md` lists every element the templates use, with its id.
    #[test]
    fn the_spec_lists_every_element() {
        let spec = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/specs/ipfix.md"
        ))
        .unwrap();
        for t in [
            extended_flow(ext::ALL, false),
            extended_flow(ext::ALL, true),
            IPFIX_SERIES,
        ] {
            for f in t.fields {
                let s = f.spec();
                let id = s.id & !REVERSE_BIT;
                let row = spec
                    .lines()
                    .find(|l| l.starts_with('|') && l.contains(s.name))
                    .unwrap_or_else(|| panic!("{} is not in docs/specs/ipfix.md", s.name));
                assert!(
                    row.split('|')
                        .any(|c| c.split('/').any(|x| x.trim() == id.to_string())),
                    "{}: id {id} not in its row: {row}",
                    s.name
                );
            }
        }
    }

    #[test]
    fn every_exported_element_is_read_back() {
        for t in [
            IPFIX_FLOW_V4,
            IPFIX_FLOW_V6,
            extended_flow(ext::ALL, false),
            extended_flow(ext::ALL, true),
        ] {
            for f in t.fields {
                let s = f.spec();
                assert_eq!(
                    lookup(f.pen(DEFAULT_PEN), s.id, DEFAULT_PEN),
                    Some(*f),
                    "{}",
                    s.name
                );
            }
        }
    }
}
