//! `ipfix_source`: IPFIX, NetFlow v9 and v5 and sFlow v5 in (UDP datagrams, IPFIX over TCP,
//! IPFIX files, or capture files of those datagrams), flow records out. What `trawl collect`
//! runs: one trawl can so be the collector of others, of routers, switches and of softflowd.
//!
//! Templates are kept per exporter and observation domain, sequence numbers are followed
//! (missing records counted), and bad input is counted and named (the file and byte offset,
//! or the exporter's address) in the block's errors, after which decoding goes on: a
//! damaged file header is skipped over to the next plausible header.
use std::io::{BufReader, Read};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs, UdpSocket};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, PathSetting, Poll, Pool};
use trawl_export::socket::{RecvBatch, RECV_BATCH};
use trawl_export::{DecodeError, DecodeErrorKind, Decoder, DecoderConfig, DecoderStats, Item};
use trawl_flow::FlowRecord;

use crate::messages::{FlowBatch, FLOWS};

/// Records per message sent downstream.
const FLOW_BATCH: usize = 1024;

/// Receives or reads IPFIX / NetFlow and sends the flow records.
pub struct IpfixSource {
    decoder: Decoder,
    /// Taken out while it is polled (the block's other fields are borrowed meanwhile).
    input: Option<Input>,
    /// The runtime's record budget (`[runtime] count`) is spent: no more records go out.
    spent: bool,
    pool: Pool<FlowBatch>,
    pending: Vec<FlowRecord<'static>>,
    /// The origin of the pending records.
    pending_origin: Option<Arc<str>>,
    /// Origin names by exporter address and observation domain.
    names: Vec<((std::net::IpAddr, u32), Arc<str>)>,
    /// Latest record end seen: the clock of the stores downstream (exporters' clocks).
    clock: u64,
    stream: u32,
    /// Whether errors are written out as they come (else only kept for the report).
    log_errors: bool,
    counters: Option<Counters>,
    /// `anonymize`: applied to every record and exporter address as it goes out.
    anon: Option<trawl_anon::Anonymizer>,
    /// `geoip_asn`, `geoip_country`, `interfaces`: applied to every record as it is decoded
    /// (before anonymization: the lookups need the real addresses).
    enrich: Option<trawl_geo::Enricher>,
}

/// Settings of `ipfix_source`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpfixSettings {
    /// Receive on these addresses: `udp://HOST:PORT` (IPFIX, NetFlow v9 and v5, sFlow v5 on
    /// one port; `sflow://HOST:PORT` is the same) or `tcp://HOST:PORT` (IPFIX over TCP).
    #[serde(default)]
    pub listen: Vec<String>,
    /// Read these IPFIX files (RFC 5655: messages back to back, as `flow_export` writes), or
    /// capture files (pcap, pcapng) of sFlow / NetFlow / IPFIX datagrams, instead of
    /// listening, one after the other.
    #[serde(default)]
    pub files: Vec<PathBuf>,
    /// The interface name of the records read from files (their origin, which a `flow_store`
    /// stores them under); default: each file's name without its extension.
    pub iface: Option<String>,
    /// Private Enterprise Number whose elements are read as trawl's own.
    #[serde(default = "default_pen")]
    pub pen: u32,
    /// Most templates kept over all exporters (a bound against template floods).
    #[serde(default = "default_max_templates")]
    pub max_templates: usize,
    /// UDP: after a receive that emptied the socket queues, wait this long before the next
    /// one, so that datagrams arriving one by one are read in batches (default 1ms; 0 reads
    /// each as it comes).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub recv_wait: Option<u64>,
    /// Write each error as it comes (default); `false` only keeps them for the report (a
    /// command that lists them in its own summary).
    #[serde(default = "yes")]
    pub log_errors: bool,
    /// Key file (32 bytes raw or 64 hex digits): records leave the block with their
    /// addresses anonymized (Crypto-PAn), and so does the exporter address in their origin.
    pub anonymize: Option<PathBuf>,
    /// With `anonymize`: prefixes whose addresses stay as they are (`10.0.0.0/8`).
    #[serde(default)]
    pub keep: Vec<String>,
    /// MaxMind DB file (GeoLite2 / DB-IP ASN): records get `src_as` / `dst_as`.
    pub geoip_asn: Option<PathBuf>,
    /// MaxMind DB file (GeoLite2 / DB-IP Country): records get `src_country` / `dst_country`.
    pub geoip_country: Option<PathBuf>,
    /// Interface names of exporters (CSV `EXPORTER,IFINDEX,NAME,DESCRIPTION`): records get
    /// `in_if_name` ... for their `in_if` / `out_if`.
    pub interfaces: Option<PathBuf>,
}

