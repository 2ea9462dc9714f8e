//! Flow records, per-second series rows and alarms as Protobuf messages of
//! `docs/specs/trawl.proto` (`trawl.FlowRecord`, `trawl.SeriesRow`, `trawl.Alarm`), for Kafka. Hand-written (no code generator in the build): proto3 wire format, fields in number
//! order, zero values left out as proto3 does, IP and MAC addresses as the JSON lines' text.
//!
//! `*_delimited` put the message's length in front as a varint (Protobuf's delimited form,
//! `format=protobuf-delimited`): many records back to back in one Kafka message, which is
//! what ClickHouse's `Protobuf` format reads.
use std::net::IpAddr;

use trawl_flow::{CommunityIdText, DirectionRecord, FlowRecord, EARLY_PACKETS};
use trawl_series::SeriesRow;

use crate::exporter::Alarm;
use crate::text::{Cursor, Out, MAX_IP_TEXT};

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

/// A field's key (its number and wire type as a varint), computed where the field number is
/// a constant: one or two bytes (fields 1 to 2047).
#[derive(Clone, Copy)]
struct Key {
    bytes: [u8; 2],
    len: usize,
}

#[inline(always)]
const fn key(field: u32, wire: u8) -> Key {
    let k = field << 3 | wire as u32;
    assert!(k < 1 << 14, "field numbers up to 2047");
    if k < 0x80 {
        Key {
            bytes: [k as u8, 0],
            len: 1,
        }
    } else {
        Key {
            bytes: [k as u8 | 0x80, (k >> 7) as u8],
            len: 2,
        }
    }
}

/// `v` as a varint in an array, and its length (for the rare lengths written outside a
/// record's room).
fn varint_array(v: u64) -> ([u8; 12], usize) {
    let mut a = [0u8; 12];
    let mut c = Cursor {
        buf: &mut a,
        pos: 0,
    };
    c.key_varint(None, v, true);
    let n = c.pos;
    (a, n)
}

impl Cursor<'_> {
    /// Writes `key` (when there is one) and `v` as a varint if `keep` (proto3 leaves zero
    /// values out), with one bounds check: every field has room for a two-byte key and a
    /// ten-byte varint (`FIELD`). The key is a constant where the field number is one.
    #[inline(always)]
    fn key_varint(&mut self, key: Option<Key>, v: u64, keep: bool) {
        if !keep {
            return;
        }
        let room: &mut [u8; 12] = (&mut self.buf[self.pos..self.pos + 12])
            .try_into()
            .expect("12 bytes");
        let mut i = 0;
        if let Some(key) = key {
            room[..2].copy_from_slice(&key.bytes);
            i = key.len;
        }
        let mut v = v;
        while v >= 0x80 {
            room[i] = v as u8 | 0x80;
            v >>= 7;
            i += 1;
        }
        room[i] = v as u8;
        self.pos += i + 1;
    }
}

#[inline(always)]
fn varint(v: u64, out: &mut Cursor<'_>) {
    out.key_varint(None, v, true);
}

/// Field `field` as a varint, left out when 0.
#[inline(always)]
fn uint(field: u32, v: u64, out: &mut Cursor<'_>) {
    out.key_varint(Some(key(field, VARINT)), v, v != 0);
}

/// Field `field` as a varint, written even when 0 (proto3 `optional`, present).
#[inline(always)]
fn present(field: u32, v: u64, out: &mut Cursor<'_>) {
    out.key_varint(Some(key(field, VARINT)), v, true);
}

#[inline(always)]
fn tag(field: u32, wire: u8, out: &mut Cursor<'_>) {
    let k = key(field, wire);
    out.put_slice(&k.bytes[..k.len]);
}

#[inline(always)]
fn double(field: u32, v: f64, out: &mut Cursor<'_>) {
    let k = key(field, FIXED64);
    let room: &mut [u8; 10] = (&mut out.buf[out.pos..out.pos + 10])
        .try_into()
        .expect("10 bytes");
    room[..2].copy_from_slice(&k.bytes);
    room[k.len..k.len + 8].copy_from_slice(&v.to_le_bytes());
    out.pos += if v != 0.0 { k.len + 8 } else { 0 };
}

