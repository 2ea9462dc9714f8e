//! The flow table: a slab of preallocated entries, an open-addressing index over them, and a
//! timer wheel that orders flows by when they may expire.
//!
//! Nothing here allocates per packet (the slab reserves its capacity up front; pages are
//! touched only as flows arrive; the index starts small and doubles as flows arrive, see
//! [`INITIAL_SLOTS`]) and nothing scans the whole table per packet: a packet costs one probe
//! sequence; expiry visits only the wheel slots whose time has come. Flows are scheduled lazily:
//! a packet does not move its flow in the wheel; when a slot comes due, each flow in it either
//! expires or is moved to the slot of its real deadline (at most once per timeout period).
use crate::config::FeatureLevel;
use crate::entry::{EntryStore, MeterEntry, TableEntry};
use crate::key::FlowKey;
use crate::state::NIL;
use crate::timing::TcpTiming;

/// log2 of the wheel's tick in ns: 2^26 ns ≈ 67 ms, the resolution of expiry.
pub(crate) const TICK_SHIFT: u32 = 26;
/// Number of wheel slots (a power of two): 1024 ticks ≈ 69 s per rotation.
const WHEEL_SLOTS: usize = 1024;
const WHEEL_MASK: u64 = WHEEL_SLOTS as u64 - 1;

/// Bits of an index slot that hold the entry index (+ 1); the six above hold the tag.
const INDEX_BITS: u32 = 26;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
/// Largest capacity the slot format can address.
pub(crate) const MAX_CAPACITY: usize = INDEX_MASK as usize - 1;
/// Bits of the tag that hold the occupant's distance from its home slot.
const DISTANCE_BITS: u32 = 2;
/// Largest distance the tag holds exactly; an occupant this far or farther from its home is
/// tagged with this value, and its key tells the rest.
const FAR: usize = (1 << DISTANCE_BITS) - 1;

/// Home position bits of a hash (its high half).
#[inline]
fn home_bits(hash: u64) -> usize {
    (hash >> 32) as usize
}

/// The tag bits of a hash that the home never uses, in place in a slot.
#[inline]
fn hash_tag(hash: u64) -> u32 {
    const HASH_BITS: u32 = 32 - INDEX_BITS - DISTANCE_BITS;
    ((hash >> 20) as u32 & ((1 << HASH_BITS) - 1)) << (INDEX_BITS + DISTANCE_BITS)
}

/// The slot of entry `idx` whose hash tag is `tag`, placed `distance` slots after its home.
#[inline]
fn slot_value(tag: u32, idx: u32, distance: usize) -> u32 {
    tag | ((distance.min(FAR) as u32) << INDEX_BITS) | (idx + 1)
}

/// The tag a lookup expects one slot further on than where it expected `tag`: the distance
/// one more, up to [`FAR`].
#[inline]
fn next_expected(tag: u32) -> u32 {
    if tag & DISTANCE_FIELD == DISTANCE_FIELD {
        tag
    } else {
        tag + (1 << INDEX_BITS)
    }
}

/// The distance bits of a slot, in place.
const DISTANCE_FIELD: u32 = (FAR as u32) << INDEX_BITS;

/// The hash bits of a slot's tag (the tag's bits above the distance).
const HASH_TAG_MASK: u32 = !((1 << (INDEX_BITS + DISTANCE_BITS)) - 1);

/// The distance part of an occupied slot's tag.
#[inline]
fn tag_distance(slot: u32) -> usize {
    (slot >> INDEX_BITS) as usize & FAR
}

/// Indexes entry `idx`, whose key hashes to `hash`, in the first free slot from its home on.
#[inline]
fn place(slots: &mut [u32], mask: usize, hash: u64, idx: u32) {
    let mut pos = home_bits(hash) & mask;
    let mut distance = 0;
    while slots[pos] != 0 {
        pos = (pos + 1) & mask;
        distance += 1;
    }
    slots[pos] = slot_value(hash_tag(hash), idx, distance);
}

/// A fixed-length array of plain-old-data `T` in its own anonymous mapping, which starts
/// zeroed and is backed by memory only where it is touched. Both big arrays of the table live in
/// one, each with the page-size advice its access pattern wants ([`INDEX_PAGES`], [`ENTRY_PAGES`]).
pub(crate) struct Mapped<T> {
    map: memmap2::MmapMut,
    len: usize,
    _items: core::marker::PhantomData<T>,
}

