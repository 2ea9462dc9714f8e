//! Live capture from a network interface with AF_PACKET TPACKET_V3 memory-mapped rings.
//!
//! The kernel writes packets into blocks of a ring shared with user space; [`LiveSource`] hands
//! out each block the kernel passes over as one batch whose records point into the block (no
//! copy), after putting back in place the VLAN tags the kernel moved into metadata, and gives
//! the block back to the kernel at the next call. One `poll` per block at most, no system call
//! and no copy per packet.
//!
//! [`LiveSource::next_lent_batch`] also *lends* the block: a [`BlockLease`] that can travel
//! with the packets (to another thread, into a message) keeps the block out of the kernel's
//! reach until it is dropped. Blocks go back to the kernel in ring order (the order the kernel
//! fills them in), each once its leases have ended. A block is lent only while at most half of
//! the ring is held, so the kernel always has half of the ring ahead of a new lease; past that
//! the caller copies the packets (as it would without leases), so a holder slower than the
//! traffic freezes the kernel only if it keeps one lease while the kernel fills half a ring.
//!
//! Several [`LiveSource`]s on one interface join a PACKET_FANOUT group; with
//! [`FanoutMode::Symmetric`] the kernel stripes traffic by an XOR of the addresses so both
//! directions of a conversation reach the same source (see [`fanout`]).
use std::io;
use std::os::fd::OwnedFd;
use std::time::{Duration, Instant};

use crate::{Batch, Direction, Interface, LinkType, PacketSource, RecordMeta, SourceStats};

pub mod fanout;
mod sys;

pub use sys::{BlockLease, SockFilter};

/// Where the timestamps come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TimestampMode {
    /// Ask the NIC for hardware timestamps (SIOCSHWTSTAMP, SOF_TIMESTAMPING_RAW_HARDWARE) and
    /// fall back to the kernel's software timestamps when it has none. Which one each packet
    /// got is counted ([`LiveStats::hardware_timestamps`]).
    #[default]
    PreferHardware,
    /// The kernel's software receive timestamps only.
    Software,
}

/// How a fanout group spreads packets over its sockets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FanoutMode {
    /// XOR of the IP addresses (both directions and all fragments on one socket).
    #[default]
    Symmetric,
    /// The kernel's flow hash (symmetric in software, not with every NIC's receive hash).
    KernelHash,
}

/// Membership in a PACKET_FANOUT group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fanout {
    /// Group id, shared by the sockets of one interface (and unique per interface).
    pub group: u16,
    /// Steering.
    pub mode: FanoutMode,
}

/// Settings of one capture socket.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// Interface name (`eth0`).
    pub interface: String,
    /// Bytes kept per packet.
    pub snaplen: u32,
    /// Ring block size in bytes: a power of two, at least a page.
    pub block_size: usize,
    /// Number of ring blocks (ring size = block_size × block_count).
    pub block_count: usize,
    /// The kernel hands over a partly filled block after this long (the latency bound at low
    /// rates).
    pub block_timeout: Duration,
    /// How long [`PacketSource::next_batch`] waits for a block before returning an empty batch
    /// (the caller's chance to look at the clock and its stop flag).
    pub poll_timeout: Duration,
    /// Put the interface in promiscuous mode while capturing.
    pub promiscuous: bool,
    /// Classic BPF program run by the kernel before a packet reaches the ring; its return
    /// value caps the bytes kept. `None` keeps every packet (cut to `snaplen`).
    pub filter: Option<Vec<SockFilter>>,
    /// Join a fanout group.
    pub fanout: Option<Fanout>,
    /// Timestamp source.
    pub timestamps: TimestampMode,
}

impl LiveConfig {
    /// Defaults for `interface`: 1 MiB × 64 blocks, 262144-byte snaplen, promiscuous.
    pub fn new(interface: impl Into<String>) -> Self {
        LiveConfig {
            interface: interface.into(),
            snaplen: crate::MAX_SNAPLEN,
            block_size: 1 << 20,
            block_count: 64,
            block_timeout: Duration::from_millis(10),
            poll_timeout: Duration::from_millis(100),
            promiscuous: true,
            filter: None,
            fanout: None,
            timestamps: TimestampMode::default(),
        }
    }
}

/// Allowed values of the capture settings: one rule for the command line, `trawl run`'s
/// configuration and the `afpacket_source` block, checked by [`LiveConfig::check`].
pub mod limits {
    use trawl_time::{Limit, Unit};

