//! Export checked by independent decoders: trawl's IPFIX and NetFlow v9 over real UDP
//! sockets, decoded by tshark's cflow dissector and collected by nfdump's nfcapd, must give
//! the flows, counters and timestamps trawl wrote as JSON in the same run; trawl's collector
//! must decode what softflowd exports and match softflowd's own counts; feeds cross network
//! namespaces.
use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_trawl")
}

fn testdata(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata")
        .join(rel)
        .to_string_lossy()
        .into_owned()
}

/// A scratch directory for one test, removed with the guard (also when the test fails).
fn tempdir(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!("trawl-export-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    Scratch(d)
}

struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn need(tool: &str) {
    let ok = Command::new(tool)
        .arg(if tool == "nfcapd" || tool == "nfdump" {
            "-V"
        } else {
            "-v"
        })
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok();
    assert!(ok, "`{tool}` is required (scripts/deps.sh installs it)");
}

/// The capture every interop test exports: IPv4 and IPv6, TCP, UDP, ICMP (1723 packets).
fn sample() -> String {
    testdata("oracle/1kxun.pcap.gz")
}

fn read_jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn proto_number(v: &Value) -> u64 {
    match v.as_str().unwrap() {
        "icmp" => 1,
        "igmp" => 2,
        "tcp" => 6,
        "udp" => 17,
        "icmpv6" => 58,
        "gre" => 47,
        "sctp" => 132,
        other => other.parse().unwrap(),
    }
}

/// What the decoders are compared on.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Row {
    src: String,
    sport: u64,
    dst: String,
    dport: u64,
    proto: u64,
    first: u64,
    last: u64,
    fwd: (u64, u64),
    rev: (u64, u64),
    extra: Vec<u64>,
}

fn json_row(r: &Value, time_div: u64, extra: &[&str]) -> Row {
    Row {
        src: r["src_ip"].as_str().unwrap().to_string(),
        sport: r["src_port"].as_u64().unwrap(),
        dst: r["dst_ip"].as_str().unwrap().to_string(),
        dport: r["dst_port"].as_u64().unwrap(),
        proto: proto_number(&r["proto"]),
        first: r["first_ns"].as_u64().unwrap() / time_div,
        last: r["last_ns"].as_u64().unwrap() / time_div,
        fwd: (
            r["fwd_packets"].as_u64().unwrap(),
            r["fwd_ip_bytes"].as_u64().unwrap(),
        ),
        rev: (
            r["rev_packets"].as_u64().unwrap(),
            r["rev_ip_bytes"].as_u64().unwrap(),
        ),
        extra: extra.iter().map(|k| r[*k].as_u64().unwrap()).collect(),
    }
}

/// Runs `trawl flows` on the sample with `--export DEST` (a UDP destination on `port`) and
/// `-o JSON`, receiving every datagram it sends. Returns the datagrams and the JSON records.
fn export_over_udp(scheme: &str, dir: &Path) -> (Vec<Vec<u8>>, u16, Vec<Value>) {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let json = dir.join(format!("{scheme}.jsonl"));
    let mut child = Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "none", "-o"])
        .arg(&json)
        .arg("--export")
        .arg(format!("{scheme}://127.0.0.1:{port}"))
        .spawn()
        .unwrap();
    let mut got = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let mut exited_at = None;
    loop {
        match socket.recv(&mut buf) {
            Ok(n) => got.push(buf[..n].to_vec()),
            Err(_) => {
                if exited_at.is_some_and(|t: Instant| t.elapsed() > Duration::from_millis(500)) {
                    break;
                }
            }
        }
        if exited_at.is_none() && child.try_wait().unwrap().is_some() {
            exited_at = Some(Instant::now());
        }
    }
    assert!(
        child.wait().unwrap().success(),
        "trawl flows --export failed"
    );
    (got, port, read_jsonl(&json))
}

/// Wraps UDP payloads into a pcap (Ethernet, IPv4 127.0.0.1 → 127.0.0.1, UDP to `port`) for
/// `tshark -r`: the payloads are the exporter's real datagrams.
fn udp_pcap(datagrams: &[Vec<u8>], port: u16, path: &Path) {
    let f = std::fs::File::create(path).unwrap();
    let mut w =
        trawl_capture::PcapWriter::new(f, trawl_capture::LinkType::ETHERNET, 65_535).unwrap();
    for (i, d) in datagrams.iter().enumerate() {
        let mut frame = vec![0u8; 12];
        frame.extend_from_slice(&[0x08, 0x00]);
        let total = (20 + 8 + d.len()) as u16;
        frame.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            0,
            0x40,
            0,
            64,
            17,
            0,
            0,
        ]);
        frame.extend_from_slice(&[127, 0, 0, 1, 127, 0, 0, 1]);
        let ulen = (8 + d.len()) as u16;
        frame.extend_from_slice(&40000u16.to_be_bytes());
        frame.extend_from_slice(&port.to_be_bytes());
        frame.extend_from_slice(&ulen.to_be_bytes());
        frame.extend_from_slice(&[0, 0]);
        frame.extend_from_slice(d);
        let len = frame.len() as u32;
        w.write(1_700_000_000_000_000_000 + i as u64 * 1000, len, &frame)
            .unwrap();
    }
    w.finish().unwrap();
}

/// tshark's `-T json` of a pcap, cflow layers only.
fn tshark_cflow(pcap: &Path, port: u16) -> Vec<serde_json::Map<String, Value>> {
    need("tshark");
    let out = Command::new("tshark")
        .args(["-r"])
        .arg(pcap)
        .args([
            "-d",
            &format!("udp.port=={port},cflow"),
            // tshark keeps templates of at most 60 fields by default (its preference
            // `cflow.max_template_fields`, 0 = no limit); trawl's IPFIX flow templates have 61
            // with communityId, and a template tshark does not keep leaves its data undecoded.
            "-o",
            "cflow.max_template_fields:0",
            "-T",
            "json",
            "--no-duplicate-keys",
        ])
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["_source"]["layers"]["cflow"].as_object().cloned())
        .collect()
}

/// The data records of a cflow layer, in order.
fn cflow_flows(layer: &serde_json::Map<String, Value>) -> Vec<serde_json::Map<String, Value>> {
    let mut flows = Vec::new();
    for (k, set) in layer {
        if (k.starts_with("Set ") || k.starts_with("FlowSet ")) && k.contains("flows") {
            for (fk, f) in set.as_object().unwrap() {
                if fk.starts_with("Flow ") {
                    flows.push(f.as_object().unwrap().clone());
                }
            }
        }
    }
    flows
}

fn num(v: &Value) -> u64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a string: {v}"));
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).unwrap(),
        None => s.parse().unwrap(),
    }
}