impl<T: bytemuck::Pod> Mapped<T> {
    /// `len` zeroed items, with `advice` for the kernel (advice only: refused advice changes
    /// speed, never results).
    ///
    /// # Panics
    /// Panics when the kernel refuses the mapping, as a failed `Vec` allocation would abort.
    fn zeroed(len: usize, advice: memmap2::Advice) -> Mapped<T> {
        let bytes = len.max(1) * core::mem::size_of::<T>();
        let map = memmap2::MmapMut::map_anon(bytes).expect("cannot map memory for the flow table");
        let _ = map.advise(advice);
        Mapped {
            map,
            len,
            _items: core::marker::PhantomData,
        }
    }

    /// Asks the kernel to back items `from..to` with memory now, in one call rather than one
    /// page fault per page as they are first written (advice only: on kernels without
    /// `MADV_POPULATE_WRITE` the pages fault in as before).
    fn populate(&self, from: usize, to: usize) {
        let size = core::mem::size_of::<T>();
        let to = to.min(self.len);
        if from < to {
            let _ = self.map.advise_range(
                memmap2::Advice::PopulateWrite,
                from * size,
                (to - from) * size,
            );
        }
    }
}

impl<T: bytemuck::Pod> core::ops::Deref for Mapped<T> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        // The mapping is page-aligned and a whole number of items long, so the cast cannot
        // fail; slicing to `len` drops the item a zero-length array maps.
        &bytemuck::cast_slice(&self.map)[..self.len]
    }
}

impl<T: bytemuck::Pod> core::ops::DerefMut for Mapped<T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        &mut bytemuck::cast_slice_mut(&mut self.map)[..self.len]
    }
}

/// Page advice for the index: transparent huge pages. Probes land at random in tens of MiB, and
/// with 4 KiB pages nearly every one missed the TLB (the prefetch of a slot was the hottest
/// instruction of a run).
const INDEX_PAGES: memmap2::Advice = memmap2::Advice::HugePage;

/// Page advice for the slab: ordinary 4 KiB pages. Huge pages would save some TLB misses
/// (2-4 % of user time) but the slab is hundreds of MiB of fresh memory, and a huge page is a
/// 2 MiB block that virtual machines with free page reporting (virtio-balloon) have mostly
/// handed back to the host: faulting one in then costs about 2 s per GiB of system time, which
/// doubled `trawl flows`'s system time on a 1.1 M-flow trace (bench/RESULTS.md, run 10).
const ENTRY_PAGES: memmap2::Advice = memmap2::Advice::NoHugePage;

/// Index slots a table starts with (or its whole index, when smaller): 64 KiB. The index
/// doubles each time it would pass a load of one half, up to twice the capacity, so its size
/// follows the flows the table has held rather than its capacity. A fresh index at full size
/// (32 MiB at the default capacity) had every one of its huge pages faulted in and zeroed by
/// the first few thousand flows, whose homes land all over it: a fixed cost of each table,
/// 20-27 % of a 1 M-packet run's time, paid once more by each worker of `--workers N`
/// (bench/RESULTS.md, issue 26). Doubling costs a pass over the slab's used entries each
/// time (their keys are hashed again): under two passes over the flows in all.
const INITIAL_SLOTS: usize = 1 << 14;

/// Bytes of slab entries backed with memory at a time, ahead of use: one `madvise` for 4 MiB
/// of entries instead of a thousand page faults.
const POPULATE_BYTES: usize = 4 << 20;

