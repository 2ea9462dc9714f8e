//! The store's guarantees: blocks survive a crash whole or not at all, retention deletes
//! oldest first, later records of a written interval go to a further part.
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use trawl_flow::EndReason;
use trawl_store::retention::{self, Retention};
use trawl_store::{
    list_blocks, read_block, BlockFilter, Ingest, StoreConfig, StoredFlow, BLOCK_NS,
};

/// 2025-11-16T00:00:00Z.
const DAY0: u64 = 1_763_251_200 * 1_000_000_000;
const DAY: u64 = 86_400 * 1_000_000_000;

fn row(i: u64, t: u64) -> StoredFlow {
    StoredFlow {
        src_ip: IpAddr::from([10, 0, (i >> 8) as u8, i as u8]),
        dst_ip: IpAddr::from([192, 0, 2, (i % 7) as u8]),
        src_port: 40_000 + (i % 1000) as u16,
        dst_port: [443, 80, 53][(i % 3) as usize],
        proto: if i % 3 == 2 { 17 } else { 6 },
        vlan: 0,
        first_ns: t,
        last_ns: t + 1_000,
        fwd_packets: 1 + i % 10,
        rev_packets: i % 5,
        fwd_bytes: 100 + i,
        rev_bytes: 50 * (i % 5),
        fwd_ip_bytes: 80 + i,
        rev_ip_bytes: 40 * (i % 5),
        fwd_tcp_flags: 0x12,
        rev_tcp_flags: 0x10,
        end_reason: EndReason::Fin,
    }
}

/// Child mode of `a_killed_writer_leaves_only_whole_blocks`: writes big blocks until killed.
fn crash_child(db: &Path) -> ! {
    let mut ing = Ingest::open(db, StoreConfig::default()).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    for b in 0.. {
        let t = DAY0 + (b % 2000) * BLOCK_NS;
        for i in 0..150_000 {
            ing.push_row(eth0, row(i * 7 + b, t + i)).unwrap();
        }
        ing.flush().unwrap();
    }
    unreachable!()
}

#[test]
fn a_killed_writer_leaves_only_whole_blocks() {
    if let Some(db) = std::env::var_os("TRAWL_STORE_CRASH_CHILD") {
        crash_child(Path::new(&db));
    }
    let dir = tempfile::tempdir().unwrap();
    let mut temporaries_seen = 0;
    for round in 0..8u64 {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_killed_writer_leaves_only_whole_blocks",
                "--nocapture",
            ])
            .env("TRAWL_STORE_CRASH_CHILD", dir.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300 + 97 * round));
        child.kill().unwrap(); // SIGKILL: no destructor, no flush
        child.wait().unwrap();
        let blocks = list_blocks(dir.path(), &BlockFilter::default()).unwrap();
        for b in &blocks {
            let rows = read_block(&b.path).unwrap_or_else(|e| panic!("round {round}: {e}"));
            assert_eq!(rows.len(), 150_000, "{}", b.path.display());
        }
        // A child killed before its first block (a loaded machine starts it slowly) has made
        // no interface directory yet.
        let Ok(days) = std::fs::read_dir(dir.path().join("iface=eth0")) else {
            continue;
        };
        for day in days {
            for f in std::fs::read_dir(day.unwrap().path()).unwrap() {
                let name = f.unwrap().file_name().into_string().unwrap();
                if name.starts_with('.') {
                    assert!(name.ends_with(".tmp"), "{name}");
                    temporaries_seen += 1;
                }
            }
        }
    }
    // The kills landed while blocks were being written (the writer spends most of its time
    // there), and the half-written files were never visible as blocks.
    assert!(temporaries_seen > 0, "no kill interrupted a write");
}

#[test]
fn retention_deletes_by_age_then_by_budget_oldest_first() {
    let dir = tempfile::tempdir().unwrap();
    let mut ing = Ingest::open(dir.path(), StoreConfig::default()).unwrap();
    let ids = [ing.iface("eth0").unwrap(), ing.iface("eth1").unwrap()];
    // Five days, four blocks a day, two interfaces.
    for d in 0..5 {
        for b in 0..4 {
            for (n, id) in ids.iter().enumerate() {
                for i in 0..100 {
                    ing.push_row(
                        *id,
                        row(i + n as u64, DAY0 + d * DAY + b * 3 * BLOCK_NS + i),
                    )
                    .unwrap();
                }
            }
        }
    }
    ing.finish().unwrap();
    let all = list_blocks(dir.path(), &BlockFilter::default()).unwrap();
    assert_eq!(all.len(), 40);
    assert!(dir.path().join("iface=eth0/date=2025-11-16").is_dir());
    // By age: "now" is on day 4; keep days 2, 3 and 4.
    let out = retention::enforce(
        dir.path(),
        &Retention {
            max_age_days: Some(2),
            max_bytes: None,
        },
        DAY0 + 4 * DAY + 3600 * 1_000_000_000,
    )
    .unwrap();
    assert_eq!(out.blocks_deleted, 16);
    let left = list_blocks(dir.path(), &BlockFilter::default()).unwrap();
    assert!(left.iter().all(|b| b.start_ns >= DAY0 + 2 * DAY));
    assert!(
        !dir.path().join("iface=eth0/date=2025-11-16").exists(),
        "empty day directories go"
    );
    // By budget: keep about ten blocks' worth; the oldest go first.
    let size: u64 = left.iter().map(|b| b.bytes).sum();
    let budget = size * 10 / 24;
    let out = retention::enforce(
        dir.path(),
        &Retention {
            max_age_days: None,
            max_bytes: Some(budget),
        },
        0,
    )
    .unwrap();
    assert!(out.bytes_kept <= budget);
    let kept = list_blocks(dir.path(), &BlockFilter::default()).unwrap();
    let oldest_kept = kept.iter().map(|b| b.start_ns).min().unwrap();
    let newest_deleted = left
        .iter()
        .filter(|b| !kept.contains(b))
        .map(|b| b.start_ns)
        .max()
        .unwrap();
    assert!(newest_deleted <= oldest_kept, "deleted oldest first");
    assert_eq!(
        kept.iter().map(|b| b.start_ns).max(),
        left.iter().map(|b| b.start_ns).max()
    );
}

