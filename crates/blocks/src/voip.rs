//! `sip` and `rtp_calls`: VoIP monitoring (issue 24) as two blocks. `sip` finds SIP messages
//! in UDP datagrams and TCP streams (also inside GTP-U tunnels) and sends them, parsed, to
//! `rtp_calls`, which keeps the call table of trawl-voip: dialogs by Call-ID, RTP streams by
//! media endpoint, orphan streams by heuristic, and writes a record per call and per stream
//! as events (`calls.jsonl` and `rtp.jsonl` of `trawl voip`).
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};
use std::time::{Duration, Instant};

use serde::Deserialize;
use trawl_capture::{LinkType, PacketRecord};
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, MsgType, Payload, Pool, TimerId};
use trawl_flow::decode::{decode, DecodeConfig, Decoded, ParseOutcome};
use trawl_voip::{sip, Output, PacketKind, Packets, SipEvent, Tracker, TrackerConfig};

use crate::messages::{Event, Events, PacketBatch, EVENTS, PACKETS};

mod anomaly;
mod tcp;
mod ws;
pub use anomaly::{SipAnomaly, SipAnomalySettings};
use tcp::{Placed, TcpStreams};

/// Gates carrying [`SipBatch`].
pub const SIP: MsgType = MsgType::of::<SipBatch>("sip");

/// The SIP messages found in one packet batch, in packet order (one per batch, even empty),
/// and what each packet of the batch decoded to.
#[derive(Default)]
pub struct SipBatch {
    /// The messages.
    pub events: Vec<SipEvent>,
    /// From live capture (receivers may move their clocks on by wall time when it is quiet).
    pub live: bool,
    /// One per packet of the batch, in order, its payload a range of the batch's bytes
    /// ([`trawl_capture::Batch::bytes`]): `rtp_calls` takes the packets from here instead of
    /// decoding them a second time (bench/RESULTS.md, "VoIP").
    pub packets: Packets,
}

impl Payload for SipBatch {
    fn items(&self) -> usize {
        self.events.len()
    }
}

/// GTP-U's UDP port (3GPP TS 29.281): mobile networks carry VoLTE's SIP and RTP in it.
const GTP_U_PORT: u16 = 2152;

/// A packet's transport: endpoints, TCP or UDP, and the payload bytes captured.
pub struct Transport<'a> {
    /// Source address and port.
    pub src: SocketAddr,
    /// Destination address and port.
    pub dst: SocketAddr,
    /// TCP (else UDP).
    pub tcp: bool,
    /// TCP: the segment's sequence number.
    pub seq: u32,
    /// TCP: FIN or RST (the direction ends).
    pub fin_or_rst: bool,
    /// The transport payload as captured.
    pub payload: &'a [u8],
}

/// VXLAN's UDP port: the general decoder descends into it.
const VXLAN_PORT: u16 = 4789;

/// A UDP datagram as [`fast_udp`] reads it: addresses as they are in the packet.
#[derive(Clone, Copy)]
struct Udp<'a> {
    addrs: Addrs,
    sport: u16,
    dport: u16,
    payload: &'a [u8],
}

#[derive(Clone, Copy)]
enum Addrs {
    V4(Ipv4Addr, Ipv4Addr),
    V6(Ipv6Addr, Ipv6Addr),
}

impl<'a> Udp<'a> {
    /// As a [`Transport`].
    fn transport(&self) -> Transport<'a> {
        let (src, dst) = match self.addrs {
            Addrs::V4(s, d) => (IpAddr::V4(s), IpAddr::V4(d)),
            Addrs::V6(s, d) => (IpAddr::V6(s), IpAddr::V6(d)),
        };
        Transport {
            src: SocketAddr::new(src, self.sport),
            dst: SocketAddr::new(dst, self.dport),
            tcp: false,
            seq: 0,
            fin_or_rst: false,
            payload: self.payload,
        }
    }
}

