//! `clickhouse_sink`: trawl's flow records from a Kafka topic into ClickHouse's flow table
//! (`trawl clickhouse schema`), Akvorado-style: rows batched as `RowBinary` (sent as `Native`, below), one
//! `INSERT` over HTTP per batch, and the batch's offsets committed only after ClickHouse
//! acknowledged the insert. A failed insert is retried (the batch is kept, consuming waits);
//! a crash loses nothing (the batch is read again: at least once).
//!
//! A batch is inserted on a thread of its own while the lane reads the next one: the server
//! writes one batch while trawl decodes the next, instead of each waiting for the other. The
//! insert thread sends the batch as one `Native` block in the table's sorting-key order
//! ([`trawl_central::native`]), which costs the server about half the CPU of the same rows as
//! RowBinary (a retry after a failed insert sends the RowBinary rows as they are). At most one insert per lane is in flight: the next batch (or a commit of skipped
//! messages alone) waits for it, so offsets are committed in order, each only after every
//! insert before it succeeded.
//!
//! With `series` and `alarms` topics, each topic is a *lane* of its own: its consumer (in
//! group `GROUP-series`, `GROUP-alarms`: a member joining one group would otherwise take
//! partitions away from another lane mid-batch, which then reads them again from the last
//! commit), its batch, its table and its offsets, committed after its own inserts.
//!
//! It is a source in the block runtime's sense (it polls Kafka), named a sink for what it
//! does; the consumer and the inserter are one block because the commit must follow the
//! insert.
use std::time::{Duration, Instant};

use serde::Deserialize;
use trawl_central::consumer::{KafkaConsumer, KafkaSource, Polled};
use trawl_central::http::Server;
use trawl_central::message::TopicFormat;
use trawl_central::native::NativeWriter;
use trawl_central::series_alarms::{alarm_row, parse_alarm, parse_series, series_row};
use trawl_central::{rowbinary, schema, OffsetTracker};
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Poll};

/// Settings of `clickhouse_sink`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClickHouseSinkSettings {
    /// `BROKER[,BROKER...]/TOPIC[?format=trawl|goflow2]`.
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
    /// The series topic (on the same brokers) into `series_table`; none: not read.
    pub series: Option<String>,
    /// The series table (default `trawl.series`).
    #[serde(default = "default_series_table")]
    pub series_table: String,
    /// The alarms topic (on the same brokers) into `alarms_table`; none: not read.
    pub alarms: Option<String>,
    /// The alarms table (default `trawl.alarms`).
    #[serde(default = "default_alarms_table")]
    pub alarms_table: String,
}

fn default_group() -> String {
    "trawl-clickhouse".into()
}

fn default_table() -> String {
    "trawl.flows".into()
}

fn default_series_table() -> String {
    "trawl.series".into()
}

fn default_alarms_table() -> String {
    "trawl.alarms".into()
}

fn default_batch_rows() -> usize {
    1 << 18
}

struct Counters {
    records: Counter,
    series_rows: Counter,
    alarms: Counter,
    bad_messages: Counter,
    inserts: Counter,
    insert_errors: Counter,
    rows_inserted: Counter,
    bytes_inserted: Counter,
}

/// What a lane's messages are, and so which table they go to.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Flows,
    Series,
    Alarms,
}

/// One topic into one table.
struct Lane {
    kind: Kind,
    /// The flows topic's messages: trawl's or GoFlow2's.
    format: TopicFormat,
    consumer: KafkaConsumer,
    /// `INSERT ... FORMAT RowBinary` of the batch as read (a retry sends that).
    insert: String,
    /// What turns the batch into a sorted Native block, on the insert's thread (`None` while
    /// an insert has it).
    native: Option<Native>,
    tracker: OffsetTracker<()>,
    batch: Vec<u8>,
    rows: usize,
    batch_started: Option<Instant>,
    /// When the last insert failed: the next try waits a second.
    failed_at: Option<Instant>,
    /// The insert running on its own thread.
    inflight: Option<Inflight>,
    /// A batch whose insert failed, tried again before anything else is inserted.
    retry: Option<Done>,
    /// The buffer of the last batch inserted, reused for the next.
    spare: Vec<u8>,
    /// The lane's partitions were all at their end at the last poll.
    at_end: bool,
}

/// A batch handed to its insert, and what to commit once it is in.
struct Done {
    batch: Vec<u8>,
    rows: usize,
    /// The offsets to commit after the insert: every message read before the batch was
    /// handed over (its own, and skipped ones).
    positions: Vec<(i32, i64)>,
}

/// An insert running on its own thread: it hands back the batch, the Native writer and the
/// server's answer.
struct Inflight {
    thread: std::thread::JoinHandle<(Done, Native, Result<(), trawl_central::Error>)>,
}

