//! Writing segment files in large page-aligned blocks on an I/O thread.
//!
//! The dumper copies records into a block buffer; a full block goes to the I/O thread, which
//! writes it with `pwrite` at its offset (O_DIRECT when the filesystem accepts it, so the page
//! cache is not churned and the disk streams; otherwise buffered, with writeback started at once
//! and written pages dropped from the cache). A few buffers circulate between the two threads,
//! so copying the next block overlaps writing the last, and a slow disk pushes back on the
//! dumper (and through the lossless ring listener, on the producer) instead of growing memory.
//!
//! Durability: `flush` writes the partial block (padded to the 4 KiB alignment O_DIRECT needs)
//! and syncs, without giving it up; the next write of that block overwrites the padding. After a
//! crash a segment ends in whole records, possibly followed by zero padding or a torn record:
//! repair cuts it back to the last complete record.
use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::Error;
use crate::sys;

/// Alignment of buffers, offsets and lengths of O_DIRECT writes.
pub(crate) const ALIGN: usize = 4096;

/// A heap buffer whose usable part starts on an [`ALIGN`] boundary (over-allocated and offset,
/// so no unsafe allocation is needed; the heap block does not move when the `Vec` does).
pub(crate) struct AlignedBuf {
    raw: Vec<u8>,
    start: usize,
    cap: usize,
}

impl AlignedBuf {
    pub fn new(cap: usize) -> AlignedBuf {
        let raw = vec![0u8; cap + ALIGN];
        let start = raw.as_ptr().align_offset(ALIGN);
        AlignedBuf { raw, start, cap }
    }

    pub fn bytes(&self) -> &[u8] {
        &self.raw[self.start..self.start + self.cap]
    }

    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.raw[self.start..self.start + self.cap]
    }
}

enum Job {
    Write {
        file: Arc<File>,
        path: Arc<PathBuf>,
        offset: u64,
        buf: AlignedBuf,
        len: usize,
        direct: bool,
        /// A partial block written for durability: sync after it, and do not drop it from the
        /// cache (it will be rewritten).
        flush: bool,
    },
    /// Everything queued before it is written; answers with the first error, if any.
    Barrier(SyncSender<Option<String>>),
}

/// The I/O thread and the buffers circulating between it and the dumper.
pub(crate) struct IoThread {
    tx: Option<SyncSender<Job>>,
    free_rx: Receiver<AlignedBuf>,
    error: Arc<Mutex<Option<Error>>>,
    handle: Option<JoinHandle<()>>,
    /// Buffers given back by closed segments.
    spare: Vec<AlignedBuf>,
    block: usize,
    /// Buffers submitted and not returned yet.
    in_flight: usize,
    max_in_flight: usize,
}

impl IoThread {
    /// An I/O thread writing blocks of `block` bytes (a multiple of [`ALIGN`]) with at most
    /// `max_buffers` buffers in flight in all.
    pub fn new(block: usize, max_buffers: usize, name: &str) -> Result<IoThread, Error> {
        let (tx, rx) = mpsc::sync_channel::<Job>(max_buffers);
        let (free_tx, free_rx) = mpsc::channel();
        let error = Arc::new(Mutex::new(None));
        let err = Arc::clone(&error);
        let handle = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || io_loop(rx, free_tx, err))
            .map_err(Error::io("", "starting the I/O thread"))?;
        Ok(IoThread {
            tx: Some(tx),
            free_rx,
            error,
            handle: Some(handle),
            spare: Vec::new(),
            block,
            in_flight: 0,
            max_in_flight: max_buffers.max(2),
        })
    }

    /// A free buffer: a spare or returned one; a new one while fewer than the limit are being
    /// written; else waits for a write to finish. The limit is on writes in flight, not on
    /// buffers: every stream holds one it is filling, whatever the number of streams.
    fn take_buffer(&mut self) -> AlignedBuf {
        if let Some(b) = self.spare.pop() {
            return b;
        }
        if let Ok(b) = self.free_rx.try_recv() {
            self.in_flight -= 1;
            return b;
        }
        if self.in_flight < self.max_in_flight {
            return AlignedBuf::new(self.block);
        }
        let b = self
            .free_rx
            .recv()
            .expect("the I/O thread returns every buffer while it runs");
        self.in_flight -= 1;
        b
    }

    fn submit(&mut self, job: Job) -> Result<(), Error> {
        self.check()?;
        if matches!(job, Job::Write { .. }) {
            self.in_flight += 1;
        }
        self.tx
            .as_ref()
            .expect("open until drop")
            .send(job)
            .map_err(|_| Error::Config("the I/O thread stopped".into()))
    }

    /// The first write error, if one happened (it is reported once).
    pub fn check(&self) -> Result<(), Error> {
        match self.error.lock().expect("not poisoned").take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Waits until everything submitted is written.
    pub fn barrier(&mut self) -> Result<(), Error> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(Job::Barrier(tx))?;
        let _ = rx.recv();
        self.check()
    }
}