    /// Bytes kept per packet: below 64 not even the headers of a tunnelled TCP packet fit;
    /// 262144 is libpcap's largest.
    pub const SNAPLEN: Limit = Limit::new("snaplen", Unit::Bytes, 64, crate::MAX_SNAPLEN as u64);
    /// Ring block size: the kernel wants a power of two of at least a page, below 2 GiB.
    pub const BLOCK_SIZE: Limit =
        Limit::new("block_size", Unit::Bytes, 4096, 1 << 30).power_of_two();
    /// Ring blocks: one filled by the kernel while another is read.
    pub const BLOCKS: Limit = Limit::new("blocks", Unit::Count, 2, 65_536);
    /// The whole ring (block size × blocks): the kernel refuses 4 GiB and more.
    pub const RING_MAX: u64 = 2 << 30;
    /// Capture workers (sockets of one fanout group) per interface.
    pub const WORKERS: Limit = Limit::new("workers", Unit::Count, 1, 64);
}

impl LiveConfig {
    /// Checks the settings against [`limits`]: the first one out of range.
    pub fn check(&self) -> Result<(), trawl_time::OutOfRange> {
        limits::SNAPLEN.check(u64::from(self.snaplen))?;
        limits::BLOCK_SIZE.check_usize(self.block_size)?;
        limits::BLOCKS.check_usize(self.block_count)?;
        let ring = self.block_size as u64 * self.block_count as u64;
        if ring > limits::RING_MAX {
            return Err(trawl_time::OutOfRange {
                name: "blocks",
                value: self.block_count.to_string(),
                allowed: format!(
                    "at most {} with blocks of {} bytes (the ring, block size × blocks, is at \
                     most 2GiB)",
                    limits::RING_MAX / self.block_size as u64,
                    self.block_size
                ),
            });
        }
        Ok(())
    }
}

/// Why a live capture could not start. The messages say what to do.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    /// No interface of that name.
    #[error("no interface named '{0}' (see `ip link`)")]
    NoSuchInterface(String),
    /// Not root and no CAP_NET_RAW.
    #[error("capturing on '{0}' needs root or the CAP_NET_RAW capability ({1})")]
    Permission(String, io::Error),
    /// The interface's link type is one trawl does not capture yet.
    #[error("interface '{interface}' has ARPHRD type {arphrd}, which trawl cannot capture yet")]
    UnsupportedLink {
        /// Interface name.
        interface: String,
        /// `/sys/class/net/<if>/type`.
        arphrd: u32,
    },
    /// A setting the kernel refused or that is out of range.
    #[error("invalid capture setting for '{interface}': {detail}")]
    Config {
        /// Interface name.
        interface: String,
        /// What and why.
        detail: String,
    },
    /// A system call failed; `step` names it.
    #[error("cannot capture on '{interface}': {step}: {source}")]
    Os {
        /// Interface name.
        interface: String,
        /// What was being done.
        step: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

/// Counters of a live source beyond [`SourceStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveStats {
    /// Packets the kernel saw for this socket (after its filter), including drops.
    pub kernel_packets: u64,
    /// Packets the kernel dropped because the ring was full.
    pub kernel_drops: u64,
    /// Times the kernel froze the ring queue because it was full.
    pub kernel_freezes: u64,
    /// Packets with a NIC timestamp (the rest have the kernel's software timestamp).
    pub hardware_timestamps: u64,
    /// Packets whose VLAN tag the kernel had moved to metadata and trawl put back.
    pub vlan_restored: u64,
    /// Times the interface went down under the capture.
    pub interface_down: u64,
    /// Times the socket was reopened because the interface was recreated.
    pub reopened: u64,
    /// Blocks the kernel marked as losing (drops happened while they were filled).
    pub losing_blocks: u64,
    /// Outgoing copies skipped on a loopback interface (each packet comes back as incoming;
    /// libpcap skips them too). [`LiveStats::kernel_packets`] counts both copies.
    pub loopback_outgoing: u64,
    /// Blocks [`LiveSource::next_lent_batch`] lent.
    pub blocks_lent: u64,
    /// Blocks [`LiveSource::next_lent_batch`] did not lend because more than half of the ring
    /// was held (leases not yet ended, and the blocks behind them): their packets are copied.
    pub blocks_copied: u64,
}

impl LiveStats {
    /// Adds another source's counters (parallel capture workers).
    pub fn merge(&mut self, other: &LiveStats) {
        self.kernel_packets += other.kernel_packets;
        self.kernel_drops += other.kernel_drops;
        self.kernel_freezes += other.kernel_freezes;
        self.hardware_timestamps += other.hardware_timestamps;
        self.vlan_restored += other.vlan_restored;
        self.interface_down += other.interface_down;
        self.reopened += other.reopened;
        self.losing_blocks += other.losing_blocks;
        self.loopback_outgoing += other.loopback_outgoing;
        self.blocks_lent += other.blocks_lent;
        self.blocks_copied += other.blocks_copied;
    }
}

/// Whether hardware timestamping was switched on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampSource {
    /// The NIC timestamps packets.
    Hardware,
    /// The kernel timestamps packets when they arrive in the stack.
    Software,
}

