//! Classic libpcap files: a 24-byte file header, then 16-byte record headers each followed by
//! the captured bytes. Validation follows libpcap's `sf-pcap.c`, so what libpcap rejects is
//! rejected here too (with the field named).
use super::{field_error, rd16, rd32, Step, MAX_RECORD_LEN};
use crate::{Direction, ErrorKind, Interface, LinkType, RecordMeta};

/// Length of the file header.
pub(crate) const HEADER_LEN: usize = 24;
/// Length of a record header.
const RECORD_HEADER_LEN: usize = 16;
/// libpcap's largest caplen for ordinary link types (`max_snaplen_for_dlt`), accepted whatever
/// the file's snaplen says.
const LIBPCAP_MAX_SNAPLEN: u32 = crate::MAX_SNAPLEN;

/// The four magic numbers, as the first 4 file bytes.
pub(crate) const MAGIC_US_LE: [u8; 4] = [0xd4, 0xc3, 0xb2, 0xa1];
pub(crate) const MAGIC_US_BE: [u8; 4] = [0xa1, 0xb2, 0xc3, 0xd4];
pub(crate) const MAGIC_NS_LE: [u8; 4] = [0x4d, 0x3c, 0xb2, 0xa1];
pub(crate) const MAGIC_NS_BE: [u8; 4] = [0xa1, 0xb2, 0x3c, 0x4d];

/// True when `magic` is one of the pcap magic numbers.
pub(crate) fn is_magic(magic: &[u8]) -> bool {
    matches!(
        magic,
        [0xd4, 0xc3, 0xb2, 0xa1, ..]
            | [0xa1, 0xb2, 0xc3, 0xd4, ..]
            | [0x4d, 0x3c, 0xb2, 0xa1, ..]
            | [0xa1, 0xb2, 0x3c, 0x4d, ..]
    )
}

/// Where caplen and len sit in a record header. libpcap swapped them at version 2.3, and some
/// 2.3 files were written in the old order, so 2.3 is decided per record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lengths {
    Normal,
    Swapped,
    MaybeSwapped,
}

/// Reader state after the file header.
#[derive(Debug)]
pub(crate) struct PcapParser {
    big_endian: bool,
    /// Fractional part unit in ns: 1000 for µs files, 1 for ns files.
    frac_ns: u64,
    lengths: Lengths,
    max_caplen: u32,
}

impl PcapParser {
    /// True when the file was written big-endian.
    pub(crate) fn big_endian(&self) -> bool {
        self.big_endian
    }

    /// Parses the file header (`data` holds at least [`HEADER_LEN`] bytes). On error, returns
    /// the offset of the bad field and what is wrong with it.
    pub(crate) fn parse_header(data: &[u8]) -> Result<(PcapParser, Interface), (u64, ErrorKind)> {
        if data.len() < HEADER_LEN {
            return Err((
                0,
                ErrorKind::Truncated {
                    what: "pcap file header",
                    needed: HEADER_LEN as u64,
                    available: data.len() as u64,
                },
            ));
        }
        let (big_endian, frac_ns) = match [data[0], data[1], data[2], data[3]] {
            MAGIC_US_LE => (false, 1000),
            MAGIC_US_BE => (true, 1000),
            MAGIC_NS_LE => (false, 1),
            MAGIC_NS_BE => (true, 1),
            other => {
                return Err((
                    0,
                    ErrorKind::UnknownFormat {
                        magic: other.to_vec(),
                    },
                ))
            }
        };
        let major = rd16(data, 4, big_endian);
        let minor = rd16(data, 6, big_endian);
        // libpcap: major < 2 is "archaic"; 2.0 to 2.4 and DG/UX's 543.0 are read; anything else
        // is an unsupported version.
        let lengths = match (major, minor) {
            (2, 0..=2) | (543, 0) => Lengths::Swapped,
            (2, 3) => Lengths::MaybeSwapped,
            (2, 4) => Lengths::Normal,
            _ => {
                return Err((
                    4,
                    field_error(
                        "pcap header version",
                        format!("{major}.{minor}, expected 2.0 to 2.4 (as libpcap reads)"),
                    ),
                ))
            }
        };
        let snaplen = rd32(data, 16, big_endian);
        let link_field = rd32(data, 20, big_endian);
        // LINKTYPE spec: low 16 bits link type, bits 16-25 reserved (must be zero), bit 26 says
        // an FCS length is present, bits 28-31 hold it. libpcap rejects nonzero reserved bits.
        if link_field & 0x03ff_0000 != 0 {
            return Err((
                20,
                field_error(
                    "pcap header link type",
                    format!("reserved bits set in 0x{link_field:08x}"),
                ),
            ));
        }
        let max_caplen = snaplen.clamp(LIBPCAP_MAX_SNAPLEN, MAX_RECORD_LEN as u32);
        let parser = PcapParser {
            big_endian,
            frac_ns,
            lengths,
            max_caplen,
        };
        let iface = Interface {
            link_type: LinkType(link_field as u16),
            snaplen,
            name: None,
        };
        Ok((parser, iface))
    }

