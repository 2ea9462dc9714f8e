//! The kernel interface of AF_PACKET TPACKET_V3 capture: the ABI structures (declared here with
//! size checks rather than taken from `libc`, whose coverage of `if_packet.h` varies by version)
//! and thin wrappers that turn each system call into an `io::Result`.
//!
//! Every `unsafe` block of the live capture path is in this file.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub const ETH_P_ALL: u16 = 0x0003;
pub const PACKET_ADD_MEMBERSHIP: libc::c_int = 1;
pub const PACKET_RX_RING: libc::c_int = 5;
pub const PACKET_STATISTICS: libc::c_int = 6;
pub const PACKET_VERSION: libc::c_int = 10;
pub const PACKET_RESERVE: libc::c_int = 12;
pub const PACKET_TIMESTAMP: libc::c_int = 17;
pub const PACKET_FANOUT: libc::c_int = 18;
pub const PACKET_FANOUT_DATA: libc::c_int = 22;
pub const PACKET_MR_PROMISC: libc::c_int = 1;
pub const TPACKET_V3: libc::c_int = 2;
pub const PACKET_FANOUT_HASH: u32 = 0;
pub const PACKET_FANOUT_CBPF: u32 = 6;

pub const TP_STATUS_KERNEL: u32 = 0;
pub const TP_STATUS_USER: u32 = 1;
pub const TP_STATUS_LOSING: u32 = 1 << 2;
pub const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
pub const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
pub const TP_STATUS_TS_RAW_HARDWARE: u32 = 1 << 31;
pub const TP_FT_REQ_FILL_RXHASH: u32 = 1;

pub const PACKET_OUTGOING: u8 = 4;

pub const SOF_TIMESTAMPING_RX_HARDWARE: u32 = 1 << 2;
pub const SOF_TIMESTAMPING_RAW_HARDWARE: u32 = 1 << 6;
pub const HWTSTAMP_TX_OFF: libc::c_int = 0;
pub const HWTSTAMP_FILTER_ALL: libc::c_int = 1;

/// `struct tpacket_req3`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TpacketReq3 {
    pub block_size: u32,
    pub block_nr: u32,
    pub frame_size: u32,
    pub frame_nr: u32,
    pub retire_blk_tov: u32,
    pub sizeof_priv: u32,
    pub feature_req_word: u32,
}
const _: () = assert!(size_of::<TpacketReq3>() == 28);

/// `struct tpacket_stats_v3`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TpacketStatsV3 {
    /// Packets the socket saw, including those dropped.
    pub packets: u32,
    pub drops: u32,
    /// Times the ring was full and the kernel froze the queue.
    pub freeze_q_cnt: u32,
}

/// `struct sock_filter`: one classic BPF instruction.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SockFilter {
    /// Opcode.
    pub code: u16,
    /// Jump offset if true.
    pub jt: u8,
    /// Jump offset if false.
    pub jf: u8,
    /// Constant operand.
    pub k: u32,
}

#[repr(C)]
struct SockFprog {
    len: u16,
    filter: *const SockFilter,
}

/// `struct hwtstamp_config` for SIOCSHWTSTAMP.
#[repr(C)]
#[derive(Default)]
struct HwtstampConfig {
    flags: libc::c_int,
    tx_type: libc::c_int,
    rx_filter: libc::c_int,
}

/// Offsets inside `struct tpacket_block_desc` (version, offset_to_priv, then `tpacket_hdr_v1`).
pub mod block {
    pub const STATUS: usize = 8;
    pub const NUM_PKTS: usize = 12;
    pub const OFFSET_TO_FIRST_PKT: usize = 16;
    pub const BLK_LEN: usize = 20;
}

/// Offsets inside `struct tpacket3_hdr`, and the `sockaddr_ll` that follows it.
pub mod pkt {
    pub const NEXT_OFFSET: usize = 0;
    pub const SEC: usize = 4;
    pub const NSEC: usize = 8;
    pub const SNAPLEN: usize = 12;
    pub const LEN: usize = 16;
    pub const STATUS: usize = 20;
    pub const MAC: usize = 24;
    pub const VLAN_TCI: usize = 32;
    pub const VLAN_TPID: usize = 36;
    /// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`: where the `sockaddr_ll` starts.
    pub const SOCKADDR_LL: usize = 48;
    /// `sll_pkttype` inside `sockaddr_ll`.
    pub const SLL_PKTTYPE: usize = SOCKADDR_LL + 10;
}

