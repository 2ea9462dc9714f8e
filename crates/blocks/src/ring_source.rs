//! `ring_source`: a listener of another process's shared capture ring (`trawl_ring`, what a
//! `ring` block or `trawl run --ring` publishes), packet batches out. `trawl listen` runs it.
//!
//! The ring's interface table is the batches' (taken from the ring as the producer fills it,
//! never rebuilt by hand); records are copied out of the ring a contiguous run at a time and
//! the run is given back at once, so a lossy listener holds the producer up only for the copy.
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use trawl_capture::{Interface, RecordMeta};
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Poll, Pool};
use trawl_ring::{Listener, Mode, Recv, SharedRing};

use crate::messages::{PacketBatch, PACKETS};

/// How long a poll waits for the producer to publish before returning empty-handed: as long as
/// `afpacket_source` waits for the kernel, so the block's thread serves its timers and the
/// stop request within a tenth of a second without waking a hundred times a second when idle.
const WAIT: Duration = Duration::from_millis(100);

/// Records per batch at most: batches of the size a capture worker sends.
const MAX_BATCH: usize = 1024;

/// Reads a shared ring as one of its listeners and sends the packets.
pub struct RingSource {
    listener: Listener,
    /// The ring as the settings name it (for messages).
    ring: String,
    interfaces: Arc<[Interface]>,
    stream: u32,
    pool: Pool<PacketBatch>,
    counters: Option<RingSourceCounters>,
}

struct RingSourceCounters {
    packets: Counter,
    bytes: Counter,
    records_read: Counter,
    bytes_read: Counter,
    records_missed: Counter,
    bytes_missed: Counter,
    unknown_interface: Counter,
    ring_closed: Counter,
}

/// How the listener reads: the ring's [`Mode`], as compositions spell it.
#[derive(Deserialize, Default, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ListenMode {
    /// Skipped ahead when it falls a ring behind; what it misses is counted (the default:
    /// a listener never slows the capture down).
    #[default]
    Lossy,
    /// Holds the producer back instead of missing packets: a slow lossless listener makes
    /// the capture drop in the kernel.
    Lossless,
}

/// Settings of `ring_source`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RingSourceSettings {
    /// The ring's name as its producer published it (`trawl-eth0-0`: the file
    /// `/dev/shm/trawl-ring-NAME`), or a path to the ring file (anything with a `/`).
    pub ring: String,
    /// `lossy` (default) or `lossless`.
    #[serde(default)]
    pub mode: ListenMode,
}

impl RingSourceSettings {
    fn path(&self) -> Option<&std::path::Path> {
        self.ring
            .contains('/')
            .then(|| std::path::Path::new(&self.ring))
    }

    fn attach(&self) -> Result<Listener, String> {
        let mode = match self.mode {
            ListenMode::Lossy => Mode::Lossy,
            ListenMode::Lossless => Mode::Lossless,
        };
        match self.path() {
            Some(path) => SharedRing::open_at(path)
                .and_then(|r| r.listen(mode))
                .map_err(|e| format!("cannot attach to ring file {}: {e}", self.ring)),
            None => SharedRing::attach(&self.ring, mode).map_err(|e| {
                format!(
                    "cannot attach to ring '{}' (is `trawl run` running with that ring?): {e}",
                    self.ring
                )
            }),
        }
    }
}

