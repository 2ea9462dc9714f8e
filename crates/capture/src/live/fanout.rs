//! Symmetric traffic striping across capture workers (Nprobe's XOR striping), done in the
//! kernel by a classic BPF program attached to the PACKET_FANOUT group.
//!
//! The program XORs the 32-bit words of the source and destination addresses, folds the result
//! to its low bits, and returns it; the kernel takes it modulo the number of sockets in the group.
//! XOR is commutative, so both directions of a conversation (and every fragment of a datagram)
//! land on the same worker whatever the NIC's receive hash does, which the kernel's own
//! PACKET_FANOUT_HASH does not promise when the NIC supplies an asymmetric Toeplitz hash.
//!
//! Loads use the kernel's network-header-relative offsets (`SKF_NET_OFF`) and the `protocol`
//! ancillary field, because the fanout program runs on received packets with `skb->data` at the
//! network header and on sent packets with it at the link header.
use super::sys::SockFilter;

const SKF_AD_OFF: i32 = -0x1000;
const SKF_AD_PROTOCOL: i32 = 0;
const SKF_NET_OFF: i32 = -0x10_0000;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JA: u16 = 0x05;
const XOR_X: u16 = 0xac;
const RSH_K: u16 = 0x74;
const TAX: u16 = 0x07;
const RET_A: u16 = 0x16;
const RET_K: u16 = 0x06;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> SockFilter {
    SockFilter { code, jt, jf, k }
}

fn load_net(offset: i32) -> SockFilter {
    insn(LD_W_ABS, 0, 0, (SKF_NET_OFF + offset) as u32)
}

/// The classic BPF steering program: worker = fold(xor of address words) mod workers.
/// Non-IP packets all go to worker 0.
pub fn symmetric_program() -> Vec<SockFilter> {
    // IPv4: saddr at 12, daddr at 16. IPv6: saddr at 8..24, daddr at 24..40.
    let v4_words = [12, 16];
    let v6_words = [8, 12, 16, 20, 24, 28, 32, 36];
    let mut v4 = vec![load_net(v4_words[0])];
    for &w in &v4_words[1..] {
        v4.extend([insn(TAX, 0, 0, 0), load_net(w), insn(XOR_X, 0, 0, 0)]);
    }
    let mut v6 = vec![load_net(v6_words[0])];
    for &w in &v6_words[1..] {
        v6.extend([insn(TAX, 0, 0, 0), load_net(w), insn(XOR_X, 0, 0, 0)]);
    }
    let fold = [
        insn(TAX, 0, 0, 0),
        insn(RSH_K, 0, 0, 16),
        insn(XOR_X, 0, 0, 0),
        insn(TAX, 0, 0, 0),
        insn(RSH_K, 0, 0, 8),
        insn(XOR_X, 0, 0, 0),
        insn(RET_A, 0, 0, 0),
    ];
    let mut p = Vec::new();
    p.push(insn(LD_W_ABS, 0, 0, (SKF_AD_OFF + SKF_AD_PROTOCOL) as u32));
    // jeq 0x0800: fall into the IPv4 block; else test IPv6 (one instruction on).
    p.push(insn(JEQ_K, 0, (v4.len() + 1) as u8, 0x0800));
    p.extend(v4);
    // After IPv4, jump over the IPv6 test, the IPv6 block, its jump and the "ret 0".
    let v6_len = v6.len();
    p.push(insn(JA, 0, 0, (1 + v6_len + 2) as u32));
    p.push(insn(JEQ_K, 0, (v6_len + 1) as u8, 0x86dd));
    p.extend(v6);
    p.push(insn(JA, 0, 0, 1));
    p.push(insn(RET_K, 0, 0, 0));
    p.extend(fold);
    p
}

/// What [`symmetric_program`] computes, for a packet whose network header is `l3` and whose
/// EtherType is `ethertype`: the worker index is this value modulo the number of workers.
pub fn symmetric_hash(ethertype: u16, l3: &[u8]) -> u32 {
    let words: &[usize] = match ethertype {
        0x0800 => &[12, 16],
        0x86dd => &[8, 12, 16, 20, 24, 28, 32, 36],
        _ => return 0,
    };
    let mut a = 0u32;
    for &w in words {
        let Some(b) = l3.get(w..w + 4) else {
            // The kernel aborts the program (returning 0) when a load is out of bounds.
            return 0;
        };
        a ^= u32::from_be_bytes(b.try_into().expect("4 bytes"));
    }
    a ^= a >> 16;
    a ^= a >> 8;
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs the program the way the kernel would, with the network header at `l3`.
    fn interpret(program: &[SockFilter], proto: u16, l3: &[u8]) -> u32 {
        let (mut a, mut x, mut pc) = (0u32, 0u32, 0usize);
        loop {
            let i = program[pc];
            pc += 1;
            match i.code {
                LD_W_ABS => {
                    let k = i.k as i32;
                    if k == SKF_AD_OFF + SKF_AD_PROTOCOL {
                        a = u32::from(proto);
                    } else {
                        let off = (k - SKF_NET_OFF) as usize;
                        match l3.get(off..off + 4) {
                            Some(b) => a = u32::from_be_bytes(b.try_into().unwrap()),
                            None => return 0,
                        }
                    }
                }
                JEQ_K => pc += usize::from(if a == i.k { i.jt } else { i.jf }),
                JA => pc += i.k as usize,
                XOR_X => a ^= x,
                RSH_K => a >>= i.k,
                TAX => x = a,
                RET_A => return a,
                RET_K => return i.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    fn v4(src: [u8; 4], dst: [u8; 4]) -> Vec<u8> {
        let mut h = vec![0x45, 0, 0, 20, 0, 0, 0, 0, 64, 6, 0, 0];
        h.extend(src);
        h.extend(dst);
        h
    }

    fn v6(src: [u8; 16], dst: [u8; 16]) -> Vec<u8> {
        let mut h = vec![0x60, 0, 0, 0, 0, 0, 6, 64];
        h.extend(src);
        h.extend(dst);
        h
    }

    #[test]
    fn program_matches_reference_and_is_symmetric() {
        let p = symmetric_program();
        let cases = [
            (
                0x0800,
                v4([10, 0, 0, 1], [192, 168, 7, 9]),
                v4([192, 168, 7, 9], [10, 0, 0, 1]),
            ),
            (
                0x0800,
                v4([1, 2, 3, 4], [1, 2, 3, 5]),
                v4([1, 2, 3, 5], [1, 2, 3, 4]),
            ),
            (
                0x86dd,
                v6(
                    [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
                ),
                v6(
                    [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8],
                    [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                ),
            ),
        ];
        for (proto, fwd, rev) in cases {
            let h = interpret(&p, proto, &fwd);
            assert_eq!(h, symmetric_hash(proto, &fwd));
            assert_eq!(h, interpret(&p, proto, &rev));
            assert_ne!(h, 0, "a real address pair should not hash to 0 here");
        }
        assert_eq!(interpret(&p, 0x0806, &[0; 28]), 0);
        assert_eq!(interpret(&p, 0x0800, &[0x45; 10]), 0, "short header");
    }

    #[test]
    fn spreads_addresses_over_workers() {
        let mut per_worker = [0u32; 4];
        for i in 0..1000u32 {
            let src = (0x0a00_0000 + i * 7919).to_be_bytes();
            let dst = (0xc0a8_0000 + i * 104_729).to_be_bytes();
            per_worker[(symmetric_hash(0x0800, &v4(src, dst)) % 4) as usize] += 1;
        }
        for n in per_worker {
            assert!((150..350).contains(&n), "uneven striping: {per_worker:?}");
        }
    }
}
