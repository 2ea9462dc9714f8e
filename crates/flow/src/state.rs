//! Per-flow state, updated in place for every packet.
use crate::config::FeatureLevel;
use crate::decode::{tcp_flags, Decoded};
use crate::key::{FlowKey, Side};
use crate::timing::TcpTiming;
use crate::tunnel::Tunnel;

/// How many leading packets of a flow have their length and inter-arrival time recorded.
pub const EARLY_PACKETS: usize = 10;

/// Counters of one direction (packets sent by one side of the key): one aligned cache line,
/// the only one of the entry besides the key's that a packet past the early ones writes (the
/// rare TCP event counters are here too, so a SYN, FIN or RST costs no extra miss). Counters
/// that would not fit are kept in narrow form with exact overflow into the flow's [`Wide`]
/// record (gaps into its [`WideGaps`]; see there), so what the record reports is the same as
/// with 64-bit fields.
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub(crate) struct DirStats {
    pub last_ns: u64,
    pub len_sumsq: f64,
    pub iat_sumsq: f64,
    /// Low 32 bits; the carries go to [`Wide::packets_hi`].
    pub packets: u32,
    /// Wire bytes (frame length, L2 header included), low 32 bits (carries in `Wide`).
    pub bytes: u32,
    /// IP total length bytes, low 32 bits (carries in `Wide`).
    pub ip_bytes: u32,
    /// Smallest gap, saturated: `u32::MAX` means the exact value is in [`WideGaps::iat_min`]
    /// (or that there was no gap yet).
    pub iat_min: u32,
    /// Largest gap, saturated: `u32::MAX` means the exact value is in [`WideGaps::iat_max`].
    pub iat_max: u32,
    /// One past the highest sequence number seen (valid when the flow's `state` has this
    /// side's [`state_bits::SEQ_LOW`] bit).
    pub next_seq: u32,
    /// Smallest frame, saturated: `u16::MAX` means the exact value is in [`Wide::len_min`]
    /// (frames of 65535 bytes or more, such as offloaded segments, are kept there).
    pub len_min: u16,
    /// Largest frame, saturated: `u16::MAX` means the exact value is in [`Wide::len_max`].
    pub len_max: u16,
    /// PSH segments, low 16 bits (carries in [`Wide::psh_hi`]).
    pub psh: u16,
    /// Union of the TCP flags seen.
    pub flags_or: u8,
    /// Rare TCP event counters, low 8 bits (see [`rare_index`]; carries in
    /// [`Wide::rare_hi`]).
    pub rare: [u8; rare_index::COUNT],
}

/// Index of a counter in [`DirStats::rare`]: TCP events most packets do not have, so they
/// count in a byte (carries in [`Wide::rare_hi`]). PSH, set on most data segments, is counted
/// in [`DirStats::psh`].
pub(crate) mod rare_index {
    pub const SYN: usize = 0;
    pub const SYN_ACK: usize = 1;
    pub const FIN: usize = 2;
    pub const RST: usize = 3;
    pub const URG: usize = 4;
    pub const ECE: usize = 5;
    pub const CWR: usize = 6;
    pub const ZERO_WINDOW: usize = 7;
    pub const RETRANS: usize = 8;
    /// Number of rare counters.
    pub const COUNT: usize = 9;
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
    /// The low side's [`DirStats::next_seq`](super::DirStats::next_seq) holds a value; the
    /// high side's bit is the next one.
    pub const SEQ_LOW: u8 = 1 << 6;
    /// Both sides' sequence bits.
    pub const SEQ_BOTH: u8 = 0b11 << 6;
}

/// The exact values behind a flow's narrow counters, for the rare flow that outgrows them:
/// 32-bit counter carries, frames of 65535 bytes or more, and byte-sized rare counters past
/// 255. A flow holds one only while it needs it (taken from [`Wides`] on the first overflow,
/// returned when its record is emitted), so the entry itself stays small. Gaps have a record
/// of their own, [`WideGaps`]: they outgrow 32 bits far more often.
#[derive(Clone, Debug)]
pub(crate) struct Wide {
    pub packets_hi: [u32; 2],
    pub bytes_hi: [u32; 2],
    pub ip_bytes_hi: [u32; 2],
    /// Carries of [`DirStats::rare`], in units of 256.
    pub rare_hi: [[u32; rare_index::COUNT]; 2],
    /// Carries of [`DirStats::psh`], in units of 65536.
    pub psh_hi: [u32; 2],
    /// Smallest frame of 65535 bytes or more (for a direction whose
    /// [`DirStats::len_min`] is saturated).
    pub len_min: [u32; 2],
    /// Largest frame of 65535 bytes or more.
    pub len_max: [u32; 2],
    /// Exact early frame lengths where [`EarlyPackets::len`] holds `u16::MAX`.
    pub early_len: [u32; EARLY_PACKETS],
}

impl Default for Wide {
    fn default() -> Self {
        Wide {
            packets_hi: [0; 2],
            bytes_hi: [0; 2],
            ip_bytes_hi: [0; 2],
            rare_hi: [[0; rare_index::COUNT]; 2],
            psh_hi: [0; 2],
            len_min: [u32::MAX; 2],
            len_max: [0; 2],
            early_len: [0; EARLY_PACKETS],
        }
    }
}

/// The exact values behind a flow's gaps of 2^32 ns (4.3 s) or more. Any flow quieter than that
/// for a moment needs one (a keep-alive, a poll, a chatty but slow protocol), so it is small:
/// 72 bytes, where the gaps' share of one [`Wide`] record was 112 and the whole record 272
/// (ten million flows with a long gap used 2.7 GiB of them).
#[derive(Clone, Debug)]
pub(crate) struct WideGaps {
    /// Exact smallest gap of a direction whose [`DirStats::iat_min`] is saturated.
    pub iat_min: [u64; 2],
    /// Exact largest gap of a direction whose [`DirStats::iat_max`] is saturated.
    pub iat_max: [u64; 2],
    /// High 32 bits of each early gap ([`EarlyPackets::iat`] holds the low 32).
    pub early_iat_hi: [u32; EARLY_PACKETS],
}

