//! Per-stream RTP statistics: packets, bytes, loss from extended sequence numbers (RFC 3550
//! A.1/A.3: expected minus received, negative with duplicates), duplicates and late packets in
//! a window behind the highest sequence number, interarrival jitter (§6.4.1, A.8) and
//! inter-arrival deltas computed as tshark's RTP analysis does (`ui/tap-rtp-analysis.c`), so
//! the two can be compared number for number.
use crate::rtp::RtpHeader;

/// Sequence numbers remembered behind the highest one, to tell duplicates from late packets.
const WINDOW: i64 = 512;

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

/// Statistics of one RTP stream (one SSRC from one source to one destination).
#[derive(Clone, Debug, Default)]
pub struct StreamStats {
    /// Packets received (duplicates included, as RFC 3550 counts them).
    pub packets: u64,
    /// RTP bytes (header and payload; UDP payload length).
    pub bytes: u64,
    /// Capture time of the first and last packet (ns).
    pub first_ns: u64,
    /// Capture time of the last packet (ns).
    pub last_ns: u64,
    /// Payload type of the first packet.
    pub first_pt: u8,
    /// Payload types seen (bit per type).
    pub pts: u128,
    /// Lowest and highest extended sequence number.
    pub base_seq: i64,
    /// Highest extended sequence number.
    pub max_seq: i64,
    /// Last extended sequence number (the reference for extending the next).
    last_seq: i64,
    /// Packets whose sequence number was already received (within the window).
    pub duplicated: u64,
    /// Packets arriving after one with a higher sequence number (late, not duplicates).
    pub out_of_order: u64,
    /// Sequence numbers received in `[max_seq - WINDOW + 1, max_seq]`, bit i = max_seq - i.
    seen: [u64; (WINDOW / 64) as usize],
    /// Last extended RTP timestamp, and the one of the last in-order packet.
    last_ts: i64,
    ref_ts: i64,
    /// Arrival (ms since the first packet) of the last in-order packet.
    ref_ms: f64,
    /// Current jitter (ms), its maximum and tshark's running mean.
    pub jitter_ms: f64,
    /// Largest jitter (ms).
    pub jitter_max_ms: f64,
    /// Mean jitter over regular packets (tshark's running mean).
    pub jitter_mean_ms: f64,
    /// Inter-arrival deltas (ms) of regular packets (not first, marker, comfort noise or
    /// timestamp going back), as tshark's Min/Max Delta.
    pub delta: Summary,
    /// tshark's running mean of the deltas (divided by packets so far, not deltas).
    pub delta_mean_ms: f64,
    /// Packet sizes (bytes of RTP).
    pub size: Summary,
    /// Payload type of the previous packet.
    prev_pt: u8,
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

impl StreamStats {
    /// Hints the CPU to fetch the fields [`StreamStats::add`] touches (wherever the compiler
    /// placed them: one hint per field, lines named twice cost an instruction, not a fetch).
    #[inline]
    pub(crate) fn prefetch(&self) {
        use mem_prefetch::prefetch_write_data as p;
        p::<_, 3>(&self.packets);
        p::<_, 3>(&self.bytes);
        p::<_, 3>(&self.last_ns);
        p::<_, 3>(&self.pts);
        p::<_, 3>(&self.base_seq);
        p::<_, 3>(&self.max_seq);
        p::<_, 3>(&self.last_seq);
        p::<_, 3>(&self.seen[0]);
        p::<_, 3>(&self.seen[self.seen.len() - 1]);
        p::<_, 3>(&self.last_ts);
        p::<_, 3>(&self.ref_ts);
        p::<_, 3>(&self.ref_ms);
        p::<_, 3>(&self.jitter_ms);
        p::<_, 3>(&self.jitter_max_ms);
        p::<_, 3>(&self.jitter_mean_ms);
        p::<_, 3>(&self.delta);
        p::<_, 3>(&self.delta_mean_ms);
        p::<_, 3>(&self.size);
        p::<_, 3>(&self.prev_pt);
    }

    /// Counts one packet: `h` its header, `len` its RTP bytes, `clock_rate` of its payload
    /// type (0: no jitter).
    pub fn add(&mut self, ts_ns: u64, h: &RtpHeader, len: usize, clock_rate: u32) {
        self.size.add(len as f64);
        self.bytes += len as u64;
        self.pts |= 1u128 << h.payload_type;
        if self.packets == 0 {
            self.first(ts_ns, h);
            return;
        }
        self.packets += 1;
        self.last_ns = self.last_ns.max(ts_ns);
        let seq = extend(self.last_seq, h.seq as u64, 16);
        self.last_seq = seq;
        self.track_sequence(seq);
        let ts = extend(self.last_ts, h.timestamp as u64, 32);
        self.last_ts = ts;
        let now_ms = ts_ns.saturating_sub(self.first_ns) as f64 / 1e6;
        let in_time = self.ref_ts <= ts;
        let mut current_jitter = 0.0;
        let delta = now_ms - self.ref_ms;
        if clock_rate != 0 {
            let nominal = (ts - self.ref_ts) as f64 / (clock_rate as f64 / 1000.0);
            let diff = (now_ms - (self.ref_ms + nominal)).abs();
            current_jitter = (15.0 * self.jitter_ms + diff) / 16.0;
            self.jitter_ms = current_jitter;
        }
        let cn = is_cn(h.payload_type);
        let regular = !h.marker && !cn && in_time && !is_cn(self.prev_pt);
        if regular {
            self.delta.add(delta);
            // tshark divides by the packets before this one, regular or not.
            let n = (self.packets - 1) as f64;
            self.delta_mean_ms = (self.delta_mean_ms * (n - 1.0) + delta) / n;
            if clock_rate != 0 {
                self.jitter_max_ms = self.jitter_max_ms.max(self.jitter_ms);
                self.jitter_mean_ms = (self.jitter_mean_ms * (n - 1.0) + current_jitter) / n;
            }
        }
        self.prev_pt = h.payload_type;
        if in_time {
            self.ref_ms = now_ms;
            self.ref_ts = ts;
        }
    }

