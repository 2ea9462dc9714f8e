//! The capture file a selection of stored packets is written as: `trawl packets -w` and the
//! HTTP API's `/api/v1/packets` share it, so both give the same bytes for the same selection.
//!
//! A pcap file is opened at the first packet (its link type goes into the header; a selection
//! without packets still makes a valid empty file, Ethernet); a pcapng file gets an interface
//! block per (interface name, link type) met, in order of first appearance.
use std::io::{self, Write};

use trawl_capture::{LinkType, PcapWriter, PcapngWriter, MAX_SNAPLEN};

use crate::StoredPacket;

/// Writes stored packets as pcap or pcapng into `W`.
pub struct CaptureWriter<W: Write>(State<W>);

enum State<W: Write> {
    PcapPending(Option<W>),
    Pcap(PcapWriter<W>, LinkType),
    Pcapng(PcapngWriter<W>, Vec<(String, LinkType)>),
}

impl<W: Write> CaptureWriter<W> {
    /// A writer of pcapng (`pcapng`) or pcap into `sink`. pcapng writes its section header at
    /// once; pcap waits for the first packet's link type.
    pub fn new(sink: W, pcapng: bool) -> io::Result<Self> {
        Ok(CaptureWriter(if pcapng {
            State::Pcapng(PcapngWriter::new(sink)?, Vec::new())
        } else {
            State::PcapPending(Some(sink))
        }))
    }

    /// Appends `p`. A pcap file holds one link type: a packet of another is an
    /// [`io::ErrorKind::InvalidInput`] error naming both and the interface.
    pub fn write(&mut self, p: &StoredPacket<'_>) -> io::Result<()> {
        if let State::PcapPending(sink) = &mut self.0 {
            let sink = sink.take().expect("replaced below");
            self.0 = State::Pcap(
                PcapWriter::new(sink, p.link_type, MAX_SNAPLEN)?,
                p.link_type,
            );
        }
        match &mut self.0 {
            State::Pcap(w, link) => {
                if *link != p.link_type {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidInput,
                        format!(
                            "the selection mixes link types ({} and {}, interface {}): a pcap \
                             file holds one; write pcapng or select interfaces",
                            link.0, p.link_type.0, p.iface
                        ),
                    ));
                }
                w.write(p.ts_ns, p.wire_len, p.data)?;
            }
            State::Pcapng(w, ifaces) => {
                let id = match ifaces
                    .iter()
                    .position(|(n, l)| n == p.iface && *l == p.link_type)
                {
                    Some(i) => i as u32,
                    None => {
                        ifaces.push((p.iface.to_string(), p.link_type));
                        w.add_interface(p.link_type, MAX_SNAPLEN, Some(p.iface))?
                    }
                };
                w.write(id, p.ts_ns, p.wire_len, p.data)?;
            }
            State::PcapPending(_) => unreachable!("opened above"),
        }
        Ok(())
    }

    /// The sink, for what it does besides taking bytes (a buffered output flushing on a
    /// timer); `None` before a pcap file's first packet (nothing written yet).
    pub fn get_mut(&mut self) -> Option<&mut W> {
        match &mut self.0 {
            State::PcapPending(_) => None,
            State::Pcap(w, _) => Some(w.get_mut()),
            State::Pcapng(w, _) => Some(w.get_mut()),
        }
    }

    /// Flushes; a selection with no packet still makes a valid (empty) capture file. A reader
    /// that went away (`BrokenPipe`) is not an error.
    pub fn finish(self) -> io::Result<()> {
        match self.into_sink() {
            Err(e) if e.kind() != io::ErrorKind::BrokenPipe => Err(e),
            _ => Ok(()),
        }
    }

    /// Flushes, and returns the sink (for what it has to say about the writes it took).
    pub fn into_sink(self) -> io::Result<W> {
        match self.0 {
            State::PcapPending(Some(sink)) => {
                PcapWriter::new(sink, LinkType::ETHERNET, MAX_SNAPLEN)?.finish()
            }
            // Only while `write` replaces the state: never seen from outside.
            State::PcapPending(None) => unreachable!("pending writer without its sink"),
            State::Pcap(w, _) => w.finish(),
            State::Pcapng(w, _) => w.finish(),
        }
    }
}

/// Whether a selection is written as pcapng: when asked (`Some(true)`), or when its
/// interfaces (`links`) mix link types and pcap was not forced; `Some(false)` (pcap) over
/// mixed link types is refused with a message listing them.
pub fn choose_pcapng(asked: Option<bool>, links: &[(String, LinkType)]) -> Result<bool, String> {
    let mut distinct: Vec<u16> = links.iter().map(|(_, l)| l.0).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let mixed = distinct.len() > 1;
    match asked {
        Some(true) => Ok(true),
        Some(false) if mixed => Err(format!(
            "the selection mixes link types ({}): a pcap file holds one; write pcapng or \
             select interfaces",
            mixed_list(links)
        )),
        Some(false) => Ok(false),
        None => Ok(mixed),
    }
}

/// `iface: linktype, ...` for messages about mixed link types.
pub fn mixed_list(links: &[(String, LinkType)]) -> String {
    links
        .iter()
        .map(|(i, l)| format!("{i}: {}", l.0))
        .collect::<Vec<_>>()
        .join(", ")
}
