//! The aggregation table: packed group key → metrics, open addressing with linear probing,
//! one 64-byte slot per group (key and metrics in one cache line), partitions of which large
//! ones live in huge-page mappings, and batched updates that prefetch the slots of the next
//! rows while the current ones are added — a high-cardinality group-by (conversations) is
//! bound by cache and TLB misses on this table, not by arithmetic.
//!
//! Radix-partitioned aggregation: rows of a high-cardinality group-by are not added one by
//! one to a table of millions of groups (a cache miss each, and one such table per scan
//! worker, merged at the end). They are *staged*: appended, key and counters, to one of 256
//! partitions chosen by the top bits of the key's hash (a sequential write). Staged rows are
//! aggregated partition by partition — when the workers' tables are merged, or earlier when
//! too many rows are staged — so the working set is one partition's table (1/256 of the
//! groups) and every worker's rows of a partition go straight into the one merged table.
use crate::partial::Metrics;

/// A slot: packed key + 1 in words 0–1 (0: vacant, so fresh zeroed memory is an empty table
/// without a pass to initialise it), the five metrics in words 2–6, word 7 unused: one cache
/// line per group.
type Slot = [u64; 8];

#[inline]
fn slot_key(s: &Slot) -> Option<u128> {
    let k = u128::from(s[0]) | u128::from(s[1]) << 64;
    k.checked_sub(1)
}

#[inline]
fn slot_metrics(s: &Slot) -> Metrics {
    Metrics {
        fwd_packets: s[2],
        rev_packets: s[3],
        fwd_bytes: s[4],
        rev_bytes: s[5],
        flows: s[6],
    }
}

#[inline]
fn slot_add(s: &mut Slot, m: &Metrics) {
    s[2] += m.fwd_packets;
    s[3] += m.rev_packets;
    s[4] += m.fwd_bytes;
    s[5] += m.rev_bytes;
    s[6] += m.flows;
}

/// Slot arrays of at least this many slots (2 MiB, one huge page) live in their own anonymous
/// mapping advised for transparent huge pages: a conversation table of tens of millions of
/// groups is probed at random, and with 4 KiB pages nearly every probe also missed the TLB
/// and the kernel faulted the table in page by page.
const MAPPED_SLOTS: usize = 1 << 15;

#[derive(Debug)]
enum Storage {
    Heap(Vec<Slot>),
    Mapped(memmap2::MmapMut),
}

impl Storage {
    /// `n` vacant slots.
    ///
    /// # Panics
    /// Panics when the kernel refuses the mapping, as a failed `Vec` allocation would abort.
    fn zeroed(n: usize) -> Storage {
        if n < MAPPED_SLOTS {
            // `vec!` of zeros allocates zeroed memory without writing it.
            return Storage::Heap(vec![[0u64; 8]; n]);
        }
        let map = memmap2::MmapMut::map_anon(n * std::mem::size_of::<Slot>())
            .expect("cannot map memory for an aggregation table");
        // Advice only: without huge pages the table works the same, slower.
        let _ = map.advise(memmap2::Advice::HugePage);
        Storage::Mapped(map)
    }

    #[inline]
    fn get(&self) -> &[Slot] {
        match self {
            Storage::Heap(v) => v,
            Storage::Mapped(m) => bytemuck::cast_slice(m),
        }
    }

    #[inline]
    fn get_mut(&mut self) -> &mut [Slot] {
        match self {
            Storage::Heap(v) => v,
            Storage::Mapped(m) => bytemuck::cast_slice_mut(m),
        }
    }
}

impl Clone for Storage {
    fn clone(&self) -> Self {
        let mut c = Storage::zeroed(self.get().len());
        c.get_mut().copy_from_slice(self.get());
        c
    }
}

/// Rows whose slots are prefetched ahead of the update.
const AHEAD: usize = 16;

/// Packed group key → summed metrics.
#[derive(Clone, Debug)]
pub(crate) struct Part {
    slots: Storage,
    len: usize,
    /// Mixed into the hash, different per table: iterating one table visits keys in the order
    /// of its hash, and inserting them in that order into a table with the same hash piles
    /// them into ever longer probe runs (merging two tables of ~1 M groups took 30 s).
    seed: u64,
    /// 64 − log2(capacity): the slot index is the top bits of the hash.
    shift: u32,
}

