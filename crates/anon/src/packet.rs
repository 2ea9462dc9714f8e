//! Rewriting the addresses inside captured packets (`trawl anonymize`).
//!
//! [`PacketRewriter::rewrite`] walks a frame the way trawl's decoder does (Ethernet, 802.1Q,
//! MPLS, PPPoE, Linux SLL/SLL2, BSD loopback, raw IP; IPv4, IPv6 with extension headers;
//! always through GRE, VXLAN and IP-in-IP tunnels, up to [`MAX_DEPTH`] IP headers deep) and
//! anonymizes every IP address it meets: IPv4/IPv6 source and destination, ARP sender and
//! target protocol addresses, the headers quoted in ICMP and ICMPv6 errors, the ICMP redirect
//! gateway, and the target and destination of IPv6 neighbour discovery and redirects. The IPv4
//! header, TCP, UDP, ICMP, ICMPv6 and GRE checksums are updated incrementally (`checksum.rs`).
//! Optionally everything after the innermost transport header is cut off.
//!
//! Policy (docs/specs/anonymization.md): a frame whose link layer is not IP or ARP is copied
//! as it is; a frame whose outermost IP header cannot be read (truncated below its addresses,
//! bad version or header length) is copied unchanged and counted `malformed`; when a tunnel's
//! payload or an ICMP quote cannot be read, the bytes from there on stay as they are and the
//! frame is counted `partial`. Nothing aborts, whatever the bytes.

use trawl_wire::ethernet::ethertype;
use trawl_wire::ipv4::protocol;
use trawl_wire::{ipv6, GrePacket};

use crate::checksum::{Edits, Scope, Zero};
use crate::Anonymizer;

/// Most IP headers rewritten in one frame (outer, tunnels, quotes): a bound against crafted
/// GRE-in-GRE-in-... frames. Deeper headers stay as they are (`partial`).
pub const MAX_DEPTH: u8 = 6;

/// pcap link types (LINKTYPE_* numbers) the rewriter reads.
mod link {
    pub const NULL: u16 = 0;
    pub const ETHERNET: u16 = 1;
    pub const RAW_BSD: u16 = 12;
    pub const RAW_OPENBSD: u16 = 14;
    pub const RAW: u16 = 101;
    pub const LOOP: u16 = 108;
    pub const LINUX_SLL: u16 = 113;
    pub const IPV4: u16 = 228;
    pub const IPV6: u16 = 229;
    pub const LINUX_SLL2: u16 = 276;
}

/// GRE protocol type of Cisco MetaData (Security Group Tags).
const CISCO_METADATA: u16 = 0x8909;

/// What became of one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RewriteOutcome {
    /// Every address found was rewritten.
    Rewritten = 0,
    /// The outer headers were rewritten, but a tunnel payload or ICMP quote could not be read
    /// (or was too deep) and was left as it is.
    Partial = 1,
    /// A frame without IP or ARP (LLDP, STP, ...): copied as it is.
    NoAddresses = 2,
    /// The outermost IP (or ARP) header cannot be read: copied unchanged.
    Malformed = 3,
    /// A link type the rewriter does not read: copied unchanged.
    UnsupportedLinkType = 4,
}

impl RewriteOutcome {
    /// Number of outcomes (size of [`RewriteCounters`]).
    pub const COUNT: usize = 5;
    /// Every outcome, in discriminant order.
    pub const ALL: [RewriteOutcome; Self::COUNT] = [
        RewriteOutcome::Rewritten,
        RewriteOutcome::Partial,
        RewriteOutcome::NoAddresses,
        RewriteOutcome::Malformed,
        RewriteOutcome::UnsupportedLinkType,
    ];

    /// Stable snake_case name for summaries.
    pub const fn name(self) -> &'static str {
        match self {
            RewriteOutcome::Rewritten => "rewritten",
            RewriteOutcome::Partial => "partial",
            RewriteOutcome::NoAddresses => "no_addresses",
            RewriteOutcome::Malformed => "malformed",
            RewriteOutcome::UnsupportedLinkType => "unsupported_link_type",
        }
    }
}

/// Frames per outcome.
pub type RewriteCounters = [u64; RewriteOutcome::COUNT];

/// Rewrites frames one at a time into a reused buffer.
pub struct PacketRewriter {
    anon: Anonymizer,
    truncate_payload: bool,
    buf: Vec<u8>,
    scopes: Vec<Scope>,
    counters: RewriteCounters,
}

