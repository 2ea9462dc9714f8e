//! The store's guarantees: blocks survive a crash whole or not at all, retention deletes
//! oldest first, later records of a written interval go to a further part.
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use trawl_flow::{EndReason, Tunnel, TunnelType};
use trawl_store::retention::{self, Retention};
use trawl_store::schema::{StoredExtra, StoredRtt};
use trawl_store::{
    list_blocks, read_block, BlockFilter, Ingest, StoreConfig, StoredFlow, BLOCK_NS,
};

mod recent;
#[path = "../rows.rs"]
mod rows;
mod series;
use rows::{row, DAY0};

const DAY: u64 = 86_400 * 1_000_000_000;

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

/// Waits (up to a minute) until a block's temporary file exists under `db`.
fn wait_for_temporary(db: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let days = std::fs::read_dir(db.join("iface=eth0"))
            .into_iter()
            .flatten();
        for day in days.flatten() {
            let files = std::fs::read_dir(day.path()).into_iter().flatten();
            if files
                .flatten()
                .any(|f| f.file_name().to_string_lossy().ends_with(".tmp"))
            {
                return;
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    panic!("the writer made no temporary block file in a minute");
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
        if round % 2 == 0 {
            // Anywhere: before the first block, between blocks or inside one.
            std::thread::sleep(Duration::from_millis(300 + 97 * round));
        } else {
            // Inside a write, whatever the machine's load: as soon as a block's temporary file
            // is there (a write takes tens of milliseconds; the poll, microseconds).
            wait_for_temporary(dir.path());
        }
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

/// Rows with every kind of value the columns hold: IPv4 and IPv6 addresses, ports across the
/// 16 bits, protocols by name and by number, VLANs, counters up to 64 bits (deltas of every
/// bit width), all end reasons.
fn varied_row(i: u64, t: u64) -> StoredFlow {
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 29;
    StoredFlow {
        src_ip: if i.is_multiple_of(9) {
            IpAddr::from([0x2001, 0xdb8, 0, 0, 0, 0, (i >> 16) as u16, i as u16])
        } else {
            IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8])
        },
        dst_ip: IpAddr::from([192, 0, (x % 13) as u8, (x >> 8) as u8]),
        src_port: (x >> 16) as u16,
        dst_port: [443, 80, 53, 0, 65_535][(x % 5) as usize],
        proto: [6, 17, 1, 58, 250][(i % 5) as usize],
        vlan: (i % 4) as u16 * 1000,
        first_ns: t + i,
        last_ns: t + i + (x >> 40),
        fwd_packets: 1 + x % 10,
        rev_packets: x >> (i % 64),
        fwd_bytes: u64::MAX - x % 1000,
        rev_bytes: if i.is_multiple_of(2) { x } else { 0 },
        fwd_ip_bytes: x % 1_000_000,
        rev_ip_bytes: (i * 7) << 20,
        fwd_tcp_flags: x as u8,
        rev_tcp_flags: (x >> 8) as u8,
        end_reason: EndReason::ALL[(i as usize) % EndReason::ALL.len()],
        app: None,
        extra: varied_extra(i, x),
    }
}

/// Enrichment, round trips and tunnels of every kind, and rows without them: AS numbers up to
/// 32 bits, countries or none, handshakes with or without samples and samples without a
/// handshake, IPv4 and IPv6 outer addresses of each tunnel type.
fn varied_extra(i: u64, x: u64) -> StoredExtra {
    let rtt = |k: u64| StoredRtt {
        handshake_ns: (!k.is_multiple_of(3)).then_some(k * 1000 + 1),
        samples: (k % 4) as u32,
        min_ns: if k.is_multiple_of(4) { 0 } else { k * 10 },
        max_ns: if k.is_multiple_of(4) {
            0
        } else {
            k * 10 + (x >> 50)
        },
        mean_ns: if k.is_multiple_of(4) {
            0.0
        } else {
            k as f64 * 10.5
        },
    };
    let mut tunnel = Tunnel::default();
    let kind = TunnelType::ALL[(i % 9) as usize];
    if kind != TunnelType::None && i.is_multiple_of(2) {
        tunnel.kind = kind;
        let (a, b): (IpAddr, IpAddr) = if i.is_multiple_of(3) {
            (
                "2001:db8::1".parse().unwrap(),
                IpAddr::from([0x2001, 0xdb8, 1, 0, 0, 0, 0, i as u16]),
            )
        } else {
            (
                IpAddr::from([172, 16, 0, i as u8]),
                "172.16.255.1".parse().unwrap(),
            )
        };
        tunnel.set_addr(true, a);
        tunnel.set_addr(false, b);
        tunnel.id = (x >> 32) as u32;
    }
    let countries = [[0; 2], *b"DE", *b"US", *b"CH"];
    StoredExtra {
        src_as: if i.is_multiple_of(5) {
            0
        } else {
            (x >> 32) as u32
        },
        dst_as: (i % 7) as u32 * 13_335,
        src_country: countries[(i % 4) as usize],
        dst_country: countries[(x % 4) as usize],
        fwd_rtt: if i.is_multiple_of(6) {
            StoredRtt::default()
        } else {
            rtt(i)
        },
        rev_rtt: rtt(x % 97),
        tunnel,
    }
}

/// Rows keep their enrichment, round trips and tunnel through a block (both readers), and
/// a block written before those columns existed (the same block without them) still reads,
/// its rows with none.
#[test]
fn later_columns_round_trip_and_blocks_without_them_still_read() {
    use arrow_array::RecordBatch;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use parquet::arrow::ArrowWriter;
    use trawl_store::read_block_direct;
    use trawl_store::schema::LATER_COLUMNS;
    let dir = tempfile::tempdir().unwrap();
    let mut ing = Ingest::open(dir.path(), StoreConfig::default()).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    let mut pushed: Vec<StoredFlow> = (0..3000).map(|i| varied_row(i, DAY0)).collect();
    for r in &pushed {
        ing.push_row(eth0, *r).unwrap();
    }
    ing.finish().unwrap();
    let path = list_blocks(dir.path(), &BlockFilter::default()).unwrap()[0]
        .path
        .clone();
    let key = |r: &StoredFlow| (r.first_ns, r.src_ip, r.dst_ip);
    pushed.sort_by_key(key);
    for read in [read_block, read_block_direct] {
        let mut got = read(&path).unwrap();
        got.sort_by_key(key);
        assert!(got == pushed);
    }
    assert!(pushed.iter().any(|r| r.extra.tunnel.is_some()));
    assert!(pushed
        .iter()
        .any(|r| r.extra.fwd_rtt.handshake_ns.is_none()));

    // The same block as an older writer made it: without the later columns.
    let file = std::fs::File::open(&path).unwrap();
    let builder = ParquetRecordBatchReaderBuilder::try_new(file).unwrap();
    let metadata = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .cloned();
    let batches: Vec<RecordBatch> = builder.build().unwrap().map(|b| b.unwrap()).collect();
    let keep: Vec<usize> = (0..batches[0].num_columns())
        .filter(|&c| !LATER_COLUMNS.contains(&batches[0].schema().field(c).name().as_str()))
        .collect();
    assert_eq!(keep.len(), 20);
    let old_schema = std::sync::Arc::new(batches[0].schema().project(&keep).unwrap());
    let props = StoreConfig::default().writer_properties();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(&path).unwrap(),
        old_schema,
        Some(props),
    )
    .unwrap();
    for b in &batches {
        w.write(&b.project(&keep).unwrap()).unwrap();
    }
    for kv in metadata.unwrap_or_default() {
        if kv.key.starts_with("trawl.") {
            w.append_key_value_metadata(kv);
        }
    }
    w.close().unwrap();
    let without: Vec<StoredFlow> = pushed
        .iter()
        .map(|r| StoredFlow {
            extra: StoredExtra::default(),
            ..*r
        })
        .collect();
    for read in [read_block, read_block_direct] {
        let mut got = read(&path).unwrap();
        got.sort_by_key(key);
        assert!(got == without);
    }
}

