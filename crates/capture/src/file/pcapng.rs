//! pcapng files (draft-ietf-opsawg-pcapng): sections, each starting with a Section Header Block
//! that fixes the byte order and resets the interface table; Interface Description Blocks;
//! packets in Enhanced, Simple and (obsolete) Packet Blocks. Every other block is skipped.
use super::{field_error, rd16, rd32, Step, MAX_BLOCK_LEN};
use crate::{Direction, ErrorKind, Interface, LinkType, RecordMeta};

/// First 4 bytes of every section (a palindrome, so byte-order independent).
pub(crate) const SHB_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
/// The byte-order magic as it appears in little- and big-endian sections.
const BOM_LE: [u8; 4] = [0x4d, 0x3c, 0x2b, 0x1a];
const BOM_BE: [u8; 4] = [0x1a, 0x2b, 0x3c, 0x4d];

const BT_IDB: u32 = 1;
const BT_OPB: u32 = 2;
const BT_SPB: u32 = 3;
const BT_EPB: u32 = 6;

/// Block type + total length + trailing total length.
const BLOCK_OVERHEAD: usize = 12;
/// Smallest SHB: overhead, byte-order magic, version, section length.
const SHB_MIN_LEN: usize = BLOCK_OVERHEAD + 16;
/// Interface ids are `u16` in records; more interfaces than that cannot be indexed.
const MAX_INTERFACES: usize = 1 << 16;

/// Converts an interface's timestamp units to ns since the epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TsConv {
    scale: Scale,
    /// `if_tsoffset`, in ns.
    offset_ns: i128,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scale {
    /// Units are a divisor of a second at least as coarse as 1 ns: multiply.
    Mul(u64),
    /// Units finer than 1 ns, a multiple of it: divide.
    Div(u64),
    /// Anything else (binary fractions): exact `ts * 1e9 / units`.
    Units(u64),
}

impl TsConv {
    /// The default resolution: microseconds, no offset.
    const MICROS: TsConv = TsConv {
        scale: Scale::Mul(1000),
        offset_ns: 0,
    };

    /// Parses `if_tsresol`: bit 7 clear means 10^-v s, set means 2^-(v & 0x7f) s. Like libpcap,
    /// resolutions whose units per second do not fit in 64 bits are refused.
    fn from_tsresol(v: u8) -> Option<Scale> {
        let exp = u32::from(v & 0x7f);
        let units = if v & 0x80 == 0 {
            10u64.checked_pow(exp)?
        } else {
            1u64.checked_shl(exp)?
        };
        const NS: u64 = 1_000_000_000;
        Some(if NS.is_multiple_of(units) {
            Scale::Mul(NS / units)
        } else if units.is_multiple_of(NS) {
            Scale::Div(units / NS)
        } else {
            Scale::Units(units)
        })
    }

    #[inline]
    fn to_ns(self, ts: u64) -> u64 {
        let ns = match self.scale {
            Scale::Mul(m) => match ts.checked_mul(m) {
                Some(ns) if self.offset_ns == 0 => return ns,
                _ => i128::from(ts) * i128::from(m),
            },
            Scale::Div(d) => i128::from(ts / d),
            Scale::Units(u) => i128::from(ts) * 1_000_000_000 / i128::from(u),
        };
        // Clamp to the representable range rather than wrap: a garbage offset must not make a
        // timestamp jump across the epoch.
        (ns + self.offset_ns).clamp(0, i128::from(u64::MAX)) as u64
    }
}

/// Reader state across blocks.
#[derive(Debug, Default)]
pub(crate) struct PcapngParser {
    /// Byte order of the current section.
    big_endian: bool,
    /// A section header has been read.
    in_section: bool,
    /// Section-local interface id → index in the source's interface table.
    section_ifaces: Vec<u16>,
    /// Timestamp conversion per source interface index.
    ts: Vec<TsConv>,
}

impl PcapngParser {
    /// True when the current section was written big-endian.
    pub(crate) fn big_endian(&self) -> bool {
        self.big_endian
    }

