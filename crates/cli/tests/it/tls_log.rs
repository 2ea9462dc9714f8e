//! `trawl logs` writes `tls.jsonl` (issue 23): against tshark's hellos over every committed TLS
//! capture (goldens `testdata/app/tls/*.tls.tsv`, made by scripts/app-oracle.sh with tshark's
//! own TCP reassembly). Per capture, the ClientHellos (SNI, ALPN) and the ServerHellos (chosen
//! cipher) of tshark and of the log lines are compared as multisets; every difference is in
//! `EXPLAINED`, and an explanation that no longer applies fails too.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{summary, testdata, trawl};

/// (capture, reason): captures whose hellos differ from tshark's, and why.
const EXPLAINED: &[(&str, &str)] = &[
    // A direction is read from its first byte: TLS after a plaintext upgrade (STARTTLS-style)
    // is for analysers of the protocol that upgrades.
    (
        "arkime--ldap-ssl.pcap",
        "LDAP StartTLS: the hellos follow an LDAP exchange",
    ),
    (
        "arkime--mysql-tls.pcap",
        "MySQL: the hellos follow the greeting and SSL request",
    ),
    (
        "ndpi--pgsql2.pcapng",
        "PostgreSQL: the hellos follow SSLRequest and its 'S'",
    ),
    // SSLv2-format ClientHellos: refused (`record.type (SSLv2 hello)`); the ServerHello is
    // logged, with the client's error.
    ("arkime--https2-301-get.pcap", "SSLv2-format ClientHello"),
    ("arkime--pppoe.pcap", "SSLv2-format ClientHello"),
    // Malformed hellos (tshark's expert info: vector lengths past the hello): refused with
    // the field named; tshark shows a part.
    (
        "ndpi--tls_cipher_lens.pcap",
        "3 malformed ClientHellos (cipher, compression, extension lengths)",
    ),
    (
        "ndpi--tls_invalid_reads.pcap",
        "a malformed ClientHello, and a hello inside GTP-U",
    ),
    (
        "pcapplusplus--ssl-malformed1.pcap",
        "server_name list past its extension",
    ),
    // Outside TLS: tunnels the decoder does not descend (issue 23's tunnel part).
    (
        "ndpi--capwap_data.pcapng",
        "CAPWAP (802.11 inside UDP) not descended",
    ),
    // A stray 1-byte segment starts the client's direction: the stream is not TLS from its
    // first byte; tshark dissects the next segments alone.
    (
        "ndpi--ossfuzz_seed_fake_traces_1.pcapng",
        "a stray 1-byte segment precedes the hellos",
    ),
];

/// Client hellos as (SNI, ALPN list), server hellos as the chosen cipher, each counted (also
/// the QUIC test's).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Hellos {
    client: BTreeMap<(String, String), usize>,
    server: BTreeMap<String, usize>,
}

/// tshark's TLS lines: frame, handshake types, hello version, SNI, ALPN, ciphers.
fn from_golden(path: &Path) -> Hellos {
    from_golden_columns(path, 1)
}

/// A golden's hellos whose handshake types are in column `types`, followed by the hello
/// version, SNI, ALPN and cipher suites (the QUIC goldens have their versions before them).
pub(crate) fn from_golden_columns(path: &Path, types: usize) -> Hellos {
    let text = std::fs::read_to_string(path).unwrap();
    let mut h = Hellos::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let cols: Vec<&str> = line.split('\t').collect();
        let col = |i: usize| cols.get(types + i).copied().unwrap_or("");
        let kinds: Vec<&str> = col(0).split(',').collect();
        if kinds.contains(&"1") {
            *h.client
                .entry((col(2).to_string(), col(3).to_string()))
                .or_default() += 1;
        }
        if kinds.contains(&"2") {
            // A ServerHello lists its one chosen suite.
            *h.server.entry(col(4).to_string()).or_default() += 1;
        }
    }
    h
}

pub(crate) fn from_lines(lines: &[Value]) -> Hellos {
    let mut h = Hellos::default();
    for l in lines {
        if l.get("ja4").is_some() {
            let alpn: Vec<&str> = l["alpn"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            let sni = l["sni"].as_str().unwrap_or("").to_string();
            *h.client.entry((sni, alpn.join(","))).or_default() += 1;
        }
        if let Some(c) = l["cipher"].as_u64() {
            *h.server.entry(format!("0x{c:04x}")).or_default() += 1;
        }
    }
    h
}

fn tls_captures() -> Vec<PathBuf> {
    let dir = PathBuf::from(testdata("app/tls"));
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.to_string_lossy();
            (n.ends_with(".pcap") || n.ends_with(".pcapng"))
                && p.with_file_name(format!(
                    "{}.tls.tsv",
                    p.file_name().unwrap().to_string_lossy()
                ))
                .exists()
        })
        .collect();
    v.sort();
    v
}