/// The direct page decoder (the query engine's) reads exactly what the `parquet` crate's Arrow
/// reader reads, for every column of trawl's blocks, every codec, row groups of several sizes
/// and chunks of several pages.
#[test]
fn the_direct_decoder_reads_what_the_arrow_reader_reads() {
    use trawl_store::{read_block_direct, Codec};
    for (codec, row_group_rows, rows) in [
        (Codec::Lz4, 65_536, 150_000u64),
        (Codec::Zstd(3), 30_000, 70_000),
        (Codec::None, 1000, 5_000),
        (Codec::Lz4, 7, 100),
        (Codec::Lz4, 65_536, 1),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = StoreConfig {
            codec,
            row_group_rows,
            ..StoreConfig::default()
        };
        let mut ing = Ingest::open(dir.path(), config).unwrap();
        let eth0 = ing.iface("eth0").unwrap();
        for i in 0..rows {
            ing.push_row(eth0, varied_row(i, DAY0)).unwrap();
        }
        ing.finish().unwrap();
        let blocks = list_blocks(dir.path(), &BlockFilter::default()).unwrap();
        assert_eq!(blocks.len(), 1);
        let path = &blocks[0].path;
        let want = read_block(path).unwrap();
        assert_eq!(want.len() as u64, rows);
        assert!(
            read_block_direct(path).unwrap() == want,
            "{codec:?} {row_group_rows}"
        );
        let (groups, pages) = trawl_store::block_shape(path).unwrap();
        assert_eq!(groups as u64, rows.div_ceil(row_group_rows as u64));
        if row_group_rows >= 30_000 && rows > 30_000 {
            assert!(pages >= 2, "{codec:?}: {pages} data pages at most");
        }
    }
}

