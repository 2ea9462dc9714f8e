//! The tunnel headers [`TunnelMode::Inner`](crate::decode::TunnelMode::Inner) reads past besides
//! plain GRE, VXLAN and IP-in-IP (GTP-U, Geneve, ERSPAN, Teredo, MPLS over UDP, WCCP, Aruba's
//! 802.11-in-GRE), and the [`Tunnel`] a flow record keeps of the outermost one.
//!
//! Policy: each reader takes the bytes after the outer transport (or GRE) header and says where
//! the payload starts and what it is (`Found::Inner`), that the header is not one to descend
//! (`Found::Not`: control messages, unknown versions, encrypted or non-data 802.11 frames; the
//! outer key stands), or that it is cut short (`Found::Truncated`). Every loop consumes bytes,
//! so each reader is bounded by its input; none allocates or panics.
use crate::decode::to_ip;

/// Which tunnel a flow was carried in (`tunnel_type` in records).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum TunnelType {
    /// Not tunnelled (or metered with `--tunnel outer`).
    #[default]
    None = 0,
    /// GRE (RFC 2784/2890), PPTP's enhanced GRE, WCCP and Aruba's 802.11 in GRE.
    Gre = 1,
    /// VXLAN (UDP 4789).
    Vxlan = 2,
    /// IPv4 or IPv6 directly in IPv4 or IPv6 (IP protocols 4 and 41).
    IpIp = 3,
    /// GTP-U (UDP 2152), 3GPP TS 29.281.
    GtpU = 4,
    /// Geneve (UDP 6081), RFC 8926.
    Geneve = 5,
    /// ERSPAN type I, II or III (GRE 0x88BE, 0x22EB).
    Erspan = 6,
    /// Teredo (UDP 3544), RFC 4380.
    Teredo = 7,
    /// MPLS over UDP (UDP 6635), RFC 7510.
    MplsUdp = 8,
}

impl TunnelType {
    /// The name used in records (`gre`, `vxlan`, `ipip`, `gtpu`, `geneve`, `erspan`, `teredo`,
    /// `mpls_udp`; empty for none).
    pub const fn name(self) -> &'static str {
        match self {
            TunnelType::None => "",
            TunnelType::Gre => "gre",
            TunnelType::Vxlan => "vxlan",
            TunnelType::IpIp => "ipip",
            TunnelType::GtpU => "gtpu",
            TunnelType::Geneve => "geneve",
            TunnelType::Erspan => "erspan",
            TunnelType::Teredo => "teredo",
            TunnelType::MplsUdp => "mpls_udp",
        }
    }

    /// Every tunnel type, in number order (`None` first).
    pub const ALL: [TunnelType; 9] = [
        TunnelType::None,
        TunnelType::Gre,
        TunnelType::Vxlan,
        TunnelType::IpIp,
        TunnelType::GtpU,
        TunnelType::Geneve,
        TunnelType::Erspan,
        TunnelType::Teredo,
        TunnelType::MplsUdp,
    ];

    /// The type of a number (the discriminant; wire formats carry it), `None` for an
    /// unknown one.
    pub fn from_u8(n: u8) -> TunnelType {
        TunnelType::ALL
            .get(usize::from(n))
            .copied()
            .unwrap_or(TunnelType::None)
    }

    /// The type of a name ([`TunnelType::name`]); `None` for an unknown one.
    pub fn from_name(name: &str) -> TunnelType {
        TunnelType::ALL
            .into_iter()
            .find(|t| t.name() == name)
            .unwrap_or(TunnelType::None)
    }
}

/// The outermost tunnel of a packet: its type, the outer IP header's endpoints and the tunnel's
/// identifier (GRE key or PPTP call id, VXLAN/Geneve VNI, GTP-U TEID, ERSPAN session id, the
/// top MPLS label; 0 where the tunnel has none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tunnel {
    /// The tunnel's type; [`TunnelType::None`] when the packet was not descended.
    pub kind: TunnelType,
    /// 4 or 6: the outer IP header's version.
    pub ip_version: u8,
    /// Tunnel identifier (see above).
    pub id: u32,
    /// Outer source address, IPv4 as IPv4-mapped IPv6 (as in [`Decoded`](crate::decode::Decoded)).
    pub src_ip: [u8; 16],
    /// Outer destination address.
    pub dst_ip: [u8; 16],
}