/// The common case of [`transport`] without the general decoder: Ethernet (one VLAN tag at
/// most), IPv4 without fragmentation or IPv6 without extension headers, UDP (not GTP-U nor
/// VXLAN). `None` for anything else, which the general decoder then reads: what this returns
/// is what it would (bench/RESULTS.md, "VoIP": RTP is nearly all of a VoIP link's packets and
/// was decoded twice per packet through the general decoder).
#[inline]
fn fast_udp(link: LinkType, data: &[u8]) -> Option<Udp<'_>> {
    if link != LinkType::ETHERNET {
        return None;
    }
    let mut off = 12;
    let mut ty = u16::from_be_bytes(data.get(off..off + 2)?.try_into().ok()?);
    if ty == 0x8100 {
        off += 4;
        ty = u16::from_be_bytes(data.get(off..off + 2)?.try_into().ok()?);
    }
    let ip = off + 2;
    let (addrs, l4_off, l4_len) = match ty {
        0x0800 => {
            let h = data.get(ip..ip + 20)?;
            let header_len = usize::from(h[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            // Version, fragments (MF or an offset), UDP, and a length that holds the header.
            if h[0] >> 4 != 4 || header_len < 20 || h[6] & 0x3f != 0 || h[7] != 0 || h[9] != 17 {
                return None;
            }
            if total < header_len || data.len() < ip + header_len {
                return None;
            }
            let src = Ipv4Addr::from(<[u8; 4]>::try_from(&h[12..16]).ok()?);
            let dst = Ipv4Addr::from(<[u8; 4]>::try_from(&h[16..20]).ok()?);
            (Addrs::V4(src, dst), ip + header_len, total - header_len)
        }
        0x86dd => {
            let h = data.get(ip..ip + 40)?;
            let len = usize::from(u16::from_be_bytes([h[4], h[5]]));
            if h[0] >> 4 != 6 || h[6] != 17 || len == 0 {
                return None;
            }
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&h[8..24]).ok()?);
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&h[24..40]).ok()?);
            (Addrs::V6(src, dst), ip + 40, len)
        }
        _ => return None,
    };
    let u = data.get(l4_off..l4_off + 8)?;
    // The UDP header within the IP packet's stated length (else the decoder says why not).
    if l4_len < 8 {
        return None;
    }
    let (sport, dport) = (
        u16::from_be_bytes([u[0], u[1]]),
        u16::from_be_bytes([u[2], u[3]]),
    );
    let udp_len = usize::from(u16::from_be_bytes([u[4], u[5]]));
    let tunnel = sport == GTP_U_PORT || dport == GTP_U_PORT || dport == VXLAN_PORT;
    if udp_len < 8 || udp_len > l4_len || tunnel {
        return None;
    }
    let start = (l4_off + 8).min(data.len());
    let end = (start + udp_len.min(l4_len) - 8).min(data.len());
    Some(Udp {
        addrs,
        sport,
        dport,
        payload: &data[start..end],
    })
}

/// Decodes a packet down to its UDP or TCP payload, through one GTP-U tunnel (what `sip` and
/// `rtp_calls` read; `trawl voip audio` finds a call's RTP with it).
#[inline]
pub fn transport<'a>(link: LinkType, data: &'a [u8], d: &mut Decoded) -> Option<Transport<'a>> {
    match fast_udp(link, data) {
        Some(u) => Some(u.transport()),
        None => decoded_transport(link, data, d),
    }
}

/// [`transport`] through the general decoder (every link type, tunnel, fragment and TCP).
fn decoded_transport<'a>(link: LinkType, data: &'a [u8], d: &mut Decoded) -> Option<Transport<'a>> {
    let cfg = DecodeConfig::default();
    let (mut data, mut link) = (data, link);
    for _ in 0..2 {
        if decode(link, data, &cfg, d) != ParseOutcome::Ok || !matches!(d.proto, 6 | 17) {
            return None;
        }
        let start = (d.payload_offset as usize).min(data.len());
        let end = (start + d.payload_len as usize).min(data.len());
        let payload = &data[start..end];
        if d.proto == 17 && (d.src_port == GTP_U_PORT || d.dst_port == GTP_U_PORT) {
            if let Some(inner) = gtp_u_payload(payload) {
                data = inner;
                link = LinkType::RAW;
                continue;
            }
        }
        let tcp = d.proto == 6;
        return Some(Transport {
            src: SocketAddr::new(d.src_addr(), d.src_port),
            dst: SocketAddr::new(d.dst_addr(), d.dst_port),
            tcp,
            seq: if tcp { d.tcp.seq } else { 0 },
            fin_or_rst: tcp && d.tcp.flags & (TCP_FIN | TCP_RST) != 0,
            payload,
        });
    }
    None
}

