//! Every capture of the shared corpus through the dumper and back: no panic, and what was read
//! from the file (up to any damage) is what the store gives back, per interface, in order.
use std::collections::BTreeMap;
use std::ops::ControlFlow;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::Instant;

use trawl_capture::{FileSource, PacketSource};
use trawl_packets::{Dumper, DumperConfig, PacketStore, Selection, MAX_PCAP_TS};
use trawl_testkit::corpus_sweep_files;

type Streams = BTreeMap<String, Vec<(u64, u32, Vec<u8>)>>;

/// Dumps what the reader gives before any damage; returns it per interface index.
fn dump(path: &Path, dir: &Path) -> Option<(Streams, u64)> {
    let mut src = FileSource::open(path).ok()?;
    let mut config = DumperConfig::new(dir);
    config.segment_bytes = 256 << 10;
    config.index_packets = 128;
    let mut d = Dumper::new(config, None).unwrap();
    let mut want: Streams = BTreeMap::new();
    while let Ok(Some(b)) = src.next_batch() {
        for p in b.iter() {
            let iface = b.interfaces()[usize::from(p.iface)].clone();
            d.write(p.iface, &iface, &p).unwrap();
            let data = p.data[..p.data.len().min(262_144)].to_vec();
            want.entry(format!("{}", p.iface)).or_default().push((
                p.ts_ns.min(MAX_PCAP_TS),
                p.wire_len.max(data.len() as u32),
                data,
            ));
        }
    }
    let stats = d.finish().unwrap();
    Some((want, stats.packets))
}

#[test]
fn every_corpus_capture_round_trips_through_the_store() {
    let Some(files) = corpus_sweep_files() else {
        return;
    };
    let started = Instant::now();
    let (mut stored, mut packets, mut failures) = (0, 0u64, Vec::new());
    // On tmpfs: the same code path (O_DIRECT, fsync), without a disk's sync latency times the
    // thousands of segments the sweep writes.
    let shm = Path::new("/dev/shm");
    let base = if shm.is_dir() {
        shm.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let root = base.join(format!("trawl-sweep-store-{}", std::process::id()));
    for path in &files {
        let _ = std::fs::remove_dir_all(&root);
        let result = catch_unwind(AssertUnwindSafe(|| {
            let (want, written) = dump(path, &root)?;
            let store = PacketStore::open(&root).ok()?;
            let mut got: BTreeMap<String, Vec<(u64, u32, Vec<u8>)>> = BTreeMap::new();
            let stats = store
                .read(
                    &Selection {
                        from_ns: 0,
                        to_ns: u64::MAX,
                        ..Selection::default()
                    },
                    |p| {
                        got.entry(p.iface.to_string()).or_default().push((
                            p.ts_ns,
                            p.wire_len,
                            p.data.to_vec(),
                        ));
                        ControlFlow::Continue(())
                    },
                )
                .unwrap();
            Some((want, got, written, stats.errors))
        }));
        match result {
            Err(_) => failures.push(format!("{}: PANIC", path.display())),
            Ok(None) => {}
            Ok(Some((want, got, written, errors))) => {
                stored += 1;
                packets += written;
                // Interfaces that share a name share a stream: compare every packet, once
                // each (the order within streams is checked on testdata/ in main.rs).
                let mut w: Vec<_> = want.into_values().flatten().collect();
                let mut g: Vec<_> = got.into_values().flatten().collect();
                w.sort();
                g.sort();
                if w != g || !errors.is_empty() {
                    failures.push(format!(
                        "{}: {} packets in, {} out; errors {errors:?}",
                        path.display(),
                        w.len(),
                        g.len()
                    ));
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(&root);
    eprintln!(
        "store sweep: {} files, {stored} stored and read back, {packets} packets, {:.1} s",
        files.len(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
