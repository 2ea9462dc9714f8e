//! `trawl logs` (issue 23): `dns.jsonl` against tshark's DNS fields over the committed DNS
//! captures whose DNS is all over UDP, and over those whose DNS is all over TCP (goldens `testdata/app/dns/*.dns.tsv`, made by
//! scripts/app-oracle.sh; columns in their header). tshark's frames are joined here as the
//! `dns_log` block joins messages (a response meets the pending request of its transaction ID,
//! in capture order; requests left over are unanswered lines), and each line must equal the
//! oracle's: transaction ID, question, opcode, flags, rcode, and every A/AAAA/CNAME/NS/PTR answer
//! among the response's tshark values.
use std::collections::HashMap;

use serde_json::Value;

use super::{summary, testdata, trawl};

/// One frame of a golden: its columns.
struct Frame(Vec<String>);

impl Frame {
    fn col(&self, i: usize) -> &str {
        self.0.get(i).map_or("", |s| s.as_str())
    }
    fn response(&self) -> bool {
        self.col(2) == "1"
    }
    fn id(&self) -> u64 {
        u64::from_str_radix(self.col(1).trim_start_matches("0x"), 16).unwrap()
    }
    fn flag(&self, i: usize) -> bool {
        self.col(i) == "1"
    }
    /// The values of a comma-joined column.
    fn list(&self, i: usize) -> Vec<String> {
        self.col(i)
            .split(',')
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    }
}

/// What a line must say, from the request and response frames the oracle joined.
fn expected(req: Option<&Frame>, resp: Option<&Frame>) -> Value {
    let first = req.or(resp).unwrap();
    let mut j = serde_json::json!({
        "trans_id": first.id(),
        "opcode": first.col(3).parse::<u64>().unwrap(),
        "query": first.col(13),
        "qtype": first.col(14).parse::<u64>().unwrap(),
        "rd": first.flag(6),
        "tc": resp.or(req).unwrap().flag(5),
    });
    if let Some(r) = resp {
        j["rcode"] = r.col(8).parse::<u64>().unwrap().into();
        j["aa"] = r.flag(4).into();
        j["ra"] = r.flag(7).into();
    }
    j
}

/// The fields of a line that [`expected`] gives.
fn comparable(line: &Value) -> Value {
    let mut j = serde_json::Map::new();
    for k in [
        "trans_id", "opcode", "query", "qtype", "rd", "tc", "rcode", "aa", "ra",
    ] {
        if let Some(v) = line.get(k) {
            j.insert(k.into(), v.clone());
        }
    }
    Value::Object(j)
}

