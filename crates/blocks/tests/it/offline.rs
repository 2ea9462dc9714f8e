//! Compositions over capture files give exactly what the library gives without blocks, on one
//! thread or across threads with tiny queues; parallel chains merge their series exactly; the
//! detectors find injected floods; the filter agrees with libpcap.
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::Path;

use trawl_blocks::detect::{heavy_json, synflood_json};
use trawl_capture::{reuse_records, FileSource, LinkType, PacketRecord, PacketSource, PcapWriter};
use trawl_detect::heavy::{HeavyConfig, HeavyHitters, Selection};
use trawl_detect::synflood::{SynFloodConfig, SynFloodDetector};
use trawl_flow::format::{RecordFormat, RecordWriter};
use trawl_flow::{FlowConfig, FlowMeter, FlowRecord};
use trawl_series::{SeriesConfig, SeriesCounter, SeriesFormat, SeriesRow, SeriesWriter};

use crate::{capture, file_packets, p, run};

/// Captures of several link types, encapsulations and sizes.
const FILES: &[&str] = &[
    "android.pcap",
    "dingtalk.pcap",
    "VlanPackets.pcap",
    "various_gre.pcap",
    "ipv6-frag.pcap",
    "pppoe.pcap",
    "many_interfaces-1.pcapng",
    "anon-v4.pcap.gz",
    "raw_ip.pcap",
];

