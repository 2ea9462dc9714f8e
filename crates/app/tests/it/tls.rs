//! TLS hellos against tshark (SNI, ALPN, ciphers, versions) over the committed corpus captures,
//! and JA4/JA4S against FoxIO's published outputs for their test captures
//! (testdata/app/tls/README.md); the reader's handling of split and malformed hellos.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;
use std::path::Path;

use trawl_app::tls::{self, Hello, HelloKind, HelloReader};
use trawl_app::{Error, TlsErrorKind};

use crate::pcap::{captures, golden, payloads, testdata};

type Endpoint = (IpAddr, u16);

/// A hello found in a capture: the frame completing it, its direction.
struct Found {
    frame: usize,
    src: Endpoint,
    dst: Endpoint,
    hello: Hello,
}

/// The first hello of every TCP direction of a capture (segments in capture order).
fn hellos(path: &Path) -> Vec<Found> {
    let mut readers: HashMap<(Endpoint, Endpoint), HelloReader> = HashMap::new();
    let mut out = Vec::new();
    for p in payloads(path).into_iter().filter(|p| p.proto == 6) {
        let reader = readers.entry((p.src, p.dst)).or_default();
        match reader.push(&p.data) {
            Some(Ok(hello)) => out.push(Found {
                frame: p.frame,
                src: p.src,
                dst: p.dst,
                hello,
            }),
            Some(Err(e)) if std::env::var_os("APP_DEBUG").is_some() => {
                println!("{} frame {}: {e}", path.display(), p.frame)
            }
            _ => {}
        }
    }
    out
}

