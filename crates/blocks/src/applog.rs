//! Application-layer logs (issue 23, docs/specs/logs.md) as blocks fed with packets.
//!
//! `dns_log`: DNS over UDP (ports 53, 5353, 5355) parsed by trawl-app, each request joined to
//! its response by (client, server, transaction ID) in a bounded table, one event per exchange
//! (`dns.jsonl` of `trawl logs`). Unanswered requests are written when the table needs their
//! room (oldest first, counted `evicted`) or at the end of the input.
use std::net::SocketAddr;

use serde::Deserialize;
use serde_json::{json, Map, Value};
use trawl_app::dns::{self, DnsStats, Exchange, Joiner, Message};
use trawl_capture::PacketRecord;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, Pool};
use trawl_flow::community_id::{CommunityId, FlowTuple};
use trawl_flow::decode::{decode, DecodeConfig, Decoded};

use crate::messages::{Event, Events, PacketBatch, EVENTS, PACKETS};

/// UDP ports whose datagrams are read as DNS: DNS, mDNS, LLMNR (as tshark's dissector).
pub const DNS_UDP_PORTS: [u16; 3] = [53, 5353, 5355];

/// IP protocol number of UDP.
const UDP: u8 = 17;

/// Client and server of an exchange: the sender of the request first, whichever direction a
/// message travels (the key under which its request and response meet).
pub(crate) type ClientServer = (SocketAddr, SocketAddr);

/// Settings of `dns_log`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DnsLogSettings {
    /// Requests waiting for their response at once (default 65536); beyond it the oldest is
    /// written unanswered.
    #[serde(default = "default_pending")]
    pub max_pending: usize,
}

fn default_pending() -> usize {
    65536
}

/// The counters of `dns_log`, in the order [`dns_values`] gives them.
pub(crate) const COUNTERS: [&str; 8] = [
    "messages",
    "truncated_header",
    "faults",
    "joined",
    "unmatched_responses",
    "evicted",
    "duplicate_requests",
    "lines",
];

/// DNS request/response pairs as log lines.
pub struct DnsLog {
    decoded: Decoded,
    joiner: Joiner<ClientServer>,
    out: Vec<Event>,
    lines: u64,
    pool: Pool<Events>,
    counters: Vec<Counter>,
}

