//! `afpacket_source` and `ring` on a real veth pair, with tcpreplay sending capture files.
use std::time::Duration;

use trawl_ring::{Mode, Recv, SharedRing};
use trawl_testkit::netns::{lab_available, VethLab};

use crate::{
    collected, conversation_sums, file_packets, metered_file, pcap, run, start, wait_for, Pkt,
};

pub fn lab() -> VethLab {
    if let Err(e) = lab_available() {
        panic!("live capture tests need a lab: {e}");
    }
    VethLab::new(9000).unwrap_or_else(|e| panic!("cannot make a veth lab: {e}"))
}

/// Small capture rings, so tests do not pin 64 MiB per socket.
const SMALL: &str = "block_size = \"64KiB\"\nblocks = 16";

#[test]
fn afpacket_source_delivers_the_replayed_frames_and_the_ring_publishes_them() {
    let lab = lab();
    let ring_name = format!("blocks-test-{}", lab.host);
    let running = start(&format!(
        r#"
        [[block]]
        name = "cap"
        type = "afpacket_source"
        interface = "{iface}"
        {SMALL}
        [[block]]
        name = "live_got"
        type = "collect"
        [[block]]
        name = "shared"
        type = "ring"
        ring = "{ring_name}"
        capacity = "4MiB"
        [[connection]]
        from = "cap.packets"
        to = ["live_got.in", "shared.packets"]
        "#,
        iface = lab.host
    ));
    // A lossless listener of another "process": it sees what is published after it joins.
    let mut listener = SharedRing::attach(&ring_name, Mode::Lossless).expect("attach to the ring");
    let file = pcap("android.pcap");
    let want: Vec<Pkt> = file_packets(&file).into_iter().map(|(_, p)| p).collect();
    let sent = lab
        .replay_into_host(&file, &["--topspeed"])
        .expect("tcpreplay");
    assert_eq!(sent as usize, want.len());
    let mut from_ring = Vec::new();
    let arrived = wait_for(Duration::from_secs(10), || {
        while let Ok(Recv::Ready(p)) = listener.next() {
            from_ring.push(Pkt {
                data: p.data.to_vec(),
                wire_len: p.wire_len,
            });
        }
        collected("live_got").packets.len() >= want.len() && from_ring.len() >= want.len()
    });
    // A little longer, to catch anything extra.
    std::thread::sleep(Duration::from_millis(200));
    running.stop();
    let report = running
        .wait()
        .unwrap_or_else(|(e, r)| panic!("run failed: {e}\n{}", r.table()));
    while let Ok(Recv::Ready(p)) = listener.next() {
        from_ring.push(Pkt {
            data: p.data.to_vec(),
            wire_len: p.wire_len,
        });
    }
    let got = collected("live_got").packets;
    assert!(
        arrived,
        "{} of {} packets arrived\n{}",
        got.len(),
        want.len(),
        report.table()
    );
    assert_eq!(got.len(), want.len(), "{}", report.table());
    assert!(got == want, "captured frames differ from the file's");
    let cap = report.block("cap").unwrap();
    assert_eq!(cap.counter("packets"), Some(want.len() as u64));
    let bytes: u64 = want.iter().map(|p| u64::from(p.wire_len)).sum();
    assert_eq!(cap.counter("bytes"), Some(bytes));
    assert_eq!(cap.counter("kernel_drops"), Some(0));
    assert!(
        from_ring == want,
        "the ring's listener got {} packets, not the file's",
        from_ring.len()
    );
    let shared = report.block("shared").unwrap();
    assert_eq!(shared.counter("published"), Some(want.len() as u64));
    assert!(listener.is_closed() || report.blocks.iter().all(|b| b.finished));
}

