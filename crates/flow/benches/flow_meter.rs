//! The flow meter's hot path: decoding alone, and decode + table update over 10 k and 1 M
//! concurrent flows (the 1 M case is memory-bound, the 10 k case cache-resident). Packets are
//! deterministic 64-byte Ethernet/IPv4/TCP frames visiting flows in a scattered order.
//! Before measuring, each case checks that a warmed-up meter allocates nothing per packet.
//!
//! `cargo bench -p trawl-flow --bench flow_meter`
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use trawl_capture::{Direction, LinkType, PacketRecord};
use trawl_flow::decode::{decode, DecodeConfig, Decoded};
use trawl_flow::{FlowConfig, FlowMeter, FlowRecord};

#[global_allocator]
static ALLOC: trawl_testkit::alloc::CountingAllocator = trawl_testkit::alloc::CountingAllocator;

/// A 64-byte frame of flow `i` (addresses and ports from the index), either direction.
fn frame(i: u32, reply: bool) -> [u8; 64] {
    let mut f = [0u8; 64];
    f[12] = 0x08;
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = 64;
    f[23] = 6;
    let client = [10, (i >> 16) as u8, (i >> 8) as u8, i as u8];
    let server = [172, 16, (i >> 12) as u8 & 0x0f, 1];
    let cport = 1024 + (i % 60000) as u16;
    let (src, dst, sp, dp) = if reply {
        (server, client, 443, cport)
    } else {
        (client, server, cport, 443)
    };
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&sp.to_be_bytes());
    f[36..38].copy_from_slice(&dp.to_be_bytes());
    f[46] = 0x50;
    f[47] = 0x10; // ACK
    f[48] = 0x10;
    f
}

/// `n` packets over `flows` flows, successive packets on far-apart flows.
fn trace(flows: u32, n: usize) -> Vec<[u8; 64]> {
    // A stride coprime with `flows` visits every flow before repeating one.
    let stride = 7_919u32;
    (0..n as u32)
        .map(|k| frame(k.wrapping_mul(stride) % flows, k & 1 == 1))
        .collect()
}

fn records(frames: &[[u8; 64]], t0: u64) -> Vec<PacketRecord<'_>> {
    frames
        .iter()
        .enumerate()
        .map(|(k, f)| PacketRecord {
            ts_ns: t0 + k as u64 * 100,
            wire_len: 64,
            iface: 0,
            direction: Direction::Unknown,
            link_type: LinkType::ETHERNET,
            data: f,
        })
        .collect()
}

fn bench_decode(c: &mut Criterion) {
    let frames = trace(1024, 4096);
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(frames.len() as u64));
    g.bench_function("parse_eth_ipv4_tcp", |b| {
        let mut d = Decoded::default();
        let config = DecodeConfig::default();
        b.iter(|| {
            for f in &frames {
                black_box(decode(LinkType::ETHERNET, black_box(f), &config, &mut d));
            }
        })
    });
    g.finish();
}

fn bench_meter(c: &mut Criterion, name: &str, flows: u32) {
    let per_batch = 256;
    let frames = trace(flows, flows as usize * 2);
    let mut meter = FlowMeter::new(FlowConfig {
        capacity: flows as usize * 2,
        ..FlowConfig::default()
    });
    let mut emitted = 0u64;
    let mut sink = |_: &FlowRecord<'_>| emitted += 1;
    // Warm up: every flow created, then the steady state must not allocate.
    let mut t = 1_700_000_000_000_000_000u64;
    for chunk in frames.chunks(per_batch) {
        let recs = records(chunk, t);
        t += chunk.len() as u64 * 100;
        meter.process_batch(&recs, &mut sink, |_, _| {});
    }
    // Every pass continues the packet clock: packets in time order (a repeated timestamp
    // would be "late" and take the out-of-order path, which reads a line a packet in order
    // does not).
    let pass = |t: &mut u64| -> Vec<Vec<PacketRecord<'_>>> {
        let batches = frames
            .chunks(per_batch)
            .map(|c| {
                let recs = records(c, *t);
                *t += c.len() as u64 * 100;
                recs
            })
            .collect();
        batches
    };
    let batches = pass(&mut t);
    let before = trawl_testkit::alloc::allocations();
    for recs in &batches {
        meter.process_batch(recs, &mut sink, |_, _| {});
    }
    let allocated = trawl_testkit::alloc::allocations() - before;
    assert_eq!(
        allocated,
        0,
        "{name}: {allocated} allocations over {} packets",
        frames.len()
    );
    println!(
        "{name}: 0 allocations over {} packets in steady state",
        frames.len()
    );

    let mut g = c.benchmark_group("flow_meter");
    g.throughput(Throughput::Elements(frames.len() as u64));
    g.sample_size(10);
    g.bench_function(name, |b| {
        b.iter_batched(
            || pass(&mut t),
            |batches| {
                for recs in &batches {
                    meter.process_batch(recs, &mut sink, |_, _| {});
                }
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
    black_box(emitted);
}

fn benches(c: &mut Criterion) {
    bench_decode(c);
    bench_meter(c, "flow_table_upsert_10k_flows", 10_000);
    bench_meter(c, "flow_table_upsert_1m_flows", 1_000_000);
}

criterion_group!(flow, benches);
criterion_main!(flow);
