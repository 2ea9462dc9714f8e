//! Live capture on real veth pairs in real network namespaces, with traffic put on the wire by
//! tcpreplay: exact packets and bytes, directions, VLAN tags, kernel filters, fanout symmetry,
//! an interface going down and up.
use std::path::Path;
use std::time::{Duration, Instant};

use trawl_capture::live::{fanout, Fanout, FanoutMode, LiveConfig, LiveSource};
use trawl_capture::{Direction, FileSource, PacketSource};
use trawl_testkit::netns::{lab_available, LoopbackLab, VethLab};

/// A captured or sent packet: what the tests compare.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pkt {
    data: Vec<u8>,
    wire_len: u32,
    direction: Direction,
}

pub(crate) fn lab() -> VethLab {
    if let Err(e) = lab_available() {
        panic!("live capture tests need a lab: {e}");
    }
    VethLab::new(9000).unwrap_or_else(|e| panic!("cannot make a veth lab: {e}"))
}

pub(crate) fn file_packets(path: &Path) -> Vec<Vec<u8>> {
    let mut src = FileSource::open(path).expect("open capture");
    let mut v = Vec::new();
    while let Some(b) = src.next_batch().expect("read capture") {
        v.extend(b.iter().map(|p| p.data.to_vec()));
    }
    v
}

/// Reads from `src` until `want` packets arrived, then a little longer to catch extras.
fn collect(src: &mut LiveSource, want: usize) -> Vec<Pkt> {
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut quiet_after = None;
    while Instant::now() < deadline {
        let batch = src
            .next_batch()
            .expect("capture")
            .expect("live sources do not end");
        got.extend(batch.iter().map(|p| Pkt {
            data: p.data.to_vec(),
            wire_len: p.wire_len,
            direction: p.direction,
        }));
        if got.len() >= want {
            let t = *quiet_after.get_or_insert_with(|| Instant::now() + Duration::from_millis(300));
            if Instant::now() >= t {
                break;
            }
        }
    }
    got
}

fn config(iface: &str) -> LiveConfig {
    let mut c = LiveConfig::new(iface);
    c.block_size = 1 << 16;
    c.block_count = 16;
    c.poll_timeout = Duration::from_millis(50);
    c
}

pub(crate) fn pcap(name: &str) -> std::path::PathBuf {
    trawl_testkit::testdata(&format!("pcaps/{name}"))
}

#[test]
fn inbound_packets_arrive_whole_and_in_order_with_vlan_tags_restored() {
    let lab = lab();
    let mut src = LiveSource::open(config(&lab.host)).expect("open capture");
    for name in [
        "android.pcap",
        "VlanPackets.pcap",
        "802.1ad_QinQ.pcap",
        "mpls-basic.pcap",
    ] {
        let sent = file_packets(&pcap(name));
        let n = lab
            .replay_into_host(&pcap(name), &["--topspeed"])
            .expect("replay");
        assert_eq!(n as usize, sent.len(), "{name}: tcpreplay sent everything");
        let got = collect(&mut src, sent.len());
        assert_eq!(got.len(), sent.len(), "{name}: packet count");
        for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
            assert_eq!(g.data, *s, "{name}: packet {i} bytes");
            assert_eq!(g.wire_len as usize, s.len(), "{name}: packet {i} length");
            assert_eq!(
                g.direction,
                Direction::Inbound,
                "{name}: packet {i} direction"
            );
        }
    }
    let live = src.live_stats();
    assert!(live.vlan_restored >= 26, "VLAN tags restored: {live:?}");
    src.refresh_kernel_stats();
    assert_eq!(src.live_stats().kernel_drops, 0);
}

#[test]
fn outbound_packets_are_marked_outbound() {
    let lab = lab();
    let mut src = LiveSource::open(config(&lab.host)).expect("open capture");
    let sent = file_packets(&pcap("android.pcap"));
    lab.replay_out_of_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let got = collect(&mut src, sent.len());
    assert_eq!(got.len(), sent.len());
    assert!(got.iter().all(|p| p.direction == Direction::Outbound));
    assert_eq!(
        got.iter().map(|p| &p.data).collect::<Vec<_>>(),
        sent.iter().collect::<Vec<_>>()
    );
}

#[test]
fn snaplen_cuts_packets_and_keeps_wire_length() {
    let lab = lab();
    let mut c = config(&lab.host);
    c.snaplen = 64;
    let mut src = LiveSource::open(c).expect("open capture");
    let sent = file_packets(&pcap("android.pcap"));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let got = collect(&mut src, sent.len());
    assert_eq!(got.len(), sent.len());
    for (g, s) in got.iter().zip(&sent) {
        assert_eq!(g.data, s[..s.len().min(64)]);
        assert_eq!(g.wire_len as usize, s.len());
    }
    assert_eq!(
        src.stats().truncated_records,
        sent.iter().filter(|s| s.len() > 64).count() as u64
    );
}

#[test]
fn kernel_filter_keeps_what_libpcap_keeps() {
    let lab = lab();
    let expr = "tcp port 443 or udp";
    let filter = trawl_bpf::Filter::compile(expr, trawl_capture::LinkType::ETHERNET, 262_144)
        .expect("compile");
    let mut c = config(&lab.host);
    c.filter = Some(
        filter
            .insns()
            .iter()
            .map(|i| trawl_capture::live::SockFilter {
                code: i.code,
                jt: i.jt,
                jf: i.jf,
                k: i.k,
            })
            .collect(),
    );
    let mut src = LiveSource::open(c).expect("open capture");
    let sent = file_packets(&pcap("android.pcap"));
    let expected: Vec<&Vec<u8>> = sent
        .iter()
        .filter(|p| filter.matches(p, p.len() as u32))
        .collect();
    assert!(
        !expected.is_empty() && expected.len() < sent.len(),
        "the filter must split the capture"
    );
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let got = collect(&mut src, expected.len());
    assert_eq!(got.iter().map(|p| &p.data).collect::<Vec<_>>(), expected);
}

