//! Classic BPF programs: the instruction format, libpcap's validation rules, and the
//! interpreter.
//!
//! A program is checked once ([`Program::new`]) and decoded into [`Op`]s whose jump targets are
//! absolute indexes already proven in range, so [`Program::run`] is a tight `match` loop with no
//! per-packet allocation and no way to index outside the program, the packet or the scratch
//! memory. The semantics are those of libpcap's `pcap_offline_filter` (`bpf_filter.c`), which is
//! what tcpdump and Wireshark apply to capture files:
//!
//! - a load that reaches past the captured bytes ends the program with 0 (reject);
//! - division or modulo by a zero `X` ends the program with 0; by a zero constant is refused at
//!   validation;
//! - shifts by `X >= 32` give 0; shifts by a constant >= 32 are refused at validation;
//! - `len` is the wire length, which may exceed the captured length;
//! - unconditional jumps may go backwards (libpcap's `ip6 protochain` loops): at most
//!   [`MAX_BACKWARD_JUMPS`] are taken per packet, the next one rejects the packet.

use std::fmt;

/// Largest program accepted, as in libpcap's user-space validator (`BPF_MAXINSNS` there): long
/// enough for anything `pcap_compile` can produce.
pub const MAX_INSNS: usize = 3_060_000;

/// Backward jumps taken per packet before the packet is rejected; libpcap's
/// `MAX_BACKWARD_JUMPS`. It keeps a looping program from running forever.
pub const MAX_BACKWARD_JUMPS: u32 = 64;

/// Scratch memory words (`M[0]`..`M[15]`), `BPF_MEMWORDS`.
pub const MEM_WORDS: usize = 16;

/// Opcode bits of classic BPF (`pcap/bpf.h`), for writing programs by hand.
///
/// An opcode is the OR of a class and the fields that class uses, e.g.
/// `LD | H | ABS` is `ldh [k]` and `JMP | JEQ | K` is `jeq #k`.
#[allow(missing_docs)] // reason: the names are the standard ones from pcap/bpf.h
pub mod op {
    // Classes.
    pub const LD: u16 = 0x00;
    pub const LDX: u16 = 0x01;
    pub const ST: u16 = 0x02;
    pub const STX: u16 = 0x03;
    pub const ALU: u16 = 0x04;
    pub const JMP: u16 = 0x05;
    pub const RET: u16 = 0x06;
    pub const MISC: u16 = 0x07;
    // Load sizes.
    pub const W: u16 = 0x00;
    pub const H: u16 = 0x08;
    pub const B: u16 = 0x10;
    // Load modes.
    pub const IMM: u16 = 0x00;
    pub const ABS: u16 = 0x20;
    pub const IND: u16 = 0x40;
    pub const MEM: u16 = 0x60;
    pub const LEN: u16 = 0x80;
    pub const MSH: u16 = 0xa0;
    // ALU operations.
    pub const ADD: u16 = 0x00;
    pub const SUB: u16 = 0x10;
    pub const MUL: u16 = 0x20;
    pub const DIV: u16 = 0x30;
    pub const OR: u16 = 0x40;
    pub const AND: u16 = 0x50;
    pub const LSH: u16 = 0x60;
    pub const RSH: u16 = 0x70;
    pub const NEG: u16 = 0x80;
    pub const MOD: u16 = 0x90;
    pub const XOR: u16 = 0xa0;
    // Jumps.
    pub const JA: u16 = 0x00;
    pub const JEQ: u16 = 0x10;
    pub const JGT: u16 = 0x20;
    pub const JGE: u16 = 0x30;
    pub const JSET: u16 = 0x40;
    // Operand source (ALU, JMP) and return value (RET).
    pub const K: u16 = 0x00;
    pub const X: u16 = 0x08;
    pub const A: u16 = 0x10;
    // MISC operations.
    pub const TAX: u16 = 0x00;
    pub const TXA: u16 = 0x80;
}

/// One classic BPF instruction, laid out as `struct bpf_insn` / `struct sock_filter`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Insn {
    /// Opcode: class | size/op | mode/source (see [`op`]).
    pub code: u16,
    /// Conditional jumps: instructions to skip when the test is true.
    pub jt: u8,
    /// Conditional jumps: instructions to skip when the test is false.
    pub jf: u8,
    /// The constant operand (offset, immediate, jump distance, memory index, return value).
    pub k: u32,
}

impl Insn {
    /// An instruction that uses `k` only.
    pub const fn stmt(code: u16, k: u32) -> Insn {
        Insn {
            code,
            jt: 0,
            jf: 0,
            k,
        }
    }

    /// A conditional jump.
    pub const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
        Insn { code, jt, jf, k }
    }
}

/// Prints the instruction as in `tcpdump -dd`, the C initialiser of a `struct bpf_insn`.
impl fmt::Display for Insn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{{ 0x{:x}, {}, {}, 0x{:08x} }}",
            self.code, self.jt, self.jf, self.k
        )
    }
}

