//! `trawl collect`: IPFIX and NetFlow v5/v9 in (UDP datagrams, or IPFIX files), trawl flow
//! records out. One trawl can so be the collector of others, of routers and of softflowd.
use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use trawl_export::{DecodeError, DecodeErrorKind, Decoder, DecoderConfig, DecoderStats, Item};
use trawl_flow::format::{RecordFormat, RecordWriter};

use crate::args::{count_in, parse_duration_ns, parse_size, OutputFormat, SummaryFormat};
use crate::db_retention::DbRetention;
use crate::run::Output;

#[derive(Args, Debug)]
pub struct CollectArgs {
    /// Receive on this address: udp://HOST:PORT (IPFIX, NetFlow v9 and v5 on one port) or
    /// tcp://HOST:PORT (IPFIX over TCP); repeat for several.
    #[arg(long, value_name = "URL", required_unless_present = "read")]
    pub listen: Vec<String>,
    /// Decode an IPFIX file (RFC 5655: messages back to back, as `--export ipfix:PATH`
    /// writes) instead of listening; repeat for several.
    #[arg(
        short = 'r',
        long = "read",
        value_name = "FILE",
        conflicts_with = "listen"
    )]
    pub read: Vec<PathBuf>,
    /// Output file (`-` for standard output).
    #[arg(short = 'o', long = "output", value_name = "PATH", default_value = "-")]
    pub output: PathBuf,
    /// Output format: JSON lines, or CSV with a header line.
    #[arg(long, value_enum, default_value_t = OutputFormat::Json)]
    pub format: OutputFormat,
    /// Decode and count only, write no records (benchmarks; checking what an exporter sends).
    #[arg(long = "no-output")]
    pub no_output: bool,
    /// Stop after this many flow records.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Stop after this long (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub duration: Option<u64>,
    /// Private Enterprise Number whose elements are read as trawl's own.
    #[arg(long, value_name = "N", default_value_t = trawl_export::ie::DEFAULT_PEN)]
    pub pen: u32,
    /// Most templates kept over all exporters (a bound against template floods), 1 to 1048576.
    #[arg(long = "max-templates", value_name = "N", default_value = "4096", value_parser = count_in(MAX_TEMPLATES))]
    pub max_templates: usize,
    /// Also store the records in this flow database (`trawl query -d DIR`), one interface per
    /// exporter and observation domain (`exp-ADDRESS-DOMAIN`).
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Flow database retention: delete days older than this many days (checked every minute
    /// and at the end).
    #[arg(long = "db-keep-days", value_name = "DAYS", requires = "db")]
    pub db_keep_days: Option<u32>,
    /// Flow database retention: delete the oldest blocks beyond this size (e.g. `50GiB`).
    #[arg(long = "db-max-size", value_name = "SIZE", value_parser = parse_size, requires = "db")]
    pub db_max_size: Option<usize>,
    /// UDP: after a receive that emptied the socket queues, wait this long before the next
    /// one, so that datagrams arriving one by one are read in batches rather than with a
    /// wake-up each (adds at most this much latency); only while the waits do gather several
    /// arrivals (not for trains, nor a slow trickle); 0 to read each as it comes.
    #[arg(long = "recv-wait", value_name = "DURATION", value_parser = parse_duration_ns, default_value = "1ms")]
    pub recv_wait: u64,
    /// Summary on standard error at the end.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
}

/// `--max-templates`: 0 would decode nothing.
const MAX_TEMPLATES: trawl_time::Limit =
    trawl_time::Limit::new("max_templates", trawl_time::Unit::Count, 1, 1 << 20);

/// Collected records on their way into the flow database.
struct CollectStore {
    ingest: trawl_store::Ingest,
    ids: std::collections::HashMap<(std::net::IpAddr, u32), trawl_store::IfaceId>,
    /// Latest record end seen: the store's clock (exporters' clocks, not ours).
    clock: u64,
    failed: Option<String>,
}