#[inline(always)]
fn string(field: u32, s: &[u8], out: &mut Cursor<'_>) {
    if !s.is_empty() {
        out.key_varint(Some(key(field, LEN)), s.len() as u64, true);
        out.put_slice(s);
    }
}

/// The most bytes a field takes besides a string's own: a two-byte tag (fields 16 to 2047)
/// and a ten-byte varint (a value, or a length).
const FIELD: usize = 2 + 10;

/// The most bytes of a flow record's fields besides its strings' own bytes
/// (`encode_flow`'s fields, each at its largest): 5 addresses' and 2 MACs' texts (at most 45
/// and 17 bytes), 2 lists of `EARLY_PACKETS` varints, the numbers (58 varints, 10
/// doubles) and the tags and lengths of the 11 strings.
const FLOW_FIXED: usize = 5 * (FIELD + MAX_IP_TEXT)
    + 2 * (FIELD + 17)
    + 2 * FIELD * (EARLY_PACKETS + 1)
    + 58 * FIELD
    + 10 * (FIELD + 8)
    + 11 * FIELD;

/// An upper bound of `r`'s message size: [`FLOW_FIXED`] and the bytes of its strings.
fn flow_room(r: &FlowRecord<'_>, iface: &str, probe: &str, id: &CommunityIdText) -> usize {
    let app = r
        .app
        .map_or(0, |l| l.app.name().len() + l.source.name().len());
    FLOW_FIXED
        + iface.len()
        + probe.len()
        + r.end_reason.name().len()
        + app
        + r.tunnel.kind.name().len()
        + 2 * 2
        + id.as_bytes().len()
}

/// A length-delimited field whose body `body` writes (its length is patched in after: one
/// byte, as every body here is shorter than 128 bytes, else moved).
#[inline(always)]
fn delimited(field: u32, out: &mut Cursor<'_>, body: impl FnOnce(&mut Cursor<'_>)) {
    let start = out.pos;
    tag(field, LEN, out);
    let at = out.pos;
    out.put(0);
    body(out);
    let len = out.pos - at - 1;
    if len == 0 {
        // proto3 leaves empty fields out: take back the tag and the length.
        out.pos = start;
        return;
    }
    if len < 0x80 {
        out.buf[at] = len as u8;
    } else {
        let (low, n) = varint_array(len as u64);
        let extra = n - 1;
        out.buf.copy_within(at + 1..out.pos, at + 1 + extra);
        out.buf[at..at + n].copy_from_slice(&low[..n]);
        out.pos += extra;
    }
}

#[inline(always)]
fn ip(field: u32, a: IpAddr, out: &mut Cursor<'_>) {
    delimited(field, out, |o| crate::text::ip(a, o));
}

#[inline(always)]
fn mac(field: u32, m: &[u8; 6], out: &mut Cursor<'_>) {
    // Never empty: 17 bytes, and the field is written even for 00:00:00:00:00:00 (as the
    // JSON lines write it).
    tag(field, LEN, out);
    out.put(17);
    crate::text::mac(m, out);
}

#[inline(always)]
fn zigzag_list(field: u32, v: &[i64], out: &mut Cursor<'_>) {
    if v.is_empty() {
        return;
    }
    // Packed, as proto3 writes repeated scalars.
    delimited(field, out, |o| {
        for x in v {
            varint(((x << 1) ^ (x >> 63)) as u64, o);
        }
    });
}

