//! Live multicast feeds (M³Omon's design) and the subscriber API.
//!
//! A feed is IPFIX over UDP multicast with the templates repeated every second or 16
//! messages (series: in every message), so a subscriber that joins at any moment decodes
//! from the next template set on, and any IPFIX collector can listen too. Flow records go to one group per interface (the configured group plus the
//! interface's slot), series rows to another; TTL 1 by default keeps them on the link.
//!
//! Subscribing uses the same callback shape for live and stored data: a closure that gets a
//! record (or row) and returns [`ControlFlow`] to go on or stop. [`for_each_flow`] and
//! [`for_each_series`] take a source: a live feed, or stored data (series from the files
//! `trawl series` writes; flows from the flow database, [`FlowDatabase`], or anything else
//! behind the [`FlowStore`] seam).
use std::io;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::ops::{ControlFlow, Range};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use trawl_flow::FlowRecord;
use trawl_series::SeriesRow;

use crate::decode::{DecodeError, Decoder, DecoderConfig, DecoderStats, Item};
use crate::destination::FeedAddr;
use crate::encode::{MessageEncoder, TemplateRefresh};
use crate::Error;

/// The socket a feed is sent from: bound to the source address when one is given (Linux then
/// sends multicast out of that address's interface), with the feed's TTL.
pub fn sender_socket(feed: &FeedAddr) -> Result<UdpSocket, Error> {
    let src = feed.source.unwrap_or(Ipv4Addr::UNSPECIFIED);
    let io_err = |what: String| move |e| Error::Io { what, source: e };
    let socket = UdpSocket::bind((src, 0))
        .map_err(io_err(format!("cannot bind the feed socket to {src}")))?;
    socket
        .set_multicast_ttl_v4(feed.ttl)
        .map_err(io_err(format!(
            "cannot set TTL {} on the feed socket",
            feed.ttl
        )))?;
    // Subscribers on this machine see the feed too.
    socket
        .set_multicast_loop_v4(true)
        .map_err(io_err("cannot enable multicast loopback".into()))?;
    Ok(socket)
}

/// Sends series rows to a feed, one message per row (a row a second: latency matters more
/// than packing). Called from the thread that merges rows; a UDP send does not block.
pub struct SeriesFeed {
    socket: UdpSocket,
    feed: FeedAddr,
    pen: u32,
    /// One encoder per interface slot (its group and observation domain).
    encoders: Vec<(u16, MessageEncoder)>,
    /// Rows that could not be sent.
    pub send_errors: u64,
    /// Rows sent.
    pub rows: u64,
}

impl SeriesFeed {
    /// A series feed whose rows of all interfaces together go to slot 0 with observation
    /// domain `domain` (see [`SeriesFeed::send`]).
    pub fn open(feed: FeedAddr, domain: u32, pen: u32) -> Result<SeriesFeed, Error> {
        Ok(SeriesFeed {
            socket: sender_socket(&feed)?,
            feed,
            pen,
            encoders: vec![(
                0,
                MessageEncoder::series(
                    domain,
                    pen,
                    crate::exporter::UDP_MAX_MESSAGE_V4,
                    TemplateRefresh::EveryMessage,
                ),
            )],
            send_errors: 0,
            rows: 0,
        })
    }

    /// Sends one row of all interfaces now (to the base group).
    pub fn send(&mut self, row: &SeriesRow) {
        self.send_at(0, row);
    }

    /// Sends one row of interface slot `slot` (observation domain `domain`) to its group.
    pub fn send_slot(&mut self, slot: u16, domain: u32, row: &SeriesRow) {
        if !self.encoders.iter().any(|(s, _)| *s == slot) {
            let e = MessageEncoder::series(
                domain,
                self.pen,
                crate::exporter::UDP_MAX_MESSAGE_V4,
                TemplateRefresh::EveryMessage,
            );
            self.encoders.push((slot, e));
        }
        self.send_at(slot, row);
    }

    fn send_at(&mut self, slot: u16, row: &SeriesRow) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as u32);
        let SeriesFeed {
            socket,
            feed,
            encoders,
            send_errors,
            rows,
            ..
        } = self;
        let Some((_, encoder)) = encoders.iter_mut().find(|(s, _)| *s == slot) else {
            return;
        };
        let to = (feed.group_for(slot), feed.port);
        let mut emit = |m: &[u8]| match socket.send_to(m, to) {
            Ok(_) => *rows += 1,
            Err(_) => *send_errors += 1,
        };
        encoder.add_series(row, now, &mut emit);
        encoder.flush(now, &mut emit);
    }
}

