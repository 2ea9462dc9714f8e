//! `bpf_match`: trawl's interpreter against libpcap's `pcap_offline_filter` on the same
//! programs and packets. Prints the per-packet time of both and their ratio, and checks that
//! matching allocates nothing.
//!
//! `cargo bench -p trawl-bpf --bench bpf_match`

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use trawl_bpf::Filter;
use trawl_capture::LinkType;

#[global_allocator]
static ALLOC: trawl_testkit::alloc::CountingAllocator = trawl_testkit::alloc::CountingAllocator;

const EXPRESSIONS: &[&str] = &[
    "tcp port 80",
    "udp port 53",
    "vlan and tcp",
    "host 192.168.1.1",
];

/// Deterministic 64-byte Ethernet/IPv4 frames: TCP and UDP, ports 53/80/443/other, a quarter
/// with a VLAN tag.
fn packets() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut seed: u32 = 0x1234_5678;
    for _ in 0..1024 {
        seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let vlan = seed & 3 == 0;
        let udp = seed & 4 != 0;
        let port: u16 = [53, 80, 443, 8080][(seed >> 3) as usize & 3];
        let mut p = vec![0u8; 64];
        p[0..6].copy_from_slice(&[0, 1, 2, 3, 4, 5]);
        p[6..12].copy_from_slice(&[6, 7, 8, 9, 10, 11]);
        let mut o = 12;
        if vlan {
            p[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x0a]);
            o = 16;
        }
        p[o..o + 2].copy_from_slice(&[0x08, 0x00]);
        let ip = o + 2;
        p[ip] = 0x45;
        p[ip + 9] = if udp { 17 } else { 6 };
        p[ip + 12..ip + 16].copy_from_slice(&[192, 168, 1, (seed >> 8) as u8 & 3]);
        p[ip + 16..ip + 20].copy_from_slice(&[10, 0, 0, 1]);
        let l4 = ip + 20;
        p[l4..l4 + 2].copy_from_slice(&(1024 + (seed >> 16) as u16 % 1000).to_be_bytes());
        p[l4 + 2..l4 + 4].copy_from_slice(&port.to_be_bytes());
        out.push(p);
    }
    out
}

fn ns_per_packet(pkts: &[Vec<u8>], mut f: impl FnMut(&[u8]) -> bool) -> (f64, usize) {
    let rounds = 2000;
    let mut hits = 0;
    let start = Instant::now();
    for _ in 0..rounds {
        for p in pkts {
            hits += usize::from(f(black_box(p)));
        }
    }
    let ns = start.elapsed().as_nanos() as f64 / (rounds * pkts.len()) as f64;
    (ns, hits / rounds)
}

fn bench(c: &mut Criterion) {
    let pkts = packets();
    for expr in EXPRESSIONS {
        let ours = Filter::compile(expr, LinkType::ETHERNET, 0).unwrap();
        let theirs = pcap::Capture::dead(pcap::Linktype::ETHERNET)
            .unwrap()
            .compile(expr, true)
            .unwrap();

        // Same verdicts (every frame is whole, so len == caplen as BpfProgram::filter assumes).
        for p in &pkts {
            assert_eq!(ours.matches(p, p.len() as u32), theirs.filter(p), "{expr}");
        }
        let before = trawl_testkit::alloc::allocations();
        let (t_ours, hits) = ns_per_packet(&pkts, |p| ours.matches(p, p.len() as u32));
        assert_eq!(
            trawl_testkit::alloc::allocations(),
            before,
            "matching allocated"
        );
        let (t_pcap, hits_pcap) = ns_per_packet(&pkts, |p| theirs.filter(p));
        assert_eq!(hits, hits_pcap);
        println!(
            "{expr:20} {:3} insns: trawl {t_ours:6.1} ns/pkt, libpcap {t_pcap:6.1} ns/pkt, \
             ratio trawl/libpcap {:.2} ({hits} of {} match)",
            ours.insns().len(),
            t_ours / t_pcap,
            pkts.len()
        );

        let mut g = c.benchmark_group(format!("bpf_match/{expr}"));
        g.throughput(Throughput::Elements(pkts.len() as u64));
        g.bench_function("trawl", |b| {
            b.iter(|| {
                pkts.iter()
                    .filter(|p| ours.matches(black_box(p), p.len() as u32))
                    .count()
            })
        });
        g.bench_function("libpcap", |b| {
            b.iter(|| pkts.iter().filter(|p| theirs.filter(black_box(p))).count())
        });
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