impl Default for WideGaps {
    fn default() -> Self {
        WideGaps {
            iat_min: [u64::MAX; 2],
            iat_max: [0; 2],
            early_iat_hi: [0; EARLY_PACKETS],
        }
    }
}

/// Items a [`Pool`] allocates at once.
pub(crate) const POOL_CHUNK: usize = 4096;

/// Records lent to flows and reused through a free list. It grows a chunk at a time while more
/// flows need one at once than ever before, never per packet in steady state, and never moves
/// what it holds: a doubling vector copied its whole contents on growth and held both copies
/// for the moment (5 GiB at the peak of ten million flows with long gaps).
pub(crate) struct Pool<T> {
    chunks: Vec<Box<[T]>>,
    /// Items ever handed out (in use or on the free list).
    len: usize,
    free: Vec<u32>,
}

impl<T> Default for Pool<T> {
    fn default() -> Self {
        Pool {
            chunks: Vec::new(),
            len: 0,
            free: Vec::new(),
        }
    }
}

impl<T: Clone + Default> Pool<T> {
    #[inline]
    pub(crate) fn get(&self, i: u32) -> Option<&T> {
        (i != NIL).then(|| &self.chunks[i as usize / POOL_CHUNK][i as usize % POOL_CHUNK])
    }

    /// The item at `*slot`, taking a fresh one into `*slot` if it holds none.
    #[cold]
    #[inline(never)]
    pub(crate) fn get_or_take(&mut self, slot: &mut u32) -> &mut T {
        if *slot == NIL {
            let i = match self.free.pop() {
                Some(i) => i as usize,
                None => {
                    if self.len == self.chunks.len() * POOL_CHUNK {
                        self.chunks
                            .push(vec![T::default(); POOL_CHUNK].into_boxed_slice());
                    }
                    self.len += 1;
                    self.len - 1
                }
            };
            // Items from the free list or a cleared pool hold an earlier flow's values.
            self.chunks[i / POOL_CHUNK][i % POOL_CHUNK] = T::default();
            *slot = i as u32;
        }
        let i = *slot as usize;
        &mut self.chunks[i / POOL_CHUNK][i % POOL_CHUNK]
    }

    /// Returns the item at `*slot` (if any) to the pool.
    #[inline]
    pub(crate) fn release(&mut self, slot: &mut u32) {
        if *slot != NIL {
            self.free.push(*slot);
            *slot = NIL;
        }
    }

    /// Forgets every item (the table was cleared); the chunks stay for reuse.
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.free.clear();
    }

    /// Items in use.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.len - self.free.len()
    }

    /// Memory the pool holds.
    pub(crate) fn bytes(&self) -> usize {
        self.chunks.len() * POOL_CHUNK * core::mem::size_of::<T>()
    }
}

/// The overflow records of a table's flows.
#[derive(Default)]
pub(crate) struct Wides {
    pub counts: Pool<Wide>,
    pub gaps: Pool<WideGaps>,
    /// The outer tunnel of each side's first packet in the record (`--tunnel inner`), for the
    /// flows that came through one: most do not, so it lives here, not in the entry.
    pub tunnels: Pool<[Tunnel; 2]>,
}

impl Wides {
    /// Returns a flow's records (if any) to the pools.
    #[inline]
    pub(crate) fn release(&mut self, e: &mut FlowEntry) {
        self.counts.release(&mut e.wide);
        self.gaps.release(&mut e.gaps);
        self.tunnels.release(&mut e.tunnel);
    }

    /// Forgets every record (the table was cleared).
    pub(crate) fn clear(&mut self) {
        self.counts.clear();
        self.gaps.clear();
        self.tunnels.clear();
    }

    /// Memory the pools hold.
    pub(crate) fn bytes(&self) -> usize {
        self.counts.bytes() + self.gaps.bytes() + self.tunnels.bytes()
    }

    /// Records in use, of both kinds.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.counts.in_use() + self.gaps.in_use() + self.tunnels.in_use()
    }
}

/// Length and gap of the first packets of a flow record, in narrow form: a length of
/// `u16::MAX` means the exact value is in the [`Wide`] record; a gap is the low 32 bits of
/// the exact one (the high bits, when any, are in the [`WideGaps`] record).
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct EarlyPackets {
    pub iat: [u32; EARLY_PACKETS],
    pub len: [u16; EARLY_PACKETS],
    /// Bit i set: early packet i was sent by the high side.
    pub high: u16,
    pub _pad: u16,
}

/// One flow in the table: five cache lines, laid out by access. Line 0 holds what every packet
/// reads besides its own direction's counters (key, last activity, state); lines 1 and 2 one
/// direction each; line 3 the early-packet features, written by the first ten packets only;
/// line 4 what only a direction's first packet, rare TCP events, expiry and export touch.
/// Per packet: two lines, plus line 3 for the first ten.
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub(crate) struct FlowEntry {
    pub key: FlowKey,
    /// Last packet of the flow's open record (either direction), for expiry.
    pub last_ns: u64,
    pub state: u8,
    /// Number of early packets recorded so far.
    pub early_count: u8,
    /// Bit `side` set: the current record has a packet from that side; bit
    /// [`SEEN_TIMING`]: the entry's [`TcpTiming`] holds the current record's (else it holds
    /// an earlier flow's and is cleared before use).
    pub seen: u8,
    /// In use (1) or free (0), set and cleared by the table.
    pub live: u8,
    /// Explicit padding to the line (no hidden padding in a plain-bytes entry).
    pub _pad0: [u8; 12],
    // Lines 1 and 2.
    /// Counters by sender side (index `Side as usize`).
    pub dirs: [DirStats; 2],
    // Line 3.
    pub early: EarlyPackets,
    // Line 4: a direction's first packet, rare events, expiry and export.
    /// First packet of each side in the current record.
    pub first_ns: [u64; 2],
    /// Timer-wheel links (entry indices, `NIL` when none).
    pub wheel_prev: u32,
    pub wheel_next: u32,
    /// The flow's [`Wide`] record in the table's pool, `NIL` when it needs none.
    pub wide: u32,
    /// The flow's [`WideGaps`] record, `NIL` when it needs none.
    pub gaps: u32,
    /// The flow's tunnels in [`Wides::tunnels`], `NIL` when it came through none.
    pub tunnel: u32,
    /// Payload bytes captured so far per side (into the meter's payload arena).
    pub payload_len: [u16; 2],
    /// MAC address of each side (as sender, or as receiver of the first packet).
    pub macs: [[u8; 6]; 2],
    /// Timer-wheel slot.
    pub wheel_slot: u16,
    /// Explicit padding to the line: the table keeps entries as plain bytes (no hidden
    /// padding allowed).
    pub _pad: [u8; 10],
}

