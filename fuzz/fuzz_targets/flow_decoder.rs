//! Fuzzes the IPFIX / NetFlow v9 / v5 collector decoder. The input is split into messages
//! (two length bytes each) decoded in turn by one decoder with a small template cache, so
//! templates learnt from one message shape the decoding of the next, and floods hit the bound.
//! The decoder must never panic, never cache more templates than allowed, and report no more
//! records than the bytes could hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_export::{Decoder, DecoderConfig, Item};

fuzz_target!(|input: &[u8]| {
    let mut dec = Decoder::new(DecoderConfig {
        max_templates: 8,
        ..DecoderConfig::default()
    });
    let exporters = ["192.0.2.1:4739".parse().unwrap(), "192.0.2.2:2055".parse().unwrap()];
    let mut rest = input;
    let mut i = 0;
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let msg = &rest[2..2 + len];
        rest = &rest[2 + len..];
        let mut flows = 0usize;
        let (n, _) = dec.decode(exporters[i % 2], msg, &mut |_, item| {
            if let Item::Flow(r) = item {
                flows += 1;
                assert!(r.first_count <= r.first_lengths.len());
            }
        });
        i += 1;
        // Every record takes at least one byte of the message.
        assert!(n <= msg.len());
        assert!(flows <= n);
        assert!(dec.templates_cached() <= 8);
    }
});
