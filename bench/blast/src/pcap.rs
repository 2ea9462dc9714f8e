//! A classic pcap reader, just enough to load a trace of Ethernet frames into memory.
//!
//! Accepts the four classic magic numbers (microsecond or nanosecond timestamps, either byte
//! order) with link type 1 (Ethernet). pcapng is refused with a hint to convert the file.

use std::path::Path;

use anyhow::{bail, Context, Result};

/// Link type of Ethernet frames (`LINKTYPE_ETHERNET`).
const LINKTYPE_ETHERNET: u32 = 1;
/// Global header length.
const GLOBAL_HEADER_LEN: usize = 24;
/// Record header length.
const RECORD_HEADER_LEN: usize = 16;
/// Shortest frame worth sending: an Ethernet header.
const MIN_FRAME_LEN: usize = 14;

/// A trace held in memory: every frame's bytes back to back, and where each starts.
pub struct Trace {
    /// Frame bytes, concatenated.
    pub data: Vec<u8>,
    /// `(offset, length)` of each frame in `data`.
    pub frames: Vec<(usize, usize)>,
    /// Records left out: shorter than an Ethernet header or longer than `max_frame_len`.
    pub skipped: u64,
    /// Records whose captured length is below their original length (sent as captured).
    pub truncated: u64,
}

impl Trace {
    /// Total bytes of one pass over the trace.
    pub fn pass_bytes(&self) -> u64 {
        self.frames.iter().map(|&(_, len)| len as u64).sum()
    }
}

/// Loads every record of the pcap at `path` whose captured length is between 14 bytes and
/// `max_frame_len` (both included).
pub fn load(path: &Path, max_frame_len: usize) -> Result<Trace> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    parse(&bytes, max_frame_len).with_context(|| format!("parsing {}", path.display()))
}

fn parse(bytes: &[u8], max_frame_len: usize) -> Result<Trace> {
    if bytes.len() < GLOBAL_HEADER_LEN {
        bail!("too short for a pcap header ({} bytes)", bytes.len());
    }
    let magic = [bytes[0], bytes[1], bytes[2], bytes[3]];
    let big_endian = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => false,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => true,
        [0x0a, 0x0d, 0x0d, 0x0a] => {
            bail!("pcapng is not supported; convert with `editcap -F pcap IN OUT`")
        }
        _ => bail!("not a pcap file (magic {magic:02x?})"),
    };
    let u32_at = |at: usize| {
        let b = [bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]];
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let linktype = u32_at(20) & 0x0fff_ffff;
    if linktype != LINKTYPE_ETHERNET {
        bail!("link type {linktype} is not Ethernet (1)");
    }
    let mut trace = Trace {
        data: Vec::with_capacity(bytes.len()),
        frames: Vec::new(),
        skipped: 0,
        truncated: 0,
    };
    let mut at = GLOBAL_HEADER_LEN;
    while at < bytes.len() {
        if bytes.len() - at < RECORD_HEADER_LEN {
            bail!("truncated record header at offset {at}");
        }
        let caplen = u32_at(at + 8) as usize;
        let origlen = u32_at(at + 12) as usize;
        at += RECORD_HEADER_LEN;
        if bytes.len() - at < caplen {
            bail!("truncated record at offset {at}: {caplen} bytes announced");
        }
        if (MIN_FRAME_LEN..=max_frame_len).contains(&caplen) {
            trace.frames.push((trace.data.len(), caplen));
            trace.data.extend_from_slice(&bytes[at..at + caplen]);
            if caplen < origlen {
                trace.truncated += 1;
            }
        } else {
            trace.skipped += 1;
        }
        at += caplen;
    }
    if trace.frames.is_empty() {
        bail!("no frame of 14..={max_frame_len} bytes in the trace");
    }
    Ok(trace)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(le: bool, payload: &[u8], origlen: u32) -> Vec<u8> {
        let w = |v: u32| if le { v.to_le_bytes() } else { v.to_be_bytes() };
        let mut r = Vec::new();
        r.extend_from_slice(&w(1)); // ts_sec
        r.extend_from_slice(&w(2)); // ts_usec
        r.extend_from_slice(&w(payload.len() as u32));
        r.extend_from_slice(&w(origlen));
        r.extend_from_slice(payload);
        r
    }

    fn file(le: bool, linktype: u32, records: &[Vec<u8>]) -> Vec<u8> {
        let w = |v: u32| if le { v.to_le_bytes() } else { v.to_be_bytes() };
        let mut f = Vec::new();
        f.extend_from_slice(&w(0xa1b2_c3d4));
        f.extend_from_slice(&w(0)); // version (ignored)
        f.extend_from_slice(&w(0)); // thiszone
        f.extend_from_slice(&w(0)); // sigfigs
        f.extend_from_slice(&w(65535)); // snaplen
        f.extend_from_slice(&w(linktype));
        for r in records {
            f.extend_from_slice(r);
        }
        f
    }

    #[test]
    fn parse_both_byte_orders() {
        for le in [true, false] {
            let f = file(
                le,
                1,
                &[
                    record(le, &[0xaa; 60], 60),
                    record(le, &[0xbb; 10], 10),     // too short: skipped
                    record(le, &[0xcc; 100], 200),   // truncated
                    record(le, &[0xdd; 2000], 2000), // too long: skipped
                ],
            );
            let t = parse(&f, 1514).unwrap();
            assert_eq!(t.frames, vec![(0, 60), (60, 100)]);
            assert_eq!(t.skipped, 2);
            assert_eq!(t.truncated, 1);
            assert_eq!(t.pass_bytes(), 160);
            assert!(t.data[..60].iter().all(|&b| b == 0xaa));
            assert!(t.data[60..].iter().all(|&b| b == 0xcc));
        }
    }

    #[test]
    fn truncated_record() {
        let mut f = file(true, 1, &[record(true, &[0; 60], 60)]);
        f.truncate(f.len() - 1);
        assert!(parse(&f, 1514).is_err());
    }

    #[test]
    fn refuses_other_link_types_and_pcapng() {
        assert!(parse(&file(true, 101, &[record(true, &[0; 60], 60)]), 1514).is_err());
        let mut ng = vec![0x0a, 0x0d, 0x0d, 0x0a];
        ng.resize(32, 0);
        assert!(format!("{:#}", parse(&ng, 1514).err().unwrap()).contains("pcapng"));
    }
}
