//! Per-flow state, updated in place for every packet.
use crate::decode::{tcp_flags, Decoded};
use crate::key::{FlowKey, Side};

/// How many leading packets of a flow have their length and inter-arrival time recorded.
pub const EARLY_PACKETS: usize = 10;

/// Counters of one direction (packets sent by one side of the key). Two cache lines,
/// aligned, so a packet's update touches exactly these two lines of its direction: the first
/// holds what every packet changes, the second the TCP state and the rarer fields.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
pub(crate) struct DirStats {
    pub packets: u64,
    /// Wire bytes (frame length, L2 header included).
    pub bytes: u64,
    /// IP total length bytes.
    pub ip_bytes: u64,
    pub last_ns: u64,
    pub len_min: u32,
    pub len_max: u32,
    pub len_sumsq: f64,
    pub iat_min: u64,
    pub iat_max: u64,
    // Second line.
    pub iat_sumsq: f64,
    pub first_ns: u64,
    /// SYN (without ACK), SYN-ACK, FIN, RST, PSH, URG, ECE, CWR.
    pub flag_counts: [u32; 8],
    pub zero_window: u32,
    pub retransmissions: u32,
    /// One past the highest sequence number seen (valid when `seq_valid`).
    pub next_seq: u32,
    /// Union of the TCP flags seen.
    pub flags_or: u8,
    pub seq_valid: bool,
}

/// Index of a flag counter in [`DirStats::flag_counts`].
pub(crate) mod flag_index {
    pub const SYN: usize = 0;
    pub const SYN_ACK: usize = 1;
    pub const FIN: usize = 2;
    pub const RST: usize = 3;
    pub const PSH: usize = 4;
    pub const URG: usize = 5;
    pub const ECE: usize = 6;
    pub const CWR: usize = 7;
}

/// Bits of [`FlowEntry::state`].
pub(crate) mod state_bits {
    /// The initiator is the high side of the key.
    pub const INIT_HIGH: u8 = 1 << 0;
    /// A SYN or SYN-ACK fixed the initiator; heuristics no longer apply.
    pub const SYN_SEEN: u8 = 1 << 1;
    /// FIN seen from the low side.
    pub const FIN_LOW: u8 = 1 << 2;
    /// FIN seen from the high side.
    pub const FIN_HIGH: u8 = 1 << 3;
    /// RST seen.
    pub const RST: u8 = 1 << 4;
    /// Closing: lingering before export (FIN both ways or RST).
    pub const CLOSING: u8 = 1 << 5;
}

/// One flow in the table, laid out by access: the first cache line holds everything a packet
/// reads besides its own direction's counters (key, last activity, state); the second what
/// only expiry and export touch; then one aligned pair of lines per direction; then the early
/// packet features, written by the first ten packets only. Per packet: three lines.
#[derive(Clone, Debug)]
#[repr(C, align(64))]
pub(crate) struct FlowEntry {
    pub key: FlowKey,
    /// Last packet of the flow (either direction).
    pub last_ns: u64,
    /// Start of the current active-timeout interval.
    pub interval_start_ns: u64,
    /// Unix second of the last packet (low 32 bits), for the series' active-flow count.
    pub last_second: u32,
    /// In use (set and cleared by the table).
    pub live: bool,
    pub state: u8,
    /// Number of early packets recorded so far.
    pub early_count: u8,
    // Second line: expiry and export.
    /// The key's hash (set by the table; removal needs each moved slot's home position).
    pub hash: u64,
    /// Timer-wheel links (entry indices, `NIL` when none) and slot.
    pub wheel_prev: u32,
    pub wheel_next: u32,
    pub wheel_slot: u32,
    /// Bit i set: early packet i was sent by the high side.
    pub early_high: u16,
    /// Payload bytes captured so far per side (into the meter's payload arena).
    pub payload_len: [u16; 2],
    /// MAC address of each side (as sender, or as receiver of the first packet).
    pub macs: [[u8; 6]; 2],
    /// Counters by sender side (index `Side as usize`).
    pub dirs: [DirStats; 2],
    pub early_len: [u32; EARLY_PACKETS],
    pub early_iat: [u64; EARLY_PACKETS],
}

