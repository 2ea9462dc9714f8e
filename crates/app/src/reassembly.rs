//! TCP stream reassembly for the analysers: a [`Stream`] per direction turns segments in
//! capture order into the direction's bytes in sequence order ([`Chunk`]s).
//!
//! Policy (bounded, counted in [`ReassemblyStats`]):
//! - A segment ahead of the next expected byte waits. Waiting bytes are capped per stream
//!   ([`Budget::max_stream`]) and over all streams sharing a [`Budget`] ([`Budget::max_total`]);
//!   past a cap the stream stops waiting for the missing range: it becomes a [`Chunk::Gap`]
//!   (counted `gaps`, `gap_bytes`, and `capped`) and reading goes on at the first waiting byte.
//! - Bytes before the next expected one (retransmissions) are dropped (`retransmitted` when the
//!   whole segment is old).
//! - Overlaps: the bytes seen first win (Suricata's default policy); a segment overlapping
//!   waiting bytes is counted (`overlaps`), and `overlap_conflicts` when the bytes differ.
//! - A segment captured shorter than its TCP length (snap length) in order is followed by a gap
//!   of the bytes that were not captured.
//! - Sequence numbers wrap; offsets are 64-bit from the stream's first byte (after the SYN when
//!   one was seen, else the first segment's).
use std::collections::BTreeMap;

/// What a stream delivers: bytes in order, or the length of a range that will never come.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chunk<'a> {
    /// The next bytes of the direction.
    Data(&'a [u8]),
    /// So many bytes are missing here (never captured, or given up past a cap).
    Gap(u64),
}

/// One TCP segment as the decoder read it.
#[derive(Clone, Copy, Debug)]
pub struct Segment<'a> {
    /// The sequence number of the header.
    pub seq: u32,
    /// The SYN flag (its sequence number comes before the first byte).
    pub syn: bool,
    /// The captured payload.
    pub data: &'a [u8],
    /// Payload bytes the TCP header announces but the capture does not hold.
    pub missing: u32,
}

/// Caps on waiting bytes, shared by the streams of one analyser.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Out-of-order bytes one stream may hold.
    pub max_stream: usize,
    /// Out-of-order bytes all streams together may hold.
    pub max_total: usize,
    /// Out-of-order bytes held now.
    pub held: usize,
}

impl Budget {
    /// Caps of `max_stream` bytes a stream and `max_total` in all.
    pub fn new(max_stream: usize, max_total: usize) -> Self {
        Budget {
            max_stream,
            max_total,
            held: 0,
        }
    }
}

/// Counters of reassembly, summed over streams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReassemblyStats {
    /// Segments with payload taken.
    pub segments: u64,
    /// Segments wholly before the next expected byte (dropped).
    pub retransmitted: u64,
    /// Segments that had to wait for earlier bytes.
    pub out_of_order: u64,
    /// Segments overlapping waiting bytes (the waiting bytes kept).
    pub overlaps: u64,
    /// Overlapping segments whose bytes differ from the waiting ones.
    pub overlap_conflicts: u64,
    /// Missing ranges delivered as [`Chunk::Gap`].
    pub gaps: u64,
    /// Bytes in those ranges.
    pub gap_bytes: u64,
    /// Gaps declared because a cap was reached (the stream stopped waiting).
    pub capped: u64,
}

/// One direction of a TCP connection.
#[derive(Debug, Default)]
pub struct Stream {
    /// Sequence number of stream offset 0; `None` before the first segment.
    base_seq: Option<u32>,
    /// Offset of the next byte to deliver.
    offset: u64,
    /// Waiting bytes by offset: never overlapping, all at or after `offset`.
    waiting: BTreeMap<u64, Vec<u8>>,
    /// Bytes in `waiting`.
    held: usize,
}

impl Stream {
    /// A stream before its first segment.
    pub fn new() -> Self {
        Self::default()
    }

    /// Offset of the next byte to deliver (bytes and gaps delivered so far).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Out-of-order bytes this stream holds.
    pub fn held(&self) -> usize {
        self.held
    }

