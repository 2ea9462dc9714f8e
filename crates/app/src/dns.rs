//! DNS messages (RFC 1035 and the record types logs need), over UDP and over TCP with its 2-byte
//! length prefix ([`TcpFramer`]), and a request/response [`Joiner`].
//!
//! Names are followed through compression pointers with a hop limit and a 255-byte bound, and
//! never outside the message: a loop, a pointer past the end, a reserved label type or an
//! overlong name is an [`Error::Dns`] naming the offset and field, counted by the caller
//! ([`DnsStats`]) — the message is kept with what was read before the fault
//! ([`Message::error`]).

use std::collections::VecDeque;
use std::hash::Hash;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::{DnsErrorKind, Error};
use trawl_flow::hash::SeededFxMap;

/// Length of the fixed header.
pub const HEADER_LEN: usize = 12;
/// Most compression pointers followed in one name (a name has at most 127 labels, so a valid
/// name never needs more).
pub const MAX_POINTER_HOPS: usize = 127;
/// Longest name in wire form (RFC 1035 §3.1).
pub const MAX_NAME_LEN: usize = 255;

/// The header's flag word, split.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// QR: a response.
    pub response: bool,
    /// Opcode (0 query, 4 notify, 5 update, ...).
    pub opcode: u8,
    /// AA: authoritative answer.
    pub aa: bool,
    /// TC: truncated.
    pub tc: bool,
    /// RD: recursion desired.
    pub rd: bool,
    /// RA: recursion available.
    pub ra: bool,
    /// Response code (low 4 bits; EDNS extended codes are not merged).
    pub rcode: u8,
}

impl Flags {
    fn from_word(w: u16) -> Flags {
        Flags {
            response: w & 0x8000 != 0,
            opcode: ((w >> 11) & 0xF) as u8,
            aa: w & 0x0400 != 0,
            tc: w & 0x0200 != 0,
            rd: w & 0x0100 != 0,
            ra: w & 0x0080 != 0,
            rcode: (w & 0xF) as u8,
        }
    }
}

/// One entry of the question section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// Name asked for, dotted as [`read_name`] renders it; `<Root>` for the root.
    pub name: String,
    /// QTYPE.
    pub qtype: u16,
    /// QCLASS (the top bit is mDNS's unicast-response flag, kept as is).
    pub qclass: u16,
}

/// Record data of the types logs show; any other type is kept as its type and length.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RData {
    /// A: an IPv4 address.
    A(Ipv4Addr),
    /// AAAA: an IPv6 address.
    Aaaa(Ipv6Addr),
    /// CNAME: the canonical name.
    Cname(String),
    /// NS: a name server.
    Ns(String),
    /// PTR: the pointed-to name.
    Ptr(String),
    /// MX: preference and exchange.
    Mx {
        /// Lower is preferred.
        preference: u16,
        /// Mail exchanger.
        exchange: String,
    },
    /// TXT: the character strings.
    Txt(Vec<Vec<u8>>),
    /// SOA: the zone's start of authority.
    Soa {
        /// Primary name server.
        mname: String,
        /// Responsible mailbox.
        rname: String,
        /// Zone serial.
        serial: u32,
        /// Refresh interval (s).
        refresh: u32,
        /// Retry interval (s).
        retry: u32,
        /// Expire limit (s).
        expire: u32,
        /// Negative-caching TTL (s).
        minimum: u32,
    },
    /// SRV: a service location.
    Srv {
        /// Lower is preferred.
        priority: u16,
        /// Weight among equal priorities.
        weight: u16,
        /// Service port.
        port: u16,
        /// Host.
        target: String,
    },
    /// Any other type (or a known type whose data has the wrong length): its RDLENGTH.
    Other {
        /// RDLENGTH.
        len: u16,
    },
}

/// A resource record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Owner name.
    pub name: String,
    /// TYPE.
    pub rtype: u16,
    /// CLASS (for OPT: the UDP payload size).
    pub class: u16,
    /// TTL in seconds (for OPT: extended rcode and flags).
    pub ttl: u32,
    /// The data.
    pub data: RData,
}

