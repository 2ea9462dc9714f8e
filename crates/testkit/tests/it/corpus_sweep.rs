//! Every file of the shared corpus through reader, decoder and flow meter: no panic, no hang,
//! and the books balance (packets read = packets metered = sum of decode outcomes; packets in
//! records = packets with a flow key). Broken files must produce an error naming the file.
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use trawl_flow::decode::{ParseOutcome, TunnelMode};
use trawl_flow::FlowConfig;
use trawl_testkit::{corpus_sweep_files, meter_file};

#[test]
fn every_corpus_capture_through_the_flow_meter() {
    let Some(files) = corpus_sweep_files() else {
        return;
    };
    let started = Instant::now();
    let (mut opened, mut rejected, mut damaged, mut packets) = (0, 0, 0, 0u64);
    let mut failures = Vec::new();
    for (i, path) in files.iter().enumerate() {
        // Alternate tunnel modes so both decoder paths see the whole corpus over two files.
        let tunnel = if i % 2 == 0 {
            TunnelMode::Outer
        } else {
            TunnelMode::Inner
        };
        let mut config = FlowConfig {
            capacity: 4096,
            ..FlowConfig::default()
        };
        config.decode.tunnel = tunnel;
        let t0 = Instant::now();
        let result = catch_unwind(AssertUnwindSafe(|| {
            match trawl_capture::FileSource::open(path) {
                Err(e) => Err(e.to_string()),
                Ok(_) => Ok(meter_file(path, config)),
            }
        }));
        let m = match result {
            Err(_) => {
                failures.push(format!("{}: PANIC", path.display()));
                continue;
            }
            Ok(Err(msg)) => {
                rejected += 1;
                assert!(
                    msg.contains(&*path.to_string_lossy()),
                    "error must name the file: {msg}"
                );
                continue;
            }
            Ok(Ok(m)) => m,
        };
        opened += 1;
        if let Some(e) = &m.error {
            damaged += 1;
            assert!(
                e.contains(&*path.to_string_lossy()),
                "error must name the file: {e}"
            );
            assert!(e.contains("offset"), "error must name the offset: {e}");
        }
        packets += m.packets_read;
        let s = &m.stats;
        let keyed: u64 = ParseOutcome::ALL
            .iter()
            .filter(|o| o.has_key())
            .map(|o| s.outcomes.get(*o))
            .sum();
        let in_records: u64 = m.flows.iter().map(|f| f.fwd.0 + f.rev.0).sum();
        if s.packets != m.packets_read || s.outcomes.total() != s.packets || in_records != keyed {
            failures.push(format!(
                "{}: read {} metered {} outcomes {} keyed {keyed} in records {in_records}",
                path.display(),
                m.packets_read,
                s.packets,
                s.outcomes.total()
            ));
        }
        if t0.elapsed().as_secs() > 20 {
            failures.push(format!("{}: took {:?}", path.display(), t0.elapsed()));
        }
    }
    eprintln!(
        "corpus sweep: {} files: {opened} read ({damaged} damaged, reported), {rejected} rejected with an error; {packets} packets in {:?}",
        files.len(),
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