/// Sentinel "no entry" index.
pub(crate) const NIL: u32 = u32::MAX;

/// Bit of [`FlowEntry::seen`]: the entry's timing record is the current record's.
pub(crate) const SEEN_TIMING: u8 = 1 << 2;
/// Bits of [`FlowEntry::seen`] naming the sides seen.
const SEEN_SIDES: u8 = 0b11;

/// A 64-bit value kept as a narrow low part plus a carry count.
#[inline]
pub(crate) fn join(hi: u32, lo: u32) -> u64 {
    (u64::from(hi) << 32) | u64::from(lo)
}

impl FlowEntry {
    pub(crate) fn empty() -> Self {
        FlowEntry {
            key: FlowKey::default(),
            last_ns: 0,
            state: 0,
            early_count: 0,
            seen: 0,
            live: 0,
            _pad0: [0; 12],
            dirs: [DirStats::default(); 2],
            early: EarlyPackets::default(),
            first_ns: [0; 2],
            wheel_prev: NIL,
            wheel_next: NIL,
            wide: NIL,
            gaps: NIL,
            payload_len: [0; 2],
            macs: [[0; 6]; 2],
            wheel_slot: 0,
            tunnel: NIL,
            _pad: [0; 10],
        }
    }

    /// Resets the entry for a new flow (keeps the wheel links, which the table manages).
    pub(crate) fn start(
        &mut self,
        key: FlowKey,
        d: &Decoded,
        sender: Side,
        ts: u64,
        wides: &mut Wides,
    ) {
        self.key = key;
        self.state = 0;
        self.reset_counters(wides);
        self.last_ns = ts;
        self.macs[sender as usize] = d.src_mac;
        self.macs[sender.flip() as usize] = d.dst_mac;
        orient_first(&mut self.state, d, sender);
    }

    /// Clears the counters for a new record (active timeout) or a new flow. The flow's last
    /// packet goes too: a flow's idle time counts from the latest packet of its open record
    /// (the packet that opens it comes next), so a late packet that opens a record is that
    /// record's last as well as the flow's, at every feature level.
    pub(crate) fn reset_counters(&mut self, wides: &mut Wides) {
        self.last_ns = 0;
        self.dirs = [DirStats::default(); 2];
        self.state &= !state_bits::SEQ_BOTH;
        wides.release(self);
        self.seen = 0;
        self.first_ns = [0; 2];
        self.early_count = 0;
        self.early.high = 0;
        self.payload_len = [0; 2];
    }

    /// The side that initiated the flow.
    #[inline]
    pub(crate) fn initiator(&self) -> Side {
        initiator(self.state)
    }
    /// Counts one packet, everything a `full` record keeps but the round-trip times.
    #[cfg(test)]
    pub(crate) fn update(
        &mut self,
        d: &Decoded,
        sender: Side,
        ts: u64,
        wire_len: u32,
        wides: &mut Wides,
    ) {
        self.update_at(d, sender, ts, wire_len, wides, FeatureLevel::Full, None);
    }

    /// Counts one packet, what a record of `level` keeps (a level's work is a subset of the
    /// next one's, so its values are the same as the larger level's). `timing` is the entry's
    /// round-trip record (`standard` and `full`).
    #[inline]
    #[allow(clippy::too_many_arguments)] // The hot path: a struct would be built per packet.
    pub(crate) fn update_at(
        &mut self,
        d: &Decoded,
        sender: Side,
        ts: u64,
        wire_len: u32,
        wides: &mut Wides,
        level: FeatureLevel,
        timing: Option<&mut TcpTiming>,
    ) {
        let side = sender as usize;
        if d.tcp_valid {
            learn_from_syn(&mut self.state, d, sender);
        }
        // Inter-arrival time within the flow, for the early-packet features.
        let prev_last = self.last_ns;
        self.last_ns = self.last_ns.max(ts);
        let dir = &mut self.dirs[side];
        if self.seen & (1 << side) == 0 {
            self.seen |= 1 << side;
            self.first_ns[side] = ts;
            dir.len_min = u16::MAX;
            // No gap yet: saturated, and the wide record (if any) holds the initial u64::MAX.
            dir.iat_min = u32::MAX;
            if d.tunnel.is_some() {
                wides.tunnels.get_or_take(&mut self.tunnel)[side] = d.tunnel;
            }
        } else {
            // Packets can arrive out of time order (pcapng with several interfaces, multi-queue
            // capture): first/last are the extremes, and a backwards step is a zero gap. A
            // packet at or after the direction's last cannot be before its first.
            if ts < dir.last_ns {
                self.first_ns[side] = self.first_ns[side].min(ts);
            }
            if level.has_standard() {
                self.count_gap(side, ts, level, wides);
            }
        }
        let dir = &mut self.dirs[side];
        let (packets, c_packets) = dir.packets.overflowing_add(1);
        let (bytes, c_bytes) = dir.bytes.overflowing_add(wire_len);
        let (ip_bytes, c_ip_bytes) = dir.ip_bytes.overflowing_add(d.ip_len);
        dir.packets = packets;
        dir.bytes = bytes;
        dir.ip_bytes = ip_bytes;
        if c_packets | c_bytes | c_ip_bytes {
            let w = wides.counts.get_or_take(&mut self.wide);
            w.packets_hi[side] += c_packets as u32;
            w.bytes_hi[side] += c_bytes as u32;
            w.ip_bytes_hi[side] += c_ip_bytes as u32;
        }
        dir.last_ns = dir.last_ns.max(ts);
        if level.has_standard() {
            self.count_len(side, wire_len, level, wides);
        }
        if d.tcp_valid {
            let f = d.tcp.flags;
            if level.has_standard() {
                self.count_tcp(d, side, ts, level, wides, timing);
            } else {
                self.dirs[side].flags_or |= f;
            }
            note_close(&mut self.state, f, sender);
        }
        if level.is_full() {
            self.count_early(sender, ts, prev_last, wire_len, wides);
        }
    }

