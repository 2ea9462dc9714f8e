//! Per-stream RTP statistics: packets, bytes, loss from extended sequence numbers (RFC 3550
//! A.1/A.3: expected minus received, negative with duplicates), duplicates and late packets in
//! a window behind the highest sequence number, interarrival jitter (§6.4.1, A.8) and
//! inter-arrival deltas computed as tshark's RTP analysis does (`ui/tap-rtp-analysis.c`), so
//! the two can be compared number for number.
//!
//! A stream is measured in two parts. [`StreamMeter`] is what every packet reads and writes:
//! sequence and timestamp state, the jitter, the inter-arrival summary, the counters; at
//! 100,000 calls every RTP packet's stream is a cache miss, so it is kept small (the call
//! table holds it in a few cache lines of its own). [`StreamTally`] is what only some packets
//! touch: a late or duplicate packet, a new payload type, a packet size other than the last,
//! every 64th sequence number. [`StreamMeter::totals`] puts the two together for the record.
//!
//! The jitter is integer arithmetic, as RFC 3550 A.8 does it: each packet's transit
//! difference D in nanoseconds with 8 fraction bits (arrival times are integer nanoseconds,
//! the media clock's period a 16-bit fraction of a nanosecond, [`Clock`]), the jitter kept as
//! 16 J and moved by `d - ((16J + 8) >> 4)`. Its error against tshark's floating-point J is
//! below 0.01 ns (docs/specs/voip.md); the maximum and tshark's running mean are converted to
//! milliseconds once, for the record.
use crate::rtp::RtpHeader;

/// Sequence numbers remembered behind the highest one, to tell duplicates from late packets.
const WINDOW: i64 = 512;

/// Blocks of 64 sequence numbers kept for the window behind the highest number's own block
/// (which the meter holds): the window reaches at most 8 blocks back, so a ring of 8 never
/// gives two of them the same place.
const RING: usize = 8;

/// Fraction bits of [`Clock`]'s nanoseconds per timestamp unit.
const TICK_BITS: u32 = 16;

/// Fraction bits of the transit difference and the jitter (nanoseconds).
const JITTER_BITS: u32 = 8;

/// The largest |D| counted, in nanoseconds with [`JITTER_BITS`] fraction bits (2^51 ns, 26
/// days): 16 J stays below 2^63 and cannot overflow. Only a stream whose timestamps or
/// arrival times jump by weeks reaches it.
const D_MAX: u64 = 1 << 59;

/// 16 J in nanoseconds with [`JITTER_BITS`] fraction bits, to milliseconds.
const JITTER_UNIT_PER_MS: f64 = 16.0 * (1u64 << JITTER_BITS) as f64 * 1e6;

/// Running minimum, maximum, mean and standard deviation (Welford).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Summary {
    /// Values summarised.
    pub count: u64,
    /// Smallest value (0 when empty).
    pub min: f64,
    /// Largest value (0 when empty).
    pub max: f64,
    mean: f64,
    m2: f64,
}

impl Summary {
    /// Adds a value.
    #[inline]
    pub fn add(&mut self, x: f64) {
        self.count += 1;
        if self.count == 1 {
            self.min = x;
            self.max = x;
        } else {
            self.min = self.min.min(x);
            self.max = self.max.max(x);
        }
        let d = x - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (x - self.mean);
    }

    /// Adds `x` `n` times: the same numbers as `n` calls of [`Summary::add`]. Once the mean
    /// is `x`, further adds change neither it (d = 0) nor the sum of squares, so they are
    /// counted without the arithmetic.
    pub fn add_repeated(&mut self, x: f64, n: u64) {
        for i in 0..n {
            if i > 0 && x == self.mean {
                self.count += n - i;
                return;
            }
            self.add(x);
        }
    }

    /// Mean (0 when empty).
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Population standard deviation (0 with fewer than two values).
    pub fn std(&self) -> f64 {
        if self.count < 2 {
            0.0
        } else {
            (self.m2 / self.count as f64).sqrt()
        }
    }
}

/// A payload type's media clock as the jitter needs it: nanoseconds per timestamp unit with
/// 16 fraction bits (exact for 8 and 16 kHz; within 2^-17 ns per unit otherwise), or none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Clock(i64);

impl Clock {
    /// No clock (`telephone-event`, unknown dynamic types): no jitter.
    pub const NONE: Clock = Clock(0);

