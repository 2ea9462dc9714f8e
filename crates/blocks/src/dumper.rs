//! `dumper`: packets into a packet store (`trawl_packets`: pcap segments with a time and host
//! index, retention), which `trawl packets` reads.
//!
//! The store must see every packet: connect its input with `policy = "wait"` (the default)
//! so a slow disk holds the sender back instead of losing packets silently (a live capture
//! then counts the loss where it belongs, as kernel drops).
use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, PathSetting, TimerId};
use trawl_packets::{Budget, Dumper, DumperConfig, DumperStats, Retention, RetentionConfig};

use crate::messages::{PacketBatch, PACKETS};
use crate::util::{opt_size, opt_span, parse_size};

/// Writes every packet it receives into a packet store: one writer (segment stream) per
/// upstream source instance, named after it as a capture worker, as `trawl run --dump` does.
pub struct DumperBlock {
    config: DumperConfig,
    retention: Option<Retention>,
    /// One dumper per upstream stream.
    dumpers: Vec<(u32, Dumper)>,
    /// Counters of dumpers already finished (none until the end).
    counters: Option<DumpCounters>,
}

struct DumpCounters {
    packets: Counter,
    bytes: Counter,
    segments: Counter,
    cut: Counter,
    truncated: Counter,
    repaired: Counter,
    repaired_bytes_cut: Counter,
    segments_deleted: Counter,
    bytes_deleted: Counter,
    clamped: Counter,
    direct_io: Counter,
    cut_bytes: Counter,
    cut_flows: Counter,
    cut_evictions: Counter,
    deleted_for_budget: Counter,
    deleted_for_age: Counter,
    deleted_for_space: Counter,
    stored_bytes: Counter,
    stored_segments: Counter,
    retention_errors: Counter,
}

/// Settings of `dumper` (those of `trawl run --dump` / `trawl dump`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DumperSettings {
    /// The store directory (created if needed).
    pub dir: PathBuf,
    /// Close a segment before it exceeds this size (default 1GiB, at least 64KiB).
    #[serde(default, deserialize_with = "opt_size")]
    pub segment_size: Option<u64>,
    /// Close a segment this long (packet time) after its first packet (default 60s);
    /// segments also end at every hour boundary.
    #[serde(default, deserialize_with = "opt_span")]
    pub segment_time: Option<u64>,
    /// Bytes per disk write (multiple of 4KiB, default 4MiB).
    #[serde(default, deserialize_with = "opt_size")]
    pub write_block: Option<u64>,
    /// Keep only the first this-many bytes of every flow (both directions). Default: all.
    #[serde(default, deserialize_with = "opt_size")]
    pub cutoff: Option<u64>,
    /// Index hashed addresses and ports per chunk (default true).
    #[serde(default = "yes")]
    pub host_index: bool,
    /// Write with O_DIRECT where the filesystem supports it (default true).
    #[serde(default = "yes")]
    pub direct_io: bool,
    /// Disk budget: a size (`500GiB`) or a share of the volume (`80%`); the oldest segments
    /// are deleted to stay within it.
    pub retention_size: Option<String>,
    /// Delete segments whose packets are older than this (packet time, e.g. `7d`).
    #[serde(default, deserialize_with = "opt_span")]
    pub retention_age: Option<u64>,
}

fn yes() -> bool {
    true
}

impl DumperSettings {
    fn config(&self) -> DumperConfig {
        let mut c = DumperConfig::new(&self.dir);
        if let Some(v) = self.segment_size {
            c.segment_bytes = v;
        }
        if let Some(v) = self.segment_time {
            c.segment_ns = v;
        }
        if let Some(v) = self.write_block {
            c.block_bytes = v as usize;
        }
        c.cutoff_bytes = self.cutoff;
        c.host_index = self.host_index;
        c.direct_io = self.direct_io;
        c
    }

    fn budget(&self) -> Result<Option<Budget>, String> {
        let Some(t) = self.retention_size.as_deref() else {
            return Ok(None);
        };
        Ok(Some(match t.trim().strip_suffix('%') {
            Some(p) => {
                let p: f64 = p
                    .trim()
                    .parse()
                    .map_err(|_| format!("retention_size: `{t}` is not a percentage"))?;
                if !(p > 0.0 && p <= 100.0) {
                    return Err(format!("retention_size: {p}% is not between 0 and 100"));
                }
                Budget::Percent(p)
            }
            None => Budget::Bytes(parse_size(t).map_err(|e| format!("retention_size: {e}"))?),
        }))
    }
}