impl CollectStore {
    /// The database interface of an exporter's observation domain: `exp-ADDRESS-DOMAIN`, with
    /// an IPv6 address's `:` written as `_` (interface names are `[A-Za-z0-9._-]`).
    fn iface(&mut self, o: &trawl_export::Origin) -> Option<trawl_store::IfaceId> {
        let key = (o.exporter.ip(), o.domain);
        if let Some(id) = self.ids.get(&key) {
            return Some(*id);
        }
        let name = format!("exp-{}-{}", key.0, key.1).replace(':', "_");
        match self.ingest.iface(&name) {
            Ok(id) => {
                self.ids.insert(key, id);
                Some(id)
            }
            Err(e) => {
                self.failed.get_or_insert(format!("flow database: {e}"));
                None
            }
        }
    }

    fn push(&mut self, o: &trawl_export::Origin, r: trawl_store::StoredFlow) {
        if self.failed.is_some() {
            return;
        }
        let Some(id) = self.iface(o) else { return };
        self.clock = self.clock.max(r.last_ns);
        if let Err(e) = self.ingest.push_row(id, r) {
            self.failed = Some(format!("flow database: {e}"));
        }
    }
}

/// Records of one batch for the store thread, with where each came from: only the
/// database's columns (a fifth of a whole record's bytes to copy through the queue).
type StoreBatch = Vec<(trawl_export::Origin, trawl_store::StoredFlow)>;

/// Records handed over per batch.
const STORE_BATCH: usize = 1024;
/// Batches the store thread may lag behind (about 20 MB of rows) before the receiving
/// thread waits for it: enough to ride out a block write without leaving the socket unread.
const STORE_QUEUE: usize = 128;

/// The flow database on its own thread: block writes (sort, encode, compress, fsync) took
/// the receiving thread away from its socket for longer than the receive buffer lasts.
struct StoreFeed {
    tx: Option<mpsc::SyncSender<StoreBatch>>,
    /// Emptied batches coming back.
    spare: mpsc::Receiver<StoreBatch>,
    batch: StoreBatch,
    thread: std::thread::JoinHandle<(CollectStore, Option<String>)>,
}

impl StoreFeed {
    fn start(mut st: CollectStore) -> Result<StoreFeed> {
        let (tx, rx) = mpsc::sync_channel::<StoreBatch>(STORE_QUEUE);
        let (back, spare) = mpsc::sync_channel::<StoreBatch>(STORE_QUEUE + 2);
        let thread = std::thread::Builder::new()
            .name("collect-store".into())
            .spawn(move || {
                for mut batch in rx {
                    for (o, r) in batch.drain(..) {
                        st.push(&o, r);
                    }
                    // Blocks whose interval (plus the grace time) the exporters' clocks have
                    // passed.
                    if st.failed.is_none() {
                        if let Err(e) = st.ingest.advance(st.clock) {
                            st.failed = Some(format!("flow database: {e}"));
                        }
                    }
                    let _ = back.try_send(batch);
                }
                let failed = st.failed.clone();
                (st, failed)
            })
            .context("cannot start the flow database's thread")?;
        Ok(StoreFeed {
            tx: Some(tx),
            spare,
            batch: Vec::with_capacity(STORE_BATCH),
            thread,
        })
    }

    fn push(&mut self, o: &trawl_export::Origin, r: &trawl_flow::FlowRecord<'static>) {
        self.batch.push((*o, trawl_store::StoredFlow::from(r)));
        if self.batch.len() >= STORE_BATCH {
            self.send();
        }
    }

    /// Hands over what is gathered (waits when the thread is a whole queue behind).
    fn send(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        let next = self
            .spare
            .try_recv()
            .unwrap_or_else(|_| Vec::with_capacity(STORE_BATCH));
        let batch = std::mem::replace(&mut self.batch, next);
        if let Some(tx) = &self.tx {
            // A send fails only if the thread ended (panicked): `finish` reports it.
            let _ = tx.send(batch);
        }
    }

