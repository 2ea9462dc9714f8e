//! A listener: one reader of a ring, with its own cursor.
use std::ops::ControlFlow;
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use trawl_capture::{Direction, Interface, LinkType, PacketRecord};

use crate::layout::{
    RecordHeader, Slot, CURSOR_JOINING, CURSOR_LEFT, FLAG_CLOSED, HELD, IFACES, MODE_LOSSLESS,
    MODE_LOSSY, REC_HDR, SLOTS, SLOT_ACTIVE, SLOT_CLAIMED, SLOT_FREE, SPECIAL,
};
use crate::segment::{At, Segment};
use crate::{sys, Error, ListenerStats, Mode, Recv};

/// Checks of the write position before a waiting listener sleeps on the futex.
const SPINS: u32 = 128;
/// Longest single futex sleep; the listener checks the producer is alive after each.
const SLEEP: Duration = Duration::from_millis(250);

/// A reader of a ring with its own cursor: [`Mode::Lossless`] listeners hold the producer back,
/// [`Mode::Lossy`] ones are skipped ahead and count what they missed.
///
/// Read per packet with [`Listener::next`] (non-blocking), [`Listener::wait`] (blocking, with a
/// timeout) or [`Listener::for_each`] (until the ring closes); or as a byte stream of whole
/// records with [`Listener::block`] and [`Listener::consume`]. Records borrow the listener, so
/// the next call (which may move the lease) cannot happen while one is alive.
///
/// Dropping the listener frees its slot.
pub struct Listener {
    seg: Arc<Segment>,
    slot: usize,
    mode: Mode,
    /// The next unread record (a record boundary, possibly the end of the buffer's usable part).
    pos: u64,
    /// The published write position last seen.
    end: u64,
    /// Whether the cursor carries the lease bit.
    held: bool,
    /// The highest request (`want`) of the producer this listener has acted on.
    acked: u64,
    /// Records and bytes before the listener's start position since the ring started.
    start_records: u64,
    start_bytes: u64,
    /// The producer's `skipped_*` totals this listener has accounted for.
    seen_skipped_records: u64,
    seen_skipped_bytes: u64,
    links: [LinkType; IFACES],
    links_len: usize,
    stats: ListenerStats,
    /// The block last returned by `block`: its end and its records and bytes.
    block: Option<(u64, u64, u64)>,
    producer_pid: u32,
    producer_start: u64,
    last_liveness: Instant,
}