impl Block for DumperBlock {
    const TYPE: &'static str = "dumper";
    const SUMMARY: &'static str =
        "stores every packet in a packet store (indexed pcap segments, retention) that `trawl packets` reads";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets to store, from any number of sources (use policy \"wait\": lossless)",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = DumperSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("dir")];

    fn check(s: &DumperSettings) -> Result<(), String> {
        let c = s.config();
        if c.block_bytes == 0 || !c.block_bytes.is_multiple_of(4096) {
            return Err(format!(
                "`write_block` {} is not a positive multiple of 4KiB",
                c.block_bytes
            ));
        }
        if c.segment_bytes < 64 << 10 {
            return Err("`segment_size` must be at least 64KiB".into());
        }
        if c.segment_ns == 0 {
            return Err("`segment_time` must be positive".into());
        }
        if let Some(Budget::Bytes(b)) = s.budget()? {
            if b <= c.segment_bytes {
                return Err(format!(
                    "retention_size {b} bytes leaves no room: it must exceed the segment being \
                     written (segment_size {} bytes per writer)",
                    c.segment_bytes
                ));
            }
        }
        Ok(())
    }

    fn build(s: DumperSettings, env: &BuildEnv) -> Result<Self, String> {
        let config = s.config();
        let budget = s.budget()?;
        let retention = if budget.is_some() || s.retention_age.is_some() {
            // Room for the segment each writer (one per upstream connection) keeps open.
            let writers = env.input_connections.iter().sum::<usize>().max(1) as u64;
            let reserve = config.segment_bytes.saturating_mul(writers);
            if let Some(Budget::Bytes(b)) = budget {
                if b <= reserve {
                    return Err(format!(
                        "retention_size {b} bytes leaves no room: it must exceed the segments \
                         being written ({writers} x segment_size {} bytes)",
                        config.segment_bytes
                    ));
                }
            }
            std::fs::create_dir_all(&config.dir)
                .map_err(|e| format!("cannot create {}: {e}", config.dir.display()))?;
            Some(
                Retention::start(RetentionConfig {
                    dir: config.dir.clone(),
                    budget,
                    max_age_ns: s.retention_age,
                    reserve_bytes: reserve,
                    interval: Duration::from_millis(500),
                })
                .map_err(|e| e.to_string())?,
            )
        } else {
            None
        };
        Ok(DumperBlock {
            config,
            retention,
            dumpers: Vec::new(),
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(DumpCounters {
            packets: ctx.counter("packets"),
            bytes: ctx.counter("bytes"),
            segments: ctx.counter("segments"),
            cut: ctx.counter("cutoff_packets"),
            truncated: ctx.counter("truncated"),
            repaired: ctx.counter("segments_repaired"),
            repaired_bytes_cut: ctx.counter("repaired_bytes_cut"),
            segments_deleted: ctx.counter("segments_deleted"),
            bytes_deleted: ctx.counter("bytes_deleted"),
            clamped: ctx.counter("timestamps_clamped"),
            direct_io: ctx.counter("direct_io"),
            cut_bytes: ctx.counter("cutoff_bytes"),
            cut_flows: ctx.counter("cutoff_flows"),
            cut_evictions: ctx.counter("cutoff_evictions"),
            deleted_for_budget: ctx.counter("deleted_for_budget"),
            deleted_for_age: ctx.counter("deleted_for_age"),
            deleted_for_space: ctx.counter("deleted_for_space"),
            stored_bytes: ctx.counter("stored_bytes"),
            stored_segments: ctx.counter("stored_segments"),
            retention_errors: ctx.counter("retention_errors"),
        });
        // Durability and idle segments (wall clock): the dumper acts once per flush period.
        ctx.every(Duration::from_millis(250));
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(packets) = msg.get::<PacketBatch>() else {
            return;
        };
        let at = match self.dumper(packets.stream) {
            Ok(at) => at,
            Err(e) => return ctx.fail(e),
        };
        let dumper = &mut self.dumpers[at].1;
        let batch = packets.batch();
        for pkt in batch.iter() {
            let Some(iface) = packets.interfaces.get(usize::from(pkt.iface)) else {
                ctx.error(format_args!(
                    "packet of interface {} in a batch with {} interfaces",
                    pkt.iface,
                    packets.interfaces.len()
                ));
                continue;
            };
            if let Err(e) = dumper.write(pkt.iface, iface, &pkt) {
                return ctx.fail(format_args!(
                    "packet store {}: {e}",
                    self.config.dir.display()
                ));
            }
        }
        // A stream's segments left open by a killed writer are repaired when its interface's
        // first packet comes: counted (`segments_repaired`, `repaired_bytes_cut`) and, one by
        // one, left in the run's warnings for the command's summary.
        for r in dumper.repairs.drain(..) {
            ctx.warn(repair_text(&r));
        }
        if packets.live {
            dumper.touch(trawl_time::now_ns());
        }
        self.update_counters();
    }

    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        let now = trawl_time::now_ns();
        for (_, d) in self.dumpers.iter_mut() {
            if let Err(e) = d.tick(now) {
                return ctx.fail(format_args!(
                    "packet store {}: {e}",
                    self.config.dir.display()
                ));
            }
        }
        self.update_counters();
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        let mut total = self.no_stats();
        for (_, d) in self.dumpers.drain(..) {
            match d.finish() {
                Ok(s) => total.merge(&s),
                Err(e) => ctx.fail(format_args!(
                    "packet store {}: {e}",
                    self.config.dir.display()
                )),
            }
        }
        if let Some(c) = &self.counters {
            set_counters(c, &total);
        }
        if let Some(r) = self.retention.take() {
            let st = r.stop();
            if let Some(c) = &self.counters {
                set_retention_counters(c, &st);
            }
        }
    }
}

impl DumperBlock {
    /// Index in `dumpers` of the writer of `stream`, made on its first packet.
    fn dumper(&mut self, stream: u32) -> Result<usize, String> {
        if let Some(at) = self.dumpers.iter().position(|(s, _)| *s == stream) {
            return Ok(at);
        }
        let config = DumperConfig {
            worker: u16::try_from(stream).map_err(|_| format!("stream {stream} out of range"))?,
            ..self.config.clone()
        };
        let d = Dumper::new(config, self.retention.as_ref().map(Retention::handle))
            .map_err(|e| format!("packet store {}: {e}", self.config.dir.display()))?;
        self.dumpers.push((stream, d));
        Ok(self.dumpers.len() - 1)
    }