/// A lane's Native inserts: the writer, its block buffer, and the `INSERT` statement.
struct Native {
    writer: NativeWriter,
    block: Vec<u8>,
    insert: String,
}

impl Native {
    /// Inserts `done`'s rows as one sorted Native block; as RowBinary if they do not
    /// transpose (they always should: the lane wrote them).
    fn insert(
        &mut self,
        server: &Server,
        rowbinary: &str,
        done: &Done,
    ) -> Result<(), trawl_central::Error> {
        self.block.clear();
        match self.writer.write(&done.batch, done.rows, &mut self.block) {
            Some(()) => server.insert(&self.insert, &self.block).map(drop),
            None => server.insert(rowbinary, &done.batch).map(drop),
        }
    }
}

/// How a lane reads a message into its batch.
struct Defaults<'a> {
    probe: &'a str,
    iface: &'a str,
}

impl Lane {
    /// A lane of `kind` from `topic` into `table`, a table of schema `layout` (`flows`,
    /// `series` or `alarms`: its columns and sorting key).
    fn open(
        kind: Kind,
        brokers: &str,
        topic: &str,
        group: &str,
        table: &str,
        layout: &str,
    ) -> Result<Lane, String> {
        let source =
            KafkaSource::parse(&format!("{brokers}/{topic}")).map_err(|e| e.to_string())?;
        let format = source.format;
        let (columns, order) =
            schema::table(layout).ok_or_else(|| format!("no table layout {layout:?}"))?;
        let writer = NativeWriter::new(columns, order)
            .ok_or_else(|| format!("the {layout} table's columns have no Native form"))?;
        let names = writer.column_list();
        Ok(Lane {
            kind,
            format,
            consumer: KafkaConsumer::open(&source, group).map_err(|e| e.to_string())?,
            insert: format!("INSERT INTO {table} ({names}) FORMAT RowBinary"),
            native: Some(Native {
                writer,
                block: Vec::new(),
                insert: format!("INSERT INTO {table} ({names}) FORMAT Native"),
            }),
            tracker: OffsetTracker::default(),
            batch: Vec::new(),
            rows: 0,
            batch_started: None,
            failed_at: None,
            inflight: None,
            retry: None,
            spare: Vec::new(),
            at_end: false,
        })
    }
}

/// One message of a `kind` lane into `batch` (a flows message may hold many records): the
/// rows added, and the error of each record that is not one (`bad`).
fn add(
    kind: Kind,
    format: TopicFormat,
    key: &[u8],
    value: &[u8],
    d: &Defaults<'_>,
    batch: &mut Vec<u8>,
    bad: &mut dyn FnMut(trawl_central::Error),
) -> usize {
    // Series and alarms are keyed by the probe: a JSON message names it nowhere else.
    let key = std::str::from_utf8(key).ok().filter(|k| !k.is_empty());
    let probe_of = |named: Option<&str>| named.or(key).unwrap_or(d.probe).to_string();
    let mut rows = 0;
    match kind {
        Kind::Flows => format.parse_each(value, &mut |p| match p {
            Ok(p) => {
                let probe = p.probe.as_deref().unwrap_or(d.probe);
                rowbinary::flow_row(&p.record, probe, p.store_iface(d.iface), batch);
                rows += 1;
            }
            Err(e) => bad(e),
        }),
        Kind::Series => match parse_series(value) {
            Ok(p) => {
                let probe = probe_of(p.probe.as_deref());
                let iface = if probe.is_empty() { d.iface } else { &probe };
                series_row(&p.row, &probe, iface, batch);
                rows += 1;
            }
            Err(e) => bad(e),
        },
        Kind::Alarms => match parse_alarm(value) {
            Ok(a) => {
                let probe = probe_of(a.probe.as_deref());
                let iface = if probe.is_empty() { d.iface } else { &probe };
                alarm_row(&a, &probe, iface, batch);
                rows += 1;
            }
            Err(e) => bad(e),
        },
    }
    rows
}

/// The block.
pub struct ClickHouseSink {
    lanes: Vec<Lane>,
    server: Server,
    probe: String,
    default_iface: String,
    batch_rows: usize,
    batch_every: Duration,
    stop_at_end: bool,
    counters: Option<Counters>,
}

fn check_table(what: &str, table: &str) -> Result<(), String> {
    let ok = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_');
    if table.is_empty() || !table.chars().all(ok) {
        return Err(format!("`{what}` {table:?}: expected DATABASE.TABLE"));
    }
    Ok(())
}

impl Block for ClickHouseSink {
    const TYPE: &'static str = "clickhouse_sink";
    const SUMMARY: &'static str = "consumes trawl's flow records (and its series and alarms topics) from Kafka and batch-inserts them into ClickHouse (sorted Native blocks over HTTP), committing offsets after each insert";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = ClickHouseSinkSettings;

