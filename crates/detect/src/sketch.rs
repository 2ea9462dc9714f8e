//! Frequency sketches with stated error bounds: [`CountMin`] (Cormode and Muthukrishnan) and
//! [`SpaceSaving`] (Metwally, Agrawal and El Abbadi). Both preallocate at construction and do
//! not allocate per update.
use std::hash::Hash;

use trawl_flow::hash::SeededFxBuild;

/// The Mersenne prime 2^61 − 1: the modulus of the pairwise-independent hash family.
const P61: u64 = (1 << 61) - 1;

/// `x mod 2^61 − 1` for `x < 2^122`, without a division.
#[inline(always)]
fn mod_p61(x: u128) -> u64 {
    let lo = (x as u64) & P61;
    let hi = (x >> 61) as u64;
    let s = lo + (hi & P61) + (hi >> 61);
    // Two folds bring any value below 2^122 under 2 * P61; one conditional subtraction ends it.
    let s = (s & P61) + (s >> 61);
    if s >= P61 {
        s - P61
    } else {
        s
    }
}

/// SplitMix64: a fixed bijective mixer, used to derive row seeds from one seed and to fold
/// keys wider than 64 bits into a fingerprint.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A 64-bit fingerprint of a 16-byte address (IPv4 mapped into IPv6). IPv4 addresses are
/// mapped injectively (the high word of a mapped address is constant); two IPv6 addresses
/// may share a fingerprint with probability about 2^-64, far below the sketch's own error.
#[inline]
pub fn addr_fingerprint(addr: &[u8; 16]) -> u64 {
    let hi = u64::from_be_bytes(addr[..8].try_into().expect("8 bytes"));
    let lo = u64::from_be_bytes(addr[8..].try_into().expect("8 bytes"));
    mix64(hi) ^ lo
}

/// A count-min sketch over 64-bit items.
///
/// With `width = ⌈e/ε⌉` and `depth = ⌈ln(1/δ)⌉`, for every item `x`, after updates of total
/// weight `N`: `true(x) ≤ estimate(x)` always, and `estimate(x) ≤ true(x) + ε·N` with
/// probability at least `1 − δ`. Row `i` hashes with `h_i(x) = ((a_i·x + b_i) mod p) mod width`,
/// `p = 2^61 − 1`, a pairwise-independent family over items below `p` (items are reduced mod
/// `p` first, so items that differ by a multiple of `p` collide in every row: callers pass
/// fingerprints, for which that is as likely as any other collision).
///
/// Conservative update (Estan and Varghese) raises only the cells below the new estimate: the
/// same one-sided bound holds and the overestimate is never larger.
#[derive(Clone, Debug)]
pub struct CountMin {
    width: usize,
    depth: usize,
    conservative: bool,
    /// `depth` rows of `width` cells, row-major.
    cells: Vec<u64>,
    /// `(a_i, b_i)` per row, `1 ≤ a_i < p`, `0 ≤ b_i < p`.
    coeffs: Vec<(u64, u64)>,
    total: u64,
}

impl CountMin {
    /// A sketch sized for additive error `epsilon · N` with probability `1 − delta`.
    ///
    /// # Panics
    /// When `epsilon` or `delta` is not in `(0, 1)`.
    pub fn with_error(epsilon: f64, delta: f64, seed: u64) -> Self {
        assert!(epsilon > 0.0 && epsilon < 1.0, "epsilon must be in (0, 1)");
        assert!(delta > 0.0 && delta < 1.0, "delta must be in (0, 1)");
        let width = (std::f64::consts::E / epsilon).ceil() as usize;
        let depth = (1.0 / delta).ln().ceil().max(1.0) as usize;
        Self::new(width, depth, seed)
    }

    /// A sketch of `depth` rows of `width` cells.
    ///
    /// # Panics
    /// When `width` or `depth` is 0.
    pub fn new(width: usize, depth: usize, seed: u64) -> Self {
        assert!(width > 0 && depth > 0, "width and depth must be positive");
        let mut state = seed;
        let mut next = || {
            state = mix64(state);
            state % P61
        };
        let coeffs = (0..depth)
            .map(|_| (next().max(1), next()))
            .collect::<Vec<_>>();
        Self {
            width,
            depth,
            conservative: false,
            cells: vec![0; width * depth],
            coeffs,
            total: 0,
        }
    }

