//! `afpacket_source`: live capture on one interface (a TPACKET_V3 socket of
//! `trawl_capture::live`), packet batches out. Several blocks on the same interface with the
//! same `fanout` group are parallel workers: the kernel spreads packets over their sockets.
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use trawl_bpf::FilterSet;
use trawl_capture::live::{self, Fanout, FanoutMode, LiveConfig, LiveSource};
use trawl_capture::{Interface, LinkType, PacketSource};
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Poll, Pool};
use trawl_ring::dedup::Dedup;

use crate::messages::{PacketBatch, PACKETS};

/// How long a poll waits for the kernel to hand over a block before returning empty-handed:
/// short enough that the block's thread serves its timers and other blocks (a meter's flush,
/// the stop request) within a tenth of a second, as the CLI's capture loop did; shorter made an
/// idle monitor wake a hundred times a second per worker.
const POLL_TIMEOUT: Duration = Duration::from_millis(100);

/// Captures packets on an interface through a memory-mapped AF_PACKET ring and sends them.
pub struct AfPacketSource {
    source: LiveSource,
    interfaces: Arc<[Interface]>,
    /// A filter the kernel cannot run on a live socket (VLAN/MPLS tags are metadata there),
    /// run in user space on the restored frames instead.
    user_filter: Option<FilterSet>,
    dedup: Option<Dedup>,
    /// The filter runs in the kernel (on the socket), not in user space.
    kernel_filter: bool,
    stream: u32,
    pool: Pool<PacketBatch>,
    counters: Option<LiveCounters>,
}

struct LiveCounters {
    packets: Counter,
    bytes: Counter,
    kernel_packets: Counter,
    kernel_drops: Counter,
    kernel_freezes: Counter,
    losing_blocks: Counter,
    loopback_outgoing: Counter,
    hardware_timestamps: Counter,
    filter_rejected: Counter,
    duplicates: Counter,
    vlan_restored: Counter,
    interface_down: Counter,
    reopened: Counter,
    /// Ring blocks whose batch shared them (no copy) and blocks whose packets were copied
    /// because too much of the ring was held by batches in flight.
    blocks_lent: Counter,
    blocks_copied: Counter,
    /// What the socket handed over (before the user-space filter, dedup and the count):
    /// [`trawl_capture::SourceStats`].
    records: Counter,
    captured_bytes: Counter,
    wire_bytes: Counter,
    truncated_records: Counter,
}

/// The counters of an `afpacket_source` that say how it captures, not what: 1 when its
/// timestamps come from the NIC (`hardware_clock`), when its filter runs in the kernel
/// (`kernel_filter`). Commands' summaries read them back.
pub const HOW_COUNTERS: [&str; 2] = ["hardware_clock", "kernel_filter"];

/// Settings of `afpacket_source`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfPacketSettings {
    /// Interface to capture on (`eth0`).
    pub interface: String,
    /// BPF expression (tcpdump syntax), run by the kernel (by trawl for `vlan`/`mpls`).
    pub filter: Option<String>,
    /// Bytes kept per packet, 64 to 262144 (default 262144).
    #[serde(default = "default_snaplen")]
    pub snaplen: u64,
    /// Capture ring block size: a power of two from 4KiB to 1GiB (default 1MiB).
    #[serde(default = "default_block_size", deserialize_with = "crate::util::size")]
    pub block_size: u64,
    /// Capture ring blocks, 2 to 65536 (ring = block_size x blocks, at most 2GiB; default 64).
    #[serde(default = "default_blocks")]
    pub blocks: usize,
    /// Put the interface in promiscuous mode (default true).
    #[serde(default = "yes")]
    pub promiscuous: bool,
    /// Join this PACKET_FANOUT group (1-65535): every `afpacket_source` of the interface with
    /// the same group is one worker of a parallel capture. Default: no group.
    pub fanout: Option<u16>,
    /// How the group spreads packets: `symmetric` (XOR of the IP addresses: both directions
    /// and all fragments on one worker; default) or `kernel` (the kernel's flow hash).
    #[serde(default)]
    pub fanout_mode: FanoutSetting,
    /// `hardware` (NIC timestamps where the NIC has them; default) or `software`.
    #[serde(default)]
    pub timestamps: TimestampSetting,
    /// Drop switching duplicates: a packet identical to one seen within this span (e.g.
    /// `1ms`). Default off.
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub dedup: Option<u64>,
}

/// Fanout steering.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum FanoutSetting {
    /// XOR of the addresses (trawl's steering program).
    #[default]
    Symmetric,
    /// PACKET_FANOUT_HASH.
    Kernel,
}

