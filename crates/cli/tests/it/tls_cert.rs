//! `trawl logs` writes the server's certificate (TLS 1.2 and before) in `tls.jsonl` (issue 23):
//! against tshark's x509 fields over every committed TLS capture (goldens
//! `testdata/app/tls/*.cert.tsv`, scripts/app-oracle.sh). Per capture the leaf serials (the
//! first certificate of each Certificate message) are compared as multisets, and for each
//! logged certificate its validity, SAN dNSNames and subject CN must be among the values tshark
//! shows for that message. Every difference is in `EXPLAINED`; a stale explanation fails too.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{testdata, trawl};

/// (capture, reason): captures whose certificates differ from tshark's, and why.
const EXPLAINED: &[(&str, &str)] = &[
    // A direction is read from its first byte (as for the hellos, tls_log.rs): TLS after a
    // plaintext upgrade is not read, so neither is its certificate.
    ("arkime--ldap-ssl.pcap", "LDAP StartTLS"),
    ("arkime--mysql-tls.pcap", "MySQL: TLS after the greeting"),
    // Only the server's certificate is logged: here the two Certificate messages tshark shows
    // are the client's (client authentication; the server sent none).
    (
        "ndpi--tls_client_certificate_with_missing_server_one.pcapng",
        "client certificates only",
    ),
];

/// One Certificate message as tshark shows it.
#[derive(Debug)]
struct Message {
    serials: Vec<String>,
    times: Vec<String>,
    dns: Vec<String>,
    strings: Vec<String>,
}

fn list(col: &str) -> Vec<String> {
    col.split('|')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// tshark's times as ISO 8601: `2014-11-11 14:47:43 (UTC)` (UTCTime) and
/// `Mar  3, 2009 12:54:25.000000000 UTC` (GeneralizedTime).
fn iso(t: &str) -> String {
    if let Some(s) = t.strip_suffix(" (UTC)") {
        return format!("{}Z", s.replacen(' ', "T", 1));
    }
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let w: Vec<&str> = t.split_whitespace().collect();
    let month = months.iter().position(|m| *m == w[0]).unwrap() + 1;
    let day: u32 = w[1].trim_end_matches(',').parse().unwrap();
    let time = &w[3][..8];
    format!("{}-{month:02}-{day:02}T{time}Z", w[2])
}

fn golden(path: &Path) -> Vec<Message> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            let col = |i: usize| cols.get(i).copied().unwrap_or("");
            let mut times: Vec<String> = list(col(2)).iter().map(|t| iso(t)).collect();
            times.extend(list(col(3)).iter().map(|t| iso(t)));
            let mut strings = Vec::new();
            for i in 5..=8 {
                strings.extend(list(col(i)));
            }
            Message {
                serials: list(col(1)),
                times,
                dns: list(col(4)),
                strings,
            }
        })
        .collect()
}

