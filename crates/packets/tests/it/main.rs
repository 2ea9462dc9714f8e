//! The packet store end to end on real captures: what goes in comes out byte for byte,
//! segments rotate where they must, time windows and filters select exactly what libpcap's
//! filter over the original file selects (reading less with the index), retention keeps its
//! budget, a torn segment is repaired to its last whole record, the cutoff keeps flow heads.
use std::collections::{BTreeMap, HashMap};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use trawl_bpf::FilterSet;
use trawl_capture::{FileSource, LinkType, PacketSource};
use trawl_packets::{
    list_segments, repair_segment, Budget, Dumper, DumperConfig, PacketStore, Retention,
    RetentionConfig, SegmentIndex, Selection, MAX_PCAP_TS,
};
use trawl_testkit::testdata;

/// A packet as the tests compare it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Pkt {
    ts: u64,
    iface: String,
    wire_len: u32,
    link: u16,
    data: Vec<u8>,
}

/// Every capture of `testdata/` the dumper must store.
fn captures() -> Vec<PathBuf> {
    let mut v = Vec::new();
    for dir in ["oracle", "pcaps"] {
        for e in std::fs::read_dir(testdata(dir)).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            // Files trawl's reader refuses (deliberately broken ones) are tested elsewhere.
            if name.ends_with(".txt") || name.ends_with(".md") || FileSource::open(&p).is_err() {
                continue;
            }
            v.push(p);
        }
    }
    v.sort();
    assert!(v.len() >= 10, "testdata captures present");
    v
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("trawl-packets-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Reads a capture with trawl's file reader (checked against tshark in trawl-capture's tests).
fn originals(path: &Path) -> Vec<Pkt> {
    let mut src = FileSource::open(path).unwrap();
    let mut v = Vec::new();
    while let Ok(Some(b)) = src.next_batch() {
        for p in b.iter() {
            // Segment names keep `[A-Za-z0-9._:@+-]` of an interface name.
            let iface: String = b.interfaces()[usize::from(p.iface)]
                .name
                .clone()
                .unwrap_or_else(|| format!("if{}", p.iface))
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || "._:@+-".contains(c) {
                        c
                    } else {
                        '_'
                    }
                })
                .collect();
            v.push(Pkt {
                // pcap cannot hold times after 2106: the store clamps them (and counts them).
                ts: p.ts_ns.min(MAX_PCAP_TS),
                iface,
                wire_len: p.wire_len.max(p.data.len() as u32),
                link: p.link_type.0,
                data: p.data.to_vec(),
            });
        }
    }
    v
}

/// Dumps a capture straight into a dumper (the ring path is tested through the CLI).
fn dump(path: &Path, config: DumperConfig, retention: Option<&Retention>) -> u64 {
    let mut d = Dumper::new(config, retention.map(|r| r.handle())).unwrap();
    let mut src = FileSource::open(path).unwrap();
    let mut n = 0;
    while let Ok(Some(b)) = src.next_batch() {
        for p in b.iter() {
            let iface = b.interfaces()[usize::from(p.iface)].clone();
            n += d.write(p.iface, &iface, &p).unwrap() as u64;
        }
    }
    d.finish().unwrap();
    n
}

fn read_back(dir: &Path, sel: &Selection) -> (Vec<Pkt>, trawl_packets::ReadStats) {
    let store = PacketStore::open(dir).unwrap();
    let mut v = Vec::new();
    let stats = store
        .read(sel, |p| {
            v.push(Pkt {
                ts: p.ts_ns,
                iface: p.iface.to_string(),
                wire_len: p.wire_len,
                link: p.link_type.0,
                data: p.data.to_vec(),
            });
            ControlFlow::Continue(())
        })
        .unwrap();
    (v, stats)
}

fn everything() -> Selection {
    Selection {
        from_ns: 0,
        to_ns: u64::MAX,
        ..Selection::default()
    }
}

/// Per interface, in order: what one stream must reproduce exactly.
fn by_iface(v: &[Pkt]) -> BTreeMap<String, Vec<Pkt>> {
    let mut m: BTreeMap<String, Vec<Pkt>> = BTreeMap::new();
    for p in v {
        m.entry(p.iface.clone()).or_default().push(p.clone());
    }
    m
}