/// `"Jan 13, 2017 14:50:32.896759000 UTC"` → ns since the epoch.
fn tshark_time(s: &str) -> u64 {
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let parts: Vec<&str> = s.split_whitespace().collect();
    let month = months.iter().position(|m| *m == parts[0]).unwrap() as i64 + 1;
    let day: i64 = parts[1].trim_end_matches(',').parse().unwrap();
    let year: i64 = parts[2].parse().unwrap();
    let (hms, frac) = parts[3].split_once('.').unwrap();
    let hms: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let ns: u64 = format!("{frac:0<9}").parse().unwrap();
    let days = days_from_civil(year, month, day);
    (days * 86_400 + hms[0] * 3600 + hms[1] * 60 + hms[2]) as u64 * 1_000_000_000 + ns
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn addr(f: &serde_json::Map<String, Value>, v4: &str, v6: &str) -> String {
    f.get(v4)
        .or_else(|| f.get(v6))
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no {v4}/{v6} in {f:?}"))
        .to_string()
}

fn pair(v: &Value) -> (u64, u64) {
    let a = v
        .as_array()
        .unwrap_or_else(|| panic!("not forward and reverse: {v}"));
    (num(&a[0]), num(&a[1]))
}

#[test]
fn ipfix_over_udp_decoded_by_tshark_matches_the_json_records() {
    let dir = tempdir("tshark-ipfix");
    let (datagrams, port, records) = export_over_udp("ipfix+udp", &dir);
    assert!(records.len() > 50, "{} records", records.len());
    let pcap = dir.join("ipfix.pcap");
    udp_pcap(&datagrams, port, &pcap);
    // Sent with UDP segmentation offload: every full message is padded to exactly 1472
    // bytes (the segment size), so tshark reads the padded layout.
    let full = datagrams.iter().filter(|d| d.len() == 1472).count();
    assert!(
        full * 2 > datagrams.len(),
        "{full} of {} datagrams are 1472 bytes",
        datagrams.len()
    );
    assert!(datagrams.iter().all(|d| d.len() <= 1472));
    let layers = tshark_cflow(&pcap, port);
    assert_eq!(
        layers.len(),
        datagrams.len(),
        "tshark decoded every datagram"
    );
    let mut from_tshark = Vec::new();
    let mut sequence = 0u64;
    for (i, layer) in layers.iter().enumerate() {
        assert_eq!(num(&layer["cflow.version"]), 10);
        assert_eq!(num(&layer["cflow.od_id"]), 1, "observation domain of files");
        // RFC 7011: the sequence number counts the data records sent before the message.
        assert_eq!(num(&layer["cflow.sequence"]), sequence, "message {i}");
        let flows = cflow_flows(layer);
        sequence += flows.len() as u64;
        for f in flows {
            let times = f["cflow.timedelta_tree"].as_array().unwrap();
            from_tshark.push(Row {
                src: addr(&f, "cflow.srcaddr", "cflow.srcaddrv6"),
                sport: num(&f["cflow.srcport"]),
                dst: addr(&f, "cflow.dstaddr", "cflow.dstaddrv6"),
                dport: num(&f["cflow.dstport"]),
                proto: num(&f["cflow.protocol"]),
                first: tshark_time(times[0]["cflow.abstimestart"].as_str().unwrap()),
                last: tshark_time(times[0]["cflow.abstimeend"].as_str().unwrap()),
                fwd: (pair(&f["cflow.packets"]).0, pair(&f["cflow.octets"]).0),
                rev: (pair(&f["cflow.packets"]).1, pair(&f["cflow.octets"]).1),
                extra: {
                    let l2 = pair(&f["cflow.layer2_octet_delta_count"]);
                    let flags = pair(&f["cflow.tcpflags"]);
                    vec![l2.0, l2.1, flags.0, flags.1, num(&f["cflow.vlanid"])]
                },
            });
        }
    }
    let mut from_json: Vec<Row> = records
        .iter()
        .map(|r| {
            json_row(
                r,
                1,
                &[
                    "fwd_bytes",
                    "rev_bytes",
                    "fwd_tcp_flags",
                    "rev_tcp_flags",
                    "vlan",
                ],
            )
        })
        .collect();
    from_tshark.sort();
    from_json.sort();
    assert_eq!(from_tshark.len(), from_json.len());
    for (t, j) in from_tshark.iter().zip(&from_json) {
        assert_eq!(t, j);
    }
    assert!(
        from_json.iter().any(|r| r.src.contains(':')),
        "IPv6 flows exported too"
    );
}

#[test]
fn netflow_v9_over_udp_decoded_by_tshark_matches_the_json_records() {
    let dir = tempdir("tshark-v9");
    let (datagrams, port, records) = export_over_udp("netflow9+udp", &dir);
    let pcap = dir.join("v9.pcap");
    udp_pcap(&datagrams, port, &pcap);
    let layers = tshark_cflow(&pcap, port);
    assert_eq!(layers.len(), datagrams.len());
    let mut from_tshark = Vec::new();
    for (i, layer) in layers.iter().enumerate() {
        assert_eq!(num(&layer["cflow.version"]), 9);
        // RFC 3954: the sequence number counts export packets.
        assert_eq!(num(&layer["cflow.sequence"]), i as u64);
        let secs = num(&layer["cflow.timestamp_tree"]["cflow.unix_secs"]);
        let uptime_ms = ms(&layer["cflow.sysuptime"]);
        let boot_ms = secs * 1000 - uptime_ms;
        for f in cflow_flows(layer) {
            let t = &f["cflow.timedelta_tree"];
            from_tshark.push(Row {
                src: addr(&f, "cflow.srcaddr", "cflow.srcaddrv6"),
                sport: num(&f["cflow.srcport"]),
                dst: addr(&f, "cflow.dstaddr", "cflow.dstaddrv6"),
                dport: num(&f["cflow.dstport"]),
                proto: num(&f["cflow.protocol"]),
                first: boot_ms + ms(&t["cflow.timestart"]),
                last: boot_ms + ms(&t["cflow.timeend"]),
                fwd: (num(&f["cflow.packets"]), num(&f["cflow.octets"])),
                rev: (num(&f["cflow.post_packets"]), num(&f["cflow.post_octets"])),
                extra: vec![num(&f["cflow.tcpflags"])],
            });
        }
    }
    let mut from_json: Vec<Row> = records
        .iter()
        .map(|r| {
            let mut row = json_row(r, 1_000_000, &[]);
            // v9's TCP_FLAGS is the union of both directions.
            row.extra =
                vec![r["fwd_tcp_flags"].as_u64().unwrap() | r["rev_tcp_flags"].as_u64().unwrap()];
            row
        })
        .collect();
    from_tshark.sort();
    from_json.sort();
    assert_eq!(from_tshark, from_json);
}

/// `"86400.319000000"` (seconds) → ms.
fn ms(v: &Value) -> u64 {
    let s = v.as_str().unwrap();
    let (a, b) = s.split_once('.').unwrap_or((s, "0"));
    a.parse::<u64>().unwrap() * 1000 + format!("{b:0<3}")[..3].parse::<u64>().unwrap()
}

struct Nfcapd {
    child: Child,
    dir: PathBuf,
}

impl Nfcapd {
    fn start(port: u16, dir: &Path) -> Nfcapd {
        need("nfcapd");
        let data = dir.join("nfcapd");
        std::fs::create_dir_all(&data).unwrap();
        // Verbose, so that its complaints (say, about a data set's padding) land in its log.
        let log = std::fs::File::create(dir.join("nfcapd.log")).unwrap();
        let child = Command::new("nfcapd")
            .args(["-v", "-p", &port.to_string(), "-b", "127.0.0.1", "-w"])
            .arg(&data)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        // nfcapd is ready once it has bound its port.
        let deadline = Instant::now() + Duration::from_secs(5);
        while UdpSocket::bind(("127.0.0.1", port)).is_ok() {
            assert!(Instant::now() < deadline, "nfcapd did not bind port {port}");
            std::thread::sleep(Duration::from_millis(20));
        }
        Nfcapd { child, dir: data }
    }

    /// Stops nfcapd (it writes its file on SIGTERM) and reads the flows back with nfdump.
    fn stop_and_dump(mut self) -> Vec<Value> {
        std::thread::sleep(Duration::from_millis(500));
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let log = std::fs::read_to_string(self.dir.with_file_name("nfcapd.log")).unwrap();
        assert!(
            !log.lines()
                .any(|l| l.contains("ERROR") || l.contains("Skip")),
            "nfcapd complained:\n{log}"
        );
        let out = Command::new("nfdump")
            .env("TZ", "UTC")
            .arg("-R")
            .arg(&self.dir)
            .args(["-o", "json"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }
}

/// nfdump's `"2017-01-13T14:50:32.896"` (TZ=UTC) → ms since the epoch.
fn nfdump_ms(s: &str) -> u64 {
    let (date, time) = s.split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|x| x.parse().unwrap()).collect();
    let (hms, frac) = time.split_once('.').unwrap();
    let t: Vec<i64> = hms.split(':').map(|x| x.parse().unwrap()).collect();
    let days = days_from_civil(d[0], d[1], d[2]);
    (days * 86_400 + t[0] * 3600 + t[1] * 60 + t[2]) as u64 * 1000 + frac.parse::<u64>().unwrap()
}

fn nfdump_rows(flows: &[Value]) -> Vec<Row> {
    flows
        .iter()
        .map(|f| Row {
            src: f
                .get("src4_addr")
                .or(f.get("src6_addr"))
                .unwrap()
                .as_str()
                .unwrap()
                .into(),
            sport: f["src_port"].as_u64().unwrap(),
            dst: f
                .get("dst4_addr")
                .or(f.get("dst6_addr"))
                .unwrap()
                .as_str()
                .unwrap()
                .into(),
            dport: f["dst_port"].as_u64().unwrap(),
            proto: f["proto"].as_u64().unwrap(),
            first: nfdump_ms(f["first"].as_str().unwrap()),
            last: nfdump_ms(f["last"].as_str().unwrap()),
            fwd: (
                f["in_packets"].as_u64().unwrap(),
                f["in_bytes"].as_u64().unwrap(),
            ),
            rev: (
                f["out_packets"].as_u64().unwrap_or(0),
                f["out_bytes"].as_u64().unwrap_or(0),
            ),
            extra: vec![],
        })
        .collect()
}

fn nfcapd_matches_json(scheme: &str) {
    let dir = tempdir(&format!("nfcapd-{scheme}"));
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nfcapd = Nfcapd::start(port, &dir);
    let json = dir.join("flows.jsonl");
    let status = Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "none", "-o"])
        .arg(&json)
        .arg("--export")
        .arg(format!("{scheme}://127.0.0.1:{port}"))
        .status()
        .unwrap();
    assert!(status.success());
    let from_nfdump = nfdump_rows(&nfcapd.stop_and_dump());
    let from_json: Vec<Row> = read_jsonl(&json)
        .iter()
        .map(|r| json_row(r, 1_000_000, &[]))
        .collect();
    assert_same_rows(from_nfdump, from_json);
}

