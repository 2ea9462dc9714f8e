//! Exporters as components: each destination gets its own thread behind a bounded queue of
//! record batches, so a slow or absent collector never holds capture back; what does not fit
//! in the queue is dropped and counted.
//!
//! Producers (the capture workers, or the offline driver) hold an [`ExportHandle`]: records
//! are copied into a preallocated batch (payload bytes are not exported), a full batch is
//! offered to every exporter's queue with `try_send`, and the exporter hands emptied batches
//! back through a pool, so the steady state allocates nothing per record.
use std::io::{self, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_flow::{FeatureLevel, FlowRecord};
use trawl_series::SeriesRow;

use crate::destination::{Biflow, Destination, FeedAddr};
use crate::encode::{MessageEncoder, Protocol, TemplateRefresh};
use crate::v5::V5Encoder;
use crate::Error;

/// Settings shared by the exporters of a run.
#[derive(Clone, Debug)]
pub struct ExportConfig {
    /// Enterprise number of trawl's own elements.
    pub pen: u32,
    /// Largest UDP message (IPFIX, v9); TCP and files use 65535. `None`: what fits a 1500-byte
    /// MTU unfragmented for the destination's address family (see
    /// [`ExportConfig::udp_max_message_to`]).
    pub udp_max_message: Option<usize>,
    /// Template refresh on UDP.
    pub udp_refresh: TemplateRefresh,
    /// Records per batch handed to an exporter thread.
    pub batch_records: usize,
    /// Batches each exporter's queue holds before records are dropped.
    pub queue_batches: usize,
    /// A partly filled message waits at most this long.
    pub flush_interval: Duration,
    /// Wait for room in a full queue instead of dropping: for capture files, whose reading
    /// can always wait for the exporters. Live capture keeps this off, so that a slow
    /// collector costs counted drops and never stalls capture.
    pub lossless: bool,
    /// IPFIX over UDP: send trains of `udp_max_message`-byte messages with UDP segmentation
    /// offload (one send per train, cut into datagrams by the kernel or the NIC), messages
    /// padded to that size where the padding rule allows. Falls back to one datagram per
    /// message when the kernel refuses.
    pub udp_gso: bool,
    /// The feature level of the records: IPFIX biflows go under the level's templates and
    /// JSON lines have the level's fields (`docs/specs/ipfix.md`, `flow-record.md`).
    pub level: FeatureLevel,
}

/// Largest UDP payload in one 1500-byte Ethernet frame: the MTU minus the IP header (20 bytes for
/// IPv4, 40 for IPv6) and the 8-byte UDP header. A longer message would be fragmented (IPv4) or
/// refused by the sender's stack (IPv6 with segmentation offload, whose segments must fit).
pub const UDP_MAX_MESSAGE_V4: usize = 1472;
/// See [`UDP_MAX_MESSAGE_V4`].
pub const UDP_MAX_MESSAGE_V6: usize = 1452;

impl ExportConfig {
    /// The largest UDP message for a collector at `to`: the configured size, else the
    /// 1500-byte-MTU size of its address family.
    pub fn udp_max_message_to(&self, to: &SocketAddr) -> usize {
        self.udp_max_message.unwrap_or(if to.is_ipv4() {
            UDP_MAX_MESSAGE_V4
        } else {
            UDP_MAX_MESSAGE_V6
        })
    }
}

impl Default for ExportConfig {
    fn default() -> Self {
        ExportConfig {
            pen: crate::ie::DEFAULT_PEN,
            udp_max_message: None,
            udp_refresh: TemplateRefresh::UDP_DEFAULT,
            batch_records: 256,
            queue_batches: 256,
            flush_interval: Duration::from_millis(200),
            lossless: false,
            udp_gso: true,
            level: FeatureLevel::Full,
        }
    }
}

/// Counters of one exporter.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExporterReport {
    /// The destination, as given.
    pub destination: String,
    /// Flow records handed to this exporter.
    pub records: u64,
    /// Records dropped because its queue was full (collector slow or down).
    pub dropped_queue: u64,
    /// Records that could not be sent (connection refused or down, write error).
    pub dropped_send: u64,
    /// Messages (datagrams, framed messages, JSON chunks) written.
    pub messages: u64,
    /// Bytes written.
    pub bytes: u64,
    /// Kafka: flow records in the messages the brokers acknowledged as first produced (the
    /// records of a message resent from the spool are not counted: the spool keeps messages,
    /// not their records). `None` for the other exporters, which get no acknowledgement.
    pub records_delivered: Option<u64>,
    /// Send/write errors.
    pub send_errors: u64,
    /// The last send error, for the summary.
    pub last_error: Option<String>,
    /// IPFIX over UDP: the segment size while segmentation offload was on at the end.
    pub gso_segment: Option<u16>,
    /// Why segmentation offload was off or switched off, when it was asked for.
    pub gso_refused: Option<String>,
    /// Kafka: messages written to the spool (brokers down or slow to acknowledge).
    pub spooled: u64,
    /// Kafka: spooled messages dropped because the spool was full (also in `dropped_send`).
    pub spool_dropped: u64,
    /// Kafka: spooled messages sent and acknowledged (also in `messages`).
    pub spool_resent: u64,
    /// Kafka: messages left in the spool at the end, sent by the next run.
    pub spool_pending: u64,
    /// Kafka: messages refused for good (too large, unknown topic, not authorised...):
    /// dropped, not spooled (also in `dropped_send`).
    pub rejected: u64,
    /// Kafka: of `rejected`, how many for each reason (librdkafka's error), in the order
    /// first seen.
    pub rejected_reasons: Vec<(String, u64)>,
    /// Kafka: per-second series rows handed to this exporter (`series=`).
    pub series_rows: u64,
    /// Kafka: alarms handed to this exporter (`alarms=`).
    pub alarms: u64,
    /// Kafka: series rows and alarms dropped because its queue was full.
    pub dropped_extra: u64,
}