/// A TPACKET_V3 capture on one interface.
pub struct LiveSource {
    config: LiveConfig,
    socket: Socket,
    interfaces: Vec<Interface>,
    out: Collector,
    last_kernel_poll: Instant,
    down: bool,
}

/// The batch being assembled and the counters, apart from the socket so that a block borrowed
/// from the ring can be copied into it.
struct Collector {
    /// Records of the current batch, with offsets into the kernel block.
    metas: Vec<RecordMeta>,
    stats: SourceStats,
    live: LiveStats,
    snaplen: u32,
    ethernet: bool,
    /// Loopback: every packet passes the tap twice, once leaving (`PACKET_OUTGOING`) and once
    /// arriving; only the arrival is kept, as libpcap does.
    skip_outgoing: bool,
}

struct Socket {
    // The mapping may outlive the descriptor (leases of its blocks keep it): a mapping keeps
    // the socket it maps open in the kernel, so its memory stays valid either way.
    ring: sys::RingReader,
    fd: OwnedFd,
    ifindex: i32,
    timestamp_source: TimestampSource,
}

const VLAN_TAG_LEN: usize = 4;
/// The end of `sockaddr_ll` after a packet header: a restored tag must start at or after it.
const HEADROOM_START: usize = sys::pkt::SOCKADDR_LL + 20;

const ARPHRD_ETHER: u32 = 1;
const ARPHRD_IEEE802: u32 = 6;
const ARPHRD_LOOPBACK: u32 = 772;
const ARPHRD_NONE: u32 = 0xfffe;
const ARPHRD_RAWIP: u32 = 519;
const ARPHRD_TUNNEL: u32 = 768;
const ARPHRD_TUNNEL6: u32 = 769;
const ARPHRD_IPGRE: u32 = 778;
const ARPHRD_SIT: u32 = 776;

/// The link type packets captured on `interface` will have (from its ARPHRD type), so a filter
/// can be compiled for it before the capture opens.
pub fn link_type_of(interface: &str) -> Result<LinkType, LiveError> {
    let arphrd = arphrd_of(interface)?;
    match arphrd {
        ARPHRD_ETHER | ARPHRD_IEEE802 | ARPHRD_LOOPBACK => Ok(LinkType::ETHERNET),
        ARPHRD_NONE | ARPHRD_RAWIP | ARPHRD_TUNNEL | ARPHRD_TUNNEL6 | ARPHRD_IPGRE | ARPHRD_SIT => {
            Ok(LinkType::RAW)
        }
        _ => Err(LiveError::UnsupportedLink {
            interface: interface.to_string(),
            arphrd,
        }),
    }
}

/// The interface's ARPHRD type (`/sys/class/net/<if>/type`).
fn arphrd_of(interface: &str) -> Result<u32, LiveError> {
    let path = format!("/sys/class/net/{interface}/type");
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| LiveError::NoSuchInterface(interface.to_string()))
}