impl PacketRewriter {
    /// A rewriter with `anon`; with `truncate_payload`, frames end after their innermost
    /// transport header (or ICMP quote).
    pub fn new(anon: Anonymizer, truncate_payload: bool) -> PacketRewriter {
        PacketRewriter {
            anon,
            truncate_payload,
            buf: Vec::new(),
            scopes: Vec::new(),
            counters: [0; RewriteOutcome::COUNT],
        }
    }

    /// Frames per outcome so far.
    pub fn counters(&self) -> &RewriteCounters {
        &self.counters
    }

    /// Rewrites one frame of pcap link type `link_type`; returns the outcome and the bytes to
    /// write (the rewritten copy, or `data` itself when it is copied unchanged). Never panics.
    pub fn rewrite<'a>(&'a mut self, link_type: u16, data: &'a [u8]) -> (RewriteOutcome, &'a [u8]) {
        self.buf.clear();
        self.buf.extend_from_slice(data);
        let mut walk = Walk {
            edits: Edits::new(&mut self.buf, &mut self.scopes),
            anon: &mut self.anon,
            partial: false,
        };
        let result = walk.frame(link_type);
        let partial = walk.partial;
        let outcome = match result {
            Ok(_) if partial => RewriteOutcome::Partial,
            Ok(_) => RewriteOutcome::Rewritten,
            Err(stop) => stop.outcome(),
        };
        self.counters[outcome as usize] += 1;
        match (outcome, result) {
            (RewriteOutcome::Rewritten | RewriteOutcome::Partial, Ok(end)) => {
                let len = if self.truncate_payload {
                    end.min(self.buf.len())
                } else {
                    self.buf.len()
                };
                (outcome, &self.buf[..len])
            }
            _ => (outcome, data),
        }
    }
}

/// Why the walk of a frame stopped without rewriting it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    NotIp,
    Unreadable,
    Unsupported,
}

impl Stop {
    fn outcome(self) -> RewriteOutcome {
        match self {
            Stop::NotIp => RewriteOutcome::NoAddresses,
            Stop::Unreadable => RewriteOutcome::Malformed,
            Stop::Unsupported => RewriteOutcome::UnsupportedLinkType,
        }
    }
}

/// Where the link layer leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Net {
    Ipv4,
    Ipv6,
    /// After MPLS or on raw links: IP by the first nibble.
    ByVersion,
    Arp,
}

/// Offset of the end of the headers (where `--truncate-payload` cuts), or why not.
type Step = Result<usize, Stop>;

struct Walk<'a, 'b> {
    edits: Edits<'b>,
    anon: &'a mut Anonymizer,
    partial: bool,
}

impl Walk<'_, '_> {
    fn len(&self) -> usize {
        self.edits.buf.len()
    }

    fn u16_at(&self, off: usize) -> Option<u16> {
        let b = self.edits.buf.get(off..off + 2)?;
        Some(u16::from_be_bytes([b[0], b[1]]))
    }

    /// Anonymizes the `N`-byte address at `off` (4 or 16), through the checksum scopes.
    fn address<const N: usize>(&mut self, off: usize) {
        let Some(bytes) = self.edits.buf.get(off..off + N) else {
            return;
        };
        let mut new: [u8; N] = bytes.try_into().expect("N bytes");
        self.anon.bytes(&mut new);
        self.edits.write(off, &new);
    }

    fn frame(&mut self, link_type: u16) -> Step {
        let (net, off) = self.link(link_type)?;
        let len = self.len();
        self.network(net, off, len, 0, true)
    }

    fn link(&self, link_type: u16) -> Result<(Net, usize), Stop> {
        match link_type {
            link::ETHERNET => self.ethernet(0),
            link::RAW | link::RAW_BSD | link::RAW_OPENBSD => Ok((Net::ByVersion, 0)),
            link::IPV4 => Ok((Net::Ipv4, 0)),
            link::IPV6 => Ok((Net::Ipv6, 0)),
            link::LINUX_SLL => {
                let ty = self.u16_at(14).ok_or(Stop::NotIp)?;
                self.ethertypes(16, ty)
            }
            link::LINUX_SLL2 => {
                let ty = self
                    .u16_at(0)
                    .filter(|_| self.len() >= 20)
                    .ok_or(Stop::NotIp)?;
                self.ethertypes(20, ty)
            }
            link::NULL | link::LOOP => {
                let b = self.edits.buf.get(..4).ok_or(Stop::NotIp)?;
                let family = [
                    u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
                    u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
                ];
                // Host byte order of the capturing machine is unknown: IP by the version
                // nibble. Some capturers put an Ethertype in the low half instead (as the
                // flow decoder reads them).
                let ethertype = u16::from_be_bytes([b[2], b[3]]);
                match family.iter().any(|f| matches!(f, 2 | 24 | 28 | 30))
                    || matches!(ethertype, ethertype::IPV4 | ethertype::IPV6)
                {
                    true => Ok((Net::ByVersion, 4)),
                    false => Err(Stop::NotIp),
                }
            }
            _ => Err(Stop::Unsupported),
        }
    }

