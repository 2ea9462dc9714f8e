//! `ring_source` reading a shared ring that the test publishes into with a `trawl_ring`
//! producer, as another process's `trawl run --ring` would.
use std::path::Path;
use std::time::Duration;

use trawl_capture::{Direction, Interface, LinkType, PacketRecord};
use trawl_ring::{Producer, RingConfig};

use crate::{collected, file_packets, pcap, start, wait_for, Pkt};

/// A shared ring named after the test (and process), with one Ethernet interface `tap-a`.
fn producer(test: &str) -> (Producer, String) {
    let name = format!("rs-{test}-{}", std::process::id());
    let mut p = Producer::create_shared(&name, &RingConfig::with_capacity(4 << 20))
        .unwrap_or_else(|e| panic!("cannot create ring {name}: {e}"));
    p.add_interface(&Interface {
        link_type: LinkType::ETHERNET,
        snaplen: 262_144,
        name: Some("tap-a".into()),
    })
    .unwrap();
    (p, name)
}

/// Publishes `packets` as interface `iface`'s, inbound.
fn publish(p: &mut Producer, packets: &[(u64, Pkt)], iface: u16) {
    for (ts_ns, pkt) in packets {
        p.push_record(&PacketRecord {
            ts_ns: *ts_ns,
            wire_len: pkt.wire_len,
            iface,
            direction: Direction::Inbound,
            link_type: LinkType::ETHERNET,
            data: &pkt.data,
        })
        .unwrap();
    }
    p.publish();
}

/// `ring_source` named `source` on ring `ring` (lossless) into `collect` block `sink` and a
/// `packet_printer` writing to `lines`, with `runtime` (a `[runtime]` table or nothing).
fn listening(ring: &str, sink: &str, lines: &Path, runtime: &str) -> String {
    format!(
        r#"
        {runtime}
        [[block]]
        name = "source"
        type = "ring_source"
        ring = "{ring}"
        mode = "lossless"
        [[block]]
        name = "{sink}"
        type = "collect"
        [[block]]
        name = "lines"
        type = "packet_printer"
        path = "{}"
        mode = "truncate"
        [[connection]]
        from = "source.packets"
        to = ["{sink}.in", "lines.packets"]
        "#,
        lines.display()
    )
}

#[test]
fn ring_source_reads_every_record_with_the_rings_interfaces_until_the_ring_closes() {
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("lines.txt");
    let (mut p, ring) = producer("all");
    // The listener attaches when the composition is built: everything published after.
    let running = start(&listening(&ring, "rs_all", &lines, ""));
    assert!(p.has_listeners(), "ring_source attached when it was built");
    let want = file_packets(&pcap("android.pcap"));
    publish(&mut p, &want, 0);
    // An interface the producer adds later is in the batches' table with its first record.
    let b = p
        .add_interface(&Interface {
            link_type: LinkType::ETHERNET,
            snaplen: 262_144,
            name: Some("tap-b".into()),
        })
        .unwrap();
    publish(&mut p, &want[..1], b);
    p.close();
    // The producer closed the ring: the source reads it to its end and the run ends.
    let report = running
        .wait()
        .unwrap_or_else(|(e, r)| panic!("run failed: {e}\n{}", r.table()));
    let got = collected("rs_all").packets;
    let mut all: Vec<Pkt> = want.iter().map(|(_, p)| p.clone()).collect();
    all.push(want[0].1.clone());
    assert!(
        got == all,
        "{} packets, not the {} published",
        got.len(),
        all.len()
    );
    let src = report.block("source").unwrap();
    let n = all.len() as u64;
    assert_eq!(src.counter("packets"), Some(n));
    assert_eq!(src.counter("records_read"), Some(n));
    assert_eq!(src.counter("records_missed"), Some(0));
    assert_eq!(src.counter("unknown_interface"), Some(0));
    assert_eq!(src.counter("ring_closed"), Some(1));
    let captured: u64 = all.iter().map(|p| p.data.len() as u64).sum();
    assert_eq!(src.counter("bytes_read"), Some(captured));
    // One line per packet, named after the ring's interface, with its direction.
    let text = std::fs::read_to_string(&lines).unwrap();
    let l: Vec<&str> = text.lines().collect();
    assert_eq!(l.len(), all.len());
    let first = &all[0];
    assert_eq!(
        l[0],
        format!(
            "{} tap-a in {} bytes (captured {})",
            trawl_time::rfc3339(want[0].0, trawl_time::Zone::Utc, true),
            first.wire_len,
            first.data.len()
        )
    );
    assert!(l[l.len() - 1].contains(" tap-b in "), "{}", l[l.len() - 1]);
}