    /// Parses the block at the start of `data`, appending interfaces to `ifaces`.
    pub(crate) fn step(&mut self, data: &[u8], ifaces: &mut Vec<Interface>) -> Step {
        if data.len() < 8 {
            return Step::NeedMore {
                needed: 8,
                what: "pcapng block header",
            };
        }
        if data[..4] == SHB_MAGIC {
            return self.section_header(data);
        }
        if !self.in_section {
            return Step::Fail {
                at: 0,
                kind: field_error(
                    "pcapng block type",
                    "file does not start with a section header block".into(),
                ),
            };
        }
        let be = self.big_endian;
        let btype = rd32(data, 0, be);
        let len = match check_len(rd32(data, 4, be), BLOCK_OVERHEAD) {
            Ok(len) => len,
            Err(kind) => return Step::Fail { at: 4, kind },
        };
        if data.len() < len {
            return Step::NeedMore {
                needed: len,
                what: "pcapng block",
            };
        }
        if let Err(kind) = check_trailer(data, len, be) {
            return Step::Fail { at: len - 4, kind };
        }
        let body = &data[8..len - 4];
        match btype {
            BT_IDB => self.interface(body, len, ifaces),
            BT_EPB => self.packet(body, len, 20, PacketBlock::Enhanced),
            BT_OPB => self.packet(body, len, 20, PacketBlock::Obsolete),
            BT_SPB => self.simple_packet(body, len, ifaces),
            _ => Step::Skip {
                consumed: len,
                counted: true,
            },
        }
    }

    fn section_header(&mut self, data: &[u8]) -> Step {
        if data.len() < 12 {
            return Step::NeedMore {
                needed: 12,
                what: "pcapng section header block",
            };
        }
        let be = match [data[8], data[9], data[10], data[11]] {
            BOM_LE => false,
            BOM_BE => true,
            other => {
                return Step::Fail {
                    at: 8,
                    kind: field_error(
                        "pcapng byte-order magic",
                        format!("{other:02x?}, expected 1a2b3c4d in either byte order"),
                    ),
                }
            }
        };
        let len = match check_len(rd32(data, 4, be), SHB_MIN_LEN) {
            Ok(len) => len,
            Err(kind) => return Step::Fail { at: 4, kind },
        };
        if data.len() < len {
            return Step::NeedMore {
                needed: len,
                what: "pcapng section header block",
            };
        }
        if let Err(kind) = check_trailer(data, len, be) {
            return Step::Fail { at: len - 4, kind };
        }
        let major = rd16(data, 12, be);
        let minor = rd16(data, 14, be);
        // libpcap reads 1.0 and 1.2 (1.2 was written by some tools and differs in nothing it
        // uses); other versions may lay blocks out differently.
        if !(major == 1 && (minor == 0 || minor == 2)) {
            return Step::Fail {
                at: 12,
                kind: field_error(
                    "pcapng section header version",
                    format!("{major}.{minor}, expected 1.0"),
                ),
            };
        }
        if let Err((at, kind)) = options(&data[24..len - 4], be, |_, _| Ok(())) {
            return Step::Fail { at: 24 + at, kind };
        }
        self.big_endian = be;
        self.in_section = true;
        self.section_ifaces.clear();
        Step::Skip {
            consumed: len,
            counted: false,
        }
    }

    fn interface(&mut self, body: &[u8], len: usize, ifaces: &mut Vec<Interface>) -> Step {
        let be = self.big_endian;
        if body.len() < 8 {
            return Step::Fail {
                at: 4,
                kind: field_error(
                    "pcapng interface description block length",
                    format!("{len} bytes, at least 20 needed"),
                ),
            };
        }
        if ifaces.len() >= MAX_INTERFACES {
            return Step::Fail {
                at: 0,
                kind: field_error(
                    "pcapng interface count",
                    format!("more than {MAX_INTERFACES} interfaces"),
                ),
            };
        }
        let link_type = LinkType(rd16(body, 0, be));
        let snaplen = rd32(body, 4, be);
        let mut name = None;
        let mut ts = TsConv::MICROS;
        let parsed = options(&body[8..], be, |code, value| {
            match code {
                2 => {
                    let end = value.iter().position(|&b| b == 0).unwrap_or(value.len());
                    name = Some(String::from_utf8_lossy(&value[..end]).into_owned());
                }
                9 => {
                    let v = value.first().copied().unwrap_or(6);
                    ts.scale = TsConv::from_tsresol(v).ok_or_else(|| {
                        field_error(
                            "pcapng if_tsresol",
                            format!("0x{v:02x}: finer than 64-bit units per second"),
                        )
                    })?;
                }
                14 if value.len() >= 8 => {
                    let off = if be {
                        i64::from_be_bytes(value[..8].try_into().unwrap_or_default())
                    } else {
                        i64::from_le_bytes(value[..8].try_into().unwrap_or_default())
                    };
                    ts.offset_ns = i128::from(off) * 1_000_000_000;
                }
                _ => {}
            }
            Ok(())
        });
        if let Err((at, kind)) = parsed {
            return Step::Fail { at: 16 + at, kind };
        }
        self.section_ifaces.push(ifaces.len() as u16);
        self.ts.push(ts);
        ifaces.push(Interface {
            link_type,
            snaplen,
            name,
        });
        Step::Skip {
            consumed: len,
            counted: false,
        }
    }

