//! The flow-protocol datagrams of a capture file: what `ipfix_source` decodes when `files`
//! holds a pcap or pcapng of sFlow, NetFlow or IPFIX traffic (`trawl collect -r
//! sflow.pcap`) instead of an IPFIX file.
//!
//! Which datagrams: UDP to the ports those protocols use ([`PORTS`]); other packets are
//! counted as skipped, not decoded (a capture of a collector's link holds other traffic).
//! IP fragments are skipped too (counted): trawl does not reassemble them here.
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::Path;

use trawl_capture::{FileSource, PacketSource};
use trawl_flow::decode::{decode, DecodeConfig, Decoded, FragmentKind, ParseOutcome};

/// UDP destination ports whose datagrams are decoded: sFlow (6343), NetFlow (2055, 9995,
/// 9996) and IPFIX (4739).
pub const PORTS: [u16; 5] = [6343, 2055, 9995, 9996, 4739];

/// One datagram taken out of a capture.
pub struct Datagram {
    /// Its sender (the exporter or agent).
    pub from: SocketAddr,
    /// When it was captured, ns since the epoch.
    pub ts_ns: u64,
    /// Its packet number in the file (1-based, as tshark counts).
    pub packet: u64,
    /// The UDP payload.
    pub bytes: Vec<u8>,
}

/// A capture file read datagram by datagram.
pub struct CaptureDatagrams {
    source: FileSource,
    queue: VecDeque<Datagram>,
    packets: u64,
    /// Packets that were not a datagram of [`PORTS`] (or were fragments).
    pub skipped: u64,
    scratch: Decoded,
}

impl CaptureDatagrams {
    /// Opens `path` as a capture file; `None` when it is not one (an IPFIX file).
    pub fn open(path: &Path) -> Option<CaptureDatagrams> {
        let source = FileSource::open(path).ok()?;
        Some(CaptureDatagrams {
            source,
            queue: VecDeque::new(),
            packets: 0,
            skipped: 0,
            scratch: Decoded::default(),
        })
    }

    /// Bytes read so far and the file's size, for progress.
    pub fn progress(&self) -> (u64, u64) {
        self.source.progress().unwrap_or((0, 0))
    }

    /// The next datagram; `None` at the end of the file; an error that ends the file.
    pub fn next_datagram(&mut self) -> Result<Option<Datagram>, String> {
        loop {
            if let Some(d) = self.queue.pop_front() {
                return Ok(Some(d));
            }
            let batch = match self.source.next_batch() {
                Ok(Some(b)) => b,
                Ok(None) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            };
            for p in batch.iter() {
                self.packets += 1;
                let outcome = decode(
                    p.link_type,
                    p.data,
                    &DecodeConfig::default(),
                    &mut self.scratch,
                );
                let d = &self.scratch;
                let wanted = outcome == ParseOutcome::Ok
                    && d.proto == 17
                    && d.fragment == FragmentKind::None
                    && PORTS.contains(&d.dst_port);
                if !wanted {
                    self.skipped += 1;
                    continue;
                }
                let start = d.payload_offset as usize;
                let end = (start + d.payload_len as usize).min(p.data.len());
                let Some(bytes) = p.data.get(start..end) else {
                    self.skipped += 1;
                    continue;
                };
                self.queue.push_back(Datagram {
                    from: SocketAddr::new(d.src_addr(), d.src_port),
                    ts_ns: p.ts_ns,
                    packet: self.packets,
                    bytes: bytes.to_vec(),
                });
            }
        }
    }
}