/// Decodes a packet of a batch whose bytes are `bytes` ([`transport`]) and adds it to
/// `packets` as the call table takes it: UDP that is not SIP as media, TCP and SIP as
/// packets that only move time on, others as not decoded. What `sip` decodes once for both.
/// Returns the transport of the packets `sip` reads further (SIP over UDP, TCP).
#[inline]
fn decode_packet<'a>(
    pkt: &PacketRecord<'a>,
    bytes: &[u8],
    d: &mut Decoded,
    packets: &mut Packets,
) -> Option<Transport<'a>> {
    // The payload is a part of the batch's bytes (maybe of a tunnel's inner packet in them).
    let start = |payload: &[u8]| (payload.as_ptr() as usize).wrapping_sub(bytes.as_ptr() as usize);
    // The common case first, without a `SocketAddr` for packets that only the call table reads
    // (one put together field by field and read back whole stalled on store forwarding).
    if let Some(u) = fast_udp(pkt.link_type, pkt.data) {
        let sip = sip::looks_like_sip(u.payload);
        let kind = if sip {
            PacketKind::Other
        } else {
            PacketKind::Media
        };
        let (at, len) = (start(u.payload), u.payload.len());
        match u.addrs {
            Addrs::V4(s, d) => {
                let ends = (SocketAddrV4::new(s, u.sport), SocketAddrV4::new(d, u.dport));
                packets.push_v4(pkt.ts_ns, ends, at, len, kind);
            }
            Addrs::V6(..) => {
                let t = u.transport();
                packets.push(pkt.ts_ns, t.src, t.dst, at, len, kind);
            }
        }
        return sip.then(|| u.transport());
    }
    let Some(t) = decoded_transport(pkt.link_type, pkt.data, d) else {
        packets.push_ignored(pkt.ts_ns);
        return None;
    };
    let kind = if !t.tcp && !sip::looks_like_sip(t.payload) {
        PacketKind::Media
    } else {
        PacketKind::Other
    };
    packets.push(
        pkt.ts_ns,
        t.src,
        t.dst,
        start(t.payload),
        t.payload.len(),
        kind,
    );
    (kind == PacketKind::Other).then_some(t)
}

/// The T-PDU of a GTPv1-U G-PDU (message type 255), after the optional fields and extension
/// headers.
fn gtp_u_payload(b: &[u8]) -> Option<&[u8]> {
    if b.len() < 8 || b[0] >> 5 != 1 || b[0] & 0x10 == 0 || b[1] != 0xff {
        return None;
    }
    let mut at = 8;
    if b[0] & 0x07 != 0 {
        at += 4;
        let mut next = *b.get(at - 1)?;
        while next != 0 {
            let words = *b.get(at)? as usize;
            if words == 0 {
                return None;
            }
            at += 4 * words;
            next = *b.get(at - 1)?;
        }
    }
    b.get(at..)
}

/// Bytes of SIP kept per TCP connection while waiting for the rest of a message.
const TCP_BUFFER: usize = 64 * 1024;

const TCP_FIN: u8 = trawl_flow::decode::tcp_flags::FIN;
const TCP_RST: u8 = trawl_flow::decode::tcp_flags::RST;

/// Finds and parses SIP messages.
pub struct SipBlock {
    decoded: Decoded,
    /// SIP's TCP streams, put back in order (sender, receiver).
    tcp: TcpStreams,
    pool: Pool<SipBatch>,
    out: Vec<SipEvent>,
    messages: Option<Counter>,
    malformed: Option<Counter>,
    tcp_reordered: Option<Counter>,
    tcp_gaps: Option<Counter>,
    /// SIP messages read out of WebSocket frames.
    websocket: Option<Counter>,
    /// A WebSocket message's payload, unmasked.
    ws_message: Vec<u8>,
    /// The batch's packets so far, for `rtp_calls`.
    packets: Packets,
}

/// Settings of `sip`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SipSettings {
    /// Directions of TCP connections followed at once (default 65536); beyond, those idle
    /// for a minute are forgotten, or a new one's segments are taken alone.
    #[serde(default = "default_connections")]
    pub max_tcp_connections: usize,
}

fn default_connections() -> usize {
    65536
}

const PACKETS_IN: GateDef = GateDef {
    name: "packets",
    ty: PACKETS,
    required: true,
    doc: "packets to look for SIP in",
};

