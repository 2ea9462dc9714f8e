//! Removal of switching duplicates (HPCAP §4.4): a port mirror often delivers the same frame
//! twice, once per direction through the switch, microseconds apart.
//!
//! A packet is a duplicate when a packet with the same hash, the same wire length and the same
//! first 70 captured bytes (all of them when fewer were captured) arrived at most `window_ns`
//! before it (default 200 ms). A duplicate also refreshes the time of its entry, so a burst of
//! copies each within the window of the previous one is all dropped but the first.
//!
//! The table is fixed: `2^table_bits` buckets of two entries (2-way set associative by hash; a
//! new packet replaces the older entry of its bucket), allocated once, so checking a packet
//! allocates nothing. A packet whose earlier copy was evicted by other traffic is not caught:
//! size the table for the packets seen within one window.
//!
//! ```
//! use trawl_ring::dedup::Dedup;
//! let mut d = Dedup::new(Dedup::DEFAULT_WINDOW_NS, 12);
//! assert!(!d.is_duplicate(1_000, 60, &[7; 60]));
//! assert!(d.is_duplicate(2_000, 60, &[7; 60]));
//! assert_eq!(d.stats().duplicates, 1);
//! ```

/// Bytes of a packet compared (and kept per entry).
pub const COMPARED_BYTES: usize = 70;

#[derive(Clone, Copy)]
struct Entry {
    ts_ns: u64,
    hash: u64,
    wire_len: u32,
    /// Bytes of `bytes` in use; `u8::MAX` marks an empty entry.
    len: u8,
    bytes: [u8; COMPARED_BYTES],
}

const EMPTY: Entry = Entry {
    ts_ns: 0,
    hash: 0,
    wire_len: 0,
    len: u8::MAX,
    bytes: [0; COMPARED_BYTES],
};

/// Counters of a [`Dedup`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DedupStats {
    /// Packets checked.
    pub checked: u64,
    /// Packets found to be duplicates.
    pub duplicates: u64,
}

/// A fixed-size duplicate detector. See the module documentation.
pub struct Dedup {
    window_ns: u64,
    mask: usize,
    entries: Box<[Entry]>,
    stats: DedupStats,
}

impl Dedup {
    /// The HPCAP window: 200 ms.
    pub const DEFAULT_WINDOW_NS: u64 = 200_000_000;

    /// A detector with a `window_ns` window and `2^table_bits` two-entry buckets
    /// (`table_bits` is clamped to 1..=24; each entry takes 96 bytes).
    pub fn new(window_ns: u64, table_bits: u32) -> Dedup {
        let buckets = 1usize << table_bits.clamp(1, 24);
        Dedup {
            window_ns,
            mask: buckets - 1,
            entries: vec![EMPTY; buckets * 2].into_boxed_slice(),
            stats: DedupStats::default(),
        }
    }

    /// Whether the packet captured at `ts_ns`, `wire_len` long on the wire, with captured
    /// bytes `data`, duplicates one seen within the window. Remembers it either way.
    #[inline]
    pub fn is_duplicate(&mut self, ts_ns: u64, wire_len: u32, data: &[u8]) -> bool {
        self.stats.checked += 1;
        let n = data.len().min(COMPARED_BYTES);
        let head = &data[..n];
        let hash = hash(wire_len, head);
        let b = (hash as usize & self.mask) * 2;
        let window = self.window_ns;
        let bucket = &mut self.entries[b..b + 2];
        for e in bucket.iter_mut() {
            if e.len as usize == n
                && e.hash == hash
                && e.wire_len == wire_len
                && ts_ns.abs_diff(e.ts_ns) <= window
                && e.bytes[..n] == *head
            {
                e.ts_ns = e.ts_ns.max(ts_ns);
                self.stats.duplicates += 1;
                return true;
            }
        }
        // Replace an empty entry, else the older one.
        let victim = if bucket[0].len == u8::MAX
            || (bucket[1].len != u8::MAX && bucket[0].ts_ns <= bucket[1].ts_ns)
        {
            0
        } else {
            1
        };
        let e = &mut bucket[victim];
        e.ts_ns = ts_ns;
        e.hash = hash;
        e.wire_len = wire_len;
        e.len = n as u8;
        e.bytes[..n].copy_from_slice(head);
        false
    }

    /// Counters so far.
    pub fn stats(&self) -> DedupStats {
        self.stats
    }

