//! The `standard` level's flow entry: `minimal`'s fields and, per direction, frame length and
//! gap min/max/mean, SYN/SYN-ACK/FIN/RST counts, zero windows, retransmissions and the
//! handshake's round-trip half, in two 64-byte cache lines. Line 0 holds what `minimal` keeps
//! (key, times, packets and bytes); line 1 the statistics.
//!
//! What does not fit goes to the flow's [`StandardExtra`], as in `minimal`: an IPv6 (or other)
//! key, counters past their narrow width, the tunnels, sides whose first packets are 2^40 ns
//! (18 minutes) or more apart, gaps of 2^36 ns (68.7 s) or more, and the round-trip timing
//! of a handshake the line cannot follow (see [`Handshake`]). Few flows need one.
use crate::config::FeatureLevel;
use crate::decode::{tcp_flags, Decoded};
use crate::entry::{EntryStore, MeterEntry, TableEntry};
use crate::key::{FlowKey, Side};
use crate::mini::{
    add_link16, head_link, line_entry_methods, line_table_methods, LineKey, HAS_EXTRA, SEEN_SIDES,
};
use crate::record::{DirectionRecord, EndReason, FlowRecord};
use crate::state::{self, rare_index, seq_before, state_bits, DirStats, ExactDir, Pool, NIL};
use crate::timing::{DirTiming, RttSummary, TcpTiming};
use crate::tunnel::Tunnel;

/// Bit of [`StandardEntry::seen`]: `first_ns` is the high side's first packet (the lag is the
/// low side's).
const FIRST_HIGH: u8 = 1 << 3;
/// Bit of [`StandardEntry::seen`]: the sides' first packets are in the extra (their lag did not
/// fit 40 bits).
const FIRSTS_IN_EXTRA: u8 = 1 << 4;

/// Counters of [`StandardEntry::events`], four bits each (carries in the extra, in units of 16).
const NIBBLES: [usize; 4] = [
    rare_index::SYN,
    rare_index::SYN_ACK,
    rare_index::FIN,
    rare_index::RST,
];
/// Where each counter the level keeps has its carries in [`StandardExtra::events_hi`]: the four
/// nibbles, then zero windows and retransmissions (bytes, carries in units of 256).
const ZERO_WINDOW_HI: usize = 4;
const RETRANS_HI: usize = 5;

/// One direction's handshake timing as the line keeps it, two bits of
/// [`StandardEntry::timing`] (bits `2 * side`), with [`StandardEntry::timing_slot`]:
///
/// The `full` level times every segment ([`TcpTiming`]); `standard` reports only the
/// handshake's halves, and a direction's timing decides its half only until the half is
/// measured (a measured half changes again only when its side sends its SYN again, which
/// restarts the timing whatever it was). So the line keeps one of four states per direction,
/// with one 35-bit slot: nothing timed; a SYN timed (the slot: when it was sent, ns before the
/// side's latest packet; its end is the side's `next_seq` as long as that does not move); a
/// later segment timed (the slot: its end sequence number); the half measured (the slot: the
/// half, ns). Anything else (a timed SYN whose side sends more sequence space, or other
/// packets 2^35 ns or more after it, a half of 2^35 ns or more) moves both directions' timing
/// into the extra as [`TcpTiming`], which then runs the `full` level's rules for the rest of
/// the record: the halves are always `full`'s.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Handshake {
    Idle = 0,
    SynTimed = 1,
    SegmentTimed = 2,
    Measured = 3,
}

impl Handshake {
    fn from_bits(b: u8) -> Self {
        match b & 0b11 {
            0 => Handshake::Idle,
            1 => Handshake::SynTimed,
            2 => Handshake::SegmentTimed,
            _ => Handshake::Measured,
        }
    }
}

/// Bit of [`StandardEntry::timing`]: the timing is the extra's [`TcpTiming`].
const TIMING_IN_EXTRA: u8 = 1 << 4;