/// `trawl logs` over `capture` into `out`: its TLS lines and its summary.
pub(crate) fn logs(capture: &Path, out: &Path) -> (Vec<Value>, Value) {
    let o = trawl(&[
        "logs",
        "-r",
        capture.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--analyze",
        "tls",
    ]);
    assert!(
        o.status.success(),
        "{}: {}",
        capture.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(out.join("tls.jsonl")).unwrap();
    let lines = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (lines, summary(&o))
}

#[test]
fn tls_log_hellos_equal_tsharks_over_the_tls_captures() {
    let dir = tempfile::tempdir().unwrap();
    let mut differ = BTreeSet::new();
    let mut compared = 0;
    for cap in tls_captures() {
        let name = cap.file_name().unwrap().to_string_lossy().to_string();
        let want = from_golden(&cap.with_file_name(format!("{name}.tls.tsv")));
        let (lines, sum) = logs(&cap, &dir.path().join(&name));
        assert_eq!(
            sum["tls"]["lines"].as_u64(),
            Some(lines.len() as u64),
            "{name}"
        );
        for l in &lines {
            let id = l["community_id"].as_str().unwrap_or_default();
            assert!(id.starts_with("1:") && id.len() == 30, "{name}: {l}");
            assert_eq!(l["proto"], 6, "{name}: {l}");
        }
        let got = from_lines(&lines);
        if got != want {
            println!("{name}:\n  trawl  {got:?}\n  tshark {want:?}");
            differ.insert(name);
        } else {
            compared += lines.len();
        }
    }
    let explained: BTreeSet<String> = EXPLAINED.iter().map(|(c, _)| c.to_string()).collect();
    let unexplained: Vec<_> = differ.difference(&explained).collect();
    let stale: Vec<_> = explained.difference(&differ).collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "unexplained: {unexplained:?}\nexplained but equal now: {stale:?}"
    );
    assert!(compared > 50, "{compared} lines equal tshark's");
}

/// The frames of a capture (Ethernet), with their times.
fn frames(path: &str) -> Vec<(u64, Vec<u8>)> {
    use trawl_capture::{FileSource, PacketSource};
    let mut src = FileSource::open(Path::new(path)).unwrap();
    let mut out = Vec::new();
    while let Some(batch) = src.next_batch().unwrap() {
        for p in batch.iter() {
            assert_eq!(p.link_type, trawl_capture::LinkType::ETHERNET);
            out.push((p.ts_ns, p.data.to_vec()));
        }
    }
    out
}

/// Ethernet + IPv4 + TCP: the offset of the TCP header and of the payload.
fn tcp_offsets(f: &[u8]) -> Option<(usize, usize)> {
    if f.len() < 54 || f[12..14] != [0x08, 0x00] || f[23] != 6 {
        return None;
    }
    let tcp = 14 + usize::from(f[14] & 0x0f) * 4;
    Some((tcp, tcp + usize::from(f[tcp + 12] >> 4) * 4))
}

