//! The collector side: IPFIX, NetFlow v9 and v5 messages into trawl flow records (and series
//! rows, for trawl's own multicast feeds).
//!
//! Templates are cached per (exporter, version, observation domain, template id), withdrawn
//! on request (IPFIX), and bounded: past [`DecoderConfig::max_templates`] new templates are
//! refused and counted, so an exporter that floods templates cannot exhaust memory. Every
//! malformed input is counted by [`DecodeErrorKind`]; [`Decoder::decode`] reports the first
//! problem of a message with its offset, keeps every record before it, and skips only what it
//! cannot frame (an unknown template's set, the rest of a message whose set runs past its
//! end). It never panics on any input (fuzzed: `fuzz/fuzz_targets/flow_decoder.rs`).
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use trawl_flow::{App, AppLabel, AppSource, EndReason, FlowRecord, EARLY_PACKETS};
use trawl_series::SeriesRow;

use crate::encode::ns_from_ntp;
use crate::ie::{
    lookup, Dir, Field, APPLICATION_ENGINE, APPLICATION_ID_LEN, COMMUNITY_ID_LEN, DEFAULT_PEN,
    RTT_NONE, VARLEN,
};

/// Settings of a decoder.
#[derive(Clone, Debug)]
pub struct DecoderConfig {
    /// Enterprise number whose elements are read as trawl's own.
    pub pen: u32,
    /// Most templates cached over all exporters; later ones are refused and counted.
    pub max_templates: usize,
}

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            pen: DEFAULT_PEN,
            max_templates: 4096,
        }
    }
}

/// What was wrong with a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
#[non_exhaustive]
pub enum DecodeErrorKind {
    /// Fewer bytes than the version's header.
    ShortHeader = 0,
    /// Version is not 5, 9 or 10.
    UnsupportedVersion = 1,
    /// The header's length (IPFIX) or record count (v5) does not match the bytes received.
    BadLength = 2,
    /// A set header says the set is shorter than its own header.
    ShortSet = 3,
    /// A set runs past the end of the message.
    SetPastEnd = 4,
    /// A set id that is neither a template set nor a data set (IPFIX 0, 1, 4-255; v9 2-255).
    BadSetId = 5,
    /// A template or options template with an id below 256.
    BadTemplateId = 6,
    /// A template record that is cut short, has a zero-length field or an impossible scope.
    BadTemplate = 7,
    /// A data set whose template was never received (or was withdrawn).
    UnknownTemplate = 8,
    /// The template cache is full; the template was refused.
    TemplateLimit = 9,
    /// A data record (a variable-length field) runs past the end of its set.
    RecordPastEnd = 10,
    /// An sFlow sample (or a record in it) that is cut short or malformed: skipped, the
    /// samples after it are read.
    BadSample = 11,
}

impl DecodeErrorKind {
    /// Number of kinds.
    pub const COUNT: usize = 12;
    /// All kinds in discriminant order.
    pub const ALL: [DecodeErrorKind; Self::COUNT] = [
        Self::ShortHeader,
        Self::UnsupportedVersion,
        Self::BadLength,
        Self::ShortSet,
        Self::SetPastEnd,
        Self::BadSetId,
        Self::BadTemplateId,
        Self::BadTemplate,
        Self::UnknownTemplate,
        Self::TemplateLimit,
        Self::RecordPastEnd,
        Self::BadSample,
    ];

    /// Counter name (`snake_case`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::ShortHeader => "short_header",
            Self::UnsupportedVersion => "unsupported_version",
            Self::BadLength => "bad_length",
            Self::ShortSet => "short_set",
            Self::SetPastEnd => "set_past_end",
            Self::BadSetId => "bad_set_id",
            Self::BadTemplateId => "bad_template_id",
            Self::BadTemplate => "bad_template",
            Self::UnknownTemplate => "unknown_template",
            Self::TemplateLimit => "template_limit",
            Self::RecordPastEnd => "record_past_end",
            Self::BadSample => "bad_sample",
        }
    }
}

/// The first problem found in a message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError {
    /// Who sent the message.
    pub exporter: SocketAddr,
    /// Byte offset in the message.
    pub offset: usize,
    /// What was wrong.
    pub kind: DecodeErrorKind,
    /// The field or value concerned.
    pub detail: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "message from {} at offset {}: {} ({})",
            self.exporter,
            self.offset,
            self.kind.name(),
            self.detail
        )
    }
}

impl std::error::Error for DecodeError {}

/// Counters of a decoder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DecoderStats {
    /// Messages by version: v5, v9, IPFIX.
    pub messages_v5: u64,
    /// NetFlow v9 messages.
    pub messages_v9: u64,
    /// IPFIX messages.
    pub messages_ipfix: u64,
    /// Flow records decoded.
    pub flows: u64,
    /// Series rows decoded.
    pub series_rows: u64,
    /// Options data records read (or skipped).
    pub options_records: u64,
    /// Templates learnt (including replacements).
    pub templates: u64,
    /// Templates withdrawn.
    pub withdrawals: u64,
    /// sFlow v5 datagrams.
    pub messages_sflow: u64,
    /// sFlow flow samples (compact and expanded).
    pub sflow_flow_samples: u64,
    /// sFlow counter samples (compact and expanded).
    pub sflow_counter_samples: u64,
    /// sFlow sampled packet headers that gave no flow record (not IP: ARP, a header protocol
    /// trawl does not decode; or a flow sample without a raw header).
    pub sflow_not_ip: u64,
    /// sFlow samples of formats trawl does not read, skipped.
    pub sflow_skipped: u64,
    /// Errors by [`DecodeErrorKind`].
    pub errors: [u64; DecodeErrorKind::COUNT],
    /// What the exporters' sequence numbers say never arrived: IPFIX data records, NetFlow
    /// v5 flows, NetFlow v9 export packets, sFlow datagrams (each counts in its own unit,
    /// RFC 7011 / RFC 3954 / sFlow v5).
    pub sequence_missing: u64,
    /// Sequence numbers that went backwards (an exporter restarted, or datagrams were
    /// reordered).
    pub sequence_resets: u64,
}

impl DecoderStats {
    /// All errors.
    pub fn total_errors(&self) -> u64 {
        self.errors.iter().sum()
    }
}

/// Where a decoded item came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The exporter's address.
    pub exporter: SocketAddr,
    /// 5, 9 or 10; [`SFLOW_VERSION`] for sFlow v5.
    pub version: u16,
    /// Observation domain (v9 source id, v5 engine id, sFlow sub-agent id).
    pub domain: u32,
}

/// [`Origin::version`] of sFlow v5 datagrams (NetFlow v5 has 5).
pub const SFLOW_VERSION: u16 = 0x5f05;

/// The counter samples of one sFlow agent's interface.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SflowInterface {
    /// Counter samples received.
    pub samples: u64,
    /// The latest generic interface counters, if any sample had them.
    pub last: Option<crate::sflow::IfCounters>,
}

/// One decoded data record.
#[derive(Clone, Copy, Debug)]
pub enum Item<'a> {
    /// A flow record (payload empty; fields the exporter did not send are 0).
    Flow(&'a FlowRecord<'static>),
    /// A series row (trawl's series feeds).
    Series(&'a SeriesRow),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TemplateKey {
    exporter: SocketAddr,
    version: u16,
    domain: u32,
    /// Template id (0 in the key of a sequence number).
    id: u16,
}

impl std::hash::Hash for TemplateKey {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        // One write of the packed key: the default hasher pays per call, and a derived hash
        // of a SocketAddr alone made six (a tenth of a collector's time).
        let (ip, port) = match self.exporter {
            SocketAddr::V4(a) => (a.ip().to_ipv6_mapped().octets(), a.port()),
            SocketAddr::V6(a) => (a.ip().octets(), a.port()),
        };
        let mut b = [0u8; 26];
        b[..16].copy_from_slice(&ip);
        b[16..18].copy_from_slice(&port.to_ne_bytes());
        b[18..20].copy_from_slice(&self.version.to_ne_bytes());
        b[20..24].copy_from_slice(&self.domain.to_ne_bytes());
        b[24..26].copy_from_slice(&self.id.to_ne_bytes());
        h.write(&b);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Flow,
    Series,
    Options,
    /// Only paddingOctets fields: records carry nothing.
    Padding,
}

#[derive(Clone, Debug)]
struct Template {
    /// What each field is read into (None: skipped) and its length (VARLEN: variable).
    fields: Vec<(Op, u16)>,
    kind: Kind,
    /// Smallest record length (variable fields count one byte).
    min_len: usize,
    /// The layout of trawl's own flow templates (IPv6 addresses or not, and how many of the
    /// fields that layout covers): records are read by [`read_trawl_flow`] instead of field
    /// by field, the fields after it (an extended template's) field by field.
    trawl: Option<(bool, usize)>,
}

/// Templates remembered in [`Decoder`]'s lookup cache.
const RECENT: usize = 4;

