//! Fuzzes the walk over a TPACKET_V3 block (the layout the kernel writes into the capture
//! ring): whatever the headers claim, the walk must not panic, and every record it returns must
//! lie inside the copied bytes and respect the snaplen (plus a restored 4-byte VLAN tag).
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_capture::live::walk_block;

fuzz_target!(|input: &[u8]| {
    let Some((&pick, block)) = input.split_first() else {
        return;
    };
    let snaplen = [64u32, 1500, 262_144][pick as usize % 3];
    let w = walk_block(block, snaplen, pick & 0x80 != 0);
    for m in &w.metas {
        assert!(m.offset + m.caplen as usize <= w.bytes.len());
        assert!(m.caplen <= snaplen);
    }
    assert_eq!(w.metas.len() as u64, w.stats.records);
});