/// The plain loop: file → meter (+ series) → JSON records and CSV rows, no blocks.
fn plain(path: &Path) -> (Vec<u8>, Vec<u8>) {
    let mut source = FileSource::open(path).unwrap();
    let mut meter = FlowMeter::new(FlowConfig::default());
    let mut series = SeriesCounter::new(SeriesConfig::default());
    let mut writer = RecordWriter::new(RecordFormat::Json, false);
    let series_writer = SeriesWriter::new(SeriesFormat::Csv);
    let (mut flows, mut rows) = (Vec::new(), Vec::new());
    series_writer.write_header(&mut rows);
    let mut scratch: Vec<PacketRecord<'static>> = Vec::new();
    while let Ok(Some(batch)) = source.next_batch() {
        let mut selected = reuse_records(std::mem::take(&mut scratch));
        selected.extend(batch.iter());
        let mut sink = |r: &FlowRecord<'_>| writer.write(r, &mut flows);
        meter.process_batch(&selected, &mut sink, |i, o| {
            let p = &selected[i];
            series.observe(p.ts_ns, p.wire_len, p.direction, o, &mut |r: &SeriesRow| {
                series_writer.write(r, &mut rows)
            });
        });
        scratch = reuse_records(selected);
    }
    meter.flush(&mut |r: &FlowRecord<'_>| writer.write(r, &mut flows));
    series.finish(&mut |r: &SeriesRow| series_writer.write(r, &mut rows));
    (flows, rows)
}

fn meter_composition(file: &Path, out: &Path, split_threads: bool, capacity: usize) -> String {
    let (pool_meter, pool_out) = if split_threads {
        ("b", "c")
    } else {
        ("a", "a")
    };
    format!(
        r#"
        [[pool]]
        name = "a"
        [[pool]]
        name = "b"
        [[pool]]
        name = "c"
        [[block]]
        name = "src"
        type = "pcap_source"
        pool = "a"
        files = ["{file}"]
        batch = 64
        [[block]]
        name = "meter"
        type = "flow_meter"
        pool = "{pool_meter}"
        [[block]]
        name = "flows"
        type = "flow_writer"
        pool = "{pool_out}"
        path = "{flows}"
        mode = "truncate"
        [[block]]
        name = "rows"
        type = "series_writer"
        pool = "{pool_out}"
        path = "{rows}"
        format = "csv"
        mode = "truncate"
        [[connection]]
        from = "src.packets"
        to = "meter.packets"
        capacity = {capacity}
        [[connection]]
        from = "meter.flows"
        to = "flows.flows"
        capacity = {capacity}
        [[connection]]
        from = "meter.series"
        to = "rows.series"
        capacity = {capacity}
        "#,
        file = file.display(),
        flows = p(out, "flows.json"),
        rows = p(out, "series.csv"),
    )
}

#[test]
fn flows_and_series_equal_the_plain_loop_on_one_thread_and_across_threads() {
    let dir = tempfile::tempdir().unwrap();
    let mut records = 0;
    for name in FILES {
        let file = capture(name);
        let (flows, rows) = plain(&file);
        for (split, capacity) in [(false, 1024), (true, 1), (true, 3)] {
            let report = run(&meter_composition(&file, dir.path(), split, capacity));
            let got_flows = std::fs::read(dir.path().join("flows.json")).unwrap();
            let got_rows = std::fs::read(dir.path().join("series.csv")).unwrap();
            assert!(
                got_flows == flows,
                "{name} (threads split: {split}, capacity {capacity}): flow records differ"
            );
            assert!(
                got_rows == rows,
                "{name} (threads split: {split}, capacity {capacity}): series differ"
            );
            let queued = report.connections.iter().filter(|c| c.queued).count();
            assert_eq!(queued, if split { 3 } else { 0 });
            assert!(report.connections.iter().all(|c| c.dropped == 0));
        }
        records += flows.iter().filter(|&&b| b == b'\n').count();
    }
    assert!(records > 100, "only {records} records over the captures");
}

#[test]
fn parallel_chains_merge_their_series_second_by_second() {
    let dir = tempfile::tempdir().unwrap();
    let files = ["android.pcap", "dingtalk.pcap", "anon-v4.pcap.gz"];
    // Expected: every file's own rows, summed per second.
    let mut expected: BTreeMap<u64, SeriesRow> = BTreeMap::new();
    for f in files {
        let (_, rows) = plain(&capture(f));
        let text = String::from_utf8(rows).unwrap();
        for line in text.lines().skip(1) {
            let v: Vec<u64> = line.split(',').map(|x| x.parse().unwrap()).collect();
            let e = expected.entry(v[0]).or_insert(SeriesRow {
                second: v[0],
                ..SeriesRow::default()
            });
            e.packets += v[1];
            e.bytes += v[2];
            e.active_flows += v[3];
            e.new_flows += v[4];
        }
    }
    let mut text =
        String::from("[[pool]]\nname = \"workers\"\nthreads = 3\n[[pool]]\nname = \"out\"\n");
    for (i, f) in files.iter().enumerate() {
        text += &format!(
            "[[block]]\nname = \"src{i}\"\ntype = \"pcap_source\"\npool = \"workers\"\nfiles = [\"{}\"]\n\
             [[block]]\nname = \"meter{i}\"\ntype = \"flow_meter\"\npool = \"workers\"\n\
             [[connection]]\nfrom = \"src{i}.packets\"\nto = \"meter{i}.packets\"\n\
             [[connection]]\nfrom = \"meter{i}.series\"\nto = \"merge.series\"\n",
            capture(f).display()
        );
    }
    text += &format!(
        "[[block]]\nname = \"merge\"\ntype = \"series_merge\"\npool = \"out\"\n\
         [[block]]\nname = \"rows\"\ntype = \"series_writer\"\npool = \"out\"\npath = \"{}\"\nformat = \"csv\"\n\
         [[connection]]\nfrom = \"merge.series\"\nto = \"rows.series\"\n",
        p(dir.path(), "merged.csv")
    );
    let report = run(&text);
    // Three chains on three threads: every meter-to-merge connection is a queue.
    assert_eq!(report.connections.iter().filter(|c| c.queued).count(), 3);
    let got = std::fs::read_to_string(dir.path().join("merged.csv")).unwrap();
    let got: Vec<Vec<u64>> = got
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    let want: Vec<Vec<u64>> = expected
        .values()
        .map(|r| vec![r.second, r.packets, r.bytes, r.active_flows, r.new_flows])
        .collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(&g[..5], &w[..], "second {}", w[0]);
    }
    assert!(
        got.windows(2).all(|w| w[0][0] < w[1][0]),
        "seconds in order, once each"
    );
}

