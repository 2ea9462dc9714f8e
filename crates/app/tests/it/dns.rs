//! DNS against tshark over the committed captures (testdata/app/dns/README.md,
//! scripts/app-oracle.sh), and the parser's guards on crafted messages.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;

use trawl_app::dns::{self, Message, RData, TcpFramer};
use trawl_app::DnsErrorKind;

use crate::pcap::{captures, compare_fields, golden, payloads, testdata};

const PORTS: [u16; 3] = [53, 5353, 5355];

type Endpoint = (IpAddr, u16);

/// DNS messages of a capture by frame: UDP datagrams on the DNS ports, and TCP port 53 streams
/// split by their length prefix (segments taken in capture order), each message at the frame
/// that completes it.
fn messages(path: &std::path::Path) -> BTreeMap<usize, Vec<Message>> {
    let mut out: BTreeMap<usize, Vec<Message>> = BTreeMap::new();
    let mut streams: HashMap<(Endpoint, Endpoint), TcpFramer> = HashMap::new();
    for p in payloads(path) {
        let mut found = Vec::new();
        if p.proto == 17 && (PORTS.contains(&p.src.1) || PORTS.contains(&p.dst.1)) {
            found.extend(dns::parse(&p.data));
        } else if p.proto == 6 && (p.src.1 == 53 || p.dst.1 == 53) {
            let framer = streams.entry((p.src, p.dst)).or_default();
            framer.push(&p.data, |m| found.extend(dns::parse(m)));
        }
        if !found.is_empty() {
            out.entry(p.frame).or_default().extend(found);
        }
    }
    out
}

/// The golden's columns for the messages of one frame, values joined by commas as tshark does.
fn row(frame: usize, msgs: &[Message]) -> Vec<String> {
    let mut cols: Vec<Vec<String>> = vec![Vec::new(); 26];
    cols[0].push(frame.to_string());
    for m in msgs {
        let f = &m.flags;
        let resp = f.response;
        let mut put = |i: usize, v: String| cols[i].push(v);
        put(1, format!("0x{:04x}", m.id));
        put(2, u8::from(resp).to_string());
        put(3, f.opcode.to_string());
        if resp {
            put(4, u8::from(f.aa).to_string());
        }
        put(5, u8::from(f.tc).to_string());
        put(6, u8::from(f.rd).to_string());
        if resp {
            put(7, u8::from(f.ra).to_string());
            put(8, f.rcode.to_string());
        }
        for (i, c) in m.counts.iter().enumerate() {
            put(9 + i, c.to_string());
        }
        for q in &m.questions {
            put(13, q.name.clone());
            put(14, q.qtype.to_string());
            put(15, format!("0x{:04x}", q.qclass));
        }
        for (_, r) in m.records() {
            put(16, r.rtype.to_string());
            if r.rtype != 41 {
                put(17, r.ttl.to_string());
            }
            let (i, v) = match &r.data {
                RData::A(a) => (18, a.to_string()),
                RData::Aaaa(a) => (19, a.to_string()),
                RData::Cname(n) => (20, n.clone()),
                RData::Ns(n) => (21, n.clone()),
                RData::Ptr(n) => (22, n.clone()),
                RData::Mx { exchange, .. } => (23, exchange.clone()),
                RData::Srv { target, .. } => (24, target.clone()),
                RData::Soa { mname, .. } => (25, mname.clone()),
                RData::Txt(_) | RData::Other { .. } => continue,
            };
            put(i, v);
        }
    }
    cols.into_iter().map(|c| c.join(",")).collect()
}

const FIELDS: [&str; 26] = [
    "frame.number",
    "dns.id",
    "dns.flags.response",
    "dns.flags.opcode",
    "dns.flags.authoritative",
    "dns.flags.truncated",
    "dns.flags.recdesired",
    "dns.flags.recavail",
    "dns.flags.rcode",
    "dns.count.queries",
    "dns.count.answers",
    "dns.count.auth_rr",
    "dns.count.add_rr",
    "dns.qry.name",
    "dns.qry.type",
    "dns.qry.class",
    "dns.resp.type",
    "dns.resp.ttl",
    "dns.a",
    "dns.aaaa",
    "dns.cname",
    "dns.ns",
    "dns.ptr.domain_name",
    "dns.mx.mail_exchange",
    "dns.srv.target",
    "dns.soa.mname",
];