impl Block for SipBlock {
    const TYPE: &'static str = "sip";
    const SUMMARY: &'static str =
        "finds SIP messages in UDP datagrams, TCP streams and WebSocket connections (and in GTP-U) and parses them with their SDP";
    const INPUTS: &'static [GateDef] = &[PACKETS_IN];
    const OUTPUTS: &'static [GateDef] = &[
        GateDef {
            name: "sip",
            ty: SIP,
            required: true,
            doc: "SIP messages with their SDP media, for rtp_calls",
        },
        GateDef {
            name: "packets",
            ty: PACKETS,
            required: false,
            doc: "the packets received, each batch after its SIP batch: rtp_calls fed from \
                  here gets both halves of every pair even when a lossy queue into `sip` \
                  drops batches (live capture)",
        },
    ];
    type Settings = SipSettings;

    fn build(s: SipSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(SipBlock {
            decoded: Decoded::default(),
            tcp: TcpStreams::new(s.max_tcp_connections),
            pool: Pool::new(SipBatch::default),
            out: Vec::new(),
            messages: None,
            malformed: None,
            tcp_reordered: None,
            tcp_gaps: None,
            websocket: None,
            ws_message: Vec::new(),
            packets: Packets::default(),
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.messages = Some(ctx.counter("messages"));
        self.malformed = Some(ctx.counter("malformed"));
        self.tcp_reordered = Some(ctx.counter("tcp_reordered"));
        self.tcp_gaps = Some(ctx.counter("tcp_gaps"));
        self.websocket = Some(ctx.counter("websocket_messages"));
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(packets) = msg.get::<PacketBatch>() else {
            return;
        };
        let batch = packets.batch();
        for pkt in batch.iter() {
            self.packet(&pkt, batch.bytes());
        }
        // A batch for every packet batch, empty or not: `rtp_calls` pairs them up to apply
        // each SIP message before the packets that follow it.
        if let Some(c) = &self.messages {
            c.add(self.out.len() as u64);
        }
        let mut slot = self.pool.take();
        let batch = slot.get_mut();
        batch.events.clear();
        batch.events.append(&mut self.out);
        std::mem::swap(&mut batch.packets, &mut self.packets);
        self.packets.clear();
        batch.live = packets.live;
        ctx.emit(0, slot.into_msg());
        if ctx.is_connected(1) {
            ctx.emit(1, msg.clone());
        }
    }
}

impl SipBlock {
    fn packet(&mut self, pkt: &PacketRecord<'_>, bytes: &[u8]) {
        let Some(t) = decode_packet(pkt, bytes, &mut self.decoded, &mut self.packets) else {
            return;
        };
        if !t.tcp {
            // UDP the call table does not take as media is SIP.
            match sip::parse(t.payload) {
                Ok(m) => self
                    .out
                    .push(SipEvent::new(pkt.ts_ns, t.src, t.dst, false, &m)),
                Err(_) => self.count_malformed(),
            }
            return;
        }
        self.tcp_segment(pkt.ts_ns, &t);
    }

    fn count_malformed(&self) {
        if let Some(c) = &self.malformed {
            c.add(1);
        }
    }

    /// SIP over TCP (and over WebSocket, [`ws`]): segments put in order by sequence number
    /// ([`TcpStreams`]), then the messages complete in the direction's bytes parsed.
    fn tcp_segment(&mut self, ts_ns: u64, t: &Transport<'_>) {
        let key = (t.src, t.dst);
        let starts = sip::looks_like_sip(t.payload)
            || ws::is_sip_handshake(t.payload)
            || ws::frame_starts_sip(t.payload);
        match self.tcp.segment(ts_ns, key, t.seq, t.payload, starts) {
            Placed::Ready => {
                let mut buf = self
                    .tcp
                    .buffer(&key)
                    .map(std::mem::take)
                    .unwrap_or_default();
                self.parse_stream(ts_ns, t, &mut buf);
                if buf.len() > TCP_BUFFER {
                    // No message this long: not SIP after all, or a gap; start again at the
                    // next segment that starts a message.
                    self.tcp.close(&key);
                } else if let Some(held) = self.tcp.buffer(&key) {
                    *held = buf;
                }
            }
            Placed::Untracked => {
                let mut buf = t.payload.to_vec();
                self.parse_stream(ts_ns, t, &mut buf);
            }
            Placed::Held | Placed::Ignored => {}
        }
        if t.fin_or_rst {
            self.tcp.close(&key);
        }
        let s = self.tcp.stats;
        for (c, v) in [(&self.tcp_reordered, s.reordered), (&self.tcp_gaps, s.gaps)] {
            if let Some(c) = c {
                c.set(v);
            }
        }
    }

    /// Parses the complete messages at the start of a direction's bytes and drains them;
    /// what is left is the start of an incomplete one. The bytes are SIP, or a WebSocket
    /// handshake and frames carrying SIP ([`ws`]: each tells by its first byte).
    fn parse_stream(&mut self, ts_ns: u64, t: &Transport<'_>, buf: &mut Vec<u8>) {
        let mut at = 0;
        while at < buf.len() {
            // Keep-alive CRLFs between messages (RFC 5626 §3.5.1).
            if matches!(buf[at], b'\r' | b'\n') {
                at += 1;
                continue;
            }
            if ws::is_frame_start(buf[at]) {
                match self.ws_frames(ts_ns, t, &buf[at..]) {
                    Some(n) => at += n,
                    None => break,
                }
                continue;
            }
            if ws::is_http(&buf[at..]) {
                // The Upgrade request or its answer: nothing for the call table.
                match sip::header_end(&buf[at..]) {
                    Some(n) => at += n,
                    None => break,
                }
                continue;
            }
            match sip::parse(&buf[at..]) {
                Ok(m) => {
                    self.out.push(SipEvent::new(ts_ns, t.src, t.dst, true, &m));
                    at += m.len.max(1);
                }
                Err(trawl_voip::Error::Incomplete) => break,
                Err(_) => {
                    self.count_malformed();
                    at = buf.len();
                }
            }
        }
        buf.drain(..at);
    }

    /// Reads the WebSocket message at the start of `b` and parses the SIP message in it.
    /// Returns the bytes taken, or `None` when the message's frames are not all there yet.
    fn ws_frames(&mut self, ts_ns: u64, t: &Transport<'_>, b: &[u8]) -> Option<usize> {
        match ws::message(b, &mut self.ws_message) {
            ws::Frames::Incomplete => None,
            ws::Frames::Control(n) => Some(n),
            ws::Frames::Invalid => {
                self.count_malformed();
                Some(b.len())
            }
            ws::Frames::Message(n) => {
                // Each SIP message travels in one WebSocket message (RFC 7118 §5.2): whole.
                match sip::parse(&self.ws_message) {
                    Ok(m) => {
                        self.out.push(SipEvent::new(ts_ns, t.src, t.dst, true, &m));
                        if let Some(c) = &self.websocket {
                            c.add(1);
                        }
                    }
                    Err(_) => self.count_malformed(),
                }
                Some(n)
            }
        }
    }
}

/// The call table: SIP from `sip`, RTP and RTCP from the packets.
pub struct RtpCalls {
    tracker: Tracker,
    /// End reason of calls in progress at the end ([`OpenAtEnd`]).
    open_at_end: &'static str,
    /// The last packet's time, when it was received, and whether it was captured live.
    last_packet: Option<(u64, Instant, bool)>,
    /// Packet batches and SIP batches not yet paired (one SIP batch per packet batch).
    packets: VecDeque<Msg>,
    sips: VecDeque<Msg>,
    decoded: Decoded,
    /// Packets decoded here (when `sip` sent none for them).
    own: Packets,
    out: Output,
    pool: Pool<Events>,
    counters: Vec<Counter>,
    /// The stats lines' packet-time clock (`stats_every`) and the lines not yet sent.
    stats: Option<StatsClock>,
    stats_lines: Vec<Event>,
}

/// When the packets' time crosses the next multiple of `every_ns` (since the epoch).
struct StatsClock {
    every_ns: u64,
    /// The next multiple to cross; 0 before the first packet.
    next_ns: u64,
}

impl StatsClock {
    /// The multiple of the period that a packet at `ts_ns` crosses, if it crosses one (the
    /// latest, when it skips several); the first packet only sets the clock.
    #[inline]
    fn crossed(&mut self, ts_ns: u64) -> Option<u64> {
        if ts_ns < self.next_ns {
            return None;
        }
        let at = ts_ns - ts_ns % self.every_ns;
        let first = self.next_ns == 0;
        self.next_ns = at + self.every_ns;
        (!first).then_some(at)
    }
}

/// A stats line (docs/specs/voip.md, `stats.jsonl`): the process's CPU time so far, every
/// thread's (`getrusage`), its peak memory and the table's counters, when the packets' time
/// reached `ts_ns` (`end`: the input's end, before the calls in progress are written).
fn stats_line(ts_ns: u64, end: bool, s: &trawl_voip::TrackerStats) -> Event {
    let (user, system, max_rss_kb) = trawl_capture::live::process_usage();
    Event {
        ts_ns,
        json: serde_json::json!({
            "ts_ns": ts_ns,
            "end": end,
            "cpu_s": (user + system).as_secs_f64(),
            "cpu_user_s": user.as_secs_f64(),
            "cpu_system_s": system.as_secs_f64(),
            "max_rss_kb": max_rss_kb,
            "calls": s.calls,
            "active_calls": s.active_calls,
            "active_streams": s.active_streams,
            "calls_evicted": s.calls_evicted,
            "rtp_packets": s.rtp_packets,
            "rtcp_packets": s.rtcp_packets,
            "sip_messages": s.sip_messages,
            "streams_refused": s.streams_refused,
        }),
    }
}

/// Settings of `rtp_calls` (docs/blocks.md; defaults as `trawl voip`).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RtpCallsSettings {
    /// Calls held at once; beyond it the oldest is evicted (default 1Mi).
    pub max_calls: Option<usize>,
    /// Streams held at once (default 4Mi).
    pub max_streams: Option<usize>,
    /// A call without SIP or RTP this long times out (default 300s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub call_timeout: Option<u64>,
    /// Time after BYE, CANCEL or a failure for the last packets (default 2s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub linger: Option<u64>,
    /// An orphan stream idle this long is written (default 60s).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub stream_timeout: Option<u64>,
    /// Measure RTP streams without signalling, found by heuristic (default true).
    pub orphans: Option<bool>,
    /// Packets in sequence before such a stream counts (default 4).
    pub orphan_packets: Option<u64>,
    /// End reason of the calls still in progress when the input ends: `active_at_end`
    /// (default, capture files) or `shutdown` (a live monitor stopping).
    #[serde(default)]
    pub open_at_end: OpenAtEnd,
    /// A stats line on the `stats` output each time the packets' time crosses a multiple of
    /// this span, and one at the input's end (default: none).
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub stats_every: Option<u64>,
}

