//! Fuzzes the sFlow v5 datagram parser and the collector decoder's sFlow path. The input is
//! one datagram (its first word forced to version 5 half of the time, so most inputs reach
//! the samples). The parser must never panic, report errors inside the datagram, and the
//! decoder must give no more records than the datagram has raw packet headers, each scaled
//! by a rate of at least 1.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_export::sflow::{parse, Event};
use trawl_export::{Decoder, DecoderConfig, Item};

fuzz_target!(|input: &[u8]| {
    let mut msg = input.to_vec();
    if msg.first().is_some_and(|b| b & 1 == 1) && msg.len() >= 4 {
        msg[..4].copy_from_slice(&5u32.to_be_bytes());
    }
    let mut headers = 0usize;
    let result = parse(&msg, &mut |_, e| match e {
        Event::Packet(_, raw) => {
            headers += 1;
            assert!(raw.bytes.len() <= msg.len());
        }
        Event::Malformed(e) => assert!(e.offset <= msg.len(), "{e}"),
        _ => {}
    });
    if let Err(e) = &result {
        assert!(e.offset <= msg.len(), "{e}");
    }
    let mut dec = Decoder::new(DecoderConfig {
        max_templates: 8,
        ..DecoderConfig::default()
    });
    dec.set_receive_time(1);
    let mut flows = 0usize;
    dec.decode("192.0.2.1:6343".parse().unwrap(), &msg, &mut |_, item| {
        if let Item::Flow(r) = item {
            flows += 1;
            assert!(r.fwd.packets >= 1);
            assert!(r.extra.sampling_rate >= 1);
            assert_eq!(r.first_ns, 1);
        }
    });
    assert!(flows <= headers);
    assert!(dec.sflow_interfaces().len() <= 8);
});