#[test]
fn ipfix_collected_by_nfcapd_matches_the_json_records() {
    nfcapd_matches_json("ipfix+udp");
}

#[test]
fn netflow_v9_collected_by_nfcapd_matches_the_json_records() {
    nfcapd_matches_json("netflow9+udp");
}

/// Issue 22: `biflow=off` sends each biflow as two one-way records (the responder's only when
/// it sent packets, its sender as the source), which nfcapd reads as plain flows without
/// RFC 5103's reverse elements: nfdump's flows are the JSON records split by direction.
#[test]
fn ipfix_biflow_off_collected_by_nfcapd_is_each_direction_on_its_own() {
    let dir = tempdir("nfcapd-one-way");
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nfcapd = Nfcapd::start(port, &dir);
    let json = dir.join("flows.jsonl");
    let status = Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "none", "-o"])
        .arg(&json)
        .arg("--export")
        .arg(format!("ipfix+udp://127.0.0.1:{port}?biflow=off"))
        .status()
        .unwrap();
    assert!(status.success());
    let from_nfdump = nfdump_rows(&nfcapd.stop_and_dump());
    let records = read_jsonl(&json);
    let mut want = Vec::new();
    for r in &records {
        let row = json_row(r, 1_000_000, &[]);
        if row.rev.0 > 0 {
            want.push(Row {
                src: row.dst.clone(),
                sport: row.dport,
                dst: row.src.clone(),
                dport: row.sport,
                fwd: row.rev,
                rev: (0, 0),
                ..row.clone()
            });
        }
        want.push(Row { rev: (0, 0), ..row });
    }
    assert!(
        want.len() > records.len(),
        "no record has a reverse direction"
    );
    assert_same_rows(from_nfdump, want);
}

/// softflowd's end-of-run statistics: flows exported as how many records, and octets and
/// packets per protocol.
struct SoftflowdCounts {
    records: u64,
    per_proto: BTreeMap<u64, (u64, u64)>,
}

fn parse_softflowd(text: &str) -> SoftflowdCounts {
    let mut records = None;
    let mut per_proto = BTreeMap::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(rest) = l.strip_prefix("Flows exported: ") {
            // "61 (119 records) in 4 packets (0 failures)"
            let inner = rest.split('(').nth(1).unwrap();
            records = Some(inner.split_whitespace().next().unwrap().parse().unwrap());
        }
        // "tcp (6):         974767         1748      11.60s      42.46s"
        if let Some((name, rest)) = l.split_once("):") {
            if let Some(p) = name.split('(').nth(1) {
                if let Ok(proto) = p.parse::<u64>() {
                    let v: Vec<u64> = rest
                        .split_whitespace()
                        .take(2)
                        .map(|x| x.parse().unwrap())
                        .collect();
                    per_proto.insert(proto, (v[0], v[1]));
                }
            }
        }
    }
    SoftflowdCounts {
        records: records.expect("softflowd printed its export count"),
        per_proto,
    }
}

fn softflowd_to_collector(version: &str) {
    need("softflowd");
    let dir = tempdir(&format!("softflowd-v{version}"));
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = dir.join("collected.jsonl");
    let mut collector = Command::new(bin())
        .args([
            "collect",
            "--listen",
            &format!("udp://127.0.0.1:{port}"),
            "--summary",
            "json",
            "-o",
        ])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // A corpus-style capture in the repository (HTTP, DNS, TLS over IPv4).
    let capture = testdata("oracle/many-protocols.pcap.gz");
    let plain = dir.join("capture.pcap");
    let mut src = trawl_capture::FileSource::open(Path::new(&capture)).unwrap();
    {
        use trawl_capture::PacketSource;
        let f = std::fs::File::create(&plain).unwrap();
        let mut w = None;
        while let Some(b) = src.next_batch().unwrap() {
            for p in b.iter() {
                let w = w.get_or_insert_with(|| {
                    trawl_capture::PcapWriter::new(f.try_clone().unwrap(), p.link_type, 262_144)
                        .unwrap()
                });
                w.write(p.ts_ns, p.wire_len, p.data).unwrap();
            }
        }
        if let Some(w) = w {
            w.finish().unwrap();
        }
    }
    // Reading a file, softflowd needs no control socket (-c would make it wait on one).
    let sf = Command::new("softflowd")
        .arg("-r")
        .arg(&plain)
        .args(["-n", &format!("127.0.0.1:{port}"), "-v", version, "-d"])
        .arg("-p")
        .arg(dir.join("softflowd.pid"))
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&sf.stdout),
        String::from_utf8_lossy(&sf.stderr)
    );
    let counts = parse_softflowd(&text);
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill")
        .args(["-INT", &collector.id().to_string()])
        .status();
    let status = collector.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(collector.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(status.success(), "collector: {err}");
    let summary: Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    let records = read_jsonl(&out);
    assert!(
        counts.records > 10,
        "softflowd exported {} records: {text}",
        counts.records
    );
    assert_eq!(records.len() as u64, counts.records, "{text}");
    assert_eq!(summary["flows"].as_u64().unwrap(), counts.records);
    if version == "9" {
        // (softflowd's IPFIX numbers each message by the records up to and including it, not
        // before it, which tshark flags too: only its v9 sequence can be checked.)
        assert_eq!(
            summary["sequence_missing"], 0,
            "nothing lost on loopback: {summary}"
        );
    }
    let mut per_proto: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for r in &records {
        // Unidirectional records: everything is in the forward counters.
        assert_eq!(r["rev_packets"], 0);
        let e = per_proto.entry(proto_number(&r["proto"])).or_default();
        e.0 += r["fwd_ip_bytes"].as_u64().unwrap();
        e.1 += r["fwd_packets"].as_u64().unwrap();
        assert!(
            r["first_ns"].as_u64().unwrap() > 1_000_000_000_000_000_000,
            "{r}"
        );
    }
    assert_eq!(per_proto, counts.per_proto, "{text}");
}

#[test]
fn collector_decodes_softflowd_netflow_v9_and_matches_its_counts() {
    softflowd_to_collector("9");
}

#[test]
fn collector_decodes_softflowd_ipfix_and_matches_its_counts() {
    softflowd_to_collector("10");
}

#[test]
fn ipfix_file_and_tcp_round_trip_every_field() {
    let dir = tempdir("file-tcp");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let tcp_port = listener.local_addr().unwrap().port();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut all = Vec::new();
        std::io::Read::read_to_end(&mut s, &mut all).unwrap();
        all
    });
    let file = dir.join("flows.ipfix");
    let json = dir.join("flows.jsonl");
    let status = Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "none", "-o"])
        .arg(&json)
        .arg("--export")
        .arg(format!("ipfix:{}", file.display()))
        .arg("--export")
        .arg(format!("ipfix+tcp://127.0.0.1:{tcp_port}"))
        .status()
        .unwrap();
    assert!(status.success());
    let stream = reader.join().unwrap();
    let tcp_file = dir.join("tcp.ipfix");
    std::fs::write(&tcp_file, &stream).unwrap();
    let want = sorted_lines(&std::fs::read_to_string(&json).unwrap());
    for f in [&file, &tcp_file] {
        let back = dir.join("back.jsonl");
        collect_file(f, &back);
        let got = sorted_lines(&std::fs::read_to_string(&back).unwrap());
        // Every field of every record, as trawl writes JSON.
        assert_eq!(got, want, "{}", f.display());
    }
}