/// An alarm for exporters that send alarms: the packet time it refers to and the event as
/// one JSON object (what `trawl`'s writers print).
#[derive(Clone, Debug, PartialEq)]
pub struct Alarm {
    /// Packet time of the event (ns).
    pub ts_ns: u64,
    /// The event.
    pub json: serde_json::Value,
}

#[derive(Default)]
pub(crate) struct Counters {
    records: AtomicU64,
    dropped_queue: AtomicU64,
    series_rows: AtomicU64,
    alarms: AtomicU64,
    dropped_extra: AtomicU64,
    /// The exporter thread's own counters, published as they change so that a live run can
    /// report a collector that refuses or fails while it goes ([`ExportHub::snapshot`]).
    pub(crate) dropped_send: AtomicU64,
    pub(crate) send_errors: AtomicU64,
    pub(crate) last_error: Mutex<Option<String>>,
}

/// A batch of records of one observation domain.
pub(crate) struct Batch {
    domain: u32,
    slot: u16,
    /// The interface the records were metered on, when live (JSON names it per record).
    pub(crate) iface: Option<Arc<str>>,
    pub(crate) records: Vec<FlowRecord<'static>>,
}

/// What an exporter's thread receives: flow records, and for the exporters that send them
/// (Kafka's `series=` and `alarms=`), per-second rows and alarms.
// Without the `kafka` feature no exporter reads the rows and alarms (none is handed them).
#[cfg_attr(not(feature = "kafka"), allow(dead_code))]
pub(crate) enum Work {
    Flows(Batch),
    Series(Vec<SeriesRow>),
    Alarms(Vec<Alarm>),
}

pub(crate) type Pool = Arc<Mutex<Vec<Vec<FlowRecord<'static>>>>>;

#[derive(Clone)]
struct Lane {
    lossless: bool,
    /// The destination sends per-second rows, alarms.
    series: bool,
    alarms: bool,
    tx: SyncSender<Work>,
    pool: Pool,
    counters: Arc<Counters>,
}

/// The running exporters of a process.
pub struct ExportHub {
    lanes: Vec<Lane>,
    threads: Vec<(String, JoinHandle<ExporterReport>)>,
    counters: Vec<Arc<Counters>>,
    batch_records: usize,
}

