//! Capture-file sources: pcap, pcapng and HPCAP raw, optionally gzip- or zstd-compressed.
//!
//! [`FileSource`] pulls the file through one reusable buffer ([`input`]) with large `read`
//! calls, asks the format's parser ([`pcap`], [`pcapng`], [`hpcap`]) for one [`Step`] at a time,
//! and hands out batches whose records point into that buffer. The rules it follows are written
//! down in `docs/specs/capture-files.md`.
mod hpcap;
mod input;
mod pcap;
mod pcapng;

use std::fs::File;
use std::io::{self, BufReader, Cursor, Read};
use std::path::{Path, PathBuf};

use self::hpcap::HpcapParser;
use self::input::{Input, MIN_READ_SIZE, READ_SIZE};
use self::pcap::PcapParser;
use self::pcapng::PcapngParser;
use crate::{Batch, Error, ErrorKind, Interface, LinkType, PacketSource, RecordMeta, SourceStats};

/// Largest record (pcap caplen) accepted, whatever a header claims: bounds the buffer.
pub(crate) const MAX_RECORD_LEN: usize = 16 << 20;
/// Largest pcapng block accepted (Wireshark uses the same bound).
pub(crate) const MAX_BLOCK_LEN: usize = 16 << 20;

/// Container format of a capture file, detected from its magic number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileFormat {
    /// Classic libpcap format, microsecond or nanosecond timestamps, either byte order.
    Pcap,
    /// pcapng, any number of interfaces and sections.
    Pcapng,
    /// HPCAP raw: 12-byte records `u32 sec, u32 nsec, u16 caplen, u16 len`.
    HpcapRaw,
}

/// Settings of a [`FileSource`].
#[derive(Clone, Debug)]
pub struct FileSourceConfig {
    /// Maximum records per batch.
    pub batch_size: usize,
    /// Read the file as this format instead of detecting it. HPCAP raw files have no magic
    /// number, so this (or a `.raw`/`.hpcap` file name) is how they are recognised; for pcap and
    /// pcapng the file must still carry the format's magic. Compression is detected either way.
    pub format: Option<FileFormat>,
}

impl Default for FileSourceConfig {
    fn default() -> Self {
        FileSourceConfig {
            batch_size: 256,
            format: None,
        }
    }
}

/// What a parser made of the bytes at the front of the unconsumed input.
#[derive(Debug)]
pub(crate) enum Step {
    /// A packet; `meta.offset` is relative to the start of the parsed bytes.
    Packet { meta: RecordMeta, consumed: usize },
    /// A block that holds no packet; `counted` when it goes into `skipped_blocks`.
    Skip { consumed: usize, counted: bool },
    /// At least `needed` bytes are required to parse `what`.
    NeedMore { needed: usize, what: &'static str },
    /// The data ends here by the format's own rules.
    End,
    /// Broken input, `at` bytes after the start of the parsed bytes.
    Fail { at: usize, kind: ErrorKind },
}

pub(crate) fn field_error(field: &'static str, detail: String) -> ErrorKind {
    ErrorKind::InvalidField { field, detail }
}

/// Reads a `u16` at `at`; 0 if out of range (callers check lengths first; this only keeps a
/// missed check from becoming a panic).
#[inline]
pub(crate) fn rd16(data: &[u8], at: usize, big_endian: bool) -> u16 {
    match data.get(at..at + 2) {
        Some(&[a, b]) if big_endian => u16::from_be_bytes([a, b]),
        Some(&[a, b]) => u16::from_le_bytes([a, b]),
        _ => {
            debug_assert!(false, "rd16 out of range");
            0
        }
    }
}

/// Reads a `u32` at `at`; 0 if out of range (see [`rd16`]).
#[inline]
pub(crate) fn rd32(data: &[u8], at: usize, big_endian: bool) -> u32 {
    match data.get(at..at + 4) {
        Some(&[a, b, c, d]) if big_endian => u32::from_be_bytes([a, b, c, d]),
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
        _ => {
            debug_assert!(false, "rd32 out of range");
            0
        }
    }
}

enum Parser {
    Pcap(PcapParser),
    Pcapng(PcapngParser),
    Hpcap(HpcapParser),
}

enum State {
    Running,
    /// An error found while a batch was being filled, returned by the next call.
    Failed(Error),
    Done,
}

/// Reads a capture file (see crate docs for formats).
pub struct FileSource {
    path: PathBuf,
    format: FileFormat,
    /// `gzip` or `zstd` when the file is compressed.
    codec: Option<&'static str>,
    /// Size of the file when progress can be measured against it (uncompressed regular file).
    total_len: Option<u64>,
    batch_size: usize,
    input: Input,
    parser: Parser,
    interfaces: Vec<Interface>,
    metas: Vec<RecordMeta>,
    stats: SourceStats,
    state: State,
}

impl FileSource {
    /// Opens `path`, detecting the format (and gzip/zstd compression) from its first bytes.
    pub fn open(path: impl AsRef<Path>) -> Result<FileSource, Error> {
        Self::with_config(path, FileSourceConfig::default())
    }

