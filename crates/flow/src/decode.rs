//! From link-layer bytes to the fields the flow meter needs, in one pass, without allocation.
//!
//! [`decode`] walks Ethernet / 802.1Q / QinQ / MPLS / PPPoE / Linux SLL / SLL2 / BSD null /
//! raw IP, then IPv4 (options, fragments) or IPv6 (extension headers, fragments), then TCP
//! (options), UDP, ICMP, ICMPv6 or SCTP, optionally through tunnels (GRE, VXLAN, IP-in-IP here;
//! GTP-U, Geneve, ERSPAN, Teredo, MPLS over UDP, WCCP and Aruba's 802.11 in GRE read in
//! [`tunnel`]), and fills a caller-owned [`Decoded`]. The outcome is a [`ParseOutcome`], counted by the caller in
//! an [`OutcomeCounters`] table: no `Result`, no heap.
use trawl_capture::LinkType;

use crate::tunnel::{self, gre_proto, Found, Payload, Tunnel, TunnelType};
use trawl_wire::ethernet::ethertype;
use trawl_wire::ipv4::protocol;
use trawl_wire::linux_sll::hardware_type;
use trawl_wire::{
    icmp, ipv6, pppoe, tcp, vxlan, EthernetPacket, GrePacket, Ipv4Packet, Ipv6Packet,
    LinuxSll2Packet, LinuxSllPacket, MplsPacket, PppoePacket, TcpPacket, UdpPacket, VlanPacket,
};

/// How tunnels are keyed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TunnelMode {
    /// Key flows on the outermost IP header (the tunnel itself is the flow). Default.
    #[default]
    Outer,
    /// Descend into GRE (IPv4, IPv6, transparent Ethernet bridging, PPTP, ERSPAN, WCCP, MPLS,
    /// Aruba 802.11), VXLAN (UDP 4789), GTP-U (UDP 2152), Geneve (UDP 6081), Teredo (UDP
    /// 3544), MPLS over UDP (6635) and IP-in-IP / IPv6-in-IP, and key on the innermost IP
    /// header; the outermost tunnel is kept in [`Decoded::tunnel`].
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
    /// The outermost tunnel the key was found in ([`TunnelMode::Inner`] only; none otherwise).
    pub tunnel: Tunnel,
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
/// Every field of `out` is overwritten. When the outcome has no key
/// ([`ParseOutcome::has_key`] is false) only the link-layer fields (MACs, VLAN) may be set; the
/// rest is zero. The rules (ICMP ports, tunnels, fragments, lengths) are in
/// `docs/specs/decoding.md`.
///
/// Never panics and never allocates, whatever the bytes.
pub fn decode(
    link: LinkType,
    data: &[u8],
    config: &DecodeConfig,
    out: &mut Decoded,
) -> ParseOutcome {
    *out = Decoded::default();
    let (net, off) = match link_layer(link, data, out) {
        Ok(found) => found,
        Err(outcome) => return outcome,
    };
    let mut walker = Walker {
        inner: config.tunnel == TunnelMode::Inner,
        depth: 0,
    };
    walker.network(data, net, off, out)
}

/// Most tunnel layers [`TunnelMode::Inner`] descends through: a bound against crafted
/// GRE-in-GRE-in-... packets. Deeper packets are keyed on the innermost header reached.
pub const MAX_TUNNEL_DEPTH: u8 = 4;

/// What the link layer says follows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Net {
    Ipv4,
    Ipv6,
    /// After an MPLS label stack, or in GTP-U and ERSPAN III: IP by the first nibble,
    /// anything else is not IP.
    Mpls,
    /// Raw IP link types: the first nibble is the version, anything else is malformed.
    Raw,
}

/// `data[off..]`, empty past the end (offsets never exceed the length, but an empty slice
/// costs nothing and keeps every path panic-free).
#[inline(always)]
fn rest(data: &[u8], off: usize) -> &[u8] {
    data.get(off..).unwrap_or_default()
}

/// Skips the link-layer header(s); returns what follows and where.
#[inline]
fn link_layer(
    link: LinkType,
    data: &[u8],
    out: &mut Decoded,
) -> Result<(Net, usize), ParseOutcome> {
    match link {
        LinkType::ETHERNET => ethernet(data, 0, out, true),
        LinkType::RAW | LinkType::RAW_BSD | LinkType::RAW_OPENBSD => Ok((Net::Raw, 0)),
        LinkType::IPV4 => Ok((Net::Ipv4, 0)),
        LinkType::IPV6 => Ok((Net::Ipv6, 0)),
        LinkType::LINUX_SLL => {
            let sll = LinuxSllPacket::new_checked(data).map_err(|_| ParseOutcome::TruncatedLink)?;
            if sll.hardware_type() == hardware_type::ETHER && sll.addr_len() == 6 {
                out.src_mac.copy_from_slice(sll.addr());
            }
            ethertypes(
                data,
                trawl_wire::linux_sll::HEADER_LEN,
                sll.protocol(),
                out,
                true,
            )
        }
        LinkType::LINUX_SLL2 => {
            let sll =
                LinuxSll2Packet::new_checked(data).map_err(|_| ParseOutcome::TruncatedLink)?;
            if sll.hardware_type() == hardware_type::ETHER && sll.addr_len() == 6 {
                out.src_mac.copy_from_slice(sll.addr());
            }
            ethertypes(
                data,
                trawl_wire::linux_sll2::HEADER_LEN,
                sll.protocol(),
                out,
                true,
            )
        }
        LinkType::NULL | LinkType::LOOP => {
            let Some(&af_bytes) = data.first_chunk::<4>() else {
                return Err(ParseOutcome::TruncatedLink);
            };
            let af = af_bytes;
            let af = if link == LinkType::LOOP {
                u32::from_be_bytes(af)
            } else {
                // Host byte order of the capturing machine, unknown here: the family is a
                // small number, so whichever reading is small is the right one.
                let le = u32::from_le_bytes(af);
                if le <= 0xffff {
                    le
                } else {
                    u32::from_be_bytes(af)
                }
            };
            match af {
                // AF_INET everywhere.
                2 => Ok((Net::Ipv4, 4)),
                // AF_INET6 on NetBSD/OpenBSD (24), FreeBSD/DragonFly (28), macOS (30).
                24 | 28 | 30 => Ok((Net::Ipv6, 4)),
                // Some capturers put an Ethertype (big-endian) in the low half instead of an
                // address family; Wireshark decodes those, and so do we.
                _ => match u16::from_be_bytes([af_bytes[2], af_bytes[3]]) {
                    0x0800 => Ok((Net::Ipv4, 4)),
                    0x86dd => Ok((Net::Ipv6, 4)),
                    _ => Err(ParseOutcome::NonIp),
                },
            }
        }
        _ => Err(ParseOutcome::UnsupportedLinkType),
    }
}

/// An Ethernet header at `off`, then its tags. `outer` records MACs and VLAN.
#[inline]
fn ethernet(
    data: &[u8],
    off: usize,
    out: &mut Decoded,
    outer: bool,
) -> Result<(Net, usize), ParseOutcome> {
    let eth =
        EthernetPacket::new_checked(rest(data, off)).map_err(|_| ParseOutcome::TruncatedLink)?;
    if outer {
        out.dst_mac = eth.dst_addr();
        out.src_mac = eth.src_addr();
    }
    ethertypes(
        data,
        off + trawl_wire::ethernet::HEADER_LEN,
        eth.ethertype(),
        out,
        outer,
    )
}

/// Follows an EtherType through VLAN tags, MPLS labels and PPPoE to IP. 802.3 lengths, LLC
/// and every other EtherType are not IP. Each step consumes bytes, so the loop is bounded.
#[inline]
fn ethertypes(
    data: &[u8],
    mut off: usize,
    mut ty: u16,
    out: &mut Decoded,
    outer: bool,
) -> Result<(Net, usize), ParseOutcome> {
    let mut record_vlan = outer;
    loop {
        match ty {
            ethertype::IPV4 => return Ok((Net::Ipv4, off)),
            ethertype::IPV6 => return Ok((Net::Ipv6, off)),
            ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_9100 => {
                let tag = VlanPacket::new_checked(rest(data, off))
                    .map_err(|_| ParseOutcome::TruncatedLink)?;
                if record_vlan {
                    out.vlan = tag.vlan_id();
                    record_vlan = false;
                }
                ty = tag.ethertype();
                off += trawl_wire::vlan::HEADER_LEN;
            }
            ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST => return mpls_stack(data, off),
            ethertype::PPPOE_SESSION => {
                let session = PppoePacket::new_checked(rest(data, off))
                    .map_err(|_| ParseOutcome::TruncatedLink)?;
                off += pppoe::HEADER_LEN;
                return match session.protocol() {
                    pppoe::protocol::IPV4 => Ok((Net::Ipv4, off)),
                    pppoe::protocol::IPV6 => Ok((Net::Ipv6, off)),
                    _ => Err(ParseOutcome::NonIp),
                };
            }
            _ => return Err(ParseOutcome::NonIp),
        }
    }
}

/// Skips an MPLS label stack at `off`.
#[inline]
fn mpls_stack(data: &[u8], mut off: usize) -> Result<(Net, usize), ParseOutcome> {
    loop {
        let entry =
            MplsPacket::new_checked(rest(data, off)).map_err(|_| ParseOutcome::TruncatedLink)?;
        off += trawl_wire::mpls::HEADER_LEN;
        if entry.bottom_of_stack() {
            return Ok((Net::Mpls, off));
        }
    }
}

/// IPv4 address as an IPv4-mapped IPv6 address. Built as one 128-bit value, so it is stored
/// in one piece: the key builder reads the address back whole, and a read spanning the three
/// smaller stores of a byte-wise build stalled on store forwarding (the hottest load of
/// decoding).
#[inline(always)]
fn mapped(v4: [u8; 4]) -> [u8; 16] {
    ((0xffff_u128 << 32) | u128::from(u32::from_be_bytes(v4))).to_be_bytes()
}

/// The ICMP "ports": the type, and the counterpart type for request/answer pairs (else the
/// code), so that a request and its answer give mirrored keys.
#[inline]
fn icmp_ports(v6: bool, ty: u8, code: u8) -> (u16, u16) {
    let counterpart = if v6 {
        icmp::v6::counterpart(ty)
    } else {
        icmp::v4::counterpart(ty)
    };
    (ty as u16, counterpart.unwrap_or(code) as u16)
}

/// What a tunnel carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Inner {
    Net(Net),
    Ethernet,
    /// A PPP frame (PPTP): optional address/control, 1- or 2-byte protocol.
    Ppp,
    /// An MPLS label stack, then IP.
    Mpls,
    /// An 802.11 data frame (Aruba's GRE), then LLC/SNAP.
    Ieee80211,
}

impl Inner {
    fn of(payload: Payload) -> Self {
        match payload {
            Payload::Ethernet => Inner::Ethernet,
            Payload::Ip => Inner::Net(Net::Mpls),
            Payload::Ipv4 => Inner::Net(Net::Ipv4),
            Payload::Ipv6 => Inner::Net(Net::Ipv6),
            Payload::Mpls => Inner::Mpls,
            Payload::Ieee80211 => Inner::Ieee80211,
            Payload::Ppp => Inner::Ppp,
        }
    }
}

/// GRE protocol type of PPP (PPTP).
const PPP_IN_GRE: u16 = 0x880b;

/// A PPP frame at `off` as sent in PPTP's GRE: address and control (0xff 0x03) may be
/// compressed away, and so may the protocol's leading zero byte (RFC 1661). Anything but IP
/// (LCP, compressed or encrypted data, an empty acknowledgment) is not IP.
#[inline]
fn ppp(data: &[u8], mut off: usize) -> Result<(Net, usize), ParseOutcome> {
    if rest(data, off).starts_with(&[0xff, 0x03]) {
        off += 2;
    }
    match rest(data, off) {
        [0x21, ..] => Ok((Net::Ipv4, off + 1)),
        [0x57, ..] => Ok((Net::Ipv6, off + 1)),
        [0x00, 0x21, ..] => Ok((Net::Ipv4, off + 2)),
        [0x00, 0x57, ..] => Ok((Net::Ipv6, off + 2)),
        _ => Err(ParseOutcome::NonIp),
    }
}