/// Issue 26: records of `--features minimal|standard` travel in IPFIX under their level's own
/// templates: the collector reads back every field the level keeps, equal to the level's JSON,
/// gets zeros (or nothing) for the rest, and the file is smaller than `full`'s.
#[test]
fn ipfix_carries_each_feature_level_in_its_own_templates() {
    let dir = tempdir("levels");
    let key = |v: &Value| {
        [
            "src_ip", "src_port", "dst_ip", "dst_port", "proto", "first_ns",
        ]
        .map(|k| v[k].to_string())
        .join(" ")
    };
    let mut sizes = Vec::new();
    for level in ["minimal", "standard", "full"] {
        let file = dir.join(format!("{level}.ipfix"));
        let json = dir.join(format!("{level}.jsonl"));
        let status = Command::new(bin())
            .args([
                "flows",
                "-r",
                &sample(),
                "--summary",
                "none",
                "--features",
                level,
            ])
            .arg("-o")
            .arg(&json)
            .arg("--export")
            .arg(format!("ipfix:{}", file.display()))
            .status()
            .unwrap();
        assert!(status.success(), "{level}");
        sizes.push(std::fs::metadata(&file).unwrap().len());
        let back = dir.join("back.jsonl");
        collect_file(&file, &back);
        let parse = |path: &Path| -> BTreeMap<String, Value> {
            std::fs::read_to_string(path)
                .unwrap()
                .lines()
                .map(|l| {
                    let v: Value = serde_json::from_str(l).unwrap();
                    (key(&v), v)
                })
                .collect()
        };
        let (want, got) = (parse(&json), parse(&back));
        assert!(want.len() > 50, "{level}: {} records", want.len());
        assert_eq!(got.len(), want.len(), "{level}");
        for (k, w) in &want {
            let g = &got[k];
            for (field, value) in w.as_object().unwrap() {
                assert_eq!(&g[field], value, "{level}: {k}: {field}");
            }
            if level != "full" {
                // What the level does not keep did not travel.
                for field in ["fwd_len_std", "rev_iat_std_ns", "fwd_psh", "fwd_cwr"] {
                    assert!(
                        g[field].as_f64().is_none_or(|x| x == 0.0),
                        "{level}: {field}"
                    );
                }
                assert!(
                    g["first_lengths"].as_array().is_none_or(Vec::is_empty),
                    "{level}"
                );
            }
            if level == "minimal" {
                assert!(g["fwd_len_max"].as_u64().is_none_or(|x| x == 0), "{k}");
                assert!(g["fwd_syn"].as_u64().is_none_or(|x| x == 0), "{k}");
            }
        }
    }
    assert!(sizes[0] < sizes[1] && sizes[1] < sizes[2], "{sizes:?}");
}

/// Issues 22/23: the round-trip times, application labels and outer tunnels of `--analyze
/// app --tunnel inner` travel in IPFIX (trawl's extended templates) and `trawl collect`
/// reads them back: the collected records are the exported ones, whole. (A record that came
/// through no tunnel has its tunnel fields null in `--tunnel inner` output, absent in the
/// collector's, which cannot know the mode: those nulls are left out.)
#[test]
fn ipfix_carries_round_trips_app_labels_and_tunnels_to_the_collector() {
    let dir = tempdir("extended");
    let mut kinds = std::collections::BTreeSet::new();
    let (mut rtts, mut apps) = (0, 0);
    for capture in [
        "pcaps/geneve.pcap",
        "pcaps/gtp-iphone.pcap",
        "pcaps/various_gre.pcap",
        "pcaps/teredo.pcap",
        "pcaps/vxlan.pcap",
    ] {
        let file = dir.join("flows.ipfix");
        let json = dir.join("flows.jsonl");
        let status = Command::new(bin())
            .args(["flows", "-r", &testdata(capture), "--summary", "none"])
            .args(["--tunnel", "inner", "--analyze", "app", "-o"])
            .arg(&json)
            .arg("--export")
            .arg(format!("ipfix:{}", file.display()))
            .status()
            .unwrap();
        assert!(status.success(), "{capture}");
        let mut want: Vec<String> = sorted_lines(&std::fs::read_to_string(&json).unwrap())
            .iter()
            .map(|l| without_null_tunnel(l))
            .collect();
        want.sort();
        let back = dir.join("back.jsonl");
        collect_file(&file, &back);
        // Both through the same map, whose keys are sorted.
        let mut got: Vec<String> = sorted_lines(&std::fs::read_to_string(&back).unwrap())
            .iter()
            .map(|l| without_null_tunnel(l))
            .collect();
        got.sort();
        assert_eq!(got, want, "{capture}");
        for l in &want {
            let v: Value = serde_json::from_str(l).unwrap();
            if let Some(k) = v["tunnel_type"].as_str() {
                kinds.insert(k.to_string());
            }
            rtts += usize::from(v["fwd_rtt_samples"].as_u64().unwrap_or(0) > 0);
            apps += usize::from(v["app"].is_string());
        }
    }
    assert!(kinds.len() >= 4, "{kinds:?}");
    assert!(rtts > 5 && apps > 5, "{rtts} timed, {apps} labelled");
}

/// A JSON record without its tunnel fields when they are null (a flow that came through no
/// tunnel).
fn without_null_tunnel(line: &str) -> String {
    let mut v: serde_json::Map<String, Value> = serde_json::from_str(line).unwrap();
    if v.get("tunnel_type").is_some_and(Value::is_null) {
        v.retain(|k, _| !k.starts_with("tunnel_"));
    }
    Value::Object(v).to_string()
}