    /// An Enhanced or obsolete Packet Block: interface id, 64-bit timestamp, caplen, len,
    /// data padded to 4 bytes, options.
    #[inline]
    fn packet(&mut self, body: &[u8], len: usize, fixed: usize, kind: PacketBlock) -> Step {
        let be = self.big_endian;
        if body.len() < fixed {
            return Step::Fail {
                at: 4,
                kind: field_error(
                    kind.length_field(),
                    format!("{len} bytes, at least {} needed", fixed + BLOCK_OVERHEAD),
                ),
            };
        }
        let local = match kind {
            PacketBlock::Enhanced => rd32(body, 0, be),
            PacketBlock::Obsolete => u32::from(rd16(body, 0, be)),
        };
        let Some(&iface) = self.section_ifaces.get(local as usize) else {
            return Step::Fail {
                at: 8,
                kind: field_error(
                    "pcapng interface id",
                    format!(
                        "{local}, but the section describes {} interfaces",
                        self.section_ifaces.len()
                    ),
                ),
            };
        };
        let ts = (u64::from(rd32(body, 4, be)) << 32) | u64::from(rd32(body, 8, be));
        let caplen = rd32(body, 12, be);
        let wire_len = rd32(body, 16, be);
        let room = body.len() - fixed;
        if caplen as usize > room {
            return Step::Fail {
                at: 20,
                kind: field_error(
                    "pcapng packet captured length",
                    format!("{caplen} bytes, but the block has room for {room}"),
                ),
            };
        }
        let opts_at = (fixed + pad4(caplen as usize)).min(body.len());
        let mut direction = Direction::Unknown;
        if opts_at < body.len() {
            // epb_flags / pack_flags (code 2): bits 0-1 are the direction. Malformed packet
            // options are not worth losing the packet over, so they end option parsing quietly.
            let _ = options(&body[opts_at..], be, |code, value| {
                if code == 2 && value.len() >= 4 {
                    let flags = rd32(value, 0, be);
                    direction = match flags & 3 {
                        1 => Direction::Inbound,
                        2 => Direction::Outbound,
                        _ => Direction::Unknown,
                    };
                }
                Ok(())
            });
        }
        let ts_ns = match self.ts.get(iface as usize) {
            Some(conv) => conv.to_ns(ts),
            None => TsConv::MICROS.to_ns(ts),
        };
        Step::Packet {
            meta: RecordMeta {
                ts_ns,
                offset: 8 + fixed,
                caplen,
                wire_len,
                iface,
                direction,
            },
            consumed: len,
        }
    }

    /// A Simple Packet Block: wire length, then data; interface 0 of the section, no timestamp
    /// (recorded as 0).
    fn simple_packet(&mut self, body: &[u8], len: usize, ifaces: &[Interface]) -> Step {
        if body.len() < 4 {
            return Step::Fail {
                at: 4,
                kind: field_error(
                    "pcapng simple packet block length",
                    format!("{len} bytes, at least 16 needed"),
                ),
            };
        }
        let Some(&iface) = self.section_ifaces.first() else {
            return Step::Fail {
                at: 0,
                kind: field_error(
                    "pcapng interface id",
                    "simple packet block before any interface description block".into(),
                ),
            };
        };
        let wire_len = rd32(body, 0, self.big_endian);
        let room = (body.len() - 4) as u32;
        let snaplen = ifaces.get(iface as usize).map_or(0, |i| i.snaplen);
        let mut caplen = wire_len.min(room);
        if snaplen != 0 {
            caplen = caplen.min(snaplen);
        }
        Step::Packet {
            meta: RecordMeta {
                ts_ns: 0,
                offset: 12,
                caplen,
                wire_len,
                iface,
                direction: Direction::Unknown,
            },
            consumed: len,
        }
    }
}

#[derive(Clone, Copy)]
enum PacketBlock {
    Enhanced,
    Obsolete,
}

impl PacketBlock {
    fn length_field(self) -> &'static str {
        match self {
            PacketBlock::Enhanced => "pcapng enhanced packet block length",
            PacketBlock::Obsolete => "pcapng packet block length",
        }
    }
}

