//! The Kafka exporter: flow records as Kafka messages (JSON, Protobuf or Avro, keyed by
//! probe or flow; one record per message, or with `batch=` many, encoded straight into the
//! message buffer) through librdkafka's idempotent producer (`acks=all`), at least once. A message
//! the brokers did not acknowledge within the target's timeout, or that found librdkafka's
//! queue full, goes to the [`Spool`] when there is one (else it is dropped and counted); the
//! spool is sent, oldest segment first, once the brokers acknowledge again. Nothing here
//! waits on the brokers except a capture-file run (`lossless`), whose reading can wait.
//!
//! A message refused for good — too large for the brokers, a topic that does not exist or is
//! not ours to write — is dropped and counted by reason ([`permanent`]): sending it again,
//! from the spool or otherwise, cannot succeed. Every other error is a broker or network that
//! may come back, and the message is spooled.
//!
//! librdkafka's threads do the network work; this exporter's thread encodes, produces and
//! polls for delivery reports, which run [`Delivery`]'s callback on the same thread. The
//! acknowledgement of a fresh message (nearly all of them) costs two relaxed atomic adds;
//! the lock on [`State`] is taken only for errors and messages of the spool.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::producer::{
    BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext, PurgeConfig,
};
use rdkafka::ClientContext;
use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_flow::FlowRecord;
use trawl_series::{SeriesFormat, SeriesRow, SeriesWriter};

use crate::destination::{KafkaAcks, KafkaFormat, KafkaKey, KafkaTarget};
use crate::exporter::{Alarm, Batch, Counters, ExportConfig, ExporterReport, Pool, Work};
use crate::spool::Spool;
use crate::Error;

/// A message's origin in [`State`]: produced from the records handed in (not the spool).
/// Otherwise the origin is the spool segment's sequence number (1 and up).
const FRESH: usize = 0;

/// The top bit of a delivery opaque: set, the rest is the spool segment the message was sent
/// from; clear, the message is fresh and the rest is how many flow records it carries (what
/// `records_delivered` counts when it is acknowledged).
const SPOOLED: usize = 1 << (usize::BITS - 1);

/// The delivery opaque of a fresh message of `records` flow records.
fn fresh(records: usize) -> usize {
    records & !SPOOLED
}

/// The delivery opaque of a message of spool segment `seq`.
fn spooled(seq: u64) -> usize {
    seq as usize | SPOOLED
}

/// A delivery opaque's origin ([`FRESH`] or a spool segment) and the flow records it counts.
fn origin(opaque: usize) -> (usize, u64) {
    if opaque & SPOOLED != 0 {
        (opaque & !SPOOLED, 0)
    } else {
        (FRESH, opaque as u64)
    }
}

/// Whether librdkafka's error `code` refuses the message itself, for good: it is too large,
/// malformed, or its topic does not exist (librdkafka reports that only after its own
/// retries and metadata refreshes) or may not be written. Sending it again cannot succeed,
/// so it is dropped and counted instead of spooled. Everything else (timeouts, brokers down,
/// no leader, purged at the end) says nothing against the message: it is spooled.
pub(crate) fn permanent(code: RDKafkaErrorCode) -> bool {
    use RDKafkaErrorCode as C;
    matches!(
        code,
        C::BadMessage
            | C::BadCompression
            | C::InvalidArgument
            | C::UnknownTopic
            | C::UnknownPartition
            | C::InvalidMessage
            | C::UnknownTopicOrPartition
            | C::InvalidMessageSize
            | C::MessageSizeTooLarge
            | C::InvalidTopic
            | C::MessageBatchTooLarge
            | C::InvalidRequiredAcks
            | C::TopicAuthorizationFailed
            | C::ClusterAuthorizationFailed
            | C::InvalidTimestamp
            | C::UnsupportedForMessageFormat
            | C::PolicyViolation
            | C::InvalidRecord
            | C::UnsupportedCompressionType
    )
}

/// What the delivery callback updates under the lock: counters of the rare cases, the
/// spool, and which spool segments are being sent.
#[derive(Default)]
struct State {
    spool: Option<Spool>,
    /// Of the messages acknowledged, those sent from the spool.
    resent: u64,
    /// Messages lost: no spool, or the spool could not be written.
    dropped: u64,
    /// Messages refused for good ([`permanent`]), by reason, in the order first seen.
    rejected: Vec<(String, u64)>,
    send_errors: u64,
    last_error: Option<String>,
    /// Spool segments being sent: their messages not yet reported, and whether one failed.
    sending: Vec<Sending>,
}