/// A producer's side of every exporter (one per capture worker or driver thread).
pub struct ExportHandle {
    lanes: Vec<(Lane, Vec<FlowRecord<'static>>)>,
    domain: u32,
    slot: u16,
    iface: Option<Arc<str>>,
    batch_records: usize,
    last_flush: Instant,
    flush_interval: Duration,
}

fn wall_secs() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}

impl ExportHub {
    /// Opens every destination (files created, sockets bound; TCP connects lazily and
    /// retries) and starts one thread per destination.
    pub fn start(destinations: &[Destination], config: &ExportConfig) -> Result<ExportHub, Error> {
        let mut hub = ExportHub {
            lanes: Vec::new(),
            threads: Vec::new(),
            counters: Vec::new(),
            batch_records: config.batch_records.max(1),
        };
        for d in destinations {
            let (tx, rx) = mpsc::sync_channel::<Work>(config.queue_batches.max(1));
            let pool: Pool = Arc::new(Mutex::new(Vec::new()));
            let counters = Arc::new(Counters::default());
            let run = start_worker(d, config, pool.clone(), counters.clone())?;
            let name = d.to_string();
            let thread = std::thread::Builder::new()
                .name("export".into())
                .spawn(move || run(rx))
                .map_err(|e| Error::Io {
                    what: "cannot start an exporter thread".into(),
                    source: e,
                })?;
            let (series, alarms) = match d {
                Destination::Kafka(k) => (k.series_topic.is_some(), k.alarms_topic.is_some()),
                _ => (false, false),
            };
            hub.lanes.push(Lane {
                lossless: config.lossless,
                series,
                alarms,
                tx,
                pool,
                counters: counters.clone(),
            });
            hub.counters.push(counters);
            hub.threads.push((name, thread));
        }
        Ok(hub)
    }

    /// Whether any exporter runs.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// A producer handle whose records belong to observation domain `domain` (an
    /// interface), interface slot `slot` (which multicast group a feed uses).
    pub fn handle(&self, domain: u32, slot: u16, flush_interval: Duration) -> ExportHandle {
        ExportHandle {
            lanes: self
                .lanes
                .iter()
                .map(|l| (l.clone(), Vec::with_capacity(self.batch_records)))
                .collect(),
            domain,
            slot,
            iface: None,
            batch_records: self.batch_records,
            last_flush: Instant::now(),
            flush_interval,
        }
    }

    /// Whether any exporter sends per-second rows ([`ExportHub::push_series`]).
    pub fn takes_series(&self) -> bool {
        self.lanes.iter().any(|l| l.series)
    }

    /// Whether any exporter sends alarms ([`ExportHub::push_alarms`]).
    pub fn takes_alarms(&self) -> bool {
        self.lanes.iter().any(|l| l.alarms)
    }

    /// Hands per-second rows to every exporter that sends them (waiting for room when
    /// lossless, else dropped and counted when its queue is full).
    pub fn push_series(&self, rows: &[SeriesRow]) {
        for lane in self.lanes.iter().filter(|l| l.series && !rows.is_empty()) {
            let n = rows.len() as u64;
            lane.counters.series_rows.fetch_add(n, Ordering::Relaxed);
            lane.offer(Work::Series(rows.to_vec()), n);
        }
    }

    /// Hands alarms to every exporter that sends them (as [`ExportHub::push_series`]).
    pub fn push_alarms(&self, alarms: &[Alarm]) {
        for lane in self.lanes.iter().filter(|l| l.alarms && !alarms.is_empty()) {
            let n = alarms.len() as u64;
            lane.counters.alarms.fetch_add(n, Ordering::Relaxed);
            lane.offer(Work::Alarms(alarms.to_vec()), n);
        }
    }

    /// Records dropped so far because a queue was full, over all exporters.
    pub fn dropped(&self) -> u64 {
        self.counters
            .iter()
            .map(|c| c.dropped_queue.load(Ordering::Relaxed))
            .sum()
    }