    /// Everything handed over and stored; the store and its first error.
    fn finish(mut self) -> Result<(CollectStore, Option<String>)> {
        self.send();
        drop(self.tx.take());
        self.thread
            .join()
            .map_err(|_| anyhow::anyhow!("the flow database's thread panicked"))
    }
}

/// How UDP datagrams arrived.
#[derive(Default)]
struct UdpCounts {
    /// recvmmsg calls that returned datagrams.
    receives: u64,
    /// Datagrams (a train counts each of its datagrams).
    datagrams: u64,
    /// UDP_GRO trains among the received buffers.
    trains: u64,
}

/// Up to this many decode errors are listed in the summary (all are counted).
const ERRORS_LISTED: usize = 20;

struct Collected {
    decoder: Decoder,
    writer: RecordWriter,
    out: Output,
    errors: Vec<String>,
    records: u64,
    limit: u64,
    udp: UdpCounts,
    write: bool,
    store: Option<StoreFeed>,
}

/// Where a message came from, as its errors name it: the exporter's address, or the file and
/// the message's byte offset in it (a file has no exporter address to name).
#[derive(Clone, Copy)]
enum Source<'a> {
    Peer(SocketAddr),
    File(&'a Path, u64),
}

impl Source<'_> {
    /// The exporter address the decoder keys templates by: files get a fixed one, which keeps
    /// their templates apart from the network's.
    fn exporter(self) -> SocketAddr {
        match self {
            Source::Peer(a) => a,
            Source::File(..) => SocketAddr::from(([0, 0, 0, 0], 0)),
        }
    }

    /// The decode error as the summary lists it.
    fn describe(self, e: &DecodeError) -> String {
        match self {
            Source::Peer(_) => e.to_string(),
            Source::File(path, message) => format!(
                "{}: offset {}: {} ({}), in the message at offset {message}",
                path.display(),
                message + e.offset as u64,
                e.kind.name(),
                e.detail
            ),
        }
    }
}

impl Collected {
    fn message(&mut self, source: Source<'_>, bytes: &[u8]) {
        let Collected {
            decoder,
            writer,
            out,
            records,
            limit,
            write,
            store,
            ..
        } = self;
        let (_, err) = decoder.decode(source.exporter(), bytes, &mut |origin, item| {
            if let Item::Flow(r) = item {
                if *records < *limit {
                    if *write {
                        writer.write(r, out.buf());
                    }
                    if let Some(st) = store.as_mut() {
                        st.push(origin, r);
                    }
                    *records += 1;
                }
            }
        });
        out.maybe_flush();
        if let Some(e) = err {
            self.note(source.describe(&e));
        }
    }

    fn note(&mut self, e: String) {
        if self.errors.len() < ERRORS_LISTED {
            self.errors.push(e);
        }
    }
}