impl Block for RingSource {
    const TYPE: &'static str = "ring_source";
    const SUMMARY: &'static str =
        "reads another process's shared capture ring as a listener (lossy or lossless), packets out";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "the ring's packets with its interface table (`live` set)",
    }];
    type Settings = RingSourceSettings;

    fn check(s: &RingSourceSettings) -> Result<(), String> {
        // The ring need not exist where the composition is checked; its name must be valid.
        if s.path().is_none() {
            SharedRing::path(&s.ring).map_err(|e| format!("ring: {e}"))?;
        }
        Ok(())
    }

    fn build(s: RingSourceSettings, env: &BuildEnv) -> Result<Self, String> {
        let listener = s.attach()?;
        Ok(RingSource {
            interfaces: Arc::from(listener.interfaces()),
            listener,
            ring: s.ring,
            stream: env.index as u32,
            pool: Pool::new(PacketBatch::default),
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(RingSourceCounters {
            packets: ctx.counter("packets"),
            bytes: ctx.counter("bytes"),
            records_read: ctx.counter("records_read"),
            bytes_read: ctx.counter("bytes_read"),
            records_missed: ctx.counter("records_missed"),
            bytes_missed: ctx.counter("bytes_missed"),
            unknown_interface: ctx.counter("unknown_interface"),
            ring_closed: ctx.counter("ring_closed"),
        });
        Ok(())
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        if ctx.stopping() {
            self.listener.release();
            self.update_counters();
            return Poll::Done;
        }
        let outcome = self.read(ctx);
        self.update_counters();
        match outcome {
            Ok(Recv::Ready(())) => Poll::Busy,
            Ok(Recv::Empty) => match self.listener.wait_ready(WAIT) {
                Ok(true) => Poll::Busy,
                Ok(false) => Poll::Idle,
                Err(e) => self.failed(e, ctx),
            },
            Ok(Recv::Closed) => {
                // The producer finished and everything it published was read.
                if let Some(c) = &self.counters {
                    c.ring_closed.set(1);
                }
                Poll::Done
            }
            Err(e) => self.failed(e, ctx),
        }
    }
}

impl RingSource {
    /// Copies the next contiguous run of records (at most [`MAX_BATCH`], and no more than the
    /// run's packet budget grants) into a batch, gives the run back to the ring and sends the
    /// batch. Records past the budget stay unread in the ring.
    fn read(&mut self, ctx: &mut Ctx<'_>) -> Result<Recv<()>, trawl_ring::Error> {
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.metas.clear();
        out.bytes.clear();
        out.shared = None;
        let mut consumed = 0usize;
        {
            let block = match self.listener.block()? {
                Recv::Ready(b) => b,
                Recv::Empty => return Ok(Recv::Empty),
                Recv::Closed => return Ok(Recv::Closed),
            };
            let want = block.record_count().min(MAX_BATCH as u64);
            // `[runtime] count`: exact, however many sources share the budget.
            let granted = ctx.take(want);
            for (rec, end) in block.records().take(granted as usize) {
                consumed = end;
                out.metas.push(RecordMeta {
                    ts_ns: rec.ts_ns,
                    offset: out.bytes.len(),
                    caplen: rec.data.len() as u32,
                    wire_len: rec.wire_len,
                    iface: rec.iface,
                    direction: rec.direction,
                });
                out.bytes.extend_from_slice(rec.data);
            }
        }
        if consumed > 0 {
            self.listener.consume(consumed);
        } else {
            // The budget is spent: the composition is stopping.
            self.listener.release();
        }
        // Every interface these records name is in the table by now: the producer adds an
        // entry before the first record naming it.
        if self.listener.interface_count() != self.interfaces.len() {
            self.interfaces = Arc::from(self.listener.interfaces());
        }
        let known = self.interfaces.len();
        let read = out.metas.len();
        out.metas.retain(|m| usize::from(m.iface) < known);
        let unknown = (read - out.metas.len()) as u64;
        let c = self.counters.as_ref().expect("started");
        c.unknown_interface.add(unknown);
        c.packets.add(out.metas.len() as u64);
        c.bytes
            .add(out.metas.iter().map(|m| u64::from(m.wire_len)).sum());
        if !out.metas.is_empty() {
            out.interfaces.clone_from(&self.interfaces);
            out.big_endian = cfg!(target_endian = "big");
            out.live = true;
            out.stream = self.stream;
            ctx.emit(0, slot.into_msg());
        }
        Ok(Recv::Ready(()))
    }

    /// A ring that cannot be read any more (the producer died, the slot was reclaimed, the
    /// data area is corrupt) ends the run with an error naming the ring.
    fn failed(&mut self, e: trawl_ring::Error, ctx: &mut Ctx<'_>) -> Poll {
        ctx.fail(format_args!("ring {}: {e}", self.ring));
        Poll::Done
    }

    fn update_counters(&self) {
        let Some(c) = &self.counters else {
            return;
        };
        let st = self.listener.stats();
        c.records_read.set(st.records_read);
        c.bytes_read.set(st.bytes_read);
        c.records_missed.set(st.records_missed);
        c.bytes_missed.set(st.bytes_missed);
    }
}