/// Fields 18-36 (`fwd_`) or 37-55 (`rev_`) of one direction.
#[inline(always)]
fn direction(first: u32, d: &DirectionRecord, out: &mut Cursor<'_>) {
    uint(first, u64::from(d.len_min), out);
    uint(first + 1, u64::from(d.len_max), out);
    double(first + 2, d.len_mean, out);
    double(first + 3, d.len_std, out);
    uint(first + 4, d.iat_min_ns, out);
    uint(first + 5, d.iat_max_ns, out);
    double(first + 6, d.iat_mean_ns, out);
    double(first + 7, d.iat_std_ns, out);
    let counts = [
        d.syn,
        d.syn_ack,
        d.fin,
        d.rst,
        d.psh,
        d.urg,
        d.ece,
        d.cwr,
        u32::from(d.tcp_flags),
        d.zero_window,
        d.retransmissions,
    ];
    for (i, c) in counts.iter().enumerate() {
        uint(first + 8 + i as u32, u64::from(*c), out);
    }
}

/// Appends `r` as one `trawl.FlowRecord` message to `out`; `iface` and `probe` fill the
/// fields of the same names.
pub fn encode_flow(r: &FlowRecord<'_>, iface: Option<&str>, probe: &str, out: &mut Vec<u8>) {
    let iface = iface.unwrap_or("");
    let id = r.community_id();
    within(out, flow_room(r, iface, probe, &id), |c| {
        flow(r, iface, probe, &id, c)
    });
}

