//! `trawl detect synflood` end to end: clean capture silent, an injected flood reported.
use std::process::Command;

use trawl_capture::{FileSource, LinkType, PacketSource, PcapWriter};

use super::{summary, testdata, trawl};

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

/// android.pcap (Ethernet, 25 real SYNs over 102 s) plus 400 SYN/s to 10.9.9.9 for 6 s
/// from 20 s in, written as one capture `dir/flood.pcap`; its path and the flood's start.
pub(crate) fn flood_capture(dir: &std::path::Path) -> (std::path::PathBuf, u64) {
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
    let path = dir.join("flood.pcap");
    let file = std::fs::File::create(&path).expect("create");
    let mut w =
        PcapWriter::new(std::io::BufWriter::new(file), LinkType::ETHERNET, 65535).expect("writer");
    for (ts, data) in &packets {
        w.write(*ts, data.len() as u32, data).expect("write");
    }
    w.finish().expect("flush");
    (path, flood_start)
}

#[test]
fn detect_synflood_reports_injected_flood_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, flood_start) = flood_capture(dir.path());
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

#[test]
fn heavy_hitters_count_every_keyed_packet_once_per_flow_and_twice_per_host() {
    let sample = testdata("pcaps/android.pcap");
    let out = trawl(&[
        "detect",
        "heavy-hitters",
        "-r",
        &sample,
        "--interval",
        "30s",
        "--top",
        "3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports: Vec<serde_json::Value> = String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let s = summary(&out);
    assert_eq!(s["events"].as_u64().unwrap(), reports.len() as u64);
    assert!(reports.len() >= 3, "{} reports over 100 s", reports.len());
    let flows = trawl(&["flows", "-r", &sample, "--summary", "json"]);
    let d = &summary(&flows)["decode"];
    let keyed = d["ok"].as_u64().unwrap()
        + d["transport_incomplete"].as_u64().unwrap()
        + d["fragment"].as_u64().unwrap();
    let total = |key: &str| -> u64 {
        reports
            .iter()
            .map(|r| r[key]["total"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(total("flows_by_packets"), keyed);
    assert_eq!(total("hosts_by_packets"), 2 * keyed);
    for r in &reports {
        assert_eq!(r["event"], "heavy_hitters");
        assert!(r["start_ns"].as_u64() < r["end_ns"].as_u64());
        for key in ["flows_by_bytes", "hosts_by_packets"] {
            let items = r[key]["items"].as_array().unwrap();
            assert!(items.len() <= 3);
            let counts: Vec<u64> = items.iter().map(|i| i["count"].as_u64().unwrap()).collect();
            assert!(
                counts.windows(2).all(|w| w[0] >= w[1]),
                "largest first: {counts:?}"
            );
        }
    }
    // The phone (192.168.2.16 in its busiest interval) tops the hosts of the interval with
    // the most packets.
    let busiest = reports
        .iter()
        .max_by_key(|r| r["hosts_by_packets"]["total"].as_u64())
        .unwrap();
    assert_eq!(
        busiest["hosts_by_packets"]["items"][0]["item"],
        "192.168.2.16"
    );
    let bad = trawl(&[
        "detect",
        "heavy-hitters",
        "-r",
        &sample,
        "--top",
        "3",
        "--min-bytes",
        "9",
    ]);
    assert_eq!(bad.status.code(), Some(2));
}