/// One flow at `standard`, two cache lines; fields a packet from either side updates first.
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub(crate) struct StandardEntry {
    // Line 0: what `minimal` keeps.
    /// First packet of the current record (the earlier side's first).
    first_ns: u64,
    /// Last packet of each side in the current record.
    last_ns: [u64; 2],
    /// Packets by sender side (low 32 bits; the rest in the extra).
    packets: [u32; 2],
    /// IP bytes by sender side (low 32 bits; the rest in the extra).
    ip_bytes: [u32; 2],
    /// The key ([`LineKey`]).
    key: LineKey,
    /// Frame bytes less IP bytes by sender side while both sums fit 16 bits and the flow has
    /// no extra; else (bit [`HAS_EXTRA`] of `seen`) the extra's index, which holds them.
    link: u32,
    /// The later side's first packet, ns after `first_ns`: low 32 of 40 bits (both sides seen,
    /// and not [`FIRSTS_IN_EXTRA`]; the high 8 in `first_lag_hi`).
    first_lag: u32,
    // Line 1: the statistics.
    /// Timer-wheel links; `wheel_prev` encodes a list head's slot ([`head_link`]).
    wheel_prev: u32,
    wheel_next: u32,
    /// One past the highest sequence number sent, by side (valid with the side's
    /// `state_bits::SEQ_LOW` bit).
    next_seq: [u32; 2],
    /// Smallest and largest gap by side: low 32 of 36 bits (the high 4 in `iat_hi`),
    /// saturated at [`GAP_MAX`] (exact values in the extra). 36 bits hold 68.7 s, more than
    /// the default idle timeout: a flow's gaps stay in its line.
    iat_min: [u32; 2],
    iat_max: [u32; 2],
    /// [`Handshake`] slots by side: low 32 of 35 bits (the high 3 are bits 5..8 of `timing`
    /// for the low side, of `seen` for the high side).
    timing_slot: [u32; 2],
    /// Smallest and largest frame by side, saturated at `u16::MAX` (exact values in the extra).
    len_min: [u16; 2],
    len_max: [u16; 2],
    /// SYN, SYN-ACK, FIN, RST counts by side, four bits each ([`NIBBLES`] order).
    events: [u16; 2],
    /// Zero-window segments by side (low 8 bits).
    zero_window: [u8; 2],
    /// Retransmissions by side (low 8 bits).
    retrans: [u8; 2],
    /// Union of the TCP flags by sender side.
    flags_or: [u8; 2],
    /// `state_bits`: initiator, SYN seen, FINs, RST, closing, sequence validity.
    state: u8,
    /// Sides seen in the current record, [`HAS_EXTRA`], [`FIRST_HIGH`], [`FIRSTS_IN_EXTRA`],
    /// and (bits 5..8) the high side's [`Handshake`] slot's top bits.
    seen: u8,
    /// [`Handshake`] state of each side (two bits at `2 * side`), [`TIMING_IN_EXTRA`], and
    /// (bits 5..8) the low side's slot's top bits.
    timing: u8,
    /// Bits 32..36 of the gaps by side: the smallest's in the high nibble, the largest's in
    /// the low one.
    iat_hi: [u8; 2],
    /// Bits 32..40 of `first_lag`.
    first_lag_hi: u8,
}

/// A side's values before a packet: what the line's handshake states were made against.
#[derive(Clone, Copy)]
struct SideBefore {
    next_seq: u32,
    last_ns: u64,
}

/// The largest [`Handshake`] slot: 35 bits, 34.4 s.
const SLOT_MAX: u64 = (1 << 35) - 1;
/// Where the top 3 bits of a slot sit in their byte (`timing` or `seen`).
const SLOT_HI_SHIFT: u32 = 5;

/// A gap at or past this (2^36 - 1 ns) is kept in the extra.
const GAP_MAX: u64 = (1 << 36) - 1;
/// The largest lag between the sides' first packets the line holds.
const LAG_MAX: u64 = (1 << 40) - 1;

/// What a standard flow keeps outside its lines, when it needs to.
#[derive(Clone, Copy)]
pub(crate) struct StandardExtra {
    /// The key, when it has no compact form (not IPv4).
    key: FlowKey,
    /// High 32 bits of the packet and IP byte counts, by side.
    packets_hi: [u32; 2],
    ip_bytes_hi: [u32; 2],
    /// Frame bytes less IP bytes, by side.
    link: [i64; 2],
    /// The outer tunnel of each side's first packet in the record.
    tunnels: [Tunnel; 2],
    /// Each side's first packet (with [`FIRSTS_IN_EXTRA`]).
    firsts: [u64; 2],
    /// Exact smallest and largest frame of 65535 bytes or more, by side.
    len_min: [u32; 2],
    len_max: [u32; 2],
    /// Exact smallest and largest gap of [`GAP_MAX`] or more, by side.
    iat_min: [u64; 2],
    iat_max: [u64; 2],
    /// Carries of the narrow event counters (see [`ZERO_WINDOW_HI`]), by side.
    events_hi: [[u32; 6]; 2],
    /// The flow's [`TcpTiming`] in [`StandardStore::timings`] (with [`TIMING_IN_EXTRA`]).
    timing: u32,
}