/// Which IP version follows the link layer at `off`: `net` itself, or for an MPLS payload
/// and raw IP the first nibble (anything else is not IP after MPLS, malformed for raw IP).
#[inline(always)]
fn ip_version(data: &[u8], net: Net, off: usize) -> Result<Net, ParseOutcome> {
    match net {
        Net::Ipv4 | Net::Ipv6 => Ok(net),
        Net::Mpls | Net::Raw => match data.get(off).map(|b| b >> 4) {
            None => Err(ParseOutcome::TruncatedIp),
            Some(4) => Ok(Net::Ipv4),
            Some(6) => Ok(Net::Ipv6),
            Some(_) if net == Net::Mpls => Err(ParseOutcome::NonIp),
            Some(_) => Err(ParseOutcome::MalformedIp),
        },
    }
}

/// The IPv4 header at the start of `bytes` when it gives a key: the header, its length and
/// the packet's total length (as stated; when 0, what is there).
#[inline(always)]
fn ipv4_header(bytes: &[u8]) -> Result<(Ipv4Packet<&[u8]>, usize, usize), ParseOutcome> {
    if bytes.len() < trawl_wire::ipv4::HEADER_LEN {
        return Err(ParseOutcome::TruncatedIp);
    }
    let ip = Ipv4Packet::new_unchecked(bytes);
    let header_len = ip.header_len();
    if ip.version() != 4 || header_len < trawl_wire::ipv4::HEADER_LEN {
        return Err(ParseOutcome::MalformedIp);
    }
    let total = match ip.total_len() as usize {
        // Captured before segmentation offload filled the length in: what is there.
        0 => bytes.len(),
        total => total,
    };
    if total < header_len {
        return Err(ParseOutcome::MalformedIp);
    }
    if bytes.len() < header_len {
        return Err(ParseOutcome::TruncatedIp);
    }
    Ok((ip, header_len, total))
}

/// The IPv6 header at the start of `bytes` when it gives a key.
#[inline(always)]
fn ipv6_header(bytes: &[u8]) -> Result<Ipv6Packet<&[u8]>, ParseOutcome> {
    if bytes.len() < ipv6::HEADER_LEN {
        return Err(ParseOutcome::TruncatedIp);
    }
    let ip = Ipv6Packet::new_unchecked(bytes);
    if ip.version() != 6 {
        return Err(ParseOutcome::MalformedIp);
    }
    Ok(ip)
}

/// The source and destination addresses [`decode`] keys `data` on with [`TunnelMode::Outer`]
/// (IPv4 mapped, as in [`Decoded`]), read from the link layer and the first IP header alone:
/// `Some` exactly when `decode` finds a key, with its `src_ip` and `dst_ip`. Past a valid IP
/// header every outer decode has a key (fragments, cut or unknown transports included), so
/// the transport header is not read. What spreads packets over meters by their addresses
/// (`packet_lanes` of `trawl-blocks`) needs no more, at a fraction of a decode's cost.
/// `link` is scratch for the link-layer fields (MACs, VLAN), which the walk writes.
///
/// Never panics and never allocates, whatever the bytes.
pub fn outer_addresses(
    link_type: LinkType,
    data: &[u8],
    link: &mut Decoded,
) -> Option<([u8; 16], [u8; 16])> {
    let (net, off) = link_layer(link_type, data, link).ok()?;
    let bytes = rest(data, off);
    match ip_version(data, net, off).ok()? {
        Net::Ipv4 => {
            let (ip, _, _) = ipv4_header(bytes).ok()?;
            Some((mapped(ip.src_addr()), mapped(ip.dst_addr())))
        }
        _ => {
            let ip = ipv6_header(bytes).ok()?;
            Some((ip.src_addr(), ip.dst_addr()))
        }
    }
}

/// Network and transport decoding, with the tunnel state.
struct Walker {
    inner: bool,
    depth: u8,
}

impl Walker {
    /// Decodes the IP packet at `off`. `data` ends where the enclosing packet ends.
    fn network(&mut self, data: &[u8], net: Net, off: usize, out: &mut Decoded) -> ParseOutcome {
        match ip_version(data, net, off) {
            Ok(Net::Ipv4) => self.ipv4(data, off, out),
            Ok(_) => self.ipv6(data, off, out),
            Err(outcome) => outcome,
        }
    }

    #[inline]
    fn ipv4(&mut self, data: &[u8], off: usize, out: &mut Decoded) -> ParseOutcome {
        let (ip, header_len, total) = match ipv4_header(rest(data, off)) {
            Ok(found) => found,
            Err(outcome) => return outcome,
        };
        out.ip_version = 4;
        out.src_ip = mapped(ip.src_addr());
        out.dst_ip = mapped(ip.dst_addr());
        out.proto = ip.protocol();
        out.ttl = ip.ttl();
        out.ip_len = total as u32;
        out.fragment_id = ip.ident() as u32;
        let l4_off = off + header_len;
        let l4_len = total - header_len;
        if ip.frag_offset() != 0 {
            out.fragment = FragmentKind::NonFirst;
            out.payload_offset = l4_off as u32;
            out.payload_len = l4_len as u32;
            return ParseOutcome::Fragment;
        }
        if ip.more_frags() {
            out.fragment = FragmentKind::First;
        }
        // Ethernet padding and the rest of the frame are not part of this packet.
        let end = off.saturating_add(total).min(data.len());
        self.transport(&data[..end], out.proto, l4_off, l4_len, out)
    }

    #[inline]
    fn ipv6(&mut self, data: &[u8], off: usize, out: &mut Decoded) -> ParseOutcome {
        let bytes = rest(data, off);
        let ip = match ipv6_header(bytes) {
            Ok(ip) => ip,
            Err(outcome) => return outcome,
        };
        let payload_len = match ip.payload_len() as usize {
            // Jumbogram, or captured before segmentation offload: what is there.
            0 => bytes.len() - ipv6::HEADER_LEN,
            len => len,
        };
        out.ip_version = 6;
        out.src_ip = ip.src_addr();
        out.dst_ip = ip.dst_addr();
        out.ttl = ip.hop_limit();
        out.ip_len = (payload_len + ipv6::HEADER_LEN) as u32;
        let start = off + ipv6::HEADER_LEN;
        let end = start.saturating_add(payload_len).min(data.len());
        let data = &data[..end];
        let walk = ipv6::walk_extension_headers(ip.next_header(), rest(data, start));
        out.proto = walk.protocol;
        let l4_off = start + walk.offset;
        let l4_len = payload_len.saturating_sub(walk.offset);
        if let Some(fragment) = walk.fragment {
            out.fragment_id = fragment.ident;
            if fragment.offset != 0 {
                out.fragment = FragmentKind::NonFirst;
                out.payload_offset = l4_off as u32;
                out.payload_len = l4_len as u32;
                return ParseOutcome::Fragment;
            }
            if fragment.more_frags {
                out.fragment = FragmentKind::First;
            }
        }
        if !walk.complete {
            // An extension header cut short: `proto` names it, nothing after it is known.
            out.payload_offset = l4_off as u32;
            out.payload_len = l4_len as u32;
            return ParseOutcome::TransportIncomplete;
        }
        self.transport(data, walk.protocol, l4_off, l4_len, out)
    }

    /// The transport header at `l4_off`; `l4_len` is its length as IP states it, `data` ends
    /// where the IP packet ends (or at the capture's end).
    #[inline]
    fn transport(
        &mut self,
        data: &[u8],
        proto: u8,
        l4_off: usize,
        l4_len: usize,
        out: &mut Decoded,
    ) -> ParseOutcome {
        let bytes = rest(data, l4_off);
        // Until the header says otherwise: the payload starts after the minimum header.
        let min_header = match proto {
            protocol::TCP => tcp::HEADER_LEN,
            protocol::UDP => trawl_wire::udp::HEADER_LEN,
            protocol::SCTP => trawl_wire::sctp::HEADER_LEN,
            protocol::ICMP | protocol::ICMPV6 => icmp::HEADER_LEN,
            _ => 0,
        };
        out.payload_offset = (l4_off + min_header) as u32;
        out.payload_len = l4_len.saturating_sub(min_header) as u32;
        match proto {
            protocol::TCP => tcp_header(bytes, l4_off, l4_len, out),
            protocol::UDP => self.udp(data, bytes, l4_off, l4_len, out),
            protocol::SCTP => {
                if let Some(p) = bytes.first_chunk::<4>() {
                    out.src_port = u16::from_be_bytes([p[0], p[1]]);
                    out.dst_port = u16::from_be_bytes([p[2], p[3]]);
                }
                if bytes.len() < trawl_wire::sctp::HEADER_LEN {
                    return ParseOutcome::TransportIncomplete;
                }
                ParseOutcome::Ok
            }
            protocol::ICMP | protocol::ICMPV6 => {
                if let Some(&[ty, code]) = bytes.first_chunk::<2>() {
                    (out.src_port, out.dst_port) = icmp_ports(proto == protocol::ICMPV6, ty, code);
                }
                if bytes.len() < icmp::HEADER_LEN {
                    return ParseOutcome::TransportIncomplete;
                }
                ParseOutcome::Ok
            }
            protocol::GRE if self.may_descend(out) => self.gre(data, bytes, l4_off, out),
            protocol::IPV4 if self.may_descend(out) => {
                let ipip = (TunnelType::IpIp, 0);
                self.descend(data, Inner::Net(Net::Ipv4), l4_off, ipip, out)
            }
            protocol::IPV6 if self.may_descend(out) => {
                let ipip = (TunnelType::IpIp, 0);
                self.descend(data, Inner::Net(Net::Ipv6), l4_off, ipip, out)
            }
            _ => ParseOutcome::Ok,
        }
    }

    #[inline]
    fn udp(
        &mut self,
        data: &[u8],
        bytes: &[u8],
        l4_off: usize,
        l4_len: usize,
        out: &mut Decoded,
    ) -> ParseOutcome {
        const HEADER_LEN: usize = trawl_wire::udp::HEADER_LEN;
        if let Some(p) = bytes.first_chunk::<4>() {
            out.src_port = u16::from_be_bytes([p[0], p[1]]);
            out.dst_port = u16::from_be_bytes([p[2], p[3]]);
        }
        if bytes.len() < HEADER_LEN {
            return ParseOutcome::TransportIncomplete;
        }
        let udp_len = match UdpPacket::new_unchecked(bytes).len() as usize {
            // Jumbograms (RFC 2675) and offloaded "BIG TCP" tunnels: IP has the length.
            0 => l4_len,
            len => len,
        };
        // A first fragment carries only part of the datagram the UDP length describes.
        if udp_len < HEADER_LEN || (udp_len > l4_len && out.fragment == FragmentKind::None) {
            return ParseOutcome::TransportIncomplete;
        }
        out.payload_len = (udp_len.min(l4_len) - HEADER_LEN) as u32;
        if self.may_descend(out) {
            let end = (l4_off + udp_len).min(data.len());
            return self.udp_tunnel(&data[..end], l4_off + HEADER_LEN, out);
        }
        ParseOutcome::Ok
    }

    /// A UDP tunnel (by port) whose header starts at `start`; `data` ends with the datagram.
    #[cold]
    fn udp_tunnel(&mut self, data: &[u8], start: usize, out: &mut Decoded) -> ParseOutcome {
        let b = rest(data, start);
        let (kind, found) = match (out.src_port, out.dst_port) {
            (_, vxlan::PORT) => (TunnelType::Vxlan, vxlan_header(b)),
            (_, tunnel::VXLAN_GPE_PORT) => (TunnelType::Vxlan, tunnel::vxlan_gpe(b)),
            // GTP-U peers answer from port 2152 to the sender's port (tshark takes either).
            (tunnel::GTPU_PORT, _) | (_, tunnel::GTPU_PORT) => (TunnelType::GtpU, tunnel::gtpu(b)),
            (_, tunnel::GENEVE_PORT) => (TunnelType::Geneve, tunnel::geneve(b)),
            (_, tunnel::MPLS_UDP_PORT) => (TunnelType::MplsUdp, tunnel::mpls_top_label(b)),
            (tunnel::TEREDO_PORT, _) | (_, tunnel::TEREDO_PORT) => {
                (TunnelType::Teredo, tunnel::teredo(b))
            }
            _ => return ParseOutcome::Ok,
        };
        self.found(data, start, kind, found, out)
    }