/// A table of entries of type `E` ([`TableEntry`]: the `full`/`standard` layout or the
/// `minimal` one).
pub(crate) struct FlowTable<E: TableEntry> {
    /// The slab: `capacity` entries, of which the first `used` have ever held a flow.
    pub(crate) entries: Mapped<E>,
    used: usize,
    /// Entries below this index have been populated (see [`POPULATE_BYTES`]).
    populated: usize,
    /// Exact values of the few flows that outgrow their entry's narrow fields.
    pub(crate) wides: E::Store,
    /// Round-trip timing, one per entry (same index), when the level keeps it (else empty):
    /// written by TCP flows only, so only their pages are backed with memory.
    pub(crate) timing: Mapped<TcpTiming>,
    /// The most recently freed entry (`NIL`: none); a free entry's wheel link names the one
    /// freed before it. Threaded through the free entries themselves, whose lines the freeing
    /// and the reuse touch anyway: a separate list cost 4 bytes per flow.
    free: u32,
    /// Index slots: 0 = empty, else `(tag << INDEX_BITS) | (entry index + 1)`, the tag being
    /// four hash bits the home does not use and the occupant's distance from its home slot
    /// (two bits, saturated at [`FAR`]). A lookup compares keys only where both match (an
    /// occupant with the same home and hash bits); a removal learns a later occupant's home
    /// from its distance instead of rehashing that occupant's key, a cache miss per occupant
    /// when the tag was six hash bits (removals were half the time of a full table). Fewer
    /// hash bits made lookups compare more keys (three bits: 1 M flows 4 % slower), and at a
    /// load of at most one half most occupants sit within three slots of home.
    /// Four bytes a slot keep the index small (32 MiB at the default capacity), which measured
    /// 7–12 % faster end to end than 8-byte slots: a random probe into a smaller array misses
    /// the TLB less.
    slots: Mapped<u32>,
    mask: usize,
    /// Slots the index grows to at most: twice the capacity, a power of two.
    max_slots: usize,
    capacity: usize,
    len: usize,
    wheel: Vec<u32>,
    /// Bit `slot` set: that wheel slot's list is not empty. Lets eviction find the earliest
    /// scheduled flow in a few word reads where it walked up to a rotation of empty slots (a
    /// full table of young flows has nothing due for most of a rotation: that walk was most of
    /// the cost of each eviction).
    wheel_occupied: [u64; WHEEL_SLOTS / 64],
    /// Ticks before this one have been processed.
    pub(crate) processed_tick: u64,
}

impl<E: TableEntry> FlowTable<E> {
    /// A table for `capacity` flows, with a round-trip timing record per entry if `timing`.
    pub(crate) fn new(capacity: usize, timing: bool) -> Self {
        let capacity = capacity.clamp(1, MAX_CAPACITY);
        // Load factor <= 0.5 keeps linear-probe sequences short.
        let max_slots = (capacity * 2).next_power_of_two();
        let nslots = max_slots.min(INITIAL_SLOTS);
        FlowTable {
            entries: Mapped::zeroed(capacity, ENTRY_PAGES),
            used: 0,
            populated: 0,
            wides: E::Store::default(),
            timing: Mapped::zeroed(if timing { capacity } else { 0 }, ENTRY_PAGES),
            free: NIL,
            slots: Mapped::zeroed(nslots, INDEX_PAGES),
            mask: nslots - 1,
            max_slots,
            capacity,
            len: 0,
            wheel: vec![NIL; WHEEL_SLOTS],
            wheel_occupied: [0; WHEEL_SLOTS / 64],
            processed_tick: 0,
        }
    }

    /// Live flows.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Flows the table holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// Bytes of table memory per flow slot: entry, timing record (counted whole, though only
    /// TCP flows' pages are backed), index slots (as many as the index grows to).
    pub(crate) fn bytes_per_flow(&self) -> usize {
        core::mem::size_of::<E>()
            + self.timing.len() * core::mem::size_of::<TcpTiming>() / self.capacity
            + self.max_slots * core::mem::size_of::<u32>() / self.capacity
    }

    /// The entry holding `key`, if any.
    #[inline]
    pub(crate) fn find(&self, key: &FlowKey, hash: u64) -> Option<u32> {
        let mut expected = hash_tag(hash);
        let mut pos = home_bits(hash) & self.mask;
        loop {
            let s = self.slots[pos];
            if s == 0 {
                return None;
            }
            if s & !INDEX_MASK == expected {
                let idx = (s & INDEX_MASK) - 1;
                if self.entries[idx as usize].has_key(key, &self.wides) {
                    return Some(idx);
                }
            }
            pos = (pos + 1) & self.mask;
            expected = next_expected(expected);
        }
    }

    /// The hash of entry `idx`'s key.
    #[inline]
    pub(crate) fn key_hash(&self, idx: u32) -> u64 {
        self.entries[idx as usize].key(&self.wides).hash()
    }

