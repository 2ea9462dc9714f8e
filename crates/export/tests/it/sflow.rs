//! trawl's sFlow v5 parser against tshark's sFlow dissector on captured datagrams
//! (testdata/pcaps/sflow*.pcap, from tcpdump's test suite): per datagram the same agent,
//! samples (types, sampling rates), raw packet headers (protocol, frame length, stripped
//! bytes, the header bytes themselves) and generic interface counters. (Two datagrams of host
//! counters tshark 4.0 misreads as malformed are checked by hand.)
use std::path::PathBuf;
use std::process::Command;

use trawl_capture::{FileSource, PacketSource};
use trawl_export::sflow::{parse, Event};
use trawl_flow::decode::{decode, DecodeConfig, Decoded};

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/pcaps")
        .join(name)
}

/// What both sides say about one datagram, as text lists in datagram order.
#[derive(Debug, Default, PartialEq, Eq)]
struct Seen {
    agent: String,
    samples: String,
    sample_types: Vec<String>,
    rates: Vec<String>,
    header_protocols: Vec<String>,
    frame_lengths: Vec<String>,
    stripped: Vec<String>,
    headers: Vec<String>,
    if_indexes: Vec<String>,
    in_octets: Vec<String>,
    out_octets: Vec<String>,
}

const FIELDS: [&str; 13] = [
    "frame.number",
    "_ws.malformed",
    "sflow_245.agent",
    "sflow_245.agent.v6",
    "sflow_245.numsamples",
    "sflow_245.sampletype",
    "sflow.flow_sample.sampling_rate",
    "sflow_245.header_protocol",
    "sflow_245.header.frame_length",
    "sflow_245.header.payload_stripped",
    "sflow_245.header",
    "sflow_245.ifindex",
    "sflow_245.ifinoct",
];

/// tshark's view: per frame number, whether it is malformed and what it dissected.
fn tshark(path: &PathBuf) -> Vec<(u64, bool, Seen)> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(path)
        .args(["-T", "fields", "-E", "occurrence=a"]);
    for f in FIELDS.iter().chain(&[
        "sflow_245.ifoutoct",
        "sflow_245.header.sampled_header_length",
    ]) {
        cmd.args(["-e", f]);
    }
    let out = cmd
        .output()
        .expect("tshark is required (scripts/deps.sh installs it)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let list = |s: &str| -> Vec<String> {
        s.split(',')
            .filter(|x| !x.is_empty())
            .map(|x| x.replace(':', ""))
            .collect()
    };
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            // tshark's header field runs over the XDR padding after the header's bytes: cut
            // it to the sampled header length.
            let headers = list(c[10])
                .into_iter()
                .zip(list(c[14]))
                .map(|(h, n)| h[..2 * n.parse::<usize>().unwrap()].to_string())
                .collect();
            let seen = Seen {
                agent: format!("{}{}", c[2], c[3]),
                samples: c[4].to_string(),
                sample_types: list(c[5]),
                rates: list(c[6]),
                header_protocols: list(c[7]),
                frame_lengths: list(c[8]),
                stripped: list(c[9]),
                headers,
                if_indexes: list(c[11]),
                in_octets: list(c[12]),
                out_octets: list(c[13]),
            };
            (c[0].parse().unwrap(), !c[1].is_empty(), seen)
        })
        .collect()
}

