//! From link-layer bytes to the fields the flow meter needs, in one pass, without allocation.
//!
//! [`decode`] walks Ethernet / 802.1Q / QinQ / MPLS / PPPoE / Linux SLL / SLL2 / BSD null /
//! raw IP, then IPv4 (options, fragments) or IPv6 (extension headers, fragments), then TCP
//! (options), UDP, ICMP, ICMPv6 or SCTP, optionally through GRE / VXLAN / IP-in-IP tunnels, and
//! fills a caller-owned [`Decoded`]. The outcome is a [`ParseOutcome`], counted by the caller in
//! an [`OutcomeCounters`] table: no `Result`, no heap.
use trawl_capture::LinkType;

/// How tunnels (GRE, VXLAN, IP-in-IP) are keyed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TunnelMode {
    /// Key flows on the outermost IP header (the tunnel itself is the flow). Default.
    #[default]
    Outer,
    /// Descend into GRE (IPv4, IPv6, transparent Ethernet bridging), VXLAN (UDP 4789) and
    /// IP-in-IP / IPv6-in-IP, and key on the innermost IP header.
    Inner,
}

/// Settings of the decoder.
#[derive(Clone, Copy, Debug, Default)]
pub struct DecodeConfig {
    /// Tunnel keying.
    pub tunnel: TunnelMode,
}

/// What became of one packet in the decoder. `#[repr(u8)]` so it indexes a counter table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ParseOutcome {
    /// Fully decoded to a flow key.
    #[default]
    Ok = 0,
    /// An IP packet whose transport header was cut short (snaplen) or whose transport header
    /// is invalid: keyed with what the bytes gave (ports 0 where unreadable) and counted.
    TransportIncomplete = 1,
    /// A non-first IP fragment: addresses, protocol and fragment id are known, ports are not;
    /// the flow meter resolves them from the first fragment.
    Fragment = 2,
    /// A valid link-layer frame that carries no IP (ARP, LLDP, STP, ...): not a flow packet.
    NonIp = 3,
    /// The interface's link type is not one trawl decodes (802.11, PPP, ...).
    UnsupportedLinkType = 4,
    /// Too few bytes for the link-layer (or VLAN/MPLS/PPPoE) header.
    TruncatedLink = 5,
    /// Too few bytes for the IP header (cannot read addresses).
    TruncatedIp = 6,
    /// The IP header is invalid (bad version, header length, total length below header).
    MalformedIp = 7,
}

impl ParseOutcome {
    /// Number of outcomes, the size of a counter table.
    pub const COUNT: usize = 8;

    /// Every outcome, in discriminant order.
    pub const ALL: [ParseOutcome; Self::COUNT] = [
        ParseOutcome::Ok,
        ParseOutcome::TransportIncomplete,
        ParseOutcome::Fragment,
        ParseOutcome::NonIp,
        ParseOutcome::UnsupportedLinkType,
        ParseOutcome::TruncatedLink,
        ParseOutcome::TruncatedIp,
        ParseOutcome::MalformedIp,
    ];

    /// Stable snake_case name, used in summaries and metrics.
    pub const fn name(self) -> &'static str {
        match self {
            ParseOutcome::Ok => "ok",
            ParseOutcome::TransportIncomplete => "transport_incomplete",
            ParseOutcome::Fragment => "fragment",
            ParseOutcome::NonIp => "non_ip",
            ParseOutcome::UnsupportedLinkType => "unsupported_link_type",
            ParseOutcome::TruncatedLink => "truncated_link",
            ParseOutcome::TruncatedIp => "truncated_ip",
            ParseOutcome::MalformedIp => "malformed_ip",
        }
    }

    /// True when the packet carries a usable flow key (possibly with ports still to resolve).
    pub const fn has_key(self) -> bool {
        matches!(
            self,
            ParseOutcome::Ok | ParseOutcome::TransportIncomplete | ParseOutcome::Fragment
        )
    }
}

/// Per-outcome packet counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutcomeCounters(pub [u64; ParseOutcome::COUNT]);

impl OutcomeCounters {
    /// Counts one packet.
    #[inline]
    pub fn count(&mut self, outcome: ParseOutcome) {
        self.0[outcome as usize] += 1;
    }

    /// Packets with this outcome.
    pub fn get(&self, outcome: ParseOutcome) -> u64 {
        self.0[outcome as usize]
    }

    /// All packets counted.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Adds another table into this one.
    pub fn merge(&mut self, other: &OutcomeCounters) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }
}

