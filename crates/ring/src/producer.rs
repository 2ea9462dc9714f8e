//! The producer: the one writer of a ring.
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use trawl_capture::{Batch, Interface, PacketRecord, RecordMeta};

use crate::dedup::Dedup;
use crate::layout::{
    self, counter, Header, RecordHeader, CURSOR_JOINING, FLAG_CLOSED, HELD, IFACES, IFACE_NAME_LEN,
    MODE_LOSSY, REC_HDR, SLOTS, SLOT_ACTIVE, SLOT_FREE, SPECIAL,
};
use crate::segment::Segment;
use crate::{sys, Error, ListenerInfo, ProducerStats, Ring, RingConfig, SharedRing};

/// Spins of `spin_loop` before the producer sleeps on the space futex.
const SPINS: u32 = 256;
/// Longest single futex sleep; the producer re-checks its listener (and its liveness) after it.
const SLEEP: Duration = Duration::from_millis(20);

/// Checkpoints the producer remembers (a few turns of the ring at the default spacing).
const CHECKPOINTS: usize = 4096;

/// Counters kept in plain integers on the hot path and copied to the header at each publish.
#[derive(Clone, Copy, Debug, Default)]
struct Counters {
    c: [u64; counter::COUNT],
}

/// A published position with the number of records (and their captured bytes) before it since
/// the ring started.
#[derive(Clone, Copy, Debug, Default)]
struct Checkpoint {
    pos: u64,
    records: u64,
    bytes: u64,
}

/// Recent publish positions with their cumulative counts, oldest first, in a fixed ring: lets
/// the producer tell a lossy listener exactly how many records lie between two positions
/// without reading them.
struct Checkpoints {
    entries: Box<[Checkpoint]>,
    head: usize,
    len: usize,
    /// Minimum distance between two checkpoints, so the table spans at least two turns.
    every: u64,
}

impl Checkpoints {
    fn new(cap: u64) -> Self {
        Checkpoints {
            entries: vec![Checkpoint::default(); CHECKPOINTS].into_boxed_slice(),
            head: 0,
            len: 0,
            every: (2 * cap / CHECKPOINTS as u64).max(1),
        }
    }

    fn get(&self, i: usize) -> Checkpoint {
        self.entries[(self.head + i) % CHECKPOINTS]
    }

    fn add(&mut self, cp: Checkpoint) {
        if self.len > 0 && cp.pos < self.get(self.len - 1).pos + self.every {
            return;
        }
        if self.len == CHECKPOINTS {
            self.head = (self.head + 1) % CHECKPOINTS;
            self.len -= 1;
        }
        self.entries[(self.head + self.len) % CHECKPOINTS] = cp;
        self.len += 1;
    }

    /// The first checkpoint at or after `target`, if any.
    fn at_or_after(&self, target: u64) -> Option<Checkpoint> {
        let (mut lo, mut hi) = (0, self.len);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.get(mid).pos < target {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        (lo < self.len).then(|| self.get(lo))
    }
}

/// Writes records into a ring. There is exactly one per ring; it is `Send` (move it to the
/// capture thread) but not `Clone`.
///
/// Records become visible to listeners at [`Producer::publish`], all of the batch at once.
/// Dropping the producer closes the ring (and removes a shared ring's file name; processes that
/// have it mapped keep reading until they see the end).
pub struct Producer {
    seg: Arc<Segment>,
    /// End of what has been written (published or not).
    w: u64,
    /// End of what has been published, with the records and bytes before it.
    published: u64,
    pub_records: u64,
    pub_bytes: u64,
    checkpoints: Checkpoints,
    /// Every listener's cursor was at or beyond this at the last scan: the producer may write
    /// positions below `limit + cap` without looking at the slots again.
    limit: u64,
    /// Largest caplen stored; longer packets are truncated to it.
    max_caplen: usize,
    slack: u64,
    dead_after: Duration,
    counters: Counters,
    dedup: Option<Dedup>,
    iface_count: usize,
    closed: bool,
    own_pid: u32,
    last_sweep: Instant,
}

impl Producer {
    /// Creates an in-process ring (anonymous memory). Listeners join through
    /// [`Producer::ring`].
    pub fn new(config: &RingConfig) -> Result<Producer, Error> {
        let (cap, max_record, header_len) = config.validate()?;
        let map = Segment::anonymous(header_len + cap)?;
        let seg = Segment::init(map, None, header_len, cap, max_record);
        Ok(Self::with_segment(seg, config))
    }

