//! Application labels against nDPI (testdata/app/classify/README.md): every flow that nDPI
//! labels from payload (`[Confidence: DPI]`) with a protocol trawl names is metered by trawl's
//! flow meter (the prefix the `flow_meter` block keeps with `app` on) and classified; the
//! labels must agree on at least 95 % of those flows of each capture and of all of them, and
//! the flows where they differ are exactly the committed list of disagreements.

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::Path;

use trawl_app::classify::{classify, App, AppSource, PREFIX_BYTES};
use trawl_capture::{FileSource, PacketSource};
use trawl_flow::decode::{DecodeConfig, TunnelMode};
use trawl_flow::{FlowConfig, FlowMeter, FlowRecord};

use crate::pcap::{captures, testdata};

/// A flow either way round: protocol and the two endpoints in order.
type Key = (u8, (IpAddr, u16), (IpAddr, u16));

fn key(proto: u8, a: (IpAddr, u16), b: (IpAddr, u16)) -> Key {
    (proto, a.min(b), a.max(b))
}

/// trawl's application of an nDPI label, when trawl names it. nDPI names others (IMAPS,
/// SMTPS, POPS, FTPS: TLS on a mail or FTP port, or after STARTTLS, which trawl calls `tls` or
/// the plaintext protocol) that have no single match, and services of its own (WhatsApp,
/// GTP, ...): their flows are not compared.
fn ndpi_app(proto: u8, label: &str) -> Option<App> {
    // MASTER.APP is the master's (TLS.Google, DNS.BitTorrent: a tracker's name looked up),
    // but for SMB over TCP, which nDPI files under NetBIOS also on port 445 where no NetBIOS
    // session is (NetBIOS.SMBv23; over UDP 138 the datagram service is NetBIOS's), and
    // SIP.HTTP, HTTP on SIP's port.
    match (proto, label) {
        (6, "NetBIOS.SMBv1" | "NetBIOS.SMBv23") => return Some(App::Smb),
        (_, "SIP.HTTP") => return Some(App::Http),
        _ => {}
    }
    ndpi_name(label.split('.').next().unwrap_or(label))
}

/// trawl's application of one nDPI protocol name.
fn ndpi_name(name: &str) -> Option<App> {
    Some(match name {
        "HTTP" | "HTTP_Proxy" | "HTTP_Connect" => App::Http,
        "TLS" => App::Tls,
        "QUIC" => App::Quic,
        "DNS" => App::Dns,
        "SSH" => App::Ssh,
        "SMTP" => App::Smtp,
        "IMAP" => App::Imap,
        "POP3" => App::Pop3,
        "FTP_CONTROL" => App::Ftp,
        "SIP" => App::Sip,
        "RTP" => App::Rtp,
        "BitTorrent" => App::Bittorrent,
        "SMBv1" | "SMBv23" => App::Smb,
        "RDP" => App::Rdp,
        "NTP" => App::Ntp,
        "DHCP" => App::Dhcp,
        "MQTT" => App::Mqtt,
        "Kerberos" => App::Kerberos,
        "LDAP" => App::Ldap,
        "PostgreSQL" => App::Postgresql,
        "MySQL" => App::Mysql,
        "Redis" => App::Redis,
        "MDNS" => App::Mdns,
        "LLMNR" => App::Llmnr,
        "NetBIOS" => App::Netbios,
        "SSDP" => App::Ssdp,
        "STUN" => App::Stun,
        "SNMP" => App::Snmp,
        "Syslog" => App::Syslog,
        "DTLS" => App::Dtls,
        "Radius" => App::Radius,
        _ => return None,
    })
}

/// trawl's label of every flow of a capture, as the `flow_meter` block with `app` gives it:
/// tunnels descended (nDPI reads the inner packets too); of several records of one flow, the
/// first with a payload label.
fn trawl_labels(path: &Path) -> HashMap<Key, Option<(App, AppSource)>> {
    let mut meter = FlowMeter::new(FlowConfig {
        capacity: 1 << 16,
        payload_bytes: PREFIX_BYTES,
        decode: DecodeConfig {
            tunnel: TunnelMode::Inner,
        },
        ..FlowConfig::default()
    });
    let mut out: HashMap<Key, Option<(App, AppSource)>> = HashMap::new();
    let mut sink = |r: &FlowRecord<'_>| {
        let label = classify(
            r.proto,
            r.src_port,
            r.dst_port,
            r.fwd_payload,
            r.rev_payload,
        )
        .map(|l| (l.app, l.source));
        let k = key(r.proto, (r.src_ip, r.src_port), (r.dst_ip, r.dst_port));
        let e = out.entry(k).or_insert(label);
        if !matches!(e, Some((_, AppSource::Payload))) && label.is_some() {
            *e = label;
        }
    };
    let mut src = FileSource::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // A capture that breaks off: the packets before the break count (as for nDPI).
    while let Ok(Some(batch)) = src.next_batch() {
        for pkt in batch.iter() {
            meter.process(&pkt, &mut sink);
        }
    }
    meter.flush(&mut sink);
    out
}

/// One flow of the nDPI golden: protocol, the two endpoints, nDPI's label.
struct NdpiFlow {
    key: Key,
    text: String,
    label: String,
}

