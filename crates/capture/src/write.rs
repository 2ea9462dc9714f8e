//! Writing classic pcap files with nanosecond timestamps (magic `a1b23c4d`), which tcpdump,
//! Wireshark and every libpcap since 1.5 read.
use std::io::{self, Write};

use crate::LinkType;

/// The nanosecond-resolution pcap magic number, written in the machine's byte order.
const MAGIC_NS: u32 = 0xa1b2_3c4d;

/// A pcap writer over any byte sink (buffer it: every record is two `write_all` calls).
pub struct PcapWriter<W: Write> {
    out: W,
    records: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the 24-byte file header: version 2.4, nanosecond timestamps, `snaplen`,
    /// `link_type`.
    pub fn new(mut out: W, link_type: LinkType, snaplen: u32) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&MAGIC_NS.to_ne_bytes());
        h[4..6].copy_from_slice(&2u16.to_ne_bytes());
        h[6..8].copy_from_slice(&4u16.to_ne_bytes());
        h[16..20].copy_from_slice(&snaplen.to_ne_bytes());
        h[20..24].copy_from_slice(&u32::from(link_type.0).to_ne_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, records: 0 })
    }

    /// Appends one record. `data` longer than `u32::MAX` bytes cannot occur in a capture.
    pub fn write(&mut self, ts_ns: u64, wire_len: u32, data: &[u8]) -> io::Result<()> {
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_ne_bytes());
        h[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_ne_bytes());
        h[8..12].copy_from_slice(&(data.len() as u32).to_ne_bytes());
        h[12..16].copy_from_slice(&wire_len.max(data.len() as u32).to_ne_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(data)?;
        self.records += 1;
        Ok(())
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
}
