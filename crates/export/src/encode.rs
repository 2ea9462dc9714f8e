//! IPFIX (RFC 7011, biflows per RFC 5103) and NetFlow v9 (RFC 3954) message encoding.
//!
//! A [`MessageEncoder`] belongs to one transport session and one observation domain (v9:
//! source id). Records are appended in place to one reused buffer; when the next record does
//! not fit in `max_message` bytes the message is closed and handed to the caller, who sends
//! it. Nothing is allocated per record.
use std::net::IpAddr;
use std::time::{Duration, Instant};

use trawl_flow::{DirectionRecord, EndReason, FeatureLevel, FlowRecord};
use trawl_series::SeriesRow;

use crate::ie::{
    Dir, Field, APPLICATION_ENGINE, APPLICATION_ID_LEN, COMMUNITY_ID_LEN, RTT_NONE, VARLEN,
};
use crate::template::{
    ext, level_flow, v9_len, Family, TemplateDef, EXTENDED_BASE_ID, IPFIX_FLOW_V4, IPFIX_FLOW_V6,
    IPFIX_ONE_WAY_V4, IPFIX_ONE_WAY_V6, IPFIX_SERIES, PADDING_ID, PADDING_OCTETS, V9_FLOW_V4,
    V9_FLOW_V6,
};
use crate::text::{Cursor, Out};

/// Seconds between the NTP epoch (1900) and the Unix epoch (1970).
pub const NTP_UNIX_OFFSET: u64 = 2_208_988_800;

/// Wire protocol of a message encoder.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// IPFIX (version 10).
    Ipfix,
    /// NetFlow version 9.
    NetflowV9,
}

/// When templates are (re)sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TemplateRefresh {
    /// Once at the start of the session (TCP, files: reliable transports, RFC 7011 8.1).
    Once,
    /// UDP (RFC 7011 8.4): again after this long or this many messages, whichever first.
    Periodic {
        /// Longest time between template sets.
        interval: Duration,
        /// Template sets at least every this many messages.
        messages: u32,
    },
    /// In every message (multicast feeds: a subscriber may join at any time).
    EveryMessage,
}

impl TemplateRefresh {
    /// Multicast feeds: a subscriber joins at any time and should not wait long, but the
    /// flow templates (about 800 bytes) in every message would leave room for one record.
    /// Every second or 16 messages.
    pub const FEED: TemplateRefresh = TemplateRefresh::Periodic {
        interval: Duration::from_secs(1),
        messages: 16,
    };

    /// UDP default: every 60 s or 1000 messages.
    pub const UDP_DEFAULT: TemplateRefresh = TemplateRefresh::Periodic {
        interval: Duration::from_secs(60),
        messages: 1000,
    };
}

/// Counters of an encoder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EncoderStats {
    /// Messages closed.
    pub messages: u64,
    /// Data records written.
    pub records: u64,
    /// Template sets written.
    pub template_sets: u64,
    /// NetFlow v9 times before the exporter's virtual boot time, written as 0.
    pub clamped_times: u64,
    /// Messages padded to the full message size ([`MessageEncoder::set_fill`]).
    pub padded: u64,
}

/// Builds IPFIX or NetFlow v9 messages for one observation domain.
#[derive(Debug)]
pub struct MessageEncoder {
    protocol: Protocol,
    domain: u32,
    pen: u32,
    max_message: usize,
    refresh: TemplateRefresh,
    templates: [TemplateDef; 2],
    series: bool,
    /// Each biflow as two one-way records ([`MessageEncoder::one_way_flows`]).
    one_way: bool,
    buf: Vec<u8>,
    /// Start of the open set and its template id (0: none open).
    set_start: usize,
    set_id: u16,
    /// Data records in the open message, and v9's count of all records (templates too).
    msg_records: u32,
    v9_count: u16,
    /// IPFIX: data records sent before the open message. v9: messages sent before it.
    sequence: u32,
    templates_sent_at: Option<Instant>,
    messages_since_templates: u32,
    /// NetFlow v9's virtual boot time (ms since the Unix epoch) and packet clock (ms).
    boot_ms: Option<u64>,
    clock_ms: u64,
    stats: EncoderStats,
    /// Pad messages closed for want of room to exactly `max_message` bytes (UDP segmentation
    /// offload: every segment but the last has that size).
    fill: bool,
    /// Whether this session's template set announced the padding template.
    padding_announced: bool,
    /// The extended biflow templates announced since the last template set (bit `id -
    /// EXTENDED_BASE_ID`): each is sent in a template set of its own just before its first
    /// record, and again after every refresh.
    extended_announced: u64,
    /// The feature level of the records (IPFIX biflows): below `full`, the level's own
    /// templates, without the fields it does not keep.
    level: FeatureLevel,
}

const IPFIX_HEADER: usize = 16;
const V9_HEADER: usize = 20;

impl MessageEncoder {
    /// A flow record encoder. `max_message`: largest message in bytes (UDP: path MTU minus IP
    /// and UDP headers; at most 65535).
    pub fn flows(
        protocol: Protocol,
        domain: u32,
        pen: u32,
        max_message: usize,
        refresh: TemplateRefresh,
    ) -> Self {
        let templates = match protocol {
            Protocol::Ipfix => [IPFIX_FLOW_V4, IPFIX_FLOW_V6],
            Protocol::NetflowV9 => [V9_FLOW_V4, V9_FLOW_V6],
        };
        Self::with_templates(
            protocol,
            domain,
            pen,
            max_message,
            refresh,
            templates,
            false,
        )
    }

    /// An IPFIX flow record encoder that sends each biflow as two one-way records (templates
    /// [`IPFIX_ONE_WAY_V4`]/[`IPFIX_ONE_WAY_V6`]): initiator → responder, then responder →
    /// initiator when the responder sent packets, for collectors that ignore RFC 5103's
    /// reverse elements. Both carry the biflow's start and end times.
    pub fn one_way_flows(
        domain: u32,
        pen: u32,
        max_message: usize,
        refresh: TemplateRefresh,
    ) -> Self {
        let mut e = Self::with_templates(
            Protocol::Ipfix,
            domain,
            pen,
            max_message,
            refresh,
            [IPFIX_ONE_WAY_V4, IPFIX_ONE_WAY_V6],
            false,
        );
        e.one_way = true;
        e
    }

