//! `flow_store`: flow records into trawl's flow database (`trawl_store::Ingest`: columnar
//! blocks per interface and 5-minute interval), which `trawl query` reads.
//!
//! The flow meter feeding it must cut records at the block boundaries (`interval = "5m"` on
//! `flow_meter`). A record that does not fit in one 5-minute block is stored whole in the
//! block of its first packet: time-range sums over the database are then off (a long flow's
//! bytes all count in its first interval), and a record that ends after its first block was
//! written adds a further part file to that block. The block counts such records
//! (`records_spanning`) and reports the first one as an error.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, PathSetting, TimerId};
use trawl_store::{Codec, IfaceId, Ingest, IngestStats, Retention, StoreConfig};

use crate::messages::{FlowBatch, FLOWS};
use crate::util::opt_size;

/// Writes flow records into a flow database under one interface name, or under the name
/// each batch carries (`FlowBatch::origin`, from `ipfix_source`).
pub struct FlowStore {
    ingest: Option<Ingest>,
    /// The `iface` setting's id; None: each batch's origin names its interface.
    iface: Option<IfaceId>,
    /// Interface ids of the origins seen (few: one per exporter and observation domain).
    origins: Vec<(Arc<str>, IfaceId)>,
    dir: PathBuf,
    retention: Retention,
    /// The latest clock of the meters feeding it.
    clock: u64,
    warned_spanning: bool,
    counters: Option<StoreCounters>,
    /// How often the rows of open blocks are published as recent parts.
    recent: Option<Duration>,
    /// The minute timer of retention (made when retention is first set) and the timer of
    /// recent parts.
    retention_timer: Option<TimerId>,
    recent_timer: Option<TimerId>,
}

struct StoreCounters {
    records: Counter,
    spanning: Counter,
    rows: Counter,
    blocks: Counter,
    extra_parts: Counter,
    bytes: Counter,
    recent_parts: Counter,
    blocks_deleted: Counter,
    bytes_deleted: Counter,
}

/// Settings of `flow_store`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowStoreSettings {
    /// The database directory (created if needed).
    pub dir: PathBuf,
    /// Interface name the records are stored under (`DIR/iface=NAME/...`): the captured
    /// interface, or a name for a capture file. Without it, each batch's origin names it
    /// (`ipfix_source`: one interface per exporter and observation domain, or per file).
    pub iface: Option<String>,
    /// Compression: `lz4` (default), `zstd`, `zstd:LEVEL` (1-22) or `none`.
    #[serde(default = "default_codec")]
    pub codec: String,
    /// How long after its interval a block stays open for records still to come (default
    /// 40s: the meter's idle timeout plus TCP linger, with margin).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub grace: Option<u64>,
    /// Delete blocks of days more than this many days before today (UTC), every minute and
    /// at the end.
    pub keep_days: Option<u32>,
    /// Delete the oldest blocks while the database takes more than this (e.g. `50GiB`).
    #[serde(default, deserialize_with = "opt_size")]
    pub max_size: Option<u64>,
    /// Publish the rows of blocks still open this often (e.g. `10s`), so that queries see
    /// flows before their 5-minute block is written (docs/specs/store.md, "Recent parts").
    /// Off by default; `trawl run` sets it for live capture.
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub recent: Option<u64>,
}

fn default_codec() -> String {
    "lz4".into()
}

impl FlowStoreSettings {
    fn config(&self) -> Result<StoreConfig, String> {
        let codec = Codec::parse(&self.codec).ok_or_else(|| {
            format!(
                "`codec` {:?} is not one of zstd, zstd:LEVEL (1-22), lz4, none",
                self.codec
            )
        })?;
        let d = StoreConfig::default();
        Ok(StoreConfig {
            codec,
            grace_ns: self.grace.unwrap_or(d.grace_ns),
            ..d
        })
    }
}