#[test]
fn two_fanout_workers_give_the_conversations_of_the_file() {
    let lab = lab();
    let file = pcap("android.pcap");
    let group = 4000 + (std::process::id() % 20000) as u16;
    let running = start(&format!(
        r#"
        [[pool]]
        name = "workers"
        threads = 2
        [[block]]
        name = "w0"
        type = "afpacket_source"
        pool = "workers"
        thread = 0
        interface = "{iface}"
        fanout = {group}
        {SMALL}
        [[block]]
        name = "w1"
        type = "afpacket_source"
        pool = "workers"
        thread = 1
        interface = "{iface}"
        fanout = {group}
        {SMALL}
        [[block]]
        name = "m0"
        type = "flow_meter"
        pool = "workers"
        thread = 0
        [[block]]
        name = "m1"
        type = "flow_meter"
        pool = "workers"
        thread = 1
        [[block]]
        name = "fanout_flows"
        type = "collect"
        [[connection]]
        from = "w0.packets"
        to = "m0.packets"
        [[connection]]
        from = "w1.packets"
        to = "m1.packets"
        [[connection]]
        from = "m0.flows"
        to = "fanout_flows.in"
        [[connection]]
        from = "m1.flows"
        to = "fanout_flows.in"
        "#,
        iface = lab.host
    ));
    let want_packets = file_packets(&file).len() as u64;
    lab.replay_into_host(&file, &["--topspeed"])
        .expect("tcpreplay");
    let captured = |r: &trawl_compose::Report| -> u64 {
        ["w0", "w1"]
            .iter()
            .map(|w| r.block(w).unwrap().counter("packets").unwrap_or(0))
            .sum()
    };
    wait_for(Duration::from_secs(10), || {
        captured(&running.report()) >= want_packets
    });
    std::thread::sleep(Duration::from_millis(200));
    running.stop();
    let report = running
        .wait()
        .unwrap_or_else(|(e, r)| panic!("run failed: {e}\n{}", r.table()));
    assert_eq!(captured(&report), want_packets, "{}", report.table());
    for w in ["w0", "w1"] {
        assert!(
            report.block(w).unwrap().counter("packets").unwrap() > 0,
            "worker {w} got nothing: the fanout group did not spread\n{}",
            report.table()
        );
    }
    run(&metered_file(
        &file,
        "[[block]]\nname = \"file_flows\"\ntype = \"collect\"",
        "file_flows.in",
    ));
    let live = conversation_sums(&collected("fanout_flows").flows);
    let offline = conversation_sums(&collected("file_flows").flows);
    assert!(!offline.is_empty());
    assert_eq!(live, offline);
}