fn hex_list(v: &[u16]) -> String {
    v.iter()
        .map(|x| format!("0x{x:04x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Columns 2.. of the tshark golden for one hello (column 1, the handshake types of the frame,
/// is checked for containing the hello's type).
fn row(h: &Hello) -> Vec<String> {
    let alpn: Vec<String> = h
        .alpn
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    vec![
        format!("0x{:04x}", h.legacy_version),
        h.sni.clone().unwrap_or_default(),
        alpn.join(","),
        hex_list(&h.ciphers),
        hex_list(&h.supported_versions),
    ]
}

const TLS_FIELDS: [&str; 5] = [
    "tls.handshake.version",
    "tls.handshake.extensions_server_name",
    "tls.handshake.extensions_alpn_str",
    "tls.handshake.ciphersuite",
    "tls.handshake.extensions.supported_version",
];

/// Every difference with tshark on the committed captures: (capture, frame, field or `*`, why).
const EXPLAINED: &[(&str, usize, &str, &str)] = &[
    // The reader takes a direction from its first byte: TLS that starts after a plaintext
    // upgrade (STARTTLS-style) is for the protocol analysers that see the upgrade (the blocks).
    ("arkime--ldap-ssl.pcap", 8, "*", "LDAP StartTLS: the hello follows an LDAP exchange"),
    ("arkime--ldap-ssl.pcap", 9, "*", "LDAP StartTLS: the hello follows an LDAP exchange"),
    ("arkime--mysql-tls.pcap", 8, "*", "MySQL: the hello follows the server greeting and SSL request"),
    ("arkime--mysql-tls.pcap", 10, "*", "MySQL: the hello follows the server greeting and SSL request"),
    ("ndpi--pgsql2.pcapng", 8, "*", "PostgreSQL: the hello follows SSLRequest and its 'S'"),
    ("ndpi--pgsql2.pcapng", 10, "*", "PostgreSQL: the hello follows SSLRequest and its 'S'"),
    ("ndpi--pgsql2.pcapng", 12, "*", "PostgreSQL: the hello follows SSLRequest and its 'S'"),
    ("ndpi--pgsql2.pcapng", 14, "*", "PostgreSQL: the hello follows SSLRequest and its 'S'"),
    // SSLv2-format ClientHellos (old clients' compatible hello): refused as NotHandshake
    // ("record.type (SSLv2 hello)"), counted; tshark dissects them.
    ("arkime--https2-301-get.pcap", 4, "*", "SSLv2-format ClientHello"),
    ("arkime--pppoe.pcap", 4, "*", "SSLv2-format ClientHello"),
    // Malformed hellos (tshark's expert info: "Vector length ... too large", "No more room for
    // vector"): trawl refuses them with Truncated naming the field; tshark shows a part.
    ("ndpi--tls_cipher_lens.pcap", 2, "*", "malformed: cipher list longer than the hello"),
    ("ndpi--tls_cipher_lens.pcap", 3, "*", "malformed: compression list past the hello"),
    ("ndpi--tls_cipher_lens.pcap", 5, "*", "malformed: extensions length past the hello"),
    ("ndpi--tls_invalid_reads.pcap", 4, "*", "malformed: extensions length past the hello"),
    ("ndpi--tls_invalid_reads.pcap", 12, "*", "malformed (inside GTP-U)"),
    ("pcapplusplus--ssl-malformed1.pcap", 1, "*", "malformed: server_name list past its extension"),
    // Outside the TLS reader: the test's decoder or its in-order segment feed.
    ("ndpi--capwap_data.pcapng", 9, "*", "CAPWAP tunnel (802.11 inside UDP) not descended"),
    ("ndpi--ossfuzz_seed_fake_traces_1.pcapng", 19, "*", "a stray 1-byte segment precedes the hello; tshark dissects the next segment alone"),
    ("ndpi--ossfuzz_seed_fake_traces_1.pcapng", 21, "*", "a stray 1-byte segment precedes the hello; tshark dissects the next segment alone"),
    ("ndpi--tls_multiple_synack_different_seq.pcapng", 6, "*", "a retransmitted ServerHello (other sequence numbers): tshark drops it, the test feeds segments in capture order"),
];

/// Every hello of every committed capture, field by field against tshark.
#[test]
fn tls_hello_fields_equal_tshark() {
    let mut diffs = BTreeSet::new();
    let mut count = 0;
    for cap in captures(&testdata("tls")) {
        let name = cap.file_name().unwrap().to_string_lossy().to_string();
        let want = golden(&cap.with_file_name(format!("{name}.tls.tsv")));
        let found = hellos(&cap);
        let mut mine: BTreeMap<usize, &Hello> = BTreeMap::new();
        for f in &found {
            mine.insert(f.frame, &f.hello);
        }
        for (frame, h) in &mine {
            count += 1;
            let Some(theirs) = want.get(frame) else {
                println!("{name} frame {frame}: no hello for tshark");
                diffs.insert((name.clone(), *frame, "*".to_string()));
                continue;
            };
            let ty = if h.kind == HelloKind::Client {
                "1"
            } else {
                "2"
            };
            if !theirs[1].split(',').any(|t| t == ty) {
                println!(
                    "{name} frame {frame}: handshake types {} lack {ty}",
                    theirs[1]
                );
                diffs.insert((name.clone(), *frame, "tls.handshake.type".to_string()));
            }
            for (i, (field, v)) in TLS_FIELDS.iter().zip(row(h)).enumerate() {
                let t = theirs.get(i + 2).map(String::as_str).unwrap_or("");
                if v != t {
                    println!("{name} frame {frame} {field}: tshark {t:?}, trawl {v:?}");
                    diffs.insert((name.clone(), *frame, field.to_string()));
                }
            }
        }
        for frame in want.keys().filter(|f| !mine.contains_key(f)) {
            println!("{name} frame {frame}: no hello for trawl");
            diffs.insert((name.clone(), *frame, "*".to_string()));
        }
    }
    let explained: BTreeSet<_> = EXPLAINED
        .iter()
        .map(|(c, f, field, _)| (c.to_string(), *f, field.to_string()))
        .collect();
    println!("{count} hellos, {} differences", diffs.len());
    let unexplained: Vec<_> = diffs.difference(&explained).collect();
    let stale: Vec<_> = explained.difference(&diffs).collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "unexplained: {unexplained:?}\nexplained but equal now: {stale:?}"
    );
    assert!(count > 100, "{count} hellos");
}

/// One TCP stream of a FoxIO snapshot: client and server endpoints, fingerprints.
#[derive(Debug, Default)]
struct Snap {
    client: Option<Endpoint>,
    server: Option<Endpoint>,
    transport: String,
    ja4: Option<String>,
    ja4s: Option<String>,
}

/// Reads the fields the test needs from a FoxIO insta snapshot (YAML, one `- stream:` entry
/// per stream; nested lists such as `tls_certs` are skipped).
fn snapshot(path: &Path) -> Vec<Snap> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut out: Vec<Snap> = Vec::new();
    let (mut src, mut dst, mut sport, mut dport) = (None, None, None, None);
    for line in text.lines() {
        if line.starts_with("- stream:") {
            out.push(Snap::default());
            continue;
        }
        let Some(s) = out.last_mut() else { continue };
        let Some((key, value)) = line.strip_prefix("  ").and_then(|l| l.split_once(": ")) else {
            continue;
        };
        let value = value.trim_matches('\'');
        match key {
            "transport" => s.transport = value.to_string(),
            "src" => src = value.parse::<IpAddr>().ok(),
            "dst" => dst = value.parse::<IpAddr>().ok(),
            "src_port" => sport = value.parse::<u16>().ok(),
            "dst_port" => dport = value.parse::<u16>().ok(),
            "ja4" => s.ja4 = Some(value.to_string()),
            "ja4s" => s.ja4s = Some(value.to_string()),
            _ => {}
        }
        if let (Some(a), Some(b), Some(p), Some(q)) = (src, dst, sport, dport) {
            s.client = Some((a, p));
            s.server = Some((b, q));
            (src, dst, sport, dport) = (None, None, None, None);
        }
    }
    out
}

/// Every JA4 and JA4S FoxIO's implementation prints for TCP streams of its test captures,
/// equal; differences explained in `JA4_EXPLAINED`.
#[test]
fn ja4_ja4s_equal_foxio_outputs() {
    let mut diffs = BTreeSet::new();
    let mut equal = 0;
    let dir = testdata("tls/ja4");
    for cap in captures(&dir) {
        let name = cap.file_name().unwrap().to_string_lossy().to_string();
        let snaps = snapshot(&cap.with_file_name(format!("{name}.snap")));
        let found = hellos(&cap);
        let first = |src: Endpoint, dst: Endpoint, kind: HelloKind| {
            found
                .iter()
                .find(|f| f.src == src && f.dst == dst && f.hello.kind == kind)
                .map(|f| &f.hello)
        };
        let mut seen = BTreeSet::new();
        for s in snaps.iter().filter(|s| s.transport == "tcp") {
            let (Some(c), Some(sv)) = (s.client, s.server) else {
                continue;
            };
            seen.insert((c, sv));
            #[allow(unused_mut)] // pushed to only with the `ja4s` feature
            let mut pairs = vec![(
                &s.ja4,
                first(c, sv, HelloKind::Client).map(Hello::ja4),
                "ja4",
            )];
            // JA4S only with the `ja4s` feature (its licence: see the crate's Cargo.toml).
            #[cfg(feature = "ja4s")]
            pairs.push((
                &s.ja4s,
                first(sv, c, HelloKind::Server).map(Hello::ja4s),
                "ja4s",
            ));
            for (want, got, what) in pairs {
                if *want == got {
                    equal += usize::from(want.is_some());
                } else {
                    println!("{name} {c:?}->{sv:?} {what}: foxio {want:?}, trawl {got:?}");
                    diffs.insert((name.clone(), c.1, what));
                }
            }
        }
        for f in &found {
            let key = if f.hello.kind == HelloKind::Client {
                (f.src, f.dst)
            } else {
                (f.dst, f.src)
            };
            if !seen.contains(&key) {
                println!(
                    "{name} frame {}: a hello in a stream FoxIO does not list",
                    f.frame
                );
                diffs.insert((name.clone(), key.0 .1, "stream"));
            }
        }
    }
    let explained: BTreeSet<_> = JA4_EXPLAINED
        .iter()
        .filter(|(_, _, what, _)| cfg!(feature = "ja4s") || *what != "ja4s")
        .map(|(c, port, what, _)| (c.to_string(), *port, *what))
        .collect();
    println!("{equal} fingerprints equal, {} differences", diffs.len());
    let unexplained: Vec<_> = diffs.difference(&explained).collect();
    let stale: Vec<_> = explained.difference(&diffs).collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "unexplained: {unexplained:?}\nexplained but equal now: {stale:?}"
    );
    let least = if cfg!(feature = "ja4s") { 80 } else { 40 };
    assert!(equal >= least, "{equal} equal");
}