/// Every difference between trawl and tshark on the committed captures: (capture, frames,
/// fields — `*` for a frame only one side has as DNS —, why). The test fails on a difference
/// not listed here and on an entry that no longer differs.
const EXPLAINED: &[(&str, &[usize], &[&str], &str)] = &[
    // Outside the DNS parser: trawl-flow's decoder does not reach these packets' UDP payload.
    ("libpcap--arcnet-rfc1051-arp-icmp-http.pcap", &[7, 8, 9, 10], &["*"], "ARCNET link type not decoded"),
    ("libpcap--arcnet-rfc1201-arp-icmp-http.pcap", &[9, 10, 11, 12], &["*"], "ARCNET link type not decoded"),
    ("tcpdump--arcnet-rfc1051-arp-icmp-http.pcap", &[7, 8, 9, 10], &["*"], "ARCNET link type not decoded"),
    ("tcpdump--arcnet-rfc1201-arp-icmp-http.pcap", &[9, 10, 11, 12], &["*"], "ARCNET link type not decoded"),
    ("libpcap--http_PPI.pcap", &[1, 3], &["*"], "PPI link type not decoded"),
    ("pcapplusplus--nflogPacket.pcap", &[1], &["*"], "NFLOG link type not decoded"),
    ("tcpdump--nflog.pcap", &[1, 2, 3, 4], &["*"], "NFLOG link type not decoded"),
    ("tcpdump--LINKTYPE_PKTAP.pcap", &[1], &["*"], "PKTAP link type not decoded"),
    ("tcpdump--LINKTYPE_USER2_PKTAP.pcap", &[1], &["*"], "PKTAP (USER2) link type not decoded"),
    ("tcpdump--LINKTYPE_IPV4_invalid.pcap", &[1], &["*"], "an IPv6 packet under the IPv4 link type: trawl refuses it, tshark guesses"),
    ("debian--nb6-http.pcap", &[34], &["*"], "a DNS datagram quoted inside an ICMP error: tshark dissects the quote"),
    ("pcapplusplus--ip6_fragments.pcap", &[1, 7, 8, 20], &["*"], "IPv6 fragments: tshark reassembles (the message shows at the last fragment), the test reads first fragments"),
    ("pcapplusplus--dns_over_tcp.pcapng", &[4], &["*"], "a TCP retransmission with the same sequence number as frame 1: tshark drops it, the test takes segments in capture order (reassembly comes with the blocks)"),
    ("tcpdump--rtp-seg-fault-1.pcapng", &[1], &["*"], "a payload shorter than the 12-byte header: trawl counts it (truncated_header), tshark shows the bytes it could read"),
    // In the DNS parser's scope: conventions that differ.
    ("arkime--dns-update.pcap", &[1, 2], &["dns.count.queries", "dns.count.answers", "dns.count.auth_rr"],
        "UPDATE (opcode 5): tshark names the first three counts dns.count.zones, dns.count.prerequisites and dns.count.updates"),
    ("arkime--dnssec_synthetic.pcap", &[2, 8], &["dns.resp.type"], "tshark lists an NSEC type bitmap's types under dns.resp.type; trawl keeps NSEC as type + length"),
    ("pcapplusplus--dns_over_tcp.pcapng", &[3], &["dns.resp.type"], "tshark lists NSEC3 type bitmaps' types under dns.resp.type; trawl keeps NSEC3 as type + length"),
    ("pcapplusplus--Dns.pcap", &[2], &["dns.qry.class"], "mDNS: trawl keeps the QU bit in qclass (0x8001), tshark splits it off (dns.qry.qu)"),
    ("pypi--dns3.pcap", &[1, 2], &["dns.qry.class"], "mDNS: trawl keeps the QU bit in qclass (0x8001), tshark splits it off (dns.qry.qu)"),
    (
        "ndpi--malformed_dns.pcap",
        &[2, 3, 5, 6],
        &["dns.qry.name", "dns.qry.type", "dns.qry.class", "dns.resp.type", "dns.resp.ttl", "dns.a", "dns.cname"],
        "the second question's name is longer than 255 bytes: trawl stops reading there (NameTooLong, counted; dns_name_too_long_stops_the_message), tshark shows <Name too long> and reads on",
    ),
];