impl Record {
    /// The record's data as the `answers` of a log line show it (docs/specs/logs.md): the
    /// address for A/AAAA, the name for CNAME/NS/PTR, `PREF EXCHANGE` for MX,
    /// `PRIO WEIGHT PORT TARGET` for SRV, the seven SOA fields, the TXT strings (lossy UTF-8)
    /// joined by spaces, else `TYPE<n> <len> bytes`.
    pub fn data_text(&self) -> String {
        match &self.data {
            RData::A(a) => a.to_string(),
            RData::Aaaa(a) => a.to_string(),
            RData::Cname(n) | RData::Ns(n) | RData::Ptr(n) => n.clone(),
            RData::Mx {
                preference,
                exchange,
            } => format!("{preference} {exchange}"),
            RData::Srv {
                priority,
                weight,
                port,
                target,
            } => format!("{priority} {weight} {port} {target}"),
            RData::Soa {
                mname,
                rname,
                serial,
                refresh,
                retry,
                expire,
                minimum,
            } => format!("{mname} {rname} {serial} {refresh} {retry} {expire} {minimum}"),
            RData::Txt(strings) => strings
                .iter()
                .map(|t| String::from_utf8_lossy(t))
                .collect::<Vec<_>>()
                .join(" "),
            RData::Other { len } => format!("TYPE{} {len} bytes", self.rtype),
        }
    }
}

/// Which section a record is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Section {
    /// Answer.
    Answer,
    /// Authority.
    Authority,
    /// Additional.
    Additional,
}

/// A parsed DNS message: as much as could be read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// Transaction ID.
    pub id: u16,
    /// Header flags.
    pub flags: Flags,
    /// Section counts as the header states them.
    pub counts: [u16; 4],
    /// Questions read.
    pub questions: Vec<Question>,
    /// Answer records read.
    pub answers: Vec<Record>,
    /// Authority records read.
    pub authority: Vec<Record>,
    /// Additional records read.
    pub additional: Vec<Record>,
    /// The fault that stopped reading, if any (the sections above hold what came before it).
    pub error: Option<Error>,
}

impl Message {
    /// Every record of the three sections, in message order, with its section.
    pub fn records(&self) -> impl Iterator<Item = (Section, &Record)> {
        let a = self.answers.iter().map(|r| (Section::Answer, r));
        let b = self.authority.iter().map(|r| (Section::Authority, r));
        let c = self.additional.iter().map(|r| (Section::Additional, r));
        a.chain(b).chain(c)
    }
}

/// Parses one DNS message (a UDP payload, or one message of a TCP stream without its length).
///
/// # Errors
/// [`Error::Dns`] with [`DnsErrorKind::Truncated`] when even the 12-byte header is not there.
/// Faults after the header are not errors: they end up in [`Message::error`].
pub fn parse(msg: &[u8]) -> Result<Message, Error> {
    if msg.len() < HEADER_LEN {
        return Err(dns_err(msg.len(), "header", DnsErrorKind::Truncated));
    }
    let word = |i: usize| u16::from_be_bytes([msg[i], msg[i + 1]]);
    let mut m = Message {
        id: word(0),
        flags: Flags::from_word(word(2)),
        counts: [word(4), word(6), word(8), word(10)],
        ..Message::default()
    };
    let mut r = Reader {
        msg,
        pos: HEADER_LEN,
    };
    if let Err(e) = read_sections(&mut r, &mut m) {
        m.error = Some(e);
    }
    Ok(m)
}

fn read_sections(r: &mut Reader<'_>, m: &mut Message) -> Result<(), Error> {
    for _ in 0..m.counts[0] {
        let name = r.name("qname")?;
        let qtype = r.u16("qtype")?;
        let qclass = r.u16("qclass")?;
        m.questions.push(Question {
            name,
            qtype,
            qclass,
        });
    }
    for (section, count) in [
        (&mut m.answers, m.counts[1]),
        (&mut m.authority, m.counts[2]),
        (&mut m.additional, m.counts[3]),
    ] {
        for _ in 0..count {
            section.push(r.record()?);
        }
    }
    Ok(())
}

