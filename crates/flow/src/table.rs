//! The flow table: a slab of preallocated entries, an open-addressing index over them, and a
//! timer wheel that orders flows by when they may expire.
//!
//! Nothing here allocates after construction (the slab reserves its capacity up front; pages are
//! touched only as flows arrive) and nothing scans the whole table: a packet costs one probe
//! sequence; expiry visits only the wheel slots whose time has come. Flows are scheduled lazily:
//! a packet does not move its flow in the wheel; when a slot comes due, each flow in it either
//! expires or is moved to the slot of its real deadline (at most once per timeout period).
use crate::key::FlowKey;
use crate::state::{FlowEntry, Wides, NIL};

/// log2 of the wheel's tick in ns: 2^26 ns ≈ 67 ms, the resolution of expiry.
pub(crate) const TICK_SHIFT: u32 = 26;
/// Number of wheel slots (a power of two): 1024 ticks ≈ 69 s per rotation.
const WHEEL_SLOTS: usize = 1024;
const WHEEL_MASK: u64 = WHEEL_SLOTS as u64 - 1;

/// Bits of an index slot that hold the entry index (+ 1); the rest is the tag.
const INDEX_BITS: u32 = 26;
const INDEX_MASK: u32 = (1 << INDEX_BITS) - 1;
/// Largest capacity the slot format can address.
pub(crate) const MAX_CAPACITY: usize = INDEX_MASK as usize - 1;

/// Home position bits of a hash (its high half) and its slot tag (bits the home never uses).
#[inline]
fn home_bits(hash: u64) -> usize {
    (hash >> 32) as usize
}