impl Listener {
    /// Claims a free slot of `seg` and starts at the current write position.
    pub(crate) fn join(seg: Arc<Segment>, mode: Mode) -> Result<Listener, Error> {
        let h = seg.header();
        let slot = (0..SLOTS)
            .find(|&i| {
                h.slots[i]
                    .state
                    .compare_exchange(SLOT_FREE, SLOT_CLAIMED, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })
            .ok_or(Error::NoFreeSlot { slots: SLOTS })?;
        let s = &h.slots[slot];
        let pid = sys::own_pid();
        s.mode.store(
            match mode {
                Mode::Lossless => MODE_LOSSLESS,
                Mode::Lossy => MODE_LOSSY,
            },
            Ordering::Relaxed,
        );
        s.pid.store(pid, Ordering::Relaxed);
        s.pid_start
            .store(sys::process_start(pid).unwrap_or(0), Ordering::Relaxed);
        for c in [
            &s.records_read,
            &s.bytes_read,
            &s.missed_records,
            &s.missed_bytes,
            &s.skipped_records,
            &s.skipped_bytes,
        ] {
            c.store(0, Ordering::Relaxed);
        }
        s.cursor.store(CURSOR_JOINING, Ordering::Relaxed);
        s.state.store(SLOT_ACTIVE, Ordering::SeqCst);
        // Pairs with the fence at the start of the producer's scan: either that scan sees this
        // slot active (and starts it itself), or the write position read below is at least the
        // one the scan bounded its writes with. See "Joining" in docs/specs/ring.md.
        fence(Ordering::SeqCst);
        let (start, records, bytes) = loop {
            let seq = h.pub_seq.load(Ordering::Acquire);
            if seq & 1 == 0 {
                let w = h.write_pos.load(Ordering::SeqCst);
                let r = h.pub_records.load(Ordering::Relaxed);
                let b = h.pub_bytes.load(Ordering::Relaxed);
                fence(Ordering::Acquire);
                if h.pub_seq.load(Ordering::Relaxed) == seq {
                    break (w, r, b);
                }
            }
            std::hint::spin_loop();
        };
        // Start holding the lease, so that the producer leaves the cursor alone until the
        // counts below are in the slot.
        let (pos, start_records, start_bytes) = match s.cursor.compare_exchange(
            CURSOR_JOINING,
            start | HELD,
            Ordering::SeqCst,
            Ordering::SeqCst,
        ) {
            Ok(_) => (start, records, bytes),
            // The producer started us first, at its published position (holding the lease for
            // us), and left that position's counts in the slot.
            Err(c) => (
                c & !HELD,
                s.join_records.load(Ordering::Relaxed),
                s.join_bytes.load(Ordering::Relaxed),
            ),
        };
        let producer_pid = h.producer_pid.load(Ordering::Relaxed);
        let producer_start = h.producer_start.load(Ordering::Relaxed);
        let mut l = Listener {
            seg,
            slot,
            mode,
            pos,
            end: pos,
            held: true,
            acked: 0,
            start_records,
            start_bytes,
            seen_skipped_records: 0,
            seen_skipped_bytes: 0,
            links: [LinkType(0); IFACES],
            links_len: 0,
            stats: ListenerStats::default(),
            block: None,
            producer_pid,
            producer_start,
            last_liveness: Instant::now(),
        };
        l.load_links();
        l.release();
        Ok(l)
    }

    #[inline]
    fn slot(&self) -> &Slot {
        &self.seg.header().slots[self.slot]
    }

    /// Non-blocking: the next record, [`Recv::Empty`] when the listener has read everything
    /// published, or [`Recv::Closed`] when it has and the producer closed the ring.
    ///
    /// The record borrows the listener; the ring keeps its bytes in place until the next call.
    // Not `Iterator::next`: the record borrows the listener (a lending read), and the result
    // tells "nothing yet" from "closed".
    #[allow(clippy::should_implement_trait)]
    #[inline]
    pub fn next(&mut self) -> Result<Recv<PacketRecord<'_>>, Error> {
        Ok(match self.advance()? {
            Recv::Ready(h) => Recv::Ready(self.take(h)),
            Recv::Empty => Recv::Empty,
            Recv::Closed => Recv::Closed,
        })
    }