/// Non-first-fragment / first-fragment state of an IP packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(u8)]
pub enum FragmentKind {
    /// Not fragmented.
    #[default]
    None = 0,
    /// Offset 0 with more-fragments set: carries the transport header.
    First = 1,
    /// Offset > 0: no transport header.
    NonFirst = 2,
}

/// TCP header fields used by the flow features.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// The 8 flag bits CWR ECE URG ACK PSH RST SYN FIN (byte 13 of the header).
    pub flags: u8,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// Raw (unscaled) window.
    pub window: u16,
    /// MSS option value, 0 if absent.
    pub mss: u16,
    /// Window-scale option shift, `None` if absent.
    pub window_scale: Option<u8>,
    /// SACK-permitted option present.
    pub sack_permitted: bool,
    /// Timestamps option present.
    pub timestamps: bool,
}

/// TCP flag bits as in byte 13 of the TCP header.
pub mod tcp_flags {
    /// FIN.
    pub const FIN: u8 = 0x01;
    /// SYN.
    pub const SYN: u8 = 0x02;
    /// RST.
    pub const RST: u8 = 0x04;
    /// PSH.
    pub const PSH: u8 = 0x08;
    /// ACK.
    pub const ACK: u8 = 0x10;
    /// URG.
    pub const URG: u8 = 0x20;
    /// ECE.
    pub const ECE: u8 = 0x40;
    /// CWR.
    pub const CWR: u8 = 0x80;
}

/// Everything the decoder extracts from one packet. Caller-owned and reused: [`decode`]
/// overwrites every field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// Destination MAC of the outermost Ethernet header (zero when the link has none).
    pub dst_mac: [u8; 6],
    /// Source MAC of the outermost Ethernet header (zero when the link has none).
    pub src_mac: [u8; 6],
    /// VLAN id (12 bits) of the outermost 802.1Q/802.1ad tag, 0 when untagged.
    pub vlan: u16,
    /// 4 or 6 for the keyed IP header, 0 when there is none.
    pub ip_version: u8,
    /// Source address; IPv4 as an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`).
    pub src_ip: [u8; 16],
    /// Destination address, same representation.
    pub dst_ip: [u8; 16],
    /// Transport protocol number (after IPv6 extension headers).
    pub proto: u8,
    /// TCP/UDP/SCTP source port. ICMP/ICMPv6: the type.
    pub src_port: u16,
    /// TCP/UDP/SCTP destination port. ICMP/ICMPv6: the type of the answer for
    /// request/answer pairs (echo 8↔0, 128↔129, timestamp 13↔14, ...), else the code — so both
    /// directions of an exchange produce mirrored keys (Zeek's convention).
    pub dst_port: u16,
    /// IPv4 total length or IPv6 payload length + 40, of the keyed IP header (as stated in the
    /// header, not capped by caplen).
    pub ip_len: u32,
    /// TTL or hop limit.
    pub ttl: u8,
    /// Fragment state of the keyed IP header.
    pub fragment: FragmentKind,
    /// IPv4 identification (16 bits) or IPv6 fragment header identification.
    pub fragment_id: u32,
    /// TCP fields (all zero unless `proto == 6` and the header was read).
    pub tcp: TcpInfo,
    /// True when `tcp` holds a fully read TCP header (flags valid).
    pub tcp_valid: bool,
    /// Transport payload length as the IP and transport headers state it.
    pub payload_len: u32,
    /// Offset of the transport payload in the packet bytes (may be past caplen when truncated).
    pub payload_offset: u32,
}

impl Decoded {
    /// The source address as a std type.
    pub fn src_addr(&self) -> std::net::IpAddr {
        to_ip(self.ip_version, &self.src_ip)
    }
    /// The destination address as a std type.
    pub fn dst_addr(&self) -> std::net::IpAddr {
        to_ip(self.ip_version, &self.dst_ip)
    }
}

/// Converts the 16-byte representation back to an address.
pub fn to_ip(version: u8, bytes: &[u8; 16]) -> std::net::IpAddr {
    let v6 = std::net::Ipv6Addr::from(*bytes);
    match (version, v6.to_ipv4_mapped()) {
        (4, Some(v4)) => v4.into(),
        _ => v6.into(),
    }
}

/// Decodes `data` (captured bytes of a frame of link type `link`) into `out`.
///
/// Never panics and never allocates, whatever the bytes.
pub fn decode(
    _link: LinkType,
    _data: &[u8],
    _config: &DecodeConfig,
    _out: &mut Decoded,
) -> ParseOutcome {
    unimplemented!("decoder being written")
}