/// Decodes IPFIX / NetFlow messages.
#[derive(Debug)]
pub struct Decoder {
    config: DecoderConfig,
    templates: HashMap<TemplateKey, Arc<Template>>,
    /// The templates used last, looked up without hashing (an exporter's messages use a
    /// few templates over and over); emptied whenever the cache changes.
    recent: [Option<(TemplateKey, Arc<Template>)>; RECENT],
    recent_next: usize,
    /// IPFIX systemInitTimeMilliseconds per (exporter, domain), from options records.
    init_ms: HashMap<(SocketAddr, u32), u64>,
    /// The sequence number expected next per (exporter, version, domain); as bounded as the
    /// template cache.
    sequences: HashMap<TemplateKey, u32>,
    stats: DecoderStats,
    /// Read trawl's own templates with [`read_trawl_flow`] (tests turn it off to compare).
    fast_layouts: bool,
    /// The record [`read_trawl_flow`] fills in place.
    scratch: FlowRecord<'static>,
    /// sFlow counter samples per (agent, ifIndex); as bounded as the template cache.
    sflow_interfaces: HashMap<(IpAddr, u32), SflowInterface>,
    /// The time sFlow records get (ns; sFlow samples carry none): set by a caller that knows
    /// when the datagram was captured, else 0 for the wall clock at decoding.
    receive_ns: u64,
    /// The packet decoder's scratch for sFlow's sampled headers.
    sflow_scratch: trawl_flow::decode::Decoded,
}

struct Ctx<'s> {
    exporter: SocketAddr,
    version: u16,
    domain: u32,
    /// v9/v5: ms since the epoch at the exporter's boot (unix_secs*1000 - sysUptime).
    boot_ms: Option<u64>,
    first_error: &'s mut Option<DecodeError>,
    records: usize,
    /// Options data records of this message (IPFIX sequence numbers count them too).
    options: usize,
}

impl Ctx<'_> {
    fn fail(
        &mut self,
        stats: &mut DecoderStats,
        offset: usize,
        kind: DecodeErrorKind,
        detail: impl FnOnce() -> String,
    ) {
        stats.errors[kind as usize] += 1;
        if self.first_error.is_none() {
            *self.first_error = Some(DecodeError {
                exporter: self.exporter,
                offset,
                kind,
                detail: detail(),
            });
        }
    }
}

/// A big-endian unsigned integer of 1 to 8 bytes (reduced-size encoding, RFC 7011 6.2);
/// longer values keep their first 8 bytes.
#[inline(always)]
fn be(b: &[u8]) -> u64 {
    match b.len() {
        1 => u64::from(b[0]),
        2 => u64::from(u16::from_be_bytes([b[0], b[1]])),
        4 => u64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])),
        8 => u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
        _ => b
            .iter()
            .take(8)
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x)),
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// A flow record with every field zero (what a collector fills in from a data record).
pub fn empty_record() -> FlowRecord<'static> {
    FlowRecord::empty()
}

/// Times as a data record gave them, resolved once the record is complete.
#[derive(Default)]
struct Times {
    ns: [Option<u64>; 2],
    us: [Option<u64>; 2],
    ms: [Option<u64>; 2],
    sec: [Option<u64>; 2],
    uptime: [Option<u64>; 2],
    init_ms: Option<u64>,
    iana_end: Option<u8>,
    trawl_end: Option<u8>,
    totals: [Option<u64>; 2],
}

