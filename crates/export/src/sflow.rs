//! sFlow version 5 datagrams (<https://sflow.org/sflow_version_5.txt>): the parser the
//! collector's [`crate::Decoder`] hands them to, and the flow record of one sampled packet.
//!
//! A datagram is XDR: a header (agent address, sequence number, uptime) and samples, each
//! framed by its format and length. The parser walks them without copying and hands the
//! caller what trawl uses: the raw packet headers of flow samples (compact and expanded) and
//! the generic interface counters of counter samples (compact and expanded). Other sample and
//! record formats are skipped by their length. A sample that is cut short or malformed is
//! reported with its offset in the datagram and the field concerned, and parsing goes on with
//! the next sample; only a sample whose length runs past the datagram ends it (nothing after
//! it can be framed). It never panics on any input (fuzzed: `fuzz/fuzz_targets/sflow.rs`).
//!
//! The mapping to flow records is `docs/specs/sflow.md`.
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use trawl_flow::decode::{decode, DecodeConfig, Decoded, ParseOutcome};
use trawl_flow::{DirectionRecord, FlowRecord, RecordExtra};

/// The datagram version this parser reads (the first 32-bit word).
pub const VERSION: u32 = 5;

/// The UDP port sFlow agents send to (IANA).
pub const PORT: u16 = 6343;

/// Sample formats (enterprise 0).
mod format {
    pub const FLOW_SAMPLE: u32 = 1;
    pub const COUNTER_SAMPLE: u32 = 2;
    pub const FLOW_SAMPLE_EXPANDED: u32 = 3;
    pub const COUNTER_SAMPLE_EXPANDED: u32 = 4;
    /// Flow record: raw packet header.
    pub const RAW_HEADER: u32 = 1;
    /// Counter record: generic interface counters.
    pub const GENERIC_IF: u32 = 1;
}

/// `header_protocol` values trawl decodes (sFlow's own numbering).
mod header_protocol {
    pub const ETHERNET: u32 = 1;
    pub const IPV4: u32 = 11;
    pub const IPV6: u32 = 12;
}

/// The datagram header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The agent's address.
    pub agent: IpAddr,
    /// Sub-agent id (an agent's independent samplers).
    pub sub_agent: u32,
    /// Datagram sequence number (per agent and sub-agent).
    pub sequence: u32,
    /// The agent's uptime, ms.
    pub uptime_ms: u32,
    /// Samples the header announces.
    pub samples: u32,
}

/// A flow sample's fields (compact and expanded forms alike).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowSample {
    /// Whether it was an expanded flow sample (format 3).
    pub expanded: bool,
    /// Its byte offset in the datagram.
    pub offset: usize,
    /// Sample sequence number.
    pub sequence: u32,
    /// Source id type (0 ifIndex, 1 VLAN, 2 entity).
    pub source_type: u32,
    /// Source id index.
    pub source_index: u32,
    /// 1 in this many packets was sampled.
    pub sampling_rate: u32,
    /// Packets that could have been sampled.
    pub sample_pool: u32,
    /// Samples dropped for lack of resources.
    pub drops: u32,
    /// Input interface: an ifIndex, or 0 when not known.
    pub input: u32,
    /// Output interface: an ifIndex, or 0 when not known, discarded or several.
    pub output: u32,
}

/// A raw packet header record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawHeader<'a> {
    /// sFlow's header protocol (1 Ethernet, 11 IPv4, 12 IPv6, ...).
    pub protocol: u32,
    /// The sampled packet's length before sampling (for Ethernet, with its FCS).
    pub frame_length: u32,
    /// Bytes removed from the packet before the header was taken (an FCS, usually 4).
    pub stripped: u32,
    /// The leading bytes of the packet.
    pub bytes: &'a [u8],
}

/// A counter sample's fields.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterSample {
    /// Whether it was an expanded counter sample (format 4).
    pub expanded: bool,
    /// Sample sequence number.
    pub sequence: u32,
    /// Source id type.
    pub source_type: u32,
    /// Source id index (the ifIndex for interface counters).
    pub source_index: u32,
}

/// Generic interface counters (counter record format 1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[allow(missing_docs)] // The names are the MIB-II / sFlow names, one each.
pub struct IfCounters {
    pub if_index: u32,
    pub if_type: u32,
    pub if_speed: u64,
    pub if_direction: u32,
    pub if_status: u32,
    pub in_octets: u64,
    pub in_ucast: u32,
    pub in_multicast: u32,
    pub in_broadcast: u32,
    pub in_discards: u32,
    pub in_errors: u32,
    pub in_unknown_protos: u32,
    pub out_octets: u64,
    pub out_ucast: u32,
    pub out_multicast: u32,
    pub out_broadcast: u32,
    pub out_discards: u32,
    pub out_errors: u32,
    pub promiscuous: u32,
}

