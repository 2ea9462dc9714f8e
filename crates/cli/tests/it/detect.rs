//! `trawl detect synflood` end to end: clean capture silent, an injected flood reported.
use std::process::Command;

use trawl_capture::{FileSource, LinkType, PacketSource, PcapWriter};

use super::{summary, testdata, trawl};

/// Ethernet / IPv4 / TCP SYN from `src` to `dst`:80 (checksums 0: not verified).
fn syn_frame(src: [u8; 4], dst: [u8; 4], sport: u16) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[
        0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0,
    ]);
    f
}

/// android.pcap (Ethernet, 25 real SYNs over 102 s) plus 400 SYN/s to 10.9.9.9 for 6 s
/// from 20 s in, written as one capture `dir/flood.pcap`; its path and the flood's start.
pub(crate) fn flood_capture(dir: &std::path::Path) -> (std::path::PathBuf, u64) {
    let mut source = FileSource::open(testdata("pcaps/android.pcap")).expect("open");
    let mut packets = Vec::new();
    while let Some(batch) = source.next_batch().expect("read") {
        for p in batch.iter() {
            assert_eq!(p.link_type, LinkType::ETHERNET);
            packets.push((p.ts_ns, p.data.to_vec()));
        }
    }
    let t0 = packets[0].0;
    let flood_start = t0 + 20_000_000_000;
    for i in 0..2400u64 {
        let src = (0x0b00_0000u32 + i as u32).to_be_bytes();
        packets.push((
            flood_start + i * 2_500_000,
            syn_frame(src, [10, 9, 9, 9], i as u16),
        ));
    }
    packets.sort_by_key(|p| p.0);
    let path = dir.join("flood.pcap");
    let file = std::fs::File::create(&path).expect("create");
    let mut w =
        PcapWriter::new(std::io::BufWriter::new(file), LinkType::ETHERNET, 65535).expect("writer");
    for (ts, data) in &packets {
        w.write(*ts, data.len() as u32, data).expect("write");
    }
    w.finish().expect("flush");
    (path, flood_start)
}

#[test]
fn detect_synflood_reports_injected_flood_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (path, flood_start) = flood_capture(dir.path());
    let run = |file: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
            .args(["detect", "synflood", "-r", file])
            .output()
            .expect("run trawl");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).expect("JSON line"))
            .collect();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let summary: serde_json::Value =
            serde_json::from_str(stderr.lines().last().unwrap_or_default()).expect("summary");
        (lines, summary)
    };

    let (clean, summary) = run(&testdata("pcaps/android.pcap"));
    assert!(clean.is_empty(), "{clean:?}");
    assert_eq!(summary["syns"], 25);

    let (events, summary) = run(path.to_str().unwrap());
    assert_eq!(summary["syns"], 2425);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["event"], "start");
    assert_eq!(events[0]["victim"], "10.9.9.9");
    let detected = events[0]["detected_ns"].as_u64().unwrap();
    assert!(detected > flood_start && detected - flood_start <= 2_000_000_000);
    assert_eq!(events[1]["event"], "end");
    assert_eq!(events[1]["victim"], "10.9.9.9");
    assert_eq!(events[1]["peak_rate"].as_f64(), Some(400.0));
    assert_eq!(summary["active_at_end"], serde_json::json!([]));
}