    fn ethernet(&self, off: usize) -> Result<(Net, usize), Stop> {
        let ty = self.u16_at(off + 12).ok_or(Stop::NotIp)?;
        self.ethertypes(off + 14, ty)
    }

    /// Follows VLAN tags, MPLS labels and PPPoE to IP or ARP.
    fn ethertypes(&self, mut off: usize, mut ty: u16) -> Result<(Net, usize), Stop> {
        loop {
            match ty {
                ethertype::IPV4 => return Ok((Net::Ipv4, off)),
                ethertype::IPV6 => return Ok((Net::Ipv6, off)),
                ethertype::ARP => return Ok((Net::Arp, off)),
                ethertype::VLAN | ethertype::QINQ | ethertype::QINQ_9100 => {
                    ty = self.u16_at(off + 2).ok_or(Stop::NotIp)?;
                    off += 4;
                }
                ethertype::MPLS_UNICAST | ethertype::MPLS_MULTICAST => loop {
                    let entry = self.edits.buf.get(off..off + 4).ok_or(Stop::NotIp)?;
                    off += 4;
                    if entry[2] & 1 == 1 {
                        return Ok((Net::ByVersion, off));
                    }
                },
                ethertype::PPPOE_SESSION => {
                    let proto = self.u16_at(off + 6).ok_or(Stop::NotIp)?;
                    return match proto {
                        0x0021 => Ok((Net::Ipv4, off + 8)),
                        0x0057 => Ok((Net::Ipv6, off + 8)),
                        _ => Err(Stop::NotIp),
                    };
                }
                _ => return Err(Stop::NotIp),
            }
        }
    }

    /// The packet at `off`, inside an enclosing packet ending at `limit`. `outer`: the frame's
    /// first network header, whose failure makes the frame malformed; failures deeper in only
    /// mark it partial.
    fn network(&mut self, net: Net, off: usize, limit: usize, depth: u8, outer: bool) -> Step {
        if depth >= MAX_DEPTH {
            return Err(Stop::Unreadable);
        }
        let result = match net {
            Net::Arp => self.arp(off, limit),
            Net::Ipv4 => self.ipv4(off, limit, depth),
            Net::Ipv6 => self.ipv6(off, limit, depth),
            Net::ByVersion => match self.edits.buf.get(off).map(|b| b >> 4) {
                Some(4) => self.ipv4(off, limit, depth),
                Some(6) => self.ipv6(off, limit, depth),
                _ => Err(Stop::Unreadable),
            },
        };
        match result {
            Err(Stop::Unreadable) if !outer => {
                self.partial = true;
                Ok(off)
            }
            other => other,
        }
    }

    /// ARP for IPv4 over any hardware: sender and target protocol addresses.
    fn arp(&mut self, off: usize, limit: usize) -> Step {
        let b = self.edits.buf[..limit]
            .get(off..off + 8)
            .ok_or(Stop::Unreadable)?;
        let (ptype, hlen, plen) = (
            u16::from_be_bytes([b[2], b[3]]),
            usize::from(b[4]),
            usize::from(b[5]),
        );
        let end = off + 8 + 2 * (hlen + plen);
        if ptype != ethertype::IPV4 || plen != 4 {
            return Err(Stop::NotIp);
        }
        if limit < end {
            return Err(Stop::Unreadable);
        }
        self.address::<4>(off + 8 + hlen);
        self.address::<4>(off + 8 + 2 * hlen + 4);
        Ok(end)
    }