impl Socket {
    fn open(c: &LiveConfig) -> Result<Socket, LiveError> {
        let name = c.interface.clone();
        let os = |step: &'static str| {
            let name = name.clone();
            move |source: io::Error| LiveError::Os {
                interface: name,
                step,
                source,
            }
        };
        let config_error = |detail: String| LiveError::Config {
            interface: c.interface.clone(),
            detail,
        };
        let ifindex = sys::interface_index(&c.interface)
            .ok_or_else(|| LiveError::NoSuchInterface(c.interface.clone()))?;
        c.check().map_err(|e| config_error(e.to_string()))?;
        let fd = sys::packet_socket().map_err(|e| {
            if matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) {
                LiveError::Permission(c.interface.clone(), e)
            } else {
                os("socket(AF_PACKET)")(e)
            }
        })?;
        sys::setsockopt(&fd, libc::SOL_PACKET, sys::PACKET_VERSION, &sys::TPACKET_V3)
            .map_err(os("PACKET_VERSION TPACKET_V3"))?;
        let mut timestamp_source = TimestampSource::Software;
        if c.timestamps == TimestampMode::PreferHardware
            && sys::enable_hardware_timestamps(&fd, &c.interface).is_ok()
        {
            let flags: libc::c_int = (sys::SOF_TIMESTAMPING_RAW_HARDWARE
                | sys::SOF_TIMESTAMPING_RX_HARDWARE)
                as libc::c_int;
            if sys::setsockopt(&fd, libc::SOL_PACKET, sys::PACKET_TIMESTAMP, &flags).is_ok() {
                timestamp_source = TimestampSource::Hardware;
            }
        }
        // Headroom before every frame, so a VLAN tag the kernel moved into metadata can be put
        // back in place without copying the packet (libpcap does the same).
        sys::setsockopt(
            &fd,
            libc::SOL_PACKET,
            sys::PACKET_RESERVE,
            &(VLAN_TAG_LEN as u32),
        )
        .map_err(os("PACKET_RESERVE"))?;
        let frame_size = 2048u32;
        let req = sys::TpacketReq3 {
            block_size: c.block_size as u32,
            block_nr: c.block_count as u32,
            frame_size,
            frame_nr: (c.block_size * c.block_count / frame_size as usize) as u32,
            retire_blk_tov: c.block_timeout.as_millis().clamp(1, u32::MAX as u128) as u32,
            sizeof_priv: 0,
            feature_req_word: sys::TP_FT_REQ_FILL_RXHASH,
        };
        sys::setsockopt(&fd, libc::SOL_PACKET, sys::PACKET_RX_RING, &req).map_err(|e| {
            config_error(format!(
                "the kernel refused a ring of {} blocks of {} bytes ({e})",
                c.block_count, c.block_size
            ))
        })?;
        let ring = sys::RingReader::map(&fd, c.block_size, c.block_count)
            .map_err(os("mmap of the ring"))?;
        // The filter goes on before bind: the socket was created with protocol 0, so it sees
        // nothing until bind, and nothing unfiltered ever reaches the ring.
        let snaplen_program;
        let program = match &c.filter {
            Some(p) => Some(p.as_slice()),
            None if c.snaplen < crate::MAX_SNAPLEN => {
                snaplen_program = [SockFilter {
                    code: 0x06,
                    jt: 0,
                    jf: 0,
                    k: c.snaplen,
                }];
                Some(&snaplen_program[..])
            }
            None => None,
        };
        if let Some(p) = program {
            sys::attach_program(&fd, p, false).map_err(|e| {
                config_error(format!(
                    "the kernel refused the BPF filter ({} instructions): {e}",
                    p.len()
                ))
            })?;
        }
        if c.promiscuous {
            sys::add_promiscuous_membership(&fd, ifindex)
                .map_err(os("PACKET_ADD_MEMBERSHIP promiscuous"))?;
        }
        sys::bind_to_interface(&fd, ifindex).map_err(os("bind"))?;
        if let Some(f) = c.fanout {
            let kind = match f.mode {
                FanoutMode::Symmetric => sys::PACKET_FANOUT_CBPF,
                FanoutMode::KernelHash => sys::PACKET_FANOUT_HASH,
            };
            let arg: u32 = u32::from(f.group) | (kind << 16);
            sys::setsockopt(&fd, libc::SOL_PACKET, sys::PACKET_FANOUT, &arg).map_err(|e| {
                config_error(format!(
                    "cannot join fanout group {} (another program may use that id with other settings): {e}",
                    f.group
                ))
            })?;
            if f.mode == FanoutMode::Symmetric {
                sys::attach_program(&fd, &fanout::symmetric_program(), true)
                    .map_err(os("PACKET_FANOUT_DATA (symmetric steering program)"))?;
            }
        }
        Ok(Socket {
            ring,
            fd,
            ifindex,
            timestamp_source,
        })
    }
}

impl LiveSource {
    /// Opens the capture. Needs root or CAP_NET_RAW.
    pub fn open(config: LiveConfig) -> Result<LiveSource, LiveError> {
        let link_type = link_type_of(&config.interface)?;
        let loopback = arphrd_of(&config.interface)? == ARPHRD_LOOPBACK;
        let socket = Socket::open(&config)?;
        Ok(LiveSource {
            interfaces: vec![Interface {
                link_type,
                snaplen: config.snaplen,
                name: Some(config.interface.clone()),
            }],
            out: Collector {
                metas: Vec::with_capacity(config.block_size / 64),
                stats: SourceStats::default(),
                live: LiveStats::default(),
                snaplen: config.snaplen,
                ethernet: link_type == LinkType::ETHERNET,
                skip_outgoing: loopback,
            },
            last_kernel_poll: Instant::now(),
            down: false,
            socket,
            config,
        })
    }

    /// The settings this source was opened with.
    pub fn config(&self) -> &LiveConfig {
        &self.config
    }

    /// Live counters (kernel drops are read from the kernel at most every 100 ms; call
    /// [`LiveSource::refresh_kernel_stats`] for exact numbers at the end).
    pub fn live_stats(&self) -> LiveStats {
        self.out.live
    }

    /// Reads the kernel's counters now.
    pub fn refresh_kernel_stats(&mut self) {
        if let Ok(st) = sys::packet_statistics(&self.socket.fd) {
            self.out.live.kernel_packets += u64::from(st.packets);
            self.out.live.kernel_drops += u64::from(st.drops);
            self.out.live.kernel_freezes += u64::from(st.freeze_q_cnt);
        }
        self.last_kernel_poll = Instant::now();
    }

    /// Whether the NIC timestamps packets.
    pub fn timestamp_source(&self) -> TimestampSource {
        self.socket.timestamp_source
    }

    /// True while the interface is down.
    pub fn is_down(&self) -> bool {
        self.down
    }