/// An AF_PACKET raw socket that receives nothing yet: protocol 0 registers no packet hook,
/// so no packet of any interface reaches it before `bind` names the interface and protocol.
pub fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: socket(2) with constant arguments; the returned descriptor is checked and owned.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// setsockopt(2) with a plain-old-data value.
pub fn setsockopt<T: Copy>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to `size_of::<T>()` initialised bytes that live across the call;
    // T is `Copy` plain data (the kernel ABI structures above or integers).
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Reads and resets the socket's PACKET_STATISTICS counters.
pub fn packet_statistics(fd: &OwnedFd) -> io::Result<TpacketStatsV3> {
    let mut st = TpacketStatsV3::default();
    let mut len = size_of::<TpacketStatsV3>() as libc::socklen_t;
    // SAFETY: `st` and `len` are valid for writes and sized as the kernel expects for TPACKET_V3.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            (&mut st as *mut TpacketStatsV3).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(st)
    }
}

/// The pending socket error (SO_ERROR), which reading clears.
pub fn take_socket_error(fd: &OwnedFd) -> Option<io::Error> {
    let mut err: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `err` and `len` are valid for writes of an int.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ERROR,
            (&mut err as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (rc == 0 && err != 0).then(|| io::Error::from_raw_os_error(err))
}

/// Attaches a classic BPF program as the socket filter (SO_ATTACH_FILTER) or, with
/// `fanout_data`, as the fanout group's steering program (PACKET_FANOUT_DATA).
pub fn attach_program(fd: &OwnedFd, program: &[SockFilter], fanout_data: bool) -> io::Result<()> {
    let len = u16::try_from(program.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "BPF program too long"))?;
    let prog = SockFprog {
        len,
        filter: program.as_ptr(),
    };
    let (level, name) = if fanout_data {
        (libc::SOL_PACKET, PACKET_FANOUT_DATA)
    } else {
        (libc::SOL_SOCKET, libc::SO_ATTACH_FILTER)
    };
    // SAFETY: `prog` points at `program`, which outlives the call; the kernel copies it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&prog as *const SockFprog).cast(),
            size_of::<SockFprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Binds the socket to one interface, all protocols.
pub fn bind_to_interface(fd: &OwnedFd, ifindex: i32) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value before the fields are set.
    let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sll.sll_family = libc::AF_PACKET as u16;
    sll.sll_protocol = ETH_P_ALL.to_be();
    sll.sll_ifindex = ifindex;
    // SAFETY: `sll` is a valid sockaddr_ll for the duration of the call.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&sll as *const libc::sockaddr_ll).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Puts the interface into promiscuous mode for as long as the socket lives (the kernel counts
/// memberships, so this never turns promiscuity off for anybody else).
pub fn add_promiscuous_membership(fd: &OwnedFd, ifindex: i32) -> io::Result<()> {
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct PacketMreq {
        ifindex: libc::c_int,
        kind: libc::c_ushort,
        alen: libc::c_ushort,
        address: [u8; 8],
    }
    let mreq = PacketMreq {
        ifindex,
        kind: PACKET_MR_PROMISC as libc::c_ushort,
        alen: 0,
        address: [0; 8],
    };
    setsockopt(fd, libc::SOL_PACKET, PACKET_ADD_MEMBERSHIP, &mreq)
}

/// Asks the NIC to timestamp every received packet (SIOCSHWTSTAMP). Fails on interfaces without
/// hardware timestamping (veth, most virtual NICs).
pub fn enable_hardware_timestamps(fd: &OwnedFd, name: &str) -> io::Result<()> {
    let mut config = HwtstampConfig {
        flags: 0,
        tx_type: HWTSTAMP_TX_OFF,
        rx_filter: HWTSTAMP_FILTER_ALL,
    };
    // SAFETY: ifreq is plain data; all-zero is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    copy_name(&mut ifr.ifr_name, name)?;
    ifr.ifr_ifru.ifru_data = (&mut config as *mut HwtstampConfig).cast();
    // SAFETY: `ifr` names the interface and points at `config`, both alive across the call.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCSHWTSTAMP as _, &mut ifr) };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn copy_name(dst: &mut [libc::c_char; libc::IFNAMSIZ], name: &str) -> io::Result<()> {
    if name.len() >= libc::IFNAMSIZ || name.as_bytes().contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "interface name too long",
        ));
    }
    for (d, s) in dst.iter_mut().zip(name.as_bytes()) {
        *d = *s as libc::c_char;
    }
    Ok(())
}

