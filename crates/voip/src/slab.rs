//! [`Slab`]: where the call table keeps its calls and streams, by slot. It grows by chunks that
//! never move, so a full table is never copied into a buffer twice its size: at 100,000 calls
//! the stream slabs' doubling moved and zeroed about as many bytes again as the slabs hold
//! (bench/RESULTS.md, "VoIP": fresh pages cost the kernel's zeroing, a large part of the
//! window's time on this machine). The first chunk grows as a `Vec` does, so a small capture
//! costs no more than one; later chunks are allocated whole.
use std::ops::{Index, IndexMut};

/// Entries per chunk, as a power of two.
const CHUNK_BITS: u32 = 14;
const CHUNK: usize = 1 << CHUNK_BITS;

/// A growable array of slots. Entries of the first chunk move while it grows (as a `Vec`'s
/// do); from then on nothing is moved again.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    chunks: Vec<Vec<T>>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            chunks: Vec::new(),
            len: 0,
        }
    }
}

impl<T> Slab<T> {
    /// Entries held.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Appends an entry at slot `len()`.
    pub(crate) fn push(&mut self, value: T) {
        match self.chunks.last_mut() {
            Some(chunk) if chunk.len() < CHUNK => chunk.push(value),
            _ => {
                // The first chunk grows as a Vec; the others are whole at once.
                let mut chunk = if self.chunks.is_empty() {
                    Vec::new()
                } else {
                    Vec::with_capacity(CHUNK)
                };
                chunk.push(value);
                self.chunks.push(chunk);
            }
        }
        self.len += 1;
    }

    /// The entry at `slot`, if there is one.
    #[inline]
    pub(crate) fn get(&self, slot: usize) -> Option<&T> {
        self.chunks.get(slot >> CHUNK_BITS)?.get(slot & (CHUNK - 1))
    }

    /// Every entry, in slot order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.chunks.iter().flatten()
    }
}

impl<T> Index<usize> for Slab<T> {
    type Output = T;

    #[inline]
    fn index(&self, slot: usize) -> &T {
        &self.chunks[slot >> CHUNK_BITS][slot & (CHUNK - 1)]
    }
}

impl<T> IndexMut<usize> for Slab<T> {
    #[inline]
    fn index_mut(&mut self, slot: usize) -> &mut T {
        &mut self.chunks[slot >> CHUNK_BITS][slot & (CHUNK - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_hold_their_entries_which_stop_moving_once_the_first_chunk_is_full() {
        let mut slab = Slab::default();
        let n = 3 * CHUNK + 5;
        let mut first = None;
        for i in 0..n {
            slab.push(i as u64);
            assert_eq!(slab.len(), i + 1);
            if i >= CHUNK - 1 {
                let at = [&slab[0] as *const u64, &slab[CHUNK - 1]];
                assert_eq!(*first.get_or_insert(at), at, "moved at {i}");
            }
        }
        assert!(slab.chunks.iter().skip(1).all(|c| c.capacity() == CHUNK));
        for i in [0, 1, CHUNK - 1, CHUNK, 2 * CHUNK + 7, n - 1] {
            assert_eq!(slab[i], i as u64);
            assert_eq!(slab.get(i), Some(&(i as u64)));
        }
        assert_eq!(slab.get(n), None);
        slab[CHUNK] = 7;
        assert_eq!(slab.get(CHUNK), Some(&7));
        assert_eq!(slab.iter().count(), n);
        assert!(slab
            .iter()
            .enumerate()
            .all(|(i, &v)| v == i as u64 || i == CHUNK));
    }
}
