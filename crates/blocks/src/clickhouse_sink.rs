//! `clickhouse_sink`: trawl's flow records from a Kafka topic into ClickHouse's flow table
//! (`trawl clickhouse schema`), Akvorado-style: rows batched as `RowBinary`, one
//! `INSERT` over HTTP per batch, and the batch's offsets committed only after ClickHouse
//! acknowledged the insert. A failed insert is retried (the batch is kept, consuming waits);
//! a crash loses nothing (the batch is read again: at least once).
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
    insert: String,
    tracker: OffsetTracker<()>,
    batch: Vec<u8>,
    rows: usize,
    batch_started: Option<Instant>,
    /// When the last insert failed: the next try waits a second.
    failed_at: Option<Instant>,
    /// The lane's partitions were all at their end at the last poll.
    at_end: bool,
}

/// How a lane reads a message into its batch.
struct Defaults<'a> {
    probe: &'a str,
    iface: &'a str,
}

impl Lane {
    fn open(
        kind: Kind,
        brokers: &str,
        topic: &str,
        group: &str,
        table: &str,
        columns: &[(&str, schema::ColType)],
    ) -> Result<Lane, String> {
        let source =
            KafkaSource::parse(&format!("{brokers}/{topic}")).map_err(|e| e.to_string())?;
        let format = source.format;
        let names: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
        Ok(Lane {
            kind,
            format,
            consumer: KafkaConsumer::open(&source, group).map_err(|e| e.to_string())?,
            insert: format!(
                "INSERT INTO {table} ({}) FORMAT RowBinary",
                names.join(", ")
            ),
            tracker: OffsetTracker::default(),
            batch: Vec::new(),
            rows: 0,
            batch_started: None,
            failed_at: None,
            at_end: false,
        })
    }
}

/// One message of a `kind` lane into `batch`; the error names what is wrong with it.
fn add(
    kind: Kind,
    format: TopicFormat,
    key: &[u8],
    value: &[u8],
    d: &Defaults<'_>,
    c: Option<&Counters>,
    batch: &mut Vec<u8>,
) -> Result<(), trawl_central::Error> {
    // Series and alarms are keyed by the probe: a JSON message names it nowhere else.
    let key = std::str::from_utf8(key).ok().filter(|k| !k.is_empty());
    let probe_of = |named: Option<&str>| named.or(key).unwrap_or(d.probe).to_string();
    match kind {
        Kind::Flows => {
            let p = format.parse(value)?;
            let probe = p.probe.as_deref().unwrap_or(d.probe);
            rowbinary::flow_row(&p.record, probe, p.store_iface(d.iface), batch);
            if let Some(c) = c {
                c.records.add(1);
            }
        }
        Kind::Series => {
            let p = parse_series(value)?;
            let probe = probe_of(p.probe.as_deref());
            let iface = if probe.is_empty() { d.iface } else { &probe };
            series_row(&p.row, &probe, iface, batch);
            if let Some(c) = c {
                c.series_rows.add(1);
            }
        }
        Kind::Alarms => {
            let a = parse_alarm(value)?;
            let probe = probe_of(a.probe.as_deref());
            let iface = if probe.is_empty() { d.iface } else { &probe };
            alarm_row(&a, &probe, iface, batch);
            if let Some(c) = c {
                c.alarms.add(1);
            }
        }
    }
    Ok(())
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
    const SUMMARY: &'static str = "consumes trawl's flow records (and its series and alarms topics) from Kafka and batch-inserts them into ClickHouse (RowBinary over HTTP), committing offsets after each insert";
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
            schema::FLOW_COLUMNS,
        )?];
        if let Some(t) = &s.series {
            let group = format!("{}-series", s.group);
            let cols = schema::SERIES_COLUMNS;
            lanes.push(Lane::open(
                Kind::Series,
                b,
                t,
                &group,
                &s.series_table,
                cols,
            )?);
        }
        if let Some(t) = &s.alarms {
            let group = format!("{}-alarms", s.group);
            let cols = schema::ALARM_COLUMNS;
            lanes.push(Lane::open(
                Kind::Alarms,
                b,
                t,
                &group,
                &s.alarms_table,
                cols,
            )?);
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
            .all(|l| l.at_end && l.rows == 0 && l.failed_at.is_none());
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
            self.flush(i, ctx);
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
                self.flush(i, ctx);
            }
            return 0;
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
            let polled = consumer.poll(wait, &mut |m| match add(
                kind, format, m.key, m.value, &d, counters, batch,
            ) {
                Ok(()) => {
                    *rows += 1;
                    tracker.hold(&(), m.partition, m.offset);
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

    /// Inserts lane `i`'s batch; on success commits every offset it held (and those
    /// skipped).
    fn flush(&mut self, i: usize, ctx: &mut Ctx<'_>) {
        let lane = &mut self.lanes[i];
        if lane.rows > 0 {
            match self.server.insert(&lane.insert, &lane.batch) {
                Ok(_) => {
                    if let Some(c) = &self.counters {
                        c.inserts.add(1);
                        c.rows_inserted.add(lane.rows as u64);
                        c.bytes_inserted.add(lane.batch.len() as u64);
                    }
                    lane.tracker.release_all();
                    lane.batch.clear();
                    lane.rows = 0;
                    lane.batch_started = None;
                    lane.failed_at = None;
                }
                Err(e) => {
                    if let Some(c) = &self.counters {
                        c.insert_errors.add(1);
                    }
                    ctx.error(e);
                    lane.failed_at = Some(Instant::now());
                    return;
                }
            }
        }
        let positions = lane.tracker.to_commit();
        if positions.is_empty() {
            return;
        }
        match lane.consumer.commit(&positions) {
            Ok(()) => lane.tracker.committed(&positions),
            Err(e) => ctx.error(e),
        }
    }
}
