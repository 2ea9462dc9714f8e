//! trawl's `community_id` against tshark's `communityid` post-dissector
//! (`testdata/golden/community-id/`, made by the `generate.sh` beside the tables): per ID, the
//! packets of trawl's records carrying it equal the frames tshark gives it. Every difference
//! is listed in `EXPLAINED` with its reason; anything else fails.
use std::collections::BTreeMap;

use trawl_flow::FlowConfig;
use trawl_testkit::{meter_file, testdata};

/// (capture, ID, trawl's packets, tshark's frames, why they differ). 0 means "no such ID".
const EXPLAINED: &[(&str, &str, u64, u64, &str)] = &[
    // IP fragments: tshark reassembles the datagrams and hashes each fragment before the last
    // without ports (it has no UDP header); trawl gives every fragment the ports of its
    // datagram's first fragment (flow-record.md), so all 53 packets carry the ID with ports.
    (
        "ip4_fragments.pcap",
        "1:AHOCzGXwfBeXLK9RbvrsWKxsGuM=",
        53,
        9,
        "fragments counted with their datagram's ports",
    ),
    (
        "ip4_fragments.pcap",
        "1:uOUfYbZxSzU0djK7uB8GzYJWSW4=",
        0,
        44,
        "tshark's port-less ID of the fragments before the last",
    ),
];

fn check(name: &str) -> usize {
    let golden =
        std::fs::read_to_string(testdata(&format!("golden/community-id/{name}.tsv"))).unwrap();
    let mut theirs: BTreeMap<String, u64> = BTreeMap::new();
    for line in golden.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        *theirs.entry(f[0].to_string()).or_default() += f[1].parse::<u64>().unwrap();
    }
    assert!(!theirs.is_empty(), "{name}: empty golden");
    let m = meter_file(&testdata(&format!("oracle/{name}")), FlowConfig::default());
    let mut ours: BTreeMap<String, u64> = BTreeMap::new();
    for f in &m.flows {
        *ours.entry(f.community_id.clone()).or_default() += f.fwd.0 + f.rev.0;
    }
    let mut differences = Vec::new();
    for id in theirs.keys().chain(ours.keys()) {
        let (o, t) = (
            ours.get(id).copied().unwrap_or(0),
            theirs.get(id).copied().unwrap_or(0),
        );
        if o != t && !differences.contains(&(id.clone(), o, t)) {
            differences.push((id.clone(), o, t));
        }
    }
    let explained: Vec<(String, u64, u64)> = EXPLAINED
        .iter()
        .filter(|e| e.0 == name)
        .map(|e| (e.1.to_string(), e.2, e.3))
        .collect();
    differences.sort();
    let mut want = explained.clone();
    want.sort();
    assert_eq!(
        differences, want,
        "{name}: (id, trawl packets, tshark frames)"
    );
    theirs.len()
}

/// The captures of `testdata/oracle/` with a golden here.
pub const CASES: &[&str] = &[
    "tcp-handshake-nano.pcap",
    "tls13.pcap",
    "v6-http.pcap",
    "dns-wiresharkrepo.pcap",
    "443-chrome.pcap",
    "wireshark-retrans.pcap",
    "sip.pcap",
    "ip4_fragments.pcap",
    "many_interfaces-1.pcapng",
];

#[test]
fn community_ids_equal_tsharks_per_packet() {
    let mut ids = 0;
    for name in CASES {
        ids += check(name);
    }
    assert!(ids >= 39, "{ids} IDs compared");
}
