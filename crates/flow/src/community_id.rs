//! Community ID v1 (<https://github.com/corelight/community-id-spec>): a flow hash that Zeek,
//! Suricata, Arkime and others compute the same way, so their records and trawl's join.
//!
//! The hash is SHA-1 over, in network byte order: the 2-byte seed, the two addresses, the IP
//! protocol number, one zero byte of padding, then the two ports for protocols that have them
//! (TCP, UDP, SCTP, and ICMP/ICMPv6 with type and code mapped to ports). The endpoints are put
//! in order first (smaller address first, or smaller port on equal addresses) so that both
//! directions of a flow hash the same, except for ICMP messages that have no reply type: those
//! keep their direction. The text form is `1:` followed by the base64 of the digest.
//!
//! Every flow record carries its ID ([`crate::FlowRecord::community_id`], seed 0), computed
//! when the record is written, never per packet. trawl-app re-exports this module for its
//! log lines.

use std::net::IpAddr;

use crate::sha1;

/// IP protocol numbers the spec gives ports to.
const ICMP: u8 = 1;
const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMPV6: u8 = 58;
const SCTP: u8 = 132;

/// Length of the text form: `1:` and 28 base64 characters (20 bytes with one `=` of padding).
pub const TEXT_LEN: usize = 30;

/// A flow's endpoints as a Community ID takes them. For ICMP (protocol 1) and ICMPv6 (58),
/// `src_port` is the message type and `dst_port` its code, as in flow records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowTuple {
    /// IP protocol number.
    pub proto: u8,
    /// Source address.
    pub src_ip: IpAddr,
    /// Destination address (same family as `src_ip`).
    pub dst_ip: IpAddr,
    /// Source port, or the ICMP type.
    pub src_port: u16,
    /// Destination port, or the ICMP code.
    pub dst_port: u16,
}

/// The Community ID computer: its seed (the spec's default is 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommunityId {
    /// Seed hashed first, so that sites can keep their IDs apart.
    pub seed: u16,
}

impl CommunityId {
    /// A computer with the given seed.
    pub fn new(seed: u16) -> Self {
        Self { seed }
    }

    /// The SHA-1 digest of `flow`; `None` when the two addresses are of different families
    /// (the spec defines no ID for them).
    pub fn digest(&self, flow: &FlowTuple) -> Option<[u8; 20]> {
        match (flow.src_ip, flow.dst_ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                Some(self.digest_unchecked(flow))
            }
            _ => None,
        }
    }

    /// The digest without the family check: two addresses of different families are hashed
    /// as they are (their octets in the spec's order). Flow records use it, where such a pair
    /// can only come from a foreign exporter's malformed record and must not stop the output.
    pub fn digest_unchecked(&self, flow: &FlowTuple) -> [u8; 20] {
        let mut src_buf = [0u8; 16];
        let mut dst_buf = [0u8; 16];
        let src = octets(flow.src_ip, &mut src_buf);
        let dst = octets(flow.dst_ip, &mut dst_buf);
        let seed = self.seed.to_be_bytes();
        let head = [flow.proto, 0];
        let Some((sport, dport, one_way)) =
            transport_ports(flow.proto, flow.src_port, flow.dst_port)
        else {
            let (a, b) = if src <= dst { (src, dst) } else { (dst, src) };
            return sha1::digest(&[&seed, a, b, &head]);
        };
        let ordered = one_way || (src, sport) < (dst, dport);
        let (a, ap, b, bp) = if ordered {
            (src, sport, dst, dport)
        } else {
            (dst, dport, src, sport)
        };
        sha1::digest(&[&seed, a, b, &head, &ap.to_be_bytes(), &bp.to_be_bytes()])
    }

    /// The Community ID of `flow` (`1:` and the base64 of its digest) without allocating.
    pub fn text(&self, flow: &FlowTuple) -> Option<CommunityIdText> {
        self.digest(flow).map(|d| CommunityIdText::from_digest(&d))
    }

    /// The Community ID of `flow`: `1:` and the base64 of its digest.
    pub fn compute(&self, flow: &FlowTuple) -> Option<String> {
        self.text(flow).map(|t| t.as_str().to_string())
    }

    /// The Community ID with the digest in lowercase hexadecimal instead of base64 (the spec's
    /// "no base64" variant).
    pub fn compute_hex(&self, flow: &FlowTuple) -> Option<String> {
        let digest = self.digest(flow)?;
        Some(format!(
            "1:{}",
            digest
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        ))
    }
}