    /// After the interface went down: whether it came back, possibly as a new interface with
    /// the same name (then the socket is opened again).
    fn check_interface(&mut self) {
        match sys::interface_index(&self.config.interface) {
            Some(i) if i == self.socket.ifindex => {
                let up = std::fs::read_to_string(format!(
                    "/sys/class/net/{}/operstate",
                    self.config.interface
                ))
                .map(|s| s.trim() != "down")
                .unwrap_or(false);
                if up {
                    self.down = false;
                }
            }
            Some(_) => {
                if let Ok(s) = Socket::open(&self.config) {
                    self.refresh_kernel_stats();
                    // Blocks of the old ring still lent stay mapped until their leases end.
                    self.socket = s;
                    self.out.live.reopened += 1;
                    self.down = false;
                }
            }
            None => {}
        }
    }
}

/// How many packets ahead [`Collector::take_block`] fetches headers.
const PREFETCH_PACKETS: usize = 8;

impl Collector {
    /// Reads the packets of one block into `metas` (offsets into the block), re-inserting VLAN
    /// tags in place. Header fields come from the kernel but are bounds-checked anyway: a walk
    /// over inconsistent headers stops and counts an error.
    fn take_block(&mut self, block: &mut [u8]) {
        let rd = |block: &[u8], off: usize| -> Option<u32> {
            block
                .get(off..off.checked_add(4)?)
                .map(|b| u32::from_ne_bytes(b.try_into().expect("4 bytes")))
        };
        let num = rd(block, sys::block::NUM_PKTS).unwrap_or(0);
        let blk_len = (rd(block, sys::block::BLK_LEN).unwrap_or(0) as usize).min(block.len());
        let mut off = rd(block, sys::block::OFFSET_TO_FIRST_PKT).unwrap_or(0) as usize;
        for i in 0..num {
            let field = |at: usize| rd(block, off.checked_add(at)?);
            let (Some(next), Some(sec), Some(nsec), Some(snaplen), Some(len), Some(status)) = (
                field(sys::pkt::NEXT_OFFSET),
                field(sys::pkt::SEC),
                field(sys::pkt::NSEC),
                field(sys::pkt::SNAPLEN),
                field(sys::pkt::LEN),
                field(sys::pkt::STATUS),
            ) else {
                self.stats.errors += 1;
                break;
            };
            let tag = field(sys::pkt::VLAN_TCI).unwrap_or(0) as u16;
            let tpid_field = field(sys::pkt::VLAN_TPID).unwrap_or(0) as u16;
            let mac = block
                .get(off + sys::pkt::MAC..off + sys::pkt::MAC + 2)
                .map_or(0, |b| u16::from_ne_bytes([b[0], b[1]])) as usize;
            let mut start = off + mac;
            let end = start + snaplen as usize;
            if mac < HEADROOM_START || end > blk_len {
                self.stats.errors += 1;
                break;
            }
            let pkttype = block[off + sys::pkt::SLL_PKTTYPE];
            if self.skip_outgoing && pkttype == sys::PACKET_OUTGOING {
                self.live.loopback_outgoing += 1;
                if next == 0 {
                    break;
                }
                off += next as usize;
                continue;
            }
            let direction = if pkttype == sys::PACKET_OUTGOING {
                Direction::Outbound
            } else {
                Direction::Inbound
            };
            if status & sys::TP_STATUS_TS_RAW_HARDWARE != 0 {
                self.live.hardware_timestamps += 1;
            }
            let mut caplen = snaplen.min(self.snaplen);
            let mut wire_len = len;
            if self.ethernet
                && status & sys::TP_STATUS_VLAN_VALID != 0
                && snaplen >= 12
                && mac >= HEADROOM_START + VLAN_TAG_LEN
            {
                // The kernel took the 802.1Q/802.1ad tag out of the frame into metadata; put
                // it back where it was (MAC addresses moved 4 bytes down into the headroom) so
                // decoding sees the frame as it was on the wire.
                let tpid = if status & sys::TP_STATUS_VLAN_TPID_VALID != 0 {
                    tpid_field
                } else {
                    0x8100
                };
                block.copy_within(start..start + 12, start - VLAN_TAG_LEN);
                start -= VLAN_TAG_LEN;
                block[start + 12..start + 14].copy_from_slice(&tpid.to_be_bytes());
                block[start + 14..start + 16].copy_from_slice(&tag.to_be_bytes());
                caplen = snaplen.saturating_add(4).min(self.snaplen);
                wire_len = wire_len.saturating_add(4);
                self.live.vlan_restored += 1;
            }
            if caplen < wire_len {
                self.stats.truncated_records += 1;
            }
            self.stats.records += 1;
            self.stats.captured_bytes += u64::from(caplen);
            self.stats.wire_bytes += u64::from(wire_len);
            self.metas.push(RecordMeta {
                ts_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
                offset: start,
                caplen,
                wire_len,
                iface: 0,
                direction,
            });
            if next == 0 {
                if i + 1 < num {
                    self.stats.errors += 1;
                }
                break;
            }
            // Each header is found from the one before, so their loads (lines the kernel just
            // wrote on another CPU) would wait one after the other: fetch the line a few
            // packets of this size ahead, so the chain finds its headers cached, and that
            // packet's first bytes (at the same offset from its header as this one's), which
            // decoding or a ring listener's copy reads next.
            let ahead = off + PREFETCH_PACKETS * next as usize;
            for at in [ahead, ahead + mac] {
                if let Some(b) = block.get(at) {
                    mem_prefetch::prefetch_read_data::<_, 3>(b);
                }
            }
            off += next as usize;
        }
    }
}