    /// The gap before a direction's packet (not its first) into the direction's gap min/max
    /// (and, at `full`, the sum of squares).
    #[inline]
    fn count_gap(&mut self, side: usize, ts: u64, level: FeatureLevel, wides: &mut Wides) {
        let dir = &mut self.dirs[side];
        let iat = ts.saturating_sub(dir.last_ns);
        if iat < u64::from(dir.iat_min) {
            dir.iat_min = iat as u32;
        } else if dir.iat_min == u32::MAX {
            // Every gap so far was >= 2^32 ns: the minimum is kept exactly aside.
            let g = wides.gaps.get_or_take(&mut self.gaps);
            g.iat_min[side] = g.iat_min[side].min(iat);
        }
        if iat > u64::from(dir.iat_max) {
            if iat < u64::from(u32::MAX) {
                dir.iat_max = iat as u32;
            } else {
                dir.iat_max = u32::MAX;
                let g = wides.gaps.get_or_take(&mut self.gaps);
                g.iat_max[side] = g.iat_max[side].max(iat);
            }
        }
        if level.is_full() {
            dir.iat_sumsq += (iat as f64) * (iat as f64);
        }
    }

    /// A frame's length into its direction's min/max (and, at `full`, the sum of squares).
    #[inline]
    fn count_len(&mut self, side: usize, wire_len: u32, level: FeatureLevel, wides: &mut Wides) {
        let dir = &mut self.dirs[side];
        if count_narrow_len(&mut dir.len_min, &mut dir.len_max, wire_len) {
            let w = wides.counts.get_or_take(&mut self.wide);
            w.len_min[side] = w.len_min[side].min(wire_len);
            w.len_max[side] = w.len_max[side].max(wire_len);
        }
        if level.is_full() {
            dir.len_sumsq += (wire_len as f64) * (wire_len as f64);
        }
    }

    /// A TCP segment's flag counts, sequence tracking (retransmissions) and round-trip timing.
    #[inline]
    fn count_tcp(
        &mut self,
        d: &Decoded,
        side: usize,
        ts: u64,
        level: FeatureLevel,
        wides: &mut Wides,
        timing: Option<&mut TcpTiming>,
    ) {
        let seq_bit = state_bits::SEQ_LOW << side;
        let (rare, psh_carry) = update_tcp(&mut self.dirs[side], d, &mut self.state, seq_bit);
        if psh_carry && level.is_full() {
            let hi = &mut wides.counts.get_or_take(&mut self.wide).psh_hi[side];
            *hi = hi.wrapping_add(1);
        }
        if rare != 0 {
            self.count_rare(side, rare, wides);
        }
        if let Some(t) = timing {
            if self.seen & SEEN_TIMING == 0 {
                // Left by an earlier flow of this entry, or an earlier record of this one.
                *t = TcpTiming::default();
                self.seen |= SEEN_TIMING;
            }
            t.segment(d, side, ts, rare & (1 << rare_index::RETRANS) != 0);
        }
    }