fn dns_err(offset: usize, field: &'static str, kind: DnsErrorKind) -> Error {
    Error::Dns {
        offset,
        field,
        kind,
    }
}

/// A cursor over one message; names may jump backwards inside it but never leave it.
struct Reader<'a> {
    msg: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&[u8], Error> {
        let Some(bytes) = self.msg.get(self.pos..self.pos + n) else {
            return Err(dns_err(self.pos, field, DnsErrorKind::Truncated));
        };
        self.pos += n;
        Ok(bytes)
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, Error> {
        let b = self.take(2, field)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, Error> {
        let b = self.take(4, field)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a name at the cursor (advancing past its in-place part).
    fn name(&mut self, field: &'static str) -> Result<String, Error> {
        let (name, end) = read_name(self.msg, self.pos, field)?;
        self.pos = end;
        Ok(name)
    }

    fn record(&mut self) -> Result<Record, Error> {
        let name = self.name("rr.name")?;
        let rtype = self.u16("rr.type")?;
        let class = self.u16("rr.class")?;
        let ttl = self.u32("rr.ttl")?;
        let len = self.u16("rr.rdlength")?;
        let start = self.pos;
        self.take(usize::from(len), "rr.rdata")?;
        let data = rdata(self.msg, start, len, rtype)?;
        Ok(Record {
            name,
            rtype,
            class,
            ttl,
            data,
        })
    }
}

/// Decodes record data of `rtype` at `start..start+len` (inside `msg`, already checked).
fn rdata(msg: &[u8], start: usize, len: u16, rtype: u16) -> Result<RData, Error> {
    let end = start + usize::from(len);
    let data = &msg[start..end];
    // A name inside record data must end inside it, and fixed fields must be there.
    let name_at = |off: usize, field: &'static str| -> Result<(String, usize), Error> {
        let (name, next) = read_name(msg, off, field)?;
        if next > end {
            return Err(dns_err(off, field, DnsErrorKind::Truncated));
        }
        Ok((name, next))
    };
    let u16_at = |off: usize, field: &'static str| -> Result<u16, Error> {
        match msg.get(off..off + 2).filter(|_| off + 2 <= end) {
            Some(b) => Ok(u16::from_be_bytes([b[0], b[1]])),
            None => Err(dns_err(off, field, DnsErrorKind::Truncated)),
        }
    };
    Ok(match rtype {
        // No data: UPDATE's prerequisites and deletions (RFC 2136), whatever the type.
        _ if len == 0 => RData::Other { len },
        1 if len == 4 => RData::A(Ipv4Addr::new(data[0], data[1], data[2], data[3])),
        28 if len == 16 => RData::Aaaa(Ipv6Addr::from(
            <[u8; 16]>::try_from(data).expect("16 bytes"),
        )),
        5 => RData::Cname(name_at(start, "cname")?.0),
        2 => RData::Ns(name_at(start, "ns")?.0),
        12 => RData::Ptr(name_at(start, "ptr")?.0),
        15 => {
            let preference = u16_at(start, "mx.preference")?;
            RData::Mx {
                preference,
                exchange: name_at(start + 2, "mx.exchange")?.0,
            }
        }
        16 => RData::Txt(txt_strings(data, start)?),
        6 => soa(msg, start, end, &name_at)?,
        33 => RData::Srv {
            priority: u16_at(start, "srv.priority")?,
            weight: u16_at(start + 2, "srv.weight")?,
            port: u16_at(start + 4, "srv.port")?,
            target: name_at(start + 6, "srv.target")?.0,
        },
        _ => RData::Other { len },
    })
}