    /// Opens `path` with explicit settings.
    pub fn with_config(
        path: impl AsRef<Path>,
        config: FileSourceConfig,
    ) -> Result<FileSource, Error> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| Error {
            path: path.to_path_buf(),
            offset: 0,
            kind: ErrorKind::Io(e),
        })?;
        let len = file
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        let mut src = Self::from_boxed(path.to_path_buf(), Box::new(file), config)?;
        // Offsets count decompressed bytes, so only an uncompressed file's size says how far
        // along a read is.
        src.total_len = len.filter(|_| src.codec.is_none());
        Ok(src)
    }

    /// Reads a capture from any byte stream (standard input, a socket, bytes in memory).
    /// `name` stands for the path in errors and in the `.raw`/`.hpcap` extension rule.
    pub fn from_reader(
        name: impl Into<PathBuf>,
        reader: impl Read + Send + 'static,
        config: FileSourceConfig,
    ) -> Result<FileSource, Error> {
        Self::from_boxed(name.into(), Box::new(reader), config)
    }

    fn from_boxed(
        path: PathBuf,
        mut raw: Box<dyn Read + Send>,
        config: FileSourceConfig,
    ) -> Result<FileSource, Error> {
        let fail = |kind| Error {
            path: path.clone(),
            offset: 0,
            kind,
        };
        let prefix = read_prefix(&mut raw, 4).map_err(|e| fail(ErrorKind::Io(e)))?;
        let chained = Cursor::new(prefix.clone()).chain(raw);
        let (reader, codec): (Box<dyn Read + Send>, _) = match prefix.as_slice() {
            [0x1f, 0x8b, ..] => (
                Box::new(flate2::read::MultiGzDecoder::new(BufReader::with_capacity(
                    256 << 10,
                    chained,
                ))),
                Some("gzip"),
            ),
            [0x28, 0xb5, 0x2f, 0xfd] => {
                let dec = zstd::stream::read::Decoder::new(chained)
                    .map_err(|e| fail(ErrorKind::Decompress(format!("zstd: {e}"))))?;
                (Box::new(dec), Some("zstd"))
            }
            _ => (Box::new(chained), None),
        };
        let mut src = FileSource {
            path,
            format: FileFormat::Pcap,
            codec,
            total_len: None,
            batch_size: config.batch_size.max(1),
            input: Input::new(reader, READ_SIZE),
            parser: Parser::Hpcap(HpcapParser),
            interfaces: Vec::new(),
            metas: Vec::with_capacity(config.batch_size.clamp(1, 1 << 16)),
            stats: SourceStats::default(),
            state: State::Running,
        };
        if let Err(e) = src.input.fill(pcap::HEADER_LEN) {
            return Err(src.io_error(e));
        }
        let head = src.input.available();
        let detected = if pcap::is_magic(head) {
            Some(FileFormat::Pcap)
        } else if head.starts_with(&pcapng::SHB_MAGIC) {
            Some(FileFormat::Pcapng)
        } else {
            None
        };
        let magic = head[..head.len().min(4)].to_vec();
        src.format = match (config.format, detected) {
            (Some(FileFormat::HpcapRaw), _) => FileFormat::HpcapRaw,
            (Some(forced), Some(found)) if forced == found => found,
            (Some(forced), _) => {
                return Err(src.error(
                    0,
                    field_error(
                        "file magic",
                        format!(
                            "{forced:?} was requested, but the file starts with {magic:02x?} \
                             ({})",
                            detected.map_or("no known format".into(), |f| format!("{f:?}"))
                        ),
                    ),
                ))
            }
            (None, Some(found)) => found,
            (None, None) if has_hpcap_extension(&src.path) => FileFormat::HpcapRaw,
            (None, None) if magic.len() < 4 => {
                return Err(src.error(
                    0,
                    ErrorKind::Truncated {
                        what: "file magic",
                        needed: 4,
                        available: magic.len() as u64,
                    },
                ))
            }
            (None, None) => return Err(src.error(0, ErrorKind::UnknownFormat { magic })),
        };
        match src.format {
            FileFormat::Pcap => {
                let (parser, iface) = PcapParser::parse_header(src.input.available())
                    .map_err(|(at, kind)| src.error(at, kind))?;
                src.input.consume(pcap::HEADER_LEN);
                src.interfaces.push(iface);
                src.parser = Parser::Pcap(parser);
            }
            FileFormat::Pcapng => {
                src.parser = Parser::Pcapng(PcapngParser::default());
                src.read_section_header()?;
            }
            FileFormat::HpcapRaw => {
                src.interfaces.push(Interface {
                    link_type: LinkType::ETHERNET,
                    snaplen: 0,
                    name: None,
                });
            }
        }
        Ok(src)
    }

    /// Consumes the first pcapng block (the section header), so that a bad header fails
    /// `open` rather than the first batch.
    fn read_section_header(&mut self) -> Result<(), Error> {
        let Parser::Pcapng(parser) = &mut self.parser else {
            return Ok(());
        };
        loop {
            let data = self.input.available();
            let available = data.len();
            match parser.step(data, &mut self.interfaces) {
                Step::NeedMore { needed, .. } if needed <= available => {
                    return Err(self.error(0, ErrorKind::Internal("parser asked for bytes it has")));
                }
                Step::NeedMore { needed, what } => {
                    if self.input.is_eof() {
                        let kind = ErrorKind::Truncated {
                            what,
                            needed: needed as u64,
                            available: available as u64,
                        };
                        return Err(self.error(0, kind));
                    }
                    if let Err(e) = self.input.fill(needed) {
                        return Err(self.io_error(e));
                    }
                }
                Step::Skip { consumed, .. } => {
                    self.input.consume(consumed);
                    return Ok(());
                }
                Step::Fail { at, kind } => return Err(self.error(at as u64, kind)),
                // The file starts with the section header magic, so the first step is never a
                // packet; should one appear, the batch loop handles it as usual.
                Step::Packet { .. } | Step::End => return Ok(()),
            }
        }
    }

    /// The detected container format.
    pub fn format(&self) -> FileFormat {
        self.format
    }

    /// True when the file (for pcapng: its current section) was written big-endian. Link
    /// layers that store host-order fields (BSD loopback's address family) follow this order,
    /// so filters for them must be compiled for it.
    pub fn big_endian(&self) -> bool {
        match &self.parser {
            Parser::Pcap(p) => p.big_endian(),
            Parser::Pcapng(p) => p.big_endian(),
            Parser::Hpcap(_) => false,
        }
    }

    /// How far the read has come: `(bytes consumed, file size)`, when the size is known (an
    /// uncompressed regular file opened by path), for progress displays.
    pub fn progress(&self) -> Option<(u64, u64)> {
        self.total_len
            .map(|total| (self.input.offset().min(total), total))
    }

    /// An error `at` bytes past the current read position.
    fn error(&self, at: u64, kind: ErrorKind) -> Error {
        let kind = match (self.codec, kind) {
            (_, kind @ ErrorKind::Decompress(_)) | (None, kind) => kind,
            (Some(codec), kind) => ErrorKind::Compressed {
                codec,
                inner: Box::new(kind),
            },
        };
        Error {
            path: self.path.clone(),
            offset: self.input.offset() + at,
            kind,
        }
    }

    /// A read error at the current position. In a compressed file, errors that did not come
    /// from the OS came from the decompressor.
    fn io_error(&self, e: io::Error) -> Error {
        match self.codec {
            Some(codec) if e.raw_os_error().is_none() => {
                self.error(0, ErrorKind::Decompress(format!("{codec}: {e}")))
            }
            _ => self.error(0, ErrorKind::Io(e)),
        }
    }
}