    fn ipv4(&mut self, off: usize, limit: usize, depth: u8) -> Step {
        let b = self.edits.buf[..limit]
            .get(off..off + 20)
            .ok_or(Stop::Unreadable)?;
        let header_len = usize::from(b[0] & 0x0f) * 4;
        if b[0] >> 4 != 4 || header_len < 20 {
            return Err(Stop::Unreadable);
        }
        let total = match usize::from(u16::from_be_bytes([b[2], b[3]])) {
            // Captured before segmentation offload filled the length in: what is there.
            0 => limit - off,
            total => total,
        };
        let proto = b[9];
        let fragment_offset = u16::from_be_bytes([b[6], b[7]]) & 0x1fff;
        if total < header_len {
            return Err(Stop::Unreadable);
        }
        let end = (off + total).min(limit);
        let l4 = off + header_len;
        let header = self.edits.open(Scope::new(
            off + 10,
            Zero::Value,
            (off, off + header_len),
            None,
        ));
        let transport = (fragment_offset == 0)
            .then(|| self.open_transport(proto, l4, end, (off + 12, off + 20)));
        self.address::<4>(off + 12);
        self.address::<4>(off + 16);
        let result = match fragment_offset {
            0 => self.transport(proto, l4, end, depth),
            _ => Ok(l4),
        };
        self.edits.close(transport.flatten());
        self.edits.close(header);
        result
    }

    fn ipv6(&mut self, off: usize, limit: usize, depth: u8) -> Step {
        let b = self.edits.buf[..limit]
            .get(off..off + 40)
            .ok_or(Stop::Unreadable)?;
        if b[0] >> 4 != 6 {
            return Err(Stop::Unreadable);
        }
        let payload_len = match usize::from(u16::from_be_bytes([b[4], b[5]])) {
            // Jumbogram, or captured before segmentation offload: what is there.
            0 => limit - off - 40,
            len => len,
        };
        let next = b[6];
        let end = (off + 40 + payload_len).min(limit);
        let walk = ipv6::walk_extension_headers(next, &self.edits.buf[off + 40..end]);
        let l4 = off + 40 + walk.offset;
        let first = walk.fragment.is_none_or(|f| f.offset == 0) && walk.complete;
        let transport =
            first.then(|| self.open_transport(walk.protocol, l4, end, (off + 8, off + 40)));
        self.address::<16>(off + 8);
        self.address::<16>(off + 24);
        let result = match first {
            true => self.transport(walk.protocol, l4, end, depth),
            false => Ok(l4),
        };
        self.edits.close(transport.flatten());
        result
    }

    /// Opens the checksum scope of the transport header at `l4` (IP payload up to `end`);
    /// `pseudo` are the IP header's addresses.
    fn open_transport(
        &mut self,
        proto: u8,
        l4: usize,
        end: usize,
        pseudo: (usize, usize),
    ) -> Option<usize> {
        let (field, zero, pseudo) = match proto {
            protocol::TCP => (l4 + 16, Zero::Value, Some(pseudo)),
            protocol::UDP => (l4 + 6, Zero::Absent, Some(pseudo)),
            protocol::ICMP => (l4 + 2, Zero::Value, None),
            protocol::ICMPV6 => (l4 + 2, Zero::Value, Some(pseudo)),
            _ => return None,
        };
        // A field past the packet (a quote cut after 8 bytes) is not there to update.
        if field + 2 > end {
            return None;
        }
        self.edits.open(Scope::new(field, zero, (l4, end), pseudo))
    }

    /// The transport header at `l4`, its payload ending at `end`; returns where headers end.
    fn transport(&mut self, proto: u8, l4: usize, end: usize, depth: u8) -> Step {
        let header_end = |len: usize| Ok((l4 + len).min(end));
        match proto {
            protocol::TCP => {
                let data_offset = self
                    .edits
                    .buf
                    .get(l4 + 12)
                    .map_or(20, |b| usize::from(b >> 4) * 4);
                header_end(data_offset.max(20))
            }
            protocol::UDP => {
                let dst_port = self.u16_at(l4 + 2);
                if dst_port == Some(trawl_wire::vxlan::PORT) && end >= l4 + 16 {
                    let (net, off) = match self.ethernet(l4 + 16) {
                        Ok(found) => found,
                        Err(_) => return header_end(16),
                    };
                    return self.network(net, off, end, depth + 1, false);
                }
                header_end(8)
            }
            protocol::ICMP => self.icmp4(l4, end, depth),
            protocol::ICMPV6 => self.icmp6(l4, end, depth),
            protocol::GRE => self.gre(l4, end, depth),
            protocol::IPV4 => self.network(Net::Ipv4, l4, end, depth + 1, false),
            protocol::IPV6 => self.network(Net::Ipv6, l4, end, depth + 1, false),
            protocol::SCTP => header_end(12),
            _ => Ok(l4),
        }
    }

