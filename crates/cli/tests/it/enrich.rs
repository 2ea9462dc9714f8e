//! Enrichment where packets are metered (issue 22): `trawl flows --geoip-asn --geoip-country`
//! gives every record the AS numbers and countries of its addresses as python's `maxminddb`
//! reads the same files, and an IPFIX export carries them to the collector
//! (bgpSourceAsNumber/bgpDestinationAsNumber and trawl's country elements).
use std::path::Path;

use serde_json::Value;

use super::sflow::{python, READ_MMDB};
use super::{testdata, trawl};

/// Writes `asn.mmdb` and `country.mmdb` into the directory `argv[1]` with PyPI's
/// `mmdb-writer`: standard input holds `asn ADDRESS NUMBER` and `country ADDRESS CODE` lines,
/// each address a network of its own (/32 or /128).
const WRITE_MMDB: &str = r#"
import sys
from mmdb_writer import MMDBWriter, MmdbU32
from netaddr import IPSet
out = sys.argv[1]
asn = MMDBWriter(ip_version=6, database_type='GeoLite2-ASN', ipv4_compatible=True)
country = MMDBWriter(ip_version=6, database_type='GeoLite2-Country', ipv4_compatible=True)
for line in sys.stdin.read().splitlines():
    kind, ip, value = line.split()
    if kind == 'asn':
        asn.insert_network(IPSet([ip]), {'autonomous_system_number': MmdbU32(int(value))})
    else:
        country.insert_network(IPSet([ip]), {'country': {'iso_code': value}})
asn.to_db_file(out + '/asn.mmdb')
country.to_db_file(out + '/country.mmdb')
"#;

/// Writes `asn.mmdb` and `country.mmdb` into `dir` for the addresses of the records of
/// `captures` (`trawl flows` with `flags`): every second address an AS, every third a
/// country, IPv4 and IPv6 alike. Returns the addresses.
pub(crate) fn write_mmdbs(dir: &Path, captures: &[&str], flags: &[&str]) -> Vec<String> {
    let mut addrs = Vec::new();
    for capture in captures {
        let plain = trawl(&[&["flows", "-r", capture, "--summary", "none"], flags].concat());
        assert!(plain.status.success());
        addrs.extend(
            lines(&plain.stdout)
                .iter()
                .flat_map(|r| [r["src_ip"].clone(), r["dst_ip"].clone()])
                .map(|a| a.as_str().unwrap().to_string()),
        );
    }
    addrs.sort();
    addrs.dedup();
    let mut spec = String::new();
    for (i, a) in addrs.iter().enumerate() {
        if i % 2 == 0 {
            spec += &format!("asn {a} {}\n", 64_496 + i);
        }
        if i % 3 == 0 {
            spec += &format!("country {a} {}\n", ["DE", "BR", "JP"][i % 9 / 3]);
        }
    }
    python(WRITE_MMDB, dir, &spec);
    addrs
}