impl Default for StandardExtra {
    fn default() -> Self {
        StandardExtra {
            key: FlowKey::default(),
            packets_hi: [0; 2],
            ip_bytes_hi: [0; 2],
            link: [0; 2],
            tunnels: [Tunnel::default(); 2],
            firsts: [0; 2],
            len_min: [u32::MAX; 2],
            len_max: [0; 2],
            iat_min: [u64::MAX; 2],
            iat_max: [0; 2],
            events_hi: [[0; 6]; 2],
            timing: NIL,
        }
    }
}

/// The extras of a standard table's flows, and the timings of the few handshakes the lines
/// cannot follow.
#[derive(Default)]
pub(crate) struct StandardStore {
    extras: Pool<StandardExtra>,
    timings: Pool<TcpTiming>,
}

impl EntryStore for StandardStore {
    fn clear(&mut self) {
        self.extras.clear();
        self.timings.clear();
    }
    fn bytes(&self) -> usize {
        self.extras.bytes() + self.timings.bytes()
    }
}

impl StandardEntry {
    line_entry_methods!(StandardExtra, StandardStore);

    /// Each side's first packet in the record (0 for a side not seen).
    fn firsts(&self, store: &StandardStore) -> [u64; 2] {
        if self.seen & FIRSTS_IN_EXTRA != 0 {
            return self.extra(store).map_or([0; 2], |x| x.firsts);
        }
        let early = usize::from(self.seen & FIRST_HIGH != 0);
        let mut f = [0; 2];
        f[early] = self.first_ns;
        if self.seen & (1 << (early ^ 1)) != 0 {
            f[early ^ 1] =
                self.first_ns + (u64::from(self.first_lag_hi) << 32 | u64::from(self.first_lag));
        }
        f
    }

    /// Stores each side's first packet (of the sides seen).
    #[cold]
    #[inline(never)]
    fn set_firsts(&mut self, f: [u64; 2], store: &mut StandardStore) {
        let early = match self.seen & SEEN_SIDES {
            0b01 => 0,
            0b10 => 1,
            _ => usize::from(f[1] < f[0]),
        };
        self.first_ns = f[early];
        self.seen = (self.seen & !FIRST_HIGH) | if early == 1 { FIRST_HIGH } else { 0 };
        let lag = if self.seen & SEEN_SIDES == 0b11 {
            f[early ^ 1] - f[early]
        } else {
            0
        };
        if lag <= LAG_MAX && self.seen & FIRSTS_IN_EXTRA == 0 {
            self.first_lag = lag as u32;
            self.first_lag_hi = (lag >> 32) as u8;
        } else {
            self.seen |= FIRSTS_IN_EXTRA;
            self.extra_mut(store).firsts = f;
        }
    }

    /// The gap before a side's packet (not its first) into its gap min/max, as `full` counts.
    #[inline]
    fn count_gap(&mut self, side: usize, ts: u64, store: &mut StandardStore) {
        let iat = ts.saturating_sub(self.last_ns[side]);
        let [min, max] = self.gaps(side);
        if iat < min {
            self.set_gap(side, 0, iat);
        } else if min == GAP_MAX {
            let x = self.extra_mut(store);
            x.iat_min[side] = x.iat_min[side].min(iat);
        }
        if iat > max {
            if iat < GAP_MAX {
                self.set_gap(side, 1, iat);
            } else {
                self.set_gap(side, 1, GAP_MAX);
                let x = self.extra_mut(store);
                x.iat_max[side] = x.iat_max[side].max(iat);
            }
        }
    }

    /// `side`'s smallest and largest gap as the line holds them (36 bits).
    #[inline]
    fn gaps(&self, side: usize) -> [u64; 2] {
        let hi = self.iat_hi[side];
        [
            u64::from(hi >> 4) << 32 | u64::from(self.iat_min[side]),
            u64::from(hi & 0xf) << 32 | u64::from(self.iat_max[side]),
        ]
    }

    /// Sets `side`'s smallest (`which` 0) or largest (1) gap to `v` (at most [`GAP_MAX`]).
    #[inline]
    fn set_gap(&mut self, side: usize, which: usize, v: u64) {
        let high = (v >> 32) as u8 & 0xf;
        if which == 0 {
            self.iat_min[side] = v as u32;
            self.iat_hi[side] = (self.iat_hi[side] & 0x0f) | high << 4;
        } else {
            self.iat_max[side] = v as u32;
            self.iat_hi[side] = (self.iat_hi[side] & 0xf0) | high;
        }
    }

    /// A frame's length into its side's min/max, as `full` counts.
    #[inline]
    fn count_len(&mut self, side: usize, wire_len: u32, store: &mut StandardStore) {
        if state::count_narrow_len(&mut self.len_min[side], &mut self.len_max[side], wire_len) {
            let x = self.extra_mut(store);
            x.len_min[side] = x.len_min[side].min(wire_len);
            x.len_max[side] = x.len_max[side].max(wire_len);
        }
    }