    /// The counters of every exporter so far (what [`ExportHub::finish`] will report, minus
    /// what is still queued): for status lines while a live run goes.
    pub fn snapshot(&self) -> Vec<ExporterReport> {
        self.threads
            .iter()
            .zip(&self.counters)
            .map(|((name, _), c)| ExporterReport {
                destination: name.clone(),
                records: c.records.load(Ordering::Relaxed),
                dropped_queue: c.dropped_queue.load(Ordering::Relaxed),
                dropped_send: c.dropped_send.load(Ordering::Relaxed),
                send_errors: c.send_errors.load(Ordering::Relaxed),
                last_error: c.last_error.lock().ok().and_then(|e| e.clone()),
                ..ExporterReport::default()
            })
            .collect()
    }

    /// Waits for every exporter to send what it holds (all handles must be dropped or
    /// flushed first) and returns their counters.
    pub fn finish(self) -> Vec<ExporterReport> {
        drop(self.lanes);
        self.threads
            .into_iter()
            .zip(self.counters)
            .map(|((name, t), c)| {
                let mut r = t.join().unwrap_or_else(|_| ExporterReport {
                    last_error: Some("exporter thread panicked".into()),
                    ..ExporterReport::default()
                });
                r.destination = name;
                r.records = c.records.load(Ordering::Relaxed);
                r.dropped_queue = c.dropped_queue.load(Ordering::Relaxed);
                r.series_rows = c.series_rows.load(Ordering::Relaxed);
                r.alarms = c.alarms.load(Ordering::Relaxed);
                r.dropped_extra = c.dropped_extra.load(Ordering::Relaxed);
                r
            })
            .collect()
    }
}

/// The body of a destination's exporter thread, its sink opened.
type WorkerRun = Box<dyn FnOnce(mpsc::Receiver<Work>) -> ExporterReport + Send>;

impl Lane {
    /// Series rows or alarms (`n` of them) into the queue; counted when dropped.
    fn offer(&self, work: Work, n: u64) {
        let sent = if self.lossless {
            self.tx.send(work).is_ok()
        } else {
            self.tx.try_send(work).is_ok()
        };
        if !sent {
            self.counters.dropped_extra.fetch_add(n, Ordering::Relaxed);
        }
    }
}

fn start_worker(
    d: &Destination,
    config: &ExportConfig,
    pool: Pool,
    counters: Arc<Counters>,
) -> Result<WorkerRun, Error> {
    if let Destination::Kafka(k) = d {
        #[cfg(feature = "kafka")]
        {
            let w = crate::kafka::KafkaWorker::open(k, config, pool, counters)?;
            return Ok(Box::new(move |rx| w.run(rx)));
        }
        #[cfg(not(feature = "kafka"))]
        return Err(Error::BadDestination {
            text: format!("kafka://{}/{}", k.brokers, k.topic),
            why: "this trawl was built without Kafka support (cargo feature `kafka`)".into(),
        });
    }
    let sink = Sink::open(d, config)?;
    let worker = Worker::new(d, sink, config.clone(), pool, counters);
    Ok(Box::new(move |rx| worker.run(rx)))
}

impl ExportHandle {
    /// Names the interface this handle's records were captured on: JSON destinations write
    /// it as each record's `iface` field (IPFIX and NetFlow carry the interface as the
    /// observation domain).
    pub fn with_iface(mut self, name: &str) -> Self {
        self.iface = Some(name.into());
        self
    }

    /// Changes the interface of the records pushed from now on (see
    /// [`ExportHandle::with_iface`]); records pushed before leave first under the old one.
    pub fn set_iface(&mut self, name: Option<&str>) {
        if self.iface.as_deref() == name {
            return;
        }
        self.flush();
        self.iface = name.map(Arc::from);
    }

    /// Copies a record into every exporter's batch (payload bytes left out).
    #[inline]
    pub fn push(&mut self, r: &FlowRecord<'_>) {
        let owned = FlowRecord {
            fwd_payload: &[],
            rev_payload: &[],
            ..*r
        };
        let mut full = false;
        for (_, batch) in self.lanes.iter_mut() {
            batch.push(owned);
            full |= batch.len() >= self.batch_records;
        }
        if full {
            self.flush();
        }
    }