impl LiveSource {
    /// The next batch, as [`PacketSource::next_batch`], and a lease of the block its records
    /// point into when the block may be lent: the batch's bytes stay valid and unchanged for
    /// as long as the lease lives, after the next call too, on any thread. `None` when more
    /// than half of the ring is held (earlier leases not ended, and the blocks behind them):
    /// copy the records before the next call then. An empty batch after the poll timeout.
    pub fn next_lent_batch(&mut self) -> Result<(Batch<'_>, Option<BlockLease>), crate::Error> {
        let Some(index) = self.read_block()? else {
            return Ok((Batch::new(&[], &[], &self.interfaces), None));
        };
        let ring = &self.socket.ring;
        let lease = if ring.held() <= lend_limit(ring.blocks()) {
            self.out.live.blocks_lent += 1;
            Some(ring.lend(index))
        } else {
            self.out.live.blocks_copied += 1;
            None
        };
        let batch = Batch::new(&self.out.metas, ring.block(index), &self.interfaces);
        Ok((batch, lease))
    }

    /// Blocks taken from the kernel and not given back yet: the last batch's, and those lent
    /// whose leases have not all ended (with the blocks behind them: blocks go back in ring
    /// order).
    pub fn blocks_held(&self) -> usize {
        self.socket.ring.held()
    }

    /// Gives the blocks whose batches are done back to the kernel, then waits up to the poll
    /// timeout for a block with records and reads it into `out.metas`: its index, or `None`
    /// on a timeout.
    fn read_block(&mut self) -> Result<Option<usize>, crate::Error> {
        self.out.metas.clear();
        if self.last_kernel_poll.elapsed() >= Duration::from_millis(100) {
            self.refresh_kernel_stats();
            if self.down {
                self.check_interface();
            }
        }
        let timeout_ms = self.config.poll_timeout.as_millis().min(i32::MAX as u128) as i32;
        let deadline = Instant::now() + self.config.poll_timeout;
        loop {
            // The previous batch is done (the caller asks for the next one); leases may have
            // ended meanwhile, on other threads too.
            self.socket.ring.release_returned();
            if let Some((index, block)) = self.socket.ring.take_next() {
                if block_status(block) & sys::TP_STATUS_LOSING != 0 {
                    self.out.live.losing_blocks += 1;
                }
                self.out.take_block(block);
                if self.out.metas.is_empty() {
                    continue;
                }
                return Ok(Some(index));
            }
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Ok(None);
            }
            if self.socket.ring.held() == self.socket.ring.blocks() {
                // Every block is held by leases (and the blocks behind them): the kernel can
                // hand over nothing, and poll would return at once. Wait for a lease to end.
                std::thread::sleep(remaining.min(Duration::from_millis(1)));
                continue;
            }
            let wait = (remaining.as_millis() as i32).clamp(1, timeout_ms.max(1));
            let revents = sys::poll_readable(&self.socket.fd, wait).map_err(|e| crate::Error {
                path: self.config.interface.clone().into(),
                offset: 0,
                kind: crate::ErrorKind::Io(e),
            })?;
            if revents & libc::POLLERR != 0 {
                if let Some(e) = sys::take_socket_error(&self.socket.fd) {
                    if e.raw_os_error() == Some(libc::ENETDOWN) {
                        if !self.down {
                            self.out.live.interface_down += 1;
                        }
                        self.down = true;
                    }
                }
                // Nothing to read while an error is pending; wait out the rest of the timeout.
                std::thread::sleep(remaining.min(Duration::from_millis(20)));
            }
        }
    }
}

/// Most blocks held (the one just read included) for a block to be lent: half of the ring, so
/// leases never keep more than half of it from the kernel; at least the one just read.
fn lend_limit(blocks: usize) -> usize {
    (blocks / 2).max(1)
}