    /// Like [`Listener::next`], but when nothing is published yet, sleeps until a record is
    /// (or the ring closes), at most `timeout`; [`Recv::Empty`] means the timeout passed.
    #[inline]
    pub fn wait(&mut self, timeout: Duration) -> Result<Recv<PacketRecord<'_>>, Error> {
        let mut deadline = None;
        loop {
            match self.advance()? {
                Recv::Ready(h) => return Ok(Recv::Ready(self.take(h))),
                Recv::Closed => return Ok(Recv::Closed),
                Recv::Empty => {
                    // The clock is read only when there is nothing to read.
                    let d = *deadline.get_or_insert_with(|| Instant::now() + timeout);
                    if !self.sleep_until(d)? {
                        return Ok(Recv::Empty);
                    }
                }
            }
        }
    }

    /// Calls `f` on every record until the ring is closed and drained (returns the number of
    /// records seen) or `f` breaks. Sleeps while nothing is published, like `pcap_loop`.
    pub fn for_each<F>(&mut self, mut f: F) -> Result<u64, Error>
    where
        F: FnMut(PacketRecord<'_>) -> ControlFlow<()>,
    {
        let mut n = 0;
        loop {
            match self.advance()? {
                Recv::Ready(h) => {
                    n += 1;
                    if f(self.take(h)).is_break() {
                        return Ok(n);
                    }
                }
                Recv::Closed => return Ok(n),
                Recv::Empty => {
                    let deadline = Instant::now() + Duration::from_secs(3600);
                    self.sleep_until(deadline)?;
                }
            }
        }
    }

    /// Non-blocking: the longest contiguous run of whole published records from the cursor on,
    /// as bytes in the ring's record format (see [`Block`]). It stays valid, and the producer
    /// stays off it, until [`Listener::consume`] (or any other reading call).
    pub fn block(&mut self) -> Result<Recv<Block<'_>>, Error> {
        let first = match self.advance()? {
            Recv::Ready(h) => h,
            Recv::Empty => return Ok(Recv::Empty),
            Recv::Closed => return Ok(Recv::Closed),
        };
        let start = self.pos;
        let mut p = start + first.len as u64;
        let mut records = 1;
        let mut bytes = first.caplen as u64;
        // Stop at the end of the buffer: at a wrap marker or a short tail, and also when a record
        // ends exactly at the end (the next one starts at offset 0 without a marker).
        while p < self.end && p & self.seg.mask != 0 {
            // SAFETY: `p < self.end` is published, and the lease (cursor <= start) keeps the
            // producer off `start..end`.
            match unsafe { self.seg.at(p)? } {
                At::Wrap(_) => break,
                At::Record(h) => {
                    p += h.len as u64;
                    records += 1;
                    bytes += h.caplen as u64;
                }
            }
        }
        let o = (start & self.seg.mask) as usize;
        if p > self.end || o + (p - start) as usize > self.seg.cap_usize() {
            return Err(Error::Corrupt {
                position: p,
                detail: "record runs past the write position or the buffer",
            });
        }
        self.block = Some((p, records, bytes));
        // SAFETY: `start..p` are whole records inside one turn of the buffer (walking stopped at
        // any wrap), published, and under this listener's lease until `consume` or the next
        // reading call, neither of which can run while the returned borrow of `self` lives.
        let data = unsafe { self.seg.bytes(o, (p - start) as usize) };
        Ok(Recv::Ready(Block {
            data,
            links: &self.links[..self.links_len],
            records,
        }))
    }

    /// Marks the first `len` bytes of the last [`Listener::block`] as read and gives up the
    /// lease. `len` must be a record boundary inside that block (the block's length, or the
    /// end of one of the records [`Block::records`] yields).
    ///
    /// # Panics
    /// Panics when no block is outstanding or `len` is not a record boundary inside it: a bug in
    /// the caller.
    pub fn consume(&mut self, len: usize) {
        let (end, records, bytes) = self
            .block
            .take()
            .expect("consume without an outstanding block");
        let to = self.pos + len as u64;
        assert!(to <= end, "consume({len}) past the end of the block");
        let (records, bytes) = if to == end {
            (records, bytes)
        } else {
            // SAFETY: `pos..end` is published and under the lease.
            let w = unsafe { self.seg.walk(self.pos, to, end) };
            match w {
                Ok(w) if w.pos == to => (w.records, w.bytes),
                _ => panic!("consume({len}) is not a record boundary of the block"),
            }
        };
        self.pos = to;
        self.stats.records_read += records;
        self.stats.bytes_read += bytes;
        self.release();
    }

    /// Gives up the lease, if held, so that a lossy listener that will not call into the ring
    /// for a while cannot hold the producer up at all. Reading calls take it again.
    pub fn release(&mut self) {
        self.block = None;
        if self.held {
            self.held = false;
            self.store_cursor(self.pos);
        }
    }

    /// This listener's counters. `records_read + records_missed` counts every record published
    /// since the listener joined and up to its position.
    pub fn stats(&self) -> ListenerStats {
        let s = self.slot();
        let mut st = self.stats;
        st.records_missed += s.skipped_records.load(Ordering::Relaxed);
        st.bytes_missed += s.skipped_bytes.load(Ordering::Relaxed);
        st
    }

    /// How the listener reads.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Index of its slot in the ring header.
    pub fn slot_index(&self) -> usize {
        self.slot
    }

    /// Its position: bytes of the ring's stream before the next record it will read.
    pub fn position(&self) -> u64 {
        if self.held {
            self.pos
        } else {
            self.pos
                .max(self.slot().cursor.load(Ordering::Relaxed) & !HELD)
        }
    }

    /// Published bytes not read yet.
    pub fn backlog(&self) -> u64 {
        self.seg
            .header()
            .write_pos
            .load(Ordering::Acquire)
            .saturating_sub(self.position())
    }

    /// The ring's interface table as far as the producer filled it.
    pub fn interfaces(&self) -> Vec<Interface> {
        crate::read_interfaces(self.seg.header())
    }

    /// How many entries the ring's interface table has (a cheap check of whether
    /// [`Listener::interfaces`] changed: the producer only adds entries, each before the
    /// first record that names it).
    pub fn interface_count(&self) -> usize {
        (self.seg.header().iface_count.load(Ordering::Acquire) as usize).min(IFACES)
    }

    /// Sleeps until something is published past the listener's position or the ring closes,
    /// at most `timeout`, without reading anything: for a reader that then takes what came
    /// with [`Listener::block`]. Returns whether anything came (or the ring closed); gives up
    /// the lease first, as the blocking reads do.
    pub fn wait_ready(&mut self, timeout: Duration) -> Result<bool, Error> {
        self.release();
        self.sleep_until(Instant::now() + timeout)
    }

    /// Whether the producer closed the ring (records may remain to be read).
    pub fn is_closed(&self) -> bool {
        self.seg.header().flags.load(Ordering::Acquire) & FLAG_CLOSED != 0
    }

    /// Positions the listener on the next record, under the lease, and returns its header.
    ///
    /// While reading, the lease follows the listener record by record: before a record is handed
    /// out, the cursor is set to its start (one plain release store), which gives up the records
    /// before it. So the producer sees where the listener really is, and a lossy listener's
    /// lease covers only the record the application holds.
    #[inline]
    fn advance(&mut self) -> Result<Recv<RecordHeader>, Error> {
        self.block = None;
        loop {
            if self.held {
                if self.pos < self.end {
                    let want = self.slot().want.load(Ordering::Relaxed);
                    if want > self.acked && self.on_want(want)? {
                        continue;
                    }
                    // SAFETY: `pos < end` is published, and the lease (cursor <= pos) keeps the
                    // producer off it.
                    match unsafe { self.seg.at(self.pos)? } {
                        At::Record(h) => {
                            // Release: pairs with the producer's acquire load of the cursor, so
                            // our reads of the records before `pos` happen before it overwrites
                            // them.
                            self.slot().cursor.store(self.pos | HELD, Ordering::Release);
                            return Ok(Recv::Ready(h));
                        }
                        At::Wrap(skip) => {
                            self.pos += skip;
                            continue;
                        }
                    }
                }
                // Everything seen is read: keep the lease over the next batch if there is one.
                let end = self.seg.header().write_pos.load(Ordering::Acquire);
                if end > self.pos {
                    self.end = end;
                    continue;
                }
                self.release();
            } else if self.take_lease()? {
                continue;
            }
            let h = self.seg.header();
            if h.flags.load(Ordering::Acquire) & FLAG_CLOSED != 0
                && h.write_pos.load(Ordering::Acquire) <= self.position()
            {
                return Ok(Recv::Closed);
            }
            return Ok(Recv::Empty);
        }
    }

    /// Builds the record view of header `h` at `self.pos` and moves past it.
    #[inline]
    fn take(&mut self, h: RecordHeader) -> PacketRecord<'_> {
        let o = (self.pos & self.seg.mask) as usize;
        self.pos += h.len as u64;
        self.stats.records_read += 1;
        self.stats.bytes_read += h.caplen as u64;
        if self.stats.records_read.is_multiple_of(4096) {
            self.flush_stats();
        }
        let iface = h.iface;
        if iface as usize >= self.links_len {
            self.load_links();
        }
        let link_type = self.links[..self.links_len].get(iface as usize).copied();
        // SAFETY: `seg.at` validated that the record (header and `caplen` bytes) lies inside the
        // buffer; it is published and under this listener's lease, which cannot move while the
        // returned borrow of `self` lives.
        let data = unsafe { self.seg.bytes(o + REC_HDR, h.caplen as usize) };
        PacketRecord {
            ts_ns: h.ts_ns,
            wire_len: h.wire_len,
            iface,
            direction: match h.direction {
                1 => Direction::Inbound,
                2 => Direction::Outbound,
                _ => Direction::Unknown,
            },
            link_type: link_type.unwrap_or(LinkType(u16::MAX)),
            data,
        }
    }

    /// Takes the lease when there is something to read. Returns whether it did.
    fn take_lease(&mut self) -> Result<bool, Error> {
        let h = self.seg.header();
        let slot = &h.slots[self.slot];
        let end = h.write_pos.load(Ordering::Acquire);
        loop {
            let c = slot.cursor.load(Ordering::Acquire);
            if c & SPECIAL != 0 {
                return Err(Error::Evicted { slot: self.slot });
            }
            if c > self.pos {
                // The producer moved the cursor over our backlog while we did not hold the
                // lease. Take note of what it counted as missed (it adds that right after
                // moving the cursor, under `busy`); if it moves the cursor again before our
                // compare-exchange below, that fails and we come back here.
                while slot.busy.load(Ordering::SeqCst) != 0 {
                    std::hint::spin_loop();
                }
                self.seen_skipped_records = slot.skipped_records.load(Ordering::Acquire);
                self.seen_skipped_bytes = slot.skipped_bytes.load(Ordering::Acquire);
                self.pos = c;
            }
            if c >= end {
                return Ok(false);
            }
            // SeqCst: the producer's skip is a compare-exchange on the same word, so exactly one
            // of the two wins and the loser sees the winner's value.
            if slot
                .cursor
                .compare_exchange(c, c | HELD, Ordering::SeqCst, Ordering::Acquire)
                .is_ok()
            {
                self.pos = c;
                self.end = end;
                self.held = true;
                return Ok(true);
            }
        }
    }

    /// The producer asked this listener to move to `want` (it waits for us). Returns whether
    /// the position moved.
    #[cold]
    #[inline(never)]
    fn on_want(&mut self, want: u64) -> Result<bool, Error> {
        match self.mode {
            Mode::Lossless => {
                // Report progress (and wake the producer) only once we are past `want`, so the
                // producer gets a useful amount of room per wake-up.
                if self.pos >= want {
                    self.acked = want;
                    self.store_cursor(self.pos | HELD);
                }
                Ok(false)
            }
            Mode::Lossy => {
                let before = self.pos;
                let (to, to_records, to_bytes) = self.read_request();
                if self.pos < to {
                    // Skip to the checkpoint the producer chose. Its counts minus ours at `pos`
                    // are the records and bytes in between, which we never read.
                    let (at_records, at_bytes) = self.cum();
                    self.stats.records_missed += to_records.saturating_sub(at_records);
                    self.stats.bytes_missed += to_bytes.saturating_sub(at_bytes);
                    self.pos = to;
                    self.end = self
                        .end
                        .max(self.seg.header().write_pos.load(Ordering::Acquire));
                }
                self.acked = want.max(to);
                self.store_cursor(self.pos | HELD);
                Ok(self.pos != before)
            }
        }
    }

    /// The producer's current request: position and cum counts there.
    fn read_request(&self) -> (u64, u64, u64) {
        let slot = self.slot();
        loop {
            let seq = slot.req_seq.load(Ordering::Acquire);
            if seq & 1 == 0 {
                let to = slot.want.load(Ordering::Relaxed);
                let records = slot.want_records.load(Ordering::Relaxed);
                let bytes = slot.want_bytes.load(Ordering::Relaxed);
                fence(Ordering::Acquire);
                if slot.req_seq.load(Ordering::Relaxed) == seq {
                    return (to, records, bytes);
                }
            }
            std::hint::spin_loop();
        }
    }

    /// Records and bytes before `self.pos` since the ring started: everything before our start,
    /// plus what we read, skipped ourselves, and saw the producer skip.
    fn cum(&self) -> (u64, u64) {
        (
            self.start_records
                + self.stats.records_read
                + self.stats.records_missed
                + self.seen_skipped_records,
            self.start_bytes
                + self.stats.bytes_read
                + self.stats.bytes_missed
                + self.seen_skipped_bytes,
        )
    }

    /// Stores the cursor (with or without the lease bit), publishes the counters, and wakes the
    /// producer if it sleeps waiting for space.
    fn store_cursor(&mut self, value: u64) {
        self.flush_stats();
        let h = self.seg.header();
        let slot = &h.slots[self.slot];
        if value & HELD == 0 {
            // What the producer needs to count what it skips while we do not hold the lease;
            // published by the release store of the cursor below.
            let (records, bytes) = self.cum();
            slot.cum_records.store(records, Ordering::Relaxed);
            slot.cum_bytes.store(bytes, Ordering::Relaxed);
            slot.seen_skipped_records
                .store(self.seen_skipped_records, Ordering::Relaxed);
            slot.seen_skipped_bytes
                .store(self.seen_skipped_bytes, Ordering::Relaxed);
        }
        // SeqCst store then SeqCst load of the waiter count: paired with the producer's SeqCst
        // increment of `space_waiters` followed by a re-check of this cursor, so either the
        // producer sees the new cursor or this thread sees it waiting and wakes it.
        slot.cursor.store(value, Ordering::SeqCst);
        if h.space_waiters.load(Ordering::SeqCst) != 0 {
            h.space_seq.fetch_add(1, Ordering::SeqCst);
            sys::futex_wake_all(&h.space_seq);
        }
    }

    /// Copies the counters to the slot, where the producer and other processes read them.
    #[cold]
    fn flush_stats(&self) {
        let slot = self.slot();
        slot.records_read
            .store(self.stats.records_read, Ordering::Relaxed);
        slot.bytes_read
            .store(self.stats.bytes_read, Ordering::Relaxed);
        slot.missed_records
            .store(self.stats.records_missed, Ordering::Relaxed);
        slot.missed_bytes
            .store(self.stats.bytes_missed, Ordering::Relaxed);
    }

    /// Sleeps until something is published past our position, the ring closes, or `deadline`.
    /// Returns `false` on timeout. The lease is not held while sleeping.
    fn sleep_until(&mut self, deadline: Instant) -> Result<bool, Error> {
        debug_assert!(!self.held);
        let seg = self.seg.clone();
        let h = seg.header();
        let ready = |l: &Listener| {
            h.write_pos.load(Ordering::SeqCst) > l.position()
                || h.flags.load(Ordering::SeqCst) & FLAG_CLOSED != 0
        };
        for _ in 0..SPINS {
            if ready(self) {
                return Ok(true);
            }
            std::hint::spin_loop();
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            h.data_waiters.fetch_add(1, Ordering::SeqCst);
            let seq = h.data_seq.load(Ordering::SeqCst);
            if ready(self) {
                h.data_waiters.fetch_sub(1, Ordering::SeqCst);
                return Ok(true);
            }
            sys::futex_wait(&h.data_seq, seq, (deadline - now).min(SLEEP));
            h.data_waiters.fetch_sub(1, Ordering::SeqCst);
            if ready(self) {
                return Ok(true);
            }
            if self.slot().cursor.load(Ordering::Relaxed) & SPECIAL != 0 {
                return Err(Error::Evicted { slot: self.slot });
            }
            if self.last_liveness.elapsed() >= Duration::from_secs(1) {
                self.last_liveness = Instant::now();
                if sys::process_gone(self.producer_pid, self.producer_start) {
                    return Err(Error::ProducerGone {
                        pid: self.producer_pid,
                    });
                }
            }
        }
    }

    fn load_links(&mut self) {
        let h = self.seg.header();
        let n = (h.iface_count.load(Ordering::Acquire) as usize).min(IFACES);
        for (i, e) in h.ifaces[..n].iter().enumerate() {
            self.links[i] = LinkType(e.link_type.load(Ordering::Relaxed) as u16);
        }
        self.links_len = n;
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let h = self.seg.header();
        let slot = &h.slots[self.slot];
        let mut c = slot.cursor.load(Ordering::SeqCst);
        loop {
            if c & SPECIAL != 0 && c != CURSOR_JOINING {
                // Reclaimed by the producer: the slot is not ours any more.
                return;
            }
            match slot
                .cursor
                .compare_exchange(c, CURSOR_LEFT, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => break,
                Err(now) => c = now,
            }
        }
        // A producer that skipped us just before may still be adding to our counters.
        while slot.busy.load(Ordering::SeqCst) != 0 {
            std::hint::spin_loop();
        }
        slot.state.store(SLOT_FREE, Ordering::Release);
        if h.space_waiters.load(Ordering::SeqCst) != 0 {
            h.space_seq.fetch_add(1, Ordering::SeqCst);
            sys::futex_wake_all(&h.space_seq);
        }
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("slot", &self.slot)
            .field("mode", &self.mode)
            .field("pos", &self.pos)
            .field("held", &self.held)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// A contiguous run of whole records as they lie in the ring (the record format of
/// `docs/specs/ring.md`: a 24-byte header, the captured bytes, padding to 8 bytes), for writers
/// that copy large blocks. Borrowed from the listener until [`Listener::consume`].
#[derive(Clone, Copy, Debug)]
pub struct Block<'a> {
    data: &'a [u8],
    links: &'a [LinkType],
    records: u64,
}

