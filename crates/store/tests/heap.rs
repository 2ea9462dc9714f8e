//! The flow-database writer's memory is a high-water mark, not a leak: over many 5-minute
//! blocks its heap stops growing once it has written its largest block, and that mark is a
//! small multiple of one block's rows.
//!
//! A binary of its own because it counts every allocation of the process (a global allocator),
//! and other tests running beside it would be counted too.

use trawl_store::{Ingest, StoreConfig, StoredFlow, BLOCK_NS};
use trawl_testkit::alloc::{self, CountingAllocator};

/// Counts the bytes held (allocated and not yet freed) and their peak.
#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

#[path = "rows.rs"]
mod rows;
use rows::{row, DAY0};

#[test]
fn the_writer_holds_a_high_water_mark_not_a_growing_heap() {
    let dir = tempfile::tempdir().unwrap();
    let mut ingest = Ingest::open(dir.path(), StoreConfig::default()).unwrap();
    let iface = ingest.iface("eth0").unwrap();
    let base = 20_000u64;
    // Rows per block wander around `base` as a monitor's do (the soak's blocks held 109k to
    // 121k records): each block a little larger or smaller than the one before, the largest
    // ones in the first cycle. Every cycle holds the same records (at other times), so its
    // transient allocations are the same as the first's.
    let wander = [100, 103, 97, 105, 99, 102, 96, 101];
    let cycles = 3;
    // Allocated up front: pushing into them must not count as the writer's memory.
    let mut held_after = Vec::with_capacity(cycles * wander.len());
    let mut peak_in_cycle = Vec::with_capacity(cycles);
    for cycle in 0..cycles {
        alloc::reset_peak();
        for (k, pct) in wander.iter().enumerate() {
            let block = (cycle * wander.len() + k) as u64;
            let start = DAY0 + block * BLOCK_NS;
            let rows = base * pct / 100;
            for i in 0..rows {
                ingest
                    .push_row(
                        iface,
                        row(k as u64 * 100_000 + i, start + i * (BLOCK_NS / rows)),
                    )
                    .unwrap();
            }
            // The next block's first records arrive; this one's grace has passed.
            ingest.advance(start + 2 * BLOCK_NS).unwrap();
            held_after.push(alloc::held_bytes() as usize);
        }
        peak_in_cycle.push(alloc::peak_bytes() as usize);
    }
    let stats = ingest.finish().unwrap();
    assert_eq!(stats.blocks as usize, cycles * wander.len());

    let row_bytes = std::mem::size_of::<StoredFlow>();
    eprintln!(
        "rows per block ~{base}, {row_bytes} B per row; held between blocks: {:?} KiB; \
         peak per cycle: {:?} KiB",
        held_after.iter().map(|h| h >> 10).collect::<Vec<_>>(),
        peak_in_cycle.iter().map(|h| h >> 10).collect::<Vec<_>>()
    );

    let largest = (base * 105 / 100) as usize * row_bytes;
    let first = &held_after[..wander.len()];
    let later = &held_after[wander.len()..];
    let first_max = *first.iter().max().unwrap();
    // Held between blocks: no growth after the first cycle (4 KiB of slack: a leak of even
    // 200 bytes per block shows over these 24 blocks).
    for (i, &h) in later.iter().enumerate() {
        assert!(
            h <= first_max + 4096,
            "after block {}: {h} bytes held, more than the first cycle's {first_max}: \
             held after each block: {held_after:?}",
            wander.len() + i
        );
    }
    // The peak while writing: no higher in later cycles than in the first.
    for (c, &p) in peak_in_cycle.iter().enumerate().skip(1) {
        assert!(
            p <= peak_in_cycle[0] + 4096,
            "cycle {c}: peak {p} bytes, above the first cycle's {}: {peak_in_cycle:?}",
            peak_in_cycle[0]
        );
    }
    // And the mark is what the writer needs, not what doubling buffers leave behind: a spare
    // row buffer and the sort buffer (2 x the largest block's rows), its columns (~1 x) and
    // dictionaries and sort keys (~1 x), each with at most an eighth of headroom: under 5 x.
    // (Buffers grown by doubling held 6.5 x with 40,000-row blocks.)
    assert!(
        first_max <= 5 * largest,
        "{first_max} bytes held between blocks, more than 5 x the largest block's {largest} \
         bytes of rows: {held_after:?}"
    );
}