impl Decoder {
    /// A decoder with an empty template cache.
    pub fn new(config: DecoderConfig) -> Self {
        Decoder {
            config,
            templates: HashMap::new(),
            recent: Default::default(),
            recent_next: 0,
            init_ms: HashMap::new(),
            sequences: HashMap::new(),
            stats: DecoderStats::default(),
            fast_layouts: true,
            scratch: empty_record(),
            sflow_interfaces: HashMap::new(),
            receive_ns: 0,
            sflow_scratch: Default::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> &DecoderStats {
        &self.stats
    }

    /// Checks a message's sequence number against the one expected, and expects `next`.
    fn sequence(&mut self, ctx: &Ctx<'_>, seq: u32, next: u32) {
        let key = TemplateKey {
            exporter: ctx.exporter,
            version: ctx.version,
            domain: ctx.domain,
            id: 0,
        };
        let room = self.sequences.len() < self.config.max_templates;
        match self.sequences.get_mut(&key) {
            Some(expected) => {
                let ahead = seq.wrapping_sub(*expected);
                if ahead != 0 && ahead < 1 << 31 {
                    self.stats.sequence_missing += u64::from(ahead);
                } else if ahead != 0 {
                    self.stats.sequence_resets += 1;
                }
                *expected = next;
            }
            None if room => {
                self.sequences.insert(key, next);
            }
            None => {}
        }
    }

    /// The time (ns since the epoch) the records of the next sFlow datagrams get: when they
    /// were captured (a pcap's packet time). 0, the default, takes the wall clock at decoding.
    pub fn set_receive_time(&mut self, ns: u64) {
        self.receive_ns = ns;
    }

    /// sFlow counter samples per (agent address, ifIndex), sorted.
    pub fn sflow_interfaces(&self) -> Vec<((IpAddr, u32), SflowInterface)> {
        let mut v: Vec<_> = self
            .sflow_interfaces
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect();
        v.sort_by_key(|(k, _)| *k);
        v
    }

    /// Templates cached now.
    pub fn templates_cached(&self) -> usize {
        self.templates.len()
    }

    /// Decodes one message (a UDP datagram, or one framed IPFIX message of a stream or file)
    /// from `exporter`, handing every data record to `sink`. Returns the records decoded and
    /// the first problem, if any (all problems are counted in [`Decoder::stats`]).
    pub fn decode(
        &mut self,
        exporter: SocketAddr,
        msg: &[u8],
        sink: &mut dyn FnMut(&Origin, Item<'_>),
    ) -> (usize, Option<DecodeError>) {
        let mut first_error = None;
        let mut ctx = Ctx {
            exporter,
            version: 0,
            domain: 0,
            boot_ms: None,
            first_error: &mut first_error,
            records: 0,
            options: 0,
        };
        if msg.len() < 2 {
            ctx.fail(&mut self.stats, 0, DecodeErrorKind::ShortHeader, || {
                format!("{} bytes, no version", msg.len())
            });
        } else {
            match u16_at(msg, 0) {
                // sFlow's version is a 32-bit word: its first half is 0, which no NetFlow or
                // IPFIX version is.
                0 => self.decode_sflow(&mut ctx, msg, sink),
                5 => self.decode_v5(&mut ctx, msg, sink),
                9 => self.decode_v9(&mut ctx, msg, sink),
                10 => self.decode_ipfix(&mut ctx, msg, sink),
                v => ctx.fail(
                    &mut self.stats,
                    0,
                    DecodeErrorKind::UnsupportedVersion,
                    || format!("version {v}"),
                ),
            }
        }
        let n = ctx.records;
        (n, first_error)
    }

    fn decode_sflow(
        &mut self,
        ctx: &mut Ctx<'_>,
        msg: &[u8],
        sink: &mut dyn FnMut(&Origin, Item<'_>),
    ) {
        use crate::sflow::{self, Event};
        let (header, _) = match sflow::parse_header(msg) {
            Ok(h) => h,
            Err(e) => {
                let kind = match e.field {
                    "version" if msg.len() >= 4 => DecodeErrorKind::UnsupportedVersion,
                    _ => DecodeErrorKind::ShortHeader,
                };
                ctx.fail(&mut self.stats, e.offset, kind, || {
                    format!("sFlow {}: {}", e.field, e.detail)
                });
                return;
            }
        };
        self.stats.messages_sflow += 1;
        ctx.version = SFLOW_VERSION;
        ctx.domain = header.sub_agent;
        self.sequence(ctx, header.sequence, header.sequence.wrapping_add(1));
        let origin = Origin {
            exporter: ctx.exporter,
            version: SFLOW_VERSION,
            domain: header.sub_agent,
        };
        let time_ns = if self.receive_ns != 0 {
            self.receive_ns
        } else {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        };
        let Decoder {
            stats,
            sflow_interfaces,
            sflow_scratch,
            config,
            ..
        } = self;
        let mut last_flow_sample = usize::MAX;
        let result = sflow::parse(msg, &mut |h, event| match event {
            Event::Packet(sample, raw) => {
                if sample.offset != last_flow_sample {
                    last_flow_sample = sample.offset;
                    stats.sflow_flow_samples += 1;
                }
                match sflow::packet_record(h, sample, raw, time_ns, sflow_scratch) {
                    Ok(rec) => {
                        stats.flows += 1;
                        ctx.records += 1;
                        sink(&origin, Item::Flow(&rec));
                    }
                    Err(_) => stats.sflow_not_ip += 1,
                }
            }
            Event::FlowWithoutHeader(_) => {
                stats.sflow_flow_samples += 1;
                stats.sflow_not_ip += 1;
            }
            Event::Counters(sample, generic) => {
                stats.sflow_counter_samples += 1;
                // Per interface: the generic counters' ifIndex, or the sample's source when
                // it is an ifIndex (type 0); a host's or a VLAN's counters are no interface.
                let if_index = match (generic, sample.source_type) {
                    (Some(g), _) => g.if_index,
                    (None, 0) => sample.source_index,
                    (None, _) => return,
                };
                let key = (h.agent, if_index);
                let room = sflow_interfaces.len() < config.max_templates;
                if let Some(i) = sflow_interfaces.get_mut(&key) {
                    i.samples += 1;
                    i.last = generic.copied().or(i.last);
                } else if room {
                    sflow_interfaces.insert(
                        key,
                        SflowInterface {
                            samples: 1,
                            last: generic.copied(),
                        },
                    );
                }
            }
            Event::Skipped(..) => stats.sflow_skipped += 1,
            Event::Malformed(e) => {
                ctx.fail(stats, e.offset, DecodeErrorKind::BadSample, || {
                    format!("sFlow {}: {}", e.field, e.detail)
                });
            }
        });
        if let Err(e) = result {
            ctx.fail(
                &mut self.stats,
                e.offset,
                DecodeErrorKind::BadSample,
                || format!("sFlow {}: {}", e.field, e.detail),
            );
        }
    }

    fn decode_v5(
        &mut self,
        ctx: &mut Ctx<'_>,
        msg: &[u8],
        sink: &mut dyn FnMut(&Origin, Item<'_>),
    ) {
        use crate::v5::{HEADER_LEN, RECORD_LEN};
        if msg.len() < HEADER_LEN {
            ctx.fail(&mut self.stats, 0, DecodeErrorKind::ShortHeader, || {
                format!("NetFlow v5 header needs 24 bytes, got {}", msg.len())
            });
            return;
        }
        self.stats.messages_v5 += 1;
        let count = usize::from(u16_at(msg, 2));
        let uptime = u64::from(u32_at(msg, 4));
        let secs = u64::from(u32_at(msg, 8));
        let nsecs = u64::from(u32_at(msg, 12));
        let boot_ms = (secs * 1000 + nsecs / 1_000_000).saturating_sub(uptime);
        ctx.version = 5;
        ctx.domain = u32::from(msg[21]);
        let avail = (msg.len() - HEADER_LEN) / RECORD_LEN;
        if avail < count {
            ctx.fail(&mut self.stats, 2, DecodeErrorKind::BadLength, || {
                format!(
                    "count {count} needs {} bytes, message has {}",
                    HEADER_LEN + count * RECORD_LEN,
                    msg.len()
                )
            });
        }
        let origin = Origin {
            exporter: ctx.exporter,
            version: 5,
            domain: ctx.domain,
        };
        let seq = u32_at(msg, 16);
        self.sequence(ctx, seq, seq.wrapping_add(count as u32));
        for i in 0..count.min(avail) {
            let r = &msg[HEADER_LEN + i * RECORD_LEN..HEADER_LEN + (i + 1) * RECORD_LEN];
            let mut rec = empty_record();
            rec.src_ip = IpAddr::V4(Ipv4Addr::new(r[0], r[1], r[2], r[3]));
            rec.dst_ip = IpAddr::V4(Ipv4Addr::new(r[4], r[5], r[6], r[7]));
            rec.fwd.packets = u64::from(u32_at(r, 16));
            rec.fwd.ip_bytes = u64::from(u32_at(r, 20));
            rec.first_ns = (boot_ms + u64::from(u32_at(r, 24))) * 1_000_000;
            rec.last_ns = (boot_ms + u64::from(u32_at(r, 28))) * 1_000_000;
            rec.src_port = u16_at(r, 32);
            rec.dst_port = u16_at(r, 34);
            rec.fwd.tcp_flags = r[37];
            rec.proto = r[38];
            // SNMP ifIndexes of the router's input and output interfaces (0: not known).
            rec.extra.in_if = u32::from(u16_at(r, 12));
            rec.extra.out_if = u32::from(u16_at(r, 14));
            self.stats.flows += 1;
            ctx.records += 1;
            sink(&origin, Item::Flow(&rec));
        }
    }

    fn decode_v9(
        &mut self,
        ctx: &mut Ctx<'_>,
        msg: &[u8],
        sink: &mut dyn FnMut(&Origin, Item<'_>),
    ) {
        if msg.len() < 20 {
            ctx.fail(&mut self.stats, 0, DecodeErrorKind::ShortHeader, || {
                format!("NetFlow v9 header needs 20 bytes, got {}", msg.len())
            });
            return;
        }
        self.stats.messages_v9 += 1;
        let uptime = u64::from(u32_at(msg, 4));
        let secs = u64::from(u32_at(msg, 8));
        ctx.version = 9;
        ctx.domain = u32_at(msg, 16);
        ctx.boot_ms = Some((secs * 1000).saturating_sub(uptime));
        let seq = u32_at(msg, 12);
        self.sequence(ctx, seq, seq.wrapping_add(1));
        self.walk_sets(ctx, msg, 20, sink);
    }

    fn decode_ipfix(
        &mut self,
        ctx: &mut Ctx<'_>,
        msg: &[u8],
        sink: &mut dyn FnMut(&Origin, Item<'_>),
    ) {
        if msg.len() < 16 {
            ctx.fail(&mut self.stats, 0, DecodeErrorKind::ShortHeader, || {
                format!("IPFIX header needs 16 bytes, got {}", msg.len())
            });
            return;
        }
        self.stats.messages_ipfix += 1;
        let len = usize::from(u16_at(msg, 2));
        ctx.version = 10;
        ctx.domain = u32_at(msg, 12);
        if len < 16 || len > msg.len() {
            ctx.fail(&mut self.stats, 2, DecodeErrorKind::BadLength, || {
                format!("message length {len}, {} bytes received", msg.len())
            });
            if len < 16 {
                return;
            }
        }
        let end = len.min(msg.len());
        self.walk_sets(ctx, &msg[..end], 16, sink);
        // The next message's number is this one's plus its data records (known once read).
        let seq = u32_at(msg, 8);
        self.sequence(
            ctx,
            seq,
            seq.wrapping_add((ctx.records + ctx.options) as u32),
        );
    }

    fn walk_sets(
        &mut self,
        ctx: &mut Ctx<'_>,
        msg: &[u8],
        mut off: usize,
        sink: &mut dyn FnMut(&Origin, Item<'_>),
    ) {
        let ipfix = ctx.version == 10;
        while off + 4 <= msg.len() {
            let set_id = u16_at(msg, off);
            let set_len = usize::from(u16_at(msg, off + 2));
            if set_len < 4 {
                ctx.fail(&mut self.stats, off + 2, DecodeErrorKind::ShortSet, || {
                    format!("set {set_id} length {set_len}")
                });
                return;
            }
            if off + set_len > msg.len() {
                ctx.fail(
                    &mut self.stats,
                    off + 2,
                    DecodeErrorKind::SetPastEnd,
                    || {
                        format!(
                            "set {set_id} length {set_len} runs {} bytes past the end",
                            off + set_len - msg.len()
                        )
                    },
                );
                return;
            }
            let body = &msg[off + 4..off + set_len];
            match (ipfix, set_id) {
                (true, 2) | (false, 0) => self.templates_set(ctx, body, off + 4, false),
                (true, 3) | (false, 1) => self.templates_set(ctx, body, off + 4, true),
                (_, id) if id >= 256 => self.data_set(ctx, id, body, off + 4, sink),
                (_, id) => ctx.fail(&mut self.stats, off, DecodeErrorKind::BadSetId, || {
                    format!("set id {id}")
                }),
            }
            off += set_len;
        }
    }

    fn templates_set(&mut self, ctx: &mut Ctx<'_>, body: &[u8], base: usize, options: bool) {
        let ipfix = ctx.version == 10;
        let mut off = 0;
        // Records until what is left is too short to be one (set padding).
        while off + 4 <= body.len() {
            let id = u16_at(body, off);
            let count_or_scope = usize::from(u16_at(body, off + 2));
            if count_or_scope == 0 && ipfix {
                self.withdraw(ctx, id);
                off += 4;
                continue;
            }
            if id < 256 {
                ctx.fail(
                    &mut self.stats,
                    base + off,
                    DecodeErrorKind::BadTemplateId,
                    || format!("template id {id}"),
                );
                return;
            }
            // Field specifiers: how many, and where they start.
            let (fields, mut p) = if !options {
                (count_or_scope, off + 4)
            } else if ipfix {
                if off + 6 > body.len() {
                    ctx.fail(
                        &mut self.stats,
                        base + off,
                        DecodeErrorKind::BadTemplate,
                        || format!("options template {id} cut short"),
                    );
                    return;
                }
                let scope = usize::from(u16_at(body, off + 4));
                if scope == 0 || scope > count_or_scope {
                    ctx.fail(&mut self.stats, base + off, DecodeErrorKind::BadTemplate, || {
                        format!("options template {id}: scope count {scope} of {count_or_scope} fields")
                    });
                    return;
                }
                (count_or_scope, off + 6)
            } else {
                // v9: the scope and option lengths are in bytes, 4 per field.
                if off + 6 > body.len() {
                    ctx.fail(
                        &mut self.stats,
                        base + off,
                        DecodeErrorKind::BadTemplate,
                        || format!("options template {id} cut short"),
                    );
                    return;
                }
                let opt_len = usize::from(u16_at(body, off + 4));
                if !count_or_scope.is_multiple_of(4) || !opt_len.is_multiple_of(4) {
                    ctx.fail(&mut self.stats, base + off, DecodeErrorKind::BadTemplate, || {
                        format!("options template {id}: scope length {count_or_scope}, option length {opt_len}")
                    });
                    return;
                }
                ((count_or_scope + opt_len) / 4, off + 6)
            };
            let mut t = Template {
                fields: Vec::with_capacity(fields),
                kind: if options { Kind::Options } else { Kind::Flow },
                min_len: 0,
                trawl: None,
            };
            if fields == 0 {
                // A record of no fields would never advance through a data set.
                ctx.fail(
                    &mut self.stats,
                    base + off,
                    DecodeErrorKind::BadTemplate,
                    || format!("template {id} has no fields"),
                );
                return;
            }
            let mut padding = true;
            for i in 0..fields {
                if p + 4 > body.len() {
                    ctx.fail(
                        &mut self.stats,
                        base + p,
                        DecodeErrorKind::BadTemplate,
                        || format!("template {id}: field {i} of {fields} cut short"),
                    );
                    return;
                }
                let raw = u16_at(body, p);
                let len = u16_at(body, p + 2);
                p += 4;
                let mut pen = 0;
                let mut ie = raw;
                if ipfix && raw & 0x8000 != 0 {
                    if p + 4 > body.len() {
                        ctx.fail(
                            &mut self.stats,
                            base + p,
                            DecodeErrorKind::BadTemplate,
                            || format!("template {id}: enterprise number of field {i} cut short"),
                        );
                        return;
                    }
                    pen = u32_at(body, p);
                    ie = raw & 0x7fff;
                    p += 4;
                }
                if len == 0 || (!ipfix && len == VARLEN) {
                    ctx.fail(
                        &mut self.stats,
                        base + p - 2,
                        DecodeErrorKind::BadTemplate,
                        || format!("template {id}: field {i} (element {ie}) has length {len}"),
                    );
                    return;
                }
                let target = if ipfix {
                    lookup(pen, ie, self.config.pen)
                } else {
                    match ie {
                        23 => Some(Field::V9OutBytes),
                        24 => Some(Field::V9OutPackets),
                        _ => lookup(0, ie, self.config.pen),
                    }
                };
                padding &= pen == 0 && ie == crate::template::PADDING_OCTETS;
                let target = target.filter(|f| length_fits(*f, len));
                t.min_len += if len == VARLEN { 1 } else { usize::from(len) };
                t.fields.push((op(target), len));
            }
            if padding && !options {
                t.kind = Kind::Padding;
            }
            if t.fields.iter().any(|(f, _)| *f == Op::SeriesSecond) && !options {
                t.kind = Kind::Series;
                for (f, _) in t.fields.iter_mut() {
                    *f = match *f {
                        Op::PacketsFwd => Op::SeriesPackets,
                        Op::FrameBytesFwd => Op::SeriesBytes,
                        other => other,
                    };
                }
            }
            off = p;
            let key = TemplateKey {
                exporter: ctx.exporter,
                version: ctx.version,
                domain: ctx.domain,
                id,
            };
            if !self.templates.contains_key(&key)
                && self.templates.len() >= self.config.max_templates
            {
                let max = self.config.max_templates;
                ctx.fail(
                    &mut self.stats,
                    base,
                    DecodeErrorKind::TemplateLimit,
                    || format!("template {id} refused: {max} templates cached"),
                );
                continue;
            }
            if ipfix && t.kind == Kind::Flow && self.fast_layouts {
                t.trawl = trawl_layout(&t.fields);
            }
            self.recent = Default::default();
            self.templates.insert(key, Arc::new(t));
            self.stats.templates += 1;
        }
    }

    fn withdraw(&mut self, ctx: &Ctx<'_>, id: u16) {
        self.recent = Default::default();
        let before = self.templates.len();
        if id == 2 || id == 3 {
            // All (options) templates of this domain (RFC 7011 8.1).
            let (exporter, domain) = (ctx.exporter, ctx.domain);
            self.templates
                .retain(|k, _| !(k.exporter == exporter && k.domain == domain && k.version == 10));
        } else {
            self.templates.remove(&TemplateKey {
                exporter: ctx.exporter,
                version: 10,
                domain: ctx.domain,
                id,
            });
        }
        self.stats.withdrawals += (before - self.templates.len()) as u64;
    }

    fn data_set(
        &mut self,
        ctx: &mut Ctx<'_>,
        id: u16,
        body: &[u8],
        base: usize,
        sink: &mut dyn FnMut(&Origin, Item<'_>),
    ) {
        let key = TemplateKey {
            exporter: ctx.exporter,
            version: ctx.version,
            domain: ctx.domain,
            id,
        };
        // Borrowed from the cache (no reference count touched on a hit).
        let slot = match self
            .recent
            .iter()
            .position(|e| e.as_ref().is_some_and(|(k, _)| *k == key))
        {
            Some(i) => Some(i),
            None => self.templates.get(&key).map(|t| {
                let i = self.recent_next;
                self.recent[i] = Some((key, t.clone()));
                self.recent_next = (i + 1) % RECENT;
                i
            }),
        };
        let t = slot
            .and_then(|i| self.recent[i].as_ref())
            .map(|(_, t)| &**t);
        let Some(t) = t else {
            let domain = ctx.domain;
            ctx.fail(
                &mut self.stats,
                base - 4,
                DecodeErrorKind::UnknownTemplate,
                || format!("data set for template {id}, domain {domain}"),
            );
            return;
        };
        if t.kind == Kind::Padding {
            return;
        }
        let origin = Origin {
            exporter: ctx.exporter,
            version: ctx.version,
            domain: ctx.domain,
        };
        let min_len = t.min_len.max(1);
        let mut off = 0;
        let init_key = (ctx.exporter, ctx.domain);
        while off + min_len <= body.len() {
            if let Some((v6, covered)) = t.trawl {
                // trawl's own layout: straight-line reads. A record that does not fit (or has
                // the long form of a variable length) goes the general way below.
                if let Some(n) = read_trawl_flow(&body[off..], v6, &mut self.scratch) {
                    off += n;
                    // An extended template's fields after the layout: none of them a time.
                    let rest = &t.fields[covered..];
                    if !rest.is_empty() {
                        let (mut row, mut times) = (SeriesRow::default(), Times::default());
                        match read_fields(rest, body, off, &mut self.scratch, &mut row, &mut times)
                        {
                            Ok(end) => off = end,
                            Err((at, what)) => {
                                ctx.fail(
                                    &mut self.stats,
                                    base + at,
                                    DecodeErrorKind::RecordPastEnd,
                                    || format!("template {id}: {what}"),
                                );
                                return;
                            }
                        }
                    }
                    self.stats.flows += 1;
                    ctx.records += 1;
                    sink(&origin, Item::Flow(&self.scratch));
                    continue;
                }
            }
            let mut rec = empty_record();
            let mut row = SeriesRow::default();
            let mut times = Times::default();
            match read_fields(&t.fields, body, off, &mut rec, &mut row, &mut times) {
                Ok(end) => off = end,
                Err((at, what)) => {
                    ctx.fail(
                        &mut self.stats,
                        base + at,
                        DecodeErrorKind::RecordPastEnd,
                        || format!("template {id}: {what}"),
                    );
                    return;
                }
            }
            match t.kind {
                // Left before the loop.
                Kind::Padding => {}
                Kind::Options => {
                    self.stats.options_records += 1;
                    ctx.options += 1;
                    if let Some(ms) = times.init_ms {
                        self.init_ms.insert(init_key, ms);
                    }
                }
                Kind::Series => {
                    self.stats.series_rows += 1;
                    ctx.records += 1;
                    sink(&origin, Item::Series(&row));
                }
                Kind::Flow => {
                    let boot = ctx
                        .boot_ms
                        .or(times.init_ms)
                        .or_else(|| self.init_ms.get(&init_key).copied());
                    finish_times(&mut rec, &times, boot);
                    self.stats.flows += 1;
                    ctx.records += 1;
                    sink(&origin, Item::Flow(&rec));
                }
            }
        }
    }
}

/// Whether a template's fields (as the decoder reads them) begin with those of trawl's own
/// IPv4 or IPv6 flow template (all of them, or an extended template's first ones);
/// `Some((true, n))` for IPv6, `n` the fields of that layout.
fn trawl_layout(fields: &[(Op, u16)]) -> Option<(bool, usize)> {
    use crate::template::{IPFIX_FLOW_V4, IPFIX_FLOW_V6};
    [(IPFIX_FLOW_V4, false), (IPFIX_FLOW_V6, true)]
        .into_iter()
        .find(|(t, _)| {
            t.fields.len() <= fields.len()
                && t.fields
                    .iter()
                    .zip(fields)
                    .all(|(f, &(o, len))| op(Some(*f)) == o && f.spec().len == len)
        })
        .map(|(t, v6)| (v6, t.fields.len()))
}

/// Reads the fields of a data record (or its last ones, after the fast path read the
/// others) from `body[off..]`; the offset after them, or where a field runs past the set end
/// and what.
fn read_fields(
    fields: &[(Op, u16)],
    body: &[u8],
    mut off: usize,
    rec: &mut FlowRecord<'static>,
    row: &mut SeriesRow,
    times: &mut Times,
) -> Result<usize, (usize, String)> {
    for &(target, len) in fields {
        let n = if len == VARLEN {
            // RFC 7011 7: one length byte, or 255 and two more.
            let Some(&l) = body.get(off) else {
                return Err((off, "variable-length field past the set end".into()));
            };
            off += 1;
            if l == 255 {
                if off + 2 > body.len() {
                    return Err((off, "variable-length field past the set end".into()));
                }
                off += 2;
                usize::from(u16_at(body, off - 2))
            } else {
                usize::from(l)
            }
        } else {
            usize::from(len)
        };
        if off + n > body.len() {
            return Err((off, format!("field of {n} bytes past the set end")));
        }
        let v = &body[off..off + n];
        off += n;
        apply(target, v, rec, row, times);
    }
    Ok(off)
}

/// Reads big-endian values at increasing offsets; `None` past the end.
struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    #[inline(always)]
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let v = self.b.get(self.pos..self.pos + N)?;
        self.pos += N;
        v.try_into().ok()
    }
    #[inline(always)]
    fn u8(&mut self) -> Option<u8> {
        Some(self.take::<1>()?[0])
    }
    #[inline(always)]
    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_be_bytes(self.take()?))
    }
    #[inline(always)]
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_be_bytes(self.take()?))
    }
    #[inline(always)]
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take()?))
    }
    #[inline(always)]
    fn f64(&mut self) -> Option<f64> {
        Some(f64::from_bits(self.u64()?))
    }
    /// A variable-length field in the short form (one length byte below 255).
    #[inline(always)]
    fn var(&mut self) -> Option<&'a [u8]> {
        let n = usize::from(self.u8()?);
        if n == 255 {
            return None;
        }
        let v = self.b.get(self.pos..self.pos + n)?;
        self.pos += n;
        Some(v)
    }
}