/// Every DNS message of every committed capture, field by field against tshark; the
/// differences that remain are each explained in `EXPLAINED`.
#[test]
fn dns_fields_equal_tshark() {
    let mut diffs = std::collections::BTreeSet::new();
    let mut frames = 0;
    for cap in captures(&testdata("dns")) {
        let name = cap.file_name().unwrap().to_string_lossy().to_string();
        let want = golden(&cap.with_file_name(format!("{name}.dns.tsv")));
        let got = messages(&cap);
        for (frame, msgs) in &got {
            frames += 1;
            let mine = row(*frame, msgs);
            let Some(theirs) = want.get(frame) else {
                println!("{name} frame {frame}: not DNS for tshark");
                diffs.insert((name.clone(), *frame, "*".to_string()));
                continue;
            };
            compare_fields(&name, *frame, &FIELDS, &mine, theirs, &mut diffs);
        }
        for frame in want.keys().filter(|f| !got.contains_key(f)) {
            println!("{name} frame {frame}: no DNS message for trawl");
            diffs.insert((name.clone(), *frame, "*".to_string()));
        }
    }
    let explained: std::collections::BTreeSet<_> = EXPLAINED
        .iter()
        .flat_map(|(cap, frames, fields, _)| {
            frames.iter().flat_map(move |f| {
                fields
                    .iter()
                    .map(move |field| (cap.to_string(), *f, field.to_string()))
            })
        })
        .collect();
    println!(
        "{frames} frames with DNS for trawl, {} differences",
        diffs.len()
    );
    let unexplained: Vec<_> = diffs.difference(&explained).collect();
    let stale: Vec<_> = explained.difference(&diffs).collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "unexplained: {unexplained:?}\nexplained but equal now: {stale:?}"
    );
    assert!(frames > 300, "{frames} frames");
}

/// A query header (id 0x1234, RD) with `qd` questions, then `body`.
fn query(qd: u16, body: &[u8]) -> Vec<u8> {
    let mut m = vec![0x12, 0x34, 0x01, 0x00];
    m.extend_from_slice(&qd.to_be_bytes());
    m.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    m.extend_from_slice(body);
    m
}

fn fault(m: &Message) -> Option<(usize, &'static str, DnsErrorKind)> {
    match m.error {
        Some(trawl_app::Error::Dns {
            offset,
            field,
            kind,
        }) => Some((offset, field, kind)),
        None => None,
        Some(other) => panic!("{other}"),
    }
}

#[test]
fn dns_pointer_loop_counted_not_followed() {
    // The question name is a pointer to itself (offset 12).
    let m = dns::parse(&query(1, &[0xC0, 12, 0, 1, 0, 1])).unwrap();
    assert_eq!(fault(&m), Some((12, "qname", DnsErrorKind::PointerLoop)));
    assert!(m.questions.is_empty());
    // Two pointers to each other, after a first good question.
    let body = [
        3, b'f', b'o', b'o', 0, 0, 1, 0, 1, 0xC0, 23, 0xC0, 21, 0, 1, 0, 1,
    ];
    let m = dns::parse(&query(2, &body)).unwrap();
    assert_eq!(m.questions.len(), 1);
    assert_eq!(m.questions[0].name, "foo");
    assert_eq!(fault(&m).map(|f| f.2), Some(DnsErrorKind::PointerLoop));
    let mut stats = dns::DnsStats::default();
    stats.count(&Ok(m));
    assert_eq!(stats.faults[DnsErrorKind::PointerLoop as usize], 1);
}