/// How a live subscription runs.
#[derive(Clone, Debug, Default)]
pub struct LiveOptions {
    /// Local address of the interface to join on (None: the kernel's choice by route).
    pub interface: Option<Ipv4Addr>,
    /// Interface slot whose group to join (0: the first interface).
    pub slot: u16,
    /// Stop when this becomes true (checked at least every 100 ms).
    pub stop: Option<Arc<AtomicBool>>,
    /// Stop at this instant.
    pub deadline: Option<Instant>,
    /// Enterprise number of trawl's elements in the feed.
    pub pen: Option<u32>,
}

/// What a subscription saw.
#[derive(Clone, Debug, Default)]
pub struct SubscribeReport {
    /// Datagrams received.
    pub datagrams: u64,
    /// Items passed to the callback.
    pub delivered: u64,
    /// Decoder counters (errors by kind).
    pub decoder: DecoderStats,
    /// The first undecodable datagram, if any.
    pub first_error: Option<DecodeError>,
}

/// Joins a feed's group: a socket bound to the group and port (which keeps other groups on
/// the same port out) with SO_REUSEADDR (any number of subscribers per host) and a large
/// receive buffer, member on `interface`.
pub fn join(feed: &FeedAddr, options: &LiveOptions) -> Result<UdpSocket, Error> {
    let group = feed.group_for(options.slot);
    let iface = options.interface.unwrap_or(Ipv4Addr::UNSPECIFIED);
    let io_err = |what: String| move |e| Error::Io { what, source: e };
    let socket = crate::socket::udp_socket(
        SocketAddr::from((group, feed.port)),
        true,
        Some(crate::socket::RECV_BUFFER),
    )
    .map_err(io_err(format!("cannot bind {group}:{}", feed.port)))?;
    socket
        .join_multicast_v4(&group, &iface)
        .map_err(io_err(format!("cannot join {group} on {iface}")))?;
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(io_err("cannot set a read timeout".into()))?;
    Ok(socket)
}

fn live_loop(
    feed: &FeedAddr,
    options: &LiveOptions,
    f: &mut dyn FnMut(Item<'_>) -> ControlFlow<()>,
) -> Result<SubscribeReport, Error> {
    let socket = join(feed, options)?;
    let mut decoder = Decoder::new(DecoderConfig {
        pen: options.pen.unwrap_or(crate::ie::DEFAULT_PEN),
        ..DecoderConfig::default()
    });
    let mut report = SubscribeReport::default();
    let mut buf = vec![0u8; 65_536];
    loop {
        if options
            .stop
            .as_ref()
            .is_some_and(|s| s.load(Ordering::Relaxed))
            || options.deadline.is_some_and(|d| Instant::now() >= d)
        {
            break;
        }
        let (n, from): (usize, SocketAddr) = match socket.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if e.kind() == io::ErrorKind::WouldBlock
                    || e.kind() == io::ErrorKind::TimedOut
                    || e.kind() == io::ErrorKind::Interrupted =>
            {
                continue
            }
            Err(e) => {
                return Err(Error::Io {
                    what: format!("receiving from {feed}"),
                    source: e,
                })
            }
        };
        report.datagrams += 1;
        let mut stop = false;
        let mut delivered = 0;
        let (_, err) = decoder.decode(from, &buf[..n], &mut |_, item| {
            if !stop {
                delivered += 1;
                stop = f(item).is_break();
            }
        });
        report.delivered += delivered;
        if report.first_error.is_none() {
            report.first_error = err;
        }
        if stop {
            break;
        }
    }
    report.decoder = *decoder.stats();
    Ok(report)
}