/// The address's octets in `buf`'s first 4 or 16 bytes.
fn octets(ip: IpAddr, buf: &mut [u8; 16]) -> &[u8] {
    match ip {
        IpAddr::V4(a) => {
            buf[..4].copy_from_slice(&a.octets());
            &buf[..4]
        }
        IpAddr::V6(a) => {
            *buf = a.octets();
            &buf[..]
        }
    }
}

/// The text form of a Community ID (`1:` + base64), held inline: writers of flow records put
/// one in every record without allocating.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CommunityIdText([u8; TEXT_LEN]);

impl CommunityIdText {
    /// The text of a digest.
    pub fn from_digest(digest: &[u8; 20]) -> Self {
        let mut out = [0u8; TEXT_LEN];
        out[..2].copy_from_slice(b"1:");
        base64_into(digest, &mut out[2..]);
        CommunityIdText(out)
    }

    /// The text's bytes (ASCII).
    pub fn as_bytes(&self) -> &[u8; TEXT_LEN] {
        &self.0
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        // Only `1:` and base64 characters are ever written: ASCII.
        std::str::from_utf8(&self.0).unwrap_or("")
    }
}

impl core::fmt::Display for CommunityIdText {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::fmt::Debug for CommunityIdText {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// The port pair hashed for `proto` and whether the flow is one-way (never reordered); `None`
/// for protocols without ports.
fn transport_ports(proto: u8, sport: u16, dport: u16) -> Option<(u16, u16, bool)> {
    match proto {
        TCP | UDP | SCTP => Some((sport, dport, false)),
        ICMP | ICMPV6 => Some(icmp_ports(proto == ICMPV6, sport, dport)),
        _ => None,
    }
}

/// ICMP type and code as a port pair (the spec, after Zeek's `ICMP4_counterpart`): a message
/// that has a reply type pairs with it (type, counterpart type) and is two-way; any other keeps
/// (type, code) and its direction.
pub fn icmp_ports(v6: bool, icmp_type: u16, code: u16) -> (u16, u16, bool) {
    let counterpart = if v6 {
        match icmp_type {
            128 => Some(129), // echo request / reply
            129 => Some(128),
            133 => Some(134), // router solicitation / advertisement
            134 => Some(133),
            135 => Some(136), // neighbour solicitation / advertisement
            136 => Some(135),
            130 => Some(131), // multicast listener query / report
            131 => Some(130),
            139 => Some(140), // node information ("who are you") query / reply
            140 => Some(139),
            144 => Some(145), // home agent address discovery request / reply
            145 => Some(144),
            _ => None,
        }
    } else {
        match icmp_type {
            8 => Some(0), // echo / echo reply
            0 => Some(8),
            13 => Some(14), // timestamp / reply
            14 => Some(13),
            15 => Some(16), // information request / reply
            16 => Some(15),
            10 => Some(9), // router solicitation / advertisement
            9 => Some(10),
            17 => Some(18), // address mask request / reply
            18 => Some(17),
            _ => None,
        }
    };
    match counterpart {
        Some(other) => (icmp_type, other, false),
        None => (icmp_type, code, true),
    }
}

/// Standard base64 (RFC 4648, with padding) of `bytes` into `out`, which holds exactly
/// `4 * ceil(len / 3)` bytes.
fn base64_into(bytes: &[u8], out: &mut [u8]) {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (chunk, dst) in bytes.chunks(3).zip(out.chunks_mut(4)) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for (i, d) in dst.iter_mut().enumerate() {
            *d = if i <= chunk.len() {
                ALPHABET[(n >> (18 - 6 * i) & 63) as usize]
            } else {
                b'='
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::base64_into;

    fn base64(bytes: &[u8]) -> String {
        let mut out = vec![0u8; bytes.len().div_ceil(3) * 4];
        base64_into(bytes, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn base64_rfc4648_vectors() {
        for (input, expected) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), expected, "{input}");
        }
    }
}