/// A spool segment being sent.
struct Sending {
    seq: u64,
    left: u64,
    failed: bool,
}

impl State {
    fn busy(&self) -> Vec<u64> {
        self.sending.iter().map(|s| s.seq).collect()
    }

    fn error(&mut self, e: impl ToString) {
        self.send_errors += 1;
        self.last_error = Some(e.to_string());
    }

    /// A message refused for good: counted under `reason` and dropped; one of a spool
    /// segment counts as reported (its segment is not kept for it).
    fn rejected(&mut self, reason: String, from: usize) {
        match self.rejected.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, n)) => *n += 1,
            None => self.rejected.push((reason, 1)),
        }
        self.reported(from);
    }

    fn rejected_total(&self) -> u64 {
        self.rejected.iter().map(|(_, n)| n).sum()
    }

    /// A message the brokers did not take. A fresh one goes to the spool (else it is counted
    /// as dropped); one sent from the spool stays there, in its segment, which is kept.
    fn undelivered(&mut self, topic: &str, key: &[u8], value: &[u8], from: usize) {
        if from != FRESH {
            if let Some(s) = self.sending.iter_mut().find(|s| s.seq == from as u64) {
                s.failed = true;
            }
            self.reported(from);
            return;
        }
        let busy = self.busy();
        match self.spool.as_mut() {
            Some(s) => {
                if let Err(e) = s.append(topic, key, value, &busy) {
                    let what = format!("spool {}: {e}", s.dir().display());
                    self.dropped += 1;
                    self.error(what);
                }
            }
            None => self.dropped += 1,
        }
    }

    /// One more message of spool segment `from` was reported. Once all were, the segment is
    /// deleted if every one was acknowledged; else it stays, at its place in the spool, to be
    /// sent again whole (its acknowledged messages then arrive twice: at least once).
    fn reported(&mut self, from: usize) {
        if from == FRESH {
            return;
        }
        let seq = from as u64;
        let Some(i) = self.sending.iter().position(|s| s.seq == seq) else {
            return;
        };
        self.sending[i].left -= 1;
        if self.sending[i].left > 0 {
            return;
        }
        let done = self.sending.remove(i);
        if done.failed {
            return;
        }
        if let Some(s) = self.spool.as_mut() {
            if let Err(e) = s.remove(seq) {
                let what = format!("spool {}: {e}", s.dir().display());
                self.error(what);
            }
        }
    }
}

/// The producer's context: delivery reports and client errors land here.
struct Delivery {
    /// Messages acknowledged, and their value bytes: counted without the lock.
    acked: AtomicU64,
    acked_bytes: AtomicU64,
    /// Flow records in the fresh messages acknowledged.
    acked_records: AtomicU64,
    /// The last delivery report said the brokers answer: an acknowledgement, or a refusal
    /// for good.
    healthy: AtomicBool,
    state: Mutex<State>,
}

impl Delivery {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves counters, which are still worth reading.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn healthy(&self) -> bool {
        self.healthy.load(Ordering::Relaxed)
    }
}

/// Why librdkafka refused a message, as counted: its error code's text.
fn reason(code: RDKafkaErrorCode) -> String {
    format!("{code:?} ({code})")
}

impl ClientContext for Delivery {
    fn error(&self, error: KafkaError, reason: &str) {
        self.state().last_error = Some(format!("{error}: {reason}"));
    }

    // librdkafka's own log lines (broker connection attempts) would flood the log while the
    // brokers are down; what matters is counted and reported.
    fn log(&self, _level: rdkafka::config::RDKafkaLogLevel, _fac: &str, _log_message: &str) {}
}