impl Default for Part {
    /// An empty partition holding no memory yet (a table has 256 of them, a query may have
    /// a table per time bucket).
    fn default() -> Self {
        Part {
            slots: Storage::Heap(Vec::new()),
            len: 0,
            seed: next_seed(),
            shift: 64,
        }
    }
}

fn next_seed() -> u64 {
    SEEDS
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

static SEEDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Seed-independent hash of a key: its top bits choose the partition.
#[inline]
fn prehash(k: u128) -> u64 {
    let (lo, hi) = (k as u64, (k >> 64) as u64);
    let x = lo.wrapping_mul(0xD6E8_FEB8_6659_FD93)
        ^ hi.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    (x ^ (x >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

/// The slot hash of a partition: the prehash mixed with the partition's seed.
#[inline]
fn hash(pre: u64, seed: u64) -> u64 {
    let x = (pre ^ seed).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 29)
}

impl Part {
    fn with_capacity_log2(bits: u32) -> Self {
        Part {
            slots: Storage::zeroed(1 << bits),
            len: 0,
            shift: 64 - bits,
            seed: next_seed(),
        }
    }

    /// Slots (a power of two, or 0 for a partition never written).
    #[inline]
    fn capacity(&self) -> usize {
        self.slots.get().len()
    }

    /// The home slot of hash `h` (only meaningful with a capacity above 0).
    #[inline]
    fn home(&self, h: u64) -> usize {
        h.checked_shr(self.shift).unwrap_or(0) as usize
    }

    /// Prefetches the home slot of hash `h`, if the partition has slots.
    #[inline]
    fn prefetch(&self, h: u64) {
        if let Some(s) = self.slots.get().get(self.home(h)) {
            mem_prefetch::prefetch_write_data::<_, 3>(s);
        }
    }

    #[inline]
    fn grow_if_needed(&mut self) {
        // Load factor at most 7/8 keeps linear probes short.
        if (self.len + 1) * 8 > self.capacity() * 7 {
            self.resize_for(self.len + 1);
        }
    }

    /// Makes room for `groups` groups at a load factor of at most 7/8 (never shrinks).
    fn reserve(&mut self, groups: usize) {
        if groups * 8 > self.capacity() * 7 {
            self.resize_for(groups);
        }
    }

    #[cold]
    fn resize_for(&mut self, groups: usize) {
        let cap = self.capacity();
        let want = (groups * 8)
            .div_ceil(7)
            .next_power_of_two()
            .max(cap * 2)
            .max(64);
        let mut bigger = Part::with_capacity_log2(want.trailing_zeros());
        // Same seed: hashes computed before the growth stay valid (`add_many`).
        bigger.seed = self.seed;
        let old = std::mem::replace(self, bigger);
        for s in old.slots.get() {
            if let Some(k) = slot_key(s) {
                let h = hash(prehash(k), self.seed);
                *self.slot(k, h) = *s;
            }
        }
        self.len = old.len;
    }

    /// The slot of `key` (claimed if vacant; the caller counts it).
    #[inline]
    fn slot(&mut self, key: u128, h: u64) -> &mut Slot {
        let stored = key + 1;
        let (lo, hi) = (stored as u64, (stored >> 64) as u64);
        let mut i = self.home(h);
        let slots = self.slots.get_mut();
        let mask = slots.len() - 1;
        loop {
            let s = &slots[i];
            if (s[0] == lo && s[1] == hi) || (s[0] == 0 && s[1] == 0) {
                break;
            }
            i = (i + 1) & mask;
        }
        let s = &mut slots[i];
        if s[0] == 0 && s[1] == 0 {
            s[0] = lo;
            s[1] = hi;
            self.len += 1;
        }
        s
    }

    /// Adds `m` to the group `key` (`pre`: its prehash).
    #[inline]
    fn add(&mut self, key: u128, pre: u64, m: &Metrics) {
        self.grow_if_needed();
        let h = hash(pre, self.seed);
        slot_add(self.slot(key, h), m);
    }

    /// Adds every group of `other`.
    fn absorb_ref(&mut self, other: &Part) {
        for s in other.slots.get() {
            if let Some(k) = slot_key(s) {
                self.add(k, prehash(k), &slot_metrics(s));
            }
        }
    }

    /// Adds every group of `other` (merging: the smaller goes into the larger).
    fn absorb(mut self, mut other: Part) -> Part {
        if other.len > self.len {
            std::mem::swap(&mut self, &mut other);
        }
        for s in other.slots.get() {
            if let Some(k) = slot_key(s) {
                self.add(k, prehash(k), &slot_metrics(s));
            }
        }
        self
    }

    /// Adds records (staged rows or groups), prefetching ahead.
    fn add_recs<'r>(&mut self, recs: impl Iterator<Item = &'r Rec>) {
        let mut pending = [(0u64, None::<&Rec>); AHEAD];
        let mut recs = recs.peekable();
        while recs.peek().is_some() {
            let mut n = 0;
            for r in recs.by_ref().take(AHEAD) {
                let h = hash(prehash(r.key()), self.seed);
                self.prefetch(h);
                pending[n] = (h, Some(r));
                n += 1;
            }
            for &(h, r) in &pending[..n] {
                let Some(r) = r else { continue };
                self.grow_if_needed();
                let s = self.slot(r.key(), h);
                for (x, y) in s[2..7].iter_mut().zip(r.m) {
                    *x += y;
                }
            }
        }
    }

    /// Moves every group out into `out` (in slot order), leaving the partition empty with its
    /// memory kept for reuse.
    fn drain_into(&mut self, out: &mut ChunkWriter<'_>) {
        if self.len == 0 {
            return;
        }
        for s in self.slots.get_mut() {
            if s[0] == 0 && s[1] == 0 {
                continue;
            }
            let k = u128::from(s[0]) | u128::from(s[1]) << 64;
            let k = k - 1;
            out.push(Rec {
                k: [k as u64, (k >> 64) as u64],
                m: [s[2], s[3], s[4], s[5], s[6]],
            });
            *s = [0; 8];
        }
        self.len = 0;
    }

    fn iter(&self) -> impl Iterator<Item = (u128, Metrics)> + '_ {
        self.slots
            .get()
            .iter()
            .filter_map(|s| slot_key(s).map(|k| (k, slot_metrics(s))))
    }
}

/// Partitions of a table, by the top bits of the seed-independent prehash: tables of different
/// workers merge partition by partition, in parallel, each partition grows on its own, and
/// staged rows are aggregated one partition at a time (256: a partition of a 25-million-group
/// conversation table is ~100 k groups, a few MB).
const PART_BITS: u32 = 8;
const PARTS: usize = 1 << PART_BITS;
const PART_SHIFT: u32 = 64 - PART_BITS;

/// A group or staged row outside a table: key (low, high word) and the five metrics, 56
/// bytes (a staged row carries one flow).
#[derive(Clone, Copy, Debug, Default)]
struct Rec {
    k: [u64; 2],
    m: [u64; 5],
}

impl Rec {
    #[inline]
    fn key(&self) -> u128 {
        u128::from(self.k[0]) | u128::from(self.k[1]) << 64
    }
}

/// Largest chunk of a [`Chunks`] list (256 KiB).
const CHUNK_MAX: usize = 4096;

/// Records in chunks that double up to [`CHUNK_MAX`]: appending never moves what is there
/// (no reallocation copying gigabytes), and a partition holding a few records holds little.
#[derive(Clone, Debug, Default)]
struct Chunks {
    chunks: Vec<Vec<Rec>>,
    len: usize,
}

impl Chunks {
    #[inline]
    fn push(&mut self, r: Rec) {
        match self.chunks.last_mut() {
            Some(c) if c.len() < c.capacity() => c.push(r),
            _ => self.push_chunk(r),
        }
        self.len += 1;
    }

    #[cold]
    fn push_chunk(&mut self, r: Rec) {
        let cap = self
            .chunks
            .last()
            .map_or(4, |c| (c.capacity() * 2).min(CHUNK_MAX));
        let mut c = Vec::with_capacity(cap);
        c.push(r);
        self.chunks.push(c);
    }

    #[inline]
    fn last_mut(&mut self) -> Option<&mut Rec> {
        self.chunks.last_mut().and_then(|c| c.last_mut())
    }

    fn iter(&self) -> impl Iterator<Item = &Rec> + '_ {
        self.chunks.iter().flatten()
    }

    fn clear(&mut self, keep: bool) {
        if keep {
            // Keep the largest chunk for the next rows.
            let big = self.chunks.pop();
            self.chunks.clear();
            if let Some(mut c) = big {
                c.clear();
                self.chunks.push(c);
            }
        } else {
            self.chunks = Vec::new();
        }
        self.len = 0;
    }
}