#[test]
fn dns_pointer_past_the_message_refused() {
    let m = dns::parse(&query(1, &[0xC1, 0x00, 0, 1, 0, 1])).unwrap();
    assert_eq!(
        fault(&m),
        Some((12, "qname", DnsErrorKind::PointerOutOfBounds))
    );
}

#[test]
fn dns_reserved_label_types_refused() {
    for top in [0x40u8, 0x80] {
        let m = dns::parse(&query(1, &[top | 1, b'a', 0, 0, 1, 0, 1])).unwrap();
        assert_eq!(
            fault(&m),
            Some((12, "qname", DnsErrorKind::BadLabelType)),
            "{top:#x}"
        );
    }
}

#[test]
fn dns_name_too_long_stops_the_message() {
    // Five labels of 63 bytes: 320 bytes in wire form.
    let mut body = Vec::new();
    for _ in 0..5 {
        body.push(63);
        body.extend_from_slice(&[b'x'; 63]);
    }
    body.extend_from_slice(&[0, 0, 1, 0, 1]);
    let m = dns::parse(&query(1, &body)).unwrap();
    assert_eq!(
        fault(&m).map(|f| (f.1, f.2)),
        Some(("qname", DnsErrorKind::NameTooLong))
    );
    // The capture tshark shows as <Name too long>: the same fault, the first question kept.
    let cap = testdata("dns").join("ndpi--malformed_dns.pcap");
    let msgs = messages(&cap);
    for frame in [2, 3, 5, 6] {
        let m = &msgs[&frame][0];
        assert_eq!(m.questions[0].name, "www.xt.com");
        assert_eq!(
            fault(m).map(|f| (f.1, f.2)),
            Some(("qname", DnsErrorKind::NameTooLong)),
            "frame {frame}"
        );
    }
}

#[test]
fn dns_truncated_fields_name_offset_and_field() {
    assert_eq!(
        dns::parse(&[0; 11]),
        Err(trawl_app::Error::Dns {
            offset: 11,
            field: "header",
            kind: DnsErrorKind::Truncated
        })
    );
    let m = dns::parse(&query(1, &[3, b'f', b'o', b'o', 0, 0, 1])).unwrap();
    assert_eq!(fault(&m), Some((19, "qclass", DnsErrorKind::Truncated)));
    // An MX whose exchange runs past its RDLENGTH.
    let mut m = query(0, &[]);
    m[7] = 1; // one answer
    m.extend_from_slice(&[0, 0, 15, 0, 1, 0, 0, 0, 60, 0, 3, 0, 10, 1]);
    let parsed = dns::parse(&m).unwrap();
    assert_eq!(
        fault(&parsed).map(|f| (f.1, f.2)),
        Some(("mx.exchange", DnsErrorKind::Truncated))
    );
}

