//! `dumper`, `flow_store` and `flow_export` over capture files: what they write is read back
//! with the libraries the rest of trawl reads it with.
use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use trawl_export::{Decoder, DecoderConfig, Item};
use trawl_flow::FlowRecord;
use trawl_packets::{PacketStore, Selection};
use trawl_store::{list_blocks, read_block, BlockFilter, StoredFlow, BLOCK_NS};

use crate::{collected, file_packets, pcap, run, Pkt};

/// A file with packets spread over 26 minutes, so 5-minute blocks and flows cross boundaries.
const LONG: &str = "fuzz-2006-06-26-2594.pcap";

#[test]
fn dumper_stores_the_packets_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("packets");
    let file = pcap("android.pcap");
    let report = run(&format!(
        r#"
        [[block]]
        name = "src"
        type = "pcap_source"
        files = ["{}"]
        [[block]]
        name = "dump"
        type = "dumper"
        dir = "{}"
        segment_size = "64KiB"
        write_block = "64KiB"
        [[connection]]
        from = "src.packets"
        to = "dump.packets"
        policy = "wait"
        "#,
        file.display(),
        store.display()
    ));
    let want = file_packets(&file);
    let dump = report.block("dump").unwrap();
    assert_eq!(dump.counter("packets"), Some(want.len() as u64));
    assert!(
        dump.counter("segments").unwrap() > 1,
        "133 kB in 64 KiB segments: {}",
        report.table()
    );
    let mut got = Vec::new();
    let stats = PacketStore::open(&store)
        .unwrap()
        .read(
            &Selection {
                from_ns: 0,
                to_ns: u64::MAX,
                ..Selection::default()
            },
            |p| {
                got.push((
                    p.ts_ns,
                    Pkt {
                        data: p.data.to_vec(),
                        wire_len: p.wire_len,
                    },
                ));
                ControlFlow::Continue(())
            },
        )
        .unwrap();
    assert!(stats.errors.is_empty(), "{:?}", stats.errors);
    assert_eq!(got.len(), want.len());
    assert!(got == want, "stored packets differ from the file's");
}

/// Every `.pcap` segment under `dir`, sorted by path.
fn segments(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.is_dir() {
            out.extend(segments(&path));
        } else if path.extension().is_some_and(|x| x == "pcap") {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn dumper_reports_a_repaired_segment_as_a_warning_and_counts_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("packets");
    let text = format!(
        r#"
        [[block]]
        name = "src"
        type = "pcap_source"
        files = ["{}"]
        [[block]]
        name = "dump"
        type = "dumper"
        dir = "{}"
        [[connection]]
        from = "src.packets"
        to = "dump.packets"
        "#,
        pcap("android.pcap").display(),
        store.display()
    );
    run(&text);
    // A writer killed mid-record: the segment has no index and a torn last record.
    let seg = segments(&store).pop().expect("a segment");
    std::fs::remove_file(format!("{}.idx", seg.display())).unwrap();
    let len = std::fs::metadata(&seg).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(len - 7).unwrap();
    drop(f);
    // The same stream starts again: its segment is repaired, counted, and said in a warning
    // of the block's report (the command prints it), not written to standard error.
    let report = run(&text);
    let dump = report.block("dump").unwrap();
    assert_eq!(dump.counter("segments_repaired"), Some(1));
    assert!(dump.counter("repaired_bytes_cut").unwrap() > 0);
    let warnings: Vec<&str> = dump
        .messages
        .iter()
        .filter(|m| m.kind == trawl_compose::MessageKind::Warning)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let name = seg.display().to_string();
    assert!(
        warnings[0].contains(&name) && warnings[0].contains("bytes cut"),
        "{}",
        warnings[0]
    );
    assert_eq!(dump.errors, 0, "a repair is no error");
}

/// Runs pcap_source → flow_meter → (flow_store, collect) over `file`.
fn store_run(file: &Path, db: &Path, interval: &str, sink: &str) -> trawl_compose::Report {
    run(&format!(
        r#"
        [[block]]
        name = "src"
        type = "pcap_source"
        files = ["{}"]
        [[block]]
        name = "meter"
        type = "flow_meter"
        {interval}
        [[block]]
        name = "db"
        type = "flow_store"
        dir = "{}"
        iface = "test0"
        codec = "zstd"
        [[block]]
        name = "{sink}"
        type = "collect"
        [[connection]]
        from = "src.packets"
        to = "meter.packets"
        [[connection]]
        from = "meter.flows"
        to = ["db.flows", "{sink}.in"]
        "#,
        file.display(),
        db.display()
    ))
}

/// Every row of the database, in a fixed order, and (packets, bytes) per 5-minute block.
fn read_db(db: &Path) -> (Vec<StoredFlow>, BTreeMap<u64, (u64, u64)>) {
    let blocks = list_blocks(
        db,
        &BlockFilter {
            ifaces: &[],
            from_ns: 0,
            to_ns: None,
        },
    )
    .unwrap();
    let mut rows = Vec::new();
    let mut sums: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for b in &blocks {
        assert_eq!(b.iface, "test0");
        for r in read_block(&b.path).unwrap() {
            let e = sums.entry(b.start_ns).or_default();
            e.0 += r.fwd_packets + r.rev_packets;
            e.1 += r.fwd_bytes + r.rev_bytes;
            rows.push(r);
        }
    }
    rows.sort_by_cached_key(|r| format!("{r:?}"));
    (rows, sums)
}

fn block_of(ns: u64) -> u64 {
    ns - ns % BLOCK_NS
}

#[test]
fn flow_store_holds_the_meters_records_in_their_5_minute_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let report = store_run(&pcap(LONG), &db, "interval = \"5m\"", "store_records");
    let records = collected("store_records").flows;
    assert!(records.len() > 10);
    let (rows, sums) = read_db(&db);
    let mut want: Vec<StoredFlow> = records.iter().map(StoredFlow::from).collect();
    want.sort_by_cached_key(|r| format!("{r:?}"));
    assert_eq!(rows.len(), want.len());
    assert!(rows == want, "stored rows differ from the meter's records");
    // Per-block sums, as a time-range query sees them, from the records' packets.
    let mut want_sums: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for r in &records {
        assert_eq!(block_of(r.first_ns), block_of(r.last_ns), "{r:?}");
        let e = want_sums.entry(block_of(r.first_ns)).or_default();
        e.0 += r.fwd.packets + r.rev.packets;
        e.1 += r.fwd.bytes + r.rev.bytes;
    }
    assert!(sums.len() > 2, "the file spans several blocks: {sums:?}");
    assert_eq!(sums, want_sums);
    let db_block = report.block("db").unwrap();
    assert_eq!(db_block.counter("records_spanning"), Some(0));
    assert_eq!(db_block.errors, 0);
    assert_eq!(db_block.counter("blocks"), Some(sums.len() as u64));
}