    /// Creates a shared ring `name`, in the file [`SharedRing::path`]`(name)`
    /// (`/dev/shm/trawl-ring-NAME`). Other processes attach with [`SharedRing::attach`].
    ///
    /// A file left by a producer that is gone is replaced; one whose producer still runs is
    /// [`Error::InUse`].
    pub fn create_shared(name: &str, config: &RingConfig) -> Result<Producer, Error> {
        Self::create_at(&SharedRing::path(name)?, config)
    }

    /// Like [`Producer::create_shared`] with an explicit file path (e.g. on a hugetlbfs mount).
    pub fn create_at(path: &Path, config: &RingConfig) -> Result<Producer, Error> {
        let (cap, max_record, header_len) = config.validate()?;
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| Error::Io { path, source }
        };
        if path.exists() {
            match Segment::open(path) {
                Ok(old) => {
                    let h = old.header();
                    let pid = h.producer_pid.load(Ordering::Relaxed);
                    let start = h.producer_start.load(Ordering::Relaxed);
                    if !sys::process_gone(pid, start) {
                        return Err(Error::InUse {
                            path: path.to_path_buf(),
                            pid,
                        });
                    }
                }
                Err(Error::Io { source, .. }) => return Err(io(path)(source)),
                // Not a (current) ring: a leftover of some earlier build or a crash mid-create.
                Err(_) => {}
            }
            std::fs::remove_file(path).map_err(io(path))?;
        }
        // Build the ring under a temporary name and link it into place complete, so a client
        // never maps a half-initialised file and two producers cannot both win the name.
        let tmp = tmp_path(path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&tmp)
            .map_err(io(&tmp))?;
        let done = (|| {
            file.set_len((header_len + cap) as u64).map_err(io(&tmp))?;
            let map = Segment::map_file(&file, &tmp)?;
            let seg = Segment::init(map, Some(path.to_path_buf()), header_len, cap, max_record);
            std::fs::hard_link(&tmp, path).map_err(|source| {
                if source.kind() == std::io::ErrorKind::AlreadyExists {
                    Error::InUse {
                        path: path.to_path_buf(),
                        pid: 0,
                    }
                } else {
                    io(path)(source)
                }
            })?;
            Ok(seg)
        })();
        let _ = std::fs::remove_file(&tmp);
        Ok(Self::with_segment(done?, config))
    }

    fn with_segment(seg: Segment, config: &RingConfig) -> Producer {
        let cap = seg.cap;
        let max_caplen = seg.max_record as usize - REC_HDR;
        Producer {
            seg: Arc::new(seg),
            w: 0,
            published: 0,
            pub_records: 0,
            pub_bytes: 0,
            checkpoints: Checkpoints::new(cap),
            limit: 0,
            max_caplen: max_caplen & !(layout::ALIGN - 1),
            slack: config.slack.map_or(cap / 16, |s| s as u64).min(cap / 2),
            dead_after: config.dead_after,
            counters: Counters::default(),
            dedup: None,
            iface_count: 0,
            closed: false,
            own_pid: sys::own_pid(),
            last_sweep: Instant::now(),
        }
    }

    /// A handle listeners in this process join through. Cheap to clone, `Send + Sync`.
    pub fn ring(&self) -> Ring {
        Ring {
            seg: self.seg.clone(),
        }
    }

    /// Enables (or, with `None`, disables) duplicate removal: records [`Dedup`] calls duplicates
    /// are counted in [`ProducerStats::duplicates_dropped`] and never enter the ring.
    pub fn set_dedup(&mut self, dedup: Option<Dedup>) {
        self.dedup = dedup;
    }

    /// The duplicate filter, if enabled (for its counters).
    pub fn dedup(&self) -> Option<&Dedup> {
        self.dedup.as_ref()
    }

