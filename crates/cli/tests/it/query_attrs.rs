//! The enrichment and tunnel columns as query attributes and condition fields (issue 22):
//! `trawl query` grouped by and filtered on `sas`, `das`, `scountry`, `dcountry`,
//! `tunnel_type`, `tunnel_src`, `tunnel_dst` answers what DuckDB computes over the same
//! Parquet blocks — a database ingested with `--geoip-asn --geoip-country --tunnel inner`,
//! plus a block written by DuckDB without those columns (an older block: its rows group as
//! empty and 0) — and so do the API (`/api/v1/query`) and a fleet query (`--probe`).
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::api::{enc, get_json, Served};
use super::enrich::write_mmdbs;
use super::{testdata, trawl};

/// One query: attributes, condition (or none), and the DuckDB statement's grouping
/// expressions and WHERE clause over the same rows.
struct Case {
    attrs: &'static str,
    condition: Option<&'static str>,
    select: &'static str,
    filter: &'static str,
}

/// The later columns as a block without them reads: `union_by_name` gives NULL, which trawl
/// reads as the empty value or 0.
const COLUMNS: &str =
    "SELECT iface, src_ip, dst_ip, proto, fwd_packets, rev_packets, fwd_bytes, rev_bytes, \
     coalesce(src_as, 0) AS sas, coalesce(dst_as, 0) AS das, \
     coalesce(src_country, '') AS scountry, coalesce(dst_country, '') AS dcountry, \
     coalesce(tunnel_type, '') AS tunnel_type, coalesce(tunnel_src, '') AS tunnel_src, \
     coalesce(tunnel_dst, '') AS tunnel_dst";

const CASES: [Case; 7] = [
    Case {
        attrs: "sas,das",
        condition: None,
        select: "sas, das",
        filter: "true",
    },
    Case {
        attrs: "scountry,dcountry,proto",
        condition: Some("dcountry = de or scountry = JP"),
        select: "scountry, dcountry, proto",
        filter: "dcountry = 'DE' OR scountry = 'JP'",
    },
    Case {
        attrs: "tunnel_type,tunnel_src,tunnel_dst",
        condition: None,
        select: "tunnel_type, tunnel_src, tunnel_dst",
        filter: "true",
    },
    // Rows without a tunnel: the old block's.
    Case {
        attrs: "talk_conv,tunnel_type,sas",
        condition: Some("tunnel_src = \"\""),
        select: "src_ip, dst_ip, tunnel_type, sas",
        filter: "tunnel_src = ''",
    },
    Case {
        attrs: "iface,tunnel_dst,das",
        condition: Some("tunnel_type = gtpu and das != 0"),
        select: "iface, tunnel_dst, das",
        filter: "tunnel_type = 'gtpu' AND das <> 0",
    },
    // An outer IPv6 prefix; the old block (no tunnel) matches no address.
    Case {
        attrs: "dcountry,tunnel_src",
        condition: Some("tunnel_src = ::/0 or not sas >= 1"),
        select: "dcountry, tunnel_src",
        filter: "tunnel_src LIKE '%:%' OR sas < 1",
    },
    Case {
        attrs: "sip,scountry,sas,tunnel_type",
        condition: Some("scountry = \"\" and tunnel_type != \"\""),
        select: "src_ip, scountry, sas, tunnel_type",
        filter: "scountry = '' AND tunnel_type <> ''",
    },
];

/// A row as text: the attribute values in order, then the five metrics.
fn trawl_rows(doc: &Value, attrs: &[&str]) -> Vec<Vec<String>> {
    let mut rows: Vec<Vec<String>> = doc["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            attrs
                .iter()
                .chain(&[
                    "fwd_packets",
                    "rev_packets",
                    "fwd_bytes",
                    "rev_bytes",
                    "flows",
                ])
                .map(|k| match &r[*k] {
                    Value::String(s) => s.clone(),
                    Value::Null => panic!("no {k} in {r}"),
                    v => v.to_string(),
                })
                .collect()
        })
        .collect();
    rows.sort();
    rows
}

/// The result field names of an attribute list (as `trawl query` names JSON keys).
fn fields(attrs: &str) -> Vec<&'static str> {
    attrs
        .replace("talk_conv", "sip,dip")
        .split(',')
        .map(|a| match a {
            "sip" => "src_ip",
            "dip" => "dst_ip",
            "sas" => "src_as",
            "das" => "dst_as",
            "scountry" => "src_country",
            "dcountry" => "dst_country",
            "proto" => "proto",
            "iface" => "iface",
            "tunnel_type" => "tunnel_type",
            "tunnel_src" => "tunnel_src",
            "tunnel_dst" => "tunnel_dst",
            other => panic!("{other}"),
        })
        .collect()
}

/// DuckDB's groups for `case` over the database `db`.
fn oracle(db: &Path, case: &Case) -> Vec<Vec<String>> {
    let script = format!(
        "import duckdb, json\n\
         rows = duckdb.sql(\"SELECT {sel}, sum(fwd_packets), sum(rev_packets), sum(fwd_bytes), sum(rev_bytes), count(*) \
         FROM ({COLUMNS} FROM read_parquet('{db}/iface=*/*/*.parquet', hive_partitioning=true, union_by_name=true)) \
         WHERE {filter} GROUP BY ALL\").fetchall()\n\
         print(json.dumps([[str(x) for x in r] for r in rows]))\n",
        sel = case.select,
        db = db.display(),
        filter = case.filter,
    );
    let stdout = python(&script);
    let mut rows: Vec<Vec<String>> = serde_json::from_slice(&stdout).unwrap();
    rows.sort();
    rows
}

