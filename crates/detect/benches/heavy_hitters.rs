//! `heavy_hitters` over a capture, as `trawl detect heavy-hitters -r` runs it: the file read
//! once into memory (so reading is not measured), then every packet through
//! [`HeavyHitters::observe_packet`] with the default configuration (k = 1024, 10 s intervals);
//! prints the CPU time of this thread per packet (from /proc/thread-self/schedstat, so other
//! processes on a loaded machine do not count) and the reports.
//!
//!     cargo bench -p trawl-detect --bench heavy_hitters -- CAPTURE [RUNS]
use std::time::Instant;

use trawl_capture::{Direction, FileSource, LinkType, PacketRecord, PacketSource};
use trawl_detect::heavy::{HeavyConfig, HeavyHitters};

/// CPU nanoseconds this thread has run.
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let path = args.first().expect("usage: heavy_hitters CAPTURE [RUNS]");
    let runs: usize = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(3);
    // Owned copies of every packet: the measurement is the detector, not the reader.
    let mut packets: Vec<(u64, u32, LinkType, Vec<u8>)> = Vec::new();
    let mut source = FileSource::open(path).expect("capture");
    while let Some(batch) = source.next_batch().expect("read") {
        for p in batch.iter() {
            packets.push((p.ts_ns, p.wire_len, p.link_type, p.data.to_vec()));
        }
    }
    for run in 0..runs {
        let mut hh = HeavyHitters::new(HeavyConfig::default());
        let mut reports = Vec::new();
        let (cpu, wall) = (thread_cpu_ns(), Instant::now());
        for (ts_ns, wire_len, link_type, data) in &packets {
            let pkt = PacketRecord {
                ts_ns: *ts_ns,
                wire_len: *wire_len,
                iface: 0,
                direction: Direction::Unknown,
                link_type: *link_type,
                data,
            };
            hh.observe_packet(&pkt, &mut reports);
        }
        hh.finish(&mut reports);
        let cpu = thread_cpu_ns() - cpu;
        println!(
            "{{\"run\":{run},\"packets\":{},\"cpu_ns_per_packet\":{:.1},\"wall_s\":{:.3},\"reports\":{}}}",
            packets.len(),
            cpu as f64 / packets.len().max(1) as f64,
            wall.elapsed().as_secs_f64(),
            reports.len()
        );
    }
}
