//! HPCAP raw files, as written by the HPCAP driver's dumper (used by M³Omon): no file header,
//! a stream of records `u32 sec, u32 nsec, u16 caplen, u16 len` (little-endian) each followed by
//! `caplen` bytes of an Ethernet frame, and at the end a padding record with a zero timestamp
//! whose length fields give the size of the padding that fills the last block.
use super::{field_error, Step};
use crate::{Direction, RecordMeta};

/// Length of a record header.
pub(crate) const RECORD_HEADER_LEN: usize = 12;

/// Reader state: none, records are self-contained.
#[derive(Debug, Default)]
pub(crate) struct HpcapParser;

impl HpcapParser {
    /// Parses the record at the start of `data`.
    #[inline]
    pub(crate) fn step(&mut self, data: &[u8]) -> Step {
        if data.len() < RECORD_HEADER_LEN {
            return Step::NeedMore {
                needed: RECORD_HEADER_LEN,
                what: "hpcap record header",
            };
        }
        let sec = u32::from_le_bytes([data[0], data[1], data[2], data[3]]);
        let nsec = u32::from_le_bytes([data[4], data[5], data[6], data[7]]);
        let caplen = u16::from_le_bytes([data[8], data[9]]);
        let len = u16::from_le_bytes([data[10], data[11]]);
        if sec == 0 && nsec == 0 {
            // The padding record: the data ends here by design.
            return Step::End;
        }
        // With no magic number to go by, these checks are what tells a wrongly chosen format
        // from real data.
        if nsec >= 1_000_000_000 {
            return Step::Fail {
                at: 4,
                kind: field_error("hpcap record nsec", format!("{nsec}, must be below 10^9")),
            };
        }
        if caplen > len {
            return Step::Fail {
                at: 8,
                kind: field_error(
                    "hpcap record caplen",
                    format!("{caplen}, larger than the wire length {len}"),
                ),
            };
        }
        let total = RECORD_HEADER_LEN + usize::from(caplen);
        if data.len() < total {
            return Step::NeedMore {
                needed: total,
                what: "hpcap packet data",
            };
        }
        Step::Packet {
            meta: RecordMeta {
                ts_ns: u64::from(sec) * 1_000_000_000 + u64::from(nsec),
                offset: RECORD_HEADER_LEN,
                caplen: u32::from(caplen),
                wire_len: u32::from(len),
                iface: 0,
                direction: Direction::Unknown,
            },
            consumed: total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_record_and_padding() {
        #[rustfmt::skip]
        let data = [
            0x01, 0x00, 0x00, 0x00, // sec 1
            0x0a, 0x00, 0x00, 0x00, // nsec 10
            0x02, 0x00, 0x3c, 0x00, // caplen 2, len 60
            0xde, 0xad,             // data
            0x00, 0x00, 0x00, 0x00, // padding record: sec 0
            0x00, 0x00, 0x00, 0x00, //   nsec 0
            0x10, 0x00, 0x10, 0x00, //   padding size
        ];
        let mut p = HpcapParser;
        match p.step(&data) {
            Step::Packet { meta, consumed } => {
                assert_eq!(consumed, 14);
                assert_eq!(meta.ts_ns, 1_000_000_010);
                assert_eq!((meta.caplen, meta.wire_len), (2, 60));
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(matches!(p.step(&data[14..]), Step::End));
        assert!(matches!(
            p.step(&data[..13]),
            Step::NeedMore { needed: 14, .. }
        ));
    }

    #[test]
    fn bad_fields() {
        let mut rec = [0u8; 12];
        rec[0] = 1;
        rec[4..8].copy_from_slice(&1_000_000_000u32.to_le_bytes());
        assert!(matches!(HpcapParser.step(&rec), Step::Fail { at: 4, .. }));
        rec[4..8].copy_from_slice(&0u32.to_le_bytes());
        rec[8] = 5; // caplen 5 > len 0
        assert!(matches!(HpcapParser.step(&rec), Step::Fail { at: 8, .. }));
    }
}
