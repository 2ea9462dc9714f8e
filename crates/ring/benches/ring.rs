//! Producer throughput of the ring (records/s) for 64-byte and 1500-byte records, with 0, 1, 2
//! and 4 lossy listener threads and with 1 lossless listener thread, beside the physical limit:
//! a plain copy of the same bytes into a buffer of the ring's size at the same offsets. The
//! ratio `lossy_N / lossy_0` is the cost of the listeners. Also checks that pushing and
//! publishing allocate nothing.
//!
//! `cargo bench -p trawl-ring --bench ring`
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use trawl_capture::{Interface, LinkType, RecordMeta};
use trawl_ring::{Mode, Producer, Recv, Ring, RingConfig};

#[global_allocator]
static ALLOC: trawl_testkit::alloc::CountingAllocator = trawl_testkit::alloc::CountingAllocator;

const CAPACITY: usize = 16 << 20;
const BATCH: usize = 64;

fn producer() -> Producer {
    let mut p = Producer::new(&RingConfig::with_capacity(CAPACITY)).unwrap();
    p.add_interface(&Interface {
        link_type: LinkType::ETHERNET,
        snaplen: 65535,
        name: Some("bench0".into()),
    })
    .unwrap();
    p
}

/// Listener threads reading every record they get until told to stop.
struct Listeners {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<u64>>,
}

impl Listeners {
    fn start(ring: &Ring, lossy: usize, lossless: usize) -> Listeners {
        let stop = Arc::new(AtomicBool::new(false));
        let modes = std::iter::repeat_n(Mode::Lossy, lossy)
            .chain(std::iter::repeat_n(Mode::Lossless, lossless));
        let threads = modes
            .map(|mode| {
                let mut l = ring.listen(mode).unwrap();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut sum = 0u64;
                    loop {
                        match l.wait(Duration::from_millis(50)).unwrap() {
                            Recv::Ready(rec) => {
                                sum = sum.wrapping_add(rec.data[rec.data.len() - 1] as u64)
                            }
                            Recv::Empty if stop.load(Ordering::Relaxed) => return sum,
                            Recv::Empty => {}
                            Recv::Closed => return sum,
                        }
                    }
                })
            })
            .collect();
        Listeners { stop, threads }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            black_box(t.join().unwrap());
        }
    }
}

fn push_n(p: &mut Producer, meta: &RecordMeta, data: &[u8], n: usize) {
    for i in 0..n {
        p.push(meta, data).unwrap();
        if (i + 1) % BATCH == 0 {
            p.publish();
        }
    }
    p.publish();
}

/// The physical limit: the same bytes copied to the same offsets of a buffer of the same size.
fn copy_n(buf: &mut [u8], at: &mut usize, data: &[u8], n: usize) {
    let stride = (24 + data.len() + 7) & !7;
    for _ in 0..n {
        if *at + stride > buf.len() {
            *at = 0;
        }
        buf[*at + 24..*at + 24 + data.len()].copy_from_slice(data);
        *at += stride;
    }
    black_box(&buf[..8]);
}

fn zero_allocations() {
    let mut p = producer();
    let ring = p.ring();
    let listeners = Listeners::start(&ring, 1, 1);
    let data = [0x5au8; 1500];
    let meta = RecordMeta {
        ts_ns: 1,
        wire_len: 1500,
        ..RecordMeta::default()
    };
    // Warm up: every code path (wrap, waits, skips) once.
    push_n(&mut p, &meta, &data, 50_000);
    let before = trawl_testkit::alloc::allocations();
    let n = 200_000;
    push_n(&mut p, &meta, &data[..64], n);
    push_n(&mut p, &meta, &data, n);
    let allocated = trawl_testkit::alloc::allocations() - before;
    p.close();
    listeners.stop();
    assert_eq!(
        allocated,
        0,
        "{allocated} allocations over {} records",
        2 * n
    );
    println!(
        "ring_push: 0 allocations over {} records (1 lossy + 1 lossless listener)",
        2 * n
    );
}

fn benches(c: &mut Criterion) {
    zero_allocations();
    for (size, n) in [(64usize, 100_000usize), (1500, 20_000)] {
        let data: Vec<u8> = (0..size).map(|i| i as u8).collect();
        let meta = RecordMeta {
            ts_ns: 1,
            wire_len: size as u32,
            ..RecordMeta::default()
        };
        let mut g = c.benchmark_group(format!("ring_push_{size}B"));
        g.throughput(Throughput::Elements(n as u64));
        g.sample_size(10);
        let mut buf = vec![0u8; CAPACITY];
        let mut at = 0;
        g.bench_function("physical_limit_memcpy", |b| {
            b.iter(|| copy_n(&mut buf, &mut at, &data, n))
        });
        for (name, lossy, lossless) in [
            ("lossy", 0, 0),
            ("lossy", 1, 0),
            ("lossy", 2, 0),
            ("lossy", 4, 0),
            ("lossless", 0, 1),
        ] {
            let count = lossy + lossless;
            let mut p = producer();
            let listeners = Listeners::start(&p.ring(), lossy, lossless);
            g.bench_with_input(BenchmarkId::new(name, count), &n, |b, &n| {
                b.iter(|| push_n(&mut p, &meta, &data, n))
            });
            let missed: u64 = p.listeners().iter().map(|l| l.stats.records_missed).sum();
            p.close();
            listeners.stop();
            let st = p.stats();
            println!(
                "  {name}/{count}: {} records, producer waited {} times ({:.1} ms), {} lossy skips, {missed} records missed",
                st.records_written,
                st.wait_count,
                st.wait_ns as f64 / 1e6,
                st.lossy_skips
            );
        }
        g.finish();
    }
}

criterion_group!(ring, benches);
criterion_main!(ring);