    /// Sends partly filled batches once the flush interval has passed (call it when idle).
    pub fn tick(&mut self) {
        if self.last_flush.elapsed() >= self.flush_interval {
            self.flush();
        }
    }

    /// Hands every non-empty batch to its exporter now.
    pub fn flush(&mut self) {
        self.last_flush = Instant::now();
        for (lane, batch) in self.lanes.iter_mut() {
            if batch.is_empty() {
                continue;
            }
            let n = batch.len() as u64;
            lane.counters.records.fetch_add(n, Ordering::Relaxed);
            let spare = lane
                .pool
                .lock()
                .ok()
                .and_then(|mut p| p.pop())
                .unwrap_or_else(|| Vec::with_capacity(self.batch_records));
            let records = std::mem::replace(batch, spare);
            let b = Batch {
                domain: self.domain,
                slot: self.slot,
                iface: self.iface.clone(),
                records,
            };
            let sent = if lane.lossless {
                lane.tx
                    .send(Work::Flows(b))
                    .map_err(|e| TrySendError::Disconnected(e.0))
            } else {
                lane.tx.try_send(Work::Flows(b))
            };
            match sent {
                Ok(()) => {}
                Err(TrySendError::Full(w) | TrySendError::Disconnected(w)) => {
                    lane.counters.dropped_queue.fetch_add(n, Ordering::Relaxed);
                    // Keep the allocation for the next batch.
                    if let Work::Flows(mut b) = w {
                        b.records.clear();
                        *batch = b.records;
                    }
                }
            }
        }
    }
}

impl Drop for ExportHandle {
    fn drop(&mut self) {
        self.flush();
    }
}

/// Where the encoded bytes go.
enum Sink {
    Udp {
        socket: UdpSocket,
        batch: crate::socket::SendBatch,
    },
    Feed {
        socket: UdpSocket,
        feed: FeedAddr,
    },
    Tcp {
        to: SocketAddr,
        stream: Option<TcpStream>,
        retry_at: Instant,
        /// Set when a (re)connection starts a new transport session.
        fresh: bool,
    },
    File(io::BufWriter<std::fs::File>),
    Stdout(io::Stdout),
}

impl Sink {
    fn open(d: &Destination, config: &ExportConfig) -> Result<Sink, Error> {
        let io_err = |what: String| move |e| Error::Io { what, source: e };
        Ok(match d {
            Destination::IpfixUdp(to, _)
            | Destination::Netflow9Udp(to)
            | Destination::Netflow5Udp(to) => {
                let bind: SocketAddr = if to.is_ipv4() {
                    "0.0.0.0:0".parse().expect("literal")
                } else {
                    "[::]:0".parse().expect("literal")
                };
                let socket = UdpSocket::bind(bind)
                    .map_err(io_err(format!("cannot open a UDP socket for {d}")))?;
                // Connected: the kernel resolves the route once instead of per datagram, and
                // a collector that is down shows as send errors (ICMP port unreachable).
                socket
                    .connect(to)
                    .map_err(io_err(format!("cannot open a UDP socket for {d}")))?;
                let batch = match (d, u16::try_from(config.udp_max_message_to(to))) {
                    (Destination::IpfixUdp(..), Ok(seg)) if config.udp_gso => {
                        crate::socket::SendBatch::with_gso(&socket, seg)
                    }
                    _ => crate::socket::SendBatch::default(),
                };
                Sink::Udp { socket, batch }
            }
            Destination::Feed(feed) => Sink::Feed {
                socket: crate::feed::sender_socket(feed)?,
                feed: *feed,
            },
            Destination::IpfixTcp(to, _) | Destination::JsonTcp(to) => Sink::Tcp {
                to: *to,
                stream: None,
                retry_at: Instant::now(),
                fresh: false,
            },
            Destination::IpfixFile(p, _) | Destination::JsonFile(p) => {
                let f = std::fs::File::create(p)
                    .map_err(io_err(format!("cannot create {}", p.display())))?;
                Sink::File(io::BufWriter::with_capacity(1 << 20, f))
            }
            Destination::JsonStdout => Sink::Stdout(io::stdout()),
            Destination::Kafka(_) => unreachable!("Kafka has its own exporter (start_worker)"),
        })
    }

