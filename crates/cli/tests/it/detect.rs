//! `trawl detect synflood` end to end: clean capture silent, an injected flood reported.
use std::process::Command;

use trawl_capture::{FileSource, LinkType, PacketSource, PcapWriter};

use super::testdata;

/// Ethernet / IPv4 / TCP SYN from `src` to `dst`:80 (checksums 0: not verified).
fn syn_frame(src: [u8; 4], dst: [u8; 4], sport: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[
        0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    f
}

#[test]
fn detect_synflood_reports_injected_flood_only() {
    // android.pcap (Ethernet, 25 real SYNs over 102 s) plus 400 SYN/s to 10.9.9.9 for 6 s
    // from 20 s in, written as one capture.
    let mut source = FileSource::open(testdata("pcaps/android.pcap")).expect("open");
    let mut packets = Vec::new();
    while let Some(batch) = source.next_batch().expect("read") {
        for p in batch.iter() {
            assert_eq!(p.link_type, LinkType::ETHERNET);
            packets.push((p.ts_ns, p.data.to_vec()));
        }
    }
    let t0 = packets[0].0;
    let flood_start = t0 + 20_000_000_000;
    for i in 0..2400u64 {
        let src = (0x0b00_0000u32 + i as u32).to_be_bytes();
        packets.push((
            flood_start + i * 2_500_000,
            syn_frame(src, [10, 9, 9, 9], i as u16),
        ));
    }
    packets.sort_by_key(|p| p.0);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("flood.pcap");
    let file = std::fs::File::create(&path).expect("create");
    let mut w =
        PcapWriter::new(std::io::BufWriter::new(file), LinkType::ETHERNET, 65535).expect("writer");
    for (ts, data) in &packets {
        w.write(*ts, data.len() as u32, data).expect("write");
    }
    w.finish().expect("flush");

    let run = |file: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
            .args(["detect", "synflood", "-r", file])
            .output()
            .expect("run trawl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let summary: serde_json::Value =
            serde_json::from_str(stderr.lines().last().unwrap_or_default()).expect("summary");
        (lines, summary)
    };

    let (clean, summary) = run(&testdata("pcaps/android.pcap"));
    assert!(clean.is_empty(), "{clean:?}");
    assert_eq!(summary["syns"], 25);

    let (events, summary) = run(path.to_str().unwrap());
    assert_eq!(summary["syns"], 2425);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["event"], "start");
    assert_eq!(events[0]["victim"], "10.9.9.9");
    let detected = events[0]["detected_ns"].as_u64().unwrap();
    assert!(detected > flood_start && detected - flood_start <= 2_000_000_000);
    assert_eq!(events[1]["event"], "end");
    assert_eq!(events[1]["victim"], "10.9.9.9");
    assert_eq!(events[1]["peak_rate"].as_f64(), Some(400.0));
    assert_eq!(summary["active_at_end"], serde_json::json!([]));
}