impl<'a> Block<'a> {
    /// The raw bytes (whole records, 8-byte aligned in memory).
    pub fn bytes(&self) -> &'a [u8] {
        self.data
    }

    /// Bytes in the block.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// Never true: a block holds at least one record.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Number of records in the block.
    pub fn record_count(&self) -> u64 {
        self.records
    }

    /// The records, each with the offset just past it in [`Block::bytes`] (a valid argument to
    /// [`Listener::consume`]).
    pub fn records(&self) -> BlockRecords<'a> {
        BlockRecords {
            data: self.data,
            links: self.links,
            at: 0,
        }
    }
}

/// Iterator over a [`Block`]'s records: `(record, end offset)`.
#[derive(Clone, Debug)]
pub struct BlockRecords<'a> {
    data: &'a [u8],
    links: &'a [LinkType],
    at: usize,
}

impl<'a> Iterator for BlockRecords<'a> {
    type Item = (PacketRecord<'a>, usize);

    fn next(&mut self) -> Option<Self::Item> {
        let rest = self.data.get(self.at..)?;
        let head = rest.get(..REC_HDR)?;
        let u32_at = |i: usize| u32::from_ne_bytes(head[i..i + 4].try_into().unwrap());
        let len = u32_at(0) as usize;
        let caplen = u32_at(4) as usize;
        let data = rest.get(REC_HDR..REC_HDR + caplen)?;
        if len < REC_HDR + caplen || len > rest.len() {
            return None;
        }
        let iface = u16::from_ne_bytes([head[20], head[21]]);
        let rec = PacketRecord {
            ts_ns: u64::from_ne_bytes(head[8..16].try_into().unwrap()),
            wire_len: u32_at(16),
            iface,
            direction: match head[22] {
                1 => Direction::Inbound,
                2 => Direction::Outbound,
                _ => Direction::Unknown,
            },
            link_type: self
                .links
                .get(iface as usize)
                .copied()
                .unwrap_or(LinkType(u16::MAX)),
            data,
        };
        self.at += len;
        Some((rec, self.at))
    }
}
