//! Issue 20, the probe as a service: what a monitor serves while it runs (each interface's
//! live series; queries that time out stop scanning) and what it stores.
use std::process::Command;
use std::time::{Duration, Instant};

use crate::api::Served;

/// A GET with curl: the status and the body.
fn get(url: &str) -> (u16, Vec<u8>) {
    crate::api::get(url, &[])
}

fn get_json(url: &str) -> serde_json::Value {
    let (code, body) = get(url);
    assert_eq!(code, 200, "{url}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap_or_else(|e| panic!("{url}: not JSON: {e}"))
}

fn trawl_ok(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .output()
        .expect("run trawl");
    assert!(
        out.status.success(),
        "trawl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The packets of an answer's rows.
fn packets(rows: &[serde_json::Value]) -> u64 {
    rows.iter().map(|r| r["packets"].as_u64().unwrap()).sum()
}

/// Issue 20: a monitor of two interfaces serves each one's own live rows in
/// `/api/v1/series` (`iface=` selects one; without it, each interface's rows, not their sum),
/// and they are the rows it stores for that interface.
#[test]
fn issue_20_live_series_of_two_interfaces_are_each_ones_own_and_the_stored_ones() {
    let (a, b) = (crate::live::lab(), crate::live::lab());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let served = Served::start_with(
        Command::new(env!("CARGO_BIN_EXE_trawl")).args([
            "run",
            "-i",
            &a.host,
            "-i",
            &b.host,
            "--no-ring",
            "--db",
            db.to_str().unwrap(),
            "--api",
            "127.0.0.1:0",
            "--duration",
            "60s",
        ]),
        "HTTP API on ",
        "http://",
    );
    let file = crate::live::pcap("android.pcap");
    assert_eq!(a.replay_into_host(&file, &["--topspeed"]).unwrap(), 500);
    assert_eq!(
        b.replay_into_host(&file, &["--topspeed", "--limit", "200"])
            .unwrap(),
        200
    );
    let rows_of = |query: &str| -> Vec<serde_json::Value> {
        get_json(&served.url(&format!("/api/v1/series{query}")))["rows"]
            .as_array()
            .unwrap()
            .clone()
    };
    // Without `iface`: both interfaces' rows, each under its name. A second's row comes while
    // flows stay active after the traffic, so the three answers are asked again until no
    // second ticked between them.
    let named = |all: &[serde_json::Value], host: &str| -> Vec<serde_json::Value> {
        all.iter().filter(|r| r["iface"] == host).cloned().collect()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let (rows_a, rows_b) = loop {
        let (ra, rb) = (
            rows_of(&format!("?iface={}", a.host)),
            rows_of(&format!("?iface={}", b.host)),
        );
        let all = rows_of("");
        let counted = packets(&ra) == 500 && packets(&rb) == 200;
        if counted && named(&all, &a.host) == ra && named(&all, &b.host) == rb {
            assert_eq!(all.len(), ra.len() + rb.len(), "{all:?}");
            break (ra, rb);
        }
        assert!(
            Instant::now() < deadline,
            "{} and {} packets in the rows of {} and {}, {} and {} rows of them among all: {all:?}",
            packets(&ra),
            packets(&rb),
            a.host,
            b.host,
            named(&all, &a.host).len(),
            named(&all, &b.host).len(),
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(rows_a.iter().all(|r| r["iface"] == a.host.as_str()));
    assert!(rows_b.iter().all(|r| r["iface"] == b.host.as_str()));
    let (status, stderr) = served.stop();
    assert!(status.success(), "{stderr}");
    // Each interface's live rows are the rows stored for it.
    for (host, live) in [(&a.host, &rows_a), (&b.host, &rows_b)] {
        let stored: Vec<serde_json::Value> = trawl_ok(&[
            "series",
            "-d",
            db.to_str().unwrap(),
            "-i",
            host,
            "--format",
            "json",
        ])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
        assert!(!live.is_empty());
        for row in live {
            let mut r = row.clone();
            let o = r.as_object_mut().unwrap();
            o.remove("iface");
            assert_eq!(o.remove("source").unwrap(), "live");
            assert!(stored.contains(&r), "{host}: {r} is not stored: {stored:?}");
        }
    }
}

/// A flow database of `links` + 1 five-minute blocks of `rows` rows each: one block written
/// through `Ingest`, the others hard links to it under the names of the blocks after it (the
/// scan reads each as a block of its own; no disk for the copies).
fn big_db(db: &std::path::Path, rows: u64, links: u64) -> u64 {
    use trawl_store::layout::{block_file_name, day_dir, Date};
    use trawl_store::{Ingest, StoreConfig, StoredFlow, BLOCK_NS};
    const T0: u64 = 1_763_251_200 * 1_000_000_000;
    let mut ing = Ingest::open(db, StoreConfig::default()).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    for i in 0..rows {
        let row = StoredFlow {
            src_ip: std::net::IpAddr::from([10, (i >> 16) as u8, (i >> 8) as u8, i as u8]),
            dst_ip: std::net::IpAddr::from([192, 0, 2, (i % 251) as u8]),
            src_port: 1024 + (i % 50_000) as u16,
            dst_port: [443, 80, 53, 8080][(i % 4) as usize],
            proto: 6,
            vlan: 0,
            first_ns: T0 + i,
            last_ns: T0 + i + 10,
            fwd_packets: 1 + i % 13,
            rev_packets: i % 7,
            fwd_bytes: 60 + i % 1500,
            rev_bytes: 40 * (i % 7),
            fwd_ip_bytes: 0,
            rev_ip_bytes: 0,
            fwd_tcp_flags: 0,
            rev_tcp_flags: 0,
            end_reason: trawl_flow::EndReason::Idle,
            app: None,
            extra: Default::default(),
        };
        ing.push_row(eth0, row).unwrap();
    }
    ing.finish().unwrap();
    let path_of = |t: u64| day_dir(db, "eth0", Date::of(t)).join(block_file_name(t, 0));
    let first = path_of(T0);
    assert!(first.is_file(), "{} not written", first.display());
    for k in 1..=links {
        let t = T0 + k * BLOCK_NS;
        let p = path_of(t);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::hard_link(&first, &p).unwrap();
    }
    links + 1
}

/// The `scans` counters of `/api/v1/status`.
fn scans(served: &Served) -> serde_json::Value {
    get_json(&served.url("/api/v1/status"))["scans"].clone()
}

/// Issue 20: a query past `--api-query-timeout` is answered 503 and its scan stops: the
/// API's scan counters show no scan running within a moment of the answer, and the blocks
/// scanned stop growing, far short of the database's (before, the scan went on to its end on
/// the server's threads).
#[test]
fn issue_20_a_query_past_its_timeout_stops_scanning() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    // 200 M rows: minutes of scanning for a debug build, seconds for a release one; the
    // timeout is 1 s.
    let blocks = big_db(&db, 100_000, 1999);
    let served = Served::start_with(
        Command::new(env!("CARGO_BIN_EXE_trawl")).args([
            "serve",
            "-d",
            db.to_str().unwrap(),
            "--api",
            "127.0.0.1:0",
            "--api-query-timeout",
            "1",
        ]),
        "serving on ",
        "",
    );
    let asked = Instant::now();
    let (code, body) = get(&served.url("/api/v1/query?attrs=sip,dip,dport&limit=5"));
    let answered = asked.elapsed();
    assert_eq!(code, 503, "{}", String::from_utf8_lossy(&body));
    assert!(answered < Duration::from_secs(10), "{answered:?}");
    // The scan notices within a row group's decoding.
    let deadline = Instant::now() + Duration::from_secs(5);
    let stopped = loop {
        let s = scans(&served);
        if s["running"] == 0 {
            break s;
        }
        assert!(Instant::now() < deadline, "still scanning: {s}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(stopped["started"], 1, "{stopped}");
    assert_eq!(stopped["timed_out"], 1, "{stopped}");
    assert_eq!(stopped["cancelled"], 1, "{stopped}");
    let done = stopped["blocks"].as_u64().unwrap();
    assert!(
        done < blocks,
        "{done} of {blocks} blocks: the scan was not cut short"
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert_eq!(
        scans(&served)["blocks"].as_u64(),
        Some(done),
        "blocks still scanned"
    );
    let (code, metrics) = get(&served.url("/metrics"));
    assert_eq!(code, 200);
    let metrics = String::from_utf8(metrics).unwrap();
    for line in [
        "trawl_api_scans_running 0",
        "trawl_api_scans_cancelled_total 1",
        "trawl_api_queries_timed_out_total 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} not in\n{metrics}"
        );
    }
    let (status, stderr) = served.stop();
    assert!(status.success(), "{stderr}");
}

/// The three senders of [`bot_flood`], by their share of its SYNs (40, 25, 15 %).
const BOTS: [[u8; 4]; 3] = [[203, 0, 113, 1], [203, 0, 113, 2], [203, 0, 113, 3]];

/// android.pcap plus 400 SYN/s to 10.9.9.9:80 for 6 s from 20 s in: 80 % from the three
/// [`BOTS`], the rest from a new spoofed source each. Written to `dir/bots.pcap`.
fn bot_flood(dir: &std::path::Path) -> std::path::PathBuf {
    use trawl_capture::{FileSource, LinkType, PacketSource, PcapWriter};
    let syn = |src: [u8; 4], sport: u16| {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
        f.extend_from_slice(&[0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&[10, 9, 9, 9]);
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&[
            0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
        ]);
        f
    };
    let mut source = FileSource::open(crate::live::pcap("android.pcap")).expect("open");
    let mut packets = Vec::new();
    while let Some(batch) = source.next_batch().expect("read") {
        packets.extend(batch.iter().map(|p| (p.ts_ns, p.data.to_vec())));
    }
    let start = packets[0].0 + 20_000_000_000;
    for i in 0..2400u32 {
        let src = match i % 20 {
            0..=7 => BOTS[0],
            8..=12 => BOTS[1],
            13..=15 => BOTS[2],
            _ => (0x0b00_0000 + i).to_be_bytes(),
        };
        packets.push((start + u64::from(i) * 2_500_000, syn(src, i as u16)));
    }
    packets.sort_by_key(|p| p.0);
    let path = dir.join("bots.pcap");
    let file = std::fs::File::create(&path).expect("create");
    let mut w =
        PcapWriter::new(std::io::BufWriter::new(file), LinkType::ETHERNET, 65535).expect("writer");
    for (ts, data) in &packets {
        w.write(*ts, data.len() as u32, data).expect("write");
    }
    w.finish().expect("flush");
    path
}

/// Issue 20: a SYN flood's alarm names its top sources at its end, the flood's senders first
/// (largest first), in `trawl detect`'s event, in the stored alarm and in `trawl alarms`.
#[test]
fn issue_20_a_flood_alarm_names_its_top_sources_senders_first() {
    let dir = tempfile::tempdir().unwrap();
    let capture = bot_flood(dir.path());
    let capture = capture.to_str().unwrap();
    let events: Vec<serde_json::Value> = trawl_ok(&["detect", "synflood", "-r", capture])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let end = events
        .iter()
        .find(|e| e["event"] == "end")
        .unwrap_or_else(|| panic!("no end: {events:?}"));
    assert_eq!(end["victim"], "10.9.9.9");
    let sources = end["top_sources"].as_array().expect("top_sources");
    let named: Vec<&str> = sources.iter().map(|s| s["ip"].as_str().unwrap()).collect();
    let bots: Vec<String> = BOTS
        .iter()
        .map(|b| std::net::Ipv4Addr::from(*b).to_string())
        .collect();
    assert_eq!(named[..3], bots[..], "{sources:?}");
    let syns: Vec<u64> = sources
        .iter()
        .map(|s| s["syns"].as_u64().unwrap())
        .collect();
    assert!(syns.windows(2).all(|w| w[0] >= w[1]), "{syns:?}");
    // The bots' counts: their share of the SYNs the alarm lasted (at most the whole flood).
    assert!(syns[0] <= 960 + 40 && syns[0] >= 600, "{syns:?}");
    // Stored by an alarm_store, shown by `trawl alarms`.
    let db = dir.path().join("db");
    let comp = dir.path().join("syn.toml");
    std::fs::write(
        &comp,
        format!(
            "[[block]]\nname = \"files\"\ntype = \"pcap_source\"\nfiles = [\"{capture}\"]\n\
             [[block]]\nname = \"syn\"\ntype = \"synflood\"\n\
             [[block]]\nname = \"alarms\"\ntype = \"alarm_store\"\ndir = \"{}\"\niface = \"tap0\"\n\
             [[connection]]\nfrom = \"files.packets\"\nto = \"syn.packets\"\n\
             [[connection]]\nfrom = \"syn.alarms\"\nto = \"alarms.events\"\n",
            db.display()
        ),
    )
    .unwrap();
    trawl_ok(&["run", "-c", comp.to_str().unwrap(), "--summary", "none"]);
    let stored: Vec<serde_json::Value> =
        trawl_ok(&["alarms", "-d", db.to_str().unwrap(), "--format", "json"])
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    let stored_end = stored
        .iter()
        .find(|a| a["end_ns"].is_u64())
        .unwrap_or_else(|| panic!("{stored:?}"));
    assert_eq!(stored_end["event"], *end);
    let table = trawl_ok(&["alarms", "-d", db.to_str().unwrap()]);
    let cause = format!("victim 10.9.9.9 from {}", bots.join(" "));
    assert!(table.contains(&cause), "{cause} not in\n{table}");
}

/// The stored alarms of `db` as JSON (`trawl alarms --format json`).
fn stored_alarms(db: &std::path::Path) -> Vec<serde_json::Value> {
    trawl_ok(&["alarms", "-d", db.to_str().unwrap(), "--format", "json"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Issue 20: `trawl ingest` runs the packet detectors of `trawl run --db` and stores their
/// alarms: the SYN-flood alarms are `trawl detect synflood`'s events, the heavy hitters
/// `trawl detect heavy-hitters --interval 1m`'s reports (the monitor's interval);
/// `--no-synflood --no-heavy-hitters` leave them out.
#[test]
fn issue_20_ingest_stores_the_alarms_of_the_packet_detectors() {
    let dir = tempfile::tempdir().unwrap();
    let capture = bot_flood(dir.path());
    let capture = capture.to_str().unwrap();
    let db = dir.path().join("db");
    let ingest = |db: &std::path::Path, extra: &[&str]| {
        let mut args = vec!["ingest", "-r", capture, "-d", db.to_str().unwrap()];
        args.extend_from_slice(&["-i", "lab0", "--summary", "none"]);
        args.extend_from_slice(extra);
        trawl_ok(&args);
    };
    ingest(&db, &[]);
    let lines = |text: String| -> Vec<serde_json::Value> {
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    let syn = lines(trawl_ok(&["detect", "synflood", "-r", capture]));
    let heavy = lines(trawl_ok(&[
        "detect",
        "heavy-hitters",
        "-r",
        capture,
        "--interval",
        "1m",
    ]));
    assert_eq!(syn.len(), 2, "{syn:?}");
    assert!(!heavy.is_empty());
    let stored = stored_alarms(&db);
    let of = |detector: &str| -> Vec<serde_json::Value> {
        stored
            .iter()
            .filter(|a| a["detector"] == detector)
            .map(|a| {
                assert_eq!(a["iface"], "lab0", "{a}");
                a["event"].clone()
            })
            .collect()
    };
    assert_eq!(of("synflood"), syn);
    assert_eq!(of("heavy_hitters"), heavy);
    // Turned off: neither detector's alarms.
    let off = dir.path().join("off");
    ingest(&off, &["--no-synflood", "--no-heavy-hitters"]);
    let left = stored_alarms(&off);
    assert!(
        left.iter().all(|a| a["detector"] == "series_change"),
        "{left:?}"
    );
}

/// Issue 20: `trawl collect --db` stores per-second series of the collected records, per
/// exporter interface: each record's packets and bytes spread evenly over its seconds (the
/// remainder to its first seconds), active in each, new in the first. The stored rows equal
/// that spread recomputed here from the records `trawl collect` prints, and sum to them.
#[test]
fn issue_20_collect_stores_the_series_of_the_collected_records() {
    let dir = tempfile::tempdir().unwrap();
    let ipfix = dir.path().join("flows.ipfix");
    let capture = crate::live::pcap("android.pcap");
    trawl_ok(&[
        "flows",
        "-r",
        capture.to_str().unwrap(),
        "--summary",
        "none",
        "-o",
        "/dev/null",
        "--export",
        &format!("ipfix:{}", ipfix.display()),
    ]);
    let ipfix = ipfix.to_str().unwrap();
    let records: Vec<serde_json::Value> = trawl_ok(&["collect", "-r", ipfix, "--summary", "none"])
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(records.len() > 10);
    let db = dir.path().join("db");
    trawl_ok(&[
        "collect",
        "-r",
        ipfix,
        "--no-output",
        "--summary",
        "none",
        "--db",
        db.to_str().unwrap(),
        "-i",
        "exp1",
    ]);
    // The spread, recomputed: second -> [packets, bytes, active, new].
    let mut want: std::collections::BTreeMap<u64, [u64; 4]> = Default::default();
    let u = |r: &serde_json::Value, k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k}: {r}"));
    for r in &records {
        let (first, last) = (
            u(r, "first_ns") / 1_000_000_000,
            u(r, "last_ns") / 1_000_000_000,
        );
        let n = last - first + 1;
        let packets = u(r, "fwd_packets") + u(r, "rev_packets");
        let bytes = u(r, "fwd_bytes") + u(r, "rev_bytes");
        for (i, s) in (first..=last).enumerate() {
            let i = i as u64;
            let e = want.entry(s).or_default();
            e[0] += packets / n + u64::from(i < packets % n);
            e[1] += bytes / n + u64::from(i < bytes % n);
            e[2] += 1;
            e[3] += u64::from(i == 0);
        }
    }
    let stored: std::collections::BTreeMap<u64, [u64; 4]> = trawl_ok(&[
        "series",
        "-d",
        db.to_str().unwrap(),
        "-i",
        "exp1",
        "--format",
        "json",
    ])
    .lines()
    .map(|l| {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        assert_eq!((u(&r, "in_packets"), u(&r, "out_packets")), (0, 0), "{r}");
        (
            u(&r, "second"),
            [
                u(&r, "packets"),
                u(&r, "bytes"),
                u(&r, "active_flows"),
                u(&r, "new_flows"),
            ],
        )
    })
    .collect();
    assert_eq!(stored, want);
    let total = |k: &str| -> u64 { records.iter().map(|r| u(r, k)).sum() };
    let stored_packets: u64 = stored.values().map(|v| v[0]).sum();
    assert_eq!(stored_packets, total("fwd_packets") + total("rev_packets"));
    let stored_bytes: u64 = stored.values().map(|v| v[1]).sum();
    assert_eq!(stored_bytes, total("fwd_bytes") + total("rev_bytes"));
    // The minute rollups are the sums of those seconds.
    let minutes: u64 = trawl_ok(&[
        "series",
        "-d",
        db.to_str().unwrap(),
        "-i",
        "exp1",
        "--step",
        "1m",
        "--format",
        "json",
    ])
    .lines()
    .map(|l| u(&serde_json::from_str(l).unwrap(), "packets"))
    .sum();
    assert_eq!(minutes, stored_packets);
}