    /// Turns conservative update on or off.
    pub fn conservative(mut self, on: bool) -> Self {
        self.conservative = on;
        self
    }

    /// Cells per row.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Rows.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Sum of all update weights since the last [`clear`](Self::clear).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The index (into [`cells`](Self::cells)) of `item`'s cell in `row`.
    #[inline]
    pub fn cell_index(&self, row: usize, item: u64) -> usize {
        let (a, b) = self.coeffs[row];
        let x = item % P61;
        let h = mod_p61(a as u128 * x as u128 + b as u128);
        row * self.width + (h % self.width as u64) as usize
    }

    /// All cells, row-major: the channels a multi-channel detector watches.
    pub fn cells(&self) -> &[u64] {
        &self.cells
    }

    /// Adds `weight` to `item`.
    #[inline]
    pub fn add(&mut self, item: u64, weight: u64) {
        self.total += weight;
        if self.conservative {
            let target = self.estimate(item) + weight;
            for row in 0..self.depth {
                let i = self.cell_index(row, item);
                self.cells[i] = self.cells[i].max(target);
            }
        } else {
            for row in 0..self.depth {
                let i = self.cell_index(row, item);
                self.cells[i] += weight;
            }
        }
    }

    /// The estimated weight of `item`: never below the true weight.
    #[inline]
    pub fn estimate(&self, item: u64) -> u64 {
        (0..self.depth)
            .map(|row| self.cells[self.cell_index(row, item)])
            .min()
            .unwrap_or(0)
    }

    /// Zeroes every cell (the start of a new interval); keeps the hash functions.
    pub fn clear(&mut self) {
        self.cells.fill(0);
        self.total = 0;
    }
}

/// One monitored item of a [`SpaceSaving`] summary.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counter<K> {
    /// The item.
    pub item: K,
    /// Its counted weight: never below the true weight.
    pub count: u64,
    /// The most its count may overestimate: `count − error ≤ true ≤ count`.
    pub error: u64,
}

/// Space-Saving top-k with `k` counters (Metwally et al. 2005), weighted updates.
///
/// Guarantees after updates of total weight `N`: every item with true weight `> N/k` is
/// monitored; for every monitored item `count − error ≤ true ≤ count`; `error ≤ N/k`.
///
/// The counters live in a min-heap by count (the item to evict is at the root; each heap entry
/// carries its counter's count, so sifting compares without following an index) with a
/// position index, and an open-addressing index of at most `k` items (fast hash seeded per
/// process, as the items come from the network) finds an item's counter: an update costs
/// `O(log k)` and never allocates.
#[derive(Clone, Debug)]
pub struct SpaceSaving<K> {
    k: usize,
    counters: Vec<Counter<K>>,
    /// `(count, counter)` ordered as a binary min-heap by count.
    heap: Vec<(u64, u32)>,
    /// `pos[c]` = where counter `c` sits in `heap`.
    pos: Vec<u32>,
    /// Per counter, the hash of its item (to find its index slot when it is evicted).
    hashes: Vec<u64>,
    index: Index,
    total: u64,
}

/// The hash [`SpaceSaving`] uses for `item` (one per process: summaries of the same items
/// may share it, see [`SpaceSaving::add_hashed`]).
#[inline]
pub fn item_hash<K: Hash>(item: &K) -> u64 {
    use std::hash::BuildHasher;
    SeededFxBuild::default().hash_one(item)
}

impl<K: Copy + Eq + Hash> SpaceSaving<K> {
    /// A summary of `k` counters.
    ///
    /// # Panics
    /// When `k` is 0 or above `u32::MAX / 4`.
    pub fn new(k: usize) -> Self {
        assert!(k > 0, "k must be positive");
        assert!(k <= u32::MAX as usize / 4, "k must fit 32 bits");
        Self {
            k,
            counters: Vec::with_capacity(k),
            heap: Vec::with_capacity(k),
            pos: Vec::with_capacity(k),
            hashes: Vec::with_capacity(k),
            index: Index::new(k),
            total: 0,
        }
    }

    /// Number of counters.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Sum of all update weights since the last [`clear`](Self::clear).
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The largest error any counter may carry: `N/k` (rounded down; counts are integers).
    pub fn error_bound(&self) -> u64 {
        self.total / self.k as u64
    }

