//! Arbitrary bytes as a packet store segment and its index: reading, index parsing and crash
//! repair must never panic, and after repair the segment must read back without errors.
#![no_main]

use std::ops::ControlFlow;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use trawl_packets::{repair_segment, PacketStore, SegmentIndex, Selection};

fuzz_target!(|data: &[u8]| {
    let _ = SegmentIndex::decode(Path::new("fuzz.idx"), data);
    // Byte 0: bit 0 = write the index at all, bit 1 = read with a host/port filter;
    // bytes 1..5: length of the segment (little-endian), the rest after it is the index.
    if data.len() < 5 {
        return;
    }
    let ctl = data[0];
    let rest = &data[5..];
    let split = (u32::from_le_bytes(data[1..5].try_into().unwrap()) as usize).min(rest.len());
    let (segment, index) = rest.split_at(split);
    let root = std::env::temp_dir().join(format!("trawl-fuzz-store-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let hour = root.join("2024-01-01").join("00");
    std::fs::create_dir_all(&hour).unwrap();
    let seg = hour.join("01704067200000000000_w0_eth0.pcap");
    std::fs::write(&seg, segment).unwrap();
    if ctl & 1 == 1 {
        std::fs::write(hour.join("01704067200000000000_w0_eth0.pcap.idx"), index).unwrap();
    }
    let store = PacketStore::open(&root).unwrap();
    let all = Selection {
        from_ns: 0,
        to_ns: u64::MAX,
        ifaces: Vec::new(),
        filter: (ctl & 2 == 2).then(|| "host 10.0.0.1 and tcp port 80".to_string()),
    };
    let mut n = 0u64;
    let _ = store.read(&all, |_| {
        n += 1;
        ControlFlow::Continue(())
    });
    let _ = std::fs::remove_file(hour.join("01704067200000000000_w0_eth0.pcap.idx"));
    if let Ok(report) = repair_segment(&seg, true, 64, 1_000_000) {
        if !report.removed {
            // Without a filter: one may not compile for whatever link type the header names.
            let plain = Selection {
                filter: None,
                ..all
            };
            let stats = store.read(&plain, |_| ControlFlow::Continue(())).unwrap();
            assert!(stats.errors.is_empty(), "{:?}", stats.errors);
            assert!(stats.packets_scanned <= report.packets);
        }
    }
    let _ = std::fs::remove_dir_all(&root);
});