fn soa(
    msg: &[u8],
    start: usize,
    end: usize,
    name_at: &dyn Fn(usize, &'static str) -> Result<(String, usize), Error>,
) -> Result<RData, Error> {
    let (mname, next) = name_at(start, "soa.mname")?;
    let (rname, next) = name_at(next, "soa.rname")?;
    if next + 20 > end {
        return Err(dns_err(next, "soa.serial", DnsErrorKind::Truncated));
    }
    let n = |i: usize| {
        u32::from_be_bytes([
            msg[next + 4 * i],
            msg[next + 4 * i + 1],
            msg[next + 4 * i + 2],
            msg[next + 4 * i + 3],
        ])
    };
    Ok(RData::Soa {
        mname,
        rname,
        serial: n(0),
        refresh: n(1),
        retry: n(2),
        expire: n(3),
        minimum: n(4),
    })
}

fn txt_strings(data: &[u8], start: usize) -> Result<Vec<Vec<u8>>, Error> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < data.len() {
        let n = usize::from(data[i]);
        let Some(s) = data.get(i + 1..i + 1 + n) else {
            return Err(dns_err(start + i, "txt", DnsErrorKind::Truncated));
        };
        out.push(s.to_vec());
        i += 1 + n;
    }
    Ok(out)
}

/// Reads the name at `start`: its text, and the offset just past its in-place part (after the
/// first pointer, or the root label).
///
/// Rendering (as tshark shows names): labels joined by dots, `<Root>` for the root; bytes
/// outside printable ASCII and the backslash as `\DDD` (decimal, RFC 4343), so a log line
/// cannot be forged with control characters. A dot inside a label (DNS-SD instance names such
/// as `domex.nps.edu._rfb._tcp.local`) is kept as is, as tshark and Zeek show it.
pub fn read_name(msg: &[u8], start: usize, field: &'static str) -> Result<(String, usize), Error> {
    let mut out = String::new();
    let mut pos = start;
    let mut end = None;
    let mut hops = 0;
    let mut wire_len = 1;
    loop {
        let Some(&len) = msg.get(pos) else {
            return Err(dns_err(pos, field, DnsErrorKind::Truncated));
        };
        match len & 0xC0 {
            0x00 if len == 0 => break,
            0x00 => {
                let n = usize::from(len);
                let Some(label) = msg.get(pos + 1..pos + 1 + n) else {
                    return Err(dns_err(pos, field, DnsErrorKind::Truncated));
                };
                wire_len += n + 1;
                if wire_len > MAX_NAME_LEN {
                    return Err(dns_err(pos, field, DnsErrorKind::NameTooLong));
                }
                if !out.is_empty() {
                    out.push('.');
                }
                push_label(&mut out, label);
                pos += 1 + n;
            }
            0xC0 => {
                let Some(&low) = msg.get(pos + 1) else {
                    return Err(dns_err(pos, field, DnsErrorKind::Truncated));
                };
                let target = usize::from(u16::from_be_bytes([len & 0x3F, low]));
                end.get_or_insert(pos + 2);
                hops += 1;
                if hops > MAX_POINTER_HOPS {
                    return Err(dns_err(pos, field, DnsErrorKind::PointerLoop));
                }
                if target >= msg.len() {
                    return Err(dns_err(pos, field, DnsErrorKind::PointerOutOfBounds));
                }
                pos = target;
            }
            _ => return Err(dns_err(pos, field, DnsErrorKind::BadLabelType)),
        }
    }
    if out.is_empty() {
        out.push_str("<Root>");
    }
    Ok((out, end.unwrap_or(pos + 1)))
}

fn push_label(out: &mut String, label: &[u8]) {
    for &b in label {
        if b.is_ascii_graphic() && b != b'\\' || b == b' ' {
            out.push(b as char);
        } else {
            out.push_str(&format!("\\{b:03}"));
        }
    }
}

/// Splits an in-order TCP byte stream (one direction) into DNS messages: a 2-byte length, then
/// that many bytes. Holds at most one message (64 KiB + 2) of the stream.
#[derive(Debug, Default)]
pub struct TcpFramer {
    buf: Vec<u8>,
}