    /// Takes a free entry for `key` and indexes it. The caller fills the entry and schedules it.
    ///
    /// # Panics
    /// Panics if the table is full: callers evict first (a broken invariant otherwise).
    pub(crate) fn insert(&mut self, key: &FlowKey, hash: u64) -> u32 {
        assert!(!self.is_full(), "flow table insert while full");
        if (self.len + 1) * 2 > self.slots.len() && self.slots.len() < self.max_slots {
            self.grow();
        }
        let idx = match self.free {
            NIL => {
                if self.used == self.populated {
                    self.populated = self.used + POPULATE_BYTES / core::mem::size_of::<E>();
                    self.entries.populate(self.used, self.populated);
                }
                self.entries[self.used] = E::vacant();
                self.used += 1;
                (self.used - 1) as u32
            }
            free => {
                self.free = self.entries[free as usize].wheel_next();
                free
            }
        };
        place(&mut self.slots, self.mask, hash, idx);
        self.entries[idx as usize].occupy(key, &mut self.wides);
        self.len += 1;
        idx
    }

    /// Doubles the index and indexes every live entry again (in slab order, reading each
    /// key's line once, sequentially).
    #[cold]
    fn grow(&mut self) {
        let nslots = self.slots.len() * 2;
        let mask = nslots - 1;
        let mut slots = Mapped::zeroed(nslots, INDEX_PAGES);
        // In runs of GROW_RUN entries: their home slots (random places in the new index) are
        // fetched together, then filled, so the misses overlap instead of queueing (one miss
        // per entry was 8 % of a 1.2 M-flow run).
        const GROW_RUN: usize = 16;
        let mut run = [(0u64, 0u32); GROW_RUN];
        for (chunk_no, chunk) in self.entries[..self.used].chunks(GROW_RUN).enumerate() {
            let mut n = 0;
            for (i, e) in chunk.iter().enumerate() {
                if e.is_live() {
                    let hash = e.key(&self.wides).hash();
                    mem_prefetch::prefetch_write_data::<_, 3>(&slots[home_bits(hash) & mask]);
                    run[n] = (hash, (chunk_no * GROW_RUN + i) as u32);
                    n += 1;
                }
            }
            for &(hash, idx) in &run[..n] {
                place(&mut slots, mask, hash, idx);
            }
        }
        self.slots = slots;
        self.mask = mask;
    }

