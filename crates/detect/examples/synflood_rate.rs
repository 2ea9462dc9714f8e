//! Packets per second through `SynFloodDetector::observe_packet` (decode included), without
//! criterion: `cargo run --release -p trawl-detect --example synflood_rate [-- FILE...]`.
//!
//! Two inputs: the given capture files replayed from memory (default testdata's android.pcap,
//! repeated to at least 1M packets with timestamps shifted forward), and the worst case for
//! the detector: every packet a SYN to a different random destination (each one updates
//! every sketch row and evicts in the Space-Saving summary), at 100k packets per second of
//! trace time so intervals close as in a real flood.
use std::time::Instant;

use trawl_capture::{Direction, FileSource, LinkType, PacketRecord, PacketSource};
use trawl_detect::sketch::mix64;
use trawl_detect::synflood::{SynFloodConfig, SynFloodDetector};

const TARGET: usize = 1_000_000;

fn measure(name: &str, packets: &[(u64, LinkType, Vec<u8>)]) {
    let mut det = SynFloodDetector::new(SynFloodConfig::default());
    let mut events = Vec::with_capacity(1024);
    let start = Instant::now();
    for (ts, link, data) in packets {
        let pkt = PacketRecord {
            ts_ns: *ts,
            wire_len: data.len() as u32,
            iface: 0,
            direction: Direction::Unknown,
            link_type: *link,
            data,
        };
        det.observe_packet(&pkt, &mut events);
        events.clear();
    }
    det.finish(&mut events);
    let secs = start.elapsed().as_secs_f64();
    let s = det.stats();
    println!(
        "{name}: {} packets ({} SYNs, {} intervals) in {secs:.3} s = {:.2} Mpps",
        s.packets,
        s.syns,
        s.intervals,
        s.packets as f64 / secs / 1e6
    );
}

fn main() {
    let mut files: Vec<String> = std::env::args().skip(1).collect();
    if files.is_empty() {
        files.push(format!(
            "{}/../../testdata/pcaps/android.pcap",
            env!("CARGO_MANIFEST_DIR")
        ));
    }
    for file in &files {
        let mut source = FileSource::open(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        let mut one = Vec::new();
        while let Ok(Some(batch)) = source.next_batch() {
            for p in batch.iter() {
                one.push((p.ts_ns, p.link_type, p.data.to_vec()));
            }
        }
        assert!(!one.is_empty(), "{file}: no packets");
        let span = one.last().unwrap().0 - one[0].0 + 1_000_000_000;
        let mut all = Vec::with_capacity(TARGET + one.len());
        let mut round = 0u64;
        while all.len() < TARGET {
            all.extend(
                one.iter()
                    .map(|(t, l, d)| (t + round * span, *l, d.clone())),
            );
            round += 1;
        }
        measure(file, &all);
    }
    // Worst case: SYNs to distinct random IPv4 destinations.
    let mut s = 1u64;
    let worst: Vec<_> = (0..TARGET as u64)
        .map(|i| {
            s = mix64(s);
            let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
            f.extend_from_slice(&[0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1]);
            f.extend_from_slice(&((s >> 32) as u32).to_be_bytes());
            f.extend_from_slice(&[0x30, 0x39, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0]);
            f.extend_from_slice(&[0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
            (
                1_700_000_000_000_000_000 + i * 10_000,
                LinkType::ETHERNET,
                f,
            )
        })
        .collect();
    measure("worst case (1M SYNs, random destinations)", &worst);
}