impl TcpFramer {
    /// A framer at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends `bytes` and calls `each` with every message completed (without its length).
    pub fn push(&mut self, mut bytes: &[u8], mut each: impl FnMut(&[u8])) {
        while !bytes.is_empty() {
            let need = match self.buf.len() {
                0 | 1 => 2 - self.buf.len(),
                _ => {
                    2 + usize::from(u16::from_be_bytes([self.buf[0], self.buf[1]])) - self.buf.len()
                }
            };
            let n = need.min(bytes.len());
            self.buf.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
            if self.buf.len() >= 2
                && self.buf.len() == 2 + usize::from(u16::from_be_bytes([self.buf[0], self.buf[1]]))
            {
                each(&self.buf[2..]);
                self.buf.clear();
            }
        }
    }

    /// Bytes of an unfinished message held.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// What the DNS analyser counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DnsStats {
    /// Messages parsed (with or without a fault after the header).
    pub messages: u64,
    /// Payloads shorter than a header.
    pub truncated_header: u64,
    /// Messages whose reading stopped at a fault, by kind: truncated, pointer loop, pointer out
    /// of bounds, bad label type, name too long.
    pub faults: [u64; 5],
    /// Responses joined to their request.
    pub joined: u64,
    /// Responses with no pending request.
    pub unmatched_responses: u64,
    /// Requests dropped unanswered to keep the table within its capacity.
    pub evicted: u64,
    /// Requests with the same key as a pending one (the older is given up unanswered).
    pub duplicate_requests: u64,
}

impl DnsStats {
    /// Counts the outcome of [`parse`].
    pub fn count(&mut self, parsed: &Result<Message, Error>) {
        match parsed {
            Ok(m) => {
                self.messages += 1;
                if let Some(Error::Dns { kind, .. }) = m.error {
                    self.faults[kind as usize] += 1;
                }
            }
            Err(_) => self.truncated_header += 1,
        }
    }
}

/// A request and its response, or a request given up, or a response without request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exchange<K> {
    /// The flow key the caller gave.
    pub key: K,
    /// Transaction ID.
    pub trans_id: u16,
    /// Time of the request (ns), if seen.
    pub request_ts_ns: Option<u64>,
    /// The request, if seen.
    pub request: Option<Message>,
    /// Time of the response (ns), if seen.
    pub response_ts_ns: Option<u64>,
    /// The response, if seen.
    pub response: Option<Message>,
}

/// Joins requests to responses by (flow key, transaction ID), in a table of bounded size: when
/// it is full the oldest pending request is given up (counted in [`DnsStats::evicted`]).
///
/// `K` is the caller's flow key, the same for both directions of a flow.
#[derive(Debug)]
pub struct Joiner<K: Hash + Eq + Clone> {
    capacity: usize,
    /// Keys come off the wire: the seeded fast hash (`trawl_flow::hash`; SipHash was 1.4 % of
    /// `trawl logs`' time, bench/RESULTS.md).
    pending: SeededFxMap<(K, u16), (u64, u64, Message)>,
    /// Insertion order with a sequence number, to find the oldest; stale entries are skipped.
    order: VecDeque<(u64, (K, u16))>,
    seq: u64,
    /// What was counted.
    pub stats: DnsStats,
}

