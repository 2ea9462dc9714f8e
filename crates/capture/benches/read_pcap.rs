//! Reading a capture file, side by side with the physical limit: the same bytes read with
//! plain 1 MiB `read` calls and nothing else. The pcap is generated (deterministic 64-byte and
//! 600-byte frames, 100 MB) into the temporary directory and is in the page cache for both.
//! Also checks that reading allocates nothing per packet.
//!
//! `cargo bench -p trawl-capture --bench read_pcap`
use std::hint::black_box;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use trawl_capture::{FileSource, PacketSource};

#[global_allocator]
static ALLOC: trawl_testkit::alloc::CountingAllocator = trawl_testkit::alloc::CountingAllocator;

const PACKETS: u32 = 400_000;

fn make_pcap(path: &Path) -> u64 {
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut header = Vec::new();
    header.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&4u16.to_le_bytes());
    header.extend_from_slice(&[0; 8]);
    header.extend_from_slice(&65535u32.to_le_bytes());
    header.extend_from_slice(&1u32.to_le_bytes());
    out.write_all(&header).unwrap();
    let frame = [0x5au8; 600];
    for i in 0..PACKETS {
        let len: u32 = if i % 3 == 0 { 600 } else { 64 };
        out.write_all(&(1_700_000_000 + i / 100_000).to_le_bytes())
            .unwrap();
        out.write_all(&(i % 100_000 * 10).to_le_bytes()).unwrap();
        out.write_all(&len.to_le_bytes()).unwrap();
        out.write_all(&len.to_le_bytes()).unwrap();
        out.write_all(&frame[..len as usize]).unwrap();
    }
    out.flush().unwrap();
    std::fs::metadata(path).unwrap().len()
}

fn read_plain(path: &Path, buf: &mut [u8]) -> u64 {
    let mut f = std::fs::File::open(path).unwrap();
    let mut total = 0u64;
    loop {
        let n = f.read(buf).unwrap();
        if n == 0 {
            return total;
        }
        total += black_box(buf[n - 1]) as u64 + n as u64;
    }
}

fn read_trawl(path: &Path) -> u64 {
    let mut src = FileSource::open(path).unwrap();
    let mut sum = 0u64;
    while let Some(batch) = src.next_batch().unwrap() {
        for pkt in batch.iter() {
            sum += pkt.wire_len as u64 + pkt.ts_ns;
        }
    }
    sum
}

fn benches(c: &mut Criterion) {
    let path: PathBuf =
        std::env::temp_dir().join(format!("trawl-read-bench-{}.pcap", std::process::id()));
    let bytes = make_pcap(&path);
    let mut buf = vec![0u8; 1 << 20];
    read_plain(&path, &mut buf); // into the page cache

    // Steady state allocates nothing per packet: one source's buffers, then none.
    let mut src = FileSource::open(&path).unwrap();
    let first = src.next_batch().unwrap().map(|b| b.len()).unwrap_or(0);
    let before = trawl_testkit::alloc::allocations();
    let mut n = first as u64;
    while let Some(batch) = src.next_batch().unwrap() {
        n += batch.len() as u64;
    }
    let allocated = trawl_testkit::alloc::allocations() - before;
    assert_eq!(n, PACKETS as u64);
    assert_eq!(
        allocated, 0,
        "{allocated} allocations while reading {n} packets"
    );
    println!("read_pcap: 0 allocations over {n} packets after the first batch");

    let mut g = c.benchmark_group("read_pcap");
    g.throughput(Throughput::Bytes(bytes));
    g.sample_size(10);
    g.bench_function("physical_limit_read_1MiB", |b| {
        b.iter(|| read_plain(&path, &mut buf))
    });
    g.bench_function("trawl_file_source", |b| b.iter(|| read_trawl(&path)));
    g.finish();
    std::fs::remove_file(&path).unwrap();
}

criterion_group!(read, benches);
criterion_main!(read);