impl ProducerContext for Delivery {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, opaque: usize) {
        let (from, records) = origin(opaque);
        match result {
            Ok(m) => {
                self.acked.fetch_add(1, Ordering::Relaxed);
                self.acked_records.fetch_add(records, Ordering::Relaxed);
                self.acked_bytes
                    .fetch_add(m.payload_len() as u64, Ordering::Relaxed);
                self.healthy.store(true, Ordering::Relaxed);
                if from != FRESH {
                    let mut st = self.state();
                    st.resent += 1;
                    st.reported(from);
                }
            }
            Err((e, m)) => {
                let mut st = self.state();
                st.error(e);
                match e.rdkafka_error_code().filter(|c| permanent(*c)) {
                    // The cluster answered, only not with a yes for this message: it is up,
                    // and the spool may be sent.
                    Some(code) => {
                        self.healthy.store(true, Ordering::Relaxed);
                        st.rejected(reason(code), from);
                    }
                    None => {
                        self.healthy.store(false, Ordering::Relaxed);
                        let topic = m.topic().to_string();
                        st.undelivered(
                            &topic,
                            m.key().unwrap_or_default(),
                            m.payload().unwrap_or_default(),
                            from,
                        );
                    }
                }
            }
        }
    }
}

/// librdkafka's producer settings for `target`.
///
/// - `linger.ms=20`, `batch.num.messages=10000`, `batch.size=1000000`: librdkafka gathers up
///   to 20 ms of messages (or 1 MB) per partition into one produce request. At one record per
///   message this is what keeps the brokers' request rate sane; with `batch=` a request
///   still carries several of trawl's messages. 20 ms is far below the spool's timeout.
/// - `queue.buffering.max.messages=1000000`: a second of records at one per message before
///   the queue counts as full (a live run then spools, a file run waits).
/// - `compression.type` from `compression=` (default none: loopback and LANs have the
///   bandwidth, the CPU is what an exporter lacks).
/// - `lossless` (a capture-file run, which waits for room in the queue instead of spooling):
///   `queue.buffering.max.kbytes=2048`, about two full produce requests (the largest
///   message librdkafka takes, `message.max.bytes`, is 1 MB: one always fits). A file run fills
///   any queue, so the queue is what is waiting: librdkafka's default (1 GB) held more than
///   brokers take within a message's timeout, which runs from when it is queued (the
///   youngest timed out and were dropped: a third of a JSON export's records in
///   `bench/kafka.sh`). And messages queued behind the idempotent producer's 5 produce
///   requests in flight cost librdkafka's broker thread a busy loop: once they have waited
///   `linger.ms`, or fill `batch.size`, it polls its socket without a timeout until a
///   response frees a slot. A 32 MB queue made that loop up to half of a file run's CPU
///   (`bench/RESULTS.md`, 2026-11-28 morning); with 2 MB the queue rarely outgrows the
///   requests in flight, and on loopback the brokers take records as fast.
/// - `lossless`: `linger.ms=250` ([`lossless_linger_ms`]). The busy loop above starts once the
///   oldest message not yet in a request has waited `linger.ms` while the 5 requests in
///   flight hold the partition: with 20 ms a broker slower than that to answer (a busy
///   machine, the start of a run before the producer id and the topic's leader are known)
///   cost the broker thread 0.4-1.6 s of a 2 M record file run, a sixth to nearly half of
///   the run's CPU (`bench/RESULTS.md`, 2026-11-28 late morning). A file run's full requests
///   still go at `batch.size` (1 MB); a partly filled one (the run's last, or records coming
///   slowly) waits up to the linger.
fn producer_config(target: &KafkaTarget, lossless: bool) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &target.brokers)
        // librdkafka's idempotence needs acks=all: fewer acks give it up.
        .set(
            "enable.idempotence",
            (target.acks == KafkaAcks::All).to_string(),
        )
        .set("acks", target.acks.config_value())
        .set("linger.ms", "20")
        .set("batch.num.messages", "10000")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "1000000")
        .set("compression.type", target.compression.config_value())
        .set("message.timeout.ms", target.timeout_ms.to_string())
        .set("client.id", format!("trawl-{}", target.probe));
    if lossless {
        c.set("queue.buffering.max.kbytes", LOSSLESS_QUEUE_KB.to_string())
            .set(
                "linger.ms",
                lossless_linger_ms(target.timeout_ms).to_string(),
            );
    }
    c
}

/// librdkafka's queue of a lossless producer, in KB ([`producer_config`]).
const LOSSLESS_QUEUE_KB: u32 = 2 << 10;

