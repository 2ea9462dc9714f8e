//! Every file of the shared corpus, read to the end: no panic, the trait contract holds, and
//! the packet counts agree with the corpus MANIFEST (capinfos/tshark) where it has one.
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use trawl_capture::{Error, ErrorKind, FileSource, PacketSource};

use crate::drain;

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(&path, out);
        } else if !matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("txt" | "tsv" | "md" | "py" | "sh")
        ) {
            out.push(path);
        }
    }
}

/// A short, bounded label for an error kind.
fn label(e: &Error) -> String {
    match e.kind.root() {
        ErrorKind::Io(_) => "io".into(),
        ErrorKind::UnknownFormat { .. } => "unknown format".into(),
        ErrorKind::InvalidField { field, .. } => format!("invalid {field}"),
        ErrorKind::Truncated { what, .. } => format!("truncated {what}"),
        ErrorKind::Decompress(_) => "decompress".into(),
        other => format!("{other}"),
    }
}

/// Files whose record count differs from MANIFEST's on purpose.
const COUNT_DEVIATIONS: &[(&str, &str)] = &[
    // pcap 2.5: tshark reads it, libpcap (and trawl) refuse the version.
    (
        "libpcap/pcap-invalid-version-2.pcap",
        "version 2.5 rejected as by libpcap",
    ),
    // An obsolete Packet Block of length 167: Wireshark rounds up to 168, libpcap (and trawl)
    // reject a length that is not a multiple of 4.
    (
        "pypi/python-pcapng/test_data/test006.ntar",
        "block length 167 rejected as by libpcap",
    ),
];

#[test]
fn corpus_sweep() {
    let Some(root) = trawl_testkit::corpus() else {
        return;
    };
    let started = Instant::now();
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    assert!(!files.is_empty());

    let mut ok = 0;
    let mut records_total = 0u64;
    let mut rejected: BTreeMap<String, usize> = BTreeMap::new();
    let mut failed: BTreeMap<String, usize> = BTreeMap::new();
    let mut counts: HashMap<String, u64> = HashMap::new();
    for path in &files {
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        match FileSource::open(path) {
            Err(e) => *rejected.entry(label(&e)).or_default() += 1,
            Ok(mut src) => {
                let out = drain(&mut src);
                let in_batches: usize = out.records.len();
                assert_eq!(out.stats.records, in_batches as u64, "{rel}");
                records_total += out.stats.records;
                match &out.error {
                    None => ok += 1,
                    Some(e) => {
                        assert!(e.to_string().contains(&*path.to_string_lossy()), "{e}");
                        *failed.entry(label(e)).or_default() += 1;
                    }
                }
                counts.insert(rel, out.stats.records);
            }
        }
    }

    // MANIFEST packet counts of files capinfos and tshark read without complaint.
    let manifest = fs::read_to_string(root.join("MANIFEST.tsv")).unwrap_or_default();
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for line in manifest.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() < 14 || !cols[13].is_empty() || !cols[7].starts_with(['p', 'n']) {
            continue;
        }
        let Ok(want) = cols[4].parse::<u64>() else {
            continue;
        };
        if COUNT_DEVIATIONS.iter().any(|(f, _)| *f == cols[0]) {
            continue;
        }
        compared += 1;
        let got = counts.get(cols[0]).copied();
        if got != Some(want) {
            mismatches.push(format!("{}: MANIFEST {want}, read {got:?}", cols[0]));
        }
    }
    println!(
        "corpus sweep: {} files in {:.1?}: {ok} read to the end ({records_total} records), \
         rejected at open {rejected:?}, failed part-way {failed:?}; \
         {compared} MANIFEST packet counts compared, {} differ",
        files.len(),
        started.elapsed(),
        mismatches.len()
    );
    assert!(mismatches.is_empty(), "{mismatches:#?}");
}

/// Files compared with tshark by default: in each directory of the corpus (sorted), every
/// `SAMPLE_STRIDE`-th capture, and every pcapng file (the format with the most variants:
/// sections, interfaces, time resolutions, block kinds). A tshark run costs about 0.4 s of CPU,
/// mostly its start-up: the whole corpus (1,863 comparable files) took 790 s of CPU, about 7
/// minutes on CI's 2 cores; the sample (725 files, every source and directory) 297 s.
/// `TRAWL_TSHARK_SWEEP=all` compares every file.
const SAMPLE_STRIDE: usize = 4;

/// One file's outcome in the tshark comparison.
enum Compared {
    Same,
    Differ(String),
    /// Not comparable: the reader or tshark stops part-way, or tshark's view is not records'.
    Skipped,
}

