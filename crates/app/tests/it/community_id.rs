//! Community ID v1 against the spec's published vectors (testdata/app/community-id/README.md).

use std::path::PathBuf;

use trawl_app::{CommunityId, FlowTuple};

fn vectors(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/app/community-id")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn port(text: &str) -> u16 {
    if text == "-" {
        0
    } else {
        text.parse().unwrap()
    }
}

/// The README tables: raw ICMP type/code, both directions, seeds 0 and 1, base64 and hex.
#[test]
fn readme_tables_all_equal() {
    let text = vectors("readme-tables.tsv");
    let mut checked = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        let flow = FlowTuple {
            proto: f[1].parse().unwrap(),
            src_ip: f[2].parse().unwrap(),
            dst_ip: f[3].parse().unwrap(),
            src_port: port(f[4]),
            dst_port: port(f[5]),
        };
        let got = match f[0] {
            "seed0" => CommunityId::new(0).compute(&flow),
            "seed1" => CommunityId::new(1).compute(&flow),
            "seed0-hex" => CommunityId::new(0).compute_hex(&flow),
            other => panic!("config {other}"),
        }
        .unwrap();
        assert_eq!(got, f[6], "{line}");
        checked += 1;
    }
    assert_eq!(checked, 48);
}

/// The JSON baselines over the spec's combined.pcap.gz: TCP/UDP/SCTP over IPv4 and IPv6,
/// ICMP, ICMPv6 neighbour discovery and errors, RSVP.
#[test]
fn json_baselines_all_equal() {
    let mut checked = 0;
    for (name, seed, hex) in [
        ("baseline_deflt.json", 0, false),
        ("baseline_seed1.json", 1, false),
        ("baseline_nob64.json", 0, true),
    ] {
        let rows: Vec<serde_json::Value> = serde_json::from_str(&vectors(name)).unwrap();
        for row in &rows {
            let flow = FlowTuple {
                proto: row["proto"].as_u64().unwrap() as u8,
                src_ip: row["saddr"].as_str().unwrap().parse().unwrap(),
                dst_ip: row["daddr"].as_str().unwrap().parse().unwrap(),
                src_port: row["sport"].as_u64().unwrap_or(0) as u16,
                dst_port: row["dport"].as_u64().unwrap_or(0) as u16,
            };
            let id = CommunityId::new(seed);
            let got = if hex {
                id.compute_hex(&flow)
            } else {
                id.compute(&flow)
            }
            .unwrap();
            assert_eq!(got, row["communityid"].as_str().unwrap(), "{name}: {row}");
            checked += 1;
        }
    }
    assert_eq!(checked, 3 * 23);
}

/// Addresses of two families have no Community ID.
#[test]
fn mixed_families_refused() {
    let flow = FlowTuple {
        proto: 6,
        src_ip: "1.2.3.4".parse().unwrap(),
        dst_ip: "::1".parse().unwrap(),
        src_port: 1,
        dst_port: 2,
    };
    assert_eq!(CommunityId::default().compute(&flow), None);
}
