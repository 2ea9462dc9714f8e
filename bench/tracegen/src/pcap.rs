//! Minimal classic-pcap reading and writing: just enough for the seed file and the generated
//! traces.
//!
//! The reader loads the whole seed into memory (the seed is 35 MB) and indexes its records; the
//! writer always emits little-endian, microsecond, Ethernet pcap, which is what every peer in
//! the benchmark reads without conversion. `trawl-capture` has a full reader, but tracegen keeps
//! its own so the benchmark does not move whenever the capture crate does.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

use crate::Error;

/// Length of the pcap global header.
pub const GLOBAL_HEADER_LEN: usize = 24;
/// Length of a pcap record header.
pub const RECORD_HEADER_LEN: usize = 16;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Snapshot length written into generated files (the seed's own value).
pub const SNAPLEN: u32 = 262_144;

/// One record of a loaded capture: where its bytes are and what its header said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    /// Timestamp in microseconds since the epoch (nanosecond files are divided down).
    pub ts_us: u64,
    /// Offset of the captured bytes in [`Capture::data`].
    pub offset: usize,
    /// Captured length.
    pub caplen: u32,
    /// Original (wire) length.
    pub orig_len: u32,
}

/// A whole capture file in memory.
#[derive(Debug)]
pub struct Capture {
    /// The file's bytes.
    pub data: Vec<u8>,
    /// Link type from the global header.
    pub linktype: u32,
    /// Records in file order.
    pub records: Vec<Record>,
}

impl Capture {
    /// Reads and indexes a classic pcap file.
    pub fn load(path: &Path) -> Result<Capture, Error> {
        let data = std::fs::read(path)
            .map_err(|e| Error::new(format!("{}: cannot read: {e}", path.display())))?;
        Capture::parse(data).map_err(|e| Error::new(format!("{}: {e}", path.display())))
    }

