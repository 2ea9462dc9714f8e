//! The byte stream under every file format: reads into one reusable buffer.
//!
//! Records are parsed in place and handed out as offsets into [`Input::buf`], so the buffer only
//! moves (compaction) or changes size between batches, never while one is out. The buffer is
//! shared ([`Input::shared`]): a consumer that keeps a handle (a batch passed to another
//! thread) keeps those bytes as they are, and the next fill continues in a buffer nobody holds,
//! taking the unread tail along. Reads are `read` calls of [`MIN_READ_SIZE`] to [`READ_SIZE`]
//! bytes (the file source sizes them to its records) rather than a memory map: for sequential
//! scans the kernel's copy costs about what the parser's misses on mapped pages would
//! (bench/RESULTS.md, run 14).
use std::io::{self, Read};
use std::sync::Arc;

/// Initial buffer size and the size of most `read` calls, and the largest the reader adapts
/// to ([`Input::set_read_size`]). 1 MiB measured a little faster than 4 MiB on a 1 GB pcap.
pub(crate) const READ_SIZE: usize = 1 << 20;

/// The smallest read size the reader adapts to.
pub(crate) const MIN_READ_SIZE: usize = 64 << 10;

/// A reader plus the window of its bytes not yet consumed.
/// Buffers kept for reuse once their holders let go of them.
const SPARES: usize = 32;

pub(crate) struct Input {
    reader: Box<dyn Read + Send>,
    buf: Arc<Vec<u8>>,
    /// Earlier buffers, some still held by consumers; reused when no longer held.
    spares: Vec<Arc<Vec<u8>>>,
    /// First unconsumed byte in `buf`.
    pos: usize,
    /// End of valid bytes in `buf`.
    end: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    /// The reader returned 0: no more bytes will come.
    eof: bool,
    /// Bytes a fill asks the reader for (the buffer's length between fills).
    read_size: usize,
}

impl Input {
    /// Wraps `reader` with a buffer of `capacity` bytes (grown on demand for larger records).
    pub(crate) fn new(reader: Box<dyn Read + Send>, capacity: usize) -> Input {
        Input {
            reader,
            buf: Arc::new(vec![0; capacity.max(64)]),
            spares: Vec::new(),
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            read_size: capacity.max(64),
        }
    }

    /// Sets how many bytes later fills read at once (at least what a record needs). Reading
    /// little more than a few batches' worth keeps the bytes in the core's caches between the
    /// kernel's copy and the parser (see `FileSource::read_batch`).
    pub(crate) fn set_read_size(&mut self, n: usize) {
        self.read_size = n.max(64);
    }

    /// The current read size (tests).
    #[cfg(test)]
    pub(crate) fn read_size(&self) -> usize {
        self.read_size
    }

    /// The whole buffer: batches index it with record offsets.
    #[inline]
    pub(crate) fn buf(&self) -> &[u8] {
        &self.buf[..self.end]
    }

    /// Unconsumed bytes.
    /// A handle on the buffer that [`Input::buf`] borrows: the bytes stay as they are for as
    /// long as the handle is held.
    pub(crate) fn shared(&self) -> Arc<Vec<u8>> {
        self.buf.clone()
    }

