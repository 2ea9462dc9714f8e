//! Compiling tcpdump expressions with libpcap's own compiler.

use crate::error::Error;
use crate::program::Insn;
use trawl_capture::LinkType;

/// libpcap's largest snapshot length (`MAXIMUM_SNAPLEN`): what a snaplen of 0 ("unknown")
/// becomes.
pub(crate) const MAX_SNAPLEN: u32 = trawl_capture::MAX_SNAPLEN;

/// Byte order of the capture file the packets come from.
///
/// It matters only for link types whose header holds a host-order field: BSD loopback
/// (`LinkType::NULL`) and OpenBSD `enc`, whose address family word is in the byte order of the
/// machine that wrote the file. libpcap compiles the comparison accordingly, and so does
/// [`crate::Filter::compile_for`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// Written by a little-endian machine (x86, ARM): the usual case, and the default.
    #[default]
    Little,
    /// Written by a big-endian machine (SPARC, PowerPC, MIPS).
    Big,
}

impl ByteOrder {
    /// The order of a file whose header says it was written big-endian, or not.
    pub const fn of_file(big_endian: bool) -> ByteOrder {
        if big_endian {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }
}

/// The DLT value libpcap's compiler expects for a LINKTYPE value from a file header.
///
/// Files store LINKTYPE_ values; `pcap_open_dead` takes DLT_ values, which differ for a handful
/// of old link types. This is libpcap's `linktype_to_dlt` for Linux, plus the two DLT_RAW values
/// written by BSDs (12, 14), which trawl's capture layer treats as raw IP.
pub(crate) fn dlt_of(link_type: LinkType) -> i32 {
    match link_type.0 {
        100 => 11,     // LINKTYPE_ATM_RFC1483 -> DLT_ATM_RFC1483
        101 => 12,     // LINKTYPE_RAW -> DLT_RAW
        102 => 15,     // LINKTYPE_SLIP_BSDOS -> DLT_SLIP_BSDOS
        103 => 16,     // LINKTYPE_PPP_BSDOS -> DLT_PPP_BSDOS
        106 => 19,     // LINKTYPE_ATM_CLIP -> DLT_ATM_CLIP
        12 | 14 => 12, // DLT_RAW as written by BSD / OpenBSD
        other => i32::from(other),
    }
}

/// Compiles `expr` for `link_type` with optimisation on and netmask 0, exactly as
/// `tcpdump -r FILE EXPR` does, and returns the instructions with accepting `ret`s returning
/// `snaplen` (0: [`MAX_SNAPLEN`]).
///
/// libpcap compiles some primitives differently for a capture file than for a live interface
/// (all BSD AF_INET6 values for `ip6` on loopback, the file's byte order for the loopback
/// header, an error rather than kernel-only loads for `inbound`). trawl filters captured packets
/// in user space, so it wants the file flavour: the expression is compiled on a handle opened
/// from a header-only pcap file written to the temporary directory. Only when that file cannot
/// be written does it fall back to `pcap_open_dead`, libpcap's live flavour.
pub(crate) fn compile(
    expr: &str,
    link_type: LinkType,
    snaplen: u32,
    order: ByteOrder,
) -> Result<Vec<Insn>, Error> {
    let compile_error = |message: String| Error::Compile {
        expr: expr.to_owned(),
        link_type,
        message,
    };
    let accept = if snaplen == 0 { MAX_SNAPLEN } else { snaplen };
    let program = match offline_handle(link_type, accept, order) {
        Ok(handle) => handle.compile(expr, true),
        Err(_) => pcap::Capture::dead(pcap::Linktype(dlt_of(link_type)))
            .map_err(|e| compile_error(pcap_message(e)))?
            .compile(expr, true),
    };
    let program = program.map_err(|e| compile_error(pcap_message(e)))?;
    program
        .get_instructions()
        .iter()
        .map(|i| {
            let mut insn = parse_insn(&i.to_string()).ok_or_else(|| Error::Internal {
                expr: expr.to_owned(),
                link_type,
                detail: format!("unreadable instruction {i} from libpcap"),
            })?;
            // libpcap's programs return 0 or the handle's snapshot length, which libpcap may
            // have clamped (and the dead handle's is fixed at 65535): give accepts the
            // caller's snaplen.
            if insn.code == crate::op::RET | crate::op::K && insn.k != 0 {
                insn.k = accept;
            }
            Ok(insn)
        })
        .collect()
}

/// An offline libpcap handle for `link_type`, opened from a 24-byte pcap file header (no
/// packets) in the temporary directory. The file is removed as soon as libpcap has read it.
fn offline_handle(
    link_type: LinkType,
    snaplen: u32,
    order: ByteOrder,
) -> std::io::Result<pcap::Capture<pcap::Offline>> {
    use std::io::Write;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);