/// Timestamp source.
#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum TimestampSetting {
    /// NIC timestamps, else the kernel's.
    #[default]
    Hardware,
    /// The kernel's only.
    Software,
}

fn default_snaplen() -> u64 {
    u64::from(trawl_capture::MAX_SNAPLEN)
}

fn default_block_size() -> u64 {
    1 << 20
}

fn default_blocks() -> usize {
    64
}

fn yes() -> bool {
    true
}

impl AfPacketSettings {
    /// The socket settings, with the filter compiled for `link` (kernel filters only).
    /// The snaplen as the capture takes it (`check` refused larger ones).
    fn snaplen_u32(&self) -> u32 {
        u32::try_from(self.snaplen).unwrap_or(u32::MAX)
    }

    fn config(&self, link: LinkType) -> Result<LiveConfig, String> {
        let mut c = LiveConfig::new(self.interface.clone());
        c.snaplen = self.snaplen_u32();
        c.block_size = self.block_size as usize;
        c.block_count = self.blocks;
        c.poll_timeout = POLL_TIMEOUT;
        c.promiscuous = self.promiscuous;
        c.timestamps = match self.timestamps {
            TimestampSetting::Hardware => live::TimestampMode::PreferHardware,
            TimestampSetting::Software => live::TimestampMode::Software,
        };
        c.fanout = self.fanout.map(|group| Fanout {
            group,
            mode: match self.fanout_mode {
                FanoutSetting::Symmetric => FanoutMode::Symmetric,
                FanoutSetting::Kernel => FanoutMode::KernelHash,
            },
        });
        if let Some(expr) = self
            .filter
            .as_deref()
            .filter(|e| !trawl_bpf::needs_user_space_on_live_socket(e))
        {
            let f = trawl_bpf::Filter::compile(expr, link, self.snaplen_u32())
                .map_err(|e| format!("filter: {e}"))?;
            c.filter = Some(f.socket_program());
        }
        Ok(c)
    }

    fn user_filter(&self, link: LinkType) -> Result<Option<FilterSet>, String> {
        match self
            .filter
            .as_deref()
            .filter(|e| trawl_bpf::needs_user_space_on_live_socket(e))
        {
            None => Ok(None),
            Some(expr) => {
                let mut set = FilterSet::new(expr, self.snaplen_u32());
                set.prepare(link).map_err(|e| format!("filter: {e}"))?;
                Ok(Some(set))
            }
        }
    }
}