    /// Adds one to each event counter the level keeps whose bit ([`rare_index`]) is in `mask`.
    #[inline]
    fn count_events(&mut self, side: usize, mask: u16, store: &mut StandardStore) {
        for (n, &i) in NIBBLES.iter().enumerate() {
            if mask & (1 << i) != 0 {
                let shift = 4 * n;
                let v = (self.events[side] >> shift) & 0xf;
                if v == 0xf {
                    self.events[side] &= !(0xf << shift);
                    self.carry(side, n, store);
                } else {
                    self.events[side] += 1 << shift;
                }
            }
        }
        if mask & (1 << rare_index::ZERO_WINDOW) != 0 {
            let (v, carry) = self.zero_window[side].overflowing_add(1);
            self.zero_window[side] = v;
            if carry {
                self.carry(side, ZERO_WINDOW_HI, store);
            }
        }
        if mask & (1 << rare_index::RETRANS) != 0 {
            let (v, carry) = self.retrans[side].overflowing_add(1);
            self.retrans[side] = v;
            if carry {
                self.carry(side, RETRANS_HI, store);
            }
        }
    }

    /// One carry of `side`'s narrow event counter `n` ([`StandardExtra::events_hi`]).
    #[cold]
    fn carry(&mut self, side: usize, n: usize, store: &mut StandardStore) {
        let hi = &mut self.extra_mut(store).events_hi[side][n];
        *hi = hi.wrapping_add(1);
    }

    /// The exact event counts of `side` by [`rare_index`] (those the level does not keep: 0).
    fn events(&self, side: usize, store: &StandardStore) -> [u32; rare_index::COUNT] {
        let x = self.extra(store);
        let hi = |n: usize| x.map_or(0, |x| x.events_hi[side][n]);
        let mut rare = [0u32; rare_index::COUNT];
        for (n, &i) in NIBBLES.iter().enumerate() {
            // Wrapping, as the record's 32-bit counts always have.
            rare[i] =
                u32::from((self.events[side] >> (4 * n)) & 0xf).wrapping_add(hi(n).wrapping_shl(4));
        }
        rare[rare_index::ZERO_WINDOW] =
            u32::from(self.zero_window[side]).wrapping_add(hi(ZERO_WINDOW_HI).wrapping_shl(8));
        rare[rare_index::RETRANS] =
            u32::from(self.retrans[side]).wrapping_add(hi(RETRANS_HI).wrapping_shl(8));
        rare
    }

    /// A side's [`Handshake`] state.
    #[inline]
    fn handshake(&self, side: usize) -> Handshake {
        Handshake::from_bits(self.timing >> (2 * side))
    }

    /// Moves the timing into the extra as `full` keeps it; `sides` are each side's values the
    /// line's states were made against.
    #[cold]
    #[inline(never)]
    fn spill_timing(&mut self, sides: [SideBefore; 2], store: &mut StandardStore) {
        let mut t = TcpTiming::default();
        for (side, (dir, before)) in t.dirs.iter_mut().zip(sides).enumerate() {
            let slot = self.slot(side);
            *dir = match self.handshake(side) {
                Handshake::Idle => DirTiming::default(),
                Handshake::SynTimed => {
                    DirTiming::resume(Some((before.last_ns - slot, before.next_seq, true)), None)
                }
                // The segment's send time is never read: `standard` keeps no samples.
                Handshake::SegmentTimed => DirTiming::resume(Some((0, slot as u32, false)), None),
                Handshake::Measured => DirTiming::resume(None, Some(slot)),
            };
        }
        let x = self.extra_mut(store);
        let mut idx = x.timing;
        *store.timings.get_or_take(&mut idx) = t;
        self.extra_mut(store).timing = idx;
        self.timing = TIMING_IN_EXTRA;
    }

    /// `side`'s [`Handshake`] slot (35 bits).
    #[inline]
    fn slot(&self, side: usize) -> u64 {
        let hi = if side == 0 { self.timing } else { self.seen } >> SLOT_HI_SHIFT;
        u64::from(hi) << 32 | u64::from(self.timing_slot[side])
    }

    /// Sets `side`'s [`Handshake`] slot to `v` (at most [`SLOT_MAX`]).
    #[inline]
    fn set_slot(&mut self, side: usize, v: u64) {
        self.timing_slot[side] = v as u32;
        let byte = if side == 0 {
            &mut self.timing
        } else {
            &mut self.seen
        };
        *byte = (*byte & !(0b111 << SLOT_HI_SHIFT)) | ((v >> 32) as u8) << SLOT_HI_SHIFT;
    }