fn lines(out: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn flows_enriches_records_as_maxminddb_reads_the_files_and_ipfix_carries_them() {
    let capture = testdata("oracle/many-protocols.pcap.gz");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("enrich-flows");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // Networks for some of the capture's addresses: every second one an AS, every third a
    // country, IPv4 and IPv6 alike.
    let addrs = write_mmdbs(&dir, &[&capture], &[]);
    assert!(addrs.iter().any(|a| a.contains(':')) && addrs.len() > 20);

    let (ipfix, json) = (dir.join("flows.ipfix"), dir.join("flows.jsonl"));
    let out = trawl(&[
        "flows",
        "-r",
        &capture,
        "--summary",
        "none",
        "--geoip-asn",
        dir.join("asn.mmdb").to_str().unwrap(),
        "--geoip-country",
        dir.join("country.mmdb").to_str().unwrap(),
        "--export",
        &format!("ipfix:{}", ipfix.display()),
        "-o",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = lines(&std::fs::read(&json).unwrap());
    assert!(recs.len() > 50);
    let ends: Vec<&str> = recs
        .iter()
        .flat_map(|r| [r["src_ip"].as_str().unwrap(), r["dst_ip"].as_str().unwrap()])
        .collect();
    let oracle = python(READ_MMDB, &dir, &ends.join("\n"));
    let (mut with_as, mut with_country) = (0, 0);
    for (r, want) in recs
        .iter()
        .zip(oracle.lines().collect::<Vec<_>>().chunks(2))
    {
        for (side, want) in ["src", "dst"].iter().zip(want) {
            let (asn, country) = want.split_once(' ').unwrap();
            let country = if country == "-" { "" } else { country };
            let got_as = r[format!("{side}_as")].as_u64().unwrap_or(0);
            let got_country = r[format!("{side}_country")].as_str().unwrap_or("");
            assert_eq!(
                (got_as.to_string().as_str(), got_country),
                (asn, country),
                "{side} of {r}"
            );
            with_as += usize::from(got_as != 0);
            with_country += usize::from(!got_country.is_empty());
        }
    }
    assert!(
        with_as > 20 && with_country > 10,
        "{with_as} {with_country}"
    );

    // The collector reads the same records back from the IPFIX file.
    let back = trawl(&[
        "collect",
        "-r",
        ipfix.to_str().unwrap(),
        "--summary",
        "none",
    ]);
    assert!(back.status.success());
    let sorted = |v: &[Value]| {
        let mut s: Vec<String> = v.iter().map(Value::to_string).collect();
        s.sort();
        s
    };
    assert_eq!(sorted(&lines(&back.stdout)), sorted(&recs));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The later columns of the database as DuckDB reads them, in this order, after the key and
/// `first_ns`.
const STORED: [&str; 18] = [
    "src_as",
    "dst_as",
    "src_country",
    "dst_country",
    "fwd_rtt_handshake_ns",
    "fwd_rtt_samples",
    "fwd_rtt_min_ns",
    "fwd_rtt_max_ns",
    "fwd_rtt_mean_ns",
    "rev_rtt_handshake_ns",
    "rev_rtt_samples",
    "rev_rtt_min_ns",
    "rev_rtt_max_ns",
    "rev_rtt_mean_ns",
    "tunnel_type",
    "tunnel_src",
    "tunnel_dst",
    "tunnel_id",
];

/// A stored row's key and later fields as text: the record's JSON values, null and the
/// absent tunnel of JSON as the database's empty text, means to 3 decimals (as JSON has them).
fn stored_row(iface: &str, r: &Value) -> Vec<String> {
    let text = |v: &Value| match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_u64() {
            Some(u) => u.to_string(),
            None => format!("{:.3}", n.as_f64().unwrap()),
        },
        other => other.to_string(),
    };
    let mut row = vec![iface.to_string()];
    for k in [
        "src_ip", "dst_ip", "src_port", "dst_port", "proto", "first_ns",
    ] {
        row.push(text(&r[k]));
    }
    for k in STORED {
        row.push(match (k, &r[k]) {
            // JSON has no tunnel fields without a tunnel; the database 0.
            ("tunnel_id", Value::Null) => "0".into(),
            ("src_as" | "dst_as", Value::Null) => "0".into(),
            (k, Value::Number(n)) if k.ends_with("mean_ns") => {
                format!("{:.3}", n.as_f64().unwrap())
            }
            (_, v) => text(v),
        });
    }
    row
}

/// `trawl ingest --geoip-asn --geoip-country --tunnel inner` stores every field a record has
/// beyond the key and counters — AS numbers, countries, round trips and the outer tunnel —
/// and DuckDB reads them back equal to the records `trawl flows` writes with the same flags
/// (whose enrichment the test above holds to python's maxminddb).
#[test]
fn ingest_enriches_and_duckdb_reads_every_stored_field_as_flows_writes_it() {
    if !trawl_testkit::require_python_module("duckdb") {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("enrich-ingest");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // GTP-U with TCP handshakes inside, GTP-U over IPv6, Geneve.
    let captures = [
        (testdata("pcaps/gtp-iphone.pcap"), "gtp"),
        (testdata("pcaps/ipv6-gtp6.pcap"), "gtp6"),
        (testdata("pcaps/geneve.pcap"), "geneve"),
    ];
    let paths: Vec<&str> = captures.iter().map(|(c, _)| c.as_str()).collect();
    let inner = ["--tunnel", "inner"];
    write_mmdbs(&dir, &paths, &inner);
    let (asn, country) = (dir.join("asn.mmdb"), dir.join("country.mmdb"));
    let geo = [
        "--geoip-asn",
        asn.to_str().unwrap(),
        "--geoip-country",
        country.to_str().unwrap(),
    ];
    let db = dir.join("db");
    let mut want = Vec::new();
    for (capture, iface) in &captures {
        let flows = trawl(
            &[
                &["flows", "-r", capture, "--summary", "none"][..],
                &inner,
                &geo,
            ]
            .concat(),
        );
        assert!(flows.status.success());
        let recs = lines(&flows.stdout);
        // One block interval: the database's rows are the records themselves.
        let first = recs.iter().map(|r| r["first_ns"].as_u64().unwrap()).min();
        let last = recs.iter().map(|r| r["last_ns"].as_u64().unwrap()).max();
        assert_eq!(
            first.unwrap() / 300_000_000_000,
            last.unwrap() / 300_000_000_000
        );
        want.extend(recs.iter().map(|r| stored_row(iface, r)));
        let out = trawl(
            &[
                &[
                    "ingest",
                    "-r",
                    capture,
                    "--db",
                    db.to_str().unwrap(),
                    "-i",
                    iface,
                ][..],
                &["--summary", "none"],
                &inner,
                &geo,
            ]
            .concat(),
        );
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let script = format!(
        "import duckdb, json\n\
         rows = duckdb.sql(\"SELECT iface, src_ip, dst_ip, src_port, dst_port, proto, first_ns, {} \
         FROM read_parquet('{}/iface=*/*/*.parquet', hive_partitioning=true)\").fetchall()\n\
         print(json.dumps([['' if x is None else ('%.3f' % x if isinstance(x, float) else str(x)) for x in r] for r in rows]))\n",
        STORED.join(", "),
        db.display()
    );
    let out = std::process::Command::new("python3")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut got: Vec<Vec<String>> = serde_json::from_slice(&out.stdout).unwrap();
    got.sort();
    want.sort();
    assert_eq!(got, want);
    // The capture's records have each kind of field.
    let has = |col: usize| {
        got.iter()
            .filter(|r| !r[col].is_empty() && r[col] != "0")
            .count()
    };
    let counts = [7, 8, 9, 10, 11, 21].map(has);
    assert!(
        counts[0] + counts[1] >= 4 && counts[2] + counts[3] >= 3,
        "AS numbers, countries: {counts:?}"
    );
    assert!(has(11) >= 3, "handshakes");
    assert!(has(21) >= 19, "tunnels");
    assert!(got.iter().any(|r| r[21] == "gtpu" && r[22].contains(':')));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `trawl run -i IFACE --db DB --geoip-asn --geoip-country`: records captured live on a veth
/// pair reach the database with the AS numbers and countries python's maxminddb reads for
/// their addresses (DuckDB reads the rows), and `--print-composition` shows the settings on
/// the meter.
#[test]
fn run_enriches_live_records_in_the_database() {
    if !trawl_testkit::require_python_module("duckdb") {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("enrich-run");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let captures = [testdata("oracle/v6-http.pcap"), testdata("oracle/sip.pcap")];
    let paths: Vec<&str> = captures.iter().map(String::as_str).collect();
    write_mmdbs(&dir, &paths, &[]);
    let (asn, country, db) = (
        dir.join("asn.mmdb"),
        dir.join("country.mmdb"),
        dir.join("db"),
    );
    let lab = super::live::lab();
    let args = [
        "run",
        "-i",
        lab.host.as_str(),
        "--no-ring",
        "--db",
        db.to_str().unwrap(),
        "--summary",
        "none",
        "--geoip-asn",
        asn.to_str().unwrap(),
        "--geoip-country",
        country.to_str().unwrap(),
    ];
    let plan = trawl(&[&args[..], &["--print-composition"]].concat());
    let plan = String::from_utf8_lossy(&plan.stdout);
    assert!(
        plan.contains(&format!("geoip_asn = \"{}\"", asn.display()))
            && plan.contains(&format!("geoip_country = \"{}\"", country.display())),
        "{plan}"
    );
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run trawl");
    std::thread::sleep(std::time::Duration::from_millis(1500));
    for c in &captures {
        lab.replay_into_host(Path::new(c), &["--topspeed"])
            .expect("tcpreplay");
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    let _ = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = format!(
        "import duckdb\n\
         for r in duckdb.sql(\"SELECT src_ip, dst_ip, src_as, dst_as, src_country, dst_country \
         FROM read_parquet('{}/iface=*/*/*.parquet')\").fetchall(): print(*[x or '-' for x in r])\n",
        db.display()
    );
    let rows = python(&script, &dir, "");
    let rows: Vec<Vec<&str>> = rows.lines().map(|l| l.split(' ').collect()).collect();
    assert!(rows.len() >= 6, "{rows:?}");
    let ends: Vec<&str> = rows.iter().flat_map(|r| [r[0], r[1]]).collect();
    let oracle = python(READ_MMDB, &dir, &ends.join("\n"));
    let mut enriched = 0;
    for (r, want) in rows
        .iter()
        .zip(oracle.lines().collect::<Vec<_>>().chunks(2))
    {
        // maxminddb says `0 -` for an address it does not cover; the row 0 (`-`) and '-'.
        let got = [format!("{} {}", r[2], r[4]), format!("{} {}", r[3], r[5])]
            .map(|s| s.replacen("- ", "0 ", 1));
        assert_eq!(got, [want[0], want[1]], "{r:?}");
        enriched += usize::from(got.iter().any(|s| s != "0 -"));
    }
    assert!(enriched >= 3, "{enriched} of {} rows enriched", rows.len());
    let _ = std::fs::remove_dir_all(&dir);
}