    fn icmp4(&mut self, l4: usize, end: usize, depth: u8) -> Step {
        const DEST_UNREACHABLE: u8 = 3;
        const SOURCE_QUENCH: u8 = 4;
        const REDIRECT: u8 = 5;
        const TIME_EXCEEDED: u8 = 11;
        const PARAMETER_PROBLEM: u8 = 12;
        match self.edits.buf.get(l4).copied() {
            Some(REDIRECT) if end >= l4 + 8 => {
                self.address::<4>(l4 + 4);
                self.quote(Net::Ipv4, l4 + 8, end, depth)
            }
            Some(DEST_UNREACHABLE | SOURCE_QUENCH | TIME_EXCEEDED | PARAMETER_PROBLEM) => {
                self.quote(Net::Ipv4, l4 + 8, end, depth)
            }
            _ => Ok((l4 + 8).min(end)),
        }
    }

    fn icmp6(&mut self, l4: usize, end: usize, depth: u8) -> Step {
        const NEIGHBOR_SOLICIT: u8 = 135;
        const NEIGHBOR_ADVERT: u8 = 136;
        const REDIRECT: u8 = 137;
        match self.edits.buf.get(l4).copied() {
            // Destination unreachable, packet too big, time exceeded, parameter problem.
            Some(1..=4) => self.quote(Net::Ipv6, l4 + 8, end, depth),
            Some(NEIGHBOR_SOLICIT | NEIGHBOR_ADVERT) if end >= l4 + 24 => {
                self.address::<16>(l4 + 8);
                Ok(l4 + 24)
            }
            Some(REDIRECT) if end >= l4 + 40 => {
                self.address::<16>(l4 + 8);
                self.address::<16>(l4 + 24);
                Ok(l4 + 40)
            }
            _ => Ok((l4 + 8).min(end)),
        }
    }

    /// The packet quoted in an ICMP error, at `off`: rewritten like any packet (its own
    /// checksums updated inside the ICMP checksum); where it ends, the headers end.
    fn quote(&mut self, net: Net, off: usize, end: usize, depth: u8) -> Step {
        if off >= end {
            return Ok(end);
        }
        self.network(net, off, end, depth + 1, false)
    }