    /// `side`'s values now.
    fn side_now(&self, side: usize) -> SideBefore {
        SideBefore {
            next_seq: self.next_seq[side],
            last_ns: self.last_ns[side],
        }
    }

    /// Each side's values as the line's handshake states were made against them.
    fn sides_before(&self, side: usize, sender: SideBefore) -> [SideBefore; 2] {
        let mut sides = [0, 1].map(|s| self.side_now(s));
        sides[side] = sender;
        sides
    }

    /// Times one TCP segment of `side` for the handshake, as [`TcpTiming::segment`] would;
    /// `before` is the side's state before the segment.
    #[inline]
    fn time_segment(
        &mut self,
        d: &Decoded,
        side: usize,
        ts: u64,
        retrans: bool,
        before: SideBefore,
        store: &mut StandardStore,
    ) {
        if self.timing & TIMING_IN_EXTRA == 0 {
            if let Some((timing, slots)) = self.step(d, side, ts, retrans, before) {
                self.timing = timing;
                for (side, v) in slots.into_iter().enumerate() {
                    self.set_slot(side, v);
                }
                return;
            }
            self.spill_timing(self.sides_before(side, before), store);
        }
        // In the extra since the spill (or an earlier segment's).
        let mut idx = self.extra(store).map_or(NIL, |x| x.timing);
        store
            .timings
            .get_or_take(&mut idx)
            .segment(d, side, ts, retrans);
    }

    /// The line's handshake states after a segment, `None` when they cannot follow it (see
    /// [`Handshake`]).
    fn step(
        &self,
        d: &Decoded,
        side: usize,
        ts: u64,
        retrans: bool,
        before: SideBefore,
    ) -> Option<(u8, [u64; 2])> {
        let mut states = [self.handshake(0), self.handshake(1)];
        let mut slots = [self.slot(0), self.slot(1)];
        // A slot's value if it fits the line's 35 bits.
        let fit = |v: u64| (v <= SLOT_MAX).then_some(v);
        let other = side ^ 1;
        if states[side] == Handshake::SynTimed && self.next_seq[side] != before.next_seq {
            // The timed SYN's end was the side's next_seq, which moved.
            return None;
        }
        let f = d.tcp.flags;
        if f & tcp_flags::ACK != 0 {
            match states[other] {
                Handshake::SynTimed if !seq_before(d.tcp.ack, self.next_seq[other]) => {
                    let sent = self.last_ns[other] - slots[other];
                    slots[other] = fit(ts.saturating_sub(sent))?;
                    states[other] = Handshake::Measured;
                }
                Handshake::SegmentTimed if !seq_before(d.tcp.ack, slots[other] as u32) => {
                    states[other] = Handshake::Idle;
                }
                _ => {}
            }
        }
        let syn = f & tcp_flags::SYN != 0;
        let len = state::seq_len(d);
        // A SYN still timed from before counts back from the side's latest packet, which
        // this one may have moved.
        let later = self.last_ns[side] - before.last_ns;
        let finish = |states: [Handshake; 2], mut slots: [u64; 2], restarted: bool| {
            if states[side] == Handshake::SynTimed && !restarted && later != 0 {
                slots[side] = fit(slots[side] + later)?;
            }
            Some((states[0] as u8 | (states[1] as u8) << 2, slots))
        };
        if len == 0 {
            return finish(states, slots, false);
        }
        let end = d.tcp.seq.wrapping_add(len);
        // Starts timing this side's SYN (its end must be the side's next_seq).
        let mut restarted = false;
        let mut time_syn = |states: &mut [Handshake; 2]| -> Option<()> {
            if end != self.next_seq[side] {
                return None;
            }
            slots[side] = fit(self.last_ns[side] - ts)?;
            states[side] = Handshake::SynTimed;
            restarted = true;
            Some(())
        };
        let measured = states[side] == Handshake::Measured;
        if !retrans {
            if states[side] == Handshake::Idle {
                if syn {
                    time_syn(&mut states)?;
                } else {
                    states[side] = Handshake::SegmentTimed;
                    slots[side] = u64::from(end);
                }
            }
        } else if syn
            && f & tcp_flags::ACK == 0
            && !(measured && states[other] == Handshake::Measured)
        {
            // The SYN sent again before the handshake completed: timed afresh; the other
            // side's timed SYN-ACK answered an earlier copy.
            if states[other] == Handshake::SynTimed {
                states[other] = Handshake::Idle;
            }
            time_syn(&mut states)?;
        } else if syn
            && f & tcp_flags::ACK != 0
            && !(measured && states[other] == Handshake::Measured)
        {
            if states[side] == Handshake::Idle {
                time_syn(&mut states)?;
            }
        } else if matches!(states[side], Handshake::SynTimed | Handshake::SegmentTimed) {
            // Karn's rule.
            states[side] = Handshake::Idle;
        }
        finish(states, slots, restarted)
    }