#[test]
fn every_capture_round_trips_byte_for_byte() {
    for path in captures() {
        let dir = tempdir("roundtrip");
        let orig = originals(&path);
        let mut config = DumperConfig::new(&dir);
        // Small segments and chunks so rotation and chunking happen on small files too.
        config.segment_bytes = 64 << 10;
        config.index_packets = 64;
        let written = dump(&path, config, None);
        assert_eq!(written, orig.len() as u64, "{}", path.display());
        let (back, stats) = read_back(&dir, &everything());
        assert!(stats.errors.is_empty(), "{:?}", stats.errors);
        assert_eq!(
            by_iface(&back),
            by_iface(&orig),
            "{}: stored packets differ",
            path.display()
        );
        // Across interfaces the reader merges by time: when every interface's packets are in
        // time order, so is the whole output.
        let sorted = |v: &[Pkt]| v.windows(2).all(|w| w[0].ts <= w[1].ts);
        if by_iface(&orig).values().all(|v| sorted(v)) {
            assert!(
                sorted(&back),
                "{}: merged output is in time order",
                path.display()
            );
        }
        for seg in list_segments(&dir).unwrap() {
            assert!(seg.indexed, "{} has its index", seg.path.display());
            let idx =
                SegmentIndex::read(Path::new(&format!("{}.idx", seg.path.display()))).unwrap();
            assert_eq!(idx.segment_len, seg.bytes);
            assert!(seg.bytes <= 64 << 10 || idx.packets == 1, "size limit");
            assert_eq!(
                idx.chunks.iter().map(|c| u64::from(c.packets)).sum::<u64>(),
                idx.packets
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn segments_rotate_by_time_and_at_hour_boundaries() {
    // many-protocols spans minutes of 2010 and 2015; 10 s segments.
    let path = testdata("oracle/many-protocols.pcap.gz");
    let dir = tempdir("rotate");
    let mut config = DumperConfig::new(&dir);
    config.segment_ns = 10_000_000_000;
    dump(&path, config, None);
    let segs = list_segments(&dir).unwrap();
    assert!(segs.len() > 2, "several segments: {}", segs.len());
    const HOUR: u64 = 3_600_000_000_000;
    for s in &segs {
        let idx = SegmentIndex::read(&PathBuf::from(format!("{}.idx", s.path.display()))).unwrap();
        // In-order packets stay within the segment's time limit and its hour.
        let start = s.name.start_ns;
        let limit = (start + 10_000_000_000).min((start / HOUR + 1) * HOUR);
        assert!(
            idx.last_ts < limit,
            "{}: last {} limit {limit}",
            s.path.display(),
            idx.last_ts
        );
        let dir_hour = s
            .path
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert_eq!(dir_hour, format!("{:02}", (start / HOUR) % 24));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn windows_and_filters_select_what_libpcap_selects_and_the_index_reads_less() {
    let path = testdata("oracle/1kxun.pcap.gz");
    let orig = originals(&path);
    let dir = tempdir("select");
    let mut config = DumperConfig::new(&dir);
    config.index_packets = 256;
    dump(&path, config, None);
    let (t0, t1) = (orig.first().unwrap().ts, orig.last().unwrap().ts);
    // The busiest address and a rare one.
    let mut counts: HashMap<[u8; 4], usize> = HashMap::new();
    for p in &orig {
        if p.data.len() >= 34 && p.data[12..14] == [8, 0] {
            *counts
                .entry(p.data[26..30].try_into().unwrap())
                .or_default() += 1;
        }
    }
    let mut by_count: Vec<_> = counts.into_iter().collect();
    by_count.sort_by_key(|(a, n)| (*n, *a));
    let rare = by_count.iter().find(|(_, n)| *n >= 3).unwrap().0;
    let busy = by_count.last().unwrap().0;
    let ip = |a: [u8; 4]| format!("{}.{}.{}.{}", a[0], a[1], a[2], a[3]);
    let cases = [
        (t0, t1 + 1, None),
        (t0 + (t1 - t0) / 3, t0 + (t1 - t0) / 2, None),
        (t0, t1 + 1, Some(format!("host {}", ip(rare)))),
        (t0, t1 + 1, Some(format!("host {} and tcp", ip(busy)))),
        (t0, t1 + 1, Some("udp port 53 or icmp".to_string())),
        (
            t0 + (t1 - t0) / 4,
            t1,
            Some(format!("src host {} and tcp port 80", ip(busy))),
        ),
    ];
    let mut skipped_by_index = 0;
    for (from, to, filter) in cases {
        let mut fs = filter.as_deref().map(|f| FilterSet::new(f, 262_144));
        let want: Vec<Pkt> = orig
            .iter()
            .filter(|p| p.ts >= from && p.ts < to)
            .filter(|p| match fs.as_mut() {
                Some(f) => f.matches(LinkType(p.link), &p.data, p.wire_len).unwrap(),
                None => true,
            })
            .cloned()
            .collect();
        let sel = Selection {
            from_ns: from,
            to_ns: to,
            ifaces: Vec::new(),
            filter: filter.clone(),
        };
        let (got, stats) = read_back(&dir, &sel);
        assert_eq!(got.len(), want.len(), "{filter:?} {from}..{to}");
        assert_eq!(got, want, "{filter:?}");
        assert!(stats.errors.is_empty(), "{:?}", stats.errors);
        if filter
            .as_deref()
            .is_some_and(|f| f.starts_with("host ") && !f.contains(" and "))
        {
            assert!(
                stats.chunks_skipped_index > 0,
                "a rare host skips chunks: {stats:?}"
            );
        }
        skipped_by_index += stats.chunks_skipped_index;
    }
    assert!(skipped_by_index > 0);
    // Interfaces select too.
    let (none, _) = read_back(
        &dir,
        &Selection {
            ifaces: vec!["eth9".into()],
            ..everything()
        },
    );
    assert!(none.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn retention_keeps_the_budget_by_deleting_the_oldest() {
    let path = testdata("oracle/1kxun.pcap.gz");
    let dir = tempdir("retention");
    let mut config = DumperConfig::new(&dir);
    config.segment_bytes = 256 << 10;
    config.segment_ns = 5_000_000_000;
    let budget = 1 << 20;
    let retention = Retention::start(RetentionConfig {
        dir: dir.clone(),
        budget: Some(Budget::Bytes(budget)),
        max_age_ns: None,
        reserve_bytes: 256 << 10,
        interval: std::time::Duration::from_millis(20),
    })
    .unwrap();
    dump(&path, config, Some(&retention));
    let stats = retention.stop();
    let segs = list_segments(&dir).unwrap();
    let on_disk: u64 = segs.iter().map(|s| s.bytes).sum::<u64>()
        + segs
            .iter()
            .map(|s| {
                std::fs::metadata(format!("{}.idx", s.path.display()))
                    .unwrap()
                    .len()
            })
            .sum::<u64>();
    assert!(stats.deleted_for_budget > 0, "{stats:?}");
    assert!(on_disk + (256 << 10) <= budget, "{on_disk} bytes stored");
    assert_eq!(on_disk, stats.stored_bytes);
    // What is left is the newest end of the capture.
    let orig = originals(&path);
    let (back, _) = read_back(&dir, &everything());
    assert!(!back.is_empty());
    assert_eq!(back.last(), orig.last());
    assert_eq!(&orig[orig.len() - back.len()..], &back[..]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn retention_by_age_uses_packet_time() {
    let path = testdata("oracle/many-protocols.pcap.gz"); // 2010 and 2015 packets
    let dir = tempdir("age");
    let retention = Retention::start(RetentionConfig {
        dir: dir.clone(),
        budget: None,
        max_age_ns: Some(86_400_000_000_000),
        reserve_bytes: 0,
        interval: std::time::Duration::from_millis(20),
    })
    .unwrap();
    dump(&path, DumperConfig::new(&dir), Some(&retention));
    let stats = retention.stop();
    assert!(stats.deleted_for_age >= 1, "{stats:?}");
    let (back, _) = read_back(&dir, &everything());
    let newest = originals(&path).iter().map(|p| p.ts).max().unwrap();
    assert!(back.iter().all(|p| p.ts + 86_400_000_000_000 >= newest));
    assert!(!back.is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_torn_segment_is_cut_to_its_last_whole_record() {
    let path = testdata("oracle/many-protocols.pcap.gz");
    let orig = originals(&path);
    let dir = tempdir("repair");
    dump(&path, DumperConfig::new(&dir), None);
    let seg = list_segments(&dir).unwrap().remove(0);
    let idx_path = PathBuf::from(format!("{}.idx", seg.path.display()));
    let whole = SegmentIndex::read(&idx_path).unwrap();
    let bytes = std::fs::read(&seg.path).unwrap();
    // Record boundaries from the index's chunk offsets and a walk of the file.
    let mut ends = vec![24usize];
    let mut at = 24;
    while at < bytes.len() {
        let caplen = u32::from_ne_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
        ends.push(at);
    }
    for (cut, tail) in [
        (bytes.len() - 5, &[][..]),      // torn inside the last record
        (bytes.len(), &[0u8; 4000][..]), // flush padding after whole records
        (ends[7] + 9, &[][..]),          // torn inside a record header
        (ends[3], &[0xffu8; 16][..]),    // garbage header
        (10, &[][..]),                   // not even a file header
    ] {
        let mut torn = bytes[..cut].to_vec();
        torn.extend_from_slice(tail);
        std::fs::write(&seg.path, &torn).unwrap();
        let _ = std::fs::remove_file(&idx_path);
        let report = repair_segment(&seg.path, true, 4096, 100_000_000).unwrap();
        if cut < 24 {
            assert!(report.removed && !seg.path.exists());
            continue;
        }
        let keep = *ends.iter().filter(|&&e| e <= cut).max().unwrap();
        assert_eq!(report.kept_bytes, keep as u64, "cut at {cut}");
        assert_eq!(std::fs::metadata(&seg.path).unwrap().len(), keep as u64);
        let idx = SegmentIndex::read(&idx_path).unwrap();
        let kept_packets = ends.iter().filter(|&&e| e <= cut).count() as u64 - 1;
        assert_eq!(idx.packets, kept_packets);
        assert_eq!(report.packets, kept_packets);
        // The repaired segment reads back as the prefix of the original stream.
        let (back, stats) = read_back(&dir, &everything());
        assert!(stats.errors.is_empty(), "{:?}", stats.errors);
        let first_seg: Vec<Pkt> = orig.iter().take(whole.packets as usize).cloned().collect();
        assert_eq!(
            &back[..kept_packets as usize],
            &first_seg[..kept_packets as usize]
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_cutoff_keeps_the_head_of_every_flow() {
    let path = testdata("oracle/1kxun.pcap.gz");
    let orig = originals(&path);
    let dir = tempdir("cutoff");
    let mut config = DumperConfig::new(&dir);
    config.cutoff_bytes = Some(4000);
    let mut d = Dumper::new(config, None).unwrap();
    let mut src = FileSource::open(&path).unwrap();
    while let Ok(Some(b)) = src.next_batch() {
        for p in b.iter() {
            let iface = b.interfaces()[usize::from(p.iface)].clone();
            d.write(p.iface, &iface, &p).unwrap();
        }
    }
    let stats = d.finish().unwrap();
    let (back, _) = read_back(&dir, &everything());
    assert!(stats.cutoff.packets_cut > 0);
    assert_eq!(
        back.len() as u64 + stats.cutoff.packets_cut,
        orig.len() as u64
    );
    // Kept packets are a subsequence of the originals, and every flow kept at most 4000
    // bytes before its last kept packet.
    let mut decoded = trawl_flow::decode::Decoded::default();
    let cfg = trawl_flow::decode::DecodeConfig::default();
    let mut per_flow: HashMap<[u8; 40], u64> = HashMap::new();
    for p in &back {
        let o = trawl_flow::decode::decode(LinkType(p.link), &p.data, &cfg, &mut decoded);
        if o.has_key() {
            let (k, _) = trawl_flow::key::FlowKey::from_decoded(&decoded);
            let seen = per_flow.entry(k.0).or_default();
            assert!(*seen < 4000, "a flow kept a packet after 4000 bytes");
            *seen += u64::from(p.wire_len);
        }
    }
    let mut it = orig.iter();
    assert!(back.iter().all(|b| it.any(|o| o == b)));
    std::fs::remove_dir_all(&dir).unwrap();
}

mod sweep;

#[test]
fn more_interfaces_than_buffers_do_not_stall_the_dumper() {
    // Every stream holds the block it is filling; the buffer limit is on writes in flight.
    let dir = tempdir("streams");
    let d2 = dir.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut config = DumperConfig::new(&d2);
        config.buffers = 2;
        config.block_bytes = 4096;
        let mut d = Dumper::new(config, None).unwrap();
        let frame = [0u8; 1000];
        for i in 0..2000u64 {
            let iface = (i % 9) as u16;
            let info = trawl_capture::Interface {
                link_type: LinkType::ETHERNET,
                snaplen: 65535,
                name: Some(format!("eth{iface}")),
            };
            let pkt = trawl_capture::PacketRecord {
                ts_ns: 1_700_000_000_000_000_000 + i * 1000,
                wire_len: 1000,
                iface,
                direction: trawl_capture::Direction::Unknown,
                link_type: LinkType::ETHERNET,
                data: &frame,
            };
            d.write(iface, &info, &pkt).unwrap();
        }
        tx.send(d.finish().unwrap()).unwrap();
    });
    let stats = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the dumper finishes");
    assert_eq!(stats.packets, 2000);
    let (back, _) = read_back(&dir, &everything());
    assert_eq!(back.len(), 2000);
    assert_eq!(by_iface(&back).len(), 9);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn buffered_writing_stores_the_same_bytes() {
    // The path for filesystems without O_DIRECT: pwrite, writeback started at once, written
    // pages dropped from the cache.
    let path = testdata("oracle/1kxun.pcap.gz");
    let dir = tempdir("buffered");
    let mut config = DumperConfig::new(&dir);
    config.direct_io = false;
    config.block_bytes = 64 << 10;
    dump(&path, config, None);
    let (back, stats) = read_back(&dir, &everything());
    assert!(stats.errors.is_empty());
    assert_eq!(by_iface(&back), by_iface(&originals(&path)));
    std::fs::remove_dir_all(&dir).unwrap();
}