/// One data record of trawl's own flow template (field order of `template::IPFIX_FLOW_V4` /
/// `IPFIX_FLOW_V6`) read into `rec`, every field overwritten; returns its length. `None` when
/// it runs past `b` or uses a long variable length, for the general path to read (and
/// report); `rec` is then partly written. Gives exactly what the field-by-field path gives:
/// the test `trawl_layout_fast_path_matches_the_general_path` checks it.
#[inline(always)]
fn read_trawl_flow(b: &[u8], v6: bool, rec: &mut FlowRecord<'static>) -> Option<usize> {
    let mut r = Reader { b, pos: 0 };
    if v6 {
        rec.src_ip = IpAddr::V6(Ipv6Addr::from(r.take::<16>()?));
        rec.dst_ip = IpAddr::V6(Ipv6Addr::from(r.take::<16>()?));
    } else {
        rec.src_ip = IpAddr::V4(Ipv4Addr::from(r.take::<4>()?));
        rec.dst_ip = IpAddr::V4(Ipv4Addr::from(r.take::<4>()?));
    }
    rec.src_port = r.u16()?;
    rec.dst_port = r.u16()?;
    rec.proto = r.u8()?;
    rec.vlan = r.u16()? & 0x0fff;
    rec.src_mac = r.take()?;
    rec.dst_mac = r.take()?;
    rec.first_ns = ns_from_ntp(r.u64()?);
    rec.last_ns = ns_from_ntp(r.u64()?);
    // The millisecond times only matter when the nanosecond ones are missing.
    r.u64()?;
    r.u64()?;
    let iana_end = r.u8()?;
    let trawl_end = r.u8()?;
    rec.end_reason = if usize::from(trawl_end) < EndReason::COUNT {
        EndReason::ALL[usize::from(trawl_end)]
    } else {
        match iana_end {
            1 => EndReason::Idle,
            2 => EndReason::Active,
            3 => EndReason::Fin,
            5 => EndReason::Pressure,
            _ => EndReason::End,
        }
    };
    let mut counts = [(0u64, 0u64, 0u64, 0u8); 2];
    for c in &mut counts {
        *c = (r.u64()?, r.u64()?, r.u64()?, r.u16()? as u8);
    }
    let mut flags = [[0u32; 4]; 2];
    for f in &mut flags {
        *f = [r.u32()?, r.u32()?, r.u32()?, r.u32()?];
    }
    for (i, d) in [&mut rec.fwd, &mut rec.rev].into_iter().enumerate() {
        let (packets, ip_bytes, bytes, tcp_flags) = counts[i];
        let [fin, rst, psh, urg] = flags[i];
        // A struct literal: a field added to DirectionRecord must be read (or zeroed) here.
        *d = trawl_flow::DirectionRecord {
            packets,
            ip_bytes,
            bytes,
            tcp_flags,
            fin,
            rst,
            psh,
            urg,
            len_min: r.u32()?,
            len_max: r.u32()?,
            len_mean: r.f64()?,
            len_std: r.f64()?,
            iat_min_ns: r.u64()?,
            iat_max_ns: r.u64()?,
            iat_mean_ns: r.f64()?,
            iat_std_ns: r.f64()?,
            syn: r.u32()?,
            syn_ack: r.u32()?,
            ece: r.u32()?,
            cwr: r.u32()?,
            zero_window: r.u32()?,
            retransmissions: r.u32()?,
            // The base template carries no round-trip times; an extended one's follow it.
            rtt_handshake_ns: None,
            rtt_samples: 0,
            rtt_min_ns: 0,
            rtt_max_ns: 0,
            rtt_mean_ns: 0.0,
        };
    }
    let lengths = r.var()?;
    let gaps = r.var()?;
    let nl = (lengths.len() / 4).min(EARLY_PACKETS);
    for (i, c) in lengths.chunks_exact(4).take(nl).enumerate() {
        rec.first_lengths[i] = i64::from(i32::from_be_bytes([c[0], c[1], c[2], c[3]]));
    }
    rec.first_lengths[nl..].fill(0);
    let ng = (gaps.len() / 8).min(EARLY_PACKETS);
    for (i, c) in gaps.chunks_exact(8).take(ng).enumerate() {
        rec.first_iats_ns[i] = u64::from_be_bytes(c.try_into().ok()?) as i64;
    }
    rec.first_iats_ns[ng..].fill(0);
    rec.first_count = nl.max(ng);
    // communityId: follows from the key, which every consumer of the record hashes again.
    r.take::<{ COMMUNITY_ID_LEN as usize }>()?;
    let id = r.take::<{ APPLICATION_ID_LEN as usize }>()?;
    // applicationName: the id names the application.
    r.var()?;
    rec.app = app_label(&id, r.u8()?);
    // Only extended templates carry them (read after this).
    rec.tunnel = Default::default();
    rec.extra = trawl_flow::RecordExtra::default();
    Some(r.pos)
}