    /// The clock of `rate` Hz (0: none).
    pub fn new(rate: u32) -> Clock {
        if rate == 0 {
            return Clock::NONE;
        }
        let rate = u128::from(rate);
        // At most 10^9 * 2^16 (1 Hz), at least 15,258 (u32::MAX Hz): never 0, fits an i64.
        Clock((((1_000_000_000u128 << TICK_BITS) + rate / 2) / rate) as i64)
    }

    /// True for [`Clock::NONE`].
    pub fn is_none(self) -> bool {
        self.0 == 0
    }
}

/// What every packet of a stream reads and writes ([module documentation](self)): 160
/// bytes, in a fixed order (`repr(C)`) so that a caller can place it on cache lines and
/// prefetch them ([`StreamMeter::line_fields`]).
#[derive(Clone, Debug, Default)]
#[repr(C)]
pub struct StreamMeter {
    /// Packets received (duplicates included, as RFC 3550 counts them).
    pub packets: u64,
    /// Capture time of the last packet (ns).
    pub last_ns: u64,
    /// Highest extended sequence number.
    max_seq: i64,
    /// Last extended sequence number (the reference for extending the next).
    last_seq: i64,
    /// Sequence numbers received in `max_seq`'s block of 64 (bit `seq & 63`); older blocks
    /// are in [`StreamTally`]'s ring.
    block: u64,
    /// Last extended RTP timestamp, and the one of the last in-order packet.
    last_ts: i64,
    ref_ts: i64,
    /// Arrival of the last in-order packet, ns after the first.
    ref_ns: u64,
    /// Capture time of the first packet (ns).
    pub first_ns: u64,
    /// 16 × the current jitter (ns, [`JITTER_BITS`] fraction bits), its largest value over
    /// regular packets, and tshark's running mean times the packets it was last divided by.
    jitter: u64,
    jitter_max: u64,
    jitter_sum: f64,
    jitter_n: u64,
    /// Inter-arrival deltas (ms) of regular packets (not first, marker, comfort noise or
    /// timestamp going back), as tshark's Min/Max Delta.
    delta: Summary,
    /// The packets of the current run of equal sizes, not yet in [`StreamTally`]'s summary.
    run_size: u32,
    run_len: u32,
    /// Payload type of the previous packet.
    prev_pt: u8,
}

/// What only some packets of a stream touch ([module documentation](self)).
#[derive(Clone, Debug, Default)]
pub struct StreamTally {
    /// Payload type of the first packet.
    first_pt: u8,
    /// Payload types seen (bit per type).
    pts: u128,
    /// Lowest extended sequence number.
    base_seq: i64,
    /// Packets whose sequence number was already received (within the window).
    duplicated: u64,
    /// Packets arriving after one with a higher sequence number (late, not duplicates).
    out_of_order: u64,
    /// Sequence numbers received in the blocks of 64 behind the highest one's, by block
    /// number modulo [`RING`].
    ring: [u64; RING],
    /// RTP bytes and packet sizes of the runs of equal sizes ended so far.
    bytes: u64,
    size: Summary,
}

/// A stream's numbers for its record ([`StreamMeter::totals`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StreamTotals {
    /// Packets received (duplicates included).
    pub packets: u64,
    /// RTP bytes (header and payload; UDP payload length).
    pub bytes: u64,
    /// Capture time of the first packet (ns).
    pub first_ns: u64,
    /// Capture time of the last packet (ns).
    pub last_ns: u64,
    /// Payload type of the first packet.
    pub first_pt: u8,
    /// Payload types seen (bit per type).
    pub pts: u128,
    /// Packets expected from the sequence range (RFC 3550 A.3).
    pub expected: i64,
    /// Expected minus received: negative when duplicates outnumber losses.
    pub lost: i64,
    /// Duplicates.
    pub duplicated: u64,
    /// Late packets.
    pub out_of_order: u64,
    /// Largest jitter over regular packets (ms).
    pub jitter_max_ms: f64,
    /// tshark's running mean of the jitter over regular packets (ms).
    pub jitter_mean_ms: f64,
    /// Inter-arrival deltas of regular packets (ms).
    pub delta: Summary,
    /// Packet sizes (bytes of RTP).
    pub size: Summary,
}

/// Comfort noise payload types (RFC 3389 and the old 19).
fn is_cn(pt: u8) -> bool {
    pt == 13 || pt == 19
}

/// Extends a 16- or 32-bit counter to the value nearest `prev` (wrap-around either way).
#[inline]
fn extend(prev: i64, raw: u64, bits: u32) -> i64 {
    let span = 1i64 << bits;
    let mut v = (prev & !(span - 1)) | raw as i64;
    if v + span / 2 < prev {
        v += span;
    } else if v > prev + span / 2 {
        v -= span;
    }
    v
}

