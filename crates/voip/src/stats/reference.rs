//! The stream statistics as they were computed before the meter and tally split and the
//! integer jitter (one struct, floating-point jitter in ms as tshark's RTP analysis computes
//! it, a shifted 512-bit window): the oracle of the test below, which holds the new code to
//! the same numbers on random streams (the jitter within 1e-6 ms, everything else equal).
use super::{extend, is_cn, Summary, WINDOW};
use crate::index::tests::next;
use crate::rtp::RtpHeader;

#[derive(Clone, Debug, Default)]
pub(super) struct Reference {
    packets: u64,
    bytes: u64,
    first_ns: u64,
    last_ns: u64,
    first_pt: u8,
    pts: u128,
    base_seq: i64,
    max_seq: i64,
    last_seq: i64,
    duplicated: u64,
    out_of_order: u64,
    seen: [u64; (WINDOW / 64) as usize],
    last_ts: i64,
    ref_ts: i64,
    ref_ms: f64,
    jitter_ms: f64,
    jitter_max_ms: f64,
    jitter_mean_ms: f64,
    delta: Summary,
    size: Summary,
    prev_pt: u8,
}

impl Reference {
    pub(super) fn add(&mut self, ts_ns: u64, h: &RtpHeader, len: usize, clock_rate: u32) {
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
            let nominal = ts.wrapping_sub(self.ref_ts) as f64 / (clock_rate as f64 / 1000.0);
            let diff = (now_ms - (self.ref_ms + nominal)).abs();
            current_jitter = (15.0 * self.jitter_ms + diff) / 16.0;
            self.jitter_ms = current_jitter;
        }
        let cn = is_cn(h.payload_type);
        let regular = !h.marker && !cn && in_time && !is_cn(self.prev_pt);
        if regular {
            self.delta.add(delta);
            let n = (self.packets - 1) as f64;
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
        let seq = (1i64 << 16) | h.seq as i64;
        self.base_seq = seq;
        self.max_seq = seq;
        self.last_seq = seq;
        self.seen[0] = 1;
        let ts = (1i64 << 32) | h.timestamp as i64;
        self.last_ts = ts;
        self.ref_ts = ts;
    }

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
}

/// Random streams: mostly 20 ms G.711 with arrival jitter, and every irregularity in
/// between (late, duplicate and lost packets, jumps over the window and across the 16-bit
/// wrap, timestamps going back or jumping, arrival times going back, markers, comfort noise,
/// a clockless payload type, other clocks, sizes changing). Every number equal to the
/// reference's, bit for bit, except the jitter (within 1e-6 ms).
#[test]
fn the_meter_and_tally_give_the_numbers_of_the_reference() {
    let mut worst = 0.0f64;
    for stream in 0..400u64 {
        let mut rng = stream;
        let (mut new, mut old) = (super::StreamStats::default(), Reference::default());
        let mut seq = next(&mut rng) as u16;
        let mut ts = next(&mut rng) as u32;
        let mut at = 1_700_000_000_000_000_000 + next(&mut rng) % 1_000_000_000;
        // Some streams are nearly clean, some are chaos.
        let chaos = next(&mut rng) % 100;
        let packets = 50 + next(&mut rng) % 3000;
        for _ in 0..packets {
            let r = next(&mut rng);
            let odd = r % 100 < chaos;
            let (mut pt, mut rate, mut len) = (8u8, 8000u32, 172usize);
            seq = seq.wrapping_add(1);
            ts = ts.wrapping_add(160);
            at += 20_000_000 + (r >> 40) % 2_000_000 - 1_000_000;
            if odd {
                match (r >> 8) % 12 {
                    0 => seq = seq.wrapping_sub(1 + (r >> 16) as u16 % 600),
                    1 => seq = seq.wrapping_add((r >> 16) as u16 % 2000),
                    2 => seq = seq.wrapping_sub(1),
                    3 => ts = ts.wrapping_sub((r >> 16) as u32 % 100_000),
                    4 => ts = ts.wrapping_add((r >> 16) as u32),
                    5 => at = at.saturating_sub((r >> 16) % 500_000_000),
                    6 => (pt, rate) = (13, 8000),
                    7 => (pt, rate) = (101, 0),
                    8 => (pt, rate) = (96, 48_000),
                    9 => (pt, rate) = (97, 44_100),
                    10 => len = 12 + (r >> 16) as usize % 1400,
                    _ => at += (r >> 16) % 90_000_000_000,
                }
            }
            let h = RtpHeader {
                marker: odd && (r >> 60) == 0,
                payload_type: pt,
                seq,
                timestamp: ts,
                ssrc: 7,
                header_len: 12,
            };
            new.add(at, &h, len, rate);
            old.add(at, &h, len, rate);
        }
        let t = new.totals();
        let got = (
            t.packets,
            t.bytes,
            t.first_ns,
            t.last_ns,
            t.first_pt,
            t.pts,
            t.expected,
            t.duplicated,
            t.out_of_order,
        );
        let want = (
            old.packets,
            old.bytes,
            old.first_ns,
            old.last_ns,
            old.first_pt,
            old.pts,
            old.max_seq - old.base_seq + 1,
            old.duplicated,
            old.out_of_order,
        );
        assert_eq!(got, want, "stream {stream}");
        assert_eq!(t.lost, want.6 - old.packets as i64);
        for (a, b) in [(t.delta, old.delta), (t.size, old.size)] {
            let bits = |s: Summary| [s.min, s.max, s.mean(), s.std()].map(f64::to_bits);
            assert_eq!((a.count, bits(a)), (b.count, bits(b)), "stream {stream}");
        }
        for (a, b) in [
            (t.jitter_max_ms, old.jitter_max_ms),
            (t.jitter_mean_ms, old.jitter_mean_ms),
        ] {
            // Timestamp jumps of hours give jitters of 10^8 ms, where the floating-point
            // reference itself is only good to some 10^-16 of that per step.
            let bound = 1e-6 + b.abs() * 1e-10;
            worst = worst.max((a - b).abs() / bound);
            assert!((a - b).abs() <= bound, "stream {stream}: jitter {a} vs {b}");
        }
    }
    eprintln!("largest jitter difference: {worst:.3} of the bound");
}