#[test]
fn ring_source_takes_exactly_the_runs_count_and_leaves_the_rest_unread() {
    let dir = tempfile::tempdir().unwrap();
    let lines = dir.path().join("lines.txt");
    let (mut p, ring) = producer("count");
    let running = start(&listening(
        &ring,
        "rs_count",
        &lines,
        "[runtime]\ncount = 100",
    ));
    let want = file_packets(&pcap("android.pcap"));
    assert!(want.len() > 100);
    publish(&mut p, &want, 0);
    let report = running
        .wait()
        .unwrap_or_else(|(e, r)| panic!("run failed: {e}\n{}", r.table()));
    let got = collected("rs_count").packets;
    let first: Vec<Pkt> = want[..100].iter().map(|(_, p)| p.clone()).collect();
    assert!(got == first, "{} packets, not the first 100", got.len());
    let src = report.block("source").unwrap();
    assert_eq!(src.counter("packets"), Some(100));
    assert_eq!(
        src.counter("records_read"),
        Some(100),
        "records past the count stay unread in the ring"
    );
    assert_eq!(src.counter("ring_closed"), Some(0));
    p.close();
}

#[test]
fn ring_source_names_the_ring_it_cannot_attach_to() {
    let text = r#"
        [[block]]
        name = "source"
        type = "ring_source"
        ring = "no-such-ring-for-blocks"
        [[block]]
        name = "sink"
        type = "collect"
        [[connection]]
        from = "source.packets"
        to = "sink.in"
    "#;
    let plan = trawl_compose::plan(text, "test", &crate::registry(), &crate::cpus())
        .expect("valid: the ring need not exist when the composition is checked");
    let e = trawl_compose::start(plan).err().expect("no such ring");
    assert!(
        e.to_string()
            .contains("cannot attach to ring 'no-such-ring-for-blocks'"),
        "{e}"
    );
    let bad = text.replace("no-such-ring-for-blocks", "bad name!");
    assert!(trawl_compose::plan(&bad, "test", &crate::registry(), &crate::cpus()).is_err());
}