impl Block for AfPacketSource {
    const TYPE: &'static str = "afpacket_source";
    const SUMMARY: &'static str =
        "captures packets live on an interface (AF_PACKET TPACKET_V3; fanout groups for parallel workers)";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "the packets, as the kernel hands them over (`live` set)",
    }];
    type Settings = AfPacketSettings;

    fn check(s: &AfPacketSettings) -> Result<(), String> {
        if s.interface.is_empty() {
            return Err("`interface` is empty".into());
        }
        // The capture's own limits: the same rule as `--snaplen`, `--block-size`, `--blocks`.
        live::limits::SNAPLEN
            .check(s.snaplen)
            .map_err(|e| e.to_string())?;
        live::limits::BLOCK_SIZE
            .check(s.block_size)
            .map_err(|e| e.to_string())?;
        if s.fanout == Some(0) {
            return Err("`fanout` groups are numbered from 1".into());
        }
        // The interface need not exist where the composition is checked: compile for Ethernet.
        s.config(LinkType::ETHERNET)?
            .check()
            .map_err(|e| e.to_string())?;
        s.user_filter(LinkType::ETHERNET)?;
        Ok(())
    }

    fn build(s: AfPacketSettings, env: &BuildEnv) -> Result<Self, String> {
        let link = live::link_type_of(&s.interface).map_err(|e| e.to_string())?;
        let source = LiveSource::open(s.config(link)?).map_err(|e| e.to_string())?;
        Ok(AfPacketSource {
            interfaces: Arc::from(source.interfaces().to_vec()),
            user_filter: s.user_filter(link)?,
            dedup: s.dedup.map(|window| Dedup::new(window, 16)),
            kernel_filter: s
                .filter
                .as_deref()
                .is_some_and(|e| !trawl_bpf::needs_user_space_on_live_socket(e)),
            source,
            stream: env.index as u32,
            pool: Pool::new(PacketBatch::default),
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(LiveCounters {
            packets: ctx.counter("packets"),
            bytes: ctx.counter("bytes"),
            kernel_packets: ctx.counter("kernel_packets"),
            kernel_drops: ctx.counter("kernel_drops"),
            kernel_freezes: ctx.counter("kernel_freezes"),
            losing_blocks: ctx.counter("losing_blocks"),
            loopback_outgoing: ctx.counter("loopback_outgoing"),
            hardware_timestamps: ctx.counter("hardware_timestamps"),
            filter_rejected: ctx.counter("filter_rejected"),
            duplicates: ctx.counter("duplicates"),
            vlan_restored: ctx.counter("vlan_restored"),
            interface_down: ctx.counter("interface_down"),
            reopened: ctx.counter("reopened"),
            blocks_lent: ctx.counter("blocks_lent"),
            blocks_copied: ctx.counter("blocks_copied"),
            records: ctx.counter("records"),
            captured_bytes: ctx.counter("captured_bytes"),
            wire_bytes: ctx.counter("wire_bytes"),
            truncated_records: ctx.counter("truncated_records"),
        });
        let hardware = self.source.timestamp_source() == live::TimestampSource::Hardware;
        ctx.counter(HOW_COUNTERS[0]).set(u64::from(hardware));
        ctx.counter(HOW_COUNTERS[1])
            .set(u64::from(self.kernel_filter));
        Ok(())
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        if ctx.stopping() {
            // Exact kernel counters for the report.
            self.source.refresh_kernel_stats();
            self.update_live_counters();
            return Poll::Done;
        }
        // Spent batches still hold leases of ring blocks: end them, so that the source gives
        // those blocks back to the kernel now. With receivers on this thread (direct calls)
        // that is every batch sent so far.
        self.pool.for_each_unheld(|b| b.shared = None);
        let (batch, lease) = match self.source.next_lent_batch() {
            Ok(read) => read,
            Err(e) => {
                ctx.error(e);
                return Poll::Idle;
            }
        };
        if batch.is_empty() {
            self.update_live_counters();
            return Poll::Idle;
        }
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.interfaces.clone_from(&self.interfaces);
        out.big_endian = cfg!(target_endian = "big");
        out.live = true;
        out.stream = self.stream;
        let (mut rejected, mut duplicates) = (0u64, 0u64);
        let (filter, dedup) = (&mut self.user_filter, &mut self.dedup);
        let selective = filter.is_some() || dedup.is_some();
        let mut keep = |p: &trawl_capture::PacketRecord<'_>| {
            if let Some(f) = filter.as_mut() {
                if !f.matches(p.link_type, p.data, p.wire_len).unwrap_or(false) {
                    rejected += 1;
                    return false;
                }
            }
            if let Some(d) = dedup.as_mut() {
                if d.is_duplicate(p.ts_ns, p.wire_len, p.data) {
                    duplicates += 1;
                    return false;
                }
            }
            true
        };
        match lease {
            // The batch shares the ring block (no copy); the kernel gets it back once every
            // receiver is done with the batch.
            Some(lease) => {
                out.fill_shared(&batch, lease);
                if selective {
                    out.retain(&mut keep);
                }
            }
            // Too much of the ring is held by batches still in flight (receivers on other
            // threads behind): one copy of the block's records; the block goes back to the
            // kernel after the lent ones before it.
            None => out.fill(&batch, &mut keep),
        }
        // `[runtime] count`: the packets of the run's budget, exact across workers.
        let kept = out.metas.len() as u64;
        if kept > 0 {
            let granted = ctx.take(kept);
            if granted < kept {
                out.metas.truncate(granted as usize);
            }
        }
        let c = self.counters.as_ref().expect("started");
        c.filter_rejected.add(rejected);
        c.duplicates.add(duplicates);
        c.packets.add(out.metas.len() as u64);
        c.bytes
            .add(out.metas.iter().map(|m| u64::from(m.wire_len)).sum());
        if !out.metas.is_empty() {
            ctx.emit(0, slot.into_msg());
        }
        self.update_live_counters();
        Poll::Busy
    }
}

impl AfPacketSource {
    fn update_live_counters(&self) {
        let Some(c) = &self.counters else {
            return;
        };
        let s = self.source.live_stats();
        c.kernel_packets.set(s.kernel_packets);
        c.kernel_drops.set(s.kernel_drops);
        c.kernel_freezes.set(s.kernel_freezes);
        c.losing_blocks.set(s.losing_blocks);
        c.loopback_outgoing.set(s.loopback_outgoing);
        c.hardware_timestamps.set(s.hardware_timestamps);
        c.vlan_restored.set(s.vlan_restored);
        c.interface_down.set(s.interface_down);
        c.reopened.set(s.reopened);
        c.blocks_lent.set(s.blocks_lent);
        c.blocks_copied.set(s.blocks_copied);
        let t = self.source.stats();
        c.records.set(t.records);
        c.captured_bytes.set(t.captured_bytes);
        c.wire_bytes.set(t.wire_bytes);
        c.truncated_records.set(t.truncated_records);
    }
}