    /// Indexes a classic pcap held in memory.
    pub fn parse(data: Vec<u8>) -> Result<Capture, String> {
        if data.len() < GLOBAL_HEADER_LEN {
            return Err(format!(
                "offset 0: file is {} bytes, shorter than a pcap global header",
                data.len()
            ));
        }
        let magic = [data[0], data[1], data[2], data[3]];
        // Byte order and timestamp unit both come from the magic number.
        let (big_endian, nanos) = match magic {
            [0xd4, 0xc3, 0xb2, 0xa1] => (false, false),
            [0xa1, 0xb2, 0xc3, 0xd4] => (true, false),
            [0x4d, 0x3c, 0xb2, 0xa1] => (false, true),
            [0xa1, 0xb2, 0x3c, 0x4d] => (true, true),
            _ => {
                return Err(format!(
                    "offset 0: magic {:02x?} is not classic pcap (pcapng is not supported here)",
                    magic
                ))
            }
        };
        let rd = |off: usize| -> u32 {
            let b = [data[off], data[off + 1], data[off + 2], data[off + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let linktype = rd(20);
        let mut records = Vec::new();
        let mut off = GLOBAL_HEADER_LEN;
        while off < data.len() {
            if data.len() - off < RECORD_HEADER_LEN {
                return Err(format!(
                    "offset {off}: truncated record header ({} bytes left)",
                    data.len() - off
                ));
            }
            let sec = u64::from(rd(off));
            let frac = u64::from(rd(off + 4));
            let caplen = rd(off + 8);
            let orig_len = rd(off + 12);
            let body = off + RECORD_HEADER_LEN;
            if caplen as usize > data.len() - body {
                return Err(format!(
                    "offset {off}: record caplen {caplen} runs past end of file ({} bytes left)",
                    data.len() - body
                ));
            }
            let ts_us = if nanos {
                sec * 1_000_000 + frac / 1_000
            } else {
                sec * 1_000_000 + frac
            };
            records.push(Record {
                ts_us,
                offset: body,
                caplen,
                orig_len,
            });
            off = body + caplen as usize;
        }
        Ok(Capture {
            data,
            linktype,
            records,
        })
    }

    /// The captured bytes of `rec`.
    pub fn bytes(&self, rec: &Record) -> &[u8] {
        &self.data[rec.offset..rec.offset + rec.caplen as usize]
    }
}

/// Writes a little-endian microsecond Ethernet pcap through a 1 MiB buffer, into `PATH.tmp`
/// first and renamed on [`PcapWriter::finish`], so an interrupted run never leaves a
/// plausible-looking partial trace behind for `run.sh` to reuse.
pub struct PcapWriter {
    out: BufWriter<File>,
    tmp: PathBuf,
    path: PathBuf,
    /// Bytes written so far, headers included.
    pub bytes: u64,
    /// Records written so far.
    pub packets: u64,
}

impl PcapWriter {
    /// Creates `path.tmp` and writes our global header.
    pub fn create(path: &Path) -> Result<PcapWriter, Error> {
        let mut w = PcapWriter::create_bare(path)?;
        let mut hdr = [0u8; GLOBAL_HEADER_LEN];
        hdr[0..4].copy_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
        hdr[4..6].copy_from_slice(&2u16.to_le_bytes());
        hdr[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone and sigfigs stay 0.
        hdr[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        hdr[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        w.write_all(&hdr)?;
        Ok(w)
    }

    /// Creates `path.tmp` without writing anything.
    fn create_bare(path: &Path) -> Result<PcapWriter, Error> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = File::create(&tmp)
            .map_err(|e| Error::new(format!("{}: cannot create: {e}", tmp.display())))?;
        Ok(PcapWriter {
            out: BufWriter::with_capacity(1 << 20, file),
            tmp,
            path: path.to_path_buf(),
            bytes: 0,
            packets: 0,
        })
    }

    /// Appends bytes as they are (for [`head`], which copies the input's own headers).
    fn write_raw(&mut self, b: &[u8]) -> Result<(), Error> {
        self.write_all(b)
    }

    fn write_all(&mut self, b: &[u8]) -> Result<(), Error> {
        self.out.write_all(b).map_err(|e| self.io_error(e))?;
        self.bytes += b.len() as u64;
        Ok(())
    }

    fn io_error(&self, e: io::Error) -> Error {
        Error::new(format!(
            "{}: write failed at offset {}: {e}",
            self.tmp.display(),
            self.bytes
        ))
    }

    /// Appends one record.
    pub fn write_packet(&mut self, ts_us: u64, orig_len: u32, data: &[u8]) -> Result<(), Error> {
        let mut hdr = [0u8; RECORD_HEADER_LEN];
        // Seconds are u32 in classic pcap; generated times are in 2024, far from the limit.
        hdr[0..4].copy_from_slice(&((ts_us / 1_000_000) as u32).to_le_bytes());
        hdr[4..8].copy_from_slice(&((ts_us % 1_000_000) as u32).to_le_bytes());
        hdr[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
        hdr[12..16].copy_from_slice(&orig_len.to_le_bytes());
        self.write_all(&hdr)?;
        self.write_all(data)?;
        self.packets += 1;
        Ok(())
    }

    /// Flushes, and renames `PATH.tmp` to `PATH`.
    pub fn finish(mut self) -> Result<(u64, u64), Error> {
        self.out.flush().map_err(|e| self.io_error(e))?;
        std::fs::rename(&self.tmp, &self.path).map_err(|e| {
            Error::new(format!(
                "cannot rename {} to {}: {e}",
                self.tmp.display(),
                self.path.display()
            ))
        })?;
        Ok((self.packets, self.bytes))
    }
}

/// Copies the global header and the first `n` records of the classic pcap `input` to `output`
/// (streaming, so multi-gigabyte traces need no memory). Returns records and bytes written.
pub fn head(input: &Path, n: u64, output: &Path) -> Result<(u64, u64), Error> {
    let ctx = |what: &str, off: u64, e: io::Error| {
        Error::new(format!("{}: offset {off}: {what}: {e}", input.display()))
    };
    let file = File::open(input)
        .map_err(|e| Error::new(format!("{}: cannot open: {e}", input.display())))?;
    let mut rd = BufReader::with_capacity(1 << 20, file);
    let mut hdr = [0u8; GLOBAL_HEADER_LEN];
    rd.read_exact(&mut hdr)
        .map_err(|e| ctx("global header", 0, e))?;
    let big_endian = match [hdr[0], hdr[1], hdr[2], hdr[3]] {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => false,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => true,
        m => {
            return Err(Error::new(format!(
                "{}: offset 0: magic {m:02x?} is not classic pcap",
                input.display()
            )))
        }
    };
    let mut out = PcapWriter::create_bare(output)?;
    // The input's own header (byte order, time unit, link type) is kept as it is.
    out.write_raw(&hdr)?;
    let mut off = GLOBAL_HEADER_LEN as u64;
    let mut rec = [0u8; RECORD_HEADER_LEN];
    let mut body = Vec::new();
    let mut packets = 0;
    while packets < n {
        match rd.read_exact(&mut rec) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(ctx("record header", off, e)),
        }
        let b = [rec[8], rec[9], rec[10], rec[11]];
        let caplen = if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        };
        if caplen > 16 * SNAPLEN {
            return Err(Error::new(format!(
                "{}: offset {off}: record caplen {caplen} is implausible",
                input.display()
            )));
        }
        body.resize(caplen as usize, 0);
        rd.read_exact(&mut body)
            .map_err(|e| ctx("record body", off, e))?;
        out.write_raw(&rec)?;
        out.write_raw(&body)?;
        out.packets += 1;
        packets += 1;
        off += (RECORD_HEADER_LEN + body.len()) as u64;
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_then_parse_round_trips() {
        let dir = std::env::temp_dir().join(format!("tracegen-pcap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("rt.pcap");
        let mut w = PcapWriter::create(&path).unwrap();
        w.write_packet(1_704_067_200_000_001, 60, &[0xaa; 60])
            .unwrap();
        w.write_packet(1_704_067_200_999_999, 1500, &[0xbb; 64])
            .unwrap();
        let (packets, bytes) = w.finish().unwrap();
        assert_eq!(packets, 2);
        assert_eq!(bytes, 24 + 16 + 60 + 16 + 64);
        let cap = Capture::load(&path).unwrap();
        assert_eq!(cap.linktype, LINKTYPE_ETHERNET);
        assert_eq!(cap.records.len(), 2);
        assert_eq!(cap.records[0].ts_us, 1_704_067_200_000_001);
        assert_eq!(cap.records[1].ts_us, 1_704_067_200_999_999);
        assert_eq!(cap.records[1].orig_len, 1500);
        assert_eq!(cap.bytes(&cap.records[1]), &[0xbb; 64][..]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn head_copies_first_records() {
        let dir = std::env::temp_dir().join(format!("tracegen-head-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (src, dst) = (dir.join("in.pcap"), dir.join("out.pcap"));
        let mut w = PcapWriter::create(&src).unwrap();
        for i in 0..10u8 {
            w.write_packet(u64::from(i), 100, &vec![i; usize::from(i) + 1])
                .unwrap();
        }
        w.finish().unwrap();
        assert_eq!(head(&src, 3, &dst).unwrap(), (3, 24 + 16 * 3 + 1 + 2 + 3));
        let cap = Capture::load(&dst).unwrap();
        assert_eq!(cap.records.len(), 3);
        assert_eq!(cap.bytes(&cap.records[2]), &[2, 2, 2]);
        // Asking for more than there is copies everything.
        assert_eq!(head(&src, 100, &dst).unwrap().0, 10);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn parse_big_endian_nanosecond_header() {
        let mut data = vec![
            0xa1, 0xb2, 0x3c, 0x4d, 0, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0,
            0, // magic, version, zone
            0, 0, 0xff, 0xff, 0, 0, 0, 1, // snaplen, linktype
            0, 0, 0, 10, 0, 0, 0x07, 0xd0, // 10 s, 2000 ns
            0, 0, 0, 2, 0, 0, 0, 2, // caplen 2, len 2
        ];
        data.extend_from_slice(&[1, 2]);
        let cap = Capture::parse(data).unwrap();
        assert_eq!(cap.records[0].ts_us, 10_000_002);
        assert_eq!(cap.records[0].caplen, 2);
    }

    #[test]
    fn truncated_record_names_offset() {
        let mut data = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
        data.extend_from_slice(&[0; 16]);
        data.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 100, 0, 0, 0, 100, 0, 0, 0, 1, 2]);
        let err = Capture::parse(data).unwrap_err();
        assert!(err.contains("offset 24"), "{err}");
    }

    #[test]
    fn rejects_pcapng() {
        let data = vec![
            0x0a, 0x0d, 0x0d, 0x0a, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ];
        assert!(Capture::parse(data).unwrap_err().contains("pcapng"));
    }
}