    /// The handshake half of `side`, as `full` reports it.
    fn handshake_half(&self, side: usize, store: &StandardStore) -> Option<u64> {
        if self.timing & TIMING_IN_EXTRA != 0 {
            let t = store.timings.get(self.extra(store)?.timing)?;
            return t.dirs[side].summary().handshake_ns;
        }
        (self.handshake(side) == Handshake::Measured).then(|| self.slot(side))
    }

    /// `side`'s direction of the record.
    fn direction(&self, side: usize, firsts: [u64; 2], store: &StandardStore) -> DirectionRecord {
        let x = self.extra(store);
        let [packets, ip_bytes, bytes] = self.counts(side, store);
        let exact_len = state::exact_len;
        let exact = ExactDir {
            packets,
            bytes,
            ip_bytes,
            psh: 0,
            len_min: exact_len(self.len_min[side], x.map(|x| x.len_min[side])),
            len_max: exact_len(self.len_max[side], x.map(|x| x.len_max[side])),
            iat_min: match self.gaps(side)[0] {
                GAP_MAX => x.map_or(u64::MAX, |x| x.iat_min[side]),
                v => v,
            },
            iat_max: match self.gaps(side)[1] {
                GAP_MAX => x.map_or(0, |x| x.iat_max[side]),
                v => v,
            },
            first_ns: firsts[side],
            rare: self.events(side, store),
        };
        let stats = DirStats {
            last_ns: self.last_ns[side],
            flags_or: self.flags_or[side],
            ..DirStats::default()
        };
        let rtt = RttSummary {
            handshake_ns: self.handshake_half(side, store),
            ..RttSummary::default()
        };
        DirectionRecord::from_stats(&stats, &exact, rtt).project(FeatureLevel::Standard)
    }
}

impl TableEntry for StandardEntry {
    type Store = StandardStore;

    fn vacant() -> Self {
        StandardEntry {
            wheel_prev: NIL,
            wheel_next: NIL,
            ..bytemuck::Zeroable::zeroed()
        }
    }

    fn vacate(&mut self, store: &mut StandardStore) {
        self.release_extra(store);
        self.seen = 0;
        self.link = 0;
        self.key = LineKey::FREE;
    }

    line_table_methods!(StandardStore);

    /// Both lines: every packet writes a counter on each.
    #[inline]
    fn prefetch(&self, _side: usize, _level: FeatureLevel) {
        mem_prefetch::prefetch_write_data::<_, 3>(&self.first_ns);
        mem_prefetch::prefetch_write_data::<_, 3>(&self.wheel_prev);
    }
}

impl StandardEntry {
    /// Returns the flow's extra (and its timing) to the store.
    fn release_extra(&mut self, store: &mut StandardStore) {
        if self.seen & HAS_EXTRA != 0 {
            if let Some(x) = store.extras.get(self.link) {
                let mut t = x.timing;
                store.timings.release(&mut t);
            }
            store.extras.release(&mut self.link);
        }
    }
}

impl MeterEntry for StandardEntry {
    fn start(&mut self, d: &Decoded, sender: Side, ts: u64, store: &mut StandardStore) {
        self.state = 0;
        self.reset_counters(store);
        // The flow's latest packet from its start (the update that follows counts it).
        self.last_ns[sender as usize] = ts;
        state::orient_first(&mut self.state, d, sender);
    }

    #[inline]
    fn update(
        &mut self,
        d: &Decoded,
        sender: Side,
        ts: u64,
        wire_len: u32,
        store: &mut StandardStore,
        _level: FeatureLevel,
        _timing: Option<&mut TcpTiming>,
    ) {
        let side = sender as usize;
        if d.tcp_valid {
            state::learn_from_syn(&mut self.state, d, sender);
        }
        if self.seen & (1 << side) == 0 {
            let mut f = self.firsts(store);
            f[side] = ts;
            self.seen |= 1 << side;
            self.set_firsts(f, store);
            self.len_min[side] = u16::MAX;
            // No gap yet: saturated, and the extra (if any) holds the initial u64::MAX.
            self.set_gap(side, 0, GAP_MAX);
            if d.tunnel.is_some() {
                self.extra_mut(store).tunnels[side] = d.tunnel;
            }
        } else {
            // Packets can arrive out of time order: first/last are the extremes, and a
            // backwards step is a zero gap.
            if ts < self.last_ns[side] {
                self.move_first_back(side, ts, store);
            }
            self.count_gap(side, ts, store);
        }
        self.count_packet(side, d.ip_len, wire_len, store);
        let before = self.side_now(side);
        if ts > self.last_ns[side] {
            // A TCP segment's timing re-bases a timed SYN's time itself (unless the segment
            // restarts it); another packet of the flow moves it here.
            if !d.tcp_valid && self.handshake(side) == Handshake::SynTimed {
                self.move_timed_syn(side, ts - self.last_ns[side], store);
            }
            self.last_ns[side] = ts;
        }
        self.count_len(side, wire_len, store);
        if d.tcp_valid {
            let f = d.tcp.flags;
            self.flags_or[side] |= f;
            let seq_bit = state_bits::SEQ_LOW << side;
            let events = state::tcp_events(d, &mut self.state, seq_bit, &mut self.next_seq[side]);
            if events != 0 {
                self.count_events(side, events, store);
            }
            let retrans = events & (1 << rare_index::RETRANS) != 0;
            self.time_segment(d, side, ts, retrans, before, store);
            state::note_close(&mut self.state, f, sender);
        }
    }

