//! tcpdump filter expressions, compiled by libpcap and run as classic BPF in user space.
//!
//! [`Filter::compile`] hands an expression (`tcp port 80`, `vlan and host 10.0.0.1`, ...) to
//! libpcap's own compiler, exactly as tcpdump does for a capture file, and keeps the resulting
//! classic BPF instructions. From then on no libpcap is involved: [`Filter::matches`] runs the
//! program with a safe Rust interpreter that has libpcap's `pcap_offline_filter` semantics
//! (loads past the captured bytes reject, `len` is the wire length, division by zero rejects).
//! Programs are validated once with libpcap's rules and pre-decoded, so matching is a tight loop
//! that cannot index out of bounds, never allocates and never panics.
//!
//! [`Filter::from_insns`] accepts programs from elsewhere (`tcpdump -dd`, tests) under the same
//! validation. [`FilterSet`] compiles one expression lazily for every link type it meets, for
//! pcapng files that mix link types.
//!
//! ```
//! use trawl_bpf::{Filter, FilterSet};
//! use trawl_capture::LinkType;
//!
//! let filter = Filter::compile("tcp dst port 80", LinkType::ETHERNET, 262144)?;
//!
//! // Ethernet II + IPv4 + TCP 1234 -> 80 (SYN), 54 bytes.
//! let mut pkt = vec![0u8; 54];
//! pkt[12..14].copy_from_slice(&[0x08, 0x00]); // EtherType IPv4
//! pkt[14] = 0x45; // IPv4, 20-byte header
//! pkt[23] = 6; // protocol TCP
//! pkt[34..38].copy_from_slice(&[0x04, 0xd2, 0x00, 0x50]); // ports 1234 -> 80
//! assert!(filter.matches(&pkt, 54));
//! pkt[37] = 81;
//! assert!(!filter.matches(&pkt, 54));
//!
//! // Errors carry libpcap's message.
//! let err = Filter::compile("tcp port", LinkType::ETHERNET, 0).unwrap_err();
//! assert!(err.to_string().contains("syntax error"), "{err}");
//!
//! // One expression, any link type.
//! let mut set = FilterSet::new("tcp", 0);
//! assert!(set.matches(LinkType::ETHERNET, &pkt, 54)?);
//! assert!(set.matches(LinkType::RAW, &pkt[14..], 40)?);
//! # Ok::<(), trawl_bpf::Error>(())
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod compile;
mod error;
mod program;
mod set;

pub use compile::ByteOrder;
pub use error::Error;
pub use program::{op, Insn, Invalid, MAX_BACKWARD_JUMPS, MAX_INSNS, MEM_WORDS};
pub use set::{FileFilters, FilterSet};

/// Whether `expr` must run in user space on a live Linux socket rather than in the kernel:
/// libpcap compiles `vlan` and `mpls` for tags inside the frame, and the kernel has moved
/// VLAN tags out of it (trawl restores them in the frames it reads).
pub fn needs_user_space_on_live_socket(expr: &str) -> bool {
    expr.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w == "vlan" || w == "mpls")
}

use program::Program;
use trawl_capture::LinkType;

/// A validated classic BPF program, ready to match packets.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    insns: Box<[Insn]>,
    program: Program,
}

impl Filter {
    /// Compiles a tcpdump filter expression for packets of `link_type`, with libpcap's
    /// compiler and optimiser, exactly as `tcpdump -r FILE EXPR` does (netmask 0, capture-file
    /// flavour of the primitives that differ between files and live interfaces). BSD loopback
    /// headers are taken as little-endian; see [`Filter::compile_for`].
    ///
    /// The empty expression matches every packet. `snaplen` is the value an accepting program
    /// returns from [`Filter::run`] (0 means unknown: libpcap's maximum, 262144); it does not
    /// change which packets match.
    ///
    /// # Errors
    /// [`Error::Compile`] with libpcap's message when the expression is wrong or makes no
    /// sense for the link type.
    pub fn compile(expr: &str, link_type: LinkType, snaplen: u32) -> Result<Filter, Error> {
        Filter::compile_for(expr, link_type, snaplen, ByteOrder::Little)
    }

    /// [`Filter::compile`] for packets from a capture file written in byte order `order`.
    ///
    /// Only BSD loopback (`LinkType::NULL`) and OpenBSD `enc` headers depend on it; for every
    /// other link type this is [`Filter::compile`].
    ///
    /// # Errors
    /// As [`Filter::compile`].
    pub fn compile_for(
        expr: &str,
        link_type: LinkType,
        snaplen: u32,
        order: ByteOrder,
    ) -> Result<Filter, Error> {
        let insns = compile::compile(expr, link_type, snaplen, order)?;
        Filter::from_insns(insns).map_err(|e| Error::Internal {
            expr: expr.to_owned(),
            link_type,
            detail: format!("libpcap produced a program that fails validation: {e}"),
        })
    }