    /// Descends into what a tunnel header at `start` was found to carry.
    #[inline]
    fn found(
        &mut self,
        data: &[u8],
        start: usize,
        kind: TunnelType,
        found: Found,
        out: &mut Decoded,
    ) -> ParseOutcome {
        match found {
            Found::Inner {
                payload,
                offset,
                id,
            } => self.descend(data, Inner::of(payload), start + offset, (kind, id), out),
            Found::Not => ParseOutcome::Ok,
            Found::Truncated => ParseOutcome::TransportIncomplete,
        }
    }

    /// GRE in [`TunnelMode::Inner`]: descends into IPv4, IPv6, Ethernet, ERSPAN, WCCP, MPLS
    /// and Aruba 802.11 payloads of plain (version 0, no routing) GRE and into PPP (PPTP); keys
    /// on the outer header otherwise.
    #[inline]
    fn gre(&mut self, data: &[u8], bytes: &[u8], l4_off: usize, out: &mut Decoded) -> ParseOutcome {
        let Ok(gre) = GrePacket::new_checked(bytes) else {
            return ParseOutcome::TransportIncomplete;
        };
        if gre.version() > 1 || gre.routing_present() {
            return ParseOutcome::Ok;
        }
        let start = l4_off + gre.header_len();
        let payload = rest(data, start);
        // The key; version 1 (PPTP) has payload length and call id there: the call id.
        let key = match gre.version() {
            0 => gre.key().unwrap_or(0),
            _ => gre.key().unwrap_or(0) & 0xffff,
        };
        let at = |payload| Found::Inner {
            payload,
            offset: 0,
            id: key,
        };
        let (kind, found) = match (gre.version(), gre.protocol_type()) {
            (0, ethertype::IPV4) => (TunnelType::Gre, at(Payload::Ipv4)),
            (0, ethertype::IPV6) => (TunnelType::Gre, at(Payload::Ipv6)),
            (0, ethertype::TRANSPARENT_ETHERNET_BRIDGING) => {
                (TunnelType::Gre, at(Payload::Ethernet))
            }
            // PPTP's enhanced GRE (RFC 2637) carries PPP.
            (_, PPP_IN_GRE) => (TunnelType::Gre, at(Payload::Ppp)),
            (0, ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST) => {
                (TunnelType::Gre, at(Payload::Mpls))
            }
            (0, proto @ (gre_proto::ERSPAN_2 | gre_proto::ERSPAN_3)) => (
                TunnelType::Erspan,
                tunnel::erspan(proto, gre.sequence_present(), payload),
            ),
            (0, gre_proto::WCCP) => (TunnelType::Gre, with_id(tunnel::wccp(payload), key)),
            (0, proto) if gre_proto::is_aruba(proto) => (TunnelType::Gre, at(Payload::Ieee80211)),
            _ => return ParseOutcome::Ok,
        };
        self.found(data, start, kind, found, out)
    }

    /// True when the packet in `out` may be looked into: inner mode, depth left, and not a
    /// fragment (fragments of a tunnel packet must all land in the outer flow).
    #[inline(always)]
    fn may_descend(&self, out: &Decoded) -> bool {
        self.inner && self.depth < MAX_TUNNEL_DEPTH && out.fragment == FragmentKind::None
    }

    /// Decodes a tunnel's payload at `off` and keys on it, keeping the tunnel (type and id as
    /// given, endpoints from the outer decode). When it has no key (not IP, truncated,
    /// malformed), the outer decode in `out` stands, `Ok` if the payload is simply not IP and
    /// `TransportIncomplete` if it is damaged.
    #[cold]
    fn descend(
        &mut self,
        data: &[u8],
        inner: Inner,
        off: usize,
        (kind, id): (TunnelType, u32),
        out: &mut Decoded,
    ) -> ParseOutcome {
        let saved = *out;
        // MACs and VLAN stay those of the outermost Ethernet header.
        *out = Decoded {
            dst_mac: saved.dst_mac,
            src_mac: saved.src_mac,
            vlan: saved.vlan,
            ..Decoded::default()
        };
        self.depth += 1;
        let outcome = match inner {
            Inner::Net(net) => self.network(data, net, off, out),
            Inner::Ethernet => match ethernet(data, off, out, false) {
                Ok((net, off)) => self.network(data, net, off, out),
                Err(outcome) => outcome,
            },
            Inner::Ppp => match ppp(data, off) {
                Ok((net, off)) => self.network(data, net, off, out),
                Err(outcome) => outcome,
            },
            Inner::Mpls => match mpls_stack(data, off) {
                Ok((net, off)) => self.network(data, net, off, out),
                Err(outcome) => outcome,
            },
            Inner::Ieee80211 => match tunnel::ieee80211(rest(data, off)) {
                Ok((ty, len)) => match ethertypes(data, off + len, ty, out, false) {
                    Ok((net, off)) => self.network(data, net, off, out),
                    Err(outcome) => outcome,
                },
                Err(Found::Not) => ParseOutcome::NonIp,
                Err(_) => ParseOutcome::TruncatedLink,
            },
        };
        if outcome.has_key() {
            // Nested tunnels: the outermost descent returns last, so its tunnel stays.
            out.tunnel = Tunnel {
                kind,
                ip_version: saved.ip_version,
                id,
                src_ip: saved.src_ip,
                dst_ip: saved.dst_ip,
            };
            return outcome;
        }
        *out = saved;
        match outcome {
            ParseOutcome::NonIp => ParseOutcome::Ok,
            _ => ParseOutcome::TransportIncomplete,
        }
    }
}

/// A VXLAN header: 8 bytes, then Ethernet; the id is the VNI.
fn vxlan_header(b: &[u8]) -> Found {
    match b.get(..vxlan::HEADER_LEN) {
        None => Found::Truncated,
        Some(h) => Found::Inner {
            payload: Payload::Ethernet,
            offset: vxlan::HEADER_LEN,
            id: u32::from_be_bytes([0, h[4], h[5], h[6]]),
        },
    }
}

/// `found` with the tunnel id `id` (GRE's key for what GRE carries).
fn with_id(found: Found, key: u32) -> Found {
    match found {
        Found::Inner {
            payload, offset, ..
        } => Found::Inner {
            payload,
            offset,
            id: key,
        },
        other => other,
    }
}