    /// Appends `iface` to the ring's interface table and returns its index. Records name
    /// interfaces by index; listeners in any process read the table.
    ///
    /// Names longer than 16 bytes are cut (at a character boundary).
    pub fn add_interface(&mut self, iface: &Interface) -> Result<u16, Error> {
        if self.iface_count >= IFACES {
            return Err(Error::TooManyInterfaces { max: IFACES });
        }
        let h = self.seg.header();
        let e = &h.ifaces[self.iface_count];
        e.link_type
            .store(iface.link_type.0 as u32, Ordering::Relaxed);
        e.snaplen.store(iface.snaplen, Ordering::Relaxed);
        let name = iface.name.as_deref().unwrap_or("");
        let mut n = name.len().min(IFACE_NAME_LEN);
        while !name.is_char_boundary(n) {
            n -= 1;
        }
        for (dst, &b) in e.name.iter().zip(name.as_bytes()[..n].iter()) {
            dst.store(b, Ordering::Relaxed);
        }
        e.name_len.store(n as u32, Ordering::Relaxed);
        self.iface_count += 1;
        // Release: a listener that reads the count reads the entry.
        h.iface_count
            .store(self.iface_count as u32, Ordering::Release);
        Ok(self.iface_count as u16 - 1)
    }

    /// Makes the ring's interface table start with `ifaces`: appends those not in it yet.
    /// Entries already in the table are not compared (sources only ever append interfaces).
    pub fn set_interfaces(&mut self, ifaces: &[Interface]) -> Result<(), Error> {
        for iface in ifaces.iter().skip(self.iface_count) {
            self.add_interface(iface)?;
        }
        Ok(())
    }

    /// Writes one record: `meta` gives timestamp, wire length, interface and direction
    /// (`meta.offset` and `meta.caplen` are ignored: `data` is the captured bytes). Returns
    /// `false` when the duplicate filter dropped it. Data longer than the ring's largest record
    /// is truncated (counted in [`ProducerStats::records_truncated`]).
    ///
    /// The record is visible to listeners after the next [`Producer::publish`]. Blocks while a
    /// lossless listener has not read the bytes this record needs (or a lossy one holds a lease
    /// on them: until its next call into the ring).
    #[inline]
    pub fn push(&mut self, meta: &RecordMeta, data: &[u8]) -> Result<bool, Error> {
        if self.closed {
            return Err(Error::Closed);
        }
        if meta.iface as usize >= self.iface_count {
            return Err(Error::UnknownInterface { iface: meta.iface });
        }
        if let Some(d) = &mut self.dedup {
            if d.is_duplicate(meta.ts_ns, meta.wire_len, data) {
                self.counters.c[counter::DUPLICATES_DROPPED] += 1;
                return Ok(false);
            }
        }
        let data = if data.len() > self.max_caplen {
            self.counters.c[counter::RECORDS_TRUNCATED] += 1;
            &data[..self.max_caplen]
        } else {
            data
        };
        let len = layout::record_len(data.len());
        let cap = self.seg.cap;
        let mut o = (self.w & self.seg.mask) as usize;
        let tail = cap as usize - o;
        if tail < len {
            // Does not fit before the end: mark the rest of the buffer as skipped and start
            // again at offset 0.
            self.reserve(self.w + (tail + len) as u64);
            if tail >= REC_HDR {
                // SAFETY: `o..o + REC_HDR` is inside the data area and, by `reserve`, no
                // listener holds a lease on it; the producer is the only writer.
                unsafe {
                    std::ptr::write(
                        self.seg.data_ptr(o) as *mut RecordHeader,
                        RecordHeader::default(),
                    )
                };
            }
            self.w += tail as u64;
            o = 0;
        } else {
            self.reserve(self.w + len as u64);
        }
        let header = RecordHeader {
            len: len as u32,
            caplen: data.len() as u32,
            ts_ns: meta.ts_ns,
            wire_len: meta.wire_len,
            iface: meta.iface,
            direction: meta.direction as u8,
            flags: 0,
        };
        // SAFETY: `o..o + len` lies inside the data area (len <= tail, or o == 0 and len <=
        // max_record < cap). `reserve` guaranteed that no listener reads these bytes: every
        // cursor is at or beyond `self.w + len - cap`, so they hold stale records nobody will
        // read again. Only this producer writes, through raw pointers; no reference to these
        // bytes exists. The padding word is zeroed first so no stale bytes leak into the ring.
        unsafe {
            let dst = self.seg.data_ptr(o);
            std::ptr::write(dst.add(len - 8) as *mut u64, 0);
            std::ptr::write(dst as *mut RecordHeader, header);
            std::ptr::copy_nonoverlapping(data.as_ptr(), dst.add(REC_HDR), data.len());
        }
        self.w += len as u64;
        self.counters.c[counter::RECORDS_WRITTEN] += 1;
        self.counters.c[counter::BYTES_WRITTEN] += data.len() as u64;
        Ok(true)
    }