    fn reset_counters(&mut self, store: &mut StandardStore) {
        let keep = StandardEntry {
            key: self.key,
            wheel_prev: self.wheel_prev,
            wheel_next: self.wheel_next,
            state: self.state & !state_bits::SEQ_BOTH,
            ..bytemuck::Zeroable::zeroed()
        };
        if self.seen & HAS_EXTRA != 0 && self.key.in_extra() {
            // The key stays; the counts, tunnels and timing start again.
            let x = store.extras.get_or_take(&mut self.link);
            let mut t = x.timing;
            *x = StandardExtra {
                key: x.key,
                ..StandardExtra::default()
            };
            store.timings.release(&mut t);
            *self = StandardEntry {
                link: self.link,
                seen: HAS_EXTRA,
                ..keep
            };
            return;
        }
        self.release_extra(store);
        *self = keep;
    }

    #[inline]
    fn state(&self) -> u8 {
        self.state
    }
    #[inline]
    fn last_ns(&self) -> u64 {
        self.last_ns[0].max(self.last_ns[1])
    }
    #[inline]
    fn first_ns(&self) -> u64 {
        self.first_ns
    }
    #[inline]
    fn is_empty_record(&self) -> bool {
        self.seen & SEEN_SIDES == 0
    }

    fn record<'a>(
        &self,
        store: &StandardStore,
        _timing: Option<&TcpTiming>,
        reason: EndReason,
        _payload: [&'a [u8]; 2],
        _level: FeatureLevel,
    ) -> FlowRecord<'a> {
        let (init, base) = self.base_record(store, reason);
        let firsts = self.firsts(store);
        FlowRecord {
            fwd: self.direction(init as usize, firsts, store),
            rev: self.direction(init.flip() as usize, firsts, store),
            ..base
        }
    }

    #[inline]
    fn payload_len(&self) -> [u16; 2] {
        [0; 2]
    }
    /// Never called: payloads need `full` (the configuration refuses them elsewhere).
    #[inline]
    fn add_payload_len(&mut self, _side: usize, _n: u16) {}
}

impl StandardEntry {
    /// A side's packet earlier than its first so far (out of time order) becomes its first.
    #[cold]
    #[inline(never)]
    fn move_first_back(&mut self, side: usize, ts: u64, store: &mut StandardStore) {
        let mut f = self.firsts(store);
        if ts < f[side] {
            f[side] = ts;
            self.set_firsts(f, store);
        }
    }

