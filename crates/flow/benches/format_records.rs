//! Writing flow records as CSV and JSON lines, against the physical limit: copying the same
//! output bytes. Records are those of two committed captures (IPv4 and IPv6, TCP, UDP, ICMP,
//! short and long flows), formatted over and over into a reused buffer.
//!
//! `cargo bench -p trawl-flow --bench format_records`
use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use trawl_capture::{FileSource, PacketSource};
use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_flow::{FlowConfig, FlowMeter, FlowRecord};

#[global_allocator]
static ALLOC: trawl_testkit::alloc::CountingAllocator = trawl_testkit::alloc::CountingAllocator;

fn records() -> Vec<FlowRecord<'static>> {
    let mut out = Vec::new();
    for name in ["oracle/1kxun.pcap.gz", "oracle/many-protocols.pcap.gz"] {
        let mut source = FileSource::open(trawl_testkit::testdata(name)).expect("capture");
        let mut meter = FlowMeter::new(FlowConfig {
            capacity: 1 << 16,
            ..FlowConfig::default()
        });
        let mut sink = |r: &FlowRecord<'_>| {
            out.push(FlowRecord {
                fwd_payload: &[],
                rev_payload: &[],
                ..*r
            })
        };
        while let Some(b) = source.next_batch().expect("read") {
            for p in b.iter() {
                meter.process(&p, &mut sink);
            }
        }
        meter.flush(&mut sink);
    }
    out
}

fn bench(c: &mut Criterion) {
    let records = records();
    let mut g = c.benchmark_group("format_records");
    g.throughput(Throughput::Elements(records.len() as u64));
    let mut buf = Vec::with_capacity(1 << 20);
    for (name, format) in [("csv", RecordFormat::Csv), ("json", RecordFormat::Json)] {
        let mut w = RecordWriter::new(format, false);
        // Steady state: formatting allocates nothing once the buffer has its size.
        buf.clear();
        for r in &records {
            w.write(r, &mut buf);
        }
        let before = trawl_testkit::alloc::allocations();
        buf.clear();
        for r in &records {
            w.write(r, &mut buf);
        }
        assert_eq!(
            trawl_testkit::alloc::allocations(),
            before,
            "{name} allocated"
        );
        println!(
            "{name}: {} records, {} bytes ({:.0} per record)",
            records.len(),
            buf.len(),
            buf.len() as f64 / records.len() as f64
        );
        g.bench_function(name, |b| {
            b.iter(|| {
                buf.clear();
                for r in &records {
                    w.write(r, &mut buf);
                }
                black_box(buf.len())
            })
        });
        // The limit: the same bytes, copied record by record from finished text.
        let text = buf.clone();
        let ends: Vec<usize> = text
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1)
            .collect();
        g.bench_function(format!("{name}_copy_limit"), |b| {
            b.iter(|| {
                buf.clear();
                let mut start = 0;
                for &end in &ends {
                    buf.extend_from_slice(&text[start..end]);
                    start = end;
                }
                black_box(buf.len())
            })
        });
    }
    g.finish();
}

criterion_group!(format, bench);
criterion_main!(format);
