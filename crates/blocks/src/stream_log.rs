//! `stream_log`: the application-layer analysers that read TCP streams (TLS, HTTP/1.x, DNS over
//! TCP) over one shared reassembly, and QUIC's hellos with TLS's (docs/specs/logs.md).
//!
//! One block with analyser plugins rather than a block per analyser: a TCP connection is
//! tracked and reassembled once whatever reads it (as in Suricata's and Zeek's stream engines),
//! each packet is decoded once, and an analyser that is done with a connection stops receiving
//! it; when none wants it any more its buffers are freed and its later segments are skipped at
//! the cost of a table look-up (bypass). Separate blocks would each need their own table (the
//! first implementation, which tracked every segment twice). An analyser is on when its output
//! gate is connected (`tls`, `http`, `dns`): composition still chooses what runs and where the
//! lines go.
//!
//! Per connection ([`Apps`]): TLS reads the hellos (and the certificate of TLS <= 1.2) and is
//! done after them; HTTP is done at the first bytes of a stream that is not HTTP/1.x; DNS reads
//! connections to or from port 53 only, its length-prefixed messages (RFC 1035 4.2.2) both
//! ways, joined to each other as `dns_log` joins UDP's (a request meets its response by client,
//! server and transaction ID).
use std::net::SocketAddr;

use serde::Deserialize;
use trawl_app::dns::{DnsStats, Joiner, TcpFramer};
use trawl_app::reassembly::Chunk;
use trawl_capture::PacketRecord;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, Pool};
use trawl_flow::decode::{decode, DecodeConfig, Decoded, TunnelMode};

use crate::applog::{dns_values, emit_lines, exchange_event, join_message, ClientServer};
use crate::http_log::{self, HttpConn};
use crate::messages::{Event, Events, PacketBatch, EVENTS, PACKETS};
use crate::quic_conns::{QuicTable, QUIC_COUNTERS};
use crate::tcp_conns::{Conn, ConnKey, ConnState, ConnStats, ConnTable, TcpPacket};
use crate::tls_log::{self, TlsConn};

/// IP protocol number of TCP.
const TCP: u8 = 6;
/// IP protocol number of UDP (QUIC).
const UDP: u8 = 17;
/// The TCP port DNS is read on.
const DNS_PORT: u16 = 53;

/// Output gates, by index.
const OUT_TLS: usize = 0;
const OUT_HTTP: usize = 1;
const OUT_DNS: usize = 2;

/// Settings of `stream_log`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamLogSettings {
    /// Connections followed at once (default 1,048,576); beyond it the oldest is ended
    /// (counted `evicted`). The table grows with the connections held: about 510 bytes of
    /// peak memory each, with the analysers' state of a connection waiting for its server.
    #[serde(default = "default_max_conns")]
    pub max_conns: usize,
    /// Out-of-order bytes one direction may hold waiting for earlier ones (default 256 KiB).
    #[serde(default = "default_stream_bytes")]
    pub max_stream_bytes: usize,
    /// Out-of-order bytes all connections together may hold (default 64 MiB).
    #[serde(default = "default_total_bytes")]
    pub max_total_bytes: usize,
    /// DNS-over-TCP requests waiting for their response at once (default 65536).
    #[serde(default = "default_conns")]
    pub max_pending: usize,
}

/// Enough for the connections of a link carrying a million flows at once (trace (a) of
/// bench/README.md: 662,858 TCP connections in 30 s, none ended): a table that evicts them
/// cuts their streams, which come back mid-stream as new connections.
fn default_max_conns() -> usize {
    1 << 20
}

fn default_conns() -> usize {
    65536
}

fn default_stream_bytes() -> usize {
    256 * 1024
}

fn default_total_bytes() -> usize {
    64 * 1024 * 1024
}

/// The counters of the shared reassembly, in the order
/// [`crate::tcp_conns::ConnStats::values`] gives them (its `lines`: all analysers').
pub const STREAM_COUNTERS: [&str; 11] = [
    "connections",
    "evicted",
    "segments",
    "retransmitted",
    "out_of_order",
    "overlaps",
    "overlap_conflicts",
    "gaps",
    "gap_bytes",
    "capped",
    "lines",
];