    fn gre(&mut self, l4: usize, end: usize, depth: u8) -> Step {
        let Ok(gre) = GrePacket::new_checked(&self.edits.buf[l4.min(end)..end]) else {
            self.partial = true;
            return Ok(end);
        };
        let (version, routing, ty, header_len) = (
            gre.version(),
            gre.routing_present(),
            gre.protocol_type(),
            gre.header_len(),
        );
        let checksum = match gre.checksum_present() {
            true => self
                .edits
                .open(Scope::new(l4 + 4, Zero::Value, (l4, end), None)),
            false => None,
        };
        let inner = l4 + header_len;
        let result = match (version, routing, ty) {
            (0, false, ethertype::IPV4) => self.network(Net::Ipv4, inner, end, depth + 1, false),
            (0, false, ethertype::IPV6) => self.network(Net::Ipv6, inner, end, depth + 1, false),
            // Cisco's GRE keepalives carry the IPv4 packet the peer sends back, with protocol
            // type 0 (as Wireshark reads them).
            (0, false, 0x0000) if self.edits.buf.get(inner).is_some_and(|b| b >> 4 == 4) => {
                self.network(Net::Ipv4, inner, end, depth + 1, false)
            }
            // Cisco MetaData (an SGT tag): 8 bytes, in GRE the Ethertype of what follows first.
            (0, false, CISCO_METADATA) => {
                match self.u16_at(inner).map(|ty| self.ethertypes(inner + 8, ty)) {
                    Some(Ok((net, off))) => self.network(net, off, end, depth + 1, false),
                    _ => Ok((inner + 8).min(end)),
                }
            }
            (0, false, ethertype::TRANSPARENT_ETHERNET_BRIDGING) => match self.ethernet(inner) {
                Ok((net, off)) => self.network(net, off, end, depth + 1, false),
                Err(_) => Ok(inner.min(end)),
            },
            // PPTP's enhanced GRE carries PPP: address/control and the protocol's leading
            // zero may be compressed away (RFC 1661).
            (1, _, 0x880b) => {
                let mut off = inner;
                if self.edits.buf.get(off..off + 2) == Some(&[0xff, 0x03]) {
                    off += 2;
                }
                match self.edits.buf.get(off..(off + 2).min(end)) {
                    Some([0x21, ..]) => self.network(Net::Ipv4, off + 1, end, depth + 1, false),
                    Some([0x57, ..]) => self.network(Net::Ipv6, off + 1, end, depth + 1, false),
                    Some([0x00, 0x21]) => self.network(Net::Ipv4, off + 2, end, depth + 1, false),
                    Some([0x00, 0x57]) => self.network(Net::Ipv6, off + 2, end, depth + 1, false),
                    _ => Ok(inner.min(end)),
                }
            }
            _ => Ok(inner.min(end)),
        };
        self.edits.close(checksum);
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::internet_checksum;
    use crate::{CryptoPan, Key};

    fn rewriter(truncate: bool) -> PacketRewriter {
        let key = Key::from_bytes(&[1; 32]).unwrap();
        PacketRewriter::new(Anonymizer::new(CryptoPan::new(&key), Vec::new()), truncate)
    }

    /// Raw IPv4 (10.0.0.1 → 10.0.0.2) / UDP 1000 → 2000 with 4 payload bytes, checksums right.
    fn udp4() -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 32, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, //
            0x03, 0xe8, 0x07, 0xd0, 0, 12, 0, 0, b'a', b'b', b'c', b'd',
        ];
        let c = internet_checksum(&p[..20]);
        p[10..12].copy_from_slice(&c.to_be_bytes());
        let c = udp_checksum(&p);
        p[26..28].copy_from_slice(&c.to_be_bytes());
        p
    }

    fn udp_checksum(p: &[u8]) -> u16 {
        let mut pseudo = p[12..20].to_vec();
        pseudo.extend_from_slice(&[0, 17, 0, 12]);
        let mut seg = p[20..].to_vec();
        seg[6..8].fill(0);
        pseudo.extend_from_slice(&seg);
        internet_checksum(&pseudo)
    }

    #[test]
    fn emit_udp4_addresses_mapped_checksums_recomputed() {
        let input = udp4();
        let mut r = rewriter(false);
        let (outcome, out) = r.rewrite(link::RAW, &input);
        let out = out.to_vec();
        assert_eq!(outcome, RewriteOutcome::Rewritten);
        let mut anon = Anonymizer::new(
            CryptoPan::new(&Key::from_bytes(&[1; 32]).unwrap()),
            Vec::new(),
        );
        assert_eq!(out[12..16], anon.v4([10, 0, 0, 1].into()).octets());
        assert_eq!(out[16..20], anon.v4([10, 0, 0, 2].into()).octets());
        let mut header = out[..20].to_vec();
        header[10..12].fill(0);
        assert_eq!(out[10..12], internet_checksum(&header).to_be_bytes());
        assert_eq!(out[26..28], udp_checksum(&out).to_be_bytes());
        assert_eq!(out[20..26], input[20..26]);
    }

    #[test]
    fn truncated_payload_cut_after_the_udp_header() {
        let input = udp4();
        let mut r = rewriter(true);
        let (_, out) = r.rewrite(link::RAW, &input);
        assert_eq!(out.len(), 28);
    }

    #[test]
    fn truncated_ip_header_copied_unchanged() {
        let input = udp4();
        let mut r = rewriter(false);
        let (outcome, out) = r.rewrite(link::RAW, &input[..18]);
        assert_eq!((outcome, out), (RewriteOutcome::Malformed, &input[..18]));
        assert_eq!(r.counters()[RewriteOutcome::Malformed as usize], 1);
    }

    #[test]
    fn nested_ip_in_ip_beyond_the_depth_bound_is_partial() {
        // Twenty IPv4-in-IPv4 headers: the first MAX_DEPTH are rewritten, the rest are not.
        let mut frame = Vec::new();
        for i in 0..20u8 {
            frame.extend_from_slice(&[
                0x45, 0, 0, 0, 0, 0, 0, 0, 64, 4, 0, 0, 10, 0, 0, i, 10, 1, 0, i,
            ]);
        }
        let mut r = rewriter(false);
        let (outcome, out) = r.rewrite(link::RAW, &frame);
        assert_eq!(outcome, RewriteOutcome::Partial);
        let changed = (0..20)
            .filter(|i| out[i * 20 + 12..i * 20 + 20] != frame[i * 20 + 12..i * 20 + 20])
            .count();
        assert_eq!(changed, usize::from(MAX_DEPTH));
    }
}