/// The block of 64 a sequence number is in, its place in the ring, and its bit.
#[inline]
fn block_of(seq: i64) -> i64 {
    seq >> 6
}

#[inline]
fn ring_slot(block: i64) -> usize {
    block as usize & (RING - 1)
}

#[inline]
fn seq_bit(seq: i64) -> u64 {
    1 << (seq & 63)
}

/// One step of RFC 3550 A.8: `jitter` is 16 J; the transit difference of a packet that
/// arrived `arrival - ref_ns` ns after the reference packet with a timestamp `dts` units
/// later.
#[inline]
fn jitter_step(jitter: u64, arrival: u64, ref_ns: u64, dts: i64, clock: Clock) -> u64 {
    let transit = ((i128::from(arrival) - i128::from(ref_ns)) << TICK_BITS)
        - i128::from(dts) * i128::from(clock.0);
    let d = (transit.unsigned_abs() >> (TICK_BITS - JITTER_BITS)).min(u128::from(D_MAX)) as u64;
    jitter + d - ((jitter + 8) >> 4)
}

impl StreamMeter {
    /// Counts one packet: `h` its header, `len` its RTP bytes, `clock` of its payload type.
    /// `tally` is read and written only for the first packet, a late or duplicate one, a new
    /// payload type or size, and every 64th sequence number.
    #[inline]
    pub fn add(
        &mut self,
        tally: &mut StreamTally,
        ts_ns: u64,
        h: &RtpHeader,
        len: usize,
        clock: Clock,
    ) {
        let len = u32::try_from(len).unwrap_or(u32::MAX);
        if self.packets == 0 {
            self.first(tally, ts_ns, h, len);
            return;
        }
        if len == self.run_size && self.run_len < u32::MAX {
            self.run_len += 1;
        } else {
            self.end_run(tally);
            (self.run_size, self.run_len) = (len, 1);
        }
        if h.payload_type != self.prev_pt {
            tally.pts |= 1u128 << h.payload_type;
        }
        self.packets += 1;
        self.last_ns = self.last_ns.max(ts_ns);
        let seq = extend(self.last_seq, h.seq as u64, 16);
        self.last_seq = seq;
        if seq > self.max_seq {
            self.advance_window(tally, seq);
        } else {
            tally.late(seq, self.max_seq, &mut self.block);
        }
        let ts = extend(self.last_ts, h.timestamp as u64, 32);
        self.last_ts = ts;
        let arrival = ts_ns.saturating_sub(self.first_ns);
        let now_ms = arrival as f64 / 1e6;
        let in_time = self.ref_ts <= ts;
        // tshark's arithmetic: both arrivals in ms, then their difference.
        let delta = now_ms - self.ref_ns as f64 / 1e6;
        if !clock.is_none() {
            let dts = ts.wrapping_sub(self.ref_ts);
            self.jitter = jitter_step(self.jitter, arrival, self.ref_ns, dts, clock);
        }
        let cn = is_cn(h.payload_type);
        let regular = !h.marker && !cn && in_time && !is_cn(self.prev_pt);
        if regular {
            self.delta.add(delta);
            if !clock.is_none() {
                self.jitter_max = self.jitter_max.max(self.jitter);
                self.add_jitter_mean();
            }
        }
        self.prev_pt = h.payload_type;
        if in_time {
            self.ref_ns = arrival;
            self.ref_ts = ts;
        }
    }

    fn first(&mut self, tally: &mut StreamTally, ts_ns: u64, h: &RtpHeader, len: u32) {
        self.packets = 1;
        self.first_ns = ts_ns;
        self.last_ns = ts_ns;
        (self.run_size, self.run_len) = (len, 1);
        self.prev_pt = h.payload_type;
        tally.first_pt = h.payload_type;
        tally.pts |= 1u128 << h.payload_type;
        // Extended numbers start one cycle up so that early late packets stay positive.
        let seq = (1i64 << 16) | h.seq as i64;
        tally.base_seq = seq;
        self.max_seq = seq;
        self.last_seq = seq;
        self.block = seq_bit(seq);
        let ts = (1i64 << 32) | h.timestamp as i64;
        self.last_ts = ts;
        self.ref_ts = ts;
    }