impl PacketSource for FileSource {
    fn next_batch(&mut self) -> Result<Option<Batch<'_>>, Error> {
        if !self.read_batch()? {
            return Ok(None);
        }
        Ok(Some(Batch::new(
            &self.metas,
            self.input.buf(),
            &self.interfaces,
        )))
    }

    fn interfaces(&self) -> &[Interface] {
        &self.interfaces
    }

    fn stats(&self) -> SourceStats {
        self.stats
    }
}

/// A shared handle on a source's buffer ([`FileSource::next_shared_batch`]).
pub type SharedBytes = std::sync::Arc<Vec<u8>>;

impl FileSource {
    /// Like [`PacketSource::next_batch`], with a shared handle on the buffer the batch's
    /// records point into: holding it keeps those bytes as they are while the source reads on
    /// into another buffer, so a batch can reach another thread without its bytes being
    /// copied.
    pub fn next_shared_batch(&mut self) -> Result<Option<(Batch<'_>, SharedBytes)>, Error> {
        if !self.read_batch()? {
            return Ok(None);
        }
        let shared = self.input.shared();
        Ok(Some((
            Batch::new(&self.metas, self.input.buf(), &self.interfaces),
            shared,
        )))
    }

    /// Parses the next batch's records into `self.metas`; false at the end.
    fn read_batch(&mut self) -> Result<bool, Error> {
        match std::mem::replace(&mut self.state, State::Running) {
            State::Running => {}
            State::Done => {
                self.state = State::Done;
                return Ok(false);
            }
            State::Failed(e) => {
                self.state = State::Done;
                self.stats.errors += 1;
                return Err(e);
            }
        }
        self.metas.clear();
        let start = self.input.offset();
        while self.metas.len() < self.batch_size {
            if let Parser::Pcap(p) = &self.parser {
                // Whole records in one loop; `step` below sees only what this leaves (the end
                // of the buffer, a broken record).
                let room = self.batch_size - self.metas.len();
                let run = p.cut_run(
                    self.input.available(),
                    self.input.pos(),
                    &mut self.metas,
                    room,
                );
                self.stats.records += run.records;
                self.stats.captured_bytes += run.captured_bytes;
                self.stats.wire_bytes += run.wire_bytes;
                self.stats.truncated_records += run.truncated_records;
                self.input.consume(run.consumed);
                if self.metas.len() == self.batch_size {
                    break;
                }
            }
            let data = self.input.available();
            let available = data.len();
            let step = match &mut self.parser {
                Parser::Pcap(p) => p.step(data),
                Parser::Pcapng(p) => p.step(data, &mut self.interfaces),
                Parser::Hpcap(p) => p.step(data),
            };
            let failure = match step {
                Step::Packet { mut meta, consumed } => {
                    debug_assert!(consumed > 0 && consumed <= available);
                    meta.offset += self.input.pos();
                    self.stats.records += 1;
                    self.stats.captured_bytes += u64::from(meta.caplen);
                    self.stats.wire_bytes += u64::from(meta.wire_len);
                    self.stats.truncated_records += u64::from(meta.caplen < meta.wire_len);
                    self.metas.push(meta);
                    self.input.consume(consumed);
                    continue;
                }
                Step::Skip { consumed, counted } => {
                    debug_assert!(consumed > 0 && consumed <= available);
                    self.stats.skipped_blocks += u64::from(counted);
                    self.input.consume(consumed);
                    continue;
                }
                // Refilling moves the buffer the batch's records point into: deliver first.
                Step::NeedMore { .. } if !self.metas.is_empty() => break,
                // A parser asking for bytes it already has would make this loop spin.
                Step::NeedMore { needed, .. } if needed <= available => {
                    self.error(0, ErrorKind::Internal("parser asked for bytes it has"))
                }
                Step::NeedMore { needed, what } => {
                    if !self.input.is_eof() {
                        match self.input.fill(needed) {
                            Ok(()) => continue,
                            Err(e) => self.io_error(e),
                        }
                    } else if available == 0 {
                        self.state = State::Done;
                        break;
                    } else {
                        let kind = ErrorKind::Truncated {
                            what,
                            needed: needed as u64,
                            available: available as u64,
                        };
                        self.error(0, kind)
                    }
                }
                Step::End => {
                    self.state = State::Done;
                    break;
                }
                Step::Fail { at, kind } => self.error(at as u64, kind),
            };
            if self.metas.is_empty() {
                self.state = State::Done;
                self.stats.errors += 1;
                return Err(failure);
            }
            self.state = State::Failed(failure);
            break;
        }
        if self.metas.len() == self.batch_size {
            self.adapt_read_size(self.input.offset().saturating_sub(start));
        }
        Ok(!self.metas.is_empty())
    }