    fn first(&mut self, ts_ns: u64, h: &RtpHeader) {
        self.packets = 1;
        self.first_ns = ts_ns;
        self.last_ns = ts_ns;
        self.first_pt = h.payload_type;
        self.prev_pt = h.payload_type;
        // Extended numbers start one cycle up so that early late packets stay positive.
        let seq = (1i64 << 16) | h.seq as i64;
        self.base_seq = seq;
        self.max_seq = seq;
        self.last_seq = seq;
        self.seen[0] = 1;
        let ts = (1i64 << 32) | h.timestamp as i64;
        self.last_ts = ts;
        self.ref_ts = ts;
    }

    /// Duplicates, late packets and the sequence range.
    fn track_sequence(&mut self, seq: i64) {
        self.base_seq = self.base_seq.min(seq);
        if seq > self.max_seq {
            self.shift_window(seq - self.max_seq);
            self.max_seq = seq;
            self.seen[0] |= 1;
            return;
        }
        let behind = self.max_seq - seq;
        if behind >= WINDOW {
            self.out_of_order += 1;
            return;
        }
        let (word, bit) = ((behind / 64) as usize, behind % 64);
        if self.seen[word] & (1 << bit) != 0 {
            self.duplicated += 1;
        } else {
            self.seen[word] |= 1 << bit;
            self.out_of_order += 1;
        }
    }

    /// Moves the window forward by `by` sequence numbers.
    fn shift_window(&mut self, by: i64) {
        if by >= WINDOW {
            self.seen = [0; (WINDOW / 64) as usize];
            return;
        }
        let (words, bits) = ((by / 64) as usize, (by % 64) as u32);
        let n = self.seen.len();
        for i in (0..n).rev() {
            let hi = if i >= words { self.seen[i - words] } else { 0 };
            let lo = if i > words {
                self.seen[i - words - 1]
            } else {
                0
            };
            self.seen[i] = if bits == 0 {
                hi
            } else {
                (hi << bits) | (lo >> (64 - bits))
            };
        }
    }

    /// Packets expected from the sequence range (RFC 3550 A.3).
    pub fn expected(&self) -> i64 {
        self.max_seq - self.base_seq + 1
    }

    /// Expected minus received: negative when duplicates outnumber losses.
    pub fn lost(&self) -> i64 {
        self.expected() - self.packets as i64
    }

    /// Sequence continuity for orphan detection: the highest sequence number advanced by at
    /// most `gap` per distinct packet on average (duplicates, as a mirrored port gives them,
    /// do not count for it).
    pub fn looks_continuous(&self, gap: i64) -> bool {
        self.expected() <= (self.packets - self.duplicated) as i64 * gap
    }
}

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
        assert_eq!(s.packets, 6);
        assert_eq!(s.expected(), 6, "65534..=3 across the wrap");
        assert_eq!(s.lost(), 0, "one lost, one duplicated: RFC 3550 nets them");
        assert_eq!((s.duplicated, s.out_of_order), (1, 1));
    }

    #[test]
    fn jitter_follows_rfc3550_on_a_late_packet() {
        let mut s = StreamStats::default();
        // 20 ms packetisation; the third packet arrives 8 ms late.
        let arrivals = [0u64, 20, 48, 60];
        for (i, ms) in arrivals.into_iter().enumerate() {
            s.add(ms * 1_000_000, &hdr(i as u16, i as u32 * 160), 172, 8000);
        }
        // D: 0, 8, 8 -> J = 0, 0.5, 0.96875
        assert!((s.jitter_ms - 0.96875).abs() < 1e-9, "{}", s.jitter_ms);
        assert!((s.jitter_max_ms - 0.96875).abs() < 1e-9);
        assert_eq!(s.delta.max, 28.0);
        assert_eq!(s.delta.min, 12.0);
    }

    #[test]
    fn summary_std_is_the_population_deviation() {
        let mut m = Summary::default();
        for x in [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0] {
            m.add(x);
        }
        assert_eq!((m.min, m.max, m.mean(), m.std()), (2.0, 9.0, 5.0, 2.0));
    }
}