/// The label of trawl's applicationId (engine, 2-byte selector) and applicationSource
/// (1 payload, 2 port) elements; none for another engine, an unknown number or source 0.
fn app_label(id: &[u8], source: u8) -> Option<AppLabel> {
    let [engine, hi, lo] = *id else { return None };
    if engine != APPLICATION_ENGINE || hi != 0 {
        return None;
    }
    let source = match source {
        1 => AppSource::Payload,
        2 => AppSource::Port,
        _ => return None,
    };
    App::from_id(lo).map(|app| AppLabel { app, source })
}

/// Whether a field of `len` bytes can hold this element (reduced-size integers allowed).
fn length_fits(f: Field, len: u16) -> bool {
    use Field::*;
    match f {
        SrcIpv4 | DstIpv4 => len == 4,
        SrcIpv6 | DstIpv6 => len == 16,
        SrcMac | DstMac => len == 6,
        StartNs | EndNs | StartUs | EndUs => len == 8,
        LenMean(_) | LenStd(_) | IatMean(_) | IatStd(_) => len == 8 || len == 4,
        FirstLengths | FirstGaps => true,
        CommunityId => len == COMMUNITY_ID_LEN,
        ApplicationId => len == APPLICATION_ID_LEN,
        ApplicationName => true,
        TunnelSrc | TunnelDst => len == 16,
        SrcCountry | DstCountry => len == 2,
        RttMean(_) => len == 8 || len == 4,
        _ => (1..=8).contains(&len),
    }
}

fn float(v: &[u8]) -> f64 {
    match v.len() {
        4 => f64::from(f32::from_bits(be(v) as u32)),
        _ => f64::from_bits(be(v)),
    }
}