pub fn run(a: &CollectArgs) -> Result<ExitCode> {
    let format = match a.format {
        OutputFormat::Json => RecordFormat::Json,
        OutputFormat::Csv => RecordFormat::Csv,
    };
    let writer = RecordWriter::new(format, false);
    let mut c = Collected {
        decoder: Decoder::new(DecoderConfig {
            pen: a.pen,
            max_templates: a.max_templates,
        }),
        writer,
        out: Output::new(crate::args::open_output(&a.output)?),
        errors: Vec::new(),
        records: 0,
        udp: UdpCounts::default(),
        limit: a.count.unwrap_or(u64::MAX),
        write: !a.no_output,
        store: match &a.db {
            Some(db) => Some(StoreFeed::start(CollectStore {
                ingest: trawl_store::Ingest::open(db, trawl_store::StoreConfig::default())
                    .with_context(|| format!("cannot open the flow database {}", db.display()))?,
                ids: Default::default(),
                clock: 0,
                failed: None,
            })?),
            None => None,
        },
    };
    let retention = a.db.as_ref().map(|db| {
        DbRetention::start(
            db.clone(),
            trawl_store::Retention {
                max_age_days: a.db_keep_days,
                max_bytes: a.db_max_size.map(|b| b as u64),
            },
        )
    });
    c.writer.write_header(c.out.buf());
    let started = Instant::now();
    let mut input_failed = false;
    if !a.read.is_empty() {
        for path in &a.read {
            match read_file(&mut c, path) {
                Ok(damaged) => input_failed |= damaged,
                Err(e) => {
                    input_failed = true;
                    c.note(format!("{e:#}"));
                }
            }
        }
    } else {
        let mut sockets = Vec::new();
        // IPFIX over TCP: each connection's messages arrive here from its reader thread.
        let (tcp_tx, tcp_rx) = mpsc::sync_channel::<TcpEvent>(1024);
        let mut tcp = false;
        for l in &a.listen {
            if let Some(addr) = l.strip_prefix("tcp://") {
                let listener =
                    TcpListener::bind(addr).with_context(|| format!("cannot listen on {l}"))?;
                let tx = tcp_tx.clone();
                std::thread::Builder::new()
                    .name("collect-accept".into())
                    .spawn(move || accept_loop(listener, tx))
                    .context("cannot start the TCP listener")?;
                tcp = true;
                continue;
            }
            let Some(addr) = l.strip_prefix("udp://") else {
                bail!("--listen {l}: expected udp://HOST:PORT or tcp://HOST:PORT");
            };
            let bind = addr
                .to_socket_addrs()
                .ok()
                .and_then(|mut a| a.next())
                .with_context(|| format!("--listen {l}: not an address"))?;
            // A large receive buffer absorbs exporters' bursts (capped by net.core.rmem_max).
            let s = trawl_export::socket::udp_socket(
                bind,
                false,
                Some(trawl_export::socket::RECV_BUFFER),
            )
            .with_context(|| format!("cannot listen on {l}"))?;
            // Datagrams of one sender may come in trains (Linux 5.0; older kernels refuse
            // and send them one by one, which works as well).
            let _ = trawl_export::socket::set_udp_gro(&s, true);
            sockets.push(s);
        }
        drop(tcp_tx);
        let single = sockets.len() == 1 && !tcp;
        for s in &sockets {
            // One socket blocks in recv (the stop flag is seen within the timeout); several
            // are polled.
            if single {
                s.set_read_timeout(Some(Duration::from_millis(100)))?;
            } else {
                s.set_nonblocking(true)?;
            }
        }
        let stop = crate::install_stop_signals()?;
        let deadline = a.duration.map(|d| started + Duration::from_nanos(d));
        // recvmmsg: up to RECV_BATCH datagrams per system call (one recvfrom per datagram
        // cost more than decoding it).
        let mut batch = trawl_export::socket::RecvBatch::new(trawl_export::socket::RECV_BATCH);
        let nowhere: SocketAddr = "0.0.0.0:0".parse().expect("literal");
        let recv_wait = Duration::from_nanos(a.recv_wait);
        // Waiting pays off only when datagrams arrive one by one faster than the wait: a wait
        // then gathers many arrivals into one receive. Trains (UDP_GRO) or a slow trickle
        // arrive as one receive per wake-up anyway, and a wait would only add a timer wake-up
        // per arrival. So: wait while the waits gather more than one arrival; else block in
        // the receive until arrivals come closer together than a quarter of the wait.
        let mut gather = true;
        let mut slept = false;
        let mut last_wake = Instant::now();
        'outer: loop {
            let mut idle = true;
            // Receives (a train counts once) of this round.
            let mut arrivals = 0usize;
            // Whether every socket's queue was emptied by a batch that was not full.
            let mut drained = true;
            for s in &sockets {
                // At most about this many datagrams per socket before the stop flag and the
                // deadline are looked at again.
                let mut taken = 0;
                while taken < 1024 {
                    match batch.recv(s) {
                        Ok(n) => {
                            idle = false;
                            arrivals += n;
                            taken += n;
                            c.udp.receives += 1;
                            for i in 0..n {
                                let (bytes, from) = batch.get(i);
                                let from = from.unwrap_or(nowhere);
                                // A UDP_GRO train: datagrams of one size back to back.
                                let seg = match batch.segment(i) {
                                    Some(seg) => {
                                        c.udp.trains += 1;
                                        seg
                                    }
                                    None => bytes.len().max(1),
                                };
                                for datagram in bytes.chunks(seg) {
                                    c.udp.datagrams += 1;
                                    c.message(Source::Peer(from), datagram);
                                    if c.records >= c.limit || c.out.failed() {
                                        break 'outer;
                                    }
                                }
                            }
                            if n < trawl_export::socket::RECV_BATCH {
                                break;
                            }
                            drained = false;
                        }
                        Err(e)
                            if e.kind() == std::io::ErrorKind::WouldBlock
                                || e.kind() == std::io::ErrorKind::TimedOut =>
                        {
                            break
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e).context("receiving"),
                    }
                }
            }
            while let Ok(event) = tcp_rx.try_recv() {
                idle = false;
                match event {
                    TcpEvent::Message(from, bytes) => c.message(Source::Peer(from), &bytes),
                    TcpEvent::Closed(from, Some(e)) => c.note(format!("TCP exporter {from}: {e}")),
                    TcpEvent::Closed(_, None) => {}
                }
                if c.records >= c.limit || c.out.failed() {
                    break 'outer;
                }
            }
            if stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            if idle {
                c.out.flush();
                if let Some(st) = c.store.as_mut() {
                    st.send();
                }
                if !single {
                    std::thread::sleep(Duration::from_micros(200));
                }
            } else {
                let now = Instant::now();
                if gather && slept && arrivals <= 1 {
                    gather = false;
                } else if !gather && now.duration_since(last_wake) < recv_wait / 4 {
                    gather = true;
                }
                last_wake = now;
                slept = false;
                if gather && drained && !recv_wait.is_zero() {
                    // The queues are empty but datagrams are flowing: let them gather for a
                    // moment instead of waking up for each one (the kernel's buffer holds
                    // thousands), so that each receive takes a batch.
                    std::thread::sleep(recv_wait);
                    slept = true;
                }
            }
        }
    }
    let Collected {
        decoder,
        out,
        mut errors,
        records,
        store,
        udp,
        ..
    } = c;
    out.finish()?;
    let mut store_failed = false;
    let mut stored = None;
    if let Some(feed) = store {
        let (st, failed) = feed.finish()?;
        let finished = st.ingest.finish();
        match (failed, finished) {
            (None, Ok(stats)) => {
                if a.summary == SummaryFormat::Text {
                    eprintln!(
                        "trawl collect: {} records stored in {} blocks ({} spanning blocks, \
                         stored by their first packet)",
                        stats.records, stats.blocks, stats.records_spanning
                    );
                }
                stored = Some(stats);
            }
            (Some(e), _) => {
                store_failed = true;
                errors.push(e);
            }
            (None, Err(e)) => {
                store_failed = true;
                errors.push(format!("flow database: {e}"));
            }
        }
    }
    // After the last blocks: one more pass, then the totals.
    let retained = retention.map(DbRetention::finish);
    if let Some((out, errs)) = &retained {
        if a.summary == SummaryFormat::Text && out.blocks_deleted > 0 {
            eprintln!(
                "trawl collect: retention deleted {} blocks ({} bytes)",
                out.blocks_deleted, out.bytes_deleted
            );
        }
        if !errs.is_empty() {
            store_failed = true;
            errors.extend(errs.iter().cloned());
        }
    }
    print_summary(
        a.summary,
        decoder.stats(),
        records,
        &errors,
        started.elapsed(),
        stored.as_ref().map(|st| (st, retained.as_ref())),
        &udp,
    );
    Ok(
        if input_failed || store_failed || decoder.stats().total_errors() > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}