    /// A series row encoder (IPFIX only; multicast feeds).
    pub fn series(domain: u32, pen: u32, max_message: usize, refresh: TemplateRefresh) -> Self {
        Self::with_templates(
            Protocol::Ipfix,
            domain,
            pen,
            max_message,
            refresh,
            [IPFIX_SERIES, IPFIX_SERIES],
            true,
        )
    }

    fn with_templates(
        protocol: Protocol,
        domain: u32,
        pen: u32,
        max_message: usize,
        refresh: TemplateRefresh,
        templates: [TemplateDef; 2],
        series: bool,
    ) -> Self {
        let max_message = max_message.clamp(512, 65_535);
        MessageEncoder {
            protocol,
            domain,
            pen,
            max_message,
            refresh,
            templates,
            series,
            one_way: false,
            buf: Vec::with_capacity(max_message + 4096),
            set_start: 0,
            set_id: 0,
            msg_records: 0,
            v9_count: 0,
            sequence: 0,
            templates_sent_at: None,
            messages_since_templates: 0,
            boot_ms: None,
            clock_ms: 0,
            stats: EncoderStats::default(),
            fill: false,
            padding_announced: false,
            extended_announced: 0,
            level: FeatureLevel::Full,
        }
    }

    /// Records of `level` (IPFIX biflows; one-way records, NetFlow v9 and series keep their
    /// one template): below `full`, each goes under the level's template
    /// ([`level_flow`]), which leaves out the fields the level does not keep instead of
    /// sending them as zeros. Call before the first record.
    pub fn with_level(mut self, level: FeatureLevel) -> Self {
        if self.protocol == Protocol::Ipfix && !self.one_way && !self.series {
            self.templates = [level_flow(level, 0, false), level_flow(level, 0, true)];
            self.level = level;
        }
        self
    }

    /// IPFIX over UDP with segmentation offload: a message closed because the next record
    /// does not fit is filled to exactly `max_message` bytes. Up to 3 bytes of room are
    /// zeros at the end of its data set (below any record, and below the 4 bytes every
    /// collector takes as padding); more take a set of template 259 ([`PADDING_ID`]), whose
    /// one record is a variable-length paddingOctets of zeros, announced in the template sets
    /// from then on. (Padding a data set by more than 3 bytes is valid IPFIX, RFC 7011 3.3.1,
    /// but nfcapd reads it as a record cut short and logs an error per message.) Off by
    /// default; no effect on NetFlow v9, nor on one-way sessions ([`MessageEncoder::one_way_flows`]):
    /// they are for collectors such as GoFlow2, which (v2.2.6) reads the records of a
    /// template made only of variable-length fields until the message ends, fails, and drops
    /// the whole message.
    pub fn set_fill(&mut self, on: bool) {
        let on = on && self.protocol == Protocol::Ipfix && !self.series && !self.one_way;
        if on && !self.fill {
            // The padding template goes out with the next message's templates.
            self.templates_sent_at = None;
        }
        self.fill = on;
    }

    /// The largest message, in bytes.
    pub fn max_message(&self) -> usize {
        self.max_message
    }

    /// Fills the open message to exactly `max_message` bytes (see [`MessageEncoder::set_fill`]).
    fn fill_message(&mut self) {
        let gap = self.max_message.saturating_sub(self.buf.len());
        if gap == 0 || self.set_id == 0 {
            return;
        }
        if gap < 4 {
            self.buf.resize(self.max_message, 0);
        } else if self.padding_announced {
            self.close_set();
            self.buf.extend_from_slice(&PADDING_ID.to_be_bytes());
            self.buf.extend_from_slice(&(gap as u16).to_be_bytes());
            let body = gap - 4;
            if body > 0 && body <= 255 {
                // Short form: one length byte.
                self.buf.push((body - 1) as u8);
            } else if body > 255 {
                // Long form: 255, then a 16-bit length (RFC 7011 7).
                self.buf.push(255);
                self.buf
                    .extend_from_slice(&((body - 3) as u16).to_be_bytes());
            }
            self.buf.resize(self.max_message, 0);
        } else {
            return;
        }
        self.stats.padded += 1;
    }

    /// The observation domain (v9: source id).
    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// Counters so far.
    pub fn stats(&self) -> EncoderStats {
        self.stats
    }

    /// Starts over as a new transport session (a TCP reconnect): templates first again,
    /// sequence numbers from 0.
    pub fn reset_session(&mut self) {
        self.buf.clear();
        self.set_id = 0;
        self.msg_records = 0;
        self.sequence = 0;
        self.templates_sent_at = None;
        self.messages_since_templates = 0;
        self.padding_announced = false;
        self.extended_announced = 0;
    }

    fn header_len(&self) -> usize {
        match self.protocol {
            Protocol::Ipfix => IPFIX_HEADER,
            Protocol::NetflowV9 => V9_HEADER,
        }
    }

    fn templates_due(&self, now: Instant) -> bool {
        match (self.refresh, self.templates_sent_at) {
            (_, None) => true,
            (TemplateRefresh::Once, Some(_)) => false,
            (TemplateRefresh::EveryMessage, _) => true,
            (TemplateRefresh::Periodic { interval, messages }, Some(at)) => {
                now.duration_since(at) >= interval || self.messages_since_templates >= messages
            }
        }
    }

    fn begin(&mut self) {
        self.buf.clear();
        self.buf.resize(self.header_len(), 0);
        self.set_id = 0;
        self.msg_records = 0;
        self.v9_count = 0;
        let now = Instant::now();
        if self.templates_due(now) {
            // The extended templates go out again with their next record.
            self.extended_announced = 0;
            self.write_templates();
            self.templates_sent_at = Some(now);
            self.messages_since_templates = 0;
            self.stats.template_sets += 1;
        }
    }

