//! Broken files: the error names the file, the offset and the field; good records before the
//! damage are delivered first.
use std::fs;
use std::io::Cursor;

use rstest::rstest;
use trawl_capture::{Error, ErrorKind, FileSource, FileSourceConfig};

use crate::{drain, pcap, read};

/// Checks `e` is `InvalidField { field }` at `offset` and that its message says so.
fn assert_field(e: &Error, name: &str, field: &str, offset: u64) {
    match e.kind.root() {
        ErrorKind::InvalidField { field: f, .. } => assert_eq!(*f, field, "{e}"),
        other => panic!("{name}: expected invalid {field}, got {other}"),
    }
    assert_eq!(e.offset, offset, "{e}");
    let msg = e.to_string();
    assert!(msg.contains(name), "{msg}");
    assert!(msg.contains(&format!("offset {offset}:")), "{msg}");
    assert!(msg.contains(field), "{msg}");
}

/// Files rejected at open, as libpcap rejects them.
#[rstest]
#[case::archaic_version("pcap-invalid-version-1.pcap", "pcap header version", 4)]
#[case::newer_version("pcap-invalid-version-2.pcap", "pcap header version", 4)]
#[case::reserved_link_bits("linktype-reserved-field-not-zero.pcap", "pcap header link type", 20)]
#[case::pcapng_version_0_1("pcapng-invalid-vers-1.pcapng", "pcapng section header version", 12)]
#[case::pcapng_version_1_1("pcapng-invalid-vers-2.pcapng", "pcapng section header version", 12)]
// The option overruns the block, whose trailing length is then option bytes: the trailer check
// comes first.
#[case::shb_option_too_long("shb-option-too-long.pcapng", "pcapng block trailing total length", 48)]
fn rejected_at_open(#[case] name: &str, #[case] field: &str, #[case] offset: u64) {
    let e = FileSource::open(pcap(name)).err().expect("must not open");
    assert_field(&e, name, field, offset);
}

#[test]
fn pcap_records_without_file_header() {
    let name = "test_without_pcap_header.pcap";
    let e = FileSource::open(pcap(name)).err().expect("must not open");
    assert!(matches!(e.kind, ErrorKind::UnknownFormat { ref magic } if magic == &[0, 0, 0, 0]));
    assert!(e.to_string().contains(name));
}

#[test]
fn damaged_pcap_delivers_first_record() {
    // pcapfix's example: one good record, then a record header claiming 16896 bytes of which
    // 8772 remain (tshark: "cut short in the middle of a packet").
    let out = read("test_damaged.pcap").unwrap();
    assert_eq!(out.records.len(), 1);
    let e = out.error.expect("error after the good record");
    assert!(matches!(
        e.kind,
        ErrorKind::Truncated {
            what: "pcap packet data",
            needed: 16912,
            available: 8772
        }
    ));
    assert_eq!(e.offset, 114);
    assert!(e.to_string().contains("test_damaged.pcap: offset 114:"));
}

#[test]
fn pcapng_bad_block_length() {
    // python-pcapng's test007: an SPB whose total length (139) is not a multiple of 4.
    let name = "python-pcapng-test007.ntar";
    let out = read(name).unwrap();
    assert_eq!(out.records.len(), 0);
    assert_field(
        &out.error.expect("error"),
        name,
        "pcapng block total length",
        100,
    );
}

#[rstest]
#[case("gopacket-le-test901.pcapng")]
#[case("gopacket-be-test901.pcapng")]
fn pcapng_bad_second_section(#[case] name: &str) {
    // One packet in a good section, then a section of version 2.0 (tshark reads 1 packet too).
    let out = read(name).unwrap();
    assert_eq!(out.records.len(), 1);
    assert_field(
        &out.error.expect("error"),
        name,
        "pcapng section header version",
        492,
    );
}

/// Offsets of the blocks of a little-endian pcapng file.
fn blocks(data: &[u8]) -> Vec<(usize, u32)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 8 <= data.len() {
        let btype = u32::from_le_bytes(data[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(data[at + 4..at + 8].try_into().unwrap());
        out.push((at, btype));
        at += len as usize;
    }
    out
}

fn from_bytes(name: &str, bytes: Vec<u8>, batch_size: usize) -> Result<FileSource, Error> {
    FileSource::from_reader(
        name,
        Cursor::new(bytes),
        FileSourceConfig {
            batch_size,
            ..FileSourceConfig::default()
        },
    )
}

#[rstest]
#[case::not_multiple_of_4(0x0000_0123, "pcapng block total length")]
#[case::too_short(8, "pcapng block total length")]
#[case::huge(0x7fff_fff0, "pcapng block total length")]
fn pcapng_damaged_third_packet(#[case] len: u32, #[case] field: &str) {
    let data = fs::read(pcap("gopacket-le-test001.pcapng")).unwrap();
    let epbs: Vec<usize> = blocks(&data)
        .into_iter()
        .filter(|&(_, t)| t == 6)
        .map(|(at, _)| at)
        .collect();
    assert_eq!(epbs.len(), 4);
    let mut bad = data.clone();
    bad[epbs[2] + 4..epbs[2] + 8].copy_from_slice(&len.to_le_bytes());
    for batch_size in [1, 256] {
        let mut src = from_bytes("damaged.pcapng", bad.clone(), batch_size).unwrap();
        let out = drain(&mut src);
        assert_eq!(out.records.len(), 2, "good records first");
        assert_field(
            &out.error.expect("error"),
            "damaged.pcapng",
            field,
            epbs[2] as u64 + 4,
        );
    }
}

#[test]
fn pcapng_trailer_mismatch_and_truncation() {
    let data = fs::read(pcap("gopacket-le-test001.pcapng")).unwrap();
    let last = blocks(&data).last().unwrap().0;
    let mut bad = data.clone();
    let n = bad.len();
    bad[n - 4] ^= 4;
    let out = drain(&mut from_bytes("t.pcapng", bad, 256).unwrap());
    assert_eq!(out.records.len(), 3);
    assert_field(
        &out.error.unwrap(),
        "t.pcapng",
        "pcapng block trailing total length",
        n as u64 - 4,
    );

    let out = drain(&mut from_bytes("t.pcapng", data[..n - 1].to_vec(), 256).unwrap());
    assert_eq!(out.records.len(), 3);
    let e = out.error.unwrap();
    assert!(
        matches!(
            e.kind,
            ErrorKind::Truncated {
                what: "pcapng block",
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.offset, last as u64);
}

#[test]
fn truncated_gzip_is_a_decompression_error() {
    let data = fs::read(pcap("anon-v4.pcap.gz")).unwrap();
    let cut = data[..data.len() / 2].to_vec();
    let out = drain(&mut from_bytes("cut.pcap.gz", cut, 256).unwrap());
    assert!(!out.records.is_empty(), "records before the cut");
    let e = out.error.expect("error");
    assert!(matches!(e.kind, ErrorKind::Decompress(_)), "{e}");
    assert!(e.to_string().contains("gzip"), "{e}");
}

#[test]
fn truncated_inside_compressed_stream_says_so() {
    // A whole zstd frame holding a pcap cut in the middle of a record.
    let data = fs::read(pcap("raw_ip.pcap")).unwrap();
    let z = zstd::encode_all(&data[..data.len() - 3], 3).unwrap();
    let out = drain(&mut from_bytes("cut.pcap.zst", z, 256).unwrap());
    assert_eq!(out.records.len(), 99);
    let e = out.error.expect("error");
    assert!(matches!(e.kind.root(), ErrorKind::Truncated { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains("zstd-compressed") && msg.contains("decompressed bytes"),
        "{msg}"
    );
}