    /// Counters before any packet: O_DIRECT as asked until a file refuses it.
    fn no_stats(&self) -> DumperStats {
        DumperStats {
            direct_io: self.config.direct_io,
            ..DumperStats::default()
        }
    }

    fn update_counters(&self) {
        let Some(c) = &self.counters else {
            return;
        };
        let mut total = self.no_stats();
        for (_, d) in &self.dumpers {
            total.merge(&d.stats());
        }
        set_counters(c, &total);
        if let Some(r) = &self.retention {
            set_retention_counters(c, &r.stats());
        }
    }
}

/// What repair did to a segment, in a sentence: the segment, what was kept and cut, and why
/// its readable part ended.
fn repair_text(r: &trawl_packets::RepairReport) -> String {
    let what = if r.removed {
        "removed (not even its file header was whole)".to_string()
    } else {
        format!(
            "repaired: {} packets kept, {} bytes cut",
            r.packets, r.cut_bytes
        )
    };
    let why = match r.stopped {
        Some((offset, reason)) => format!(" (at offset {offset}: {reason})"),
        None => String::new(),
    };
    format!(
        "segment {} left open by a stopped writer {what}{why}",
        r.path.display()
    )
}

fn set_retention_counters(c: &DumpCounters, r: &trawl_packets::RetentionStats) {
    c.segments_deleted
        .set(r.deleted_for_budget + r.deleted_for_age + r.deleted_for_space);
    c.bytes_deleted.set(r.bytes_deleted);
    c.deleted_for_budget.set(r.deleted_for_budget);
    c.deleted_for_age.set(r.deleted_for_age);
    c.deleted_for_space.set(r.deleted_for_space);
    c.stored_bytes.set(r.stored_bytes);
    c.stored_segments.set(r.stored_segments);
    c.retention_errors.set(r.errors);
}

fn set_counters(c: &DumpCounters, s: &DumperStats) {
    c.packets.set(s.packets);
    c.bytes.set(s.bytes);
    c.segments.set(s.segments);
    c.cut.set(s.cutoff.packets_cut);
    c.truncated.set(s.truncated);
    c.repaired.set(s.repaired);
    c.repaired_bytes_cut.set(s.repaired_bytes_cut);
    c.clamped.set(s.timestamps_clamped);
    c.direct_io.set(u64::from(s.direct_io));
    c.cut_bytes.set(s.cutoff.bytes_cut);
    c.cut_flows.set(s.cutoff.flows_cut);
    c.cut_evictions.set(s.cutoff.evictions);
}