    /// Whether bytes can go out now (TCP: connected, or reconnected after a pause; `Ok(false)`
    /// while waiting to retry, the error of a connection attempt that failed).
    fn ready(&mut self) -> io::Result<bool> {
        match self {
            Sink::Tcp {
                to,
                stream,
                retry_at,
                fresh,
            } => {
                if stream.is_some() {
                    return Ok(true);
                }
                if Instant::now() < *retry_at {
                    return Ok(false);
                }
                match TcpStream::connect_timeout(to, Duration::from_secs(1)) {
                    Ok(s) => {
                        let _ = s.set_nodelay(true);
                        // A collector that stops reading fails the write after this long
                        // (the connection is dropped and retried) instead of holding a
                        // lossless exporter, and so a file run, forever.
                        let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
                        *stream = Some(s);
                        *fresh = true;
                        Ok(true)
                    }
                    Err(e) => {
                        *retry_at = Instant::now() + Duration::from_secs(1);
                        Err(io::Error::new(
                            e.kind(),
                            format!("cannot connect to {to}: {e}"),
                        ))
                    }
                }
            }
            _ => Ok(true),
        }
    }

    /// The segment size while UDP segmentation offload is on.
    fn gso_segment(&self) -> Option<u16> {
        match self {
            Sink::Udp { batch, .. } => batch.gso_segment(),
            _ => None,
        }
    }

    fn take_fresh(&mut self) -> bool {
        match self {
            Sink::Tcp { fresh, .. } => std::mem::take(fresh),
            _ => false,
        }
    }

    fn send(&mut self, bytes: &[u8], slot: u16) -> io::Result<()> {
        match self {
            Sink::Udp { socket, batch } => batch.push(socket, bytes).map_err(|(_, e)| e),
            Sink::Feed { socket, feed } => socket
                .send_to(bytes, (feed.group_for(slot), feed.port))
                .map(|_| ()),
            Sink::Tcp { stream, .. } => {
                let Some(s) = stream.as_mut() else {
                    return Err(io::Error::new(io::ErrorKind::NotConnected, "not connected"));
                };
                let r = s.write_all(bytes);
                if r.is_err() {
                    *stream = None;
                }
                r
            }
            Sink::File(f) => f.write_all(bytes),
            Sink::Stdout(o) => o.lock().write_all(bytes),
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        match self {
            Sink::Udp { socket, batch } => batch.flush(socket).map_err(|(_, e)| e),
            Sink::File(f) => f.flush(),
            Sink::Stdout(o) => o.flush(),
            Sink::Tcp {
                stream: Some(s), ..
            } => s.flush(),
            _ => Ok(()),
        }
    }
}

enum Encoding {
    /// IPFIX or v9, one encoder per observation domain.
    Messages {
        protocol: Protocol,
        max_message: usize,
        refresh: TemplateRefresh,
        /// IPFIX `biflow=off`: each biflow as two one-way records.
        one_way: bool,
        encoders: Vec<(u32, u16, MessageEncoder)>,
    },
    V5(Vec<(u32, u16, V5Encoder)>),
    Json {
        writer: RecordWriter,
        buf: Vec<u8>,
    },
}

struct Worker {
    sink: Sink,
    encoding: Encoding,
    config: ExportConfig,
    pool: Pool,
    report: ExporterReport,
    /// Where `report`'s error counters are published while the run goes.
    shared: Arc<Counters>,
    last_flush: Instant,
}

struct Emit<'a> {
    sink: &'a mut Sink,
    report: &'a mut ExporterReport,
    slot: u16,
}

