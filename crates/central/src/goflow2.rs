//! GoFlow2's messages (`goflow2 -format=bin -transport=kafka`, GoFlow2 v2) read into trawl
//! flow records: each Kafka message is one `flowpb.FlowMessage` (GoFlow2's `pb/flow.proto`)
//! after a varint length prefix (Protobuf's delimited form, `protodelim`, which is what GoFlow2
//! v2 writes); a value whose prefix does not give its length is read as a message without one.
//!
//! A FlowMessage is one direction of a flow, so the record is one-way: everything in the
//! forward counters, nothing in the reverse ones (`docs/specs/kafka.md`, "GoFlow2's topic").
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use trawl_flow::FlowRecord;

use crate::message::{Item, Parsed, Wire};
use crate::Error;

fn bad(what: impl Into<String>) -> Error {
    Error::BadMessage(what.into())
}

/// `FlowMessage.type`: sFlow v5, whose `bytes` are the sampled frames' lengths.
const SFLOW_5: u64 = 1;

/// The message after the length prefix, or the whole value when there is none.
fn unprefixed(value: &[u8]) -> &[u8] {
    let mut w = Wire::new(value);
    match w.varint_at_start() {
        Some((len, at)) if value.len() - at == len as usize => &value[at..],
        _ => value,
    }
}

fn addr(field: u32, b: &[u8]) -> Result<IpAddr, Error> {
    match b.len() {
        4 => Ok(IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3]))),
        16 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(b);
            Ok(IpAddr::V6(Ipv6Addr::from(a)))
        }
        n => Err(bad(format!(
            "GoFlow2: field {field} is an address of {n} bytes"
        ))),
    }
}

/// A MAC address held in the low 48 bits of a `uint64`, most significant byte first.
fn mac(v: u64) -> [u8; 6] {
    let b = v.to_be_bytes();
    [b[2], b[3], b[4], b[5], b[6], b[7]]
}

/// Reads one message value of a GoFlow2 topic.
pub fn parse(value: &[u8]) -> Result<Parsed<'static>, Error> {
    let msg = unprefixed(value);
    let mut r = FlowRecord::empty();
    let (mut kind, mut rate, mut bytes, mut received) = (0, 0, 0, 0);
    let (mut src_vlan, mut vlan_id) = (0u16, 0u16);
    let mut seen_src = false;
    let mut w = Wire::new(msg);
    while let Some((field, item)) = w.next()? {
        match (field, item) {
            (1, Item::Varint(v)) => kind = v,
            (3, Item::Varint(v)) => rate = v,
            (6, Item::Bytes(b)) => {
                r.src_ip = addr(6, b)?;
                seen_src = true;
            }
            (7, Item::Bytes(b)) => r.dst_ip = addr(7, b)?,
            (9, Item::Varint(v)) => bytes = v,
            (10, Item::Varint(v)) => r.fwd.packets = v,
            (20, Item::Varint(v)) => r.proto = v as u8,
            (21, Item::Varint(v)) => r.src_port = v as u16,
            (22, Item::Varint(v)) => r.dst_port = v as u16,
            (26, Item::Varint(v)) => r.fwd.tcp_flags = v as u8,
            (27, Item::Varint(v)) => r.src_mac = mac(v),
            (28, Item::Varint(v)) => r.dst_mac = mac(v),
            (29, Item::Varint(v)) => vlan_id = v as u16,
            (33, Item::Varint(v)) => src_vlan = v as u16,
            (110, Item::Varint(v)) => received = v,
            (111, Item::Varint(v)) => r.first_ns = v,
            (112, Item::Varint(v)) => r.last_ns = v,
            _ => {}
        }
    }
    if !seen_src {
        return Err(bad(
            "GoFlow2: no `src_addr` (field 6): not a flowpb.FlowMessage",
        ));
    }
    // Sampled flows count what they stand for (a rate of 0 or 1: not sampled).
    let scale = rate.max(1);
    r.fwd.packets = r.fwd.packets.saturating_mul(scale);
    let bytes = bytes.saturating_mul(scale);
    // sFlow's bytes are frame lengths; NetFlow's and IPFIX's octets are IP bytes, as trawl's
    // own collector reads them.
    if kind == SFLOW_5 {
        r.fwd.bytes = bytes;
    } else {
        r.fwd.ip_bytes = bytes;
    }
    r.vlan = if vlan_id != 0 { vlan_id } else { src_vlan };
    // Without flow times (an sFlow sample), the time it was received.
    if r.first_ns == 0 {
        r.first_ns = received;
    }
    if r.last_ns < r.first_ns {
        r.last_ns = r.first_ns;
    }
    Ok(Parsed {
        record: r,
        iface: None,
        probe: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// type IPFIX, 10.0.0.1:1234 -> 10.0.0.2:53 udp, 3 packets of 300 bytes, times 5 and 9.
    const MESSAGE: &[u8] = b"\x08\x04\
        \x32\x04\x0a\x00\x00\x01\
        \x3a\x04\x0a\x00\x00\x02\
        \x48\xac\x02\
        \x50\x03\
        \xa0\x01\x11\
        \xa8\x01\xd2\x09\
        \xb0\x01\x35\
        \xf8\x06\x05\
        \x80\x07\x09";

    #[test]
    fn parse_delimited_and_plain() {
        let mut prefixed = vec![MESSAGE.len() as u8];
        prefixed.extend_from_slice(MESSAGE);
        for value in [&prefixed[..], MESSAGE] {
            let p = parse(value).unwrap();
            let r = &p.record;
            assert_eq!(r.src_ip.to_string(), "10.0.0.1");
            assert_eq!(r.dst_ip.to_string(), "10.0.0.2");
            assert_eq!((r.src_port, r.dst_port, r.proto), (1234, 53, 17));
            assert_eq!((r.fwd.packets, r.fwd.ip_bytes, r.fwd.bytes), (3, 300, 0));
            assert_eq!((r.first_ns, r.last_ns), (5, 9));
            assert_eq!(r.rev, trawl_flow::DirectionRecord::default());
        }
    }

    #[test]
    fn sampled_sflow_is_scaled() {
        // type sFlow, sampling rate 100, 10.0.0.1 -> 10.0.0.2, 1 packet of 64 bytes.
        let p = parse(
            b"\x08\x01\x18\x64\x32\x04\x0a\x00\x00\x01\x3a\x04\x0a\x00\x00\x02\x48\x40\x50\x01",
        )
        .unwrap();
        assert_eq!((p.record.fwd.packets, p.record.fwd.bytes), (100, 6400));
    }

    #[test]
    fn truncated_and_foreign_are_errors() {
        assert!(parse(b"\x08\x04").is_err(), "no src_addr");
        assert!(parse(&MESSAGE[..MESSAGE.len() - 1]).is_err());
    }
}