    /// The window in nanoseconds.
    pub fn window_ns(&self) -> u64 {
        self.window_ns
    }
}

impl std::fmt::Debug for Dedup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dedup")
            .field("window_ns", &self.window_ns)
            .field("buckets", &(self.mask + 1))
            .field("stats", &self.stats)
            .finish()
    }
}

/// A fast 64-bit hash of the wire length and up to 70 bytes (multiply-rotate over 8-byte words,
/// then a final avalanche).
#[inline]
fn hash(wire_len: u32, bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (wire_len as u64 ^ (bytes.len() as u64) << 32).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let v = u64::from_le_bytes(c.try_into().unwrap());
        h = (h ^ v).wrapping_mul(K).rotate_left(29);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(last))
            .wrapping_mul(K)
            .rotate_left(29);
    }
    h ^= h >> 32;
    h = h.wrapping_mul(0xd6e8_feb8_6659_fd93);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn frame(seed: u8, len: usize) -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
    }

    #[test]
    fn duplicate_within_window_dropped() {
        let mut d = Dedup::new(Dedup::DEFAULT_WINDOW_NS, 10);
        let f = frame(1, 1500);
        assert!(!d.is_duplicate(0, 1500, &f));
        assert!(d.is_duplicate(150 * MS, 1500, &f));
        // Refreshed by the duplicate: still within 200 ms of the last copy.
        assert!(d.is_duplicate(300 * MS, 1500, &f));
        assert_eq!(
            d.stats(),
            DedupStats {
                checked: 3,
                duplicates: 2
            }
        );
    }

    #[test]
    fn outside_window_kept() {
        let mut d = Dedup::new(Dedup::DEFAULT_WINDOW_NS, 10);
        let f = frame(2, 64);
        assert!(!d.is_duplicate(1_000, 64, &f));
        assert!(!d.is_duplicate(1_000 + 200 * MS + 1, 64, &f));
        assert!(d.is_duplicate(1_000 + 400 * MS, 64, &f));
        assert_eq!(d.stats().duplicates, 1);
    }

    #[test]
    fn different_lengths_kept() {
        let mut d = Dedup::new(Dedup::DEFAULT_WINDOW_NS, 10);
        let f = frame(3, 100);
        assert!(!d.is_duplicate(0, 100, &f));
        // Same first 70 bytes, other wire length.
        assert!(!d.is_duplicate(1, 120, &f));
        // Same wire length, fewer than 70 bytes captured.
        assert!(!d.is_duplicate(2, 100, &f[..50]));
        // Difference after byte 70 does not matter (HPCAP compares 70 bytes).
        let mut g = f.clone();
        g[90] ^= 0xff;
        assert!(d.is_duplicate(3, 100, &g));
        // Difference within the first 70 does.
        let mut g = f.clone();
        g[69] ^= 0xff;
        assert!(!d.is_duplicate(4, 100, &g));
    }

    #[test]
    fn short_packets_compare_all_bytes() {
        let mut d = Dedup::new(Dedup::DEFAULT_WINDOW_NS, 4);
        assert!(!d.is_duplicate(0, 20, &[9; 20]));
        assert!(d.is_duplicate(1, 20, &[9; 20]));
        let mut g = [9u8; 20];
        g[19] = 0;
        assert!(!d.is_duplicate(2, 20, &g));
        assert!(!d.is_duplicate(3, 0, &[]));
        assert!(d.is_duplicate(4, 0, &[]));
    }

    #[test]
    fn bounded_table_forgets_oldest() {
        // One bucket of two entries: a third distinct packet evicts the oldest.
        let mut d = Dedup::new(Dedup::DEFAULT_WINDOW_NS, 1);
        let (a, b, c) = (frame(10, 60), frame(20, 60), frame(30, 60));
        let mut t = 0;
        let mut seen = |d: &mut Dedup, f: &[u8]| {
            t += 1;
            d.is_duplicate(t, 60, f)
        };
        // With 2 buckets the three may not share one; fill until each was inserted, then check
        // that at most 4 distinct packets are remembered.
        assert!(!seen(&mut d, &a));
        assert!(!seen(&mut d, &b));
        assert!(!seen(&mut d, &c));
        assert!(d.entries.len() == 4);
        let remembered = d.entries.iter().filter(|e| e.len != u8::MAX).count();
        assert!(remembered <= 3);
    }
}