    /// Takes one segment; `out` gets what can be delivered now, in order.
    pub fn push(
        &mut self,
        seg: Segment<'_>,
        budget: &mut Budget,
        stats: &mut ReassemblyStats,
        out: &mut impl FnMut(Chunk<'_>),
    ) {
        let first = if seg.syn {
            seg.seq.wrapping_add(1)
        } else {
            seg.seq
        };
        let base = *self.base_seq.get_or_insert(first);
        if seg.data.is_empty() && seg.missing == 0 {
            return;
        }
        // Offsets relative to the next expected byte, read within ±2 GiB of it (wrap-safe).
        let next_seq = base.wrapping_add(self.offset as u32);
        let rel = i64::from(first.wrapping_sub(next_seq) as i32);
        let start = self.offset as i64 + rel;
        let captured_end = start + seg.data.len() as i64;
        let end = captured_end + i64::from(seg.missing);
        if end <= self.offset as i64 {
            stats.retransmitted += 1;
            return;
        }
        stats.segments += 1;
        // The part before the next byte was delivered already: the bytes seen first win.
        let skip = (self.offset as i64 - start).max(0) as usize;
        let start = start.max(self.offset as i64) as u64;
        let data = &seg.data[skip.min(seg.data.len())..];
        if start > self.offset {
            stats.out_of_order += 1;
        }
        if start == self.offset && self.waiting.is_empty() {
            // The common case: in order, nothing waiting; no copy.
            if !data.is_empty() {
                out(Chunk::Data(data));
                self.offset += data.len() as u64;
            }
        } else {
            self.insert(start, data, budget, stats);
            self.drain(budget, out);
        }
        if seg.missing > 0 && self.offset as i64 == captured_end {
            // The tail the capture cut off will not come: say so now, not at a cap.
            self.gap((end - captured_end) as u64, stats, out);
            self.drop_before_offset(budget);
            self.drain(budget, out);
        }
        while (self.held > budget.max_stream || budget.held > budget.max_total)
            && !self.waiting.is_empty()
        {
            stats.capped += 1;
            self.skip_to_waiting(budget, stats, out);
        }
    }

    /// Delivers what waits, with gaps before it, and releases its bytes from `budget`: the end
    /// of the stream.
    pub fn flush(
        &mut self,
        budget: &mut Budget,
        stats: &mut ReassemblyStats,
        out: &mut impl FnMut(Chunk<'_>),
    ) {
        while self.skip_to_waiting(budget, stats, out) {}
    }

    /// Forgets what waits (a stream no longer read), returning its bytes to `budget`.
    pub fn release(&mut self, budget: &mut Budget) {
        budget.held -= self.held;
        self.held = 0;
        self.waiting.clear();
    }

    /// Gives up waiting for the bytes before the first waiting ones: a gap, then what follows.
    /// False when nothing waits.
    fn skip_to_waiting(
        &mut self,
        budget: &mut Budget,
        stats: &mut ReassemblyStats,
        out: &mut impl FnMut(Chunk<'_>),
    ) -> bool {
        let Some(&first) = self.waiting.keys().next() else {
            return false;
        };
        // Waiting bytes start after `offset` (those at it were drained).
        self.gap(first - self.offset, stats, out);
        self.drain(budget, out);
        true
    }

    fn gap(&mut self, n: u64, stats: &mut ReassemblyStats, out: &mut impl FnMut(Chunk<'_>)) {
        if n == 0 {
            return;
        }
        stats.gaps += 1;
        stats.gap_bytes += n;
        out(Chunk::Gap(n));
        self.offset += n;
    }

    /// After a gap moved the offset: waiting bytes before it are trimmed away.
    fn drop_before_offset(&mut self, budget: &mut Budget) {
        while let Some(entry) = self.waiting.first_entry() {
            let at = *entry.key();
            if at >= self.offset {
                break;
            }
            let mut bytes = entry.remove();
            self.held -= bytes.len();
            budget.held -= bytes.len();
            let keep = (at + bytes.len() as u64).saturating_sub(self.offset) as usize;
            if keep > 0 {
                bytes.drain(..bytes.len() - keep);
                self.held += keep;
                budget.held += keep;
                self.waiting.insert(self.offset, bytes);
            }
        }
    }

    /// Stores the parts of `data` (at `start`) not covered by waiting bytes.
    fn insert(
        &mut self,
        start: u64,
        data: &[u8],
        budget: &mut Budget,
        stats: &mut ReassemblyStats,
    ) {
        if data.is_empty() {
            return;
        }
        let end = start + data.len() as u64;
        // Waiting entries never overlap, so walking back from `end` the overlapping ones come
        // first and the first entry ending at or before `start` ends the walk.
        let mut covering: Vec<(u64, u64)> = self
            .waiting
            .range(..end)
            .rev()
            .map(|(&k, v)| (k, k + v.len() as u64))
            .take_while(|&(_, e)| e > start)
            .collect();
        covering.reverse();
        let mut conflict = false;
        let mut pieces = Vec::new();
        let mut pos = start;
        for &(ws, we) in &covering {
            if ws > pos {
                pieces.push((pos, ws));
            }
            let (a, b) = (ws.max(start), we.min(end));
            let old = &self.waiting[&ws][(a - ws) as usize..(b - ws) as usize];
            conflict |= old != &data[(a - start) as usize..(b - start) as usize];
            pos = pos.max(we);
        }
        if pos < end {
            pieces.push((pos, end));
        }
        if !covering.is_empty() {
            stats.overlaps += 1;
            stats.overlap_conflicts += u64::from(conflict);
        }
        for (a, b) in pieces {
            let bytes = data[(a - start) as usize..(b - start) as usize].to_vec();
            self.held += bytes.len();
            budget.held += bytes.len();
            self.waiting.insert(a, bytes);
        }
    }

    /// Delivers the waiting bytes that start at the next offset.
    fn drain(&mut self, budget: &mut Budget, out: &mut impl FnMut(Chunk<'_>)) {
        while let Some(entry) = self.waiting.first_entry() {
            if *entry.key() != self.offset {
                break;
            }
            let bytes = entry.remove();
            self.held -= bytes.len();
            budget.held -= bytes.len();
            out(Chunk::Data(&bytes));
            self.offset += bytes.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a stream delivered, owned: data runs joined, gaps as `G(n)`.
    #[derive(Debug, PartialEq)]
    enum Got {
        D(Vec<u8>),
        G(u64),
    }

    struct Harness {
        stream: Stream,
        budget: Budget,
        stats: ReassemblyStats,
        got: Vec<Got>,
    }

    impl Harness {
        fn new(max_stream: usize, max_total: usize) -> Self {
            Harness {
                stream: Stream::new(),
                budget: Budget::new(max_stream, max_total),
                stats: ReassemblyStats::default(),
                got: Vec::new(),
            }
        }

        fn seg(&mut self, seq: u32, data: &[u8]) -> &mut Self {
            self.full(seq, false, data, 0)
        }

        fn full(&mut self, seq: u32, syn: bool, data: &[u8], missing: u32) -> &mut Self {
            let got = &mut self.got;
            let seg = Segment {
                seq,
                syn,
                data,
                missing,
            };
            self.stream
                .push(seg, &mut self.budget, &mut self.stats, &mut |c| {
                    push(got, c)
                });
            assert_eq!(
                self.budget.held,
                self.stream.held(),
                "budget follows the stream"
            );
            self
        }

        fn flush(&mut self) -> &mut Self {
            let got = &mut self.got;
            self.stream
                .flush(&mut self.budget, &mut self.stats, &mut |c| push(got, c));
            assert_eq!(self.budget.held, 0);
            self
        }
    }

    fn push(got: &mut Vec<Got>, c: Chunk<'_>) {
        match (got.last_mut(), c) {
            (Some(Got::D(v)), Chunk::Data(d)) => v.extend_from_slice(d),
            (_, Chunk::Data(d)) => got.push(Got::D(d.to_vec())),
            (_, Chunk::Gap(n)) => got.push(Got::G(n)),
        }
    }

    #[test]
    fn in_order_after_syn() {
        let mut h = Harness::new(1 << 16, 1 << 20);
        h.full(999, true, b"", 0)
            .seg(1000, b"GET ")
            .seg(1004, b"/ HTTP");
        assert_eq!(h.got, [Got::D(b"GET / HTTP".to_vec())]);
        assert_eq!((h.stats.segments, h.stats.out_of_order), (2, 0));
    }

    #[test]
    fn out_of_order_waits_and_comes_out_in_order() {
        let mut h = Harness::new(1 << 16, 1 << 20);
        h.full(99, true, b"", 0).seg(106, b"ghi").seg(103, b"def");
        assert!(h.got.is_empty());
        assert_eq!(h.stream.held(), 6);
        h.seg(100, b"abc");
        assert_eq!(h.got, [Got::D(b"abcdefghi".to_vec())]);
        assert_eq!((h.stats.out_of_order, h.budget.held), (2, 0));
    }

    #[test]
    fn retransmitted_and_overlapping_segments_first_wins() {
        let mut h = Harness::new(1 << 16, 1 << 20);
        h.seg(0, b"abcd").seg(0, b"abcd");
        assert_eq!(h.stats.retransmitted, 1);
        // Waiting "ijkl" at 8; a segment 6..12 with other bytes over 8..12 keeps "ijkl".
        h.seg(8, b"ijkl").seg(6, b"ghXXXX");
        assert_eq!((h.stats.overlaps, h.stats.overlap_conflicts), (1, 1));
        // Overlapping the delivered "cd": what was delivered stands, "ef" fills the hole.
        h.seg(2, b"ZZef");
        assert_eq!(h.got, [Got::D(b"abcdefghijkl".to_vec())]);
        // The same bytes again overlapping waiting ones: an overlap, no conflict.
        h.seg(14, b"op").seg(13, b"nop");
        assert_eq!((h.stats.overlaps, h.stats.overlap_conflicts), (2, 1));
        h.seg(12, b"m");
        assert_eq!(h.got, [Got::D(b"abcdefghijklmnop".to_vec())]);
    }

    #[test]
    fn per_stream_cap_gives_up_the_missing_range_as_a_gap() {
        let mut h = Harness::new(8, 1 << 20);
        h.seg(0, b"ab").seg(10, b"klmn").seg(14, b"opqr");
        assert_eq!(h.got, [Got::D(b"ab".to_vec())], "8 bytes wait");
        h.seg(20, b"u");
        assert_eq!(
            h.got,
            [
                Got::D(b"ab".to_vec()),
                Got::G(8),
                Got::D(b"klmnopqr".to_vec())
            ]
        );
        assert_eq!(h.stream.held(), 1, "'u' still waits for 's' and 't'");
        assert_eq!((h.stats.gaps, h.stats.gap_bytes, h.stats.capped), (1, 8, 1));
        // The bytes of the gap arriving late are old.
        h.seg(2, b"cdefghij");
        assert_eq!(h.stats.retransmitted, 1);
        h.flush();
        assert_eq!(h.got.last(), Some(&Got::D(b"u".to_vec())));
        assert_eq!(h.got[h.got.len() - 2], Got::G(2));
    }

    #[test]
    fn total_cap_is_shared_by_streams() {
        let mut budget = Budget::new(100, 10);
        let mut stats = ReassemblyStats::default();
        let (mut a, mut b) = (Stream::new(), Stream::new());
        let mut gaps = 0;
        let mut count = |c: Chunk<'_>| gaps += u64::from(matches!(c, Chunk::Gap(_)));
        a.push(
            Segment {
                seq: 0,
                syn: false,
                data: b"x",
                missing: 0,
            },
            &mut budget,
            &mut stats,
            &mut count,
        );
        a.push(
            Segment {
                seq: 5,
                syn: false,
                data: b"123456",
                missing: 0,
            },
            &mut budget,
            &mut stats,
            &mut count,
        );
        b.push(
            Segment {
                seq: 0,
                syn: false,
                data: b"y",
                missing: 0,
            },
            &mut budget,
            &mut stats,
            &mut count,
        );
        assert_eq!(budget.held, 6);
        // Stream b goes over the total: b gives up its own wait, a keeps its bytes.
        b.push(
            Segment {
                seq: 3,
                syn: false,
                data: b"abcde",
                missing: 0,
            },
            &mut budget,
            &mut stats,
            &mut count,
        );
        assert_eq!((budget.held, a.held(), b.held()), (6, 6, 0));
        assert_eq!((gaps, stats.capped), (1, 1));
        a.release(&mut budget);
        assert_eq!(budget.held, 0);
    }

    #[test]
    fn a_segment_cut_by_the_snap_length_ends_in_a_gap() {
        let mut h = Harness::new(1 << 16, 1 << 20);
        h.full(0, false, b"abc", 5).seg(8, b"ijk");
        assert_eq!(
            h.got,
            [Got::D(b"abc".to_vec()), Got::G(5), Got::D(b"ijk".to_vec())]
        );
        assert_eq!(h.stats.capped, 0);
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut h = Harness::new(1 << 16, 1 << 20);
        h.seg(u32::MAX - 1, b"ab").seg(2, b"ef").seg(0, b"cd");
        assert_eq!(h.got, [Got::D(b"abcdef".to_vec())]);
        assert_eq!(h.stream.offset(), 6);
    }

    #[test]
    fn flush_delivers_what_waits_after_named_gaps() {
        let mut h = Harness::new(1 << 16, 1 << 20);
        h.seg(0, b"a").seg(3, b"d").seg(7, b"h");
        h.flush();
        assert_eq!(
            h.got,
            [
                Got::D(b"a".to_vec()),
                Got::G(2),
                Got::D(b"d".to_vec()),
                Got::G(3),
                Got::D(b"h".to_vec())
            ]
        );
        assert_eq!((h.stats.gaps, h.stats.gap_bytes, h.stats.capped), (2, 5, 0));
    }
}
