//! Fuzzes the tunnel decoders of `--tunnel inner`: the first byte picks a carrier (UDP to the
//! GTP-U, Geneve, Teredo, MPLS-over-UDP or VXLAN port, or GRE of an ERSPAN, WCCP, MPLS, Aruba
//! 802.11, Ethernet, IP or PPP protocol type, with or without a sequence number), the rest is
//! the tunnel header and payload inside a valid Ethernet / IPv4 frame, so every input reaches a
//! tunnel reader. No panic; a packet keyed through a tunnel names the frame's outer addresses
//! and the carrier's tunnel type; one that was not descended keeps the outer key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_capture::LinkType;
use trawl_flow::decode::{decode, DecodeConfig, Decoded, TunnelMode};
use trawl_flow::tunnel::TunnelType;

/// (IP protocol, UDP port or GRE type, GRE flags, tunnel type when descended).
const CARRIERS: [(u8, u16, u16, TunnelType); 16] = [
    (17, 2152, 0, TunnelType::GtpU),
    (17, 6081, 0, TunnelType::Geneve),
    (17, 3544, 0, TunnelType::Teredo),
    (17, 6635, 0, TunnelType::MplsUdp),
    (17, 4789, 0, TunnelType::Vxlan),
    (47, 0x88be, 0x1000, TunnelType::Erspan),
    (47, 0x88be, 0, TunnelType::Erspan),
    (47, 0x22eb, 0x1000, TunnelType::Erspan),
    (47, 0x883e, 0, TunnelType::Gre),
    (47, 0x8847, 0x2000, TunnelType::Gre),
    (47, 0x8200, 0, TunnelType::Gre),
    (47, 0x9000, 0, TunnelType::Gre),
    (47, 0x6558, 0, TunnelType::Gre),
    (47, 0x0800, 0, TunnelType::Gre),
    (47, 0x86dd, 0x8000, TunnelType::Gre),
    (47, 0x880b, 0x3001, TunnelType::Gre),
];

fn frame(proto: u8, port: u16, gre_flags: u16, body: &[u8]) -> Vec<u8> {
    let mut carrier = Vec::new();
    if proto == 17 {
        carrier.extend_from_slice(&40000u16.to_be_bytes());
        carrier.extend_from_slice(&port.to_be_bytes());
        carrier.extend_from_slice(&((8 + body.len()) as u16).to_be_bytes());
        carrier.extend_from_slice(&[0, 0]);
    } else {
        carrier.extend_from_slice(&gre_flags.to_be_bytes());
        carrier.extend_from_slice(&port.to_be_bytes());
        // Checksum/key/sequence words the flags announce (zero).
        let words = (gre_flags >> 15 & 1) + (gre_flags >> 13 & 1) + (gre_flags >> 12 & 1) + (gre_flags >> 7 & 1);
        carrier.extend(std::iter::repeat(0).take(4 * words as usize));
    }
    carrier.extend_from_slice(body);
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&((20 + carrier.len()).min(65535) as u16).to_be_bytes());
    f.extend_from_slice(&[0, 1, 0, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&carrier);
    f
}

fuzz_target!(|input: &[u8]| {
    let Some((&pick, body)) = input.split_first() else {
        return;
    };
    let (proto, port, flags, kind) = CARRIERS[pick as usize % CARRIERS.len()];
    let data = frame(proto, port, flags, body);
    let mut out = Decoded::default();
    let config = DecodeConfig {
        tunnel: TunnelMode::Inner,
    };
    let outcome = decode(LinkType::ETHERNET, &data, &config, &mut out);
    // The outer header is valid: there is always a key.
    assert!(outcome.has_key());
    let outer = (
        "10.0.0.1".parse::<std::net::IpAddr>().unwrap(),
        "10.0.0.2".parse::<std::net::IpAddr>().unwrap(),
    );
    if out.tunnel.is_some() {
        assert_eq!(out.tunnel.kind, kind);
        assert_eq!((out.tunnel.src_addr(), out.tunnel.dst_addr()), outer);
    } else {
        assert_eq!((out.src_addr(), out.dst_addr(), out.proto), (outer.0, outer.1, proto));
    }
    let first = out;
    assert_eq!(decode(LinkType::ETHERNET, &data, &config, &mut out), outcome);
    assert_eq!(first, out);
});