/// The EtherType and network header of an Ethernet frame, past any VLAN tags.
fn l3(frame: &[u8]) -> (u16, &[u8]) {
    let mut off = 12;
    let mut ethertype = u16::from_be_bytes([frame[off], frame[off + 1]]);
    while ethertype == 0x8100 || ethertype == 0x88a8 {
        off += 4;
        ethertype = u16::from_be_bytes([frame[off], frame[off + 1]]);
    }
    (ethertype, &frame[off + 2..])
}

#[test]
fn symmetric_fanout_puts_both_directions_on_one_worker() {
    let lab = lab();
    let group = (std::process::id() & 0x7fff) as u16;
    let open = || {
        let mut c = config(&lab.host);
        c.fanout = Some(Fanout {
            group,
            mode: FanoutMode::Symmetric,
        });
        LiveSource::open(c).expect("open capture")
    };
    let mut workers = [open(), open()];
    let name = "android.pcap";
    let sent = file_packets(&pcap(name));
    lab.replay_into_host(&pcap(name), &["--topspeed"])
        .expect("replay");
    std::thread::sleep(Duration::from_millis(300));
    let mut got: Vec<Vec<Pkt>> = Vec::new();
    for w in &mut workers {
        got.push(collect(w, 1));
    }
    assert_eq!(
        got.iter().map(Vec::len).sum::<usize>(),
        sent.len(),
        "every packet on one worker"
    );
    assert!(
        got.iter().all(|g| !g.is_empty()),
        "both workers got traffic"
    );
    for (worker, pkts) in got.iter().enumerate() {
        let mut hist = std::collections::BTreeMap::new();
        for p in pkts {
            let (ethertype, net) = l3(&p.data);
            *hist
                .entry((ethertype, fanout::symmetric_hash(ethertype, net) % 2))
                .or_insert(0) += 1;
        }
        eprintln!("worker {worker}: {hist:?}");
    }
    for (worker, pkts) in got.iter().enumerate() {
        for p in pkts {
            let (ethertype, net) = l3(&p.data);
            let expected = fanout::symmetric_hash(ethertype, net) % 2;
            assert_eq!(
                expected as usize, worker,
                "packet steered by the address XOR"
            );
        }
    }
}

#[test]
fn capture_survives_the_interface_going_down_and_up() {
    let lab = lab();
    let mut src = LiveSource::open(config(&lab.host)).expect("open capture");
    lab.set_host_up(false).expect("down");
    for _ in 0..4 {
        src.next_batch().expect("a down interface is not an error");
    }
    assert!(src.is_down(), "the source noticed");
    assert_eq!(src.live_stats().interface_down, 1);
    lab.set_host_up(true).expect("up");
    let sent = file_packets(&pcap("android.pcap"));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let got = collect(&mut src, sent.len());
    assert_eq!(got.len(), sent.len(), "capture resumed");
}

#[test]
fn open_errors_name_the_interface() {
    let e = LiveSource::open(LiveConfig::new("no-such-if0"))
        .err()
        .expect("must fail");
    assert_eq!(
        e.to_string(),
        "no interface named 'no-such-if0' (see `ip link`)"
    );
    let mut c = LiveConfig::new("lo");
    c.block_size = 5000;
    let e = LiveSource::open(c).err().expect("must fail");
    assert_eq!(
        e.to_string(),
        "invalid capture setting for 'lo': `block_size` must be a power of two between 4KiB \
         and 1GiB (got 5000)"
    );
}

// ---- the `trawl` binary on a live interface -------------------------------------------------

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};

pub(crate) fn trawl_live(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run trawl")
}

/// The packet sockets process `pid` holds: the inodes of its network namespace's
/// `/proc/PID/net/packet` among its open files.
fn packet_sockets(pid: u32) -> usize {
    let table = std::fs::read_to_string(format!("/proc/{pid}/net/packet")).unwrap_or_default();
    let inodes: std::collections::HashSet<&str> = table
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().last())
        .collect();
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|target| {
            target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .is_some_and(|inode| inodes.contains(inode))
        })
        .count()
}