/// The counters of DNS over TCP: those of `dns_log` with a `dns_tcp_` prefix.
pub const DNS_TCP_COUNTERS: [&str; 8] = [
    "dns_tcp_messages",
    "dns_tcp_truncated_header",
    "dns_tcp_faults",
    "dns_tcp_joined",
    "dns_tcp_unmatched_responses",
    "dns_tcp_evicted",
    "dns_tcp_duplicate_requests",
    "dns_tcp_lines",
];

/// Which analysers are on (their output gate is connected).
#[derive(Clone, Copy, Debug, Default)]
pub struct Wanted {
    /// TLS hellos.
    pub tls: bool,
    /// HTTP/1.x pairs.
    pub http: bool,
    /// DNS over TCP.
    pub dns: bool,
}

/// DNS over TCP on one connection: each direction's messages, framed.
#[derive(Default)]
struct DnsConn {
    framers: [TcpFramer; 2],
    /// A direction that had a gap: its framing is lost, the analyser stops there.
    lost: [bool; 2],
    /// Messages framed and not yet joined: (direction, time, message).
    messages: Vec<(usize, u64, Vec<u8>)>,
}

impl DnsConn {
    fn chunk(&mut self, dir: usize, ts_ns: u64, chunk: Chunk<'_>) {
        if self.lost[dir] {
            return;
        }
        match chunk {
            Chunk::Data(bytes) => {
                let messages = &mut self.messages;
                self.framers[dir].push(bytes, |m| messages.push((dir, ts_ns, m.to_vec())));
            }
            Chunk::Gap(_) => self.lost[dir] = true,
        }
    }

    fn done(&self) -> bool {
        self.lost == [true; 2]
    }
}

/// Bits of [`Apps::wants`].
const TLS: u8 = 1;
const HTTP: u8 = 2;
const DNS: u8 = 4;

/// The analysers of one connection. Each is made at the connection's first bytes (a connection
/// that never carries any, half-open or all pure ACKs, costs three null pointers) and boxed;
/// each drops out of `wants` when done with the connection, and its state is freed once its
/// lines are written: TLS's at once, HTTP's when nothing is left to write at the end (a stream
/// that never was HTTP), DNS's once both directions lost their framing.
pub struct Apps {
    tls: Option<Box<TlsConn>>,
    http: Option<Box<HttpConn>>,
    dns: Option<Box<DnsConn>>,
    /// The analysers that still want the connection's bytes.
    wants: u8,
}

impl ConnState for Apps {
    type Config = Wanted;

    fn new(w: &Wanted, key: ConnKey) -> Self {
        let dns = w.dns && (key.0.port() == DNS_PORT || key.1.port() == DNS_PORT);
        let wants = [(w.tls, TLS), (w.http, HTTP), (dns, DNS)]
            .into_iter()
            .filter(|&(on, _)| on)
            .fold(0, |bits, (_, bit)| bits | bit);
        Apps {
            tls: None,
            http: None,
            dns: None,
            wants,
        }
    }

    fn chunk(&mut self, dir: usize, _src: SocketAddr, ts_ns: u64, chunk: Chunk<'_>) {
        if self.wants & TLS != 0 {
            let t = self.tls.get_or_insert_with(Box::default);
            t.chunk(dir, ts_ns, chunk);
            if t.done() {
                self.wants &= !TLS;
            }
        }
        if self.wants & HTTP != 0 {
            let h = self.http.get_or_insert_with(Box::default);
            h.chunk(dir, ts_ns, chunk);
            if h.done() {
                self.wants &= !HTTP;
                if h.idle() {
                    // Nothing to write, now or at the end (a stream that is not HTTP): freed
                    // now, not when the connection ends.
                    self.http = None;
                }
            }
        }
        if self.wants & DNS != 0 {
            let d = self.dns.get_or_insert_with(Box::default);
            d.chunk(dir, ts_ns, chunk);
            if d.done() {
                self.wants &= !DNS;
            }
        }
    }

    fn done(&self) -> bool {
        self.wants == 0
    }

    fn ready(&self) -> bool {
        (self.tls.is_some() && self.wants & TLS == 0)
            || self.http.as_ref().is_some_and(|h| h.ready())
            || self.dns.as_ref().is_some_and(|d| !d.messages.is_empty())
    }
}