/// A TCP header: ports from 4 bytes, the rest from 20, options as far as captured.
#[inline]
fn tcp_header(bytes: &[u8], l4_off: usize, l4_len: usize, out: &mut Decoded) -> ParseOutcome {
    if let Some(p) = bytes.first_chunk::<4>() {
        out.src_port = u16::from_be_bytes([p[0], p[1]]);
        out.dst_port = u16::from_be_bytes([p[2], p[3]]);
    }
    if bytes.len() < tcp::HEADER_LEN {
        return ParseOutcome::TransportIncomplete;
    }
    let tcp = TcpPacket::new_unchecked(bytes);
    let header_len = tcp.header_len();
    if header_len < tcp::HEADER_LEN || header_len > l4_len {
        // A data offset below 5 or beyond the segment: not a header to trust.
        return ParseOutcome::TransportIncomplete;
    }
    out.tcp.flags = tcp.flags();
    out.tcp.seq = tcp.seq_number();
    out.tcp.ack = tcp.ack_number();
    out.tcp.window = tcp.window_len();
    out.tcp_valid = true;
    out.payload_offset = (l4_off + header_len) as u32;
    out.payload_len = (l4_len - header_len) as u32;
    if header_len > tcp::HEADER_LEN {
        let captured = header_len.min(bytes.len());
        for option in tcp::Options::new(&bytes[tcp::HEADER_LEN..captured]) {
            match option {
                Ok(tcp::TcpOption::MaxSegmentSize(mss)) => out.tcp.mss = mss,
                Ok(tcp::TcpOption::WindowScale(shift)) => out.tcp.window_scale = Some(shift),
                Ok(tcp::TcpOption::SackPermitted) => out.tcp.sack_permitted = true,
                Ok(tcp::TcpOption::Timestamps { .. }) => out.tcp.timestamps = true,
                Ok(_) => {}
                // Malformed (or cut short): keep what came before.
                Err(_) => break,
            }
        }
        if bytes.len() < header_len {
            return ParseOutcome::TransportIncomplete;
        }
    }
    ParseOutcome::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTER: DecodeConfig = DecodeConfig {
        tunnel: TunnelMode::Outer,
    };
    const INNER: DecodeConfig = DecodeConfig {
        tunnel: TunnelMode::Inner,
    };

    /// Ethernet / IPv4 / TCP SYN with MSS, SACK-permitted, timestamps, window scale.
    #[rustfmt::skip]
    static TCP4_SYN: [u8; 74] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, // dst MAC, src MAC ...
        0x88, 0x99, 0xaa, 0xbb, 0x08, 0x00,             // ..., IPv4
        0x45, 0x00, 0x00, 0x3c, 0xbe, 0xef, 0x40, 0x00, // 14: v4 IHL 5, len 60, id, DF
        0x40, 0x06, 0x00, 0x00, 0xc0, 0xa8, 0x01, 0x02, // 22: TTL 64, TCP, 192.168.1.2
        0x5d, 0xb8, 0xd8, 0x22,                         // 30: 93.184.216.34
        0xc3, 0x50, 0x01, 0xbb, 0x00, 0x00, 0x03, 0xe8, // 34: 50000 -> 443, seq 1000
        0x00, 0x00, 0x00, 0x00, 0xa0, 0x02, 0xfa, 0xf0, // 42: ack 0, doff 10, SYN, win
        0x00, 0x00, 0x00, 0x00,                         // 50: checksum, urgent
        0x02, 0x04, 0x05, 0xb4, 0x04, 0x02, 0x08, 0x0a, // 54: MSS 1460, SACK ok, TS ...
        0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, // 62: tsval, tsecr
        0x01, 0x03, 0x03, 0x07,                         // 70: NOP, WS 7
    ];

    /// Ethernet / IPv6 / hop-by-hop / UDP 5353 -> 53 with 4 payload bytes.
    #[rustfmt::skip]
    static UDP6_HBH: [u8; 80] = [
        0x33, 0x33, 0x00, 0x00, 0x00, 0x01, 0x02, 0x00, // dst MAC, src MAC ...
        0x00, 0x00, 0x00, 0x02, 0x86, 0xdd,             // ..., IPv6
        0x60, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x01, // 14: v6, payload 20, HBH, hop 1
        0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // 22: fe80::1
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, //
        0xff, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // 38: ff02::fb
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xfb, //
        0x11, 0x00, 0x01, 0x04, 0x00, 0x00, 0x00, 0x00, // 54: HBH -> UDP, PadN
        0x14, 0xe9, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, // 62: 5353 -> 53, len 12
        0xde, 0xad, 0xbe, 0xef,                         // 70: payload
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00,             // 74: Ethernet padding
    ];

    const MAC_DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0xd0];
    const MAC_SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x50];

    fn eth(ty: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&MAC_DST);
        v.extend_from_slice(&MAC_SRC);
        v.extend_from_slice(&ty.to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], payload: &[u8]) -> Vec<u8> {
        let total = (20 + payload.len()) as u16;
        let mut v = vec![0x45, 0x00];
        v.extend_from_slice(&total.to_be_bytes());
        v.extend_from_slice(&[0x12, 0x34, 0x00, 0x00, 64, proto, 0, 0]);
        v.extend_from_slice(&src);
        v.extend_from_slice(&dst);
        v.extend_from_slice(payload);
        v
    }

    fn ipv6(next: u8, src_low: u8, dst_low: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0x60, 0, 0, 0];
        v.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        v.extend_from_slice(&[next, 255]);
        let mut a = [0u8; 16];
        a[..2].copy_from_slice(&[0x20, 0x01]);
        a[15] = src_low;
        v.extend_from_slice(&a);
        a[15] = dst_low;
        v.extend_from_slice(&a);
        v.extend_from_slice(payload);
        v
    }

    fn udp(sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&sport.to_be_bytes());
        v.extend_from_slice(&dport.to_be_bytes());
        v.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
        v.extend_from_slice(&[0, 0]);
        v.extend_from_slice(payload);
        v
    }

    fn tcp(sport: u16, dport: u16, flags: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&sport.to_be_bytes());
        v.extend_from_slice(&dport.to_be_bytes());
        v.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 2, 0x50, flags, 0x10, 0x00, 0, 0, 0, 0]);
        v.extend_from_slice(payload);
        v
    }

    fn icmp(ty: u8, code: u8) -> Vec<u8> {
        vec![ty, code, 0, 0, 0, 1, 0, 1, 0x61, 0x62]
    }

    fn gre(proto: u16, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![0x00, 0x00];
        v.extend_from_slice(&proto.to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    fn vxlan(frame: &[u8]) -> Vec<u8> {
        let mut v = vec![0x08, 0, 0, 0, 0, 0, 0x2a, 0];
        v.extend_from_slice(frame);
        v
    }

    fn run(link: LinkType, data: &[u8], config: &DecodeConfig) -> (ParseOutcome, Decoded) {
        let mut out = Decoded::default();
        let outcome = decode(link, data, config, &mut out);
        (outcome, out)
    }

    fn v4(a: [u8; 4]) -> [u8; 16] {
        mapped(a)
    }

    #[test]
    fn parse_ethernet_ipv4_tcp_syn() {
        let (outcome, d) = run(LinkType::ETHERNET, &TCP4_SYN, &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        let expected = Decoded {
            dst_mac: [0x00, 0x11, 0x22, 0x33, 0x44, 0x55],
            src_mac: [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb],
            vlan: 0,
            ip_version: 4,
            src_ip: v4([192, 168, 1, 2]),
            dst_ip: v4([93, 184, 216, 34]),
            proto: 6,
            src_port: 50000,
            dst_port: 443,
            ip_len: 60,
            ttl: 64,
            fragment: FragmentKind::None,
            fragment_id: 0xbeef,
            tcp: TcpInfo {
                flags: tcp_flags::SYN,
                seq: 1000,
                ack: 0,
                window: 64240,
                mss: 1460,
                window_scale: Some(7),
                sack_permitted: true,
                timestamps: true,
            },
            tcp_valid: true,
            payload_len: 0,
            payload_offset: 74,
            tunnel: Tunnel::default(),
        };
        assert_eq!(d, expected);
        assert_eq!(d.src_addr().to_string(), "192.168.1.2");
        assert_eq!(d.dst_addr().to_string(), "93.184.216.34");
    }

    #[test]
    fn parse_ethernet_ipv6_hop_by_hop_udp_with_padding() {
        let (outcome, d) = run(LinkType::ETHERNET, &UDP6_HBH, &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!(d.ip_version, 6);
        assert_eq!(d.src_addr().to_string(), "fe80::1");
        assert_eq!(d.dst_addr().to_string(), "ff02::fb");
        assert_eq!((d.proto, d.src_port, d.dst_port), (17, 5353, 53));
        assert_eq!((d.ttl, d.ip_len), (1, 60));
        assert_eq!((d.payload_offset, d.payload_len), (70, 4));
        assert!(!d.tcp_valid);
        assert_eq!(d.fragment, FragmentKind::None);
    }

    #[test]
    fn ethernet_padding_is_not_payload() {
        let mut frame = eth(
            0x0800,
            &ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], &udp(1, 2, b"x")),
        );
        frame.resize(60, 0);
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!((d.ip_len, d.payload_offset, d.payload_len), (29, 42, 1));
        // TCP in a padded frame: the padding must not be read as TCP options either.
        let mut frame = eth(
            0x0800,
            &ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], &tcp(1, 2, 0x10, b"")),
        );
        frame.resize(60, 0xff);
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!((d.ip_len, d.payload_len), (40, 0));
    }

    #[test]
    fn decode_overwrites_every_field() {
        let mut out = Decoded::default();
        assert_eq!(
            decode(LinkType::ETHERNET, &TCP4_SYN, &OUTER, &mut out),
            ParseOutcome::Ok
        );
        let arp = eth(0x0806, &[0u8; 28]);
        assert_eq!(
            decode(LinkType::ETHERNET, &arp, &OUTER, &mut out),
            ParseOutcome::NonIp
        );
        assert_eq!(
            out,
            Decoded {
                dst_mac: MAC_DST,
                src_mac: MAC_SRC,
                ..Decoded::default()
            }
        );
        assert_eq!(
            decode(LinkType::RAW, &[], &OUTER, &mut out),
            ParseOutcome::TruncatedIp
        );
        assert_eq!(out, Decoded::default());
    }

    #[test]
    fn parse_vlan_qinq_and_9100() {
        let ip = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], &udp(1000, 2000, b""));
        // 802.1Q, VLAN 100, priority 3.
        let mut tagged = vec![0x60, 0x64, 0x08, 0x00];
        tagged.extend_from_slice(&ip);
        let (outcome, d) = run(LinkType::ETHERNET, &eth(0x8100, &tagged), &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!((d.vlan, d.src_port, d.payload_offset), (100, 1000, 46));
        // 802.1ad outer 200, then 802.1Q inner 100: the outermost wins.
        for tpid in [0x88a8u16, 0x9100] {
            let mut qinq = vec![0x00, 0xc8, 0x81, 0x00];
            qinq.extend_from_slice(&tagged);
            let (outcome, d) = run(LinkType::ETHERNET, &eth(tpid, &qinq), &OUTER);
            assert_eq!(outcome, ParseOutcome::Ok, "tpid {tpid:#x}");
            assert_eq!((d.vlan, d.dst_port, d.payload_offset), (200, 2000, 50));
        }
        // A tag cut short.
        let (outcome, d) = run(LinkType::ETHERNET, &eth(0x8100, &[0x00]), &OUTER);
        assert_eq!(outcome, ParseOutcome::TruncatedLink);
        assert_eq!(d.src_mac, MAC_SRC);
        // VLAN-tagged ARP.
        let (outcome, d) = run(
            LinkType::ETHERNET,
            &eth(0x8100, &[0, 5, 8, 6, 0, 1]),
            &OUTER,
        );
        assert_eq!((outcome, d.vlan), (ParseOutcome::NonIp, 5));
    }

    #[test]
    fn parse_mpls() {
        let ip4 = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], &tcp(80, 81, 0x12, b""));
        let mut stack = vec![0x00, 0x01, 0x20, 0x40, 0x00, 0x02, 0x21, 0x40];
        stack.extend_from_slice(&ip4);
        for ty in [0x8847u16, 0x8848] {
            let (outcome, d) = run(LinkType::ETHERNET, &eth(ty, &stack), &OUTER);
            assert_eq!(outcome, ParseOutcome::Ok);
            assert_eq!((d.ip_version, d.src_port, d.tcp.flags), (4, 80, 0x12));
            assert_eq!(d.payload_offset, 14 + 8 + 40);
        }
        let mut stack6 = vec![0x00, 0x01, 0x21, 0x40];
        stack6.extend_from_slice(&ipv6(17, 1, 2, &udp(7, 8, b"")));
        let (outcome, d) = run(LinkType::ETHERNET, &eth(0x8847, &stack6), &OUTER);
        assert_eq!(
            (outcome, d.ip_version, d.dst_port),
            (ParseOutcome::Ok, 6, 8)
        );
        // Pseudowire control word (first nibble 0): not IP.
        let pw = [0x00, 0x01, 0x21, 0x40, 0x00, 0x00, 0x00, 0x00];
        assert_eq!(
            run(LinkType::ETHERNET, &eth(0x8847, &pw), &OUTER).0,
            ParseOutcome::NonIp
        );
        // Label stack without bottom of stack, and a cut label.
        let no_bos = [0x00, 0x01, 0x20, 0x40];
        assert_eq!(
            run(LinkType::ETHERNET, &eth(0x8847, &no_bos), &OUTER).0,
            ParseOutcome::TruncatedLink
        );
        assert_eq!(
            run(LinkType::ETHERNET, &eth(0x8847, &no_bos[..3]), &OUTER).0,
            ParseOutcome::TruncatedLink
        );
        // Bottom of stack and nothing after it.
        assert_eq!(
            run(LinkType::ETHERNET, &eth(0x8847, &pw[..4]), &OUTER).0,
            ParseOutcome::TruncatedIp
        );
    }

    #[test]
    fn parse_pppoe() {
        let session = |proto: u16, payload: &[u8]| {
            let mut v = vec![0x11, 0x00, 0x00, 0x07];
            v.extend_from_slice(&((payload.len() + 2) as u16).to_be_bytes());
            v.extend_from_slice(&proto.to_be_bytes());
            v.extend_from_slice(payload);
            eth(0x8864, &v)
        };
        let ip4 = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], &udp(67, 68, b""));
        let (outcome, d) = run(LinkType::ETHERNET, &session(0x0021, &ip4), &OUTER);
        assert_eq!(
            (outcome, d.ip_version, d.src_port),
            (ParseOutcome::Ok, 4, 67)
        );
        assert_eq!(d.payload_offset, 14 + 8 + 28);
        let ip6 = ipv6(6, 1, 2, &tcp(1, 2, 0x02, b""));
        let (outcome, d) = run(LinkType::ETHERNET, &session(0x0057, &ip6), &OUTER);
        assert_eq!(
            (outcome, d.ip_version, d.tcp.flags),
            (ParseOutcome::Ok, 6, 0x02)
        );
        // LCP.
        let lcp = session(0xc021, &[1, 1, 0, 4]);
        assert_eq!(run(LinkType::ETHERNET, &lcp, &OUTER).0, ParseOutcome::NonIp);
        // Discovery stage is not IP.
        let padi = eth(0x8863, &[0x11, 0x09, 0, 0, 0, 0]);
        assert_eq!(
            run(LinkType::ETHERNET, &padi, &OUTER).0,
            ParseOutcome::NonIp
        );
        assert_eq!(
            run(LinkType::ETHERNET, &lcp[..20], &OUTER).0,
            ParseOutcome::TruncatedLink
        );
    }

    #[test]
    fn parse_linux_sll_and_sll2() {
        let ip = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], &udp(1, 2, b"abc"));
        #[rustfmt::skip]
        let mut sll = vec![
            0x00, 0x04, 0x00, 0x01, 0x00, 0x06,             // outgoing, ARPHRD_ETHER, alen 6
            0x02, 0x42, 0xac, 0x11, 0x00, 0x02, 0x00, 0x00, // address
            0x08, 0x00,                                     // IPv4
        ];
        sll.extend_from_slice(&ip);
        let (outcome, d) = run(LinkType::LINUX_SLL, &sll, &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!(d.src_mac, [0x02, 0x42, 0xac, 0x11, 0x00, 0x02]);
        assert_eq!(d.dst_mac, [0; 6]);
        assert_eq!((d.payload_offset, d.payload_len), (16 + 28, 3));
        assert_eq!(
            run(LinkType::LINUX_SLL, &sll[..15], &OUTER).0,
            ParseOutcome::TruncatedLink
        );
        // tun device (ARPHRD_NONE): no MAC.
        sll[2..4].copy_from_slice(&[0xff, 0xfe]);
        let (outcome, d) = run(LinkType::LINUX_SLL, &sll, &OUTER);
        assert_eq!((outcome, d.src_mac), (ParseOutcome::Ok, [0; 6]));

        #[rustfmt::skip]
        let mut sll2 = vec![
            0x81, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, // VLAN-tagged, ifindex 2
            0x00, 0x01, 0x00, 0x06,                         // ARPHRD_ETHER, host, alen 6
            0x02, 0x42, 0xac, 0x11, 0x00, 0x03, 0x00, 0x00, // address
            0x00, 0x0a, 0x86, 0xdd,                         // VLAN 10, IPv6
        ];
        sll2.extend_from_slice(&ipv6(6, 1, 2, &tcp(22, 5000, 0x18, b"hi")));
        let (outcome, d) = run(LinkType::LINUX_SLL2, &sll2, &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!((d.vlan, d.src_port, d.payload_len), (10, 22, 2));
        assert_eq!(d.src_mac, [0x02, 0x42, 0xac, 0x11, 0x00, 0x03]);
        assert_eq!(d.payload_offset, 24 + 40 + 20);
        assert_eq!(
            run(LinkType::LINUX_SLL2, &sll2[..19], &OUTER).0,
            ParseOutcome::TruncatedLink
        );
        // SLL carrying ARP.
        sll2[20..24].copy_from_slice(&[0x00, 0x0a, 0x08, 0x06]);
        assert_eq!(
            run(LinkType::LINUX_SLL2, &sll2, &OUTER).0,
            ParseOutcome::NonIp
        );
    }

    #[test]
    fn parse_null_and_loop() {
        let ip4 = ipv4(1, [127, 0, 0, 1], [127, 0, 0, 1], &icmp(8, 0));
        let ip6 = ipv6(58, 1, 1, &icmp(128, 0));
        let with = |af: [u8; 4], ip: &[u8]| [&af[..], ip].concat();
        for af in [[2, 0, 0, 0], [0, 0, 0, 2]] {
            let (outcome, d) = run(LinkType::NULL, &with(af, &ip4), &OUTER);
            assert_eq!(
                (outcome, d.ip_version, d.payload_offset),
                (ParseOutcome::Ok, 4, 32)
            );
        }
        for af in [24u32, 28, 30] {
            for bytes in [af.to_le_bytes(), af.to_be_bytes()] {
                let (outcome, d) = run(LinkType::NULL, &with(bytes, &ip6), &OUTER);
                assert_eq!((outcome, d.ip_version), (ParseOutcome::Ok, 6), "af {af}");
            }
            let (outcome, d) = run(LinkType::LOOP, &with(af.to_be_bytes(), &ip6), &OUTER);
            assert_eq!((outcome, d.ip_version), (ParseOutcome::Ok, 6), "af {af}");
        }
        let (outcome, _) = run(LinkType::LOOP, &with([0, 0, 0, 2], &ip4), &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        // AF_APPLETALK, and a header cut short.
        assert_eq!(
            run(LinkType::NULL, &with([16, 0, 0, 0], &ip4), &OUTER).0,
            ParseOutcome::NonIp
        );
        assert_eq!(
            run(LinkType::NULL, &[2, 0, 0], &OUTER).0,
            ParseOutcome::TruncatedLink
        );
        assert_eq!(
            run(LinkType::LOOP, &[], &OUTER).0,
            ParseOutcome::TruncatedLink
        );
    }

    #[test]
    fn parse_raw_link_types() {
        let ip4 = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], &udp(1, 2, b""));
        let ip6 = ipv6(17, 1, 2, &udp(3, 4, b""));
        for link in [LinkType::RAW, LinkType::RAW_BSD, LinkType::RAW_OPENBSD] {
            let (outcome, d) = run(link, &ip4, &OUTER);
            assert_eq!(
                (outcome, d.ip_version, d.src_port),
                (ParseOutcome::Ok, 4, 1)
            );
            let (outcome, d) = run(link, &ip6, &OUTER);
            assert_eq!(
                (outcome, d.ip_version, d.src_port),
                (ParseOutcome::Ok, 6, 3)
            );
            assert_eq!(run(link, &[0x50; 40], &OUTER).0, ParseOutcome::MalformedIp);
            assert_eq!(run(link, &[], &OUTER).0, ParseOutcome::TruncatedIp);
        }
        assert_eq!(run(LinkType::IPV4, &ip4, &OUTER).0, ParseOutcome::Ok);
        assert_eq!(run(LinkType::IPV6, &ip6, &OUTER).0, ParseOutcome::Ok);
        // The link type fixes the version: a mismatch is malformed.
        assert_eq!(
            run(LinkType::IPV4, &ip6, &OUTER).0,
            ParseOutcome::MalformedIp
        );
        assert_eq!(
            run(LinkType::IPV6, &ip4[..28], &OUTER).0,
            ParseOutcome::TruncatedIp
        );
        let mut ip4_as_6 = ip4.clone();
        ip4_as_6.resize(48, 0);
        assert_eq!(
            run(LinkType::IPV6, &ip4_as_6, &OUTER).0,
            ParseOutcome::MalformedIp
        );
    }

    #[test]
    fn unsupported_link_types() {
        for link in [
            LinkType(105),
            LinkType(127),
            LinkType(9),
            LinkType(u16::MAX),
        ] {
            let (outcome, d) = run(link, &TCP4_SYN, &OUTER);
            assert_eq!(outcome, ParseOutcome::UnsupportedLinkType);
            assert_eq!(d, Decoded::default());
        }
    }

    #[test]
    fn parse_non_ip_frames() {
        // 802.3 length field with an LLC (STP) header.
        let stp = eth(0x0026, &[0x42, 0x42, 0x03, 0x00, 0x00]);
        let (outcome, d) = run(LinkType::ETHERNET, &stp, &OUTER);
        assert_eq!((outcome, d.dst_mac), (ParseOutcome::NonIp, MAC_DST));
        assert_eq!(
            run(LinkType::ETHERNET, &eth(0x88cc, &[0; 20]), &OUTER).0,
            ParseOutcome::NonIp
        );
        assert_eq!(
            run(LinkType::ETHERNET, &TCP4_SYN[..13], &OUTER).0,
            ParseOutcome::TruncatedLink
        );
    }

    #[test]
    fn truncated_tcp4_at_every_offset() {
        for len in 0..=TCP4_SYN.len() {
            for config in [OUTER, INNER] {
                let (outcome, d) = run(LinkType::ETHERNET, &TCP4_SYN[..len], &config);
                let expected = match len {
                    0..14 => ParseOutcome::TruncatedLink,
                    14..34 => ParseOutcome::TruncatedIp,
                    34..74 => ParseOutcome::TransportIncomplete,
                    _ => ParseOutcome::Ok,
                };
                assert_eq!(outcome, expected, "len {len}");
                if len >= 14 {
                    assert_eq!(d.src_mac[0], 0x66, "len {len}");
                }
                if len < 34 {
                    assert_eq!(d.ip_version, 0, "len {len}");
                    continue;
                }
                // IP-stated lengths hold whatever was captured.
                assert_eq!((d.ip_version, d.ip_len, d.proto), (4, 60, 6), "len {len}");
                let ports = if len >= 38 { (50000, 443) } else { (0, 0) };
                assert_eq!((d.src_port, d.dst_port), ports, "len {len}");
                assert_eq!(d.tcp_valid, len >= 54, "len {len}");
                if len >= 54 {
                    assert_eq!(d.tcp.flags, tcp_flags::SYN, "len {len}");
                    assert_eq!((d.payload_offset, d.payload_len), (74, 0), "len {len}");
                } else {
                    assert_eq!(d.tcp, TcpInfo::default(), "len {len}");
                }
                // Options are taken as far as they were captured, never from beyond.
                assert_eq!(d.tcp.mss != 0, len >= 58, "len {len}");
                assert_eq!(d.tcp.window_scale.is_some(), len >= 74, "len {len}");
            }
        }
    }

    #[test]
    fn truncated_udp6_at_every_offset() {
        for len in 0..=UDP6_HBH.len() {
            for config in [OUTER, INNER] {
                let (outcome, d) = run(LinkType::ETHERNET, &UDP6_HBH[..len], &config);
                let expected = match len {
                    0..14 => ParseOutcome::TruncatedLink,
                    14..54 => ParseOutcome::TruncatedIp,
                    54..70 => ParseOutcome::TransportIncomplete,
                    _ => ParseOutcome::Ok,
                };
                assert_eq!(outcome, expected, "len {len}");
                if len < 54 {
                    continue;
                }
                assert_eq!((d.ip_version, d.ip_len, d.ttl), (6, 60, 1), "len {len}");
                // The hop-by-hop header is cut short below 62: it is what is named.
                let proto = if len < 62 { 0 } else { 17 };
                assert_eq!(d.proto, proto, "len {len}");
                let ports = if len >= 66 { (5353, 53) } else { (0, 0) };
                assert_eq!((d.src_port, d.dst_port), ports, "len {len}");
                if len >= 62 {
                    assert_eq!(d.payload_offset, 70, "len {len}");
                }
                if len >= 70 {
                    assert_eq!(d.payload_len, 4, "len {len}");
                }
            }
        }
    }

    #[test]
    fn malformed_ipv4() {
        let good = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], &udp(1, 2, b""));
        let mut bad = good.clone();
        bad[0] = 0x44; // IHL 4
        assert_eq!(
            run(LinkType::RAW, &bad, &OUTER).0,
            ParseOutcome::MalformedIp
        );
        let mut bad = good.clone();
        bad[2..4].copy_from_slice(&19u16.to_be_bytes()); // total length below IHL * 4
        assert_eq!(
            run(LinkType::RAW, &bad, &OUTER).0,
            ParseOutcome::MalformedIp
        );
        let mut bad = good.clone();
        bad[0] = 0x65; // version 6 under an IPv4 EtherType
        assert_eq!(
            run(LinkType::ETHERNET, &eth(0x0800, &bad), &OUTER).0,
            ParseOutcome::MalformedIp
        );
        // IHL 15 with only 28 bytes captured.
        let mut cut = good.clone();
        cut[0] = 0x4f;
        cut[2..4].copy_from_slice(&80u16.to_be_bytes());
        assert_eq!(
            run(LinkType::RAW, &cut, &OUTER).0,
            ParseOutcome::TruncatedIp
        );
        // A total length larger than captured is a snap length, not an error.
        let mut snapped = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], &tcp(1, 2, 0x10, b"abc"));
        snapped[2..4].copy_from_slice(&1500u16.to_be_bytes());
        let (outcome, d) = run(LinkType::RAW, &snapped, &OUTER);
        assert_eq!(
            (outcome, d.ip_len, d.payload_len),
            (ParseOutcome::Ok, 1500, 1460)
        );
        // IPv6 with a wrong version nibble.
        let mut bad6 = ipv6(17, 1, 2, &udp(1, 2, b""));
        bad6[0] = 0x40;
        assert_eq!(
            run(LinkType::ETHERNET, &eth(0x86dd, &bad6), &OUTER).0,
            ParseOutcome::MalformedIp
        );
    }

    #[test]
    fn ipv4_with_options() {
        let mut ip = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], &tcp(1, 2, 0x10, b"data"));
        ip[0] = 0x46;
        ip.splice(20..20, [0x94, 0x04, 0x00, 0x00]);
        let total = ip.len() as u16;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        let (outcome, d) = run(LinkType::RAW, &ip, &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!(
            (d.src_port, d.payload_offset, d.payload_len, d.ip_len),
            (1, 44, 4, 48)
        );
    }

    #[test]
    fn offloaded_zero_lengths_use_the_captured_bytes() {
        let mut ip = ipv4(6, [10, 0, 0, 1], [10, 0, 0, 2], &tcp(1, 2, 0x10, &[0; 100]));
        ip[2..4].copy_from_slice(&[0, 0]);
        let (outcome, d) = run(LinkType::RAW, &ip, &OUTER);
        assert_eq!(
            (outcome, d.ip_len, d.payload_len),
            (ParseOutcome::Ok, 140, 100)
        );
        let mut ip6 = ipv6(17, 1, 2, &udp(1, 2, &[0; 10]));
        ip6[4..6].copy_from_slice(&[0, 0]);
        let (outcome, d) = run(LinkType::RAW, &ip6, &OUTER);
        assert_eq!(
            (outcome, d.ip_len, d.payload_len),
            (ParseOutcome::Ok, 58, 10)
        );
    }

    #[test]
    fn ipv4_fragments() {
        let datagram = udp(5000, 53, &[0xab; 32]);
        // First fragment: 16 bytes of the 40-byte datagram, MF.
        let mut first = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], &datagram[..16]);
        first[6] = 0x20;
        let (outcome, d) = run(LinkType::RAW, &first, &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!(d.fragment, FragmentKind::First);
        assert_eq!((d.src_port, d.dst_port, d.fragment_id), (5000, 53, 0x1234));
        assert_eq!(d.payload_len, 8);
        // Last fragment: offset 16 bytes (2 units), no MF.
        let mut last = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], &datagram[16..]);
        last[6..8].copy_from_slice(&[0x00, 0x02]);
        let (outcome, d) = run(LinkType::RAW, &last, &OUTER);
        assert_eq!(outcome, ParseOutcome::Fragment);
        assert_eq!(d.fragment, FragmentKind::NonFirst);
        assert_eq!(
            (d.src_port, d.dst_port, d.proto, d.fragment_id),
            (0, 0, 17, 0x1234)
        );
        assert_eq!(d.src_ip, v4([10, 0, 0, 1]));
        assert_eq!((d.payload_offset, d.payload_len), (20, 24));
        // A non-first fragment that happens to start like a VXLAN header is not descended.
        let (outcome, d) = run(LinkType::RAW, &last, &INNER);
        assert_eq!((outcome, d.proto), (ParseOutcome::Fragment, 17));
    }

    #[test]
    fn ipv6_fragments() {
        let datagram = tcp(443, 40000, 0x18, &[0xcd; 24]);
        let frag = |offset: u16, more: bool, part: &[u8]| {
            let mut h = vec![6, 0];
            h.extend_from_slice(&(offset | more as u16).to_be_bytes());
            h.extend_from_slice(&0xdead_beefu32.to_be_bytes());
            h.extend_from_slice(part);
            ipv6(44, 1, 2, &h)
        };
        let (outcome, d) = run(LinkType::IPV6, &frag(0, true, &datagram[..24]), &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!(d.fragment, FragmentKind::First);
        assert_eq!((d.proto, d.src_port, d.fragment_id), (6, 443, 0xdead_beef));
        assert!(d.tcp_valid);
        assert_eq!((d.payload_offset, d.payload_len), (40 + 8 + 20, 4));
        let (outcome, d) = run(LinkType::IPV6, &frag(24, false, &datagram[24..]), &OUTER);
        assert_eq!(outcome, ParseOutcome::Fragment);
        assert_eq!(d.fragment, FragmentKind::NonFirst);
        assert_eq!((d.proto, d.src_port, d.fragment_id), (6, 0, 0xdead_beef));
        assert_eq!((d.payload_offset, d.payload_len, d.ip_len), (48, 20, 68));
        // Atomic fragment (offset 0, no MF): not fragmented, but the id is kept.
        let (outcome, d) = run(LinkType::IPV6, &frag(0, false, &datagram), &OUTER);
        assert_eq!(
            (outcome, d.fragment, d.fragment_id),
            (ParseOutcome::Ok, FragmentKind::None, 0xdead_beef)
        );
    }

    #[test]
    fn ipv6_esp_and_no_next_header_stop_the_walk() {
        let (outcome, d) = run(LinkType::IPV6, &ipv6(50, 1, 2, &[0x11; 24]), &OUTER);
        assert_eq!(
            (
                outcome,
                d.proto,
                d.src_port,
                d.payload_offset,
                d.payload_len
            ),
            (ParseOutcome::Ok, 50, 0, 40, 24)
        );
        let (outcome, d) = run(LinkType::IPV6, &ipv6(59, 1, 2, &[]), &OUTER);
        assert_eq!((outcome, d.proto), (ParseOutcome::Ok, 59));
    }

    #[test]
    fn icmp_keys_mirror() {
        let cases4 = [
            (8, 0, (8, 0)),
            (0, 0, (0, 8)),
            (13, 0, (13, 14)),
            (14, 0, (14, 13)),
            (15, 0, (15, 16)),
            (16, 0, (16, 15)),
            (17, 0, (17, 18)),
            (18, 0, (18, 17)),
            (10, 0, (10, 9)),
            (9, 0, (9, 10)),
            (3, 1, (3, 1)),
            (11, 0, (11, 0)),
        ];
        for (ty, code, ports) in cases4 {
            let ip = ipv4(1, [10, 0, 0, 1], [10, 0, 0, 2], &icmp(ty, code));
            let (outcome, d) = run(LinkType::RAW, &ip, &OUTER);
            assert_eq!(outcome, ParseOutcome::Ok);
            assert_eq!((d.src_port, d.dst_port), ports, "icmp type {ty}");
            assert_eq!((d.payload_offset, d.payload_len), (28, 2));
        }
        let cases6 = [
            (128, 0, (128, 129)),
            (129, 0, (129, 128)),
            (133, 0, (133, 134)),
            (134, 0, (134, 133)),
            (135, 0, (135, 136)),
            (136, 0, (136, 135)),
            (130, 0, (130, 131)),
            (131, 0, (131, 130)),
            (1, 4, (1, 4)),
            (8, 0, (8, 0)),
        ];
        for (ty, code, ports) in cases6 {
            let (outcome, d) = run(LinkType::RAW, &ipv6(58, 1, 2, &icmp(ty, code)), &OUTER);
            assert_eq!(outcome, ParseOutcome::Ok);
            assert_eq!((d.src_port, d.dst_port), ports, "icmpv6 type {ty}");
        }
        // A request and its reply give mirrored keys.
        let req = run(
            LinkType::RAW,
            &ipv4(1, [10, 0, 0, 1], [10, 0, 0, 2], &icmp(8, 0)),
            &OUTER,
        )
        .1;
        let rep = run(
            LinkType::RAW,
            &ipv4(1, [10, 0, 0, 2], [10, 0, 0, 1], &icmp(0, 0)),
            &OUTER,
        )
        .1;
        assert_eq!(
            (req.src_ip, req.dst_ip, req.src_port, req.dst_port),
            (rep.dst_ip, rep.src_ip, rep.dst_port, rep.src_port)
        );
        // Type and code only: outcome says the header was cut.
        let ip = ipv4(1, [10, 0, 0, 1], [10, 0, 0, 2], &icmp(8, 0)[..2]);
        let (outcome, d) = run(LinkType::RAW, &ip, &OUTER);
        assert_eq!(
            (outcome, d.src_port, d.dst_port),
            (ParseOutcome::TransportIncomplete, 8, 0)
        );
    }

    #[test]
    fn parse_sctp() {
        let mut sctp = vec![0x0b, 0x59, 0x0b, 0x5a, 0, 0, 0, 1, 0, 0, 0, 0];
        sctp.extend_from_slice(&[0x00, 0x03, 0x00, 0x04]);
        let (outcome, d) = run(
            LinkType::RAW,
            &ipv4(132, [1, 1, 1, 1], [2, 2, 2, 2], &sctp),
            &OUTER,
        );
        assert_eq!(
            (outcome, d.src_port, d.dst_port, d.payload_len),
            (ParseOutcome::Ok, 2905, 2906, 4)
        );
        let (outcome, d) = run(
            LinkType::RAW,
            &ipv4(132, [1, 1, 1, 1], [2, 2, 2, 2], &sctp[..6]),
            &OUTER,
        );
        assert_eq!(
            (outcome, d.src_port),
            (ParseOutcome::TransportIncomplete, 2905)
        );
    }

    #[test]
    fn tcp_invalid_headers() {
        // Data offset 4.
        let mut seg = tcp(1, 2, 0x02, b"");
        seg[12] = 0x40;
        let (outcome, d) = run(
            LinkType::RAW,
            &ipv4(6, [1, 1, 1, 1], [2, 2, 2, 2], &seg),
            &OUTER,
        );
        assert_eq!(
            (outcome, d.src_port, d.tcp_valid),
            (ParseOutcome::TransportIncomplete, 1, false)
        );
        // Data offset beyond the segment IP describes.
        seg[12] = 0xf0;
        let (outcome, d) = run(
            LinkType::RAW,
            &ipv4(6, [1, 1, 1, 1], [2, 2, 2, 2], &seg),
            &OUTER,
        );
        assert_eq!(
            (outcome, d.dst_port, d.tcp_valid),
            (ParseOutcome::TransportIncomplete, 2, false)
        );
        // Malformed option list: the options before the damage count, the packet is fine.
        let mut seg = tcp(
            1,
            2,
            0x02,
            &[0x02, 0x04, 0x05, 0xb4, 0x03, 0x01, 0x0e, 0x00],
        );
        seg[12] = 0x70;
        let (outcome, d) = run(
            LinkType::RAW,
            &ipv4(6, [1, 1, 1, 1], [2, 2, 2, 2], &seg),
            &OUTER,
        );
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!(
            (d.tcp.mss, d.tcp.window_scale, d.payload_len),
            (1460, None, 0)
        );
        // UDP with a length of 0: the IP length stands (RFC 2675).
        let mut dgram = udp(1, 2, b"abcd");
        dgram[4..6].copy_from_slice(&[0, 0]);
        let (outcome, d) = run(
            LinkType::RAW,
            &ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], &dgram),
            &OUTER,
        );
        assert_eq!((outcome, d.payload_len), (ParseOutcome::Ok, 4));
        // UDP with a length below its header.
        dgram[4..6].copy_from_slice(&[0, 4]);
        let (outcome, d) = run(
            LinkType::RAW,
            &ipv4(17, [1, 1, 1, 1], [2, 2, 2, 2], &dgram),
            &OUTER,
        );
        assert_eq!(
            (outcome, d.src_port, d.payload_len),
            (ParseOutcome::TransportIncomplete, 1, 4)
        );
    }

    #[test]
    fn unknown_transport_is_keyed_without_ports() {
        let (outcome, d) = run(
            LinkType::RAW,
            &ipv4(89, [1, 1, 1, 1], [2, 2, 2, 2], &[0; 12]),
            &OUTER,
        );
        assert_eq!(
            (
                outcome,
                d.proto,
                d.src_port,
                d.payload_offset,
                d.payload_len
            ),
            (ParseOutcome::Ok, 89, 0, 20, 12)
        );
    }

    fn inner_tcp() -> Vec<u8> {
        ipv4(
            6,
            [192, 168, 0, 1],
            [192, 168, 0, 2],
            &tcp(1234, 80, 0x18, b"GET"),
        )
    }

    fn tagged_eth(payload: &[u8]) -> Vec<u8> {
        let mut tagged = vec![0x00, 0x07, 0x08, 0x00];
        tagged.extend_from_slice(payload);
        eth(0x8100, &tagged)
    }

    fn assert_outer(d: &Decoded, proto: u8) {
        assert_eq!((d.src_ip, d.dst_ip), (v4([10, 0, 0, 1]), v4([10, 0, 0, 2])));
        assert_eq!(d.proto, proto);
        assert_eq!((d.dst_mac, d.src_mac, d.vlan), (MAC_DST, MAC_SRC, 7));
    }

    fn assert_inner(d: &Decoded, payload_offset: u32) {
        assert_eq!(
            (d.src_ip, d.dst_ip),
            (v4([192, 168, 0, 1]), v4([192, 168, 0, 2]))
        );
        assert_eq!((d.proto, d.src_port, d.dst_port), (6, 1234, 80));
        assert_eq!(
            (d.ip_len, d.payload_len, d.payload_offset),
            (43, 3, payload_offset)
        );
        assert!(d.tcp_valid);
        // MACs and VLAN from the outermost Ethernet header.
        assert_eq!((d.dst_mac, d.src_mac, d.vlan), (MAC_DST, MAC_SRC, 7));
    }

    #[test]
    fn tunnel_gre() {
        let frame = tagged_eth(&ipv4(
            47,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            &gre(0x0800, &inner_tcp()),
        ));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_outer(&d, 47);
        assert_eq!((d.src_port, d.dst_port, d.ip_len), (0, 0, 67));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_inner(&d, 18 + 20 + 4 + 40);

        // Key and sequence number present.
        let mut keyed = vec![0x30, 0x00, 0x08, 0x00, 0, 0, 0, 9, 0, 0, 0, 1];
        keyed.extend_from_slice(&inner_tcp());
        let frame = tagged_eth(&ipv4(47, [10, 0, 0, 1], [10, 0, 0, 2], &keyed));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_inner(&d, 18 + 20 + 12 + 40);

        // Transparent Ethernet bridging: the inner Ethernet's MACs and VLAN are ignored.
        let mut inner_frame = vec![0xee; 12];
        inner_frame.extend_from_slice(&[0x81, 0x00, 0x00, 0x63, 0x08, 0x00]);
        inner_frame.extend_from_slice(&inner_tcp());
        let frame = tagged_eth(&ipv4(
            47,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            &gre(0x6558, &inner_frame),
        ));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_inner(&d, 18 + 20 + 4 + 18 + 40);

        // IPv6 inside GRE over IPv6.
        let inner6 = ipv6(17, 0xa, 0xb, &udp(53, 5353, b"q"));
        let frame = ipv6(47, 1, 2, &gre(0x86dd, &inner6));
        let (outcome, d) = run(LinkType::IPV6, &frame, &INNER);
        assert_eq!(
            (outcome, d.src_ip[15], d.dst_ip[15], d.src_port),
            (ParseOutcome::Ok, 0xa, 0xb, 53)
        );
        // Unknown payloads (here Cisco metadata) stay on the outer key.
        let frame = tagged_eth(&ipv4(
            47,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            &gre(0x8909, &inner_tcp()),
        ));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_outer(&d, 47);
    }

    #[test]
    fn tunnel_pptp() {
        // Enhanced GRE: K S A, version 1, PPP; payload length/call id, sequence, ack.
        let header = [0x30, 0x81, 0x88, 0x0b, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0];
        let with = |ppp: &[u8], payload: &[u8]| {
            let gre = [&header[..], ppp, payload].concat();
            tagged_eth(&ipv4(47, [10, 0, 0, 1], [10, 0, 0, 2], &gre))
        };
        let payload_offset_of = |ppp: &[u8]| (18 + 20 + 16 + ppp.len() + 40) as u32;
        // Address/control and a 2-byte protocol; no address/control; a 1-byte protocol.
        for ppp in [
            &[0xff, 0x03, 0x00, 0x21][..],
            &[0x00, 0x21],
            &[0x21],
            &[0xff, 0x03, 0x21],
        ] {
            let (outcome, d) = run(LinkType::ETHERNET, &with(ppp, &inner_tcp()), &INNER);
            assert_eq!(outcome, ParseOutcome::Ok, "{ppp:x?}");
            assert_inner(&d, payload_offset_of(ppp));
            let (outcome, d) = run(LinkType::ETHERNET, &with(ppp, &inner_tcp()), &OUTER);
            assert_eq!(outcome, ParseOutcome::Ok);
            assert_outer(&d, 47);
        }
        let inner6 = ipv6(17, 0xa, 0xb, &udp(53, 5353, b"q"));
        let (outcome, d) = run(
            LinkType::ETHERNET,
            &with(&[0xff, 0x03, 0x00, 0x57], &inner6),
            &INNER,
        );
        assert_eq!(
            (outcome, d.ip_version, d.dst_port),
            (ParseOutcome::Ok, 6, 5353)
        );
        // Acknowledgment only, LCP, encrypted (MPPE): the tunnel is the flow.
        for ppp in [
            &[][..],
            &[0xff, 0x03, 0xc0, 0x21, 1, 1, 0, 4],
            &[0x00, 0xfd, 0x90, 0x00],
        ] {
            let (outcome, d) = run(LinkType::ETHERNET, &with(ppp, &[]), &INNER);
            assert_eq!(outcome, ParseOutcome::Ok, "{ppp:x?}");
            assert_outer(&d, 47);
        }
        // IP cut short inside PPP: outer key, incomplete.
        let (outcome, d) = run(
            LinkType::ETHERNET,
            &with(&[0x21], &inner_tcp()[..10]),
            &INNER,
        );
        assert_eq!(outcome, ParseOutcome::TransportIncomplete);
        assert_outer(&d, 47);
    }

    #[test]
    fn tunnel_gre_truncated() {
        let mut keyed = vec![0x30, 0x00, 0x08, 0x00, 0, 0, 0, 9, 0, 0, 0, 1];
        keyed.extend_from_slice(&inner_tcp());
        // A GRE header cut short: outer key, counted as incomplete.
        let frame = tagged_eth(&ipv4(47, [10, 0, 0, 1], [10, 0, 0, 2], &keyed[..6]));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!(outcome, ParseOutcome::TransportIncomplete);
        assert_outer(&d, 47);
    }

    #[test]
    fn tunnel_vxlan() {
        let mut inner_frame = vec![0xee; 12];
        inner_frame.extend_from_slice(&[0x08, 0x00]);
        inner_frame.extend_from_slice(&inner_tcp());
        let frame = tagged_eth(&ipv4(
            17,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            &udp(40000, 4789, &vxlan(&inner_frame)),
        ));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &OUTER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_outer(&d, 17);
        assert_eq!(
            (d.src_port, d.dst_port, d.payload_len),
            (40000, 4789, 8 + 14 + 43)
        );
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_inner(&d, 18 + 20 + 8 + 8 + 14 + 40);

        // ARP inside VXLAN: the tunnel is the flow.
        let mut arp_frame = vec![0xee; 12];
        arp_frame.extend_from_slice(&[0x08, 0x06]);
        arp_frame.extend_from_slice(&[0; 28]);
        let frame = tagged_eth(&ipv4(
            17,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            &udp(40000, 4789, &vxlan(&arp_frame)),
        ));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!((outcome, d.dst_port), (ParseOutcome::Ok, 4789));
        assert_outer(&d, 17);

        // Inner frame cut by the snap length: outer key, incomplete.
        let full = tagged_eth(&ipv4(
            17,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            &udp(40000, 4789, &vxlan(&inner_frame)),
        ));
        for len in 46..18 + 20 + 8 + 8 + 14 + 20 {
            let (outcome, d) = run(LinkType::ETHERNET, &full[..len], &INNER);
            assert_eq!(outcome, ParseOutcome::TransportIncomplete, "len {len}");
            assert_outer(&d, 17);
            assert_eq!(d.dst_port, 4789, "len {len}");
        }
        // Only the source port 4789: not VXLAN.
        let frame = tagged_eth(&ipv4(
            17,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            &udp(4789, 40000, &vxlan(&inner_frame)),
        ));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!((outcome, d.src_port), (ParseOutcome::Ok, 4789));
        assert_outer(&d, 17);
    }

    #[test]
    fn tunnel_ip_in_ip() {
        let frame = tagged_eth(&ipv4(4, [10, 0, 0, 1], [10, 0, 0, 2], &inner_tcp()));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &OUTER);
        assert_eq!(
            (outcome, d.src_port, d.payload_offset, d.payload_len),
            (ParseOutcome::Ok, 0, 38, 43)
        );
        assert_outer(&d, 4);
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_inner(&d, 18 + 20 + 40);

        // 6in4.
        let inner6 = ipv6(58, 0xa, 0xb, &icmp(128, 0));
        let frame = tagged_eth(&ipv4(41, [10, 0, 0, 1], [10, 0, 0, 2], &inner6));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &OUTER);
        assert_eq!((outcome, d.proto, d.ip_version), (ParseOutcome::Ok, 41, 4));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!(
            (outcome, d.proto, d.ip_version, d.src_port, d.dst_port),
            (ParseOutcome::Ok, 58, 6, 128, 129)
        );
        assert_eq!((d.vlan, d.ip_len), (7, 50));

        // Malformed inner header: outer key, incomplete.
        let mut bad = inner_tcp();
        bad[0] = 0x41;
        let frame = tagged_eth(&ipv4(4, [10, 0, 0, 1], [10, 0, 0, 2], &bad));
        let (outcome, d) = run(LinkType::ETHERNET, &frame, &INNER);
        assert_eq!(outcome, ParseOutcome::TransportIncomplete);
        assert_outer(&d, 4);
    }

    #[test]
    fn tunnel_depth_is_bounded() {
        // Six IP-in-IP layers, addresses 10.0.0.n -> 10.0.1.n at layer n, TCP innermost.
        let mut packet = ipv4(6, [10, 0, 0, 6], [10, 0, 1, 6], &tcp(1, 2, 0x10, b""));
        for n in (0..6).rev() {
            packet = ipv4(4, [10, 0, 0, n], [10, 0, 1, n], &packet);
        }
        let (outcome, d) = run(LinkType::RAW, &packet, &INNER);
        assert_eq!(outcome, ParseOutcome::Ok);
        assert_eq!(d.src_ip, v4([10, 0, 0, MAX_TUNNEL_DEPTH]));
        assert_eq!((d.proto, d.src_port), (4, 0));
        let (_, d) = run(LinkType::RAW, &packet, &OUTER);
        assert_eq!(d.src_ip, v4([10, 0, 0, 0]));
    }

    #[test]
    fn inner_mode_leaves_plain_traffic_alone() {
        assert_eq!(
            run(LinkType::ETHERNET, &TCP4_SYN, &INNER),
            run(LinkType::ETHERNET, &TCP4_SYN, &OUTER)
        );
        assert_eq!(
            run(LinkType::ETHERNET, &UDP6_HBH, &INNER),
            run(LinkType::ETHERNET, &UDP6_HBH, &OUTER)
        );
    }

    #[test]
    fn garbage_never_panics() {
        // A small deterministic sweep (the fuzz target covers this properly).
        let links = [
            LinkType::ETHERNET,
            LinkType::LINUX_SLL,
            LinkType::LINUX_SLL2,
            LinkType::NULL,
            LinkType::LOOP,
            LinkType::RAW,
            LinkType::IPV4,
            LinkType::IPV6,
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut buf = [0u8; 128];
        let mut out = Decoded::default();
        for i in 0..20_000 {
            for b in buf.iter_mut() {
                *b = trawl_testkit::xorshift(&mut state) as u8;
            }
            // Steer toward the interesting paths now and then.
            if i % 3 == 0 {
                buf[12..14].copy_from_slice(&[0x08, 0x00]);
                buf[14] = 0x45;
                buf[23] = [4, 6, 17, 41, 47, 58][i % 6];
            }
            let len = (state >> 8) as usize % buf.len();
            for link in links {
                for config in [OUTER, INNER] {
                    let outcome = decode(link, &buf[..len], &config, &mut out);
                    assert!(out.payload_offset as usize <= 128 + 65_535);
                    if !outcome.has_key() {
                        assert_eq!(out.ip_version, 0);
                    }
                    if config.tunnel == TunnelMode::Outer {
                        assert_outer_addresses(link, &buf[..len], outcome, &out);
                    }
                }
            }
        }
    }

    /// [`outer_addresses`] of `data` are the addresses of `decoded` (its outer decode with
    /// `outcome`), and `None` exactly when that decode has no key.
    fn assert_outer_addresses(
        link: LinkType,
        data: &[u8],
        outcome: ParseOutcome,
        decoded: &Decoded,
    ) {
        let want = outcome
            .has_key()
            .then_some((decoded.src_ip, decoded.dst_ip));
        let got = outer_addresses(link, data, &mut Decoded::default());
        assert_eq!(got, want, "{outcome:?} of {link:?} {data:02x?}");
    }

    #[test]
    fn outer_addresses_are_the_outer_keys() {
        // Every committed capture, each frame whole and cut at every length (the cuts go
        // through every truncation and length check of the link layer and IP header).
        let dir = format!("{}/../../testdata/pcaps", env!("CARGO_MANIFEST_DIR"));
        let mut frames = 0;
        let mut keyed = 0;
        let mut decoded = Decoded::default();
        for entry in std::fs::read_dir(&dir).expect("testdata/pcaps") {
            let path = entry.expect("entry").path();
            // Captures the reader refuses (invalid versions, no header) have no frames.
            let Ok(mut source) = trawl_capture::FileSource::open(&path) else {
                continue;
            };
            use trawl_capture::PacketSource;
            while let Ok(Some(batch)) = source.next_batch() {
                for pkt in batch.iter() {
                    for len in 0..=pkt.data.len().min(160) {
                        let data = &pkt.data[..len];
                        let outcome = decode(pkt.link_type, data, &OUTER, &mut decoded);
                        assert_outer_addresses(pkt.link_type, data, outcome, &decoded);
                    }
                    let outcome = decode(pkt.link_type, pkt.data, &OUTER, &mut decoded);
                    assert_outer_addresses(pkt.link_type, pkt.data, outcome, &decoded);
                    frames += 1;
                    keyed += usize::from(outcome.has_key());
                }
            }
        }
        assert!(
            frames > 2_500 && keyed > 2_000,
            "{frames} frames, {keyed} keyed"
        );
    }

    /// Decodes a committed capture; one line per packet: number, outcome, key, outer VLAN.
    fn decode_capture(name: &str, config: &DecodeConfig) -> Vec<String> {
        use trawl_capture::{FileSource, PacketSource};
        let path = format!("{}/../../testdata/pcaps/{name}", env!("CARGO_MANIFEST_DIR"));
        let mut source = FileSource::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut out = Decoded::default();
        let mut lines = Vec::new();
        while let Some(batch) = source
            .next_batch()
            .unwrap_or_else(|e| panic!("{path}: {e}"))
        {
            for pkt in batch.iter() {
                let outcome = decode(pkt.link_type, pkt.data, config, &mut out);
                let n = lines.len() + 1;
                lines.push(if outcome.has_key() {
                    format!(
                        "{n} {} {}>{} {} {}>{} v{}",
                        outcome.name(),
                        out.src_addr(),
                        out.dst_addr(),
                        out.proto,
                        out.src_port,
                        out.dst_port,
                        out.vlan
                    )
                } else {
                    format!("{n} {} v{}", outcome.name(), out.vlan)
                });
            }
        }
        lines
    }

    /// Decodes a committed capture in inner mode; one line per packet in the format of
    /// `testdata/tunnels/oracle.py` (innermost key, outermost tunnel).
    fn tunnel_lines(name: &str) -> Vec<String> {
        use trawl_capture::{FileSource, PacketSource};
        let path = format!("{}/../../testdata/pcaps/{name}", env!("CARGO_MANIFEST_DIR"));
        let mut source = FileSource::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut out = Decoded::default();
        let mut lines = Vec::new();
        while let Some(batch) = source
            .next_batch()
            .unwrap_or_else(|e| panic!("{path}: {e}"))
        {
            for pkt in batch.iter() {
                let outcome = decode(pkt.link_type, pkt.data, &INNER, &mut out);
                let n = lines.len() + 1;
                if !outcome.has_key() {
                    lines.push(format!("{n} -"));
                    continue;
                }
                let ports = match out.proto {
                    6 | 17 | 132 => format!("{}>{}", out.src_port, out.dst_port),
                    _ => "-".into(),
                };
                let mut line = format!(
                    "{n} {}>{} {} {ports}",
                    out.src_addr(),
                    out.dst_addr(),
                    out.proto
                );
                let t = out.tunnel;
                if t.is_some() {
                    line += &format!(
                        " via {} {}>{} id {}",
                        t.kind.name(),
                        t.src_addr(),
                        t.dst_addr(),
                        t.id
                    );
                }
                lines.push(line);
            }
        }
        lines
    }

    /// Every packet of the tunnel captures keyed as tshark's dissectors decode it: innermost
    /// IP key and the outermost tunnel's type, endpoints and id, against the goldens of
    /// `testdata/tunnels/` (made by its `oracle.py` with tshark 4.0.17; see its README).
    /// The differences, each explained:
    #[test]
    fn tunnels_match_tshark() {
        // (capture, frames that differ on purpose, why)
        #[rustfmt::skip]
        let cases: &[(&str, &[usize], &str)] = &[
            ("gtp-iphone.pcap", &[], ""),
            ("gtp.pcap", &[], ""),
            ("ipv6-gtp6.pcap", &[], ""),
            ("ipv6_in_gtp.pcap", &[], ""),
            ("geneve.pcap", &[], ""),
            ("geneve-gcp.pcap", &[], ""),
            ("erspan-type-i-4.pcap", &[], ""),
            ("erspan-type-ii-2.pcap", &[], ""),
            ("erspan-type-iii-ft-0.pcap", &[], ""),
            ("erspan-type-iii-ft-7.pcap", &[], ""),
            ("gre-erspan-vxlan.pcap", &[], ""),
            ("gre-erspan.pcap", &[], ""),
            ("teredo.pcap", &[], ""),
            ("mpls-over-udp.pcap", &[], ""),
            ("wccp_redirect_gre.pcap", &[], ""),
            ("aruba-gre-80211http.pcap", &[], ""),
            ("vxlan.pcap", &[], ""),
            ("4in4tunnel.pcap", &[], ""),
            ("pptp-gre.pcapng", &[], ""),
            ("GrePackets-tunnels.pcap", &[], ""),
        ];
        let mut failures = Vec::new();
        for (name, differ, why) in cases {
            assert_eq!(
                differ.is_empty(),
                why.is_empty(),
                "{name}: say why frames differ"
            );
            let golden = format!(
                "{}/../../testdata/tunnels/{name}.tshark.txt",
                env!("CARGO_MANIFEST_DIR")
            );
            let golden =
                std::fs::read_to_string(&golden).unwrap_or_else(|e| panic!("{golden}: {e}"));
            let theirs: Vec<&str> = golden.lines().filter(|l| !l.starts_with('#')).collect();
            let ours = tunnel_lines(name);
            assert_eq!(ours.len(), theirs.len(), "{name}: packet count");
            for (i, (a, b)) in ours.iter().zip(&theirs).enumerate() {
                if (a != b) != differ.contains(&(i + 1)) {
                    failures.push(format!("{name}: trawl `{a}`, tshark `{b}`"));
                }
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    fn outcome_counts(lines: &[String]) -> Vec<(String, usize)> {
        let mut counts = std::collections::BTreeMap::new();
        for line in lines {
            *counts
                .entry(line.split(' ').nth(1).unwrap_or("").to_string())
                .or_default() += 1;
        }
        counts.into_iter().collect()
    }

    /// File, mode, outcome counts (sorted by name), the first packets' lines.
    type CaptureCase = (
        &'static str,
        DecodeConfig,
        &'static [(&'static str, usize)],
        &'static [&'static str],
    );

    /// Real captures, keys checked against tshark 4.0 (innermost IP layer for `Inner`).
    #[test]
    fn parse_committed_captures() {
        #[rustfmt::skip]
        let cases: &[CaptureCase] = &[
            ("vxlan.pcap", OUTER, &[("ok", 10)], &[
                "1 ok 192.168.203.1>192.168.202.1 17 45149>4789 v0",
                "2 ok 192.168.202.1>192.168.203.1 17 42710>4789 v0",
            ]),
            // ARP inside VXLAN (2, 3) stays on the tunnel; ICMP echo keys mirror.
            ("vxlan.pcap", INNER, &[("ok", 10)], &[
                "1 ok 192.168.203.3>192.168.203.5 1 8>0 v0",
                "2 ok 192.168.202.1>192.168.203.1 17 42710>4789 v0",
                "3 ok 192.168.203.1>192.168.202.1 17 52102>4789 v0",
                "4 ok 192.168.203.5>192.168.203.3 1 0>8 v0",
            ]),
            // Two VLAN tags (1624, 505): the outermost is kept.
            ("4in4tunnel.pcap", OUTER, &[("ok", 5)], &[
                "1 ok 69.67.35.146>41.202.46.110 4 0>0 v1624",
            ]),
            ("4in4tunnel.pcap", INNER, &[("ok", 5)], &[
                "1 ok 10.10.100.25>10.10.101.2 17 62367>17000 v1624",
            ]),
            ("GrePackets-tunnels.pcap", INNER, &[("ok", 7)], &[
                "1 ok 192.168.2.65>192.168.2.254 47 0>0 v0",    // PPTP: compressed PPP
                "2 ok 192.168.2.65>192.168.2.254 47 0>0 v0",    // PPTP acknowledgment only
                "3 ok 127.0.0.1>127.0.0.1 47 0>0 v0",           // GRE keepalive
                "4 ok 127.0.0.1>127.0.0.1 1 0>8 v0",            // GRE / IPv4 / ICMP
                "5 ok 3.3.3.2>224.0.0.9 17 520>520 v0",         // GRE with checksum
                "6 ok 8.8.8.8>172.16.44.3 17 53>40768 v100",    // IPv6 / IPv4 / PPTP / IPv4
                "7 ok 10.0.0.4>10.0.0.5 6 1232>80 v0",          // GRE with key and sequence
            ]),
            ("pptp-gre.pcapng", INNER, &[("ok", 1)], &[
                "1 ok 192.168.10.210>192.168.103.40 17 5060>5060 v142",
            ]),
            ("pptp-gre.pcapng", OUTER, &[("ok", 1)], &[
                "1 ok 109.105.228.253>10.177.98.84 47 0>0 v142",
            ]),
            ("802.1ad_QinQ.pcap", OUTER, &[("non_ip", 2)], &["1 non_ip v200"]),
            ("twovlan.pcap", OUTER, &[("ok", 6)], &["1 ok 10.0.0.1>10.0.0.2 6 54422>80 v201"]),
            ("mpls-basic.pcap", OUTER, &[("non_ip", 6), ("ok", 52)], &[
                "1 ok 10.1.2.1>255.255.255.255 17 711>711 v0",
            ]),
            ("pppoe.pcap", OUTER, &[("ok", 10)], &["1 ok 172.202.246.57>64.12.189.217 6 1063>443 v0"]),
            ("babel.pcap", OUTER, &[("ok", 25)], &["1 ok fe80::68d3:1235:d068:1f9e>ff02::1:6 17 6697>6697 v0"]),
            ("Sll2Packet.pcap", OUTER, &[("ok", 1)], &["1 ok 7.249.151.114>116.63.66.108 6 57292>443 v0"]),
            ("null_loopback.pcap", OUTER, &[("ok", 3)], &[
                "1 ok ::1>::1 6 49888>81 v0",
                "2 ok 172.16.1.117>172.16.1.255 17 55369>8612 v0",
                "3 ok 10.0.0.138>10.0.0.1 17 53>58125 v0",      // EtherType in the NULL header
            ]),
            ("raw_ip.pcap", OUTER, &[("ok", 100)], &["1 ok 2001:618:400::5199:cc70>2001:618:1:8000::5 6 35995>80 v0"]),
            ("LINKTYPE_IPV4.pcap", OUTER, &[("ok", 1)], &["1 ok 192.168.1.100>9.9.9.9 17 12345>53 v0"]),
            ("LINKTYPE_IPV6.pcap", OUTER, &[("ok", 1)], &["1 ok 2001:db8::1>2620:fe::9 17 12345>53 v0"]),
            ("ipv6_opt_fragments.pcap", OUTER, &[("fragment", 3), ("ok", 1)], &[
                "1 ok 2607:f010:3f9::1001>2607:f010:3f9::11:0 17 6363>6363 v0",
                "2 fragment 2607:f010:3f9::1001>2607:f010:3f9::11:0 17 0>0 v0",
            ]),
            ("socks5-http-302-frag.pcap", OUTER, &[("fragment", 58), ("ok", 14)], &[]),
        ];
        for (name, config, counts, first) in cases {
            let lines = decode_capture(name, config);
            let counts: Vec<(String, usize)> =
                counts.iter().map(|(o, n)| (o.to_string(), *n)).collect();
            assert_eq!(outcome_counts(&lines), counts, "{name} {:?}", config.tunnel);
            assert_eq!(&lines[..first.len()], *first, "{name} {:?}", config.tunnel);
        }
    }
}
