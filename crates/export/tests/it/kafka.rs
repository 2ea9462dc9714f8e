//! Kafka export against a real three-broker cluster (`scripts/services.sh`, consumed back with
//! `kcat`): at least once through a leader failover, an outage of every broker (the spool),
//! a restart (the spool sent by the next exporter), and a full spool (oldest dropped, counted).
//! The records are those of a testdata capture, compared as the JSON lines `trawl flows`
//! prints for them.
use std::path::Path;
use std::time::Duration;

use trawl_export::{Destination, ExportConfig, ExportHub, ExporterReport};
use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_flow::FlowRecord;
use trawl_testkit::kafka::{coverage, Cluster};

use crate::sample;

/// A message not acknowledged after this long goes to the spool (short: the tests wait it).
const TIMEOUT_MS: u32 = 2000;

fn json_lines(records: &[FlowRecord<'_>]) -> Vec<String> {
    let mut w = RecordWriter::new(RecordFormat::Json, false);
    let mut buf = Vec::new();
    for r in records {
        w.write(r, &mut buf);
    }
    String::from_utf8(buf)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn destination(bootstrap: &str, topic: &str, spool: Option<&Path>, extra: &str) -> Destination {
    let spool = spool.map_or(String::new(), |p| format!("&spool={}", p.display()));
    format!("kafka://{bootstrap}/{topic}?timeout={TIMEOUT_MS}{spool}{extra}")
        .parse()
        .unwrap()
}

/// Exports `records` in `chunks` pieces as a capture-file run does (lossless), calling
/// `between(i)` after piece `i` has been handed over.
fn export_in_chunks(
    d: Destination,
    records: &[FlowRecord<'static>],
    chunks: usize,
    mut between: impl FnMut(usize),
) -> ExporterReport {
    let config = ExportConfig {
        lossless: true,
        ..ExportConfig::default()
    };
    let hub = ExportHub::start(&[d], &config).unwrap();
    let mut h = hub.handle(1, 0, Duration::from_millis(50));
    for (i, piece) in records
        .chunks(records.len().div_ceil(chunks).max(1))
        .enumerate()
    {
        for r in piece {
            h.push(r);
        }
        h.flush();
        between(i);
    }
    drop(h);
    hub.finish().pop().unwrap()
}

/// Every record of `want` is on `topic`; returns the duplicates.
fn assert_all_arrived(cluster: &Cluster, topic: &str, want: &[String]) -> usize {
    let got = cluster.consume_lines(topic, want.len(), Duration::from_secs(60));
    let c = coverage(want, &got);
    assert!(
        c.missing.is_empty() && c.unexpected.is_empty(),
        "{topic}: {} of {} records missing, {} unexpected; first missing: {:?}",
        c.missing.len(),
        want.len(),
        c.unexpected.len(),
        c.missing.first()
    );
    eprintln!(
        "{topic}: {} records, {} duplicates",
        want.len(),
        c.duplicates
    );
    c.duplicates
}

#[test]
fn kafka_export_loses_nothing_through_broker_outages() {
    let records = sample();
    let want = json_lines(&records);
    let cluster = Cluster::start(Path::new(env!("CARGO_TARGET_TMPDIR")), 3);
    let tmp = tempfile::tempdir().unwrap();

    // 1. The partition's leader stopped in the middle of an export: the idempotent producer
    //    follows the new leader; every record arrives.
    let topic = "failover";
    let r = export_in_chunks(
        destination(&cluster.bootstrap, topic, Some(&tmp.path().join("s1")), ""),
        &records,
        8,
        |i| {
            std::thread::sleep(Duration::from_millis(300));
            if i == 2 {
                cluster.stop_node(cluster.leader(topic));
            }
        },
    );
    assert_eq!(r.records, records.len() as u64, "{r:?}");
    assert_eq!((r.dropped_send, r.spool_pending), (0, 0), "{r:?}");
    assert_all_arrived(&cluster, topic, &want);
    cluster.start_all();

    // 2. Every broker down for 10 s (issue 22 says 30 s; 10 s keeps the suite short and is
    //    five times the delivery timeout): the records of the outage wait in the spool and
    //    are sent once the brokers are back.
    let topic = "outage";
    let r = export_in_chunks(
        destination(&cluster.bootstrap, topic, Some(&tmp.path().join("s2")), ""),
        &records,
        6,
        |i| {
            if i == 1 {
                cluster.stop_all();
            }
            if (2..4).contains(&i) {
                std::thread::sleep(Duration::from_secs(5));
            }
            if i == 3 {
                cluster.start_all();
            }
        },
    );
    assert!(r.spooled > 0, "the outage spooled nothing: {r:?}");
    // A spool segment partly sent when the brokers went away again is sent again whole.
    assert!(r.spool_resent >= r.spooled, "{r:?}");
    assert_eq!((r.dropped_send, r.spool_pending), (0, 0), "{r:?}");
    assert_all_arrived(&cluster, topic, &want);

    // 3. An exporter that ends with every broker down leaves its records in the spool; the
    //    next one with the same spool sends them.
    let topic = "restart";
    let spool = tmp.path().join("s3");
    cluster.stop_all();
    let r = export_in_chunks(
        destination(&cluster.bootstrap, topic, Some(&spool), ""),
        &records,
        1,
        |_| {},
    );
    assert_eq!(r.messages, 0, "{r:?}");
    assert_eq!(r.spool_pending, records.len() as u64, "{r:?}");
    cluster.start_all();
    let r = export_in_chunks(
        destination(&cluster.bootstrap, topic, Some(&spool), ""),
        &[],
        1,
        |_| {},
    );
    assert_eq!(r.spool_resent, records.len() as u64, "{r:?}");
    assert_eq!(r.spool_pending, 0, "{r:?}");
    assert_all_arrived(&cluster, topic, &want);
}

#[test]
fn kafka_full_spool_drops_the_oldest_and_counts_them() {
    // The sample six times over, each copy a nanosecond later (every record distinct).
    let records: Vec<FlowRecord<'static>> = (0..6)
        .flat_map(|k| {
            sample().into_iter().map(move |r| FlowRecord {
                first_ns: r.first_ns + k,
                ..r
            })
        })
        .collect();
    let want = json_lines(&records);
    let tmp = tempfile::tempdir().unwrap();
    let spool = tmp.path().join("spool");
    // Nothing listens on port 1: every message times out into a spool of 256 KiB (four
    // segments of 64 KiB), far less than the sample's JSON.
    let total: usize = want.iter().map(|l| l.len()).sum();
    assert!(total > 4 * (256 << 10), "sample too small: {total} bytes");
    let r = export_in_chunks(
        destination("127.0.0.1:1", "full", Some(&spool), "&spool_size=256k"),
        &records,
        1,
        |_| {},
    );
    assert_eq!(r.spooled, records.len() as u64, "{r:?}");
    assert!(r.spool_dropped > 0, "{r:?}");
    assert_eq!(r.spool_pending + r.spool_dropped, r.spooled, "{r:?}");
    assert_eq!(r.dropped_send, r.spool_dropped, "{r:?}");
    // What is left is the newest: the last record is there, the first is not.
    let mut s = trawl_export::spool::Spool::open(&spool, 256 << 10).unwrap();
    assert_eq!(s.pending(), r.spool_pending);
    let mut left = Vec::new();
    while let Some((seq, entries)) = s.take_oldest(&[]).unwrap() {
        left.extend(
            entries
                .into_iter()
                .map(|e| String::from_utf8(e.value).unwrap()),
        );
        s.remove(seq).unwrap();
    }
    assert!(left.contains(want.last().unwrap()));
    assert!(!left.contains(&want[0]));
}

#[test]
fn kafka_permanently_refused_messages_are_dropped_and_counted_not_spooled() {
    let records = sample();
    let cluster = Cluster::start(Path::new(env!("CARGO_TARGET_TMPDIR")), 1);
    // Every record batch is larger than the topic takes: the broker refuses each message for
    // good (MessageSizeTooLarge), which no retry or resend can change.
    let topic = "too-large";
    cluster.create_topic(topic, &["max.message.bytes=200"]);
    let tmp = tempfile::tempdir().unwrap();
    let spool = tmp.path().join("spool");
    // A spool segment a previous run left for this topic (each message too large alone):
    // sent, refused, and then gone rather than sent again by every later run.
    let mut s = trawl_export::spool::Spool::open(&spool, 1 << 20).unwrap();
    let left = 20u64;
    let pad = "x".repeat(300);
    for i in 0..left {
        let value = format!("{{\"old\":{i},\"pad\":\"{pad}\"}}");
        s.append(topic, b"probe", value.as_bytes(), &[]).unwrap();
    }
    s.close().unwrap();
    drop(s);

    let r = export_in_chunks(
        destination(&cluster.bootstrap, topic, Some(&spool), ""),
        &records,
        2,
        |_| {},
    );
    let all = records.len() as u64 + left;
    assert_eq!(r.rejected, all, "{r:?}");
    assert_eq!(r.spooled, 0, "refused messages were spooled: {r:?}");
    assert_eq!(
        r.spool_pending, 0,
        "refused messages stay in the spool: {r:?}"
    );
    assert_eq!(r.dropped_send, all, "{r:?}");
    assert_eq!(r.messages, 0, "{r:?}");
    assert_eq!(r.rejected_reasons.len(), 1, "{r:?}");
    assert!(
        r.rejected_reasons[0].0.contains("MessageSizeTooLarge"),
        "{r:?}"
    );
    assert_eq!(r.rejected_reasons[0].1, all, "{r:?}");
    let s = trawl_export::spool::Spool::open(&spool, 1 << 20).unwrap();
    assert_eq!(s.pending(), 0);

    // The same brokers take what fits: a normal topic gets every record.
    let r = export_in_chunks(
        destination(&cluster.bootstrap, "fits", Some(&spool), ""),
        &records,
        1,
        |_| {},
    );
    assert_eq!((r.rejected, r.spooled), (0, 0), "{r:?}");
    assert_all_arrived(&cluster, "fits", &json_lines(&records));
}