impl Tunnel {
    /// True when the packet came through a tunnel.
    #[inline]
    pub fn is_some(&self) -> bool {
        self.kind != TunnelType::None
    }

    /// The outer source address.
    pub fn src_addr(&self) -> std::net::IpAddr {
        to_ip(self.ip_version, &self.src_ip)
    }

    /// The outer destination address.
    pub fn dst_addr(&self) -> std::net::IpAddr {
        to_ip(self.ip_version, &self.dst_ip)
    }

    /// Sets the outer source (`src`) or destination address, kept as the meter keeps it
    /// (IPv4 as IPv4-mapped IPv6; `ip_version` from the address).
    pub fn set_addr(&mut self, src: bool, a: std::net::IpAddr) {
        let (version, bytes) = match a {
            std::net::IpAddr::V4(v4) => (4, v4.to_ipv6_mapped().octets()),
            std::net::IpAddr::V6(v6) => (6, v6.octets()),
        };
        self.ip_version = version;
        if src {
            self.src_ip = bytes;
        } else {
            self.dst_ip = bytes;
        }
    }
}

/// What a tunnel header carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Payload {
    /// An Ethernet frame.
    Ethernet,
    /// IPv4 or IPv6, by the first nibble (anything else is not IP).
    Ip,
    /// IPv4.
    Ipv4,
    /// IPv6.
    Ipv6,
    /// An MPLS label stack, then IP by the first nibble.
    Mpls,
    /// An 802.11 frame without FCS (Aruba).
    Ieee80211,
    /// A PPP frame (PPTP).
    Ppp,
}

/// The outcome of reading a tunnel header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Found {
    /// The payload at `offset` (from the start of the bytes given), and the tunnel id.
    Inner {
        payload: Payload,
        offset: usize,
        id: u32,
    },
    /// Not a header that carries packets: the outer key stands.
    Not,
    /// Cut short: the outer key stands, counted incomplete.
    Truncated,
}

/// UDP destination port of GTP-U.
pub(crate) const GTPU_PORT: u16 = 2152;
/// UDP destination port of VXLAN-GPE.
pub(crate) const VXLAN_GPE_PORT: u16 = 4790;
/// UDP destination port of Geneve.
pub(crate) const GENEVE_PORT: u16 = 6081;
/// UDP port of Teredo (either side).
pub(crate) const TEREDO_PORT: u16 = 3544;
/// UDP destination port of MPLS over UDP.
pub(crate) const MPLS_UDP_PORT: u16 = 6635;

/// GRE protocol types read here.
pub(crate) mod gre_proto {
    /// ERSPAN type I and II.
    pub const ERSPAN_2: u16 = 0x88be;
    /// ERSPAN type III.
    pub const ERSPAN_3: u16 = 0x22eb;
    /// WCCP redirection.
    pub const WCCP: u16 = 0x883e;

    /// Aruba's GRE types carrying 802.11 frames (Wireshark's `packet-gre.h`: 0x8200 to 0x8370
    /// in steps of 0x10, and 0x9000).
    pub const fn is_aruba(proto: u16) -> bool {
        (matches!(proto, 0x8200..=0x8370) && proto & 0xf == 0) || proto == 0x9000
    }
}

#[inline]
fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

#[inline]
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(*b.get(at..)?.first_chunk::<4>()?))
}

/// A GTP-U header (version 1, protocol type GTP): only G-PDUs (message type 255) carry user
/// packets; echo, error indication and end marker do not. The optional 4 bytes (sequence,
/// N-PDU, next extension type) are there when any of E, S, PN is set; extension headers are a
/// chain of (length in 4-byte units, content, next type).
pub(crate) fn gtpu(b: &[u8]) -> Found {
    let (Some(&flags), Some(&ty), Some(teid)) = (b.first(), b.get(1), u32_at(b, 4)) else {
        return Found::Truncated;
    };
    if flags >> 5 != 1 || flags & 0x10 == 0 || ty != 0xff {
        return Found::Not;
    }
    let mut offset = 8;
    if flags & 0x07 != 0 {
        let Some(&first) = b.get(11) else {
            return Found::Truncated;
        };
        offset = 12;
        let mut next = first;
        while next != 0 {
            let Some(&units) = b.get(offset) else {
                return Found::Truncated;
            };
            if units == 0 {
                // A zero-length extension cannot hold its own next-type byte.
                return Found::Not;
            }
            offset += usize::from(units) * 4;
            let Some(&n) = b.get(offset - 1) else {
                return Found::Truncated;
            };
            next = n;
        }
    }
    Found::Inner {
        payload: Payload::Ip,
        offset,
        id: teid,
    }
}

