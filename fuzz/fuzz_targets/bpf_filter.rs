//! Arbitrary classic BPF programs on arbitrary packets: `Filter::from_insns` either refuses the
//! program or yields a filter whose `run` returns, without panicking, for any packet.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_bpf::{Filter, Insn};

fuzz_target!(|data: &[u8]| {
    // Layout: [n_insns: u8][wire_len: u32 le][n_insns * 8 bytes of insns][packet...]
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let Some((len_bytes, rest)) = rest.split_first_chunk::<4>() else {
        return;
    };
    let wire_len = u32::from_le_bytes(*len_bytes);
    let n = usize::from(n);
    let Some((code, packet)) = rest.split_at_checked(n * 8) else {
        return;
    };
    let insns: Vec<Insn> = code
        .chunks_exact(8)
        .map(|c| {
            // Opcodes are mostly 8-bit in practice: bias half the inputs toward valid ones by
            // keeping only the low byte when the high byte is odd.
            let raw = u16::from_le_bytes([c[0], c[1]]);
            let code = if c[1] & 1 == 1 { raw & 0xff } else { raw };
            Insn {
                code,
                jt: c[2],
                jf: c[3],
                k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            }
        })
        .collect();
    if let Ok(filter) = Filter::from_insns(insns) {
        let verdict = filter.run(packet, wire_len);
        assert_eq!(filter.matches(packet, wire_len), verdict != 0);
    }
});
