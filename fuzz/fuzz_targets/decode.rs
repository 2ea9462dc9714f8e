//! Fuzzes the flow decoder: the first byte picks a link type, the rest is the frame. Both
//! tunnel modes run on every input. The decoder must never panic; a few invariants that hold
//! for every input are checked too, and `outer_addresses` (the lane of `trawl flows -r F
//! --workers N`) must give the outer decode's addresses exactly when it has a key.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_capture::LinkType;
use trawl_flow::decode::{
    decode, outer_addresses, DecodeConfig, Decoded, ParseOutcome, TunnelMode,
};

const LINKS: [LinkType; 12] = [
    LinkType::ETHERNET,
    LinkType::LINUX_SLL,
    LinkType::LINUX_SLL2,
    LinkType::NULL,
    LinkType::LOOP,
    LinkType::RAW,
    LinkType::RAW_BSD,
    LinkType::RAW_OPENBSD,
    LinkType::IPV4,
    LinkType::IPV6,
    // Unsupported: must be reported as such.
    LinkType(105),
    LinkType(127),
];

fuzz_target!(|input: &[u8]| {
    let Some((&pick, data)) = input.split_first() else {
        return;
    };
    let link = LINKS[pick as usize % LINKS.len()];
    let mut out = Decoded::default();
    for tunnel in [TunnelMode::Outer, TunnelMode::Inner] {
        let outcome = decode(link, data, &DecodeConfig { tunnel }, &mut out);
        if link.0 == 105 || link.0 == 127 {
            assert_eq!(outcome, ParseOutcome::UnsupportedLinkType);
        }
        if outcome.has_key() {
            assert!(out.ip_version == 4 || out.ip_version == 6);
        } else {
            assert_eq!(out.ip_version, 0);
            assert!(!out.tcp_valid);
        }
        // The payload starts inside the IP packet's stated extent.
        assert!(out.payload_offset as usize <= data.len() + 65_535 + 40);
        if tunnel == TunnelMode::Outer {
            let want = outcome.has_key().then_some((out.src_ip, out.dst_ip));
            let mut link_fields = Decoded::default();
            assert_eq!(outer_addresses(link, data, &mut link_fields), want);
        }
        // A re-run on the same bytes gives the same result (no state leaks between calls).
        let first = out;
        let again = decode(link, data, &DecodeConfig { tunnel }, &mut out);
        assert_eq!((outcome, first), (again, out));
    }
});