    fn write_templates(&mut self) {
        let start = self.buf.len();
        let set_id: u16 = match self.protocol {
            Protocol::Ipfix => 2,
            Protocol::NetflowV9 => 0,
        };
        self.buf.extend_from_slice(&set_id.to_be_bytes());
        self.buf.extend_from_slice(&[0, 0]);
        let count = if self.series { 1 } else { 2 };
        for i in 0..count {
            let t = self.templates[i];
            self.put_template(t);
            self.v9_count += 1;
        }
        if self.fill {
            // Template 259: one paddingOctets field of variable length.
            for v in [PADDING_ID, 1, PADDING_OCTETS, VARLEN] {
                self.buf.extend_from_slice(&v.to_be_bytes());
            }
            self.padding_announced = true;
        }
        let len = (self.buf.len() - start) as u16;
        self.buf[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }

    /// One template record (id, field count, field specifiers) at the end of the buffer.
    fn put_template(&mut self, t: TemplateDef) {
        self.buf.extend_from_slice(&t.id.to_be_bytes());
        self.buf
            .extend_from_slice(&(t.fields.len() as u16).to_be_bytes());
        for f in t.fields {
            let spec = f.spec();
            match self.protocol {
                Protocol::Ipfix => {
                    let pen = f.pen(self.pen);
                    let id = if pen != 0 { spec.id | 0x8000 } else { spec.id };
                    self.buf.extend_from_slice(&id.to_be_bytes());
                    self.buf.extend_from_slice(&spec.len.to_be_bytes());
                    if pen != 0 {
                        self.buf.extend_from_slice(&pen.to_be_bytes());
                    }
                }
                Protocol::NetflowV9 => {
                    self.buf.extend_from_slice(&spec.id.to_be_bytes());
                    self.buf.extend_from_slice(&v9_len(*f).to_be_bytes());
                }
            }
        }
    }

    /// Announces extended template `t` (IPFIX) in a template set of its own, unless it went
    /// out since the last template set; closes the open data set first.
    fn announce_extended(&mut self, t: TemplateDef) {
        if t.id < EXTENDED_BASE_ID || self.templates.iter().any(|b| b.id == t.id) {
            return;
        }
        let bit = 1u64 << (t.id - EXTENDED_BASE_ID);
        if self.extended_announced & bit != 0 {
            return;
        }
        self.close_set();
        let start = self.buf.len();
        self.buf.extend_from_slice(&2u16.to_be_bytes());
        self.buf.extend_from_slice(&[0, 0]);
        self.put_template(t);
        let len = (self.buf.len() - start) as u16;
        self.buf[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
        self.extended_announced |= bit;
    }

    fn close_set(&mut self) {
        if self.set_id != 0 {
            if self.protocol == Protocol::NetflowV9 {
                // RFC 3954: data FlowSets are padded to a 4-byte boundary.
                while !(self.buf.len() - self.set_start).is_multiple_of(4) {
                    self.buf.push(0);
                }
            }
            let len = (self.buf.len() - self.set_start) as u16;
            self.buf[self.set_start + 2..self.set_start + 4].copy_from_slice(&len.to_be_bytes());
            self.set_id = 0;
        }
    }

    /// Whether a message with data records is open.
    pub fn has_pending(&self) -> bool {
        self.msg_records > 0
    }

    /// Closes the open message (if it holds records) and passes it to `emit`.
    pub fn flush(&mut self, export_time_s: u32, emit: &mut dyn FnMut(&[u8])) {
        if self.msg_records == 0 {
            return;
        }
        self.close_message(export_time_s, emit);
    }

    /// Closes the open message, records or not, and passes it to `emit`.
    fn close_message(&mut self, export_time_s: u32, emit: &mut dyn FnMut(&[u8])) {
        self.close_set();
        match self.protocol {
            Protocol::Ipfix => {
                let len = self.buf.len() as u16;
                let seq = self.sequence;
                let h = &mut self.buf[..IPFIX_HEADER];
                h[0..2].copy_from_slice(&10u16.to_be_bytes());
                h[2..4].copy_from_slice(&len.to_be_bytes());
                h[4..8].copy_from_slice(&export_time_s.to_be_bytes());
                h[8..12].copy_from_slice(&seq.to_be_bytes());
                h[12..16].copy_from_slice(&self.domain.to_be_bytes());
                // RFC 7011: the sequence number counts data records, modulo 2^32.
                self.sequence = self.sequence.wrapping_add(self.msg_records);
            }
            Protocol::NetflowV9 => {
                // The header's clock is the packet clock, so that unix_secs*1000 - sysUptime
                // is exactly the virtual boot time the records' uptimes count from.
                let secs = self.clock_ms / 1000;
                let boot = self.boot_ms.unwrap_or(0);
                let uptime = (secs * 1000).saturating_sub(boot) as u32;
                let seq = self.sequence;
                let count = self.v9_count;
                let h = &mut self.buf[..V9_HEADER];
                h[0..2].copy_from_slice(&9u16.to_be_bytes());
                h[2..4].copy_from_slice(&count.to_be_bytes());
                h[4..8].copy_from_slice(&uptime.to_be_bytes());
                h[8..12].copy_from_slice(&(secs as u32).to_be_bytes());
                h[12..16].copy_from_slice(&seq.to_be_bytes());
                h[16..20].copy_from_slice(&self.domain.to_be_bytes());
                // RFC 3954: the sequence number counts export packets.
                self.sequence = self.sequence.wrapping_add(1);
            }
        }
        self.stats.messages += 1;
        self.messages_since_templates += 1;
        self.clock_ms = 0;
        emit(&self.buf);
        self.buf.clear();
        self.msg_records = 0;
    }

    /// Appends a flow record (its payload bytes are not exported), emitting the message
    /// first when the record does not fit.
    pub fn add_flow(
        &mut self,
        r: &FlowRecord<'_>,
        export_time_s: u32,
        emit: &mut dyn FnMut(&[u8]),
    ) {
        if self.protocol == Protocol::NetflowV9 {
            let (first_ms, last_ms) = (r.first_ns / 1_000_000, r.last_ns / 1_000_000);
            // v9 times are 32-bit milliseconds since the exporter's boot, which each message
            // header pins (unix_secs*1000 - sysUptime). trawl's virtual boot is a day before
            // the first record; a record outside the 49 days after it starts a new message
            // with a new boot (input files can jump years).
            let fits = |boot: u64| first_ms >= boot && last_ms - boot <= u64::from(u32::MAX);
            if !self.boot_ms.is_some_and(fits) {
                self.flush(export_time_s, emit);
                self.boot_ms = Some(first_ms.saturating_sub(86_400_000));
            }
            self.clock_ms = self.clock_ms.max(last_ms);
        }
        let family = match r.src_ip {
            IpAddr::V4(_) => Family::FlowV4,
            IpAddr::V6(_) => Family::FlowV6,
        };
        let mut t = if self.templates[0].family == family {
            self.templates[0]
        } else {
            self.templates[1]
        };
        if self.protocol == Protocol::Ipfix && !self.one_way {
            // Round-trip times, tunnel and enrichment travel in an extended template, only
            // with the records that have them.
            let mask = extensions(r);
            if mask != 0 {
                t = level_flow(self.level, mask, family == Family::FlowV6);
            }
        }
        self.add(t, export_time_s, emit, &mut |enc, out| {
            enc.put_flow(t, r, out)
        });
        if self.one_way && r.rev.packets > 0 {
            // The responder's direction, its sender as the source.
            let back = FlowRecord {
                src_ip: r.dst_ip,
                dst_ip: r.src_ip,
                src_port: r.dst_port,
                dst_port: r.src_port,
                src_mac: r.dst_mac,
                dst_mac: r.src_mac,
                fwd: r.rev,
                rev: r.fwd,
                ..*r
            };
            self.add(t, export_time_s, emit, &mut |enc, out| {
                enc.put_flow(t, &back, out)
            });
        }
    }

    /// Appends a series row.
    pub fn add_series(&mut self, row: &SeriesRow, export_time_s: u32, emit: &mut dyn FnMut(&[u8])) {
        let t = self.templates[0];
        self.add(t, export_time_s, emit, &mut |_, out| {
            put_series(t, row, out)
        });
    }

    fn add(
        &mut self,
        t: TemplateDef,
        export_time_s: u32,
        emit: &mut dyn FnMut(&[u8]),
        put: &mut dyn FnMut(&mut Self, &mut Vec<u8>),
    ) {
        // Whether templates already went out in a message of their own for this record.
        let mut templates_alone = false;
        loop {
            if self.buf.is_empty() {
                self.begin();
            }
            let mark = (self.buf.len(), self.set_id, self.set_start);
            let announced = self.extended_announced;
            self.announce_extended(t);
            let data_at = self.buf.len();
            if self.set_id != t.id {
                self.close_set();
                self.set_start = self.buf.len();
                self.set_id = t.id;
                self.buf.extend_from_slice(&t.id.to_be_bytes());
                self.buf.extend_from_slice(&[0, 0]);
            }
            let mut out = std::mem::take(&mut self.buf);
            put(self, &mut out);
            self.buf = out;
            // v9 pads data sets to 4 bytes: leave room for it. A record that does not fit
            // even alone after the templates is sent anyway (IP fragments it) rather than
            // lost.
            let fits = self.buf.len() + 3 <= self.max_message;
            if !fits && self.msg_records == 0 && !templates_alone && data_at > self.header_len() {
                // A fresh message whose templates (the session's, an extended one's
                // announcement) leave no room for the record: they go alone, the record in
                // the next message.
                self.buf.truncate(data_at);
                self.set_id = 0;
                templates_alone = true;
                self.close_message(export_time_s, emit);
                continue;
            }
            if fits || self.msg_records == 0 {
                self.msg_records += 1;
                self.v9_count = self.v9_count.wrapping_add(1);
                self.stats.records += 1;
                return;
            }
            // Does not fit: take it back out, send what is there, retry in a fresh message.
            self.buf.truncate(mark.0);
            self.set_id = mark.1;
            self.set_start = mark.2;
            self.extended_announced = announced;
            if self.fill {
                self.fill_message();
            }
            self.flush(export_time_s, emit);
        }
    }

    fn uptime(&mut self, ns: u64) -> u32 {
        let ms = ns / 1_000_000;
        let boot = self.boot_ms.unwrap_or(0);
        if ms < boot {
            self.stats.clamped_times += 1;
            return 0;
        }
        (ms - boot).min(u64::from(u32::MAX)) as u32
    }

    fn put_flow(&mut self, t: TemplateDef, r: &FlowRecord<'_>, out: &mut Vec<u8>) {
        // The record is written through a cursor into room made once: one length check per
        // record instead of one capacity check and copy call per field.
        let start = out.len();
        out.resize(start + MAX_FLOW_RECORD, 0);
        let mut c = Cursor {
            buf: &mut out[start..],
            pos: 0,
        };
        if self.protocol == Protocol::Ipfix && !self.series && !self.one_way {
            // trawl's own IPFIX biflow templates (each level's): straight-line code (the
            // field-by-field dispatch of `put_fields` was most of the exporter's CPU time),
            // then the extension groups after the level's base fields.
            put_ipfix_flow(r, &mut c, self.level);
            for &f in &t.fields[self.templates[0].fields.len()..] {
                put_flow_field(f, r, &mut c);
            }
        } else {
            self.put_fields(t, r, &mut c);
        }
        let len = c.pos;
        out.truncate(start + len);
    }

    /// A flow record field by field, as template `t` lists them (any template).
    fn put_fields(&mut self, t: TemplateDef, r: &FlowRecord<'_>, c: &mut Cursor<'_>) {
        let v9 = self.protocol == Protocol::NetflowV9;
        for &f in t.fields {
            match f {
                Field::SrcIpv4 | Field::SrcIpv6 => c.ip(r.src_ip),
                Field::DstIpv4 | Field::DstIpv6 => c.ip(r.dst_ip),
                Field::UptimeStart => {
                    let v = self.uptime(r.first_ns);
                    c.u32(v);
                }
                Field::UptimeEnd => {
                    let v = self.uptime(r.last_ns);
                    c.u32(v);
                }
                Field::TcpFlags(_) if v9 => c.put(r.fwd.tcp_flags | r.rev.tcp_flags),
                other => put_flow_field(other, r, c),
            }
        }
    }
}

/// A flow record in the field order of [`IPFIX_FLOW_V4`] / [`IPFIX_FLOW_V6`] (the address
/// family picks the template). Must match `put_fields` over those templates byte for byte:
/// the test `ipfix_fast_path_matches_the_templates` checks it.
#[inline(always)]
fn put_ipfix_flow(r: &FlowRecord<'_>, c: &mut Cursor<'_>, level: FeatureLevel) {
    // The fields `template::kept_by` keeps at `level`, in the order of `full`'s template.
    let (standard, full) = (level.has_standard(), level.is_full());
    c.ip(r.src_ip);
    c.ip(r.dst_ip);
    c.u16(r.src_port);
    c.u16(r.dst_port);
    c.put(r.proto);
    c.u16(r.vlan);
    if full {
        c.put_slice(&r.src_mac);
        c.put_slice(&r.dst_mac);
    }
    c.u64(ntp_from_ns(r.first_ns));
    c.u64(ntp_from_ns(r.last_ns));
    c.u64(r.first_ns / 1_000_000);
    c.u64(r.last_ns / 1_000_000);
    c.put(iana_end_reason(r.end_reason));
    c.put(r.end_reason as u8);
    for d in [&r.fwd, &r.rev] {
        c.u64(d.packets);
        c.u64(d.ip_bytes);
        c.u64(d.bytes);
        c.u16(u16::from(d.tcp_flags));
    }
    if standard {
        for d in [&r.fwd, &r.rev] {
            c.u32(d.fin);
            c.u32(d.rst);
            if full {
                c.u32(d.psh);
                c.u32(d.urg);
            }
        }
        for d in [&r.fwd, &r.rev] {
            c.u32(d.len_min);
            c.u32(d.len_max);
            c.u64(d.len_mean.to_bits());
            if full {
                c.u64(d.len_std.to_bits());
            }
            c.u64(d.iat_min_ns);
            c.u64(d.iat_max_ns);
            c.u64(d.iat_mean_ns.to_bits());
            if full {
                c.u64(d.iat_std_ns.to_bits());
            }
            c.u32(d.syn);
            c.u32(d.syn_ack);
            if full {
                c.u32(d.ece);
                c.u32(d.cwr);
            }
            c.u32(d.zero_window);
            c.u32(d.retransmissions);
        }
    }
    if full {
        put_flow_field(Field::FirstLengths, r, c);
        put_flow_field(Field::FirstGaps, r, c);
    }
    c.put_slice(r.community_id().as_bytes());
    put_flow_field(Field::ApplicationId, r, c);
    put_flow_field(Field::ApplicationName, r, c);
    put_flow_field(Field::ApplicationSource, r, c);
}

/// Largest flow record of any template: 60 fields of at most 16 bytes, the two arrays, the
/// Community ID and the application label (id, name of at most 10 bytes with its length
/// byte, source).
const MAX_FLOW_RECORD: usize = 60 * 16
    + 2
    + 10 * 4
    + 10 * 8
    + COMMUNITY_ID_LEN as usize
    + APPLICATION_ID_LEN as usize
    + 12
    + EXTENSIONS_LEN;

/// The extension groups at their longest: ten round-trip fields of at most 8 bytes, the
/// tunnel (1 + 16 + 16 + 4), the AS numbers and countries (4 + 4 + 2 + 2).
const EXTENSIONS_LEN: usize = 10 * 8 + 37 + 12;

/// Big-endian values at increasing offsets of a slice sized for the record.
impl Cursor<'_> {
    #[inline(always)]
    fn u16(&mut self, v: u16) {
        self.put_slice(&v.to_be_bytes());
    }
    #[inline(always)]
    fn u32(&mut self, v: u32) {
        self.put_slice(&v.to_be_bytes());
    }
    #[inline(always)]
    fn u64(&mut self, v: u64) {
        self.put_slice(&v.to_be_bytes());
    }
    #[inline(always)]
    fn ip(&mut self, ip: IpAddr) {
        match ip {
            IpAddr::V4(a) => self.put_slice(&a.octets()),
            IpAddr::V6(a) => self.put_slice(&a.octets()),
        }
    }
}

/// `ns` since the Unix epoch as an NTP-format dateTimeNanoseconds. The fraction is rounded up
/// so that a decoder rounding down gets the nanoseconds back exactly.
pub fn ntp_from_ns(ns: u64) -> u64 {
    let secs = ns / 1_000_000_000 + NTP_UNIX_OFFSET;
    let rem = ns % 1_000_000_000;
    // rem < 2^30, so rem << 32 fits in 64 bits: no 128-bit division.
    let frac = (rem << 32).div_ceil(1_000_000_000);
    (secs << 32) | frac
}

/// The inverse of [`ntp_from_ns`] (NTP times before 1970 give 0).
pub fn ns_from_ntp(ntp: u64) -> u64 {
    let secs = (ntp >> 32).saturating_sub(NTP_UNIX_OFFSET);
    let frac = ntp & 0xffff_ffff;
    // frac < 2^32 and 10^9 < 2^30: the product fits in 64 bits.
    secs * 1_000_000_000 + ((frac * 1_000_000_000) >> 32)
}

/// IANA flowEndReason for trawl's end reason (RFC 7011 / IANA registry values: 1 idle
/// timeout, 2 active timeout, 3 end of flow detected, 4 forced end, 5 lack of resources).
pub fn iana_end_reason(r: EndReason) -> u8 {
    match r {
        EndReason::Idle => 1,
        EndReason::Active => 2,
        EndReason::Fin | EndReason::Rst => 3,
        EndReason::End => 4,
        EndReason::Pressure => 5,
    }
}

#[inline(always)]
fn dir<'r>(r: &'r FlowRecord<'_>, d: Dir) -> &'r DirectionRecord {
    match d {
        Dir::Fwd => &r.fwd,
        Dir::Rev => &r.rev,
    }
}

#[inline(always)]
fn put_flow_field(f: Field, r: &FlowRecord<'_>, out: &mut Cursor<'_>) {
    match f {
        Field::SrcPort => out.u16(r.src_port),
        Field::DstPort => out.put_slice(&r.dst_port.to_be_bytes()),
        Field::Proto => out.put(r.proto),
        Field::Vlan => out.put_slice(&r.vlan.to_be_bytes()),
        Field::SrcMac => out.put_slice(&r.src_mac),
        Field::DstMac => out.put_slice(&r.dst_mac),
        Field::StartNs => out.put_slice(&ntp_from_ns(r.first_ns).to_be_bytes()),
        Field::EndNs => out.put_slice(&ntp_from_ns(r.last_ns).to_be_bytes()),
        Field::StartMs => out.put_slice(&(r.first_ns / 1_000_000).to_be_bytes()),
        Field::EndMs => out.put_slice(&(r.last_ns / 1_000_000).to_be_bytes()),
        Field::FlowEndReason => out.put(iana_end_reason(r.end_reason)),
        Field::TrawlEndReason => out.put(r.end_reason as u8),
        Field::Packets(d) => out.put_slice(&dir(r, d).packets.to_be_bytes()),
        Field::IpBytes(d) => out.put_slice(&dir(r, d).ip_bytes.to_be_bytes()),
        Field::FrameBytes(d) => out.put_slice(&dir(r, d).bytes.to_be_bytes()),
        Field::V9OutPackets => out.put_slice(&r.rev.packets.to_be_bytes()),
        Field::V9OutBytes => out.put_slice(&r.rev.ip_bytes.to_be_bytes()),
        Field::TcpFlags(d) => out.u16(u16::from(dir(r, d).tcp_flags)),
        Field::Fin(d) => out.put_slice(&dir(r, d).fin.to_be_bytes()),
        Field::Rst(d) => out.put_slice(&dir(r, d).rst.to_be_bytes()),
        Field::Psh(d) => out.put_slice(&dir(r, d).psh.to_be_bytes()),
        Field::Urg(d) => out.put_slice(&dir(r, d).urg.to_be_bytes()),
        Field::LenMin(d) => out.put_slice(&dir(r, d).len_min.to_be_bytes()),
        Field::LenMax(d) => out.put_slice(&dir(r, d).len_max.to_be_bytes()),
        Field::LenMean(d) => out.put_slice(&dir(r, d).len_mean.to_be_bytes()),
        Field::LenStd(d) => out.put_slice(&dir(r, d).len_std.to_be_bytes()),
        Field::IatMin(d) => out.put_slice(&dir(r, d).iat_min_ns.to_be_bytes()),
        Field::IatMax(d) => out.put_slice(&dir(r, d).iat_max_ns.to_be_bytes()),
        Field::IatMean(d) => out.put_slice(&dir(r, d).iat_mean_ns.to_be_bytes()),
        Field::IatStd(d) => out.put_slice(&dir(r, d).iat_std_ns.to_be_bytes()),
        Field::Syn(d) => out.put_slice(&dir(r, d).syn.to_be_bytes()),
        Field::SynAck(d) => out.put_slice(&dir(r, d).syn_ack.to_be_bytes()),
        Field::Ece(d) => out.put_slice(&dir(r, d).ece.to_be_bytes()),
        Field::Cwr(d) => out.put_slice(&dir(r, d).cwr.to_be_bytes()),
        Field::ZeroWindow(d) => out.put_slice(&dir(r, d).zero_window.to_be_bytes()),
        Field::Retrans(d) => out.put_slice(&dir(r, d).retransmissions.to_be_bytes()),
        Field::FirstLengths => {
            let n = r.first_count.min(r.first_lengths.len());
            // Variable-length field, short form: one length byte (at most 40 here).
            out.put((n * 4) as u8);
            for &l in &r.first_lengths[..n] {
                out.u32(l.clamp(i32::MIN.into(), i32::MAX.into()) as i32 as u32);
            }
        }
        Field::FirstGaps => {
            let n = r.first_count.min(r.first_iats_ns.len());
            out.put((n * 8) as u8);
            for &g in &r.first_iats_ns[..n] {
                out.put_slice(&g.to_be_bytes());
            }
        }
        // Computed from the key when the record is written, not carried by the meter.
        Field::CommunityId => out.put_slice(r.community_id().as_bytes()),
        Field::ApplicationId => match r.app {
            Some(l) => out.put_slice(&[APPLICATION_ENGINE, 0, l.app as u8]),
            None => out.put_slice(&[0; APPLICATION_ID_LEN as usize]),
        },
        Field::ApplicationName => {
            let name = r.app.map_or("", |l| l.app.name());
            out.put(name.len() as u8);
            out.put_slice(name.as_bytes());
        }
        // 0 without a label, else 1 + `AppSource` (1 payload, 2 port).
        Field::ApplicationSource => out.put(r.app.map_or(0, |l| l.source as u8 + 1)),
        Field::RttHandshake(d) => out.u64(dir(r, d).rtt_handshake_ns.unwrap_or(RTT_NONE)),
        Field::RttSamples(d) => out.u32(dir(r, d).rtt_samples),
        Field::RttMin(d) => out.u64(dir(r, d).rtt_min_ns),
        Field::RttMax(d) => out.u64(dir(r, d).rtt_max_ns),
        Field::RttMean(d) => out.u64(dir(r, d).rtt_mean_ns.to_bits()),
        Field::TunnelType => out.put(r.tunnel.kind as u8),
        // Kept as the meter keeps them: IPv4 as IPv4-mapped IPv6.
        Field::TunnelSrc => out.put_slice(&r.tunnel.src_ip),
        Field::TunnelDst => out.put_slice(&r.tunnel.dst_ip),
        Field::TunnelId => out.u32(r.tunnel.id),
        Field::SrcAs => out.u32(r.extra.src_as),
        Field::DstAs => out.u32(r.extra.dst_as),
        Field::SrcCountry => out.put_slice(&r.extra.src_country),
        Field::DstCountry => out.put_slice(&r.extra.dst_country),
        // Not in any flow template trawl writes; zeros of the element's length keep the
        // record aligned with its template should one ever list them.
        other => {
            let len = other.spec().len;
            if len != VARLEN {
                out.pos += usize::from(len);
            } else {
                out.put(0);
            }
        }
    }
}

/// The extension groups ([`ext`]) a record fills: the template it travels in.
pub fn extensions(r: &FlowRecord<'_>) -> u8 {
    let timed = |d: &DirectionRecord| d.rtt_handshake_ns.is_some() || d.rtt_samples != 0;
    let mut mask = 0;
    if timed(&r.fwd) || timed(&r.rev) {
        mask |= ext::RTT;
    }
    if r.tunnel.is_some() {
        mask |= ext::TUNNEL;
    }
    if r.extra.is_enriched() {
        mask |= ext::GEO;
    }
    mask
}

fn put_series(t: TemplateDef, r: &SeriesRow, out: &mut Vec<u8>) {
    for &f in t.fields {
        let v = match f {
            Field::SeriesSecond => {
                out.extend_from_slice(&(r.second.min(u64::from(u32::MAX)) as u32).to_be_bytes());
                continue;
            }
            Field::SeriesPackets => r.packets,
            Field::SeriesBytes => r.bytes,
            Field::SeriesActiveFlows => r.active_flows,
            Field::SeriesNewFlows => r.new_flows,
            Field::SeriesInPackets => r.in_packets,
            Field::SeriesInBytes => r.in_bytes,
            Field::SeriesOutPackets => r.out_packets,
            Field::SeriesOutBytes => r.out_bytes,
            _ => 0,
        };
        out.extend_from_slice(&v.to_be_bytes());
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn ntp_round_trip_is_exact() {
        for ns in [
            0u64,
            1,
            999_999_999,
            1_700_000_000_123_456_789,
            1_524_000_000_999_999_999,
        ] {
            assert_eq!(ns_from_ntp(ntp_from_ns(ns)), ns, "{ns}");
        }
        // 1970-01-01 is NTP second 2208988800.
        assert_eq!(ntp_from_ns(0) >> 32, NTP_UNIX_OFFSET);
    }

    #[test]
    fn ntp_conversions_match_the_exact_128_bit_arithmetic() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..100_000u64 {
            trawl_testkit::xorshift(&mut x);
            let ns = if i < 1000 { i * 999_999 } else { x >> 2 };
            let rem = ns % 1_000_000_000;
            let frac = ((rem as u128) << 32).div_ceil(1_000_000_000) as u64;
            assert_eq!(ntp_from_ns(ns) & 0xffff_ffff, frac, "{ns}");
            let f = x & 0xffff_ffff;
            let ntp = ((NTP_UNIX_OFFSET + 5) << 32) | f;
            let exact = 5 * 1_000_000_000 + ((u128::from(f) * 1_000_000_000) >> 32) as u64;
            assert_eq!(ns_from_ntp(ntp), exact, "{f}");
        }
    }

    /// Records with every field set to distinct values, IPv4 and IPv6, 0 to 10 first-packet
    /// entries, every end reason.
    pub(crate) fn varied_records() -> Vec<FlowRecord<'static>> {
        let mut out = Vec::new();
        for i in 0..48u64 {
            let mut r = crate::decode::empty_record();
            r.src_ip = if i % 2 == 0 {
                IpAddr::from([10, 0, i as u8, 1])
            } else {
                IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, i as u16, 1])
            };
            r.dst_ip = if i % 2 == 0 {
                IpAddr::from([192, 0, 2, i as u8])
            } else {
                IpAddr::from([0x2001, 0xdb8, 1, 0, 0, 0, 0, i as u16])
            };
            r.src_port = 1000 + i as u16;
            r.dst_port = 443;
            r.proto = 6;
            r.vlan = 100 + i as u16;
            r.src_mac = [2, 0, 0, 0, 0, i as u8];
            r.dst_mac = [2, 0, 0, 0, 1, i as u8];
            r.first_ns = 1_700_000_000_123_456_789 + i * 7_777_777;
            r.last_ns = r.first_ns + i * 1_234_567_891;
            r.end_reason = EndReason::ALL[i as usize % EndReason::COUNT];
            for (k, d) in [&mut r.fwd, &mut r.rev].into_iter().enumerate() {
                let b = i * 100 + k as u64 * 50;
                d.packets = b + 1;
                d.bytes = b + 2;
                d.ip_bytes = b + 3;
                d.len_min = b as u32 + 4;
                d.len_max = b as u32 + 5;
                d.len_mean = b as f64 + 6.5;
                d.len_std = b as f64 + 7.25;
                d.iat_min_ns = b + 8;
                d.iat_max_ns = b + 9;
                d.iat_mean_ns = b as f64 + 10.5;
                d.iat_std_ns = b as f64 + 11.75;
                d.syn = b as u32 + 12;
                d.syn_ack = b as u32 + 13;
                d.fin = b as u32 + 14;
                d.rst = b as u32 + 15;
                d.psh = b as u32 + 16;
                d.urg = b as u32 + 17;
                d.ece = b as u32 + 18;
                d.cwr = b as u32 + 19;
                d.tcp_flags = (b as u8).wrapping_add(20);
                d.zero_window = b as u32 + 21;
                d.retransmissions = b as u32 + 22;
                // Round-trip times on some records, a handshake without samples on others.
                if i % 4 == 1 {
                    d.rtt_handshake_ns = (k == 0 || i % 8 == 1).then_some(b * 1000);
                    d.rtt_samples = b as u32 % 5;
                    if d.rtt_samples > 0 {
                        d.rtt_min_ns = b + 23;
                        d.rtt_max_ns = b + 24_000;
                        d.rtt_mean_ns = b as f64 + 25.125;
                    }
                }
            }
            if i % 3 == 1 {
                let v4 = i % 2 == 0;
                use trawl_flow::TunnelType as T;
                let kinds = [
                    T::Gre,
                    T::Vxlan,
                    T::IpIp,
                    T::GtpU,
                    T::Geneve,
                    T::Erspan,
                    T::Teredo,
                ];
                let addr = |last: u8| {
                    if v4 {
                        std::net::Ipv4Addr::new(198, 51, 100, last)
                            .to_ipv6_mapped()
                            .octets()
                    } else {
                        [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last]
                    }
                };
                r.tunnel = trawl_flow::Tunnel {
                    kind: kinds[i as usize % kinds.len()],
                    ip_version: if v4 { 4 } else { 6 },
                    id: i as u32 * 1_000_003,
                    src_ip: addr(i as u8),
                    dst_ip: addr(200),
                };
            }
            if i % 5 >= 3 {
                r.extra.src_as = 64_496 + i as u32;
                r.extra.dst_as = if i % 5 == 3 { 0 } else { 4_200_000_000 };
                r.extra.src_country = *b"DE";
                r.extra.dst_country = if i % 5 == 3 { [0; 2] } else { *b"US" };
            }
            r.first_count = i as usize % 11;
            for k in 0..r.first_count {
                r.first_lengths[k] = if k % 2 == 0 { 60 + k as i64 } else { -1500 };
                r.first_iats_ns[k] = k as i64 * 1001 + i as i64;
            }
            r.app = match i % 3 {
                0 => None,
                1 => Some(trawl_flow::AppLabel {
                    app: trawl_flow::App::ALL[i as usize % trawl_flow::App::ALL.len()],
                    source: trawl_flow::AppSource::Payload,
                }),
                _ => Some(trawl_flow::AppLabel {
                    app: trawl_flow::App::Tls,
                    source: trawl_flow::AppSource::Port,
                }),
            };
            out.push(r);
        }
        out
    }

    #[test]
    fn ipfix_fast_path_matches_the_templates() {
        for level in [
            FeatureLevel::Full,
            FeatureLevel::Standard,
            FeatureLevel::Minimal,
        ] {
            let mut enc =
                MessageEncoder::flows(Protocol::Ipfix, 1, 32473, 1472, TemplateRefresh::Once)
                    .with_level(level);
            let mut masks = std::collections::BTreeSet::new();
            for r in varied_records() {
                let mask = extensions(&r);
                masks.insert(mask);
                let t = level_flow(level, mask, r.src_ip.is_ipv6());
                let mut fast = Vec::new();
                enc.put_flow(t, &r, &mut fast);
                let mut generic = vec![0u8; MAX_FLOW_RECORD];
                let mut c = Cursor {
                    buf: &mut generic,
                    pos: 0,
                };
                enc.put_fields(t, &r, &mut c);
                let len = c.pos;
                generic.truncate(len);
                assert_eq!(fast, generic, "{level}: record {r:?}");
            }
            assert_eq!(
                masks.len(),
                usize::from(ext::ALL) + 1,
                "every template used"
            );
        }
    }

    /// The flow record ends with trawl's communityId element (the spec's first vector, TCP
    /// 1.2.3.4:1122 -> 5.6.7.8:3344, as its 30 bytes of text), then the application label:
    /// applicationId, applicationName, applicationSource, all empty without a label.
    #[test]
    fn ipfix_flow_record_ends_with_the_community_id_and_the_app_label() {
        let mut enc = MessageEncoder::flows(Protocol::Ipfix, 1, 32473, 1472, TemplateRefresh::Once);
        let mut r = varied_records()[0];
        (r.src_ip, r.dst_ip) = ("1.2.3.4".parse().unwrap(), "5.6.7.8".parse().unwrap());
        (r.src_port, r.dst_port, r.proto) = (1122, 3344, 6);
        let mut out = Vec::new();
        enc.put_flow(IPFIX_FLOW_V4, &r, &mut out);
        assert!(out.ends_with(b"1:wCb3OG7yAFWelaUydu0D+125CLM=\0\0\0\0\0"));
        let names: Vec<&str> = IPFIX_FLOW_V4
            .fields
            .iter()
            .rev()
            .take(4)
            .map(|f| f.spec().name)
            .collect();
        assert_eq!(
            names,
            [
                "applicationSource",
                "applicationName",
                "applicationId",
                "communityId"
            ]
        );
        r.app = Some(trawl_flow::AppLabel {
            app: trawl_flow::App::Http,
            source: trawl_flow::AppSource::Port,
        });
        out.clear();
        enc.put_flow(IPFIX_FLOW_V4, &r, &mut out);
        assert!(out.ends_with(b"=\x06\x00\x01\x04http\x02"));
    }

    #[test]
    fn filled_messages_are_exactly_the_segment_size_and_padding_stays_below_a_record() {
        let records = varied_records();
        for max in [1472usize, 1500, 2000, 8972] {
            let mut enc =
                MessageEncoder::flows(Protocol::Ipfix, 1, 32473, max, TemplateRefresh::Once);
            enc.set_fill(true);
            let mut messages: Vec<Vec<u8>> = Vec::new();
            for _ in 0..20 {
                for r in &records {
                    enc.add_flow(r, 1, &mut |m: &[u8]| messages.push(m.to_vec()));
                }
            }
            enc.flush(1, &mut |m: &[u8]| messages.push(m.to_vec()));
            let last = messages.len() - 1;
            let mut decoded = 0;
            let mut padding_sets = 0;
            let mut dec = crate::Decoder::new(crate::DecoderConfig::default());
            let from = "127.0.0.1:1".parse().unwrap();
            for (i, m) in messages.iter().enumerate() {
                assert!(m.len() <= max);
                assert_eq!(usize::from(u16::from_be_bytes([m[2], m[3]])), m.len());
                // Every message but the last is filled; data-set padding stays below 4 bytes.
                assert!(
                    i == last || m.len() == max,
                    "message {i}: {} bytes",
                    m.len()
                );
                let mut off = 16;
                while off + 4 <= m.len() {
                    let (id, len) = (
                        u16::from_be_bytes([m[off], m[off + 1]]),
                        usize::from(u16::from_be_bytes([m[off + 2], m[off + 3]])),
                    );
                    if id == PADDING_ID {
                        padding_sets += 1;
                        assert_eq!(off + len, m.len(), "the padding set ends the message");
                    }
                    off += len;
                }
                assert!(m.len() - off < 4);
                let (n, err) = dec.decode(from, m, &mut |_, _| {});
                assert_eq!(err, None);
                decoded += n;
            }
            assert_eq!(decoded, 20 * records.len(), "max {max}");
            assert!(enc.stats().padded > 0 && padding_sets > 0, "max {max}");
            assert_eq!(dec.stats().total_errors(), 0);
        }
    }
}