/// Overwrites the records of chunk lists from the start (the staged rows being aggregated:
/// the groups never outnumber the rows they came from), so the aggregated groups of a
/// partition take no new memory.
struct ChunkWriter<'a> {
    from: std::vec::IntoIter<Vec<Rec>>,
    out: &'a mut Chunks,
}

impl<'a> ChunkWriter<'a> {
    /// A writer into `out` (emptied) reusing the chunks of `lists`.
    fn new(lists: Vec<Chunks>, out: &'a mut Chunks) -> Self {
        let all: Vec<Vec<Rec>> = lists
            .into_iter()
            .flat_map(|c| c.chunks)
            .map(|mut c| {
                c.clear();
                c
            })
            .collect();
        out.chunks.clear();
        out.len = 0;
        ChunkWriter {
            from: all.into_iter(),
            out,
        }
    }

    #[inline]
    fn push(&mut self, r: Rec) {
        match self.out.chunks.last_mut() {
            Some(c) if c.len() < c.capacity() => c.push(r),
            _ => match self.from.next() {
                Some(mut c) => {
                    c.push(r);
                    self.out.chunks.push(c);
                }
                // More groups than rows: not possible, but stay correct.
                None => {
                    self.out.push(r);
                    return;
                }
            },
        }
        self.out.len += 1;
    }
}