/// trawl's view of each UDP payload of the capture: (frame number, malformed, what it read).
fn trawl(path: &PathBuf) -> Vec<(u64, bool, Seen)> {
    let mut src = FileSource::open(path).unwrap();
    let mut out = Vec::new();
    let mut frame = 0;
    let mut d = Decoded::default();
    while let Some(batch) = src.next_batch().unwrap() {
        for p in batch.iter() {
            frame += 1;
            decode(p.link_type, p.data, &DecodeConfig::default(), &mut d);
            let start = d.payload_offset as usize;
            let payload = &p.data[start..(start + d.payload_len as usize).min(p.data.len())];
            let mut s = Seen::default();
            let mut malformed = false;
            let result = parse(payload, &mut |h, e| {
                s.agent = h.agent.to_string();
                s.samples = h.samples.to_string();
                match e {
                    Event::Packet(sample, raw) => {
                        s.sample_types
                            .push(if sample.expanded { "3" } else { "1" }.into());
                        s.rates.push(sample.sampling_rate.to_string());
                        s.header_protocols.push(raw.protocol.to_string());
                        s.frame_lengths.push(raw.frame_length.to_string());
                        s.stripped.push(raw.stripped.to_string());
                        s.headers
                            .push(raw.bytes.iter().map(|b| format!("{b:02x}")).collect());
                    }
                    Event::FlowWithoutHeader(sample) => {
                        s.sample_types
                            .push(if sample.expanded { "3" } else { "1" }.into());
                        s.rates.push(sample.sampling_rate.to_string());
                    }
                    Event::Counters(sample, generic) => {
                        s.sample_types
                            .push(if sample.expanded { "4" } else { "2" }.into());
                        if let Some(g) = generic {
                            s.if_indexes.push(g.if_index.to_string());
                            s.in_octets.push(g.in_octets.to_string());
                            s.out_octets.push(g.out_octets.to_string());
                        }
                    }
                    Event::Skipped(_, f) => s.sample_types.push(f.to_string()),
                    Event::Malformed(_) => malformed = true,
                }
            });
            match result {
                Ok(h) => {
                    s.agent = h.agent.to_string();
                    s.samples = h.samples.to_string();
                }
                // Not sFlow at all (NetFlow v5 sent to port 6343): tshark sees none either.
                Err(e) if e.field == "version" => {}
                Err(_) => malformed = true,
            }
            out.push((frame, malformed, s));
        }
    }
    out
}

/// Compares every frame tshark dissects without trouble; returns how many, and the frames
/// tshark finds malformed with trawl's view of them.
fn same_as_tshark(name: &str) -> (usize, Vec<(u64, bool, Seen)>) {
    let path = testdata(name);
    let theirs = tshark(&path);
    let ours = trawl(&path);
    assert_eq!(ours.len(), theirs.len(), "{name}: frames");
    let mut compared = 0;
    let mut malformed = Vec::new();
    for (mine, (_, their_bad, their)) in ours.into_iter().zip(theirs) {
        let frame = mine.0;
        if their_bad {
            assert_eq!(mine.2.agent, their.agent, "{name} frame {frame}");
            malformed.push(mine);
            continue;
        }
        assert!(
            !mine.1,
            "{name} frame {frame}: trawl finds it malformed, tshark does not"
        );
        assert_eq!(mine.2, their, "{name} frame {frame}");
        compared += 1;
    }
    (compared, malformed)
}

#[test]
fn sflow_datagrams_parse_as_tshark_dissects_them() {
    // Compact flow and counter samples of an IPv6 agent.
    let (n, bad) = same_as_tshark("sflow-print-v6.pcap");
    assert_eq!((n, bad.len()), (25, 0));
    // One expanded flow sample, rate 1000.
    let (n, bad) = same_as_tshark("sflow_expanded.pcap");
    assert_eq!((n, bad.len()), (1, 0));
    // Expanded counter samples of several agents, five NetFlow v5 datagrams (no sFlow for
    // either side), and two compact counter samples of host counters (formats 2000-2006,
    // hsflowd's) that tshark 4.0 misreads: their six records fill the sample exactly, and
    // trawl reads the sample (no generic interface counters in it).
    let (n, bad) = same_as_tshark("sflow_multiple_counter_30_pdus.pcap");
    assert_eq!(n, 28);
    let frames: Vec<u64> = bad.iter().map(|b| b.0).collect();
    assert_eq!(frames, [12, 18]);
    for (frame, ours_bad, seen) in &bad {
        assert!(!ours_bad, "frame {frame}");
        assert_eq!(seen.sample_types, ["2"], "frame {frame}");
        assert!(seen.if_indexes.is_empty(), "frame {frame}");
    }
}
