//! Fuzzes the SIP parser and the call table's SIP path: any bytes are parsed as a message (as
//! a datagram would be), its From/To split, its SDP body parsed, and the event fed to a small
//! call table. Nothing may panic; a parsed message never claims more bytes than it was given.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_voip::{sip, Output, SipEvent, Tracker, TrackerConfig};

fuzz_target!(|data: &[u8]| {
    let _ = sip::looks_like_sip(data);
    let Ok(m) = sip::parse(data) else {
        return;
    };
    assert!(m.len <= data.len());
    let _ = sip::name_addr(m.from);
    let _ = sip::name_addr(m.to);
    let (a, b) = ("10.0.0.1:5060".parse().unwrap(), "[2001:db8::2]:5060".parse().unwrap());
    let cfg = TrackerConfig {
        max_calls: 2,
        ..TrackerConfig::default()
    };
    let mut table = Tracker::new(cfg).unwrap();
    let mut out = Output::default();
    let ev = SipEvent::new(1, a, b, false, &m);
    table.on_sip(&ev, &mut out);
    table.on_sip(&SipEvent { src: b, dst: a, ..ev }, &mut out);
    table.finish(&mut out);
});