impl Drop for IoThread {
    fn drop(&mut self) {
        self.tx = None;
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn io_loop(rx: Receiver<Job>, free_tx: mpsc::Sender<AlignedBuf>, error: Arc<Mutex<Option<Error>>>) {
    let mut failed = false;
    for job in rx {
        match job {
            Job::Write {
                file,
                path,
                offset,
                buf,
                len,
                direct,
                flush,
            } => {
                if !failed {
                    let r = file
                        .write_all_at(&buf.bytes()[..len], offset)
                        .and_then(|()| if flush { file.sync_data() } else { Ok(()) });
                    match r {
                        Ok(()) if !direct && !flush => {
                            // Start writing this block now, finish the one before it and drop
                            // that from the cache: dirty pages never pile up.
                            sys::writeback(&file, offset, len as u64, false);
                            let prev = offset.saturating_sub(len as u64);
                            if prev < offset {
                                sys::writeback(&file, prev, len as u64, true);
                                sys::advise(&file, prev, len as u64, sys::DONTNEED);
                            }
                        }
                        Ok(()) => {}
                        Err(source) => {
                            failed = true;
                            *error.lock().expect("not poisoned") = Some(Error::Io {
                                path: path.to_path_buf(),
                                op: "writing a block",
                                source,
                            });
                        }
                    }
                }
                let _ = free_tx.send(buf);
            }
            Job::Barrier(done) => {
                let _ = done.send(None);
                // An error stays reported; later segments may succeed (e.g. after retention
                // freed space), so writing resumes.
                failed = false;
            }
        }
    }
}

/// A segment file being written.
pub(crate) struct SegmentFile {
    path: Arc<PathBuf>,
    file: Arc<File>,
    direct: bool,
    buf: AlignedBuf,
    /// Bytes pending in `buf`.
    len: usize,
    /// File offset of `buf[0]`.
    base: u64,
}

impl SegmentFile {
    /// Creates the file (and its directories), with O_DIRECT when `try_direct` and the
    /// filesystem accepts it.
    pub fn create(path: &Path, io: &mut IoThread, try_direct: bool) -> Result<SegmentFile, Error> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(Error::io(dir, "creating the directory"))?;
        }
        let open = |direct: bool| {
            let mut o = OpenOptions::new();
            o.write(true).create_new(true);
            if direct {
                o.custom_flags(libc::O_DIRECT);
            }
            o.open(path)
        };
        let (file, direct) = match try_direct.then(|| open(true)) {
            Some(Ok(f)) => (f, true),
            // EINVAL: the filesystem has no O_DIRECT (tmpfs before Linux 6.6, some FUSE).
            Some(Err(e)) if e.raw_os_error() == Some(libc::EINVAL) => (
                open(false).map_err(Error::io(path, "creating the segment"))?,
                false,
            ),
            Some(Err(e)) => return Err(Error::io(path, "creating the segment")(e)),
            None => (
                open(false).map_err(Error::io(path, "creating the segment"))?,
                false,
            ),
        };
        // The new directory entry must survive a power loss too.
        if let Some(dir) = path.parent() {
            File::open(dir)
                .and_then(|d| d.sync_all())
                .map_err(Error::io(dir, "syncing the directory"))?;
        }
        Ok(SegmentFile {
            path: Arc::new(path.to_path_buf()),
            file: Arc::new(file),
            direct,
            buf: io.take_buffer(),
            len: 0,
            base: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn direct(&self) -> bool {
        self.direct
    }

    /// Bytes in the file once everything pending is written.
    #[inline]
    pub fn len(&self) -> u64 {
        self.base + self.len as u64
    }

    /// Appends bytes (a record may straddle two blocks).
    #[inline]
    pub fn append(&mut self, io: &mut IoThread, mut bytes: &[u8]) -> Result<(), Error> {
        loop {
            let room = self.buf.cap - self.len;
            if bytes.len() < room {
                self.buf.bytes_mut()[self.len..self.len + bytes.len()].copy_from_slice(bytes);
                self.len += bytes.len();
                return Ok(());
            }
            let (now, rest) = bytes.split_at(room);
            self.buf.bytes_mut()[self.len..].copy_from_slice(now);
            self.len += room;
            self.ship_full(io)?;
            bytes = rest;
        }
    }

    fn ship_full(&mut self, io: &mut IoThread) -> Result<(), Error> {
        let next = io.take_buffer();
        let buf = std::mem::replace(&mut self.buf, next);
        let len = self.len;
        io.submit(Job::Write {
            file: Arc::clone(&self.file),
            path: Arc::clone(&self.path),
            offset: self.base,
            buf,
            len,
            direct: self.direct,
            flush: false,
        })?;
        self.base += len as u64;
        self.len = 0;
        Ok(())
    }

    /// Makes what is pending durable without giving up the partial block.
    pub fn flush(&mut self, io: &mut IoThread) -> Result<(), Error> {
        if self.len == 0 {
            return Ok(());
        }
        let mut copy = io.take_buffer();
        let len = if self.direct {
            self.len.next_multiple_of(ALIGN)
        } else {
            self.len
        };
        copy.bytes_mut()[..self.len].copy_from_slice(&self.buf.bytes()[..self.len]);
        copy.bytes_mut()[self.len..len].fill(0);
        io.submit(Job::Write {
            file: Arc::clone(&self.file),
            path: Arc::clone(&self.path),
            offset: self.base,
            buf: copy,
            len,
            direct: self.direct,
            flush: true,
        })
    }

    /// Writes the tail, cuts off any flush padding, syncs and closes; returns the length.
    pub fn close(self, io: &mut IoThread) -> Result<u64, Error> {
        io.barrier()?;
        let total = self.len();
        let path = Arc::clone(&self.path);
        let tail_file;
        let tail: &File = if self.direct {
            // The tail is not a whole aligned block: write it through a buffered handle.
            tail_file = OpenOptions::new()
                .write(true)
                .open(&*path)
                .map_err(Error::io(&*path, "reopening the segment for its tail"))?;
            &tail_file
        } else {
            &self.file
        };
        tail.write_all_at(&self.buf.bytes()[..self.len], self.base)
            .and_then(|()| tail.set_len(total))
            .and_then(|()| tail.sync_data())
            .map_err(Error::io(&*path, "writing the segment's last block"))?;
        if !self.direct {
            sys::advise(tail, 0, total, sys::DONTNEED);
        }
        io.spare.push(self.buf);
        Ok(total)
    }
}
