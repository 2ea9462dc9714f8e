//! Frame parsing just deep enough to find a flow key, and the statistics tracegen prints about
//! the trace it wrote (distinct flows, peak concurrent flows).
//!
//! These numbers are what `run.sh` checks the peers' flow counts against, so they are measured
//! on the packets as written rather than derived from the generator's parameters.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Where the network layer starts in an Ethernet frame, and which one it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L3 {
    /// IPv4 header at this offset.
    V4(usize),
    /// IPv6 header at this offset.
    V6(usize),
    /// Not IP, or too short to tell.
    Other,
}

/// Finds the IP header behind Ethernet and any number of 802.1Q / 802.1ad tags.
pub fn find_l3(frame: &[u8]) -> L3 {
    if frame.len() < 14 {
        return L3::Other;
    }
    let mut ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    let mut off = 14;
    while matches!(ethertype, 0x8100 | 0x88a8 | 0x9100) {
        if frame.len() < off + 4 {
            return L3::Other;
        }
        ethertype = u16::from_be_bytes([frame[off + 2], frame[off + 3]]);
        off += 4;
    }
    match ethertype {
        0x0800 if frame.len() >= off + 20 && frame[off] >> 4 == 4 => L3::V4(off),
        0x86dd if frame.len() >= off + 40 && frame[off] >> 4 == 6 => L3::V6(off),
        _ => L3::Other,
    }
}

/// A bidirectional flow key: the two endpoints are ordered so both directions map to one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BiKey {
    /// IP protocol (IPv6: the first next-header).
    pub proto: u8,
    /// Lower endpoint address (IPv4 in the first four bytes).
    pub lo: [u8; 16],
    /// Higher endpoint address.
    pub hi: [u8; 16],
    /// Port of the lower endpoint (0 where the protocol has none).
    pub lo_port: u16,
    /// Port of the higher endpoint.
    pub hi_port: u16,
}

/// Extracts the bidirectional key of an IP frame, and whether the packet goes lo -> hi.
pub fn bikey(frame: &[u8]) -> Option<(BiKey, bool)> {
    let (proto, src, dst, l4) = match find_l3(frame) {
        L3::V4(o) => {
            let ihl = usize::from(frame[o] & 0x0f) * 4;
            let frag_off = u16::from_be_bytes([frame[o + 6], frame[o + 7]]) & 0x1fff;
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src[..4].copy_from_slice(&frame[o + 12..o + 16]);
            dst[..4].copy_from_slice(&frame[o + 16..o + 20]);
            // Only the first fragment carries ports.
            let l4 = if frag_off == 0 && ihl >= 20 {
                Some(o + ihl)
            } else {
                None
            };
            (frame[o + 9], src, dst, l4)
        }
        L3::V6(o) => {
            let mut src = [0u8; 16];
            let mut dst = [0u8; 16];
            src.copy_from_slice(&frame[o + 8..o + 24]);
            dst.copy_from_slice(&frame[o + 24..o + 40]);
            (frame[o + 6], src, dst, Some(o + 40))
        }
        L3::Other => return None,
    };
    let (sport, dport) = match l4 {
        Some(l4) if matches!(proto, 6 | 17 | 132) && frame.len() >= l4 + 4 => (
            u16::from_be_bytes([frame[l4], frame[l4 + 1]]),
            u16::from_be_bytes([frame[l4 + 2], frame[l4 + 3]]),
        ),
        _ => (0, 0),
    };
    let forward = (src, sport) <= (dst, dport);
    let key = if forward {
        BiKey {
            proto,
            lo: src,
            hi: dst,
            lo_port: sport,
            hi_port: dport,
        }
    } else {
        BiKey {
            proto,
            lo: dst,
            hi: src,
            lo_port: dport,
            hi_port: sport,
        }
    };
    Some((key, forward))
}

/// FxHash (rustc's hasher): the std SipHash would dominate generation time on 20 M packets,
/// and these keys come from our own generator, so HashDoS is not a concern.
#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.write_u64(u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.hash = (self.hash.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// A `HashMap` using [`FxHasher`].
pub type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

#[derive(Debug, Clone, Copy)]
struct Seen {
    first_us: u64,
    last_us: u64,
    /// Bit 0: lo -> hi seen; bit 1: hi -> lo seen.
    dirs: u8,
}

/// Counts packets, bytes and flows of a trace as it is written.
#[derive(Debug, Default)]
pub struct FlowStats {
    flows: FxHashMap<BiKey, Seen>,
    /// Packets observed.
    pub packets: u64,
    /// IP packets (the ones that belong to a flow).
    pub ip_packets: u64,
    /// Sum of original (wire) lengths.
    pub wire_bytes: u64,
}

/// What [`FlowStats::summary`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Distinct bidirectional 5-tuples.
    pub biflows: u64,
    /// Distinct unidirectional 5-tuples (what NetFlow-style meters report).
    pub uniflows: u64,
    /// Most flows alive at one time, a flow being alive from its first packet until `idle`
    /// after its last (FIN/RST are ignored, so this is an upper bound for meters that close
    /// TCP flows early).
    pub peak_concurrent: u64,
}

impl FlowStats {
    /// Creates empty statistics sized for about `flows` flows.
    pub fn with_capacity(flows: usize) -> FlowStats {
        FlowStats {
            flows: FxHashMap::with_capacity_and_hasher(flows, Default::default()),
            ..FlowStats::default()
        }
    }