fn default_pen() -> u32 {
    trawl_export::ie::DEFAULT_PEN
}

fn default_max_templates() -> usize {
    4096
}

fn yes() -> bool {
    true
}

/// The block's counters: the decoder's, how UDP datagrams arrived, and whether an input
/// could not be read whole.
struct Counters {
    messages_ipfix: Counter,
    messages_v9: Counter,
    messages_v5: Counter,
    flows: Counter,
    records: Counter,
    templates: Counter,
    withdrawals: Counter,
    options_records: Counter,
    sequence_missing: Counter,
    sequence_resets: Counter,
    messages_sflow: Counter,
    sflow_flow_samples: Counter,
    sflow_counter_samples: Counter,
    sflow_not_ip: Counter,
    sflow_skipped: Counter,
    /// Capture files: the datagrams decoded and the packets that were none.
    capture_datagrams: Counter,
    capture_skipped: Counter,
    /// Enrichment: address lookups, and those its cache answered.
    enrich_lookups: Counter,
    enrich_cache_hits: Counter,
    errors: Vec<Counter>,
    udp_receives: Counter,
    udp_datagrams: Counter,
    udp_trains: Counter,
    input_failed: Counter,
    /// Bytes read of the current file and its size, for progress lines (`trawl collect -r`),
    /// as `pcap_source` counts them.
    progress_bytes: Counter,
    progress_total: Counter,
}

/// The name of the counter of decode errors of `kind`.
pub fn error_counter(kind: DecodeErrorKind) -> String {
    format!("error_{}", kind.name())
}

impl Counters {
    fn new(ctx: &mut Ctx<'_>) -> Counters {
        Counters {
            messages_ipfix: ctx.counter("messages_ipfix"),
            messages_v9: ctx.counter("messages_v9"),
            messages_v5: ctx.counter("messages_v5"),
            flows: ctx.counter("flows"),
            records: ctx.counter("records"),
            templates: ctx.counter("templates"),
            withdrawals: ctx.counter("withdrawals"),
            options_records: ctx.counter("options_records"),
            sequence_missing: ctx.counter("sequence_missing"),
            sequence_resets: ctx.counter("sequence_resets"),
            messages_sflow: ctx.counter("messages_sflow"),
            sflow_flow_samples: ctx.counter("sflow_flow_samples"),
            sflow_counter_samples: ctx.counter("sflow_counter_samples"),
            sflow_not_ip: ctx.counter("sflow_not_ip"),
            sflow_skipped: ctx.counter("sflow_skipped"),
            capture_datagrams: ctx.counter("capture_datagrams"),
            capture_skipped: ctx.counter("capture_skipped"),
            enrich_lookups: ctx.counter("enrich_lookups"),
            enrich_cache_hits: ctx.counter("enrich_cache_hits"),
            errors: DecodeErrorKind::ALL
                .iter()
                .map(|k| ctx.counter(&error_counter(*k)))
                .collect(),
            udp_receives: ctx.counter("udp_receives"),
            udp_datagrams: ctx.counter("udp_datagrams"),
            udp_trains: ctx.counter("udp_trains"),
            input_failed: ctx.counter("input_failed"),
            progress_bytes: ctx.counter("progress_bytes"),
            progress_total: ctx.counter("progress_total"),
        }
    }

    fn decoder(&self, s: &DecoderStats) {
        self.messages_ipfix.set(s.messages_ipfix);
        self.messages_v9.set(s.messages_v9);
        self.messages_v5.set(s.messages_v5);
        self.flows.set(s.flows);
        self.templates.set(s.templates);
        self.withdrawals.set(s.withdrawals);
        self.options_records.set(s.options_records);
        self.sequence_missing.set(s.sequence_missing);
        self.sequence_resets.set(s.sequence_resets);
        self.messages_sflow.set(s.messages_sflow);
        self.sflow_flow_samples.set(s.sflow_flow_samples);
        self.sflow_counter_samples.set(s.sflow_counter_samples);
        self.sflow_not_ip.set(s.sflow_not_ip);
        self.sflow_skipped.set(s.sflow_skipped);
        for (c, n) in self.errors.iter().zip(s.errors) {
            c.set(n);
        }
    }
}