/// What calls still in progress at the end of the input are written as.
#[derive(Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum OpenAtEnd {
    /// `active_at_end`: the capture ended during the call.
    #[default]
    ActiveAtEnd,
    /// `shutdown`: the monitor stopped during the call.
    Shutdown,
}

impl OpenAtEnd {
    fn reason(self) -> &'static str {
        match self {
            OpenAtEnd::ActiveAtEnd => "active_at_end",
            OpenAtEnd::Shutdown => "shutdown",
        }
    }
}

impl RtpCallsSettings {
    /// The table's configuration.
    pub fn config(&self) -> TrackerConfig {
        let d = TrackerConfig::default();
        TrackerConfig {
            max_calls: self.max_calls.unwrap_or(d.max_calls),
            max_streams: self.max_streams.unwrap_or(d.max_streams),
            call_timeout_ns: self.call_timeout.unwrap_or(d.call_timeout_ns),
            linger_ns: self.linger.unwrap_or(d.linger_ns),
            stream_timeout_ns: self.stream_timeout.unwrap_or(d.stream_timeout_ns),
            orphans: self.orphans.unwrap_or(d.orphans),
            orphan_packets: self.orphan_packets.unwrap_or(d.orphan_packets),
            ..d
        }
    }
}

/// Records per message when the calls in progress are written at the end of the input.
const RECORDS_PER_BATCH: usize = 4096;