    #[inline]
    pub(crate) fn available(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Position of the first unconsumed byte in [`Input::buf`].
    #[inline]
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    /// Stream offset of the first unconsumed byte.
    #[inline]
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// True once the reader has reported its end.
    #[inline]
    pub(crate) fn is_eof(&self) -> bool {
        self.eof
    }

    /// Marks `n` available bytes as consumed.
    #[inline]
    pub(crate) fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.pos);
        self.pos = (self.pos + n).min(self.end);
    }

    /// Makes at least `needed` bytes available, or as many as remain before end of input.
    ///
    /// Moves the unconsumed tail to the front of the buffer, so offsets previously handed out
    /// become invalid: call only when no batch is borrowed.
    pub(crate) fn fill(&mut self, needed: usize) -> io::Result<()> {
        if self.end - self.pos >= needed {
            return Ok(());
        }
        if Arc::get_mut(&mut self.buf).is_none() {
            // Someone holds the current buffer: carry the unread tail over to one nobody holds.
            let mut fresh = self.unheld_buffer();
            let tail = self.end - self.pos;
            let b = Arc::get_mut(&mut fresh).expect("unheld");
            if b.len() < tail {
                b.resize(tail, 0);
            }
            b[..tail].copy_from_slice(&self.buf[self.pos..self.end]);
            let old = std::mem::replace(&mut self.buf, fresh);
            if self.spares.len() < SPARES {
                self.spares.push(old);
            }
            self.base += self.pos as u64;
            self.end = tail;
            self.pos = 0;
        }
        let buf = Arc::get_mut(&mut self.buf).expect("the current buffer is unheld here");
        if self.pos > 0 {
            buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        // Callers cap `needed` (largest record or block a format allows), so a header field
        // cannot make this allocation unbounded.
        let size = self.read_size.max(needed).max(self.end);
        if size > buf.capacity() {
            buf.reserve_exact(size - buf.len());
        }
        buf.resize(size, 0);
        while self.end < needed && !self.eof {
            match self.reader.read(&mut buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(n) => self.end += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// A spare buffer nobody holds any more, or a new one of the current buffer's size.
    fn unheld_buffer(&mut self) -> Arc<Vec<u8>> {
        match self.spares.iter().position(|b| Arc::strong_count(b) == 1) {
            Some(i) => self.spares.swap_remove(i),
            None => Arc::new(vec![0; self.buf.len()]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands out at most `chunk` bytes per call, like a pipe or decompressor.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        chunk: usize,
    }

    impl Read for Trickle {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = out.len().min(self.chunk).min(self.data.len() - self.at);
            out[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    #[test]
    fn fill_compacts_and_grows() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        let mut input = Input::new(
            Box::new(Trickle {
                data: data.clone(),
                at: 0,
                chunk: 7,
            }),
            64,
        );
        input.fill(10).unwrap();
        assert!(input.available().len() >= 10);
        input.consume(5);
        assert_eq!(input.offset(), 5);
        // Larger than the buffer: grows, keeps the unconsumed bytes in order.
        input.fill(300).unwrap();
        assert_eq!(input.pos(), 0);
        assert_eq!(&input.available()[..300], &data[5..305]);
        input.consume(300);
        input.fill(10_000).unwrap();
        assert!(input.is_eof());
        assert_eq!(input.available(), &data[305..]);
        assert_eq!(input.offset(), 305);
    }

    #[test]
    fn a_held_buffer_keeps_its_bytes_while_reading_goes_on() {
        let data: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let mut input = Input::new(
            Box::new(Trickle {
                data: data.clone(),
                at: 0,
                chunk: 100,
            }),
            256,
        );
        let mut held = Vec::new();
        let mut read = 0usize;
        while read < data.len() {
            input.fill(40).unwrap();
            let take = input.available().len().min(40);
            if take == 0 {
                break;
            }
            // A consumer keeps the buffer and where its bytes were.
            held.push((input.shared(), input.pos(), read, take));
            input.consume(take);
            read += take;
        }
        assert_eq!(read, data.len());
        for (buf, at, from, n) in &held {
            assert_eq!(
                &buf[*at..at + n],
                &data[*from..from + n],
                "bytes at {from} changed"
            );
        }
        // Once let go, buffers are reused instead of allocated again and again.
        let distinct: std::collections::HashSet<*const u8> =
            held.iter().map(|(b, ..)| b.as_ptr()).collect();
        assert!(distinct.len() > 1, "held buffers were written over");
        drop(held);
        let spares_before = input.spares.len();
        for _ in 0..10 {
            let h = input.shared();
            drop(h);
        }
        assert!(input.spares.len() <= SPARES && spares_before <= SPARES);
    }
}