/// Why a program was refused. Mirrors the checks of libpcap's `bpf_validate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Invalid {
    /// The program has no instruction.
    Empty,
    /// The program is longer than [`MAX_INSNS`].
    TooLong,
    /// The opcode is not one the interpreter runs.
    BadOpcode,
    /// A scratch memory index is 16 or more.
    BadMemIndex,
    /// Division or modulo by the constant 0.
    DivByZero,
    /// Shift by a constant of 32 or more.
    BadShift,
    /// A jump lands outside the program (or, for `ja`, on itself).
    JumpOutOfRange,
    /// The last instruction is not a `ret`.
    NoFinalRet,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Invalid::Empty => "program is empty",
            Invalid::TooLong => "program is longer than 3060000 instructions",
            Invalid::BadOpcode => "unknown opcode",
            Invalid::BadMemIndex => "scratch memory index is not below 16",
            Invalid::DivByZero => "division or modulo by the constant 0",
            Invalid::BadShift => "shift by a constant of 32 or more",
            Invalid::JumpOutOfRange => "jump target outside the program",
            Invalid::NoFinalRet => "last instruction is not a ret",
        })
    }
}

/// A decoded instruction. Jump targets are absolute indexes, checked at decode time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    RetK(u32),
    RetA,
    LdAbsW(u32),
    LdAbsH(u32),
    LdAbsB(u32),
    LdIndW(u32),
    LdIndH(u32),
    LdIndB(u32),
    LdLen,
    LdxLen,
    LdxMsh(u32),
    LdImm(u32),
    LdxImm(u32),
    LdMem(u8),
    LdxMem(u8),
    St(u8),
    Stx(u8),
    Ja(u32),
    /// A backward `ja`: counted against [`MAX_BACKWARD_JUMPS`].
    JaBack(u32),
    JeqK(u32, u32, u32),
    JgtK(u32, u32, u32),
    JgeK(u32, u32, u32),
    JsetK(u32, u32, u32),
    JeqX(u32, u32),
    JgtX(u32, u32),
    JgeX(u32, u32),
    JsetX(u32, u32),
    AddK(u32),
    SubK(u32),
    MulK(u32),
    DivK(u32),
    ModK(u32),
    AndK(u32),
    OrK(u32),
    XorK(u32),
    LshK(u32),
    RshK(u32),
    AddX,
    SubX,
    MulX,
    DivX,
    ModX,
    AndX,
    OrX,
    XorX,
    LshX,
    RshX,
    Neg,
    Tax,
    Txa,
    /// `ldh [off]` then `jeq #c` (the fused pair; the `jeq` stays in place for other jumps).
    LdAbsHJeq(u16, u16, u32, u32),
    /// `ldb [off]` then `jeq #c`.
    LdAbsBJeq(u16, u16, u32, u32),
    /// `ld [off]` then `jeq #c`.
    LdAbsWJeq(u16, u32, u32, u32),
    /// `ldh [x + off]` then `jeq #c`.
    LdIndHJeq(u16, u16, u32, u32),
}

/// A validated, decoded program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Program {
    ops: Box<[Op]>,
}

/// A validation failure: which instruction and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rejected {
    pub index: usize,
    pub reason: Invalid,
}

impl Program {
    /// Validates `insns` with libpcap's rules and decodes them.
    pub(crate) fn new(insns: &[Insn]) -> Result<Program, Rejected> {
        let len = insns.len();
        if len == 0 {
            return Err(Rejected {
                index: 0,
                reason: Invalid::Empty,
            });
        }
        if len > MAX_INSNS {
            return Err(Rejected {
                index: MAX_INSNS,
                reason: Invalid::TooLong,
            });
        }
        let mut ops = Vec::with_capacity(len);
        for (index, insn) in insns.iter().enumerate() {
            let op = decode(index, len, insn).map_err(|reason| Rejected { index, reason })?;
            ops.push(op);
        }
        if !matches!(ops[len - 1], Op::RetK(_) | Op::RetA) {
            return Err(Rejected {
                index: len - 1,
                reason: Invalid::NoFinalRet,
            });
        }
        fuse(&mut ops);
        Ok(Program {
            ops: ops.into_boxed_slice(),
        })
    }

    /// Runs the program: the return value is the number of bytes to keep, 0 meaning reject.
    #[inline]
    pub(crate) fn run(&self, pkt: &[u8], wire_len: u32) -> u32 {
        run(&self.ops, pkt, wire_len)
    }

    /// Replaces the value of every `ret #k` with a nonzero `k` (an accept) by `accept`.
    pub(crate) fn set_accept_len(&mut self, accept: u32) {
        for op in self.ops.iter_mut() {
            if let Op::RetK(k) = op {
                if *k != 0 {
                    *k = accept;
                }
            }
        }
    }
}

