//! QUIC connections for `stream_log`'s TLS analyser: the hellos of each connection's Initial
//! packets (`trawl_app::quic`), written as `tls.jsonl` lines with `proto` 17 and `transport`
//! `quic`.
//!
//! A connection starts at a datagram whose first packet is an Initial of a version with known
//! keys; its sender is the client. It is keyed by the two UDP endpoints. Bounded and counted:
//! at most `max_conns` connections are held (a new one beyond evicts the oldest, `evicted`);
//! one idle for [`IDLE_NS`] of packet time is ended; each side's CRYPTO data is capped by
//! `trawl_app::quic::MAX_CRYPTO_LEN`. The line is written once both hellos are read (or
//! failed), else when the connection ends, if it has a hello.
use std::collections::VecDeque;
use std::net::SocketAddr;

use serde_json::{json, Map, Value};
use trawl_app::quic::{classify, Connection, Datagram, QuicStats, Side};
use trawl_app::tls::Hello;
use trawl_flow::community_id::{CommunityId, FlowTuple};
use trawl_flow::hash::SeededFxMap;

use crate::messages::Event;
use crate::tcp_conns::ConnKey;

/// IP protocol number of UDP.
const UDP: u8 = 17;
/// A connection without a packet for this long (packet time) is ended: QUIC has no FIN the
/// monitor can read.
pub const IDLE_NS: u64 = 30_000_000_000;

/// The QUIC counters of `tls_log`, in the order [`QuicTable::values`] gives them.
pub const QUIC_COUNTERS: [&str; 7] = [
    "quic_connections",
    "quic_evicted",
    "quic_decrypted",
    "quic_decrypt_errors",
    "quic_frame_errors",
    "quic_capped",
    "quic_undecryptable",
];

struct QuicConn {
    client: SocketAddr,
    server: SocketAddr,
    first_ns: u64,
    last_ns: u64,
    /// When each side's hello (or its failure) was read.
    hello_ns: [Option<u64>; 2],
    conn: Connection,
    written: bool,
}

/// The QUIC connections being read.
pub struct QuicTable {
    /// Every UDP datagram is looked up: the seeded fast hash (`trawl_flow::hash`).
    conns: SeededFxMap<ConnKey, QuicConn>,
    /// Keys in the order they were first seen (eviction; stale keys skipped).
    order: VecDeque<ConnKey>,
    max_conns: usize,
    last_sweep_ns: u64,
    stats: QuicStats,
    connections: u64,
    evicted: u64,
    undecryptable: u64,
}

fn key_of(a: SocketAddr, b: SocketAddr) -> ConnKey {
    if a <= b {
        (a, b)
    } else {
        (b, a)
    }
}

impl QuicTable {
    /// A table of at most `max_conns` connections (at least one).
    pub fn new(max_conns: usize) -> Self {
        QuicTable {
            conns: SeededFxMap::default(),
            order: VecDeque::new(),
            max_conns: max_conns.max(1),
            last_sweep_ns: 0,
            stats: QuicStats::default(),
            connections: 0,
            evicted: 0,
            undecryptable: 0,
        }
    }

    /// The counters, in the order of [`QUIC_COUNTERS`].
    pub fn values(&self) -> [u64; 7] {
        let s = &self.stats;
        [
            self.connections,
            self.evicted,
            s.decrypted,
            s.decrypt_errors,
            s.frame_errors,
            s.capped,
            self.undecryptable,
        ]
    }

    /// Takes one UDP datagram's payload; lines of connections it completes or ends go to `out`.
    pub fn packet(
        &mut self,
        ts_ns: u64,
        src: SocketAddr,
        dst: SocketAddr,
        payload: &[u8],
        out: &mut Vec<Event>,
    ) {
        self.sweep(ts_ns, out);
        let key = key_of(src, dst);
        if !self.conns.contains_key(&key) {
            match classify(payload) {
                Datagram::Initial(_) => self.insert(key, ts_ns, src, dst, out),
                Datagram::Undecryptable(_) => {
                    self.undecryptable += 1;
                    return;
                }
                Datagram::NotQuic => return,
            }
        }
        let Some(c) = self.conns.get_mut(&key) else {
            return;
        };
        c.last_ns = ts_ns;
        if c.written {
            return;
        }
        let side = if src == c.client {
            Side::Client
        } else {
            Side::Server
        };
        c.conn.datagram(side, payload, &mut self.stats);
        for (i, s) in c.conn.sides.iter().enumerate() {
            if s.outcome.is_some() && c.hello_ns[i].is_none() {
                c.hello_ns[i] = Some(ts_ns);
            }
        }
        if c.conn.done() {
            write_line(c, out);
        }
    }

    fn insert(
        &mut self,
        key: ConnKey,
        ts_ns: u64,
        client: SocketAddr,
        server: SocketAddr,
        out: &mut Vec<Event>,
    ) {
        while self.conns.len() >= self.max_conns {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(mut c) = self.conns.remove(&old) {
                self.evicted += 1;
                write_line(&mut c, out);
            }
        }
        self.connections += 1;
        self.order.push_back(key);
        self.conns.insert(
            key,
            QuicConn {
                client,
                server,
                first_ns: ts_ns,
                last_ns: ts_ns,
                hello_ns: [None; 2],
                conn: Connection::new(),
                written: false,
            },
        );
    }

