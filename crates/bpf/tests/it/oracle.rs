//! libpcap as the oracle: reads a capture with and without a filter and tells which packets it
//! accepts, for comparison with `trawl_bpf::Filter::matches` on the same bytes.

use std::path::Path;

use trawl_bpf::ByteOrder;
use trawl_capture::LinkType;

/// One packet as libpcap delivered it.
pub struct Packet {
    pub ts: (i64, i64),
    pub caplen: u32,
    pub len: u32,
    pub data: Vec<u8>,
}

/// A capture read by libpcap.
pub struct Capture {
    pub link_type: LinkType,
    pub byte_order: ByteOrder,
    pub packets: Vec<Packet>,
}

/// Reads every packet libpcap delivers (up to the first read error, as tcpdump does), or
/// `None` when libpcap cannot open the file or its link type does not fit trawl's `LinkType`.
pub fn read(path: &Path) -> Option<Capture> {
    let mut cap = pcap::Capture::from_file(path).ok()?;
    let (link_type, byte_order) = file_link_type(path, cap.get_datalink().0)?;
    let mut packets = Vec::new();
    while let Ok(p) = cap.next_packet() {
        packets.push(Packet {
            ts: (p.header.ts.tv_sec, p.header.ts.tv_usec),
            caplen: p.header.caplen,
            len: p.header.len,
            data: p.data.to_vec(),
        });
    }
    Some(Capture {
        link_type,
        byte_order,
        packets,
    })
}

/// Which packets libpcap's own filter accepts: `Ok(verdicts)` parallel to `cap.packets`, or
/// libpcap's error text when it cannot compile `expr` for the file.
pub fn accepted(path: &Path, cap: &Capture, expr: &str) -> Result<Vec<bool>, String> {
    let mut filtered = pcap::Capture::from_file(path).map_err(|e| e.to_string())?;
    filtered.filter(expr, true).map_err(|e| match e {
        pcap::Error::PcapError(m) => m,
        other => other.to_string(),
    })?;
    let mut verdicts = vec![false; cap.packets.len()];
    // The filtered read is a subsequence of the unfiltered one; walk both in step. Identical
    // packets get identical verdicts, so matching greedily is exact.
    let mut i = 0;
    while let Ok(p) = filtered.next_packet() {
        loop {
            let Some(q) = cap.packets.get(i) else {
                panic!(
                    "{}: libpcap with {expr:?} returned a packet not in the unfiltered read",
                    path.display()
                );
            };
            i += 1;
            if q.ts == (p.header.ts.tv_sec, p.header.ts.tv_usec)
                && q.caplen == p.header.caplen
                && q.len == p.header.len
                && q.data == p.data
            {
                verdicts[i - 1] = true;
                break;
            }
        }
    }
    Ok(verdicts)
}

/// The LINKTYPE value of the file (what trawl's capture layer reports), not libpcap's DLT,
/// and the file's byte order: from a pcap file header, else (pcapng) from the section header's
/// byte-order magic and the DLT libpcap reports, mapped back.
fn file_link_type(path: &Path, dlt: i32) -> Option<(LinkType, ByteOrder)> {
    let bytes = std::fs::read(path).ok()?;
    let word = |at: usize, order: ByteOrder| -> Option<u32> {
        let raw: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(match order {
            ByteOrder::Little => u32::from_le_bytes(raw),
            ByteOrder::Big => u32::from_be_bytes(raw),
        })
    };
    let pcap_order = match word(0, ByteOrder::Little)? {
        0xa1b2_c3d4 | 0xa1b2_3c4d => Some(ByteOrder::Little),
        0xd4c3_b2a1 | 0x4d3c_b2a1 => Some(ByteOrder::Big),
        _ => None,
    };
    if let Some(order) = pcap_order {
        // libpcap keeps the low 26 bits (the rest is FCS information); trawl's LinkType is
        // 16 bits: files with a larger value are not ones trawl can filter.
        let lt = word(20, order)? & 0x03ff_ffff;
        return Some((LinkType(u16::try_from(lt).ok()?), order));
    }
    let order = match word(8, ByteOrder::Little)? {
        0x1a2b_3c4d => ByteOrder::Little,
        _ => ByteOrder::Big,
    };
    let lt = match dlt {
        11 => 100,
        12 => 101,
        15 => 102,
        16 => 103,
        19 => 106,
        other => other,
    };
    Some((LinkType(u16::try_from(lt).ok()?), order))
}