/// An Ethernet/IPv4/TCP SYN.
fn syn_frame(src: Ipv4Addr, dst: Ipv4Addr, sport: u16) -> Vec<u8> {
    let mut f = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&80u16.to_be_bytes());
    f.extend_from_slice(&[
        0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    f
}

/// android.pcap with a flood of `rate` SYN/s for `secs` seconds to `victim`, starting
/// `start_s` after the first packet, written in time order to `out`.
pub fn with_flood(out: &Path, victim: Ipv4Addr, rate: u64, start_s: u64, secs: u64) {
    let mut packets: Vec<(u64, u32, Vec<u8>)> = Vec::new();
    let mut source = FileSource::open(capture("android.pcap")).unwrap();
    while let Ok(Some(b)) = source.next_batch() {
        packets.extend(b.iter().map(|p| (p.ts_ns, p.wire_len, p.data.to_vec())));
    }
    let t0 = packets[0].0;
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..rate * secs {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let frame = syn_frame(Ipv4Addr::from((s >> 32) as u32), victim, (s >> 16) as u16);
        let ts = t0 + start_s * 1_000_000_000 + i * 1_000_000_000 / rate;
        packets.push((ts, frame.len() as u32, frame));
    }
    packets.sort_by_key(|p| p.0);
    let mut w = PcapWriter::new(
        std::io::BufWriter::new(std::fs::File::create(out).unwrap()),
        LinkType::ETHERNET,
        65535,
    )
    .unwrap();
    for (ts, len, data) in &packets {
        w.write(*ts, *len, data).unwrap();
    }
    w.finish().unwrap();
}

fn detect_composition(file: &Path, events: &Path, separate_thread: bool) -> String {
    format!(
        r#"
        [[pool]]
        name = "read"
        [[pool]]
        name = "apps"
        [[block]]
        name = "src"
        type = "pcap_source"
        pool = "read"
        files = ["{file}"]
        [[block]]
        name = "syn"
        type = "synflood"
        pool = "{pool}"
        [[block]]
        name = "heavy"
        type = "heavy_hitters"
        pool = "{pool}"
        interval = "20s"
        top = 5
        [[block]]
        name = "out"
        type = "event_writer"
        pool = "{pool}"
        path = "{events}"
        mode = "truncate"
        [[connection]]
        from = "src.packets"
        to = ["syn.packets", "heavy.packets"]
        [[connection]]
        from = "syn.alarms"
        to = "out.events"
        [[connection]]
        from = "heavy.reports"
        to = "out.events"
        "#,
        file = file.display(),
        events = events.display(),
        pool = if separate_thread { "apps" } else { "read" },
    )
}

/// What the detectors give without blocks, as the JSON lines the event writer prints (SYN
/// events and heavy-hitter reports as they come, in packet order).
fn plain_events(file: &Path) -> Vec<serde_json::Value> {
    let mut syn = SynFloodDetector::new(SynFloodConfig::default());
    let mut heavy = HeavyHitters::new(HeavyConfig {
        interval_ns: 20_000_000_000,
        selection: Selection::Top(5),
        ..HeavyConfig::default()
    });
    let (mut se, mut he) = (Vec::new(), Vec::new());
    let mut source = FileSource::open(file).unwrap();
    while let Ok(Some(b)) = source.next_batch() {
        for pkt in b.iter() {
            syn.observe_packet(&pkt, &mut se);
            heavy.observe_packet(&pkt, &mut he);
        }
    }
    syn.finish(&mut se);
    heavy.finish(&mut he);
    let mut all: Vec<serde_json::Value> = se.iter().map(synflood_json).collect();
    all.extend(he.iter().map(heavy_json));
    all
}

fn sorted(mut v: Vec<serde_json::Value>) -> Vec<String> {
    let mut s: Vec<String> = v.drain(..).map(|j| j.to_string()).collect();
    s.sort();
    s
}

#[test]
fn detectors_find_an_injected_flood_and_equal_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("flood.pcap");
    let victim: Ipv4Addr = "10.66.0.1".parse().unwrap();
    with_flood(&file, victim, 500, 20, 10);
    let want = plain_events(&file);
    for separate in [false, true] {
        let events = dir.path().join("events.jsonl");
        let report = run(&detect_composition(&file, &events, separate));
        let got: Vec<serde_json::Value> = std::fs::read_to_string(&events)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        // The two detectors interleave differently across threads; each one's own order is
        // its packet order.
        assert_eq!(sorted(got.clone()), sorted(want.clone()));
        let floods: Vec<&serde_json::Value> =
            got.iter().filter(|e| e["victim"] == "10.66.0.1").collect();
        assert_eq!(floods.len(), 2, "one start and one end: {floods:?}");
        assert_eq!(floods[0]["event"], "start");
        assert_eq!(floods[1]["event"], "end");
        assert_eq!(
            got.iter().filter(|e| e["victim"].is_string()).count(),
            2,
            "no alarm but the flood"
        );
        // The heavy hitters name the victim as the top host by packets in the flood's
        // interval.
        let top = got
            .iter()
            .filter(|e| e["event"] == "heavy_hitters")
            .map(|e| e["hosts_by_packets"]["items"][0]["item"].clone())
            .collect::<Vec<_>>();
        assert!(top.contains(&serde_json::json!("10.66.0.1")), "{top:?}");
        assert_eq!(report.block("syn").unwrap().counter("alarms"), Some(1));
    }
}