    /// The entry's timing record, when it holds the current record's.
    #[inline]
    pub(crate) fn timing<'t>(&self, timing: Option<&'t TcpTiming>) -> Option<&'t TcpTiming> {
        timing.filter(|_| self.seen & SEEN_TIMING != 0)
    }

    /// The first packets' lengths and gaps (`full` only).
    #[inline]
    fn count_early(
        &mut self,
        sender: Side,
        ts: u64,
        prev_last: u64,
        wire_len: u32,
        wides: &mut Wides,
    ) {
        let n = self.early_count as usize;
        if n < EARLY_PACKETS {
            let iat = if n == 0 {
                0
            } else {
                ts.saturating_sub(prev_last)
            };
            if wire_len < u32::from(u16::MAX) {
                self.early.len[n] = wire_len as u16;
            } else {
                self.early.len[n] = u16::MAX;
                wides.counts.get_or_take(&mut self.wide).early_len[n] = wire_len;
            }
            // Low 32 bits here, the rest (rarely any) in the gaps record.
            self.early.iat[n] = iat as u32;
            if iat > u64::from(u32::MAX) {
                wides.gaps.get_or_take(&mut self.gaps).early_iat_hi[n] = (iat >> 32) as u32;
            }
            if sender == Side::High {
                self.early.high |= 1 << n;
            }
            self.early_count += 1;
        }
    }

    /// Adds one to each rare counter of `side` whose bit is set in `mask`.
    #[inline]
    fn count_rare(&mut self, side: usize, mut mask: u16, wides: &mut Wides) {
        while mask != 0 {
            let i = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            let (v, carry) = self.dirs[side].rare[i].overflowing_add(1);
            self.dirs[side].rare[i] = v;
            if carry {
                let hi = &mut wides.counts.get_or_take(&mut self.wide).rare_hi[side][i];
                *hi = hi.wrapping_add(1);
            }
        }
    }

    /// Whether the current record has no packet yet.
    #[inline]
    pub(crate) fn is_empty_record(&self) -> bool {
        self.seen == 0
    }

    /// The tunnel of the record: the outer header of the initiator's first packet in it, else
    /// of the responder's (none when neither came through a tunnel).
    pub(crate) fn tunnel(&self, wides: &Wides) -> Tunnel {
        wides
            .tunnels
            .get(self.tunnel)
            .map_or_else(Tunnel::default, |sides| {
                record_tunnel(sides, self.initiator())
            })
    }

    /// Timestamp of the flow's first packet in the current record.
    pub(crate) fn first_ns(&self) -> u64 {
        match self.seen & SEEN_SIDES {
            0b01 => self.first_ns[0],
            0b10 => self.first_ns[1],
            0b11 => self.first_ns[0].min(self.first_ns[1]),
            // An empty record (only exported when a flow is flushed before its first update).
            _ => self.first_ns[1],
        }
    }

    /// Timestamp of the last packet in the current record.
    pub(crate) fn record_last_ns(&self) -> u64 {
        self.dirs[0].last_ns.max(self.dirs[1].last_ns)
    }

    /// The exact counters of `side` (narrow fields joined with the wide record).
    pub(crate) fn exact(&self, side: usize, wides: &Wides) -> ExactDir {
        let d = &self.dirs[side];
        let w = wides.counts.get(self.wide);
        let g = wides.gaps.get(self.gaps);
        let mut rare = [0u32; rare_index::COUNT];
        for (i, r) in rare.iter_mut().enumerate() {
            // Wrapping, as the record's 32-bit counts always have.
            *r = u32::from(d.rare[i])
                .wrapping_add(w.map_or(0, |w| w.rare_hi[side][i].wrapping_shl(8)));
        }
        ExactDir {
            packets: join(w.map_or(0, |w| w.packets_hi[side]), d.packets),
            bytes: join(w.map_or(0, |w| w.bytes_hi[side]), d.bytes),
            ip_bytes: join(w.map_or(0, |w| w.ip_bytes_hi[side]), d.ip_bytes),
            psh: u32::from(d.psh).wrapping_add(w.map_or(0, |w| w.psh_hi[side].wrapping_shl(16))),
            len_min: exact_len(d.len_min, w.map(|w| w.len_min[side])),
            len_max: exact_len(d.len_max, w.map(|w| w.len_max[side])),
            iat_min: if d.iat_min != u32::MAX {
                u64::from(d.iat_min)
            } else {
                g.map_or(u64::MAX, |g| g.iat_min[side])
            },
            iat_max: if d.iat_max != u32::MAX {
                u64::from(d.iat_max)
            } else {
                g.map_or(0, |g| g.iat_max[side])
            },
            first_ns: self.first_ns[side],
            rare,
        }
    }

    /// Early packet `i`'s frame length and gap, exact.
    pub(crate) fn early_packet(&self, i: usize, wides: &Wides) -> (u32, u64) {
        let w = wides.counts.get(self.wide);
        let len = exact_len(self.early.len[i], w.map(|w| w.early_len[i]));
        let hi = wides.gaps.get(self.gaps).map_or(0, |g| g.early_iat_hi[i]);
        (len, join(hi, self.early.iat[i]))
    }
}

/// The tunnel of a record whose sides' first packets came through `sides`: the initiator's,
/// else the responder's.
pub(crate) fn record_tunnel(sides: &[Tunnel; 2], init: Side) -> Tunnel {
    let init = init as usize;
    if sides[init].is_some() {
        sides[init]
    } else {
        sides[1 - init]
    }
}

/// The side that initiated a flow, from its state byte.
#[inline]
pub(crate) fn initiator(state: u8) -> Side {
    if state & state_bits::INIT_HIGH != 0 {
        Side::High
    } else {
        Side::Low
    }
}

fn set_initiator(state: &mut u8, side: Side) {
    match side {
        Side::High => *state |= state_bits::INIT_HIGH,
        Side::Low => *state &= !state_bits::INIT_HIGH,
    }
}

/// Decides the initiator from a flow's first packet: its SYN or SYN-ACK, else goProbe's port
/// heuristic, else the sender.
pub(crate) fn orient_first(state: &mut u8, d: &Decoded, sender: Side) {
    if learn_from_syn(state, d, sender) {
        return;
    }
    let receiver_is_initiator = match d.proto {
        // ICMP: an answer type means the sender answered a request we did not see.
        1 => matches!(d.src_port, 0 | 14 | 16 | 18 | 9),
        58 => matches!(d.src_port, 129 | 134 | 136 | 131),
        _ => !is_group_address(d.ip_version, &d.dst_ip) && d.src_port < 1024 && d.dst_port > 20000,
    };
    set_initiator(
        state,
        if receiver_is_initiator {
            sender.flip()
        } else {
            sender
        },
    );
}

/// If `d` is a SYN or SYN-ACK and no earlier one fixed the orientation, fixes it now.
#[inline]
pub(crate) fn learn_from_syn(state: &mut u8, d: &Decoded, sender: Side) -> bool {
    if !d.tcp_valid || *state & state_bits::SYN_SEEN != 0 {
        return false;
    }
    let f = d.tcp.flags;
    if f & tcp_flags::SYN == 0 {
        return false;
    }
    *state |= state_bits::SYN_SEEN;
    let ack = f & tcp_flags::ACK != 0;
    set_initiator(state, if ack { sender.flip() } else { sender });
    true
}

/// A TCP segment's RST or FIN into the state: a RST, or a FIN from both sides, closes.
#[inline]
pub(crate) fn note_close(state: &mut u8, flags: u8, sender: Side) {
    if flags & tcp_flags::RST != 0 {
        *state |= state_bits::RST | state_bits::CLOSING;
    }
    if flags & tcp_flags::FIN != 0 {
        *state |= match sender {
            Side::Low => state_bits::FIN_LOW,
            Side::High => state_bits::FIN_HIGH,
        };
        const BOTH: u8 = state_bits::FIN_LOW | state_bits::FIN_HIGH;
        if *state & BOTH == BOTH {
            *state |= state_bits::CLOSING;
        }
    }
}

