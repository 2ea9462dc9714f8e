//! TCP round-trip times of a flow, as the monitor sees them: the handshake's two halves and
//! per-direction samples (min/mean/max), at the `standard` and `full` feature levels.
//!
//! Policy: each direction times one segment at a time, the first that consumes sequence space
//! (payload, SYN or FIN) while none is timed; the other side's first ACK at or past its end
//! answers it, and the gap is one sample of that direction. A sample of the forward direction
//! is the round trip monitor → responder → monitor, of the reverse monitor → initiator →
//! monitor. A retransmission while a segment is timed drops it (Karn's rule: its ACK could
//! answer either copy), except a SYN sent again, which is timed afresh from the latest copy as
//! Wireshark's `tcp.analysis.initial_rtt` does (from the most recent SYN), and a SYN-ACK sent
//! again, which keeps the time of the copy that answered the SYN. The
//! first sample of a SYN is the direction's handshake half: forward SYN → SYN-ACK, reverse
//! SYN-ACK → ACK; their sum is Wireshark's initial RTT. Bounded: one [`TcpTiming`] per flow
//! table entry, in an array beside the entries (only at `standard` and `full`), written by
//! TCP flows only: two cache lines, one per direction, prefetched with the entry.
use crate::decode::{tcp_flags, Decoded};

/// Bits of [`DirTiming::flags`].
mod flag {
    /// A segment is being timed.
    pub const TIMING: u8 = 1 << 0;
    /// The timed segment is a SYN or SYN-ACK.
    pub const SYN: u8 = 1 << 1;
    /// `handshake_ns` holds the handshake half.
    pub const HANDSHAKE: u8 = 1 << 2;
}

/// One direction's timing: the segment in flight and the samples so far, on a cache line of
/// its own.
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub(crate) struct DirTiming {
    /// When the timed segment was seen (valid with [`flag::TIMING`]).
    sent_ns: u64,
    /// Sum, smallest and largest of the samples, ns.
    sum_ns: u64,
    min_ns: u64,
    max_ns: u64,
    /// The handshake half (valid with [`flag::HANDSHAKE`]).
    handshake_ns: u64,
    /// One past the timed segment's last sequence number: an ACK at or past it answers it.
    end_seq: u32,
    samples: u32,
    /// [`flag`] bits.
    flags: u8,
    /// Explicit padding to the line (the array is plain bytes: no hidden padding).
    _pad: [u8; 15],
}

/// What a direction's timing reports ([`DirTiming::summary`]).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct RttSummary {
    pub handshake_ns: Option<u64>,
    pub samples: u32,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
}

impl DirTiming {
    fn sample(&mut self, ts: u64) {
        let rtt = ts.saturating_sub(self.sent_ns);
        if self.flags & (flag::SYN | flag::HANDSHAKE) == flag::SYN {
            self.handshake_ns = rtt;
            self.flags |= flag::HANDSHAKE;
        }
        self.min_ns = if self.samples == 0 {
            rtt
        } else {
            self.min_ns.min(rtt)
        };
        self.max_ns = self.max_ns.max(rtt);
        self.sum_ns = self.sum_ns.saturating_add(rtt);
        self.samples = self.samples.saturating_add(1);
        self.flags &= !flag::TIMING;
    }

    fn start(&mut self, ts: u64, end_seq: u32, syn: bool) {
        self.flags =
            (self.flags & flag::HANDSHAKE) | flag::TIMING | if syn { flag::SYN } else { 0 };
        self.sent_ns = ts;
        self.end_seq = end_seq;
    }

    /// A direction's timing rebuilt from a smaller form (the `standard` entry's, which keeps
    /// what the handshake needs): `timed` is the segment in flight (sent at, one past its end,
    /// whether a SYN), `handshake` the half already measured.
    pub(crate) fn resume(timed: Option<(u64, u32, bool)>, handshake: Option<u64>) -> Self {
        let mut t = DirTiming::default();
        if let Some(h) = handshake {
            t.handshake_ns = h;
            t.flags |= flag::HANDSHAKE;
        }
        if let Some((sent_ns, end_seq, syn)) = timed {
            t.start(sent_ns, end_seq, syn);
        }
        t
    }

    #[inline]
    fn timing(&self) -> bool {
        self.flags & flag::TIMING != 0
    }

    pub(crate) fn summary(&self) -> RttSummary {
        RttSummary {
            handshake_ns: (self.flags & flag::HANDSHAKE != 0).then_some(self.handshake_ns),
            samples: self.samples,
            min_ns: self.min_ns,
            max_ns: self.max_ns,
            mean_ns: if self.samples == 0 {
                0.0
            } else {
                self.sum_ns as f64 / f64::from(self.samples)
            },
        }
    }
}

/// Both directions' timing, by sender side (`Side as usize`).
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
pub(crate) struct TcpTiming {
    pub dirs: [DirTiming; 2],
}