/// Waits until trawl (process `pid`) captures: it holds packet sockets and has opened no new
/// one for 300 ms (a fixed pause was too short for `--workers 2` on a loaded machine). Gives
/// up after 20 s; the test's own checks then say what was missed.
pub(crate) fn wait_for_capture(pid: u32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let (mut seen, mut since) = (0, Instant::now());
    while Instant::now() < deadline {
        let n = packet_sockets(pid);
        if n != seen {
            (seen, since) = (n, Instant::now());
        } else if n > 0 && since.elapsed() >= Duration::from_millis(300) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until trawl captures ([`wait_for_capture`]), replays, and collects the output.
fn replay_and_wait(
    lab: &VethLab,
    child: Child,
    name: &str,
    outbound: bool,
) -> (String, serde_json::Value) {
    wait_for_capture(child.id());
    if outbound {
        lab.replay_out_of_host(&pcap(name), &["--topspeed"])
            .expect("replay");
    } else {
        lab.replay_into_host(&pcap(name), &["--topspeed"])
            .expect("replay");
    }
    wait_json(child)
}

/// Per conversation (addresses, ports, protocol, in a fixed order): packets and bytes.
/// Live replay at top speed squeezes idle gaps, so a conversation split by the idle timeout in
/// the file is one flow live: compare conversations, not records.
fn conversations(jsonl: &str) -> BTreeMap<String, (u64, u64)> {
    let mut m = BTreeMap::new();
    for line in jsonl.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON record");
        let a = format!("{}:{}", v["src_ip"], v["src_port"]);
        let b = format!("{}:{}", v["dst_ip"], v["dst_port"]);
        let (x, y) = if a <= b { (a, b) } else { (b, a) };
        let key = format!("{} {x} {y} vlan {}", v["proto"], v["vlan"]);
        let e = m.entry(key).or_insert((0, 0));
        e.0 += v["fwd_packets"].as_u64().unwrap() + v["rev_packets"].as_u64().unwrap();
        e.1 += v["fwd_bytes"].as_u64().unwrap() + v["rev_bytes"].as_u64().unwrap();
    }
    m
}

fn trawl_file(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .output()
        .expect("run trawl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `trawl flows -i` for 3 s with `options` while `capture` is replayed into the host end,
/// checks that its conversations equal those of `trawl flows -r capture` with the same filter
/// (`-f` among `options`), and returns the live run's output and summary.
fn live_matches_file(
    lab: &VethLab,
    capture: &str,
    options: &[&str],
) -> (String, serde_json::Value) {
    let mut live = vec![
        "flows",
        "-i",
        &lab.host,
        "--duration",
        "3s",
        "--summary",
        "json",
    ];
    live.extend_from_slice(options);
    let child = trawl_live(&live);
    let (stdout, summary) = replay_and_wait(lab, child, capture, false);
    let path = pcap(capture);
    let mut offline = vec!["flows", "-r", path.to_str().unwrap()];
    if let Some(i) = options.iter().position(|o| *o == "-f") {
        offline.extend_from_slice(&options[i..i + 2]);
    }
    let from_file = trawl_file(&offline);
    assert!(!from_file.is_empty(), "the file has flows for {options:?}");
    assert_eq!(
        conversations(&stdout),
        conversations(&from_file),
        "{capture} with {options:?}"
    );
    (stdout, summary)
}

#[test]
fn live_flows_equal_the_flows_of_the_file_that_was_replayed() {
    let lab = lab();
    for workers in ["1", "2"] {
        let (stdout, summary) = live_matches_file(&lab, "android.pcap", &["--workers", workers]);
        assert_eq!(summary["packets"], 500);
        assert_eq!(summary["live"]["kernel_drops"], 0);
        assert_eq!(
            summary["live"]["workers"].as_u64(),
            Some(workers.parse().unwrap())
        );
        // Every conversation is one flow: no flow was split across the workers.
        assert_eq!(
            summary["records"].as_u64(),
            Some(conversations(&stdout).len() as u64)
        );
    }
}

/// Conversations of `records` (JSON lines) with the interface each record names.
fn conversations_by_iface(records: &str) -> BTreeMap<String, BTreeMap<String, (u64, u64)>> {
    let mut by = BTreeMap::<String, String>::new();
    for line in records.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON record");
        let iface = v["iface"]
            .as_str()
            .expect("live records name their interface");
        by.entry(iface.to_string())
            .or_default()
            .push_str(&format!("{line}\n"));
    }
    by.into_iter()
        .map(|(iface, lines)| (iface, conversations(&lines)))
        .collect()
}

#[test]
fn records_of_several_interfaces_name_theirs() {
    let (a, b) = (lab(), lab());
    let offline =
        |name: &str| conversations(&trawl_file(&["flows", "-r", pcap(name).to_str().unwrap()]));
    let want: BTreeMap<String, _> = [
        (a.host.clone(), offline("android.pcap")),
        (b.host.clone(), offline("aerospike.pcap")),
    ]
    .into_iter()
    .collect();
    for format in ["json", "csv"] {
        let child = trawl_live(&[
            "flows",
            "-i",
            &a.host,
            "-i",
            &b.host,
            "--workers",
            "2",
            "--duration",
            "3s",
            "--summary",
            "json",
            "--format",
            format,
        ]);
        wait_for_capture(child.id());
        a.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
            .expect("replay");
        b.replay_into_host(&pcap("aerospike.pcap"), &["--topspeed"])
            .expect("replay");
        let (stdout, _) = wait_json(child);
        let records = if format == "json" {
            stdout
        } else {
            csv_to_json_lines(&stdout)
        };
        assert_eq!(conversations_by_iface(&records), want, "{format}");
    }
}

/// CSV records as JSON lines with the same keys (numbers as numbers), for the JSON helpers.
fn csv_to_json_lines(csv: &str) -> String {
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().expect("CSV header").split(',').collect();
    assert!(header.contains(&"iface"), "live CSV has the iface column");
    let mut out = String::new();
    for line in lines {
        // No field before the quoted lists holds a comma.
        let cells: Vec<&str> = line.splitn(header.len(), ',').collect();
        let obj: serde_json::Map<String, serde_json::Value> = header
            .iter()
            .zip(&cells)
            .map(|(h, c)| {
                let v = c
                    .parse::<u64>()
                    .map_or_else(|_| serde_json::Value::from(*c), serde_json::Value::from);
                (h.to_string(), v)
            })
            .collect();
        out.push_str(&serde_json::Value::Object(obj).to_string());
        out.push('\n');
    }
    out
}

#[test]
fn live_series_adds_up_and_has_directions() {
    let lab = lab();
    let child = trawl_live(&[
        "series",
        "-i",
        &lab.host,
        "--duration",
        "3s",
        "--summary",
        "json",
        "--workers",
        "2",
    ]);
    let (stdout, summary) = replay_and_wait(&lab, child, "android.pcap", true);
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON row"))
        .collect();
    assert!(rows.len() >= 3, "a row per second of the run: {stdout}");
    let seconds: Vec<u64> = rows.iter().map(|r| r["second"].as_u64().unwrap()).collect();
    assert!(
        seconds.windows(2).all(|w| w[1] == w[0] + 1),
        "contiguous seconds: {seconds:?}"
    );
    let sum = |f: &str| rows.iter().map(|r| r[f].as_u64().unwrap()).sum::<u64>();
    assert_eq!(sum("packets"), 500);
    assert_eq!(sum("bytes"), 133_530);
    assert_eq!(
        sum("out_packets"),
        500,
        "replayed out of the capturing interface"
    );
    assert_eq!(sum("in_packets"), 0);
    assert_eq!(summary["packets"], 500);
}

#[test]
fn count_stops_after_exactly_n_packets() {
    let lab = lab();
    let child = trawl_live(&[
        "flows",
        "-i",
        &lab.host,
        "--count",
        "123",
        "--summary",
        "json",
        "--workers",
        "2",
    ]);
    let (_, summary) = replay_and_wait(&lab, child, "android.pcap", false);
    assert_eq!(summary["packets"], 123);
}

#[test]
fn sigint_flushes_every_flow_and_exits_cleanly() {
    let lab = lab();
    let child = trawl_live(&[
        "flows",
        "-i",
        &lab.host,
        "--summary",
        "json",
        "--format",
        "csv",
    ]);
    wait_for_capture(child.id());
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    std::thread::sleep(Duration::from_millis(300));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    let csv = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        csv.lines().count() as u64 - 1,
        summary["records"].as_u64().unwrap(),
        "header + every record"
    );
    assert_eq!(summary["packets"], 500);
    assert_eq!(
        summary["end_reasons"]["end"].as_u64().unwrap()
            + summary["end_reasons"]["fin"].as_u64().unwrap()
            + summary["end_reasons"]["rst"].as_u64().unwrap(),
        summary["records"].as_u64().unwrap()
    );
}

#[test]
fn filter_and_privilege_drop_on_a_live_interface() {
    let lab = lab();
    let (_, summary) = live_matches_file(&lab, "android.pcap", &["-f", "udp", "--user", "nobody"]);
    assert_eq!(summary["live"]["kernel_filter"], true);
    assert_eq!(summary["live"]["user"], "nobody");
}

#[test]
fn vlan_filter_runs_on_restored_tags() {
    let lab = lab();
    let (_, summary) = live_matches_file(&lab, "VlanPackets.pcap", &["-f", "vlan"]);
    assert_eq!(summary["live"]["kernel_filter"], false);
}

#[test]
fn live_errors_are_clear() {
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["flows", "-i", "no-such-if0", "--duration", "1s"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no interface named 'no-such-if0'"),
        "{stderr}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["flows", "-i", "lo", "-r", "x.pcap"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "-i and -r together");
}

/// Issue 27 item 13: on loopback every packet passes the tap twice (leaving, then arriving);
/// trawl counts it once, as libpcap does. In a namespace of its own, `lo` carries only what
/// the test sends.
#[test]
fn loopback_counts_each_packet_once() {
    lab_available().unwrap_or_else(|e| panic!("live capture tests need a lab: {e}"));
    let lab = LoopbackLab::new().unwrap_or_else(|e| panic!("cannot make a namespace: {e}"));
    let run = lab
        .command(env!("CARGO_BIN_EXE_trawl"))
        .args(["flows", "-i", "lo", "--duration", "3s", "--summary", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run trawl");
    wait_for_capture(run.id());
    let sent = lab
        .replay_on_lo(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    assert!(sent > 100, "tcpreplay sent {sent}");
    let (records, summary) = wait_json(run);
    assert_eq!(summary["packets"].as_u64(), Some(sent), "{summary}");
    // The kernel showed each packet twice; the summary says where the other copies went.
    assert_eq!(
        summary["live"]["loopback_outgoing_skipped"].as_u64(),
        Some(sent),
        "{summary}"
    );
    let path = pcap("android.pcap");
    assert_eq!(
        conversations(&records),
        conversations(&trawl_file(&["flows", "-r", path.to_str().unwrap()])),
        "the flow records hold each packet once"
    );
}

// ---- `trawl run` and `trawl listen`: the shared ring between processes ----------------------

fn listen_child(ring: &str, extra: &[&str]) -> Child {
    let mut args = vec!["listen", "--ring", ring, "--summary", "json"];
    args.extend_from_slice(extra);
    trawl_live(&args)
}

/// A `trawl run` configuration of the old format (`old`, TOML) converted by `trawl
/// convert-config` into a composition in `dir`: its path.
pub(crate) fn converted(dir: &Path, old: &str) -> std::path::PathBuf {
    let old_path = dir.join("old-trawl.toml");
    std::fs::write(&old_path, old).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["convert-config", old_path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let path = dir.join("converted.toml");
    std::fs::write(&path, &out.stdout).unwrap();
    path
}

/// The counter `name` of every block of type `ty` in a `trawl run --summary json` report,
/// summed (`counters` is a list of `[name, value]` pairs).
pub(crate) fn counter_sum(summary: &serde_json::Value, ty: &str, name: &str) -> u64 {
    blocks_of(summary, ty)
        .iter()
        .flat_map(|b| b["counters"].as_array().unwrap().iter())
        .filter(|c| c[0] == name)
        .map(|c| c[1].as_u64().unwrap())
        .sum()
}

/// The blocks of type `ty` in a `trawl run --summary json` report.
pub(crate) fn blocks_of<'a>(
    summary: &'a serde_json::Value,
    ty: &str,
) -> Vec<&'a serde_json::Value> {
    summary["blocks"]
        .as_array()
        .unwrap_or_else(|| panic!("no blocks in {summary}"))
        .iter()
        .filter(|b| b["type"] == ty)
        .collect()
}

/// A field (`items_in`, `errors`, ...) of every block of type `ty`, summed.
pub(crate) fn field_sum(summary: &serde_json::Value, ty: &str, field: &str) -> u64 {
    blocks_of(summary, ty)
        .iter()
        .map(|b| b[field].as_u64().unwrap())
        .sum()
}

/// Waits for a trawl child that must succeed: its standard output and JSON summary.
pub(crate) fn wait_json(child: Child) -> (String, serde_json::Value) {
    let out = child.wait_with_output().expect("trawl ran");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "trawl failed: {stderr}");
    let summary = serde_json::from_str(stderr.lines().last().unwrap_or(""))
        .unwrap_or_else(|e| panic!("summary not JSON ({e}): {stderr}"));
    (String::from_utf8(out.stdout).expect("utf-8"), summary)
}

fn wait_for_ring(name: &str) {
    let path = format!("/dev/shm/trawl-ring-{name}");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !Path::new(&path).exists() {
        assert!(Instant::now() < deadline, "ring {path} never appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn run_publishes_a_ring_that_other_processes_read_whole() {
    let lab = lab();
    let dir = std::env::temp_dir().join(format!("trawl-run-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let flows = dir.join("flows.jsonl");
    let series = dir.join("series.jsonl");
    let ring_prefix = format!("t{}", std::process::id());
    let ring = format!("{ring_prefix}-{}-0", lab.host);
    let run = trawl_live(&[
        "run",
        "-i",
        &lab.host,
        "--duration",
        "4s",
        "--ring",
        &ring_prefix,
        "--summary",
        "json",
        "--flows",
        flows.to_str().unwrap(),
        "--series",
        series.to_str().unwrap(),
    ]);
    wait_for_ring(&ring);
    let pcap_out = dir.join("listened.pcap");
    let lossless = listen_child(&ring, &["--lossless", "-w", pcap_out.to_str().unwrap()]);
    let lossy = listen_child(&ring, &[]);
    std::thread::sleep(Duration::from_millis(500));
    let sent = file_packets(&pcap("android.pcap"));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let (_, run_summary) = wait_json(run);
    let (_, lossless_summary) = wait_json(lossless);
    let (lines, lossy_summary) = wait_json(lossy);

    // The lossless listener in another process wrote exactly what went on the wire.
    assert_eq!(file_packets(&pcap_out), sent);
    assert_eq!(lossless_summary["records_missed"], 0);
    assert_eq!(
        lossless_summary["ring_closed"], true,
        "the producer closed the ring on exit"
    );
    // The lossy one read or missed every record, and printed one line per packet read.
    let read = lossy_summary["records_read"].as_u64().unwrap();
    assert_eq!(
        read + lossy_summary["records_missed"].as_u64().unwrap(),
        500
    );
    assert_eq!(lines.lines().count() as u64, read);
    assert_eq!(counter_sum(&run_summary, "ring", "published"), 500);
    assert_eq!(counter_sum(&run_summary, "flow_meter", "packets"), 500);
    // Flows and series went to their files meanwhile.
    let from_file = trawl_file(&["flows", "-r", pcap("android.pcap").to_str().unwrap()]);
    assert_eq!(
        conversations(&std::fs::read_to_string(&flows).unwrap()),
        conversations(&from_file)
    );
    let packets_in_series: u64 = std::fs::read_to_string(&series)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["packets"]
                .as_u64()
                .unwrap()
        })
        .sum();
    assert_eq!(packets_in_series, 500);
    assert!(
        !Path::new(&format!("/dev/shm/trawl-ring-{ring}")).exists(),
        "ring file removed"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_ring_source_composition_gets_what_trawl_listen_gets() {
    // `trawl listen` is a composition: the one it prints, run by `trawl run -c` (its pcap on
    // standard output) beside `trawl listen` itself, on the same ring of a real capture.
    let lab = lab();
    let dir = std::env::temp_dir().join(format!("trawl-ring-source-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ring_prefix = format!("c{}", std::process::id());
    let ring = format!("{ring_prefix}-{}-0", lab.host);
    let run = trawl_live(&[
        "run",
        "-i",
        &lab.host,
        "--duration",
        "4s",
        "--ring",
        &ring_prefix,
        "--summary",
        "json",
    ]);
    wait_for_ring(&ring);
    let printed = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["listen", "--ring", &ring, "--lossless", "-w", "-"])
        .arg("--print-composition")
        .output()
        .unwrap();
    assert!(printed.status.success());
    let composition = dir.join("listen.toml");
    std::fs::write(&composition, &printed.stdout).unwrap();
    let text = String::from_utf8_lossy(&printed.stdout);
    assert!(
        text.contains("ring_source") && text.contains("pcap_writer"),
        "{text}"
    );
    let listened = dir.join("listened.pcap");
    let listen = listen_child(&ring, &["--lossless", "-w", listened.to_str().unwrap()]);
    let composed = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args([
            "run",
            "-c",
            composition.to_str().unwrap(),
            "--summary",
            "json",
        ])
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let sent = file_packets(&pcap("android.pcap"));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let (_, run_summary) = wait_json(run);
    assert_eq!(counter_sum(&run_summary, "ring", "published"), 500);
    let (_, listen_summary) = wait_json(listen);
    let out = composed.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let composed_summary: serde_json::Value =
        serde_json::from_str(stderr.lines().last().unwrap()).expect("summary");
    // Both read every packet and wrote the same file, byte for byte.
    assert_eq!(file_packets(&listened), sent);
    assert_eq!(
        std::fs::read(&listened).unwrap(),
        out.stdout,
        "the composition's pcap on standard output is trawl listen's file"
    );
    assert_eq!(listen_summary["records_read"], 500);
    assert_eq!(listen_summary["ring_closed"], true);
    assert_eq!(
        counter_sum(&composed_summary, "ring_source", "records_read"),
        500
    );
    assert_eq!(
        counter_sum(&composed_summary, "ring_source", "ring_closed"),
        1
    );
    assert!(
        !dir.join("-").exists(),
        "`-` is standard output, no file of that name"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_listener_writing_into_a_closed_pipe_ends_cleanly() {
    // `trawl listen -w - | tshark -c 10 -r -`: the reader goes away; the listener's output (the
    // one buffered output of trawl) takes the closed pipe as the end, not as a failure.
    let lab = lab();
    let ring_prefix = format!("p{}", std::process::id());
    let ring = format!("{ring_prefix}-{}-0", lab.host);
    let run = trawl_live(&[
        "run",
        "-i",
        &lab.host,
        "--duration",
        "3s",
        "--ring",
        &ring_prefix,
        "--summary",
        "json",
    ]);
    wait_for_ring(&ring);
    let mut listener = listen_child(&ring, &["--lossless", "-w", "-"]);
    drop(listener.stdout.take());
    std::thread::sleep(Duration::from_millis(500));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let (_, run_summary) = wait_json(run);
    assert_eq!(counter_sum(&run_summary, "ring", "published"), 500);
    let out = listener.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(stderr.lines().last().unwrap()).expect("summary");
    assert_eq!(summary["records_read"], 500, "{summary}");
}

#[test]
fn duplicate_removal_drops_switching_duplicates() {
    let lab = lab();
    // Every packet of the capture twice in a row, as a mirror port that sees it on two links.
    let original = file_packets(&pcap("android.pcap"));
    let dir = std::env::temp_dir().join(format!("trawl-dedup-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let doubled = dir.join("doubled.pcap");
    let mut w = trawl_capture::PcapWriter::new(
        std::fs::File::create(&doubled).unwrap(),
        trawl_capture::LinkType::ETHERNET,
        262_144,
    )
    .unwrap();
    for (i, p) in original.iter().enumerate() {
        for _ in 0..2 {
            w.write(
                1_600_000_000_000_000_000 + i as u64 * 1000,
                p.len() as u32,
                p,
            )
            .unwrap();
        }
    }
    w.finish().unwrap();
    // Replayed at top speed everything falls inside the window, so packets equal in length and
    // first 70 bytes are duplicates whether or not the capture repeated them.
    let distinct: std::collections::HashSet<(usize, &[u8])> = original
        .iter()
        .map(|p| (p.len(), &p[..p.len().min(70)]))
        .collect();
    let run = trawl_live(&[
        "run",
        "-i",
        &lab.host,
        "--duration",
        "3s",
        "--no-ring",
        "--dedup",
        "200ms",
        "--summary",
        "json",
    ]);
    wait_for_capture(run.id());
    lab.replay_into_host(&doubled, &["--topspeed"])
        .expect("replay");
    let (_, summary) = wait_json(run);
    assert_eq!(summary["kernel_packets"], 1000);
    assert!(
        blocks_of(&summary, "flow_meter").is_empty(),
        "no flow or series output: packets counted only"
    );
    assert_eq!(summary["packets"].as_u64(), Some(distinct.len() as u64));
    assert_eq!(
        counter_sum(&summary, "afpacket_source", "duplicates"),
        1000 - distinct.len() as u64
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn listen_says_what_is_wrong() {
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["listen", "--ring", "no-such-ring-here"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("cannot attach to ring 'no-such-ring-here'"),
        "{stderr}"
    );
}

#[test]
fn without_privileges_the_error_says_what_is_needed() {
    let out = Command::new("setpriv")
        .args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            "--inh-caps=-all",
        ])
        .arg(env!("CARGO_BIN_EXE_trawl"))
        .args(["flows", "-i", "lo", "--duration", "1s"])
        .output()
        .expect("setpriv (util-linux)");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("capturing on 'lo' needs root or the CAP_NET_RAW capability"),
        "{stderr}"
    );
}

#[test]
fn workers_are_pinned_to_the_cpus_given() {
    let lab = lab();
    let child = trawl_live(&[
        "flows",
        "-i",
        &lab.host,
        "--duration",
        "2s",
        "--workers",
        "2",
        "--cpus",
        "1,0",
        "--summary",
        "json",
    ]);
    wait_for_capture(child.id());
    let mut pinned = BTreeMap::new();
    for task in std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap() {
        let dir = task.unwrap().path();
        let name = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        // The runtime's threads of the pool `capture` (one per worker).
        if let Some(n) = name.trim().strip_prefix("trawl-capture-") {
            let cpus = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
                .unwrap()
                .trim()
                .to_string();
            pinned.insert(n.to_string(), cpus);
        }
    }
    let (_, summary) = wait_json(child);
    assert_eq!(
        pinned,
        BTreeMap::from([("0".into(), "1".into()), ("1".into(), "0".into())])
    );
    assert_eq!(
        summary["live"]["timestamp_sources"],
        serde_json::json!(["software", "software"]),
        "veth has no hardware clock"
    );
}

// ---- `trawl run -i` is a composition (issue 19) ----------------------------------------------

/// The records of a run as comparable values: each flow record without its capture times
/// (`start_ns`, `end_ns`: two replays differ in them), sorted.
fn records_without_times(path: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).expect("JSON record");
            let o = v.as_object_mut().unwrap();
            o.retain(|k, _| !k.ends_with("_ns"));
            v.to_string()
        })
        .collect();
    out.sort();
    out
}

/// Packets in a JSON-lines series file.
fn series_packets(path: &Path) -> u64 {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["packets"]
                .as_u64()
                .unwrap()
        })
        .sum()
}

/// <https://github.com/trawl/trawl/issues/19>: `trawl run -i IFACE ... --print-composition`
/// prints a composition `trawl check -c -` validates, and running it (`trawl run -c`) gives
/// the same flow records and series as the flags did, android.pcap replayed into each run.
/// Compared: every field of every flow record except its capture times (`*_ns`), sorted, and
/// the packets of the series; and both runs' packet and record counts.
#[test]
fn issue_19_the_printed_composition_validates_and_gives_the_records_the_flags_gave() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let flows = dir.path().join("flows.jsonl");
    let series = dir.path().join("series.jsonl");
    let flags = [
        "run",
        "-i",
        lab.host.as_str(),
        "--workers",
        "2",
        "--no-ring",
        "--flows",
        flows.to_str().unwrap(),
        "--series",
        series.to_str().unwrap(),
        "--duration",
        "3s",
        "--summary",
        "json",
    ];
    let printed = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(flags)
        .arg("--print-composition")
        .output()
        .unwrap();
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );
    assert!(!flows.exists(), "--print-composition runs nothing");
    let composition = dir.path().join("monitor.toml");
    std::fs::write(&composition, &printed.stdout).unwrap();

    let mut check = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["check", "-c", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(check.stdin.as_mut().unwrap(), &printed.stdout).unwrap();
    let checked = check.wait_with_output().unwrap();
    let said = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(said.contains("(standard input): valid"), "{said}");

    // The flags, then the composition: the same outputs, moved away in between.
    let (_, by_flags) = replay_and_wait(&lab, trawl_live(&flags), "android.pcap", false);
    let (flows1, series1) = (
        dir.path().join("flows1.jsonl"),
        dir.path().join("series1.jsonl"),
    );
    std::fs::rename(&flows, &flows1).unwrap();
    std::fs::rename(&series, &series1).unwrap();
    let run_composition = trawl_live(&[
        "run",
        "-c",
        composition.to_str().unwrap(),
        "--summary",
        "json",
    ]);
    let (_, by_composition) = replay_and_wait(&lab, run_composition, "android.pcap", false);

    assert_eq!(by_flags["packets"], 500, "{by_flags}");
    assert_eq!(by_composition["packets"], 500, "{by_composition}");
    let want = records_without_times(&flows1);
    assert!(want.len() > 5, "{want:?}");
    assert_eq!(records_without_times(&flows), want);
    assert_eq!(series_packets(&series1), 500);
    assert_eq!(series_packets(&series), 500);
    assert_eq!(
        counter_sum(&by_flags, "flow_meter", "records"),
        counter_sum(&by_composition, "flow_meter", "records")
    );
}

/// `trawl run --count N` with two workers stops after N packets in total (the runtime's
/// packet budget, shared by both capture blocks), not N per worker.
#[test]
fn issue_19_run_count_is_exact_across_workers() {
    let lab = lab();
    let child = trawl_live(&[
        "run",
        "-i",
        &lab.host,
        "--workers",
        "2",
        "--no-ring",
        "--count",
        "123",
        // Only a bound for a run that would otherwise wait for packets forever.
        "--duration",
        "20s",
        "--summary",
        "json",
    ]);
    // A loaded machine takes a while to start a debug binary: give the sockets time to open.
    std::thread::sleep(Duration::from_millis(1500));
    let (_, summary) = replay_and_wait(&lab, child, "android.pcap", false);
    assert_eq!(summary["packets"], 123, "{summary}");
    assert_eq!(counter_sum(&summary, "count", "items"), 123, "{summary}");
}

/// `--stats-interval` on `trawl run -i` prints the status line while it runs, kernel drops
/// included, from the runtime's counters.
#[test]
fn issue_19_run_prints_status_lines_with_packets_and_kernel_drops() {
    let lab = lab();
    let child = trawl_live(&[
        "run",
        "-i",
        &lab.host,
        "--no-ring",
        "--stats-interval",
        "300ms",
        "--duration",
        "3s",
        "--summary",
        "json",
    ]);
    wait_for_capture(child.id());
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("trawl: ") && l.contains(" packets ("))
        .collect();
    assert!(lines.len() >= 5, "{stderr}");
    assert!(
        lines.iter().all(|l| l.contains(" kernel drops")),
        "{stderr}"
    );
    assert!(
        lines.last().unwrap().contains(": 500 packets ("),
        "{stderr}"
    );
}

// ---- `trawl flows -i` / `series -i` with every option run on the block runtime (issue 19) ---

/// A JSON record without the fields a collector cannot have (the interface, which IPFIX
/// carries as the observation domain, and the payload bytes, which it does not export), as a
/// comparable string.
fn without_iface_and_payload(line: &str) -> String {
    let mut v: serde_json::Value = serde_json::from_str(line).expect("JSON record");
    let m = v.as_object_mut().unwrap();
    for k in ["iface", "fwd_payload", "rev_payload"] {
        m.remove(k);
    }
    v.to_string()
}

/// Per direction of a conversation (`proto src dst vlan`), the payload bytes of its first
/// record.
fn first_payloads(jsonl: &str) -> BTreeMap<String, (String, String)> {
    let mut first = BTreeMap::<String, (u64, String, String)>::new();
    for line in jsonl.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON record");
        let key = format!(
            "{} {}:{} {}:{} vlan {}",
            v["proto"], v["src_ip"], v["src_port"], v["dst_ip"], v["dst_port"], v["vlan"]
        );
        let start = v["first_ns"].as_u64().unwrap();
        let payload = |k: &str| {
            v[k].as_str()
                .unwrap_or_else(|| panic!("record without {k}: {line}"))
                .to_string()
        };
        let e = first
            .entry(key)
            .or_insert((u64::MAX, String::new(), String::new()));
        if start < e.0 {
            *e = (start, payload("fwd_payload"), payload("rev_payload"));
        }
    }
    first
        .into_iter()
        .map(|(k, (_, f, r))| (k, (f, r)))
        .collect()
}

/// `trawl flows -i A -i B` with payload bytes, an IPFIX exporter and the multicast flow feed,
/// all at once: the records name their interface and hold what the captures replayed into
/// each hold (conversations and first payload bytes as `trawl flows -r` finds them); the
/// collector gets every record under each interface's index; the feed sends each interface's
/// records to its own group (`trawl subscribe --slot`).
#[test]
fn issue_19_flows_of_two_interfaces_with_payload_export_and_feed_are_those_of_the_files() {
    let (a, b, c) = (lab(), lab(), lab());
    // The feed leaves through a third link that nobody captures on.
    let n = std::process::id() % 200 + 20;
    let addr = format!("10.{n}.79.1");
    let ip = Command::new("ip")
        .args(["addr", "add", &format!("{addr}/24"), "dev", &c.host])
        .status()
        .unwrap();
    assert!(ip.success());
    let index = |iface: &str| -> u32 {
        std::fs::read_to_string(format!("/sys/class/net/{iface}/ifindex"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let collector = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = collector.local_addr().unwrap().port();
    let (done, rx) = std::sync::mpsc::channel();
    let receiver = std::thread::spawn(move || crate::export::collect_ipfix(collector, rx));
    let feed_port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let feed = format!("239.255.79.1:{feed_port}");
    let subscriber = |slot: &str| {
        Command::new(env!("CARGO_BIN_EXE_trawl"))
            .args(["subscribe", "flows", "--feed", &feed, "--slot", slot])
            .args(["--interface-address", &addr, "--duration", "9s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (sub0, sub1) = (subscriber("0"), subscriber("1"));
    // With exporters, records go to standard output only when -o names a file.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("records.jsonl");
    let child = trawl_live(&[
        "flows",
        "-i",
        &a.host,
        "-i",
        &b.host,
        "--workers",
        "2",
        "--payload-bytes",
        "16",
        "--duration",
        "4s",
        "--summary",
        "json",
        "--export",
        &format!("ipfix+udp://127.0.0.1:{port}"),
        "--flows-feed",
        &feed,
        "--feed-source",
        &addr,
        "-o",
        json.to_str().unwrap(),
    ]);
    wait_for_capture(child.id());
    a.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    b.replay_into_host(&pcap("aerospike.pcap"), &["--topspeed"])
        .expect("replay");
    let (_, summary) = wait_json(child);
    let stdout = std::fs::read_to_string(&json).unwrap();
    done.send(()).unwrap();
    let (collected, domains) = receiver.join().unwrap();

    // The records: conversations and payload bytes of the files, per interface.
    let offline = |name: &str| {
        trawl_file(&[
            "flows",
            "-r",
            pcap(name).to_str().unwrap(),
            "--payload-bytes",
            "16",
        ])
    };
    let (file_a, file_b) = (offline("android.pcap"), offline("aerospike.pcap"));
    let want: BTreeMap<String, _> = [
        (a.host.clone(), conversations(&file_a)),
        (b.host.clone(), conversations(&file_b)),
    ]
    .into_iter()
    .collect();
    assert_eq!(conversations_by_iface(&stdout), want);
    let of = |iface: &str| -> String {
        stdout
            .lines()
            .filter(|l| l.contains(&format!("\"iface\":\"{iface}\"")))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let (live_a, live_b) = (of(&a.host), of(&b.host));
    assert_eq!(first_payloads(&live_a), first_payloads(&file_a));
    assert_eq!(first_payloads(&live_b), first_payloads(&file_b));
    assert!(
        first_payloads(&file_a)
            .values()
            .any(|(f, r)| !f.is_empty() || !r.is_empty()),
        "the capture has payload bytes for the test to mean anything"
    );

    // The collector: every record, under both interfaces' indexes.
    let mut sent: Vec<String> = stdout.lines().map(without_iface_and_payload).collect();
    let mut got: Vec<String> = collected
        .iter()
        .map(|l| without_iface_and_payload(l))
        .collect();
    sent.sort();
    got.sort();
    assert_eq!(got, sent);
    let mut domains = domains;
    domains.sort();
    let mut want_domains = vec![index(&a.host), index(&b.host)];
    want_domains.sort();
    assert_eq!(domains, want_domains);
    let e = &summary["exporters"][0];
    assert_eq!(e["records"].as_u64(), Some(sent.len() as u64), "{summary}");

    // The feed: each interface's records in its own group.
    for (sub, records) in [(sub0, &live_a), (sub1, &live_b)] {
        let out = sub.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut got: Vec<String> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(without_iface_and_payload)
            .collect();
        let mut want: Vec<String> = records.lines().map(without_iface_and_payload).collect();
        got.sort();
        want.sort();
        assert!(!want.is_empty());
        assert_eq!(got, want);
    }
}

/// `trawl series -i` with an exporter to a UDP collector: its meters export the records
/// `trawl flows -r` finds in the capture replayed, and its rows count every packet.
#[test]
fn issue_19_live_series_exports_the_records_of_its_meters() {
    let lab = lab();
    let collector = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = collector.local_addr().unwrap().port();
    let (done, rx) = std::sync::mpsc::channel();
    let receiver = std::thread::spawn(move || crate::export::collect_ipfix(collector, rx));
    let child = trawl_live(&[
        "series",
        "-i",
        &lab.host,
        "--workers",
        "2",
        "--duration",
        "3s",
        "--summary",
        "json",
        "--export",
        &format!("ipfix+udp://127.0.0.1:{port}"),
    ]);
    let (stdout, summary) = replay_and_wait(&lab, child, "android.pcap", false);
    done.send(()).unwrap();
    let (collected, _) = receiver.join().unwrap();
    let rows: u64 = stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["packets"]
                .as_u64()
                .unwrap()
        })
        .sum();
    let exported: String = collected.iter().map(|l| format!("{l}\n")).collect();
    let from_file = trawl_file(&["flows", "-r", pcap("android.pcap").to_str().unwrap()]);
    assert_eq!(conversations(&exported), conversations(&from_file));
    assert_eq!(rows, 500);
    assert_eq!(
        summary["exporters"][0]["records"].as_u64(),
        Some(collected.len() as u64)
    );
    assert_eq!(
        summary["series_rows"].as_u64(),
        Some(stdout.lines().count() as u64)
    );
}

/// `trawl run` publishes the multicast feeds (refused before the feed blocks): each
/// interface's flow records and per-second rows in its own group, as the records and rows it
/// writes.
#[test]
fn issue_19_run_publishes_the_flow_and_series_feeds_of_each_interface() {
    let (a, b, c) = (lab(), lab(), lab());
    let n = std::process::id() % 200 + 20;
    let addr = format!("10.{n}.80.1");
    let ip = Command::new("ip")
        .args(["addr", "add", &format!("{addr}/24"), "dev", &c.host])
        .status()
        .unwrap();
    assert!(ip.success());
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (flows_feed, series_feed) = (
        format!("239.255.80.1:{port}"),
        format!("239.255.80.11:{port}"),
    );
    let subscriber = |kind: &str, feed: &str, slot: &str| {
        Command::new(env!("CARGO_BIN_EXE_trawl"))
            .args(["subscribe", kind, "--feed", feed, "--slot", slot])
            .args(["--interface-address", &addr, "--duration", "9s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let subs = [
        subscriber("flows", &flows_feed, "0"),
        subscriber("flows", &flows_feed, "1"),
        subscriber("series", &series_feed, "0"),
        subscriber("series", &series_feed, "1"),
    ];
    let dir = tempfile::tempdir().unwrap();
    let flows = dir.path().join("flows.jsonl");
    let child = trawl_live(&[
        "run",
        "-i",
        &a.host,
        "-i",
        &b.host,
        "--no-ring",
        "--flows",
        flows.to_str().unwrap(),
        "--flows-feed",
        &flows_feed,
        "--series-feed",
        &series_feed,
        "--feed-source",
        &addr,
        "--duration",
        "4s",
        "--summary",
        "json",
    ]);
    wait_for_capture(child.id());
    let sent_a = a
        .replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let sent_b = b
        .replay_into_host(&pcap("aerospike.pcap"), &["--topspeed"])
        .expect("replay");
    let (_, summary) = wait_json(child);
    let written = std::fs::read_to_string(&flows).unwrap();
    let [f0, f1, s0, s1] = subs.map(|s| {
        let out = s.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    });
    for (iface, got) in [(&a.host, f0), (&b.host, f1)] {
        let mut want: Vec<String> = written
            .lines()
            .filter(|l| l.contains(&format!("\"iface\":\"{iface}\"")))
            .map(without_iface_and_payload)
            .collect();
        let mut got: Vec<String> = got.lines().map(without_iface_and_payload).collect();
        want.sort();
        got.sort();
        assert!(!want.is_empty(), "{summary}");
        assert_eq!(got, want, "flow feed of {iface}");
    }
    let inbound = |rows: &str| -> u64 {
        rows.lines()
            .map(|l| {
                serde_json::from_str::<serde_json::Value>(l).unwrap()["in_packets"]
                    .as_u64()
                    .unwrap()
            })
            .sum()
    };
    assert_eq!(inbound(&s0), sent_a, "series feed of interface 0");
    assert_eq!(inbound(&s1), sent_b, "series feed of interface 1");
    assert_ne!(sent_a, sent_b);
}