/// Corpus captures compared record by record with tshark (ts ns, caplen, wire length): a
/// fixed sample by default (see [`SAMPLE_STRIDE`]), the whole corpus with
/// `TRAWL_TSHARK_SWEEP=all`; tshark runs in parallel, one process per file.
/// `TRAWL_TSHARK_CACHE=dir` reuses outputs saved as `dir/<path with / as %>.tsv` (with the
/// exit status in `.tsv.rc`). Last whole run: 1,863 files identical, none different.
#[test]
fn corpus_matches_tshark() {
    let Some(root) = trawl_testkit::corpus() else {
        return;
    };
    let cache = std::env::var_os("TRAWL_TSHARK_CACHE").map(PathBuf::from);
    if cache.is_none() && !trawl_testkit::require_tool("tshark") {
        return;
    }
    let all = std::env::var("TRAWL_TSHARK_SWEEP").is_ok_and(|v| v == "all");
    let started = Instant::now();
    let mut files = Vec::new();
    collect(&root, &mut files);
    files.sort();
    let chosen = if all { files } else { sample(&files) };
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get().min(8));
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(path) = chosen.get(i) else {
                    break;
                };
                let outcome = compare_with_tshark(&root, path, cache.as_deref());
                results.lock().unwrap().push(outcome);
            });
        }
    });
    let results = results.into_inner().unwrap();
    let same = results
        .iter()
        .filter(|r| matches!(r, Compared::Same))
        .count();
    let mut differ: Vec<&String> = results
        .iter()
        .filter_map(|r| match r {
            Compared::Differ(d) => Some(d),
            _ => None,
        })
        .collect();
    differ.sort();
    println!(
        "tshark comparison ({}): {} files chosen, {same} identical, {} differ, {} not comparable, \
         in {:.1?} on {threads} threads",
        if all { "whole corpus" } else { "sample" },
        chosen.len(),
        differ.len(),
        results.len() - same - differ.len(),
        started.elapsed()
    );
    // A sample that compares little would pass for the wrong reason.
    assert!(
        same > if all { 1500 } else { 400 },
        "only {same} files compared"
    );
    assert!(differ.is_empty(), "{differ:#?}");
}

/// The default sample: per directory, every [`SAMPLE_STRIDE`]-th file, and every pcapng file.
fn sample(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut by_dir: BTreeMap<&Path, Vec<&PathBuf>> = BTreeMap::new();
    for f in files {
        by_dir.entry(f.parent().unwrap()).or_default().push(f);
    }
    let pcapng = |p: &Path| {
        FileSource::open(p).is_ok_and(|s| s.format() == trawl_capture::FileFormat::Pcapng)
    };
    let mut out = Vec::new();
    for in_dir in by_dir.values() {
        for (i, f) in in_dir.iter().enumerate() {
            if i % SAMPLE_STRIDE == 0 || pcapng(f) {
                out.push((*f).clone());
            }
        }
    }
    out
}

/// Reads `path` with trawl and with tshark and compares the records.
fn compare_with_tshark(root: &Path, path: &Path, cache: Option<&Path>) -> Compared {
    let rel = path
        .strip_prefix(root)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let Ok(mut src) = FileSource::open(path) else {
        return Compared::Skipped;
    };
    let out = drain(&mut src);
    if out.error.is_some() {
        return Compared::Skipped;
    }
    // Wireshark strips the 4-byte SunATM pseudo-header (link type 123) from the frame, and
    // picks among pcap variants by heuristics for such files; the records themselves hold
    // the bytes as stored.
    if src.interfaces().iter().any(|i| i.link_type.0 == 123) {
        return Compared::Skipped;
    }
    // Files tshark fails on (unsupported link types, damage) are not comparable.
    let Some(text) = tshark_records(path, &rel, cache) else {
        return Compared::Skipped;
    };
    // tshark prints garbage times of fuzzed files in forms that are not times (negative,
    // more than 9 decimals): those files are not comparable.
    let odd = |t: &str| t.starts_with('-') || t.split('.').nth(1).is_some_and(|f| f.len() > 9);
    if text
        .lines()
        .any(|l| odd(l.split('\t').next().unwrap_or("")))
    {
        return Compared::Skipped;
    }
    let pcapng = src.format() == trawl_capture::FileFormat::Pcapng;
    let want: Vec<(u64, u32, u32)> = text
        .lines()
        .map(|l| l.split('\t').collect::<Vec<_>>())
        .filter(|c| c.len() >= 4 && !(pcapng && c[3].is_empty()))
        .map(|c| {
            let ns = crate::golden::parse_epoch_ns(c[0]);
            (ns, c[1].parse().unwrap_or(0), c[2].parse().unwrap_or(0))
        })
        .collect();
    let got: Vec<(u64, u32, u32)> = out
        .records
        .iter()
        .map(|r| (r.ts_ns, r.caplen, r.wire_len))
        .collect();
    if got == want {
        return Compared::Same;
    }
    let first = got.iter().zip(&want).position(|(g, w)| g != w);
    Compared::Differ(format!(
        "{rel}: {} vs tshark {} records, first difference at {first:?}: {:?} vs {:?}",
        got.len(),
        want.len(),
        first.map(|i| got[i]),
        first.map(|i| want[i])
    ))
}

/// tshark's time, captured length, length and interface of every frame of `path`, tab
/// separated; `None` when tshark fails on the file.
fn tshark_records(path: &Path, rel: &str, cache: Option<&Path>) -> Option<String> {
    if let Some(dir) = cache {
        let base = dir.join(format!("{}.tsv", rel.replace('/', "%")));
        let rc = fs::read_to_string(base.with_extension("tsv.rc")).unwrap_or_default();
        return fs::read_to_string(&base).ok().filter(|_| rc.trim() == "0");
    }
    let o = std::process::Command::new("tshark")
        .args(["-n", "-r"])
        .arg(path)
        .args([
            "-T",
            "fields",
            "-e",
            "frame.time_epoch",
            "-e",
            "frame.cap_len",
        ])
        .args(["-e", "frame.len", "-e", "frame.interface_id"])
        .output()
        .expect("tshark runs");
    o.status
        .success()
        .then(|| String::from_utf8_lossy(&o.stdout).into_owned())
}