/// A VXLAN-GPE header (RFC draft-ietf-nvo3-vxlan-gpe): VXLAN's 8 bytes whose flags' P bit
/// says the last reserved byte before the VNI names the payload (1 IPv4, 2 IPv6, 3 Ethernet;
/// NSH and others are not descended); without it the payload is Ethernet as in VXLAN.
pub(crate) fn vxlan_gpe(b: &[u8]) -> Found {
    let (Some(&flags), Some(&next), Some(vni)) = (b.first(), b.get(3), u32_at(b, 4)) else {
        return Found::Truncated;
    };
    let payload = match (flags & 0x04 != 0, next) {
        (false, _) | (true, 3) => Payload::Ethernet,
        (true, 1) => Payload::Ipv4,
        (true, 2) => Payload::Ipv6,
        _ => return Found::Not,
    };
    Found::Inner {
        payload,
        offset: 8,
        id: vni >> 8,
    }
}

/// A Geneve header (version 0): 8 bytes, then the options its length field counts (4-byte
/// units), then a frame of its protocol type (Ethernet, IPv4 or IPv6).
pub(crate) fn geneve(b: &[u8]) -> Found {
    let (Some(&first), Some(proto), Some(vni)) = (b.first(), u16_at(b, 2), u32_at(b, 4)) else {
        return Found::Truncated;
    };
    if first >> 6 != 0 {
        return Found::Not;
    }
    let offset = 8 + usize::from(first & 0x3f) * 4;
    let payload = match proto {
        0x6558 => Payload::Ethernet,
        0x0800 => Payload::Ipv4,
        0x86dd => Payload::Ipv6,
        _ => return Found::Not,
    };
    if b.len() < offset {
        return Found::Truncated;
    }
    Found::Inner {
        payload,
        offset,
        id: vni >> 8,
    }
}

/// The ERSPAN header after a GRE header of protocol `proto`. Type I (0x88BE without a GRE
/// sequence number) has none: the mirrored Ethernet frame follows. Type II (0x88BE, version 1)
/// has 8 bytes, type III (0x22EB, version 2) 12 and, when its O flag is set, an 8-byte
/// platform-specific subheader; type III carries Ethernet (frame type 0) or IP (2).
pub(crate) fn erspan(proto: u16, gre_sequence: bool, b: &[u8]) -> Found {
    if proto == gre_proto::ERSPAN_2 && !gre_sequence {
        return Found::Inner {
            payload: Payload::Ethernet,
            offset: 0,
            id: 0,
        };
    }
    let (Some(&ver), Some(session)) = (b.first(), u16_at(b, 2)) else {
        return Found::Truncated;
    };
    let id = u32::from(session & 0x03ff);
    match (proto, ver >> 4) {
        (gre_proto::ERSPAN_2, 1) => {
            if b.len() < 8 {
                return Found::Truncated;
            }
            Found::Inner {
                payload: Payload::Ethernet,
                offset: 8,
                id,
            }
        }
        (gre_proto::ERSPAN_3, 2) => {
            let (Some(&b10), Some(&b11)) = (b.get(10), b.get(11)) else {
                return Found::Truncated;
            };
            let offset = if b11 & 0x01 != 0 { 20 } else { 12 };
            let payload = match (b10 >> 2) & 0x1f {
                0 => Payload::Ethernet,
                2 => Payload::Ip,
                _ => return Found::Not,
            };
            if b.len() < offset {
                return Found::Truncated;
            }
            Found::Inner {
                payload,
                offset,
                id,
            }
        }
        _ => Found::Not,
    }
}

