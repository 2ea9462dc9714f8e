//! Writing classic pcap files with nanosecond timestamps (magic `a1b23c4d`), which tcpdump,
//! Wireshark and every libpcap since 1.5 read.
use std::io::{self, Write};

use crate::LinkType;

/// The nanosecond-resolution pcap magic number, written in the machine's byte order.
const MAGIC_NS: u32 = 0xa1b2_3c4d;

/// The 24-byte pcap file header: machine byte order, version 2.4, nanosecond timestamps.
pub fn pcap_file_header(link_type: LinkType, snaplen: u32) -> [u8; 24] {
    let mut h = [0u8; 24];
    h[0..4].copy_from_slice(&MAGIC_NS.to_ne_bytes());
    h[4..6].copy_from_slice(&2u16.to_ne_bytes());
    h[6..8].copy_from_slice(&4u16.to_ne_bytes());
    h[16..20].copy_from_slice(&snaplen.to_ne_bytes());
    h[20..24].copy_from_slice(&u32::from(link_type.0).to_ne_bytes());
    h
}

/// The 16-byte header of a nanosecond pcap record of `caplen` captured bytes (the wire length
/// is at least `caplen`). Seconds are 32 bits: callers clamp times after 2106.
#[inline]
pub fn pcap_record_header(ts_ns: u64, caplen: u32, wire_len: u32) -> [u8; 16] {
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_ne_bytes());
    h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_ne_bytes());
    h[8..12].copy_from_slice(&caplen.to_ne_bytes());
    h[12..16].copy_from_slice(&wire_len.max(caplen).to_ne_bytes());
    h
}

/// A pcap writer over any byte sink (buffer it: every record is two `write_all` calls).
pub struct PcapWriter<W: Write> {
    out: W,
    records: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the 24-byte file header: version 2.4, nanosecond timestamps, `snaplen`,
    /// `link_type`.
    pub fn new(mut out: W, link_type: LinkType, snaplen: u32) -> io::Result<Self> {
        out.write_all(&pcap_file_header(link_type, snaplen))?;
        Ok(PcapWriter { out, records: 0 })
    }

    /// Appends one record. `data` longer than `u32::MAX` bytes cannot occur in a capture.
    pub fn write(&mut self, ts_ns: u64, wire_len: u32, data: &[u8]) -> io::Result<()> {
        self.out
            .write_all(&pcap_record_header(ts_ns, data.len() as u32, wire_len))?;
        self.out.write_all(data)?;
        self.records += 1;
        Ok(())
    }

    /// Records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// The sink, for what it does besides taking bytes (a buffered output flushing on a
    /// timer). Writing to it directly would corrupt the file.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Flushes and returns the sink.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// A pcapng writer (one section, interfaces declared as they come, nanosecond timestamps): the
/// format for captures that mix link types or should keep interface names.
pub struct PcapngWriter<W: Write> {
    out: W,
    interfaces: u32,
    records: u64,
}

impl<W: Write> PcapngWriter<W> {
    /// Writes the section header block.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut b = Vec::with_capacity(28);
        b.extend_from_slice(&0x0A0D_0D0Au32.to_ne_bytes());
        b.extend_from_slice(&28u32.to_ne_bytes());
        b.extend_from_slice(&0x1A2B_3C4Du32.to_ne_bytes());
        b.extend_from_slice(&1u16.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&(-1i64).to_ne_bytes()); // section length not given
        b.extend_from_slice(&28u32.to_ne_bytes());
        out.write_all(&b)?;
        Ok(PcapngWriter {
            out,
            interfaces: 0,
            records: 0,
        })
    }

    /// Declares an interface (link type, snap length, name) and returns its id for
    /// [`PcapngWriter::write`]. Timestamps are in nanoseconds (`if_tsresol` 9).
    pub fn add_interface(
        &mut self,
        link_type: LinkType,
        snaplen: u32,
        name: Option<&str>,
    ) -> io::Result<u32> {
        let mut opts = Vec::new();
        if let Some(name) = name {
            option(&mut opts, 2, name.as_bytes());
        }
        option(&mut opts, 9, &[9]);
        opts.extend_from_slice(&[0; 4]); // opt_endofopt
        let total = (20 + opts.len()) as u32;
        let mut b = Vec::with_capacity(total as usize);
        b.extend_from_slice(&1u32.to_ne_bytes());
        b.extend_from_slice(&total.to_ne_bytes());
        b.extend_from_slice(&link_type.0.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&snaplen.to_ne_bytes());
        b.extend_from_slice(&opts);
        b.extend_from_slice(&total.to_ne_bytes());
        self.out.write_all(&b)?;
        self.interfaces += 1;
        Ok(self.interfaces - 1)
    }

