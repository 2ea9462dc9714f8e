//! Writes a synthetic flow database through `trawl_store::Ingest`, the path every producer
//! uses, and reports the ingest rate:
//!
//! ```text
//! flowgen --db DIR --rows 50000000 [--days 4] [--ifaces 1] [--threads 2] [--seed 1]
//!         [--codec lz4|zstd|zstd:N|none] [--row-group-rows N]
//! ```
//!
//! The traffic is an enterprise edge's: a few thousand internal hosts in 10.0.0.0/12 (a few
//! percent IPv6), talking to tens of thousands of external servers whose popularity follows a
//! power law; destination ports drawn from a skewed list of services plus random high ports;
//! ephemeral source ports; TCP/UDP/ICMP about 80/18/2; heavy-tailed byte counts; a diurnal
//! curve over the days (night blocks hold about a fifth of the rows of peak blocks). Rows are
//! spread over 5-minute blocks in proportion to that curve. Deterministic for a seed.
#![forbid(unsafe_code)]
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::Instant;

use trawl_flow::EndReason;
use trawl_store::{Codec, Ingest, StoreConfig, StoredFlow, BLOCK_NS};

/// 2025-11-16T00:00:00Z: the first day.
const START_NS: u64 = 1_763_251_200 * 1_000_000_000;

struct Rng(u64);

impl Rng {
    #[inline]
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    #[inline]
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Index in 0..n, skewed towards 0 (power law: P(i) falls off like a Zipf with s ≈ 1).
    #[inline]
    fn skewed(&mut self, n: usize, power: f64) -> usize {
        ((n as f64) * self.unit().powf(power)) as usize % n.max(1)
    }
}

struct Args {
    db: PathBuf,
    rows: u64,
    days: u64,
    ifaces: u32,
    threads: usize,
    seed: u64,
    codec: Codec,
    row_group_rows: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        db: PathBuf::new(),
        rows: 1_000_000,
        days: 4,
        ifaces: 1,
        threads: 2,
        seed: 1,
        codec: Codec::Lz4,
        row_group_rows: StoreConfig::default().row_group_rows,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let v = argv
            .get(i + 1)
            .cloned()
            .ok_or(format!("{} needs a value", argv[i]))?;
        let num = |v: &str| {
            v.replace('_', "")
                .parse::<u64>()
                .map_err(|_| format!("bad number {v:?}"))
        };
        match argv[i].as_str() {
            "--db" => a.db = PathBuf::from(v),
            "--rows" => a.rows = num(&v)?,
            "--days" => a.days = num(&v)?.max(1),
            "--ifaces" => a.ifaces = num(&v)?.clamp(1, 16) as u32,
            "--threads" => a.threads = num(&v)?.max(1) as usize,
            "--seed" => a.seed = num(&v)?,
            "--codec" => a.codec = Codec::parse(&v).ok_or(format!("bad codec {v:?}"))?,
            "--row-group-rows" => a.row_group_rows = num(&v)?.max(1) as usize,
            other => return Err(format!("unknown option {other}")),
        }
        i += 2;
    }
    if a.db.as_os_str().is_empty() {
        return Err("--db DIR is required".into());
    }
    Ok(a)
}

/// Relative traffic of a block by time of day: low at night, peaks in the working day.
fn diurnal(block_start: u64) -> f64 {
    let hour = (block_start % 86_400_000_000_000) as f64 / 3_600_000_000_000.0;
    let x = ((hour - 14.0) / 24.0 * std::f64::consts::TAU).cos();
    0.6 + 0.4 * x
}

const SERVICES: [(u16, u8); 24] = [
    (443, 6),
    (80, 6),
    (53, 17),
    (443, 17),
    (123, 17),
    (22, 6),
    (993, 6),
    (8080, 6),
    (3478, 17),
    (5228, 6),
    (25, 6),
    (587, 6),
    (1194, 17),
    (3389, 6),
    (445, 6),
    (8443, 6),
    (5060, 17),
    (161, 17),
    (514, 17),
    (389, 6),
    (636, 6),
    (3306, 6),
    (5432, 6),
    (9000, 6),
];