/// Sentinel "no entry" index.
pub(crate) const NIL: u32 = u32::MAX;

impl FlowEntry {
    pub(crate) fn empty() -> Self {
        FlowEntry {
            key: FlowKey::default(),
            last_ns: 0,
            hash: 0,
            wheel_prev: NIL,
            wheel_next: NIL,
            wheel_slot: 0,
            live: false,
            state: 0,
            early_count: 0,
            early_high: 0,
            last_second: 0,
            interval_start_ns: 0,
            dirs: [DirStats::default(); 2],
            macs: [[0; 6]; 2],
            early_len: [0; EARLY_PACKETS],
            early_iat: [0; EARLY_PACKETS],
            payload_len: [0; 2],
        }
    }

    /// Resets the entry for a new flow (keeps the wheel links, which the table manages).
    pub(crate) fn start(&mut self, key: FlowKey, d: &Decoded, sender: Side, ts: u64) {
        self.key = key;
        self.state = 0;
        self.last_ns = ts;
        self.interval_start_ns = ts;
        self.reset_counters();
        self.macs[sender as usize] = d.src_mac;
        self.macs[sender.flip() as usize] = d.dst_mac;
        self.orient_first(d, sender);
    }

    /// Clears the counters for a new record (active timeout) or a new flow.
    pub(crate) fn reset_counters(&mut self) {
        self.dirs = [DirStats::default(); 2];
        self.early_count = 0;
        self.early_high = 0;
        self.last_second = u32::MAX;
        self.payload_len = [0; 2];
    }

    /// The side that initiated the flow.
    #[inline]
    pub(crate) fn initiator(&self) -> Side {
        if self.state & state_bits::INIT_HIGH != 0 {
            Side::High
        } else {
            Side::Low
        }
    }

    fn set_initiator(&mut self, side: Side) {
        match side {
            Side::High => self.state |= state_bits::INIT_HIGH,
            Side::Low => self.state &= !state_bits::INIT_HIGH,
        }
    }

    /// Decides the initiator from the first packet: its SYN or SYN-ACK, else goProbe's port
    /// heuristic, else the sender.
    fn orient_first(&mut self, d: &Decoded, sender: Side) {
        if self.learn_from_syn(d, sender) {
            return;
        }
        let receiver_is_initiator = match d.proto {
            // ICMP: an answer type means the sender answered a request we did not see.
            1 => matches!(d.src_port, 0 | 14 | 16 | 18 | 9),
            58 => matches!(d.src_port, 129 | 134 | 136 | 131),
            _ => {
                !is_group_address(d.ip_version, &d.dst_ip)
                    && d.src_port < 1024
                    && d.dst_port > 20000
            }
        };
        self.set_initiator(if receiver_is_initiator {
            sender.flip()
        } else {
            sender
        });
    }

    /// If `d` is a SYN or SYN-ACK and no earlier one fixed the orientation, fix it now.
    fn learn_from_syn(&mut self, d: &Decoded, sender: Side) -> bool {
        if !d.tcp_valid || self.state & state_bits::SYN_SEEN != 0 {
            return false;
        }
        let f = d.tcp.flags;
        if f & tcp_flags::SYN == 0 {
            return false;
        }
        self.state |= state_bits::SYN_SEEN;
        let ack = f & tcp_flags::ACK != 0;
        self.set_initiator(if ack { sender.flip() } else { sender });
        true
    }