/// Packed group key → summed metrics, plus rows staged but not aggregated yet.
///
/// Per partition the groups are in the hash table `parts[p]` and, after a merge that
/// aggregated staged rows, in the records `packed[p]` (keys distinct, none also in
/// `parts[p]`); `staged[p]` holds rows not aggregated yet (keys may repeat).
#[derive(Clone, Debug)]
pub(crate) struct AggTable {
    parts: Vec<Part>,
    packed: Vec<Chunks>,
    staged: Vec<Chunks>,
    staged_len: usize,
}

impl Default for AggTable {
    fn default() -> Self {
        AggTable {
            parts: (0..PARTS).map(|_| Part::default()).collect(),
            packed: (0..PARTS).map(|_| Chunks::default()).collect(),
            staged: (0..PARTS).map(|_| Chunks::default()).collect(),
            staged_len: 0,
        }
    }
}

/// One partition of every table being merged.
struct Slice {
    parts: Vec<Part>,
    packed: Vec<Chunks>,
    staged: Vec<Chunks>,
}

impl Slice {
    /// The partition's groups. With staged rows or records, everything (hash tables too) is
    /// aggregated in `scratch`, a table of this partition alone that stays in the caches,
    /// and written back as records over the staged rows; otherwise the hash tables are added
    /// into the largest.
    fn combine(mut self, scratch: &mut Part) -> (Part, Chunks) {
        let mut out = Chunks::default();
        let rows: usize = self.staged.iter().chain(&self.packed).map(|c| c.len).sum();
        if rows > 0 {
            let groups: usize = self.parts.iter().map(|p| p.len).sum();
            scratch.reserve(rows + groups);
            for p in &self.parts {
                scratch.absorb_ref(p);
            }
            drop(self.parts);
            for c in self.staged.iter().chain(&self.packed) {
                scratch.add_recs(c.iter());
            }
            self.staged.append(&mut self.packed);
            let mut w = ChunkWriter::new(self.staged, &mut out);
            scratch.drain_into(&mut w);
            return (Part::default(), out);
        }
        self.parts.sort_by_key(|p| std::cmp::Reverse(p.len));
        let mut parts = self.parts.into_iter();
        let mut p = parts.next().unwrap_or_default();
        for q in parts {
            p = p.absorb(q);
        }
        (p, out)
    }
}