/// `linger.ms` of a lossless producer ([`producer_config`]): 250 ms, kept below half the
/// message timeout (librdkafka refuses a linger as long as the timeout).
fn lossless_linger_ms(timeout_ms: u32) -> u32 {
    LOSSLESS_LINGER_MS.min(timeout_ms / 2)
}

const LOSSLESS_LINGER_MS: u32 = 250;

/// One Kafka destination's thread.
pub(crate) struct KafkaWorker {
    target: KafkaTarget,
    producer: BaseProducer<Delivery>,
    config: ExportConfig,
    pool: Pool,
    shared: Arc<Counters>,
    json: RecordWriter,
    key: Vec<u8>,
    value: Vec<u8>,
    /// Records in `value` not yet produced (`batch=`: they wait for more to fill the message).
    packed: usize,
    /// When the first of them was packed: the message waits at most `flush_interval`.
    packed_since: Option<Instant>,
    /// The record that did not fit the batch, while the batch is produced.
    spill: Vec<u8>,
    /// When a spool segment was last sent while the brokers were not known to be up: at most
    /// one such probe per timeout.
    probed_at: Option<Instant>,
}

impl KafkaWorker {
    /// Creates the producer (it connects in the background) and opens the spool.
    pub(crate) fn open(
        target: &KafkaTarget,
        config: &ExportConfig,
        pool: Pool,
        shared: Arc<Counters>,
    ) -> Result<KafkaWorker, Error> {
        let spool = match &target.spool {
            Some(dir) => Some(Spool::open(dir, target.spool_size).map_err(|e| Error::Io {
                what: format!("cannot open the Kafka spool {}", dir.display()),
                source: e,
            })?),
            None => None,
        };
        let delivery = Delivery {
            acked: AtomicU64::new(0),
            acked_bytes: AtomicU64::new(0),
            acked_records: AtomicU64::new(0),
            healthy: AtomicBool::new(false),
            state: Mutex::new(State {
                spool,
                ..State::default()
            }),
        };
        let producer: BaseProducer<Delivery> = producer_config(target, config.lossless)
            .create_with_context(delivery)
            .map_err(|e| Error::BadDestination {
                text: format!("kafka://{}/{}", target.brokers, target.topic),
                why: format!("cannot create a Kafka producer: {e}"),
            })?;
        Ok(KafkaWorker {
            target: target.clone(),
            producer,
            config: config.clone(),
            pool,
            shared,
            json: RecordWriter::new(RecordFormat::Json, false),
            key: Vec::with_capacity(64),
            value: Vec::with_capacity(target.batch.unwrap_or(0).max(4096) + 4096),
            packed: 0,
            packed_since: None,
            spill: Vec::with_capacity(4096),
            probed_at: None,
        })
    }