#[test]
fn flow_store_counts_records_that_were_not_cut_at_block_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let report = store_run(&pcap(LONG), &db, "", "uncut_records");
    let records = collected("uncut_records").flows;
    let spanning = records
        .iter()
        .filter(|r| block_of(r.first_ns) != block_of(r.last_ns))
        .count() as u64;
    assert!(
        spanning > 0,
        "the file has flows across 5-minute boundaries"
    );
    let db_block = report.block("db").unwrap();
    assert_eq!(db_block.counter("records_spanning"), Some(spanning));
    // Reported once, as an error that does not stop the run.
    assert_eq!(db_block.errors, 1);
    // Nothing is lost: every record is a row, in the block of its first packet.
    let (rows, _) = read_db(&db);
    assert_eq!(rows.len(), records.len());
}

/// What IPFIX carries of a record, for comparison.
fn exported(r: &FlowRecord<'_>) -> String {
    format!(
        "{} {} {} {} {} {} {} {}/{} {}/{}",
        r.src_ip,
        r.dst_ip,
        r.src_port,
        r.dst_port,
        r.proto,
        r.first_ns,
        r.last_ns,
        r.fwd.packets,
        r.fwd.bytes,
        r.rev.packets,
        r.rev.bytes
    )
}

#[test]
fn flow_export_sends_the_records_as_ipfix_over_udp() {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let addr = socket.local_addr().unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let receiver = {
        let done = done.clone();
        std::thread::spawn(move || {
            let mut dec = Decoder::new(DecoderConfig::default());
            let mut got = Vec::new();
            let mut buf = vec![0u8; 65_536];
            loop {
                match socket.recv_from(&mut buf) {
                    Ok((n, from)) => {
                        dec.decode(from, &buf[..n], &mut |_, item| {
                            if let Item::Flow(r) = item {
                                got.push(exported(r));
                            }
                        });
                    }
                    Err(_) if done.load(Ordering::SeqCst) => break,
                    Err(_) => {}
                }
            }
            (got, dec.stats().total_errors())
        })
    };
    let report = run(&format!(
        r#"
        [[block]]
        name = "src"
        type = "pcap_source"
        files = ["{}"]
        [[block]]
        name = "meter"
        type = "flow_meter"
        [[block]]
        name = "ipfix"
        type = "flow_export"
        destinations = ["ipfix+udp://{addr}"]
        lossless = true
        [[block]]
        name = "export_records"
        type = "collect"
        [[connection]]
        from = "src.packets"
        to = "meter.packets"
        [[connection]]
        from = "meter.flows"
        to = ["ipfix.flows", "export_records.in"]
        "#,
        pcap("android.pcap").display()
    ));
    // The run waited for the exporter to send everything; the datagrams are in the socket.
    std::thread::sleep(Duration::from_millis(300));
    done.store(true, Ordering::SeqCst);
    let (mut got, errors) = receiver.join().unwrap();
    assert_eq!(errors, 0);
    let mut want: Vec<String> = collected("export_records")
        .flows
        .iter()
        .map(exported)
        .collect();
    assert!(!want.is_empty());
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let ipfix = report.block("ipfix").unwrap();
    assert_eq!(ipfix.counter("records"), Some(want.len() as u64));
    assert_eq!(ipfix.counter("dropped_queue"), Some(0));
    assert!(ipfix.counter("messages").unwrap() > 0);
}