/// What a template field is read into: one flat code per field and direction, so that a
/// data record is decoded through a single jump table (the nested `Option<Field>` cost a
/// third of the decoding time).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum Op {
    Skip,
    /// applicationId: the label, whose source the applicationSource after it sets.
    AppId,
    AppFrom,
    SrcIpv4,
    DstIpv4,
    SrcIpv6,
    DstIpv6,
    SrcPort,
    DstPort,
    Proto,
    Vlan,
    SrcMac,
    DstMac,
    StartNs,
    EndNs,
    StartUs,
    EndUs,
    StartMs,
    EndMs,
    StartSec,
    EndSec,
    UptimeStart,
    UptimeEnd,
    SystemInitMs,
    FlowEndReason,
    TrawlEndReason,
    PacketsTotal,
    OctetsTotal,
    V9OutPackets,
    V9OutBytes,
    FirstLengths,
    FirstGaps,
    SeriesSecond,
    SeriesPackets,
    SeriesBytes,
    SeriesActiveFlows,
    SeriesNewFlows,
    SeriesInPackets,
    SeriesInBytes,
    SeriesOutPackets,
    SeriesOutBytes,
    PacketsFwd,
    PacketsRev,
    IpBytesFwd,
    IpBytesRev,
    FrameBytesFwd,
    FrameBytesRev,
    TcpFlagsFwd,
    TcpFlagsRev,
    FinFwd,
    FinRev,
    RstFwd,
    RstRev,
    PshFwd,
    PshRev,
    UrgFwd,
    UrgRev,
    LenMinFwd,
    LenMinRev,
    LenMaxFwd,
    LenMaxRev,
    LenMeanFwd,
    LenMeanRev,
    LenStdFwd,
    LenStdRev,
    IatMinFwd,
    IatMinRev,
    IatMaxFwd,
    IatMaxRev,
    IatMeanFwd,
    IatMeanRev,
    IatStdFwd,
    IatStdRev,
    SynFwd,
    SynRev,
    SynAckFwd,
    SynAckRev,
    EceFwd,
    EceRev,
    CwrFwd,
    CwrRev,
    ZeroWindowFwd,
    ZeroWindowRev,
    RetransFwd,
    RetransRev,
    RttHandshakeFwd,
    RttHandshakeRev,
    RttSamplesFwd,
    RttSamplesRev,
    RttMinFwd,
    RttMinRev,
    RttMaxFwd,
    RttMaxRev,
    RttMeanFwd,
    RttMeanRev,
    TunnelType,
    TunnelSrc,
    TunnelDst,
    TunnelId,
    SrcAs,
    DstAs,
    SrcCountry,
    DstCountry,
}

fn op(f: Option<Field>) -> Op {
    let Some(f) = f else { return Op::Skip };
    match f {
        // Recomputed from the key by whoever writes the record.
        Field::CommunityId => Op::Skip,
        // The id names the application.
        Field::ApplicationName => Op::Skip,
        Field::ApplicationId => Op::AppId,
        Field::ApplicationSource => Op::AppFrom,
        Field::SrcIpv4 => Op::SrcIpv4,
        Field::DstIpv4 => Op::DstIpv4,
        Field::SrcIpv6 => Op::SrcIpv6,
        Field::DstIpv6 => Op::DstIpv6,
        Field::SrcPort => Op::SrcPort,
        Field::DstPort => Op::DstPort,
        Field::Proto => Op::Proto,
        Field::Vlan => Op::Vlan,
        Field::SrcMac => Op::SrcMac,
        Field::DstMac => Op::DstMac,
        Field::StartNs => Op::StartNs,
        Field::EndNs => Op::EndNs,
        Field::StartUs => Op::StartUs,
        Field::EndUs => Op::EndUs,
        Field::StartMs => Op::StartMs,
        Field::EndMs => Op::EndMs,
        Field::StartSec => Op::StartSec,
        Field::EndSec => Op::EndSec,
        Field::UptimeStart => Op::UptimeStart,
        Field::UptimeEnd => Op::UptimeEnd,
        Field::SystemInitMs => Op::SystemInitMs,
        Field::FlowEndReason => Op::FlowEndReason,
        Field::TrawlEndReason => Op::TrawlEndReason,
        Field::PacketsTotal => Op::PacketsTotal,
        Field::OctetsTotal => Op::OctetsTotal,
        Field::V9OutPackets => Op::V9OutPackets,
        Field::V9OutBytes => Op::V9OutBytes,
        Field::FirstLengths => Op::FirstLengths,
        Field::FirstGaps => Op::FirstGaps,
        Field::SeriesSecond => Op::SeriesSecond,
        Field::SeriesPackets => Op::SeriesPackets,
        Field::SeriesBytes => Op::SeriesBytes,
        Field::SeriesActiveFlows => Op::SeriesActiveFlows,
        Field::SeriesNewFlows => Op::SeriesNewFlows,
        Field::SeriesInPackets => Op::SeriesInPackets,
        Field::SeriesInBytes => Op::SeriesInBytes,
        Field::SeriesOutPackets => Op::SeriesOutPackets,
        Field::SeriesOutBytes => Op::SeriesOutBytes,
        Field::Packets(Dir::Fwd) => Op::PacketsFwd,
        Field::Packets(Dir::Rev) => Op::PacketsRev,
        Field::IpBytes(Dir::Fwd) => Op::IpBytesFwd,
        Field::IpBytes(Dir::Rev) => Op::IpBytesRev,
        Field::FrameBytes(Dir::Fwd) => Op::FrameBytesFwd,
        Field::FrameBytes(Dir::Rev) => Op::FrameBytesRev,
        Field::TcpFlags(Dir::Fwd) => Op::TcpFlagsFwd,
        Field::TcpFlags(Dir::Rev) => Op::TcpFlagsRev,
        Field::Fin(Dir::Fwd) => Op::FinFwd,
        Field::Fin(Dir::Rev) => Op::FinRev,
        Field::Rst(Dir::Fwd) => Op::RstFwd,
        Field::Rst(Dir::Rev) => Op::RstRev,
        Field::Psh(Dir::Fwd) => Op::PshFwd,
        Field::Psh(Dir::Rev) => Op::PshRev,
        Field::Urg(Dir::Fwd) => Op::UrgFwd,
        Field::Urg(Dir::Rev) => Op::UrgRev,
        Field::LenMin(Dir::Fwd) => Op::LenMinFwd,
        Field::LenMin(Dir::Rev) => Op::LenMinRev,
        Field::LenMax(Dir::Fwd) => Op::LenMaxFwd,
        Field::LenMax(Dir::Rev) => Op::LenMaxRev,
        Field::LenMean(Dir::Fwd) => Op::LenMeanFwd,
        Field::LenMean(Dir::Rev) => Op::LenMeanRev,
        Field::LenStd(Dir::Fwd) => Op::LenStdFwd,
        Field::LenStd(Dir::Rev) => Op::LenStdRev,
        Field::IatMin(Dir::Fwd) => Op::IatMinFwd,
        Field::IatMin(Dir::Rev) => Op::IatMinRev,
        Field::IatMax(Dir::Fwd) => Op::IatMaxFwd,
        Field::IatMax(Dir::Rev) => Op::IatMaxRev,
        Field::IatMean(Dir::Fwd) => Op::IatMeanFwd,
        Field::IatMean(Dir::Rev) => Op::IatMeanRev,
        Field::IatStd(Dir::Fwd) => Op::IatStdFwd,
        Field::IatStd(Dir::Rev) => Op::IatStdRev,
        Field::Syn(Dir::Fwd) => Op::SynFwd,
        Field::Syn(Dir::Rev) => Op::SynRev,
        Field::SynAck(Dir::Fwd) => Op::SynAckFwd,
        Field::SynAck(Dir::Rev) => Op::SynAckRev,
        Field::Ece(Dir::Fwd) => Op::EceFwd,
        Field::Ece(Dir::Rev) => Op::EceRev,
        Field::Cwr(Dir::Fwd) => Op::CwrFwd,
        Field::Cwr(Dir::Rev) => Op::CwrRev,
        Field::ZeroWindow(Dir::Fwd) => Op::ZeroWindowFwd,
        Field::ZeroWindow(Dir::Rev) => Op::ZeroWindowRev,
        Field::Retrans(Dir::Fwd) => Op::RetransFwd,
        Field::Retrans(Dir::Rev) => Op::RetransRev,
        Field::RttHandshake(Dir::Fwd) => Op::RttHandshakeFwd,
        Field::RttHandshake(Dir::Rev) => Op::RttHandshakeRev,
        Field::RttSamples(Dir::Fwd) => Op::RttSamplesFwd,
        Field::RttSamples(Dir::Rev) => Op::RttSamplesRev,
        Field::RttMin(Dir::Fwd) => Op::RttMinFwd,
        Field::RttMin(Dir::Rev) => Op::RttMinRev,
        Field::RttMax(Dir::Fwd) => Op::RttMaxFwd,
        Field::RttMax(Dir::Rev) => Op::RttMaxRev,
        Field::RttMean(Dir::Fwd) => Op::RttMeanFwd,
        Field::RttMean(Dir::Rev) => Op::RttMeanRev,
        Field::TunnelType => Op::TunnelType,
        Field::TunnelSrc => Op::TunnelSrc,
        Field::TunnelDst => Op::TunnelDst,
        Field::TunnelId => Op::TunnelId,
        Field::SrcAs => Op::SrcAs,
        Field::DstAs => Op::DstAs,
        Field::SrcCountry => Op::SrcCountry,
        Field::DstCountry => Op::DstCountry,
    }
}