fn ndpi_golden(path: &Path) -> Vec<NdpiFlow> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let ep = |ip: &str, port: &str| (ip.parse().unwrap(), port.parse().unwrap());
            let proto = match f[0] {
                "TCP" => 6,
                "UDP" => 17,
                other => panic!("{}: protocol {other}", path.display()),
            };
            NdpiFlow {
                key: key(proto, ep(f[1], f[2]), ep(f[3], f[4])),
                text: format!("{} {}:{} <-> {}:{}", f[0], f[1], f[2], f[3], f[4]),
                label: f[5].to_string(),
            }
        })
        .collect()
}

fn name(label: Option<(App, AppSource)>) -> String {
    match label {
        Some((a, AppSource::Payload)) => a.name().to_string(),
        Some((a, AppSource::Port)) => format!("{} (port)", a.name()),
        None => "-".to_string(),
    }
}

/// Captures below 95 % agreement, and why (each must stay below, so that the list stays
/// true).
const EXPLAINED: &[(&str, &str)] = &[
    // STUN (WebRTC's connectivity checks) first, then DTLS: nDPI names the flow after what
    // follows STUN; trawl's prefix (the first 32 bytes of each direction, back to back) holds
    // only the first STUN message (88 to 120 bytes here).
    (
        "ndpi--stun.pcap",
        "STUN, then DTLS: nDPI says DTLS, trawl stun",
    ),
    (
        "ndpi--stun_dtls_unidirectional_client.pcap",
        "STUN, then DTLS",
    ),
    (
        "ndpi--stun_dtls_unidirectional_server.pcap",
        "STUN, then DTLS",
    ),
    // The capture starts mid-flow: no first message to read.
    (
        "ndpi--rdp2.pcap",
        "RDP's UDP transport mid-connection (no SYN datagram); nDPI reads DTLS inside it",
    ),
    (
        "ndpi--lru_ipv6_caches.pcapng",
        "RTCP on 3478 (a TURN relay's media): nDPI says STUN from its flow cache",
    ),
    // Fuzzed captures: no protocol's first message, nDPI labels by its own heuristics.
    (
        "ndpi--kerberos_fuzz.pcapng",
        "fuzzed Kerberos over TCP: no valid message",
    ),
    (
        "ndpi--tls_invalid_reads.pcap",
        "a fuzzed record (00 03 01 ...) on 443: nDPI still says TLS",
    ),
];

#[test]
fn app_labels_agree_with_ndpi() {
    let dir = testdata("classify");
    let mut disagreements = Vec::new();
    let (mut total, mut agreed, mut missing) = (0usize, 0usize, 0usize);
    let mut per_capture: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for cap in captures(&dir) {
        let file = cap.file_name().unwrap().to_string_lossy().to_string();
        let golden = ndpi_golden(&cap.with_file_name(format!("{file}.ndpi.tsv")));
        let mine = trawl_labels(&cap);
        for flow in golden {
            let Some(want) = ndpi_app(flow.key.0, &flow.label) else {
                continue;
            };
            let Some(&got) = mine.get(&flow.key) else {
                // A flow nDPI has and trawl's meter does not (a decoding difference, not a
                // label): counted, and must stay rare.
                println!("{file}: {} not metered", flow.text);
                missing += 1;
                continue;
            };
            total += 1;
            let c = per_capture.entry(file.clone()).or_default();
            c.0 += 1;
            if got == Some((want, AppSource::Payload)) {
                agreed += 1;
                c.1 += 1;
            } else {
                disagreements.push(format!(
                    "{file}\t{}\t{}\t{}",
                    flow.text,
                    flow.label,
                    name(got)
                ));
            }
        }
    }
    let list = std::fs::read_to_string(dir.join("DISAGREEMENTS.tsv")).unwrap();
    let expected: Vec<&str> = list
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .collect();
    if std::env::var_os("TRAWL_BLESS").is_some() {
        let head: Vec<&str> = list.lines().take_while(|l| l.starts_with('#')).collect();
        let body = disagreements.join("\n");
        std::fs::write(
            dir.join("DISAGREEMENTS.tsv"),
            format!("{}\n{body}\n", head.join("\n")),
        )
        .unwrap();
    }
    println!("{agreed} of {total} flows agree, {missing} not metered");
    assert_eq!(
        disagreements.iter().map(String::as_str).collect::<Vec<_>>(),
        expected,
        "disagreements with nDPI changed (TRAWL_BLESS=1 rewrites the list: review it)"
    );
    assert!(total >= 200, "only {total} flows compared");
    assert!(
        missing * 50 <= total,
        "{missing} of {total} flows not metered"
    );
    assert!(agreed * 100 >= total * 95, "{agreed} of {total} agree");
    for (file, (n, ok)) in per_capture.iter().filter(|(_, (n, ok))| ok * 100 < n * 95) {
        println!("below 95 %: {file}, {ok} of {n}");
    }
    for (file, (n, ok)) in &per_capture {
        let explained = EXPLAINED.iter().any(|(f, _)| f == file);
        assert_eq!(
            ok * 100 < n * 95,
            explained,
            "{file}: {ok} of {n} flows agree with nDPI (EXPLAINED lists it: {explained})"
        );
    }
}