/// The interface's index, or None when no interface has that name.
pub fn interface_index(name: &str) -> Option<i32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `c` is a valid NUL-terminated string.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    (index != 0).then_some(index as i32)
}

/// Waits until the socket is readable or has an error, or `timeout_ms` passes.
/// Returns the revents bits (0 on timeout).
pub fn poll_readable(fd: &OwnedFd, timeout_ms: i32) -> io::Result<i16> {
    let mut pfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN | libc::POLLERR,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let rc = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(if rc == 0 { 0 } else { pfd.revents })
}

/// The memory-mapped RX ring shared with the kernel: `block_nr` blocks of `block_size` bytes,
/// and per block the number of [`BlockLease`]s alive. Owned jointly (`Arc`) by the
/// [`RingReader`] and every lease, so the mapping outlives them all (a reopened socket's old
/// ring stays mapped until its last lease ends; the mapping keeps the socket itself open).
struct MappedRing {
    base: NonNull<u8>,
    len: usize,
    block_size: usize,
    block_nr: usize,
    /// Leases alive per block: a block goes back to the kernel only when its count is 0.
    leases: Box<[AtomicUsize]>,
}

// SAFETY: a pointer to a mapping this value owns, and atomics. Every access to the blocks'
// bytes goes through `RingReader` and `BlockLease`, whose rules make each block, at any time,
// either the kernel's (TP_STATUS_KERNEL: user space does not touch its bytes), written by the
// reader alone (through `take_next`'s exclusive borrow, before any lease of it exists), or
// only read (by the reader and the leases, until the last lease ends and the reader gives it
// back). Those rules hold whichever threads the reader and the leases are on.
unsafe impl Send for MappedRing {}
// SAFETY: as for Send: shared access only reads block bytes user space holds, and the status
// words and lease counts are atomics.
unsafe impl Sync for MappedRing {}

impl MappedRing {
    fn status_word(&self, index: usize) -> &AtomicU32 {
        assert!(index < self.block_nr);
        // SAFETY: the status word is a 4-byte-aligned u32 inside block `index` (blocks are
        // page-aligned), shared with the kernel, which updates it atomically; viewing it as an
        // AtomicU32 is how user space synchronises with the kernel (packet_mmap.rst).
        unsafe {
            &*self
                .base
                .as_ptr()
                .add(index * self.block_size + block::STATUS)
                .cast::<AtomicU32>()
        }
    }

    /// The start of block `index` (a pointer inside the mapping; reading through it is up to
    /// the callers' rules).
    fn block_ptr(&self, index: usize) -> *mut u8 {
        assert!(index < self.block_nr);
        // SAFETY: `index * block_size` is inside the mapping of `block_nr * block_size` bytes.
        unsafe { self.base.as_ptr().add(index * self.block_size) }
    }
}

