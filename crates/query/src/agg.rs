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
    s[2] = s[2].wrapping_add(m.fwd_packets);
    s[3] = s[3].wrapping_add(m.rev_packets);
    s[4] = s[4].wrapping_add(m.fwd_bytes);
    s[5] = s[5].wrapping_add(m.rev_bytes);
    s[6] = s[6].wrapping_add(m.flows);
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

    /// Adds `(key, metrics)` items (staged rows or groups), prefetching ahead.
    fn add_recs(&mut self, recs: impl Iterator<Item = (u128, [u64; 5])>) {
        // A software pipeline as in `AggTable::add_many`.
        let mut ring = [(0u64, 0u128, [0u64; 5]); AHEAD];
        let mut recs = recs.fuse();
        let mut n = 0;
        for (j, (k, m)) in recs.by_ref().take(AHEAD).enumerate() {
            let h = hash(prehash(k), self.seed);
            self.prefetch(h);
            ring[j] = (h, k, m);
            n += 1;
        }
        let mut i = 0;
        while i < n {
            let (h, k, m) = ring[i % AHEAD];
            if let Some((k2, m2)) = recs.next() {
                let h2 = hash(prehash(k2), self.seed);
                self.prefetch(h2);
                ring[i % AHEAD] = (h2, k2, m2);
                n += 1;
            }
            self.grow_if_needed();
            let s = self.slot(k, h);
            for (x, y) in s[2..7].iter_mut().zip(m) {
                *x = x.wrapping_add(y);
            }
            i += 1;
        }
    }

    /// Moves every group out into `out` (in slot order), leaving the partition empty with its
    /// memory kept for reuse.
    fn drain_into(&mut self, out: &mut GroupWriter) {
        if self.len == 0 {
            return;
        }
        for s in self.slots.get_mut() {
            if s[0] == 0 && s[1] == 0 {
                continue;
            }
            // The stored key is key + 1.
            let k = (u128::from(s[0]) | u128::from(s[1]) << 64) - 1;
            out.push([k as u64, (k >> 64) as u64, s[2], s[3], s[4], s[5], s[6]]);
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
/// Groups of the smaller side from which [`AggTable::absorb`] merges on every core (a
/// thread's start costs tens of microseconds; a group's addition about 0.1).
const PARALLEL_ABSORB_MIN: usize = 16_384;

/// Puts a partition's groups held outside its hash table into it.
fn unpack_part(part: &mut Part, packed: &mut Groups) {
    part.reserve(part.len + packed.len);
    part.add_recs(packed.iter().map(group_item));
    packed.clear(false);
}

/// [`AggTable::absorb`] of a run of partitions: each of `theirs` (hashed, or held outside a
/// table) added to the same partition of `mine`.
fn absorb_run(
    mine: &mut [Part],
    mine_packed: &mut [Groups],
    theirs: &mut [Part],
    their_packed: &mut [Groups],
) {
    let metrics = |m: Metrics| {
        [
            m.fwd_packets,
            m.rev_packets,
            m.fwd_bytes,
            m.rev_bytes,
            m.flows,
        ]
    };
    for p in 0..mine.len() {
        let theirs = std::mem::take(&mut theirs[p]);
        let packed = std::mem::take(&mut their_packed[p]);
        if theirs.len + packed.len == 0 {
            continue;
        }
        if mine[p].len + mine_packed[p].len == 0 {
            // Nothing here yet: their groups as they are (distinct keys, either form).
            mine[p] = theirs;
            mine_packed[p] = packed;
            continue;
        }
        if mine_packed[p].len > 0 {
            unpack_part(&mut mine[p], &mut mine_packed[p]);
        }
        let part = &mut mine[p];
        // The union holds at least the larger side.
        part.reserve(part.len.max(theirs.len + packed.len));
        part.add_recs(
            theirs
                .iter()
                .map(|(k, m)| (k, metrics(m)))
                .chain(packed.iter().map(group_item)),
        );
    }
}
const PART_SHIFT: u32 = 64 - PART_BITS;

/// Words of a staged row: key (low, high), forward and reverse packets (32 bits each),
/// forward and reverse bytes (32 bits each) — 32 bytes. Rows with a counter beyond 32 bits go
/// to the hash table instead.
const ROW_WORDS: usize = 4;
/// Words of a group outside a table: key (low, high) and the five metrics — 56 bytes.
const GROUP_WORDS: usize = 7;

#[inline]
fn row_item(w: &[u64; ROW_WORDS]) -> (u128, [u64; 5]) {
    let k = u128::from(w[0]) | u128::from(w[1]) << 64;
    let lo = |x: u64| x & 0xffff_ffff;
    (k, [lo(w[2]), w[2] >> 32, lo(w[3]), w[3] >> 32, 1])
}

#[inline]
fn group_item(w: &[u64; GROUP_WORDS]) -> (u128, [u64; 5]) {
    let k = u128::from(w[0]) | u128::from(w[1]) << 64;
    (k, [w[2], w[3], w[4], w[5], w[6]])
}

/// Largest chunk of a [`Chunks`] list, in words (256 KiB).
const CHUNK_MAX: usize = 1 << 15;

/// Records of `W` words in chunks that double up to [`CHUNK_MAX`]: appending never moves
/// what is there (no reallocation copying gigabytes), and a partition holding a few records
/// holds little.
#[derive(Clone, Debug, Default)]
struct Chunks<const W: usize> {
    chunks: Vec<Vec<u64>>,
    /// Records held.
    len: usize,
}

impl<const W: usize> Chunks<W> {
    #[inline]
    fn push(&mut self, r: [u64; W]) {
        match self.chunks.last_mut() {
            Some(c) if c.capacity() - c.len() >= W => c.extend_from_slice(&r),
            _ => self.push_chunk(r),
        }
        self.len += 1;
    }

    #[cold]
    fn push_chunk(&mut self, r: [u64; W]) {
        let cap = self
            .chunks
            .last()
            .map_or(4 * W, |c| (c.capacity() * 2).min(CHUNK_MAX))
            .max(W);
        let mut c = Vec::with_capacity(cap);
        c.extend_from_slice(&r);
        self.chunks.push(c);
    }

    fn iter(&self) -> impl Iterator<Item = &[u64; W]> + '_ {
        self.chunks.iter().flat_map(|c| c.as_chunks::<W>().0.iter())
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

/// Staged rows of a partition.
type Rows = Chunks<ROW_WORDS>;
/// Groups of a partition outside its hash table.
type Groups = Chunks<GROUP_WORDS>;

/// Writes groups into the chunks of the rows they were aggregated from (reused from the
/// start: the groups of a partition are fewer than its rows, and 7 words a group against 4 a
/// row, so they take no new memory as long as there are fewer than 4/7 as many groups as
/// rows; beyond that, new chunks).
struct GroupWriter {
    from: std::vec::IntoIter<Vec<u64>>,
    out: Groups,
}

impl GroupWriter {
    fn new(rows: Vec<Rows>, groups: Vec<Groups>) -> Self {
        let all: Vec<Vec<u64>> = rows
            .into_iter()
            .flat_map(|c| c.chunks)
            .chain(groups.into_iter().flat_map(|c| c.chunks))
            .map(|mut c| {
                c.clear();
                c
            })
            .collect();
        GroupWriter {
            from: all.into_iter(),
            out: Groups::default(),
        }
    }

    #[inline]
    fn push(&mut self, g: [u64; GROUP_WORDS]) {
        match self.out.chunks.last_mut() {
            Some(c) if c.capacity() - c.len() >= GROUP_WORDS => {
                c.extend_from_slice(&g);
                self.out.len += 1;
            }
            _ => self.next_chunk(g),
        }
    }

    #[cold]
    fn next_chunk(&mut self, g: [u64; GROUP_WORDS]) {
        for mut c in self.from.by_ref() {
            if c.capacity() >= GROUP_WORDS {
                c.extend_from_slice(&g);
                self.out.chunks.push(c);
                self.out.len += 1;
                return;
            }
        }
        let mut c = Vec::with_capacity(CHUNK_MAX);
        c.extend_from_slice(&g);
        self.out.chunks.push(c);
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
    packed: Vec<Groups>,
    staged: Vec<Rows>,
    staged_len: usize,
}

impl Default for AggTable {
    fn default() -> Self {
        AggTable {
            parts: (0..PARTS).map(|_| Part::default()).collect(),
            packed: (0..PARTS).map(|_| Groups::default()).collect(),
            staged: (0..PARTS).map(|_| Rows::default()).collect(),
            staged_len: 0,
        }
    }
}

/// A merging thread's table for one partition at a time (emptied after each, its memory
/// kept), and the rows and groups of the partitions it combined so far.
#[derive(Default)]
struct Scratch {
    part: Part,
    rows: usize,
    groups: usize,
}

/// One partition of every table being merged.
struct Slice {
    parts: Vec<Part>,
    packed: Vec<Groups>,
    staged: Vec<Rows>,
}

impl Slice {
    /// The partition's groups. With staged rows or records, everything (hash tables too) is
    /// aggregated in `scratch`, a table of this partition alone that stays in the caches,
    /// and written back as records over the staged rows; otherwise the hash tables are added
    /// into the largest.
    fn combine(self, scratch: &mut Scratch) -> (Part, Groups) {
        let rows: usize = self.staged.iter().map(|c| c.len).sum::<usize>()
            + self.packed.iter().map(|c| c.len).sum::<usize>();
        if rows > 0 {
            let groups: usize = self.parts.iter().map(|p| p.len).sum();
            let scratch_rows = rows + groups;
            let Scratch {
                part: scratch,
                rows: seen_rows,
                groups: seen_groups,
            } = scratch;
            // Sized for the groups expected (as many per row as in the partitions before;
            // half the rows at first), not for the rows: the table grows if that was short,
            // and a smaller one stays in the caches and drains faster.
            let expect = if *seen_rows == 0 {
                scratch_rows / 2
            } else {
                (scratch_rows as u128 * (*seen_groups as u128 * 5 / 4 + 1) / *seen_rows as u128)
                    as usize
            };
            scratch.reserve(expect.min(scratch_rows));
            for p in &self.parts {
                scratch.absorb_ref(p);
            }
            drop(self.parts);
            for c in &self.staged {
                scratch.add_recs(c.iter().map(row_item));
            }
            for c in &self.packed {
                scratch.add_recs(c.iter().map(group_item));
            }
            *seen_rows += scratch_rows;
            *seen_groups += scratch.len;
            let mut w = GroupWriter::new(self.staged, self.packed);
            scratch.drain_into(&mut w);
            return (Part::default(), w.out);
        }
        let mut parts = self.parts;
        parts.sort_by_key(|p| std::cmp::Reverse(p.len));
        let mut parts = parts.into_iter();
        let mut p = parts.next().unwrap_or_default();
        for q in parts {
            p = p.absorb(q);
        }
        (p, Groups::default())
    }
}

impl AggTable {
    /// Partitions of every table.
    pub(crate) const PARTS: usize = PARTS;

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
    /// [`AggTable::merge_all`] does, a partition at a time. (A row with a counter beyond 32
    /// bits is added to the hash table at once.) Returns the rows taken.
    pub(crate) fn stage_rows(
        &mut self,
        keys: &[u128],
        sel: Option<&[bool]>,
        counters: [&[u64]; 4],
    ) -> u64 {
        let (keys, [fp, rp, fb, rb]) = common_len(keys, counters);
        let mut added = 0u64;
        for i in 0..keys.len() {
            if sel.is_some_and(|s| !s[i]) {
                continue;
            }
            added += 1;
            self.stage_one(keys[i], [fp[i], rp[i], fb[i], rb[i]]);
        }
        added
    }

    /// [`AggTable::stage_rows`] for the rows listed in `rows` (ascending), `keys[k]` the key
    /// of row `rows[k]`: a selective condition pays for the rows it keeps only. Returns the
    /// rows taken.
    pub(crate) fn stage_rows_at(
        &mut self,
        keys: &[u128],
        rows: &[u32],
        counters: [&[u64]; 4],
    ) -> u64 {
        let [fp, rp, fb, rb] = counters;
        let n = fp.len().min(rp.len()).min(fb.len()).min(rb.len());
        let mut added = 0u64;
        for (&key, &i) in keys.iter().zip(rows) {
            let i = i as usize;
            if i >= n {
                break;
            }
            added += 1;
            self.stage_one(key, [fp[i], rp[i], fb[i], rb[i]]);
        }
        added
    }

    /// Stages one row: packed in a partition's list while its counters fit 32 bits, added to
    /// the hash table at once otherwise.
    #[inline(always)]
    fn stage_one(&mut self, key: u128, [a, b, c, d]: [u64; 4]) {
        let pre = prehash(key);
        let part = (pre >> PART_SHIFT) as usize;
        if (a | b | c | d) >> 32 != 0 {
            self.add_big(part, key, pre, [a, b, c, d]);
            return;
        }
        self.staged[part].push([key as u64, (key >> 64) as u64, a | b << 32, c | d << 32]);
        self.staged_len += 1;
    }

    #[cold]
    fn add_big(&mut self, part: usize, key: u128, pre: u64, c: [u64; 4]) {
        self.unpack(part);
        let m = Metrics {
            fwd_packets: c[0],
            rev_packets: c[1],
            fwd_bytes: c[2],
            rev_bytes: c[3],
            flows: 1,
        };
        self.parts[part].add(key, pre, &m);
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
            part.add_recs(self.staged[p].iter().map(row_item));
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
        unpack_part(&mut self.parts[p], &mut self.packed[p]);
    }

    /// Makes room for `groups` groups spread over the partitions as the hash spreads them, so
    /// a table that will receive them grows once instead of doubling as they come (a fleet's
    /// merge: all answers arrive within milliseconds of each other).
    pub(crate) fn reserve(&mut self, groups: usize) {
        let per_part = groups.div_ceil(PARTS) + groups.div_ceil(PARTS) / 8;
        for (part, packed) in self.parts.iter_mut().zip(&mut self.packed) {
            unpack_part(part, packed);
            part.reserve(per_part);
        }
    }

    /// Adds `m` to the group `key`.
    pub(crate) fn add(&mut self, key: u128, m: &Metrics) {
        let pre = prehash(key);
        let p = (pre >> PART_SHIFT) as usize;
        self.unpack(p);
        self.parts[p].add(key, pre, m);
    }

    /// Adds each `(key, metrics)`, prefetching the slots of the next keys while adding the
    /// current ones; with `created`, appends to it the keys of the groups it creates.
    pub(crate) fn add_many(
        &mut self,
        items: &[(u128, Metrics)],
        mut created: Option<&mut Vec<u128>>,
    ) {
        // A software pipeline: the slot of item i + AHEAD is prefetched before item i is
        // added, so AHEAD misses are always in flight.
        let mut ring = [(0usize, 0u64); AHEAD];
        for (j, (k, _)) in items.iter().take(AHEAD).enumerate() {
            ring[j] = self.locate(*k);
        }
        for (i, (k, m)) in items.iter().enumerate() {
            let (part, h) = ring[i % AHEAD];
            if let Some((next, _)) = items.get(i + AHEAD) {
                ring[i % AHEAD] = self.locate(*next);
            }
            let p = &mut self.parts[part];
            p.grow_if_needed();
            let before = p.len;
            slot_add(p.slot(*k, h), m);
            if p.len != before {
                if let Some(c) = created.as_deref_mut() {
                    c.push(*k);
                }
            }
        }
    }

    /// The partition and slot hash of `key`, its home slot prefetched.
    #[inline]
    fn locate(&mut self, key: u128) -> (usize, u64) {
        let pre = prehash(key);
        let part = (pre >> PART_SHIFT) as usize;
        self.unpack(part);
        let p = &self.parts[part];
        let h = hash(pre, p.seed);
        p.prefetch(h);
        (part, h)
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
                s[2] = s[2].wrapping_add(fp[i]);
                s[3] = s[3].wrapping_add(rp[i]);
                s[4] = s[4].wrapping_add(fb[i]);
                s[5] = s[5].wrapping_add(rb[i]);
                s[6] += 1;
            }
        }
        rows.len() as u64
    }

    /// Adds every group and staged row of `other`, and aggregates the staged rows of both
    /// (see [`AggTable::merge_all`]). (Partial aggregates merge with [`AggTable::absorb`].)
    #[cfg(test)]
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
        let mut out: Vec<(Part, Groups)> = if threads == 1 {
            let mut scratch = Scratch::default();
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
            let mut done: Vec<(usize, (Part, Groups))> = std::thread::scope(|sc| {
                let hs: Vec<_> = (0..threads)
                    .map(|_| {
                        sc.spawn(|| {
                            let mut scratch = Scratch::default();
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

    /// A table of groups whose keys are distinct (a decoded partial aggregate: its decoder
    /// checked that they ascend), held as records in their partitions: no hash table is built
    /// until the groups are merged or added to.
    pub(crate) fn from_distinct(groups: impl Iterator<Item = (u128, [u64; 5])>) -> AggTable {
        let mut t = AggTable::default();
        for (k, [a, b, c, d, e]) in groups {
            let p = (prehash(k) >> PART_SHIFT) as usize;
            t.packed[p].push([k as u64, (k >> 64) as u64, a, b, c, d, e]);
        }
        t
    }

    /// Adds every group of `other`, its key mapped through `map` when given (equal mapped
    /// keys add up). Without a map, partitions line up: each of `other`'s is added into the
    /// same partition here (the smaller table into the larger), so the cost is one hash
    /// update per group of the smaller table and nothing already here is hashed again.
    pub(crate) fn absorb(&mut self, mut other: AggTable, map: Option<&dyn Fn(u128) -> u128>) {
        other.flush(false);
        self.flush(false);
        let Some(map) = map else {
            if other.len() > self.len() {
                std::mem::swap(self, &mut other);
            }
            // Partitions are disjoint: a large merge (a probe's answer at the coordinator, a
            // worker's table) runs on every core, each thread taking a run of partitions.
            let threads = if other.len() >= PARALLEL_ABSORB_MIN {
                std::thread::available_parallelism().map_or(1, |n| n.get().min(PARTS))
            } else {
                1
            };
            let run = PARTS.div_ceil(threads);
            let mine = self.parts.chunks_mut(run).zip(self.packed.chunks_mut(run));
            let theirs = other
                .parts
                .chunks_mut(run)
                .zip(other.packed.chunks_mut(run));
            let mut runs: Vec<_> = mine.zip(theirs).collect();
            let last = runs.pop();
            std::thread::scope(|sc| {
                for ((parts, packed), (their_parts, their_packed)) in runs {
                    sc.spawn(move || absorb_run(parts, packed, their_parts, their_packed));
                }
                if let Some(((parts, packed), (their_parts, their_packed))) = last {
                    absorb_run(parts, packed, their_parts, their_packed);
                }
            });
            return;
        };
        // Mapped keys land in other partitions: added in batches, prefetching ahead.
        let mut batch: Vec<(u128, Metrics)> = Vec::with_capacity(4096);
        for (k, m) in other.iter() {
            batch.push((map(k), m));
            if batch.len() == batch.capacity() {
                self.add_many(&batch, None);
                batch.clear();
            }
        }
        self.add_many(&batch, None);
    }

    /// Every group (staged rows must have been aggregated: tables leave a scan merged).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u128, Metrics)> + '_ {
        self.iter_parts(0..PARTS)
    }

    /// The groups of partitions `parts` (of [`AggTable::PARTS`]): two threads reading a
    /// large table read half of its partitions each.
    pub(crate) fn iter_parts(
        &self,
        parts: std::ops::Range<usize>,
    ) -> impl Iterator<Item = (u128, Metrics)> + '_ {
        debug_assert_eq!(self.staged_len, 0, "iterating a table with staged rows");
        let packed = self.packed.get(parts.clone()).unwrap_or(&[]);
        let parts = self.parts.get(parts).unwrap_or(&[]);
        parts
            .iter()
            .flat_map(|p| p.iter())
            .chain(packed.iter().flat_map(|c| c.iter()).map(|w| {
                let (k, m) = group_item(w);
                (
                    k,
                    Metrics {
                        fwd_packets: m[0],
                        rev_packets: m[1],
                        fwd_bytes: m[2],
                        rev_bytes: m[3],
                        flows: m[4],
                    },
                )
            }))
    }
}

/// `keys` and the four counter columns cut to the length they all have (a damaged block's
/// columns can disagree; rows past the shortest are not read).
#[inline(always)]
pub(crate) fn common_len<'a, K>(
    keys: &'a [K],
    counters: [&'a [u64]; 4],
) -> (&'a [K], [&'a [u64]; 4]) {
    let n = counters
        .iter()
        .fold(keys.len(), |n, column| n.min(column.len()));
    (&keys[..n], counters.map(|column| &column[..n]))
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
        // Some counters beyond 32 bits (added to the hash table at once, not staged).
        let c2: Vec<u64> = c
            .iter()
            .enumerate()
            .map(|(i, x)| if i % 997 == 0 { x << 30 } else { x * 3 + 1 })
            .collect();
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
                    t[w].add_many(&items, None);
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
    fn rows_with_large_counters_skip_staging() {
        let keys = [5u128, 5, 5, 9, 5, 7 << 100];
        let c = [1u64, 1 << 32, 3, 4, 5, u64::MAX / 4];
        let mut t = AggTable::default();
        assert_eq!(t.stage_rows(&keys, None, [&c, &c, &c, &c]), 6);
        assert_eq!(t.staged_len(), 4);
        assert_eq!(t.len(), 2);
        let t = AggTable::merge_all(vec![t, AggTable::default()], 1);
        let got = sorted(&t);
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].0, 5);
        assert_eq!((got[0].1.fwd_bytes, got[0].1.flows), (9 + (1 << 32), 4));
        assert_eq!((got[1].1.rev_packets, got[1].1.flows), (4, 1));
        assert_eq!(got[2].1.rev_bytes, u64::MAX / 4);
    }
}
