//! The flow database end to end: `trawl ingest` of corpus captures, then `trawl query` results
//! compared row by row with answers computed independently — a naive aggregation of the flow
//! records (split at 5-minute boundaries, as the store's meter splits them) with a hand-written
//! predicate per condition, and DuckDB reading the same Parquet files.
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use trawl_flow::{FlowConfig, ProtoName};
use trawl_testkit::{meter_file, TestFlow};

use super::{testdata, trawl};

const BLOCK_NS: u64 = 300_000_000_000;

/// Captures in the test database: (file, interface name).
const CAPTURES: [(&str, &str); 6] = [
    ("oracle/many-protocols.pcap.gz", "many"),
    ("oracle/1kxun.pcap.gz", "kxun"),
    ("oracle/v6-http.pcap", "v6"),
    ("oracle/sip.pcap", "sip"),
    ("pcaps/VlanPackets.pcap", "vlan"),
    ("oracle/dns-wiresharkrepo.pcap", "dns"),
];

struct Db {
    dir: tempfile::TempDir,
    /// Every record with its interface.
    flows: Vec<(String, TestFlow)>,
}

fn build_db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let mut flows = Vec::new();
    for (file, iface) in CAPTURES {
        let path = testdata(file);
        let out = trawl(&[
            "ingest",
            "-r",
            &path,
            "--db",
            dir.path().to_str().unwrap(),
            "-i",
            iface,
            "--summary",
            "json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let config = FlowConfig {
            interval_align_ns: BLOCK_NS,
            capacity: 1 << 16,
            ..FlowConfig::default()
        };
        for f in meter_file(Path::new(&path), config).flows {
            flows.push((iface.to_string(), f));
        }
    }
    Db { dir, flows }
}

