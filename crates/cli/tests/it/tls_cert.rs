//! `trawl logs` writes the server's certificate (TLS 1.2 and before) in `tls.jsonl` (issue 23):
//! against tshark's x509 fields over every committed TLS capture (goldens
//! `testdata/app/tls/*.cert.tsv`, scripts/app-oracle.sh). Per capture the leaf serials (the
//! first certificate of each Certificate message) are compared as multisets, and for each
//! logged certificate its validity, SAN dNSNames and subject CN must be among the values tshark
//! shows for that message. Every difference is in `EXPLAINED`; a stale explanation fails too.
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::testdata;

/// (capture, reason): captures whose certificates differ from tshark's, and why.
const EXPLAINED: &[(&str, &str)] = &[
    // A direction is read from its first byte (as for the hellos, tls_log.rs): TLS after a
    // plaintext upgrade is not read, so neither is its certificate.
    ("arkime--ldap-ssl.pcap", "LDAP StartTLS"),
    ("arkime--mysql-tls.pcap", "MySQL: TLS after the greeting"),
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
    messages(text.lines().filter(|l| !l.starts_with('#')))
}

/// The messages of a golden's lines (without its comment lines).
fn messages<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<Message> {
    lines
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
    super::tls_log::logs(capture, out).0
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
    // The server's certificate and the client's (client authentication).
    let certs = got
        .iter()
        .flat_map(|l| ["cert_", "client_cert_"].map(|p| (l, p)));
    for (l, prefix) in certs {
        let field = |f: &str| &l[format!("{prefix}{f}")];
        let Some(serial) = field("serial").as_str() else {
            continue;
        };
        let serial = serial.to_lowercase();
        *ours.entry(serial.clone()).or_default() += 1;
        let Some(m) = want.iter().find(|m| m.serials.first() == Some(&serial)) else {
            continue;
        };
        for f in ["not_before", "not_after"] {
            let t = field(f).as_str().unwrap().to_string();
            if !m.times.contains(&t) {
                return Some(format!("{name}: {prefix}{f} {t} not in {:?}", m.times));
            }
        }
        let san: Vec<String> = field("san_dns")
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        if !m.dns.starts_with(&san) {
            return Some(format!("{name}: SAN {san:?} vs tshark {:?}", m.dns));
        }
        for f in ["subject", "issuer"] {
            if let Some(cn) = cn(field(f).as_str().unwrap()) {
                if !m.strings.contains(&cn) {
                    return Some(format!(
                        "{name}: {prefix}{f} CN {cn:?} not in {:?}",
                        m.strings
                    ));
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
                let has = |l: &&Value, f: &str| l.get(f).is_some();
                certs += got.iter().filter(|l| has(l, "cert_serial")).count();
                certs += got.iter().filter(|l| has(l, "client_cert_serial")).count();
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

/// The client's certificates (client authentication, `client_cert_*`): on the line of the
/// connection whose client port tshark names (goldens `*.client-cert.tsv`, the Certificate
/// messages sent by the sender of the stream's ClientHello), the leaf serial of each, and its
/// validity, SAN and CNs among tshark's values; no client certificate on any other line, and
/// none for an empty Certificate message.
fn client_certificates(capture: &Path, golden: &Path, out: &Path) -> usize {
    let name = capture.file_name().unwrap().to_string_lossy().to_string();
    let text = std::fs::read_to_string(golden).unwrap();
    let rows: Vec<(u64, &str)> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let (port, rest) = l.split_once('\t').unwrap();
            (port.parse().unwrap(), rest)
        })
        .collect();
    let got = lines(capture, out);
    let mut certs = 0;
    for l in &got {
        let port = l["src_port"].as_u64().unwrap();
        let row = rows.iter().find(|(p, _)| *p == port);
        let want = row.map(|(_, rest)| messages(std::iter::once(*rest)));
        let serial = l["client_cert_serial"].as_str();
        assert!(l.get("client_cert_error").is_none(), "{name}: {l}");
        match (want.as_deref(), serial) {
            (Some([m]), Some(_)) => {
                if let Some(why) = compare(&name, std::slice::from_ref(m), &[client_only(l)]) {
                    panic!("{why}");
                }
                certs += 1;
            }
            (Some([m]), None) => assert!(m.serials.is_empty(), "{name}: {l} misses {m:?}"),
            (None, None) => {}
            (w, s) => panic!("{name}: port {port}: tshark {w:?}, trawl {s:?}"),
        }
    }
    let ports: BTreeSet<u64> = got.iter().filter_map(|l| l["src_port"].as_u64()).collect();
    for (p, _) in &rows {
        assert!(ports.contains(p), "{name}: no line for client port {p}");
    }
    certs
}

/// A line's client certificate fields alone, for [`compare`].
fn client_only(l: &Value) -> Value {
    let mut m = serde_json::Map::new();
    for (k, v) in l.as_object().unwrap() {
        if k.starts_with("client_cert_") {
            m.insert(k.clone(), v.clone());
        }
    }
    Value::Object(m)
}

#[test]
fn tls_log_client_certificates_equal_tsharks() {
    let tmp = tempfile::tempdir().unwrap();
    let mut certs = 0;
    let mut goldens: Vec<PathBuf> = ["app/tls", "app/tls/client"]
        .iter()
        .flat_map(|d| std::fs::read_dir(testdata(d)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(".client-cert.tsv"))
        .collect();
    goldens.sort();
    assert_eq!(goldens.len(), 2, "{goldens:?}");
    for (i, g) in goldens.iter().enumerate() {
        let cap = PathBuf::from(g.to_string_lossy().trim_end_matches(".client-cert.tsv"));
        certs += client_certificates(&cap, g, &tmp.path().join(i.to_string()));
    }
    assert_eq!(certs, 3, "client certificates equal to tshark's");
    let Some(root) = trawl_testkit::corpus() else {
        return;
    };
    let mut certs = 0;
    for n in ["anyconnect-vpn.pcap", "anydesk.pcapng"] {
        let g = PathBuf::from(testdata(&format!(
            "app/tls/corpus/ndpi--{n}.client-cert.tsv"
        )));
        let cap = root.join("ndpi/default").join(n);
        certs += client_certificates(&cap, &g, &tmp.path().join(n));
    }
    assert_eq!(
        certs, 6,
        "client certificates of the corpus equal to tshark's"
    );
}
