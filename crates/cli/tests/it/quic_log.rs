//! `trawl logs` writes the hellos of QUIC Initial packets to `tls.jsonl` (issue 23): against
//! tshark 4.0, which removes the Initials' protection itself (goldens
//! `testdata/app/quic/*.quic.tsv` for the committed captures, `testdata/app/quic/corpus/` for
//! every QUIC capture of the shared corpus; scripts/app-oracle.sh). Per capture, the
//! ClientHellos (SNI, ALPN) and ServerHellos (chosen cipher) of tshark and of the log lines are
//! compared as multisets; every difference is in `EXPLAINED`, and an explanation that no longer
//! applies fails too.
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::tls_log::{from_golden_columns, from_lines, logs, Hellos};

use super::testdata;

/// (capture, reason): captures whose hellos differ from tshark's, and why.
const EXPLAINED: &[(&str, &str)] = &[
    // Version Negotiation: the client's first Initial has a version that forces negotiation
    // (0x?a?a?a?a), the server answers with Version Negotiation, the client sends its hello
    // again in a v1 Initial. tshark 4.0 shows the server's hello only (it dissects neither
    // ClientHello across the negotiation); trawl reads the client's first.
    (
        "ndpi--quic-forcing-vn-with-data.pcapng",
        "Version Negotiation: tshark shows no ClientHello, trawl reads it",
    ),
    (
        "tcpdump--quic_vn.pcap",
        "Version Negotiation: tshark shows no ClientHello, trawl reads it",
    ),
    // HelloRetryRequest: the server's first ServerHello asks for another key share and the
    // client sends a second ClientHello further on in the same CRYPTO stream. tshark shows two
    // ClientHellos and two ServerHellos; trawl's one line per connection has the first of each
    // (the same SNI, ALPN and cipher).
    (
        "ndpi--quic-24.pcap",
        "HelloRetryRequest: one line, tshark shows 2+2 hellos",
    ),
    (
        "ndpi--quic-29.pcap",
        "HelloRetryRequest: one line, tshark shows 2+2 hellos",
    ),
];

/// tshark's QUIC lines: frame, QUIC versions, handshake types, hello version, SNI, ALPN,
/// ciphers.
fn from_golden(path: &Path) -> Hellos {
    from_golden_columns(path, 2)
}

/// Compares each (capture, golden) pair; returns the captures that differ and the number of
/// lines equal to tshark's.
fn compare(pairs: &[(PathBuf, PathBuf)], out: &Path) -> (BTreeSet<String>, usize) {
    let mut differ = BTreeSet::new();
    let mut equal = 0;
    for (cap, golden) in pairs {
        let name = golden
            .file_name()
            .unwrap()
            .to_string_lossy()
            .trim_end_matches(".quic.tsv")
            .to_string();
        let want = from_golden(golden);
        let (lines, sum) = logs(cap, &out.join(&name));
        assert_eq!(
            sum["tls"]["lines"].as_u64(),
            Some(lines.len() as u64),
            "{name}"
        );
        for l in &lines {
            assert_eq!(l["proto"], 17, "{name}: {l}");
            assert_eq!(l["transport"], "quic", "{name}: {l}");
            let id = l["community_id"].as_str().unwrap_or_default();
            assert!(id.starts_with("1:") && id.len() == 30, "{name}: {l}");
            if let Some(ja4) = l["ja4"].as_str() {
                assert!(ja4.starts_with('q'), "{name}: {l}");
            }
        }
        let got = from_lines(&lines);
        if got != want {
            println!("{name}:\n  trawl  {got:?}\n  tshark {want:?}");
            differ.insert(name);
        } else {
            equal += lines.len();
        }
    }
    (differ, equal)
}

fn check_explained(differ: &BTreeSet<String>, names: &BTreeSet<String>) {
    let explained: BTreeSet<String> = EXPLAINED
        .iter()
        .map(|(c, _)| c.to_string())
        .filter(|c| names.contains(c))
        .collect();
    let unexplained: Vec<_> = differ.difference(&explained).collect();
    let stale: Vec<_> = explained.difference(differ).collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "unexplained: {unexplained:?}\nexplained but equal now: {stale:?}"
    );
}