/// What the parser found, in datagram order.
#[derive(Clone, Copy, Debug)]
pub enum Event<'a> {
    /// A raw packet header record of a flow sample.
    Packet(&'a FlowSample, &'a RawHeader<'a>),
    /// A flow sample with no raw packet header record (only records trawl does not read).
    FlowWithoutHeader(&'a FlowSample),
    /// A counter sample, with its generic interface counters when it has them.
    Counters(&'a CounterSample, Option<&'a IfCounters>),
    /// A sample of a format trawl does not read (enterprise, format), skipped by its length.
    Skipped(u32, u32),
    /// A sample that is malformed: the samples after it are still read.
    Malformed(&'a SflowError),
}

/// A problem in a datagram: where and in which field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SflowError {
    /// Byte offset in the datagram.
    pub offset: usize,
    /// The field that could not be read, or is wrong (`sample_length`, `header_length`, ...).
    pub field: &'static str,
    /// What was wrong.
    pub detail: String,
}

impl std::fmt::Display for SflowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "offset {}: {}: {}", self.offset, self.field, self.detail)
    }
}

/// A big-endian XDR reader over a slice, which knows the slice's offset in the datagram.
struct Xdr<'a> {
    b: &'a [u8],
    at: usize,
    base: usize,
}

impl<'a> Xdr<'a> {
    fn new(b: &'a [u8], base: usize) -> Self {
        Xdr { b, at: 0, base }
    }

    fn offset(&self) -> usize {
        self.base + self.at
    }

    fn cut(&self, field: &'static str, need: usize) -> SflowError {
        SflowError {
            offset: self.offset(),
            field,
            detail: format!(
                "needs {need} bytes, {} left",
                self.b.len().saturating_sub(self.at)
            ),
        }
    }

    fn bytes(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], SflowError> {
        match self
            .at
            .checked_add(n)
            .and_then(|end| self.b.get(self.at..end))
        {
            Some(s) => {
                self.at += n;
                Ok(s)
            }
            None => Err(self.cut(field, n)),
        }
    }

    fn u32(&mut self, field: &'static str) -> Result<u32, SflowError> {
        let s = self.bytes(4, field)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }

    fn u64(&mut self, field: &'static str) -> Result<u64, SflowError> {
        let s = self.bytes(8, field)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(u64::from_be_bytes(a))
    }

    /// XDR opaque data of `n` bytes, padded to a multiple of four.
    fn padded(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], SflowError> {
        let s = self.bytes(n, field)?;
        let pad = (4 - n % 4) % 4;
        // The padding of the last item may be missing: take what there is.
        self.at = (self.at + pad).min(self.b.len());
        Ok(s)
    }

    /// One item framed by its format and length: (enterprise, format, data reader).
    fn framed(
        &mut self,
        what: &'static str,
        length_field: &'static str,
    ) -> Result<(u32, u32, Xdr<'a>), SflowError> {
        let tag = self.u32(what)?;
        let at = self.offset();
        let len = self.u32(length_field)? as usize;
        let base = self.offset();
        let data = self.padded(len, length_field).map_err(|_| SflowError {
            offset: at,
            field: length_field,
            detail: format!(
                "{len} bytes run past the end ({} left)",
                self.b.len().saturating_sub(self.at)
            ),
        })?;
        Ok((tag >> 12, tag & 0xfff, Xdr::new(data, base)))
    }
}

/// Parses the header of a datagram.
pub fn parse_header(msg: &[u8]) -> Result<(Header, usize), SflowError> {
    let mut x = Xdr::new(msg, 0);
    let version = x.u32("version")?;
    if version != VERSION {
        return Err(SflowError {
            offset: 0,
            field: "version",
            detail: format!("version {version}, only 5 is read"),
        });
    }
    let at = x.offset();
    let agent = match x.u32("agent_address_type")? {
        1 => {
            let b = x.bytes(4, "agent_address")?;
            IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
        }
        2 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(x.bytes(16, "agent_address")?);
            IpAddr::V6(Ipv6Addr::from(a))
        }
        t => {
            return Err(SflowError {
                offset: at,
                field: "agent_address_type",
                detail: format!("{t}, not 1 (IPv4) or 2 (IPv6)"),
            })
        }
    };
    let header = Header {
        agent,
        sub_agent: x.u32("sub_agent_id")?,
        sequence: x.u32("sequence_number")?,
        uptime_ms: x.u32("uptime")?,
        samples: x.u32("num_samples")?,
    };
    Ok((header, x.at))
}