impl TcpTiming {
    /// Times one TCP segment sent by `side` at `ts`; `retrans` is the meter's verdict that it
    /// starts in sequence space its sender already sent.
    #[inline]
    pub(crate) fn segment(&mut self, d: &Decoded, side: usize, ts: u64, retrans: bool) {
        let f = d.tcp.flags;
        // As an answer first: an ACK of this side may answer the other side's timed segment.
        if f & tcp_flags::ACK != 0 {
            let other = &mut self.dirs[side ^ 1];
            if other.timing() && !crate::state::seq_before(d.tcp.ack, other.end_seq) {
                other.sample(ts);
            }
        }
        let syn = f & tcp_flags::SYN != 0;
        let len = crate::state::seq_len(d);
        if len == 0 {
            return;
        }
        let end = d.tcp.seq.wrapping_add(len);
        if !retrans {
            let me = &mut self.dirs[side];
            if !me.timing() {
                me.start(ts, end, syn);
            }
            return;
        }
        let [low, high] = &mut self.dirs;
        let (me, other) = if side == 0 { (low, high) } else { (high, low) };
        // Both halves timed: the SYN-ACK's answer came.
        let handshake_done = me.flags & other.flags & flag::HANDSHAKE != 0;
        if syn && f & tcp_flags::ACK == 0 && !handshake_done {
            // The SYN sent again before the handshake completed: it counts from the latest
            // copy, and a SYN-ACK seen so far answered an earlier one.
            me.flags &= !flag::HANDSHAKE;
            me.start(ts, end, true);
            if other.flags & flag::SYN != 0 {
                other.flags &= !flag::TIMING;
            }
        } else if syn && f & tcp_flags::ACK != 0 && !handshake_done {
            // A SYN-ACK sent again keeps the time of the copy that answered the SYN (so the
            // halves add up to the whole handshake), or starts it if that one answered an
            // earlier SYN.
            if !me.timing() {
                me.start(ts, end, true);
            }
        } else {
            // Karn's rule.
            me.flags &= !flag::TIMING;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(flags: u8, seq: u32, ack: u32, payload: u32) -> Decoded {
        let mut d = Decoded {
            ip_version: 4,
            proto: 6,
            tcp_valid: true,
            payload_len: payload,
            ..Decoded::default()
        };
        d.tcp.flags = flags;
        d.tcp.seq = seq;
        d.tcp.ack = ack;
        d
    }

    const SYN: u8 = tcp_flags::SYN;
    const ACK: u8 = tcp_flags::ACK;

    #[test]
    fn a_direction_is_one_cache_line() {
        assert_eq!(core::mem::size_of::<DirTiming>(), 64);
        assert_eq!(core::mem::size_of::<TcpTiming>(), 128);
    }

    #[test]
    fn handshake_halves_and_samples() {
        let mut t = TcpTiming::default();
        // Initiator (side 0) SYN at 0, sent again at 1000; SYN-ACK at 1300, sent again at
        // 1500; ACK at 1700 (Wireshark's initial RTT: 700, from the latest SYN).
        t.segment(&seg(SYN, 100, 0, 0), 0, 0, false);
        t.segment(&seg(SYN, 100, 0, 0), 0, 1000, true);
        t.segment(&seg(SYN | ACK, 500, 101, 0), 1, 1300, false);
        t.segment(&seg(SYN | ACK, 500, 101, 0), 1, 1500, true);
        t.segment(&seg(ACK, 101, 501, 0), 0, 1700, false);
        // Data from the initiator at 2000 and 2100, acknowledged together at 2600.
        t.segment(&seg(ACK, 101, 501, 10), 0, 2000, false);
        t.segment(&seg(ACK, 111, 501, 10), 0, 2100, false);
        t.segment(&seg(ACK, 501, 111, 0), 1, 2500, false);
        // A retransmission of the timed segment: no sample from its ACK (Karn).
        t.segment(&seg(ACK, 121, 501, 10), 0, 3000, false);
        t.segment(&seg(ACK, 121, 501, 10), 0, 3500, true);
        t.segment(&seg(ACK, 501, 131, 0), 1, 3600, false);
        let fwd = t.dirs[0].summary();
        let rev = t.dirs[1].summary();
        assert_eq!(fwd.handshake_ns, Some(300));
        assert_eq!(rev.handshake_ns, Some(400));
        assert_eq!((fwd.samples, fwd.min_ns, fwd.max_ns), (2, 300, 500));
        assert_eq!(fwd.mean_ns, 400.0);
        assert_eq!((rev.samples, rev.min_ns, rev.max_ns), (1, 400, 400));
    }

    /// The SYN-ACK lost after the monitor: the initiator sends its SYN again, the responder its
    /// SYN-ACK; the handshake is the second exchange's (Wireshark's initial RTT: from the
    /// latest SYN), the first one's round trip a sample.
    #[test]
    fn a_syn_sent_again_after_a_syn_ack_restarts_the_handshake() {
        let mut t = TcpTiming::default();
        t.segment(&seg(SYN, 100, 0, 0), 0, 0, false);
        t.segment(&seg(SYN | ACK, 500, 101, 0), 1, 100, false);
        t.segment(&seg(SYN, 100, 0, 0), 0, 1000, true);
        t.segment(&seg(SYN | ACK, 500, 101, 0), 1, 1050, true);
        t.segment(&seg(ACK, 101, 501, 0), 0, 1120, false);
        let (fwd, rev) = (t.dirs[0].summary(), t.dirs[1].summary());
        assert_eq!((fwd.handshake_ns, rev.handshake_ns), (Some(50), Some(70)));
        assert_eq!((fwd.samples, fwd.min_ns, fwd.max_ns), (2, 50, 100));
        assert_eq!(rev.samples, 1);
    }

    #[test]
    fn no_handshake_without_a_syn() {
        let mut t = TcpTiming::default();
        t.segment(&seg(ACK, 1, 1, 100), 0, 0, false);
        t.segment(&seg(ACK, 1, 50, 0), 1, 10, false);
        // An ACK short of the segment's end does not answer it.
        assert_eq!(t.dirs[0].summary().samples, 0);
        t.segment(&seg(ACK, 1, 101, 0), 1, 30, false);
        let s = t.dirs[0].summary();
        assert_eq!((s.handshake_ns, s.samples, s.min_ns), (None, 1, 30));
    }
}