#[test]
fn late_rows_of_a_written_interval_go_to_a_further_part() {
    let dir = tempfile::tempdir().unwrap();
    let mut ing = Ingest::open(dir.path(), StoreConfig::default()).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    ing.push_row(eth0, row(1, DAY0 + 10)).unwrap();
    ing.advance(DAY0 + BLOCK_NS + 41 * 1_000_000_000).unwrap();
    assert_eq!(
        ing.stats().blocks,
        1,
        "the interval closed after the grace time"
    );
    ing.push_row(eth0, row(2, DAY0 + 20)).unwrap();
    // A record spanning two intervals (not split by its producer) is counted.
    let mut spanning = row(3, DAY0 + 30);
    spanning.last_ns = DAY0 + BLOCK_NS + 5;
    ing.push_row(eth0, spanning).unwrap();
    let stats = ing.finish().unwrap();
    assert_eq!(
        (
            stats.blocks,
            stats.extra_parts,
            stats.rows,
            stats.records_spanning
        ),
        (2, 1, 3, 1)
    );
    let blocks = list_blocks(dir.path(), &BlockFilter::default()).unwrap();
    let names: Vec<String> = blocks
        .iter()
        .map(|b| b.path.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["0000.parquet", "0000_1.parquet"]);
    assert_eq!(read_block(&blocks[1].path).unwrap().len(), 2);
}

#[test]
fn foreign_or_damaged_files_are_errors_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("1200.parquet");
    std::fs::write(&p, b"PAR1 not really").unwrap();
    let e = read_block(&p).unwrap_err().to_string();
    assert!(e.contains("1200.parquet"), "{e}");
    assert!(matches!(
        Ingest::open(dir.path(), StoreConfig::default())
            .unwrap()
            .iface("a/b"),
        Err(trawl_store::Error::InvalidIface(_))
    ));
}

#[test]
fn blocks_written_with_reused_buffers_equal_blocks_written_afresh() {
    // Ingest keeps its row, sort and column buffers from block to block; each block must come
    // out byte for byte as `write_block` makes it with fresh ones, whatever came before it:
    // a large block, then a smaller one (stale rows past its end), then one with IPv6
    // addresses and other protocols and end reasons (dictionaries of other shapes).
    let reused = tempfile::tempdir().unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let config = StoreConfig::default();
    let props = config.writer_properties();
    let mut ing = Ingest::open(reused.path(), config).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    let sizes = [70_000u64, 1_000, 20_000, 5];
    for (b, &n) in sizes.iter().enumerate() {
        let t = DAY0 + b as u64 * BLOCK_NS;
        let mut rows: Vec<StoredFlow> = (0..n)
            .map(|i| {
                let mut r = row(i * 31 + b as u64, t + i);
                if b == 2 && i % 4 == 0 {
                    r.src_ip =
                        IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, (i >> 16) as u16, i as u16]);
                    r.proto = 58;
                    r.end_reason = EndReason::Idle;
                }
                r
            })
            .collect();
        for r in &rows {
            ing.push_row(eth0, *r).unwrap();
        }
        ing.flush().unwrap();
        trawl_store::write_block(fresh.path(), "eth0", t, &mut rows, &props).unwrap();
    }
    let a = list_blocks(reused.path(), &BlockFilter::default()).unwrap();
    let b = list_blocks(fresh.path(), &BlockFilter::default()).unwrap();
    assert_eq!(a.len(), sizes.len());
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        let (bx, by) = (
            std::fs::read(&x.path).unwrap(),
            std::fs::read(&y.path).unwrap(),
        );
        assert!(
            bx == by,
            "{} differs from {}",
            x.path.display(),
            y.path.display()
        );
        let rows = read_block(&x.path).unwrap();
        assert!(rows
            .windows(2)
            .all(|w| (w[0].src_ip, w[0].dst_ip) <= (w[1].src_ip, w[1].dst_ip)));
    }
}