    // OpenBSD's DLT_RAW value means nothing to libpcap elsewhere; trawl reads it as raw IP.
    let file_link_type: u32 = if link_type == LinkType::RAW_OPENBSD {
        u32::from(LinkType::RAW.0)
    } else {
        u32::from(link_type.0)
    };
    let words = [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, snaplen, file_link_type];
    let mut header = Vec::with_capacity(24);
    for (i, w) in words.iter().enumerate() {
        // Word 1 is two u16s (major 2, minor 4), the rest are u32s.
        if i == 1 {
            for half in [2u16, 4] {
                header.extend_from_slice(&match order {
                    ByteOrder::Little => half.to_le_bytes(),
                    ByteOrder::Big => half.to_be_bytes(),
                });
            }
        } else {
            header.extend_from_slice(&match order {
                ByteOrder::Little => w.to_le_bytes(),
                ByteOrder::Big => w.to_be_bytes(),
            });
        }
    }
    // A name left by an earlier process with the same pid is skipped, not reused.
    let mut last_error = None;
    for _ in 0..8 {
        let path = std::env::temp_dir().join(format!(
            "trawl-bpf-{}-{}.pcap",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let mut file = match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                last_error = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let opened = file.write_all(&header).and_then(|()| {
            pcap::Capture::from_file(&path)
                .map_err(|e| std::io::Error::other(format!("libpcap: {e}")))
        });
        // Best effort: the handle no longer needs the file, and a leftover is 24 bytes.
        let _ = std::fs::remove_file(&path);
        return opened;
    }
    Err(last_error.unwrap_or_else(|| std::io::Error::other("no free temporary file name")))
}

/// libpcap's text for an error, without the `pcap` crate's "libpcap error: " prefix.
fn pcap_message(e: pcap::Error) -> String {
    match e {
        pcap::Error::PcapError(message) => message,
        pcap::Error::InvalidInputString => "expression contains a NUL byte".to_owned(),
        other => other.to_string(),
    }
}

/// Reads an instruction from `pcap::BpfInstruction`'s `Display` ("code jt jf k", decimal):
/// the `pcap` crate exposes no field accessors, and reading the C struct directly would need
/// `unsafe`.
fn parse_insn(s: &str) -> Option<Insn> {
    let mut it = s.split_ascii_whitespace();
    let insn = Insn {
        code: it.next()?.parse().ok()?,
        jt: it.next()?.parse().ok()?,
        jf: it.next()?.parse().ok()?,
        k: it.next()?.parse().ok()?,
    };
    it.next().is_none().then_some(insn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_insn_reads_pcap_display() {
        assert_eq!(
            parse_insn("21 0 8 2048"),
            Some(Insn {
                code: 0x15,
                jt: 0,
                jf: 8,
                k: 0x800
            })
        );
        assert_eq!(parse_insn("6 0 0 4294967295").map(|i| i.k), Some(u32::MAX));
        assert_eq!(parse_insn("21 0 8"), None);
        assert_eq!(parse_insn("21 0 8 1 1"), None);
        assert_eq!(parse_insn("21 0 256 1"), None);
    }

    #[test]
    fn dlt_mapping() {
        assert_eq!(dlt_of(LinkType::ETHERNET), 1);
        assert_eq!(dlt_of(LinkType::RAW), 12);
        assert_eq!(dlt_of(LinkType::RAW_OPENBSD), 12);
        assert_eq!(dlt_of(LinkType::LINUX_SLL), 113);
        assert_eq!(dlt_of(LinkType::IPV4), 228);
    }

    #[test]
    fn compile_sets_accept_len() {
        let insns = compile("", LinkType::ETHERNET, 1500, ByteOrder::Little).unwrap();
        assert_eq!(insns, vec![Insn::stmt(crate::op::RET | crate::op::K, 1500)]);
        let insns = compile("", LinkType::ETHERNET, 0, ByteOrder::Little).unwrap();
        assert_eq!(insns[0].k, MAX_SNAPLEN);
        // Beyond libpcap's maximum: libpcap clamps the handle's snapshot, we still return it.
        let insns = compile("tcp", LinkType::ETHERNET, 1 << 30, ByteOrder::Little).unwrap();
        assert!(insns.iter().any(|i| i.k == 1 << 30), "{insns:?}");
    }

    #[test]
    fn loopback_uses_savefile_semantics() {
        use crate::Filter;
        // BSD loopback, AF 30 (Darwin's AF_INET6) in the writer's byte order, then IPv6.
        let le = [30u8, 0, 0, 0, 0x60, 0, 0, 0];
        let be = [0u8, 0, 0, 30, 0x60, 0, 0, 0];
        let f = Filter::compile("ip6", LinkType::NULL, 0).unwrap();
        assert!(f.matches(&le, 8));
        assert!(!f.matches(&be, 8));
        let f = Filter::compile_for("ip6", LinkType::NULL, 0, ByteOrder::Big).unwrap();
        assert!(f.matches(&be, 8));
        assert!(!f.matches(&le, 8));
        // Direction is not in a file's packet data: libpcap says so rather than compiling
        // kernel-only loads.
        assert!(Filter::compile("inbound", LinkType::ETHERNET, 0).is_err());
    }
}