    /// Adds `weight` to `item`.
    #[inline]
    pub fn add(&mut self, item: K, weight: u64) {
        self.add_hashed(item, item_hash(&item), weight);
    }

    /// Adds `weight` to `item` whose [`item_hash`] is `hash` (computed once for the summaries
    /// of one item). A wrong hash makes the summary lose track of the item: counts stay
    /// bounded, but the item may be counted twice.
    #[inline]
    pub fn add_hashed(&mut self, item: K, hash: u64, weight: u64) {
        self.total += weight;
        let counters = &self.counters;
        if let Some(c) = self.index.find(hash, |c| counters[c as usize].item == item) {
            let c = c as usize;
            self.counters[c].count += weight;
            let h = self.pos[c] as usize;
            self.heap[h].0 = self.counters[c].count;
            self.sift_down(h);
        } else if self.counters.len() < self.k {
            let c = self.counters.len();
            self.counters.push(Counter {
                item,
                count: weight,
                error: 0,
            });
            self.heap.push((weight, c as u32));
            self.pos.push(c as u32);
            self.hashes.push(hash);
            self.index.insert(hash, c as u32);
            self.sift_up(c);
        } else {
            // Evict the minimum: the new item inherits its count as its possible overcount.
            let c = self.heap[0].1 as usize;
            let old = self.counters[c];
            self.index.remove(self.hashes[c], c as u32);
            self.counters[c] = Counter {
                item,
                count: old.count + weight,
                error: old.count,
            };
            self.heap[0].0 = old.count + weight;
            self.hashes[c] = hash;
            self.index.insert(hash, c as u32);
            self.sift_down(0);
        }
    }

    /// The counter of `item` if it is monitored.
    pub fn get(&self, item: &K) -> Option<Counter<K>> {
        let counters = &self.counters;
        self.index
            .find(item_hash(item), |c| counters[c as usize].item == *item)
            .map(|c| self.counters[c as usize])
    }

    /// The monitored counters, in no particular order.
    pub fn counters(&self) -> &[Counter<K>] {
        &self.counters
    }

    /// Writes the monitored counters, largest count first, into `out` (cleared first).
    pub fn top(&self, out: &mut Vec<Counter<K>>) {
        out.clear();
        out.extend_from_slice(&self.counters);
        out.sort_unstable_by_key(|c| std::cmp::Reverse(c.count));
    }

    /// Forgets every item (the start of a new interval); keeps the allocations.
    pub fn clear(&mut self) {
        self.counters.clear();
        self.heap.clear();
        self.pos.clear();
        self.hashes.clear();
        self.index.clear();
        self.total = 0;
    }

    #[inline]
    fn swap(&mut self, i: usize, j: usize) {
        self.heap.swap(i, j);
        self.pos[self.heap[i].1 as usize] = i as u32;
        self.pos[self.heap[j].1 as usize] = j as u32;
    }

    fn sift_up(&mut self, mut h: usize) {
        while h > 0 {
            let parent = (h - 1) / 2;
            if self.heap[parent].0 <= self.heap[h].0 {
                break;
            }
            self.swap(parent, h);
            h = parent;
        }
    }

    /// Moves the entry at `h` down to its place. The same places as swapping it with its
    /// smaller child (the left one on a tie) while that child is strictly smaller, but with
    /// the child chosen by a conditional move rather than a branch (the comparisons of
    /// near-equal counts are coin flips to the branch predictor, and an eviction sinks the
    /// new item through every level), and with the children moved up into a hole instead of
    /// swapped.
    #[inline]
    fn sift_down(&mut self, mut h: usize) {
        let n = self.heap.len();
        let moving = self.heap[h];
        loop {
            let l = 2 * h + 1;
            if l >= n {
                break;
            }
            let r = l + 1;
            let r_smaller = r < n && self.heap[r.min(n - 1)].0 < self.heap[l].0;
            let child = if r_smaller { r } else { l };
            let c = self.heap[child];
            if c.0 >= moving.0 {
                break;
            }
            self.heap[h] = c;
            self.pos[c.1 as usize] = h as u32;
            h = child;
        }
        self.heap[h] = moving;
        self.pos[moving.1 as usize] = h as u32;
    }
}

