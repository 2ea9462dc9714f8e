//! Exporters behind bounded queues: a collector that stops reading costs drops, never a
//! stalled producer; the steady state allocates nothing per record.
use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::time::{Duration, Instant};

use trawl_export::{Destination, ExportConfig, ExportHub};

use crate::sample;

#[test]
fn a_collector_that_stops_reading_costs_drops_not_a_stall() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let config = ExportConfig {
        queue_batches: 4,
        ..ExportConfig::default()
    };
    let hub =
        ExportHub::start(&[Destination::IpfixTcp(addr, Default::default())], &config).unwrap();
    let mut handle = hub.handle(1, 0, Duration::from_millis(10));
    let records = sample();
    // Accept, then never read: the kernel buffers fill, the exporter blocks in write.
    let (mut conn, _) = {
        handle.push(&records[0]);
        handle.flush();
        listener.accept().unwrap()
    };
    let started = Instant::now();
    let mut pushed = 1u64;
    for _ in 0..2000 {
        for r in &records {
            handle.push(r);
            pushed += 1;
        }
    }
    handle.flush();
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_secs(10),
        "pushing took {elapsed:?}"
    );
    assert!(
        hub.dropped() > 0,
        "the queue of 4 batches must have overflowed"
    );
    // Now read a little and hang up, so the exporter's blocked write fails and it ends.
    let mut buf = [0u8; 4096];
    let _ = conn.read(&mut buf);
    drop(conn);
    drop(handle);
    let reports = hub.finish();
    let r = &reports[0];
    assert_eq!(r.records, pushed);
    assert!(r.dropped_queue > 0);
    assert!(r.bytes > 0);
}

#[test]
fn every_record_reaches_a_udp_collector_that_keeps_up() {
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    sink.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let addr = sink.local_addr().unwrap();
    let hub = ExportHub::start(
        &[Destination::IpfixUdp(addr, Default::default())],
        &ExportConfig::default(),
    )
    .unwrap();
    let records = sample();
    let reader = std::thread::spawn(move || {
        let mut dec = trawl_export::Decoder::new(trawl_export::DecoderConfig::default());
        let mut buf = vec![0u8; 65536];
        let mut n = 0;
        while let Ok((len, from)) = sink.recv_from(&mut buf) {
            n += dec.decode(from, &buf[..len], &mut |_, _| {}).0;
        }
        n
    });
    let mut handle = hub.handle(1, 0, Duration::from_millis(10));
    for r in &records {
        handle.push(r);
    }
    drop(handle);
    let reports = hub.finish();
    assert_eq!(reports[0].records, records.len() as u64);
    assert_eq!(reports[0].dropped_queue + reports[0].dropped_send, 0);
    assert_eq!(reader.join().unwrap(), records.len());
}

#[test]
fn json_records_name_the_interface_of_their_handle() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flows.jsonl");
    let hub = ExportHub::start(
        &[Destination::JsonFile(path.clone())],
        &ExportConfig::default(),
    )
    .unwrap();
    let records = sample();
    // Two live workers on two interfaces, and a file driver whose records have no interface.
    let mut eth = hub
        .handle(7, 0, Duration::from_millis(10))
        .with_iface("eth0");
    let mut wlan = hub
        .handle(9, 1, Duration::from_millis(10))
        .with_iface("wl\"an");
    for r in &records {
        eth.push(r);
    }
    eth.flush();
    for r in &records[..3] {
        wlan.push(r);
    }
    wlan.flush();
    let mut file = hub.handle(0, 0, Duration::from_millis(10));
    for r in &records[..2] {
        file.push(r);
    }
    // A handle whose source changes interface: what was pushed before keeps the old name.
    file.set_iface(Some("late"));
    file.push(&records[2]);
    drop((eth, wlan, file));
    hub.finish();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut names = std::collections::BTreeMap::new();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let name = v.get("iface").map(|n| n.as_str().unwrap().to_string());
        *names.entry(name).or_insert(0usize) += 1;
    }
    let want = [
        (None, 2),
        (Some("late".to_string()), 1),
        (Some("eth0".to_string()), records.len()),
        (Some("wl\"an".to_string()), 3),
    ];
    assert_eq!(names, want.into_iter().collect());
}