/// Teredo: an IPv6 packet in UDP, optionally after an authentication header (0x0001, client
/// id and authentication value of the lengths it states, an 8-byte nonce and a confirmation
/// byte) and an origin indication (0x0000, 8 bytes), in that order.
pub(crate) fn teredo(b: &[u8]) -> Found {
    let mut offset = 0;
    if b.starts_with(&[0x00, 0x01]) {
        let (Some(&id_len), Some(&auth_len)) = (b.get(2), b.get(3)) else {
            return Found::Truncated;
        };
        offset = 4 + usize::from(id_len) + usize::from(auth_len) + 9;
    }
    if b.get(offset..)
        .is_some_and(|r| r.starts_with(&[0x00, 0x00]))
    {
        offset += 8;
    }
    match b.get(offset) {
        None => Found::Truncated,
        Some(v) if v >> 4 == 6 => Found::Inner {
            payload: Payload::Ipv6,
            offset,
            id: 0,
        },
        Some(_) => Found::Not,
    }
}

/// WCCP's GRE payload: version 2 puts a 4-byte redirect header before the IPv4 packet,
/// version 1 none; as in Wireshark, an IPv4 version nibble first means no header.
pub(crate) fn wccp(b: &[u8]) -> Found {
    match b.first() {
        None => Found::Truncated,
        Some(v) if v >> 4 == 4 => Found::Inner {
            payload: Payload::Ipv4,
            offset: 0,
            id: 0,
        },
        Some(_) => Found::Inner {
            payload: Payload::Ipv4,
            offset: 4,
            id: 0,
        },
    }
}

/// The top label of an MPLS stack (its id as a tunnel), when the stack has one.
pub(crate) fn mpls_top_label(b: &[u8]) -> Found {
    match u32_at(b, 0) {
        None => Found::Truncated,
        Some(entry) => Found::Inner {
            payload: Payload::Mpls,
            offset: 0,
            id: entry >> 12,
        },
    }
}