impl Emit<'_> {
    fn send(&mut self, bytes: &[u8]) {
        match self.sink.send(bytes, self.slot) {
            Ok(()) => {
                self.report.messages += 1;
                self.report.bytes += bytes.len() as u64;
            }
            Err(e) => {
                self.report.send_errors += 1;
                self.report.last_error = Some(e.to_string());
            }
        }
    }
}

impl Worker {
    fn new(
        d: &Destination,
        sink: Sink,
        config: ExportConfig,
        pool: Pool,
        shared: Arc<Counters>,
    ) -> Worker {
        let encoding = match d {
            Destination::IpfixUdp(to, biflow) => Encoding::Messages {
                protocol: Protocol::Ipfix,
                max_message: config.udp_max_message_to(to),
                refresh: config.udp_refresh,
                one_way: *biflow == Biflow::Off,
                encoders: Vec::new(),
            },
            Destination::Netflow9Udp(to) => Encoding::Messages {
                protocol: Protocol::NetflowV9,
                max_message: config.udp_max_message_to(to),
                refresh: config.udp_refresh,
                one_way: false,
                encoders: Vec::new(),
            },
            // Feeds are IPv4 multicast.
            Destination::Feed(_) => Encoding::Messages {
                protocol: Protocol::Ipfix,
                max_message: config.udp_max_message.unwrap_or(UDP_MAX_MESSAGE_V4),
                refresh: TemplateRefresh::FEED,
                one_way: false,
                encoders: Vec::new(),
            },
            Destination::IpfixTcp(_, biflow) | Destination::IpfixFile(_, biflow) => {
                Encoding::Messages {
                    protocol: Protocol::Ipfix,
                    max_message: 65_535,
                    refresh: TemplateRefresh::Once,
                    one_way: *biflow == Biflow::Off,
                    encoders: Vec::new(),
                }
            }
            Destination::Netflow5Udp(_) => Encoding::V5(Vec::new()),
            Destination::JsonFile(_)
            | Destination::JsonStdout
            | Destination::JsonTcp(_)
            | Destination::Kafka(_) => Encoding::Json {
                writer: RecordWriter::new(RecordFormat::Json, false).with_features(config.level),
                buf: Vec::with_capacity(1 << 17),
            },
        };
        Worker {
            sink,
            encoding,
            config,
            pool,
            report: ExporterReport::default(),
            shared,
            last_flush: Instant::now(),
        }
    }

    /// Publishes the counters of records not sent and errors, when they changed.
    fn publish(&self) {
        let r = &self.report;
        self.shared
            .dropped_send
            .store(r.dropped_send, Ordering::Relaxed);
        if self.shared.send_errors.load(Ordering::Relaxed) != r.send_errors {
            self.shared
                .send_errors
                .store(r.send_errors, Ordering::Relaxed);
            if let Ok(mut e) = self.shared.last_error.lock() {
                e.clone_from(&r.last_error);
            }
        }
    }

    fn run(mut self, rx: mpsc::Receiver<Work>) -> ExporterReport {
        loop {
            match rx.recv_timeout(self.config.flush_interval) {
                // Only Kafka destinations are handed series rows and alarms.
                Ok(Work::Series(_) | Work::Alarms(_)) => {}
                Ok(Work::Flows(mut batch)) => {
                    self.encode(&batch);
                    batch.records.clear();
                    if let Ok(mut p) = self.pool.lock() {
                        p.push(batch.records);
                    }
                    if self.last_flush.elapsed() >= self.config.flush_interval {
                        self.flush();
                    }
                }
                Err(RecvTimeoutError::Timeout) => self.flush(),
                Err(RecvTimeoutError::Disconnected) => break,
            }
            self.publish();
        }
        self.flush();
        if let Err(e) = self.sink.finish() {
            self.report.send_errors += 1;
            self.report.last_error = Some(e.to_string());
        }
        if let Sink::Udp { batch, .. } = &self.sink {
            self.report.gso_segment = batch.gso_segment();
            self.report.gso_refused = batch.gso_refused().map(|e| e.to_string());
        }
        self.report
    }