fn check(name: &str, dir: &std::path::Path) -> usize {
    let capture = testdata(&format!("app/dns/{name}"));
    let golden = std::fs::read_to_string(format!("{capture}.dns.tsv")).unwrap();
    let frames: Vec<Frame> = golden
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| Frame(l.split('\t').map(String::from).collect()))
        .collect();
    // The oracle's join, in capture order.
    let mut pending: HashMap<u64, usize> = HashMap::new();
    let mut want: Vec<(Value, Vec<String>)> = Vec::new();
    let mut order: Vec<usize> = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        if !f.response() {
            if let Some(old) = pending.insert(f.id(), i) {
                want.push((expected(Some(&frames[old]), None), Vec::new()));
            }
            order.push(i);
            continue;
        }
        let answers: Vec<String> = [18, 19, 20, 21, 22]
            .iter()
            .flat_map(|&c| f.list(c))
            .collect();
        match pending.remove(&f.id()) {
            Some(req) => want.push((expected(Some(&frames[req]), Some(f)), answers)),
            None => want.push((expected(None, Some(f)), answers)),
        }
    }
    for i in order
        .into_iter()
        .filter(|i| pending.values().any(|p| p == i))
    {
        want.push((expected(Some(&frames[i]), None), Vec::new()));
    }

    let out_dir = dir.join(name);
    let out = trawl(&["logs", "-r", &capture, "-o", out_dir.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(out_dir.join("dns.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        summary(&out)["dns"]["lines"].as_u64(),
        Some(lines.len() as u64),
        "{name}"
    );
    let want: Vec<(String, Vec<String>)> =
        want.into_iter().map(|(j, a)| (j.to_string(), a)).collect();
    // In emission order: a joined pair at its response, a lone response at once, a request
    // given up at the next request of its key or at the end (oldest first), as the oracle.
    let ours: Vec<String> = lines.iter().map(|l| comparable(l).to_string()).collect();
    let theirs: Vec<String> = want.iter().map(|(j, _)| j.clone()).collect();
    assert_eq!(ours, theirs, "{name}: lines");
    for (line, (_, tshark_answers)) in lines.iter().zip(&want) {
        let ours = line["answers"].as_array().cloned().unwrap_or_default();
        let ttls = line["ttls"].as_array().cloned().unwrap_or_default();
        assert_eq!(ours.len(), ttls.len(), "{name}: {line}");
        for a in ours.iter().filter_map(Value::as_str) {
            if !a.starts_with("TYPE") && !a.contains(' ') {
                assert!(
                    tshark_answers.iter().any(|t| t == a),
                    "{name}: answer {a} not among tshark's {tshark_answers:?}"
                );
            }
        }
        let id = line["community_id"].as_str().unwrap_or_default();
        assert!(id.starts_with("1:") && id.len() == 30, "{name}: {line}");
    }
    lines.len()
}

#[test]
fn dns_log_lines_equal_tsharks_joined_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = 0;
    for name in [
        "arkime--dns-wiresharkrepo.pcap",
        "debian--test_dns.pcap",
        "arkime--dns-udp.pcap",
        "ndpi--dns.pcap",
        "pypi--dns.pcap",
        "arkime--dns-mx.pcap",
        "tcpdump--dns_udp.pcap",
        "pcapplusplus--DNS_NXDomain.pcap",
    ] {
        lines += check(name, dir.path());
    }
    assert!(lines >= 30, "{lines} lines compared");
}

/// DNS over TCP (RFC 1035 4.2.2: length-prefixed messages, both directions reassembled by
/// `stream_log`'s shared TCP table) is joined as UDP's is: every line equals the oracle's join
/// of tshark's frames, with `proto` 6. The captures: requests and responses each in one
/// segment (arkime, tcpdump), and a connection whose first message is a response without its
/// request, followed by a second connection (pcapplusplus).
#[test]
fn dns_log_over_tcp_lines_equal_tsharks_joined_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = 0;
    for name in [
        "arkime--dns-tcp.pcap",
        "tcpdump--dns_tcp.pcap",
        "pcapplusplus--dns_over_tcp.pcapng",
    ] {
        lines += check(name, dir.path());
        let text = std::fs::read_to_string(dir.path().join(name).join("dns.jsonl")).unwrap();
        for l in text.lines() {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["proto"], 6, "{name}: {l}");
        }
    }
    assert_eq!(lines, 5);
}

/// A request and its response make one line whose `community_id` is that of the flow record
/// of the same packets (`trawl flows`), and whose round trip is the two packets' gap.
#[test]
fn dns_log_line_carries_the_flow_records_community_id() {
    let dir = tempfile::tempdir().unwrap();
    let capture = testdata("app/dns/tcpdump--dns_udp.pcap");
    let out = trawl(&["logs", "-r", &capture, "-o", dir.path().to_str().unwrap()]);
    assert!(out.status.success());
    let text = std::fs::read_to_string(dir.path().join("dns.jsonl")).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{text}");
    let flows = trawl(&["flows", "-r", &capture, "--summary", "none"]);
    let record: Value = serde_json::from_str(
        String::from_utf8_lossy(&flows.stdout)
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(lines[0]["community_id"], record["community_id"]);
    assert_eq!(
        lines[0]["rtt_ns"].as_u64(),
        Some(record["last_ns"].as_u64().unwrap() - record["first_ns"].as_u64().unwrap())
    );
}