#[test]
fn the_syn_flood_detector_is_silent_on_clean_captures() {
    let dir = tempfile::tempdir().unwrap();
    let events = dir.path().join("events.jsonl");
    for name in FILES {
        run(&detect_composition(&capture(name), &events, true));
        let text = std::fs::read_to_string(&events).unwrap();
        assert!(
            text.lines().all(|l| l.contains("\"heavy_hitters\"")),
            "{name}: {text}"
        );
    }
}

#[test]
fn packet_filter_passes_exactly_what_libpcap_matches() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "android.pcap",
        "dingtalk.pcap",
        "VlanPackets.pcap",
        "ipv6-frag.pcap",
    ] {
        for expr in [
            "tcp",
            "udp and port 53",
            "ip6",
            "vlan and tcp",
            "greater 200",
        ] {
            let file = capture(name);
            // libpcap compiles and runs its own filter: the independent verdict.
            let mut want = 0u64;
            let mut source = FileSource::open(&file).unwrap();
            let link = source.interfaces()[0].link_type;
            // libpcap opens DLT numbers; LINKTYPE_RAW (101) is DLT_RAW (12) on Linux.
            let dlt = if link == LinkType::RAW {
                12
            } else {
                link.0 as i32
            };
            let cap = pcap::Capture::dead(pcap::Linktype(dlt)).unwrap();
            // An expression libpcap cannot compile for this link type (`vlan` on raw IP)
            // matches nothing: trawl counts those packets as rejected.
            if let Ok(program) = cap.compile(expr, true) {
                while let Ok(Some(b)) = source.next_batch() {
                    want += b.iter().filter(|p| program.filter(p.data)).count() as u64;
                }
            }
            let out = p(dir.path(), "filtered.pcap");
            let report = run(&format!(
                r#"
                [[block]]
                name = "src"
                type = "pcap_source"
                files = ["{}"]
                [[block]]
                name = "f"
                type = "packet_filter"
                expr = "{expr}"
                [[block]]
                name = "n"
                type = "count"
                [[block]]
                name = "w"
                type = "pcap_writer"
                path = "{out}"
                [[connection]]
                from = "src.packets"
                to = "f.packets"
                [[connection]]
                from = "f.packets"
                to = ["n.in", "w.packets"]
                "#,
                file.display()
            ));
            let n = report.block("n").unwrap().counter("items").unwrap();
            assert_eq!(n, want, "{name}: `{expr}`");
            let rejected = report.block("f").unwrap().counter("rejected").unwrap();
            let total = report.block("src").unwrap().counter("packets").unwrap();
            assert_eq!(n + rejected, total);
            // What the writer wrote reads back as the same number of packets.
            if want > 0 {
                let mut back = FileSource::open(&out).unwrap();
                let mut count = 0;
                while let Ok(Some(b)) = back.next_batch() {
                    count += b.len() as u64;
                }
                assert_eq!(count, want);
            }
        }
    }
}