/// What a TCP exporter's reader thread passes to the main loop.
enum TcpEvent {
    /// One whole IPFIX message.
    Message(SocketAddr, Vec<u8>),
    /// The connection ended (with the framing error, if any).
    Closed(SocketAddr, Option<String>),
}

fn accept_loop(listener: TcpListener, tx: mpsc::SyncSender<TcpEvent>) {
    for conn in listener.incoming() {
        let Ok(stream) = conn else { continue };
        let tx = tx.clone();
        let _ = std::thread::Builder::new()
            .name("collect-tcp".into())
            .spawn(move || read_stream(stream, tx));
    }
}

/// Reads IPFIX messages off a TCP connection (RFC 7011 10.4: each framed by its header's
/// length). A message that is not IPFIX ends the connection: the stream cannot be re-framed.
fn read_stream(mut stream: TcpStream, tx: mpsc::SyncSender<TcpEvent>) {
    let from = stream
        .peer_addr()
        .unwrap_or_else(|_| "0.0.0.0:0".parse().expect("literal"));
    let mut offset = 0u64;
    let error = loop {
        let mut header = [0u8; 4];
        match stream.read_exact(&mut header) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break None,
            Err(e) => break Some(format!("offset {offset}: {e}")),
        }
        let version = u16::from_be_bytes([header[0], header[1]]);
        let len = usize::from(u16::from_be_bytes([header[2], header[3]]));
        if version != 10 || len < 16 {
            break Some(format!(
                "offset {offset}: not an IPFIX message header (version {version}, length {len})"
            ));
        }
        let mut msg = vec![0u8; len];
        msg[..4].copy_from_slice(&header);
        if let Err(e) = stream.read_exact(&mut msg[4..]) {
            break Some(format!(
                "offset {offset}: message of {len} bytes cut short: {e}"
            ));
        }
        offset += len as u64;
        if tx.send(TcpEvent::Message(from, msg)).is_err() {
            return;
        }
    };
    let _ = tx.send(TcpEvent::Closed(from, error));
}