/// How often `rtp_calls` sends the calls in progress and moves an idle live clock on.
const TICK: Duration = Duration::from_secs(1);

/// The counters `rtp_calls` shows, in the order of [`RtpCalls::update_counters`].
const COUNTERS: [&str; 8] = [
    "calls",
    "calls_evicted",
    "active_calls",
    "active_streams",
    "rtp_packets",
    "rtcp_packets",
    "streams_refused",
    "sip_outside_calls",
];

impl Block for RtpCalls {
    const TYPE: &'static str = "rtp_calls";
    const SUMMARY: &'static str =
        "SIP calls and their RTP streams (loss, jitter, MOS): a record per call and per stream";
    const INPUTS: &'static [GateDef] = &[
        GateDef {
            name: "sip",
            ty: SIP,
            required: true,
            doc: "SIP messages from a `sip` block",
        },
        PACKETS_IN,
    ];
    const OUTPUTS: &'static [GateDef] = &[
        GateDef {
            name: "calls",
            ty: EVENTS,
            required: false,
            doc: "a record per call when it ends (calls.jsonl)",
        },
        GateDef {
            name: "streams",
            ty: EVENTS,
            required: false,
            doc: "a record per RTP stream, with its call's end or when an orphan goes idle (rtp.jsonl)",
        },
        GateDef {
            name: "active",
            ty: EVENTS,
            required: false,
            doc: "every second, the calls in progress (one batch each time, maybe empty; \
                  `end_reason` `active`): the API's /api/v1/calls?active=1",
        },
        GateDef {
            name: "stats",
            ty: EVENTS,
            required: false,
            doc: "with `stats_every`, the process's CPU time and the table's counters at each \
                  multiple of it in packet time and at the input's end (stats.jsonl)",
        },
    ];
    type Settings = RtpCallsSettings;

    fn check(s: &RtpCallsSettings) -> Result<(), String> {
        if s.stats_every == Some(0) {
            return Err("stats_every must be longer than 0".into());
        }
        s.config().check().map_err(|e| e.to_string())
    }

    fn build(s: RtpCallsSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(RtpCalls {
            tracker: Tracker::new(s.config()).map_err(|e| e.to_string())?,
            open_at_end: s.open_at_end.reason(),
            last_packet: None,
            packets: VecDeque::new(),
            sips: VecDeque::new(),
            decoded: Decoded::default(),
            own: Packets::default(),
            out: Output::default(),
            pool: Pool::new(Events::default),
            counters: Vec::new(),
            stats: s.stats_every.map(|every_ns| StatsClock {
                every_ns,
                next_ns: 0,
            }),
            stats_lines: Vec::new(),
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = COUNTERS.iter().map(|n| ctx.counter(n)).collect();
        ctx.every(TICK);
        Ok(())
    }

    fn timer(&mut self, _timer: TimerId, ctx: &mut Ctx<'_>) {
        // Live packets that stopped coming: packet time moves on by wall time, so calls that
        // ended (BYE and linger) or went silent are written without waiting for traffic.
        if let Some((ts_ns, at, true)) = self.last_packet {
            let idle = at.elapsed();
            if idle >= TICK {
                self.tracker
                    .advance(ts_ns + idle.as_nanos() as u64, &mut self.out);
            }
        }
        self.send(ctx);
        if ctx.is_connected(2) {
            let active = self.tracker.active_records();
            let events = active.iter().map(|c| Event {
                ts_ns: c.end_ns,
                json: serde_json::to_value(c).unwrap_or_default(),
            });
            let msg = Self::batch(&mut self.pool, events);
            ctx.emit(2, msg);
        }
    }

    fn receive(&mut self, input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        match input {
            0 => self.sips.push_back(msg.clone()),
            _ => self.packets.push_back(msg.clone()),
        }
        while !self.packets.is_empty() && !self.sips.is_empty() {
            let (p, s) = (self.packets.pop_front(), self.sips.pop_front());
            self.pair(p.as_ref(), s.as_ref());
        }
        self.send(ctx);
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        // Whatever is left unpaired (an input ended early) is taken as it is.
        while !self.packets.is_empty() || !self.sips.is_empty() {
            let (p, s) = (self.packets.pop_front(), self.sips.pop_front());
            self.pair(p.as_ref(), s.as_ref());
        }
        if self.stats.is_some() {
            let ts_ns = self.last_packet.map_or(0, |(ts_ns, _, _)| ts_ns);
            let line = stats_line(ts_ns, true, &self.tracker.stats());
            self.stats_lines.push(line);
        }
        // The calls in progress are written in parts, each sent on before the next is made.
        let (out, pool) = (&mut self.out, &mut self.pool);
        self.tracker
            .finish_in_parts(self.open_at_end, out, RECORDS_PER_BATCH, |out| {
                Self::send_records(out, pool, ctx)
            });
        self.send(ctx);
    }
}

impl RtpCalls {
    /// A packet batch with the SIP found in it: each SIP message is applied before the first
    /// packet later than it, so an SDP answer precedes the RTP it announces.
    fn pair(&mut self, packets: Option<&Msg>, sip: Option<&Msg>) {
        let events = sip
            .and_then(|m| m.get::<SipBatch>())
            .map_or(&[][..], |b| &b.events[..]);
        let mut next = 0;
        if let Some(packets) = packets.and_then(|m| m.get::<PacketBatch>()) {
            if let Some(last) = packets.metas.last() {
                self.last_packet = Some((last.ts_ns, Instant::now(), packets.live));
            }
            let batch = packets.batch();
            let sip_packets = sip.and_then(|m| m.get::<SipBatch>()).map(|b| &b.packets);
            let list = match sip_packets {
                Some(list) if list.len() == batch.len() => list,
                _ => {
                    // No `sip` batch of these packets (an input ended early): decode them here.
                    self.own.clear();
                    for pkt in batch.iter() {
                        decode_packet(&pkt, batch.bytes(), &mut self.decoded, &mut self.own);
                    }
                    &self.own
                }
            };
            let (stats, lines) = (&mut self.stats, &mut self.stats_lines);
            // The table prefetches its streams a few packets ahead (Tracker::on_packets).
            self.tracker
                .on_packets(list, batch.bytes(), &mut self.out, |table, ts_ns, out| {
                    if let Some(at) = stats.as_mut().and_then(|c| c.crossed(ts_ns)) {
                        lines.push(stats_line(at, false, &table.stats()));
                    }
                    while next < events.len() && events[next].ts_ns <= ts_ns {
                        table.on_sip(&events[next], out);
                        next += 1;
                    }
                });
        }
        for e in &events[next..] {
            self.tracker.on_sip(e, &mut self.out);
        }
    }

    fn update_counters(&self) {
        let s = self.tracker.stats();
        let values = [
            s.calls,
            s.calls_evicted,
            s.active_calls,
            s.active_streams,
            s.rtp_packets,
            s.rtcp_packets,
            s.streams_refused,
            s.sip_outside_calls,
        ];
        for (c, v) in self.counters.iter().zip(values) {
            c.set(v);
        }
    }

    fn send(&mut self, ctx: &mut Ctx<'_>) {
        self.update_counters();
        Self::send_records(&mut self.out, &mut self.pool, ctx);
        if !self.stats_lines.is_empty() && ctx.is_connected(3) {
            let msg = Self::batch(&mut self.pool, self.stats_lines.drain(..));
            ctx.emit(3, msg);
        }
        self.stats_lines.clear();
    }

    /// Sends the records in `out` as JSON text, calls on gate 0 and streams on gate 1, each
    /// written straight from its record (no `serde_json::Value`: bench/RESULTS.md, "VoIP").
    fn send_records(out: &mut Output, pool: &mut Pool<Events>, ctx: &mut Ctx<'_>) {
        if !out.calls.is_empty() {
            if ctx.is_connected(0) {
                let mut slot = pool.take();
                let batch = slot.get_mut();
                batch.clear();
                for c in &out.calls {
                    batch.lines.push(c.end_ns, |buf| c.write_json(buf));
                }
                ctx.emit(0, slot.into_msg());
            }
            out.calls.clear();
        }
        if !out.streams.is_empty() {
            if ctx.is_connected(1) {
                let mut slot = pool.take();
                let batch = slot.get_mut();
                batch.clear();
                for st in &out.streams {
                    batch.lines.push(st.last_ns, |buf| st.write_json(buf));
                }
                ctx.emit(1, slot.into_msg());
            }
            out.streams.clear();
        }
    }

    fn batch(pool: &mut Pool<Events>, events: impl Iterator<Item = Event>) -> Msg {
        let mut slot = pool.take();
        let out = slot.get_mut();
        out.clear();
        out.events.extend(events);
        slot.into_msg()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line at each multiple of the period that a packet reaches or passes (one when it
    /// passes several), none for the first packet.
    #[test]
    fn the_stats_clock_crosses_each_multiple_once() {
        let mut c = StatsClock {
            every_ns: 1_000,
            next_ns: 0,
        };
        let got: Vec<Option<u64>> = [1_500, 1_999, 2_000, 2_000, 2_999, 5_250, 5_999, 6_000]
            .into_iter()
            .map(|t| c.crossed(t))
            .collect();
        let want = [
            None,
            None,
            Some(2_000),
            None,
            None,
            Some(5_000),
            None,
            Some(6_000),
        ];
        assert_eq!(got, want);
        let mut from_a_multiple = StatsClock {
            every_ns: 1_000,
            next_ns: 0,
        };
        assert_eq!(from_a_multiple.crossed(3_000), None);
        assert_eq!(from_a_multiple.crossed(3_999), None);
        assert_eq!(from_a_multiple.crossed(4_000), Some(4_000));
    }
    use trawl_capture::{FileSource, PacketSource};

    /// Every packet of the VoIP captures (UDP and TCP, IPv4 and IPv6, GTP-U, VLAN-less and
    /// padded frames) and hand-made edge cases: where the fast path answers, it answers what
    /// the general decoder does.
    #[test]
    fn fast_udp_is_the_general_decoder_where_it_answers() {
        let mut frames: Vec<(LinkType, Vec<u8>)> = Vec::new();
        for name in [
            "voip/gtp-iphone.pcap",
            "voip/skinny.pcap",
            "voip/fax-call-t38-sip.pcap",
            "voip/sip-websocket.pcap",
            "oracle/sip.pcap",
            "pcaps/VlanPackets.pcap",
            "pcaps/ipv6-frag.pcap",
            "pcaps/socks5-http-302-frag.pcap",
        ] {
            let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../testdata/").to_string() + name;
            let mut src = FileSource::open(&path).expect("a test capture");
            while let Some(b) = src.next_batch().expect("read") {
                frames.extend(b.iter().map(|p| (p.link_type, p.data.to_vec())));
            }
        }
        let base = frames.iter().find(|(l, f)| fast_udp(*l, f).is_some());
        let base = base.expect("some UDP").1.clone();
        let eth = LinkType::ETHERNET;
        // Truncated, padded, fragmented, with a short UDP length, a VLAN tag.
        for cut in [13, 14, 20, 34, 41, 42, 43] {
            frames.push((eth, base[..cut.min(base.len())].to_vec()));
        }
        let mut padded = base.clone();
        padded.extend_from_slice(&[0; 40]);
        frames.push((eth, padded));
        for (at, byte) in [
            (20, 0x20),
            (21, 0x01),
            (38, 0),
            (39, 7),
            (14, 0x46),
            (16, 0),
        ] {
            let mut f = base.clone();
            f[at] = byte;
            frames.push((eth, f));
        }
        let mut tagged = base[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        tagged.extend_from_slice(&base[12..]);
        frames.push((eth, tagged));

        let (mut fast, mut d) = (0, Decoded::default());
        for (link, f) in &frames {
            let Some(t) = fast_udp(*link, f).map(|u| u.transport()) else {
                continue;
            };
            fast += 1;
            let g = decoded_transport(*link, f, &mut d).expect("general decodes");
            assert_eq!(
                (t.src, t.dst, t.tcp, t.seq, t.fin_or_rst, t.payload),
                (g.src, g.dst, g.tcp, g.seq, g.fin_or_rst, g.payload),
                "{f:02x?}"
            );
        }
        assert!(
            fast > 1000,
            "{fast} of {} frames took the fast path",
            frames.len()
        );
    }

    #[test]
    fn gtp_u_payload_skips_the_optional_fields_and_extensions() {
        #[rustfmt::skip]
        let pdu = [
            0x34, 0xff, 0, 12, 0, 0, 0, 1, // v1, PT, E flag, G-PDU, length, TEID
            0, 0, 0, 0x85,                 // sequence, N-PDU, next: PDU session container
            1, 0x10, 0x05, 0,              // one word, no next
            0x45, 0x00,                    // inner IPv4
        ];
        assert_eq!(gtp_u_payload(&pdu), Some(&[0x45, 0x00][..]));
        assert_eq!(gtp_u_payload(&pdu[..13]), None);
        assert_eq!(
            gtp_u_payload(&[0x30, 0x01, 0, 0, 0, 0, 0, 0]),
            None,
            "echo request"
        );
    }
}