/// Writes the packets of `input` alternately into two pcap files (odd and even frames), as two
/// taps split one link between them.
fn split_odd_even(input: &Path, odd: &Path, even: &Path) {
    let mut source = FileSource::open(input).unwrap();
    let link = source.interfaces()[0].link_type;
    let create = |p: &Path| {
        PcapWriter::new(
            std::io::BufWriter::new(std::fs::File::create(p).unwrap()),
            link,
            262_144,
        )
        .unwrap()
    };
    let (mut w_odd, mut w_even) = (create(odd), create(even));
    let mut n = 0u64;
    while let Some(b) = source.next_batch().unwrap() {
        for p in b.iter() {
            n += 1;
            let w = if n % 2 == 1 { &mut w_odd } else { &mut w_even };
            w.write(p.ts_ns, p.wire_len, p.data).unwrap();
        }
    }
    w_odd.finish().unwrap();
    w_even.finish().unwrap();
}

fn copy_composition(files: &[&Path], concatenate: bool, filter: &str, out: &Path) -> String {
    let list: Vec<String> = files
        .iter()
        .map(|f| format!("\"{}\"", f.display()))
        .collect();
    let filter = if filter.is_empty() {
        String::new()
    } else {
        format!("filter = \"{filter}\"")
    };
    format!(
        r#"
        [[block]]
        name = "src"
        type = "pcap_source"
        files = [{list}]
        concatenate = {concatenate}
        batch = 50
        {filter}
        [[block]]
        name = "out"
        type = "pcap_writer"
        path = "{out}"
        [[connection]]
        from = "src.packets"
        to = "out.packets"
        "#,
        list = list.join(", "),
        out = out.display(),
    )
}

/// Several files are merged by packet time, exactly as Wireshark's mergecap merges them (the
/// independent oracle); with `concatenate` they are read one after the other.
#[test]
fn several_files_merge_by_packet_time_as_mergecap_does() {
    let dir = tempfile::tempdir().unwrap();
    let (odd, even) = (dir.path().join("odd.pcap"), dir.path().join("even.pcap"));
    split_odd_even(&capture("android.pcap"), &odd, &even);
    // On equal times mergecap takes the file named last, pcap_source the file named first.
    let oracle = dir.path().join("mergecap.pcap");
    let status = std::process::Command::new("mergecap")
        .args(["-F", "pcap", "-w"])
        .arg(&oracle)
        .args([&even, &odd])
        .status()
        .expect("mergecap is required (scripts/deps.sh installs wireshark-common)");
    assert!(status.success());

    let merged = dir.path().join("merged.pcap");
    let report = run(&copy_composition(&[&odd, &even], false, "", &merged));
    let want = file_packets(&oracle);
    let got = file_packets(&merged);
    assert!(want.len() > 100);
    assert_eq!(got.len(), want.len());
    assert!(got == want, "merged packets differ from mergecap's");
    let src = report.block("src").unwrap();
    assert_eq!(src.counter("files"), Some(2));
    assert_eq!(src.counter("packets"), Some(want.len() as u64));

    let concatenated = dir.path().join("concatenated.pcap");
    run(&copy_composition(&[&odd, &even], true, "", &concatenated));
    let mut expected = file_packets(&odd);
    expected.extend(file_packets(&even));
    assert!(file_packets(&concatenated) == expected);
    assert!(expected != want, "the split must interleave in time");

    // The filter applies to the merged stream as to the mergecap file.
    let udp = dir.path().join("udp.pcap");
    let report = run(&copy_composition(&[&odd, &even], false, "udp", &udp));
    let mut f = trawl_bpf::FilterSet::new_for("udp", 262_144, trawl_bpf::ByteOrder::Little);
    let want_udp: Vec<_> = want
        .iter()
        .filter(|(_, p)| {
            f.matches(trawl_capture::LinkType::ETHERNET, &p.data, p.wire_len)
                .unwrap()
        })
        .cloned()
        .collect();
    assert!(!want_udp.is_empty() && want_udp.len() < want.len());
    assert!(file_packets(&udp) == want_udp);
    let rejected = report.block("src").unwrap().counter("filter_rejected");
    assert_eq!(rejected, Some((want.len() - want_udp.len()) as u64));
}

