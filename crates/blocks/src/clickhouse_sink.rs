//! `clickhouse_sink`: trawl's flow records from a Kafka topic into ClickHouse's flow table
//! (`trawl clickhouse schema`), Akvorado-style: rows batched as `RowBinary`, one
//! `INSERT` over HTTP per batch, and the batch's offsets committed only after ClickHouse
//! acknowledged the insert. A failed insert is retried (the batch is kept, consuming waits);
//! a crash loses nothing (the batch is read again: at least once).
//!
//! It is a source in the block runtime's sense (it polls Kafka), named a sink for what it
//! does; the consumer and the inserter are one block because the commit must follow the
//! insert.
use std::time::{Duration, Instant};

use serde::Deserialize;
use trawl_central::consumer::{KafkaConsumer, KafkaSource, Polled};
use trawl_central::http::Server;
use trawl_central::{message, rowbinary, schema, OffsetTracker};
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Poll};

/// Settings of `clickhouse_sink`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClickHouseSinkSettings {
    /// `BROKER[,BROKER...]/TOPIC`.
    pub kafka: String,
    /// Consumer group. Default `trawl-clickhouse`.
    #[serde(default = "default_group")]
    pub group: String,
    /// The server's HTTP interface, `http://HOST:PORT`.
    pub url: String,
    /// The flow table (default `trawl.flows`).
    #[serde(default = "default_table")]
    pub table: String,
    /// The `probe` column of records that name no probe (default: empty).
    #[serde(default)]
    pub probe: String,
    /// The `iface` of records that name neither an interface nor a probe (default: the
    /// topic's name, as `kafka_source` stores them).
    pub iface: Option<String>,
    /// Rows per insert at most (default 262144).
    #[serde(default = "default_batch_rows")]
    pub batch_rows: usize,
    /// A batch is inserted at least this often once it has rows (default 1s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub batch_interval: Option<u64>,
    /// Stop once every assigned partition is read to its end.
    #[serde(default)]
    pub stop_at_end: bool,
}

fn default_group() -> String {
    "trawl-clickhouse".into()
}

fn default_table() -> String {
    "trawl.flows".into()
}

fn default_batch_rows() -> usize {
    1 << 18
}

struct Counters {
    records: Counter,
    bad_messages: Counter,
    inserts: Counter,
    insert_errors: Counter,
    rows_inserted: Counter,
    bytes_inserted: Counter,
}

/// The block.
pub struct ClickHouseSink {
    consumer: KafkaConsumer,
    server: Server,
    insert: String,
    probe: String,
    default_iface: String,
    tracker: OffsetTracker<()>,
    batch: Vec<u8>,
    rows: usize,
    batch_rows: usize,
    batch_every: Duration,
    batch_started: Option<Instant>,
    stop_at_end: bool,
    /// When the last insert failed: the next try waits a second.
    failed_at: Option<Instant>,
    counters: Option<Counters>,
}

impl Block for ClickHouseSink {
    const TYPE: &'static str = "clickhouse_sink";
    const SUMMARY: &'static str = "consumes trawl's flow records from a Kafka topic and batch-inserts them into ClickHouse (RowBinary over HTTP), committing offsets after each insert";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = ClickHouseSinkSettings;

    fn check(s: &ClickHouseSinkSettings) -> Result<(), String> {
        KafkaSource::parse(&s.kafka).map_err(|e| e.to_string())?;
        Server::parse(&s.url).map_err(|e| e.to_string())?;
        let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_');
        if s.table.is_empty() || !s.table.chars().all(ok) {
            return Err(format!("`table` {:?}: expected DATABASE.TABLE", s.table));
        }
        if s.batch_rows == 0 {
            return Err("`batch_rows` must be at least 1".into());
        }
        Ok(())
    }