/// Fuses a load followed by `jeq`, the commonest pair in compiled filters (`ldh [12]; jeq
/// #0x800`), into one op: one dispatch instead of two. The `jeq` keeps its place, so jumps that
/// land on it still work; fusion only applies when the operands fit the fused op.
fn fuse(ops: &mut [Op]) {
    for i in 0..ops.len().saturating_sub(1) {
        let Op::JeqK(c, t, f) = ops[i + 1] else {
            continue;
        };
        let (Ok(k), c16) = (
            match ops[i] {
                Op::LdAbsH(k) | Op::LdAbsB(k) | Op::LdAbsW(k) | Op::LdIndH(k) => u16::try_from(k),
                _ => continue,
            },
            u16::try_from(c),
        ) else {
            continue;
        };
        ops[i] = match (ops[i], c16) {
            (Op::LdAbsW(_), _) => Op::LdAbsWJeq(k, c, t, f),
            (Op::LdAbsH(_), Ok(c)) => Op::LdAbsHJeq(k, c, t, f),
            (Op::LdAbsB(_), Ok(c)) => Op::LdAbsBJeq(k, c, t, f),
            (Op::LdIndH(_), Ok(c)) => Op::LdIndHJeq(k, c, t, f),
            _ => continue,
        };
    }
}

/// Decodes one instruction, applying libpcap's `pcapint_valid_insn` and jump checks.
fn decode(index: usize, len: usize, insn: &Insn) -> Result<Op, Invalid> {
    use op::*;
    let k = insn.k;
    let mem = || -> Result<u8, Invalid> {
        if (k as usize) < MEM_WORDS {
            Ok(k as u8)
        } else {
            Err(Invalid::BadMemIndex)
        }
    };
    // Conditional jump targets: relative to the next instruction; len <= MAX_INSNS, so no
    // overflow in these sums.
    let from = index + 1;
    let cond = || -> Result<(u32, u32), Invalid> {
        let t = from + insn.jt as usize;
        let f = from + insn.jf as usize;
        if t >= len || f >= len {
            return Err(Invalid::JumpOutOfRange);
        }
        Ok((t as u32, f as u32))
    };
    let op = match insn.code {
        c if c == RET | K => Op::RetK(k),
        c if c == RET | A => Op::RetA,
        c if c == LD | W | ABS => Op::LdAbsW(k),
        c if c == LD | H | ABS => Op::LdAbsH(k),
        c if c == LD | B | ABS => Op::LdAbsB(k),
        c if c == LD | W | LEN => Op::LdLen,
        c if c == LDX | W | LEN => Op::LdxLen,
        c if c == LD | W | IND => Op::LdIndW(k),
        c if c == LD | H | IND => Op::LdIndH(k),
        c if c == LD | B | IND => Op::LdIndB(k),
        c if c == LDX | MSH | B => Op::LdxMsh(k),
        c if c == LD | IMM => Op::LdImm(k),
        c if c == LDX | IMM => Op::LdxImm(k),
        c if c == LD | MEM => Op::LdMem(mem()?),
        c if c == LDX | MEM => Op::LdxMem(mem()?),
        c if c == ST => Op::St(mem()?),
        c if c == STX => Op::Stx(mem()?),
        c if c == JMP | JA => {
            // Unsigned wrap-around, as in libpcap: a backward jump is a huge k that wraps to a
            // target below `from`; anything that does not land inside the program is refused.
            let target = (from as u32).wrapping_add(k);
            if target as usize >= len || k as i32 == -1 {
                return Err(Invalid::JumpOutOfRange);
            }
            if (k as i32) < 0 {
                Op::JaBack(target)
            } else {
                Op::Ja(target)
            }
        }
        c if c == JMP | JEQ | K => {
            let (t, f) = cond()?;
            Op::JeqK(k, t, f)
        }
        c if c == JMP | JGT | K => {
            let (t, f) = cond()?;
            Op::JgtK(k, t, f)
        }
        c if c == JMP | JGE | K => {
            let (t, f) = cond()?;
            Op::JgeK(k, t, f)
        }
        c if c == JMP | JSET | K => {
            let (t, f) = cond()?;
            Op::JsetK(k, t, f)
        }
        c if c == JMP | JEQ | X => {
            let (t, f) = cond()?;
            Op::JeqX(t, f)
        }
        c if c == JMP | JGT | X => {
            let (t, f) = cond()?;
            Op::JgtX(t, f)
        }
        c if c == JMP | JGE | X => {
            let (t, f) = cond()?;
            Op::JgeX(t, f)
        }
        c if c == JMP | JSET | X => {
            let (t, f) = cond()?;
            Op::JsetX(t, f)
        }
        c if c == ALU | ADD | K => Op::AddK(k),
        c if c == ALU | SUB | K => Op::SubK(k),
        c if c == ALU | MUL | K => Op::MulK(k),
        c if c == ALU | DIV | K || c == ALU | MOD | K => {
            if k == 0 {
                return Err(Invalid::DivByZero);
            }
            if c == ALU | DIV | K {
                Op::DivK(k)
            } else {
                Op::ModK(k)
            }
        }
        c if c == ALU | AND | K => Op::AndK(k),
        c if c == ALU | OR | K => Op::OrK(k),
        c if c == ALU | XOR | K => Op::XorK(k),
        c if c == ALU | LSH | K || c == ALU | RSH | K => {
            if k >= 32 {
                return Err(Invalid::BadShift);
            }
            if c == ALU | LSH | K {
                Op::LshK(k)
            } else {
                Op::RshK(k)
            }
        }
        c if c == ALU | ADD | X => Op::AddX,
        c if c == ALU | SUB | X => Op::SubX,
        c if c == ALU | MUL | X => Op::MulX,
        c if c == ALU | DIV | X => Op::DivX,
        c if c == ALU | MOD | X => Op::ModX,
        c if c == ALU | AND | X => Op::AndX,
        c if c == ALU | OR | X => Op::OrX,
        c if c == ALU | XOR | X => Op::XorX,
        c if c == ALU | LSH | X => Op::LshX,
        c if c == ALU | RSH | X => Op::RshX,
        c if c == ALU | NEG => Op::Neg,
        c if c == MISC | TAX => Op::Tax,
        c if c == MISC | TXA => Op::Txa,
        _ => return Err(Invalid::BadOpcode),
    };
    Ok(op)
}