/// (capture, client port, `ja4`/`ja4s`/`stream`, why).
const JA4_EXPLAINED: &[(&str, u16, &str, &str)] = &[
    // TLS inside a proxy tunnel: the hello follows an HTTP CONNECT or SOCKS exchange on the
    // same connection (see the STARTTLS entries of EXPLAINED).
    ("https-connect.pcap", 54723, "ja4", "TLS after HTTP CONNECT"),
    (
        "https-connect.pcap",
        54723,
        "ja4s",
        "TLS after HTTP CONNECT",
    ),
    (
        "socks-https-example.pcap",
        53554,
        "ja4",
        "TLS after a SOCKS handshake",
    ),
    (
        "socks-https-example.pcap",
        53554,
        "ja4s",
        "TLS after a SOCKS handshake",
    ),
    (
        "socks-https-example.pcap",
        53555,
        "ja4",
        "TLS after a SOCKS handshake",
    ),
    (
        "socks-https-example.pcap",
        53555,
        "ja4s",
        "TLS after a SOCKS handshake",
    ),
    (
        "socks-https-example.pcap",
        53556,
        "ja4",
        "TLS after a SOCKS handshake",
    ),
    (
        "socks-https-example.pcap",
        53556,
        "ja4s",
        "TLS after a SOCKS handshake",
    ),
];

