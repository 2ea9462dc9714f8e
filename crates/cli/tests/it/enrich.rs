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
    let plain = trawl(&["flows", "-r", &capture, "--summary", "none"]);
    assert!(plain.status.success());
    let mut addrs: Vec<String> = lines(&plain.stdout)
        .iter()
        .flat_map(|r| [r["src_ip"].clone(), r["dst_ip"].clone()])
        .map(|a| a.as_str().unwrap().to_string())
        .collect();
    addrs.sort();
    addrs.dedup();
    assert!(addrs.iter().any(|a| a.contains(':')) && addrs.len() > 20);
    let mut spec = String::new();
    for (i, a) in addrs.iter().enumerate() {
        if i % 2 == 0 {
            spec += &format!("asn {a} {}\n", 64_496 + i);
        }
        if i % 3 == 0 {
            spec += &format!("country {a} {}\n", ["DE", "BR", "JP"][i % 9 / 3]);
        }
    }
    python(WRITE_MMDB, &dir, &spec);

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