/// Why a closing flow ends: its RST, else the FINs.
pub(crate) fn closing_reason(state: u8) -> crate::record::EndReason {
    if state & state_bits::RST != 0 {
        crate::record::EndReason::Rst
    } else {
        crate::record::EndReason::Fin
    }
}

/// A frame length kept in 16 bits: `u16::MAX` means the exact value is the wide record's
/// (`wide`, present whenever such a frame was counted).
#[inline]
pub(crate) fn exact_len(narrow: u16, wide: Option<u32>) -> u32 {
    match narrow {
        u16::MAX => wide.unwrap_or(u32::from(u16::MAX)),
        l => u32::from(l),
    }
}

/// A frame's length into a direction's 16-bit min/max, saturated at `u16::MAX`; `true` when
/// the frame is that long or longer, so the exact values must be kept aside (see
/// [`exact_len`]).
#[inline]
pub(crate) fn count_narrow_len(min: &mut u16, max: &mut u16, wire_len: u32) -> bool {
    let narrow = wire_len.min(u32::from(u16::MAX)) as u16;
    *min = (*min).min(narrow);
    *max = (*max).max(narrow);
    narrow == u16::MAX
}

/// A direction's counters that are kept narrow in the entry, made whole again for its record.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ExactDir {
    pub packets: u64,
    pub bytes: u64,
    pub ip_bytes: u64,
    /// PSH segments (a `u32` in the record, as the other flag counts).
    pub psh: u32,
    /// Smallest and largest frame (meaningless without packets).
    pub len_min: u32,
    pub len_max: u32,
    pub iat_min: u64,
    pub iat_max: u64,
    pub first_ns: u64,
    /// By [`rare_index`].
    pub rare: [u32; rare_index::COUNT],
}

/// Counts a TCP segment in its direction's line; returns the rare counters to add one to (bit
/// per [`rare_index`]) and whether the PSH count carried past 16 bits. `seq_bit` is this
/// side's bit of `state` that says `next_seq` holds a value.
#[inline]
fn update_tcp(dir: &mut DirStats, d: &Decoded, state: &mut u8, seq_bit: u8) -> (u16, bool) {
    let f = d.tcp.flags;
    // PSH count and flag union are neighbours, read before either is written: the compiler
    // loads them as one word, which a byte store just before could not forward to (it
    // waited for the store to retire: the hottest instruction of the update).
    let (psh, psh_carry) = dir.psh.overflowing_add((f & tcp_flags::PSH != 0) as u16);
    dir.psh = psh;
    dir.flags_or |= f;
    (tcp_events(d, state, seq_bit, &mut dir.next_seq), psh_carry)
}

/// A TCP segment's rare events (bit per [`rare_index`]: SYN, SYN-ACK, FIN, RST, URG, ECE,
/// CWR, zero window, retransmission), tracking its side's `next_seq` (one past the highest
/// sequence number sent) for the retransmission test. `seq_bit` is this side's bit of `state`
/// that says `next_seq` holds a value. Every entry layout counts with it.
#[inline]
pub(crate) fn tcp_events(d: &Decoded, state: &mut u8, seq_bit: u8, next_seq: &mut u32) -> u16 {
    let f = d.tcp.flags;
    let syn = f & tcp_flags::SYN != 0;
    let ack = f & tcp_flags::ACK != 0;
    let mut rare = 0u16;
    let mut bump = |i: usize, cond: bool| rare |= (cond as u16) << i;
    bump(rare_index::SYN, syn && !ack);
    bump(rare_index::SYN_ACK, syn && ack);
    bump(rare_index::FIN, f & tcp_flags::FIN != 0);
    bump(rare_index::RST, f & tcp_flags::RST != 0);
    bump(rare_index::URG, f & tcp_flags::URG != 0);
    bump(rare_index::ECE, f & tcp_flags::ECE != 0);
    bump(rare_index::CWR, f & tcp_flags::CWR != 0);
    bump(
        rare_index::ZERO_WINDOW,
        d.tcp.window == 0 && f & tcp_flags::RST == 0,
    );
    let len = seq_len(d);
    if len == 0 {
        return rare;
    }
    let end = d.tcp.seq.wrapping_add(len);
    if *state & seq_bit == 0 {
        *state |= seq_bit;
        *next_seq = end;
    } else if seq_before(d.tcp.seq, *next_seq) {
        // Starts inside sequence space this side already sent: a retransmission — unless it
        // is a keep-alive, one byte (or none) at one before the next sequence number, which
        // re-sends nothing (Wireshark's rule).
        let keep_alive = d.payload_len <= 1
            && d.tcp.seq == next_seq.wrapping_sub(1)
            && f & (tcp_flags::SYN | tcp_flags::FIN | tcp_flags::RST) == 0;
        if !keep_alive {
            rare |= 1 << rare_index::RETRANS;
        }
        if seq_before(*next_seq, end) {
            *next_seq = end;
        }
    } else {
        *next_seq = end;
    }
    rare
}

/// The sequence space a TCP segment consumes: its payload, plus one each for SYN and FIN.
#[inline]
pub(crate) fn seq_len(d: &Decoded) -> u32 {
    let f = d.tcp.flags;
    d.payload_len
        .wrapping_add((f & tcp_flags::SYN != 0) as u32)
        .wrapping_add((f & tcp_flags::FIN != 0) as u32)
}