    fn build(s: ClickHouseSinkSettings, _env: &BuildEnv) -> Result<Self, String> {
        Self::check(&s)?;
        let source = KafkaSource::parse(&s.kafka).map_err(|e| e.to_string())?;
        let server = Server::parse(&s.url).map_err(|e| e.to_string())?;
        let columns: Vec<&str> = schema::FLOW_COLUMNS.iter().map(|(n, _)| *n).collect();
        let insert = format!(
            "INSERT INTO {} ({}) FORMAT RowBinary",
            s.table,
            columns.join(", ")
        );
        let consumer = KafkaConsumer::open(&source, &s.group).map_err(|e| e.to_string())?;
        Ok(ClickHouseSink {
            consumer,
            server,
            insert,
            probe: s.probe,
            default_iface: s.iface.unwrap_or(source.topic),
            tracker: OffsetTracker::default(),
            batch: Vec::with_capacity(s.batch_rows.min(1 << 20) * 160),
            rows: 0,
            batch_rows: s.batch_rows,
            batch_every: Duration::from_nanos(s.batch_interval.unwrap_or(1_000_000_000)),
            batch_started: None,
            stop_at_end: s.stop_at_end,
            failed_at: None,
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(Counters {
            records: ctx.counter("records"),
            bad_messages: ctx.counter("bad_messages"),
            inserts: ctx.counter("inserts"),
            insert_errors: ctx.counter("insert_errors"),
            rows_inserted: ctx.counter("rows_inserted"),
            bytes_inserted: ctx.counter("bytes_inserted"),
        });
        Ok(())
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        if ctx.stopping() {
            return Poll::Done;
        }
        // A failed batch is kept whole and tried again before anything more is read.
        if self.failed_at.is_some() {
            if self
                .failed_at
                .is_some_and(|t| t.elapsed() < Duration::from_secs(1))
            {
                return Poll::Idle;
            }
            self.flush(ctx);
            return Poll::Busy;
        }
        let mut got = 0usize;
        let mut ended = false;
        while self.rows < self.batch_rows {
            let wait = if got == 0 {
                Duration::from_millis(100)
            } else {
                Duration::ZERO
            };
            let ClickHouseSink {
                consumer,
                tracker,
                batch,
                rows,
                probe,
                default_iface,
                counters,
                ..
            } = self;
            let (probe, default_iface) = (probe.as_str(), default_iface.as_str());
            let mut bad = None;
            let polled = consumer.poll(wait, &mut |m| match message::parse(m.value) {
                Ok(p) => {
                    let probe = p.probe.as_deref().unwrap_or(probe);
                    rowbinary::flow_row(&p.record, probe, p.store_iface(default_iface), batch);
                    *rows += 1;
                    tracker.hold(&(), m.partition, m.offset);
                    if let Some(c) = counters {
                        c.records.add(1);
                    }
                }
                Err(e) => {
                    tracker.seen(m.partition, m.offset);
                    if let Some(c) = counters {
                        c.bad_messages.add(1);
                    }
                    bad = Some(format!(
                        "partition {} offset {}: {e}",
                        m.partition, m.offset
                    ));
                }
            });
            if let Some(b) = bad {
                ctx.note_error(b);
            }
            match polled {
                Ok(Polled::Message) => got += 1,
                Ok(Polled::End) => {
                    ended = true;
                    break;
                }
                Ok(Polled::Nothing) => break,
                Err(e) => {
                    ctx.error(e);
                    break;
                }
            }
        }
        if self.rows > 0 && self.batch_started.is_none() {
            self.batch_started = Some(Instant::now());
        }
        let at_end = (ended || got == 0) && self.consumer.all_at_end();
        let due = self.rows >= self.batch_rows
            || self
                .batch_started
                .is_some_and(|t| t.elapsed() >= self.batch_every)
            || at_end;
        if due {
            self.flush(ctx);
        }
        if self.stop_at_end && at_end && self.rows == 0 && self.failed_at.is_none() {
            return Poll::Done;
        }
        if got == 0 {
            Poll::Idle
        } else {
            Poll::Busy
        }
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        // One last try; what is not inserted is not committed (read again next time).
        self.flush(ctx);
    }
}

impl ClickHouseSink {
    /// Inserts the batch; on success commits every offset it held (and those skipped).
    fn flush(&mut self, ctx: &mut Ctx<'_>) {
        if self.rows > 0 {
            match self.server.insert(&self.insert, &self.batch) {
                Ok(_) => {
                    if let Some(c) = &self.counters {
                        c.inserts.add(1);
                        c.rows_inserted.add(self.rows as u64);
                        c.bytes_inserted.add(self.batch.len() as u64);
                    }
                    self.tracker.release_all();
                    self.batch.clear();
                    self.rows = 0;
                    self.batch_started = None;
                    self.failed_at = None;
                }
                Err(e) => {
                    if let Some(c) = &self.counters {
                        c.insert_errors.add(1);
                    }
                    ctx.error(e);
                    self.failed_at = Some(Instant::now());
                    return;
                }
            }
        }
        let positions = self.tracker.to_commit();
        if positions.is_empty() {
            return;
        }
        match self.consumer.commit(&positions) {
            Ok(()) => self.tracker.committed(&positions),
            Err(e) => ctx.error(e),
        }
    }
}