/// The detectors live and over a file give the same events: a flood put on the wire is found
/// by `afpacket_source -> synflood`, and the packets that run captured (written by
/// `pcap_writer` from the same batches), read back by `pcap_source`, give exactly the same
/// alarms and heavy-hitter reports.
#[test]
fn detectors_give_the_same_events_live_and_over_the_captured_file() {
    let dir = tempfile::tempdir().unwrap();
    let flood = dir.path().join("flood.pcap");
    let victim: std::net::Ipv4Addr = "10.66.0.1".parse().unwrap();
    // At 20 times the recorded speed the flood starts 2 s in, after the detector's warm-up
    // (5 intervals of 200 ms), and lasts half a second at 10,000 SYN/s.
    crate::offline::with_flood(&flood, victim, 500, 40, 10);
    let lab = lab();
    let live_events = dir.path().join("live.jsonl");
    let captured = dir.path().join("captured.pcap");
    let apps = |input: &str, events: &std::path::Path| {
        format!(
            r#"
            [[block]]
            name = "syn"
            type = "synflood"
            interval = "200ms"
            [[block]]
            name = "heavy"
            type = "heavy_hitters"
            interval = "1s"
            top = 3
            [[block]]
            name = "events"
            type = "event_writer"
            path = "{}"
            [[connection]]
            from = "{input}"
            to = ["syn.packets", "heavy.packets"]
            [[connection]]
            from = "syn.alarms"
            to = "events.events"
            [[connection]]
            from = "heavy.reports"
            to = "events.events"
            "#,
            events.display()
        )
    };
    let running = start(&format!(
        r#"
        [[block]]
        name = "cap"
        type = "afpacket_source"
        interface = "{iface}"
        {SMALL}
        [[block]]
        name = "keep"
        type = "pcap_writer"
        path = "{captured}"
        [[connection]]
        from = "cap.packets"
        to = "keep.packets"
        {apps}
        "#,
        iface = lab.host,
        captured = captured.display(),
        apps = apps("cap.packets", &live_events),
    ));
    let sent = lab
        .replay_into_host(&flood, &["--multiplier", "20"])
        .expect("tcpreplay");
    std::thread::sleep(Duration::from_millis(300));
    running.stop();
    let live = running
        .wait()
        .unwrap_or_else(|(e, r)| panic!("run failed: {e}\n{}", r.table()));
    assert_eq!(live.block("cap").unwrap().counter("packets"), Some(sent));
    let offline_events = dir.path().join("offline.jsonl");
    let offline = run(&format!(
        r#"
        [[block]]
        name = "src"
        type = "pcap_source"
        files = ["{}"]
        {}
        "#,
        captured.display(),
        apps("src.packets", &offline_events)
    ));
    assert_eq!(offline.block("src").unwrap().items_out, sent);
    let read = |p: &std::path::Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(p)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let (live_events, offline_events) = (read(&live_events), read(&offline_events));
    let starts: Vec<&serde_json::Value> = live_events
        .iter()
        .filter(|e| e["event"] == "start")
        .collect();
    assert_eq!(starts.len(), 1, "{live_events:#?}");
    assert_eq!(starts[0]["victim"], "10.66.0.1");
    let key = |v: &Vec<serde_json::Value>| {
        let mut s: Vec<String> = v.iter().map(|e| e.to_string()).collect();
        s.sort();
        s
    };
    assert_eq!(key(&live_events), key(&offline_events));
    assert!(live_events.iter().any(|e| e["event"] == "heavy_hitters"));
}

/// Records metered from a live source name its interface in `flow_writer`'s JSON and CSV, as
/// `trawl flows -i` does; the same chain over a file names none.
#[test]
fn flow_writer_names_the_interface_of_live_records() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let (json, csv) = (dir.path().join("f.jsonl"), dir.path().join("f.csv"));
    let running = start(&format!(
        r#"
        [[block]]
        name = "cap"
        type = "afpacket_source"
        interface = "{iface}"
        {SMALL}
        [[block]]
        name = "meter"
        type = "flow_meter"
        [[block]]
        name = "json"
        type = "flow_writer"
        path = "{json}"
        [[block]]
        name = "csv"
        type = "flow_writer"
        path = "{csv}"
        format = "csv"
        [[connection]]
        from = "cap.packets"
        to = "meter.packets"
        [[connection]]
        from = "meter.flows"
        to = ["json.flows", "csv.flows"]
        "#,
        iface = lab.host,
        json = json.display(),
        csv = csv.display(),
    ));
    let file = pcap("android.pcap");
    let want = file_packets(&file).len() as u64;
    lab.replay_into_host(&file, &["--topspeed"])
        .expect("tcpreplay");
    let captured = || {
        running
            .report()
            .block("cap")
            .and_then(|b| b.counter("packets"))
            .unwrap_or(0)
    };
    wait_for(Duration::from_secs(10), || captured() >= want);
    std::thread::sleep(Duration::from_millis(200));
    running.stop();
    running
        .wait()
        .unwrap_or_else(|(e, r)| panic!("run failed: {e}\n{}", r.table()));
    let mut packets = 0;
    for line in std::fs::read_to_string(&json).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(v["iface"], lab.host.as_str(), "{line}");
        packets += v["fwd_packets"].as_u64().unwrap() + v["rev_packets"].as_u64().unwrap();
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let at = header
        .iter()
        .position(|h| *h == "iface")
        .expect("iface column");
    let rows: Vec<&str> = lines.collect();
    assert!(!rows.is_empty());
    for row in rows {
        assert_eq!(row.split(',').nth(at), Some(lab.host.as_str()), "{row}");
    }

    // Over the file: no interface named (as `trawl flows -r`).
    let offline = dir.path().join("file.jsonl");
    run(&metered_file(
        &file,
        &format!(
            "[[block]]\nname = \"out\"\ntype = \"flow_writer\"\npath = \"{}\"",
            offline.display()
        ),
        "out.flows",
    ));
    let mut offline_packets = 0;
    for line in std::fs::read_to_string(&offline).unwrap().lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert!(v.get("iface").is_none(), "{line}");
        offline_packets += v["fwd_packets"].as_u64().unwrap() + v["rev_packets"].as_u64().unwrap();
    }
    // Every packet with a flow key is in a record, live as from the file.
    assert!(offline_packets > 0);
    assert_eq!(packets, offline_packets);
}