#[inline(always)]
fn apply(f: Op, v: &[u8], rec: &mut FlowRecord<'static>, row: &mut SeriesRow, t: &mut Times) {
    use Op::*;
    let n = be(v);
    let n32 = n.min(u64::from(u32::MAX)) as u32;
    match f {
        // Taken as from payload until the applicationSource after it says otherwise.
        AppId => rec.app = app_label(v, 1),
        AppFrom => {
            rec.app = rec.app.and_then(|l| match n {
                1 => Some(AppLabel {
                    source: trawl_flow::AppSource::Payload,
                    ..l
                }),
                2 => Some(AppLabel {
                    source: trawl_flow::AppSource::Port,
                    ..l
                }),
                _ => None,
            })
        }
        SrcIpv4 => rec.src_ip = IpAddr::V4(Ipv4Addr::new(v[0], v[1], v[2], v[3])),
        DstIpv4 => rec.dst_ip = IpAddr::V4(Ipv4Addr::new(v[0], v[1], v[2], v[3])),
        SrcIpv6 | DstIpv6 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(v);
            let ip = IpAddr::V6(Ipv6Addr::from(a));
            if f == SrcIpv6 {
                rec.src_ip = ip;
            } else {
                rec.dst_ip = ip;
            }
        }
        SrcPort => rec.src_port = n as u16,
        DstPort => rec.dst_port = n as u16,
        Proto => rec.proto = n as u8,
        Vlan => rec.vlan = (n & 0x0fff) as u16,
        SrcMac => rec.src_mac.copy_from_slice(v),
        DstMac => rec.dst_mac.copy_from_slice(v),
        StartNs => t.ns[0] = Some(ns_from_ntp(n)),
        EndNs => t.ns[1] = Some(ns_from_ntp(n)),
        // dateTimeMicroseconds is NTP format too; RFC 7011 6.1.9 says its low 11 fraction
        // bits are not significant.
        StartUs => t.us[0] = Some(ns_from_ntp(n & !0x7ff) / 1000 * 1000),
        EndUs => t.us[1] = Some(ns_from_ntp(n & !0x7ff) / 1000 * 1000),
        StartMs => t.ms[0] = Some(n),
        EndMs => t.ms[1] = Some(n),
        StartSec => t.sec[0] = Some(n),
        EndSec => t.sec[1] = Some(n),
        UptimeStart => t.uptime[0] = Some(n),
        UptimeEnd => t.uptime[1] = Some(n),
        SystemInitMs => t.init_ms = Some(n),
        FlowEndReason => t.iana_end = Some(n as u8),
        TrawlEndReason => t.trawl_end = Some(n as u8),
        PacketsTotal => t.totals[0] = Some(n),
        OctetsTotal => t.totals[1] = Some(n),
        V9OutPackets => rec.rev.packets = n,
        V9OutBytes => rec.rev.ip_bytes = n,
        FirstLengths => {
            let count = (v.len() / 4).min(EARLY_PACKETS);
            for i in 0..count {
                rec.first_lengths[i] = i64::from(u32_at(v, i * 4) as i32);
            }
            rec.first_count = rec.first_count.max(count);
        }
        FirstGaps => {
            let count = (v.len() / 8).min(EARLY_PACKETS);
            for i in 0..count {
                rec.first_iats_ns[i] = be(&v[i * 8..i * 8 + 8]) as i64;
            }
            rec.first_count = rec.first_count.max(count);
        }
        PacketsFwd => rec.fwd.packets = n,
        PacketsRev => rec.rev.packets = n,
        IpBytesFwd => rec.fwd.ip_bytes = n,
        IpBytesRev => rec.rev.ip_bytes = n,
        FrameBytesFwd => rec.fwd.bytes = n,
        FrameBytesRev => rec.rev.bytes = n,
        TcpFlagsFwd => rec.fwd.tcp_flags = n as u8,
        TcpFlagsRev => rec.rev.tcp_flags = n as u8,
        FinFwd => rec.fwd.fin = n32,
        FinRev => rec.rev.fin = n32,
        RstFwd => rec.fwd.rst = n32,
        RstRev => rec.rev.rst = n32,
        PshFwd => rec.fwd.psh = n32,
        PshRev => rec.rev.psh = n32,
        UrgFwd => rec.fwd.urg = n32,
        UrgRev => rec.rev.urg = n32,
        LenMinFwd => rec.fwd.len_min = n32,
        LenMinRev => rec.rev.len_min = n32,
        LenMaxFwd => rec.fwd.len_max = n32,
        LenMaxRev => rec.rev.len_max = n32,
        LenMeanFwd => rec.fwd.len_mean = float(v),
        LenMeanRev => rec.rev.len_mean = float(v),
        LenStdFwd => rec.fwd.len_std = float(v),
        LenStdRev => rec.rev.len_std = float(v),
        IatMinFwd => rec.fwd.iat_min_ns = n,
        IatMinRev => rec.rev.iat_min_ns = n,
        IatMaxFwd => rec.fwd.iat_max_ns = n,
        IatMaxRev => rec.rev.iat_max_ns = n,
        IatMeanFwd => rec.fwd.iat_mean_ns = float(v),
        IatMeanRev => rec.rev.iat_mean_ns = float(v),
        IatStdFwd => rec.fwd.iat_std_ns = float(v),
        IatStdRev => rec.rev.iat_std_ns = float(v),
        SynFwd => rec.fwd.syn = n32,
        SynRev => rec.rev.syn = n32,
        SynAckFwd => rec.fwd.syn_ack = n32,
        SynAckRev => rec.rev.syn_ack = n32,
        EceFwd => rec.fwd.ece = n32,
        EceRev => rec.rev.ece = n32,
        CwrFwd => rec.fwd.cwr = n32,
        CwrRev => rec.rev.cwr = n32,
        ZeroWindowFwd => rec.fwd.zero_window = n32,
        ZeroWindowRev => rec.rev.zero_window = n32,
        RetransFwd => rec.fwd.retransmissions = n32,
        RetransRev => rec.rev.retransmissions = n32,
        RttHandshakeFwd => rec.fwd.rtt_handshake_ns = rtt_handshake(n),
        RttHandshakeRev => rec.rev.rtt_handshake_ns = rtt_handshake(n),
        RttSamplesFwd => rec.fwd.rtt_samples = n32,
        RttSamplesRev => rec.rev.rtt_samples = n32,
        RttMinFwd => rec.fwd.rtt_min_ns = n,
        RttMinRev => rec.rev.rtt_min_ns = n,
        RttMaxFwd => rec.fwd.rtt_max_ns = n,
        RttMaxRev => rec.rev.rtt_max_ns = n,
        RttMeanFwd => rec.fwd.rtt_mean_ns = float(v),
        RttMeanRev => rec.rev.rtt_mean_ns = float(v),
        TunnelType => rec.tunnel.kind = trawl_flow::TunnelType::from_u8(n.min(255) as u8),
        TunnelSrc | TunnelDst => {
            let mut a = [0u8; 16];
            a.copy_from_slice(v);
            // IPv4 outer headers travel IPv4-mapped, as the meter keeps them.
            rec.tunnel.ip_version = if Ipv6Addr::from(a).to_ipv4_mapped().is_some() {
                4
            } else {
                6
            };
            if f == TunnelSrc {
                rec.tunnel.src_ip = a;
            } else {
                rec.tunnel.dst_ip = a;
            }
        }
        TunnelId => rec.tunnel.id = n32,
        SrcAs => rec.extra.src_as = n32,
        DstAs => rec.extra.dst_as = n32,
        SrcCountry => rec.extra.src_country.copy_from_slice(v),
        DstCountry => rec.extra.dst_country.copy_from_slice(v),
        SeriesSecond => row.second = n,
        Skip => {}
        SeriesPackets => row.packets = n,
        SeriesBytes => row.bytes = n,
        SeriesActiveFlows => row.active_flows = n,
        SeriesNewFlows => row.new_flows = n,
        SeriesInPackets => row.in_packets = n,
        SeriesInBytes => row.in_bytes = n,
        SeriesOutPackets => row.out_packets = n,
        SeriesOutBytes => row.out_bytes = n,
    }
}

/// A handshake round trip as the element carries it: all ones when not timed.
fn rtt_handshake(n: u64) -> Option<u64> {
    (n != RTT_NONE).then_some(n)
}

