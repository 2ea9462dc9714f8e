//! The binary partial aggregate (schema version 3) on databases built from corpus captures:
//! each probe's answer decodes to the groups and counters of its JSON form, and answers merged
//! through the binary form equal answers merged through JSON, with and without `probe`.
use std::path::Path;

use trawl_capture::{FileSource, PacketSource};
use trawl_flow::{FlowConfig, FlowMeter, FlowRecord};
use trawl_query::{parse_attributes, scan, PartialAggregate, Query};
use trawl_store::{Ingest, StoreConfig};

/// Committed captures from the corpus (testdata/oracle/README.md): IPv4 and IPv6, TCP, UDP,
/// many protocols, VLANs.
const CAPTURES: [&str; 4] = [
    "oracle/many-protocols.pcap.gz",
    "oracle/v6-http.pcap",
    "oracle/sip.pcap",
    "oracle/1kxun.pcap.gz",
];

/// Meters each capture into `db` under the interface `names[i]`.
fn ingest(db: &Path, captures: &[(&str, &str)]) {
    let mut ing = Ingest::open(db, StoreConfig::default()).unwrap();
    for (capture, iface) in captures {
        let id = ing.iface(iface).unwrap();
        let mut source = FileSource::open(trawl_testkit::testdata(capture)).unwrap();
        let mut meter = FlowMeter::new(FlowConfig::default());
        let mut rows: Vec<Result<(), trawl_store::Error>> = Vec::new();
        let mut sink = |r: &FlowRecord<'_>| rows.push(ing.push(id, r));
        while let Some(batch) = source.next_batch().unwrap() {
            for pkt in batch.iter() {
                meter.process(&pkt, &mut sink);
            }
        }
        meter.flush(&mut sink);
        assert!(!rows.is_empty(), "{capture}: no flow");
        rows.into_iter().for_each(|r| r.unwrap());
    }
    ing.finish().unwrap();
}

fn query(attrs: &str) -> Query {
    Query {
        attributes: parse_attributes(attrs).unwrap(),
        workers: 2,
        ..Query::default()
    }
}

const ATTRS: [&str; 5] = [
    "talk_conv",
    "sip,dip,sport,dport,proto",
    "iface,time,dport,proto,vlan",
    "dip",
    "iface",
];

#[test]
fn binary_partials_of_corpus_databases_decode_to_their_json_form() {
    let dir = tempfile::tempdir().unwrap();
    let probes: Vec<(String, std::path::PathBuf)> = CAPTURES
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let db = dir.path().join(format!("p{i}"));
            ingest(&db, &[(c, &format!("eth{i}"))]);
            (format!("p{i}"), db)
        })
        .collect();
    for attrs in ATTRS {
        let q = query(attrs);
        let mut by_json: Option<PartialAggregate> = None;
        let mut by_bytes: Option<PartialAggregate> = None;
        for (_, db) in &probes {
            let p = scan(db, &q).unwrap();
            assert!(!p.is_empty(), "{attrs}");
            let json = PartialAggregate::from_json(&p.to_json(), q.max_groups).unwrap();
            let bytes = PartialAggregate::from_bytes(&p.to_bytes(), q.max_groups).unwrap();
            // Groups sorted by key and every counter: the whole documented form.
            assert_eq!(bytes.to_json(), p.to_json(), "{attrs}");
            for (merged, one) in [(&mut by_json, json), (&mut by_bytes, bytes)] {
                match merged {
                    None => *merged = Some(one),
                    Some(m) => m.merge(one).unwrap(),
                }
            }
        }
        let (j, b) = (by_json.unwrap(), by_bytes.unwrap());
        assert_eq!(b.to_json(), j.to_json(), "{attrs}: merged");
        assert_eq!(b.len(), j.len());
    }
}

#[test]
fn binary_partials_merge_by_probe_like_json_and_like_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b, all) = (
        dir.path().join("a"),
        dir.path().join("b"),
        dir.path().join("all"),
    );
    // Two probes sharing an interface name and addresses (the same capture on both), and one
    // database of both probes' flows.
    let on_a = [(CAPTURES[0], "eth0"), (CAPTURES[1], "eth1")];
    let on_b = [(CAPTURES[1], "eth0"), (CAPTURES[2], "eth1")];
    ingest(&a, &on_a);
    ingest(&b, &on_b);
    ingest(&all, &[on_a[0], on_a[1], on_b[0], on_b[1]]);
    for attrs in ATTRS {
        let q = query(attrs);
        let mut with_probe = q.attributes.clone();
        with_probe.push(trawl_query::Attribute::Probe);
        let (pa, pb) = (scan(&a, &q).unwrap(), scan(&b, &q).unwrap());
        // Without `probe`: the merge equals one scan over everything.
        let mut merged = PartialAggregate::from_bytes(&pa.to_bytes(), q.max_groups).unwrap();
        merged
            .merge(PartialAggregate::from_bytes(&pb.to_bytes(), q.max_groups).unwrap())
            .unwrap();
        let whole = scan(&all, &q).unwrap();
        let groups = |p: &PartialAggregate| {
            let mut g = p.groups();
            g.sort_by(|x, y| x.0.cmp(&y.0));
            g
        };
        assert_eq!(groups(&merged), groups(&whole), "{attrs}");
        // With `probe`: the binary path equals the JSON path.
        let fleet = |decode: &dyn Fn(&PartialAggregate) -> PartialAggregate| {
            let mut m = PartialAggregate::new(with_probe.clone(), q.max_groups);
            for (name, p) in [("fra1", &pa), ("ams1", &pb)] {
                m.merge(decode(p).for_probe(name, &with_probe).unwrap())
                    .unwrap();
            }
            m
        };
        let via_bytes =
            fleet(&|p| PartialAggregate::from_bytes(&p.to_bytes(), q.max_groups).unwrap());
        let via_json = fleet(&|p| PartialAggregate::from_json(&p.to_json(), q.max_groups).unwrap());
        assert_eq!(via_bytes.to_json(), via_json.to_json(), "{attrs},probe");
        assert!(via_bytes.len() >= merged.len());
    }
}
