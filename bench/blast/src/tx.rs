//! AF_PACKET transmission: one socket per thread, frames handed straight to the driver
//! (`PACKET_QDISC_BYPASS`) in batches, either with `sendmmsg` (iovecs pointing into the loaded
//! trace) or through a `PACKET_TX_RING` (frames copied into the mapped ring, one `send` per
//! batch), paced by a token bucket checked once per batch.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use crate::pcap::Trace;

/// Sleeping is only worth it for gaps longer than this; shorter ones are spun.
const SLEEP_THRESHOLD_NS: f64 = 200_000.0;
/// How much earlier than the due time a sleep ends (timer slack), the rest being spun.
const SLEEP_MARGIN_NS: f64 = 100_000.0;

/// The interface index of `name`.
pub fn ifindex(name: &str) -> Result<i32> {
    let c = CString::new(name).context("interface name contains a NUL byte")?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; if_nametoindex only
    // reads it.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("interface {name}"));
    }
    i32::try_from(index).context("interface index out of range")
}

/// The MTU of `name`, from sysfs (which `ip netns exec` remounts for the namespace).
pub fn mtu(name: &str) -> Result<usize> {
    let path = format!("/sys/class/net/{name}/mtu");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
    text.trim()
        .parse()
        .with_context(|| format!("{path}: not a number: {text:?}"))
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> Result<()> {
    // SAFETY: cpu_set_t is a plain bit array for which all zeroes is a valid (empty) value.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        bail!("CPU {cpu} out of range");
    }
    // SAFETY: `cpu` was checked to be below the set's capacity in bits.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size passed; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error()).with_context(|| format!("pinning to CPU {cpu}"));
    }
    Ok(())
}

/// How frames are handed to the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// `sendmmsg` batches of iovecs pointing into the trace in memory.
    Mmsg,
    /// A `PACKET_TX_RING` (TPACKET_V2): frames copied into the mapped ring, one `send` per batch.
    Ring,
}

/// A send-only AF_PACKET socket bound to one interface, with its TX ring if it has one.
pub struct Socket {
    fd: OwnedFd,
    ring: Option<TxRing>,
}

/// Where the frame data starts in a TPACKET_V2 TX slot (the kernel's default without
/// PACKET_TX_HAS_OFF): the aligned header, without the sockaddr_ll that RX slots carry.
const TX_DATA_OFFSET: usize = libc::TPACKET2_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>();

/// A mapped PACKET_TX_RING.
struct TxRing {
    base: *mut u8,
    map_len: usize,
    block_size: usize,
    frames_per_block: usize,
    frame_size: usize,
    frames: usize,
}

impl TxRing {
    /// The header of slot `i` (`i < frames`).
    fn slot(&self, i: usize) -> *mut u8 {
        let offset = (i / self.frames_per_block) * self.block_size
            + (i % self.frames_per_block) * self.frame_size;
        // SAFETY: i < frames, so the slot lies inside the mapping (frames_per_block slots of
        // frame_size bytes per block, block_nr blocks).
        unsafe { self.base.add(offset) }
    }

    /// The status word of slot `i`, shared with the kernel.
    fn status(&self, i: usize) -> &AtomicU32 {
        // SAFETY: every slot starts with a 16-aligned tpacket2_hdr whose first field is the u32
        // tp_status; the mapping lives as long as `self`, and the kernel accesses the word
        // atomically too.
        unsafe { &*(self.slot(i) as *const AtomicU32) }
    }
}

// SAFETY: the mapping belongs to the ring alone (no aliasing Rust references exist outside
// `&self` methods), and moving the owner to another thread does not invalidate it.
unsafe impl Send for TxRing {}

impl Drop for TxRing {
    fn drop(&mut self) {
        // SAFETY: base/map_len are exactly what mmap returned; nothing refers to the mapping
        // after the ring is dropped.
        unsafe { libc::munmap(self.base.cast(), self.map_len) };
    }
}