    /// Sizes reads to about four batches of the records seen last: small packets are read in
    /// small pieces that are still in the core's caches when parsed (1 MiB of 80-byte records
    /// is 13,000 packets, long enough for the flow table's traffic to evict the kernel's copy
    /// before the parser reaches it: 2-3 % of a run on trace (b)); large ones in up to
    /// [`READ_SIZE`], so that a buffer still holds whole batches.
    fn adapt_read_size(&mut self, batch_bytes: u64) {
        let want = (batch_bytes as usize)
            .saturating_mul(4)
            .clamp(MIN_READ_SIZE, READ_SIZE)
            .next_power_of_two();
        self.input.set_read_size(want);
    }
}

/// Reads up to `n` bytes (fewer only at end of input).
fn read_prefix(reader: &mut dyn Read, n: usize) -> io::Result<Vec<u8>> {
    let mut prefix = vec![0; n];
    let mut got = 0;
    while got < n {
        match reader.read(&mut prefix[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    prefix.truncate(got);
    Ok(prefix)
}

/// `.raw` or `.hpcap`, possibly followed by `.gz`/`.zst`/`.zstd`.
fn has_hpcap_extension(path: &Path) -> bool {
    let ext = |p: &Path| {
        p.extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase)
    };
    let mut ext_now = ext(path);
    let stem;
    let mut path = path;
    if matches!(ext_now.as_deref(), Some("gz" | "zst" | "zstd")) {
        stem = path.with_extension("");
        path = &stem;
        ext_now = ext(path);
    }
    matches!(ext_now.as_deref(), Some("raw" | "hpcap"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    const PCAP_TWO_RECORDS: [u8; 24 + 2 * (16 + 4)] = [
        0xd4, 0xc3, 0xb2, 0xa1, 0x02, 0x00, 0x04, 0x00, // µs LE, 2.4
        0, 0, 0, 0, 0, 0, 0, 0,                         // thiszone, sigfigs
        0xff, 0xff, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, // snaplen 65535, Ethernet
        0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, // 1.000000 s
        0x04, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x00, 0x00, // caplen 4, len 60
        0x01, 0x02, 0x03, 0x04,
        0x02, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, // 2.000001 s
        0x04, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, // caplen 4, len 4
        0x05, 0x06, 0x07, 0x08,
    ];

    fn source(bytes: &[u8], batch_size: usize) -> Result<FileSource, Error> {
        FileSource::from_reader(
            "mem.pcap",
            Cursor::new(bytes.to_vec()),
            FileSourceConfig {
                batch_size,
                format: None,
            },
        )
    }

    /// A pcap file of `n` records of `len` bytes each (native byte order).
    fn pcap_of(n: usize, len: usize) -> Vec<u8> {
        let mut v = crate::pcap_file_header(LinkType::ETHERNET, 65535).to_vec();
        for i in 0..n {
            v.extend_from_slice(&crate::pcap_record_header(
                i as u64 * 1000,
                len as u32,
                len as u32,
            ));
            v.extend((0..len).map(|j| (i + j) as u8));
        }
        v
    }

    #[test]
    fn reads_shrink_for_small_records_and_stay_large_for_large_ones() {
        // Four batches of 256: 48-byte records fit the smallest reads, 80-byte ones (64 bytes
        // and the record header) 128 KiB, jumbo frames the largest.
        for (len, want) in [(32, MIN_READ_SIZE), (64, 128 << 10), (9000, READ_SIZE)] {
            let bytes = pcap_of(3000, len);
            let mut src = source(&bytes, 256).unwrap();
            let mut seen = 0usize;
            while let Some(b) = src.next_batch().unwrap() {
                for p in b.iter() {
                    // Every record whole and in order, across the buffer changes.
                    assert_eq!(p.data.len(), len);
                    assert_eq!(p.data[0], seen as u8);
                    assert_eq!(p.data[len - 1], (seen + len - 1) as u8);
                    seen += 1;
                }
            }
            assert_eq!(seen, 3000);
            assert_eq!(src.input.read_size(), want, "records of {len} bytes");
        }
    }

    #[test]
    fn parse_batches_and_stats() {
        let mut src = source(&PCAP_TWO_RECORDS, 1).unwrap();
        assert_eq!(src.format(), FileFormat::Pcap);
        let b = src.next_batch().unwrap().unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b.get(0).data, &[1, 2, 3, 4]);
        let b = src.next_batch().unwrap().unwrap();
        assert_eq!(b.get(0).ts_ns, 2_000_001_000);
        assert_eq!(b.get(0).data, &[5, 6, 7, 8]);
        assert!(src.next_batch().unwrap().is_none());
        assert!(src.next_batch().unwrap().is_none());
        let s = src.stats();
        assert_eq!((s.records, s.captured_bytes, s.wire_bytes), (2, 8, 64));
        assert_eq!((s.truncated_records, s.errors), (1, 0));
    }

    #[test]
    fn truncated_tail_after_good_records() {
        let cut = &PCAP_TWO_RECORDS[..PCAP_TWO_RECORDS.len() - 1];
        let mut src = source(cut, 256).unwrap();
        assert_eq!(src.next_batch().unwrap().unwrap().len(), 1);
        let e = src.next_batch().unwrap_err();
        assert_eq!(e.offset, 44);
        assert!(matches!(
            e.kind,
            ErrorKind::Truncated {
                what: "pcap packet data",
                needed: 20,
                available: 19
            }
        ));
        assert!(e.to_string().starts_with("mem.pcap: offset 44: truncated"));
        assert!(src.next_batch().unwrap().is_none());
        assert_eq!(src.stats().errors, 1);
    }

    #[test]
    fn compressed_offsets_count_decompressed_bytes() {
        let cut = &PCAP_TWO_RECORDS[..PCAP_TWO_RECORDS.len() - 1];
        let z = zstd::encode_all(cut, 3).unwrap();
        let mut src = source(&z, 256).unwrap();
        assert_eq!(src.next_batch().unwrap().unwrap().len(), 1);
        let e = src.next_batch().unwrap_err();
        assert_eq!(e.offset, 44);
        assert!(matches!(e.kind.root(), ErrorKind::Truncated { .. }));
        assert!(e.to_string().contains("zstd-compressed"), "{e}");
    }

    #[test]
    fn unknown_short_and_forced() {
        let e = source(b"hello world, not a capture", 8).err().unwrap();
        assert!(matches!(e.kind, ErrorKind::UnknownFormat { ref magic } if magic == b"hell"));
        let e = source(b"ab", 8).err().unwrap();
        assert!(matches!(e.kind, ErrorKind::Truncated { .. }));
        let forced = FileSourceConfig {
            batch_size: 8,
            format: Some(FileFormat::Pcapng),
        };
        let e = FileSource::from_reader("x", Cursor::new(PCAP_TWO_RECORDS.to_vec()), forced)
            .err()
            .unwrap();
        assert!(e.to_string().contains("file magic"), "{e}");
    }

    #[test]
    fn hpcap_extension_rule() {
        assert!(has_hpcap_extension(Path::new("/a/b.raw")));
        assert!(has_hpcap_extension(Path::new("b.HPCAP.zst")));
        assert!(!has_hpcap_extension(Path::new("b.pcap.gz")));
        assert!(!has_hpcap_extension(Path::new("raw")));
    }
}