impl Drop for MappedRing {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping made in `RingReader::map`; nothing refers to
        // it any more (the reader and every lease held this value through its `Arc`).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// User space's side of the RX ring: takes the blocks the kernel hands over (in ring order,
/// as the kernel fills them), lends them out, and gives them back to the kernel in ring order,
/// each once nobody holds a lease of it.
///
/// Blocks taken and not given back are *held*: the `held` blocks before `next`. A held block
/// stays TP_STATUS_USER, so the kernel does not write it; the reader never takes a block it
/// still holds (when it holds the whole ring, it waits).
pub struct RingReader {
    ring: Arc<MappedRing>,
    /// The next block the kernel hands over.
    next: usize,
    /// Blocks held, ending just before `next`.
    held: usize,
}

impl RingReader {
    /// Maps the ring the kernel allocated for `fd` after PACKET_RX_RING.
    pub fn map(fd: &OwnedFd, block_size: usize, block_nr: usize) -> io::Result<RingReader> {
        let len = block_size * block_nr;
        // SAFETY: mapping the packet socket's ring as documented in packet_mmap.rst; the
        // result is checked, and unmapped when the last owner of the `MappedRing` drops it.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ring = MappedRing {
            base: NonNull::new(ptr.cast()).expect("mmap returned a non-null pointer"),
            len,
            block_size,
            block_nr,
            leases: (0..block_nr).map(|_| AtomicUsize::new(0)).collect(),
        };
        Ok(RingReader {
            ring: Arc::new(ring),
            next: 0,
            held: 0,
        })
    }

    /// Number of blocks.
    pub fn blocks(&self) -> usize {
        self.ring.block_nr
    }

    /// Blocks taken from the kernel and not given back yet.
    pub fn held(&self) -> usize {
        self.held
    }

    fn is_held(&self, index: usize) -> bool {
        let n = self.ring.block_nr;
        index < n && (self.next + n - 1 - index) % n < self.held
    }

    /// Gives held blocks back to the kernel, oldest first, up to the first one still lent:
    /// the kernel fills blocks in ring order, so a block given back behind a lent one would
    /// not be filled any sooner. Returns how many went back.
    pub fn release_returned(&mut self) -> usize {
        let n = self.ring.block_nr;
        let mut released = 0;
        while self.held > 0 {
            let oldest = (self.next + n - self.held) % n;
            // Acquire: pairs with the release decrement of the last lease's drop, so every
            // read through a lease happens before the kernel may write the block again.
            if self.ring.leases[oldest].load(Ordering::Acquire) != 0 {
                break;
            }
            self.ring
                .status_word(oldest)
                .store(TP_STATUS_KERNEL, Ordering::Release);
            self.held -= 1;
            released += 1;
        }
        released
    }

    /// Takes the next block if the kernel has handed it over: its index and its bytes,
    /// writable (trawl re-inserts VLAN tags in place, in the headroom PACKET_RESERVE leaves
    /// before each frame) until the borrow ends. None while the kernel fills it, and while
    /// every block is held (the next one is then the oldest held block, not a new one).
    pub fn take_next(&mut self) -> Option<(usize, &mut [u8])> {
        if self.held == self.ring.block_nr {
            return None;
        }
        let index = self.next;
        let status = self.ring.status_word(index).load(Ordering::Acquire);
        if status & TP_STATUS_USER == 0 {
            return None;
        }
        debug_assert_eq!(self.ring.leases[index].load(Ordering::Relaxed), 0);
        self.next = (index + 1) % self.ring.block_nr;
        self.held += 1;
        // SAFETY: the kernel handed the block over (TP_STATUS_USER, observed with acquire
        // ordering) and leaves it alone until `release_returned` stores TP_STATUS_KERNEL. It
        // was not held before this call (fewer than all blocks were held, and the held ones
        // end just before `next`), so no lease of it exists: leases are made only of held
        // blocks, and every lease of its previous turn ended before it was given back. The
        // returned borrow of `self` excludes `block` and `lend` while it lives, so it is the
        // only access to these bytes.
        let bytes = unsafe {
            std::slice::from_raw_parts_mut(self.ring.block_ptr(index), self.ring.block_size)
        };
        Some((index, bytes))
    }

    /// The bytes of held block `index`, read-only.
    ///
    /// # Panics
    /// Panics if the block is not held (a bug in the caller).
    pub fn block(&self, index: usize) -> &[u8] {
        assert!(self.is_held(index), "block {index} is not held");
        // SAFETY: a held block is user space's (TP_STATUS_USER) until `release_returned`,
        // which needs `&mut self` and so cannot run while this borrow lives; the only
        // writable borrow of it (`take_next`'s) ended before `&self` could be borrowed.
        unsafe { std::slice::from_raw_parts(self.ring.block_ptr(index), self.ring.block_size) }
    }