impl Block for FlowStore {
    const TYPE: &'static str = "flow_store";
    const SUMMARY: &'static str =
        "writes flow records into the flow database (columnar 5-minute blocks per interface) that `trawl query` reads";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "flows",
        ty: FLOWS,
        required: true,
        doc: "records cut at 5-minute boundaries (flow_meter `interval = \"5m\"`), from any number of meters",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = FlowStoreSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("dir")];

    fn check(s: &FlowStoreSettings) -> Result<(), String> {
        s.config()?;
        match &s.iface {
            Some(iface) => check_iface(iface),
            None => Ok(()),
        }
    }

    fn build(s: FlowStoreSettings, _env: &BuildEnv) -> Result<Self, String> {
        let config = s.config()?;
        let mut ingest = Ingest::open(&s.dir, config)
            .map_err(|e| format!("cannot open the flow database {}: {e}", s.dir.display()))?;
        let iface = match &s.iface {
            Some(name) => Some(ingest.iface(name).map_err(|e| e.to_string())?),
            None => None,
        };
        Ok(FlowStore {
            ingest: Some(ingest),
            iface,
            origins: Vec::new(),
            dir: s.dir,
            retention: Retention {
                max_age_days: s.keep_days,
                max_bytes: s.max_size,
            },
            clock: 0,
            warned_spanning: false,
            counters: None,
            recent: s.recent.filter(|&ns| ns > 0).map(Duration::from_nanos),
            retention_timer: None,
            recent_timer: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(StoreCounters {
            records: ctx.counter("records"),
            spanning: ctx.counter("records_spanning"),
            rows: ctx.counter("rows"),
            blocks: ctx.counter("blocks"),
            extra_parts: ctx.counter("extra_parts"),
            bytes: ctx.counter("bytes"),
            recent_parts: ctx.counter("recent_parts"),
            blocks_deleted: ctx.counter("retention_blocks_deleted"),
            bytes_deleted: ctx.counter("retention_bytes_deleted"),
        });
        self.start_retention(ctx);
        if let Some(every) = self.recent {
            self.recent_timer = Some(ctx.every(every));
        }
        Ok(())
    }

    // Retention only: the directory, interface and codec belong to the open database.
    const RELOADABLE: &'static [&'static str] = &["keep_days", "max_size"];

    fn reconfigure(&mut self, s: FlowStoreSettings, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.retention = Retention {
            max_age_days: s.keep_days,
            max_bytes: s.max_size,
        };
        self.start_retention(ctx);
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<FlowBatch>() else {
            return;
        };
        let iface = match self.iface_of(b) {
            Ok(Some(id)) => id,
            Ok(None) => return,
            Err(e) => return ctx.fail(format_args!("flow database {}: {e}", self.dir.display())),
        };
        let Some(ingest) = self.ingest.as_mut() else {
            return;
        };
        let spanning = ingest.stats().records_spanning;
        for r in &b.records {
            if let Err(e) = ingest.push(iface, r) {
                return ctx.fail(format_args!("flow database {}: {e}", self.dir.display()));
            }
        }
        // Collected records (stored by origin) are the exporters' own, not cut by a meter of
        // this composition: there is nothing to set, so no warning.
        if !self.warned_spanning
            && self.iface.is_some()
            && ingest.stats().records_spanning > spanning
        {
            self.warned_spanning = true;
            ctx.error(
                "records span 5-minute blocks (stored in the block of their first packet): \
                 set `interval = \"5m\"` on the flow_meter feeding this store",
            );
        }
        // Several meters: the newest clock closes blocks; a record of a meter that lags by
        // more than the grace time goes to a further part of its block (nothing is lost).
        self.clock = self.clock.max(b.clock_ns);
        if let Err(e) = ingest.advance(self.clock) {
            return ctx.fail(format_args!("flow database {}: {e}", self.dir.display()));
        }
        self.update_counters();
    }

    fn timer(&mut self, timer: TimerId, ctx: &mut Ctx<'_>) {
        if Some(timer) == self.retention_timer {
            self.enforce_retention(ctx);
        }
        if Some(timer) == self.recent_timer {
            if let Some(ingest) = self.ingest.as_mut() {
                if let Err(e) = ingest.publish_recent() {
                    // The blocks themselves are still written: a query sees the rows later.
                    ctx.error(format_args!(
                        "flow database {}: recent part: {e}",
                        self.dir.display()
                    ));
                }
            }
            self.update_counters();
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        let Some(ingest) = self.ingest.take() else {
            return;
        };
        match ingest.finish() {
            Ok(stats) => {
                if let Some(c) = &self.counters {
                    set_counters(c, &stats);
                }
            }
            Err(e) => ctx.fail(format_args!("flow database {}: {e}", self.dir.display())),
        }
        if self.retention != Retention::default() {
            self.enforce_retention(ctx);
        }
    }
}

impl FlowStore {
    /// The interface a batch is stored under: the setting's, or the batch's origin's
    /// (registered when first seen). None when the store is finished.
    fn iface_of(&mut self, b: &FlowBatch) -> Result<Option<IfaceId>, String> {
        if let Some(id) = self.iface {
            return Ok(Some(id));
        }
        let Some(origin) = b.origin.as_ref() else {
            return Err("records that name no interface: set `iface` on this flow_store".into());
        };
        if let Some((_, id)) = self.origins.iter().find(|(o, _)| o == origin) {
            return Ok(Some(*id));
        }
        let Some(ingest) = self.ingest.as_mut() else {
            return Ok(None);
        };
        check_iface(origin)?;
        let id = ingest.iface(origin).map_err(|e| e.to_string())?;
        self.origins.push((origin.clone(), id));
        Ok(Some(id))
    }

    fn update_counters(&self) {
        if let (Some(c), Some(i)) = (&self.counters, &self.ingest) {
            set_counters(c, i.stats());
        }
    }

    /// With retention set: enforced at once (a database over its limits is trimmed then),
    /// then every minute and at the end.
    fn start_retention(&mut self, ctx: &mut Ctx<'_>) {
        if self.retention == Retention::default() {
            return;
        }
        self.enforce_retention(ctx);
        // Once at the start (a database over its limits is trimmed at once), then every
        // minute and at the end; a reload that sets retention starts the timer once.
        if self.retention_timer.is_none() {
            self.retention_timer = Some(ctx.every(Duration::from_secs(60)));
        }
    }

    fn enforce_retention(&mut self, ctx: &mut Ctx<'_>) {
        match trawl_store::retention::enforce(&self.dir, &self.retention, trawl_time::now_ns()) {
            Ok(o) => {
                if let Some(c) = &self.counters {
                    c.blocks_deleted.add(o.blocks_deleted);
                    c.bytes_deleted.add(o.bytes_deleted);
                }
            }
            Err(e) => ctx.error(format_args!("flow database retention: {e}")),
        }
    }
}

fn check_iface(iface: &str) -> Result<(), String> {
    if trawl_store::layout::valid_iface(iface) {
        return Ok(());
    }
    Err(format!(
        "`iface` {iface:?} is not a valid interface name (letters, digits, `.`, `_`, `-`; not starting with `.`)"
    ))
}

fn set_counters(c: &StoreCounters, s: &IngestStats) {
    c.records.set(s.records);
    c.spanning.set(s.records_spanning);
    c.rows.set(s.rows);
    c.blocks.set(s.blocks);
    c.extra_parts.set(s.extra_parts);
    c.bytes.set(s.bytes);
    c.recent_parts.set(s.recent_parts);
}