    /// Ends the connections idle for [`IDLE_NS`], at most once a second of packet time.
    fn sweep(&mut self, now_ns: u64, out: &mut Vec<Event>) {
        if now_ns < self.last_sweep_ns.saturating_add(1_000_000_000) {
            return;
        }
        self.last_sweep_ns = now_ns;
        // Written oldest first, as at the end: not in the table's order, which the seed picks.
        let mut idle: Vec<QuicConn> = self
            .conns
            .extract_if(|_, c| now_ns.saturating_sub(c.last_ns) >= IDLE_NS)
            .map(|(_, c)| c)
            .collect();
        idle.sort_by_key(|c| c.first_ns);
        for mut c in idle {
            write_line(&mut c, out);
        }
        let conns = &self.conns;
        self.order.retain(|k| conns.contains_key(k));
    }

    /// Ends every connection (the end of the input).
    pub fn finish(&mut self, out: &mut Vec<Event>) {
        let mut conns: Vec<QuicConn> = self.conns.drain().map(|(_, c)| c).collect();
        conns.sort_by_key(|c| c.first_ns);
        for mut c in conns {
            write_line(&mut c, out);
        }
        self.order.clear();
    }
}

/// Writes the connection's line once, if a side read its hello.
fn write_line(c: &mut QuicConn, out: &mut Vec<Event>) {
    if c.written {
        return;
    }
    c.written = true;
    if let Some(e) = line(c) {
        out.push(e);
    }
    // Nothing more is read from it.
    c.conn = Connection::new();
}

fn hello(c: &QuicConn, side: Side) -> Option<(&Hello, u64)> {
    let i = side as usize;
    match &c.conn.sides[i].outcome {
        Some(Ok(h)) => Some((h, c.hello_ns[i].unwrap_or(c.first_ns))),
        _ => None,
    }
}

/// The log line (fields of docs/specs/logs.md, TLS and QUIC), `None` without a hello.
fn line(c: &QuicConn) -> Option<Event> {
    let ch = hello(c, Side::Client);
    let sh = hello(c, Side::Server);
    let ts_ns = ch.or(sh)?.1;
    let tuple = FlowTuple {
        proto: UDP,
        src_ip: c.client.ip(),
        dst_ip: c.server.ip(),
        src_port: c.client.port(),
        dst_port: c.server.port(),
    };
    let mut j = Map::new();
    j.insert("ts_ns".into(), json!(ts_ns));
    if let Some(id) = CommunityId::default().text(&tuple) {
        j.insert("community_id".into(), json!(id.as_str()));
    }
    j.insert("src_ip".into(), json!(c.client.ip().to_string()));
    j.insert("src_port".into(), json!(c.client.port()));
    j.insert("dst_ip".into(), json!(c.server.ip().to_string()));
    j.insert("dst_port".into(), json!(c.server.port()));
    j.insert("proto".into(), json!(UDP));
    j.insert("transport".into(), json!("quic"));
    let version = c.conn.sides.iter().find_map(|s| s.version);
    if let Some(v) = version {
        j.insert("quic_version".into(), json!(format!("0x{v:08x}")));
    }
    j.insert("first_ns".into(), json!(c.first_ns));
    crate::tls_log::hello_fields(&mut j, ch.map(|h| h.0), sh.map(|h| h.0));
    crate::tls_log::retry_fields(&mut j, second(c));
    if let Some(e) = error(c) {
        j.insert("error".into(), json!(e));
    }
    Some(Event {
        ts_ns,
        json: Value::Object(j),
    })
}

/// Why a side has no hello: its error, or the CRYPTO bytes it was left with (the client's
/// first).
fn error(c: &QuicConn) -> Option<String> {
    c.conn
        .sides
        .iter()
        .find_map(|s| answer_or_why(s.outcome.as_ref(), &s.stream)?.err())
}

/// After a HelloRetryRequest: the client's second hello, or why there is none (offsets from
/// the end of its first).
fn second(c: &QuicConn) -> Option<Result<&Hello, String>> {
    let s = &c.conn.sides[Side::Client as usize];
    if !s.wants_second {
        return None;
    }
    answer_or_why(s.second.as_ref(), &s.stream)
}

/// A hello, its error, or the CRYPTO bytes that were left without one.
fn answer_or_why<'a>(
    outcome: Option<&'a Result<Hello, trawl_app::Error>>,
    stream: &trawl_app::quic::CryptoStream,
) -> Option<Result<&'a Hello, String>> {
    match outcome {
        Some(Ok(h)) => Some(Ok(h)),
        Some(Err(e)) => {
            // The kind, offset and field without the crate's `quic: `/`tls: ` prefix.
            let text = e.to_string();
            let bare = text.strip_prefix("quic: ").or(text.strip_prefix("tls: "));
            Some(Err(bare.unwrap_or(&text).to_string()))
        }
        None if !stream.is_empty() => Some(Err(format!(
            "incomplete hello: {} bytes from offset 0",
            stream.prefix().len()
        ))),
        None => None,
    }
}