    /// Unindexes and unschedules an entry and returns it to the free list. `hash` is its key's
    /// ([`FlowTable::key_hash`]: the caller has it, and rebuilding a `minimal` entry's key to
    /// hash it again is work done twice).
    pub(crate) fn remove(&mut self, idx: u32, hash: u64) {
        debug_assert_eq!(hash, self.key_hash(idx), "the hash of another key");
        self.unschedule(idx);
        let mut hole = home_bits(hash) & self.mask;
        while self.slots[hole] & INDEX_MASK != idx + 1 {
            debug_assert!(self.slots[hole] != 0, "removing an unindexed entry");
            hole = (hole + 1) & self.mask;
        }
        // Backward-shift deletion: pull later members of the probe run into the hole so no
        // tombstones accumulate. An occupant may move back to the hole when the hole is not
        // before its home, that is when it sits at least as far from home as from the hole.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            let occupant = (s & INDEX_MASK) - 1;
            let distance = match tag_distance(s) {
                // Saturated: the exact distance from the occupant's key (rare: a probe run
                // that long means a crowded neighbourhood).
                FAR => {
                    let home = home_bits(self.key_hash(occupant));
                    j.wrapping_sub(home) & self.mask
                }
                d => d,
            };
            let gap = j.wrapping_sub(hole) & self.mask;
            if distance >= gap {
                self.slots[hole] = slot_value(s & HASH_TAG_MASK, occupant, distance - gap);
                hole = j;
            }
        }
        self.slots[hole] = 0;
        self.entries[idx as usize].vacate(&mut self.wides);
        self.entries[idx as usize].set_wheel_next(self.free);
        self.free = idx;
        self.len -= 1;
    }

    /// Puts an entry in the wheel slot of `deadline_ns` (never in a slot already passed).
    pub(crate) fn schedule(&mut self, idx: u32, deadline_ns: u64) {
        let tick = (deadline_ns >> TICK_SHIFT).max(self.processed_tick);
        let slot = (tick & WHEEL_MASK) as usize;
        let head = self.wheel[slot];
        {
            let e = &mut self.entries[idx as usize];
            e.set_wheel_prev(NIL, slot as u16);
            e.set_wheel_next(head);
        }
        if head != NIL {
            self.entries[head as usize].set_wheel_prev(idx, 0);
        }
        self.wheel[slot] = idx;
        self.wheel_occupied[slot / 64] |= 1 << (slot % 64);
    }

    /// Takes an entry out of its wheel slot.
    pub(crate) fn unschedule(&mut self, idx: u32) {
        let (prev, next, slot) = {
            let e = &self.entries[idx as usize];
            (e.wheel_prev(), e.wheel_next(), e.wheel_slot())
        };
        if prev == NIL {
            let s = slot as usize;
            if self.wheel[s] == idx {
                self.wheel[s] = next;
                if next == NIL {
                    self.wheel_occupied[s / 64] &= !(1 << (s % 64));
                }
            }
        } else {
            self.entries[prev as usize].set_wheel_next(next);
        }
        if next != NIL {
            // Heads the (detached or not) list of `idx`'s slot when `idx` did.
            self.entries[next as usize].set_wheel_prev(prev, slot);
        }
        let e = &mut self.entries[idx as usize];
        e.set_wheel_prev(NIL, slot);
        e.set_wheel_next(NIL);
    }

    /// Detaches the list of a wheel slot and returns its head; entries keep their links, so the
    /// caller walks `wheel_next` (saving it before rescheduling or removing an entry).
    pub(crate) fn take_slot(&mut self, tick: u64) -> u32 {
        let slot = (tick & WHEEL_MASK) as usize;
        let head = self.wheel[slot];
        self.wheel[slot] = NIL;
        self.wheel_occupied[slot / 64] &= !(1 << (slot % 64));
        // The detached entries still name this slot, but the slot's head is no longer any of
        // them, so `unschedule` on a detached entry only relinks its detached neighbours.
        head
    }

    /// The head of a wheel slot's list without detaching it.
    pub(crate) fn slot_head(&self, tick: u64) -> u32 {
        self.wheel[(tick & WHEEL_MASK) as usize]
    }

    /// The first tick in `from..to` (at most one rotation) whose wheel slot holds flows.
    pub(crate) fn next_scheduled_tick(&self, from: u64, to: u64) -> Option<u64> {
        let mut tick = from;
        while tick < to {
            let slot = (tick & WHEEL_MASK) as usize;
            // The word's bits from this slot on; a set bit is that many ticks ahead.
            let ahead = self.wheel_occupied[slot / 64] >> (slot % 64);
            if ahead != 0 {
                let found = tick + u64::from(ahead.trailing_zeros());
                return (found < to).then_some(found);
            }
            tick += 64 - (slot % 64) as u64;
        }
        None
    }

    /// Number of wheel slots.
    pub(crate) const fn wheel_slots() -> u64 {
        WHEEL_SLOTS as u64
    }

    /// Indices of every live entry, by a sequential scan of the slab (cheaper than chasing the
    /// wheel's links through memory).
    pub(crate) fn live_indices(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries[..self.used]
            .iter()
            .enumerate()
            .filter(|(_, e)| e.is_live())
            .map(|(i, _)| i as u32)
    }

    /// Forgets every flow at once (after the caller exported them): the slab keeps its memory.
    pub(crate) fn clear(&mut self) {
        self.used = 0;
        self.wides.clear();
        self.free = NIL;
        // A fresh zeroed allocation is lazily mapped; filling the old one would touch every
        // page of the index (up to 32 MiB at the default capacity) even for a handful of
        // flows. It starts small again, as a new table's.
        let nslots = self.max_slots.min(INITIAL_SLOTS);
        self.slots = Mapped::zeroed(nslots, INDEX_PAGES);
        self.mask = nslots - 1;
        self.wheel.fill(NIL);
        self.wheel_occupied = [0; WHEEL_SLOTS / 64];
        self.len = 0;
    }

    /// Hints the CPU to fetch the index slot a lookup of `hash` starts at.
    #[inline]
    pub(crate) fn prefetch_slot(&self, hash: u64) {
        let pos = home_bits(hash) & self.mask;
        mem_prefetch::prefetch_read_data::<_, 3>(&self.slots[pos]);
    }

    /// Hints the CPU to fetch the entries a lookup of `hash` may land on (those whose slot tag
    /// matches), reading only index slots: comparing keys here would wait for the very lines
    /// being prefetched.
    #[inline]
    pub(crate) fn prefetch_candidates(
        &self,
        hash: u64,
        side: usize,
        level: FeatureLevel,
        tcp: bool,
    ) {
        let mut expected = hash_tag(hash);
        let mut pos = home_bits(hash) & self.mask;
        loop {
            let s = self.slots[pos];
            if s == 0 {
                return;
            }
            if s & !INDEX_MASK == expected {
                self.prefetch_entry((s & INDEX_MASK) - 1, side, level, tcp);
            }
            pos = (pos + 1) & self.mask;
            expected = next_expected(expected);
        }
    }

    /// Hints the CPU to fetch every line of entry `idx` (`NIL`: none), as building its
    /// record reads them all.
    #[inline]
    pub(crate) fn prefetch_record(&self, idx: u32) {
        if let Some(e) = self.entries.get(idx as usize) {
            for line in bytemuck::bytes_of(e).chunks_exact(64) {
                mem_prefetch::prefetch_read_data::<_, 3>(&line[0]);
            }
        }
    }

    /// Hints the CPU to fetch the lines of entry `idx` a packet from `side` updates at
    /// `level` ([`TableEntry::prefetch`]), and for a TCP segment the two lines of its timing
    /// record where the entry keeps one beside it ([`TableEntry::TIMING_BESIDE`]; it may answer the other side's timed segment and
    /// start its own).
    #[inline]
    pub(crate) fn prefetch_entry(&self, idx: u32, side: usize, level: FeatureLevel, tcp: bool) {
        self.entries[idx as usize].prefetch(side, level);
        if E::TIMING_BESIDE && tcp {
            if let Some(t) = self.timing.get(idx as usize) {
                mem_prefetch::prefetch_write_data::<_, 3>(&t.dirs[0]);
                mem_prefetch::prefetch_write_data::<_, 3>(&t.dirs[1]);
            }
        }
    }
}