/// Issue 20: on a quiet live link the clock still moves. Packets that end 0.5 s before a
/// 5-minute boundary (published into a ring, so their times are chosen: a live source whose
/// traffic then stops) and nothing after: the meter sends its clock without records, so the
/// flow store writes the block once the boundary plus its grace is past; heavy_hitters
/// reports the last interval and synflood ends the flood's alarm, none of them waiting for a
/// later packet (before, each waited until more traffic came or the run stopped).
#[test]
fn issue_20_a_quiet_live_link_closes_blocks_intervals_and_alarms_by_the_clock() {
    const S: u64 = 1_000_000_000;
    // 2025-06-01 12:05:00 UTC: the block 12:00-12:05 ends here.
    let boundary = 1_748_779_500 * S;
    let dir = tempfile::tempdir().unwrap();
    let flood = dir.path().join("flood.pcap");
    let victim: std::net::Ipv4Addr = "10.66.0.1".parse().unwrap();
    crate::offline::with_flood(&flood, victim, 500, 40, 10);
    // 20 times the recorded speed, up to the flood's end (2.5 s in), ending half a second
    // before the boundary.
    let packets = file_packets(&flood);
    let t0 = packets[0].0;
    let fast: Vec<(u64, Pkt)> = packets
        .into_iter()
        .map(|(ts, p)| ((ts - t0) / 20, p))
        .filter(|(ts, _)| *ts <= 5 * S / 2)
        .map(|(ts, p)| (boundary - 3 * S + ts, p))
        .collect();
    let last = fast.last().unwrap().0;
    assert!(last < boundary && boundary - last < S, "{last}");
    let db = dir.path().join("db");
    let (mut p, ring) = producer("quiet");
    let running = start(&format!(
        r#"
        [[block]]
        name = "source"
        type = "ring_source"
        ring = "{ring}"
        mode = "lossless"
        [[block]]
        name = "meter"
        type = "flow_meter"
        idle = "1s"
        interval = "5m"
        [[block]]
        name = "store"
        type = "flow_store"
        dir = "{db}"
        iface = "tap-a"
        grace = "2s"
        [[block]]
        name = "q_clock"
        type = "collect"
        [[block]]
        name = "heavy"
        type = "heavy_hitters"
        interval = "1s"
        top = 3
        [[block]]
        name = "syn"
        type = "synflood"
        interval = "200ms"
        [[block]]
        name = "q_events"
        type = "collect"
        [[connection]]
        from = "source.packets"
        to = ["meter.packets", "heavy.packets", "syn.packets"]
        [[connection]]
        from = "meter.flows"
        to = ["store.flows", "q_clock.in"]
        [[connection]]
        from = "heavy.reports"
        to = "q_events.in"
        [[connection]]
        from = "syn.alarms"
        to = "q_events.in"
        "#,
        db = db.display()
    ));
    publish(&mut p, &fast, 0);
    let blocks = || {
        let all = trawl_store::BlockFilter {
            ifaces: &[],
            from_ns: 0,
            to_ns: None,
        };
        trawl_store::list_blocks(&db, &all).map_or(0, |b| b.len())
    };
    let events = || collected("q_events").events;
    let heavy_last = |e: &[serde_json::Value]| {
        e.iter()
            .any(|e| e["event"] == "heavy_hitters" && e["start_ns"].as_u64() == Some(boundary - S))
    };
    let flood_ended = |e: &[serde_json::Value]| {
        e.iter()
            .any(|e| e["event"] == "end" && e["victim"] == "10.66.0.1")
    };
    // The clock went past the block's end and its grace without records. Waited for with
    // the rest: the collector sees a tick a moment after the store acts on it, so reading
    // the clocks when the block is stored raced with the tick that stored it.
    let clock_past = || {
        collected("q_clock")
            .clocks
            .iter()
            .any(|&c| c >= boundary + 2 * S)
    };
    // The block is due 2.5 s after the last packet (the boundary plus the grace), the
    // heavy hitters' last interval 0.5 s after it: 15 s is ample on a loaded machine.
    let done = wait_for(Duration::from_secs(15), || {
        let e = events();
        blocks() == 1 && heavy_last(&e) && flood_ended(&e) && clock_past()
    });
    let (stored, e, clocks) = (blocks(), events(), collected("q_clock").clocks);
    p.close();
    let report = running
        .wait()
        .unwrap_or_else(|(e, r)| panic!("run failed: {e}\n{}", r.table()));
    assert!(
        done,
        "while the link was quiet: {stored} blocks stored, heavy hitters' last interval \
         reported: {}, flood ended: {}; the meter's clocks (past the grace: {}): {clocks:?}\n{}",
        heavy_last(&e),
        flood_ended(&e),
        clocks.iter().any(|&c| c >= boundary + 2 * S),
        report.table()
    );
    assert_eq!(
        report.block("store").unwrap().counter("records"),
        report.block("meter").unwrap().counter("records")
    );
}