    /// Counts one packet. `payload` receives up to the configured bytes of transport payload.
    #[inline]
    pub(crate) fn update(&mut self, d: &Decoded, sender: Side, ts: u64, wire_len: u32) {
        let side = sender as usize;
        if d.tcp_valid {
            self.learn_from_syn(d, sender);
        }
        // Inter-arrival time within the flow, for the early-packet features.
        let prev_last = self.last_ns;
        self.last_ns = self.last_ns.max(ts);
        let dir = &mut self.dirs[side];
        if dir.packets == 0 {
            dir.first_ns = ts;
            dir.len_min = wire_len;
            dir.iat_min = u64::MAX;
        } else {
            // Packets can arrive out of time order (pcapng with several interfaces, multi-queue
            // capture): first/last are the extremes, and a backwards step is a zero gap.
            dir.first_ns = dir.first_ns.min(ts);
            let iat = ts.saturating_sub(dir.last_ns);
            dir.iat_min = dir.iat_min.min(iat);
            dir.iat_max = dir.iat_max.max(iat);
            dir.iat_sumsq += (iat as f64) * (iat as f64);
        }
        dir.packets += 1;
        dir.bytes += wire_len as u64;
        dir.ip_bytes += d.ip_len as u64;
        dir.last_ns = dir.last_ns.max(ts);
        dir.len_min = dir.len_min.min(wire_len);
        dir.len_max = dir.len_max.max(wire_len);
        dir.len_sumsq += (wire_len as f64) * (wire_len as f64);
        if d.tcp_valid {
            update_tcp(dir, d);
            let f = d.tcp.flags;
            if f & tcp_flags::RST != 0 {
                self.state |= state_bits::RST | state_bits::CLOSING;
            }
            if f & tcp_flags::FIN != 0 {
                self.state |= match sender {
                    Side::Low => state_bits::FIN_LOW,
                    Side::High => state_bits::FIN_HIGH,
                };
                if self.state & (state_bits::FIN_LOW | state_bits::FIN_HIGH)
                    == state_bits::FIN_LOW | state_bits::FIN_HIGH
                {
                    self.state |= state_bits::CLOSING;
                }
            }
        }
        let n = self.early_count as usize;
        if n < EARLY_PACKETS {
            self.early_len[n] = wire_len;
            self.early_iat[n] = if n == 0 {
                0
            } else {
                ts.saturating_sub(prev_last)
            };
            if sender == Side::High {
                self.early_high |= 1 << n;
            }
            self.early_count += 1;
        }
    }

    /// Timestamp of the flow's first packet in the current record.
    pub(crate) fn first_ns(&self) -> u64 {
        match (self.dirs[0].packets, self.dirs[1].packets) {
            (0, _) => self.dirs[1].first_ns,
            (_, 0) => self.dirs[0].first_ns,
            _ => self.dirs[0].first_ns.min(self.dirs[1].first_ns),
        }
    }

    /// Timestamp of the flow's last packet, for expiry (survives an active-timeout reset).
    #[inline]
    pub(crate) fn last_ns(&self) -> u64 {
        self.last_ns
    }

    /// Timestamp of the last packet in the current record.
    pub(crate) fn record_last_ns(&self) -> u64 {
        self.dirs[0].last_ns.max(self.dirs[1].last_ns)
    }

    /// Packets in the current record.
    pub(crate) fn packets(&self) -> u64 {
        self.dirs[0].packets + self.dirs[1].packets
    }

    #[inline]
    pub(crate) fn is_closing(&self) -> bool {
        self.state & state_bits::CLOSING != 0
    }
}

