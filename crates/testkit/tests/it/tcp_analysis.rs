//! trawl's retransmission counter against tshark's TCP analysis
//! (`testdata/golden/tcp-analysis/`, made by the `generate.sh` beside the tables).
//!
//! trawl counts a segment that consumes sequence space (payload, SYN, FIN) and starts below the
//! highest sequence number its sender already sent, keep-alives excepted. tshark splits such
//! segments by timing into retransmissions and out-of-order segments (a gap filled soon after
//! it opened). So per connection: tshark's retransmissions ≤ trawl's ≤ tshark's retransmissions
//! + out-of-order segments. Connections trawl has and tshark has not must have none.
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
    let capture = [format!("oracle/{name}"), format!("pcaps/{name}")]
        .map(|p| testdata(&p))
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{name}: not in testdata/oracle or testdata/pcaps"));
    let m = meter_file(&capture, config);
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
    // Connections trawl has and tshark has not: with no tshark verdict to bound them, they must
    // have no retransmission at all.
    let unexplained: Vec<String> = ours
        .iter()
        .filter(|(c, n)| !theirs.contains_key(*c) && **n > 0)
        .map(|(c, n)| format!("{c:?}: {n} retransmissions"))
        .collect();
    assert!(
        unexplained.is_empty(),
        "{name}: trawl counts retransmissions on connections tshark does not have: {unexplained:#?}"
    );
    let only_ours = ours.keys().filter(|c| !theirs.contains_key(*c)).count();
    eprintln!(
        "{name}: {} connections, {flagged} retransmissions by tshark, consistent; {only_ours} \
         connections only trawl has, none with retransmissions",
        theirs.len()
    );
}

macro_rules! tcp_cases {
    ($($test:ident => [$($file:literal),*];)*) => {
        $( #[test] fn $test() { $( check($file); )* } )*
        /// The captures whose `testdata/golden/tcp-analysis/` tables the tests above compare.
        pub const CASES: &[&str] = &[$($($file),*),*];
    };
}

tcp_cases! {
    retransmissions_wireshark_retrans => ["wireshark-retrans.pcap"];
    retransmissions_many_protocols => ["many-protocols.pcap.gz"];
    retransmissions_ndpi_1kxun => ["1kxun.pcap.gz"];
    retransmissions_none_where_tshark_sees_none => ["tls13.pcap", "v6-http.pcap", "443-chrome.pcap"];
    // Fragmented TCP, and a fuzzer-made capture where trawl keys damaged headers into
    // connections tshark does not have.
    retransmissions_fragmented_tcp => ["socks5-http-302-frag.pcap"];
    retransmissions_fuzzed => ["fuzz-2006-06-26-2594.pcap"];
}
