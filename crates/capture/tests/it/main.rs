//! Integration tests of the capture-file reader: tshark golden views of real captures, broken
//! files, HPCAP raw round trips, and a sweep over the whole corpus when it is present; and the
//! leases of live capture's ring blocks on a real veth pair.
mod broken;
mod golden;
mod hpcap;
#[cfg(target_os = "linux")]
mod live;
mod sweep;

use std::path::{Path, PathBuf};

use trawl_capture::{
    Direction, Error, FileSource, FileSourceConfig, PacketSource, SourceStats, TimestampNs,
};

/// The repository root (two levels above this crate).
pub fn repo_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// A committed test capture.
pub fn pcap(name: &str) -> PathBuf {
    repo_root().join("testdata/pcaps").join(name)
}

/// One record as the tests compare it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub ts_ns: TimestampNs,
    pub caplen: u32,
    pub wire_len: u32,
    pub iface: u16,
    pub direction: Direction,
}

/// Everything a source produced: records, the error that ended it (if any), final counters.
pub struct Outcome {
    pub records: Vec<Rec>,
    pub error: Option<Error>,
    pub stats: SourceStats,
    pub batches: usize,
}

/// Reads `src` to the end, checking the trait contract on the way: batches are non-empty,
/// records' data lengths are their caplens, at most one error, and `Ok(None)` after it.
pub fn drain(src: &mut FileSource) -> Outcome {
    let mut records = Vec::new();
    let mut batches = 0;
    let error = loop {
        match src.next_batch() {
            Ok(Some(batch)) => {
                assert!(!batch.is_empty(), "empty batch from a file source");
                batches += 1;
                for (pkt, meta) in batch.iter().zip(batch.metas()) {
                    assert_eq!(pkt.data.len(), meta.caplen as usize);
                    assert!((pkt.iface as usize) < batch.interfaces().len());
                    records.push(Rec {
                        ts_ns: pkt.ts_ns,
                        caplen: meta.caplen,
                        wire_len: pkt.wire_len,
                        iface: pkt.iface,
                        direction: pkt.direction,
                    });
                }
            }
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    if error.is_some() {
        assert!(
            matches!(src.next_batch(), Ok(None)),
            "Ok(None) after the error"
        );
    }
    assert!(matches!(src.next_batch(), Ok(None)), "Ok(None) stays");
    let stats = src.stats();
    assert_eq!(stats.records, records.len() as u64);
    assert_eq!(stats.errors, u64::from(error.is_some()));
    Outcome {
        records,
        error,
        stats,
        batches,
    }
}

/// Opens and drains a committed capture with the default settings.
pub fn read(name: &str) -> Result<Outcome, Error> {
    let mut src = FileSource::with_config(pcap(name), FileSourceConfig::default())?;
    Ok(drain(&mut src))
}

/// `progress()` walks from the header to the file size for an uncompressed file, and is
/// unknown for a compressed one (its offsets count decompressed bytes).
#[test]
fn progress_reaches_the_file_size() {
    let path = pcap("nanosecs_big_endian.pcap");
    let len = std::fs::metadata(&path).unwrap().len();
    let mut src = FileSource::open(&path).unwrap();
    let (start, total) = src.progress().expect("known for an uncompressed file");
    assert_eq!(total, len);
    assert!(start < total);
    while src.next_batch().unwrap().is_some() {}
    assert_eq!(src.progress(), Some((len, len)));
    let zst = FileSource::open(pcap("pcapng-example.pcapng.zst")).unwrap();
    assert_eq!(zst.progress(), None);
    let piped = FileSource::from_reader(
        "<stdin>",
        std::io::Cursor::new(std::fs::read(&path).unwrap()),
        FileSourceConfig::default(),
    )
    .unwrap();
    assert_eq!(piped.progress(), None);
}