impl Socket {
    /// Opens a raw packet socket on interface `ifindex` that receives nothing (protocol 0),
    /// optionally bypassing the qdisc, with a send buffer of `sndbuf` bytes, and with
    /// `ring = Some((largest frame, slots))` a TX ring of at least that many slots.
    pub fn open(
        ifindex: i32,
        qdisc_bypass: bool,
        sndbuf: usize,
        ring: Option<(usize, usize)>,
    ) -> Result<Self> {
        // SAFETY: plain socket(2) call with constant arguments; the result is checked below.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(io::Error::last_os_error())
                .context("socket(AF_PACKET, SOCK_RAW) (needs root or CAP_NET_RAW)");
        }
        // SAFETY: `raw` is a freshly created descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let mut sock = Socket { fd, ring: None };
        if qdisc_bypass {
            sock.set_opt(libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &1i32)
                .context("PACKET_QDISC_BYPASS")?;
        }
        let sndbuf = i32::try_from(sndbuf).unwrap_or(i32::MAX);
        // SO_SNDBUFFORCE ignores wmem_max but needs CAP_NET_ADMIN; fall back to SO_SNDBUF.
        if sock
            .set_opt(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, &sndbuf)
            .is_err()
        {
            sock.set_opt(libc::SOL_SOCKET, libc::SO_SNDBUF, &sndbuf)
                .context("SO_SNDBUF")?;
        }
        if let Some((max_frame, slots)) = ring {
            sock.ring = Some(sock.map_tx_ring(max_frame, slots)?);
        }
        // SAFETY: sockaddr_ll is a plain C struct for which all zeroes is valid.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = 0;
        addr.sll_ifindex = ifindex;
        // SAFETY: `addr` is a valid sockaddr_ll and the length passed is its size.
        let rc = unsafe {
            libc::bind(
                sock.fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error()).context("bind to the interface");
        }
        Ok(sock)
    }

    fn map_tx_ring(&self, max_frame: usize, slots: usize) -> Result<TxRing> {
        let version = libc::tpacket_versions::TPACKET_V2 as i32;
        self.set_opt(libc::SOL_PACKET, libc::PACKET_VERSION, &version)
            .context("PACKET_VERSION TPACKET_V2")?;
        let frame_size = (TX_DATA_OFFSET + max_frame).next_multiple_of(libc::TPACKET_ALIGNMENT);
        let block_size = frame_size.next_power_of_two().max(1 << 16);
        let frames_per_block = block_size / frame_size;
        let blocks = slots.div_ceil(frames_per_block).max(1);
        let frames = blocks * frames_per_block;
        let req = libc::tpacket_req {
            tp_block_size: u32::try_from(block_size).context("TX ring block too large")?,
            tp_block_nr: u32::try_from(blocks).context("TX ring too large")?,
            tp_frame_size: u32::try_from(frame_size).context("TX ring frame too large")?,
            tp_frame_nr: u32::try_from(frames).context("TX ring too large")?,
        };
        self.set_opt(libc::SOL_PACKET, libc::PACKET_TX_RING, &req)
            .context("PACKET_TX_RING")?;
        let map_len = block_size * blocks;
        // SAFETY: maps the ring the kernel just allocated for this socket; the result is
        // checked; the mapping is owned by the TxRing and unmapped on drop.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                self.fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error()).context("mmap of the TX ring");
        }
        Ok(TxRing {
            base: base.cast(),
            map_len,
            block_size,
            frames_per_block,
            frame_size,
            frames,
        })
    }

    fn set_opt<T>(&self, level: i32, name: i32, value: &T) -> io::Result<()> {
        // SAFETY: `value` is a live T and the length passed is its size; the kernel only reads
        // it.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                (value as *const T).cast(),
                std::mem::size_of::<T>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

/// What one thread is asked to send.
pub struct Plan {
    /// Packets to send; `None`: until the deadline or the stop flag.
    pub count: Option<u64>,
    /// Stop at this instant.
    pub deadline: Option<Instant>,
    /// Packets per second for this thread; 0: as fast as possible.
    pub pps: f64,
    /// Packets per batch (one `sendmmsg` or one TX ring `send`).
    pub batch: usize,
    /// Index of the trace frame to start with.
    pub first_frame: usize,
}

/// What one thread sent.
#[derive(Default, Clone, Copy)]
pub struct Sent {
    /// Frames the kernel accepted.
    pub packets: u64,
    /// Their bytes (Ethernet frame, no FCS).
    pub bytes: u64,
    /// Send system calls that returned.
    pub calls: u64,
    /// Calls that failed with ENOBUFS/EAGAIN/EINTR and were retried.
    pub retries: u64,
    /// TX ring frames the kernel refused as malformed (TP_STATUS_WRONG_FORMAT).
    pub rejected: u64,
    /// Times the sender fell more than one batch behind its schedule (its credit was capped).
    pub late: u64,
}

/// Sends frames of `trace` in a loop on `sock` as `plan` says, until its count, its deadline or
/// `stop`.
pub fn run(sock: &Socket, trace: &Trace, plan: &Plan, stop: &AtomicBool) -> Result<Sent> {
    let n = trace.frames.len();
    let batch = plan.batch.max(1);
    // Entry j of the cycle is trace frame (first + j) mod n; n + batch entries make any batch
    // starting below n one contiguous slice.
    let cycle: Vec<(usize, usize)> = (0..n + batch)
        .map(|j| trace.frames[(plan.first_frame + j) % n])
        .collect();
    let mut prefix = Vec::with_capacity(cycle.len() + 1);
    prefix.push(0u64);
    for &(_, len) in &cycle {
        prefix.push(prefix[prefix.len() - 1] + len as u64);
    }
    let mut sent = Sent::default();
    let mut sender = match &sock.ring {
        None => Sender::Mmsg(MmsgBatches::new(trace, &cycle)),
        Some(ring) => {
            if batch > ring.frames {
                bail!(
                    "batch {batch} larger than the TX ring ({} slots)",
                    ring.frames
                );
            }
            Sender::Ring { ring, head: 0 }
        }
    };

    let ns_per_packet = if plan.pps > 0.0 { 1e9 / plan.pps } else { 0.0 };
    let burst_ns = ns_per_packet * batch as f64;
    let mut pos = 0usize;
    let mut next_ns = 0.0f64;
    let start = Instant::now();
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let want = match plan.count {
            Some(c) => (c - sent.packets).min(batch as u64) as usize,
            None => batch,
        };
        if want == 0 {
            break;
        }
        let now = Instant::now();
        if plan.deadline.is_some_and(|d| now >= d) {
            break;
        }
        if ns_per_packet > 0.0 {
            let now_ns = now.duration_since(start).as_nanos() as f64;
            if now_ns - next_ns > burst_ns {
                // Behind by more than a batch: cap the credit rather than catch up in a burst.
                next_ns = now_ns - burst_ns;
                sent.late += 1;
            } else if next_ns > now_ns {
                wait_until(start, next_ns);
            }
        }
        let done = match &mut sender {
            Sender::Mmsg(b) => b.send(sock, pos, want, &mut sent, stop)?,
            Sender::Ring { ring, head } => ring_send(
                sock,
                ring,
                head,
                trace,
                &cycle[pos..pos + want],
                &mut sent,
                stop,
            )?,
        };
        sent.packets += done as u64;
        sent.bytes += prefix[pos + done] - prefix[pos];
        pos = (pos + done) % n;
        next_ns += done as f64 * ns_per_packet;
    }
    Ok(sent)
}

