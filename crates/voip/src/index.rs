//! [`SlotIndex`]: the stream table's index, from a key's hash to the slab slots that hold the
//! key. Open addressing with linear probing over 8-byte entries (the hash's low 32 bits, which
//! also place the entry, and the slot + 1), at most half full; a removal shifts the entries
//! after it back, so there are no tombstones. The keys stay in the caller's slab, which
//! compares them: an entry only says where to look. Lookups that miss the cache cost one
//! index line and the slab entry, and both can be fetched ahead from the hash alone
//! ([`SlotIndex::prefetch`], [`SlotIndex::candidates`]) while other packets are worked on
//! (bench/RESULTS.md, "VoIP": a `HashMap` of 76-byte buckets, then the slab, then the call
//! were three dependent cache misses per RTP packet at 100,000 calls).

const EMPTY: u64 = 0;

/// Where slots are filed by hash; see the module documentation.
#[derive(Debug)]
pub(crate) struct SlotIndex {
    entries: Vec<u64>,
    mask: usize,
    len: usize,
}

#[inline]
fn entry(hash: u64, slot: u32) -> u64 {
    (u64::from(hash as u32) << 32) | (u64::from(slot) + 1)
}

#[inline]
fn tag(e: u64) -> u32 {
    (e >> 32) as u32
}

#[inline]
fn slot_of(e: u64) -> u32 {
    (e as u32).wrapping_sub(1)
}

impl Default for SlotIndex {
    fn default() -> Self {
        SlotIndex {
            entries: vec![EMPTY; 16],
            mask: 15,
            len: 0,
        }
    }
}

impl SlotIndex {
    /// Entries held.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn home(&self, tag: u32) -> usize {
        tag as usize & self.mask
    }

    /// The slot filed under `hash` whose key `eq` accepts.
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut eq: impl FnMut(u32) -> bool) -> Option<u32> {
        let t = hash as u32;
        let mut pos = self.home(t);
        loop {
            let e = self.entries[pos];
            if e == EMPTY {
                return None;
            }
            if tag(e) == t && eq(slot_of(e)) {
                return Some(slot_of(e));
            }
            pos = (pos + 1) & self.mask;
        }
    }

    /// Files `slot` under `hash` (the caller has made sure its key is not filed yet).
    pub(crate) fn insert(&mut self, hash: u64, slot: u32) {
        if (self.len + 1) * 2 > self.entries.len() {
            self.grow();
        }
        self.place(entry(hash, slot));
        self.len += 1;
    }

    fn place(&mut self, e: u64) {
        let mut pos = self.home(tag(e));
        while self.entries[pos] != EMPTY {
            pos = (pos + 1) & self.mask;
        }
        self.entries[pos] = e;
    }

    fn grow(&mut self) {
        let old = std::mem::take(&mut self.entries);
        self.entries = vec![EMPTY; old.len() * 2];
        self.mask = self.entries.len() - 1;
        for e in old.into_iter().filter(|&e| e != EMPTY) {
            self.place(e);
        }
    }

    /// Takes `slot` out from under `hash`; false when it was not filed there.
    pub(crate) fn remove(&mut self, hash: u64, slot: u32) -> bool {
        let target = entry(hash, slot);
        let mut hole = self.home(tag(target));
        loop {
            match self.entries[hole] {
                EMPTY => return false,
                e if e == target => break,
                _ => hole = (hole + 1) & self.mask,
            }
        }
        // Backward shift: an entry further on moves into the hole unless its home lies
        // between the hole and it (then a lookup from its home would not pass the hole).
        let mut next = (hole + 1) & self.mask;
        loop {
            let e = self.entries[next];
            if e == EMPTY {
                break;
            }
            let from_home = next.wrapping_sub(self.home(tag(e))) & self.mask;
            let from_hole = next.wrapping_sub(hole) & self.mask;
            if from_home >= from_hole {
                self.entries[hole] = e;
                hole = next;
            }
            next = (next + 1) & self.mask;
        }
        self.entries[hole] = EMPTY;
        self.len -= 1;
        true
    }

    /// Hints the CPU to fetch the index line a lookup of `hash` starts at.
    #[inline]
    pub(crate) fn prefetch(&self, hash: u64) {
        mem_prefetch::prefetch_read_data::<_, 3>(&self.entries[self.home(hash as u32)]);
    }

    /// Calls `f` with every slot filed under `hash`'s low bits, without comparing keys
    /// (to prefetch them: comparing would wait for the very lines being fetched).
    #[inline]
    pub(crate) fn candidates(&self, hash: u64, mut f: impl FnMut(u32)) {
        let t = hash as u32;
        let mut pos = self.home(t);
        loop {
            let e = self.entries[pos];
            if e == EMPTY {
                return;
            }
            if tag(e) == t {
                f(slot_of(e));
            }
            pos = (pos + 1) & self.mask;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// splitmix64: deterministic test operations (also the stats reference test's).
    pub(crate) fn next(state: &mut u64) -> u64 {
        *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Random inserts and removals against a `HashMap` model, with few distinct hashes so
    /// that clusters, equal tags and wrap-around at the table's end are the common case.
    #[test]
    fn agrees_with_a_map_under_inserts_and_removals_with_colliding_hashes() {
        for distinct_hashes in [3u64, 40, 1 << 20] {
            let mut index = SlotIndex::default();
            // slot -> hash of the keys filed; a slot is a key here.
            let mut model: HashMap<u32, u64> = HashMap::new();
            let mut rng = distinct_hashes;
            for _ in 0..20_000 {
                let r = next(&mut rng);
                let slot = (r % 700) as u32;
                // High bits vary too: the tag is the low 32 bits only.
                let hash = (next(&mut rng) % distinct_hashes).wrapping_mul(0x1_0000_0001);
                if let Some(&h) = model.get(&slot) {
                    assert!(index.remove(h, slot), "slot {slot}");
                    assert_eq!(index.find(h, |s| s == slot), None);
                    model.remove(&slot);
                } else {
                    assert!(!index.remove(hash, slot), "not filed yet");
                    index.insert(hash, slot);
                    model.insert(slot, hash);
                }
                assert_eq!(index.len(), model.len());
            }
            for (&slot, &h) in &model {
                assert_eq!(index.find(h, |s| s == slot), Some(slot));
                let mut seen = false;
                index.candidates(h, |s| seen |= s == slot);
                assert!(seen, "candidates name every slot filed under the hash");
            }
            assert!(index.len() * 2 <= index.entries.len(), "at most half full");
        }
    }

    #[test]
    fn find_tells_equal_tags_apart_by_key() {
        let mut index = SlotIndex::default();
        index.insert(7, 1);
        index.insert(7 | (1 << 40), 2);
        assert_eq!(index.find(7, |s| s == 2), Some(2));
        assert_eq!(index.find(7, |s| s == 1), Some(1));
        assert_eq!(index.find(7, |_| false), None);
        assert_eq!(index.find(8, |_| true), None);
    }
}