impl<E: MeterEntry> FlowTable<E> {
    /// `[first_ns, index]` of every live entry, oldest record first (ties by index), so that
    /// output order does not depend on the table's layout. In a mapping of its own on 4 KiB
    /// pages, populated at once: from the allocator, the list (16 bytes per flow) came in
    /// fresh huge pages, slow to fault in on virtual machines (see [`ENTRY_PAGES`]).
    pub(crate) fn live_oldest_first(&self) -> Mapped<[u64; 2]> {
        let mut list = Mapped::zeroed(self.len, ENTRY_PAGES);
        list.populate(0, self.len);
        for (item, idx) in list.iter_mut().zip(self.live_indices()) {
            *item = [self.entries[idx as usize].first_ns(), u64::from(idx)];
        }
        list.sort_unstable();
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mini::MiniEntry;
    use crate::standard::StandardEntry;
    use crate::state::FlowEntry;

    /// Key `i`: IPv4 for even `i` (a `minimal` or `standard` entry holds it in its lines), other bytes for
    /// odd `i` (kept in the entry's overflow record).
    fn key(i: u32) -> FlowKey {
        let mut k = FlowKey::default();
        if i.is_multiple_of(2) {
            k.0[10..12].copy_from_slice(&[0xff; 2]);
            k.0[12..16].copy_from_slice(&i.to_le_bytes());
            k.0[26..28].copy_from_slice(&[0xff; 2]);
            k.0[37] = 4;
        } else {
            k.0[..4].copy_from_slice(&i.to_le_bytes());
        }
        k
    }

    /// Runs a test over tables of every entry layout.
    macro_rules! every_layout {
        ($($name:ident),* $(,)?) => {
            mod each_layout {
                $(
                    #[test]
                    fn $name() {
                        super::$name::<super::FlowEntry>();
                        super::$name::<super::StandardEntry>();
                        super::$name::<super::MiniEntry>();
                    }
                )*
            }
        };
    }

    every_layout!(
        insert_find_remove_many,
        colliding_hashes_probe_correctly,
        random_inserts_and_removals_keep_the_index_exact,
        index_grows_with_the_flows_and_keeps_them,
        next_scheduled_tick_finds_the_earliest_occupied_slot_across_the_wrap,
        wheel_links_survive_unschedule_in_the_middle,
    );

    fn insert_find_remove_many<E: TableEntry>() {
        let mut t = FlowTable::<E>::new(1000, false);
        let mut idx = Vec::new();
        for i in 0..1000 {
            let k = key(i);
            let e = t.insert(&k, k.hash());
            t.schedule(e, i as u64);
            idx.push(e);
        }
        assert!(t.is_full());
        for i in 0..1000 {
            let k = key(i);
            assert_eq!(t.find(&k, k.hash()), Some(idx[i as usize]));
        }
        // Remove every other one; the rest must stay findable (backward shift correctness).
        for i in (0..1000).step_by(2) {
            t.remove(idx[i], key(i as u32).hash());
        }
        for i in 0..1000u32 {
            let k = key(i);
            let found = t.find(&k, k.hash());
            assert_eq!(found.is_some(), i % 2 == 1, "key {i}");
        }
        assert_eq!(t.len(), 500);
        assert_eq!(t.live_indices().count(), 500);
    }

    fn colliding_hashes_probe_correctly<E: TableEntry>() {
        // Keys whose hashes share one home slot, so they form one long probe run.
        let mut t = FlowTable::<E>::new(64, false);
        let home = |k: &FlowKey| home_bits(k.hash()) & t.mask;
        let target = home(&key(0));
        let colliding: Vec<u32> = (0..)
            .filter(|&i| home(&key(i)) == target)
            .take(40)
            .collect();
        let mut idx = Vec::new();
        for &i in &colliding {
            let e = t.insert(&key(i), key(i).hash());
            t.schedule(e, 0);
            idx.push(e);
        }
        let removed = [0usize, 17, 39, 5];
        for &r in &removed {
            t.remove(idx[r], key(colliding[r]).hash());
            let k = key(colliding[r]);
            assert_eq!(t.find(&k, k.hash()), None);
        }
        for (n, &i) in colliding.iter().enumerate() {
            if !removed.contains(&n) {
                let k = key(i);
                assert_eq!(t.find(&k, k.hash()), Some(idx[n]), "key {i}");
            }
        }
    }

    /// Checks every occupied slot: its entry is live and holds a key whose hash bits the tag
    /// has, its distance tag is the true distance from the key's home (saturated), and no
    /// empty slot lies between the home and the occupant (linear probing's invariant).
    fn check_index<E: TableEntry>(t: &FlowTable<E>) {
        for (pos, &s) in t.slots.iter().enumerate() {
            if s == 0 {
                continue;
            }
            let idx = (s & INDEX_MASK) - 1;
            let e = &t.entries[idx as usize];
            assert!(e.is_live(), "slot {pos} names a free entry");
            let hash = e.key(&t.wides).hash();
            let home = home_bits(hash) & t.mask;
            let distance = pos.wrapping_sub(home) & t.mask;
            assert_eq!(s & HASH_TAG_MASK, hash_tag(hash), "slot {pos}");
            assert_eq!(tag_distance(s), distance.min(FAR), "slot {pos}");
            for d in 0..distance {
                assert_ne!(t.slots[(home + d) & t.mask], 0, "hole before slot {pos}");
            }
        }
    }

    fn random_inserts_and_removals_keep_the_index_exact<E: TableEntry>() {
        // A small index (64 slots) at its full load, with keys whose homes are the last six
        // slots: probe runs are long, wrap around the end, and their distances saturate.
        let mut t = FlowTable::<E>::new(32, false);
        let mask = t.mask;
        let mut homes_at_end = (0u32..).filter(|&i| home_bits(key(i).hash()) & mask >= 58);
        let mut live: Vec<(u32, u32)> = Vec::new();
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000 {
            trawl_testkit::xorshift(&mut rng);
            if !t.is_full() && (live.is_empty() || !rng.is_multiple_of(3)) {
                let n = homes_at_end.next().expect("keys");
                let k = key(n);
                let idx = t.insert(&k, k.hash());
                t.schedule(idx, 0);
                live.push((n, idx));
            } else {
                let (gone, idx) = live.swap_remove((rng >> 32) as usize % live.len());
                t.remove(idx, key(gone).hash());
                assert_eq!(t.find(&key(gone), key(gone).hash()), None, "step {step}");
            }
            if step % 97 == 0 {
                check_index(&t);
                for &(k, idx) in &live {
                    assert_eq!(t.find(&key(k), key(k).hash()), Some(idx), "step {step}");
                }
            }
        }
        check_index(&t);
        assert!(
            t.slots.iter().any(|&s| s != 0 && tag_distance(s) == FAR),
            "some occupant was far from home"
        );
    }

    fn index_grows_with_the_flows_and_keeps_them<E: TableEntry>() {
        let capacity = 100_000;
        let mut t = FlowTable::<E>::new(capacity, false);
        assert_eq!(t.slots.len(), INITIAL_SLOTS);
        let per_flow = t.bytes_per_flow();
        let mut idx = Vec::new();
        for i in 0..capacity as u32 {
            let k = key(i);
            let e = t.insert(&k, k.hash());
            t.schedule(e, 0);
            idx.push(e);
            // Never above half full, never grown ahead of the flows.
            assert!(
                t.len() * 2 <= t.slots.len(),
                "{} flows, {} slots",
                t.len(),
                t.slots.len()
            );
            assert!(t.slots.len() == INITIAL_SLOTS || t.len() * 4 > t.slots.len());
            if i % 20_000 == 7 {
                // Entries freed before a growth are not indexed again.
                t.remove(e, k.hash());
                idx.pop();
                let again = t.insert(&k, k.hash());
                t.schedule(again, 0);
                idx.push(again);
            }
        }
        assert_eq!(t.slots.len(), 262_144, "twice the capacity, a power of two");
        check_index(&t);
        for i in (0..capacity).step_by(3) {
            t.remove(idx[i], key(i as u32).hash());
        }
        for (i, &e) in idx.iter().enumerate() {
            let k = key(i as u32);
            assert_eq!(t.find(&k, k.hash()), (i % 3 != 0).then_some(e), "key {i}");
        }
        check_index(&t);
        // What the summary reports does not depend on how far the index has grown.
        assert_eq!(t.bytes_per_flow(), per_flow);
        t.clear();
        assert_eq!(t.slots.len(), INITIAL_SLOTS);
        let e = t.insert(&key(5), key(5).hash());
        assert_eq!(t.find(&key(5), key(5).hash()), Some(e));
    }

    fn next_scheduled_tick_finds_the_earliest_occupied_slot_across_the_wrap<E: TableEntry>() {
        let mut t = FlowTable::<E>::new(8, false);
        let a = t.insert(&key(1), key(1).hash());
        let b = t.insert(&key(2), key(2).hash());
        let base = 5 * WHEEL_SLOTS as u64;
        // Slot of tick base + 1000, and of base + 1030 (its slot index wrapped below 1000).
        t.schedule(a, (base + 1000) << TICK_SHIFT);
        t.schedule(b, (base + 1030) << TICK_SHIFT);
        let end = base + 995 + WHEEL_SLOTS as u64;
        assert_eq!(t.next_scheduled_tick(base + 995, end), Some(base + 1000));
        assert_eq!(t.next_scheduled_tick(base + 1001, end), Some(base + 1030));
        assert_eq!(t.next_scheduled_tick(base + 1001, base + 1030), None);
        t.unschedule(a);
        assert_eq!(t.next_scheduled_tick(base + 995, end), Some(base + 1030));
        assert_eq!(t.take_slot(base + 1030), b);
        assert_eq!(t.next_scheduled_tick(base + 995, end), None);
    }

    fn wheel_links_survive_unschedule_in_the_middle<E: TableEntry>() {
        let mut t = FlowTable::<E>::new(8, false);
        let a = t.insert(&key(1), key(1).hash());
        let b = t.insert(&key(2), key(2).hash());
        let c = t.insert(&key(3), key(3).hash());
        for e in [a, b, c] {
            t.schedule(e, 5 << TICK_SHIFT);
        }
        t.unschedule(b);
        let mut seen = Vec::new();
        let mut cur = t.slot_head(5);
        while cur != NIL {
            seen.push(cur);
            cur = t.entries[cur as usize].wheel_next();
        }
        assert_eq!(seen, vec![c, a]);
    }
}