    pub(crate) fn run(mut self, rx: Receiver<Work>) -> ExporterReport {
        loop {
            match rx.recv_timeout(self.config.flush_interval) {
                Ok(Work::Series(rows)) => self.produce_series(&rows),
                Ok(Work::Alarms(alarms)) => self.produce_alarms(&alarms),
                Ok(Work::Flows(mut batch)) => {
                    self.produce_batch(&batch);
                    batch.records.clear();
                    if let Ok(mut p) = self.pool.lock() {
                        p.push(batch.records);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if self
                .packed_since
                .is_some_and(|t| t.elapsed() >= self.config.flush_interval)
            {
                self.produce_packed();
            }
            self.producer.poll(Duration::ZERO);
            self.send_spool();
            self.publish();
        }
        self.produce_packed();
        self.finish()
    }

    /// Encodes the records straight into the message buffer: one message each, or with
    /// `batch=` as many as fit the batch's bytes.
    fn produce_batch(&mut self, batch: &Batch) {
        self.json.name_iface(batch.iface.as_deref());
        let iface = batch.iface.as_deref();
        let Some(max) = self.target.batch else {
            for r in &batch.records {
                self.value.clear();
                self.encode_key(r);
                self.encode_value(r, iface);
                self.packed = 1;
                self.produce_packed();
            }
            return;
        };
        if self.key.is_empty() {
            // Batches are keyed by the probe (`batch_conflict` refuses key=flow).
            self.key.extend_from_slice(self.target.probe.as_bytes());
        }
        for r in &batch.records {
            let mark = self.value.len();
            self.encode_value(r, iface);
            if self.value.len() > max && self.packed > 0 {
                // Over the size: the message goes without this record, which starts the next.
                self.spill.clear();
                self.spill.extend_from_slice(&self.value[mark..]);
                self.value.truncate(mark);
                self.produce_packed();
                self.value.extend_from_slice(&self.spill);
            }
            self.packed += 1;
            if self.packed_since.is_none() {
                self.packed_since = Some(Instant::now());
            }
            if self.value.len() >= max {
                self.produce_packed();
            }
        }
    }

    /// Produces the records packed in `value` as one message to the flow topic.
    fn produce_packed(&mut self) {
        if self.packed == 0 {
            return;
        }
        if self.target.format == KafkaFormat::Json {
            // Lines are separated by newlines: the last one's goes (a message of one record
            // is the line without it).
            self.value.pop();
        }
        // Taken out (`produce` borrows `self`), put back after: no copy.
        let topic = std::mem::take(&mut self.target.topic);
        let (key, value) = (
            std::mem::take(&mut self.key),
            std::mem::take(&mut self.value),
        );
        self.produce(&topic, &key, &value, fresh(self.packed));
        (self.key, self.value) = (key, value);
        self.target.topic = topic;
        self.value.clear();
        self.packed = 0;
        self.packed_since = None;
    }

    /// Per-second rows to the series topic, keyed by probe: the series JSON line without its
    /// newline, or a `trawl.SeriesRow`.
    fn produce_series(&mut self, rows: &[SeriesRow]) {
        let Some(topic) = self.target.series_topic.clone() else {
            return;
        };
        let json = SeriesWriter::new(SeriesFormat::Json);
        self.produce_each(&topic, rows, |w, r, out| {
            let probe = &w.target.probe;
            match w.target.format {
                KafkaFormat::Json => {
                    json.write(r, out);
                    out.pop();
                }
                KafkaFormat::Protobuf => crate::pb::encode_series(r, probe, out),
                KafkaFormat::ProtobufDelimited => {
                    crate::pb::length_prefixed(out, |o| crate::pb::encode_series(r, probe, o))
                }
                KafkaFormat::Avro => crate::avro::encode_series(r, probe, out),
            }
        });
    }

    /// Alarms to the alarms topic, keyed by probe: the alarm's JSON object, or a
    /// `trawl.Alarm`.
    fn produce_alarms(&mut self, alarms: &[Alarm]) {
        let Some(topic) = self.target.alarms_topic.clone() else {
            return;
        };
        self.produce_each(&topic, alarms, |w, a, out| {
            let probe = &w.target.probe;
            match w.target.format {
                KafkaFormat::Json => {
                    // Writing a JSON value into a Vec cannot fail.
                    let _ = serde_json::to_writer(&mut *out, &a.json);
                }
                KafkaFormat::Protobuf => crate::pb::encode_alarm(a, probe, out),
                KafkaFormat::ProtobufDelimited => {
                    crate::pb::length_prefixed(out, |o| crate::pb::encode_alarm(a, probe, o))
                }
                KafkaFormat::Avro => crate::avro::encode_alarm(a, probe, out),
            }
        });
    }

    /// Produces one message per item to `topic`, keyed by the probe, its value written by
    /// `encode` (into a buffer of its own: `value` may hold records packed for a batch).
    fn produce_each<T>(
        &mut self,
        topic: &str,
        items: &[T],
        encode: impl Fn(&KafkaWorker, &T, &mut Vec<u8>),
    ) {
        let key = self.target.probe.clone().into_bytes();
        let mut value = Vec::new();
        for item in items {
            value.clear();
            encode(self, item, &mut value);
            self.produce(topic, &key, &value, fresh(0));
        }
    }

    /// The message key of one record: the probe's name, or its flow key.
    fn encode_key(&mut self, r: &FlowRecord<'_>) {
        use crate::text::{ip, uint};
        let k = &mut self.key;
        k.clear();
        match self.target.key {
            KafkaKey::Probe => k.extend_from_slice(self.target.probe.as_bytes()),
            KafkaKey::Flow => {
                ip(r.src_ip, k);
                k.push(b'|');
                uint(u64::from(r.src_port), k);
                k.push(b'|');
                ip(r.dst_ip, k);
                k.push(b'|');
                uint(u64::from(r.dst_port), k);
                k.push(b'|');
                uint(u64::from(r.proto), k);
            }
        }
    }

    /// Appends one record to `value` in the destination's format (JSON with its newline).
    fn encode_value(&mut self, r: &FlowRecord<'_>, iface: Option<&str>) {
        let (probe, out) = (&self.target.probe, &mut self.value);
        match self.target.format {
            KafkaFormat::Json => self.json.write(r, out),
            KafkaFormat::Protobuf => crate::pb::encode_flow(r, iface, probe, out),
            KafkaFormat::ProtobufDelimited => {
                crate::pb::encode_flow_delimited(r, iface, probe, out)
            }
            KafkaFormat::Avro => crate::avro::encode_flow(r, iface, probe, out),
        }
    }

    /// Hands a message to librdkafka; when its queue is full, a file run waits for room and
    /// a live run spools the message (never waits).
    fn produce(&mut self, topic: &str, key: &[u8], value: &[u8], opaque: usize) {
        let (from, _) = origin(opaque);
        loop {
            let record = BaseRecord::with_opaque_to(topic, opaque)
                .key(key)
                .payload(value);
            match self.producer.send(record) {
                Ok(()) => return,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _))
                    if self.config.lossless =>
                {
                    // Room comes as messages are acknowledged or time out into the spool.
                    // Not `poll` with a timeout: rust-rdkafka's waits out the whole timeout
                    // even after a delivery report, and spins through its last millisecond
                    // (the remaining time rounds down to a 0 ms, non-blocking librdkafka
                    // poll): with 1 ms polls, a fifth of a file run's CPU. A millisecond's
                    // sleep, then the delivery reports: the room an acknowledgement frees
                    // (the queue is small: `producer_config`) is filled within it.
                    std::thread::sleep(Duration::from_millis(1));
                    self.producer.poll(Duration::ZERO);
                }
                Err((e, _)) => {
                    let mut st = self.producer.context().state();
                    st.error(&e);
                    match e.rdkafka_error_code().filter(|c| permanent(*c)) {
                        Some(code) => st.rejected(reason(code), from),
                        None => st.undelivered(topic, key, value, from),
                    }
                    return;
                }
            }
        }
    }

    /// Sends the oldest spool segment when none is being sent and the brokers answer; not
    /// knowing, once per timeout as a probe, and only while librdkafka holds no other message
    /// (with records flowing, their acknowledgements tell; and a probe segment, being sent,
    /// cannot be dropped, so probing while fresh messages still fail into a full spool would
    /// drop newer segments instead of the oldest).
    fn send_spool(&mut self) {
        let timeout = Duration::from_millis(u64::from(self.target.timeout_ms));
        let quiet = self.producer.in_flight_count() == 0;
        let healthy = self.producer.context().healthy();
        let taken = {
            let mut st = self.producer.context().state();
            if !st.sending.is_empty() {
                return;
            }
            if !healthy && (!quiet || self.probed_at.is_some_and(|t| t.elapsed() < timeout)) {
                return;
            }
            let Some(spool) = st.spool.as_mut() else {
                return;
            };
            if spool.pending() == 0 {
                return;
            }
            match spool.take_oldest(&[]) {
                Ok(Some((seq, entries))) if entries.is_empty() => {
                    let _ = spool.remove(seq);
                    return;
                }
                Ok(Some((seq, entries))) => {
                    st.sending.push(Sending {
                        seq,
                        left: entries.len() as u64,
                        failed: false,
                    });
                    (seq, entries)
                }
                Ok(None) => return,
                Err(e) => {
                    let what = format!("spool {}: {e}", spool.dir().display());
                    st.error(what);
                    return;
                }
            }
        };
        if !self.producer.context().healthy() {
            self.probed_at = Some(Instant::now());
        }
        let (seq, entries) = taken;
        for e in entries {
            self.produce(&e.topic, &e.key, &e.value, spooled(seq));
        }
    }

    /// Publishes the counters a live run shows while it goes.
    fn publish(&self) {
        let st = self.producer.context().state();
        let dropped =
            st.dropped + st.rejected_total() + st.spool.as_ref().map_or(0, |s| s.stats().dropped);
        self.shared.dropped_send.store(dropped, Ordering::Relaxed);
        if self.shared.send_errors.load(Ordering::Relaxed) != st.send_errors {
            self.shared
                .send_errors
                .store(st.send_errors, Ordering::Relaxed);
            if let Ok(mut e) = self.shared.last_error.lock() {
                e.clone_from(&st.last_error);
            }
        }
    }

    /// Waits for what is in flight (bounded by the timeout: what is not acknowledged by then
    /// is spooled), sends the spool while the brokers answer, and reports.
    fn finish(mut self) -> ExporterReport {
        let timeout = Duration::from_millis(u64::from(self.target.timeout_ms));
        // A message times out after `timeout`; a spool being sent may need a few of those.
        let deadline = Instant::now() + timeout * 3 + Duration::from_secs(1);
        loop {
            self.producer.poll(Duration::from_millis(50));
            self.send_spool();
            let st = self.producer.context().state();
            let pending = st.spool.as_ref().map_or(0, Spool::pending);
            let idle = self.producer.in_flight_count() == 0 && st.sending.is_empty();
            let healthy = self.producer.context().healthy();
            if idle && (pending == 0 || !healthy) || Instant::now() >= deadline {
                break;
            }
        }
        // What is still queued goes to the spool (its delivery reports say "purged").
        self.producer
            .purge(PurgeConfig::default().queue().inflight());
        self.producer.poll(Duration::from_millis(100));
        self.publish();
        let mut st = self.producer.context().state();
        if let Some(s) = st.spool.as_mut() {
            if let Err(e) = s.close() {
                let what = format!("spool {}: {e}", s.dir().display());
                st.error(what);
            }
        }
        let spool = st.spool.as_ref().map(|s| (s.stats(), s.pending()));
        let (stats, pending) = spool.unwrap_or_default();
        let delivery = self.producer.context();
        ExporterReport {
            messages: delivery.acked.load(Ordering::Relaxed),
            bytes: delivery.acked_bytes.load(Ordering::Relaxed),
            records_delivered: Some(delivery.acked_records.load(Ordering::Relaxed)),
            dropped_send: st.dropped + st.rejected_total() + stats.dropped,
            rejected: st.rejected_total(),
            rejected_reasons: std::mem::take(&mut st.rejected),
            send_errors: st.send_errors,
            last_error: st.last_error.clone(),
            spooled: stats.spooled,
            spool_dropped: stats.dropped,
            spool_resent: st.resent,
            spool_pending: pending,
            ..ExporterReport::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file run's producer lingers 250 ms, less when the timeout is short (librdkafka
    /// refuses a linger as long as the timeout); a live run's keeps 20 ms.
    #[test]
    fn lossless_producer_lingers_below_the_timeout() {
        let mut t: KafkaTarget = "kafka://127.0.0.1:9/t"
            .parse::<crate::Destination>()
            .map(|d| match d {
                crate::Destination::Kafka(k) => k,
                _ => unreachable!(),
            })
            .unwrap();
        assert_eq!(producer_config(&t, true).get("linger.ms"), Some("250"));
        assert_eq!(producer_config(&t, false).get("linger.ms"), Some("20"));
        t.timeout_ms = 300;
        assert_eq!(producer_config(&t, true).get("linger.ms"), Some("150"));
        t.timeout_ms = 1;
        assert_eq!(producer_config(&t, true).get("linger.ms"), Some("0"));
    }

    #[test]
    fn permanent_errors_are_those_that_blame_the_message_or_its_topic() {
        use RDKafkaErrorCode as C;
        for code in [
            C::MessageSizeTooLarge,
            C::UnknownTopic,
            C::UnknownTopicOrPartition,
            C::TopicAuthorizationFailed,
            C::InvalidRecord,
        ] {
            assert!(permanent(code), "{code:?}");
        }
        // Brokers down or slow, a leader moving, the end of a run: the message may still go.
        for code in [
            C::MessageTimedOut,
            C::AllBrokersDown,
            C::BrokerTransportFailure,
            C::QueueFull,
            C::NotLeaderForPartition,
            C::LeaderNotAvailable,
            C::NotEnoughReplicas,
            C::RequestTimedOut,
            C::PurgeQueue,
            C::PurgeInflight,
            C::Fatal,
        ] {
            assert!(!permanent(code), "{code:?}");
        }
    }
}