fn query(db: &Path, args: &[&str]) -> Value {
    let mut full = vec![
        "query",
        "-d",
        db.to_str().unwrap(),
        "--format",
        "json",
        "--limit",
        "0",
    ];
    full.extend_from_slice(args);
    let out = trawl(&full);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

type Table = BTreeMap<Vec<String>, [u64; 5]>;

fn attr_value(a: &str, iface: &str, f: &TestFlow) -> String {
    match a {
        "sip" => f.src.0.to_string(),
        "dip" => f.dst.0.to_string(),
        "sport" => f.src.1.to_string(),
        "dport" => f.dst.1.to_string(),
        "proto" => ProtoName(f.proto).to_string(),
        "vlan" => f.vlan.to_string(),
        "iface" => iface.to_string(),
        "time" => (f.first_ns - f.first_ns % BLOCK_NS).to_string(),
        _ => unreachable!(),
    }
}

fn naive(db: &Db, attrs: &[&str], keep: &dyn Fn(&str, &TestFlow) -> bool) -> Table {
    let mut t = Table::new();
    for (iface, f) in db.flows.iter().filter(|(i, f)| keep(i, f)) {
        let key = attrs.iter().map(|a| attr_value(a, iface, f)).collect();
        let e = t.entry(key).or_default();
        for (x, y) in e.iter_mut().zip([f.fwd.0, f.rev.0, f.fwd.1, f.rev.1, 1]) {
            *x += y;
        }
    }
    t
}

/// The key a query's result gives an attribute: the flow record's field name (issue 19).
fn field_name(attr: &str) -> &str {
    match attr {
        "sip" => "src_ip",
        "dip" => "dst_ip",
        "sport" => "src_port",
        "dport" => "dst_port",
        other => other,
    }
}

/// The query's rows as a table. `time` comes back as RFC 3339; it is turned into ns by the
/// blocks' own arithmetic (minutes of the day), so the comparison stays exact.
fn from_json(v: &Value, attrs: &[&str]) -> Table {
    let mut t = Table::new();
    for r in v["rows"].as_array().unwrap() {
        let key: Vec<String> = attrs
            .iter()
            .map(|a| match &r[field_name(a)] {
                Value::String(s) if *a == "time" => rfc3339_ns(s).to_string(),
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let m = [
            "fwd_packets",
            "rev_packets",
            "fwd_bytes",
            "rev_bytes",
            "flows",
        ]
        .map(|k| r[k].as_u64().unwrap());
        assert!(t.insert(key.clone(), m).is_none(), "duplicate row {key:?}");
    }
    t
}

fn rfc3339_ns(s: &str) -> u64 {
    // YYYY-MM-DDTHH:MM:SSZ
    let n = |a: usize, b: usize| s[a..b].parse::<i64>().unwrap();
    let (y, m, d) = (n(0, 4), n(5, 7), n(8, 10));
    let (y2, m2) = if m <= 2 { (y - 1, m + 9) } else { (y, m - 3) };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + d - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let secs = days * 86_400 + n(11, 13) * 3600 + n(14, 16) * 60 + n(17, 19);
    secs as u64 * 1_000_000_000
}

fn in_net(ip: &IpAddr, net: &str) -> bool {
    let (a, p) = net.split_once('/').unwrap();
    let p: u32 = p.parse().unwrap();
    match (ip, a.parse::<IpAddr>().unwrap()) {
        (IpAddr::V4(x), IpAddr::V4(n)) => p == 0 || (u32::from(*x) ^ u32::from(n)) >> (32 - p) == 0,
        (IpAddr::V6(x), IpAddr::V6(n)) => {
            p == 0 || (u128::from(*x) ^ u128::from(n)) >> (128 - p) == 0
        }
        _ => false,
    }
}

#[test]
fn queries_match_a_naive_aggregation_of_the_flow_records() {
    let db = build_db();
    let p = db.dir.path();
    type Keep = Box<dyn Fn(&str, &TestFlow) -> bool>;
    let cases: Vec<(&str, Option<&str>, Keep)> = vec![
        ("talk_conv", None, Box::new(|_, _| true)),
        // One address alone (groups keyed by its text, IPv6 ones of over 15 characters by
        // code), per interface.
        ("sip", None, Box::new(|_, _| true)),
        (
            "iface,dip",
            Some("proto != tcp"),
            Box::new(|_, f| f.proto != 6),
        ),
        ("apps", Some("proto = tcp"), Box::new(|_, f| f.proto == 6)),
        (
            "sip,dport",
            Some("not proto = udp and dport < 1024"),
            Box::new(|_, f| f.proto != 17 && f.dst.1 < 1024),
        ),
        (
            "iface,time",
            Some("iface != kxun"),
            Box::new(|i, _| i != "kxun"),
        ),
        (
            "sport,dport,proto,vlan",
            Some("vlan = 0 or vlan > 5"),
            Box::new(|_, f| f.vlan == 0 || f.vlan > 5),
        ),
        (
            "sip,dip",
            Some("host = 192.168.0.0/16 and (port = 53 or port = 1024-65535)"),
            Box::new(|_, f| {
                (in_net(&f.src.0, "192.168.0.0/16") || in_net(&f.dst.0, "192.168.0.0/16"))
                    && [f.src.1, f.dst.1].iter().any(|&p| p == 53 || p >= 1024)
            }),
        ),
        (
            "dip,proto",
            Some("snet = 10.0.0.0/8 or dip = 2001:db8::/32 or sip != 10.0.2.15"),
            Box::new(|_, f| {
                in_net(&f.src.0, "10.0.0.0/8")
                    || in_net(&f.dst.0, "2001:db8::/32")
                    || f.src.0 != "10.0.2.15".parse::<IpAddr>().unwrap()
            }),
        ),
        (
            "vlan",
            Some("dport >= 443 and dport <= 443"),
            Box::new(|_, f| f.dst.1 == 443),
        ),
    ];
    let mut nonempty = 0;
    for (attrs, cond, keep) in &cases {
        let mut args = vec![*attrs];
        if let Some(c) = cond {
            args.extend(["--condition", c]);
        }
        let names: Vec<&str> = trawl_query::parse_attributes(attrs)
            .unwrap()
            .iter()
            .map(|a| a.name())
            .collect();
        let got = query(p, &args);
        let want = naive(&db, &names, keep.as_ref());
        assert_eq!(from_json(&got, &names), want, "{attrs} {cond:?}");
        // trawl's own blocks are decoded straight from their pages; through the general
        // (Arrow) reader the result is the same.
        assert_eq!(got["stats"]["column_chunks_general"].as_u64(), Some(0));
        let general = query(p, &[&args[..], &["--general-reader"]].concat());
        assert_eq!(general["rows"], got["rows"], "{attrs} {cond:?}");
        assert!(general["stats"]["column_chunks_general"].as_u64() > Some(0));
        let total_flows: u64 = want.values().map(|m| m[4]).sum();
        assert_eq!(got["totals"]["flows"].as_u64(), Some(total_flows));
        assert_eq!(got["stats"]["rows_matched"].as_u64(), Some(total_flows));
        assert_eq!(got["stats"]["blocks_failed"].as_u64(), Some(0));
        nonempty += usize::from(!want.is_empty());
    }
    assert!(nonempty >= 9, "conditions should select something");
}

/// Every block of the corpus database read by the direct page decoder (the query engine's)
/// equals the same block read by the `parquet` crate's Arrow reader, every column.
#[test]
fn the_direct_decoder_reads_the_corpus_blocks_as_the_arrow_reader_does() {
    let db = build_db();
    let blocks =
        trawl_store::list_blocks(db.dir.path(), &trawl_store::BlockFilter::default()).unwrap();
    assert!(blocks.len() >= 6, "{} blocks", blocks.len());
    let mut rows = 0;
    for b in &blocks {
        let want = trawl_store::read_block(&b.path).unwrap();
        let got = trawl_store::read_block_direct(&b.path).unwrap();
        assert!(got == want, "{}", b.path.display());
        rows += got.len();
    }
    assert_eq!(rows, db.flows.len());
}

#[test]
fn time_ranges_select_whole_blocks_and_sum_exactly() {
    let db = build_db();
    let p = db.dir.path();
    let mut blocks: Vec<u64> = db
        .flows
        .iter()
        .map(|(_, f)| f.first_ns - f.first_ns % BLOCK_NS)
        .collect();
    blocks.sort();
    blocks.dedup();
    assert!(blocks.len() > 10, "the captures span many blocks");
    let from = blocks[blocks.len() / 3];
    let to = blocks[2 * blocks.len() / 3];
    let got = query(
        p,
        &[
            "sip,time",
            "--from",
            &(from / 1_000_000_000).to_string(),
            "--to",
            &(to / 1_000_000_000).to_string(),
        ],
    );
    let want = naive(&db, &["sip", "time"], &|_, f| {
        f.first_ns >= from && f.first_ns < to
    });
    assert!(!want.is_empty());
    assert_eq!(from_json(&got, &["sip", "time"]), want);
    // Sorting by time gives ascending buckets.
    let v = query(p, &["time", "--sort", "time"]);
    let times: Vec<u64> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| rfc3339_ns(r["time"].as_str().unwrap()))
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(times, blocks);
}

#[test]
fn stored_sums_equal_the_flow_records_of_trawl_flows() {
    // Splitting at block boundaries must not lose or add a packet or a byte.
    let db = build_db();
    let v = query(db.dir.path(), &["iface"]);
    for (file, iface) in CAPTURES {
        let out = trawl(&["flows", "-r", &testdata(file), "--summary", "none"]);
        let mut sums = [0u64; 4];
        for l in String::from_utf8(out.stdout).unwrap().lines() {
            let r: Value = serde_json::from_str(l).unwrap();
            for (s, k) in
                sums.iter_mut()
                    .zip(["fwd_packets", "rev_packets", "fwd_bytes", "rev_bytes"])
            {
                *s += r[k].as_u64().unwrap();
            }
        }
        let row = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["iface"] == iface)
            .unwrap();
        let got = ["fwd_packets", "rev_packets", "fwd_bytes", "rev_bytes"]
            .map(|k| row[k].as_u64().unwrap());
        assert_eq!(got, sums, "{file}");
    }
}

#[test]
fn subscribers_loop_over_stored_flows_by_time_range() {
    // `trawl subscribe flows --db` (the subscriber API's stored side) gives every stored row
    // of the range in order of first packet: the same rows as the naive metering of the
    // captures split at block boundaries, with their interface filter and time range.
    let db = build_db();
    let p = db.dir.path().to_str().unwrap();
    let key = |src: String, dst: String, sp: u64, dp: u64, proto: String, t: [u64; 6]| {
        format!("{src} {dst} {sp} {dp} {proto} {t:?}")
    };
    let subscribe = |extra: &[&str]| -> Vec<String> {
        let mut args = vec!["subscribe", "flows", "--db", p];
        args.extend_from_slice(extra);
        let out = trawl(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut last = 0;
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| {
                let r: Value = serde_json::from_str(l).unwrap();
                let n = |k: &str| r[k].as_u64().unwrap();
                assert!(n("first_ns") >= last, "not in order of first packet: {l}");
                last = n("first_ns");
                assert_eq!(r["fwd_len_max"], 0, "statistics the database does not keep");
                key(
                    r["src_ip"].as_str().unwrap().to_string(),
                    r["dst_ip"].as_str().unwrap().to_string(),
                    n("src_port"),
                    n("dst_port"),
                    r["proto"].as_str().unwrap().to_string(),
                    [
                        "first_ns",
                        "last_ns",
                        "fwd_packets",
                        "rev_packets",
                        "fwd_bytes",
                        "rev_bytes",
                    ]
                    .map(n),
                )
            })
            .collect()
    };
    let want = |pick: &dyn Fn(&str, &TestFlow) -> bool| -> Vec<String> {
        let mut v: Vec<String> = db
            .flows
            .iter()
            .filter(|(i, f)| pick(i, f))
            .map(|(_, f)| {
                key(
                    f.src.0.to_string(),
                    f.dst.0.to_string(),
                    u64::from(f.src.1),
                    u64::from(f.dst.1),
                    ProtoName(f.proto).to_string(),
                    [f.first_ns, f.last_ns, f.fwd.0, f.rev.0, f.fwd.1, f.rev.1],
                )
            })
            .collect();
        v.sort();
        v
    };
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let all = subscribe(&[]);
    assert_eq!(all.len(), db.flows.len());
    assert_eq!(sorted(all), want(&|_, _| true));
    let sip = subscribe(&["-i", "sip,dns"]);
    assert!(!sip.is_empty());
    assert_eq!(sorted(sip), want(&|i, _| i == "sip" || i == "dns"));
    // A range of whole seconds inside the many-protocols capture.
    let mut times: Vec<u64> = db
        .flows
        .iter()
        .filter(|(i, _)| i == "many")
        .map(|(_, f)| f.first_ns)
        .collect();
    times.sort();
    let (from, to) = (
        times[times.len() / 4] / 1_000_000_000,
        times[times.len() * 3 / 4] / 1_000_000_000,
    );
    let (from_s, to_s) = (from.to_string(), to.to_string());
    let part = subscribe(&["-i", "many", "--from", &from_s, "--to", &to_s]);
    let range = from * 1_000_000_000..to * 1_000_000_000;
    let expected = want(&|i, f| i == "many" && range.contains(&f.first_ns));
    assert!(!expected.is_empty() && expected.len() < times.len());
    assert_eq!(sorted(part), expected);
    let few = subscribe(&["--count", "3"]);
    assert_eq!(few.len(), 3);
    // Series rows are not in the flow database.
    let out = trawl(&["subscribe", "series", "--db", p]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--file"));
}

#[test]
fn bad_conditions_fail_with_the_position() {
    let dir = tempfile::tempdir().unwrap();
    let out = trawl(&[
        "query",
        "-d",
        dir.path().to_str().unwrap(),
        "--condition",
        "sip = 10.0.0.0/8 and dport = x",
        "sip",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("character 30"), "{err}");
    assert!(err.contains(&format!("{}^", " ".repeat(29))), "{err}");
    let out = trawl(&["query", "-d", dir.path().to_str().unwrap(), "bogus"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown attribute \"bogus\""));
}

#[test]
fn a_corrupt_block_is_reported_and_the_others_still_count() {
    let db = build_db();
    let p = db.dir.path();
    let all = query(p, &["iface"]);
    // Damage one block of the "sip" capture: keep the start, cut the footer.
    let day = std::fs::read_dir(p.join("iface=sip"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let block = std::fs::read_dir(&day)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let bytes = std::fs::read(&block).unwrap();
    std::fs::write(&block, &bytes[..bytes.len() / 2]).unwrap();
    let out = trawl(&[
        "query",
        "-d",
        p.to_str().unwrap(),
        "--format",
        "json",
        "iface",
    ]);
    assert_eq!(out.status.code(), Some(1), "exit 1 when a block failed");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stats"]["blocks_failed"].as_u64(), Some(1));
    let err = v["stats"]["errors"][0].as_str().unwrap();
    assert!(err.contains(block.to_str().unwrap()), "{err}");
    // Every other interface is unaffected.
    for r in all["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["iface"] != "sip")
    {
        assert!(v["rows"].as_array().unwrap().contains(r), "{r}");
    }
}

/// DuckDB (Python package) reads the database as hive-partitioned Parquet and gets the same
/// conversation table. Needs the package (`scripts/deps.sh` installs it): fails under CI
/// without it, a logged skip elsewhere.
#[test]
fn duckdb_reads_the_database_and_agrees() {
    if !trawl_testkit::require_python_module("duckdb") {
        return;
    }
    let db = build_db();
    let p = db.dir.path();
    let script = format!(
        "import duckdb, json\n\
         rows = duckdb.sql(\"SELECT iface, src_ip, dst_ip, sum(fwd_packets), sum(rev_packets), sum(fwd_bytes), sum(rev_bytes), count(*) \
         FROM read_parquet('{}/iface=*/*/*.parquet', hive_partitioning=true) GROUP BY ALL\").fetchall()\n\
         print(json.dumps([[str(x) for x in r[:3]] + [int(x) for x in r[3:]] for r in rows]))\n",
        p.display()
    );
    let out = Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let mut duck = Table::new();
    for r in &rows {
        let key = (0..3).map(|i| r[i].as_str().unwrap().to_string()).collect();
        let m = [3, 4, 5, 6, 7].map(|i| r[i].as_u64().unwrap());
        duck.insert(key, m);
    }
    let got = query(p, &["iface,sip,dip"]);
    assert_eq!(from_json(&got, &["iface", "sip", "dip"]), duck);
    assert!(duck.len() > 100);
    // Column names and types as the flow-record spec has them.
    let schema = Command::new("python3")
        .args([
            "-c",
            &format!(
                "import duckdb\nfor r in duckdb.sql(\"DESCRIBE SELECT * FROM read_parquet('{}/iface=*/*/*.parquet')\").fetchall(): print(r[0], r[1])",
                p.display()
            ),
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&schema.stdout);
    for line in [
        "src_ip VARCHAR",
        "dst_port USMALLINT",
        "proto VARCHAR",
        "fwd_bytes UBIGINT",
        "end_reason VARCHAR",
    ] {
        assert!(text.contains(line), "{line} not in\n{text}");
    }
}

#[test]
fn ingest_applies_retention_by_size() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().to_str().unwrap();
    let sample = testdata("oracle/many-protocols.pcap.gz");
    let out = trawl(&["ingest", "-r", &sample, "--db", db, "--summary", "none"]);
    assert!(out.status.success());
    let before = query(dir.path(), &["time", "--sort", "time"]);
    let times: Vec<&str> = before["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["time"].as_str().unwrap())
        .collect();
    assert!(!times.is_empty());
    // A generous budget deletes nothing; a budget of one byte keeps nothing.
    let out = trawl(&[
        "ingest",
        "-r",
        &testdata("oracle/sip.pcap"),
        "--db",
        db,
        "-i",
        "other",
        "--db-max-size",
        "1GiB",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kept = query(dir.path(), &["iface"]);
    assert_eq!(kept["rows"].as_array().unwrap().len(), 2);
    let out = trawl(&[
        "ingest",
        "-r",
        &testdata("oracle/sip.pcap"),
        "--db",
        db,
        "-i",
        "other",
        "--db-max-size",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("retention:"));
    let after = query(dir.path(), &["time"]);
    assert_eq!(after["rows"].as_array().unwrap().len(), 0);
    assert_eq!(after["stats"]["blocks"].as_u64(), Some(0));
}

/// The block files under `dir`, relative to it (not the stored series and alarms beside
/// them, issue 20).
fn block_files(dir: &Path, at: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(at).unwrap() {
        let p = e.unwrap().path();
        if at == dir && (p.ends_with("series") || p.ends_with("alarms")) {
            continue;
        }
        if p.is_dir() {
            block_files(dir, &p, out);
        } else if p.extension().is_some_and(|e| e == "parquet") {
            out.push(p.strip_prefix(dir).unwrap().to_path_buf());
        }
    }
}

#[test]
fn blocks_rewritten_by_duckdb_with_every_codec_query_as_the_originals() {
    // issue 27, item 9: a DuckDB-written block (Snappy, DuckDB's default) failed with
    // "Disabled feature at compile time: snap". Every block of a database is rewritten by
    // DuckDB with each Parquet codec into a second database; queries over it answer exactly
    // what they answer over the original, with no block failed.
    if !trawl_testkit::require_python_module("duckdb") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let original = dir.path().join("original");
    for (file, iface) in [
        ("oracle/many-protocols.pcap.gz", "many"),
        ("oracle/v6-http.pcap", "v6"),
    ] {
        let out = trawl(&[
            "ingest",
            "-r",
            &testdata(file),
            "--db",
            original.to_str().unwrap(),
            "-i",
            iface,
            "--summary",
            "none",
        ]);
        assert!(out.status.success());
    }
    let mut blocks = Vec::new();
    block_files(&original, &original, &mut blocks);
    assert!(blocks.len() > 3, "{blocks:?}");
    let queries: [&[&str]; 3] = [
        &["iface,sip,dip,sport,dport,proto"],
        &[
            "time,proto",
            "--condition",
            "dport = 53 or sip = 192.168.0.0/16",
        ],
        &["apps", "--condition", "not proto = tcp"],
    ];
    let answers = |db: &Path| -> Vec<(Value, Value)> {
        queries
            .iter()
            .map(|q| {
                let v = query(db, q);
                assert_eq!(v["stats"]["blocks_failed"], 0, "{}: {v}", db.display());
                (v["rows"].clone(), v["totals"].clone())
            })
            .collect()
    };
    let want = answers(&original);
    assert!(want[0].0.as_array().unwrap().len() > 100);
    for codec in ["snappy", "gzip", "brotli", "zstd", "uncompressed"] {
        let copy = dir.path().join(codec);
        let mut script = String::from("import duckdb, os\n");
        for b in &blocks {
            let dst = copy.join(b);
            std::fs::create_dir_all(dst.parent().unwrap()).unwrap();
            script.push_str(&format!(
                "duckdb.sql(\"COPY (SELECT * FROM read_parquet('{}', hive_partitioning=false)) \
                 TO '{}' (FORMAT parquet, COMPRESSION '{codec}')\")\n",
                original.join(b).display(),
                dst.display()
            ));
        }
        let out = Command::new("python3")
            .args(["-c", &script])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{codec}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The copies do carry the codec (DuckDB's own metadata reader says so).
        let probe = Command::new("python3")
            .args([
                "-c",
                &format!(
                    "import duckdb\nprint(duckdb.sql(\"SELECT DISTINCT compression FROM \
                     parquet_metadata('{}/iface=*/*/*.parquet')\").fetchall())",
                    copy.display()
                ),
            ])
            .output()
            .unwrap();
        let used = String::from_utf8_lossy(&probe.stdout).to_ascii_lowercase();
        assert!(used.contains(codec), "{codec}: {used}");
        assert!(answers(&copy) == want, "{codec}: answers differ");
        // The direct page decoder handles the codecs trawl writes; the others go through the
        // general reader, chunk by chunk.
        let general = query(&copy, &["sip"])["stats"]["column_chunks_general"]
            .as_u64()
            .unwrap();
        if ["snappy", "gzip", "brotli"].contains(&codec) {
            assert!(general > 0, "{codec}: no chunk read the general way");
        }
    }
}

#[test]
fn misnamed_parquet_files_are_counted_and_named() {
    // issue 27, item 11: `junk.parquet` or `2021.parquet` in a database were skipped without
    // a word. They are still not read (they are no blocks), but the JSON output counts them,
    // and a warning on standard error names them.
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path();
    let out = trawl(&[
        "ingest",
        "-r",
        &testdata("oracle/sip.pcap"),
        "--db",
        db.to_str().unwrap(),
        "-i",
        "sip",
        "--summary",
        "none",
    ]);
    assert!(out.status.success());
    let before = query(db, &["sip,dip"]);
    assert_eq!(before["stats"]["blocks_ignored"], 0);
    let mut blocks = Vec::new();
    block_files(db, db, &mut blocks);
    let block = db.join(&blocks[0]);
    let day = block.parent().unwrap();
    let strays = [
        day.join("junk.parquet"),
        day.join("2021.parquet"),
        day.join("1203.parquet"),
        db.join("flows.parquet"),
        db.join("iface=sip").join("old.parquet"),
    ];
    for s in &strays {
        std::fs::copy(&block, s).unwrap();
    }
    // A writer's temporary file and a file of another kind are not strays.
    std::fs::copy(&block, day.join(".1205.parquet.tmp")).unwrap();
    std::fs::write(day.join("README.txt"), "notes").unwrap();
    let args = [
        "query",
        "-d",
        db.to_str().unwrap(),
        "--format",
        "json",
        "sip,dip",
    ];
    let out = trawl(&args);
    assert!(out.status.success());
    let after: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(after["rows"], before["rows"]);
    assert_eq!(after["stats"]["blocks_ignored"], strays.len());
    let listed: Vec<&str> = after["stats"]["ignored_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("5 Parquet file(s)"), "{stderr}");
    for s in &strays {
        let s = s.to_str().unwrap();
        assert!(listed.contains(&s), "{s} not in {listed:?}");
        assert!(stderr.contains(s), "{s} not in {stderr}");
    }
    // The table format warns the same way.
    let table = trawl(&["query", "-d", db.to_str().unwrap(), "sip,dip"]);
    assert!(String::from_utf8_lossy(&table.stderr).contains("junk.parquet"));
}