    /// Parses the record at the start of `data`.
    #[inline]
    pub(crate) fn step(&mut self, data: &[u8]) -> Step {
        if data.len() < RECORD_HEADER_LEN {
            return Step::NeedMore {
                needed: RECORD_HEADER_LEN,
                what: "pcap record header",
            };
        }
        let h: &[u8; RECORD_HEADER_LEN] = data[..RECORD_HEADER_LEN].try_into().expect("16 bytes");
        let (ts_ns, caplen, len) = if self.big_endian {
            self.record_header::<true>(h)
        } else {
            self.record_header::<false>(h)
        };
        if caplen > self.max_caplen {
            return Step::Fail {
                at: 0,
                kind: field_error(
                    "pcap record caplen",
                    format!(
                        "{caplen} bytes, more than the limit of {} (max of snaplen and 262144)",
                        self.max_caplen
                    ),
                ),
            };
        }
        let total = RECORD_HEADER_LEN + caplen as usize;
        if data.len() < total {
            return Step::NeedMore {
                needed: total,
                what: "pcap packet data",
            };
        }
        Step::Packet {
            meta: RecordMeta {
                ts_ns,
                offset: RECORD_HEADER_LEN,
                caplen,
                wire_len: len,
                iface: 0,
                direction: Direction::Unknown,
            },
            consumed: total,
        }
    }

    /// A record header's timestamp (ns), captured length and wire length, the lengths in the
    /// order the file's version wrote them.
    #[inline(always)]
    fn record_header<const BE: bool>(&self, h: &[u8; RECORD_HEADER_LEN]) -> (u64, u32, u32) {
        let word = |i: usize| {
            let w = [h[i], h[i + 1], h[i + 2], h[i + 3]];
            if BE {
                u32::from_be_bytes(w)
            } else {
                u32::from_le_bytes(w)
            }
        };
        let (sec, frac) = (u64::from(word(0)), u64::from(word(4)));
        let (mut caplen, mut len) = (word(8), word(12));
        match self.lengths {
            Lengths::Normal => {}
            Lengths::MaybeSwapped if caplen <= len => {}
            Lengths::MaybeSwapped | Lengths::Swapped => std::mem::swap(&mut caplen, &mut len),
        }
        // sec < 2^32 and frac < 2^32, so this cannot overflow u64.
        (sec * 1_000_000_000 + frac * self.frac_ns, caplen, len)
    }

    /// Cuts the whole, valid records at the front of `data` into `metas` (at most `room` of
    /// them), their offsets counted from `at`; what [`PcapParser::step`] would return for
    /// each, without the per-record dispatch. Stops before the first record that is not whole
    /// or not valid, leaving it for `step` to report. One loop with the byte order fixed and the
    /// counters in registers (4 % of `trawl flows`'s user time on trace (a)).
    pub(crate) fn cut_run(
        &self,
        data: &[u8],
        at: usize,
        metas: &mut Vec<RecordMeta>,
        room: usize,
    ) -> CutRun {
        if self.big_endian {
            self.cut_run_in::<true>(data, at, metas, room)
        } else {
            self.cut_run_in::<false>(data, at, metas, room)
        }
    }

    #[inline(always)]
    fn cut_run_in<const BE: bool>(
        &self,
        data: &[u8],
        at: usize,
        metas: &mut Vec<RecordMeta>,
        room: usize,
    ) -> CutRun {
        let mut run = CutRun::default();
        metas.reserve(room);
        let mut off = 0usize;
        for _ in 0..room {
            let Some(h) = data.get(off..off + RECORD_HEADER_LEN) else {
                break;
            };
            let (ts_ns, caplen, len) = self.record_header::<BE>(h.try_into().expect("16 bytes"));
            let total = RECORD_HEADER_LEN + caplen as usize;
            if caplen > self.max_caplen || data.len() - off < total {
                break;
            }
            metas.push(RecordMeta {
                ts_ns,
                offset: at + off + RECORD_HEADER_LEN,
                caplen,
                wire_len: len,
                iface: 0,
                direction: Direction::Unknown,
            });
            run.records += 1;
            run.captured_bytes += u64::from(caplen);
            run.wire_bytes += u64::from(len);
            run.truncated_records += u64::from(caplen < len);
            off += total;
        }
        run.consumed = off;
        run
    }
}