#[inline]
fn update_tcp(dir: &mut DirStats, d: &Decoded) {
    let f = d.tcp.flags;
    dir.flags_or |= f;
    let syn = f & tcp_flags::SYN != 0;
    let ack = f & tcp_flags::ACK != 0;
    if syn && !ack {
        dir.flag_counts[flag_index::SYN] += 1;
    }
    if syn && ack {
        dir.flag_counts[flag_index::SYN_ACK] += 1;
    }
    if f & tcp_flags::FIN != 0 {
        dir.flag_counts[flag_index::FIN] += 1;
    }
    if f & tcp_flags::RST != 0 {
        dir.flag_counts[flag_index::RST] += 1;
    }
    if f & tcp_flags::PSH != 0 {
        dir.flag_counts[flag_index::PSH] += 1;
    }
    if f & tcp_flags::URG != 0 {
        dir.flag_counts[flag_index::URG] += 1;
    }
    if f & tcp_flags::ECE != 0 {
        dir.flag_counts[flag_index::ECE] += 1;
    }
    if f & tcp_flags::CWR != 0 {
        dir.flag_counts[flag_index::CWR] += 1;
    }
    if d.tcp.window == 0 && f & tcp_flags::RST == 0 {
        dir.zero_window += 1;
    }
    // Sequence space consumed: payload, plus one each for SYN and FIN.
    let len = d
        .payload_len
        .wrapping_add(syn as u32)
        .wrapping_add((f & tcp_flags::FIN != 0) as u32);
    if len == 0 {
        return;
    }
    let end = d.tcp.seq.wrapping_add(len);
    if !dir.seq_valid {
        dir.seq_valid = true;
        dir.next_seq = end;
    } else if seq_before(d.tcp.seq, dir.next_seq) {
        // Starts inside sequence space this side already sent: a retransmission — unless it
        // is a keep-alive, one byte (or none) at one before the next sequence number, which
        // re-sends nothing (Wireshark's rule).
        let keep_alive = d.payload_len <= 1
            && d.tcp.seq == dir.next_seq.wrapping_sub(1)
            && f & (tcp_flags::SYN | tcp_flags::FIN | tcp_flags::RST) == 0;
        if !keep_alive {
            dir.retransmissions += 1;
        }
        if seq_before(dir.next_seq, end) {
            dir.next_seq = end;
        }
    } else {
        dir.next_seq = end;
    }
}