/// Runs a python script; its standard output (a failure is the test's, with python's error).
fn python(script: &str) -> Vec<u8> {
    let out = Command::new("python3")
        .args(["-c", script])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// The database: three tunnel captures ingested with enrichment and `--tunnel inner`, and one
/// block of the first rewritten by DuckDB without the later columns (interface `old`).
fn database(dir: &Path) -> std::path::PathBuf {
    let captures = [
        (testdata("pcaps/gtp-iphone.pcap"), "gtp"),
        (testdata("pcaps/ipv6-gtp6.pcap"), "gtp6"),
        (testdata("pcaps/geneve.pcap"), "geneve"),
    ];
    let paths: Vec<&str> = captures.iter().map(|(c, _)| c.as_str()).collect();
    let inner = ["--tunnel", "inner"];
    write_mmdbs(dir, &paths, &inner);
    let (asn, country) = (dir.join("asn.mmdb"), dir.join("country.mmdb"));
    let db = dir.join("db");
    for (capture, iface) in &captures {
        let out = trawl(&[
            "ingest",
            "-r",
            capture,
            "--db",
            db.to_str().unwrap(),
            "-i",
            iface,
            "--summary",
            "none",
            "--tunnel",
            "inner",
            "--geoip-asn",
            asn.to_str().unwrap(),
            "--geoip-country",
            country.to_str().unwrap(),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The gtp interface's block again, as a block written before the later columns.
    let gtp = db.join("iface=gtp");
    let day = std::fs::read_dir(&gtp).unwrap().next().unwrap().unwrap();
    let block = std::fs::read_dir(day.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .unwrap();
    let old = db.join("iface=old").join(day.file_name());
    std::fs::create_dir_all(&old).unwrap();
    let script = format!(
        "import duckdb\n\
         duckdb.sql(\"COPY (SELECT src_ip, dst_ip, src_port, dst_port, proto, vlan, first_ns, last_ns, \
         fwd_packets, rev_packets, fwd_bytes, rev_bytes FROM read_parquet('{}')) TO '{}' (FORMAT parquet)\")\n",
        block.display(),
        old.join(block.file_name().unwrap()).display()
    );
    python(&script);
    db
}

#[test]
fn enrichment_and_tunnel_attributes_group_and_filter_as_duckdb_does() {
    if !trawl_testkit::require_python_module("duckdb") {
        return;
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("query-attrs");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = database(&dir);
    let dbs = db.to_str().unwrap();
    let served = Served::start_with(
        Command::new(env!("CARGO_BIN_EXE_trawl")).args([
            "serve",
            "--db",
            dbs,
            "--api",
            "127.0.0.1:0",
        ]),
        "serving on http://",
        "http://",
    );
    let probe = format!("p1={}", served.url(""));
    for case in &CASES {
        let want = oracle(&db, case);
        assert!(want.len() >= 2, "{}: the oracle has {want:?}", case.attrs);
        let mut args = vec![
            "query", "-d", dbs, "--format", "json", "-n", "0", case.attrs,
        ];
        let mut fleet = vec![
            "query", "--probe", &probe, "--format", "json", "-n", "0", case.attrs,
        ];
        let mut qs = format!("/api/v1/query?limit=0&attrs={}", case.attrs);
        if let Some(c) = case.condition {
            args.extend(["--condition", c]);
            fleet.extend(["--condition", c]);
            qs.push_str(&format!("&condition={}", enc(c)));
        }
        let out = trawl(&args);
        assert!(
            out.status.success(),
            "{}: {}",
            case.attrs,
            String::from_utf8_lossy(&out.stderr)
        );
        let local: Value = serde_json::from_slice(&out.stdout).unwrap();
        let names = fields(case.attrs);
        assert_eq!(
            trawl_rows(&local, &names),
            want,
            "{} {:?}",
            case.attrs,
            case.condition
        );
        assert_eq!(local["stats"]["blocks_failed"], 0);
        let api = get_json(&served.url(&qs));
        assert_eq!(trawl_rows(&api, &names), want, "API: {qs}");
        let out = trawl(&fleet);
        assert!(
            out.status.success(),
            "fleet {}: {}",
            case.attrs,
            String::from_utf8_lossy(&out.stderr)
        );
        let fleet: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(trawl_rows(&fleet, &names), want, "fleet {}", case.attrs);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Attributes whose values need more than the 127 bits of a packed key fail before any
/// block is read, naming them and their widths; the same through the API.
#[test]
fn attributes_that_do_not_pack_are_refused_naming_them() {
    let out = trawl(&[
        "query",
        "-d",
        "/nonexistent",
        "sip,dip,tunnel_src,tunnel_dst",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("sip (33 bits), dip (33 bits), tunnel_src (33 bits), tunnel_dst (33 bits) need 132 bits"),
        "{err}"
    );
    // Every combination of the attributes before these packs (124 bits).
    let out = trawl(&[
        "query",
        "-d",
        "/nonexistent",
        "sip,dip,sport,dport,proto,vlan,app,iface,time",
    ]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("bits"));
}