/// What [`PcapParser::cut_run`] cut: bytes consumed and the source counters they add.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CutRun {
    pub consumed: usize,
    pub records: u64,
    pub captured_bytes: u64,
    pub wire_bytes: u64,
    pub truncated_records: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    const HEADER_US_LE: [u8; 24] = [
        0xd4, 0xc3, 0xb2, 0xa1, // magic: µs, little-endian
        0x02, 0x00, 0x04, 0x00, // version 2.4
        0x00, 0x00, 0x00, 0x00, // thiszone
        0x00, 0x00, 0x00, 0x00, // sigfigs
        0xff, 0xff, 0x00, 0x00, // snaplen 65535
        0x01, 0x00, 0x00, 0x00, // link type 1 (Ethernet)
    ];

    #[test]
    fn parse_header_and_record() {
        let (mut p, iface) = PcapParser::parse_header(&HEADER_US_LE).unwrap();
        assert_eq!(iface.link_type, LinkType::ETHERNET);
        assert_eq!(iface.snaplen, 65535);
        #[rustfmt::skip]
        let rec = [
            0x01, 0x00, 0x00, 0x00, // ts_sec 1
            0x02, 0x00, 0x00, 0x00, // ts_usec 2
            0x03, 0x00, 0x00, 0x00, // caplen 3
            0x04, 0x00, 0x00, 0x00, // len 4
            0xaa, 0xbb, 0xcc,       // data
        ];
        match p.step(&rec) {
            Step::Packet { meta, consumed } => {
                assert_eq!(consumed, 19);
                assert_eq!(meta.ts_ns, 1_000_002_000);
                assert_eq!((meta.offset, meta.caplen, meta.wire_len), (16, 3, 4));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(
            p.step(&rec[..18]),
            Step::NeedMore { needed: 19, .. }
        ));
        assert!(matches!(
            p.step(&rec[..15]),
            Step::NeedMore { needed: 16, .. }
        ));
    }

    #[test]
    fn parse_big_endian_nanos() {
        #[rustfmt::skip]
        let hdr = [
            0xa1, 0xb2, 0x3c, 0x4d, 0x00, 0x02, 0x00, 0x04, // magic ns BE, 2.4
            0, 0, 0, 0, 0, 0, 0, 0,                         // thiszone, sigfigs
            0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x65, // snaplen 262144, link 101
        ];
        let (mut p, iface) = PcapParser::parse_header(&hdr).unwrap();
        assert_eq!(iface.link_type, LinkType::RAW);
        #[rustfmt::skip]
        let rec = [
            0x00, 0x00, 0x00, 0x02, 0x3b, 0x9a, 0xc9, 0xff, // 2 s, 999999999 ns
            0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, // caplen 1, len 1
            0x45,
        ];
        match p.step(&rec) {
            Step::Packet { meta, .. } => assert_eq!(meta.ts_ns, 2_999_999_999),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn truncated_header_and_bad_fields() {
        assert!(PcapParser::parse_header(&HEADER_US_LE[..20]).is_err());
        let mut v = HEADER_US_LE;
        v[4] = 1; // version 1.4: archaic
        let (at, kind) = PcapParser::parse_header(&v).unwrap_err();
        assert_eq!(at, 4);
        assert!(kind.to_string().contains("pcap header version"));
        v[4] = 2;
        v[6] = 5; // 2.5: newer than libpcap reads
        assert!(PcapParser::parse_header(&v).is_err());
        v[6] = 2; // 2.2: accepted, lengths swapped
        assert!(PcapParser::parse_header(&v).is_ok());
        let mut v = HEADER_US_LE;
        v[22] = 0x01; // reserved link-type bits
        let (_, kind) = PcapParser::parse_header(&v).unwrap_err();
        assert!(kind.to_string().contains("pcap header link type"));
        let mut v = HEADER_US_LE;
        v[23] = 0xf4; // FCS length bits: masked off, not an error
        assert_eq!(
            PcapParser::parse_header(&v).unwrap().1.link_type,
            LinkType::ETHERNET
        );
    }

    #[test]
    fn caplen_limit_and_swapped_lengths() {
        let (mut p, _) = PcapParser::parse_header(&HEADER_US_LE).unwrap();
        let mut rec = [0u8; 16];
        rec[8..12].copy_from_slice(&262_145u32.to_le_bytes());
        match p.step(&rec) {
            Step::Fail { at: 0, kind } => assert!(kind.to_string().contains("pcap record caplen")),
            other => panic!("unexpected {other:?}"),
        }
        let mut hdr = HEADER_US_LE;
        hdr[6] = 3; // 2.3: swapped only when caplen > len
        let (mut p, _) = PcapParser::parse_header(&hdr).unwrap();
        let mut rec = [0u8; 20];
        rec[8..12].copy_from_slice(&60u32.to_le_bytes()); // "caplen" 60
        rec[12..16].copy_from_slice(&4u32.to_le_bytes()); // "len" 4: really caplen
        match p.step(&rec) {
            Step::Packet { meta, consumed } => {
                assert_eq!((meta.caplen, meta.wire_len, consumed), (4, 60, 20))
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    /// Records as `step` sees them one at a time: metas, counters, bytes consumed, and where
    /// it stopped (the first step that was not a packet).
    fn stepped(p: &mut PcapParser, data: &[u8], room: usize) -> (Vec<RecordMeta>, CutRun) {
        let (mut metas, mut run) = (Vec::new(), CutRun::default());
        while metas.len() < room {
            match p.step(&data[run.consumed..]) {
                Step::Packet { mut meta, consumed } => {
                    meta.offset += run.consumed;
                    run.records += 1;
                    run.captured_bytes += u64::from(meta.caplen);
                    run.wire_bytes += u64::from(meta.wire_len);
                    run.truncated_records += u64::from(meta.caplen < meta.wire_len);
                    run.consumed += consumed;
                    metas.push(meta);
                }
                _ => break,
            }
        }
        (metas, run)
    }

    #[test]
    fn cut_run_cuts_what_step_would() {
        // Every byte order, time unit and length convention; records of random lengths (some
        // with swapped or oversized fields), cut off at every few bytes and at several room
        // limits.
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || trawl_testkit::xorshift(&mut rng);
        for (magic, minor) in [
            (MAGIC_US_LE, 4u8),
            (MAGIC_US_BE, 4),
            (MAGIC_NS_LE, 3),
            (MAGIC_NS_BE, 2),
            (MAGIC_US_LE, 2),
            (MAGIC_NS_BE, 3),
        ] {
            let be = magic == MAGIC_US_BE || magic == MAGIC_NS_BE;
            let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
            let mut hdr = HEADER_US_LE;
            hdr[..4].copy_from_slice(&magic);
            let version = if be {
                [0, 2, 0, minor]
            } else {
                [2, 0, minor, 0]
            };
            hdr[4..8].copy_from_slice(&version);
            hdr[16..20].copy_from_slice(&w32(300));
            hdr[20..24].copy_from_slice(&w32(1));
            let (parser, _) = PcapParser::parse_header(&hdr).unwrap();
            let mut data = Vec::new();
            for i in 0..200u32 {
                let caplen = (next() % 120) as u32;
                let len = match i % 5 {
                    0 => caplen / 2,
                    1 => caplen + 7,
                    _ => caplen,
                };
                let (a, b) = if i == 150 {
                    (262_145, len)
                } else {
                    (caplen, len)
                };
                data.extend_from_slice(&w32(next() as u32));
                data.extend_from_slice(&w32(next() as u32 % 1_000_000));
                data.extend_from_slice(&w32(a));
                data.extend_from_slice(&w32(b));
                let stored = match parser.lengths {
                    Lengths::Normal => a,
                    Lengths::MaybeSwapped if a <= b => a,
                    _ => b,
                };
                data.extend((0..stored.min(1000)).map(|_| next() as u8));
            }
            for cut in (0..data.len()).step_by(97).chain([data.len()]) {
                for room in [1, 7, 64, 1000] {
                    let part = &data[..cut];
                    let mut metas = Vec::new();
                    let run = parser.cut_run(part, 5, &mut metas, room);
                    let (mut want, want_run) = stepped(&mut PcapParser { ..parser }, part, room);
                    want.iter_mut().for_each(|m| m.offset += 5);
                    assert_eq!((metas, run), (want, want_run), "cut {cut} room {room}");
                }
            }
        }
    }
}