    /// tshark's running mean of the jitter: mean = (mean × (n − 1) + J) / n with n the
    /// packets before this one, regular or not. Kept as mean × n, which is a plain sum while
    /// the regular packets follow each other.
    #[inline]
    fn add_jitter_mean(&mut self) {
        let n = self.packets - 1;
        let j = self.jitter as f64;
        self.jitter_sum = if self.jitter_n + 1 == n {
            self.jitter_sum + j
        } else if self.jitter_n == 0 {
            j
        } else {
            self.jitter_sum / self.jitter_n as f64 * (n - 1) as f64 + j
        };
        self.jitter_n = n;
    }

    /// A sequence number above the highest: the window moves on.
    #[inline]
    fn advance_window(&mut self, tally: &mut StreamTally, seq: i64) {
        let (old, new) = (block_of(self.max_seq), block_of(seq));
        if old == new {
            self.block |= seq_bit(seq);
        } else {
            tally.leave_block(old, new, self.block);
            self.block = seq_bit(seq);
        }
        self.max_seq = seq;
    }

    /// Three fields, one on each cache line of the meter when it starts 32 bytes into a line
    /// (as the call table places it): the first, `block`, `delta`. For prefetching.
    pub fn line_fields(&self) -> (&u64, &u64, &Summary) {
        (&self.packets, &self.block, &self.delta)
    }

    /// Puts the current run of equal sizes into the tally.
    fn end_run(&self, tally: &mut StreamTally) {
        tally.bytes += u64::from(self.run_size) * u64::from(self.run_len);
        tally
            .size
            .add_repeated(f64::from(self.run_size), u64::from(self.run_len));
    }

    /// The stream's numbers so far.
    pub fn totals(&self, tally: &StreamTally) -> StreamTotals {
        let mut all = tally.clone();
        self.end_run(&mut all);
        let expected = self.max_seq - tally.base_seq + 1;
        StreamTotals {
            packets: self.packets,
            bytes: all.bytes,
            first_ns: self.first_ns,
            last_ns: self.last_ns,
            first_pt: tally.first_pt,
            pts: tally.pts,
            expected,
            lost: expected - self.packets as i64,
            duplicated: tally.duplicated,
            out_of_order: tally.out_of_order,
            jitter_max_ms: self.jitter_max as f64 / JITTER_UNIT_PER_MS,
            jitter_mean_ms: if self.jitter_n == 0 {
                0.0
            } else {
                self.jitter_sum / self.jitter_n as f64 / JITTER_UNIT_PER_MS
            },
            delta: self.delta,
            size: all.size,
        }
    }

    /// Sequence continuity for orphan detection: the highest sequence number advanced by at
    /// most `gap` per distinct packet on average (duplicates, as a mirrored port gives them,
    /// do not count for it).
    pub fn looks_continuous(&self, tally: &StreamTally, gap: i64) -> bool {
        let expected = self.max_seq - tally.base_seq + 1;
        expected <= (self.packets - tally.duplicated) as i64 * gap
    }
}

impl StreamTally {
    /// A packet at or below the highest sequence number `max`: a duplicate, a late packet,
    /// or one too old for the window. `block` is the meter's bits of `max`'s block.
    fn late(&mut self, seq: i64, max: i64, block: &mut u64) {
        self.base_seq = self.base_seq.min(seq);
        if max - seq >= WINDOW {
            self.out_of_order += 1;
            return;
        }
        let word = if block_of(seq) == block_of(max) {
            block
        } else {
            &mut self.ring[ring_slot(block_of(seq))]
        };
        if *word & seq_bit(seq) != 0 {
            self.duplicated += 1;
        } else {
            *word |= seq_bit(seq);
            self.out_of_order += 1;
        }
    }

    /// The highest sequence number moved from block `old` (whose bits are `bits`) to block
    /// `new`: `old` is filed, the blocks skipped between them are empty.
    fn leave_block(&mut self, old: i64, new: i64, bits: u64) {
        self.ring[ring_slot(old)] = bits;
        if new - old > RING as i64 {
            // `old` and everything before it is out of the window.
            self.ring = [0; RING];
        } else {
            for b in old + 1..new {
                self.ring[ring_slot(b)] = 0;
            }
        }
    }
}

/// A stream's meter and tally together, for callers that keep them in one place.
#[derive(Clone, Debug, Default)]
pub struct StreamStats {
    /// What every packet touches.
    pub meter: StreamMeter,
    /// What some packets touch.
    pub tally: StreamTally,
}