/// Records of `hello` (a handshake message) cut into TLS records of at most `chunk` bytes.
fn records(msg: &[u8], chunk: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for part in msg.chunks(chunk) {
        out.extend_from_slice(&[22, 3, 1]);
        out.extend_from_slice(&(part.len() as u16).to_be_bytes());
        out.extend_from_slice(part);
    }
    out
}

/// A ClientHello handshake message: TLS 1.3 offer with GREASE, SNI, ALPN, supported_versions.
fn client_hello() -> Vec<u8> {
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]);
    body.push(0); // session id
    body.extend_from_slice(&[0, 6, 0x0a, 0x0a, 0x13, 0x01, 0xc0, 0x2f]);
    body.extend_from_slice(&[1, 0]);
    let mut ext = Vec::new();
    let mut put = |t: u16, d: &[u8]| {
        ext.extend_from_slice(&t.to_be_bytes());
        ext.extend_from_slice(&(d.len() as u16).to_be_bytes());
        ext.extend_from_slice(d);
    };
    put(0x1a1a, &[]);
    put(
        0,
        &[
            0, 14, 0, 0, 11, b'e', b'x', b'a', b'm', b'p', b'l', b'e', b'.', b'o', b'r', b'g',
        ],
    );
    put(
        16,
        &[
            0, 12, 2, b'h', b'2', 8, b'h', b't', b't', b'p', b'/', b'1', b'.', b'1',
        ],
    );
    put(43, &[4, 0x3a, 0x3a, 3, 4]);
    put(13, &[0, 4, 4, 3, 8, 4]);
    body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
    body.extend_from_slice(&ext);
    let mut msg = vec![1, 0, 0, 0];
    msg[1..4].copy_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    msg.extend_from_slice(&body);
    msg
}