/// An 802.11 data frame without FCS (as Aruba's GRE carries it): the EtherType of its
/// LLC/SNAP header and where the payload after it starts. Management, control, null-data and
/// protected (encrypted) frames carry no readable packet.
pub(crate) fn ieee80211(b: &[u8]) -> Result<(u16, usize), Found> {
    let (Some(&fc0), Some(&fc1)) = (b.first(), b.get(1)) else {
        return Err(Found::Truncated);
    };
    let (version, ty, subtype) = (fc0 & 0x03, (fc0 >> 2) & 0x03, fc0 >> 4);
    // Data frames (type 2) whose subtype has no "no data" bit (null, QoS null, CF-only).
    if version != 0 || ty != 2 || subtype & 0x04 != 0 || fc1 & 0x40 != 0 {
        return Err(Found::Not);
    }
    let mut len = 24;
    if fc1 & 0x03 == 0x03 {
        // To DS and From DS: a fourth address (a wireless bridge).
        len += 6;
    }
    if subtype & 0x08 != 0 {
        // QoS control, and the HT control field when the Order bit is set.
        len += 2;
        if fc1 & 0x80 != 0 {
            len += 4;
        }
    }
    let Some(llc) = b.get(len..len + 8) else {
        return Err(Found::Truncated);
    };
    // LLC/SNAP with an RFC 1042 or 802.1H (bridge tunnel) OUI.
    if llc[..3] != [0xaa, 0xaa, 0x03] || !(llc[3..6] == [0, 0, 0] || llc[3..6] == [0, 0, 0xf8]) {
        return Err(Found::Not);
    }
    Ok((u16::from_be_bytes([llc[6], llc[7]]), len + 8))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inner(payload: Payload, offset: usize, id: u32) -> Found {
        Found::Inner {
            payload,
            offset,
            id,
        }
    }

    #[test]
    fn parse_gtpu_with_extension_headers() {
        #[rustfmt::skip]
        let plain = [
            0x30, 0xff, 0x00, 0x54, 0x00, 0x00, 0x00, 0x2a, // v1 PT, G-PDU, len, TEID 42
            0x45,                                           // IPv4 follows
        ];
        assert_eq!(gtpu(&plain), inner(Payload::Ip, 8, 42));
        #[rustfmt::skip]
        let ext = [
            0x34, 0xff, 0x00, 0x54, 0x00, 0x00, 0x00, 0x01, // E set
            0x00, 0x00, 0x00, 0x85,                         // seq, N-PDU, next: PDU session
            0x01, 0x00, 0x01, 0x00,                         // 4 bytes, next: none
            0x60,                                           // IPv6 follows
        ];
        assert_eq!(gtpu(&ext), inner(Payload::Ip, 16, 1));
        // Cut inside the extension; echo request; GTPv2; a zero-length extension.
        assert_eq!(gtpu(&ext[..14]), Found::Truncated);
        assert_eq!(gtpu(&[0x32, 0x01, 0, 4, 0, 0, 0, 0]), Found::Not);
        assert_eq!(gtpu(&[0x48, 0xff, 0, 4, 0, 0, 0, 0]), Found::Not);
        let mut zero = ext;
        zero[12] = 0;
        assert_eq!(gtpu(&zero), Found::Not);
    }

    #[test]
    fn parse_vxlan_gpe() {
        let ethernet = [0x0c, 0, 0, 3, 0, 0, 0x2a, 0];
        assert_eq!(vxlan_gpe(&ethernet), inner(Payload::Ethernet, 8, 42));
        assert_eq!(
            vxlan_gpe(&[0x0c, 0, 0, 1, 0, 0, 0, 0]),
            inner(Payload::Ipv4, 8, 0)
        );
        assert_eq!(vxlan_gpe(&[0x0c, 0, 0, 4, 0, 0, 0, 0]), Found::Not);
        assert_eq!(vxlan_gpe(&ethernet[..7]), Found::Truncated);
    }

    #[test]
    fn parse_geneve_with_options() {
        #[rustfmt::skip]
        let with_option = [
            0x02, 0x00, 0x65, 0x58, 0x00, 0x00, 0x0a, 0x00, // 2 option words, Ethernet, VNI 10
            0x01, 0x02, 0x80, 0x01, 0x00, 0x00, 0x00, 0x00, // one option
        ];
        assert_eq!(geneve(&with_option), inner(Payload::Ethernet, 16, 10));
        assert_eq!(geneve(&with_option[..12]), Found::Truncated);
        assert_eq!(geneve(&[0x40, 0, 0x65, 0x58, 0, 0, 0, 0]), Found::Not);
    }

    #[test]
    fn parse_erspan_types() {
        assert_eq!(erspan(0x88be, false, &[]), inner(Payload::Ethernet, 0, 0));
        let ii = [0x10, 0x05, 0x03, 0xff, 0, 0, 0, 0];
        assert_eq!(erspan(0x88be, true, &ii), inner(Payload::Ethernet, 8, 1023));
        assert_eq!(erspan(0x88be, true, &ii[..7]), Found::Truncated);
        let mut iii = [0x20, 0x00, 0x00, 0x07, 0, 0, 0, 0, 0, 0, 0x00, 0x00];
        assert_eq!(erspan(0x22eb, true, &iii), inner(Payload::Ethernet, 12, 7));
        iii[11] = 0x01;
        assert_eq!(erspan(0x22eb, true, &iii), Found::Truncated);
        iii[10] = 7 << 2;
        assert_eq!(erspan(0x22eb, true, &iii), Found::Not);
    }

    #[test]
    fn parse_teredo_headers() {
        assert_eq!(teredo(&[0x60]), inner(Payload::Ipv6, 0, 0));
        let origin = [0, 0, 0xfe, 0x99, 1, 2, 3, 4, 0x60];
        assert_eq!(teredo(&origin), inner(Payload::Ipv6, 8, 0));
        let mut auth = vec![0, 1, 0, 0];
        auth.extend_from_slice(&[0; 9]);
        auth.extend_from_slice(&origin);
        assert_eq!(teredo(&auth), inner(Payload::Ipv6, 21, 0));
        assert_eq!(teredo(&auth[..15]), Found::Truncated);
        assert_eq!(teredo(b"GET /"), Found::Not);
    }

    #[test]
    fn parse_ieee80211_data_frames() {
        let mut qos = vec![0x88, 0x01];
        qos.extend_from_slice(&[0; 24]);
        qos.extend_from_slice(&[0xaa, 0xaa, 0x03, 0, 0, 0, 0x08, 0x00]);
        assert_eq!(ieee80211(&qos), Ok((0x0800, 34)));
        assert_eq!(ieee80211(&qos[..30]), Err(Found::Truncated));
        let mut protected = qos.clone();
        protected[1] |= 0x40;
        assert_eq!(ieee80211(&protected), Err(Found::Not));
        // A beacon (management).
        assert_eq!(ieee80211(&[0x80, 0x00]), Err(Found::Not));
    }
}