/// What the analysers write, per output, and DNS's join table.
struct Outs {
    tls: Vec<Event>,
    http: Vec<Event>,
    dns: Vec<Event>,
    joiner: Joiner<ClientServer>,
}

impl Outs {
    /// The lines of a connection that has some ready, or that `ended`; an analyser done with
    /// the connection is dropped once its lines are out (its memory freed).
    fn report(&mut self, key: ConnKey, conn: &mut Conn<Apps>, ended: bool) {
        let apps = &mut conn.state;
        if let Some(t) = apps.tls.as_mut() {
            if ended || apps.wants & TLS == 0 {
                tls_log::write_line(key, conn.first_ns, t, &mut self.tls);
                apps.tls = None;
            }
        }
        if let Some(h) = apps.http.as_mut() {
            http_log::write_lines(key, h, ended, &mut self.http);
            if apps.wants & HTTP == 0 && h.idle() {
                apps.http = None;
            }
        }
        if let Some(d) = apps.dns.as_mut() {
            for (dir, ts_ns, m) in d.messages.drain(..) {
                let (src, dst) = if dir == 0 { key } else { (key.1, key.0) };
                join_message(&mut self.joiner, TCP, (src, dst), ts_ns, &m, &mut self.dns);
            }
            if apps.wants & DNS == 0 {
                apps.dns = None;
            }
        }
    }
}

/// The TCP side of `stream_log`: the shared connection table with its analysers, and the lines
/// they wrote (taken by [`TcpAnalysers::take`]).
pub struct TcpAnalysers {
    table: ConnTable<Apps>,
    outs: Outs,
}

impl TcpAnalysers {
    /// The analysers `wanted`, within the bounds of `s`.
    pub fn new(wanted: Wanted, s: &StreamLogSettings) -> Self {
        TcpAnalysers {
            table: ConnTable::new(wanted, s.max_conns, s.max_stream_bytes, s.max_total_bytes),
            outs: Outs {
                tls: Vec::new(),
                http: Vec::new(),
                dns: Vec::new(),
                joiner: Joiner::new(s.max_pending),
            },
        }
    }

    /// Takes one TCP packet.
    pub fn packet(&mut self, p: &TcpPacket<'_>) {
        let outs = &mut self.outs;
        self.table
            .packet(p, &mut |k, c, ended| outs.report(k, c, ended));
    }

    /// Ends every connection and every DNS request (the end of the input).
    pub fn finish(&mut self) {
        self.finish_tcp();
        self.finish_dns();
    }

    fn finish_tcp(&mut self) {
        let outs = &mut self.outs;
        self.table
            .finish(&mut |k, c, ended| outs.report(k, c, ended));
    }

    fn finish_dns(&mut self) {
        let outs = &mut self.outs;
        outs.joiner
            .finish(|x| outs.dns.push(exchange_event(&x, TCP)));
    }

    /// The lines written since the last call: TLS's, HTTP's, DNS's.
    pub fn take(&mut self) -> [Vec<Event>; 3] {
        let o = &mut self.outs;
        [
            std::mem::take(&mut o.tls),
            std::mem::take(&mut o.http),
            std::mem::take(&mut o.dns),
        ]
    }

    /// The shared table's counters.
    pub fn stats(&self) -> &ConnStats {
        &self.table.stats
    }

    /// The DNS joiner's counters.
    pub fn dns_stats(&self) -> &DnsStats {
        &self.outs.joiner.stats
    }

    /// Out-of-order bytes held now (within `max_total_bytes`).
    pub fn held(&self) -> usize {
        self.table.held()
    }

    /// Connections held now (within `max_conns`).
    pub fn conns(&self) -> usize {
        self.table.len()
    }
}

/// TLS, HTTP/1.x and DNS over one TCP reassembly, and QUIC's hellos, as log lines.
pub struct StreamLog {
    decoded: Decoded,
    config: DecodeConfig,
    settings: StreamLogSettings,
    /// Made at `start`, once the connected outputs say which analysers are on.
    tcp: Option<TcpAnalysers>,
    /// With TLS on (its lines go into TLS's of `tcp`).
    quic: Option<QuicTable>,
    lines: [u64; 3],
    pool: Pool<Events>,
    counters: Vec<Counter>,
}