impl PacketSource for LiveSource {
    fn next_batch(&mut self) -> Result<Option<Batch<'_>>, crate::Error> {
        // The block stays held until the next call, which gives it back (the batch borrows
        // the source, so nobody can read it by then).
        let bytes = match self.read_block()? {
            Some(index) => self.socket.ring.block(index),
            None => &[],
        };
        Ok(Some(Batch::new(&self.out.metas, bytes, &self.interfaces)))
    }

    fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    fn stats(&self) -> SourceStats {
        self.out.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process's CPU time counts every thread's: another thread's busy 50 ms (by its own
    /// CPU clock) are in it.
    #[test]
    fn process_usage_counts_every_thread() {
        // The calling thread's time on a CPU, ns (schedstat's first field).
        let thread_cpu = || {
            let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
            let ns = text.split_whitespace().next().unwrap().parse().unwrap();
            std::time::Duration::from_nanos(ns)
        };
        let (user, system, rss_kb) = process_usage();
        std::thread::spawn(move || {
            let until = thread_cpu() + std::time::Duration::from_millis(50);
            let mut x = 1u64;
            while thread_cpu() < until {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
        })
        .join()
        .unwrap();
        let (user2, system2, rss2) = process_usage();
        let grown = (user2 + system2) - (user + system);
        assert!(grown >= std::time::Duration::from_millis(45), "{grown:?}");
        assert!(rss_kb > 0 && rss2 >= rss_kb);
    }

    /// A block as the kernel lays it out: descriptor, then packets each with a tpacket3_hdr,
    /// a sockaddr_ll and the frame at `tp_mac`.
    fn block(packets: &[(&[u8], u32, u16, u16, u8)]) -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        let first = 48usize;
        b[sys::block::NUM_PKTS..][..4].copy_from_slice(&(packets.len() as u32).to_ne_bytes());
        b[sys::block::OFFSET_TO_FIRST_PKT..][..4].copy_from_slice(&(first as u32).to_ne_bytes());
        let mut off = first;
        for (i, &(frame, status, tci, tpid, pkttype)) in packets.iter().enumerate() {
            let mac = 80usize;
            let next = if i + 1 == packets.len() {
                0
            } else {
                (mac + frame.len() + 15) & !15
            };
            let put = |b: &mut Vec<u8>, at: usize, v: u32| {
                b[off + at..][..4].copy_from_slice(&v.to_ne_bytes())
            };
            put(&mut b, sys::pkt::NEXT_OFFSET, next as u32);
            put(&mut b, sys::pkt::SEC, 1_700_000_000 + i as u32);
            put(&mut b, sys::pkt::NSEC, 5);
            put(&mut b, sys::pkt::SNAPLEN, frame.len() as u32);
            put(&mut b, sys::pkt::LEN, frame.len() as u32 + 100);
            put(&mut b, sys::pkt::STATUS, status);
            b[off + sys::pkt::MAC..][..2].copy_from_slice(&(mac as u16).to_ne_bytes());
            put(&mut b, sys::pkt::VLAN_TCI, u32::from(tci));
            b[off + sys::pkt::VLAN_TPID..][..2].copy_from_slice(&tpid.to_ne_bytes());
            b[off + sys::pkt::SLL_PKTTYPE] = pkttype;
            b[off + mac..][..frame.len()].copy_from_slice(frame);
            off += next;
        }
        let len = (off + 200) as u32;
        b[sys::block::BLK_LEN..][..4].copy_from_slice(&len.to_ne_bytes());
        b
    }

    #[test]
    fn walks_packets_restores_tags_and_reads_direction() {
        let frame: Vec<u8> = (0..60u8).collect();
        let b = block(&[
            (
                &frame,
                sys::TP_STATUS_USER | sys::TP_STATUS_VLAN_VALID | sys::TP_STATUS_VLAN_TPID_VALID,
                0x0064,
                0x88a8,
                0,
            ),
            (
                &frame,
                sys::TP_STATUS_USER | sys::TP_STATUS_TS_RAW_HARDWARE,
                0,
                0,
                sys::PACKET_OUTGOING,
            ),
        ]);
        let w = walk_block(&b, 262_144, true);
        assert_eq!(w.metas.len(), 2);
        let first = &w.bytes[w.metas[0].offset..][..w.metas[0].caplen as usize];
        assert_eq!(&first[..12], &frame[..12]);
        assert_eq!(&first[12..16], &[0x88, 0xa8, 0x00, 0x64]);
        assert_eq!(&first[16..], &frame[12..]);
        assert_eq!(w.metas[0].wire_len, 164, "the tag counts on the wire");
        assert_eq!(w.metas[0].direction, Direction::Inbound);
        assert_eq!(w.metas[1].direction, Direction::Outbound);
        assert_eq!(w.metas[1].ts_ns, 1_700_000_001_000_000_005);
        assert_eq!((w.live.vlan_restored, w.live.hardware_timestamps), (1, 1));
        assert_eq!(w.stats.truncated_records, 2);

        let cut = walk_block(&b, 20, true);
        assert!(cut.metas.iter().all(|m| m.caplen == 20));
    }

    #[test]
    fn loopback_keeps_only_the_incoming_copy() {
        let frame = [7u8; 60];
        let b = block(&[
            (&frame, sys::TP_STATUS_USER, 0, 0, sys::PACKET_OUTGOING),
            (&frame, sys::TP_STATUS_USER, 0, 0, 0),
            (&frame, sys::TP_STATUS_USER, 0, 0, sys::PACKET_OUTGOING),
            (&frame, sys::TP_STATUS_USER, 0, 0, 0),
        ]);
        let mut c = Collector {
            metas: Vec::new(),
            stats: SourceStats::default(),
            live: LiveStats::default(),
            snaplen: 262_144,
            ethernet: true,
            skip_outgoing: true,
        };
        c.take_block(&mut b.clone());
        assert_eq!(c.metas.len(), 2);
        assert!(c.metas.iter().all(|m| m.direction == Direction::Inbound));
        assert_eq!((c.stats.records, c.live.loopback_outgoing), (2, 2));
        // Elsewhere both directions are kept.
        assert_eq!(walk_block(&b, 262_144, true).metas.len(), 4);
    }

    #[test]
    fn a_restored_tag_on_the_longest_wire_length_saturates() {
        // The fuzz target's first find (fuzz/regressions/tpacket_block/): the tag's 4 bytes
        // added to a wire length of 2^32-1 overflowed.
        let frame: Vec<u8> = (0..60u8).collect();
        let mut b = block(&[(
            &frame,
            sys::TP_STATUS_USER | sys::TP_STATUS_VLAN_VALID,
            0x0064,
            0,
            0,
        )]);
        b[48 + sys::pkt::LEN..][..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        let w = walk_block(&b, 64, true);
        assert_eq!(w.metas.len(), 1);
        assert_eq!(w.metas[0].wire_len, u32::MAX);
        assert_eq!(w.metas[0].caplen, 64);
        assert_eq!(w.live.vlan_restored, 1);
    }

    #[test]
    fn inconsistent_blocks_are_counted_not_trusted() {
        let frame = [0u8; 60];
        let mut b = block(&[(&frame, sys::TP_STATUS_USER, 0, 0, 0)]);
        // Claims three packets, holds one whose next offset is 0.
        b[sys::block::NUM_PKTS..][..4].copy_from_slice(&3u32.to_ne_bytes());
        let w = walk_block(&b, 262_144, true);
        assert_eq!((w.metas.len(), w.stats.errors), (1, 1));
        // A snaplen pointing past the block.
        b[48 + sys::pkt::SNAPLEN..][..4].copy_from_slice(&100_000u32.to_ne_bytes());
        let w = walk_block(&b, 262_144, true);
        assert_eq!((w.metas.len(), w.stats.errors), (0, 1));
    }
}

fn block_status(block: &[u8]) -> u32 {
    u32::from_ne_bytes(
        block[sys::block::STATUS..sys::block::STATUS + 4]
            .try_into()
            .expect("4 bytes"),
    )
}

/// What [`walk_block`] copied out of a block.
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct WalkedBlock {
    /// Records, pointing into `bytes`.
    pub metas: Vec<RecordMeta>,
    /// The block after the walk (VLAN tags restored in place).
    pub bytes: Vec<u8>,
    /// Counters (records, truncated, errors for inconsistent headers).
    pub stats: SourceStats,
    /// VLAN tags restored, hardware timestamps seen.
    pub live: LiveStats,
}

/// Walks one TPACKET_V3 block laid out as the kernel writes it, exactly as a live capture
/// does. For tests and the fuzz target: whatever the block holds, this must not panic and every
/// record must lie inside `bytes`.
#[doc(hidden)]
pub fn walk_block(block: &[u8], snaplen: u32, ethernet: bool) -> WalkedBlock {
    let mut c = Collector {
        metas: Vec::new(),
        stats: SourceStats::default(),
        live: LiveStats::default(),
        snaplen,
        ethernet,
        skip_outgoing: false,
    };
    let mut bytes = block.to_vec();
    c.take_block(&mut bytes);
    WalkedBlock {
        metas: c.metas,
        bytes,
        stats: c.stats,
        live: c.live,
    }
}

/// Pins the calling thread to one CPU.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    sys::pin_current_thread(cpu)
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    sys::allowed_cpus()
}

/// The whole process's CPU time so far, all threads (user, system), and its peak resident set
/// in KB (`getrusage`): what a stats line reports.
pub fn process_usage() -> (std::time::Duration, std::time::Duration, u64) {
    sys::process_usage()
}

/// Switches the whole process to `user` (its uid, primary gid, no supplementary groups), as
/// tcpdump's `-Z` does. Call it after every capture socket is open: open sockets keep working.
/// Returns the (uid, gid) switched to.
pub fn drop_privileges(user: &str) -> io::Result<(u32, u32)> {
    sys::drop_privileges(user)
}