/// Where the messages come from.
enum Input {
    Files {
        files: Vec<(PathBuf, Arc<str>)>,
        next: usize,
        open: Option<OpenFile>,
    },
    Network(Network),
}

/// Where a message came from, as its errors name it: the exporter's address, or the file and
/// the message's byte offset in it (a file has no exporter address to name).
#[derive(Clone, Copy)]
enum Source<'a> {
    Peer(SocketAddr),
    File(&'a Path, u64),
    /// A datagram of a capture file: the file, its packet number and its sender.
    Capture(&'a Path, u64, SocketAddr),
}

/// A file being read: IPFIX messages, or the datagrams of a capture.
enum OpenFile {
    Ipfix(FileReader),
    Capture {
        path: PathBuf,
        name: Arc<str>,
        // Boxed: the capture reader's buffers and decoder are far larger than the other
        // variant, and a file is opened once.
        datagrams: Box<crate::datagrams::CaptureDatagrams>,
    },
}

/// The exporter address the decoder keys a file's templates by: a fixed one, which keeps them
/// apart from the network's.
const FILE_EXPORTER: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 0);

impl Source<'_> {
    fn exporter(self) -> SocketAddr {
        match self {
            Source::Peer(a) | Source::Capture(.., a) => a,
            Source::File(..) => FILE_EXPORTER,
        }
    }

    /// The decode error as it is reported.
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
            Source::Capture(path, packet, from) => format!(
                "{}: packet {packet}: datagram from {from} at offset {}: {} ({})",
                path.display(),
                e.offset,
                e.kind.name(),
                e.detail
            ),
        }
    }
}