#[inline]
fn pad4(n: usize) -> usize {
    (n + 3) & !3
}

/// Validates a block total length: a multiple of 4, at least `min`, at most [`MAX_BLOCK_LEN`].
fn check_len(len: u32, min: usize) -> Result<usize, ErrorKind> {
    let len = len as usize;
    if !len.is_multiple_of(4) || len < min || len > MAX_BLOCK_LEN {
        return Err(field_error(
            "pcapng block total length",
            format!("{len}: must be a multiple of 4, at least {min} and at most {MAX_BLOCK_LEN}"),
        ));
    }
    Ok(len)
}

/// Checks that the trailing copy of the block length equals the leading one.
fn check_trailer(data: &[u8], len: usize, be: bool) -> Result<(), ErrorKind> {
    let trailer = rd32(data, len - 4, be);
    if trailer as usize != len {
        return Err(field_error(
            "pcapng block trailing total length",
            format!("{trailer}, but the block starts with {len}"),
        ));
    }
    Ok(())
}

/// Walks an options list, calling `f(code, value)` for each option up to `opt_endofopt` or the
/// end of `data`. An option running past the end is an error at its offset within `data`.
fn options(
    data: &[u8],
    be: bool,
    mut f: impl FnMut(u16, &[u8]) -> Result<(), ErrorKind>,
) -> Result<(), (usize, ErrorKind)> {
    let mut at = 0;
    while data.len() - at >= 4 {
        let code = rd16(data, at, be);
        let len = rd16(data, at + 2, be) as usize;
        if code == 0 {
            break;
        }
        let start = at + 4;
        if len > data.len() - start {
            return Err((
                at + 2,
                field_error(
                    "pcapng option length",
                    format!(
                        "option {code} has {len} bytes, but only {} remain in the block",
                        data.len() - start
                    ),
                ),
            ));
        }
        f(code, &data[start..start + len]).map_err(|kind| (at, kind))?;
        at = (start + pad4(len)).min(data.len());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[rustfmt::skip]
    const SHB_LE: [u8; 28] = [
        0x0a, 0x0d, 0x0d, 0x0a, // block type: SHB
        0x1c, 0x00, 0x00, 0x00, // total length 28
        0x4d, 0x3c, 0x2b, 0x1a, // byte-order magic (LE)
        0x01, 0x00, 0x00, 0x00, // version 1.0
        0xff, 0xff, 0xff, 0xff, // section length -1
        0xff, 0xff, 0xff, 0xff,
        0x1c, 0x00, 0x00, 0x00, // trailing total length
    ];

    #[rustfmt::skip]
    const IDB_LE_NS: [u8; 40] = [
        0x01, 0x00, 0x00, 0x00, // block type: IDB
        0x28, 0x00, 0x00, 0x00, // total length 40
        0x01, 0x00, 0x00, 0x00, // link type 1, reserved
        0x00, 0x00, 0x04, 0x00, // snaplen 262144
        0x09, 0x00, 0x01, 0x00, // if_tsresol, 1 byte
        0x09, 0x00, 0x00, 0x00, // 10^-9, padding
        0x02, 0x00, 0x03, 0x00, // if_name, 3 bytes
        b'e', b't', b'h', 0x00, // "eth", padding
        0x00, 0x00, 0x00, 0x00, // opt_endofopt
        0x28, 0x00, 0x00, 0x00, // trailing total length
    ];

    #[rustfmt::skip]
    const EPB_LE: [u8; 48] = [
        0x06, 0x00, 0x00, 0x00, // block type: EPB
        0x30, 0x00, 0x00, 0x00, // total length 48
        0x00, 0x00, 0x00, 0x00, // interface 0
        0x00, 0x00, 0x00, 0x00, // ts high
        0x05, 0x00, 0x00, 0x00, // ts low: 5 units
        0x03, 0x00, 0x00, 0x00, // caplen 3
        0x40, 0x00, 0x00, 0x00, // len 64
        0xaa, 0xbb, 0xcc, 0x00, // data + 1 pad
        0x02, 0x00, 0x04, 0x00, // epb_flags, 4 bytes
        0x02, 0x00, 0x00, 0x00, // outbound
        0x00, 0x00, 0x00, 0x00, // opt_endofopt
        0x30, 0x00, 0x00, 0x00, // trailing total length
    ];

    fn run(p: &mut PcapngParser, data: &[u8], ifaces: &mut Vec<Interface>) -> Step {
        p.step(data, ifaces)
    }

    #[test]
    fn parse_section_interface_packet() {
        let mut p = PcapngParser::default();
        let mut ifaces = Vec::new();
        assert!(matches!(
            run(&mut p, &SHB_LE, &mut ifaces),
            Step::Skip {
                consumed: 28,
                counted: false
            }
        ));
        assert!(matches!(
            run(&mut p, &IDB_LE_NS, &mut ifaces),
            Step::Skip { consumed: 40, .. }
        ));
        assert_eq!(ifaces[0].name.as_deref(), Some("eth"));
        assert_eq!(ifaces[0].snaplen, 262_144);
        match run(&mut p, &EPB_LE, &mut ifaces) {
            Step::Packet { meta, consumed } => {
                assert_eq!(consumed, 48);
                assert_eq!(meta.ts_ns, 5); // ns resolution
                assert_eq!((meta.offset, meta.caplen, meta.wire_len), (28, 3, 64));
                assert_eq!(meta.direction, Direction::Outbound);
            }
            other => panic!("unexpected {other:?}"),
        }
        // A new section forgets the interfaces of the previous one.
        run(&mut p, &SHB_LE, &mut ifaces);
        match run(&mut p, &EPB_LE, &mut ifaces) {
            Step::Fail { kind, .. } => assert!(kind.to_string().contains("pcapng interface id")),
            other => panic!("unexpected {other:?}"),
        }
        run(&mut p, &IDB_LE_NS, &mut ifaces);
        match run(&mut p, &EPB_LE, &mut ifaces) {
            Step::Packet { meta, .. } => assert_eq!(meta.iface, 1),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn truncated_and_bad_lengths() {
        let mut p = PcapngParser::default();
        let mut ifaces = Vec::new();
        assert!(matches!(
            run(&mut p, &SHB_LE[..20], &mut ifaces),
            Step::NeedMore { needed: 28, .. }
        ));
        run(&mut p, &SHB_LE, &mut ifaces);
        let mut bad = EPB_LE;
        bad[4] = 0x31; // not a multiple of 4
        assert!(matches!(
            run(&mut p, &bad, &mut ifaces),
            Step::Fail { at: 4, .. }
        ));
        let mut bad = EPB_LE;
        bad[44] = 0x2c; // trailer differs
        match run(&mut p, &bad, &mut ifaces) {
            Step::Fail { at: 44, kind } => {
                assert!(kind.to_string().contains("trailing total length"))
            }
            other => panic!("unexpected {other:?}"),
        }
        let mut big = EPB_LE;
        big[7] = 0x10; // 256 MiB: over the cap, refused before any allocation
        assert!(matches!(
            run(&mut p, &big, &mut ifaces),
            Step::Fail { at: 4, .. }
        ));
    }

    #[test]
    fn shb_version_and_option_length() {
        let mut p = PcapngParser::default();
        let mut v = SHB_LE;
        v[12] = 2;
        match p.step(&v, &mut Vec::new()) {
            Step::Fail { at: 12, kind } => assert!(kind.to_string().contains("version")),
            other => panic!("unexpected {other:?}"),
        }
        // SHB with an option claiming 0x3030 bytes (libpcap's shb-option-too-long).
        let mut v = [0u8; 36];
        v[..24].copy_from_slice(&SHB_LE[..24]);
        v[4] = 36;
        v[24..28].copy_from_slice(&[0x30, 0x30, 0x30, 0x30]);
        v[32] = 36;
        match p.step(&v, &mut Vec::new()) {
            Step::Fail { at: 26, kind } => assert!(kind.to_string().contains("option length")),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn timestamp_resolutions() {
        let conv = |v: u8, off: i128, ts: u64| {
            TsConv {
                scale: TsConv::from_tsresol(v).unwrap(),
                offset_ns: off,
            }
            .to_ns(ts)
        };
        assert_eq!(conv(6, 0, 1_500_000), 1_500_000_000);
        assert_eq!(conv(9, 0, 7), 7);
        assert_eq!(conv(12, 0, 7_999), 7);
        assert_eq!(conv(0x80 | 10, 0, 1024), 1_000_000_000); // 2^-10 s
        assert_eq!(conv(0x80 | 10, 0, 1), 976_562); // floor(1e9 / 1024)
        assert_eq!(conv(0, 2_000_000_000, 1), 3_000_000_000); // seconds + if_tsoffset
        assert_eq!(conv(9, -5, 1), 0); // clamped at the epoch
        assert_eq!(TsConv::from_tsresol(20), None);
        assert_eq!(TsConv::from_tsresol(0x80 | 64), None);
    }
}
