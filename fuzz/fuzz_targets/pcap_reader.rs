//! Feeds arbitrary bytes to the capture-file reader (every format, compressed or not, and HPCAP
//! raw when the first byte asks for it) and reads to the end: it must never panic, never
//! allocate without bound, and keep the `PacketSource` contract.
#![no_main]

use std::io::Cursor;

use libfuzzer_sys::fuzz_target;
use trawl_capture::{FileFormat, FileSource, FileSourceConfig, PacketSource};

fuzz_target!(|data: &[u8]| {
    // First byte: low 3 bits pick the batch size, bit 7 forces HPCAP raw (which has no magic).
    let Some((&ctl, bytes)) = data.split_first() else {
        return;
    };
    let config = FileSourceConfig {
        batch_size: 1 << (ctl & 7),
        format: (ctl & 0x80 != 0).then_some(FileFormat::HpcapRaw),
    };
    let Ok(mut src) = FileSource::from_reader("fuzz", Cursor::new(bytes.to_vec()), config) else {
        return;
    };
    let mut records = 0u64;
    let mut failed = false;
    loop {
        match src.next_batch() {
            Ok(Some(batch)) => {
                assert!(!batch.is_empty());
                for pkt in batch.iter() {
                    assert!((pkt.iface as usize) < batch.interfaces().len());
                    records += 1;
                    std::hint::black_box(pkt.data);
                }
            }
            Ok(None) => break,
            Err(_) => {
                assert!(!failed, "two errors");
                failed = true;
            }
        }
    }
    assert_eq!(src.stats().records, records);
    assert_eq!(src.stats().errors, u64::from(failed));
});