/// Item → counter: open addressing with linear probing over at least `4k` slots (load at
/// most a quarter: a summary under constant eviction looks up an absent item and removes
/// one on almost every update, and both walk a probe run), backward-shift deletion (no tombstones: evictions
/// remove and insert all the time). A slot holds the top 32 bits of the item's hash and its
/// counter + 1 (0: vacant); the item itself is compared in the counters.
#[derive(Clone, Debug)]
struct Index {
    slots: Vec<u64>,
    /// log2 of the slot count.
    bits: u32,
}

impl Index {
    fn new(k: usize) -> Index {
        let n = (4 * k).next_power_of_two().max(16);
        Index {
            slots: vec![0; n],
            bits: n.trailing_zeros(),
        }
    }

    #[inline]
    fn tag(hash: u64) -> u64 {
        hash >> 32
    }

    #[inline]
    fn home(&self, tag: u64) -> usize {
        (tag >> (32 - self.bits)) as usize
    }

    #[inline]
    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    /// The counter whose item hashes to `hash` and satisfies `is`.
    #[inline]
    fn find(&self, hash: u64, is: impl Fn(u32) -> bool) -> Option<u32> {
        let tag = Self::tag(hash);
        let mut i = self.home(tag);
        loop {
            let s = self.slots[i];
            if s == 0 {
                return None;
            }
            if s >> 32 == tag && is(s as u32 - 1) {
                return Some(s as u32 - 1);
            }
            i = (i + 1) & self.mask();
        }
    }

    #[inline]
    fn insert(&mut self, hash: u64, c: u32) {
        let tag = Self::tag(hash);
        let mut i = self.home(tag);
        while self.slots[i] != 0 {
            i = (i + 1) & self.mask();
        }
        self.slots[i] = tag << 32 | u64::from(c + 1);
    }