    /// Accounts one packet.
    pub fn observe(&mut self, ts_us: u64, orig_len: u32, frame: &[u8]) {
        self.packets += 1;
        self.wire_bytes += u64::from(orig_len);
        let Some((key, forward)) = bikey(frame) else {
            return;
        };
        self.ip_packets += 1;
        let bit = if forward { 1 } else { 2 };
        self.flows
            .entry(key)
            .and_modify(|s| {
                s.last_us = s.last_us.max(ts_us);
                s.first_us = s.first_us.min(ts_us);
                s.dirs |= bit;
            })
            .or_insert(Seen {
                first_us: ts_us,
                last_us: ts_us,
                dirs: bit,
            });
    }

    /// Distinct and concurrent flow counts, with `idle_us` as the idle timeout.
    pub fn summary(&self, idle_us: u64) -> Summary {
        let mut starts = Vec::with_capacity(self.flows.len());
        let mut ends = Vec::with_capacity(self.flows.len());
        let mut uniflows = 0u64;
        for s in self.flows.values() {
            starts.push(s.first_us);
            ends.push(s.last_us + idle_us);
            uniflows += u64::from(s.dirs.count_ones());
        }
        Summary {
            biflows: self.flows.len() as u64,
            uniflows,
            peak_concurrent: peak_overlap(&mut starts, &mut ends),
        }
    }
}

/// Most intervals `[starts[i], ends[i]]` that overlap at one instant.
fn peak_overlap(starts: &mut [u64], ends: &mut [u64]) -> u64 {
    starts.sort_unstable();
    ends.sort_unstable();
    let (mut live, mut peak, mut j) = (0u64, 0u64, 0usize);
    for &s in starts.iter() {
        // An interval ending before this one starts is gone.
        while j < ends.len() && ends[j] < s {
            j += 1;
            live -= 1;
        }
        live += 1;
        peak = peak.max(live);
    }
    peak
}

#[cfg(test)]
mod tests {
    use super::*;

    // Ethernet + IPv4 + TCP 10.0.0.2:40000 -> 10.0.0.1:80, SYN.
    const V4_TCP: [u8; 54] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
        0xbb, // dst, src MAC
        0x08, 0x00, // IPv4
        0x45, 0x00, 0x00, 0x28, 0x00, 0x01, 0x40, 0x00, 0x40, 0x06, 0x00, 0x00, // ver..csum
        0x0a, 0x00, 0x00, 0x02, 0x0a, 0x00, 0x00, 0x01, // 10.0.0.2 -> 10.0.0.1
        0x9c, 0x40, 0x00, 0x50, 0, 0, 0, 1, 0, 0, 0, 0, // 40000 -> 80, seq, ack
        0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0, // off, SYN, win, csum, urg
    ];

    /// `V4_TCP` with addresses and ports swapped.
    fn reversed() -> [u8; 54] {
        let mut rev = V4_TCP;
        rev[26..30].copy_from_slice(&V4_TCP[30..34]);
        rev[30..34].copy_from_slice(&V4_TCP[26..30]);
        rev[34..36].copy_from_slice(&V4_TCP[36..38]);
        rev[36..38].copy_from_slice(&V4_TCP[34..36]);
        rev
    }

    #[test]
    fn parse_v4_tcp_key_is_symmetric() {
        let (k1, fwd1) = bikey(&V4_TCP).unwrap();
        let (k2, fwd2) = bikey(&reversed()).unwrap();
        assert_eq!(k1, k2);
        assert_ne!(fwd1, fwd2);
        assert_eq!(k1.proto, 6);
        assert_eq!((k1.lo_port, k1.hi_port), (80, 40000));
    }

    #[test]
    fn parse_vlan_tagged() {
        let mut f = V4_TCP[..12].to_vec();
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]); // 802.1Q, VLAN 100
        f.extend_from_slice(&V4_TCP[12..]);
        assert_eq!(find_l3(&f), L3::V4(18));
        assert_eq!(bikey(&f).unwrap().0, bikey(&V4_TCP).unwrap().0);
    }

    #[test]
    fn non_ip_and_truncated_have_no_key() {
        let mut arp = V4_TCP;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(bikey(&arp).is_none());
        assert!(bikey(&V4_TCP[..30]).is_none());
        // Ports cut off: still a flow, without ports.
        let (k, _) = bikey(&V4_TCP[..36]).unwrap();
        assert_eq!((k.lo_port, k.hi_port), (0, 0));
    }

    #[test]
    fn later_fragment_has_no_ports() {
        let mut f = V4_TCP;
        f[20] = 0x00;
        f[21] = 0x10; // fragment offset 16 * 8 bytes
        let (k, _) = bikey(&f).unwrap();
        assert_eq!((k.lo_port, k.hi_port), (0, 0));
    }

    #[test]
    fn summary_counts_directions_and_overlap() {
        let mut st = FlowStats::with_capacity(4);
        let rev = reversed();
        let mut other = V4_TCP;
        other[33] = 9; // different destination
        st.observe(0, 54, &V4_TCP);
        st.observe(10, 54, &rev);
        st.observe(100, 54, &other);
        let s = st.summary(50);
        assert_eq!(s.biflows, 2);
        assert_eq!(s.uniflows, 3);
        // First flow lives [0, 60], second [100, 150]: never together.
        assert_eq!(s.peak_concurrent, 1);
        assert_eq!(st.summary(100).peak_concurrent, 2);
        assert_eq!(st.wire_bytes, 162);
    }

    #[test]
    fn peak_overlap_of_nested_intervals() {
        let mut s = vec![0, 1, 2, 10];
        let mut e = vec![20, 3, 4, 11];
        assert_eq!(peak_overlap(&mut s, &mut e), 3);
    }
}