/// Reads an IPFIX file message by message (each message's header gives its length). A header
/// that is not IPFIX (damage) is reported and skipped over to the next plausible header, so
/// the messages after it are still read. Returns whether anything was skipped.
fn read_file(c: &mut Collected, path: &PathBuf) -> Result<bool> {
    let file =
        std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    // Streamed one message at a time: files can be far larger than memory.
    let mut input = std::io::BufReader::with_capacity(1 << 20, file);
    let mut msg = vec![0u8; 65_536];
    let mut off = 0u64;
    let mut damaged = false;
    // The last good message's header: a resynchronised header must look like its successor.
    let mut last = None;
    loop {
        let mut head = [0u8; 16];
        match read_up_to(&mut input, &mut head)
            .with_context(|| format!("{}: offset {off}", path.display()))?
        {
            // A clean end of file falls between messages.
            0 => break,
            16 => {}
            _ => bail!(
                "{}: offset {off}: file ends inside an IPFIX message header",
                path.display()
            ),
        }
        if !plausible_header(&head, None) {
            let (version, len) = (u16_be(&head, 0), u16_be(&head, 2));
            damaged = true;
            let skipped = resync(&mut input, &mut head, last)
                .with_context(|| format!("{}: offset {off}", path.display()))?;
            let what = format!(
                "{}: offset {off}: not an IPFIX message header (version {version}, length {len})",
                path.display()
            );
            match skipped {
                Some(n) => {
                    c.note(format!("{what}; {n} bytes skipped to the next header"));
                    off += n;
                }
                None => {
                    c.note(format!("{what}; no further message header in the file"));
                    break;
                }
            }
        }
        let len = usize::from(u16_be(&head, 2));
        msg[..16].copy_from_slice(&head);
        input.read_exact(&mut msg[16..len]).with_context(|| {
            format!(
                "{}: offset {off}: file ends inside a message of {len} bytes",
                path.display()
            )
        })?;
        c.message(Source::File(path, off), &msg[..len]);
        last = Some(head);
        off += len as u64;
        if c.records >= c.limit {
            break;
        }
    }
    Ok(damaged)
}