#[test]
fn a_collector_that_is_down_does_not_stall_the_run() {
    // Nobody listens on the TCP port: records are dropped and counted, the run completes, and
    // fails (exit 1: a capture file's records that were not exported; issue 27).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "json", "--export"])
        .arg(format!("ipfix+tcp://127.0.0.1:{port}"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    let v: Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    let e = &v["exporters"][0];
    assert!(e["records"].as_u64().unwrap() > 50);
    assert_eq!(e["dropped_send"], e["records"], "{e}");
    assert_eq!(e["messages"], 0);
    assert!(out.stdout.is_empty(), "with --export, no records on stdout");
}

#[test]
fn bad_export_destinations_are_usage_errors() {
    let out = Command::new(bin())
        .args([
            "flows",
            "-r",
            &sample(),
            "--export",
            "sflow://127.0.0.1:6343",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown scheme 'sflow'"), "{err}");
}

#[test]
fn malformed_datagrams_are_counted_and_the_rest_decoded() {
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let collector = Command::new(bin())
        .args([
            "collect",
            "--listen",
            &format!("udp://127.0.0.1:{port}"),
            "--summary",
            "json",
            "--duration",
            "2s",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let s = UdpSocket::bind("127.0.0.1:0").unwrap();
    // A valid v5 packet with one record, then garbage of every kind.
    let mut v5 = vec![0u8; 24 + 48];
    v5[0..2].copy_from_slice(&5u16.to_be_bytes());
    v5[2..4].copy_from_slice(&1u16.to_be_bytes());
    v5[8..12].copy_from_slice(&1_700_000_000u32.to_be_bytes());
    v5[24..28].copy_from_slice(&[10, 0, 0, 1]);
    v5[24 + 16..24 + 20].copy_from_slice(&3u32.to_be_bytes());
    s.send_to(&v5, ("127.0.0.1", port)).unwrap();
    s.send_to(&[0, 10, 0], ("127.0.0.1", port)).unwrap(); // short IPFIX header
    s.send_to(&[0, 7, 0, 0], ("127.0.0.1", port)).unwrap(); // version 7
    let mut ipfix = vec![0, 10, 0, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    ipfix.extend_from_slice(&[1, 4, 0, 200]); // data set for template 260, runs past the end
    s.send_to(&ipfix, ("127.0.0.1", port)).unwrap();
    let out = collector.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let v: Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    assert_eq!(v["flows"], 1, "{err}");
    assert_eq!(v["errors"]["short_header"], 1);
    assert_eq!(v["errors"]["unsupported_version"], 1);
    assert_eq!(
        v["errors"]["bad_length"], 1,
        "IPFIX length 40 > 20 received"
    );
    assert_eq!(out.status.code(), Some(1), "decode errors give exit code 1");
    let rec: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().next().unwrap()).unwrap();
    assert_eq!(rec["src_ip"], "10.0.0.1");
    assert_eq!(rec["fwd_packets"], 3);
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Flows and series sent to multicast groups from one network namespace and received by
/// `trawl subscribe` in another, over a real veth link: every record and row arrives, with
/// every field as the sender wrote it as JSON.
#[test]
fn multicast_feeds_reach_a_subscriber_in_another_namespace() {
    use trawl_testkit::netns::{lab_available, VethLab};
    if let Err(e) = lab_available() {
        panic!("the feed test needs a network namespace lab: {e}");
    }
    let lab = VethLab::new(1500).unwrap();
    let n = std::process::id() % 200 + 20;
    let (host_addr, peer_addr) = (format!("10.{n}.77.1"), format!("10.{n}.77.2"));
    ip(&["addr", "add", &format!("{host_addr}/24"), "dev", &lab.host]);
    ip(&[
        "-n",
        &lab.ns,
        "addr",
        "add",
        &format!("{peer_addr}/24"),
        "dev",
        &lab.peer,
    ]);
    let dir = tempdir("feeds");
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (flows_group, series_group) = ("239.255.77.1", "239.255.77.9");

    // What the sender will write as JSON (the same capture, same settings).
    let want_flows = dir.join("want-flows.jsonl");
    let want_series = dir.join("want-series.jsonl");
    assert!(Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "none", "-o"])
        .arg(&want_flows)
        .status()
        .unwrap()
        .success());
    assert!(Command::new(bin())
        .args(["series", "-r", &sample(), "--summary", "none", "-o"])
        .arg(&want_series)
        .status()
        .unwrap()
        .success());
    let want_flows = std::fs::read_to_string(&want_flows).unwrap();
    let want_series = std::fs::read_to_string(&want_series).unwrap();
    let flow_count = want_flows.lines().count();
    let row_count = want_series.lines().count();

    let subscribe = |kind: &str, group: &str, count: usize| {
        Command::new(bin())
            .args(["subscribe", kind, "--feed", &format!("{group}:{port}")])
            .args([
                "--interface-address",
                &host_addr,
                "--count",
                &count.to_string(),
            ])
            .args(["--duration", "20s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let flows_sub = subscribe("flows", flows_group, flow_count);
    // A second application on the same host, same group and port (SO_REUSEADDR).
    let flows_sub2 = subscribe("flows", flows_group, flow_count);
    let series_sub = subscribe("series", series_group, row_count);
    std::thread::sleep(Duration::from_millis(500));

    // The sender, in the other namespace, sends from its address (no route needed).
    let send = |cmd: &str, feed_opt: &str, group: &str| {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                &lab.ns,
                bin(),
                cmd,
                "-r",
                &sample(),
                "--summary",
                "json",
                "-o",
                "/dev/null",
            ])
            .args([
                feed_opt,
                &format!("{group}:{port}"),
                "--feed-source",
                &peer_addr,
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let flows_summary = send("flows", "--flows-feed", flows_group);
    let series_summary = send("series", "--series-feed", series_group);

    let flows_out = flows_sub.wait_with_output().unwrap();
    let flows_out2 = flows_sub2.wait_with_output().unwrap();
    assert_eq!(
        flows_out2.stdout, flows_out.stdout,
        "both subscribers got the same feed"
    );
    let series_out = series_sub.wait_with_output().unwrap();
    assert!(
        flows_out.status.success(),
        "{}",
        String::from_utf8_lossy(&flows_out.stderr)
    );
    let got_flows = String::from_utf8_lossy(&flows_out.stdout);
    assert_eq!(
        sorted_lines(&got_flows),
        sorted_lines(&want_flows),
        "sender: {flows_summary}\nsubscriber: {}",
        String::from_utf8_lossy(&flows_out.stderr)
    );
    let got_series = String::from_utf8_lossy(&series_out.stdout);
    assert_eq!(
        got_series.lines().collect::<Vec<_>>(),
        want_series.lines().collect::<Vec<_>>(),
        "sender: {series_summary}"
    );
}

#[test]
fn stored_series_go_through_the_same_callback_as_live_ones() {
    let dir = tempdir("stored-series");
    let series = dir.join("series.csv");
    assert!(Command::new(bin())
        .args([
            "series",
            "-r",
            &sample(),
            "--summary",
            "none",
            "--format",
            "csv",
            "-o"
        ])
        .arg(&series)
        .status()
        .unwrap()
        .success());
    let text = std::fs::read_to_string(&series).unwrap();
    let seconds: Vec<u64> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    let (from, to) = (seconds[2], seconds[seconds.len() - 3]);
    let out = Command::new(bin())
        .args(["subscribe", "series", "--file"])
        .arg(&series)
        .args(["--from", &from.to_string(), "--to", &to.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let want: Vec<&u64> = seconds.iter().filter(|s| (from..to).contains(*s)).collect();
    assert_eq!(got.len(), want.len());
    assert_eq!(got[0]["second"].as_u64().unwrap(), from);
    // A broken file names the file and line.
    std::fs::write(&series, format!("{}1,2,x,4,5,6,7,8,9\n", text)).unwrap();
    let out = Command::new(bin())
        .args(["subscribe", "series", "--file"])
        .arg(&series)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("line {}", text.lines().count() + 1)) && err.contains("'x'"),
        "{err}"
    );
}

/// Receives IPFIX on `socket` until `done` says the exporter ended and 500 ms passed quietly;
/// returns every record as trawl's JSON line, and the observation domains seen.
pub(crate) fn collect_ipfix(
    socket: UdpSocket,
    done: std::sync::mpsc::Receiver<()>,
) -> (Vec<String>, Vec<u32>) {
    use trawl_export::{Decoder, DecoderConfig, Item};
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut dec = Decoder::new(DecoderConfig::default());
    let mut writer =
        trawl_flow::format::RecordWriter::new(trawl_flow::format::RecordFormat::Json, false);
    let mut out = Vec::new();
    let mut domains = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let mut ended: Option<Instant> = None;
    loop {
        match socket.recv_from(&mut buf) {
            Ok((n, from)) => {
                let (_, err) = dec.decode(from, &buf[..n], &mut |o, item| {
                    if let Item::Flow(r) = item {
                        writer.write(r, &mut out);
                        if !domains.contains(&o.domain) {
                            domains.push(o.domain);
                        }
                    }
                });
                assert!(err.is_none(), "{err:?}");
            }
            Err(_) => {
                if ended.is_none() && done.try_recv().is_ok() {
                    ended = Some(Instant::now());
                }
                if ended.is_some_and(|t| t.elapsed() > Duration::from_millis(500)) {
                    break;
                }
            }
        }
    }
    let text = String::from_utf8(out).unwrap();
    (text.lines().map(str::to_string).collect(), domains)
}

/// Live capture on a veth pair with IPFIX export: every record the capture wrote as JSON
/// arrives by IPFIX with every field, under the interface's index as observation domain; and
/// `trawl run` exports what its configuration's `[[export]]` tables name.
#[test]
fn live_capture_exports_every_record_with_the_interface_as_observation_domain() {
    use trawl_testkit::netns::{lab_available, VethLab};
    if let Err(e) = lab_available() {
        panic!("the live export test needs a network namespace lab: {e}");
    }
    let lab = VethLab::new(9000).unwrap();
    let ifindex: u32 = std::fs::read_to_string(format!("/sys/class/net/{}/ifindex", lab.host))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let dir = tempdir("live");
    let capture = testdata("pcaps/android.pcap");

    // trawl flows -i with --export.
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let (tx, rx) = std::sync::mpsc::channel();
    let receiver = std::thread::spawn(move || collect_ipfix(socket, rx));
    let json = dir.join("live.jsonl");
    let child = Command::new(bin())
        .args([
            "flows",
            "-i",
            &lab.host,
            "--duration",
            "4s",
            "--summary",
            "json",
            "-o",
        ])
        .arg(&json)
        .args(["--export", &format!("ipfix+udp://127.0.0.1:{port}")])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::live::wait_for_capture(child.id());
    lab.replay_into_host(Path::new(&capture), &["--topspeed"])
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tx.send(()).unwrap();
    let (got, domains) = receiver.join().unwrap();
    // IPFIX carries the interface as the observation domain (checked below), JSON by name.
    let want = named_by(
        &lab.host,
        sorted_lines(&std::fs::read_to_string(&json).unwrap()),
    );
    assert!(want.len() > 5, "{} records", want.len());
    let mut got = got;
    got.sort();
    assert_eq!(got, want);
    assert_eq!(domains, vec![ifindex]);

    // trawl run with [[export]] in its configuration (of the old format, converted): an IPFIX
    // file, read back by collect.
    let ipfix = dir.join("run.ipfix");
    let flows = dir.join("run.jsonl");
    let config = crate::live::converted(
        &dir,
        &format!(
            "[capture]\ninterfaces = [\"{}\"]\n[ring]\nenabled = false\n[flows]\noutput = \"{}\"\n[[export]]\nto = \"ipfix:{}\"\n",
            lab.host,
            flows.display(),
            ipfix.display()
        ),
    );
    let child = Command::new(bin())
        .args(["run", "-c"])
        .arg(&config)
        .args(["--duration", "4s", "--summary", "json"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::live::wait_for_capture(child.id());
    lab.replay_into_host(Path::new(&capture), &["--topspeed"])
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back = Command::new(bin())
        .args(["collect", "--summary", "none", "-r"])
        .arg(&ipfix)
        .output()
        .unwrap();
    assert!(back.status.success());
    let got = sorted_lines(&String::from_utf8_lossy(&back.stdout));
    let want = named_by(
        &lab.host,
        sorted_lines(&std::fs::read_to_string(&flows).unwrap()),
    );
    assert!(!want.is_empty());
    assert_eq!(got, want);
}

/// Checks that every JSON record of `lines` names interface `iface`, and returns them sorted
/// without that field (what a collector, which knows the interface as the observation domain,
/// writes).
fn named_by(iface: &str, lines: Vec<String>) -> Vec<String> {
    let field = format!(",\"iface\":\"{iface}\"");
    let mut out: Vec<String> = lines
        .iter()
        .map(|l| {
            assert!(l.contains(&field), "record without {field}: {l}");
            l.replacen(&field, "", 1)
        })
        .collect();
    out.sort();
    out
}

/// One trawl exports IPFIX over TCP, another collects it: every record, every field.
#[test]
fn trawl_collects_trawl_over_tcp() {
    let dir = tempdir("collect-tcp");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let json = dir.join("sent.jsonl");
    let got = dir.join("got.jsonl");
    let collector = Command::new(bin())
        .args([
            "collect",
            "--listen",
            &format!("tcp://127.0.0.1:{port}"),
            "--summary",
            "json",
            "--duration",
            "4s",
            "-o",
        ])
        .arg(&got)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "none", "-o"])
        .arg(&json)
        .args(["--export", &format!("ipfix+tcp://127.0.0.1:{port}")])
        .status()
        .unwrap()
        .success());
    let out = collector.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want = sorted_lines(&std::fs::read_to_string(&json).unwrap());
    assert!(want.len() > 50);
    assert_eq!(sorted_lines(&std::fs::read_to_string(&got).unwrap()), want);
}

/// Live capture on two interfaces with a series feed: each interface's per-second rows go to
/// its own group (the base group plus its position), and add up to what was sent into it.
#[test]
fn live_series_feed_has_one_group_per_interface() {
    use trawl_testkit::netns::{lab_available, VethLab};
    if let Err(e) = lab_available() {
        panic!("the live feed test needs a network namespace lab: {e}");
    }
    let (a, b) = (VethLab::new(9000).unwrap(), VethLab::new(9000).unwrap());
    let n = std::process::id() % 200 + 20;
    let addr = format!("10.{n}.78.1");
    ip(&["addr", "add", &format!("{addr}/24"), "dev", &a.host]);
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let group = "239.255.78.1";
    let subscriber = |slot: &str| {
        Command::new(bin())
            .args([
                "subscribe",
                "series",
                "--feed",
                &format!("{group}:{port}"),
                "--slot",
                slot,
            ])
            .args(["--interface-address", &addr, "--duration", "10s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (sub0, sub1) = (subscriber("0"), subscriber("1"));
    let capture = Command::new(bin())
        .args([
            "series",
            "-i",
            &a.host,
            "-i",
            &b.host,
            "--duration",
            "5s",
            "--summary",
            "none",
            "-o",
            "/dev/null",
        ])
        .args([
            "--series-feed",
            &format!("{group}:{port}"),
            "--feed-source",
            &addr,
        ])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    crate::live::wait_for_capture(capture.id());
    let sent_a = a
        .replay_into_host(Path::new(&testdata("pcaps/android.pcap")), &["--topspeed"])
        .unwrap();
    let sent_b = b
        .replay_into_host(
            Path::new(&testdata("pcaps/VlanPackets.pcap")),
            &["--topspeed"],
        )
        .unwrap();
    let out = capture.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let packets = |child: Child| -> u64 {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            // Inbound only: the feed itself and the subscribers' IGMP reports leave through
            // interface 0 and are captured there as outbound packets.
            .map(|l| {
                serde_json::from_str::<Value>(l).unwrap()["in_packets"]
                    .as_u64()
                    .unwrap()
            })
            .sum()
    };
    assert_eq!(packets(sub0), sent_a, "interface 0's group");
    assert_eq!(packets(sub1), sent_b, "interface 1's group");
    assert_ne!(
        sent_a, sent_b,
        "the two captures must differ for the test to mean anything"
    );
}

#[test]
fn a_truncated_ipfix_file_keeps_its_whole_messages_and_names_the_offset() {
    let dir = tempdir("truncated-file");
    let file = dir.join("flows.ipfix");
    assert!(Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "none", "--export"])
        .arg(format!("ipfix:{}", file.display()))
        .status()
        .unwrap()
        .success());
    let whole = std::fs::read(&file).unwrap();
    let first_len = usize::from(u16::from_be_bytes([whole[2], whole[3]]));
    assert!(whole.len() > first_len + 100, "more than one message");
    // Cut inside the second message.
    std::fs::write(&file, &whole[..first_len + 100]).unwrap();
    let out = Command::new(bin())
        .args(["collect", "--summary", "none", "-r"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    // Nothing on stderr with --summary none, so run again with the text summary.
    assert!(err.is_empty(), "{err}");
    let out2 = Command::new(bin())
        .args(["collect", "-r"])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out2.stderr);
    assert!(
        err.contains(&format!("offset {first_len}: file ends inside a message")),
        "{err}"
    );
    let records = String::from_utf8_lossy(&out.stdout).lines().count();
    assert!(records > 0, "the first message's records are kept");
}

/// NetFlow v5 collected by nfcapd: every IPv4 biflow as one or two unidirectional records
/// with the direction's packets and IP bytes and the biflow's times (ms).
#[test]
fn netflow_v5_collected_by_nfcapd_matches_the_json_records() {
    let dir = tempdir("nfcapd-v5");
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nfcapd = Nfcapd::start(port, &dir);
    let json = dir.join("flows.jsonl");
    let status = Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "none", "-o"])
        .arg(&json)
        .args(["--export", &format!("netflow5+udp://127.0.0.1:{port}")])
        .status()
        .unwrap();
    assert!(status.success());
    let from_nfdump = nfdump_rows(&nfcapd.stop_and_dump());
    let mut want = Vec::new();
    for r in read_jsonl(&json) {
        let row = json_row(&r, 1_000_000, &[]);
        if row.src.contains(':') {
            continue; // v5 carries no IPv6
        }
        want.push(Row {
            rev: (0, 0),
            ..row.clone()
        });
        if row.rev.0 > 0 {
            want.push(Row {
                src: row.dst.clone(),
                sport: row.dport,
                dst: row.src.clone(),
                dport: row.sport,
                fwd: row.rev,
                rev: (0, 0),
                ..row
            });
        }
    }
    assert_same_rows(from_nfdump, want);
}

#[test]
fn collect_applies_the_flow_database_retention() {
    // The collector's database is kept within its rules like `trawl run --db`'s: rules that
    // keep everything delete nothing; an age limit of a day deletes the sample's years-old
    // blocks, a size limit of one byte every block; each summary counts what it deleted.
    let dir = tempdir("collect-retention");
    let file = dir.join("flows.ipfix");
    let status = Command::new(bin())
        .args([
            "flows",
            "-r",
            &sample(),
            "--summary",
            "none",
            "-o",
            "/dev/null",
        ])
        .arg("--export")
        .arg(format!("ipfix:{}", file.display()))
        .status()
        .unwrap();
    assert!(status.success());
    // The flow blocks alone: the series derived from the records (flow_series) are kept out,
    // their files are counted by retention too.
    let collect = |db: &Path, rules: &[&str]| -> Value {
        let out = Command::new(bin())
            .args([
                "collect",
                "--no-output",
                "--no-series-store",
                "--summary",
                "json",
                "-r",
            ])
            .arg(&file)
            .arg("--db")
            .arg(db)
            .args(rules)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        serde_json::from_str(stderr.lines().last().unwrap()).unwrap()
    };
    let block_files = |db: &Path| -> usize {
        let mut n = 0;
        let mut stack = vec![db.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
                if e.path().is_dir() {
                    stack.push(e.path());
                } else if e.path().extension().is_some_and(|x| x == "parquet") {
                    n += 1;
                }
            }
        }
        n
    };
    let kept = dir.join("kept");
    let s = collect(&kept, &["--db-keep-days", "36500", "--db-max-size", "1GiB"]);
    let blocks = s["store"]["blocks"].as_u64().unwrap();
    assert!(blocks >= 1, "{s}");
    assert_eq!(s["store"]["retention"]["blocks_deleted"], 0, "{s}");
    assert_eq!(block_files(&kept) as u64, blocks);
    for (name, rules) in [
        ("aged", ["--db-keep-days", "1"]),
        ("sized", ["--db-max-size", "1"]),
    ] {
        let db = dir.join(name);
        let s = collect(&db, &rules);
        assert_eq!(s["store"]["blocks"], blocks, "{s}");
        assert_eq!(
            s["store"]["retention"]["blocks_deleted"], blocks,
            "{name}: {s}"
        );
        assert_eq!(
            s["store"]["retention"]["bytes_deleted"], s["store"]["bytes"],
            "{name}: {s}"
        );
        assert_eq!(block_files(&db), 0, "{name}");
    }
    // A rule without a database is a usage error.
    let out = Command::new(bin())
        .args(["collect", "--no-output", "--db-keep-days", "3", "-r"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--db"));
}

#[test]
fn collected_records_go_into_the_flow_database() {
    // trawl exports IPFIX to a file; trawl collect stores what it decodes; trawl query's totals
    // per source address equal those of the flow records trawl wrote as JSON.
    let dir = tempdir("collect-db");
    let file = dir.join("flows.ipfix");
    let json = dir.join("flows.jsonl");
    let status = Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "none", "-o"])
        .arg(&json)
        .arg("--export")
        .arg(format!("ipfix:{}", file.display()))
        .status()
        .unwrap();
    assert!(status.success());
    let db = dir.join("db");
    let out = Command::new(bin())
        .args(["collect", "--no-output", "--summary", "json", "-r"])
        .arg(&file)
        .arg("--db")
        .arg(&db)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(summary["store"]["records"], summary["flows"], "{summary}");
    assert!(
        summary["store"]["blocks"].as_u64().unwrap() >= 1,
        "{summary}"
    );
    let q = Command::new(bin())
        .args(["query", "-d"])
        .arg(&db)
        .args(["sip", "--limit", "100000", "--format", "json"])
        .output()
        .unwrap();
    assert!(q.status.success(), "{}", String::from_utf8_lossy(&q.stderr));
    let result: Value = serde_json::from_slice(&q.stdout).unwrap();
    let mut want: BTreeMap<String, [u64; 5]> = BTreeMap::new();
    for r in read_jsonl(&json) {
        let e = want
            .entry(r["src_ip"].as_str().unwrap().to_string())
            .or_default();
        e[0] += r["fwd_packets"].as_u64().unwrap();
        e[1] += r["rev_packets"].as_u64().unwrap();
        e[2] += r["fwd_bytes"].as_u64().unwrap();
        e[3] += r["rev_bytes"].as_u64().unwrap();
        e[4] += 1;
    }
    let got: BTreeMap<String, [u64; 5]> = result["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            (
                r["src_ip"].as_str().unwrap().to_string(),
                [
                    n("fwd_packets"),
                    n("rev_packets"),
                    n("fwd_bytes"),
                    n("rev_bytes"),
                    n("flows"),
                ],
            )
        })
        .collect();
    assert!(!want.is_empty());
    assert_eq!(got, want);
    // A file's records are stored under the file's name without its extension (beside the
    // `series` derived from them).
    let ifaces = |db: &Path| -> Vec<String> {
        std::fs::read_dir(db)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n != "series")
            .collect()
    };
    assert_eq!(ifaces(&db), ["iface=flows"]);
    // Or under the name -i gives.
    let named = dir.join("named");
    let out = Command::new(bin())
        .args([
            "collect",
            "--no-output",
            "--summary",
            "none",
            "-i",
            "edge-7",
            "-r",
        ])
        .arg(&file)
        .arg("--db")
        .arg(&named)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(ifaces(&named), ["iface=edge-7"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// IPFIX over UDP to `trawl collect` in another namespace over a veth of `mtu` bytes (IPv6
/// addresses when `ipv6`): the collector's JSON is exactly what the exporter wrote, every
/// datagram arrived. Returns the exporter's report and the collector's UDP counters.
fn ipfix_udp_through_veth(mtu: u32, ipv6: bool, name: &str) -> (Value, Value) {
    use trawl_testkit::netns::{lab_available, VethLab};
    if let Err(e) = lab_available() {
        panic!("the UDP segmentation test needs a network namespace lab: {e}");
    }
    let lab = VethLab::new(mtu).unwrap();
    let n = (std::process::id() + mtu) % 200 + 20;
    let (host_addr, peer_addr, prefix) = if ipv6 {
        (format!("fd00:{n}:78::1"), format!("fd00:{n}:78::2"), 64)
    } else {
        (format!("10.{n}.78.1"), format!("10.{n}.78.2"), 24)
    };
    if ipv6 {
        lab.set_ipv6(true).unwrap();
    }
    // nodad: usable at once, without duplicate address detection's second of waiting.
    let v6_flags: &[&str] = if ipv6 { &["nodad"] } else { &[] };
    let host_cidr = format!("{host_addr}/{prefix}");
    let mut args = vec!["addr", "add", &host_cidr, "dev", &lab.host];
    args.extend_from_slice(v6_flags);
    ip(&args);
    let peer_cidr = format!("{peer_addr}/{prefix}");
    let mut args = vec!["-n", &lab.ns, "addr", "add", &peer_cidr, "dev", &lab.peer];
    args.extend_from_slice(v6_flags);
    ip(&args);
    let peer_addr = if ipv6 {
        format!("[{peer_addr}]")
    } else {
        peer_addr
    };
    let dir = tempdir(name);
    let port = 4739;
    let (sent, got) = (dir.join("sent.jsonl"), dir.join("got.jsonl"));
    let collector = Command::new("ip")
        .args(["netns", "exec", &lab.ns, bin(), "collect", "--listen"])
        .arg(format!("udp://{peer_addr}:{port}"))
        .args(["--summary", "json", "--duration", "5s", "-o"])
        .arg(&got)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let out = Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "json", "-o"])
        .arg(&sent)
        .args(["--export", &format!("ipfix+udp://{peer_addr}:{port}")])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let report = stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v.get("exporters").is_some())
        .unwrap_or_else(|| panic!("no exporter report in {stderr}"))["exporters"][0]
        .clone();
    let c = collector.wait_with_output().unwrap();
    let cerr = String::from_utf8_lossy(&c.stderr);
    assert!(c.status.success(), "{cerr}");
    let summary: Value = serde_json::from_str(cerr.lines().last().unwrap()).unwrap();
    let want = sorted_lines(&std::fs::read_to_string(&sent).unwrap());
    assert!(want.len() > 50);
    assert_eq!(
        sorted_lines(&std::fs::read_to_string(&got).unwrap()),
        want,
        "mtu {mtu}"
    );
    assert_eq!(report["send_errors"], 0, "{report}");
    assert_eq!(summary["udp"]["datagrams"], report["messages"], "{summary}");
    (report, summary["udp"].clone())
}

/// UDP segmentation offload over a real link (veth, MTU 9000): the exporter keeps it on and
/// the collector in the other namespace decodes every record; on a link whose MTU (1280) is
/// below the 1472-byte segment the kernel refuses segmented sends, and the exporter falls
/// back to one datagram per message (fragmented by IP) without losing any. The collector
/// reads the trains with UDP_GRO.
#[test]
fn udp_segmentation_offload_and_its_fallback_lose_no_record() {
    let (on, udp) = ipfix_udp_through_veth(9000, false, "gso-on");
    assert_eq!(on["gso_segment"], 1472, "{on}");
    assert!(on["gso_refused"].is_null(), "{on}");
    // The veth passes a segmented send whole and the collector's socket takes it as one
    // UDP_GRO train, split back into its datagrams.
    assert!(udp["trains"].as_u64().unwrap() > 0, "{udp}");
    let (off, udp) = ipfix_udp_through_veth(1280, false, "gso-refused");
    assert!(off["gso_segment"].is_null(), "{off}");
    assert!(off["gso_refused"].is_string(), "{off}");
    assert_eq!(udp["trains"], 0, "{udp}");
}

/// To an IPv6 collector over a link of the common 1500-byte MTU the messages are 1452 bytes
/// (40 bytes of IPv6 header instead of IPv4's 20): segments fit, offload stays on, nothing
/// is fragmented. A 1472-byte default made every segmented send fail over to single
/// datagrams here.
#[test]
fn ipv6_collectors_get_messages_that_fit_a_1500_byte_mtu() {
    let (report, udp) = ipfix_udp_through_veth(1500, true, "gso-v6");
    assert_eq!(report["gso_segment"], 1452, "{report}");
    assert!(report["gso_refused"].is_null(), "{report}");
    assert!(udp["trains"].as_u64().unwrap() > 0, "{udp}");
    assert!(
        report["bytes"].as_u64().unwrap() <= report["messages"].as_u64().unwrap() * 1452,
        "{report}"
    );
}

/// `trawl collect` receives with recvmmsg (and waits a moment after emptying the queue, so
/// that datagrams arriving one by one are read in batches): a burst of thousands of datagrams
/// is decoded completely and exactly as one-datagram-at-a-time decoding of the same sequence
/// gives it, in order, with the wait and without; with `--db` the database stores them all.
#[test]
fn batched_receive_loses_nothing_and_decodes_like_one_datagram_at_a_time() {
    use trawl_export::{Decoder, DecoderConfig, Item};
    let dir = tempdir("collect-batched");
    let (datagrams, _, _) = export_over_udp("ipfix+udp", &dir);
    const ROUNDS: usize = 20;
    let from: std::net::SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut dec = Decoder::new(DecoderConfig::default());
    let mut writer =
        trawl_flow::format::RecordWriter::new(trawl_flow::format::RecordFormat::Json, false);
    let mut want = Vec::new();
    for _ in 0..ROUNDS {
        for d in &datagrams {
            dec.decode(from, d, &mut |_, item| {
                if let Item::Flow(r) = item {
                    writer.write(r, &mut want);
                }
            });
        }
    }
    let want = String::from_utf8(want).unwrap();
    let count = want.lines().count();
    assert!(count > 1000 && datagrams.len() * ROUNDS > 1000);
    for (wait, db) in [("1ms", false), ("0", false), ("1ms", true)] {
        let port = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let got = dir.join(format!("got-{wait}-{db}.jsonl"));
        let mut cmd = Command::new(bin());
        cmd.args(["collect", "--listen", &format!("udp://127.0.0.1:{port}")])
            .args(["--recv-wait", wait, "--count", &count.to_string()])
            .args(["--duration", "20s", "--summary", "json", "-o"])
            .arg(&got);
        if db {
            // The flow database on its own thread gets every record too.
            cmd.arg("--db").arg(dir.join("db"));
        }
        let collector = cmd.stderr(Stdio::piped()).spawn().unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..ROUNDS {
            for d in &datagrams {
                tx.send_to(d, ("127.0.0.1", port)).unwrap();
            }
        }
        let out = collector.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        let summary: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
        if db {
            assert_eq!(summary["store"]["records"], count, "{summary}");
        }
        let got = std::fs::read_to_string(&got).unwrap();
        assert_eq!(got.lines().count(), count, "--recv-wait {wait}");
        assert!(got == want, "--recv-wait {wait}: records differ");
    }
}

/// The lines of `s`, sorted (outputs whose order may differ between runs).
/// `trawl collect -r file -o out`, which must succeed.
fn collect_file(file: &Path, out: &Path) {
    let st = Command::new(bin())
        .args(["collect", "-r"])
        .arg(file)
        .args(["--summary", "none", "-o"])
        .arg(out)
        .status()
        .unwrap();
    assert!(st.success(), "trawl collect -r {}", file.display());
}

fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// `got` and `want` hold the same rows in any order (more than 50 of them); the first row
/// that differs is named.
fn assert_same_rows<T: Ord + std::fmt::Debug>(mut got: Vec<T>, mut want: Vec<T>) {
    got.sort();
    want.sort();
    assert!(want.len() > 50);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
}

/// Issue 27 item 10: a damaged IPFIX file's errors name the file and the byte offset in the
/// file (not a made-up exporter address and the offset inside the message); every other set
/// and message is still decoded, and the exit code says some input could not be read.
#[test]
fn a_damaged_ipfix_file_names_the_file_and_the_file_offset() {
    // Two set ids overwritten, at file offsets 41149 (first message) and 96707 (second
    // message, which starts at 65521): see testdata/ipfix/README.md.
    let file = testdata("ipfix/many-protocols-damaged.ipfix");
    let out = Command::new(bin())
        .args(["collect", "--summary", "json", "-r", &file])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "some input could not be read");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let s: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(s["messages_ipfix"], 2, "{s}");
    assert_eq!(s["flows"], 256, "all but the two damaged sets' records");
    assert_eq!(s["records_written"], 256);
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 256);
    assert_eq!(s["errors"]["bad_set_id"], 2);
    let errors: Vec<&str> = s["error_messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(
        errors,
        [
            format!("{file}: offset 41149: bad_set_id (set id 1), in the message at offset 0"),
            format!("{file}: offset 96707: bad_set_id (set id 1), in the message at offset 65521"),
        ],
    );
}

/// Issue 27 item 10: a damaged message header is reported with the file offset and skipped
/// over to the next header, so the messages after it are still decoded.
#[test]
fn a_damaged_ipfix_header_is_skipped_and_the_next_messages_are_read() {
    let dir = tempdir("damaged-header");
    let fixture = std::fs::read(testdata("ipfix/many-protocols-damaged.ipfix")).unwrap();
    // Message 1 (bytes 0..65521, 128 records after its damaged set), message 2 (65521..,
    // 128 records after its damaged set) with its version overwritten, message 1 again.
    let (m1, m2) = fixture.split_at(65_521);
    let mut m2 = m2.to_vec();
    m2[..2].copy_from_slice(&[0xff, 0xff]);
    let file = dir.join("header.ipfix");
    std::fs::write(&file, [m1, &m2, m1].concat()).unwrap();
    let out = Command::new(bin())
        .args(["collect", "--summary", "json", "-r"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "some input could not be read");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let s: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(
        s["messages_ipfix"], 2,
        "the first message and its copy: {s}"
    );
    let errors = s["error_messages"].to_string();
    assert!(
        errors.contains(&format!(
            "{}: offset 65521: not an IPFIX message header (version 65535, length {}); {} bytes \
             skipped to the next header",
            file.display(),
            u16::from_be_bytes([m2[2], m2[3]]),
            m2.len()
        )),
        "{errors}"
    );
    // The copy of message 1 is read from its place after the skipped bytes.
    assert!(
        errors.contains(&format!(
            "offset {}: bad_set_id (set id 1), in the message at offset {}",
            65_521 + m2.len() + 41_149,
            65_521 + m2.len()
        )),
        "{errors}"
    );
}

#[test]
fn collect_writes_what_it_receives_within_a_second_while_it_listens() {
    // Issue 19: the collector's writer flushes on a timer, so a reader of its file sees the
    // records while it still listens (it flushed every 1 MiB or at the end). A real exporter
    // (trawl flows --export over UDP) sends; the collector runs until its --duration, which
    // the runtime enforces.
    let dir = tempdir("collect-flush");
    let port = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let got = dir.join("collected.jsonl");
    let started = Instant::now();
    let mut collector = Command::new(bin())
        .args(["collect", "--listen", &format!("udp://127.0.0.1:{port}")])
        .args(["--duration", "10s", "--summary", "json", "-o"])
        .arg(&got)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let sent = dir.join("sent.jsonl");
    let export = Command::new(bin())
        .args(["flows", "-r", &sample(), "--summary", "none", "-o"])
        .arg(&sent)
        .args(["--export", &format!("ipfix+udp://127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(
        export.status.success(),
        "{}",
        String::from_utf8_lossy(&export.stderr)
    );
    let want = std::fs::read_to_string(&sent).unwrap().lines().count();
    assert!(want > 50, "{want} records sent");
    let lines = || {
        std::fs::read_to_string(&got)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(4);
    while lines() < want && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        collector.try_wait().unwrap().is_none(),
        "the collector still listens"
    );
    assert_eq!(lines(), want, "records in the file while it listens");
    let out = collector.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        started.elapsed() >= Duration::from_secs(10),
        "ran its --duration"
    );
    let summary: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(summary["records_written"], want as u64, "{summary}");
}

#[test]
fn collect_into_a_closed_pipe_ends_cleanly() {
    // A reader that went away (`trawl collect ... | head`) ends the run through the runtime's
    // clean stop (the writer's EPIPE): exit 0 and the summary, no error.
    let dir = tempdir("collect-epipe");
    let file = dir.join("flows.ipfix");
    let export = Command::new(bin())
        .args([
            "flows",
            "-r",
            &sample(),
            "--summary",
            "none",
            "-o",
            "/dev/null",
        ])
        .arg("--export")
        .arg(format!("ipfix:{}", file.display()))
        .output()
        .unwrap();
    assert!(export.status.success());
    let mut collector = Command::new(bin())
        .args(["collect", "--summary", "json", "-r"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(collector.stdout.take());
    let out = collector.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(
        summary["error_messages"],
        serde_json::json!([]),
        "{summary}"
    );
}