impl Block for StreamLog {
    const TYPE: &'static str = "stream_log";
    const SUMMARY: &'static str = "TLS hellos, HTTP/1.x pairs and DNS over one shared TCP reassembly, and QUIC Initial hellos, as log lines (tls.jsonl, http.jsonl, DNS over TCP into dns.jsonl); an analyser runs when its output is connected";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets to read TLS, QUIC, HTTP and DNS over TCP from",
    }];
    const OUTPUTS: &'static [GateDef] = &[
        GateDef {
            name: "tls",
            ty: EVENTS,
            required: false,
            doc: "a log line per TCP or QUIC connection with a TLS hello",
        },
        GateDef {
            name: "http",
            ty: EVENTS,
            required: false,
            doc: "a log line per HTTP request/response pair, unanswered request or lone response",
        },
        GateDef {
            name: "dns",
            ty: EVENTS,
            required: false,
            doc: "a log line per DNS-over-TCP request/response pair, unanswered request or lone response",
        },
    ];
    type Settings = StreamLogSettings;

    fn check(s: &StreamLogSettings) -> Result<(), String> {
        if s.max_conns == 0 {
            return Err("max_conns must be at least 1".into());
        }
        if s.max_pending == 0 {
            return Err("max_pending must be at least 1".into());
        }
        if s.max_stream_bytes > s.max_total_bytes {
            return Err("max_stream_bytes must not exceed max_total_bytes".into());
        }
        Ok(())
    }

    fn build(s: StreamLogSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(StreamLog {
            decoded: Decoded::default(),
            // Tunnels descended: the application data is inside.
            config: DecodeConfig {
                tunnel: TunnelMode::Inner,
            },
            settings: s,
            tcp: None,
            quic: None,
            lines: [0; 3],
            pool: Pool::new(Events::default),
            counters: Vec::new(),
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        let wanted = Wanted {
            tls: ctx.is_connected(OUT_TLS),
            http: ctx.is_connected(OUT_HTTP),
            dns: ctx.is_connected(OUT_DNS),
        };
        let s = &self.settings;
        if wanted.tls || wanted.http || wanted.dns {
            self.tcp = Some(TcpAnalysers::new(wanted, s));
        }
        if wanted.tls {
            self.quic = Some(QuicTable::new(s.max_conns));
        }
        self.counters = STREAM_COUNTERS
            .iter()
            .chain(&QUIC_COUNTERS)
            .chain(&DNS_TCP_COUNTERS)
            .chain(&["tls_lines", "http_lines"])
            .map(|n| ctx.counter(n))
            .collect();
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(packets) = msg.get::<PacketBatch>() else {
            return;
        };
        for pkt in packets.batch().iter() {
            self.packet(&pkt);
        }
        self.send(ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        if let Some(t) = &mut self.tcp {
            t.finish_tcp();
            if let Some(q) = &mut self.quic {
                q.finish(&mut t.outs.tls);
            }
            t.finish_dns();
        }
        self.send(ctx);
    }
}

impl StreamLog {
    fn packet(&mut self, pkt: &PacketRecord<'_>) {
        let d = &mut self.decoded;
        if !decode(pkt.link_type, pkt.data, &self.config, d).has_key() {
            return;
        }
        if d.proto == UDP {
            let Some(q) = &mut self.quic else {
                return;
            };
            let start = (d.payload_offset as usize).min(pkt.data.len());
            let end = (start + d.payload_len as usize).min(pkt.data.len());
            let src = SocketAddr::new(d.src_addr(), d.src_port);
            let dst = SocketAddr::new(d.dst_addr(), d.dst_port);
            if let Some(t) = &mut self.tcp {
                // Into TLS's lines, in packet order with TCP's.
                q.packet(pkt.ts_ns, src, dst, &pkt.data[start..end], &mut t.outs.tls);
            }
            return;
        }
        if let (Some(t), Some(p)) = (&mut self.tcp, TcpPacket::of(d, pkt.data, pkt.ts_ns)) {
            t.packet(&p);
        }
    }

    fn send(&mut self, ctx: &mut Ctx<'_>) {
        let [mut tls, mut http, mut dns] = self
            .tcp
            .as_mut()
            .map(TcpAnalysers::take)
            .unwrap_or_default();
        for (gate, out) in [
            (OUT_TLS, &mut tls),
            (OUT_HTTP, &mut http),
            (OUT_DNS, &mut dns),
        ] {
            emit_lines(gate, out, &mut self.lines[gate], &mut self.pool, ctx);
        }
        let all = self.lines.iter().sum();
        let stream = self.tcp.as_ref().map(|t| t.stats().values(all));
        let quic = self.quic.as_ref().map(QuicTable::values);
        let dns = self
            .tcp
            .as_ref()
            .map(|t| *t.dns_stats())
            .unwrap_or_default();
        let values = stream
            .unwrap_or_default()
            .into_iter()
            .chain(quic.unwrap_or_default())
            .chain(dns_values(&dns, self.lines[OUT_DNS]))
            .chain([self.lines[OUT_TLS], self.lines[OUT_HTTP]]);
        for (c, v) in self.counters.iter().zip(values) {
            c.set(v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_flow::decode::tcp_flags;

    const CLIENT: &str = "10.0.0.1:40000";
    const SERVER: &str = "10.0.0.2:80";

    fn packet<'a>(from_client: bool, seq: u32, flags: u8, data: &'a [u8]) -> TcpPacket<'a> {
        let (c, s) = (CLIENT.parse().unwrap(), SERVER.parse().unwrap());
        let (src, dst) = if from_client { (c, s) } else { (s, c) };
        TcpPacket {
            ts_ns: u64::from(seq),
            src,
            dst,
            seq,
            flags,
            data,
            missing: 0,
        }
    }

    /// Feeds `packets` to a table with every analyser on; the lines per output.
    fn run(table: &mut ConnTable<Apps>, packets: &[TcpPacket<'_>]) -> Outs {
        let mut outs = Outs {
            tls: Vec::new(),
            http: Vec::new(),
            dns: Vec::new(),
            joiner: Joiner::new(16),
        };
        for p in packets {
            table.packet(p, &mut |k, c, ended| outs.report(k, c, ended));
        }
        outs
    }

    fn table() -> ConnTable<Apps> {
        let all = Wanted {
            tls: true,
            http: true,
            dns: true,
        };
        ConnTable::new(all, 16, 1 << 16, 1 << 20)
    }

    #[test]
    fn a_stream_no_analyser_wants_is_skipped_after_its_first_bytes() {
        let mut t = table();
        let noise = [0x00u8, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07];
        let outs = run(
            &mut t,
            &[
                packet(true, 100, tcp_flags::SYN, b""),
                packet(true, 101, tcp_flags::ACK, &noise),
                packet(false, 500, tcp_flags::ACK, &noise),
                // Neither TLS nor HTTP: from here on the connection is bypassed.
                packet(true, 109, tcp_flags::ACK, &noise),
                packet(false, 508, tcp_flags::ACK, &noise),
                // Out of order: would wait in a reassembly buffer if the stream were read.
                packet(true, 200, tcp_flags::ACK, &noise),
            ],
        );
        assert_eq!(t.stats.reassembly.segments, 2, "{:?}", t.stats);
        assert_eq!(t.held(), 0);
        assert!(outs.tls.is_empty() && outs.http.is_empty() && outs.dns.is_empty());
    }

    #[test]
    fn a_connection_waiting_for_its_server_keeps_a_small_state() {
        // The 1 M-connection case (bench/RESULTS.md): the client's first bytes are neither
        // TLS nor HTTP and the server never answers. HTTP's state is freed at once; TLS keeps
        // why the client failed (a line is still written if the server sends a hello).
        let all = Wanted {
            tls: true,
            http: true,
            dns: true,
        };
        let key = (CLIENT.parse().unwrap(), SERVER.parse().unwrap());
        let mut apps = Apps::new(&all, key);
        apps.chunk(0, key.0, 1, Chunk::Data(b"abcdefghij"));
        assert!(apps.http.is_none());
        assert_eq!(apps.wants, TLS);
        assert!(apps.tls.as_ref().is_some_and(|t| t.waiting()));
        assert!(
            std::mem::size_of::<TlsConn>() <= 72,
            "{}",
            std::mem::size_of::<TlsConn>()
        );
        // The server's hello comes after all: the line has it and the client's failure.
        let mut t = table();
        let mut outs = run(
            &mut t,
            &[
                packet(true, 100, tcp_flags::SYN, b""),
                packet(true, 101, tcp_flags::ACK, b"abcdefghij"),
                packet(false, 500, tcp_flags::ACK, SERVER_HELLO),
            ],
        );
        t.finish(&mut |k, c, ended| outs.report(k, c, ended));
        assert_eq!(outs.tls.len(), 1);
        let l = &outs.tls[0].json;
        assert_eq!(l["cipher"], 0x1301);
        assert_eq!(l["src_port"], 40000);
        assert_eq!(
            l["error"], "not a TLS handshake at offset 0 (record.type)",
            "{l}"
        );
    }

    /// A ServerHello record (TLS 1.3: supported_versions 0x0304, cipher 0x1301).
    const SERVER_HELLO: &[u8] = &[
        22, 3, 3, 0, 50, // record: handshake, 50 bytes
        2, 0, 0, 46, // ServerHello, 46 bytes
        3, 3, // legacy version
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, // random
        0, // session id
        0x13, 0x01, // cipher
        0,    // compression
        0, 6, // extensions
        0, 43, 0, 2, 3, 4, // supported_versions: TLS 1.3
    ];

    #[test]
    fn http_goes_on_after_tls_gave_up_and_each_output_gets_its_own_lines() {
        let mut t = table();
        let req = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n";
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nbody";
        let mut outs = run(
            &mut t,
            &[
                packet(true, 100, tcp_flags::SYN, b""),
                packet(true, 101, tcp_flags::ACK, req),
                packet(false, 500, tcp_flags::ACK, resp),
                // A second exchange: TLS is done (neither direction was TLS), HTTP reads on.
                packet(true, 101 + req.len() as u32, tcp_flags::ACK, req),
                packet(false, 500 + resp.len() as u32, tcp_flags::ACK, resp),
            ],
        );
        assert_eq!(t.stats.reassembly.segments, 4);
        t.finish(&mut |k, c, ended| outs.report(k, c, ended));
        assert!(outs.tls.is_empty() && outs.dns.is_empty());
        assert_eq!(outs.http.len(), 2);
        for l in &outs.http {
            assert_eq!(l.json["uri"], "/a");
            assert_eq!(l.json["status"], 200);
            assert_eq!(l.json["response_body_len"], 4);
        }
    }

    #[test]
    fn dns_over_tcp_reads_messages_split_and_joined_across_segments() {
        let mut t = table();
        // A query for "a." (type A) and its response, each with its 2-byte length; the
        // request split inside its length prefix, the response in a segment with nothing else.
        let query: &[u8] = &[
            0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'a', 0, 0, 1, 0, 1,
        ];
        let answer: &[u8] = &[
            0x12, 0x34, 0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0, 1, b'a', 0, 0, 1, 0, 1, 0xc0, 12, 0, 1,
            0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1,
        ];
        let mut q = (query.len() as u16).to_be_bytes().to_vec();
        q.extend_from_slice(query);
        let mut a = (answer.len() as u16).to_be_bytes().to_vec();
        a.extend_from_slice(answer);
        let c: std::net::SocketAddr = CLIENT.parse().unwrap();
        let s: std::net::SocketAddr = "10.0.0.2:53".parse().unwrap();
        let seg = |from_client: bool, seq: u32, data: &'static [u8]| TcpPacket {
            ts_ns: u64::from(seq),
            src: if from_client { c } else { s },
            dst: if from_client { s } else { c },
            seq,
            flags: tcp_flags::ACK,
            data,
            missing: 0,
        };
        let (q, a): (&'static [u8], &'static [u8]) = (q.leak(), a.leak());
        let mut outs = run(
            &mut t,
            &[
                seg(true, 1000, &q[..1]),
                seg(true, 1001, &q[1..]),
                seg(false, 7000, a),
            ],
        );
        t.finish(&mut |k, c, ended| outs.report(k, c, ended));
        outs.joiner
            .finish(|x| outs.dns.push(exchange_event(&x, TCP)));
        assert_eq!(outs.dns.len(), 1);
        let l = &outs.dns[0].json;
        assert_eq!(l["proto"], 6);
        assert_eq!(l["query"], "a");
        assert_eq!(l["answers"][0], "192.0.2.1");
        // From the segment that completed the request to the response.
        assert_eq!(l["rtt_ns"], 7000 - 1001);
        assert_eq!(l["src_port"], 40000);
        assert_eq!(outs.joiner.stats.joined, 1);
    }
}