    /// `side`'s latest packet moves `delta` ns later while its SYN is timed: the SYN's send
    /// time, counted back from it, moves the other way.
    #[cold]
    #[inline(never)]
    fn move_timed_syn(&mut self, side: usize, delta: u64, store: &mut StandardStore) {
        match Some(self.slot(side) + delta).filter(|&v| v <= SLOT_MAX) {
            Some(slot) => self.set_slot(side, slot),
            // Made against the side's latest packet as it still is.
            None => self.spill_timing(self.sides_before(side, self.side_now(side)), store),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{FlowEntry, Wides};

    /// An IPv4 TCP key (the line holds it).
    fn key() -> FlowKey {
        let mut k = FlowKey::default();
        k.0[10..12].copy_from_slice(&[0xff; 2]);
        k.0[12..16].copy_from_slice(&[10, 0, 0, 1]);
        k.0[26..28].copy_from_slice(&[0xff; 2]);
        k.0[28..32].copy_from_slice(&[10, 0, 0, 2]);
        k.0[36] = 6;
        k.0[37] = 4;
        k
    }

    /// Random TCP (and some UDP) packets through a `standard` entry and a `full` one, records
    /// taken now and then as an active timeout would: the `standard` record is always the
    /// projection of `full`'s. The segments are drawn to hit what the line cannot follow
    /// (SYNs sent again, data after a timed SYN, gaps and handshakes past 2^32 ns, packets
    /// out of time order, huge frames, counters past their nibbles and bytes).
    #[test]
    fn random_segments_give_the_projection_of_full() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let k = key();
        let flag_sets = [
            tcp_flags::SYN,
            tcp_flags::SYN | tcp_flags::ACK,
            tcp_flags::ACK,
            tcp_flags::ACK,
            tcp_flags::ACK | tcp_flags::PSH,
            tcp_flags::FIN | tcp_flags::ACK,
            tcp_flags::RST,
        ];
        let (mut records, mut halves, mut spilled, mut long_gaps) = (0, 0, 0, 0);
        for _ in 0..4000 {
            let (mut fw, mut fe, mut ft) =
                (Wides::default(), FlowEntry::empty(), TcpTiming::default());
            let (mut ss, mut se) = (StandardStore::default(), StandardEntry::vacant());
            se.occupy(&k, &mut ss);
            let isn = [rnd(1 << 32) as u32, rnd(1 << 32) as u32];
            let mut ts = 1_000_000_000_000u64;
            let packets = 1 + rnd(60);
            for i in 0..packets {
                let side = rnd(2) as usize;
                ts = match rnd(40) {
                    0 | 1 => ts + (1 << 32) + rnd(1 << 33),
                    2 => ts + (1 << 36) + rnd(1 << 36),
                    3 | 4 => ts.saturating_sub(rnd(5000)),
                    _ => ts + rnd(3000),
                };
                let mut d = Decoded {
                    ip_version: 4,
                    proto: 6,
                    tcp_valid: rnd(10) != 0,
                    payload_len: [0, 0, 1, 10, 100][rnd(5) as usize],
                    ..Decoded::default()
                };
                d.tcp.flags = flag_sets[rnd(flag_sets.len() as u64) as usize];
                d.tcp.seq = isn[side].wrapping_add(rnd(4) as u32 * 10);
                d.tcp.ack = isn[side ^ 1].wrapping_add(rnd(4) as u32 * 10);
                d.tcp.window = if rnd(8) == 0 { 0 } else { 1000 };
                let wire_len = if rnd(30) == 0 {
                    70_000
                } else {
                    54 + d.payload_len
                };
                d.ip_len = wire_len - 14 + rnd(3) as u32;
                let sender = if side == 0 { Side::Low } else { Side::High };
                if i == 0 {
                    fe.start(k, &d, sender, ts, &mut fw);
                    se.start(&d, sender, ts, &mut ss);
                }
                let timing = d.tcp_valid.then_some(&mut ft);
                fe.update_at(
                    &d,
                    sender,
                    ts,
                    wire_len,
                    &mut fw,
                    FeatureLevel::Full,
                    timing,
                );
                se.update(
                    &d,
                    sender,
                    ts,
                    wire_len,
                    &mut ss,
                    FeatureLevel::Standard,
                    None,
                );
                spilled += usize::from(se.timing & TIMING_IN_EXTRA != 0);
                long_gaps += usize::from(se.gaps(side)[1] == GAP_MAX);
                if rnd(25) == 0 || i + 1 == packets {
                    let level = FeatureLevel::Standard;
                    let full = FlowRecord::from_entry(
                        &fe,
                        &fw,
                        Some(&ft),
                        EndReason::Active,
                        [&[]; 2],
                        level,
                    );
                    let standard = se.record(&ss, None, EndReason::Active, [&[]; 2], level);
                    assert_eq!(standard, full);
                    assert_eq!(se.first_ns(), fe.first_ns());
                    assert_eq!(se.last_ns(), fe.last_ns);
                    records += 1;
                    halves += usize::from(full.fwd.rtt_handshake_ns.is_some());
                    fe.reset_counters(&mut fw);
                    se.reset_counters(&mut ss);
                }
            }
            se.vacate(&mut ss);
            assert_eq!(ss.extras.in_use() + ss.timings.in_use(), 0, "all returned");
        }
        assert!(
            records > 5000 && halves > 100 && spilled > 100 && long_gaps > 100,
            "{records} {halves} {spilled} {long_gaps}"
        );
    }

    #[test]
    fn the_entry_is_two_lines() {
        assert_eq!(core::mem::size_of::<StandardEntry>(), 128);
        assert_eq!(core::mem::align_of::<StandardEntry>(), 64);
        let e = StandardEntry::vacant();
        let base = &e as *const StandardEntry as usize;
        assert_eq!(&e.wheel_prev as *const u32 as usize - base, 64);
    }
}