    /// Appends one enhanced packet block on interface `iface`.
    pub fn write(&mut self, iface: u32, ts_ns: u64, wire_len: u32, data: &[u8]) -> io::Result<()> {
        let padded = data.len().next_multiple_of(4);
        let total = (32 + padded) as u32;
        let mut h = [0u8; 28];
        h[0..4].copy_from_slice(&6u32.to_ne_bytes());
        h[4..8].copy_from_slice(&total.to_ne_bytes());
        h[8..12].copy_from_slice(&iface.to_ne_bytes());
        h[12..16].copy_from_slice(&((ts_ns >> 32) as u32).to_ne_bytes());
        h[16..20].copy_from_slice(&(ts_ns as u32).to_ne_bytes());
        h[20..24].copy_from_slice(&(data.len() as u32).to_ne_bytes());
        h[24..28].copy_from_slice(&wire_len.max(data.len() as u32).to_ne_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(data)?;
        self.out.write_all(&[0u8; 3][..padded - data.len()])?;
        self.out.write_all(&total.to_ne_bytes())?;
        self.records += 1;
        Ok(())
    }

    /// The sink (see [`PcapWriter::get_mut`]).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Records written.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes and returns the sink.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Appends a pcapng option: code, length, value padded to 4 bytes.
fn option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    b.extend_from_slice(&code.to_ne_bytes());
    b.extend_from_slice(&(value.len() as u16).to_ne_bytes());
    b.extend_from_slice(value);
    b.resize(b.len().next_multiple_of(4), 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FileSource, FileSourceConfig, PacketSource};

    #[test]
    fn round_trips_through_the_reader() {
        let mut w = PcapWriter::new(Vec::new(), LinkType::ETHERNET, 65535).unwrap();
        w.write(1_700_000_000_123_456_789, 60, &[0xaa; 42]).unwrap();
        w.write(1_700_000_001_000_000_001, 1514, &[0x55; 100])
            .unwrap();
        let bytes = w.finish().unwrap();
        let mut src = FileSource::from_reader(
            "mem",
            std::io::Cursor::new(bytes),
            FileSourceConfig::default(),
        )
        .unwrap();
        let b = src.next_batch().unwrap().unwrap();
        let got: Vec<(u64, u32, usize)> = b
            .iter()
            .map(|p| (p.ts_ns, p.wire_len, p.data.len()))
            .collect();
        assert_eq!(
            got,
            vec![
                (1_700_000_000_123_456_789, 60, 42),
                (1_700_000_001_000_000_001, 1514, 100)
            ]
        );
        assert_eq!(b.interfaces()[0].link_type, LinkType::ETHERNET);
    }

    #[test]
    fn pcapng_round_trips_interfaces_and_nanoseconds() {
        let mut w = PcapngWriter::new(Vec::new()).unwrap();
        let eth = w
            .add_interface(LinkType::ETHERNET, 65535, Some("eth0"))
            .unwrap();
        let lo = w.add_interface(LinkType::NULL, 262144, Some("lo")).unwrap();
        w.write(eth, 1_700_000_000_123_456_789, 60, &[0xaa; 42])
            .unwrap();
        w.write(lo, 1_700_000_001_000_000_001, 45, &[0x55; 45])
            .unwrap();
        let bytes = w.finish().unwrap();
        let mut src = FileSource::from_reader(
            "mem",
            std::io::Cursor::new(bytes),
            FileSourceConfig::default(),
        )
        .unwrap();
        let mut got = Vec::new();
        while let Some(b) = src.next_batch().unwrap() {
            for p in b.iter() {
                let i = &b.interfaces()[usize::from(p.iface)];
                got.push((
                    p.ts_ns,
                    p.wire_len,
                    p.data.len(),
                    i.link_type,
                    i.name.clone(),
                ));
            }
        }
        assert_eq!(
            got,
            vec![
                (
                    1_700_000_000_123_456_789,
                    60,
                    42,
                    LinkType::ETHERNET,
                    Some("eth0".into())
                ),
                (
                    1_700_000_001_000_000_001,
                    45,
                    45,
                    LinkType::NULL,
                    Some("lo".into())
                ),
            ]
        );
    }
}