/// A damaged page is an error naming the file, row group, column and the page's offset; random
/// damage anywhere is an error or a (possibly wrong) result, never a panic.
#[test]
fn damaged_pages_are_errors_naming_where() {
    use trawl_store::read_block_direct;
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        row_group_rows: 4000,
        ..StoreConfig::default()
    };
    let mut ing = Ingest::open(dir.path(), config).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    for i in 0..10_000 {
        ing.push_row(eth0, varied_row(i, DAY0)).unwrap();
    }
    ing.finish().unwrap();
    let path = list_blocks(dir.path(), &BlockFilter::default()).unwrap()[0]
        .path
        .clone();
    let original = std::fs::read(&path).unwrap();
    let meta = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&std::fs::File::open(&path).unwrap())
        .unwrap();
    // The dictionary page header of dst_ip in row group 1, and the first data page of
    // fwd_bytes in row group 2.
    let dst = meta.row_group(1).column(1);
    let at = dst.dictionary_page_offset().unwrap() as usize;
    let mut bytes = original.clone();
    bytes[at..at + 4].copy_from_slice(&[0xff; 4]);
    std::fs::write(&path, &bytes).unwrap();
    let e = read_block_direct(&path).unwrap_err().to_string();
    assert!(
        e.contains(path.to_str().unwrap())
            && e.contains(&format!(
                "row group 1, column dst_ip: at offset {at}: page header"
            )),
        "{e}"
    );
    let fb = meta.row_group(2).column(10);
    let at = fb.data_page_offset() as usize;
    let mut bytes = original.clone();
    // The header is intact, the DELTA_BINARY_PACKED body starts with an invalid block size.
    let body = at + 20;
    bytes[body..body + 2].copy_from_slice(&[0x05, 0x04]);
    std::fs::write(&path, &bytes).unwrap();
    let e = read_block_direct(&path).unwrap_err().to_string();
    assert!(
        e.contains(&format!("row group 2, column fwd_bytes: at offset {at}")),
        "{e}"
    );
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let data_end = original.len() - 8 - 4096;
    for _ in 0..300 {
        let mut bytes = original.clone();
        for _ in 0..3 {
            trawl_testkit::xorshift(&mut seed);
            let at = 4 + (seed % data_end as u64) as usize;
            bytes[at] ^= 1 << (seed % 8);
        }
        std::fs::write(&path, &bytes).unwrap();
        let _ = read_block_direct(&path);
    }
}

/// The `community_id` column holds each row's Community ID digest: base64 after `1:` gives
/// the flow record's text (the spec's first vector for its row), for IPv4 and IPv6 rows.
#[test]
fn community_id_column_holds_each_rows_digest() {
    use arrow_array::Array;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    use trawl_flow::CommunityIdText;
    let dir = tempfile::tempdir().unwrap();
    let mut ing = Ingest::open(dir.path(), StoreConfig::default()).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    let mut spec = varied_row(1, DAY0);
    (spec.src_ip, spec.dst_ip) = ("1.2.3.4".parse().unwrap(), "5.6.7.8".parse().unwrap());
    (spec.src_port, spec.dst_port, spec.proto) = (1122, 3344, 6);
    ing.push_row(eth0, spec).unwrap();
    for i in 2..200 {
        ing.push_row(eth0, varied_row(i, DAY0)).unwrap();
    }
    ing.finish().unwrap();
    let blocks = list_blocks(dir.path(), &BlockFilter::default()).unwrap();
    let path = &blocks[0].path;
    let rows = read_block(path).unwrap();
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let mut ids = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let col = batch
            .column_by_name("community_id")
            .expect("a community_id column");
        let col = col
            .as_any()
            .downcast_ref::<arrow_array::FixedSizeBinaryArray>()
            .expect("20-byte binary");
        for i in 0..col.len() {
            let digest: [u8; 20] = col.value(i).try_into().unwrap();
            ids.push(CommunityIdText::from_digest(&digest).to_string());
        }
    }
    assert_eq!(ids.len(), rows.len());
    for (row, id) in rows.iter().zip(&ids) {
        assert_eq!(*id, row.to_record().community_id().to_string(), "{row:?}");
    }
    let at = rows.iter().position(|r| r.src_port == 1122).unwrap();
    assert_eq!(ids[at], "1:wCb3OG7yAFWelaUydu0D+125CLM=");
}