    fn check(s: &ClickHouseSinkSettings) -> Result<(), String> {
        let source = KafkaSource::parse(&s.kafka).map_err(|e| e.to_string())?;
        for topic in [&s.series, &s.alarms].into_iter().flatten() {
            KafkaSource::parse(&format!("{}/{topic}", source.brokers))
                .map_err(|e| e.to_string())?;
        }
        Server::parse(&s.url).map_err(|e| e.to_string())?;
        check_table("table", &s.table)?;
        check_table("series_table", &s.series_table)?;
        check_table("alarms_table", &s.alarms_table)?;
        if s.batch_rows == 0 {
            return Err("`batch_rows` must be at least 1".into());
        }
        Ok(())
    }

    fn build(s: ClickHouseSinkSettings, _env: &BuildEnv) -> Result<Self, String> {
        Self::check(&s)?;
        let source = KafkaSource::parse(&s.kafka).map_err(|e| e.to_string())?;
        let server = Server::parse(&s.url).map_err(|e| e.to_string())?;
        let b = &source.brokers;
        let flows_topic = s.kafka.rsplit_once('/').map_or("", |(_, t)| t);
        let mut lanes = vec![Lane::open(
            Kind::Flows,
            b,
            flows_topic,
            &s.group,
            &s.table,
            "flows",
        )?];
        if let Some(t) = &s.series {
            let group = format!("{}-series", s.group);
            let table = &s.series_table;
            lanes.push(Lane::open(Kind::Series, b, t, &group, table, "series")?);
        }
        if let Some(t) = &s.alarms {
            let group = format!("{}-alarms", s.group);
            let table = &s.alarms_table;
            lanes.push(Lane::open(Kind::Alarms, b, t, &group, table, "alarms")?);
        }
        lanes[0].batch.reserve(s.batch_rows.min(1 << 20) * 160);
        Ok(ClickHouseSink {
            lanes,
            server,
            probe: s.probe,
            default_iface: s.iface.unwrap_or(source.topic),
            batch_rows: s.batch_rows,
            batch_every: Duration::from_nanos(s.batch_interval.unwrap_or(1_000_000_000)),
            stop_at_end: s.stop_at_end,
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(Counters {
            records: ctx.counter("records"),
            series_rows: ctx.counter("series_rows"),
            alarms: ctx.counter("alarms"),
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
        let mut got = 0;
        for i in 0..self.lanes.len() {
            got += self.poll_lane(i, ctx);
        }
        let done = self
            .lanes
            .iter()
            .all(|l| l.at_end && l.rows == 0 && l.inflight.is_none() && l.retry.is_none());
        if self.stop_at_end && done {
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
        for i in 0..self.lanes.len() {
            if self.lanes[i].retry.is_some() {
                self.retry(i, ctx);
            }
            self.flush(i, ctx);
            self.settle(i, ctx);
        }
    }
}

impl ClickHouseSink {
    /// Reads what lane `i` has (up to a batch), inserts the batch when due; returns the
    /// messages read.
    fn poll_lane(&mut self, i: usize, ctx: &mut Ctx<'_>) -> usize {
        // A failed batch is kept whole and tried again before anything more is read.
        if let Some(t) = self.lanes[i].failed_at {
            if t.elapsed() >= Duration::from_secs(1) {
                self.retry(i, ctx);
            }
            return 0;
        }
        if self.lanes[i]
            .inflight
            .as_ref()
            .is_some_and(|f| f.thread.is_finished())
        {
            self.settle(i, ctx);
        }
        let d = Defaults {
            probe: &self.probe,
            iface: &self.default_iface,
        };
        let lane = &mut self.lanes[i];
        let counters = self.counters.as_ref();
        let mut got = 0usize;
        let mut ended = false;
        while lane.rows < self.batch_rows {
            // Wait a little only while nothing came: lanes take turns on one thread.
            let wait = if got == 0 {
                Duration::from_millis(50)
            } else {
                Duration::ZERO
            };
            let mut bad = None;
            let Lane {
                kind,
                format,
                consumer,
                tracker,
                batch,
                rows,
                ..
            } = &mut *lane;
            let (kind, format) = (*kind, *format);
            let polled = consumer.poll(wait, &mut |m| {
                let mut note_bad = |e: trawl_central::Error| {
                    if let Some(c) = counters {
                        c.bad_messages.add(1);
                    }
                    bad = Some(format!(
                        "partition {} offset {}: {e}",
                        m.partition, m.offset
                    ));
                };
                let n = add(kind, format, m.key, m.value, &d, batch, &mut note_bad);
                *rows += n;
                if let Some(c) = counters {
                    let counter = match kind {
                        Kind::Flows => &c.records,
                        Kind::Series => &c.series_rows,
                        Kind::Alarms => &c.alarms,
                    };
                    counter.add(n as u64);
                }
                if n > 0 {
                    tracker.hold(&(), m.partition, m.offset);
                } else {
                    tracker.seen(m.partition, m.offset);
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
        if lane.rows > 0 && lane.batch_started.is_none() {
            lane.batch_started = Some(Instant::now());
        }
        lane.at_end = (ended || got == 0) && lane.consumer.all_at_end();
        let due = lane.rows >= self.batch_rows
            || lane
                .batch_started
                .is_some_and(|t| t.elapsed() >= self.batch_every)
            || lane.at_end;
        if due {
            self.flush(i, ctx);
        }
        got
    }

    /// Hands lane `i`'s batch to an insert of its own (after the one in flight is settled),
    /// or with no rows, commits what was skipped.
    fn flush(&mut self, i: usize, ctx: &mut Ctx<'_>) {
        self.settle(i, ctx);
        let lane = &mut self.lanes[i];
        if lane.retry.is_some() {
            return;
        }
        // Everything read so far is in this batch or was skipped.
        lane.tracker.release_all();
        let positions = lane.tracker.to_commit();
        if lane.rows == 0 {
            if !positions.is_empty() {
                match lane.consumer.commit(&positions) {
                    Ok(()) => lane.tracker.committed(&positions),
                    Err(e) => ctx.error(e),
                }
            }
            return;
        }
        // The positions count as committed from here: the next batch's are computed past
        // them, and they are committed (in order) once this insert succeeded.
        lane.tracker.committed(&positions);
        let mut spare = std::mem::take(&mut lane.spare);
        spare.clear();
        let done = Done {
            batch: std::mem::replace(&mut lane.batch, spare),
            rows: std::mem::take(&mut lane.rows),
            positions,
        };
        lane.batch_started = None;
        let (server, query) = (self.server.clone(), lane.insert.clone());
        let Some(mut native) = lane.native.take() else {
            // Only an insert in flight holds it, and `settle` above waited for that.
            ctx.fail("the Native writer is missing");
            return;
        };
        let thread = std::thread::Builder::new()
            .name("clickhouse-insert".into())
            .spawn(move || {
                let r = native.insert(&server, &query, &done);
                (done, native, r)
            });
        match thread {
            Ok(thread) => lane.inflight = Some(Inflight { thread }),
            Err(e) => ctx.fail(format_args!("cannot start an insert thread: {e}")),
        }
    }

    /// Waits for lane `i`'s insert in flight: in, its offsets are committed; failed, its
    /// batch is kept to be tried again.
    fn settle(&mut self, i: usize, ctx: &mut Ctx<'_>) {
        let lane = &mut self.lanes[i];
        let Some(f) = lane.inflight.take() else {
            return;
        };
        let (done, native, result) = match f.thread.join() {
            Ok(r) => r,
            Err(_) => {
                ctx.fail("an insert thread panicked");
                return;
            }
        };
        lane.native = Some(native);
        match result {
            Ok(()) => self.inserted(i, done, ctx),
            Err(e) => {
                if let Some(c) = &self.counters {
                    c.insert_errors.add(1);
                }
                ctx.error(e);
                let lane = &mut self.lanes[i];
                lane.retry = Some(done);
                lane.failed_at = Some(Instant::now());
            }
        }
    }

    /// Tries lane `i`'s failed batch again, on this thread.
    fn retry(&mut self, i: usize, ctx: &mut Ctx<'_>) {
        let Some(done) = self.lanes[i].retry.take() else {
            return;
        };
        match self.server.insert(&self.lanes[i].insert, &done.batch) {
            Ok(_) => {
                self.lanes[i].failed_at = None;
                self.inserted(i, done, ctx);
            }
            Err(e) => {
                if let Some(c) = &self.counters {
                    c.insert_errors.add(1);
                }
                ctx.error(e);
                let lane = &mut self.lanes[i];
                lane.retry = Some(done);
                lane.failed_at = Some(Instant::now());
            }
        }
    }

    /// Lane `i`'s batch `done` is in ClickHouse: counted, its offsets committed, its buffer
    /// kept for reuse.
    fn inserted(&mut self, i: usize, done: Done, ctx: &mut Ctx<'_>) {
        if let Some(c) = &self.counters {
            c.inserts.add(1);
            c.rows_inserted.add(done.rows as u64);
            c.bytes_inserted.add(done.batch.len() as u64);
        }
        let lane = &mut self.lanes[i];
        if !done.positions.is_empty() {
            // A commit that fails is not retried: the next batch's positions pass these
            // (a crash meanwhile reads these rows again: at least once).
            if let Err(e) = lane.consumer.commit(&done.positions) {
                ctx.error(e);
            }
        }
        lane.spare = done.batch;
    }
}
