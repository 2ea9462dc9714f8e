//! Reading the pcap files the dumper writes (and, for robustness, any classic pcap): the file
//! header, record headers, and a windowed sequential scan that survives a torn tail.
use std::fs::File;
use std::ops::ControlFlow;
use std::os::unix::fs::FileExt;
use std::path::Path;

use trawl_capture::LinkType;

use crate::error::Error;

/// Length of the pcap file header.
pub(crate) const FILE_HEADER_LEN: u64 = 24;
/// Length of a record header.
pub(crate) const RECORD_HEADER_LEN: usize = 16;
/// Largest captured length the store writes and accepts (libpcap's MAXIMUM_SNAPLEN).
pub(crate) const MAX_CAPLEN: u32 = trawl_capture::MAX_SNAPLEN;

const MAGIC_US: u32 = 0xa1b2_c3d4;
const MAGIC_NS: u32 = 0xa1b2_3c4d;

/// What the 24-byte file header says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PcapHeader {
    pub swapped: bool,
    pub nanos: bool,
    pub snaplen: u32,
    pub link: LinkType,
}

pub(crate) fn parse_file_header(path: &Path, b: &[u8]) -> Result<PcapHeader, Error> {
    let bad = |offset: u64, field: &'static str, detail: String| Error::Corrupt {
        path: path.to_path_buf(),
        offset,
        field,
        detail,
    };
    if b.len() < FILE_HEADER_LEN as usize {
        return Err(bad(0, "file header", format!("only {} bytes", b.len())));
    }
    let raw = u32::from_ne_bytes(b[0..4].try_into().expect("4 bytes"));
    let (swapped, nanos) = match raw {
        MAGIC_NS => (false, true),
        MAGIC_US => (false, false),
        m if m.swap_bytes() == MAGIC_NS => (true, true),
        m if m.swap_bytes() == MAGIC_US => (true, false),
        m => return Err(bad(0, "magic", format!("{m:#010x} is not a pcap magic"))),
    };
    let u32_at = |o: usize| {
        let v = u32::from_ne_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        if swapped {
            v.swap_bytes()
        } else {
            v
        }
    };
    Ok(PcapHeader {
        swapped,
        nanos,
        snaplen: u32_at(16),
        link: LinkType((u32_at(20) & 0xffff) as u16),
    })
}

/// A parsed record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rec {
    pub ts_ns: u64,
    pub caplen: u32,
    pub wire_len: u32,
}

/// Why a record header ends the readable part of a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Zeros up to the next 4 KiB boundary: the padding of a flushed partial block (the writer
    /// was killed).
    Padding,
    /// A field out of range: torn or corrupt.
    Bad(&'static str),
}

/// Whether the all-zero record header at file offset `offset` is flush padding rather than a
/// record (a capture may hold a record with zero time and length). Padding runs from the end of
/// the last record to the next 4 KiB boundary (or the end of the file); `bytes` are the bytes
/// from `offset` on that are loaded, `end` the file length. `None`: more bytes are needed.
pub(crate) fn is_padding(offset: u64, bytes: &[u8], end: u64) -> Option<bool> {
    if offset.is_multiple_of(4096) {
        // Padding never starts on a boundary: a record ending there needs none.
        return Some(false);
    }
    let boundary = (offset / 4096 + 1) * 4096;
    let need = (boundary.min(end) - offset) as usize;
    let have = &bytes[..bytes.len().min(need)];
    if have.iter().any(|&b| b != 0) {
        return Some(false);
    }
    (have.len() == need).then_some(true)
}

#[inline]
pub(crate) fn parse_record(h: &PcapHeader, b: &[u8; 16]) -> Result<Rec, Stop> {
    let f = |o: usize| {
        let v = u32::from_ne_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        if h.swapped {
            v.swap_bytes()
        } else {
            v
        }
    };
    let (sec, frac, caplen, wire_len) = (f(0), f(4), f(8), f(12));
    let frac_ns = if h.nanos {
        if frac >= 1_000_000_000 {
            return Err(Stop::Bad("timestamp fraction"));
        }
        u64::from(frac)
    } else {
        if frac >= 1_000_000 {
            return Err(Stop::Bad("timestamp fraction"));
        }
        u64::from(frac) * 1000
    };
    // The store never writes more (and a bigger value from a damaged header must not size a
    // buffer).
    if caplen > MAX_CAPLEN {
        return Err(Stop::Bad("captured length"));
    }
    Ok(Rec {
        ts_ns: u64::from(sec) * 1_000_000_000 + frac_ns,
        caplen,
        wire_len,
    })
}

