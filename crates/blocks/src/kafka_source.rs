//! `kafka_source`: trawl's flow records from a Kafka topic (JSON or Protobuf messages of a
//! `kafka://` export) into a flow database, committing each partition's offset only once
//! every record before it is in a block on disk.
//!
//! The block owns the database writer rather than feeding a `flow_store`: only the writer
//! knows when a block is durable (written, fsynced, published), and an offset may be
//! committed only then. Records are held per block (interval and interface) in an
//! [`OffsetTracker`]; after blocks are written, the committable positions are committed.
//! A crash (or `kill -9`) therefore loses nothing: what was in memory is read again on the
//! restart, and what was written after the last commit is stored twice (at least once).
//!
//! The database's clock is the latest `last_ns` of the records consumed (records arrive
//! roughly in the order their exporters ended them); a block is written once that clock
//! passes its interval's end plus the grace time, or when the topic has been quiet for
//! `idle` (so a topic at rest gets its last records stored and committed: later records of
//! those intervals go to further parts of their blocks).
//!
//! The records also leave on `flows`, named by their database interface (`origin`), for
//! writers.
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Deserialize;
use trawl_central::consumer::{KafkaConsumer, KafkaSource, Polled};
use trawl_central::message::{Parsed, TopicFormat};
use trawl_central::OffsetTracker;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, PathSetting, Poll, Pool};
use trawl_store::layout::block_start;
use trawl_store::{Codec, IfaceId, Ingest, Retention, StoreConfig};

use crate::messages::{FlowBatch, FLOWS};

/// Records per batch sent on `flows`, and most messages read per poll.
const BATCH: usize = 1024;

/// Settings of `kafka_source`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KafkaSourceSettings {
    /// `BROKER[,BROKER...]/TOPIC[?format=trawl|goflow2]`.
    pub kafka: String,
    /// Consumer group (offsets are committed under it). Default `trawl-collect`.
    #[serde(default = "default_group")]
    pub group: String,
    /// The flow database directory (created if needed).
    pub dir: PathBuf,
    /// Interface name of records that name neither an interface nor a probe (default: the
    /// topic's name).
    pub iface: Option<String>,
    /// Compression: `lz4` (default), `zstd`, `zstd:LEVEL` or `none`.
    #[serde(default = "default_codec")]
    pub codec: String,
    /// How long after its interval a block stays open (default 40s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub grace: Option<u64>,
    /// A topic quiet this long gets its open blocks written (default 5s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub idle: Option<u64>,
    /// Commit at most this often (default 1s; always at the end).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub commit_interval: Option<u64>,
    /// Stop once every assigned partition is read to its end (loading a backlog).
    #[serde(default)]
    pub stop_at_end: bool,
    /// Retention: delete days older than this many days.
    pub keep_days: Option<u32>,
    /// Retention: delete the oldest blocks beyond this size.
    #[serde(default, deserialize_with = "crate::util::opt_size")]
    pub max_size: Option<u64>,
}

fn default_group() -> String {
    "trawl-collect".into()
}

fn default_codec() -> String {
    "lz4".into()
}

struct Counters {
    records: Counter,
    bad_messages: Counter,
    commits: Counter,
    blocks: Counter,
    rows: Counter,
    extra_parts: Counter,
    bytes: Counter,
}

/// The block.
pub struct KafkaSourceBlock {
    consumer: KafkaConsumer,
    /// trawl's records or GoFlow2's messages.
    format: TopicFormat,
    ingest: Option<Ingest>,
    dir: PathBuf,
    default_iface: String,
    ifaces: Vec<(String, IfaceId)>,
    tracker: OffsetTracker<(u64, IfaceId)>,
    clock: u64,
    idle: Duration,
    commit_every: Duration,
    last_message: Instant,
    last_commit: Instant,
    stop_at_end: bool,
    retention: Retention,
    pool: Pool<FlowBatch>,
    pending: Vec<(Arc<str>, FlowBatch)>,
    /// The message being stored.
    value: Vec<u8>,
    stream: u32,
    counters: Option<Counters>,
}