impl AggTable {
    /// Groups held (rows staged and not aggregated yet are not counted).
    pub(crate) fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len).sum::<usize>()
            + self.packed.iter().map(|c| c.len).sum::<usize>()
    }

    /// Rows staged and not aggregated yet.
    pub(crate) fn staged_len(&self) -> usize {
        self.staged_len
    }

    /// Appends one flow row per selected index (`keys[i]`, the four counters of row `i`) to
    /// the partition of its key, without aggregating it: [`AggTable::flush`] or
    /// [`AggTable::merge_all`] does, a partition at a time. A row with the key of the row
    /// staged just before it is added to that one (rows of a block come sorted by
    /// conversation, so this saves some staging). Returns the rows staged.
    pub(crate) fn stage_rows(
        &mut self,
        keys: &[u128],
        sel: Option<&[bool]>,
        counters: [&[u64]; 4],
    ) -> u64 {
        let [fp, rp, fb, rb] = counters;
        let n = keys
            .len()
            .min(fp.len())
            .min(rp.len())
            .min(fb.len())
            .min(rb.len());
        let (keys, fp, rp, fb, rb) = (&keys[..n], &fp[..n], &rp[..n], &fb[..n], &rb[..n]);
        let mut added = 0u64;
        let mut last: Option<(u128, usize)> = None;
        for i in 0..n {
            if sel.is_some_and(|s| !s[i]) {
                continue;
            }
            added += 1;
            let key = keys[i];
            if let Some((k, part)) = last {
                if k == key {
                    if let Some(r) = self.staged[part].last_mut() {
                        r.m[0] += fp[i];
                        r.m[1] += rp[i];
                        r.m[2] += fb[i];
                        r.m[3] += rb[i];
                        r.m[4] += 1;
                        continue;
                    }
                }
            }
            let part = (prehash(key) >> PART_SHIFT) as usize;
            self.staged[part].push(Rec {
                k: [key as u64, (key >> 64) as u64],
                m: [fp[i], rp[i], fb[i], rb[i], 1],
            });
            self.staged_len += 1;
            last = Some((key, part));
        }
        added
    }

    /// Aggregates the staged rows into the hash tables, partition by partition. `keep`: keep
    /// some staging memory for more rows (during a scan).
    pub(crate) fn flush(&mut self, keep: bool) {
        if self.staged_len == 0 {
            return;
        }
        for p in 0..PARTS {
            if self.staged[p].len == 0 {
                continue;
            }
            self.unpack(p);
            let part = &mut self.parts[p];
            part.reserve(part.len + self.staged[p].len / 4);
            part.add_recs(self.staged[p].iter());
            self.staged[p].clear(keep);
        }
        self.staged_len = 0;
    }

    /// Moves partition `p`'s records into its hash table (before adding to it).
    #[inline]
    fn unpack(&mut self, p: usize) {
        if self.packed[p].len > 0 {
            self.unpack_slow(p);
        }
    }

    #[cold]
    fn unpack_slow(&mut self, p: usize) {
        let part = &mut self.parts[p];
        part.reserve(part.len + self.packed[p].len);
        part.add_recs(self.packed[p].iter());
        self.packed[p].clear(false);
    }

    /// Adds `m` to the group `key`.
    pub(crate) fn add(&mut self, key: u128, m: &Metrics) {
        let pre = prehash(key);
        let p = (pre >> PART_SHIFT) as usize;
        self.unpack(p);
        self.parts[p].add(key, pre, m);
    }

    /// Adds each `(key, metrics)`, prefetching the slots of the next keys while adding the
    /// current ones.
    pub(crate) fn add_many(&mut self, items: &[(u128, Metrics)]) {
        let mut pending = [(0usize, 0u64); AHEAD];
        for chunk in items.chunks(AHEAD) {
            for (j, (k, _)) in chunk.iter().enumerate() {
                let pre = prehash(*k);
                let part = (pre >> PART_SHIFT) as usize;
                self.unpack(part);
                let p = &self.parts[part];
                let h = hash(pre, p.seed);
                pending[j] = (part, h);
                p.prefetch(h);
            }
            for (j, (k, m)) in chunk.iter().enumerate() {
                let (part, h) = pending[j];
                let p = &mut self.parts[part];
                p.grow_if_needed();
                slot_add(p.slot(*k, h), m);
            }
        }
    }

    /// Adds one flow row per selected index: `keys[i]` gets the four counters of row `i` and
    /// one flow. Returns the rows added. (The row-at-a-time path the scan used before staging;
    /// the tests hold staging to it.)
    #[cfg(test)]
    pub(crate) fn add_rows(
        &mut self,
        keys: &[u128],
        sel: Option<&[bool]>,
        counters: [&[u64]; 4],
    ) -> u64 {
        let [fp, rp, fb, rb] = counters;
        let n = keys
            .len()
            .min(fp.len())
            .min(rp.len())
            .min(fb.len())
            .min(rb.len());
        // The rows to add: all, or the selected ones gathered first, so that hashing and
        // prefetching are spent only on rows that count.
        let rows: Vec<u32> = match sel {
            None => (0..n as u32).collect(),
            Some(s) => (0..n as u32).filter(|&i| s[i as usize]).collect(),
        };
        let mut pending = [(0usize, 0u64); AHEAD];
        for chunk in rows.chunks(AHEAD) {
            for (j, &i) in chunk.iter().enumerate() {
                let pre = prehash(keys[i as usize]);
                let part = (pre >> PART_SHIFT) as usize;
                self.unpack(part);
                let p = &self.parts[part];
                let h = hash(pre, p.seed);
                pending[j] = (part, h);
                p.prefetch(h);
            }
            for (j, &i) in chunk.iter().enumerate() {
                let i = i as usize;
                let (part, h) = pending[j];
                let p = &mut self.parts[part];
                p.grow_if_needed();
                let s = p.slot(keys[i], h);
                s[2] += fp[i];
                s[3] += rp[i];
                s[4] += fb[i];
                s[5] += rb[i];
                s[6] += 1;
            }
        }
        rows.len() as u64
    }

    /// Adds every group and staged row of `other`, and aggregates the staged rows of both
    /// (see [`AggTable::merge_all`]).
    pub(crate) fn merge(self, other: AggTable, threads: usize) -> AggTable {
        AggTable::merge_all(vec![self, other], threads)
    }

    /// One table of every group and staged row of `tables`, the staged rows aggregated.
    /// Partitions are combined one at a time (on `threads` threads for large tables): a
    /// partition's staged rows from every table are aggregated together in a table of that
    /// partition alone, which stays in the caches, and written back over the rows.
    pub(crate) fn merge_all(tables: Vec<AggTable>, threads: usize) -> AggTable {
        let work: usize = tables.iter().map(|t| t.len() + t.staged_len).sum();
        let mut slices: Vec<Slice> = (0..PARTS)
            .map(|_| Slice {
                parts: Vec::with_capacity(tables.len()),
                packed: Vec::new(),
                staged: Vec::new(),
            })
            .collect();
        for t in tables {
            for (((s, p), k), g) in slices.iter_mut().zip(t.parts).zip(t.packed).zip(t.staged) {
                if p.len > 0 {
                    s.parts.push(p);
                }
                if k.len > 0 {
                    s.packed.push(k);
                }
                if g.len > 0 {
                    s.staged.push(g);
                }
            }
        }
        let threads = if work > 100_000 {
            threads.clamp(1, PARTS)
        } else {
            1
        };
        let mut out: Vec<(Part, Chunks)> = if threads == 1 {
            let mut scratch = Part::default();
            slices
                .into_iter()
                .map(|s| s.combine(&mut scratch))
                .collect()
        } else {
            // Partitions handed out one at a time: their sizes differ.
            let next = std::sync::atomic::AtomicUsize::new(0);
            let slices: Vec<std::sync::Mutex<Option<Slice>>> = slices
                .into_iter()
                .map(|x| std::sync::Mutex::new(Some(x)))
                .collect();
            let mut done: Vec<(usize, (Part, Chunks))> = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..threads)
                    .map(|_| {
                        sc.spawn(|| {
                            let mut scratch = Part::default();
                            let mut done = Vec::new();
                            loop {
                                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                                let Some(slot) = slices.get(i) else {
                                    break;
                                };
                                let slice = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                                if let Some(slice) = slice {
                                    done.push((i, slice.combine(&mut scratch)));
                                }
                            }
                            done
                        })
                    })
                    .collect();
                hs.into_iter()
                    .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                    .collect()
            });
            done.sort_by_key(|(i, _)| *i);
            done.into_iter().map(|(_, x)| x).collect()
        };
        let mut t = AggTable::default();
        for (p, (part, packed)) in out.drain(..).enumerate() {
            t.parts[p] = part;
            t.packed[p] = packed;
        }
        t
    }

    /// Every group (staged rows must have been aggregated: tables leave a scan merged).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u128, Metrics)> + '_ {
        debug_assert_eq!(self.staged_len, 0, "iterating a table with staged rows");
        self.parts.iter().flat_map(|p| p.iter()).chain(
            self.packed.iter().flat_map(|c| c.iter()).map(|r| {
                (
                    r.key(),
                    Metrics {
                        fwd_packets: r.m[0],
                        rev_packets: r.m[1],
                        fwd_bytes: r.m[2],
                        rev_bytes: r.m[3],
                        flows: r.m[4],
                    },
                )
            }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn sums_like_a_hash_map() {
        let mut t = AggTable::default();
        let mut reference: HashMap<u128, Metrics> = HashMap::new();
        let mut x = 7u64;
        let mut keys = Vec::new();
        for _ in 0..20_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            keys.push(u128::from(x >> 52) << 88 | u128::from(x & 3));
        }
        let c: Vec<u64> = (0..keys.len() as u64).collect();
        let sel: Vec<bool> = (0..keys.len()).map(|i| i % 3 != 0).collect();
        let added = t.add_rows(&keys, Some(&sel), [&c, &c, &c, &c]);
        for (i, k) in keys.iter().enumerate().filter(|(i, _)| sel[*i]) {
            let m = reference.entry(*k).or_default();
            m.add(&Metrics {
                fwd_packets: c[i],
                rev_packets: c[i],
                fwd_bytes: c[i],
                rev_bytes: c[i],
                flows: 1,
            });
        }
        assert_eq!(added, sel.iter().filter(|&&s| s).count() as u64);
        assert_eq!(t.len(), reference.len());
        for (k, m) in t.iter() {
            assert_eq!(reference[&k], m);
        }
        t.add(
            keys[1],
            &Metrics {
                flows: 5,
                ..Metrics::default()
            },
        );
        // Merging a table into another in iteration order stays fast (distinct seeds).
        let mut u = AggTable::default();
        for (k, m) in t.iter() {
            u.add(k, &m);
        }
        assert_eq!(u.len(), t.len());
        assert_eq!(
            t.iter().find(|(k, _)| *k == keys[1]).unwrap().1.flows,
            reference[&keys[1]].flows + 5
        );
    }

    #[test]
    fn parallel_merge_equals_serial_adds() {
        let (mut a, mut b, mut both) = (
            AggTable::default(),
            AggTable::default(),
            AggTable::default(),
        );
        for i in 0..300_000u128 {
            let k = (i % 170_000) << 60 | (i % 7);
            let m = Metrics {
                fwd_bytes: i as u64,
                flows: 1,
                ..Metrics::default()
            };
            if i % 2 == 0 {
                a.add(k, &m)
            } else {
                b.add(k, &m)
            }
            both.add(k, &m);
        }
        let merged = a.merge(b, 2);
        assert_eq!(merged.len(), both.len());
        let want: HashMap<u128, Metrics> = both.iter().collect();
        for (k, m) in merged.iter() {
            assert_eq!(want[&k], m);
        }
    }

    #[test]
    fn large_tables_in_mapped_memory_sum_exactly() {
        let mut t = AggTable::default();
        let n = 1_200_000u128;
        for i in 0..n {
            // Every key twice, the second time in reverse order.
            t.add(
                i << 70 | 5,
                &Metrics {
                    fwd_bytes: 1,
                    flows: 1,
                    ..Metrics::default()
                },
            );
        }
        for i in (0..n).rev() {
            t.add(
                i << 70 | 5,
                &Metrics {
                    rev_bytes: i as u64,
                    flows: 1,
                    ..Metrics::default()
                },
            );
        }
        // 1.2 M groups in 256 partitions: ~4,700 each, below a huge page.
        assert!(t.parts.iter().all(|p| p.capacity() >= 1 << 12));
        let mut big = Part::default();
        big.reserve(MAPPED_SLOTS);
        assert!(matches!(big.slots, Storage::Mapped(_)));
        assert_eq!(t.len(), n as usize);
        let mut seen = 0u128;
        for (k, m) in t.iter() {
            assert_eq!(k & 0xff, 5);
            assert_eq!(
                (m.fwd_bytes, m.rev_bytes, m.flows),
                (1, (k >> 70) as u64, 2)
            );
            seen += 1;
        }
        assert_eq!(seen, n);
        // Clones copy the mapping.
        let c = t.clone();
        assert_eq!(c.len(), t.len());
    }

    /// Keys with repeats, runs of equal keys (as in a sorted block), and a spread over all
    /// partitions; counters that differ per row.
    fn rows(n: usize, seed: u64) -> (Vec<u128>, Vec<u64>, Vec<bool>) {
        let mut x = seed;
        let mut keys = Vec::with_capacity(n);
        let mut c = Vec::with_capacity(n);
        for i in 0..n {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let k = if i % 7 == 3 {
                // A run: the key of the row before.
                *keys.last().unwrap_or(&0)
            } else {
                u128::from(x >> 44) << 89 | u128::from(x & 0xff) << 16
            };
            keys.push(k);
            c.push(x >> 40);
        }
        let sel = (0..n).map(|i| i % 5 != 1).collect();
        (keys, c, sel)
    }

    fn sorted(t: &AggTable) -> Vec<(u128, Metrics)> {
        let mut v: Vec<_> = t.iter().collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    #[test]
    fn staged_rows_aggregate_like_the_plain_path() {
        let (keys, c, sel) = rows(200_000, 11);
        let c2: Vec<u64> = c.iter().map(|x| x * 3 + 1).collect();
        let counters = [&c[..], &c2[..], &c[..], &c2[..]];
        let mut plain = AggTable::default();
        plain.add_rows(&keys, Some(&sel), counters);
        let want = sorted(&plain);
        assert!(want.len() > 100_000);

        // Staged in batches by three "workers", one of them spilling into its hash tables
        // halfway (`flush`), another also taking dense-path groups (`add_many`) and a
        // group via `add`; then merged all at once, in parallel and serially.
        for threads in [1, 2, 3] {
            let mut t: Vec<AggTable> = (0..3).map(|_| AggTable::default()).collect();
            let mut staged = 0;
            for (b, range) in (0..keys.len())
                .collect::<Vec<_>>()
                .chunks(9_000)
                .enumerate()
            {
                let (lo, hi) = (range[0], range[range.len() - 1] + 1);
                let w = b % 3;
                if w == 2 && b % 2 == 0 {
                    let items: Vec<(u128, Metrics)> = (lo..hi)
                        .filter(|&i| sel[i])
                        .map(|i| {
                            (
                                keys[i],
                                Metrics {
                                    fwd_packets: c[i],
                                    rev_packets: c2[i],
                                    fwd_bytes: c[i],
                                    rev_bytes: c2[i],
                                    flows: 1,
                                },
                            )
                        })
                        .collect();
                    t[w].add_many(&items);
                    continue;
                }
                let counters = [&c[lo..hi], &c2[lo..hi], &c[lo..hi], &c2[lo..hi]];
                staged += t[w].stage_rows(&keys[lo..hi], Some(&sel[lo..hi]), counters);
                if w == 1 && b == 10 {
                    t[w].flush(true);
                    assert_eq!(t[w].staged_len(), 0);
                }
            }
            let dense_rows: usize = (0..keys.len())
                .collect::<Vec<_>>()
                .chunks(9_000)
                .enumerate()
                .filter(|(b, _)| b % 3 == 2 && b % 2 == 0)
                .map(|(_, r)| r.iter().filter(|&&i| sel[i]).count())
                .sum();
            assert_eq!(
                staged as usize + dense_rows,
                sel.iter().filter(|&&s| s).count()
            );
            let merged = AggTable::merge_all(t, threads);
            assert_eq!(merged.staged_len(), 0);
            assert_eq!(merged.len(), want.len());
            assert_eq!(sorted(&merged), want, "threads {threads}");
            // Packed groups take further adds and merges like any table.
            let mut again = merged.clone();
            again.add(
                want[0].0,
                &Metrics {
                    flows: 2,
                    ..Metrics::default()
                },
            );
            let doubled = again.merge(merged, threads);
            let got = sorted(&doubled);
            assert_eq!(got.len(), want.len());
            assert_eq!(got[0].1.flows, 2 * want[0].1.flows + 2);
            assert_eq!(got[1].1.fwd_bytes, 2 * want[1].1.fwd_bytes);
        }
    }

    #[test]
    fn runs_of_equal_keys_stage_once() {
        let keys = [5u128, 5, 5, 9, 5, 5];
        let c = [1u64, 2, 3, 4, 5, 6];
        let mut t = AggTable::default();
        assert_eq!(t.stage_rows(&keys, None, [&c, &c, &c, &c]), 6);
        assert_eq!(t.staged_len(), 3);
        let t = AggTable::merge_all(vec![t], 1);
        let got = sorted(&t);
        assert_eq!(got.len(), 2);
        let five = got.iter().find(|(k, _)| *k == 5).unwrap().1;
        assert_eq!((five.fwd_bytes, five.flows), (17, 5));
    }
}