    /// [`Producer::push`] of a packet as sources give it: its time, wire length, interface and
    /// direction, its bytes as captured. The one place a ring record's metadata is built from
    /// a packet (callers that renumber interfaces pass a record with theirs).
    #[inline]
    pub fn push_record(&mut self, pkt: &PacketRecord<'_>) -> Result<bool, Error> {
        let meta = RecordMeta {
            ts_ns: pkt.ts_ns,
            offset: 0,
            caplen: pkt.data.len() as u32,
            wire_len: pkt.wire_len,
            iface: pkt.iface,
            direction: pkt.direction,
        };
        self.push(&meta, pkt.data)
    }

    /// Writes every record of `batch` (first adding interfaces the ring does not have yet).
    /// Returns how many entered the ring (the rest were duplicates). Call
    /// [`Producer::publish`] afterwards.
    pub fn push_batch(&mut self, batch: &Batch<'_>) -> Result<usize, Error> {
        if batch.interfaces().len() > self.iface_count {
            self.set_interfaces(batch.interfaces())?;
        }
        let bytes = batch.bytes();
        let mut n = 0;
        for m in batch.metas() {
            let data = &bytes[m.offset..m.offset + m.caplen as usize];
            n += self.push(m, data)? as usize;
        }
        Ok(n)
    }

    /// Makes everything pushed so far visible to listeners: one store of the write position,
    /// then one wake-up of sleeping listeners if there are any (no system call otherwise).
    pub fn publish(&mut self) {
        let h = self.seg.header();
        if self.w != self.published {
            let records = self.counters.c[counter::RECORDS_WRITTEN];
            let bytes = self.counters.c[counter::BYTES_WRITTEN];
            // A seqlock, so a joining listener reads position and counts of one publish.
            let seq = h.pub_seq.load(Ordering::Relaxed);
            h.pub_seq.store(seq.wrapping_add(1), Ordering::Relaxed);
            fence(Ordering::Release);
            h.pub_records.store(records, Ordering::Relaxed);
            h.pub_bytes.store(bytes, Ordering::Relaxed);
            // SeqCst, not just Release: paired with the listeners' SeqCst increment of
            // `data_waiters` followed by a re-check of `write_pos`, so that either a listener
            // about to sleep sees this store or this thread sees its waiter count.
            h.write_pos.store(self.w, Ordering::SeqCst);
            h.pub_seq.store(seq.wrapping_add(2), Ordering::Release);
            self.published = self.w;
            self.pub_records = records;
            self.pub_bytes = bytes;
            self.checkpoints.add(Checkpoint {
                pos: self.w,
                records,
                bytes,
            });
            self.counters.c[counter::PUBLISHES] += 1;
            if h.data_waiters.load(Ordering::SeqCst) != 0 {
                h.data_seq.fetch_add(1, Ordering::SeqCst);
                sys::futex_wake_all(&h.data_seq);
            }
        }
        self.flush_counters();
    }

    /// Publishes what remains and marks the ring closed: listeners read the rest, then get
    /// [`crate::Recv::Closed`]. Pushing afterwards fails with [`Error::Closed`].
    pub fn close(&mut self) {
        if self.closed {
            return;
        }
        self.publish();
        self.closed = true;
        let h = self.seg.header();
        h.flags.fetch_or(FLAG_CLOSED, Ordering::SeqCst);
        h.data_seq.fetch_add(1, Ordering::SeqCst);
        sys::futex_wake_all(&h.data_seq);
    }

    /// The producer's counters (exact, including what is not published yet).
    pub fn stats(&self) -> ProducerStats {
        ProducerStats::from_array(&self.counters.c)
    }

    /// Every active listener's position and counters (for a stats line).
    pub fn listeners(&self) -> Vec<ListenerInfo> {
        self.ring().listeners()
    }

