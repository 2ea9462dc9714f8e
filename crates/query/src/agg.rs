//! The aggregation table: packed group key → metrics, open addressing with linear probing,
//! one 64-byte slot per group (key and metrics in one cache line), and batched updates that
//! prefetch the slots of the next rows while the current ones are added — a high-cardinality
//! group-by (conversations) is bound by cache misses on this table, not by arithmetic.
use crate::partial::Metrics;

/// Packed keys use at most 120 bits, so this value never is one.
const EMPTY: u128 = u128::MAX;

#[derive(Clone, Copy, Debug)]
#[repr(C, align(64))]
struct Slot {
    key: u128,
    m: Metrics,
}

const VACANT: Slot = Slot {
    key: EMPTY,
    m: Metrics {
        fwd_packets: 0,
        rev_packets: 0,
        fwd_bytes: 0,
        rev_bytes: 0,
        flows: 0,
    },
};

/// Rows whose slots are prefetched ahead of the update.
const AHEAD: usize = 16;

/// Packed group key → summed metrics.
#[derive(Clone, Debug)]
pub(crate) struct AggTable {
    slots: Vec<Slot>,
    len: usize,
    /// Mixed into the hash, different per table: iterating one table visits keys in the order
    /// of its hash, and inserting them in that order into a table with the same hash piles
    /// them into ever longer probe runs (merging two tables of ~1 M groups took 30 s).
    seed: u64,
    /// 64 − log2(capacity): the slot index is the top bits of the hash.
    shift: u32,
}

impl Default for AggTable {
    fn default() -> Self {
        AggTable::with_capacity_log2(8)
    }
}

static SEEDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

#[inline]
fn hash(k: u128, seed: u64) -> u64 {
    let (lo, hi) = (k as u64, (k >> 64) as u64);
    let x = (lo ^ seed).wrapping_mul(0xD6E8_FEB8_6659_FD93)
        ^ hi.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29);
    (x ^ (x >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9)
}

impl AggTable {
    fn with_capacity_log2(bits: u32) -> Self {
        let seed = SEEDS
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        AggTable {
            slots: vec![VACANT; 1 << bits],
            len: 0,
            shift: 64 - bits,
            seed,
        }
    }

    /// Groups held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn grow_if_needed(&mut self) {
        // Load factor at most 7/8 keeps linear probes short.
        if (self.len + 1) * 8 > self.slots.len() * 7 {
            let bits = 64 - self.shift + 1;
            let mut bigger = AggTable::with_capacity_log2(bits);
            // Same seed: hashes computed before the growth stay valid (`add_rows`).
            bigger.seed = self.seed;
            let old = std::mem::replace(self, bigger);
            for s in old.slots.iter().filter(|s| s.key != EMPTY) {
                let h = hash(s.key, self.seed);
                self.slot(s.key, h).m = s.m;
            }
            self.len = old.len;
        }
    }

    /// The slot of `key` (claimed if vacant; the caller counts it).
    #[inline]
    fn slot(&mut self, key: u128, h: u64) -> &mut Slot {
        let mask = self.slots.len() - 1;
        let mut i = (h >> self.shift) as usize;
        loop {
            let k = self.slots[i].key;
            if k == key || k == EMPTY {
                break;
            }
            i = (i + 1) & mask;
        }
        let s = &mut self.slots[i];
        if s.key == EMPTY {
            s.key = key;
            self.len += 1;
        }
        s
    }

    /// Adds `m` to the group `key`.
    #[inline]
    pub(crate) fn add(&mut self, key: u128, m: &Metrics) {
        self.grow_if_needed();
        let h = hash(key, self.seed);
        self.slot(key, h).m.add(m);
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
        let mut hashes = [0u64; AHEAD];
        let mut added = 0;
        let mut start = 0;
        while start < n {
            let end = (start + AHEAD).min(n);
            for (j, i) in (start..end).enumerate() {
                let h = hash(keys[i], self.seed);
                hashes[j] = h;
                mem_prefetch::prefetch_write_data::<_, 3>(&self.slots[(h >> self.shift) as usize]);
            }
            for (j, i) in (start..end).enumerate() {
                if sel.is_some_and(|s| !s[i]) {
                    continue;
                }
                self.grow_if_needed();
                let m = &mut self.slot(keys[i], hashes[j]).m;
                m.fwd_packets += fp[i];
                m.rev_packets += rp[i];
                m.fwd_bytes += fb[i];
                m.rev_bytes += rb[i];
                m.flows += 1;
                added += 1;
            }
            start = end;
        }
        added
    }

    /// Every group.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u128, &Metrics)> {
        self.slots
            .iter()
            .filter(|s| s.key != EMPTY)
            .map(|s| (s.key, &s.m))
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
            assert_eq!(reference[&k], *m);
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
            u.add(k, m);
        }
        assert_eq!(u.len(), t.len());
        assert_eq!(
            t.iter().find(|(k, _)| *k == keys[1]).unwrap().1.flows,
            reference[&keys[1]].flows + 5
        );
    }
}
