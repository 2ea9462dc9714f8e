//! Compiling tcpdump expressions with libpcap's own compiler.

use crate::error::Error;
use crate::program::Insn;
use trawl_capture::LinkType;

/// The snapshot length `pcap::Capture::dead` gives its handle, hence the value of every
/// accepting `ret` libpcap compiles for it.
const DEAD_SNAPLEN: u32 = 65535;

/// libpcap's largest snapshot length (`MAXIMUM_SNAPLEN`): what a snaplen of 0 ("unknown")
/// becomes.
pub(crate) const MAX_SNAPLEN: u32 = 262_144;

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

/// Compiles `expr` for `link_type` with optimisation on (as tcpdump does) and returns the
/// instructions, with accepting `ret`s set to `snaplen`.
///
/// The netmask is 0, which is what tcpdump passes when it reads a file (and the only one the
/// `pcap` crate offers): it matters only for `ip broadcast`.
pub(crate) fn compile(expr: &str, link_type: LinkType, snaplen: u32) -> Result<Vec<Insn>, Error> {
    let compile_error = |message: String| Error::Compile {
        expr: expr.to_owned(),
        link_type,
        message,
    };
    let dead = pcap::Capture::dead(pcap::Linktype(dlt_of(link_type)))
        .map_err(|e| compile_error(pcap_message(e)))?;
    let program = dead
        .compile(expr, true)
        .map_err(|e| compile_error(pcap_message(e)))?;
    let accept = if snaplen == 0 { MAX_SNAPLEN } else { snaplen };
    program
        .get_instructions()
        .iter()
        .map(|i| {
            let mut insn = parse_insn(&i.to_string()).ok_or_else(|| Error::Internal {
                expr: expr.to_owned(),
                link_type,
                detail: format!("unreadable instruction {i} from libpcap"),
            })?;
            // The dead handle's snapshot is fixed at 65535; give accepts the caller's snaplen.
            if insn.code == crate::op::RET | crate::op::K && insn.k == DEAD_SNAPLEN {
                insn.k = accept;
            }
            Ok(insn)
        })
        .collect()
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
        let insns = compile("", LinkType::ETHERNET, 1500).unwrap();
        assert_eq!(insns, vec![Insn::stmt(crate::op::RET | crate::op::K, 1500)]);
        let insns = compile("", LinkType::ETHERNET, 0).unwrap();
        assert_eq!(insns[0].k, MAX_SNAPLEN);
    }
}