/// `n` bytes of `pkt` at `base + k`, or `None` when any of them lies past the captured length
/// (libpcap's bounds checks, written without overflow on any pointer width).
#[inline(always)]
fn bytes<const N: usize>(pkt: &[u8], base: u32, k: u32) -> Option<[u8; N]> {
    let off = usize::try_from(u64::from(base) + u64::from(k)).ok()?;
    let end = off.checked_add(N)?;
    pkt.get(off..end)?.try_into().ok()
}

/// The interpreter loop. `ops` comes from [`decode`], so every jump target is in range; the
/// bounds-checked accesses below are still written so that no input whatsoever can panic.
fn run(ops: &[Op], pkt: &[u8], wire_len: u32) -> u32 {
    let mut a: u32 = 0;
    let mut x: u32 = 0;
    let mut mem = [0u32; MEM_WORDS];
    let mut backward: u32 = 0;
    let mut pc: usize = 0;
    loop {
        // Falling off the end can't happen after validation (the last op is a ret and every
        // jump lands inside); libpcap rejects in that case too.
        let Some(&op) = ops.get(pc) else { return 0 };
        pc += 1;
        match op {
            Op::RetK(k) => return k,
            Op::RetA => return a,
            Op::LdAbsW(k) => match bytes::<4>(pkt, 0, k) {
                Some(b) => a = u32::from_be_bytes(b),
                None => return 0,
            },
            Op::LdAbsH(k) => match bytes::<2>(pkt, 0, k) {
                Some(b) => a = u32::from(u16::from_be_bytes(b)),
                None => return 0,
            },
            Op::LdAbsB(k) => match pkt.get(k as usize) {
                Some(&b) => a = u32::from(b),
                None => return 0,
            },
            Op::LdIndW(k) => match bytes::<4>(pkt, x, k) {
                Some(b) => a = u32::from_be_bytes(b),
                None => return 0,
            },
            Op::LdIndH(k) => match bytes::<2>(pkt, x, k) {
                Some(b) => a = u32::from(u16::from_be_bytes(b)),
                None => return 0,
            },
            Op::LdIndB(k) => match bytes::<1>(pkt, x, k) {
                Some(b) => a = u32::from(b[0]),
                None => return 0,
            },
            Op::LdLen => a = wire_len,
            Op::LdxLen => x = wire_len,
            Op::LdxMsh(k) => match pkt.get(k as usize) {
                Some(&b) => x = u32::from(b & 0xf) << 2,
                None => return 0,
            },
            Op::LdImm(k) => a = k,
            Op::LdxImm(k) => x = k,
            // Indexes were checked < 16 at decode; the mask keeps the access check-free.
            Op::LdMem(i) => a = mem[i as usize & (MEM_WORDS - 1)],
            Op::LdxMem(i) => x = mem[i as usize & (MEM_WORDS - 1)],
            Op::St(i) => mem[i as usize & (MEM_WORDS - 1)] = a,
            Op::Stx(i) => mem[i as usize & (MEM_WORDS - 1)] = x,
            Op::Ja(t) => pc = t as usize,
            Op::JaBack(t) => {
                if backward >= MAX_BACKWARD_JUMPS {
                    return 0;
                }
                backward += 1;
                pc = t as usize;
            }
            Op::JeqK(k, t, f) => pc = if a == k { t } else { f } as usize,
            Op::JgtK(k, t, f) => pc = if a > k { t } else { f } as usize,
            Op::JgeK(k, t, f) => pc = if a >= k { t } else { f } as usize,
            Op::JsetK(k, t, f) => pc = if a & k != 0 { t } else { f } as usize,
            Op::JeqX(t, f) => pc = if a == x { t } else { f } as usize,
            Op::JgtX(t, f) => pc = if a > x { t } else { f } as usize,
            Op::JgeX(t, f) => pc = if a >= x { t } else { f } as usize,
            Op::JsetX(t, f) => pc = if a & x != 0 { t } else { f } as usize,
            Op::AddK(k) => a = a.wrapping_add(k),
            Op::SubK(k) => a = a.wrapping_sub(k),
            Op::MulK(k) => a = a.wrapping_mul(k),
            Op::DivK(k) => a = a.checked_div(k).unwrap_or(0),
            Op::ModK(k) => a = a.checked_rem(k).unwrap_or(0),
            Op::AndK(k) => a &= k,
            Op::OrK(k) => a |= k,
            Op::XorK(k) => a ^= k,
            Op::LshK(k) => a = a.checked_shl(k).unwrap_or(0),
            Op::RshK(k) => a = a.checked_shr(k).unwrap_or(0),
            Op::AddX => a = a.wrapping_add(x),
            Op::SubX => a = a.wrapping_sub(x),
            Op::MulX => a = a.wrapping_mul(x),
            Op::DivX => match a.checked_div(x) {
                Some(v) => a = v,
                None => return 0,
            },
            Op::ModX => match a.checked_rem(x) {
                Some(v) => a = v,
                None => return 0,
            },
            Op::AndX => a &= x,
            Op::OrX => a |= x,
            Op::XorX => a ^= x,
            Op::LshX => a = a.checked_shl(x).unwrap_or(0),
            Op::RshX => a = a.checked_shr(x).unwrap_or(0),
            Op::Neg => a = 0u32.wrapping_sub(a),
            Op::Tax => x = a,
            Op::Txa => a = x,
            Op::LdAbsHJeq(k, c, t, f) => match bytes::<2>(pkt, 0, u32::from(k)) {
                Some(b) => {
                    a = u32::from(u16::from_be_bytes(b));
                    pc = if a == u32::from(c) { t } else { f } as usize;
                }
                None => return 0,
            },
            Op::LdAbsBJeq(k, c, t, f) => match pkt.get(usize::from(k)) {
                Some(&b) => {
                    a = u32::from(b);
                    pc = if a == u32::from(c) { t } else { f } as usize;
                }
                None => return 0,
            },
            Op::LdAbsWJeq(k, c, t, f) => match bytes::<4>(pkt, 0, u32::from(k)) {
                Some(b) => {
                    a = u32::from_be_bytes(b);
                    pc = if a == c { t } else { f } as usize;
                }
                None => return 0,
            },
            Op::LdIndHJeq(k, c, t, f) => match bytes::<2>(pkt, x, u32::from(k)) {
                Some(b) => {
                    a = u32::from(u16::from_be_bytes(b));
                    pc = if a == u32::from(c) { t } else { f } as usize;
                }
                None => return 0,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::op::*;
    use super::*;

    fn prog(insns: &[Insn]) -> Program {
        Program::new(insns).expect("valid program")
    }

    fn run1(insns: &[Insn], pkt: &[u8]) -> u32 {
        prog(insns).run(pkt, pkt.len() as u32)
    }

    fn reject(insns: &[Insn]) -> Rejected {
        Program::new(insns).expect_err("program must be refused")
    }

    const RET_A: Insn = Insn::stmt(RET | A, 0);

    #[test]
    fn op_is_small() {
        // The hot loop copies ops by value: keep them two words or less.
        assert!(std::mem::size_of::<Op>() <= 16);
    }

    #[test]
    fn ret_k_and_a() {
        assert_eq!(run1(&[Insn::stmt(RET | K, 96)], &[]), 96);
        assert_eq!(run1(&[Insn::stmt(LD | IMM, 7), RET_A], &[]), 7);
    }

    // 14-byte packet used by the load tests.
    //   00 01 02 03 04 05  06 07 08 09 0a 0b  0c 0d   ; bytes at offset = value
    const PKT: [u8; 14] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];

    #[test]
    fn ld_abs_sizes_and_bounds() {
        let w = |k| run1(&[Insn::stmt(LD | W | ABS, k), RET_A], &PKT);
        let h = |k| run1(&[Insn::stmt(LD | H | ABS, k), RET_A], &PKT);
        let b = |k| run1(&[Insn::stmt(LD | B | ABS, k), RET_A], &PKT);
        assert_eq!(w(0), 0x0001_0203);
        assert_eq!(w(10), 0x0a0b_0c0d); // last whole word
        assert_eq!(w(11), 0); // one byte short: reject
        assert_eq!(h(12), 0x0c0d);
        assert_eq!(h(13), 0);
        assert_eq!(b(13), 13);
        assert_eq!(b(14), 0);
        assert_eq!(w(u32::MAX), 0);
        assert_eq!(h(u32::MAX - 1), 0);
        // A reject is a reject even when the program would have returned something else.
        let p = [Insn::stmt(LD | B | ABS, 100), Insn::stmt(RET | K, 5)];
        assert_eq!(run1(&p, &PKT), 0);
    }

    #[test]
    fn ld_ind_adds_x_and_checks_bounds() {
        let w = |x, k| {
            run1(
                &[Insn::stmt(LDX | IMM, x), Insn::stmt(LD | W | IND, k), RET_A],
                &PKT,
            )
        };
        let h = |x, k| {
            run1(
                &[Insn::stmt(LDX | IMM, x), Insn::stmt(LD | H | IND, k), RET_A],
                &PKT,
            )
        };
        let b = |x, k| {
            run1(
                &[Insn::stmt(LDX | IMM, x), Insn::stmt(LD | B | IND, k), RET_A],
                &PKT,
            )
        };
        assert_eq!(w(4, 6), 0x0a0b_0c0d);
        assert_eq!(w(4, 7), 0);
        assert_eq!(h(6, 6), 0x0c0d);
        assert_eq!(h(7, 6), 0);
        assert_eq!(b(13, 0), 13);
        assert_eq!(b(0, 13), 13);
        assert_eq!(b(1, 13), 0);
        // X + k wrapping around 2^32 in C would be caught by libpcap's checks: reject here too.
        assert_eq!(b(u32::MAX, 1), 0);
        assert_eq!(w(1, u32::MAX), 0);
        assert_eq!(h(u32::MAX, u32::MAX), 0);
    }

    #[test]
    fn ld_len_and_ldx_len_use_wire_length() {
        let p = prog(&[Insn::stmt(LD | W | LEN, 0), RET_A]);
        assert_eq!(p.run(&PKT, 1514), 1514);
        let p = prog(&[
            Insn::stmt(LDX | W | LEN, 0),
            Insn::stmt(MISC | TXA, 0),
            RET_A,
        ]);
        assert_eq!(p.run(&PKT, 60), 60);
    }

    #[test]
    fn ldx_msh_is_ip_header_length() {
        // 45 = IPv4, IHL 5 -> X = 20.
        let pkt = [0x45u8, 0x00];
        let p = [
            Insn::stmt(LDX | MSH | B, 0),
            Insn::stmt(MISC | TXA, 0),
            RET_A,
        ];
        assert_eq!(run1(&p, &pkt), 20);
        let p = [Insn::stmt(LDX | MSH | B, 2), Insn::stmt(RET | K, 1)];
        assert_eq!(run1(&p, &pkt), 0);
    }

    #[test]
    fn imm_mem_st_stx() {
        let p = [
            Insn::stmt(LD | IMM, 11),
            Insn::stmt(ST, 0),
            Insn::stmt(LDX | IMM, 22),
            Insn::stmt(STX, 15),
            Insn::stmt(LD | IMM, 0),
            Insn::stmt(LDX | MEM, 0), // X = 11
            Insn::stmt(LD | MEM, 15), // A = 22
            Insn::stmt(ALU | ADD | X, 0),
            RET_A,
        ];
        assert_eq!(run1(&p, &[]), 33);
        // Scratch memory starts zeroed.
        assert_eq!(run1(&[Insn::stmt(LD | MEM, 3), RET_A], &[]), 0);
    }

    fn alu_k(code: u16, a: u32, k: u32) -> u32 {
        run1(
            &[
                Insn::stmt(LD | IMM, a),
                Insn::stmt(ALU | code | K, k),
                RET_A,
            ],
            &[],
        )
    }

    fn alu_x(code: u16, a: u32, x: u32) -> u32 {
        run1(
            &[
                Insn::stmt(LD | IMM, a),
                Insn::stmt(LDX | IMM, x),
                Insn::stmt(ALU | code | X, 0),
                RET_A,
            ],
            &[],
        )
    }

    #[test]
    fn alu_k_ops() {
        assert_eq!(alu_k(ADD, u32::MAX, 2), 1);
        assert_eq!(alu_k(SUB, 1, 2), u32::MAX);
        assert_eq!(alu_k(MUL, 0x8000_0000, 2), 0);
        assert_eq!(alu_k(DIV, 100, 7), 14);
        assert_eq!(alu_k(MOD, 100, 7), 2);
        assert_eq!(alu_k(AND, 0xff0f, 0x0ff0), 0x0f00);
        assert_eq!(alu_k(OR, 0xf0, 0x0f), 0xff);
        assert_eq!(alu_k(XOR, 0xff, 0x0f), 0xf0);
        assert_eq!(alu_k(LSH, 1, 31), 0x8000_0000);
        assert_eq!(alu_k(RSH, 0x8000_0000, 31), 1);
    }

    #[test]
    fn alu_x_ops() {
        assert_eq!(alu_x(ADD, 40, 2), 42);
        assert_eq!(alu_x(SUB, 0, 1), u32::MAX);
        assert_eq!(alu_x(MUL, 6, 7), 42);
        assert_eq!(alu_x(DIV, 42, 5), 8);
        assert_eq!(alu_x(MOD, 42, 5), 2);
        assert_eq!(alu_x(AND, 6, 3), 2);
        assert_eq!(alu_x(OR, 6, 3), 7);
        assert_eq!(alu_x(XOR, 6, 3), 5);
        assert_eq!(alu_x(LSH, 3, 4), 48);
        assert_eq!(alu_x(RSH, 48, 4), 3);
        // Shifts of 32 or more give 0 (libpcap), not a masked shift.
        assert_eq!(alu_x(LSH, 1, 32), 0);
        assert_eq!(alu_x(RSH, u32::MAX, 33), 0);
        assert_eq!(alu_x(LSH, 1, u32::MAX), 0);
    }

    #[test]
    fn division_by_zero_x_rejects() {
        // Even though the program would return 9 afterwards, the packet is rejected.
        for code in [DIV, MOD] {
            let p = [
                Insn::stmt(LD | IMM, 5),
                Insn::stmt(LDX | IMM, 0),
                Insn::stmt(ALU | code | X, 0),
                Insn::stmt(RET | K, 9),
            ];
            assert_eq!(run1(&p, &[]), 0);
        }
    }

    #[test]
    fn neg_tax_txa() {
        let p = [Insn::stmt(LD | IMM, 1), Insn::stmt(ALU | NEG, 0), RET_A];
        assert_eq!(run1(&p, &[]), u32::MAX);
        let p = [
            Insn::stmt(LD | IMM, 0x8000_0000),
            Insn::stmt(ALU | NEG, 0),
            RET_A,
        ];
        assert_eq!(run1(&p, &[]), 0x8000_0000);
        let p = [
            Insn::stmt(LD | IMM, 5),
            Insn::stmt(MISC | TAX, 0),
            Insn::stmt(LD | IMM, 0),
            Insn::stmt(MISC | TXA, 0),
            RET_A,
        ];
        assert_eq!(run1(&p, &[]), 5);
    }

    /// `A = a; X = x; if A <cmp> operand goto ret 1 else ret 2`.
    fn jump(code: u16, a: u32, operand: u32) -> u32 {
        run1(
            &[
                Insn::stmt(LD | IMM, a),
                Insn::stmt(LDX | IMM, operand),
                Insn::jump(JMP | code, operand, 0, 1),
                Insn::stmt(RET | K, 1),
                Insn::stmt(RET | K, 2),
            ],
            &[],
        )
    }

    #[test]
    fn conditional_jumps_k_and_x() {
        for src in [K, X] {
            assert_eq!(jump(JEQ | src, 5, 5), 1);
            assert_eq!(jump(JEQ | src, 5, 6), 2);
            assert_eq!(jump(JGT | src, 6, 5), 1);
            assert_eq!(jump(JGT | src, 5, 5), 2);
            assert_eq!(jump(JGE | src, 5, 5), 1);
            assert_eq!(jump(JGE | src, 4, 5), 2);
            // Comparisons are unsigned.
            assert_eq!(jump(JGT | src, u32::MAX, 1), 1);
            assert_eq!(jump(JSET | src, 0b1010, 0b0010), 1);
            assert_eq!(jump(JSET | src, 0b1010, 0b0101), 2);
        }
    }

    #[test]
    fn ja_forward_and_backward() {
        let p = [
            Insn::stmt(JMP | JA, 1),
            Insn::stmt(RET | K, 1),
            Insn::stmt(RET | K, 2),
        ];
        assert_eq!(run1(&p, &[]), 2);
        // A counting loop: M[0] += 1 until it reaches 10, via a backward ja.
        let p = [
            Insn::stmt(LD | MEM, 0),              // 0
            Insn::stmt(ALU | ADD | K, 1),         // 1
            Insn::stmt(ST, 0),                    // 2
            Insn::jump(JMP | JGE | K, 10, 1, 0),  // 3
            Insn::stmt(JMP | JA, (-5i32) as u32), // 4: back to 0
            RET_A,                                // 5
        ];
        assert_eq!(run1(&p, &[]), 10);
    }

    #[test]
    fn backward_jumps_are_bounded() {
        // Loop n times; 64 backward jumps are allowed, the 65th rejects.
        let looping = |n: u32| {
            run1(
                &[
                    Insn::stmt(LD | MEM, 0),
                    Insn::stmt(ALU | ADD | K, 1),
                    Insn::stmt(ST, 0),
                    Insn::jump(JMP | JGE | K, n, 1, 0),
                    Insn::stmt(JMP | JA, (-5i32) as u32),
                    RET_A,
                ],
                &[],
            )
        };
        assert_eq!(looping(65), 65); // 64 backward jumps
        assert_eq!(looping(66), 0); // would need 65
                                    // An endless loop terminates.
        let p = [
            Insn::stmt(LD | IMM, 1),
            Insn::stmt(JMP | JA, (-2i32) as u32),
            RET_A,
        ];
        assert_eq!(run1(&p, &[]), 0);
    }

    #[test]
    fn validation_rules() {
        let ret = Insn::stmt(RET | K, 0);
        assert_eq!(reject(&[]).reason, Invalid::Empty);
        assert_eq!(
            reject(&[Insn::stmt(LD | IMM, 0)]),
            Rejected {
                index: 0,
                reason: Invalid::NoFinalRet
            }
        );
        // Invalid opcodes: unknown class combos, RET X, LD with an IMM size, MISC op 0x40.
        for code in [
            RET | X,
            LD | H | IMM,
            MISC | 0x40,
            LD | W | MSH,
            0x100 | RET,
            0xffff,
        ] {
            assert_eq!(
                reject(&[Insn::stmt(code, 0), ret]).reason,
                Invalid::BadOpcode,
                "code {code:#x}"
            );
        }
        for code in [LD | MEM, LDX | MEM, ST, STX] {
            assert_eq!(
                reject(&[Insn::stmt(code, 16), ret]).reason,
                Invalid::BadMemIndex
            );
            assert!(Program::new(&[Insn::stmt(code, 15), ret]).is_ok());
        }
        for code in [DIV, MOD] {
            assert_eq!(
                reject(&[Insn::stmt(ALU | code | K, 0), ret]).reason,
                Invalid::DivByZero
            );
        }
        for code in [LSH, RSH] {
            assert_eq!(
                reject(&[Insn::stmt(ALU | code | K, 32), ret]).reason,
                Invalid::BadShift
            );
        }
        // Jumps: past the end, to itself, before the start.
        assert_eq!(
            reject(&[Insn::jump(JMP | JEQ | K, 0, 1, 0), ret]).reason,
            Invalid::JumpOutOfRange
        );
        assert_eq!(
            reject(&[Insn::jump(JMP | JEQ | K, 0, 0, 1), ret]).reason,
            Invalid::JumpOutOfRange
        );
        assert_eq!(
            reject(&[Insn::stmt(JMP | JA, 1), ret]).reason,
            Invalid::JumpOutOfRange
        );
        assert_eq!(
            reject(&[Insn::stmt(JMP | JA, u32::MAX), ret]).reason,
            Invalid::JumpOutOfRange
        );
        assert_eq!(
            reject(&[Insn::stmt(JMP | JA, (-2i32) as u32), ret]).reason,
            Invalid::JumpOutOfRange
        );
        // The index names the culprit.
        assert_eq!(
            reject(&[ret, ret, Insn::stmt(ST, 99), ret]),
            Rejected {
                index: 2,
                reason: Invalid::BadMemIndex
            }
        );
    }

    #[test]
    fn fused_load_jeq_keeps_semantics() {
        // The jeq at 1 is reached both through the fused op at 0 and by the backward jump at 6,
        // which must find A set by the `ld #` at 5, not by a load.
        let insns = [
            Insn::stmt(LD | H | ABS, 0),
            Insn::jump(JMP | JEQ | K, 0x0102, 1, 0),
            Insn::stmt(RET | K, 1),
            Insn::stmt(LD | B | ABS, 2),
            Insn::jump(JMP | JEQ | K, 3, 0, 2),
            Insn::stmt(LD | IMM, 0x0102),
            Insn::stmt(JMP | JA, (-6i32) as u32), // back to the jeq at 1, A = 0x0102
            RET_A,
        ];
        let p = prog(&insns);
        assert!(matches!(p.ops[0], Op::LdAbsHJeq(0, 0x0102, 3, 2)));
        assert!(matches!(p.ops[3], Op::LdAbsBJeq(2, 3, 5, 7)));
        // ldh [0] = 0x0102, ldb [2] = 3 -> 5: A = 0x0102, jump to the jeq at 1 -> 3 -> ldb [2]
        // = 3 again -> 5 ... until the backward-jump budget rejects.
        assert_eq!(p.run(&[1, 2, 3], 3), 0);
        // ldb [2] = 4 -> ret A = 4.
        assert_eq!(p.run(&[1, 2, 4], 3), 4);
        // ldh [0] != 0x0102 -> ret 1.
        assert_eq!(p.run(&[1, 3, 3], 3), 1);
        // Truncated loads still reject.
        assert_eq!(p.run(&[1], 1), 0);
        assert_eq!(p.run(&[1, 2], 2), 0);
        // Word and indirect loads fuse too.
        let p = prog(&[
            Insn::stmt(LDX | IMM, 1),
            Insn::stmt(LD | H | IND, 1),
            Insn::jump(JMP | JEQ | K, 0x0304, 0, 2),
            Insn::stmt(LD | W | ABS, 0),
            Insn::jump(JMP | JEQ | K, 0x0102_0304, 1, 0),
            Insn::stmt(RET | K, 1),
            Insn::stmt(RET | K, 2),
        ]);
        assert!(matches!(p.ops[1], Op::LdIndHJeq(1, 0x0304, 3, 5)));
        assert!(matches!(p.ops[3], Op::LdAbsWJeq(0, 0x0102_0304, 6, 5)));
        assert_eq!(p.run(&[1, 2, 3, 4], 4), 2);
        assert_eq!(p.run(&[1, 2, 3, 5], 4), 1);
        assert_eq!(p.run(&[0, 2, 3, 4], 4), 1);
        assert_eq!(p.run(&[1, 2, 3], 3), 0); // ldh [x+1] fits, ld [0] does not
        assert_eq!(p.run(&[1, 2], 2), 0); // ldh [x+1] does not fit
                                          // Constants or offsets too wide are not fused.
        let p = prog(&[
            Insn::stmt(LD | H | ABS, 0x1_0000),
            Insn::jump(JMP | JEQ | K, 0x1_0000, 0, 0),
            Insn::stmt(RET | K, 1),
        ]);
        assert!(matches!(p.ops[0], Op::LdAbsH(0x1_0000)));
    }

    #[test]
    fn set_accept_len_rewrites_accepting_rets_only() {
        let mut p = prog(&[
            Insn::jump(JMP | JEQ | K, 0, 0, 1),
            Insn::stmt(RET | K, 65535),
            Insn::stmt(RET | K, 0),
        ]);
        p.set_accept_len(128);
        assert_eq!(p.run(&[], 0), 128);
    }

    #[test]
    fn display_is_tcpdump_dd() {
        assert_eq!(
            Insn::jump(JMP | JEQ | K, 0x800, 0, 8).to_string(),
            "{ 0x15, 0, 8, 0x00000800 }"
        );
    }
}