#[test]
fn heavy_hitters_count_every_keyed_packet_once_per_flow_and_twice_per_host() {
    let sample = testdata("pcaps/android.pcap");
    let out = trawl(&[
        "detect",
        "heavy-hitters",
        "-r",
        &sample,
        "--interval",
        "30s",
        "--top",
        "3",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reports: Vec<serde_json::Value> = String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let s = summary(&out);
    assert_eq!(s["events"].as_u64().unwrap(), reports.len() as u64);
    assert!(reports.len() >= 3, "{} reports over 100 s", reports.len());
    let flows = trawl(&["flows", "-r", &sample, "--summary", "json"]);
    let d = &summary(&flows)["decode"];
    let keyed = d["ok"].as_u64().unwrap()
        + d["transport_incomplete"].as_u64().unwrap()
        + d["fragment"].as_u64().unwrap();
    let total = |key: &str| -> u64 {
        reports
            .iter()
            .map(|r| r[key]["total"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(total("flows_by_packets"), keyed);
    assert_eq!(total("hosts_by_packets"), 2 * keyed);
    for r in &reports {
        assert_eq!(r["event"], "heavy_hitters");
        assert!(r["start_ns"].as_u64() < r["end_ns"].as_u64());
        for key in ["flows_by_bytes", "hosts_by_packets"] {
            let items = r[key]["items"].as_array().unwrap();
            assert!(items.len() <= 3);
            let counts: Vec<u64> = items.iter().map(|i| i["count"].as_u64().unwrap()).collect();
            assert!(
                counts.windows(2).all(|w| w[0] >= w[1]),
                "largest first: {counts:?}"
            );
        }
    }
    // The phone (192.168.2.16 in its busiest interval) tops the hosts of the interval with
    // the most packets.
    let busiest = reports
        .iter()
        .max_by_key(|r| r["hosts_by_packets"]["total"].as_u64())
        .unwrap();
    assert_eq!(
        busiest["hosts_by_packets"]["items"][0]["item"],
        "192.168.2.16"
    );
    let bad = trawl(&[
        "detect",
        "heavy-hitters",
        "-r",
        &sample,
        "--top",
        "3",
        "--min-bytes",
        "9",
    ]);
    assert_eq!(bad.status.code(), Some(2));
}

/// A pseudo-random SYN flood of `rate` SYN/s for `secs` s from `start_s` s into android.pcap
/// (to `victim`:80), written to `out`.
pub(crate) fn with_flood(
    out: &std::path::Path,
    victim: [u8; 4],
    rate: u64,
    start_s: u64,
    secs: u64,
) {
    let mut source = FileSource::open(testdata("pcaps/android.pcap")).expect("open");
    let mut packets = Vec::new();
    while let Some(batch) = source.next_batch().expect("read") {
        packets.extend(batch.iter().map(|p| (p.ts_ns, p.data.to_vec())));
    }
    let t0 = packets[0].0;
    let mut s = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..rate * secs {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let src = ((s >> 32) as u32).to_be_bytes();
        let ts = t0 + start_s * 1_000_000_000 + i * 1_000_000_000 / rate;
        packets.push((ts, syn_frame(src, victim, (s >> 16) as u16)));
    }
    packets.sort_by_key(|p| p.0);
    let file = std::fs::File::create(out).expect("create");
    let mut w =
        PcapWriter::new(std::io::BufWriter::new(file), LinkType::ETHERNET, 65535).expect("writer");
    for (ts, data) in &packets {
        w.write(*ts, data.len() as u32, data).expect("write");
    }
    w.finish().expect("flush");
}

#[test]
fn detect_gives_the_same_events_live_and_over_the_captured_file() {
    // Issue 19: `trawl detect -i IFACE` runs the detectors on live capture (afpacket_source
    // as `trawl run -i` builds it). A flood replayed into a veth pair at 20 times its speed
    // (2 s in, half a second at 10,000 SYN/s) is seen by both detectors live and by a third
    // process that keeps the packets; `trawl detect -r` of what it kept gives the same events.
    let dir = tempfile::tempdir().expect("tempdir");
    let flood = dir.path().join("flood.pcap");
    with_flood(&flood, [10, 66, 0, 1], 500, 40, 10);
    let lab = crate::live::lab();
    let captured = dir.path().join("captured.pcap");
    let keep = dir.path().join("keep.toml");
    std::fs::write(
        &keep,
        format!(
            "[[block]]\nname = \"cap\"\ntype = \"afpacket_source\"\ninterface = \"{}\"\n\
             [[block]]\nname = \"keep\"\ntype = \"pcap_writer\"\npath = \"{}\"\n\
             [[connection]]\nfrom = \"cap.packets\"\nto = \"keep.packets\"\n",
            lab.host,
            captured.display()
        ),
    )
    .unwrap();
    let syn = ["synflood", "--interval", "200ms"];
    let heavy = ["heavy-hitters", "--interval", "1s", "--top", "3"];
    let spawn = |args: Vec<&str>| {
        std::process::Command::new(env!("CARGO_BIN_EXE_trawl"))
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run trawl")
    };
    let live = |app: &[&'static str]| {
        let mut args = vec!["detect"];
        args.extend_from_slice(app);
        args.extend(["-i", lab.host.as_str()]);
        spawn(args)
    };
    let children = [
        spawn(vec!["run", "-c", keep.to_str().unwrap()]),
        live(&syn),
        live(&heavy),
    ];
    std::thread::sleep(std::time::Duration::from_millis(1000));
    let sent = lab
        .replay_into_host(&flood, &["--multiplier", "20"])
        .expect("tcpreplay");
    std::thread::sleep(std::time::Duration::from_millis(500));
    let mut outs = Vec::new();
    for c in children {
        let _ = Command::new("kill")
            .args(["-INT", &c.id().to_string()])
            .status();
        let out = c.wait_with_output().expect("wait");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        outs.push((String::from_utf8(out.stdout).unwrap(), stderr));
    }
    let offline = |app: &[&str]| {
        let mut args = vec!["detect"];
        args.extend_from_slice(app);
        args.extend(["-r", captured.to_str().unwrap()]);
        let out = trawl(&args);
        assert!(out.status.success());
        let s = summary(&out);
        (String::from_utf8(out.stdout).unwrap(), s)
    };
    let (syn_file, syn_summary) = offline(&syn);
    let (heavy_file, _) = offline(&heavy);
    assert_eq!(syn_summary["packets"], sent, "the keeper saw every packet");
    let live_summary: serde_json::Value =
        serde_json::from_str(outs[1].1.lines().last().unwrap()).expect("summary");
    assert_eq!(live_summary["packets"], sent, "{}", outs[1].1);
    let starts = syn_file.lines().filter(|l| l.contains("\"start\"")).count();
    assert_eq!(starts, 1, "{syn_file}");
    assert!(syn_file.contains("10.66.0.1"));
    assert_eq!(outs[1].0, syn_file, "synflood live and over the file");
    assert!(heavy_file.contains("heavy_hitters"));
    assert_eq!(
        outs[2].0, heavy_file,
        "heavy-hitters live and over the file"
    );
}