/// Parses a datagram: its header, then each sample handed to `visit`. Errors in a sample are
/// handed to `visit` too ([`Event::Malformed`]); the error returned is one that ends the
/// datagram (a bad header, a sample running past the end).
pub fn parse(msg: &[u8], visit: &mut dyn FnMut(&Header, Event<'_>)) -> Result<Header, SflowError> {
    let (header, at) = parse_header(msg)?;
    let mut x = Xdr::new(&msg[at..], at);
    for _ in 0..header.samples {
        let (enterprise, fmt, mut data) = x.framed("sample_type", "sample_length")?;
        let result = match (enterprise, fmt) {
            (0, format::FLOW_SAMPLE | format::FLOW_SAMPLE_EXPANDED) => flow_sample(
                &mut data,
                fmt == format::FLOW_SAMPLE_EXPANDED,
                &header,
                visit,
            ),
            (0, format::COUNTER_SAMPLE | format::COUNTER_SAMPLE_EXPANDED) => counter_sample(
                &mut data,
                fmt == format::COUNTER_SAMPLE_EXPANDED,
                &header,
                visit,
            ),
            (e, f) => {
                visit(&header, Event::Skipped(e, f));
                Ok(())
            }
        };
        if let Err(e) = result {
            visit(&header, Event::Malformed(&e));
        }
    }
    if x.at < x.b.len() {
        return Err(SflowError {
            offset: x.offset(),
            field: "num_samples",
            detail: format!(
                "{} samples read, {} bytes left over",
                header.samples,
                x.b.len() - x.at
            ),
        });
    }
    Ok(header)
}

/// An interface as a flow sample gives it: the top two bits are the format (0: an ifIndex);
/// 0x3FFFFFFF is "not known".
fn interface(format: u32, value: u32) -> u32 {
    if format == 0 && value != 0x3fff_ffff {
        value
    } else {
        0
    }
}

fn flow_sample(
    x: &mut Xdr<'_>,
    expanded: bool,
    header: &Header,
    visit: &mut dyn FnMut(&Header, Event<'_>),
) -> Result<(), SflowError> {
    let mut s = FlowSample {
        expanded,
        offset: x.base.saturating_sub(8),
        sequence: x.u32("sequence_number")?,
        ..FlowSample::default()
    };
    if expanded {
        s.source_type = x.u32("source_id_type")?;
        s.source_index = x.u32("source_id_index")?;
    } else {
        let id = x.u32("source_id")?;
        (s.source_type, s.source_index) = (id >> 24, id & 0xff_ffff);
    }
    s.sampling_rate = x.u32("sampling_rate")?;
    s.sample_pool = x.u32("sample_pool")?;
    s.drops = x.u32("drops")?;
    if expanded {
        let f = x.u32("input_format")?;
        s.input = interface(if f == 0 { 0 } else { 1 }, x.u32("input")?);
        let f = x.u32("output_format")?;
        s.output = interface(if f == 0 { 0 } else { 1 }, x.u32("output")?);
    } else {
        let i = x.u32("input")?;
        s.input = interface(i >> 30, i & 0x3fff_ffff);
        let o = x.u32("output")?;
        s.output = interface(o >> 30, o & 0x3fff_ffff);
    }
    let records = x.u32("flow_records")?;
    let mut headers = 0;
    for _ in 0..records {
        let (enterprise, fmt, mut r) = x.framed("flow_format", "flow_data_length")?;
        if (enterprise, fmt) != (0, format::RAW_HEADER) {
            continue;
        }
        let protocol = r.u32("header_protocol")?;
        let frame_length = r.u32("frame_length")?;
        let stripped = r.u32("stripped")?;
        let len = r.u32("header_length")? as usize;
        let bytes = r.padded(len, "header")?;
        headers += 1;
        let raw = RawHeader {
            protocol,
            frame_length,
            stripped,
            bytes,
        };
        visit(header, Event::Packet(&s, &raw));
    }
    if headers == 0 {
        visit(header, Event::FlowWithoutHeader(&s));
    }
    Ok(())
}

fn counter_sample(
    x: &mut Xdr<'_>,
    expanded: bool,
    header: &Header,
    visit: &mut dyn FnMut(&Header, Event<'_>),
) -> Result<(), SflowError> {
    let mut s = CounterSample {
        expanded,
        sequence: x.u32("sequence_number")?,
        ..CounterSample::default()
    };
    if expanded {
        s.source_type = x.u32("source_id_type")?;
        s.source_index = x.u32("source_id_index")?;
    } else {
        let id = x.u32("source_id")?;
        (s.source_type, s.source_index) = (id >> 24, id & 0xff_ffff);
    }
    let records = x.u32("counter_records")?;
    let mut generic = None;
    for _ in 0..records {
        let (enterprise, fmt, mut r) = x.framed("counter_format", "counter_data_length")?;
        if (enterprise, fmt) == (0, format::GENERIC_IF) {
            generic = Some(if_counters(&mut r)?);
        }
    }
    visit(header, Event::Counters(&s, generic.as_ref()));
    Ok(())
}

fn if_counters(r: &mut Xdr<'_>) -> Result<IfCounters, SflowError> {
    Ok(IfCounters {
        if_index: r.u32("ifIndex")?,
        if_type: r.u32("ifType")?,
        if_speed: r.u64("ifSpeed")?,
        if_direction: r.u32("ifDirection")?,
        if_status: r.u32("ifStatus")?,
        in_octets: r.u64("ifInOctets")?,
        in_ucast: r.u32("ifInUcastPkts")?,
        in_multicast: r.u32("ifInMulticastPkts")?,
        in_broadcast: r.u32("ifInBroadcastPkts")?,
        in_discards: r.u32("ifInDiscards")?,
        in_errors: r.u32("ifInErrors")?,
        in_unknown_protos: r.u32("ifInUnknownProtos")?,
        out_octets: r.u64("ifOutOctets")?,
        out_ucast: r.u32("ifOutUcastPkts")?,
        out_multicast: r.u32("ifOutMulticastPkts")?,
        out_broadcast: r.u32("ifOutBroadcastPkts")?,
        out_discards: r.u32("ifOutDiscards")?,
        out_errors: r.u32("ifOutErrors")?,
        promiscuous: r.u32("ifPromiscuousMode")?,
    })
}

/// Why a sampled packet gave no flow record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoRecord {
    /// A header protocol trawl does not decode (not Ethernet, IPv4 or IPv6).
    Protocol,
    /// The header holds no IP packet trawl can key (ARP, a cut IP header, ...).
    NotIp(ParseOutcome),
}

/// The flow record of one sampled packet: its key from trawl's packet decoder, its counts
/// (one packet, `frame_length` bytes, the IP header's total length) multiplied by the
/// sampling rate, `time_ns` as its first and last time, and the sample's agent,
/// interfaces and rate in [`RecordExtra`].
pub fn packet_record(
    header: &Header,
    sample: &FlowSample,
    raw: &RawHeader<'_>,
    time_ns: u64,
    scratch: &mut Decoded,
) -> Result<FlowRecord<'static>, NoRecord> {
    use trawl_capture::LinkType;
    let link = match raw.protocol {
        header_protocol::ETHERNET => LinkType::ETHERNET,
        header_protocol::IPV4 => LinkType::IPV4,
        header_protocol::IPV6 => LinkType::IPV6,
        _ => return Err(NoRecord::Protocol),
    };
    let outcome = decode(link, raw.bytes, &DecodeConfig::default(), scratch);
    if !outcome.has_key() {
        return Err(NoRecord::NotIp(outcome));
    }
    let d = &*scratch;
    // A rate of 0 is no agent's, but would erase the sample: count it as 1.
    let rate = u64::from(sample.sampling_rate.max(1));
    // The frame length the agent reports (with the FCS where it counts it, as `stripped`
    // says), as sfacctd, nfdump and GoFlow2 count sFlow bytes.
    let frame = u64::from(raw.frame_length);
    let mut fwd = DirectionRecord {
        packets: rate,
        bytes: frame * rate,
        ip_bytes: u64::from(d.ip_len) * rate,
        len_min: frame as u32,
        len_max: frame as u32,
        len_mean: frame as f64,
        ..DirectionRecord::default()
    };
    if d.tcp_valid {
        fwd.tcp_flags = d.tcp.flags;
    }
    let mut r = crate::decode::empty_record();
    r.src_ip = d.src_addr();
    r.dst_ip = d.dst_addr();
    r.src_port = d.src_port;
    r.dst_port = d.dst_port;
    r.proto = d.proto;
    r.vlan = d.vlan;
    r.src_mac = d.src_mac;
    r.dst_mac = d.dst_mac;
    r.first_ns = time_ns;
    r.last_ns = time_ns;
    r.fwd = fwd;
    r.extra = RecordExtra {
        sampling_rate: sample.sampling_rate.max(1),
        agent: Some(header.agent),
        in_if: sample.input,
        out_if: sample.output,
        ..RecordExtra::default()
    };
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact flow sample (rate 256, in 3, out 5) with one raw header: Ethernet, IPv4 UDP
    /// 10.0.0.1:1000 -> 10.0.0.2:53, frame 64 bytes with 4 stripped; from agent 192.0.2.1.
    fn datagram() -> Vec<u8> {
        let mut frame = Vec::new();
        frame.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00]);
        frame.extend_from_slice(&[
            0x45, 0, 0, 46, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2, //
            0x03, 0xe8, 0, 53, 0, 26, 0, 0,
        ]);
        let w = |v: &mut Vec<u8>, x: u32| v.extend_from_slice(&x.to_be_bytes());
        let mut rec = Vec::new();
        w(&mut rec, 1); // header_protocol: Ethernet
        w(&mut rec, 64); // frame_length
        w(&mut rec, 4); // stripped
        w(&mut rec, frame.len() as u32);
        rec.extend_from_slice(&frame);
        while rec.len() % 4 != 0 {
            rec.push(0);
        }
        let mut sample = Vec::new();
        for v in [7, 3, 256, 1000, 0, 3, 5, 1] {
            w(&mut sample, v); // seq, source id, rate, pool, drops, input, output, records
        }
        w(&mut sample, 1); // raw packet header
        w(&mut sample, rec.len() as u32);
        sample.extend_from_slice(&rec);
        let mut d = Vec::new();
        for v in [5, 1] {
            w(&mut d, v);
        }
        d.extend_from_slice(&[192, 0, 2, 1]);
        for v in [0, 42, 1000, 1] {
            w(&mut d, v); // sub-agent, sequence, uptime, samples
        }
        w(&mut d, 1); // flow sample
        w(&mut d, sample.len() as u32);
        d.extend_from_slice(&sample);
        d
    }

    #[test]
    fn parse_flow_sample_into_a_scaled_record() {
        let d = datagram();
        let mut got = Vec::new();
        let mut scratch = Decoded::default();
        let h = parse(&d, &mut |h, e| {
            if let Event::Packet(s, raw) = e {
                got.push(packet_record(h, s, raw, 5, &mut scratch).unwrap());
            }
        })
        .unwrap();
        assert_eq!((h.sequence, h.samples), (42, 1));
        assert_eq!(got.len(), 1);
        let r = &got[0];
        assert_eq!(r.src_ip.to_string(), "10.0.0.1");
        assert_eq!((r.src_port, r.dst_port, r.proto), (1000, 53, 17));
        assert_eq!(
            (r.fwd.packets, r.fwd.bytes, r.fwd.ip_bytes),
            (256, 64 * 256, 46 * 256)
        );
        assert_eq!(r.extra.sampling_rate, 256);
        assert_eq!(r.extra.agent, Some("192.0.2.1".parse().unwrap()));
        assert_eq!((r.extra.in_if, r.extra.out_if), (3, 5));
    }

    #[test]
    fn truncated_sample_names_its_offset_and_field() {
        let mut d = datagram();
        // The header says one more sample than there is: the second sample_type is missing.
        d[27] = 2;
        let mut packets = 0;
        let e = parse(&d, &mut |_, e| {
            if let Event::Packet(..) = e {
                packets += 1;
            }
        })
        .unwrap_err();
        assert_eq!(packets, 1, "the first sample is kept");
        assert_eq!((e.offset, e.field), (d.len(), "sample_type"));
    }

    #[test]
    fn malformed_sample_is_reported_and_the_next_read() {
        let mut d = datagram();
        let one = d[28..].to_vec();
        d.extend_from_slice(&one);
        d[27] = 2;
        // The first sample says it has 2 flow records; the second runs past the sample.
        d[28 + 8 + 31] = 2;
        let (mut packets, mut bad) = (0, Vec::new());
        parse(&d, &mut |_, e| match e {
            Event::Packet(..) => packets += 1,
            Event::Malformed(e) => bad.push(e.clone()),
            _ => {}
        })
        .unwrap();
        assert_eq!(packets, 2, "both samples' headers");
        assert_eq!(bad.len(), 1);
        assert_eq!(bad[0].field, "flow_format");
    }
}