    /// Whether any listener is attached or joining. With nobody listening a producer may skip
    /// writing: a listener that joins starts at the current write position, so it would never
    /// read records written before it anyway. One load per slot: call it per batch.
    pub fn has_listeners(&self) -> bool {
        let h = self.seg.header();
        h.slots
            .iter()
            .any(|s| s.state.load(Ordering::Acquire) != SLOT_FREE)
    }

    /// Bytes written so far (the producer's write position, published or not).
    pub fn position(&self) -> u64 {
        self.w
    }

    fn flush_counters(&self) {
        let h = self.seg.header();
        for (dst, &v) in h.counters.iter().zip(self.counters.c.iter()) {
            dst.store(v, Ordering::Relaxed);
        }
    }

    /// Makes sure every listener has left the bytes that writing up to position `end` will
    /// overwrite, i.e. that every cursor is at or beyond `end - cap`.
    #[inline]
    fn reserve(&mut self, end: u64) {
        if end > self.limit + self.seg.cap {
            self.make_room(end);
        }
    }

    #[cold]
    #[inline(never)]
    fn make_room(&mut self, end: u64) {
        let need = end - self.seg.cap;
        if need > self.published {
            // The unpublished part of the batch is about to overwrite itself: listeners must be
            // able to get past it, so show it to them.
            self.publish();
        }
        let seg = self.seg.clone();
        let h = seg.header();
        // Pairs with the fence a joining listener issues between marking its slot active and
        // reading the write position: a slot this scan does not see as active will start at or
        // beyond `self.published`, so it is safe to leave it out of `limit`.
        fence(Ordering::SeqCst);
        let sweep = self.last_sweep.elapsed() >= self.dead_after;
        if sweep {
            self.last_sweep = Instant::now();
        }
        let mut limit = self.published;
        for i in 0..SLOTS {
            if h.slots[i].state.load(Ordering::Acquire) != SLOT_ACTIVE {
                continue;
            }
            if sweep && self.reclaim_if_dead(h, i) {
                continue;
            }
            if let Some(pos) = self.settle(h, i, need) {
                limit = limit.min(pos);
            }
        }
        self.limit = limit;
    }

    /// The first checkpoint at or after `target` (<= `published`), falling back to the
    /// published position itself.
    fn checkpoint_at(&self, target: u64) -> Checkpoint {
        self.checkpoints
            .at_or_after(target)
            .filter(|cp| cp.pos <= self.published)
            .unwrap_or(Checkpoint {
                pos: self.published,
                records: self.pub_records,
                bytes: self.pub_bytes,
            })
    }

