//! Flow records as ClickHouse `RowBinary` rows of the flow table ([`crate::schema::FLOW_COLUMNS`]
//! order): little-endian integers, `Date` as days and `DateTime` as seconds since the epoch,
//! strings with a LEB128 length, `FixedString(16)` as its 16 bytes. 18.16 and current
//! servers read it alike.
use std::net::IpAddr;

use trawl_flow::{FlowRecord, RecordExtra};

/// An address as the 16 bytes of the `src_ip`/`dst_ip` columns: IPv6 as is, IPv4 mapped
/// (`::ffff:a.b.c.d`).
pub fn ip16(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) => a.octets(),
    }
}

/// A `String`: LEB128 length, then the bytes.
pub(crate) fn string(s: &str, out: &mut Vec<u8>) {
    let mut n = s.len() as u64;
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(s.as_bytes());
}

/// Appends one row: `probe` and `iface` fill the columns of those names.
pub fn flow_row(r: &FlowRecord<'_>, probe: &str, iface: &str, out: &mut Vec<u8>) {
    let secs = r.first_ns / 1_000_000_000;
    out.extend_from_slice(&((secs / 86_400) as u16).to_le_bytes());
    out.extend_from_slice(&(secs as u32).to_le_bytes());
    string(probe, out);
    string(iface, out);
    out.extend_from_slice(&ip16(r.src_ip));
    out.extend_from_slice(&ip16(r.dst_ip));
    out.extend_from_slice(&r.src_port.to_le_bytes());
    out.extend_from_slice(&r.dst_port.to_le_bytes());
    out.push(r.proto);
    out.extend_from_slice(&r.vlan.to_le_bytes());
    for v in [
        r.first_ns,
        r.last_ns,
        r.fwd.packets,
        r.rev.packets,
        r.fwd.bytes,
        r.rev.bytes,
        r.fwd.ip_bytes,
        r.rev.ip_bytes,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.push(r.fwd.tcp_flags);
    out.push(r.rev.tcp_flags);
    out.extend_from_slice(&r.fwd.retransmissions.to_le_bytes());
    out.extend_from_slice(&r.rev.retransmissions.to_le_bytes());
    out.push(r.end_reason as u8);
    let (app, app_source) = r.app.map_or(("", ""), |l| (l.app.name(), l.source.name()));
    string(app, out);
    string(app_source, out);
    let x = &r.extra;
    out.extend_from_slice(&x.src_as.to_le_bytes());
    out.extend_from_slice(&x.dst_as.to_le_bytes());
    string(RecordExtra::country_text(&x.src_country), out);
    string(RecordExtra::country_text(&x.dst_country), out);
    for d in [&r.fwd, &r.rev] {
        // Nullable: a null flag byte, then the value when not null.
        let nullable = |v: Option<[u8; 8]>, out: &mut Vec<u8>| match v {
            Some(b) => {
                out.push(0);
                out.extend_from_slice(&b);
            }
            None => out.push(1),
        };
        let sampled = d.rtt_samples > 0;
        nullable(d.rtt_handshake_ns.map(u64::to_le_bytes), out);
        out.extend_from_slice(&d.rtt_samples.to_le_bytes());
        nullable(sampled.then(|| d.rtt_min_ns.to_le_bytes()), out);
        nullable(sampled.then(|| d.rtt_max_ns.to_le_bytes()), out);
        nullable(sampled.then(|| d.rtt_mean_ns.to_le_bytes()), out);
    }
    let t = &r.tunnel;
    string(t.kind.name(), out);
    if t.is_some() {
        out.extend_from_slice(&ip16(t.src_addr()));
        out.extend_from_slice(&ip16(t.dst_addr()));
        out.extend_from_slice(&t.id.to_le_bytes());
    } else {
        out.extend_from_slice(&[0; 36]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_row_layout() {
        let mut r = crate::message::parse(
            br#"{"src_ip":"10.0.0.1","dst_ip":"::1","src_port":1,"dst_port":2,"proto":"tcp","first_ns":86400000000001,"last_ns":86401000000000,"fwd_packets":3,"end_reason":"fin"}"#,
        )
        .unwrap()
        .record;
        r.vlan = 5;
        let mut out = Vec::new();
        flow_row(&r, "p", "eth0", &mut out);
        // date = day 1, time = 86400 s
        assert_eq!(&out[..6], &[1, 0, 0x80, 0x51, 0x01, 0]);
        // probe "p", iface "eth0"
        assert_eq!(&out[6..13], b"\x01p\x04eth0");
        // src_ip ::ffff:10.0.0.1
        assert_eq!(
            &out[13..29],
            &[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]
        );
        assert_eq!(out[45..52], [1, 0, 2, 0, 6, 5, 0]);
        let first = 52 + 8 * 8 + 2 + 8 + 1;
        assert_eq!(out[first - 1], 2, "fin");
        // No label, AS numbers, countries, round trips (null: flag 1; samples 0) or tunnel.
        let mut later = vec![0; 12];
        for _ in 0..2 {
            later.extend([1, 0, 0, 0, 0, 1, 1, 1]);
        }
        later.push(0);
        later.extend([0; 36]);
        assert_eq!(out[first..], later[..]);
    }
}