fn lines(capture: &Path, out: &Path) -> Vec<Value> {
    let o = trawl(&[
        "logs",
        "-r",
        capture.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
        "--analyze",
        "tls",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(out.join("tls.jsonl")).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The CN value of an RFC 4514 string, unescaped.
fn cn(dn: &str) -> Option<String> {
    let at = dn.find("CN=")?;
    let mut out = String::new();
    let mut chars = dn[at + 3..].chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            ',' | '+' => break,
            _ => out.push(c),
        }
    }
    Some(out)
}

/// What differs in one capture, `None` when nothing does.
fn compare(name: &str, want: &[Message], got: &[Value]) -> Option<String> {
    let mut leaf: BTreeMap<String, usize> = BTreeMap::new();
    for m in want {
        if let Some(s) = m.serials.first() {
            *leaf.entry(s.to_lowercase()).or_default() += 1;
        }
    }
    let mut ours: BTreeMap<String, usize> = BTreeMap::new();
    for l in got {
        let Some(serial) = l["cert_serial"].as_str() else {
            continue;
        };
        let serial = serial.to_lowercase();
        *ours.entry(serial.clone()).or_default() += 1;
        let Some(m) = want.iter().find(|m| m.serials.first() == Some(&serial)) else {
            continue;
        };
        for f in ["cert_not_before", "cert_not_after"] {
            let t = l[f].as_str().unwrap().to_string();
            if !m.times.contains(&t) {
                return Some(format!("{name}: {f} {t} not in {:?}", m.times));
            }
        }
        let san: Vec<String> = l["cert_san_dns"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        if !m.dns.starts_with(&san) {
            return Some(format!("{name}: SAN {san:?} vs tshark {:?}", m.dns));
        }
        for f in ["cert_subject", "cert_issuer"] {
            if let Some(cn) = cn(l[f].as_str().unwrap()) {
                if !m.strings.contains(&cn) {
                    return Some(format!("{name}: {f} CN {cn:?} not in {:?}", m.strings));
                }
            }
        }
    }
    (ours != leaf).then(|| format!("{name}: serials trawl {ours:?} tshark {leaf:?}"))
}

/// Compares each (capture, golden) pair, asserts that every difference is explained (and
/// every explanation of these captures still needed); returns the certificates equal to
/// tshark's.
fn sweep(pairs: &[(PathBuf, PathBuf)]) -> usize {
    let tmp = tempfile::tempdir().unwrap();
    let mut differ = BTreeSet::new();
    let mut names = BTreeSet::new();
    let mut certs = 0;
    for (cap, g) in pairs {
        let name = g
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".cert.tsv")
            .to_string();
        names.insert(name.clone());
        let want = golden(g);
        let got = lines(cap, &tmp.path().join(&name));
        match compare(&name, &want, &got) {
            Some(why) => {
                println!("{why}");
                differ.insert(name);
            }
            None => {
                certs += got
                    .iter()
                    .filter(|l| l.get("cert_serial").is_some())
                    .count()
            }
        }
    }
    let explained: BTreeSet<String> = EXPLAINED
        .iter()
        .map(|(c, _)| c.to_string())
        .filter(|c| names.contains(c))
        .collect();
    let unexplained: Vec<_> = differ.difference(&explained).collect();
    let stale: Vec<_> = explained.difference(&differ).collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "unexplained: {unexplained:?}\nexplained but equal now: {stale:?}"
    );
    certs
}

#[test]
fn tls_log_certificates_equal_tsharks_over_the_tls_captures() {
    let dir = PathBuf::from(testdata("app/tls"));
    let mut pairs: Vec<(PathBuf, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".cert.tsv"))
        .map(|g| {
            (
                PathBuf::from(g.to_string_lossy().trim_end_matches(".cert.tsv")),
                g,
            )
        })
        .collect();
    pairs.sort();
    assert!(pairs.len() > 60, "{} goldens", pairs.len());
    let certs = sweep(&pairs);
    assert!(certs >= 20, "{certs} certificates equal tshark's");
}

/// The corpus's long certificates (a certificate over many TCP segments and records, a chain
/// of several KiB), against the committed goldens of `testdata/app/tls/corpus/`.
#[test]
fn tls_log_long_certificates_of_the_corpus_equal_tsharks() {
    let Some(root) = trawl_testkit::corpus() else {
        return;
    };
    let goldens = PathBuf::from(testdata("app/tls/corpus"));
    let mut pairs = Vec::new();
    for e in std::fs::read_dir(&goldens).unwrap() {
        let g = e.unwrap().path();
        let name = g.file_name().unwrap().to_string_lossy().to_string();
        let Some(base) = name
            .strip_prefix("ndpi--")
            .and_then(|n| n.strip_suffix(".cert.tsv"))
        else {
            continue;
        };
        pairs.push((root.join("ndpi/default").join(base), g));
    }
    pairs.sort();
    assert_eq!(pairs.len(), 4, "{pairs:?}");
    let certs = sweep(&pairs);
    assert!(certs >= 11, "{certs} certificates equal tshark's");
}
