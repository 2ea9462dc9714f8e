//! The packet store through the `trawl` binary: capture files and live capture into segments
//! and back out, checked against tshark's reading and filtering of the same packets; a writer
//! killed with SIGKILL leaves a segment that reads up to its last whole record and is repaired
//! on the next start.
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::live::{
    counter_sum, field_sum, file_packets, lab, pcap, trawl_live, wait_for_capture, wait_json,
};

fn trawl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .output()
        .expect("run trawl")
}

fn ok(out: &Output) -> serde_json::Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "trawl failed: {stderr}");
    serde_json::from_str(stderr.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("summary is not JSON ({e}): {stderr}"))
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("trawl-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// tshark's view of a capture: per frame, epoch time, frame length, captured length, and the
/// bytes (hex).
fn tshark_frames(file: &Path, display_filter: Option<&str>) -> Vec<String> {
    let mut cmd = Command::new("tshark");
    cmd.args(["-n", "-r", s(file), "-T", "fields"]);
    for f in ["frame.time_epoch", "frame.len", "frame.cap_len"] {
        cmd.args(["-e", f]);
    }
    if let Some(f) = display_filter {
        cmd.args(["-Y", f]);
    }
    let out = cmd.stderr(Stdio::null()).output().expect("tshark runs");
    assert!(out.status.success(), "tshark failed on {}", file.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

fn gunzip(src: &Path, dir: &Path) -> PathBuf {
    let out = dir.join("input.pcap");
    let data = Command::new("zcat").arg(src).output().unwrap().stdout;
    std::fs::write(&out, data).unwrap();
    out
}

#[test]
fn dump_then_packets_gives_back_the_capture_as_tshark_reads_it() {
    let dir = tempdir("roundtrip");
    let input = gunzip(
        &trawl_testkit::testdata("oracle/many-protocols.pcap.gz"),
        &dir,
    );
    let store = dir.join("store");
    let out = trawl(&[
        "dump",
        "-r",
        s(&input),
        "-w",
        s(&store),
        "--segment-time",
        "20s",
        "--summary",
        "json",
    ]);
    let sum = ok(&out);
    let frames = tshark_frames(&input, None);
    assert_eq!(
        sum["packets_written"].as_u64().unwrap(),
        frames.len() as u64
    );
    assert!(sum["segments"].as_u64().unwrap() > 1);
    let back = dir.join("back.pcap");
    let out = extract_all(&store, &back);
    let psum = ok(&out);
    assert_eq!(psum["packets_written"], sum["packets_written"]);
    // tshark reads the extracted file as it reads the original: same times, lengths...
    assert_eq!(tshark_frames(&back, None), frames);
    // ...and the bytes are the same.
    assert_eq!(file_packets(&back), file_packets(&input));
    // Every segment is itself a capture file tshark opens.
    let seg = walk(&store)
        .into_iter()
        .find(|p| p.extension().is_some_and(|e| e == "pcap"));
    assert!(!tshark_frames(&seg.unwrap(), None).is_empty());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `trawl dump` of the capture `input` into `store`, which must succeed; its summary.
fn dump_into(input: &Path, store: &Path) -> serde_json::Value {
    ok(&trawl(&[
        "dump",
        "-r",
        s(input),
        "-w",
        s(store),
        "--summary",
        "json",
    ]))
}

/// `trawl packets` of everything in `store` into the capture file `out`.
fn extract_all(store: &Path, out: &Path) -> Output {
    trawl(&["packets", "-r", s(store), "-w", s(out), "--summary", "json"])
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut v = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            v.extend(walk(&p));
        } else {
            v.push(p);
        }
    }
    v.sort();
    v
}

#[test]
fn windows_and_filters_select_what_tshark_selects() {
    let dir = tempdir("select");
    let input = gunzip(&trawl_testkit::testdata("oracle/1kxun.pcap.gz"), &dir);
    let store = dir.join("store");
    dump_into(&input, &store);
    let all = tshark_frames(&input, None);
    // The middle half of the packets (the capture has outliers years apart).
    let mut times: Vec<String> = all
        .iter()
        .map(|l| l.split('\t').next().unwrap().to_string())
        .collect();
    times.sort_by(|a, b| {
        a.parse::<f64>()
            .unwrap()
            .total_cmp(&b.parse::<f64>().unwrap())
    });
    let from = times[times.len() / 4].clone();
    let to = times[times.len() * 3 / 4].clone();
    // The first IPv4 source in the capture.
    let host = Command::new("tshark")
        .args([
            "-n",
            "-r",
            s(&input),
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-Y",
            "ip",
            "-c",
            "1",
        ])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    let host = String::from_utf8(host.stdout).unwrap().trim().to_string();
    let cases = [
        // (trawl filter, tshark display filter); `#1`: the outer header only, as BPF sees it.
        (None, "frame".to_string()),
        (
            Some(format!("host {host}")),
            format!(
                "ip.addr#1 == {host} || arp.src.proto_ipv4 == {host} || arp.dst.proto_ipv4 == {host}"
            ),
        ),
        (Some("udp".into()), "ip.proto#1 == 17 || ipv6.nxt#1 == 17".into()),
        (Some("tcp".into()), "ip.proto#1 == 6 || ipv6.nxt#1 == 6".into()),
    ];
    for (filter, display) in cases {
        let back = dir.join("back.pcap");
        let mut args = vec!["packets", "-r", s(&store), "--from", &from, "--to", &to];
        args.extend(["-w", s(&back), "--summary", "json"]);
        if let Some(f) = &filter {
            args.extend(["-f", f.as_str()]);
        }
        let sum = ok(&trawl(&args));
        let want = tshark_frames(
            &input,
            Some(&format!(
                "frame.time_epoch >= {from} && frame.time_epoch < {to} && ({display})"
            )),
        );
        assert!(!want.is_empty(), "{display}: the case selects something");
        assert_eq!(tshark_frames(&back, None), want, "{filter:?}");
        assert_eq!(sum["packets_written"].as_u64().unwrap(), want.len() as u64);
        if filter.as_deref().is_some_and(|f| f.starts_with("host")) {
            assert!(sum["chunks_skipped_index"].as_u64().unwrap() > 0, "{sum}");
        }
    }
    // RFC 3339 and epoch forms of one instant select the same packets.
    let rfc = Command::new("date")
        .args(["-u", "-d", &format!("@{from}"), "+%Y-%m-%dT%H:%M:%S.%6NZ"])
        .output()
        .unwrap();
    let rfc = String::from_utf8(rfc.stdout).unwrap().trim().to_string();
    let a = ok(&trawl(&[
        "packets",
        "-r",
        s(&store),
        "--from",
        &from,
        "-w",
        "/dev/null",
        "--summary",
        "json",
    ]));
    let b = ok(&trawl(&[
        "packets",
        "-r",
        s(&store),
        "--from",
        &rfc,
        "-w",
        "/dev/null",
        "--summary",
        "json",
    ]));
    assert_eq!(a["packets_written"], b["packets_written"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn packets_pipe_into_tshark() {
    let dir = tempdir("pipe");
    let store = dir.join("store");
    let input = pcap("android.pcap");
    dump_into(&input, &store);
    let mut trawl_out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["packets", "-r", s(&store), "-w", "-", "--summary", "none"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = Command::new("tshark")
        .args([
            "-n",
            "-r",
            "-",
            "-T",
            "fields",
            "-e",
            "frame.time_epoch",
            "-e",
            "frame.len",
            "-e",
            "frame.cap_len",
        ])
        .stdin(trawl_out.stdout.take().unwrap())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(trawl_out.wait().unwrap().success());
    let got: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(got, tshark_frames(&input, None));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mistakes_are_named() {
    let dir = tempdir("mistakes");
    let (d, missing, capture) = (s(&dir), dir.join("nope"), pcap("android.pcap"));
    // (arguments, what the message must say); every one is a usage error: exit code 2.
    let cases: [(Vec<&str>, &str); 6] = [
        (
            vec!["packets", "-r", s(&missing), "-w", "/dev/null"],
            "nope",
        ),
        (
            vec![
                "packets",
                "-r",
                d,
                "--from",
                "2024-13-01",
                "-w",
                "/dev/null",
            ],
            "character 6",
        ),
        (
            vec![
                "packets",
                "-r",
                d,
                "--from",
                "-1h",
                "--to",
                "-2h",
                "-w",
                "/dev/null",
            ],
            "--to must be after --from",
        ),
        (
            vec![
                "packets",
                "-r",
                d,
                "-f",
                "host nonsense..x",
                "-w",
                "/dev/null",
            ],
            "filter",
        ),
        (
            vec![
                "dump",
                "-r",
                s(&capture),
                "-w",
                d,
                "--dump-max-size",
                "1MiB",
            ],
            "leaves no room",
        ),
        (
            vec!["dump", "-r", s(&capture), "-w", d, "--write-block", "1000"],
            "4096",
        ),
    ];
    for (args, says) in cases {
        let e = trawl(&args);
        let stderr = String::from_utf8_lossy(&e.stderr);
        assert_eq!(e.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `trawl run -i HOST ARGS --duration 3s` while android.pcap is replayed into the host end of
/// the lab; its JSON summary.
fn run_during_replay(lab: &trawl_testkit::netns::VethLab, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["run", "-i", lab.host.as_str()];
    all.extend_from_slice(args);
    all.extend(["--duration", "3s", "--summary", "json"]);
    let child = trawl_live(&all);
    wait_for_capture(child.id());
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    wait_json(child).1
}

#[test]
fn run_stores_every_live_packet() {
    let lab = lab();
    let dir = tempdir("live");
    let store = dir.join("store");
    let summary = run_during_replay(&lab, &["--no-ring", "--dump", s(&store)]);
    let want = file_packets(&pcap("android.pcap"));
    assert_eq!(
        counter_sum(&summary, "dumper", "packets"),
        want.len() as u64,
        "{summary}"
    );
    let back = dir.join("back.pcap");
    let out = extract_all(&store, &back);
    assert_eq!(ok(&out)["packets_written"], want.len());
    assert_eq!(file_packets(&back), want);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_killed_writer_leaves_a_segment_that_is_read_then_repaired() {
    let lab = lab();
    let dir = tempdir("kill");
    let store = dir.join("store");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "-i",
            lab.host.as_str(),
            "--no-ring",
            "--dump",
            s(&store),
        ];
        args.extend_from_slice(extra);
        args.extend(["--summary", "json"]);
        trawl_live(&args)
    };
    let mut child = run(&[]);
    wait_for_capture(child.id());
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    // The writer flushes every second: then SIGKILL, with the segment open.
    std::thread::sleep(Duration::from_millis(2500));
    child.kill().unwrap();
    child.wait().unwrap();
    let segs: Vec<PathBuf> = walk(&store);
    assert_eq!(segs.len(), 1, "one open segment, no index: {segs:?}");
    let seg = segs[0].clone();
    // Readable as it is, up to its last whole record (here: all of them, flushed).
    let out = trawl(&[
        "packets",
        "-r",
        s(&store),
        "-w",
        s(&dir.join("a.pcap")),
        "--summary",
        "json",
    ]);
    let sum = ok(&out);
    let want = file_packets(&pcap("android.pcap"));
    assert_eq!(sum["packets_written"], want.len(), "{sum}");
    assert_eq!(sum["segments_unindexed"], 1);
    // The flushed block is padded with zeros to 4 KiB; after the last record comes padding.
    let bytes = std::fs::read(&seg).unwrap();
    let mut ends = vec![24usize];
    while let Some(h) = bytes.get(ends[ends.len() - 1]..ends[ends.len() - 1] + 16) {
        let caplen = u32::from_ne_bytes(h[8..12].try_into().unwrap()) as usize;
        if h.iter().all(|&b| b == 0) {
            break;
        }
        ends.push(ends[ends.len() - 1] + 16 + caplen);
    }
    assert_eq!(
        ends.len() - 1,
        want.len(),
        "every record is on disk after the flush"
    );
    assert!(bytes.len() > ends[ends.len() - 1], "flush padding follows");
    // Tear the last record as a power cut would, then restart: repaired, indexed, readable.
    let torn = ends[ends.len() - 1] - 7;
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(torn as u64).unwrap();
    drop(f);
    // The dumper block repairs a stream's segments when the stream's first packet comes.
    let child = run(&["--duration", "3s"]);
    wait_for_capture(child.id());
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let (_, summary) = wait_json(child);
    assert_eq!(
        counter_sum(&summary, "dumper", "segments_repaired"),
        1,
        "{summary}"
    );
    assert_eq!(
        counter_sum(&summary, "dumper", "repaired_bytes_cut"),
        (torn - ends[ends.len() - 2]) as u64
    );
    assert!(Path::new(&format!("{}.idx", seg.display())).exists());
    let n = want.len() - 1;
    assert_eq!(
        tshark_frames(&seg, None).len(),
        n,
        "the torn record is gone"
    );
    assert_eq!(file_packets(&seg), want[..n], "the rest is intact");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn two_workers_store_every_packet_and_read_back_in_time_order() {
    let lab = lab();
    let dir = tempdir("workers");
    let store = dir.join("store");
    let ring = format!("w{}", std::process::id());
    let summary = run_during_replay(
        &lab,
        &["--workers", "2", "--ring", &ring, "--dump", s(&store)],
    );
    let mut want = file_packets(&pcap("android.pcap"));
    assert_eq!(
        counter_sum(&summary, "dumper", "packets"),
        want.len() as u64,
        "{summary}"
    );
    // One stream per worker.
    let names: std::collections::BTreeSet<String> = walk(&store)
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
        .filter(|n| n.ends_with(".pcap"))
        .map(|n| n.split('_').nth(1).unwrap().to_string())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let back = dir.join("back.pcap");
    ok(&extract_all(&store, &back));
    let times: Vec<f64> = tshark_frames(&back, None)
        .iter()
        .map(|l| l.split('\t').next().unwrap().parse().unwrap())
        .collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "merged in time order"
    );
    let mut got = file_packets(&back);
    got.sort();
    want.sort();
    assert_eq!(got, want);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn through_the_ring_or_straight_the_store_is_the_same() {
    // `--via-ring` takes the path of `trawl run --dump` (ring, lossless listener, writer
    // thread); the default writes from the reading thread. Same segments, same packets.
    let dir = tempdir("via-ring");
    let input = pcap("many_interfaces-1.pcapng");
    let mut outs = Vec::new();
    for (tag, extra) in [("direct", None), ("ring", Some("--via-ring"))] {
        let store = dir.join(tag);
        let mut args = vec![
            "dump",
            "-r",
            s(&input),
            "-w",
            s(&store),
            "--summary",
            "json",
        ];
        args.extend(extra);
        let sum = ok(&trawl(&args));
        let names: Vec<String> = walk(&store)
            .iter()
            .map(|p| p.strip_prefix(&store).unwrap().display().to_string())
            .collect();
        let back = dir.join(format!("{tag}.pcap"));
        let out = trawl(&[
            "packets",
            "-r",
            s(&store),
            "-i",
            "en0",
            "-w",
            s(&back),
            "--summary",
            "json",
        ]);
        ok(&out);
        outs.push((sum["packets_written"].clone(), names, file_packets(&back)));
    }
    assert!(outs[0].0.as_u64().unwrap() > 0);
    assert_eq!(outs[0], outs[1]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn run_stores_live_flow_records_in_the_flow_database() {
    let lab = lab();
    let dir = tempdir("live-db");
    let db = dir.join("db");
    let summary = run_during_replay(&lab, &["--no-ring", "--db", s(&db)]);
    let want = file_packets(&pcap("android.pcap"));
    assert!(
        counter_sum(&summary, "flow_store", "blocks") >= 1,
        "{summary}"
    );
    let q = trawl(&[
        "query",
        "-d",
        s(&db),
        "-i",
        &lab.host,
        "proto",
        "--format",
        "json",
    ]);
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let result: serde_json::Value = serde_json::from_slice(&q.stdout).unwrap();
    let t = &result["totals"];
    let n = |k: &str| t[k].as_u64().unwrap_or_else(|| panic!("{k} in {t}"));
    // Every captured packet with a flow key is in exactly one stored row: the same sums as the
    // flow records of the file that was replayed.
    let records = trawl(&["flows", "-r", s(&pcap("android.pcap")), "--summary", "none"]);
    let (mut packets, mut bytes) = (0, 0);
    for line in String::from_utf8(records.stdout).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        packets += r["fwd_packets"].as_u64().unwrap() + r["rev_packets"].as_u64().unwrap();
        bytes += r["fwd_bytes"].as_u64().unwrap() + r["rev_bytes"].as_u64().unwrap();
    }
    assert!(packets > 0 && packets <= want.len() as u64);
    assert_eq!(n("fwd_packets") + n("rev_packets"), packets, "{t}");
    assert_eq!(n("fwd_bytes") + n("rev_bytes"), bytes, "{t}");
    assert_eq!(
        n("flows"),
        counter_sum(&summary, "flow_meter", "records"),
        "{t} {summary}"
    );
    // Issue 20: the interface's per-second series are stored beside the records, every
    // metered packet in one stored second.
    let series = trawl(&["series", "-d", s(&db), "-i", &lab.host]);
    assert!(
        series.status.success(),
        "{}",
        String::from_utf8_lossy(&series.stderr)
    );
    let stored: u64 = String::from_utf8(series.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["packets"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(
        stored,
        counter_sum(&summary, "flow_meter", "packets"),
        "{summary}"
    );
    assert!(
        counter_sum(&summary, "series_store", "files") >= 1,
        "{summary}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn pcapng_output_keeps_interfaces_and_mixes_link_types() {
    let dir = tempdir("pcapng");
    let input = pcap("many_interfaces-1.pcapng");
    let store = dir.join("store");
    dump_into(&input, &store);
    let fields = |file: &Path| {
        let out = Command::new("tshark")
            .args(["-n", "-r", s(file), "-T", "fields"])
            .args([
                "-e",
                "frame.time_epoch",
                "-e",
                "frame.len",
                "-e",
                "frame.interface_name",
            ])
            .args(["-e", "frame.encap_type"])
            .stderr(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success());
        let mut v: Vec<String> = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    };
    let back = dir.join("back.pcapng");
    ok(&extract_all(&store, &back));
    let want = fields(&input);
    assert!(want.iter().any(|l| l.contains("lo0")) && want.iter().any(|l| l.contains("en0")));
    assert_eq!(fields(&back), want);
    // Forced to pcap the same selection is refused, saying why and what to do.
    let x = dir.join("x.pcap");
    let e = trawl(&["packets", "-r", s(&store), "-w", s(&x), "--format", "pcap"]);
    let stderr = String::from_utf8_lossy(&e.stderr);
    assert!(!e.status.success() && stderr.contains("pcapng"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// tshark's count of the packets in `file` (any format it reads).
fn tshark_count(file: &Path) -> usize {
    tshark_frames(file, None).len()
}

#[test]
fn mixed_link_types_are_written_as_pcapng_or_refused_before_the_file_is_made() {
    // issue 27, item 6: a .pcap output over segments of two link types (BSD loopback from
    // 2013-14, then Ethernet from 2017) wrote the loopback packets and stopped at the first
    // Ethernet one. The format is now decided from the selected segments first.
    let dir = tempdir("mixed-links");
    let (null, ether) = (
        pcap("null_loopback.pcap"),
        trawl_testkit::testdata("oracle/tls13.pcap"),
    );
    let store = dir.join("store");
    let sum = ok(&trawl(&[
        "dump",
        "-r",
        s(&null),
        "-r",
        s(&ether),
        "-w",
        s(&store),
        "--summary",
        "json",
    ]));
    let total = tshark_count(&null) + tshark_count(&ether);
    assert_eq!(sum["packets_written"], total);
    // Not forced: pcapng, every packet, and a note saying so.
    let out_file = dir.join("out.pcap");
    let out = extract_all(&store, &out_file);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let psum = ok(&out);
    assert!(stderr.contains("writing pcapng"), "{stderr}");
    assert_eq!(psum["packets_written"], total);
    assert_eq!(&std::fs::read(&out_file).unwrap()[..4], b"\x0a\x0d\x0d\x0a");
    assert_eq!(tshark_count(&out_file), total);
    // Forced pcap: refused up front, no file created.
    let forced = dir.join("forced.pcap");
    let e = trawl(&[
        "packets",
        "-r",
        s(&store),
        "-w",
        s(&forced),
        "--format",
        "pcap",
    ]);
    let stderr = String::from_utf8_lossy(&e.stderr);
    assert_eq!(e.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("mixes link types") && stderr.contains("--format pcapng"),
        "{stderr}"
    );
    assert!(!forced.exists(), "the refused output was created");
    // A window of one link type (the 2017 Ethernet packets): still pcap.
    let one = dir.join("one.pcap");
    ok(&trawl(&[
        "packets",
        "-r",
        s(&store),
        "--from",
        "2015-01-01",
        "-w",
        s(&one),
        "--format",
        "pcap",
        "--summary",
        "json",
    ]));
    assert_eq!(
        &std::fs::read(&one).unwrap()[..4],
        &0xa1b2_3c4du32.to_le_bytes()
    );
    assert_eq!(tshark_count(&one), tshark_count(&ether));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn run_applies_the_flow_database_retention() {
    let lab = lab();
    let dir = tempdir("db-retention");
    let db = dir.join("db");
    // Years-old blocks first (the sample capture is from 2010 and 2015).
    let sample = trawl_testkit::testdata("oracle/many-protocols.pcap.gz");
    let out = trawl(&[
        "ingest",
        "-r",
        s(&sample),
        "--db",
        s(&db),
        "-i",
        "old",
        "--summary",
        "none",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(db.join("iface=old").is_dir());
    let summary = run_during_replay(&lab, &["--no-ring", "--db", s(&db), "--db-keep-days", "30"]);
    assert!(
        counter_sum(&summary, "flow_store", "retention_blocks_deleted") > 0,
        "{summary}"
    );
    assert_eq!(field_sum(&summary, "flow_store", "errors"), 0, "{summary}");
    // The old interface is gone, today's blocks stay.
    assert!(!db.join("iface=old").exists());
    assert!(db.join(format!("iface={}", lab.host)).is_dir());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The offsets where the records of the pcap file `bytes` end, in order.
fn record_ends(bytes: &[u8]) -> Vec<u64> {
    let mut ends = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let caplen = u32::from_le_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        at += 16 + caplen;
        ends.push(at as u64);
    }
    ends
}

/// `all` without one occurrence of each line of `lost`, sorted.
fn without(all: &[String], lost: &[String]) -> Vec<String> {
    let mut left = all.to_vec();
    for l in lost {
        let i = left
            .iter()
            .position(|x| x == l)
            .expect("a lost frame is in the store");
        left.remove(i);
    }
    left.sort();
    left
}

#[test]
fn a_segment_cut_short_is_read_up_to_the_cut_named_and_fails_the_run() {
    // issue 27, item 2: a segment shorter than its index says gave fewer packets, exit 0 and
    // no word. Cut at a record boundary, inside a record header, inside a record's data, one
    // byte short, and at seeded random offsets: every whole record before the cut comes back,
    // the problem names the segment and the missing bytes, and the exit code is 1.
    let dir = tempdir("cut-short");
    let input = gunzip(
        &trawl_testkit::testdata("oracle/many-protocols.pcap.gz"),
        &dir,
    );
    let store = dir.join("store");
    let sum = ok(&trawl(&[
        "dump",
        "-r",
        s(&input),
        "-w",
        s(&store),
        "--segment-time",
        "20s",
        "--summary",
        "json",
    ]));
    assert!(sum["segments"].as_u64().unwrap() > 1);
    let full = dir.join("full.pcap");
    ok(&extract_all(&store, &full));
    let all = tshark_frames(&full, None);
    assert_eq!(all.len() as u64, sum["packets_written"].as_u64().unwrap());
    // The largest segment is cut.
    let seg = walk(&store)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let name = seg.file_name().unwrap().to_str().unwrap().to_string();
    let original = std::fs::read(&seg).unwrap();
    let seg_frames = tshark_frames(&seg, None);
    let ends = record_ends(&original);
    assert_eq!(ends.len(), seg_frames.len());
    assert!(ends.len() > 100, "{} records", ends.len());
    let len = original.len() as u64;
    let mut cuts = vec![
        ends[ends.len() / 2],
        ends[ends.len() / 3] + 7,
        ends[ends.len() / 4] + 20,
        len - 1,
        24,
    ];
    // A fixed-seed LCG: the same "random" cuts on every run.
    let mut x: u64 = 0x2700_0002;
    for _ in 0..6 {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        cuts.push(24 + (x >> 33) % (len - 24));
    }
    for cut in cuts {
        std::fs::write(&seg, &original[..cut as usize]).unwrap();
        let back = dir.join("back.pcap");
        let out = extract_all(&store, &back);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "cut at {cut}: {stderr}");
        let summary: serde_json::Value =
            serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
        let errors = summary["errors"].as_array().unwrap();
        assert_eq!(errors.len(), 1, "cut at {cut}: {errors:?}");
        let e = errors[0].as_str().unwrap();
        assert!(
            e.contains(&name) && e.contains(&format!("bytes {cut}..{len} are missing")),
            "cut at {cut}: {e}"
        );
        // Every record that ends by the cut is read; the rest of the segment is not.
        let whole = ends.iter().filter(|&&end| end <= cut).count();
        let want = without(&all, &seg_frames[whole..]);
        let mut got = tshark_frames(&back, None);
        got.sort();
        assert_eq!(got.len(), want.len(), "cut at {cut}");
        assert!(got == want, "cut at {cut}: other packets came back");
        assert_eq!(summary["packets_written"], want.len());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_directory_that_is_no_store_is_an_error_and_an_empty_window_says_what_is_stored() {
    // issue 27, item 5: `trawl packets` / `trawl query` on a directory that is not a packet
    // store / flow database, or on a window without data, answered an empty result, exit 0.
    let dir = tempdir("no-store");
    let (store, db, empty) = (dir.join("store"), dir.join("db"), dir.join("empty"));
    std::fs::create_dir_all(&empty).unwrap();
    let capture = trawl_testkit::testdata("oracle/sip.pcap");
    let capture = Path::new(&capture);
    dump_into(capture, &store);
    let ingest = trawl(&[
        "ingest",
        "-r",
        s(capture),
        "--db",
        s(&db),
        "--summary",
        "none",
    ]);
    assert!(ingest.status.success());
    let packets = |d: &Path, extra: &[&str]| {
        let out = dir.join("out.pcap");
        let mut args = vec!["packets", "-r", s(d), "-w", s(&out)];
        args.extend_from_slice(extra);
        trawl(&args)
    };
    let query = |d: &Path, extra: &[&str]| {
        let mut args = vec!["query", "-d", s(d), "--format", "json"];
        args.extend_from_slice(extra);
        trawl(&args)
    };
    let usage = |out: &Output, says: &str| {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(says), "{stderr}");
    };
    // A directory of other files, and each store mistaken for the other.
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "x").unwrap();
    usage(&packets(&other, &[]), "holds no trawl packet store");
    usage(&packets(&db, &[]), "holds no trawl packet store");
    usage(&query(&other, &[]), "holds no trawl flow database");
    usage(&query(&store, &[]), "holds no trawl flow database");
    // An empty directory is an empty store (retention may have deleted everything): the
    // empty result, and a note saying the directory is empty.
    for out in [packets(&empty, &[]), query(&empty, &[])] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{stderr}");
        assert!(stderr.contains("retention deleted them all"), "{stderr}");
    }
    // The capture is from 2005-07-04 09:32 to 09:58 UTC: a window in 2030 holds nothing.
    let late = ["--from", "2030-01-01", "--to", "2030-01-02"];
    let out = packets(&store, &late);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("no stored packet in the time range")
            && stderr.contains("2005-07-04T09:32:52.844249000Z .. 2005-07-04T09:58:14.413365000Z"),
        "{stderr}"
    );
    let out = query(&db, &late);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rows"], serde_json::json!([]));
    assert!(
        stderr.contains("no block in the time range")
            && stderr.contains("2005-07-04T09:30:00Z .. 2005-07-04T10:00:00Z"),
        "{stderr}"
    );
    // An interface the store does not have: the note names those it has.
    let out = packets(&store, &["-i", "eth9"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains("interfaces if0"),
        "{stderr}"
    );
    let out = query(&db, &["-i", "eth9"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stderr.contains("(interfaces "),
        "{stderr}"
    );
    // A window with packets gives no note.
    let out = packets(&store, &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && !stderr.contains("note"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Splits the pcap file `input` into two: records 1, 3, 5... into `odd`, 2, 4, 6... into
/// `even` (the two halves of one capture, their times interleaved).
fn split_alternately(input: &Path, odd: &Path, even: &Path) {
    let data = std::fs::read(input).unwrap();
    let little = data[..4] == [0xd4, 0xc3, 0xb2, 0xa1] || data[..4] == [0x4d, 0x3c, 0xb2, 0xa1];
    let len = |b: &[u8]| {
        let b: [u8; 4] = b.try_into().unwrap();
        (if little {
            u32::from_le_bytes(b)
        } else {
            u32::from_be_bytes(b)
        }) as usize
    };
    let mut halves = [data[..24].to_vec(), data[..24].to_vec()];
    let (mut at, mut n) = (24, 0);
    while at < data.len() {
        let end = at + 16 + len(&data[at + 8..at + 12]);
        halves[n % 2].extend_from_slice(&data[at..end]);
        at = end;
        n += 1;
    }
    std::fs::write(odd, &halves[0]).unwrap();
    std::fs::write(even, &halves[1]).unwrap();
}

#[test]
fn dump_merges_its_files_by_time_and_filters_each() {
    // Issue 19: `trawl dump` reads its files as `trawl flows` does (one pcap_source: merged
    // by packet time, the filter compiled per file). The two halves of a capture, their
    // packets interleaved, store what the whole capture stores; read one after the other
    // (as dump did before), the second half came after the first.
    let dir = tempdir("merge");
    let input = gunzip(
        &trawl_testkit::testdata("oracle/many-protocols.pcap.gz"),
        &dir,
    );
    let (odd, even) = (dir.join("odd.pcap"), dir.join("even.pcap"));
    split_alternately(&input, &odd, &even);
    let mut got = Vec::new();
    for (tag, files) in [("whole", vec![&input]), ("halves", vec![&odd, &even])] {
        let store = dir.join(tag);
        let mut args = vec!["dump", "-w", s(&store), "-f", "udp", "-i", "eth9"];
        for f in files {
            args.extend(["-r", s(f)]);
        }
        args.extend(["--summary", "json"]);
        let sum = ok(&trawl(&args));
        let back = dir.join(format!("{tag}.pcap"));
        let out = trawl(&[
            "packets",
            "-r",
            s(&store),
            "-i",
            "eth9",
            "-w",
            s(&back),
            "--summary",
            "json",
        ]);
        ok(&out);
        got.push((
            sum["packets_read"].clone(),
            sum["packets_filtered_out"].clone(),
            timed_packets(&back),
        ));
    }
    let (whole, halves) = (&got[0].2, &got[1].2);
    assert!(whole.len() > 10, "{} udp packets", whole.len());
    assert!(got[0].1.as_u64().unwrap() > 0, "the filter rejected some");
    assert_eq!((&got[0].0, &got[0].1), (&got[1].0, &got[1].1));
    // In time order (packets of equal times may come in another order: a tie goes to the
    // file given first), and the same packets.
    let times: Vec<u64> = halves.iter().map(|p| p.0).collect();
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "stored out of time order"
    );
    let sorted = |v: &[(u64, Vec<u8>)]| {
        let mut v = v.to_vec();
        v.sort();
        v
    };
    assert!(sorted(whole) == sorted(halves), "other packets stored");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The packets of a capture file with their times.
fn timed_packets(path: &Path) -> Vec<(u64, Vec<u8>)> {
    use trawl_capture::PacketSource;
    let mut src = trawl_capture::FileSource::open(path).expect("open capture");
    let mut v = Vec::new();
    while let Some(b) = src.next_batch().expect("read capture") {
        v.extend(b.iter().map(|p| (p.ts_ns, p.data.to_vec())));
    }
    v
}

#[test]
fn dump_prints_the_composition_it_runs() {
    // `trawl dump --print-composition` prints the plan (pcap_source -> dumper); `trawl run -c`
    // of that text stores what `trawl dump` stores.
    let dir = tempdir("dump-compose");
    let input = pcap("many_interfaces-1.pcapng");
    let direct = dir.join("direct");
    let printed = dir.join("printed");
    let plan = |store: &Path| {
        let out = trawl(&[
            "dump",
            "-r",
            s(&input),
            "-w",
            s(store),
            "--segment-time",
            "10s",
            "--via-ring",
            "--print-composition",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let toml = plan(&printed);
    assert!(toml.contains("type = \"pcap_source\""), "{toml}");
    assert!(toml.contains("type = \"dumper\""), "{toml}");
    assert!(!printed.exists(), "printing the plan runs nothing");
    let file = dir.join("dump.toml");
    std::fs::write(&file, &toml).unwrap();
    let check = trawl(&["check", "-c", s(&file)]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let run = trawl(&["run", "-c", s(&file)]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    ok(&trawl(&[
        "dump",
        "-r",
        s(&input),
        "-w",
        s(&direct),
        "--segment-time",
        "10s",
        "--summary",
        "json",
    ]));
    let listing = |store: &Path| -> Vec<(String, Vec<u8>)> {
        walk(store)
            .iter()
            .map(|p| {
                let name = p.strip_prefix(store).unwrap().display().to_string();
                (name, std::fs::read(p).unwrap())
            })
            .collect()
    };
    let (a, b) = (listing(&direct), listing(&printed));
    assert!(!a.is_empty());
    assert_eq!(a, b);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_dump_summary_reads_retention_and_cutoff_back_from_the_run() {
    // The summary's counters come from the dumper block's report: they must say what is in
    // the store.
    let dir = tempdir("dump-counters");
    let input = gunzip(
        &trawl_testkit::testdata("oracle/many-protocols.pcap.gz"),
        &dir,
    );
    let store = dir.join("store");
    let sum = ok(&trawl(&[
        "dump",
        "-r",
        s(&input),
        "-w",
        s(&store),
        "--segment-size",
        "64KiB",
        "--dump-max-size",
        "300KiB",
        "--cutoff",
        "2KiB",
        "--summary",
        "json",
    ]));
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let cut = &sum["cutoff"];
    assert!(
        n(&cut["packets_cut"]) > 0 && n(&cut["flows_cut"]) > 0,
        "{sum}"
    );
    assert_eq!(
        n(&sum["packets_written"]) + n(&cut["packets_cut"]),
        n(&sum["packets_read"])
    );
    let r = &sum["retention"];
    assert!(n(&r["deleted_for_budget"]) > 0, "{sum}");
    let segments: Vec<PathBuf> = walk(&store)
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "pcap"))
        .collect();
    assert_eq!(n(&r["stored_segments"]), segments.len() as u64, "{sum}");
    assert_eq!(
        n(&r["stored_segments"]) + n(&r["deleted_for_budget"]),
        n(&sum["segments"])
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