#[inline]
fn tag_of(hash: u64) -> u32 {
    ((hash >> 20) as u32 & 0x3f) << INDEX_BITS
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

/// Slab entries backed with memory at a time, ahead of use: one `madvise` for 4 MiB of entries
/// instead of a thousand page faults.
const POPULATE_ENTRIES: usize = (4 << 20) / core::mem::size_of::<FlowEntry>();

pub(crate) struct FlowTable {
    /// The slab: `capacity` entries, of which the first `used` have ever held a flow.
    pub(crate) entries: Mapped<FlowEntry>,
    used: usize,
    /// Entries below this index have been populated (see [`POPULATE_ENTRIES`]).
    populated: usize,
    /// Exact values of the few flows that outgrow their entry's narrow fields.
    pub(crate) wides: Wides,
    free: Vec<u32>,
    /// Index slots: 0 = empty, else `(tag << INDEX_BITS) | (entry index + 1)`, the tag being
    /// 6 hash bits that the home position does not use. Four bytes a slot keep the index small
    /// (32 MiB at the default capacity), which measured 7–12 % faster end to end than 8-byte
    /// slots: a random probe into a smaller array misses the TLB less.
    slots: Mapped<u32>,
    mask: usize,
    capacity: usize,
    len: usize,
    wheel: Vec<u32>,
    /// Ticks before this one have been processed.
    pub(crate) processed_tick: u64,
}

impl FlowTable {
    pub(crate) fn new(capacity: usize) -> Self {
        let capacity = capacity.clamp(1, MAX_CAPACITY);
        // Load factor <= 0.5 keeps linear-probe sequences short.
        let nslots = (capacity * 2).next_power_of_two();
        FlowTable {
            entries: Mapped::zeroed(capacity, ENTRY_PAGES),
            used: 0,
            populated: 0,
            wides: Wides::default(),
            free: Vec::with_capacity(capacity),
            slots: Mapped::zeroed(nslots, INDEX_PAGES),
            mask: nslots - 1,
            capacity,
            len: 0,
            wheel: vec![NIL; WHEEL_SLOTS],
            processed_tick: 0,
        }
    }

    /// Live flows.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        self.len >= self.capacity
    }

    /// Bytes of table memory per flow slot: entry, index slots, free-list slot.
    pub(crate) fn bytes_per_flow(&self) -> usize {
        core::mem::size_of::<FlowEntry>()
            + self.slots.len() * core::mem::size_of::<u32>() / self.capacity
            + core::mem::size_of::<u32>()
    }

    /// The entry holding `key`, if any.
    #[inline]
    pub(crate) fn find(&self, key: &FlowKey, hash: u64) -> Option<u32> {
        let tag = tag_of(hash);
        let mut pos = home_bits(hash) & self.mask;
        loop {
            let s = self.slots[pos];
            if s == 0 {
                return None;
            }
            if s & !INDEX_MASK == tag {
                let idx = (s & INDEX_MASK) - 1;
                if self.entries[idx as usize].key == *key {
                    return Some(idx);
                }
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Takes a free entry for `key` and indexes it. The caller fills the entry and schedules it.
    ///
    /// # Panics
    /// Panics if the table is full: callers evict first (a broken invariant otherwise).
    pub(crate) fn insert(&mut self, key: &FlowKey, hash: u64) -> u32 {
        assert!(!self.is_full(), "flow table insert while full");
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                if self.used == self.populated {
                    self.populated = self.used + POPULATE_ENTRIES;
                    self.entries.populate(self.used, self.populated);
                }
                self.entries[self.used] = FlowEntry::empty();
                self.used += 1;
                (self.used - 1) as u32
            }
        };
        let mut pos = home_bits(hash) & self.mask;
        while self.slots[pos] != 0 {
            pos = (pos + 1) & self.mask;
        }
        self.slots[pos] = tag_of(hash) | (idx + 1);
        let e = &mut self.entries[idx as usize];
        e.key = *key;
        e.live = 1;
        self.len += 1;
        idx
    }

    /// Unindexes and unschedules an entry and returns it to the free list.
    pub(crate) fn remove(&mut self, idx: u32) {
        self.unschedule(idx);
        let hash = self.entries[idx as usize].key.hash();
        let want = tag_of(hash) | (idx + 1);
        let mut hole = home_bits(hash) & self.mask;
        while self.slots[hole] != want {
            debug_assert!(self.slots[hole] != 0, "removing an unindexed entry");
            hole = (hole + 1) & self.mask;
        }
        // Backward-shift deletion: pull later members of the probe run into the hole so no
        // tombstones accumulate.
        let mut j = hole;
        loop {
            j = (j + 1) & self.mask;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            // The slot keeps only a tag; the occupant's home comes from its key, rehashed
            // (storing the hash cost 8 bytes per flow; removals are a small share of the work).
            let home =
                home_bits(self.entries[((s & INDEX_MASK) - 1) as usize].key.hash()) & self.mask;
            let between = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !between {
                self.slots[hole] = s;
                hole = j;
            }
        }
        self.slots[hole] = 0;
        let e = &mut self.entries[idx as usize];
        e.live = 0;
        self.wides.release(&mut e.wide);
        self.free.push(idx);
        self.len -= 1;
    }

    /// Puts an entry in the wheel slot of `deadline_ns` (never in a slot already passed).
    pub(crate) fn schedule(&mut self, idx: u32, deadline_ns: u64) {
        let tick = (deadline_ns >> TICK_SHIFT).max(self.processed_tick);
        let slot = (tick & WHEEL_MASK) as usize;
        let head = self.wheel[slot];
        {
            let e = &mut self.entries[idx as usize];
            e.wheel_prev = NIL;
            e.wheel_next = head;
            e.wheel_slot = slot as u16;
        }
        if head != NIL {
            self.entries[head as usize].wheel_prev = idx;
        }
        self.wheel[slot] = idx;
    }

    /// Takes an entry out of its wheel slot.
    pub(crate) fn unschedule(&mut self, idx: u32) {
        let (prev, next, slot) = {
            let e = &self.entries[idx as usize];
            (e.wheel_prev, e.wheel_next, e.wheel_slot as usize)
        };
        if prev == NIL {
            if self.wheel[slot] == idx {
                self.wheel[slot] = next;
            }
        } else {
            self.entries[prev as usize].wheel_next = next;
        }
        if next != NIL {
            self.entries[next as usize].wheel_prev = prev;
        }
        let e = &mut self.entries[idx as usize];
        e.wheel_prev = NIL;
        e.wheel_next = NIL;
    }

    /// Detaches the list of a wheel slot and returns its head; entries keep their links, so the
    /// caller walks `wheel_next` (saving it before rescheduling or removing an entry).
    pub(crate) fn take_slot(&mut self, tick: u64) -> u32 {
        let slot = (tick & WHEEL_MASK) as usize;
        let head = self.wheel[slot];
        self.wheel[slot] = NIL;
        // The detached entries still name this slot, but the slot's head is no longer any of
        // them, so `unschedule` on a detached entry only relinks its detached neighbours.
        head
    }

    /// The head of a wheel slot's list without detaching it.
    pub(crate) fn slot_head(&self, tick: u64) -> u32 {
        self.wheel[(tick & WHEEL_MASK) as usize]
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
            .filter(|(_, e)| e.live != 0)
            .map(|(i, _)| i as u32)
    }

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

    /// Forgets every flow at once (after the caller exported them): the slab keeps its memory.
    pub(crate) fn clear(&mut self) {
        self.used = 0;
        self.wides.clear();
        self.free.clear();
        // A fresh zeroed allocation is lazily mapped; filling the old one would touch every
        // page of the index (32 MiB at the default capacity) even for a handful of flows.
        self.slots = Mapped::zeroed(self.slots.len(), INDEX_PAGES);
        self.wheel.fill(NIL);
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
    pub(crate) fn prefetch_candidates(&self, hash: u64, side: usize) {
        let tag = tag_of(hash);
        let mut pos = home_bits(hash) & self.mask;
        loop {
            let s = self.slots[pos];
            if s == 0 {
                return;
            }
            if s & !INDEX_MASK == tag {
                self.prefetch_entry((s & INDEX_MASK) - 1, side);
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Hints the CPU to fetch the lines of entry `idx` a packet from `side` updates: the
    /// header and its direction's line, and the early-packet line (needed by most packets: the
    /// first ten of each flow; fetching it for the others costs bandwidth, not waiting).
    #[inline]
    pub(crate) fn prefetch_entry(&self, idx: u32, side: usize) {
        let e = &self.entries[idx as usize];
        mem_prefetch::prefetch_write_data::<_, 3>(&e.key);
        mem_prefetch::prefetch_write_data::<_, 3>(&e.dirs[side]);
        mem_prefetch::prefetch_write_data::<_, 3>(&e.early);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(i: u32) -> FlowKey {
        let mut k = FlowKey::default();
        k.0[..4].copy_from_slice(&i.to_le_bytes());
        k
    }

    #[test]
    fn insert_find_remove_many() {
        let mut t = FlowTable::new(1000);
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
            t.remove(idx[i]);
        }
        for i in 0..1000u32 {
            let k = key(i);
            let found = t.find(&k, k.hash());
            assert_eq!(found.is_some(), i % 2 == 1, "key {i}");
        }
        assert_eq!(t.len(), 500);
        assert_eq!(t.live_indices().count(), 500);
    }

    #[test]
    fn colliding_hashes_probe_correctly() {
        // Keys whose hashes share one home slot, so they form one long probe run.
        let mut t = FlowTable::new(64);
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
            t.remove(idx[r]);
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

    #[test]
    fn wheel_links_survive_unschedule_in_the_middle() {
        let mut t = FlowTable::new(8);
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
            cur = t.entries[cur as usize].wheel_next;
        }
        assert_eq!(seen, vec![c, a]);
    }
}
