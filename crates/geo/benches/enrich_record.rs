//! `enrich_record`: the cost of adding AS numbers and countries to a flow record, through the
//! lookup cache (flows repeat their addresses: 2000 hosts) and past it (every address new).
//! The MaxMind DB files (10 000 IPv4 networks each) are written by PyPI's `mmdb-writer`
//! (`pip install mmdb-writer`) into a temporary directory when the bench starts.
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use trawl_geo::{EnrichFiles, Enricher};

const WRITE: &str = r#"
import sys
from mmdb_writer import MMDBWriter, MmdbU32
from netaddr import IPSet
asn = MMDBWriter(ip_version=6, database_type='GeoLite2-ASN', ipv4_compatible=True)
country = MMDBWriter(ip_version=6, database_type='GeoLite2-Country', ipv4_compatible=True)
codes = ['SE', 'DE', 'US', 'FR', 'JP', 'BR', 'ZA', 'IN']
for i in range(10000):
    net = '%d.%d.%d.0/24' % (1 + i // 65536 % 200, i // 256 % 256, i % 256)
    asn.insert_network(IPSet([net]), {'autonomous_system_number': MmdbU32(64512 + i % 1000)})
    country.insert_network(IPSet([net]), {'country': {'iso_code': codes[i % len(codes)]}})
asn.to_db_file(sys.argv[1] + '/asn.mmdb')
country.to_db_file(sys.argv[1] + '/country.mmdb')
"#;

/// Address `i` of a generator that walks the covered /24s (and some uncovered space).
fn addr(i: u32) -> IpAddr {
    let x = i.wrapping_mul(2_654_435_761);
    IpAddr::V4(Ipv4Addr::new(
        1,
        (x >> 8) as u8 % 40,
        x as u8,
        (x >> 16) as u8,
    ))
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("python3")
        .args(["-c", WRITE])
        .arg(dir.path())
        .status()
        .expect("python3 with mmdb-writer");
    assert!(ok.success(), "pip install mmdb-writer");
    let files = EnrichFiles {
        asn: Some(dir.path().join("asn.mmdb")),
        country: Some(dir.path().join("country.mmdb")),
        interfaces: None,
    };
    let mut g = c.benchmark_group("enrich_record");
    const N: u32 = 100_000;
    g.throughput(Throughput::Elements(u64::from(N)));
    for (name, hosts) in [("cached_2000_hosts", 2000u32), ("uncached", u32::MAX)] {
        let mut e = Enricher::open(&files).unwrap().unwrap();
        let mut r = trawl_geo::record();
        let mut next = 0u32;
        g.bench_function(name, |b| {
            b.iter(|| {
                for _ in 0..N {
                    next = next.wrapping_add(1);
                    r.src_ip = addr(next % hosts);
                    r.dst_ip = addr(((next / 3) % hosts) ^ 0x55);
                    e.record(&mut r, None);
                }
                r.extra.src_as
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