    /// Brings slot `i`'s cursor to `need` or beyond: skips a lossy listener's backlog, or waits
    /// for the listener. Returns the cursor, or `None` when the slot turned out to be empty.
    fn settle(&mut self, h: &Header, i: usize, need: u64) -> Option<u64> {
        let slot = &h.slots[i];
        let lossy = slot.mode.load(Ordering::Relaxed) == MODE_LOSSY;
        let target = (need + self.slack).min(self.published);
        let mut waited: Option<Instant> = None;
        let mut next_check = self.dead_after;
        let mut spins = 0;
        let mut asked = false;
        let result = loop {
            let c = slot.cursor.load(Ordering::SeqCst);
            if c == CURSOR_JOINING {
                // A listener between claiming the slot and choosing its start: start it here,
                // holding its lease until it has set itself up (it releases at once).
                slot.join_records.store(self.pub_records, Ordering::Relaxed);
                slot.join_bytes.store(self.pub_bytes, Ordering::Relaxed);
                let _ = slot.cursor.compare_exchange(
                    CURSOR_JOINING,
                    self.published | HELD,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                );
                continue;
            }
            if c & SPECIAL != 0 {
                break None;
            }
            let pos = c & !HELD;
            if pos >= need {
                break Some(pos);
            }
            if lossy && c & HELD == 0 {
                // The listener is not reading: move its cursor over the backlog it will never
                // read in time, counting what it misses. Its cum counts at `c` are what it left
                // in its slot, plus what we skipped since.
                let to = self.checkpoint_at(target);
                // `busy` tells a listener that sees the moved cursor (or is leaving) to wait
                // until the counters below are added.
                slot.busy.store(1, Ordering::SeqCst);
                let skipped_r = slot.skipped_records.load(Ordering::Relaxed);
                let skipped_b = slot.skipped_bytes.load(Ordering::Relaxed);
                let at_r = slot.cum_records.load(Ordering::Acquire)
                    + skipped_r.wrapping_sub(slot.seen_skipped_records.load(Ordering::Acquire));
                let at_b = slot.cum_bytes.load(Ordering::Acquire)
                    + skipped_b.wrapping_sub(slot.seen_skipped_bytes.load(Ordering::Acquire));
                if slot
                    .cursor
                    .compare_exchange(c, to.pos, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok()
                {
                    slot.skipped_records.store(
                        skipped_r + to.records.saturating_sub(at_r),
                        Ordering::Relaxed,
                    );
                    slot.skipped_bytes
                        .store(skipped_b + to.bytes.saturating_sub(at_b), Ordering::Relaxed);
                    self.counters.c[counter::LOSSY_SKIPS] += 1;
                }
                slot.busy.store(0, Ordering::SeqCst);
                continue;
            }
            // A lossless listener behind, or a lossy one holding a lease on what we need: ask it
            // to move, then wait. A lossy one skips to a checkpoint at its next call (the
            // request carries the checkpoint's counts, so it counts what it misses without
            // reading it); a lossless one reports its progress once it passes `target`.
            if !asked {
                let to = if lossy {
                    self.checkpoint_at(target)
                } else {
                    Checkpoint {
                        pos: target,
                        records: 0,
                        bytes: 0,
                    }
                };
                let seq = slot.req_seq.load(Ordering::Relaxed);
                slot.req_seq.store(seq.wrapping_add(1), Ordering::Relaxed);
                fence(Ordering::Release);
                slot.want_records.store(to.records, Ordering::Relaxed);
                slot.want_bytes.store(to.bytes, Ordering::Relaxed);
                slot.want.store(to.pos, Ordering::Relaxed);
                slot.req_seq.store(seq.wrapping_add(2), Ordering::SeqCst);
                asked = true;
            }
            let t0 = *waited.get_or_insert_with(Instant::now);
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
                continue;
            }
            h.space_waiters.fetch_add(1, Ordering::SeqCst);
            let seq = h.space_seq.load(Ordering::SeqCst);
            if slot.cursor.load(Ordering::SeqCst) == c {
                sys::futex_wait(&h.space_seq, seq, SLEEP);
            }
            h.space_waiters.fetch_sub(1, Ordering::SeqCst);
            if t0.elapsed() >= next_check {
                next_check += self.dead_after;
                if self.reclaim_if_dead(h, i) {
                    break None;
                }
            }
        };
        if let Some(t0) = waited {
            self.counters.c[counter::WAIT_COUNT] += 1;
            self.counters.c[counter::WAIT_NS] += t0.elapsed().as_nanos() as u64;
        }
        result
    }

    /// Frees slot `i` if its listener lived in another process that is gone. Returns whether it
    /// did.
    fn reclaim_if_dead(&mut self, h: &Header, i: usize) -> bool {
        let slot = &h.slots[i];
        let pid = slot.pid.load(Ordering::Relaxed);
        if pid == self.own_pid || !sys::process_gone(pid, slot.pid_start.load(Ordering::Relaxed)) {
            return false;
        }
        let c = slot.cursor.load(Ordering::SeqCst);
        if c & SPECIAL != 0 && c != CURSOR_JOINING {
            return false;
        }
        if slot
            .cursor
            .compare_exchange(c, layout::CURSOR_LEFT, Ordering::SeqCst, Ordering::SeqCst)
            .is_err()
        {
            return false;
        }
        slot.state.store(SLOT_FREE, Ordering::Release);
        self.counters.c[counter::LISTENERS_RECLAIMED] += 1;
        true
    }
}

impl Drop for Producer {
    fn drop(&mut self) {
        self.close();
        if let Some(path) = &self.seg.path {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl std::fmt::Debug for Producer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Producer")
            .field("capacity", &self.seg.cap)
            .field("path", &self.seg.path)
            .field("position", &self.w)
            .field("published", &self.published)
            .field("closed", &self.closed)
            .finish_non_exhaustive()
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".tmp-{}", sys::own_pid()));
    path.with_file_name(name)
}