#[test]
fn dns_record_types_decoded() {
    // One answer of each type, names compressed against the question (offset 12).
    let mut body = vec![7];
    body.extend_from_slice(b"example");
    body.extend_from_slice(&[3, b'c', b'o', b'm', 0, 0, 1, 0, 1]);
    let rr = |t: u16, data: &[u8]| {
        let mut r = vec![0xC0, 12];
        r.extend_from_slice(&t.to_be_bytes());
        r.extend_from_slice(&[0, 1, 0, 0, 0x0E, 0x10]);
        r.extend_from_slice(&(data.len() as u16).to_be_bytes());
        r.extend_from_slice(data);
        r
    };
    let answers: Vec<Vec<u8>> = vec![
        rr(1, &[192, 0, 2, 1]),
        rr(
            28,
            &[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        ),
        rr(5, &[3, b'w', b'w', b'w', 0xC0, 12]),
        rr(2, &[2, b'n', b's', 0xC0, 12]),
        rr(12, &[0xC0, 12]),
        rr(15, &[0, 10, 2, b'm', b'x', 0xC0, 12]),
        rr(16, &[2, b'h', b'i', 0]),
        rr(
            6,
            &[
                0xC0, 12, 0xC0, 12, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4, 0, 0, 0, 5,
            ],
        ),
        rr(33, &[0, 1, 0, 2, 0x01, 0xBB, 0xC0, 12]),
        rr(99, &[1, 2, 3]),
    ];
    for a in &answers {
        body.extend_from_slice(a);
    }
    let mut m = query(1, &body);
    m[2] = 0x81;
    m[3] = 0x83; // response, RD, RA, NXDOMAIN
    m[7] = answers.len() as u8;
    let p = dns::parse(&m).unwrap();
    assert_eq!(p.error, None);
    assert!(p.flags.response && p.flags.rd && p.flags.ra && !p.flags.aa);
    assert_eq!(p.flags.rcode, 3);
    let data: Vec<RData> = p.answers.iter().map(|r| r.data.clone()).collect();
    let name = |s: &str| s.to_string();
    assert_eq!(
        data,
        vec![
            RData::A("192.0.2.1".parse().unwrap()),
            RData::Aaaa("2001:db8::1".parse().unwrap()),
            RData::Cname(name("www.example.com")),
            RData::Ns(name("ns.example.com")),
            RData::Ptr(name("example.com")),
            RData::Mx {
                preference: 10,
                exchange: name("mx.example.com")
            },
            RData::Txt(vec![b"hi".to_vec(), Vec::new()]),
            RData::Soa {
                mname: name("example.com"),
                rname: name("example.com"),
                serial: 1,
                refresh: 2,
                retry: 3,
                expire: 4,
                minimum: 5
            },
            RData::Srv {
                priority: 1,
                weight: 2,
                port: 443,
                target: name("example.com")
            },
            RData::Other { len: 3 },
        ]
    );
    assert!(p
        .answers
        .iter()
        .all(|r| r.ttl == 3600 && r.name == "example.com"));
}

/// UPDATE prerequisites carry no data whatever their type (arkime--dns-update.pcap): a CNAME
/// with RDLENGTH 0 is kept as type + length, and the records after it are read.
#[test]
fn dns_empty_rdata_is_not_a_fault() {
    let mut m = query(0, &[]);
    m[7] = 2;
    m.extend_from_slice(&[0, 0, 5, 0, 254, 0, 0, 0, 0, 0, 0]);
    m.extend_from_slice(&[0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 4, 10, 0, 0, 1]);
    let p = dns::parse(&m).unwrap();
    assert_eq!(p.error, None);
    assert_eq!(p.answers[0].data, RData::Other { len: 0 });
    assert_eq!(p.answers[1].data, RData::A("10.0.0.1".parse().unwrap()));
}

#[test]
fn dns_names_escape_unprintable_bytes() {
    let m = dns::parse(&query(1, &[3, b'a', 0x07, b'\\', 1, b'.', 0, 0, 1, 0, 1])).unwrap();
    // A dot inside a label stays a dot (DNS-SD names, pcapplusplus--packet_trailer.pcap).
    assert_eq!(m.questions[0].name, "a\\007\\092..");
    let root = dns::parse(&query(1, &[0, 0, 2, 0, 1])).unwrap();
    assert_eq!(root.questions[0].name, "<Root>");
}

#[test]
fn dns_tcp_framer_reassembles_split_and_joined_messages() {
    let a = query(1, &[1, b'a', 0, 0, 1, 0, 1]);
    let b = query(1, &[1, b'b', 0, 0, 1, 0, 1]);
    let mut stream = Vec::new();
    for m in [&a, &b] {
        stream.extend_from_slice(&(m.len() as u16).to_be_bytes());
        stream.extend_from_slice(m);
    }
    // Every split point, including inside the length prefix.
    for cut in 0..=stream.len() {
        let mut framer = TcpFramer::new();
        let mut got = Vec::new();
        framer.push(&stream[..cut], |m| got.push(m.to_vec()));
        framer.push(&stream[cut..], |m| got.push(m.to_vec()));
        assert_eq!(got, vec![a.clone(), b.clone()], "cut {cut}");
        assert_eq!(framer.pending(), 0);
    }
}

fn msg(id: u16, response: bool) -> Message {
    let mut m = query(1, &[1, b'a', 0, 0, 1, 0, 1]);
    m[..2].copy_from_slice(&id.to_be_bytes());
    if response {
        m[2] |= 0x80;
    }
    dns::parse(&m).unwrap()
}

#[test]
fn dns_joiner_pairs_by_flow_and_id() {
    let mut j = dns::Joiner::new(16);
    let mut out = Vec::new();
    j.push("flow1", 1, msg(7, false), |e| out.push(e));
    j.push("flow2", 2, msg(7, false), |e| out.push(e));
    j.push("flow2", 3, msg(7, true), |e| out.push(e));
    j.push("flow1", 4, msg(8, true), |e| out.push(e));
    assert_eq!(out.len(), 2);
    assert_eq!(
        (out[0].key, out[0].request_ts_ns, out[0].response_ts_ns),
        ("flow2", Some(2), Some(3))
    );
    assert_eq!(
        (out[1].key, out[1].request_ts_ns, out[1].trans_id),
        ("flow1", None, 8)
    );
    j.finish(|e| out.push(e));
    assert_eq!(
        (out[2].key, out[2].trans_id, out[2].response_ts_ns),
        ("flow1", 7, None)
    );
    assert_eq!(
        (j.stats.joined, j.stats.unmatched_responses, j.stats.evicted),
        (1, 1, 0)
    );
    assert!(j.is_empty());
}

#[test]
fn dns_joiner_table_bounded_evictions_counted() {
    let mut j = dns::Joiner::new(3);
    let mut given_up = Vec::new();
    for id in 0..10u16 {
        j.push(0u8, u64::from(id), msg(id, false), |e| {
            given_up.push(e.trans_id)
        });
        assert!(j.len() <= 3);
    }
    // Oldest first.
    assert_eq!(given_up, vec![0, 1, 2, 3, 4, 5, 6]);
    assert_eq!(j.stats.evicted, 7);
    // Answers keep the order queue bounded too (stale entries dropped).
    for id in 100..10_000u16 {
        j.push(0u8, 0, msg(id, false), |_| {});
        j.push(0u8, 0, msg(id, true), |_| {});
    }
    // The first new request made room by giving up 7.
    assert_eq!((j.stats.joined, j.stats.evicted), (9_900, 8));
    let mut left = Vec::new();
    j.finish(|e| left.push(e.trans_id));
    assert_eq!(left, vec![8, 9]);
    // A repeated request gives up the older one.
    j.push(1u8, 0, msg(5, false), |_| {});
    let mut dup = Vec::new();
    j.push(1u8, 1, msg(5, false), |e| dup.push(e.request_ts_ns));
    assert_eq!((dup, j.stats.duplicate_requests), (vec![Some(0)], 1));
}

/// Over a capture of 19 lookups and their answers, every response finds its request, keyed by
/// the flow's endpoints in either direction.
#[test]
fn dns_joiner_pairs_every_lookup_of_a_capture() {
    let mut j = dns::Joiner::new(64);
    let mut pairs = Vec::new();
    for p in crate::pcap::payloads(&testdata("dns").join("arkime--dns-wiresharkrepo.pcap")) {
        let key = if p.src < p.dst {
            (p.src, p.dst)
        } else {
            (p.dst, p.src)
        };
        j.push(key, p.ts_ns, dns::parse(&p.data).unwrap(), |e| {
            pairs.push(e)
        });
    }
    j.finish(|e| pairs.push(e));
    assert_eq!(pairs.len(), 19);
    assert!(pairs
        .iter()
        .all(|e| e.request_ts_ns.unwrap() < e.response_ts_ns.unwrap()));
    assert_eq!(
        (j.stats.joined, j.stats.unmatched_responses, j.stats.evicted),
        (19, 0, 0)
    );
}