/// Issue 19: batches share the capture ring's block their packets are in instead of copying
/// them, and a block goes back to the kernel once every receiver is done with its batch. A
/// receiver that holds on to batches (here the last forty) keeps their blocks from the kernel:
/// past half of the ring held, the source copies packets instead of lending more blocks. (The
/// half left to the kernel is 32 blocks, a third of a second at this rate: a loaded machine
/// may not run the capture thread for 80 ms, what 16 blocks gave.) Either
/// way every packet arrives intact, and the flows are the file's.
#[test]
fn issue_19_a_receiver_holding_lent_batches_gets_copies_past_half_the_ring() {
    let lab = lab();
    let file = pcap("android.pcap");
    let running = start(&format!(
        r#"
        [[block]]
        name = "cap"
        type = "afpacket_source"
        interface = "{iface}"
        block_size = "4KiB"
        blocks = 64
        [[block]]
        name = "holder"
        type = "collect"
        hold = 40
        [[block]]
        name = "meter"
        type = "flow_meter"
        [[block]]
        name = "held_flows"
        type = "collect"
        [[connection]]
        from = "cap.packets"
        to = ["holder.in", "meter.packets"]
        [[connection]]
        from = "meter.flows"
        to = "held_flows.in"
        "#,
        iface = lab.host
    ));
    let want: Vec<Pkt> = file_packets(&file).into_iter().map(|(_, p)| p).collect();
    // Slowly: the kernel retires a block every 10 ms with a few packets in it, so the file
    // fills many more blocks than the ring has.
    lab.replay_into_host(&file, &["--pps=300"])
        .expect("tcpreplay");
    wait_for(Duration::from_secs(10), || {
        collected("holder").packets.len() >= want.len()
    });
    std::thread::sleep(Duration::from_millis(200));
    running.stop();
    let report = running
        .wait()
        .unwrap_or_else(|(e, r)| panic!("run failed: {e}\n{}", r.table()));
    let cap = report.block("cap").unwrap();
    assert_eq!(cap.counter("kernel_drops"), Some(0), "{}", report.table());
    let got = collected("holder").packets;
    assert_eq!(got.len(), want.len(), "{}", report.table());
    assert!(got == want, "captured frames differ from the file's");
    let (lent, copied) = (
        cap.counter("blocks_lent").unwrap(),
        cap.counter("blocks_copied").unwrap(),
    );
    assert!(lent >= 32, "lent {lent}\n{}", report.table());
    assert!(copied > 0, "nothing copied\n{}", report.table());
    run(&metered_file(
        &file,
        "[[block]]\nname = \"held_file_flows\"\ntype = \"collect\"",
        "held_file_flows.in",
    ));
    let live = conversation_sums(&collected("held_flows").flows);
    let offline = conversation_sums(&collected("held_file_flows").flows);
    assert!(!offline.is_empty());
    assert_eq!(live, offline);
}
