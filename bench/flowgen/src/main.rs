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
use std::path::PathBuf;
use std::time::Instant;

use trawl_flowgen::{diurnal, row, world, Rng, START_NS};
use trawl_store::{Codec, Ingest, StoreConfig, BLOCK_NS};

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
