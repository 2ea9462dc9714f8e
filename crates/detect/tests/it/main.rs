//! Allocation checks: after warm-up, updating the sketches and observing packets allocates
//! nothing, counted per thread.
use trawl_capture::{Direction, LinkType, PacketRecord};
use trawl_detect::sketch::{mix64, CountMin, SpaceSaving};
use trawl_detect::synflood::{SynFloodConfig, SynFloodDetector};

mod heavy_golden;

#[global_allocator]
static GLOBAL: trawl_testkit::alloc::CountingAllocator = trawl_testkit::alloc::CountingAllocator;

/// Allocations of this thread (the harness's own threads allocate too, to report a slow
/// test for one).
fn allocs() -> u64 {
    trawl_testkit::alloc::thread_allocations()
}

/// An Ethernet/IPv4/TCP SYN to `dst`.
fn syn(dst: u32) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1]);
    f.extend_from_slice(&dst.to_be_bytes());
    f.extend_from_slice(&[0x30, 0x39, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0]);
    f.extend_from_slice(&[0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    f
}

#[test]
fn no_allocation_per_update_after_warmup() {
    // Space-Saving under constant eviction: 1M distinct-ish items through 64 counters.
    let mut ss = SpaceSaving::new(64);
    let mut cm = CountMin::with_error(0.001, 0.01, 1);
    let mut s = 0u64;
    for _ in 0..1000 {
        s = mix64(s);
        ss.add(s % 5000, 1);
        cm.add(s, 1);
    }
    let before = allocs();
    for _ in 0..1_000_000 {
        s = mix64(s);
        ss.add(s % 5000, 1 + s % 3);
        cm.add(s, 1);
    }
    assert_eq!(allocs() - before, 0, "sketch updates allocated");

    // The detector over SYNs to random destinations, 100 k per second of trace time, so
    // intervals close (and the summaries clear) during the measured part. 65,536 destinations
    // get about 1.5 SYN/s each, each sketch cell about 37: the default warm-up teaches the
    // cells that level, so no alarm (an alarm's event would be an allocation).
    const N: u64 = 65_536;
    let frames: Vec<Vec<u8>> = (0..N).map(|i| syn(mix64(i) as u32)).collect();
    let mut det = SynFloodDetector::new(SynFloodConfig::default());
    let mut events = Vec::new();
    let feed = |det: &mut SynFloodDetector, i: u64, events: &mut Vec<_>| {
        let data = &frames[(i % N) as usize];
        let pkt = PacketRecord {
            ts_ns: 1_700_000_000_000_000_000 + i * 10_000,
            wire_len: data.len() as u32,
            iface: 0,
            direction: Direction::Unknown,
            link_type: LinkType::ETHERNET,
            data,
        };
        det.observe_packet(&pkt, events);
    };
    for i in 0..700_000 {
        feed(&mut det, i, &mut events);
    }
    let before = allocs();
    for i in 700_000..1_200_000 {
        feed(&mut det, i, &mut events);
    }
    let n = allocs() - before;
    assert!(
        events.is_empty(),
        "{} events: {:?}",
        events.len(),
        events.first()
    );
    assert_eq!(n, 0, "the detector allocated");
    assert!(det.stats().intervals >= 6 && events.is_empty());
}