/// How a thread hands its batches to the kernel.
enum Sender<'a> {
    Mmsg(MmsgBatches),
    Ring { ring: &'a TxRing, head: usize },
}

/// `sendmmsg` headers for every cycle entry, each pointing at its own iovec, which points into
/// the trace. Both vectors live (and stay put on the heap) as long as this struct.
struct MmsgBatches {
    /// Referenced by `hdrs`; never read directly.
    _iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl MmsgBatches {
    fn new(trace: &Trace, cycle: &[(usize, usize)]) -> Self {
        let mut iovs: Vec<libc::iovec> = cycle
            .iter()
            .map(|&(off, len)| libc::iovec {
                // The kernel only reads through this pointer; *mut is what the C struct asks for.
                iov_base: trace.data[off..].as_ptr() as *mut libc::c_void,
                iov_len: len,
            })
            .collect();
        let hdrs = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: mmsghdr is a plain C struct for which all zeroes is valid (null name
                // and control, zero lengths and flags).
                let mut h: libc::mmsghdr = unsafe { std::mem::zeroed() };
                h.msg_hdr.msg_iov = iov;
                h.msg_hdr.msg_iovlen = 1;
                h
            })
            .collect();
        MmsgBatches { _iovs: iovs, hdrs }
    }

    /// Sends cycle entries `pos..pos + want`; returns how many went (fewer only when stopped).
    fn send(
        &mut self,
        sock: &Socket,
        pos: usize,
        want: usize,
        sent: &mut Sent,
        stop: &AtomicBool,
    ) -> Result<usize> {
        assert!(pos + want <= self.hdrs.len(), "batch beyond the cycle");
        let mut done = 0usize;
        while done < want {
            // SAFETY: hdrs[pos + done .. pos + want] lies within `hdrs` (asserted above); every
            // header points at one iovec in `_iovs`, which points into the trace; `self` owns
            // both vectors and the caller borrows the trace for the whole run, so all outlive
            // the call. The kernel only reads the frames and writes `msg_len` into the headers.
            let rc = unsafe {
                libc::sendmmsg(
                    sock.fd.as_raw_fd(),
                    self.hdrs.as_mut_ptr().add(pos + done),
                    (want - done) as libc::c_uint,
                    0,
                )
            };
            sent.calls += 1;
            if rc < 0 {
                let err = io::Error::last_os_error();
                match err.raw_os_error() {
                    Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR) => {
                        sent.retries += 1;
                        if stop.load(Ordering::Relaxed) {
                            break;
                        }
                        std::thread::yield_now();
                        continue;
                    }
                    _ => return Err(err).context("sendmmsg"),
                }
            }
            done += rc as usize;
        }
        Ok(done)
    }
}