impl Block for IpfixSource {
    const TYPE: &'static str = "ipfix_source";
    const SUMMARY: &'static str =
        "receives IPFIX, NetFlow v9 and v5 (UDP, IPFIX over TCP) or reads IPFIX files, and sends the flow records";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "flows",
        ty: FLOWS,
        required: false,
        doc: "the decoded records, in batches of one origin (exporter and observation domain, or file)",
    }];
    type Settings = IpfixSettings;
    const PATHS: &'static [PathSetting] = &[
        PathSetting::path("files"),
        PathSetting::path("geoip_asn"),
        PathSetting::path("geoip_country"),
        PathSetting::path("interfaces"),
    ];

    fn check(s: &IpfixSettings) -> Result<(), String> {
        crate::anon::check(s.anonymize.as_deref(), &s.keep)?;
        match (s.listen.is_empty(), s.files.is_empty()) {
            (true, true) => return Err("give `listen` addresses or `files` to read".into()),
            (false, false) => return Err("`listen` and `files` exclude each other".into()),
            _ => {}
        }
        if !(1..=1 << 20).contains(&s.max_templates) {
            return Err(format!(
                "`max_templates` {} is out of range 1 to 1048576",
                s.max_templates
            ));
        }
        for l in &s.listen {
            listen_address(l)?;
        }
        if let Some(iface) = &s.iface {
            if !trawl_store::layout::valid_iface(iface) {
                return Err(format!(
                    "`iface` {iface:?} is not a valid interface name (letters, digits, `.`, `_`, `-`; not starting with `.`)"
                ));
            }
        }
        Ok(())
    }

    fn build(s: IpfixSettings, env: &BuildEnv) -> Result<Self, String> {
        Self::check(&s)?;
        let input = if s.files.is_empty() {
            Input::Network(Network::open(
                &s.listen,
                Duration::from_nanos(s.recv_wait.unwrap_or(1_000_000)),
            )?)
        } else {
            let files = s
                .files
                .iter()
                .map(|p| {
                    let name = s.iface.clone().unwrap_or_else(|| file_iface(p));
                    (p.clone(), Arc::from(name))
                })
                .collect();
            Input::Files {
                files,
                next: 0,
                open: None,
            }
        };
        Ok(IpfixSource {
            decoder: Decoder::new(DecoderConfig {
                pen: s.pen,
                max_templates: s.max_templates,
            }),
            input: Some(input),
            spent: false,
            pool: Pool::new(FlowBatch::default),
            pending: Vec::with_capacity(FLOW_BATCH),
            pending_origin: None,
            names: Vec::new(),
            clock: 0,
            stream: env.index as u32,
            log_errors: s.log_errors,
            counters: None,
            anon: crate::anon::anonymizer(s.anonymize.as_deref(), &s.keep)?,
            enrich: trawl_geo::Enricher::open(&trawl_geo::EnrichFiles {
                asn: s.geoip_asn,
                country: s.geoip_country,
                interfaces: s.interfaces,
            })
            .map_err(|e| e.to_string())?,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(Counters::new(ctx));
        Ok(())
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        // The runtime's `duration` and `count` end the run through `stopping`.
        if ctx.stopping() || self.spent {
            return Poll::Done;
        }
        let Some(mut input) = self.input.take() else {
            return Poll::Done;
        };
        let outcome = match &mut input {
            Input::Files { files, next, open } => self.poll_files(ctx, files, next, open),
            Input::Network(net) => self.network_round(ctx, net),
        };
        self.input = Some(input);
        self.send(ctx);
        self.count_decoded();
        if self.spent {
            return Poll::Done;
        }
        outcome
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        self.send(ctx);
        self.count_decoded();
        // The sFlow counter samples per agent interface, for the command's summary.
        for ((agent, if_index), i) in self.decoder.sflow_interfaces() {
            ctx.note(sflow_interface_note(agent, if_index, &i));
        }
    }
}

impl IpfixSource {
    /// Brings the decoder's and the enrichment's counters into the block's.
    fn count_decoded(&self) {
        if let Some(c) = &self.counters {
            c.decoder(self.decoder.stats());
            if let Some(e) = &self.enrich {
                c.enrich_lookups.set(e.lookups);
                c.enrich_cache_hits.set(e.hits);
            }
        }
    }

    /// Reports a problem with the input (counted in the block's errors).
    fn report(&self, ctx: &mut Ctx<'_>, message: String) {
        if self.log_errors {
            ctx.error(message);
        } else {
            ctx.note_error(message);
        }
    }

    /// Decodes one message and queues its records (each taken from the runtime's budget,
    /// `[runtime] count`, exact across sources).
    fn message(
        &mut self,
        ctx: &mut Ctx<'_>,
        source: Source<'_>,
        origin: Option<&Arc<str>>,
        bytes: &[u8],
    ) {
        let IpfixSource {
            decoder,
            pending,
            pending_origin,
            names,
            spent,
            clock,
            anon,
            enrich,
            ..
        } = self;
        let mut records = 0u64;
        let mut batches: Vec<(Arc<str>, Vec<FlowRecord<'static>>)> = Vec::new();
        let (_, err) = decoder.decode(source.exporter(), bytes, &mut |o, item| {
            let Item::Flow(r) = item else { return };
            if *spent || ctx.take(1) == 0 {
                *spent = true;
                return;
            }
            records += 1;
            *clock = (*clock).max(r.last_ns);
            let name = match origin {
                Some(n) => n.clone(),
                None => exporter_name(names, o, anon.as_mut()),
            };
            // Records of one origin go together; another origin starts a new batch.
            if pending_origin.as_ref() != Some(&name) {
                if !pending.is_empty() {
                    let done = std::mem::replace(pending, Vec::with_capacity(FLOW_BATCH));
                    batches.push((
                        pending_origin.clone().expect("records have an origin"),
                        done,
                    ));
                }
                *pending_origin = Some(name);
            }
            let mut r = *r;
            if let Some(e) = enrich.as_mut() {
                e.record(&mut r, Some(o.exporter.ip()));
            }
            pending.push(r);
        });
        if let Some(c) = &self.counters {
            c.records.add(records);
        }
        for (origin, records) in batches {
            self.emit(ctx, origin, records);
        }
        if self.pending.len() >= FLOW_BATCH {
            self.send(ctx);
        }
        if let Some(e) = err {
            self.report(ctx, source.describe(&e));
        }
    }

    /// Sends the pending records.
    fn send(&mut self, ctx: &mut Ctx<'_>) {
        if self.pending.is_empty() {
            return;
        }
        let records = std::mem::replace(&mut self.pending, Vec::with_capacity(FLOW_BATCH));
        let origin = self.pending_origin.clone().expect("records have an origin");
        self.emit(ctx, origin, records);
    }

    fn emit(&mut self, ctx: &mut Ctx<'_>, origin: Arc<str>, mut records: Vec<FlowRecord<'static>>) {
        if !ctx.is_connected(0) {
            return;
        }
        if let Some(anon) = &mut self.anon {
            records
                .iter_mut()
                .for_each(|r| crate::anon::record(anon, r));
        }
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.records.clear();
        std::mem::swap(&mut out.records, &mut records);
        out.clock_ns = self.clock;
        out.stream = self.stream;
        out.iface = None;
        out.origin = Some(origin);
        ctx.emit(0, slot.into_msg());
    }

    /// Reads messages of the current file until a batch is full or the file ends.
    fn poll_files(
        &mut self,
        ctx: &mut Ctx<'_>,
        files: &[(PathBuf, Arc<str>)],
        next: &mut usize,
        open: &mut Option<OpenFile>,
    ) -> Poll {
        let file = match open {
            Some(f) => f,
            None => {
                let Some((path, name)) = files.get(*next) else {
                    return Poll::Done;
                };
                *next += 1;
                match open_file(path, name) {
                    Ok(f) => open.insert(f),
                    Err(e) => {
                        self.input_failed();
                        self.report(ctx, e);
                        return Poll::Busy;
                    }
                }
            }
        };
        let ended = match file {
            OpenFile::Ipfix(reader) => self.poll_ipfix_file(ctx, reader),
            OpenFile::Capture {
                path,
                name,
                datagrams,
            } => self.poll_capture(ctx, path, name, datagrams),
        };
        if ended {
            *open = None;
        }
        Poll::Busy
    }

    /// Reads an IPFIX file's messages until a batch is full; whether the file ended.
    fn poll_ipfix_file(&mut self, ctx: &mut Ctx<'_>, reader: &mut FileReader) -> bool {
        let mut ended = false;
        while self.pending.len() < FLOW_BATCH && !self.spent {
            match reader.next() {
                Ok(Some((offset, len, note))) => {
                    if let Some(n) = note {
                        self.report(ctx, n);
                    }
                    let source = Source::File(&reader.path, offset);
                    self.message(ctx, source, Some(&reader.name), &reader.msg[..len]);
                    // Per message: one poll can read a whole file.
                    if let Some(c) = &self.counters {
                        c.progress_bytes.set(reader.off);
                        c.progress_total.set(reader.size);
                    }
                }
                Ok(None) => {
                    ended = true;
                    break;
                }
                Err(e) => {
                    self.report(ctx, e);
                    reader.damaged = true;
                    ended = true;
                    break;
                }
            }
        }
        if reader.damaged {
            self.input_failed();
        }
        ended
    }

    /// Decodes a capture file's datagrams until a batch is full; whether the file ended.
    /// Each datagram's records get its capture time (sFlow samples have none of their own).
    fn poll_capture(
        &mut self,
        ctx: &mut Ctx<'_>,
        path: &Path,
        name: &Arc<str>,
        datagrams: &mut crate::datagrams::CaptureDatagrams,
    ) -> bool {
        let mut ended = false;
        while self.pending.len() < FLOW_BATCH && !self.spent {
            match datagrams.next_datagram() {
                Ok(Some(d)) => {
                    self.decoder.set_receive_time(d.ts_ns);
                    let source = Source::Capture(path, d.packet, d.from);
                    self.message(ctx, source, Some(name), &d.bytes);
                    if let Some(c) = &self.counters {
                        c.capture_datagrams.add(1);
                    }
                }
                Ok(None) => {
                    ended = true;
                    break;
                }
                Err(e) => {
                    self.input_failed();
                    self.report(ctx, format!("{}: {e}", path.display()));
                    ended = true;
                    break;
                }
            }
        }
        // Network datagrams that may follow get the wall clock again.
        self.decoder.set_receive_time(0);
        if let Some(c) = &self.counters {
            c.capture_skipped.set(datagrams.skipped);
            let (read, total) = datagrams.progress();
            c.progress_bytes.set(read);
            c.progress_total.set(total);
        }
        ended
    }

    fn input_failed(&self) {
        if let Some(c) = &self.counters {
            c.input_failed.set(1);
        }
    }

    fn network_round(&mut self, ctx: &mut Ctx<'_>, net: &mut Network) -> Poll {
        let mut idle = true;
        // Receives (a train counts once) of this round.
        let mut arrivals = 0usize;
        // Whether every socket's queue was emptied by a batch that was not full.
        let mut drained = true;
        let nowhere = SocketAddr::from(([0, 0, 0, 0], 0));
        for si in 0..net.sockets.len() {
            // At most about this many datagrams per socket before the stop flag and the
            // deadline are looked at again.
            let mut taken = 0;
            while taken < 1024 {
                match net.batch.recv(&net.sockets[si]) {
                    Ok(n) => {
                        idle = false;
                        arrivals += n;
                        taken += n;
                        self.udp(|c| c.udp_receives.add(1));
                        for i in 0..n {
                            let (bytes, from) = net.batch.get(i);
                            let from = from.unwrap_or(nowhere);
                            // A UDP_GRO train: datagrams of one size back to back.
                            let seg = match net.batch.segment(i) {
                                Some(seg) => {
                                    self.udp(|c| c.udp_trains.add(1));
                                    seg
                                }
                                None => bytes.len().max(1),
                            };
                            for datagram in bytes.chunks(seg) {
                                self.udp(|c| c.udp_datagrams.add(1));
                                self.message(ctx, Source::Peer(from), None, datagram);
                                if self.spent {
                                    return Poll::Busy;
                                }
                            }
                        }
                        if n < RECV_BATCH {
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
                    Err(e) => {
                        ctx.fail(format_args!("receiving: {e}"));
                        return Poll::Done;
                    }
                }
            }
        }
        while let Ok(event) = net.tcp.try_recv() {
            idle = false;
            match event {
                TcpEvent::Message(from, bytes) => {
                    self.message(ctx, Source::Peer(from), None, &bytes)
                }
                TcpEvent::Closed(from, Some(e)) => {
                    self.report(ctx, format!("TCP exporter {from}: {e}"))
                }
                TcpEvent::Closed(_, None) => {}
            }
            if self.spent {
                return Poll::Busy;
            }
        }
        if idle {
            if !net.single {
                std::thread::sleep(Duration::from_micros(200));
            }
            return Poll::Idle;
        }
        net.pace(arrivals, drained);
        Poll::Busy
    }

    fn udp(&self, f: impl FnOnce(&Counters)) {
        if let Some(c) = &self.counters {
            f(c);
        }
    }
}

/// The origin name of an exporter's observation domain: `exp-ADDRESS-DOMAIN`, with an IPv6
/// address's `:` written as `_` (interface names are `[A-Za-z0-9._-]`).
fn exporter_name(
    names: &mut Vec<((std::net::IpAddr, u32), Arc<str>)>,
    o: &trawl_export::Origin,
    anon: Option<&mut trawl_anon::Anonymizer>,
) -> Arc<str> {
    let key = (o.exporter.ip(), o.domain);
    if let Some((_, n)) = names.iter().find(|(k, _)| *k == key) {
        return n.clone();
    }
    // The name is stored (a flow database's interface): anonymized with the records.
    let shown = anon.map_or(key.0, |a| a.ip(key.0));
    let name: Arc<str> = Arc::from(format!("exp-{}-{}", shown, key.1).replace(':', "_"));
    names.push((key, name.clone()));
    name
}

/// The interface name of a file's records: its name without the extension, with characters
/// an interface name cannot have written as `_`.
pub fn file_iface(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut name: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() || name.starts_with('.') {
        name.insert(0, 'f');
    }
    name
}

/// A file of `files`: a capture (pcap, pcapng) of datagrams, or else an IPFIX file (whose
/// messages start with version 10; anything else is reported as damage by its reader).
fn open_file(path: &Path, name: &Arc<str>) -> Result<OpenFile, String> {
    let mut head = [0u8; 2];
    let ipfix = std::fs::File::open(path)
        .and_then(|mut f| read_up_to(&mut f, &mut head))
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        == 2
        && u16::from_be_bytes(head) == 10;
    if !ipfix {
        if let Some(datagrams) = crate::datagrams::CaptureDatagrams::open(path) {
            return Ok(OpenFile::Capture {
                path: path.to_path_buf(),
                name: name.clone(),
                datagrams: Box::new(datagrams),
            });
        }
    }
    FileReader::open(path, name.clone()).map(OpenFile::Ipfix)
}

/// The note `finish` leaves for one sFlow agent interface: `sflow_interface ` and a JSON
/// object (the command's summary prints it).
pub fn sflow_interface_note(
    agent: std::net::IpAddr,
    if_index: u32,
    i: &trawl_export::SflowInterface,
) -> String {
    let mut v = serde_json::json!({
        "agent": agent.to_string(),
        "if_index": if_index,
        "counter_samples": i.samples,
    });
    if let Some(c) = &i.last {
        v["if_speed"] = c.if_speed.into();
        v["in_octets"] = c.in_octets.into();
        v["in_packets"] =
            (u64::from(c.in_ucast) + u64::from(c.in_multicast) + u64::from(c.in_broadcast)).into();
        v["in_errors"] = c.in_errors.into();
        v["in_discards"] = c.in_discards.into();
        v["out_octets"] = c.out_octets.into();
        v["out_packets"] =
            (u64::from(c.out_ucast) + u64::from(c.out_multicast) + u64::from(c.out_broadcast))
                .into();
        v["out_errors"] = c.out_errors.into();
        v["out_discards"] = c.out_discards.into();
    }
    format!("{SFLOW_INTERFACE_NOTE}{v}")
}

/// How the notes of [`sflow_interface_note`] start.
pub const SFLOW_INTERFACE_NOTE: &str = "sflow_interface ";

/// `udp://HOST:PORT` (or `sflow://HOST:PORT`, the same) or `tcp://HOST:PORT`: whether TCP,
/// and the address.
fn listen_address(l: &str) -> Result<(bool, SocketAddr), String> {
    let (tcp, addr) = if let Some(a) = l.strip_prefix("tcp://") {
        (true, a)
    } else if let Some(a) = l
        .strip_prefix("udp://")
        .or_else(|| l.strip_prefix("sflow://"))
    {
        (false, a)
    } else {
        return Err(format!(
            "listen `{l}`: expected udp://HOST:PORT, sflow://HOST:PORT or tcp://HOST:PORT"
        ));
    };
    let bind = addr
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| format!("listen `{l}`: not an address"))?;
    Ok((tcp, bind))
}

/// The sockets and the TCP connections' messages, and how receives are paced.
struct Network {
    sockets: Vec<UdpSocket>,
    /// IPFIX over TCP: each connection's messages arrive here from its reader thread.
    tcp: mpsc::Receiver<TcpEvent>,
    /// One UDP socket and no TCP: it blocks in its receive (with a timeout).
    single: bool,
    /// recvmmsg: up to RECV_BATCH datagrams per system call (one recvfrom per datagram cost
    /// more than decoding it).
    batch: RecvBatch,
    recv_wait: Duration,
    gather: bool,
    slept: bool,
    last_wake: Instant,
}

impl Network {
    fn open(listen: &[String], recv_wait: Duration) -> Result<Network, String> {
        let mut sockets = Vec::new();
        let (tcp_tx, tcp_rx) = mpsc::sync_channel::<TcpEvent>(1024);
        let mut tcp = false;
        for l in listen {
            let (is_tcp, bind) = listen_address(l)?;
            if is_tcp {
                let listener =
                    TcpListener::bind(bind).map_err(|e| format!("cannot listen on {l}: {e}"))?;
                let tx = tcp_tx.clone();
                std::thread::Builder::new()
                    .name("collect-accept".into())
                    .spawn(move || accept_loop(listener, tx))
                    .map_err(|e| format!("cannot start the TCP listener: {e}"))?;
                tcp = true;
                continue;
            }
            // A large receive buffer absorbs exporters' bursts (capped by net.core.rmem_max).
            let s = trawl_export::socket::udp_socket(
                bind,
                false,
                Some(trawl_export::socket::RECV_BUFFER),
            )
            .map_err(|e| format!("cannot listen on {l}: {e}"))?;
            // Datagrams of one sender may come in trains (Linux 5.0; older kernels refuse
            // and send them one by one, which works as well).
            let _ = trawl_export::socket::set_udp_gro(&s, true);
            sockets.push(s);
        }
        let single = sockets.len() == 1 && !tcp;
        for s in &sockets {
            // One socket blocks in recv (the stop flag is seen within the timeout); several
            // are polled.
            let set = if single {
                s.set_read_timeout(Some(Duration::from_millis(100)))
            } else {
                s.set_nonblocking(true)
            };
            set.map_err(|e| format!("cannot set up the socket: {e}"))?;
        }
        Ok(Network {
            sockets,
            tcp: tcp_rx,
            single,
            batch: RecvBatch::new(RECV_BATCH),
            recv_wait,
            gather: true,
            slept: false,
            last_wake: Instant::now(),
        })
    }

    /// After a round that received something. Waiting pays off only when datagrams arrive
    /// one by one faster than the wait: a wait then gathers many arrivals into one receive.
    /// Trains (UDP_GRO) or a slow trickle arrive as one receive per wake-up anyway, and a
    /// wait would only add a timer wake-up per arrival. So: wait while the waits gather more
    /// than one arrival; else block in the receive until arrivals come closer together than
    /// a quarter of the wait.
    fn pace(&mut self, arrivals: usize, drained: bool) {
        let now = Instant::now();
        if self.gather && self.slept && arrivals <= 1 {
            self.gather = false;
        } else if !self.gather && now.duration_since(self.last_wake) < self.recv_wait / 4 {
            self.gather = true;
        }
        self.last_wake = now;
        self.slept = false;
        if self.gather && drained && !self.recv_wait.is_zero() {
            // The queues are empty but datagrams are flowing: let them gather for a moment
            // instead of waking up for each one (the kernel's buffer holds thousands), so
            // that each receive takes a batch.
            std::thread::sleep(self.recv_wait);
            self.slept = true;
        }
    }
}

/// What a TCP exporter's reader thread passes on.
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
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
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

/// An IPFIX file read message by message (each message's header gives its length). A header
/// that is not IPFIX (damage) is reported and skipped over to the next plausible header, so
/// the messages after it are still read.
struct FileReader {
    path: PathBuf,
    name: Arc<str>,
    // Streamed one message at a time: files can be far larger than memory.
    input: BufReader<std::fs::File>,
    msg: Vec<u8>,
    off: u64,
    /// The file's size when opened (0 when unknown).
    size: u64,
    damaged: bool,
    /// The last good message's header: a resynchronised header must look like its successor.
    last: Option<[u8; 16]>,
}

impl FileReader {
    fn open(path: &Path, name: Arc<str>) -> Result<FileReader, String> {
        let file = std::fs::File::open(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let size = file.metadata().map_or(0, |m| m.len());
        Ok(FileReader {
            path: path.to_path_buf(),
            name,
            input: BufReader::with_capacity(1 << 20, file),
            msg: vec![0u8; 65_536],
            off: 0,
            size,
            damaged: false,
            last: None,
        })
    }

    /// The next message into `self.msg`: its offset, its length and what was skipped before
    /// it; None at the end of the file; an error that ends the file.
    #[allow(clippy::type_complexity)]
    fn next(&mut self) -> Result<Option<(u64, usize, Option<String>)>, String> {
        let path = self.path.display();
        let off = self.off;
        let mut head = [0u8; 16];
        match read_up_to(&mut self.input, &mut head) {
            // A clean end of file falls between messages.
            Ok(0) => return Ok(None),
            Ok(16) => {}
            Ok(_) => {
                return Err(format!(
                    "{path}: offset {off}: file ends inside an IPFIX message header"
                ))
            }
            Err(e) => return Err(format!("{path}: offset {off}: {e}")),
        }
        let mut note = None;
        if !plausible_header(&head, None) {
            let (version, len) = (u16_be(&head, 0), u16_be(&head, 2));
            self.damaged = true;
            let skipped = resync(&mut self.input, &mut head, self.last)
                .map_err(|e| format!("{path}: offset {off}: {e}"))?;
            let what = format!(
                "{path}: offset {off}: not an IPFIX message header (version {version}, length {len})"
            );
            let Some(n) = skipped else {
                return Err(format!("{what}; no further message header in the file"));
            };
            note = Some(format!("{what}; {n} bytes skipped to the next header"));
            self.off += n;
        }
        let off = self.off;
        let len = usize::from(u16_be(&head, 2));
        self.msg[..16].copy_from_slice(&head);
        if let Err(e) = self.input.read_exact(&mut self.msg[16..len]) {
            return Err(format!(
                "{path}: offset {off}: file ends inside a message of {len} bytes: {e}"
            ));
        }
        self.last = Some(head);
        self.off += len as u64;
        Ok(Some((off, len, note)))
    }
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
) -> std::io::Result<Option<u64>> {
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