    /// Lends held block `index`: the block stays user space's, and out of the kernel's
    /// reach, until the lease and every clone of it are dropped (on any thread).
    ///
    /// # Panics
    /// Panics if the block is not held (a bug in the caller).
    pub fn lend(&self, index: usize) -> BlockLease {
        assert!(self.is_held(index), "block {index} is not held");
        // Relaxed, as `Arc::clone`: the count is read (acquire) only by `release_returned`,
        // on this reader's thread, after this.
        self.ring.leases[index].fetch_add(1, Ordering::Relaxed);
        BlockLease {
            ring: self.ring.clone(),
            index,
        }
    }
}

/// A ring block lent by the capture's ring reader: read-only access to the block's bytes for as long
/// as the lease (or a clone) lives, on any thread. The block goes back to the kernel only
/// after the last one is dropped, so the bytes cannot change or vanish under a holder.
pub struct BlockLease {
    ring: Arc<MappedRing>,
    index: usize,
}

impl BlockLease {
    /// The block's bytes (the whole block; records' offsets index it).
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the block was held when the lease was made, and is not given back to the
        // kernel while any lease of it lives: `release_returned` reads the count with acquire
        // ordering and this lease's drop decrements it with release ordering after its last
        // read. The reader wrote it only through `take_next`'s borrow, which ended before
        // `lend` could be called; nobody writes it after. `ring` keeps the mapping alive.
        unsafe { std::slice::from_raw_parts(self.ring.block_ptr(self.index), self.ring.block_size) }
    }
}

impl Clone for BlockLease {
    fn clone(&self) -> BlockLease {
        let before = self.ring.leases[self.index].fetch_add(1, Ordering::Relaxed);
        // As `Arc`: a count that could wrap to 0 would let the block go back to the kernel
        // under its holders; no program makes that many clones, so this is a leak in a loop.
        if before > isize::MAX as usize {
            std::process::abort();
        }
        BlockLease {
            ring: self.ring.clone(),
            index: self.index,
        }
    }
}

impl Drop for BlockLease {
    fn drop(&mut self) {
        // Release: this holder's reads of the block happen before the reader sees the count
        // drop (see `RingReader::release_returned`).
        self.ring.leases[self.index].fetch_sub(1, Ordering::Release);
    }
}

impl std::fmt::Debug for BlockLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BlockLease(block {})", self.index)
    }
}

/// Sets the calling thread's CPU affinity to one core.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_ZERO/CPU_SET write inside it; the set outlives the
    // call.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "CPU number too large",
            ));
        }
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Number of CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as in `pin_current_thread`; sched_getaffinity writes into `set`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// The whole process's CPU time so far, every thread's (user, system), and its peak resident
/// set in KB, from `getrusage(RUSAGE_SELF)`.
pub fn process_usage() -> (Duration, Duration, u64) {
    // SAFETY: rusage is plain data that getrusage fills; RUSAGE_SELF cannot fail.
    let r = unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut r);
        r
    };
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
    };
    (
        time(r.ru_utime),
        time(r.ru_stime),
        r.ru_maxrss.max(0) as u64,
    )
}

/// Switches the process to an unprivileged user after the sockets are open (tcpdump's -Z):
/// supplementary groups cleared, then gid, then uid (the order matters: after setuid the
/// process may no longer change its groups).
pub fn drop_privileges(user: &str) -> io::Result<(u32, u32)> {
    let c = CString::new(user)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "user name contains NUL"))?;
    // SAFETY: passwd is plain data; getpwnam_r fills it with pointers into `buf`, which
    // outlives their use below.
    let (uid, gid) = unsafe {
        let mut pw: libc::passwd = std::mem::zeroed();
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let rc = libc::getpwnam_r(
            c.as_ptr(),
            &mut pw,
            buf.as_mut_ptr(),
            buf.len(),
            &mut result,
        );
        if rc != 0 {
            return Err(io::Error::from_raw_os_error(rc));
        }
        if result.is_null() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no user named '{user}'"),
            ));
        }
        (pw.pw_uid, pw.pw_gid)
    };
    // SAFETY: plain system calls with integer arguments; results checked.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setgid(gid) != 0
            || libc::setuid(uid) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((uid, gid))
}