#[test]
fn tls_hello_split_over_records_and_segments() {
    let msg = client_hello();
    let whole = tls::parse_hello(HelloKind::Client, &msg[4..]).unwrap();
    assert_eq!(whole.sni.as_deref(), Some("example.org"));
    assert_eq!(whole.alpn, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    assert_eq!((whole.version(), whole.legacy_version), (0x0304, 0x0303));
    // GREASE is kept in the lists and left out of the fingerprint: 2 ciphers, 4 extensions.
    assert_eq!(whole.ciphers, vec![0x0a0a, 0x1301, 0xc02f]);
    assert!(whole.ja4().starts_with("t13d0204h2_"), "{}", whole.ja4());
    for chunk in [1, 7, 50, 16_000] {
        let stream = records(&msg, chunk);
        for seg in [1, 3, 100, stream.len()] {
            let mut r = HelloReader::new();
            let mut got = None;
            for s in stream.chunks(seg) {
                if let Some(h) = r.push(s) {
                    assert!(got.is_none());
                    got = Some(h);
                }
            }
            assert_eq!(
                got,
                Some(Ok(whole.clone())),
                "records of {chunk}, segments of {seg}"
            );
            assert!(r.is_finished());
            assert_eq!(r.push(&stream), None);
        }
    }
}

#[test]
fn tls_not_a_handshake_refused_with_offset() {
    let mut r = HelloReader::new();
    assert_eq!(
        r.push(b"GET / HTTP/1.1\r\n"),
        Some(Err(Error::Tls {
            offset: 0,
            field: "record.type",
            kind: TlsErrorKind::NotHandshake
        }))
    );
    // A handshake record holding a Finished, not a hello.
    let mut r = HelloReader::new();
    assert_eq!(
        r.push(&records(&[20, 0, 0, 0], 100)),
        Some(Err(Error::Tls {
            offset: 0,
            field: "handshake.type",
            kind: TlsErrorKind::NotHandshake
        }))
    );
    // An SSLv2-format hello.
    let mut r = HelloReader::new();
    assert_eq!(
        r.push(&[0x80, 0x2e, 1, 0, 2, 0]).unwrap().unwrap_err(),
        Error::Tls {
            offset: 0,
            field: "record.type (SSLv2 hello)",
            kind: TlsErrorKind::NotHandshake
        }
    );
}

#[test]
fn tls_oversized_hello_refused_before_buffering() {
    let mut r = HelloReader::new();
    let mut rec = vec![22, 3, 1, 0, 4, 1, 0x10, 0, 0];
    assert_eq!(
        r.push(&rec),
        Some(Err(Error::Tls {
            offset: 1,
            field: "handshake.length",
            kind: TlsErrorKind::TooLarge
        }))
    );
    let mut r = HelloReader::new();
    rec[3] = 0x50;
    assert_eq!(
        r.push(&rec[..5]),
        Some(Err(Error::Tls {
            offset: 3,
            field: "record.length",
            kind: TlsErrorKind::TooLarge
        }))
    );
}

#[test]
fn tls_truncated_fields_named() {
    let msg = client_hello();
    // Cut inside the cipher list: the declared handshake length is made to match.
    let body = &msg[4..4 + 2 + 32 + 1 + 4];
    assert_eq!(
        tls::parse_hello(HelloKind::Client, body),
        Err(Error::Tls {
            offset: 37,
            field: "cipher_suites",
            kind: TlsErrorKind::Truncated
        })
    );
    // An SNI whose name runs past its extension: offset inside the body.
    let mut bad = msg[4..].to_vec();
    let at = bad.windows(3).position(|w| w == [0, 0, 11]).unwrap();
    bad[at + 2] = 40;
    let e = tls::parse_hello(HelloKind::Client, &bad).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Tls {
                field: "server_name.host_name",
                kind: TlsErrorKind::Truncated,
                ..
            }
        ),
        "{e}"
    );
}

/// A hello of almost 64 KiB pushed at once as one-byte handshake records (65 K records, 390 KB)
/// is read. (The reader drops consumed records once per push; it used to shift its buffer once
/// per record, about 0.2 s of moves for this input in a debug build — measured, not asserted.)
#[test]
fn tls_largest_hello_in_one_byte_records_read() {
    let mut hello = client_hello();
    let body_len = 64 * 1024 - 1;
    hello[1..4].copy_from_slice(&(body_len as u32).to_be_bytes()[1..]);
    hello.resize(4 + body_len, 0);
    let stream = records(&hello, 1);
    let mut r = HelloReader::new();
    // Bytes after the extensions are ignored: the hello is read.
    let got = r.push(&stream);
    assert!(
        matches!(&got, Some(Ok(h)) if h.sni.as_deref() == Some("example.org")),
        "{got:?}"
    );
}