impl StreamStats {
    /// Counts one packet ([`StreamMeter::add`]) with the clock of `clock_rate` Hz (0: no
    /// jitter).
    pub fn add(&mut self, ts_ns: u64, h: &RtpHeader, len: usize, clock_rate: u32) {
        self.meter
            .add(&mut self.tally, ts_ns, h, len, Clock::new(clock_rate));
    }

    /// The stream's numbers so far.
    pub fn totals(&self) -> StreamTotals {
        self.meter.totals(&self.tally)
    }
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::*;

    fn hdr(seq: u16, ts: u32) -> RtpHeader {
        RtpHeader {
            marker: false,
            payload_type: 0,
            seq,
            timestamp: ts,
            ssrc: 1,
            header_len: 12,
        }
    }

    #[test]
    fn loss_duplicates_and_reordering_across_the_sequence_wrap() {
        let mut s = StreamStats::default();
        // 65534, 65535, (0 lost), 2, 1 (late), 2 (duplicate), 3
        for (i, seq) in [65534u16, 65535, 2, 1, 2, 3].into_iter().enumerate() {
            s.add(i as u64 * 20_000_000, &hdr(seq, i as u32 * 160), 172, 8000);
        }
        let t = s.totals();
        assert_eq!(t.packets, 6);
        assert_eq!(t.expected, 6, "65534..=3 across the wrap");
        assert_eq!(t.lost, 0, "one lost, one duplicated: RFC 3550 nets them");
        assert_eq!((t.duplicated, t.out_of_order), (1, 1));
    }

    #[test]
    fn jitter_follows_rfc3550_on_a_late_packet() {
        let mut s = StreamStats::default();
        // 20 ms packetisation; the third packet arrives 8 ms late.
        let arrivals = [0u64, 20, 48, 60];
        for (i, ms) in arrivals.into_iter().enumerate() {
            s.add(ms * 1_000_000, &hdr(i as u16, i as u32 * 160), 172, 8000);
        }
        // D: 0, 8, 8 -> J = 0, 0.5, 0.96875: exact in the fixed point (8 kHz, whole ns).
        let t = s.totals();
        assert_eq!(t.jitter_max_ms, 0.96875);
        assert!((t.jitter_mean_ms - (0.0 + 0.5 + 0.96875) / 3.0).abs() < 1e-12);
        assert_eq!(t.delta.max, 28.0);
        assert_eq!(t.delta.min, 12.0);
    }

    #[test]
    fn duplicates_are_told_from_late_packets_across_blocks_of_the_window() {
        let mut s = StreamStats::default();
        // 0..=600 in order; 100 again (500 behind: in the window, a duplicate); 88 (512
        // behind: out of the window, late); 127 and 128 (either side of a block edge:
        // duplicates); a jump to 2600; 2100 (500 behind, never received: late), 2100 again
        // (a duplicate).
        let mut seqs: Vec<u16> = (0..=600).collect();
        seqs.extend([100, 88, 127, 128, 2600, 2100, 2100]);
        for (i, seq) in seqs.into_iter().enumerate() {
            s.add(i as u64 * 20_000_000, &hdr(seq, i as u32 * 160), 172, 8000);
        }
        let t = s.totals();
        assert_eq!((t.duplicated, t.out_of_order), (4, 2));
        assert_eq!(t.expected, 2601);
    }

    #[test]
    fn summary_std_is_the_population_deviation() {
        let mut m = Summary::default();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            m.add(x);
        }
        assert_eq!((m.min, m.max, m.mean(), m.std()), (2.0, 9.0, 5.0, 2.0));
    }

    #[test]
    fn repeated_adds_are_the_adds_one_by_one() {
        let runs = [
            (172.0, 1u64),
            (172.0, 50),
            (160.0, 3),
            (33.0, 1),
            (172.0, 200),
        ];
        let (mut one, mut many) = (Summary::default(), Summary::default());
        for (x, n) in runs {
            for _ in 0..n {
                one.add(x);
            }
            many.add_repeated(x, n);
            assert_eq!(one, many);
        }
    }

    #[test]
    fn clocks_are_exact_for_the_common_rates() {
        assert_eq!(Clock::new(8000), Clock(125_000 << 16));
        assert_eq!(Clock::new(16_000), Clock(62_500 << 16));
        assert!((Clock::new(48_000).0 * 48_000 - (1_000_000_000 << 16)).abs() <= 24_000);
        assert!(Clock::new(0).is_none() && !Clock::new(u32::MAX).is_none());
        assert_eq!(Clock::new(1), Clock(1_000_000_000 << 16));
    }
}