    /// Takes a program from elsewhere, checked with libpcap's `bpf_validate` rules: at least one
    /// instruction, known opcodes only, scratch memory indexes below 16, no division or modulo
    /// by the constant 0, no constant shift of 32 or more, every jump inside the program (a
    /// backward `ja` is allowed, as libpcap allows it, but not a `ja` to itself), and a `ret`
    /// last.
    ///
    /// # Errors
    /// [`Error::InvalidProgram`] naming the first offending instruction.
    pub fn from_insns(insns: Vec<Insn>) -> Result<Filter, Error> {
        match Program::new(&insns) {
            Ok(program) => Ok(Filter {
                insns: insns.into_boxed_slice(),
                program,
            }),
            Err(r) => Err(Error::InvalidProgram {
                index: r.index,
                insn: insns.get(r.index).copied().unwrap_or_default(),
                reason: r.reason,
            }),
        }
    }

    /// Whether the packet matches: `packet` is the captured bytes, starting with the link-layer
    /// header, and `wire_len` the length on the wire (what `len`, `greater` and `less` test).
    #[inline]
    pub fn matches(&self, packet: &[u8], wire_len: u32) -> bool {
        self.program.run(packet, wire_len) != 0
    }

    /// Runs the program and returns its result: the number of bytes to keep, 0 for reject
    /// (`bpf_filter`'s return value).
    #[inline]
    pub fn run(&self, packet: &[u8], wire_len: u32) -> u32 {
        self.program.run(packet, wire_len)
    }

    /// The instructions, as compiled or given (`tcpdump -dd` prints the same ones).
    pub fn insns(&self) -> &[Insn] {
        &self.insns
    }

    /// The program in the kernel's `sock_filter` form, to attach to a live socket.
    #[cfg(target_os = "linux")]
    pub fn socket_program(&self) -> Vec<trawl_capture::live::SockFilter> {
        self.insns
            .iter()
            .map(|i| trawl_capture::live::SockFilter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect()
    }

    /// A copy of the program whose accepting `ret`s return `accept` instead.
    #[must_use]
    pub fn with_accept_len(&self, accept: u32) -> Filter {
        let mut f = self.clone();
        f.program.set_accept_len(accept);
        for insn in f.insns.iter_mut() {
            if insn.code == op::RET | op::K && insn.k != 0 {
                insn.k = accept;
            }
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vlan_and_mpls_filters_run_in_user_space_on_live_sockets() {
        assert!(needs_user_space_on_live_socket("vlan 10 and tcp"));
        assert!(needs_user_space_on_live_socket("(mpls) or udp"));
        assert!(!needs_user_space_on_live_socket(
            "host 10.0.0.1 and port 80"
        ));
        assert!(!needs_user_space_on_live_socket("host vlanhost"));
    }

    #[test]
    fn empty_expression_matches_everything() {
        for lt in [LinkType::ETHERNET, LinkType::RAW, LinkType::LINUX_SLL] {
            let f = Filter::compile("", lt, 0).unwrap();
            assert!(f.matches(&[], 0));
            assert!(f.matches(&[0xff; 100], 100));
        }
        let f = Filter::compile("  ", LinkType::ETHERNET, 0).unwrap();
        assert!(f.matches(&[], 0));
    }

    #[test]
    fn from_insns_names_the_bad_instruction() {
        let err = Filter::from_insns(vec![
            Insn::stmt(op::LD | op::IMM, 1),
            Insn::stmt(op::ST, 16),
            Insn::stmt(op::RET | op::A, 0),
        ])
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid BPF program: instruction 1 { 0x2, 0, 0, 0x00000010 }: \
             scratch memory index is not below 16"
        );
        assert!(matches!(
            Filter::from_insns(vec![]),
            Err(Error::InvalidProgram {
                reason: Invalid::Empty,
                ..
            })
        ));
    }

    #[test]
    fn with_accept_len() {
        let f = Filter::compile("", LinkType::ETHERNET, 0).unwrap();
        assert_eq!(f.run(&[], 0), 262_144);
        let g = f.with_accept_len(96);
        assert_eq!(g.run(&[], 0), 96);
        assert_eq!(g.insns()[0].k, 96);
    }

    #[test]
    fn compile_error_names_expression_and_link_type() {
        let err = Filter::compile("foo", LinkType::ETHERNET, 0).unwrap_err();
        let text = err.to_string();
        assert!(
            text.starts_with("filter expression \"foo\" for link type 1: "),
            "{text}"
        );
    }
}