struct World {
    internal: Vec<IpAddr>,
    /// External servers by family (index 0: IPv4, 1: IPv6), most popular first.
    external: [Vec<IpAddr>; 2],
}

fn world(seed: u64) -> World {
    let mut r = Rng(seed ^ 0xA5A5);
    let mut internal = Vec::new();
    for i in 0..4000u32 {
        if i.is_multiple_of(25) {
            internal.push(IpAddr::V6(Ipv6Addr::new(
                0x2001,
                0xdb8,
                0x10,
                (i >> 8) as u16,
                0,
                0,
                0,
                (r.next() & 0xffff) as u16 | 1,
            )));
        } else {
            // 10.0.0.0/12, clustered in a few /16s like real subnets.
            let subnet = (r.skewed(16, 2.0)) as u32;
            internal.push(IpAddr::V4(Ipv4Addr::from(
                0x0A00_0000 | subnet << 16 | (r.next() as u32 & 0xffff).max(1),
            )));
        }
    }
    let mut external = [Vec::new(), Vec::new()];
    for i in 0..40_000u32 {
        if i.is_multiple_of(20) {
            external[1].push(IpAddr::V6(Ipv6Addr::new(
                0x2a00,
                (r.next() & 0xffff) as u16,
                (r.next() & 0xffff) as u16,
                0,
                0,
                0,
                0,
                (r.next() & 0xff) as u16 + 1,
            )));
        } else {
            let mut a = r.next() as u32;
            // Public-looking: avoid 0/8, 10/8, 127/8 and multicast.
            let first = (a >> 24).clamp(11, 223);
            a = (first << 24) | (a & 0x00ff_ffff);
            if first == 127 {
                a ^= 0x0100_0000;
            }
            external[0].push(IpAddr::V4(Ipv4Addr::from(a)));
        }
    }
    World { internal, external }
}

fn row(r: &mut Rng, w: &World, block: u64) -> StoredFlow {
    let client = w.internal[r.skewed(w.internal.len(), 3.0)];
    let inbound = r.next() % 100 < 7;
    let (proto, dport): (u8, u16) = if r.next() % 100 < 12 {
        // Random high port (P2P, RTP, ...).
        (
            if r.next().is_multiple_of(2) { 6 } else { 17 },
            1024 + (r.next() % 64_000) as u16,
        )
    } else if r.next() % 100 < 2 {
        (1, 0)
    } else {
        let (port, proto) = SERVICES[r.skewed(SERVICES.len(), 2.2)];
        (proto, port)
    };
    let servers = &w.external[usize::from(client.is_ipv6())];
    let server = servers[r.skewed(servers.len(), 4.0)];
    let (src, dst) = if inbound {
        (server, client)
    } else {
        (client, server)
    };
    let sport = if proto == 1 {
        8
    } else {
        32_768 + (r.next() % 28_232) as u16
    };
    let dport = if proto == 1 { 0 } else { dport };
    // Heavy-tailed sizes: most flows are small, a few carry most bytes.
    let fwd_packets = 1 + (r.unit().powf(6.0) * 2_000.0) as u64;
    let rev_packets = if proto == 1 {
        fwd_packets
    } else {
        (fwd_packets as f64 * (0.5 + r.unit() * 2.0)) as u64
    };
    let fwd_bytes = fwd_packets * (60 + r.next() % 200);
    let rev_bytes = rev_packets * (60 + r.next() % 1_400);
    let first_ns = block + r.next() % BLOCK_NS;
    let last_ns = (first_ns + r.next() % 120_000_000_000).min(block + BLOCK_NS - 1);
    let end_reason = match r.next() % 10 {
        0..=4 => EndReason::Fin,
        5..=7 => EndReason::Idle,
        8 => EndReason::Rst,
        _ => EndReason::Active,
    };
    StoredFlow {
        src_ip: src,
        dst_ip: dst,
        src_port: sport,
        dst_port: dport,
        proto,
        vlan: 0,
        first_ns,
        last_ns,
        fwd_packets,
        rev_packets,
        fwd_bytes,
        rev_bytes,
        fwd_ip_bytes: fwd_bytes - 14 * fwd_packets,
        rev_ip_bytes: rev_bytes - 14 * rev_packets,
        fwd_tcp_flags: if proto == 6 { 0x1b } else { 0 },
        rev_tcp_flags: if proto == 6 { 0x1b } else { 0 },
        end_reason,
    }
}