fn finish_times(rec: &mut FlowRecord<'static>, t: &Times, boot_ms: Option<u64>) {
    for i in 0..2 {
        let ns = t.ns[i]
            .or(t.us[i])
            .or(t.ms[i].map(|ms| ms.saturating_mul(1_000_000)))
            .or(t.sec[i].map(|s| s.saturating_mul(1_000_000_000)))
            .or_else(|| {
                let up = t.uptime[i]?;
                Some(boot_ms?.saturating_add(up).saturating_mul(1_000_000))
            })
            .unwrap_or(0);
        if i == 0 {
            rec.first_ns = ns;
        } else {
            rec.last_ns = ns;
        }
    }
    if rec.fwd.packets == 0 {
        rec.fwd.packets = t.totals[0].unwrap_or(0);
    }
    if rec.fwd.ip_bytes == 0 {
        rec.fwd.ip_bytes = t.totals[1].unwrap_or(0);
    }
    rec.end_reason = match (t.trawl_end, t.iana_end) {
        (Some(e), _) if usize::from(e) < EndReason::COUNT => EndReason::ALL[usize::from(e)],
        (_, Some(1)) => EndReason::Idle,
        (_, Some(2)) => EndReason::Active,
        (_, Some(3)) => EndReason::Fin,
        (_, Some(5)) => EndReason::Pressure,
        _ => EndReason::End,
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_flow::FeatureLevel;

    #[test]
    fn application_labels_are_read_back_on_both_paths() {
        use crate::{MessageEncoder, Protocol, TemplateRefresh};
        let records = crate::encode::tests::varied_records();
        assert!(records
            .iter()
            .any(|r| r.app.is_some_and(|l| l.source == AppSource::Port)));
        let mut enc =
            MessageEncoder::flows(Protocol::Ipfix, 7, DEFAULT_PEN, 1472, TemplateRefresh::Once);
        let mut messages: Vec<Vec<u8>> = Vec::new();
        for r in &records {
            enc.add_flow(r, 1, &mut |m: &[u8]| messages.push(m.to_vec()));
        }
        enc.flush(1, &mut |m: &[u8]| messages.push(m.to_vec()));
        for fast in [true, false] {
            let mut dec = Decoder::new(DecoderConfig::default());
            dec.fast_layouts = fast;
            let mut got = Vec::new();
            for m in &messages {
                dec.decode("127.0.0.1:1".parse().unwrap(), m, &mut |_, item| {
                    if let Item::Flow(r) = item {
                        got.push(r.app);
                    }
                });
            }
            let want: Vec<_> = records.iter().map(|r| r.app).collect();
            assert_eq!(got, want, "fast path {fast}");
        }
    }

    /// Every field of a record travels (round-trip times, tunnel, AS numbers and countries in
    /// the extended templates, each announced before its first record): what the collector
    /// reads back is the record, on both decoding paths, with templates announced once (a
    /// file) and periodically (a feed), in one large message and in many small ones.
    #[test]
    fn every_field_of_a_record_round_trips_through_ipfix() {
        use crate::{MessageEncoder, Protocol, TemplateRefresh};
        let full = crate::encode::tests::varied_records();
        // Bytes of records and templates each level sent, in one large message.
        let mut sizes = Vec::new();
        for (level, refresh, max) in [
            (FeatureLevel::Full, TemplateRefresh::Once, 65_535),
            (FeatureLevel::Full, TemplateRefresh::Once, 1472),
            (FeatureLevel::Full, TemplateRefresh::FEED, 1472),
            (FeatureLevel::Standard, TemplateRefresh::Once, 65_535),
            (FeatureLevel::Standard, TemplateRefresh::FEED, 1472),
            (FeatureLevel::Minimal, TemplateRefresh::Once, 65_535),
            (FeatureLevel::Minimal, TemplateRefresh::FEED, 1472),
        ] {
            // A level's records are projections of `full`'s: what travels is what it keeps.
            let records: Vec<_> = full.iter().map(|r| r.project(level)).collect();
            let mut enc = MessageEncoder::flows(Protocol::Ipfix, 7, DEFAULT_PEN, max, refresh)
                .with_level(level);
            let mut messages: Vec<Vec<u8>> = Vec::new();
            for r in &records {
                enc.add_flow(r, 1, &mut |m: &[u8]| messages.push(m.to_vec()));
            }
            enc.flush(1, &mut |m: &[u8]| messages.push(m.to_vec()));
            // An announcement that leaves a fresh message no room for its record goes alone.
            assert!(messages.iter().all(|m| m.len() <= max), "{max}");
            for fast in [true, false] {
                let mut dec = Decoder::new(DecoderConfig::default());
                dec.fast_layouts = fast;
                let mut got = Vec::new();
                for m in &messages {
                    let (_, err) = dec.decode("127.0.0.1:1".parse().unwrap(), m, &mut |_, item| {
                        if let Item::Flow(r) = item {
                            got.push(*r);
                        }
                    });
                    assert!(err.is_none(), "{err:?}");
                }
                assert_eq!(got.len(), records.len());
                for (g, w) in got.iter().zip(&records) {
                    assert_eq!(g, w, "{level}, {refresh:?}, {max} bytes, fast path {fast}");
                }
            }
            if max == 65_535 {
                sizes.push(messages.iter().map(Vec::len).sum::<usize>());
                // The level's own templates, and no other.
                let ids = set_ids(&messages);
                let own = |id: u16| match level {
                    FeatureLevel::Full => id < crate::template::LEVEL_BASE_ID,
                    _ => (crate::template::level_flow_id(level, 0, false)
                        ..crate::template::level_flow_id(level, 0, false)
                            + crate::template::LEVEL_IDS)
                        .contains(&id),
                };
                assert!(ids.iter().all(|&id| id == 2 || own(id)), "{level}: {ids:?}");
            }
        }
        assert!(sizes[0] > sizes[1] && sizes[1] > sizes[2], "{sizes:?}");
    }

    /// The set ids of IPFIX messages, in order.
    fn set_ids(messages: &[Vec<u8>]) -> Vec<u16> {
        let mut ids = Vec::new();
        for m in messages {
            let mut at = 16;
            while at + 4 <= m.len() {
                ids.push(u16::from_be_bytes([m[at], m[at + 1]]));
                let len = usize::from(u16::from_be_bytes([m[at + 2], m[at + 3]]));
                if len < 4 {
                    break;
                }
                at += len;
            }
        }
        ids
    }

    #[test]
    fn trawl_layout_fast_path_matches_the_general_path() {
        use crate::{MessageEncoder, Protocol, TemplateRefresh};
        let records = crate::encode::tests::varied_records();
        let mut messages: Vec<Vec<u8>> = Vec::new();
        for fill in [false, true] {
            let mut enc =
                MessageEncoder::flows(Protocol::Ipfix, 7, DEFAULT_PEN, 1472, TemplateRefresh::Once);
            enc.set_fill(fill);
            for r in &records {
                enc.add_flow(r, 1, &mut |m: &[u8]| messages.push(m.to_vec()));
            }
            enc.flush(1, &mut |m: &[u8]| messages.push(m.to_vec()));
        }
        // A record cut short at the end of its set: both paths must report the same.
        let mut cut = messages[1].clone();
        cut.truncate(cut.len() - 2);
        let n = cut.len() as u16;
        cut[2..4].copy_from_slice(&n.to_be_bytes());
        // The last set (a data set: extended templates are announced before their records).
        let mut last = 16;
        while last + usize::from(u16::from_be_bytes([cut[last + 2], cut[last + 3]])) < cut.len() + 2
        {
            last += usize::from(u16::from_be_bytes([cut[last + 2], cut[last + 3]]));
        }
        assert!(u16::from_be_bytes([cut[last], cut[last + 1]]) >= 256);
        let set_len = u16::from_be_bytes([cut[last + 2], cut[last + 3]]) - 2;
        cut[last + 2..last + 4].copy_from_slice(&set_len.to_be_bytes());
        messages.push(cut);
        let run = |fast: bool| {
            let mut dec = Decoder::new(DecoderConfig::default());
            dec.fast_layouts = fast;
            let mut out = Vec::new();
            for (i, m) in messages.iter().enumerate() {
                // Each encoder is a new session: the second restarts sequence numbers.
                let from: SocketAddr = format!("127.0.0.1:{}", 1 + i / 1000).parse().unwrap();
                let (n, err) = dec.decode(from, m, &mut |o, item| {
                    if let Item::Flow(r) = item {
                        out.push(format!("{o:?} {r:?}"));
                    }
                });
                out.push(format!("{n} {err:?}"));
            }
            assert_eq!(
                dec.templates.values().any(|t| t.trawl.is_some()),
                fast,
                "layout recognised"
            );
            (out, *dec.stats())
        };
        let (fast, fast_stats) = run(true);
        let (general, general_stats) = run(false);
        assert!(fast.len() > 2 * records.len());
        assert_eq!(fast, general);
        assert_eq!(fast_stats, general_stats);
        assert_eq!(
            fast_stats.errors[DecodeErrorKind::RecordPastEnd as usize],
            1
        );
    }
}
