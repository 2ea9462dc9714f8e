//! sFlow v5 in `trawl collect`: captured datagrams read with `-r` give scaled, sampled flow
//! records (checked field by field on tcpdump's captures), malformed samples are counted and
//! named while the rest is kept, and the same datagrams replayed over real UDP sockets to
//! `trawl collect --listen sflow://` and to pmacct's `sfacctd` give the same totals per flow.
use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn trawl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .output()
        .expect("run trawl")
}

fn pcap(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcaps")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

fn summary(out: &Output) -> Value {
    let stderr = String::from_utf8_lossy(&out.stderr);
    serde_json::from_str(stderr.lines().last().unwrap_or("")).unwrap_or_else(|e| {
        panic!("no JSON summary ({e}): {stderr}");
    })
}

fn records(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn collect_reads_sflow_captures_into_scaled_sampled_records() {
    let out = trawl(&[
        "collect",
        "-r",
        &pcap("sflow_expanded.pcap"),
        "-r",
        &pcap("sflow-print-v6.pcap"),
        "--summary",
        "json",
    ]);
    let s = summary(&out);
    assert!(out.status.success(), "{s}");
    assert_eq!(s["sflow"]["datagrams"], 26, "{s}");
    assert_eq!(s["sflow"]["flow_samples"], 14, "{s}");
    assert_eq!(s["sflow"]["counter_samples"], 48, "{s}");
    assert_eq!(s["capture"]["datagrams"], 26, "{s}");
    let recs = records(&out);
    assert_eq!(recs.len(), 14);
    // The expanded sample (tshark: rate 1000, frame 126 bytes, 4 stripped, IPv4 total
    // length 104, in 29001, out 1285816721, TCP PSH+ACK, VLAN 809), at its capture time.
    let r = &recs[0];
    assert_eq!(r["src_ip"], "52.52.52.52");
    assert_eq!(r["dst_ip"], "53.53.53.53");
    assert_eq!(
        (r["src_port"].as_u64(), r["dst_port"].as_u64()),
        (Some(22), Some(52237))
    );
    assert_eq!(r["proto"], "tcp");
    assert_eq!(r["vlan"], 809);
    assert_eq!(r["fwd_packets"], 1000);
    assert_eq!(r["fwd_bytes"], 126_000);
    assert_eq!(r["fwd_ip_bytes"], 104_000);
    assert_eq!(r["fwd_tcp_flags"], 0x18);
    assert_eq!(r["sampling_rate"], 1000);
    assert_eq!(r["agent"], "49.49.49.49");
    assert_eq!(
        (r["in_if"].as_u64(), r["out_if"].as_u64()),
        (Some(29001), Some(1285816721))
    );
    assert_eq!(r["first_ns"], 1_672_326_228_557_763_000u64);
    assert_eq!(r["first_ns"], r["last_ns"]);
    // The v6 agent's samples: rate 1, the agent's IPv6 address.
    assert!(recs[1..]
        .iter()
        .all(|r| r["sampling_rate"] == 1 && r["agent"] == "30::1:1:1"));
    let bytes: u64 = recs[1..]
        .iter()
        .map(|r| r["fwd_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(bytes, 1454, "13 frames of 64, 250 and 500 bytes");
    // Counter samples per agent interface, with the last generic counters.
    let ifs = s["sflow"]["interfaces"].as_array().unwrap();
    let i = ifs
        .iter()
        .find(|i| i["if_index"] == 23001)
        .expect("ifIndex 23001 of 30::1:1:1");
    assert_eq!(i["agent"], "30::1:1:1");
    assert!(i["counter_samples"].as_u64().unwrap() >= 1);
}

#[test]
fn csv_of_sflow_records_has_the_collected_columns() {
    let out = trawl(&[
        "collect",
        "-r",
        &pcap("sflow_expanded.pcap"),
        "--format",
        "csv",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header.len(), row.len());
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap()];
    assert_eq!(
        (
            col("sampling_rate"),
            col("agent"),
            col("in_if"),
            col("out_if")
        ),
        ("1000", "49.49.49.49", "29001", "1285816721")
    );
}

#[test]
fn host_counters_and_netflow_on_the_sflow_port_are_read() {
    let out = trawl(&[
        "collect",
        "-r",
        &pcap("sflow_multiple_counter_30_pdus.pcap"),
        "--summary",
        "json",
    ]);
    let s = summary(&out);
    assert!(out.status.success(), "{s}");
    // 25 sFlow datagrams with 144 counter samples (two of host counters, formats 2000-2006),
    // and five NetFlow v5 datagrams sent to the sFlow port, decoded as NetFlow (7 records:
    // tshark's cflow dissector counts 1, 2, 1, 2, 1).
    assert_eq!(s["sflow"]["datagrams"], 25, "{s}");
    assert_eq!(s["sflow"]["counter_samples"], 144, "{s}");
    assert_eq!(s["messages_v5"], 5, "{s}");
    assert_eq!(s["flows"], 7, "{s}");
    // tshark: 94 (agent, ifIndex) pairs in the generic interface counters.
    assert_eq!(
        s["sflow"]["interfaces"].as_array().unwrap().len(),
        94,
        "{s}"
    );
}

/// The UDP payloads of a capture, by tshark (not by trawl: the replay must not depend on the
/// code under test).
fn datagrams(name: &str) -> Vec<Vec<u8>> {
    let out = Command::new("tshark")
        .args(["-r", &pcap(name), "-T", "fields", "-e", "udp.payload"])
        .output()
        .expect("tshark is required (scripts/deps.sh installs it)");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| {
            (0..l.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&l[i..i + 2], 16).unwrap())
                .collect()
        })
        .collect()
}

fn free_udp_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until something binds `port` (our probe can no longer bind it).
fn wait_bound(port: u16, what: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while UdpSocket::bind(("127.0.0.1", port)).is_ok() {
        assert!(Instant::now() < deadline, "{what} did not bind port {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

struct Sfacctd {
    child: Child,
    dir: PathBuf,
}

impl Sfacctd {
    /// pmacct's sFlow collector, summing packets and bytes per 5-tuple scaled by the sampling
    /// rate (`sfacctd_renormalize`), printed as CSV every second.
    fn start(port: u16, dir: &Path) -> Sfacctd {
        let conf = dir.join("sfacctd.conf");
        std::fs::write(
            &conf,
            format!(
                "daemonize: false\nsfacctd_ip: 127.0.0.1\nsfacctd_port: {port}\n\
                 sfacctd_renormalize: true\nplugins: print\n\
                 aggregate: src_host, dst_host, src_port, dst_port, proto\n\
                 print_output: csv\nprint_output_file: {}\nprint_output_file_append: true\n\
                 print_refresh_time: 1\n",
                dir.join("out.csv").display()
            ),
        )
        .unwrap();
        let log = std::fs::File::create(dir.join("sfacctd.log")).unwrap();
        let child = Command::new("sfacctd")
            .arg("-f")
            .arg(&conf)
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("sfacctd (Debian's pmacct) is required (scripts/deps.sh installs it)");
        wait_bound(port, "sfacctd");
        // Its print plugin starts after the core binds; data before that is lost.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let log = std::fs::read_to_string(dir.join("sfacctd.log")).unwrap_or_default();
            if log.contains("cache entries=") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "sfacctd's print plugin did not start:\n{log}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::thread::sleep(Duration::from_millis(500));
        Sfacctd {
            child,
            dir: dir.to_path_buf(),
        }
    }

    /// Totals per (src, dst, sport, dport, proto) once `want_packets` are printed.
    fn totals(mut self, want_packets: u64) -> BTreeMap<String, (u64, u64)> {
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut totals;
        loop {
            totals = BTreeMap::new();
            let text = std::fs::read_to_string(self.dir.join("out.csv")).unwrap_or_default();
            for l in text.lines().filter(|l| !l.starts_with("SRC_IP")) {
                let c: Vec<&str> = l.split(',').collect();
                let proto = match c[4] {
                    "tcp" => "6".to_string(),
                    "udp" => "17".to_string(),
                    "icmp" => "1".to_string(),
                    "ipv6-icmp" | "icmpv6" => "58".to_string(),
                    p => p.to_string(),
                };
                let key = format!("{} {} {} {} {proto}", c[0], c[1], c[2], c[3]);
                let e: &mut (u64, u64) = totals.entry(key).or_default();
                e.0 += c[5].parse::<u64>().unwrap();
                e.1 += c[6].parse::<u64>().unwrap();
            }
            let packets: u64 = totals.values().map(|v| v.0).sum();
            if packets >= want_packets || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        totals
    }
}

fn proto_number(p: &str) -> String {
    match p {
        "tcp" => "6".into(),
        "udp" => "17".into(),
        "icmp" => "1".into(),
        "icmpv6" => "58".into(),
        other => other.into(),
    }
}

#[test]
fn sflow_over_udp_totals_equal_sfacctd() {
    let dir = std::env::temp_dir().join(format!("trawl-sflow-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sent: Vec<Vec<u8>> = ["sflow_expanded.pcap", "sflow-print-v6.pcap"]
        .iter()
        .flat_map(|f| datagrams(f))
        .collect();
    let (ours, theirs) = (free_udp_port(), free_udp_port());
    let sfacctd = Sfacctd::start(theirs, &dir);
    let out_path = dir.join("records.json");
    let collector = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["collect", "--listen", &format!("sflow://127.0.0.1:{ours}")])
        .args([
            "--count",
            "14",
            "--duration",
            "30s",
            "--summary",
            "json",
            "-o",
        ])
        .arg(&out_path)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bound(ours, "trawl collect");
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    for d in &sent {
        sock.send_to(d, ("127.0.0.1", ours)).unwrap();
        sock.send_to(d, ("127.0.0.1", theirs)).unwrap();
    }
    let out = collector.wait_with_output().unwrap();
    let s = summary(&out);
    assert!(out.status.success(), "{s}");
    let mut mine: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in std::fs::read_to_string(&out_path).unwrap().lines() {
        let r: Value = serde_json::from_str(r).unwrap();
        let key = format!(
            "{} {} {} {} {}",
            r["src_ip"].as_str().unwrap(),
            r["dst_ip"].as_str().unwrap(),
            r["src_port"],
            r["dst_port"],
            proto_number(r["proto"].as_str().unwrap())
        );
        let e = mine.entry(key).or_default();
        e.0 += r["fwd_packets"].as_u64().unwrap();
        e.1 += r["fwd_bytes"].as_u64().unwrap();
    }
    let packets: u64 = mine.values().map(|v| v.0).sum();
    let theirs = sfacctd.totals(packets);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(packets, 1013, "1000 scaled + 13 unsampled");
    assert_eq!(mine, theirs);
}

/// Writes the two MaxMind DB files with PyPI's `mmdb-writer`, networks covering some of the
/// captures' addresses (IPv4 and IPv6), some of them in both files.
const WRITE_MMDB: &str = r#"
import sys
from mmdb_writer import MMDBWriter, MmdbU32
from netaddr import IPSet
out = sys.argv[1]
asn = MMDBWriter(ip_version=6, database_type='GeoLite2-ASN', ipv4_compatible=True)
for net, n in [('10.10.10.0/24', 64510), ('52.52.0.0/16', 64512), ('53.53.53.0/24', 64513)]:
    asn.insert_network(IPSet([net]), {'autonomous_system_number': MmdbU32(n),
                                      'autonomous_system_organization': 'AS%d' % n})
asn.to_db_file(out + '/asn.mmdb')
country = MMDBWriter(ip_version=6, database_type='GeoLite2-Country', ipv4_compatible=True)
for net, c in [('50.0.0.0/8', 'SE'), ('52.52.52.0/24', 'US'), ('53.0.0.0/8', 'DE')]:
    country.insert_network(IPSet([net]), {'country': {'iso_code': c, 'names': {'en': c}}})
country.to_db_file(out + '/country.mmdb')
"#;

/// The oracle (also the enrichment test's): python's `maxminddb` reader; one line per address on standard input, one
/// `ASN COUNTRY` line out (0 and `-` when the file has nothing).
pub(crate) const READ_MMDB: &str = r#"
import sys, maxminddb
d = sys.argv[1]
asn = maxminddb.open_database(d + '/asn.mmdb')
country = maxminddb.open_database(d + '/country.mmdb')
for ip in sys.stdin.read().split():
    a = (asn.get(ip) or {}).get('autonomous_system_number', 0)
    c = ((country.get(ip) or {}).get('country') or {}).get('iso_code') or '-'
    print(a, c)
"#;

pub(crate) fn python(script: &str, arg: &Path, input: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .arg(arg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 is required");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "python (pip install mmdb-writer maxminddb; scripts/deps.sh installs them): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn collected_records_are_enriched_as_maxminddb_reads_the_files() {
    let dir = std::env::temp_dir().join(format!("trawl-enrich-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    python(WRITE_MMDB, &dir, "");
    let ifaces = dir.join("interfaces.csv");
    std::fs::write(
        &ifaces,
        "exporter,ifindex,name,description\n\
         49.49.49.49,29001,Ethernet29/1,\"core, uplink\"\n\
         *,7001,Et7/1,access\n",
    )
    .unwrap();
    let (asn, country) = (dir.join("asn.mmdb"), dir.join("country.mmdb"));
    let out = trawl(&[
        "collect",
        "-r",
        &pcap("sflow_expanded.pcap"),
        "-r",
        &pcap("sflow-print-v6.pcap"),
        "--geoip-asn",
        asn.to_str().unwrap(),
        "--geoip-country",
        country.to_str().unwrap(),
        "--interfaces",
        ifaces.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = records(&out);
    assert_eq!(recs.len(), 14);
    let addrs: Vec<&str> = recs
        .iter()
        .flat_map(|r| [r["src_ip"].as_str().unwrap(), r["dst_ip"].as_str().unwrap()])
        .collect();
    let oracle = python(READ_MMDB, &dir, &addrs.join("\n"));
    let expected: Vec<(u64, String)> = oracle
        .lines()
        .map(|l| {
            let (a, c) = l.split_once(' ').unwrap();
            (
                a.parse().unwrap(),
                if c == "-" { String::new() } else { c.into() },
            )
        })
        .collect();
    let mut found = 0;
    for (r, want) in recs.iter().zip(expected.chunks(2)) {
        let got_src = (
            r["src_as"].as_u64().unwrap(),
            r["src_country"].as_str().unwrap().to_string(),
        );
        let got_dst = (
            r["dst_as"].as_u64().unwrap(),
            r["dst_country"].as_str().unwrap().to_string(),
        );
        assert_eq!((&got_src, &got_dst), (&want[0], &want[1]), "{r}");
        found += usize::from(got_src.0 != 0) + usize::from(!got_dst.1.is_empty());
    }
    assert!(
        found >= 10,
        "the files cover the captures' addresses ({found})"
    );
    // 52.52.52.52 (AS 64512, US) -> 53.53.53.53 (AS 64513, DE), by the agent's interfaces.
    let r = &recs[0];
    assert_eq!(
        (r["src_as"].as_u64(), r["dst_as"].as_u64()),
        (Some(64512), Some(64513))
    );
    assert_eq!(
        (r["src_country"].as_str(), r["dst_country"].as_str()),
        (Some("US"), Some("DE"))
    );
    assert_eq!(r["in_if_name"], "Ethernet29/1");
    assert_eq!(r["in_if_description"], "core, uplink");
    assert_eq!(r["out_if_name"], "");
    // The v6 agent's samples come in on 7001 (the `*` line).
    assert!(recs[1..].iter().any(|r| r["in_if_name"] == "Et7/1"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The byte offset of the `header_length` field of the raw packet header record of sample
/// `index` (a compact flow sample) of an sFlow datagram from an IPv6 agent.
fn header_length_offset(d: &[u8], index: usize) -> usize {
    let u = |o: usize| u32::from_be_bytes(d[o..o + 4].try_into().unwrap()) as usize;
    let mut at = 40; // version, address type, IPv6 agent, sub-agent, sequence, uptime, count
    for _ in 0..index {
        at += 8 + u(at + 4);
    }
    assert_eq!(u(at), 1, "sample {index} is a compact flow sample");
    let records = u(at + 8 + 28);
    let mut r = at + 8 + 32;
    for _ in 0..records {
        if u(r) == 1 {
            return r + 8 + 12;
        }
        r += 8 + u(r + 4);
    }
    panic!("no raw packet header in sample {index}");
}

#[test]
fn malformed_sflow_samples_are_named_and_the_rest_kept() {
    // Packet 20 of the IPv6 agent's capture: 2 counter samples, then 6 flow samples. The
    // first flow sample's header is made to claim 65535 bytes: it runs past its record.
    let mut d = datagrams("sflow-print-v6.pcap").swap_remove(19);
    let at = header_length_offset(&d, 2);
    d[at..at + 4].copy_from_slice(&65535u32.to_be_bytes());
    let port = free_udp_port();
    let collector = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["collect", "--listen", &format!("udp://127.0.0.1:{port}")])
        .args(["--count", "5", "--duration", "30s", "--summary", "json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_bound(port, "trawl collect");
    UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .send_to(&d, ("127.0.0.1", port))
        .unwrap();
    let out = collector.wait_with_output().unwrap();
    let s = summary(&out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "decode errors fail the run: {s}"
    );
    assert_eq!(records(&out).len(), 5, "the other five flow samples: {s}");
    assert_eq!(s["errors"]["bad_sample"], 1, "{s}");
    assert_eq!(s["sflow"]["counter_samples"], 2, "{s}");
    let msg = s["error_messages"][0].as_str().unwrap();
    let want = format!("at offset {}: bad_sample (sFlow header: ", at + 4);
    assert!(msg.contains(&want), "{msg} (wanted {want})");
}