/// CPU seconds this process used (user + system), from /proc.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields 14 and 15 of the line; `after` starts at field 3. USER_HZ is 100 on Linux.
    (ticks(11) + ticks(12)) / 100.0
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("flowgen: {e}\nusage: flowgen --db DIR --rows N [--days D] [--ifaces N] [--threads N] [--seed S] [--codec zstd|lz4|none]");
            std::process::exit(2);
        }
    };
    let w = world(a.seed);
    let blocks: Vec<u64> = (0..a.days * 288).map(|i| START_NS + i * BLOCK_NS).collect();
    let weights: Vec<f64> = blocks.iter().map(|&b| diurnal(b)).collect();
    let total_w: f64 = weights.iter().sum();
    let per_iface = a.rows / u64::from(a.ifaces);
    // Rows of each (block, iface), summing exactly to the requested count.
    let mut jobs: Vec<(u64, u32, u64)> = Vec::new();
    let mut assigned = 0u64;
    for iface in 0..a.ifaces {
        let mut acc = 0.0;
        for (i, &b) in blocks.iter().enumerate() {
            let before = (acc / total_w * per_iface as f64).round() as u64;
            acc += weights[i];
            let after = (acc / total_w * per_iface as f64).round() as u64;
            jobs.push((b, iface, after - before));
            assigned += after - before;
        }
    }
    if let Some(last) = jobs.last_mut() {
        last.2 += a.rows - assigned;
    }
    let started = Instant::now();
    let cpu0 = cpu_seconds();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<(trawl_store::IngestStats, f64)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..a.threads)
            .map(|_| {
                s.spawn(|| {
                    let config = StoreConfig {
                        codec: a.codec,
                        row_group_rows: a.row_group_rows,
                        ..StoreConfig::default()
                    };
                    let mut ing = Ingest::open(&a.db, config).expect("open db");
                    let ids: Vec<_> = (0..a.ifaces)
                        .map(|i| ing.iface(&format!("eth{i}")).expect("iface"))
                        .collect();
                    // Time spent in the store alone (push, sort, encode, compress, write),
                    // without generating the rows. Wall time of this thread: equal to its CPU
                    // time when it has a core to itself (per-thread CPU clocks are either
                    // unsafe to call or only updated at scheduler ticks, too coarse here).
                    let mut ingest_cpu = 0.0;
                    let mut rows = Vec::new();
                    loop {
                        let j = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&(block, iface, n)) = jobs.get(j) else {
                            break;
                        };
                        let mut r =
                            Rng(a.seed.wrapping_mul(1_000_003) ^ block ^ u64::from(iface) << 40);
                        rows.clear();
                        rows.extend((0..n).map(|_| row(&mut r, &w, block)));
                        let t = Instant::now();
                        for x in &rows {
                            ing.push_row(ids[iface as usize], *x).expect("push");
                        }
                        ing.flush().expect("write block");
                        ingest_cpu += t.elapsed().as_secs_f64();
                    }
                    (ing.finish().expect("finish"), ingest_cpu)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("worker")).collect()
    });
    let mut total = trawl_store::IngestStats::default();
    let mut ingest_cpu = 0.0;
    for (r, c) in &results {
        total.merge(r);
        ingest_cpu += c;
    }
    let secs = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    println!(
        "{{\"rows\":{},\"blocks\":{},\"bytes\":{},\"bytes_per_row\":{:.2},\"seconds\":{:.2},\"cpu_seconds\":{:.2},\"rows_per_s\":{:.0},\"rows_per_cpu_s\":{:.0},\"ingest_thread_seconds\":{:.2},\"ingest_rows_per_thread_s\":{:.0},\"threads\":{}}}",
        total.rows,
        total.blocks,
        total.bytes,
        total.bytes as f64 / total.rows.max(1) as f64,
        secs,
        cpu,
        total.rows as f64 / secs,
        total.rows as f64 / cpu.max(1e-9),
        ingest_cpu,
        total.rows as f64 / ingest_cpu.max(1e-9),
        a.threads
    );
}