/// `pcap_source` as the file commands run it (issue 19): a file that cannot be opened is
/// counted and named, not fatal (`skip_unreadable`); the filter is compiled for each file, and
/// a file of a link type it cannot apply to is a warning naming that file, while the packets of
/// the other file are filtered as usual; the readers' counters add up.
#[test]
fn pcap_source_counts_unreadable_files_and_warns_per_file_of_a_filter_that_cannot_apply() {
    let dir = tempfile::tempdir().unwrap();
    let (raw, ether) = (capture("raw_ip.pcap"), capture("android.pcap"));
    let missing = dir.path().join("missing.pcap");
    let text = format!(
        r#"
        [[block]]
        name = "src"
        type = "pcap_source"
        files = ["{}", "{}", "{}"]
        filter = "ether src host 00:11:22:33:44:55 or tcp"
        skip_unreadable = true
        [[block]]
        name = "per_file_filter"
        type = "collect"
        [[connection]]
        from = "src.packets"
        to = "per_file_filter.in"
        "#,
        raw.display(),
        ether.display(),
        missing.display()
    );
    let report = run(&text);
    let src = report.block("src").unwrap();
    let c = |n: &str| src.counter(n).unwrap();
    assert_eq!((c("files"), c("files_failed")), (2, 1));
    let errors: Vec<&str> = src
        .messages
        .iter()
        .filter(|m| m.kind == trawl_compose::MessageKind::Error)
        .map(|m| m.text.as_str())
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("missing.pcap"), "{errors:?}");
    let warnings: Vec<&str> = src
        .messages
        .iter()
        .filter(|m| m.kind == trawl_compose::MessageKind::Warning)
        .map(|m| m.text.as_str())
        .collect();
    assert!(!warnings.is_empty());
    for w in &warnings {
        assert!(
            w.contains("raw_ip.pcap") && w.contains("never match"),
            "{w}"
        );
    }
    // Every packet of both files was read; the Ethernet file's TCP packets passed.
    let total = (file_packets(&raw).len() + file_packets(&ether).len()) as u64;
    assert_eq!(c("records"), total);
    let mut tcp = trawl_bpf::FilterSet::new_for(
        "ether src host 00:11:22:33:44:55 or tcp",
        trawl_capture::MAX_SNAPLEN,
        trawl_bpf::ByteOrder::Little,
    );
    let want = file_packets(&ether)
        .iter()
        .filter(|(_, p)| {
            tcp.matches(LinkType::ETHERNET, &p.data, p.wire_len)
                .unwrap()
        })
        .count() as u64;
    assert!(want > 0);
    assert_eq!(c("packets"), want);
    assert_eq!(
        crate::collected("per_file_filter").packets.len() as u64,
        want
    );
    assert_eq!(c("filter_rejected"), total - want);
}

/// A pcapng block of `btype` with `body` (little-endian).
fn pcapng_block(btype: u32, body: &[u8]) -> Vec<u8> {
    let len = (12 + body.len()) as u32;
    let mut b = btype.to_le_bytes().to_vec();
    b.extend_from_slice(&len.to_le_bytes());
    b.extend_from_slice(body);
    b.extend_from_slice(&len.to_le_bytes());
    b
}

/// Blocks of a pcapng file that hold no packet (here: a file with none at all) are counted
/// in `skipped_blocks` even when no batch of packets follows them, as the CLI's own reader
/// counted them (`trawl flows -r ... --payload-bytes` moved onto `pcap_source`, issue 19,
/// said 0 where it had said 1).
#[test]
fn pcap_source_counts_skipped_blocks_of_a_file_without_packets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no-packets.pcapng");
    let mut shb = 0x1A2B_3C4Du32.to_le_bytes().to_vec();
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&(-1i64).to_le_bytes());
    let mut idb = 1u16.to_le_bytes().to_vec();
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&65_535u32.to_le_bytes());
    let mut file = pcapng_block(0x0A0D_0D0A, &shb);
    file.extend(pcapng_block(1, &idb));
    // An unknown block type, skipped.
    file.extend(pcapng_block(0x0000_0BAD, &[0; 4]));
    std::fs::write(&path, &file).unwrap();
    let text = format!(
        r#"
        [[block]]
        name = "src"
        type = "pcap_source"
        files = ["{}"]
        [[block]]
        name = "skipped_blocks_sink"
        type = "collect"
        [[connection]]
        from = "src.packets"
        to = "skipped_blocks_sink.in"
        "#,
        path.display()
    );
    let report = run(&text);
    let src = report.block("src").unwrap();
    assert_eq!(src.counter("records"), Some(0));
    assert_eq!(src.counter("skipped_blocks"), Some(1));
}