/// RFC 1982 serial-number comparison: `a` comes before `b` in 32-bit sequence space.
#[inline]
fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// IPv4 broadcast/multicast or IPv6 multicast (the 16-byte mapped representation).
pub(crate) fn is_group_address(version: u8, ip: &[u8; 16]) -> bool {
    match version {
        4 => ip[12] >= 224 || ip[12..] == [255, 255, 255, 255] || ip[15] == 255,
        6 => ip[0] == 0xff,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_puts_each_direction_on_its_own_two_lines() {
        assert_eq!(core::mem::size_of::<DirStats>(), 128);
        let e = FlowEntry::empty();
        let base = &e as *const FlowEntry as usize;
        let off = |p: *const u8| p as usize - base;
        assert!(
            off(&e.early_count as *const u8) < 64,
            "hot header fits one line"
        );
        assert_eq!(off(&e.dirs[0] as *const DirStats as *const u8) % 64, 0);
        assert_eq!(off(&e.dirs[1] as *const DirStats as *const u8) % 64, 0);
    }

    #[test]
    fn serial_comparison_wraps() {
        assert!(seq_before(1, 2));
        assert!(seq_before(u32::MAX, 0));
        assert!(!seq_before(5, 5));
        assert!(!seq_before(0, u32::MAX));
    }

    #[test]
    fn group_addresses() {
        let mut v4 = [0u8; 16];
        v4[10] = 0xff;
        v4[11] = 0xff;
        v4[12..].copy_from_slice(&[239, 1, 1, 1]);
        assert!(is_group_address(4, &v4));
        v4[12..].copy_from_slice(&[10, 1, 1, 1]);
        assert!(!is_group_address(4, &v4));
        let mut v6 = [0u8; 16];
        v6[0] = 0xff;
        assert!(is_group_address(6, &v6));
    }

    fn tcp(flags: u8, seq: u32, payload: u32) -> Decoded {
        let mut d = Decoded {
            ip_version: 4,
            proto: 6,
            tcp_valid: true,
            payload_len: payload,
            ..Decoded::default()
        };
        d.tcp.flags = flags;
        d.tcp.seq = seq;
        d.tcp.window = 1000;
        d
    }

    #[test]
    fn retransmission_is_a_segment_starting_in_sent_space() {
        let mut e = FlowEntry::empty();
        let syn = tcp(tcp_flags::SYN, 100, 0);
        e.start(FlowKey::default(), &syn, Side::Low, 0);
        e.update(&syn, Side::Low, 0, 60);
        e.update(&tcp(tcp_flags::ACK, 101, 10), Side::Low, 1, 70);
        e.update(&tcp(tcp_flags::ACK, 111, 10), Side::Low, 2, 70);
        e.update(&tcp(tcp_flags::ACK, 101, 10), Side::Low, 3, 70);
        // A pure ACK at the old sequence number is not a retransmission.
        e.update(&tcp(tcp_flags::ACK, 101, 0), Side::Low, 4, 60);
        // Nor is a keep-alive: one byte at next sequence number - 1.
        e.update(&tcp(tcp_flags::ACK, 120, 1), Side::Low, 5, 61);
        let d = &e.dirs[0];
        assert_eq!(d.retransmissions, 1);
        assert_eq!(d.packets, 6);
        assert_eq!(d.flag_counts[flag_index::SYN], 1);
        assert_eq!(e.initiator(), Side::Low);
        assert_eq!((d.len_min, d.len_max), (60, 70));
        assert_eq!((d.iat_min, d.iat_max), (1, 1));
        assert_eq!(d.next_seq, 121);
    }

    #[test]
    fn syn_ack_first_makes_the_receiver_initiator() {
        let mut e = FlowEntry::empty();
        let sa = tcp(tcp_flags::SYN | tcp_flags::ACK, 5, 0);
        e.start(FlowKey::default(), &sa, Side::Low, 0);
        assert_eq!(e.initiator(), Side::High);
    }

    #[test]
    fn later_syn_reorients_a_heuristic_flow() {
        let mut e = FlowEntry::empty();
        let ack = tcp(tcp_flags::ACK, 5, 10);
        e.start(FlowKey::default(), &ack, Side::Low, 0);
        assert_eq!(e.initiator(), Side::Low);
        e.update(&tcp(tcp_flags::SYN, 1, 0), Side::High, 1, 60);
        assert_eq!(e.initiator(), Side::High);
        // A second SYN from the other side does not flip it back.
        e.update(&tcp(tcp_flags::SYN, 1, 0), Side::Low, 2, 60);
        assert_eq!(e.initiator(), Side::High);
    }

    #[test]
    fn fin_both_ways_or_rst_closes() {
        let mut e = FlowEntry::empty();
        let a = tcp(tcp_flags::ACK | tcp_flags::FIN, 5, 0);
        e.start(FlowKey::default(), &a, Side::Low, 0);
        e.update(&a, Side::Low, 0, 60);
        assert!(!e.is_closing());
        e.update(&a, Side::High, 1, 60);
        assert!(e.is_closing());
        let mut r = FlowEntry::empty();
        let rst = tcp(tcp_flags::RST, 5, 0);
        r.start(FlowKey::default(), &rst, Side::Low, 0);
        r.update(&rst, Side::Low, 0, 60);
        assert!(r.is_closing());
    }

    #[test]
    fn early_packets_are_signed_by_side() {
        let mut e = FlowEntry::empty();
        let p = tcp(tcp_flags::ACK, 0, 0);
        e.start(FlowKey::default(), &p, Side::Low, 10);
        for i in 0..12u64 {
            let side = if i % 2 == 0 { Side::Low } else { Side::High };
            e.update(&p, side, 10 + i * 5, 60 + i as u32);
        }
        assert_eq!(e.early_count as usize, EARLY_PACKETS);
        assert_eq!(e.early_high, 0b10_1010_1010);
        assert_eq!(e.early_iat[0], 0);
        assert_eq!(e.early_iat[1], 5);
        assert_eq!(e.early_len[9], 69);
    }
}
