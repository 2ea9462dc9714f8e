//! HPCAP raw files, written here (no public sample exists): records, the zero-timestamp
//! padding record at the end, detection by request or by extension. The large file also
//! exercises records that straddle the reader's 1 MiB reads.
use std::fs;
use std::io::{Cursor, Write};

use trawl_capture::{ErrorKind, FileFormat, FileSource, FileSourceConfig, LinkType, PacketSource};

use crate::drain;

/// Record `i`: ts = 1.7e9 s + i µs, caplen `len(i)`, wire length caplen + i % 3, bytes `i`.
fn caplen(i: u32) -> u16 {
    (14 + (i * 37) % 1500) as u16
}

fn hpcap_bytes(n: u32, padding: u16) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        let cap = caplen(i);
        out.extend_from_slice(&1_700_000_000u32.to_le_bytes());
        out.extend_from_slice(&(i * 1000).to_le_bytes());
        out.extend_from_slice(&cap.to_le_bytes());
        out.extend_from_slice(&(cap + (i % 3) as u16).to_le_bytes());
        out.extend(std::iter::repeat_n(i as u8, cap as usize));
    }
    // Padding record: zero timestamp, lengths give the padding that follows.
    out.extend_from_slice(&[0; 8]);
    out.extend_from_slice(&padding.to_le_bytes());
    out.extend_from_slice(&padding.to_le_bytes());
    out.extend(std::iter::repeat_n(0u8, padding as usize));
    out
}

/// A file `name` holding `bytes`, removed with the returned guard (the name's extension
/// selects the format).
fn temp_file(name: &str, bytes: &[u8]) -> tempfile::TempPath {
    let mut f = tempfile::Builder::new()
        .prefix("trawl-capture-it-")
        .suffix(&format!("-{name}"))
        .tempfile()
        .unwrap();
    f.write_all(bytes).unwrap();
    f.into_temp_path()
}

fn check_records(src: &mut FileSource, n: u32) {
    let mut i = 0u32;
    loop {
        let batch = match src.next_batch() {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => panic!("{e}"),
        };
        for pkt in batch.iter() {
            assert_eq!(pkt.ts_ns, 1_700_000_000_000_000_000 + u64::from(i) * 1000);
            assert_eq!(pkt.data.len(), usize::from(caplen(i)));
            assert_eq!(pkt.wire_len, u32::from(caplen(i)) + i % 3);
            assert!(pkt.data.iter().all(|&b| b == i as u8), "record {i} bytes");
            assert_eq!(pkt.link_type, LinkType::ETHERNET);
            i += 1;
        }
    }
    assert_eq!(i, n);
    assert_eq!(src.stats().records, u64::from(n));
    assert_eq!(src.stats().errors, 0);
}

#[test]
fn hpcap_by_extension_and_by_request() {
    let bytes = hpcap_bytes(5, 100);
    let path = temp_file("small.raw", &bytes);
    let mut src = FileSource::open(&path).unwrap();
    assert_eq!(src.format(), FileFormat::HpcapRaw);
    check_records(&mut src, 5);

    // Without the extension, only a request makes it HPCAP.
    let path = temp_file("small.bin", &bytes);
    assert!(matches!(
        FileSource::open(&path).err().unwrap().kind,
        ErrorKind::UnknownFormat { .. }
    ));
    let config = FileSourceConfig {
        format: Some(FileFormat::HpcapRaw),
        ..FileSourceConfig::default()
    };
    let mut src = FileSource::with_config(&path, config).unwrap();
    check_records(&mut src, 5);
}

#[test]
fn hpcap_large_compressed_and_batch_sizes() {
    // ~ 11 MiB: records straddle many 1 MiB reads.
    let n = 15_000;
    let bytes = hpcap_bytes(n, 4000);
    assert!(bytes.len() > 8 << 20);
    for batch_size in [1, 7, 256, 100_000] {
        let config = FileSourceConfig {
            batch_size,
            format: Some(FileFormat::HpcapRaw),
        };
        let mut src = FileSource::from_reader("mem", Cursor::new(bytes.clone()), config).unwrap();
        check_records(&mut src, n);
    }
    let gz = {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&bytes).unwrap();
        enc.finish().unwrap()
    };
    let path = temp_file("big.hpcap.gz", &gz);
    let mut src = FileSource::open(&path).unwrap();
    assert_eq!(src.format(), FileFormat::HpcapRaw);
    check_records(&mut src, n);
}

#[test]
fn hpcap_truncated_and_misread() {
    let mut bytes = hpcap_bytes(3, 0);
    bytes.truncate(bytes.len() - 12 - 5); // drop the padding record and 5 data bytes
    let path = temp_file("cut.raw", &bytes);
    let out = drain(&mut FileSource::open(&path).unwrap());
    assert_eq!(out.records.len(), 2);
    let e = out.error.unwrap();
    assert!(
        matches!(
            e.kind,
            ErrorKind::Truncated {
                what: "hpcap packet data",
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("cut.raw"));

    // A missing padding record is a clean end when the file ends on a record boundary.
    let mut bytes = hpcap_bytes(3, 0);
    bytes.truncate(bytes.len() - 12);
    let out = drain(
        &mut FileSource::from_reader(
            "nopad",
            Cursor::new(bytes),
            FileSourceConfig {
                format: Some(FileFormat::HpcapRaw),
                ..FileSourceConfig::default()
            },
        )
        .unwrap(),
    );
    assert_eq!((out.records.len(), out.error.is_none()), (3, true));

    // A pcap read as HPCAP: the first "record" fails the sanity checks.
    let pcap = fs::read(crate::pcap("raw_ip.pcap")).unwrap();
    let config = FileSourceConfig {
        format: Some(FileFormat::HpcapRaw),
        ..FileSourceConfig::default()
    };
    let out = drain(&mut FileSource::from_reader("x.pcap", Cursor::new(pcap), config).unwrap());
    let e = out.error.expect("garbage must not pass as HPCAP");
    assert!(matches!(e.kind, ErrorKind::InvalidField { .. }), "{e}");
}
