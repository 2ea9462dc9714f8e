//! The aggregation table: packed group key → metrics, open addressing with linear probing,
//! one 64-byte slot per group (key and metrics in one cache line), partitions of which large
//! ones live in huge-page mappings, and batched updates that prefetch the slots of the next
//! rows while the current ones are added — a high-cardinality group-by (conversations) is
//! bound by cache and TLB misses on this table, not by arithmetic.
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
    fn default() -> Self {
        Part::with_capacity_log2(6)
    }
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
        let seed = SEEDS
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        Part {
            slots: Storage::zeroed(1 << bits),
            len: 0,
            shift: 64 - bits,
            seed,
        }
    }

    #[inline]
    fn grow_if_needed(&mut self) {
        // Load factor at most 7/8 keeps linear probes short.
        if (self.len + 1) * 8 > self.slots.get().len() * 7 {
            let bits = 64 - self.shift + 1;
            let mut bigger = Part::with_capacity_log2(bits);
            // Same seed: hashes computed before the growth stay valid (`add_rows`).
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
    }

    /// The slot of `key` (claimed if vacant; the caller counts it).
    #[inline]
    fn slot(&mut self, key: u128, h: u64) -> &mut Slot {
        let stored = key + 1;
        let (lo, hi) = (stored as u64, (stored >> 64) as u64);
        let slots = self.slots.get_mut();
        let mask = slots.len() - 1;
        let mut i = (h >> self.shift) as usize;
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

    fn iter(&self) -> impl Iterator<Item = (u128, Metrics)> + '_ {
        self.slots
            .get()
            .iter()
            .filter_map(|s| slot_key(s).map(|k| (k, slot_metrics(s))))
    }
}

/// Partitions of a table, by the top bits of the seed-independent prehash: tables of different
/// workers merge partition by partition, in parallel, and each partition grows on its own.
const PARTS: usize = 16;
const PART_SHIFT: u32 = 60;

/// Packed group key → summed metrics.
#[derive(Clone, Debug)]
pub(crate) struct AggTable {
    parts: Vec<Part>,
}

impl Default for AggTable {
    fn default() -> Self {
        AggTable {
            parts: (0..PARTS).map(|_| Part::default()).collect(),
        }
    }
}

impl AggTable {
    /// Groups held.
    pub(crate) fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len).sum()
    }

    /// Adds `m` to the group `key`.
    pub(crate) fn add(&mut self, key: u128, m: &Metrics) {
        let pre = prehash(key);
        self.parts[(pre >> PART_SHIFT) as usize].add(key, pre, m);
    }

    /// Adds each `(key, metrics)`, prefetching the slots of the next keys while adding the
    /// current ones.
    pub(crate) fn add_many(&mut self, items: &[(u128, Metrics)]) {
        let mut pending = [(0usize, 0u64); AHEAD];
        for chunk in items.chunks(AHEAD) {
            for (j, (k, _)) in chunk.iter().enumerate() {
                let pre = prehash(*k);
                let part = (pre >> PART_SHIFT) as usize;
                let p = &self.parts[part];
                let h = hash(pre, p.seed);
                pending[j] = (part, h);
                mem_prefetch::prefetch_write_data::<_, 3>(&p.slots.get()[(h >> p.shift) as usize]);
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
    /// one flow. Returns the rows added.
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
                let p = &self.parts[part];
                let h = hash(pre, p.seed);
                pending[j] = (part, h);
                mem_prefetch::prefetch_write_data::<_, 3>(&p.slots.get()[(h >> p.shift) as usize]);
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

    /// Adds every group of `other`; large tables merge their partitions on `threads` threads.
    pub(crate) fn merge(self, other: AggTable, threads: usize) -> AggTable {
        let pairs: Vec<(Part, Part)> = self.parts.into_iter().zip(other.parts).collect();
        let big = pairs.iter().map(|(a, b)| a.len.min(b.len)).sum::<usize>() > 50_000;
        let threads = if big { threads.clamp(1, PARTS) } else { 1 };
        if threads == 1 {
            return AggTable {
                parts: pairs.into_iter().map(|(a, b)| a.absorb(b)).collect(),
            };
        }
        let mut slots: Vec<Option<(Part, Part)>> = pairs.into_iter().map(Some).collect();
        let mut chunks: Vec<Vec<(usize, (Part, Part))>> =
            (0..threads).map(|_| Vec::new()).collect();
        for (i, s) in slots.iter_mut().enumerate() {
            if let Some(p) = s.take() {
                chunks[i % threads].push((i, p));
            }
        }
        let mut merged: Vec<(usize, Part)> = std::thread::scope(|sc| {
            let hs: Vec<_> = chunks
                .into_iter()
                .map(|c| {
                    sc.spawn(move || {
                        c.into_iter()
                            .map(|(i, (a, b))| (i, a.absorb(b)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter()
                .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        merged.sort_by_key(|(i, _)| *i);
        AggTable {
            parts: merged.into_iter().map(|(_, p)| p).collect(),
        }
    }

    /// Every group.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u128, Metrics)> + '_ {
        self.parts.iter().flat_map(|p| p.iter())
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
        assert!(t
            .parts
            .iter()
            .all(|p| matches!(p.slots, Storage::Mapped(_))));
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
}