/// RFC 1982 serial-number comparison: `a` comes before `b` in 32-bit sequence space.
#[inline]
pub(crate) fn seq_before(a: u32, b: u32) -> bool {
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
    use crate::entry::MeterEntry;

    #[test]
    fn layout_is_five_lines_with_each_direction_on_its_own() {
        assert_eq!(core::mem::size_of::<DirStats>(), 64);
        assert_eq!(core::mem::size_of::<FlowEntry>(), 5 * 64);
        // The overflow records' sizes as docs/adr/0002-flow-table.md gives them.
        assert_eq!(core::mem::size_of::<WideGaps>(), 72);
        assert_eq!(core::mem::size_of::<Wide>(), 160);
        let e = FlowEntry::empty();
        let base = &e as *const FlowEntry as usize;
        let off = |p: *const u8| p as usize - base;
        assert!(off(&e.live as *const u8) < 64, "hot header fits one line");
        assert_eq!(off(&e.dirs[0] as *const DirStats as *const u8), 64);
        assert_eq!(off(&e.dirs[1] as *const DirStats as *const u8), 128);
        let early = off(&e.early as *const EarlyPackets as *const u8);
        assert_eq!(early, 192);
        assert!(early + core::mem::size_of::<EarlyPackets>() <= 256);
        assert!(off(&e.first_ns as *const u64 as *const u8) >= 256);
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
        let mut w = Wides::default();
        let mut e = FlowEntry::empty();
        let syn = tcp(tcp_flags::SYN, 100, 0);
        e.start(FlowKey::default(), &syn, Side::Low, 0, &mut w);
        e.update(&syn, Side::Low, 0, 60, &mut w);
        e.update(&tcp(tcp_flags::ACK, 101, 10), Side::Low, 1, 70, &mut w);
        e.update(&tcp(tcp_flags::ACK, 111, 10), Side::Low, 2, 70, &mut w);
        e.update(&tcp(tcp_flags::ACK, 101, 10), Side::Low, 3, 70, &mut w);
        // A pure ACK at the old sequence number is not a retransmission.
        e.update(&tcp(tcp_flags::ACK, 101, 0), Side::Low, 4, 60, &mut w);
        // Nor is a keep-alive: one byte at next sequence number - 1.
        e.update(&tcp(tcp_flags::ACK, 120, 1), Side::Low, 5, 61, &mut w);
        let x = e.exact(0, &w);
        assert_eq!(x.rare[rare_index::RETRANS], 1);
        assert_eq!(x.packets, 6);
        assert_eq!(x.rare[rare_index::SYN], 1);
        assert_eq!(e.initiator(), Side::Low);
        let d = &e.dirs[0];
        assert_eq!((d.len_min, d.len_max), (60, 70));
        assert_eq!((x.iat_min, x.iat_max), (1, 1));
        assert_eq!(d.next_seq, 121);
        assert_eq!(w.in_use(), 0, "nothing outgrew the narrow fields");
    }

    #[test]
    fn syn_ack_first_makes_the_receiver_initiator() {
        let mut w = Wides::default();
        let mut e = FlowEntry::empty();
        let sa = tcp(tcp_flags::SYN | tcp_flags::ACK, 5, 0);
        e.start(FlowKey::default(), &sa, Side::Low, 0, &mut w);
        assert_eq!(e.initiator(), Side::High);
    }

    #[test]
    fn later_syn_reorients_a_heuristic_flow() {
        let mut w = Wides::default();
        let mut e = FlowEntry::empty();
        let ack = tcp(tcp_flags::ACK, 5, 10);
        e.start(FlowKey::default(), &ack, Side::Low, 0, &mut w);
        assert_eq!(e.initiator(), Side::Low);
        e.update(&tcp(tcp_flags::SYN, 1, 0), Side::High, 1, 60, &mut w);
        assert_eq!(e.initiator(), Side::High);
        // A second SYN from the other side does not flip it back.
        e.update(&tcp(tcp_flags::SYN, 1, 0), Side::Low, 2, 60, &mut w);
        assert_eq!(e.initiator(), Side::High);
    }

    #[test]
    fn fin_both_ways_or_rst_closes() {
        let mut w = Wides::default();
        let mut e = FlowEntry::empty();
        let a = tcp(tcp_flags::ACK | tcp_flags::FIN, 5, 0);
        e.start(FlowKey::default(), &a, Side::Low, 0, &mut w);
        e.update(&a, Side::Low, 0, 60, &mut w);
        assert!(!e.is_closing());
        e.update(&a, Side::High, 1, 60, &mut w);
        assert!(e.is_closing());
        let mut r = FlowEntry::empty();
        let rst = tcp(tcp_flags::RST, 5, 0);
        r.start(FlowKey::default(), &rst, Side::Low, 0, &mut w);
        r.update(&rst, Side::Low, 0, 60, &mut w);
        assert!(r.is_closing());
    }

    #[test]
    fn early_packets_are_signed_by_side() {
        let mut w = Wides::default();
        let mut e = FlowEntry::empty();
        let p = tcp(tcp_flags::ACK, 0, 0);
        e.start(FlowKey::default(), &p, Side::Low, 10, &mut w);
        for i in 0..12u64 {
            let side = if i % 2 == 0 { Side::Low } else { Side::High };
            e.update(&p, side, 10 + i * 5, 60 + i as u32, &mut w);
        }
        assert_eq!(e.early_count as usize, EARLY_PACKETS);
        assert_eq!(e.early.high, 0b10_1010_1010);
        assert_eq!(e.early_packet(0, &w), (60, 0));
        assert_eq!(e.early_packet(1, &w), (61, 5));
        assert_eq!(e.early_packet(9, &w), (69, 5));
    }

    /// A naive 64-bit reference of one direction's counters.
    #[derive(Default)]
    struct Reference {
        packets: u64,
        bytes: u64,
        first: u64,
        last: u64,
        iat_min: u64,
        iat_max: u64,
        len_min: u32,
        len_max: u32,
        syn: u32,
    }

    impl Reference {
        fn packet(&mut self, ts: u64, len: u32) {
            if self.packets == 0 {
                self.first = ts;
                self.iat_min = u64::MAX;
                self.len_min = u32::MAX;
            } else {
                let iat = ts.saturating_sub(self.last);
                self.iat_min = self.iat_min.min(iat);
                self.iat_max = self.iat_max.max(iat);
            }
            self.first = self.first.min(ts);
            self.last = self.last.max(ts);
            self.packets += 1;
            self.bytes += u64::from(len);
            self.len_min = self.len_min.min(len);
            self.len_max = self.len_max.max(len);
        }
    }

    #[test]
    fn values_past_the_narrow_fields_stay_exact() {
        const G: u64 = 1 << 32;
        let mut w = Wides::default();
        let mut e = FlowEntry::empty();
        let syn = tcp(tcp_flags::SYN, 1, 0);
        e.start(FlowKey::default(), &syn, Side::Low, 0, &mut w);
        let mut low = Reference::default();
        let mut high = Reference::default();
        // Low side: gaps of 2^32 ns and more only, so its minimum gap lives in the wide
        // record; frames of 65535 bytes and more among the early packets; 300 SYNs, past the
        // byte-sized counter.
        let mut early = Vec::new();
        let mut last = 0u64;
        let times_lens = [
            (0, 70_000),
            (G + 7, 65_535),
            (3 * G, 60),
            (5 * G + 9, 1500),
            (7 * G, 80),
        ];
        for (i, &(ts, len)) in times_lens.iter().enumerate() {
            e.update(&syn, Side::Low, ts, len, &mut w);
            low.packet(ts, len);
            low.syn += 1;
            early.push((len, if i == 0 { 0 } else { ts.saturating_sub(last) }));
            last = last.max(ts);
        }
        // High side: small gaps, one huge one for its maximum, then one packet out of time
        // order (a zero gap, and earlier than the side's first).
        for ts in [5 * G + 10, 5 * G + 11, 9 * G, 5 * G] {
            let ack = tcp(tcp_flags::ACK, 1, 0);
            e.update(&ack, Side::High, ts, 64, &mut w);
            high.packet(ts, 64);
            early.push((64, ts.saturating_sub(last)));
            last = last.max(ts);
        }
        for k in 5..300 {
            e.update(&syn, Side::Low, k * 2 * G, 60, &mut w);
            low.packet(k * 2 * G, 60);
            low.syn += 1;
        }
        for (side, r) in [(0, &low), (1, &high)] {
            let x = e.exact(side, &w);
            assert_eq!(x.packets, r.packets, "side {side}");
            assert_eq!(x.bytes, r.bytes, "side {side}");
            assert_eq!(x.first_ns, r.first, "side {side}");
            assert_eq!(e.dirs[side].last_ns, r.last, "side {side}");
            assert_eq!(
                (x.iat_min, x.iat_max),
                (r.iat_min, r.iat_max),
                "side {side}"
            );
            assert_eq!(x.rare[rare_index::SYN], r.syn, "side {side}");
            assert_eq!(
                (x.len_min, x.len_max),
                (r.len_min, r.len_max),
                "side {side}"
            );
        }
        for (i, &want) in early.iter().take(EARLY_PACKETS).enumerate() {
            assert_eq!(e.early_packet(i, &w), want, "early packet {i}");
        }
        assert_eq!(
            e.dirs[0].iat_min,
            u32::MAX,
            "the low side's minimum is in the wide record"
        );
        assert_eq!((w.counts.in_use(), w.gaps.in_use()), (1, 1));
        // A new record gives the wide records back.
        e.reset_counters(&mut w);
        assert_eq!(w.in_use(), 0);
        assert!(e.is_empty_record());
    }

    #[test]
    fn long_gaps_take_only_the_small_gaps_record_and_stay_exact() {
        const G: u64 = 1 << 32;
        let mut w = Wides::default();
        let mut e = FlowEntry::empty();
        let ack = tcp(tcp_flags::ACK, 1, 0);
        e.start(FlowKey::default(), &ack, Side::Low, 0, &mut w);
        // Gaps just under, at and over 2^32 ns, and one of 17 minutes.
        let times = [0, G - 1, 2 * G - 1, 3 * G, 3 * G + 1_000_000_000_000];
        for &ts in &times {
            e.update(&ack, Side::Low, ts, 60, &mut w);
        }
        assert_eq!((w.counts.in_use(), w.gaps.in_use()), (0, 1));
        for i in 0..times.len() {
            let gap = if i == 0 { 0 } else { times[i] - times[i - 1] };
            assert_eq!(e.early_packet(i, &w), (60, gap), "early packet {i}");
        }
        let x = e.exact(0, &w);
        assert_eq!((x.iat_min, x.iat_max), (G - 1, 1_000_000_000_000));
        // The record goes back to the pool; the next flow in it starts clean.
        e.reset_counters(&mut w);
        let later = times[times.len() - 1] + G;
        e.update(&ack, Side::Low, later, 60, &mut w);
        e.update(&ack, Side::Low, later + 2 * G, 60, &mut w);
        assert_eq!(e.early_packet(1, &w), (60, 2 * G));
        assert_eq!(e.exact(0, &w).iat_min, 2 * G);
        assert_eq!(w.gaps.in_use(), 1);
    }

    #[test]
    fn byte_and_psh_counts_carry_past_their_narrow_width() {
        let mut w = Wides::default();
        let mut e = FlowEntry::empty();
        let push = tcp(tcp_flags::ACK | tcp_flags::PSH, 1, 0);
        e.start(FlowKey::default(), &push, Side::High, 0, &mut w);
        let mut want = 0u64;
        // 70,000 frames of 65,536 to 65,545 bytes: 4.6 GB, past 2^32 once; as many PSH
        // segments, past 2^16 once; every frame too long for the narrow length fields.
        for i in 0..70_000u64 {
            let len = 65_536 + (i % 10) as u32;
            e.update(&push, Side::High, i, len, &mut w);
            want += u64::from(len);
        }
        let x = e.exact(1, &w);
        assert_eq!(x.bytes, want);
        assert_eq!(x.packets, 70_000);
        assert_eq!(x.psh, 70_000);
        assert_eq!((x.len_min, x.len_max), (65_536, 65_545));
        assert_eq!(e.exact(0, &w).packets, 0);
    }
}