impl Block for KafkaSourceBlock {
    const TYPE: &'static str = "kafka_source";
    const SUMMARY: &'static str = "consumes trawl's flow records from a Kafka topic into a flow database, committing offsets once their blocks are on disk";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "flows",
        ty: FLOWS,
        required: false,
        doc: "the records consumed, named by their database interface",
    }];
    type Settings = KafkaSourceSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("dir")];

    fn check(s: &KafkaSourceSettings) -> Result<(), String> {
        KafkaSource::parse(&s.kafka).map_err(|e| e.to_string())?;
        Codec::parse(&s.codec).ok_or_else(|| {
            format!(
                "`codec` {:?} is not one of zstd, zstd:LEVEL, lz4, none",
                s.codec
            )
        })?;
        if let Some(i) = &s.iface {
            if !trawl_store::layout::valid_iface(i) {
                return Err(format!("`iface` {i:?} is not a valid interface name"));
            }
        }
        Ok(())
    }

    fn build(s: KafkaSourceSettings, env: &BuildEnv) -> Result<Self, String> {
        Self::check(&s)?;
        let source = KafkaSource::parse(&s.kafka).map_err(|e| e.to_string())?;
        let codec = Codec::parse(&s.codec).unwrap_or(Codec::Lz4);
        let d = StoreConfig::default();
        let config = StoreConfig {
            codec,
            grace_ns: s.grace.unwrap_or(d.grace_ns),
            ..d
        };
        let ingest = Ingest::open(&s.dir, config)
            .map_err(|e| format!("cannot open the flow database {}: {e}", s.dir.display()))?;
        let consumer = KafkaConsumer::open(&source, &s.group).map_err(|e| e.to_string())?;
        Ok(KafkaSourceBlock {
            consumer,
            ingest: Some(ingest),
            dir: s.dir,
            format: source.format,
            default_iface: s.iface.unwrap_or(source.topic),
            ifaces: Vec::new(),
            tracker: OffsetTracker::default(),
            clock: 0,
            idle: Duration::from_nanos(s.idle.unwrap_or(5_000_000_000)),
            commit_every: Duration::from_nanos(s.commit_interval.unwrap_or(1_000_000_000)),
            last_message: Instant::now(),
            last_commit: Instant::now(),
            stop_at_end: s.stop_at_end,
            retention: Retention {
                max_age_days: s.keep_days,
                max_bytes: s.max_size,
            },
            pool: Pool::new(FlowBatch::default),
            pending: Vec::new(),
            value: Vec::new(),
            stream: env.index as u32,
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(Counters {
            records: ctx.counter("records"),
            bad_messages: ctx.counter("bad_messages"),
            commits: ctx.counter("commits"),
            blocks: ctx.counter("blocks"),
            rows: ctx.counter("rows"),
            extra_parts: ctx.counter("extra_parts"),
            bytes: ctx.counter("bytes"),
        });
        Ok(())
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        if ctx.stopping() {
            return Poll::Done;
        }
        let mut got = 0usize;
        let mut ended = false;
        while got < BATCH {
            // Wait a little only when nothing came yet this round.
            let wait = if got == 0 {
                Duration::from_millis(100)
            } else {
                Duration::ZERO
            };
            // The value is copied out (into a reused buffer) because storing it needs the
            // whole block while the message borrows the consumer.
            let mut value = std::mem::take(&mut self.value);
            let mut at = (0, 0);
            let polled = self.consumer.poll(wait, &mut |m| {
                value.clear();
                value.extend_from_slice(m.value);
                at = (m.partition, m.offset);
            });
            if let Ok(Polled::Message) = polled {
                let format = self.format;
                // One record, or the many of a batched message.
                format.parse_each(&value, &mut |p| self.record(ctx, at.0, at.1, p));
            }
            self.value = value;
            match polled {
                Ok(Polled::Message) => got += 1,
                Ok(Polled::End) => {
                    ended = true;
                    break;
                }
                Ok(Polled::Nothing) => break,
                Err(e) => {
                    // Broker trouble is transient to librdkafka: say it once per kind, go on.
                    ctx.error(e);
                    break;
                }
            }
        }
        if got > 0 {
            self.last_message = Instant::now();
        }
        self.send(ctx);
        let quiet = self.last_message.elapsed() >= self.idle;
        let at_end = (ended || got == 0) && self.consumer.all_at_end();
        if let Err(e) = self.make_durable(quiet || (at_end && self.stop_at_end)) {
            ctx.fail(format_args!("flow database {}: {e}", self.dir.display()));
            return Poll::Done;
        }
        if self.last_commit.elapsed() >= self.commit_every {
            self.commit(ctx);
        }
        if self.stop_at_end && at_end && self.tracker.bins() == 0 {
            return Poll::Done;
        }
        if got == 0 {
            Poll::Idle
        } else {
            Poll::Busy
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.send(ctx);
        if let Some(ingest) = self.ingest.as_mut() {
            if let Err(e) = ingest.flush() {
                ctx.fail(format_args!("flow database {}: {e}", self.dir.display()));
                return;
            }
        }
        self.tracker.release_all();
        self.update_counters();
        self.commit(ctx);
        if self.retention != Retention::default() {
            if let Err(e) =
                trawl_store::retention::enforce(&self.dir, &self.retention, trawl_time::now_ns())
            {
                ctx.error(format_args!("retention in {}: {e}", self.dir.display()));
            }
        }
        self.ingest = None;
    }
}

impl KafkaSourceBlock {
    /// One record of a message: stored, held until its block is durable (the message's
    /// offset is committed once every record of it is).
    fn record(
        &mut self,
        ctx: &mut Ctx<'_>,
        partition: i32,
        offset: i64,
        parsed: Result<Parsed, trawl_central::Error>,
    ) {
        let parsed = match parsed {
            Ok(p) => p,
            Err(e) => {
                self.tracker.seen(partition, offset);
                if let Some(c) = &self.counters {
                    c.bad_messages.add(1);
                }
                ctx.note_error(format_args!("partition {partition} offset {offset}: {e}"));
                return;
            }
        };
        let name = parsed.store_iface(&self.default_iface).to_string();
        let id = match self.iface_id(&name) {
            Ok(id) => id,
            Err(e) => {
                self.tracker.seen(partition, offset);
                if let Some(c) = &self.counters {
                    c.bad_messages.add(1);
                }
                ctx.note_error(format_args!("partition {partition} offset {offset}: {e}"));
                return;
            }
        };
        let Some(ingest) = self.ingest.as_mut() else {
            return;
        };
        let r = &parsed.record;
        if let Err(e) = ingest.push(id, r) {
            ctx.fail(format_args!("flow database {}: {e}", self.dir.display()));
            return;
        }
        self.tracker
            .hold(&(block_start(r.first_ns), id), partition, offset);
        self.clock = self.clock.max(r.last_ns);
        if let Some(c) = &self.counters {
            c.records.add(1);
        }
        if ctx.is_connected(0) {
            let at = match self.pending.iter().position(|(n, _)| **n == *name) {
                Some(i) => i,
                None => {
                    self.pending
                        .push((name.as_str().into(), FlowBatch::default()));
                    self.pending.len() - 1
                }
            };
            self.pending[at].1.push(r, false);
        }
    }

    fn iface_id(&mut self, name: &str) -> Result<IfaceId, String> {
        if let Some((_, id)) = self.ifaces.iter().find(|(n, _)| n == name) {
            return Ok(*id);
        }
        if !trawl_store::layout::valid_iface(name) {
            return Err(format!(
                "interface {name:?} is not a valid database interface name"
            ));
        }
        let ingest = self.ingest.as_mut().ok_or("the database is closed")?;
        let id = ingest.iface(name).map_err(|e| e.to_string())?;
        self.ifaces.push((name.to_string(), id));
        Ok(id)
    }

    /// Writes the blocks the clock has passed (all of them when `all`), and releases their
    /// records' offsets.
    fn make_durable(&mut self, all: bool) -> Result<(), trawl_store::Error> {
        let Some(ingest) = self.ingest.as_mut() else {
            return Ok(());
        };
        if all {
            ingest.flush()?;
        } else {
            ingest.advance(self.clock)?;
        }
        let open: Vec<(u64, IfaceId)> = ingest.open_blocks().collect();
        self.tracker.release_unless(|k| open.contains(k));
        self.update_counters();
        Ok(())
    }

    fn commit(&mut self, ctx: &mut Ctx<'_>) {
        self.last_commit = Instant::now();
        let positions = self.tracker.to_commit();
        if positions.is_empty() {
            return;
        }
        match self.consumer.commit(&positions) {
            Ok(()) => {
                self.tracker.committed(&positions);
                if let Some(c) = &self.counters {
                    c.commits.add(1);
                }
            }
            // Not committed: tried again next time; a crash meanwhile re-reads (duplicates).
            Err(e) => ctx.error(e),
        }
    }

    fn update_counters(&self) {
        if let (Some(c), Some(i)) = (&self.counters, &self.ingest) {
            let s = i.stats();
            c.blocks.set(s.blocks);
            c.rows.set(s.rows);
            c.extra_parts.set(s.extra_parts);
            c.bytes.set(s.bytes);
        }
    }

    fn send(&mut self, ctx: &mut Ctx<'_>) {
        for (name, mut batch) in std::mem::take(&mut self.pending) {
            if batch.records.is_empty() {
                continue;
            }
            let mut slot = self.pool.take();
            let out = slot.get_mut();
            out.records.clear();
            std::mem::swap(&mut out.records, &mut batch.records);
            out.clock_ns = self.clock;
            out.stream = self.stream;
            out.iface = None;
            out.origin = Some(name);
            ctx.emit(0, slot.into_msg());
        }
    }
}