/// The committed captures: drafts, a ClientHello over several Initials, Google's T051, a Retry,
/// a capture cut by its snap length (the server's hello only), Google QUIC (none), an Initial
/// that does not decrypt (none).
#[test]
fn quic_log_hellos_equal_tsharks_over_the_committed_captures() {
    let dir = PathBuf::from(testdata("app/quic"));
    let mut pairs: Vec<(PathBuf, PathBuf)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pcap" || e == "pcapng"))
        .map(|p| {
            let g = p.with_file_name(format!(
                "{}.quic.tsv",
                p.file_name().unwrap().to_string_lossy()
            ));
            (p, g)
        })
        .collect();
    pairs.sort();
    assert_eq!(pairs.len(), 7, "{pairs:?}");
    let tmp = tempfile::tempdir().unwrap();
    let (differ, equal) = compare(&pairs, tmp.path());
    let names = pairs
        .iter()
        .map(|(c, _)| c.file_name().unwrap().to_string_lossy().to_string())
        .collect();
    check_explained(&differ, &names);
    assert!(equal >= 5, "{equal} lines equal tshark's");
}

/// Every QUIC capture of the shared corpus (ndpi/default/quic*, tcpdump/quic_*) against its
/// committed golden.
#[test]
fn quic_log_hellos_equal_tsharks_over_the_corpus_quic_captures() {
    let Some(root) = trawl_testkit::corpus() else {
        return;
    };
    let goldens = PathBuf::from(testdata("app/quic/corpus"));
    let mut pairs = Vec::new();
    for (top, dir, prefix) in [
        ("ndpi", "ndpi/default", "quic"),
        ("tcpdump", "tcpdump", "quic_"),
    ] {
        for e in std::fs::read_dir(root.join(dir)).unwrap() {
            let p = e.unwrap().path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name.starts_with(prefix) && name.contains(".pcap") {
                let g = goldens.join(format!("{top}--{name}.quic.tsv"));
                assert!(
                    g.exists(),
                    "no golden {} (scripts/app-oracle.sh)",
                    g.display()
                );
                pairs.push((p, g));
            }
        }
    }
    pairs.sort();
    assert_eq!(pairs.len(), 37, "the corpus's QUIC captures");
    let tmp = tempfile::tempdir().unwrap();
    let (differ, equal) = compare(&pairs, tmp.path());
    let names = pairs
        .iter()
        .map(|(_, g)| {
            let n = g.file_name().unwrap().to_string_lossy().to_string();
            n.trim_end_matches(".quic.tsv").to_string()
        })
        .collect();
    check_explained(&differ, &names);
    assert!(equal > 150, "{equal} lines equal tshark's");
}

/// Google QUIC is counted as not decryptable, an Initial that does not authenticate as a
/// decryption error: no line, no panic.
#[test]
fn quic_log_counts_what_it_cannot_decrypt() {
    let tmp = tempfile::tempdir().unwrap();
    let (lines, sum) = logs(
        Path::new(&testdata("app/quic/ndpi--quic_q46_b.pcap")),
        &tmp.path().join("q46"),
    );
    assert!(lines.is_empty(), "{lines:?}");
    assert!(
        sum["tls"]["quic_undecryptable"].as_u64().unwrap() > 0,
        "{sum}"
    );
    assert_eq!(sum["tls"]["quic_connections"], 0, "{sum}");
    let (lines, sum) = logs(
        Path::new(&testdata(
            "app/quic/ndpi--quic-mvfst-22_decryption_error.pcap",
        )),
        &tmp.path().join("mvfst"),
    );
    assert!(lines.is_empty(), "{lines:?}");
    assert!(
        sum["tls"]["quic_decrypt_errors"].as_u64().unwrap() > 0,
        "{sum}"
    );
}