/// Appends to `out` what `body` writes into room of `room` bytes (an upper bound of it).
#[inline(always)]
fn within(out: &mut Vec<u8>, room: usize, body: impl FnOnce(&mut Cursor<'_>)) {
    let at = out.len();
    out.resize(at + room, 0);
    let mut c = Cursor {
        buf: &mut out[at..],
        pos: 0,
    };
    body(&mut c);
    let end = at + c.pos;
    out.truncate(end);
}

/// `encode_flow`'s fields, in number order.
#[inline(always)]
fn flow(r: &FlowRecord<'_>, iface: &str, probe: &str, id: &CommunityIdText, out: &mut Cursor<'_>) {
    ip(1, r.src_ip, out);
    ip(2, r.dst_ip, out);
    uint(3, u64::from(r.src_port), out);
    uint(4, u64::from(r.dst_port), out);
    uint(5, u64::from(r.proto), out);
    uint(6, u64::from(r.vlan), out);
    string(7, iface.as_bytes(), out);
    mac(8, &r.src_mac, out);
    mac(9, &r.dst_mac, out);
    uint(10, r.first_ns, out);
    uint(11, r.last_ns, out);
    uint(12, r.fwd.packets, out);
    uint(13, r.rev.packets, out);
    uint(14, r.fwd.bytes, out);
    uint(15, r.rev.bytes, out);
    uint(16, r.fwd.ip_bytes, out);
    uint(17, r.rev.ip_bytes, out);
    direction(18, &r.fwd, out);
    direction(37, &r.rev, out);
    zigzag_list(56, &r.first_lengths[..r.first_count], out);
    zigzag_list(57, &r.first_iats_ns[..r.first_count], out);
    string(58, r.end_reason.name().as_bytes(), out);
    string(59, probe.as_bytes(), out);
    string(60, id.as_bytes(), out);
    // Fields 61-84: the application label, round trips, tunnel, collected and enrichment
    // fields, each left out when the record has none (old readers skip them all).
    if let Some(l) = r.app {
        string(61, l.app.name().as_bytes(), out);
        string(62, l.source.name().as_bytes(), out);
    }
    // `optional`: written when measured, 0 included.
    for (field, h) in [(63, r.fwd.rtt_handshake_ns), (64, r.rev.rtt_handshake_ns)] {
        if let Some(ns) = h {
            present(field, ns, out);
        }
    }
    for (first, d) in [(65, &r.fwd), (69, &r.rev)] {
        uint(first, u64::from(d.rtt_samples), out);
        uint(first + 1, d.rtt_min_ns, out);
        uint(first + 2, d.rtt_max_ns, out);
        double(first + 3, d.rtt_mean_ns, out);
    }
    if r.tunnel.is_some() {
        string(73, r.tunnel.kind.name().as_bytes(), out);
        ip(74, r.tunnel.src_addr(), out);
        ip(75, r.tunnel.dst_addr(), out);
        uint(76, u64::from(r.tunnel.id), out);
    }
    let x = &r.extra;
    uint(77, u64::from(x.sampling_rate), out);
    if let Some(a) = x.agent {
        ip(78, a, out);
    }
    uint(79, u64::from(x.in_if), out);
    uint(80, u64::from(x.out_if), out);
    uint(81, u64::from(x.src_as), out);
    uint(82, u64::from(x.dst_as), out);
    for (field, c) in [(83, &x.src_country), (84, &x.dst_country)] {
        if c.iter().all(u8::is_ascii_alphabetic) {
            string(field, c, out);
        }
    }
}

/// Appends `r` as one `trawl.FlowRecord` message with its length in front (a varint: the
/// delimited form).
pub fn encode_flow_delimited(
    r: &FlowRecord<'_>,
    iface: Option<&str>,
    probe: &str,
    out: &mut Vec<u8>,
) {
    length_prefixed(out, |o| encode_flow(r, iface, probe, o));
}

/// Runs `body`, which appends one message, and puts the message's length in front of it as
/// a varint. Room for a two-byte length is left first (a record is 128 to 16383 bytes long):
/// a shorter one moves the message back a byte, a longer one (a very long probe name) makes
/// room.
pub fn length_prefixed(out: &mut Vec<u8>, body: impl FnOnce(&mut Vec<u8>)) {
    let at = out.len();
    out.extend_from_slice(&[0, 0]);
    body(out);
    let len = out.len() - at - 2;
    match len {
        0..0x80 => {
            out[at] = len as u8;
            out.copy_within(at + 2.., at + 1);
            out.pop();
        }
        0x80..0x4000 => {
            out[at] = (len as u8) | 0x80;
            out[at + 1] = (len >> 7) as u8;
        }
        _ => {
            let (low, n) = varint_array(len as u64);
            out.splice(at..at + 2, low[..n].iter().copied());
        }
    }
}

/// Appends `r` as one `trawl.SeriesRow` message to `out`, `probe` naming the probe.
pub fn encode_series(r: &SeriesRow, probe: &str, out: &mut Vec<u8>) {
    let values = [
        r.second,
        r.packets,
        r.bytes,
        r.active_flows,
        r.new_flows,
        r.in_packets,
        r.in_bytes,
        r.out_packets,
        r.out_bytes,
    ];
    within(out, values.len() * FIELD + FIELD + probe.len(), |c| {
        for (i, v) in values.into_iter().enumerate() {
            uint(i as u32 + 1, v, c);
        }
        string(10, probe.as_bytes(), c);
    });
}

/// Appends `a` as one `trawl.Alarm` message to `out`: its time, the `detector` and `event`
/// fields of its JSON object (when it has them), the whole object as JSON text, and the
/// probe.
pub fn encode_alarm(a: &Alarm, probe: &str, out: &mut Vec<u8>) {
    let text = |k: &str| a.json.get(k).and_then(|v| v.as_str()).unwrap_or("");
    let (detector, event, json) = (text("detector"), text("event"), a.json.to_string());
    let room = 5 * FIELD + detector.len() + event.len() + json.len() + probe.len();
    within(out, room, |c| {
        uint(1, a.ts_ns, c);
        string(2, detector.as_bytes(), c);
        string(3, event.as_bytes(), c);
        string(4, json.as_bytes(), c);
        string(5, probe.as_bytes(), c);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::empty_record;

    #[test]
    fn emit_small_record() {
        let mut r = empty_record();
        r.src_ip = "10.0.0.1".parse().unwrap();
        r.dst_ip = "10.0.0.2".parse().unwrap();
        r.src_port = 1234;
        r.proto = 17;
        r.fwd.packets = 1;
        r.first_lengths[0] = -60;
        r.first_count = 1;
        let mut out = Vec::new();
        encode_flow(&r, None, "p", &mut out);
        // field 1 "10.0.0.1", field 2 "10.0.0.2", 3 = 1234, 5 = 17
        assert_eq!(&out[..10], b"\x0a\x0810.0.0.1");
        assert_eq!(&out[10..20], b"\x12\x0810.0.0.2");
        assert_eq!(&out[20..23], &[0x18, 0xd2, 0x09]);
        assert_eq!(&out[23..25], &[0x28, 17]);
        // fwd_packets = 1; first_lengths = [-60] packed zigzag (119); probe "p", then the
        // Community ID (field 60, 30 bytes) at the end.
        let (head, id) = out.split_at(out.len() - 33);
        assert!(head.ends_with(&[0xda, 0x03, 1, b'p']));
        assert_eq!(&id[..3], &[0xe2, 0x03, 30]);
        assert_eq!(&id[3..], r.community_id().as_bytes());
        assert!(out.windows(2).any(|w| w == [0x60, 1]));
        assert!(out.windows(4).any(|w| w == [0xc2, 0x03, 1, 119]));
    }

    /// A record with every field at its largest (the longest address texts, the largest
    /// numbers, full lists, every optional field) fits the room `encode_flow` sizes for it:
    /// the cursor would panic writing past it.
    #[test]
    fn emit_largest_record_within_its_room() {
        // The longest text of an address the standard library writes (it writes embedded
        // IPv4 only after `::` or `::ffff:`).
        let v6: IpAddr = "ffff:ffff:ffff:ffff:ffff:ffff:ffff:fffe".parse().unwrap();
        assert_eq!(v6.to_string().len(), 39);
        let mut r = empty_record();
        (r.src_ip, r.dst_ip, r.extra.agent) = (v6, v6, Some(v6));
        (r.src_port, r.dst_port, r.proto, r.vlan) = (u16::MAX, u16::MAX, u8::MAX, u16::MAX);
        (r.first_ns, r.last_ns) = (u64::MAX, u64::MAX);
        for d in [&mut r.fwd, &mut r.rev] {
            (d.packets, d.bytes, d.ip_bytes) = (u64::MAX, u64::MAX, u64::MAX);
            (d.len_min, d.len_max) = (u32::MAX, u32::MAX);
            (d.len_mean, d.len_std, d.iat_mean_ns, d.iat_std_ns) = (f64::MAX, -1.0, 1.5, 2.5);
            (d.iat_min_ns, d.iat_max_ns) = (u64::MAX, u64::MAX);
            (d.syn, d.syn_ack, d.fin, d.rst, d.psh, d.urg) = (u32::MAX, 1, 2, 3, 4, 5);
            (d.ece, d.cwr, d.tcp_flags, d.zero_window) = (6, 7, u8::MAX, u32::MAX);
            d.retransmissions = u32::MAX;
            d.rtt_handshake_ns = Some(u64::MAX);
            (d.rtt_samples, d.rtt_min_ns, d.rtt_max_ns) = (u32::MAX, u64::MAX, u64::MAX);
            d.rtt_mean_ns = f64::MIN;
        }
        r.first_count = EARLY_PACKETS;
        r.first_lengths = [i64::MIN; EARLY_PACKETS];
        r.first_iats_ns = [i64::MAX; EARLY_PACKETS];
        r.app = Some(trawl_flow::AppLabel {
            app: trawl_flow::App::Tls,
            source: trawl_flow::AppSource::Payload,
        });
        r.tunnel.kind = trawl_flow::TunnelType::GtpU;
        (r.tunnel.id, r.tunnel.src_ip, r.tunnel.dst_ip) = (u32::MAX, [0xff; 16], [0xff; 16]);
        let x = &mut r.extra;
        (x.sampling_rate, x.in_if, x.out_if) = (u32::MAX, u32::MAX, u32::MAX);
        (x.src_as, x.dst_as, x.src_country, x.dst_country) = (u32::MAX, u32::MAX, *b"DE", *b"us");
        let (iface, probe) = ("i".repeat(300), "p".repeat(20_000));
        let mut out = vec![9];
        encode_flow(&r, Some(&iface), &probe, &mut out);
        let room = flow_room(&r, &iface, &probe, &r.community_id());
        assert!(out.len() - 1 <= room, "{} > {room}", out.len() - 1);
        // Every field was written: the strings, 10 addresses' and MACs' texts, the lists.
        assert!(out.len() - 1 > iface.len() + probe.len() + 5 * 39 + 2 * 17 + 2 * 100);
        assert_eq!(out[0], 9);
    }

    /// Varints of every length (the bit lengths' edges), after one- and two-byte keys: the
    /// minimal encoding, which decodes back to the value.
    #[test]
    fn emit_minimal_varints() {
        let mut values = vec![0u64, u64::MAX];
        for bits in 1..64 {
            values.extend([(1u64 << bits) - 1, 1 << bits, (1 << bits) + 1]);
        }
        for v in values {
            for (field, k) in [(1, vec![0x08]), (63, vec![0xf8, 0x03])] {
                let mut buf = [0u8; 12];
                let mut c = Cursor {
                    buf: &mut buf,
                    pos: 0,
                };
                present(field, v, &mut c);
                let n = c.pos;
                let (key, body) = buf[..n].split_at(k.len());
                assert_eq!(key, &k[..], "{v}");
                let want = (64 - (v | 1).leading_zeros() as usize).div_ceil(7);
                assert_eq!(body.len(), want, "{v}");
                let mut back = 0u64;
                for (i, b) in body.iter().enumerate() {
                    assert_eq!(b & 0x80 != 0, i + 1 < body.len(), "{v}");
                    back |= u64::from(b & 0x7f) << (7 * i);
                }
                assert_eq!(back, v);
            }
        }
    }

    /// The delimited form is the message after its minimal varint length, whatever the
    /// length (one, two or three bytes of it).
    #[test]
    fn emit_length_prefixed_messages() {
        for n in [0usize, 1, 127, 128, 300, 16383, 16384, 70000] {
            let mut out = vec![0xee];
            length_prefixed(&mut out, |o| o.extend(std::iter::repeat_n(7u8, n)));
            let mut want = vec![0xee];
            let (low, len) = varint_array(n as u64);
            want.extend_from_slice(&low[..len]);
            want.extend(std::iter::repeat_n(7u8, n));
            assert_eq!(out, want, "{n}");
        }
        let mut r = empty_record();
        r.src_ip = "10.0.0.1".parse().unwrap();
        let (mut plain, mut delimited) = (Vec::new(), Vec::new());
        encode_flow(&r, Some("eth0"), "p", &mut plain);
        encode_flow_delimited(&r, Some("eth0"), "p", &mut delimited);
        assert_eq!(delimited[0] as usize, plain.len());
        assert_eq!(&delimited[1..], &plain[..]);
    }

    #[test]
    fn emit_series_row_and_alarm() {
        let r = SeriesRow {
            second: 300,
            packets: 2,
            ..SeriesRow::default()
        };
        let mut out = Vec::new();
        encode_series(&r, "p", &mut out);
        // second = 300 (varint ac 02), packets = 2, probe "p" (field 10).
        assert_eq!(out, [0x08, 0xac, 0x02, 0x10, 2, 0x52, 1, b'p']);
        let a = Alarm {
            ts_ns: 5,
            json: serde_json::json!({"detector": "d", "event": "start"}),
        };
        out.clear();
        encode_alarm(&a, "p", &mut out);
        let json = br#"{"detector":"d","event":"start"}"#;
        let mut want = vec![0x08, 5, 0x12, 1, b'd', 0x1a, 5];
        want.extend_from_slice(b"start");
        want.extend_from_slice(&[0x22, json.len() as u8]);
        want.extend_from_slice(json);
        want.extend_from_slice(&[0x2a, 1, b'p']);
        assert_eq!(out, want);
    }
}