/// The frame `f` carrying `payload` at `delta` bytes after its own sequence number (IPv4
/// length and checksum set; the TCP checksum, which the decoder does not check, left).
fn segment(f: &[u8], delta: usize, payload: &[u8]) -> Vec<u8> {
    let (tcp, data) = tcp_offsets(f).unwrap();
    let mut out = f[..data].to_vec();
    out.extend_from_slice(payload);
    let ip_len = (out.len() - 14) as u16;
    out[16..18].copy_from_slice(&ip_len.to_be_bytes());
    let seq = u32::from_be_bytes(out[tcp + 4..tcp + 8].try_into().unwrap());
    out[tcp + 4..tcp + 8].copy_from_slice(&seq.wrapping_add(delta as u32).to_be_bytes());
    out[24..26].fill(0);
    let ihl = usize::from(out[14] & 0x0f) * 4;
    let mut sum: u32 = out[14..14 + ihl]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    out[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    out
}

/// A ClientHello cut in three segments that arrive third first, then the first twice (a
/// retransmission), then the second running 4 bytes into the waiting third with other bytes
/// there: the log line is the line of the original capture (the bytes seen first win), and the
/// summary counts what happened.
#[test]
fn tls_log_reads_a_hello_reordered_retransmitted_and_overlapping() {
    let dir = tempfile::tempdir().unwrap();
    let original = testdata("app/tls/arkime--curl-enabled-tls13.pcap");
    let (want, _) = logs(Path::new(&original), &dir.path().join("original"));
    assert_eq!(want.len(), 1, "{want:?}");
    assert_eq!(want[0]["sni"], "enabled.tls13.com");

    let mut frames = frames(&original);
    let at = frames
        .iter()
        .position(|(_, f)| {
            tcp_offsets(f).is_some_and(|(_, d)| f.len() > d + 5 && f[d] == 0x16 && f[d + 5] == 1)
        })
        .expect("a ClientHello frame");
    let (ts, f) = frames[at].clone();
    let payload = &f[tcp_offsets(&f).unwrap().1..];
    let (one, two) = (payload.len() / 3, 2 * payload.len() / 3);
    let mut overlapping = payload[one..two + 4].to_vec();
    overlapping[two - one..].fill(0xee);
    let crafted = [
        segment(&f, two, &payload[two..]),
        segment(&f, 0, &payload[..one]),
        segment(&f, 0, &payload[..one]),
        segment(&f, one, &overlapping),
    ];
    frames.splice(at..=at, crafted.into_iter().map(|c| (ts, c)));
    let path = dir.path().join("crafted.pcap");
    let mut w = trawl_capture::PcapWriter::new(
        std::fs::File::create(&path).unwrap(),
        trawl_capture::LinkType::ETHERNET,
        65535,
    )
    .unwrap();
    for (ts, f) in &frames {
        w.write(*ts, f.len() as u32, f).unwrap();
    }
    w.finish().unwrap();

    let (got, sum) = logs(&path, &dir.path().join("crafted"));
    assert_eq!(got, want);
    let tls = &sum["tls"];
    assert!(tls["out_of_order"].as_u64().unwrap() >= 1, "{tls}");
    assert!(tls["retransmitted"].as_u64().unwrap() >= 1, "{tls}");
    assert!(tls["overlaps"].as_u64().unwrap() >= 1, "{tls}");
    assert!(tls["overlap_conflicts"].as_u64().unwrap() >= 1, "{tls}");
    assert_eq!(tls["gaps"], 0, "{tls}");
}

/// A ClientHello whose middle segment never comes: the line says where the gap was (once the
/// connection ends), and the summary counts it.
#[test]
fn tls_log_names_a_gap_before_the_hello_was_whole() {
    let dir = tempfile::tempdir().unwrap();
    let original = testdata("app/tls/arkime--curl-enabled-tls13.pcap");
    let mut frames = frames(&original);
    let at = frames
        .iter()
        .position(|(_, f)| {
            tcp_offsets(f).is_some_and(|(_, d)| f.len() > d + 5 && f[d] == 0x16 && f[d + 5] == 1)
        })
        .expect("a ClientHello frame");
    let (ts, f) = frames[at].clone();
    let payload = &f[tcp_offsets(&f).unwrap().1..];
    let crafted = [
        segment(&f, 0, &payload[..100]),
        segment(&f, 200, &payload[200..]),
    ];
    frames.splice(at..=at, crafted.into_iter().map(|c| (ts, c)));
    let path = dir.path().join("gap.pcap");
    let mut w = trawl_capture::PcapWriter::new(
        std::fs::File::create(&path).unwrap(),
        trawl_capture::LinkType::ETHERNET,
        65535,
    )
    .unwrap();
    for (ts, f) in &frames {
        w.write(*ts, f.len() as u32, f).unwrap();
    }
    w.finish().unwrap();
    let (got, sum) = logs(&path, &dir.path().join("gap"));
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        got[0]["error"], "gap of 100 bytes at offset 100 (stream)",
        "{}",
        got[0]
    );
    assert!(got[0].get("ja4").is_none(), "no ClientHello: {}", got[0]);
    assert!(
        got[0].get("cipher").is_some(),
        "the ServerHello is there: {}",
        got[0]
    );
    assert_eq!(sum["tls"]["gaps"], 1);
    assert_eq!(sum["tls"]["gap_bytes"], 100);
}