fn u16_be(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads until `buf` is full or the input ends; the bytes read.
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match input.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// An IPFIX message header: version 10 and a length that holds the header; when the header
/// of the message before is known (resynchronising), also its observation domain and an export
/// time within a day of its own, so that bytes inside a message are not taken for a header.
fn plausible_header(head: &[u8; 16], last: Option<[u8; 16]>) -> bool {
    let u32_be =
        |b: &[u8; 16], at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
    u16_be(head, 0) == 10
        && u16_be(head, 2) >= 16
        && last.is_none_or(|l| {
            u32_be(head, 12) == u32_be(&l, 12) && u32_be(head, 4).abs_diff(u32_be(&l, 4)) <= 86_400
        })
}

/// Slides `head` forward a byte at a time until it holds a plausible header; the bytes skipped,
/// or None when the file ends first.
fn resync(
    input: &mut impl Read,
    head: &mut [u8; 16],
    last: Option<[u8; 16]>,
) -> Result<Option<u64>> {
    let mut skipped = 0u64;
    loop {
        head.copy_within(1.., 0);
        if read_up_to(input, &mut head[15..])? == 0 {
            return Ok(None);
        }
        skipped += 1;
        if plausible_header(head, last) {
            return Ok(Some(skipped));
        }
    }
}

fn print_summary(
    format: SummaryFormat,
    s: &DecoderStats,
    written: u64,
    errors: &[String],
    elapsed: Duration,
    stored: Option<(
        &trawl_store::IngestStats,
        Option<&crate::db_retention::Retained>,
    )>,
    udp: &UdpCounts,
) {
    let kinds: serde_json::Map<String, serde_json::Value> = DecodeErrorKind::ALL
        .iter()
        .map(|k| (k.name().to_string(), s.errors[*k as usize].into()))
        .collect();
    match format {
        SummaryFormat::None => {}
        SummaryFormat::Json => {
            let v = serde_json::json!({
                "command": "collect",
                "messages_ipfix": s.messages_ipfix,
                "messages_v9": s.messages_v9,
                "messages_v5": s.messages_v5,
                "flows": s.flows,
                "records_written": written,
                "templates": s.templates,
                "withdrawals": s.withdrawals,
                "options_records": s.options_records,
                "sequence_missing": s.sequence_missing,
                "sequence_resets": s.sequence_resets,
                "errors": kinds,
                "error_messages": errors,
                "elapsed_s": elapsed.as_secs_f64(),
                "udp": {
                    "receives": udp.receives,
                    "datagrams": udp.datagrams,
                    "trains": udp.trains,
                },
                "store": stored.map(|(st, retained)| serde_json::json!({
                    "records": st.records,
                    "rows": st.rows,
                    "blocks": st.blocks,
                    "extra_parts": st.extra_parts,
                    "bytes": st.bytes,
                    "records_spanning": st.records_spanning,
                    "retention": retained.map(crate::db_retention::summary_json),
                })),
            });
            eprintln!("{v}");
        }
        SummaryFormat::Text => {
            eprintln!(
                "collect: {} IPFIX, {} NetFlow v9, {} NetFlow v5 messages; {} flow records ({} written); {} templates, {} withdrawn; {} errors",
                s.messages_ipfix,
                s.messages_v9,
                s.messages_v5,
                s.flows,
                written,
                s.templates,
                s.withdrawals,
                s.total_errors()
            );
            if s.sequence_missing + s.sequence_resets > 0 {
                eprintln!(
                    "  sequence numbers: {} missing (IPFIX records, v5 flows, v9 packets), {} went back",
                    s.sequence_missing, s.sequence_resets
                );
            }
            for (k, v) in kinds.iter().filter(|(_, v)| v.as_u64() != Some(0)) {
                eprintln!("  {k}: {v}");
            }
            for e in errors {
                eprintln!("  {e}");
            }
        }
    }
}