/// Stored flow records, by time range.
pub trait FlowStore {
    /// Calls `f` with every stored record whose first packet falls in `range` (ns since the
    /// epoch), until it returns `Break`.
    fn for_each(
        &self,
        range: Range<u64>,
        f: &mut dyn FnMut(&FlowRecord<'_>) -> ControlFlow<()>,
    ) -> Result<u64, Error>;
}

/// trawl's flow database (`trawl run --db`, `trawl ingest`, `trawl collect --db`) as a source
/// of stored flows: its rows in order of first packet, as flow records that carry what the
/// database keeps (key, times, packet and byte counters, TCP flag unions, end reason; see
/// `trawl_store::StoredFlow::to_record` for what is zero).
pub struct FlowDatabase {
    /// The database directory.
    pub db: PathBuf,
    /// Interfaces to read; empty for all.
    pub ifaces: Vec<String>,
}

impl FlowStore for FlowDatabase {
    fn for_each(
        &self,
        range: Range<u64>,
        f: &mut dyn FnMut(&FlowRecord<'_>) -> ControlFlow<()>,
    ) -> Result<u64, Error> {
        Ok(trawl_store::scan::for_each_row(
            &self.db,
            &self.ifaces,
            range,
            &mut |_, row| f(&row.to_record()),
        )?)
    }
}

/// Where flow records come from.
pub enum FlowSource<'a> {
    /// A live multicast feed.
    Live(FeedAddr, LiveOptions),
    /// Stored records.
    Stored(&'a dyn FlowStore),
}

/// Where series rows come from.
pub enum SeriesSource {
    /// A live multicast feed.
    Live(FeedAddr, LiveOptions),
    /// A series file written by `trawl series` / `trawl run` (JSON lines or CSV).
    Stored(PathBuf),
}

/// Calls `f` with every flow record from `source` whose first packet lies in `range` (ns
/// since the epoch), until `f` returns `Break` (or, live, until stopped).
pub fn for_each_flow(
    source: FlowSource<'_>,
    range: Range<u64>,
    mut f: impl FnMut(&FlowRecord<'_>) -> ControlFlow<()>,
) -> Result<SubscribeReport, Error> {
    match source {
        FlowSource::Live(feed, options) => live_loop(&feed, &options, &mut |item| match item {
            Item::Flow(r) if range.contains(&r.first_ns) => f(r),
            _ => ControlFlow::Continue(()),
        }),
        FlowSource::Stored(store) => {
            let delivered = store.for_each(range, &mut f)?;
            Ok(SubscribeReport {
                delivered,
                ..SubscribeReport::default()
            })
        }
    }
}

/// Calls `f` with every series row from `source` whose second lies in `range` (Unix
/// seconds), until `f` returns `Break` (or, live, until stopped).
pub fn for_each_series(
    source: SeriesSource,
    range: Range<u64>,
    mut f: impl FnMut(&SeriesRow) -> ControlFlow<()>,
) -> Result<SubscribeReport, Error> {
    match source {
        SeriesSource::Live(feed, options) => live_loop(&feed, &options, &mut |item| match item {
            Item::Series(r) if range.contains(&r.second) => f(r),
            _ => ControlFlow::Continue(()),
        }),
        SeriesSource::Stored(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| Error::Io {
                what: format!("cannot read {}", path.display()),
                source: e,
            })?;
            let mut report = SubscribeReport::default();
            let mut header: Option<Vec<String>> = None;
            for (i, line) in text.lines().enumerate() {
                let line = line.trim();
                if line.is_empty() {
                    continue;
                }
                let row = if line.starts_with('{') {
                    parse_json_row(line)
                } else if header.is_none() {
                    header = Some(line.split(',').map(str::to_string).collect());
                    continue;
                } else {
                    parse_csv_row(header.as_deref().unwrap_or(&[]), line)
                };
                let row = row.map_err(|why| Error::BadSeriesFile {
                    path: path.clone(),
                    line: i + 1,
                    why,
                })?;
                if range.contains(&row.second) {
                    report.delivered += 1;
                    if f(&row).is_break() {
                        break;
                    }
                }
            }
            Ok(report)
        }
    }
}

fn set_series_field(row: &mut SeriesRow, name: &str, v: u64) {
    match name {
        "second" => row.second = v,
        "packets" => row.packets = v,
        "bytes" => row.bytes = v,
        "active_flows" => row.active_flows = v,
        "new_flows" => row.new_flows = v,
        "in_packets" => row.in_packets = v,
        "in_bytes" => row.in_bytes = v,
        "out_packets" => row.out_packets = v,
        "out_bytes" => row.out_bytes = v,
        // Fields added by later versions are ignored (the spec only ever adds fields).
        _ => {}
    }
}

fn parse_json_row(line: &str) -> Result<SeriesRow, String> {
    let v: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(line).map_err(|e| format!("not a JSON object: {e}"))?;
    let mut row = SeriesRow::default();
    if !v.contains_key("second") {
        return Err("no \"second\" field".into());
    }
    for (k, val) in &v {
        let n = val
            .as_u64()
            .ok_or_else(|| format!("field \"{k}\" is not a non-negative integer"))?;
        set_series_field(&mut row, k, n);
    }
    Ok(row)
}

fn parse_csv_row(header: &[String], line: &str) -> Result<SeriesRow, String> {
    if !header.iter().any(|h| h == "second") {
        return Err("the CSV header has no \"second\" column".into());
    }
    let mut row = SeriesRow::default();
    let cells: Vec<&str> = line.split(',').collect();
    if cells.len() != header.len() {
        return Err(format!(
            "{} cells, the header has {}",
            cells.len(),
            header.len()
        ));
    }
    for (name, cell) in header.iter().zip(cells) {
        let n: u64 = cell
            .trim()
            .parse()
            .map_err(|_| format!("column \"{name}\": '{cell}' is not a number"))?;
        set_series_field(&mut row, name, n);
    }
    Ok(row)
}