    /// Removes counter `c` (whose item hashes to `hash`), shifting back the slots after it
    /// that would otherwise become unreachable.
    #[inline]
    fn remove(&mut self, hash: u64, c: u32) {
        let mask = self.mask();
        let mut i = self.home(Self::tag(hash));
        while self.slots[i] as u32 != c + 1 {
            i = (i + 1) & mask;
        }
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let s = self.slots[j];
            if s == 0 {
                break;
            }
            // The entry at j may move to i unless its home lies cyclically in (i, j].
            let home = self.home(s >> 32);
            if (j.wrapping_sub(home) & mask) >= (j.wrapping_sub(i) & mask) {
                self.slots[i] = s;
                i = j;
            }
        }
        self.slots[i] = 0;
    }

    fn clear(&mut self) {
        self.slots.fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A seeded Zipf-like stream: item `i` drawn with weight ∝ 1/(i+1)^s over `n_items`.
    fn zipf_stream(n: usize, n_items: u64, s: f64, seed: u64) -> Vec<u64> {
        let weights: Vec<f64> = (0..n_items)
            .map(|i| 1.0 / ((i + 1) as f64).powf(s))
            .collect();
        let sum: f64 = weights.iter().sum();
        let mut cdf = Vec::with_capacity(weights.len());
        let mut acc = 0.0;
        for w in &weights {
            acc += w / sum;
            cdf.push(acc);
        }
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = mix64(state);
                let u = (state >> 11) as f64 / (1u64 << 53) as f64;
                let i = cdf.partition_point(|&c| c < u) as u64;
                // Spread item ids so they are not small consecutive integers.
                mix64(i.min(n_items - 1) ^ 0xdead_beef)
            })
            .collect()
    }

    fn exact(stream: &[u64]) -> HashMap<u64, u64> {
        let mut m = HashMap::new();
        for &x in stream {
            *m.entry(x).or_insert(0) += 1;
        }
        m
    }

    #[test]
    fn count_min_dimensions_from_error() {
        let cm = CountMin::with_error(0.01, 0.01, 1);
        assert_eq!(cm.width(), 272); // ⌈e / 0.01⌉
        assert_eq!(cm.depth(), 5); // ⌈ln 100⌉
    }

    #[test]
    fn mod_p61_matches_division() {
        let mut s = 7u64;
        for _ in 0..10_000 {
            s = mix64(s);
            let a = s % P61;
            s = mix64(s);
            let x = s % P61;
            let v = a as u128 * x as u128 + 12345;
            assert_eq!(mod_p61(v) as u128, v % P61 as u128);
        }
        assert_eq!(mod_p61(P61 as u128), 0);
        assert_eq!(mod_p61(P61 as u128 - 1), P61 - 1);
    }

    /// The stated bound, checked item by item against exact counts: never under, and over by
    /// more than ε·N for at most a δ fraction of items (with slack for sampling noise).
    #[test]
    fn count_min_error_bound_on_zipf() {
        for conservative in [false, true] {
            let (eps, delta) = (0.005, 0.01);
            let stream = zipf_stream(200_000, 50_000, 1.1, 42);
            let truth = exact(&stream);
            let mut cm = CountMin::with_error(eps, delta, 9).conservative(conservative);
            for &x in &stream {
                cm.add(x, 1);
            }
            assert_eq!(cm.total(), stream.len() as u64);
            let bound = eps * stream.len() as f64;
            let mut violations = 0usize;
            let mut max_over = 0u64;
            for (&x, &t) in &truth {
                let e = cm.estimate(x);
                assert!(e >= t, "underestimate {e} < {t}");
                max_over = max_over.max(e - t);
                if (e - t) as f64 > bound {
                    violations += 1;
                }
            }
            let rate = violations as f64 / truth.len() as f64;
            assert!(
                rate <= delta,
                "conservative={conservative}: {violations} of {} items over ε·N={bound} (max over {max_over})",
                truth.len()
            );
            // An item never seen estimates 0 unless it collides in every row.
            assert!(cm.estimate(u64::MAX - 3) as f64 <= bound);
        }
    }

    #[test]
    fn conservative_update_never_worse() {
        let stream = zipf_stream(50_000, 10_000, 1.0, 3);
        let mut plain = CountMin::new(200, 4, 5);
        let mut cons = CountMin::new(200, 4, 5).conservative(true);
        for &x in &stream {
            plain.add(x, 1);
            cons.add(x, 1);
        }
        let truth = exact(&stream);
        let (mut sum_plain, mut sum_cons) = (0u64, 0u64);
        for (&x, &t) in &truth {
            let (p, c) = (plain.estimate(x), cons.estimate(x));
            assert!(t <= c && c <= p, "t={t} cons={c} plain={p}");
            sum_plain += p - t;
            sum_cons += c - t;
        }
        assert!(sum_cons < sum_plain, "{sum_cons} vs {sum_plain}");
    }

    #[test]
    fn space_saving_guarantees_on_zipf() {
        for k in [10usize, 100, 1000] {
            let stream = zipf_stream(100_000, 20_000, 1.2, k as u64);
            let truth = exact(&stream);
            let mut ss = SpaceSaving::new(k);
            for &x in &stream {
                ss.add(x, 1);
            }
            let n = stream.len() as u64;
            assert_eq!(ss.total(), n);
            assert_eq!(ss.counters().len(), k);
            // Counts of all counters sum to N (each update adds its weight to exactly one).
            assert_eq!(ss.counters().iter().map(|c| c.count).sum::<u64>(), n);
            for c in ss.counters() {
                let t = truth[&c.item];
                assert!(c.count - c.error <= t && t <= c.count, "{c:?} true {t}");
                assert!(c.error <= n / k as u64);
            }
            for (&x, &t) in &truth {
                if t > n / k as u64 {
                    assert!(ss.get(&x).is_some(), "k={k}: item with {t} > N/k missing");
                }
            }
        }
    }

    #[test]
    fn space_saving_weighted_and_clear() {
        let mut ss = SpaceSaving::new(2);
        ss.add("a", 10);
        ss.add("b", 3);
        ss.add("c", 1); // evicts b (3): c = 4 with error 3
        assert_eq!(
            ss.get(&"c"),
            Some(Counter {
                item: "c",
                count: 4,
                error: 3
            })
        );
        assert!(ss.get(&"b").is_none());
        let mut top = Vec::new();
        ss.top(&mut top);
        assert_eq!(top[0].item, "a");
        ss.clear();
        assert_eq!(ss.total(), 0);
        assert!(ss.counters().is_empty());
    }
}
