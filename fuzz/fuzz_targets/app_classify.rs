//! Fuzzes the application classifier: any bytes split into the two directions' prefixes (at a
//! point the first byte chooses) under both transports and the ports the next bytes choose.
//! It must not panic, must answer the same for the same input, and the label must not depend
//! on bytes past the prefix the meter keeps (`PREFIX_BYTES`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_app::classify::{classify, PREFIX_BYTES};

fuzz_target!(|data: &[u8]| {
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let port = |i: usize| {
        let b = |j: usize| rest.get(j).copied().unwrap_or(0);
        u16::from_be_bytes([b(i), b(i + 1)]) % 2048
    };
    let (sport, dport) = (port(0), port(2));
    let cut = usize::from(head).min(rest.len());
    let (fwd, rev) = rest.split_at(cut);
    for proto in [6, 17, 1] {
        let a = classify(proto, sport, dport, fwd, rev);
        assert_eq!(a, classify(proto, sport, dport, fwd, rev));
        let kept = |p: &[u8]| p[..p.len().min(PREFIX_BYTES)].to_vec();
        assert_eq!(a, classify(proto, sport, dport, &kept(fwd), &kept(rev)));
    }
});