impl<K: Hash + Eq + Clone> Joiner<K> {
    /// A joiner holding at most `capacity` pending requests (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            pending: SeededFxMap::default(),
            order: VecDeque::new(),
            seq: 0,
            stats: DnsStats::default(),
        }
    }

    /// Pending requests.
    pub fn len(&self) -> usize {
        self.pending.len()
    }

    /// True when no request is pending.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Takes one message; calls `out` with every exchange that ends (a joined pair, a request
    /// given up, a response without request).
    pub fn push(&mut self, key: K, ts_ns: u64, msg: Message, mut out: impl FnMut(Exchange<K>)) {
        let id = msg.id;
        if msg.flags.response {
            match self.pending.remove(&(key.clone(), id)) {
                Some((_, req_ts, req)) => {
                    self.stats.joined += 1;
                    out(Exchange {
                        key,
                        trans_id: id,
                        request_ts_ns: Some(req_ts),
                        request: Some(req),
                        response_ts_ns: Some(ts_ns),
                        response: Some(msg),
                    });
                }
                None => {
                    self.stats.unmatched_responses += 1;
                    out(Exchange {
                        key,
                        trans_id: id,
                        request_ts_ns: None,
                        request: None,
                        response_ts_ns: Some(ts_ns),
                        response: Some(msg),
                    });
                }
            }
            return;
        }
        self.seq += 1;
        if let Some((_, old_ts, old)) = self
            .pending
            .insert((key.clone(), id), (self.seq, ts_ns, msg))
        {
            self.stats.duplicate_requests += 1;
            out(Exchange {
                key: key.clone(),
                trans_id: id,
                request_ts_ns: Some(old_ts),
                request: Some(old),
                response_ts_ns: None,
                response: None,
            });
        }
        self.order.push_back((self.seq, (key, id)));
        while self.pending.len() > self.capacity {
            self.evict_oldest(&mut out);
        }
        // Answered requests leave stale entries in `order`; dropping them once it is twice the
        // table keeps it bounded at a constant cost per message.
        if self.order.len() > 2 * self.capacity + 16 {
            let pending = &self.pending;
            self.order
                .retain(|(seq, k)| pending.get(k).is_some_and(|e| e.0 == *seq));
        }
    }

    fn evict_oldest(&mut self, out: &mut impl FnMut(Exchange<K>)) {
        if let Some(exchange) = self.pop_oldest() {
            self.stats.evicted += 1;
            out(exchange);
        }
    }

    fn pop_oldest(&mut self) -> Option<Exchange<K>> {
        while let Some((seq, k)) = self.order.pop_front() {
            if self.pending.get(&k).is_some_and(|e| e.0 == seq) {
                let (_, ts, req) = self.pending.remove(&k).expect("present");
                return Some(Exchange {
                    key: k.0,
                    trans_id: k.1,
                    request_ts_ns: Some(ts),
                    request: Some(req),
                    response_ts_ns: None,
                    response: None,
                });
            }
        }
        None
    }

    /// Gives up every pending request (end of input), oldest first; not counted as evictions.
    pub fn finish(&mut self, mut out: impl FnMut(Exchange<K>)) {
        while let Some(exchange) = self.pop_oldest() {
            out(exchange);
        }
        self.order.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(rtype: u16, data: RData) -> Record {
        Record {
            name: "example.org".into(),
            rtype,
            class: 1,
            ttl: 60,
            data,
        }
    }

    /// Each record type as the `answers` of a log line show it (docs/specs/logs.md).
    #[test]
    fn data_text_renders_each_type_as_the_log_spec_says() {
        let cases = [
            (record(1, RData::A([192, 0, 2, 1].into())), "192.0.2.1"),
            (
                record(28, RData::Aaaa("2001:db8::1".parse().unwrap())),
                "2001:db8::1",
            ),
            (record(5, RData::Cname("a.example".into())), "a.example"),
            (
                record(
                    15,
                    RData::Mx {
                        preference: 10,
                        exchange: "mx.example".into(),
                    },
                ),
                "10 mx.example",
            ),
            (
                record(
                    33,
                    RData::Srv {
                        priority: 1,
                        weight: 2,
                        port: 5060,
                        target: "sip.example".into(),
                    },
                ),
                "1 2 5060 sip.example",
            ),
            (
                record(
                    6,
                    RData::Soa {
                        mname: "ns.example".into(),
                        rname: "root.example".into(),
                        serial: 7,
                        refresh: 3600,
                        retry: 600,
                        expire: 86400,
                        minimum: 300,
                    },
                ),
                "ns.example root.example 7 3600 600 86400 300",
            ),
            (
                record(
                    16,
                    RData::Txt(vec![b"v=spf1".to_vec(), b"-all\xff".to_vec()]),
                ),
                "v=spf1 -all\u{fffd}",
            ),
            (record(46, RData::Other { len: 12 }), "TYPE46 12 bytes"),
        ];
        for (r, want) in cases {
            assert_eq!(r.data_text(), want, "{r:?}");
        }
    }
}