/// How a scan ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ScanEnd {
    /// Offset just past the last whole record read.
    pub good_end: u64,
    /// Why the scan stopped before `end`, if it did (and at which offset).
    pub stopped: Option<(u64, Stop)>,
    /// Bytes read from the file.
    pub bytes_read: u64,
}

/// Calls `f(offset, record, data)` for every whole record in `start..end` of `file`, reading
/// it in windows of 4 MiB (`buf` is reused). Stops early at flush padding (see
/// [`is_padding`]), a bad header, a record running past `end`, or when `f` breaks.
pub(crate) fn scan(
    file: &File,
    path: &Path,
    h: &PcapHeader,
    start: u64,
    end: u64,
    buf: &mut Vec<u8>,
    mut f: impl FnMut(u64, Rec, &[u8]) -> ControlFlow<()>,
) -> Result<ScanEnd, Error> {
    let mut pos = start; // file offset of buf[0]
    let mut filled = 0usize;
    let mut at = 0usize; // next record in buf
    let mut bytes_read = 0u64;
    buf.clear();
    // Window-sized reads, but no 4 MiB buffer for a small range; a record that does not fit
    // grows it.
    buf.resize(
        (end.saturating_sub(start) as usize).clamp(64 << 10, 4 << 20),
        0,
    );
    loop {
        // Parse what is whole in the buffer.
        while filled - at >= RECORD_HEADER_LEN {
            let hdr: &[u8; 16] = buf[at..at + 16].try_into().expect("16 bytes");
            if hdr.iter().all(|&b| b == 0) {
                match is_padding(pos + at as u64, &buf[at..filled], end) {
                    Some(true) => {
                        return Ok(ScanEnd {
                            good_end: pos + at as u64,
                            stopped: Some((pos + at as u64, Stop::Padding)),
                            bytes_read,
                        })
                    }
                    Some(false) => {}
                    None => break, // read on to the boundary first
                }
            }
            let rec = match parse_record(h, hdr) {
                Ok(r) => r,
                Err(stop) => {
                    return Ok(ScanEnd {
                        good_end: pos + at as u64,
                        stopped: Some((pos + at as u64, stop)),
                        bytes_read,
                    })
                }
            };
            let total = RECORD_HEADER_LEN + rec.caplen as usize;
            if filled - at < total {
                if buf.len() < total {
                    buf.resize(total, 0);
                }
                break;
            }
            let offset = pos + at as u64;
            if f(offset, rec, &buf[at + 16..at + total]).is_break() {
                return Ok(ScanEnd {
                    good_end: offset + total as u64,
                    stopped: None,
                    bytes_read,
                });
            }
            at += total;
        }
        // Keep the partial record, read more.
        buf.copy_within(at..filled, 0);
        filled -= at;
        pos += at as u64;
        at = 0;
        let want_end = end.min(pos + buf.len() as u64);
        let from = pos + filled as u64;
        if from >= want_end {
            let stopped = (filled > 0).then_some((pos, Stop::Bad("record runs past the end")));
            return Ok(ScanEnd {
                good_end: pos,
                stopped,
                bytes_read,
            });
        }
        let n = read_at_most(file, &mut buf[filled..(want_end - pos) as usize], from)
            .map_err(Error::io(path, "reading the segment"))?;
        if n == 0 {
            let stopped = (filled > 0).then_some((pos, Stop::Bad("record runs past the end")));
            return Ok(ScanEnd {
                good_end: pos,
                stopped,
                bytes_read,
            });
        }
        bytes_read += n as u64;
        filled += n;
    }
}

/// Reads as much of `buf` as the file has at `offset` (short only at the end of the file).
fn read_at_most(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_runs_to_the_next_4k_boundary() {
        let zeros = [0u8; 4096];
        // A partial block flushed at 5000: zeros from 5000 to 8192.
        assert_eq!(is_padding(5000, &zeros[..3192], 8192), Some(true));
        // Not all loaded yet.
        assert_eq!(is_padding(5000, &zeros[..100], 8192), None);
        // A zero record followed by more data before the boundary is a record.
        let mut b = [0u8; 3192];
        b[40] = 1;
        assert_eq!(is_padding(5000, &b, 8192), Some(false));
        // The file may end before the boundary (buffered writes pad nothing).
        assert_eq!(is_padding(5000, &zeros[..16], 5016), Some(true));
        // On a boundary: a record ending there needs no padding.
        assert_eq!(is_padding(8192, &zeros, 16384), Some(false));
    }
}
