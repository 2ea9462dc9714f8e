//! trawl's retransmission counter against tshark's TCP analysis
//! (`testdata/golden/tcp-analysis/`, made by the `generate.sh` beside the tables).
//!
//! trawl counts a segment that consumes sequence space (payload, SYN, FIN) and starts below the
//! highest sequence number its sender already sent, keep-alives excepted. tshark splits such
//! segments by timing into retransmissions and out-of-order segments (a gap filled soon after
//! it opened). So per connection: tshark's retransmissions ≤ trawl's ≤ tshark's retransmissions
//! + out-of-order segments.
use std::collections::HashMap;
use std::net::IpAddr;

use trawl_flow::FlowConfig;
use trawl_testkit::{meter_file, testdata};

type Conn = [(IpAddr, u16); 2];

fn conn(a: (IpAddr, u16), b: (IpAddr, u16)) -> Conn {
    if a <= b {
        [a, b]
    } else {
        [b, a]
    }
}

fn endpoint(s: &str) -> (IpAddr, u16) {
    let (ip, port) = s.rsplit_once(':').unwrap();
    (ip.parse().unwrap(), port.parse().unwrap())
}

fn check(name: &str) {
    let golden =
        std::fs::read_to_string(testdata(&format!("golden/tcp-analysis/{name}.tsv"))).unwrap();
    let mut theirs: HashMap<Conn, (u64, u64)> = HashMap::new();
    for line in golden.lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split('\t').collect();
        let e = theirs
            .entry(conn(endpoint(f[1]), endpoint(f[2])))
            .or_default();
        e.0 += f[3].parse::<u64>().unwrap();
        e.1 += f[4].parse::<u64>().unwrap();
    }
    let day = 86_400 * 1_000_000_000;
    let config = FlowConfig {
        idle_timeout_ns: day,
        tcp_linger_ns: day,
        ..FlowConfig::default()
    };
    let m = meter_file(&testdata(&format!("oracle/{name}")), config);
    let mut ours: HashMap<Conn, u64> = HashMap::new();
    for f in m.flows.iter().filter(|f| f.proto == 6) {
        *ours.entry(conn(f.src, f.dst)).or_default() += f.retransmissions;
    }
    assert!(!theirs.is_empty());
    let mut flagged = 0;
    for (c, (retrans, out_of_order)) in &theirs {
        let n = ours.get(c).copied().unwrap_or(0);
        assert!(
            *retrans <= n && n <= retrans + out_of_order,
            "{name} {c:?}: trawl {n} retransmissions, tshark {retrans} (+{out_of_order} out of order)"
        );
        flagged += retrans;
    }
    eprintln!(
        "{name}: {} connections, {flagged} retransmissions by tshark, consistent",
        theirs.len()
    );
}

#[test]
fn retransmissions_wireshark_retrans() {
    check("wireshark-retrans.pcap");
}

#[test]
fn retransmissions_many_protocols() {
    check("many-protocols.pcap.gz");
}

#[test]
fn retransmissions_ndpi_1kxun() {
    check("1kxun.pcap.gz");
}

#[test]
fn retransmissions_none_where_tshark_sees_none() {
    for name in ["tls13.pcap", "v6-http.pcap", "443-chrome.pcap"] {
        check(name);
    }
}