    fn encode(&mut self, batch: &Batch) {
        match self.sink.ready() {
            Ok(true) => {}
            Ok(false) => {
                self.report.dropped_send += batch.records.len() as u64;
                return;
            }
            Err(e) => {
                self.report.dropped_send += batch.records.len() as u64;
                self.report.send_errors += 1;
                self.report.last_error = Some(e.to_string());
                return;
            }
        }
        let fresh = self.sink.take_fresh();
        let now = wall_secs();
        let pen = self.config.pen;
        let level = self.config.level;
        let Worker {
            sink,
            encoding,
            report,
            ..
        } = self;
        let mut emit = Emit {
            sink,
            report,
            slot: batch.slot,
        };
        match encoding {
            Encoding::Messages {
                protocol,
                max_message,
                refresh,
                one_way,
                encoders,
            } => {
                if fresh {
                    for (_, _, e) in encoders.iter_mut() {
                        e.reset_session();
                    }
                }
                let i = match encoders
                    .iter()
                    .position(|(d, s, _)| *d == batch.domain && *s == batch.slot)
                {
                    Some(i) => i,
                    None => {
                        encoders.push((
                            batch.domain,
                            batch.slot,
                            if *one_way {
                                MessageEncoder::one_way_flows(
                                    batch.domain,
                                    pen,
                                    *max_message,
                                    *refresh,
                                )
                            } else {
                                MessageEncoder::flows(
                                    *protocol,
                                    batch.domain,
                                    pen,
                                    *max_message,
                                    *refresh,
                                )
                                .with_level(level)
                            },
                        ));
                        encoders.len() - 1
                    }
                };
                let enc = &mut encoders[i].2;
                // Full-size messages travel in segmented trains; if the kernel refused
                // offload, padding would only cost bytes.
                let seg = emit.sink.gso_segment().map(usize::from);
                enc.set_fill(seg == Some(enc.max_message()));
                let mut f = |m: &[u8]| emit.send(m);
                for r in &batch.records {
                    enc.add_flow(r, now, &mut f);
                }
            }
            Encoding::V5(encoders) => {
                let i = match encoders
                    .iter()
                    .position(|(d, s, _)| *d == batch.domain && *s == batch.slot)
                {
                    Some(i) => i,
                    None => {
                        encoders.push((
                            batch.domain,
                            batch.slot,
                            V5Encoder::new(batch.domain as u8),
                        ));
                        encoders.len() - 1
                    }
                };
                let enc = &mut encoders[i].2;
                let mut f = |m: &[u8]| emit.send(m);
                for r in &batch.records {
                    enc.add_flow(r, &mut f);
                }
            }
            Encoding::Json { writer, buf } => {
                writer.name_iface(batch.iface.as_deref());
                for r in &batch.records {
                    writer.write(r, buf);
                }
                if buf.len() >= 1 << 16 {
                    emit.send(buf);
                    buf.clear();
                }
            }
        }
    }

    fn flush(&mut self) {
        self.last_flush = Instant::now();
        let now = wall_secs();
        let Worker {
            sink,
            encoding,
            report,
            ..
        } = self;
        match encoding {
            Encoding::Messages { encoders, .. } => {
                for (_, slot, e) in encoders.iter_mut() {
                    if e.has_pending() {
                        let mut emit = Emit {
                            sink,
                            report,
                            slot: *slot,
                        };
                        e.flush(now, &mut |m: &[u8]| emit.send(m));
                    }
                }
            }
            Encoding::V5(encoders) => {
                for (_, slot, e) in encoders.iter_mut() {
                    let mut emit = Emit {
                        sink,
                        report,
                        slot: *slot,
                    };
                    e.flush(&mut |m: &[u8]| emit.send(m));
                }
            }
            Encoding::Json { buf, .. } => {
                if !buf.is_empty() {
                    let mut emit = Emit {
                        sink,
                        report,
                        slot: 0,
                    };
                    emit.send(buf);
                    buf.clear();
                }
            }
        }
        if let Err(e) = sink.finish() {
            report.send_errors += 1;
            report.last_error = Some(e.to_string());
        }
    }
}