/// Sends `frames` (offset, length in the trace) through the TX ring: copies each into the next
/// slot, marks it for sending, and has the kernel send them all with one blocking `send`.
/// Returns how many were queued (fewer only when stopped).
fn ring_send(
    sock: &Socket,
    ring: &TxRing,
    head: &mut usize,
    trace: &Trace,
    frames: &[(usize, usize)],
    sent: &mut Sent,
    stop: &AtomicBool,
) -> Result<usize> {
    for (queued, &(off, len)) in frames.iter().enumerate() {
        let status = ring.status(*head);
        loop {
            match status.load(Ordering::Acquire) {
                libc::TP_STATUS_AVAILABLE => break,
                s if s & libc::TP_STATUS_WRONG_FORMAT != 0 => {
                    sent.rejected += 1;
                    break;
                }
                // Still queued or being sent from an interrupted send: flush it.
                _ => flush(sock, sent, stop)?,
            }
            if stop.load(Ordering::Relaxed) {
                flush(sock, sent, stop)?;
                return Ok(queued);
            }
        }
        let slot = ring.slot(*head);
        // SAFETY: the slot is AVAILABLE, so the kernel does not touch it until we set
        // SEND_REQUEST; it holds a tpacket2_hdr and then frame_size - TX_DATA_OFFSET >= len
        // bytes (the ring was sized for the trace's largest frame); the source is `len` bytes
        // inside trace.data.
        unsafe {
            let hdr = slot.cast::<libc::tpacket2_hdr>();
            (*hdr).tp_len = len as u32;
            std::ptr::copy_nonoverlapping(
                trace.data.as_ptr().add(off),
                slot.add(TX_DATA_OFFSET),
                len,
            );
        }
        status.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
        *head = (*head + 1) % ring.frames;
    }
    flush(sock, sent, stop)?;
    Ok(frames.len())
}

/// One blocking `send` on the TX ring: the kernel sends every slot marked SEND_REQUEST.
fn flush(sock: &Socket, sent: &mut Sent, stop: &AtomicBool) -> Result<()> {
    loop {
        // SAFETY: a zero-length send with a null buffer is how a TX ring is kicked; the kernel
        // reads the frames from the ring, not from the buffer.
        let rc = unsafe { libc::send(sock.fd.as_raw_fd(), std::ptr::null(), 0, 0) };
        sent.calls += 1;
        if rc >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::ENOBUFS | libc::EAGAIN | libc::EINTR) => {
                sent.retries += 1;
                if stop.load(Ordering::Relaxed) {
                    return Ok(());
                }
                std::thread::yield_now();
            }
            _ => return Err(err).context("send on the TX ring"),
        }
    }
}

/// Waits until `target_ns` after `start`: sleeps through most of a long gap, spins the rest.
fn wait_until(start: Instant, target_ns: f64) {
    loop {
        let now_ns = start.elapsed().as_nanos() as f64;
        let gap = target_ns - now_ns;
        if gap <= 0.0 {
            return;
        }
        if gap > SLEEP_THRESHOLD_NS {
            std::thread::sleep(Duration::from_nanos((gap - SLEEP_MARGIN_NS) as u64));
        } else {
            std::hint::spin_loop();
        }
    }
}