impl Block for DnsLog {
    const TYPE: &'static str = "dns_log";
    const SUMMARY: &'static str =
        "DNS over UDP: each request joined to its response, one log line per exchange (dns.jsonl)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets to read DNS from",
    }];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "events",
        ty: EVENTS,
        required: true,
        doc: "a log line per request/response pair, unanswered request or lone response",
    }];
    type Settings = DnsLogSettings;

    fn check(s: &DnsLogSettings) -> Result<(), String> {
        if s.max_pending == 0 {
            return Err("max_pending must be at least 1".into());
        }
        Ok(())
    }

    fn build(s: DnsLogSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(DnsLog {
            decoded: Decoded::default(),
            joiner: Joiner::new(s.max_pending),
            out: Vec::new(),
            lines: 0,
            pool: Pool::new(Events::default),
            counters: Vec::new(),
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = COUNTERS.iter().map(|n| ctx.counter(n)).collect();
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
        let out = &mut self.out;
        self.joiner.finish(|x| out.push(exchange_event(&x, UDP)));
        self.send(ctx);
    }
}

impl DnsLog {
    fn packet(&mut self, pkt: &PacketRecord<'_>) {
        let d = &mut self.decoded;
        if !decode(pkt.link_type, pkt.data, &DecodeConfig::default(), d).has_key()
            || d.proto != UDP
            || !(DNS_UDP_PORTS.contains(&d.src_port) || DNS_UDP_PORTS.contains(&d.dst_port))
        {
            return;
        }
        let start = (d.payload_offset as usize).min(pkt.data.len());
        let end = (start + d.payload_len as usize).min(pkt.data.len());
        let src = SocketAddr::new(d.src_addr(), d.src_port);
        let dst = SocketAddr::new(d.dst_addr(), d.dst_port);
        join_message(
            &mut self.joiner,
            UDP,
            (src, dst),
            pkt.ts_ns,
            &pkt.data[start..end],
            &mut self.out,
        );
    }

    fn update_counters(&self) {
        let values = dns_values(&self.joiner.stats, self.lines);
        for (c, v) in self.counters.iter().zip(values) {
            c.set(v);
        }
    }

    fn send(&mut self, ctx: &mut Ctx<'_>) {
        emit_lines(0, &mut self.out, &mut self.lines, &mut self.pool, ctx);
        self.update_counters();
    }
}

/// The values of [`COUNTERS`]: a joiner's counts and the lines written.
pub(crate) fn dns_values(s: &DnsStats, lines: u64) -> [u64; 8] {
    [
        s.messages,
        s.truncated_header,
        s.faults.iter().sum(),
        s.joined,
        s.unmatched_responses,
        s.evicted,
        s.duplicate_requests,
        lines,
    ]
}

/// Counts and parses one DNS message (`payload`, a UDP datagram's or one of a TCP stream's
/// length-prefixed messages) sent from `src` to `dst` over `proto`, and joins it: the lines of
/// the exchanges it ends go to `out`. DNS over UDP (`dns_log`) and over TCP (`stream_log`) are
/// joined alike, each in its own table.
pub(crate) fn join_message(
    joiner: &mut Joiner<ClientServer>,
    proto: u8,
    (src, dst): ClientServer,
    ts_ns: u64,
    payload: &[u8],
    out: &mut Vec<Event>,
) {
    let parsed = dns::parse(payload);
    joiner.stats.count(&parsed);
    let Ok(msg) = parsed else {
        return;
    };
    let key = if msg.flags.response {
        (dst, src)
    } else {
        (src, dst)
    };
    joiner.push(key, ts_ns, msg, |x| out.push(exchange_event(&x, proto)));
}

/// Sends the log lines `out` holds (if any) as one batch on output `gate`, counting them in
/// `lines`: the log blocks' (`dns_log`, `stream_log`) common way out.
pub(crate) fn emit_lines(
    gate: usize,
    out: &mut Vec<Event>,
    lines: &mut u64,
    pool: &mut Pool<Events>,
    ctx: &mut Ctx<'_>,
) {
    if out.is_empty() {
        return;
    }
    *lines += out.len() as u64;
    let mut slot = pool.take();
    let batch = slot.get_mut();
    batch.events.clear();
    batch.events.append(out);
    ctx.emit(gate, slot.into_msg());
}

/// The log line of one exchange over `proto` (fields of docs/specs/logs.md, DNS).
pub(crate) fn exchange_event(x: &Exchange<ClientServer>, proto: u8) -> Event {
    let (client, server) = x.key;
    let (req, resp) = (x.request.as_ref(), x.response.as_ref());
    let ts_ns = x.request_ts_ns.or(x.response_ts_ns).unwrap_or(0);
    let tuple = FlowTuple {
        proto,
        src_ip: client.ip(),
        dst_ip: server.ip(),
        src_port: client.port(),
        dst_port: server.port(),
    };
    let mut j = Map::new();
    j.insert("ts_ns".into(), json!(ts_ns));
    if let Some(id) = CommunityId::default().text(&tuple) {
        j.insert("community_id".into(), json!(id.as_str()));
    }
    j.insert("src_ip".into(), json!(client.ip().to_string()));
    j.insert("src_port".into(), json!(client.port()));
    j.insert("dst_ip".into(), json!(server.ip().to_string()));
    j.insert("dst_port".into(), json!(server.port()));
    j.insert("proto".into(), json!(proto));
    j.insert("trans_id".into(), json!(x.trans_id));
    // One of the two is always there; the request speaks for the exchange when both are.
    if let Some(first) = req.or(resp) {
        j.insert("opcode".into(), json!(first.flags.opcode));
    }
    if let Some(q) = req
        .and_then(|m| m.questions.first())
        .or_else(|| resp.and_then(|m| m.questions.first()))
    {
        j.insert("query".into(), json!(q.name));
        j.insert("qtype".into(), json!(q.qtype));
        j.insert("qclass".into(), json!(q.qclass));
    }
    if let Some(rd) = req.or(resp).map(|m| m.flags.rd) {
        j.insert("rd".into(), json!(rd));
    }
    if let Some(tc) = resp.or(req).map(|m| m.flags.tc) {
        j.insert("tc".into(), json!(tc));
    }
    if let Some(r) = resp {
        response_fields(r, &mut j);
    }
    if let (Some(a), Some(b)) = (x.request_ts_ns, x.response_ts_ns) {
        j.insert("rtt_ns".into(), json!(b.saturating_sub(a)));
    }
    let error = resp
        .and_then(|m| m.error)
        .or_else(|| req.and_then(|m| m.error));
    if let Some(e) = error {
        // The kind, offset and field without the crate's `dns: ` prefix.
        let text = e.to_string();
        let text = text.strip_prefix("dns: ").unwrap_or(&text);
        j.insert("error".into(), json!(text));
    }
    Event {
        ts_ns,
        json: Value::Object(j),
    }
}

/// What only a response has: its code, the AA and RA flags, the answers and their TTLs.
fn response_fields(r: &Message, j: &mut Map<String, Value>) {
    j.insert("rcode".into(), json!(r.flags.rcode));
    j.insert("aa".into(), json!(r.flags.aa));
    j.insert("ra".into(), json!(r.flags.ra));
    let answers: Vec<String> = r.answers.iter().map(dns::Record::data_text).collect();
    let ttls: Vec<u32> = r.answers.iter().map(|a| a.ttl).collect();
    j.insert("answers".into(), json!(answers));
    j.insert("ttls".into(), json!(ttls));
}
