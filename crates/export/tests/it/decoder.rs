//! The decoder against trawl's own encoders (every field back) and against broken and hostile
//! messages (counted, never a panic, nothing else lost).
use std::net::SocketAddr;

use trawl_export::decode::empty_record;
use trawl_export::{
    DecodeErrorKind, Decoder, DecoderConfig, Item, MessageEncoder, Protocol, TemplateRefresh,
    V5Encoder,
};
use trawl_flow::FlowRecord;

use crate::sample;

fn exporter() -> SocketAddr {
    "192.0.2.1:4739".parse().unwrap()
}

fn encode(
    protocol: Protocol,
    records: &[FlowRecord<'_>],
    refresh: TemplateRefresh,
) -> Vec<Vec<u8>> {
    let mut enc = MessageEncoder::flows(protocol, 7, 32473, 1472, refresh);
    let mut out = Vec::new();
    for r in records {
        enc.add_flow(r, 1_700_000_000, &mut |m: &[u8]| out.push(m.to_vec()));
    }
    enc.flush(1_700_000_000, &mut |m: &[u8]| out.push(m.to_vec()));
    out
}

fn decode_all(dec: &mut Decoder, messages: &[Vec<u8>]) -> Vec<FlowRecord<'static>> {
    let mut got = Vec::new();
    for m in messages {
        dec.decode(exporter(), m, &mut |_, item| {
            if let Item::Flow(r) = item {
                got.push(*r);
            }
        });
    }
    got
}

#[test]
fn ipfix_round_trip_gives_every_field_back() {
    let records = sample();
    assert!(records.len() > 50);
    // Round-trip times travel in the extended templates (docs/specs/ipfix.md).
    assert!(records.iter().any(|r| r.fwd.rtt_handshake_ns.is_some()));
    let messages = encode(Protocol::Ipfix, &records, TemplateRefresh::UDP_DEFAULT);
    assert!(messages.iter().all(|m| m.len() <= 1472));
    let mut dec = Decoder::new(DecoderConfig::default());
    let got = decode_all(&mut dec, &messages);
    assert_eq!(dec.stats().total_errors(), 0);
    assert_eq!(
        got, records,
        "every field, floats and first packets included"
    );
}

#[test]
fn netflow_v9_round_trip_keeps_keys_counters_and_milliseconds() {
    let records = sample();
    let messages = encode(Protocol::NetflowV9, &records, TemplateRefresh::UDP_DEFAULT);
    let mut dec = Decoder::new(DecoderConfig::default());
    let got = decode_all(&mut dec, &messages);
    assert_eq!(dec.stats().total_errors(), 0);
    assert_eq!(got.len(), records.len());
    for (g, r) in got.iter().zip(&records) {
        assert_eq!(
            (g.src_ip, g.dst_ip, g.src_port, g.dst_port, g.proto),
            (r.src_ip, r.dst_ip, r.src_port, r.dst_port, r.proto)
        );
        assert_eq!(
            (g.fwd.packets, g.fwd.ip_bytes, g.rev.packets, g.rev.ip_bytes),
            (r.fwd.packets, r.fwd.ip_bytes, r.rev.packets, r.rev.ip_bytes)
        );
        assert_eq!(g.first_ns, r.first_ns / 1_000_000 * 1_000_000);
        assert_eq!(g.last_ns, r.last_ns / 1_000_000 * 1_000_000);
        assert_eq!(
            (g.src_mac, g.dst_mac, g.vlan),
            (r.src_mac, r.dst_mac, r.vlan)
        );
    }
}

#[test]
fn netflow_v5_splits_a_biflow_into_two_unidirectional_records() {
    let records: Vec<_> = sample()
        .into_iter()
        .filter(|r| r.src_ip.is_ipv4())
        .collect();
    let mut enc = V5Encoder::new(3);
    let mut messages = Vec::new();
    for r in &records {
        enc.add_flow(r, &mut |m: &[u8]| messages.push(m.to_vec()));
    }
    enc.flush(&mut |m: &[u8]| messages.push(m.to_vec()));
    let mut dec = Decoder::new(DecoderConfig::default());
    let got = decode_all(&mut dec, &messages);
    let want: usize = records
        .iter()
        .map(|r| 1 + usize::from(r.rev.packets > 0))
        .sum();
    assert_eq!(got.len(), want);
    assert!(messages.iter().all(|m| m.len() <= 24 + 30 * 48));
    // The responder's half: addresses and ports swapped, its own counters.
    let r = records.iter().find(|r| r.rev.packets > 0).unwrap();
    let back = got
        .iter()
        .find(|g| {
            g.src_ip == r.dst_ip
                && g.src_port == r.dst_port
                && g.dst_port == r.src_port
                && g.first_ns == r.first_ns / 1_000_000 * 1_000_000
        })
        .expect("reverse record");
    assert_eq!(
        (back.fwd.packets, back.fwd.ip_bytes),
        (r.rev.packets, r.rev.ip_bytes)
    );
    // v5 sequence numbers count flows: each packet's is the sum of the earlier counts.
    let mut seq = 0u32;
    for m in &messages {
        assert_eq!(u32::from_be_bytes(m[16..20].try_into().unwrap()), seq);
        seq += u32::from(u16::from_be_bytes([m[2], m[3]]));
    }
}

#[test]
fn ipfix_sequence_numbers_count_data_records_and_templates_are_refreshed() {
    let records = sample();
    let refresh = TemplateRefresh::Periodic {
        interval: std::time::Duration::from_secs(3600),
        messages: 3,
    };
    let messages = encode(Protocol::Ipfix, &records, refresh);
    let mut seq = 0u32;
    let mut dec = Decoder::new(DecoderConfig::default());
    for (i, m) in messages.iter().enumerate() {
        assert_eq!(
            u32::from_be_bytes(m[8..12].try_into().unwrap()),
            seq,
            "message {i}"
        );
        assert_eq!(
            u32::from_be_bytes(m[12..16].try_into().unwrap()),
            7,
            "observation domain"
        );
        // The session's templates (256 first); an extended template's announcement before its
        // first record is a template set too, of that template alone.
        let has_templates =
            u16::from_be_bytes([m[16], m[17]]) == 2 && u16::from_be_bytes([m[20], m[21]]) == 256;
        assert_eq!(
            has_templates,
            i % 3 == 0,
            "templates in message {i}: every 3 messages"
        );
        let (n, err) = dec.decode(exporter(), m, &mut |_, _| {});
        assert!(err.is_none());
        seq += n as u32;
    }
    // Feeds: every message carries its templates, so a late joiner decodes any of them.
    let messages = encode(Protocol::Ipfix, &records, TemplateRefresh::EveryMessage);
    let mut late = Decoder::new(DecoderConfig::default());
    let last = messages.last().unwrap();
    let (n, err) = late.decode(exporter(), last, &mut |_, _| {});
    assert!(n > 0 && err.is_none());
}

/// A valid IPFIX message: a template set for template `id` (two fields, `sourceIPv4Address`
/// and `packetDeltaCount`), and `records` data records.
fn tiny_message(id: u16, records: u32) -> Vec<u8> {
    let mut m = vec![0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    m.extend_from_slice(&[0, 2, 0, 16]);
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0, 2, 0, 8, 0, 4, 0, 2, 0, 8]);
    m.extend_from_slice(&id.to_be_bytes());
    let len = 4 + 12 * records as u16;
    m.extend_from_slice(&len.to_be_bytes());
    for i in 0..records {
        m.extend_from_slice(&[10, 0, 0, i as u8]);
        m.extend_from_slice(&u64::from(i + 1).to_be_bytes());
    }
    let total = m.len() as u16;
    m[2..4].copy_from_slice(&total.to_be_bytes());
    m
}

fn run(dec: &mut Decoder, m: &[u8]) -> (usize, Option<DecodeErrorKind>) {
    let (n, e) = dec.decode(exporter(), m, &mut |_, _| {});
    (n, e.map(|e| e.kind))
}

#[test]
fn truncated_messages_keep_what_came_before_and_never_panic() {
    let full = tiny_message(300, 5);
    for cut in 0..full.len() {
        let mut dec = Decoder::new(DecoderConfig::default());
        let (n, err) = run(&mut dec, &full[..cut]);
        assert!(err.is_some(), "cut at {cut} not reported");
        assert!(n < 5);
        assert!(dec.stats().total_errors() >= 1, "counted");
    }
    // The header's length says 5 records, the set header says so too, but the datagram was
    // cut inside the third: the header length is past the end.
    let mut dec = Decoder::new(DecoderConfig::default());
    let (n, err) = run(&mut dec, &full[..full.len() - 30]);
    assert_eq!(err, Some(DecodeErrorKind::BadLength));
    assert_eq!(n, 0, "the data set runs past the end: it cannot be framed");
    // A set that claims more than the message holds, with a consistent header length.
    let mut m = tiny_message(300, 2);
    let data_set = m.len() - 28;
    m[data_set + 2..data_set + 4].copy_from_slice(&100u16.to_be_bytes());
    let mut dec = Decoder::new(DecoderConfig::default());
    let (_, err) = run(&mut dec, &m);
    assert_eq!(err, Some(DecodeErrorKind::SetPastEnd));
    let e = dec.decode(exporter(), &m, &mut |_, _| {}).1.unwrap();
    assert!(
        e.to_string().contains("192.0.2.1:4739")
            && e.to_string().contains(&format!("offset {}", data_set + 2)),
        "{e}"
    );
}

#[test]
fn bad_template_ids_and_set_ids_are_counted() {
    let mut dec = Decoder::new(DecoderConfig::default());
    let (n, err) = run(&mut dec, &tiny_message(200, 3));
    assert_eq!(err, Some(DecodeErrorKind::BadTemplateId));
    // Its data set has id 200, which is no data set id either.
    assert_eq!(n, 0);
    assert_eq!(dec.stats().errors[DecodeErrorKind::BadSetId as usize], 1);
    // Data for a template never sent.
    let mut m = tiny_message(300, 2);
    m.drain(16..32);
    let total = m.len() as u16;
    m[2..4].copy_from_slice(&total.to_be_bytes());
    let (n, err) = run(&mut dec, &m);
    assert_eq!((n, err), (0, Some(DecodeErrorKind::UnknownTemplate)));
    // A template with no fields would make a data set loop forever: refused.
    let mut m = vec![
        0, 10, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 8, 1, 44, 0, 0,
    ];
    let (_, err) = run(&mut Decoder::new(DecoderConfig::default()), &m);
    assert_eq!(err, None, "count 0 is a withdrawal of template 300");
    m[19] = 0; // set length 0
    let (_, err) = run(&mut dec, &m);
    assert_eq!(err, Some(DecodeErrorKind::ShortSet));
}

#[test]
fn template_floods_are_bounded_and_known_templates_keep_working() {
    let mut dec = Decoder::new(DecoderConfig {
        max_templates: 16,
        ..DecoderConfig::default()
    });
    let (n, _) = run(&mut dec, &tiny_message(256, 2));
    assert_eq!(n, 2);
    for id in 257..1257u16 {
        run(&mut dec, &tiny_message(id, 1));
    }
    assert_eq!(dec.templates_cached(), 16);
    assert_eq!(
        dec.stats().errors[DecodeErrorKind::TemplateLimit as usize],
        1000 - 15
    );
    assert_eq!(
        dec.stats().errors[DecodeErrorKind::UnknownTemplate as usize],
        1000 - 15
    );
    let (n, err) = run(&mut dec, &tiny_message(256, 3));
    assert_eq!(
        (n, err),
        (3, None),
        "a known template is replaced, not refused"
    );
}

#[test]
fn withdrawn_templates_are_forgotten() {
    let mut dec = Decoder::new(DecoderConfig::default());
    assert_eq!(run(&mut dec, &tiny_message(300, 1)).0, 1);
    // Template withdrawal: template id 300, field count 0.
    let w = [
        0, 10, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 8, 1, 44, 0, 0,
    ];
    assert_eq!(run(&mut dec, &w), (0, None));
    assert_eq!(dec.stats().withdrawals, 1);
    assert_eq!(dec.templates_cached(), 0);
    let mut data_only = tiny_message(300, 1);
    data_only.drain(16..32);
    let total = data_only.len() as u16;
    data_only[2..4].copy_from_slice(&total.to_be_bytes());
    assert_eq!(
        run(&mut dec, &data_only).1,
        Some(DecodeErrorKind::UnknownTemplate)
    );
    // Templates are per observation domain: domain 2 never had template 300.
    assert_eq!(run(&mut dec, &tiny_message(300, 1)).0, 1);
    let mut other_domain = data_only.clone();
    other_domain[15] = 2;
    assert_eq!(
        run(&mut dec, &other_domain).1,
        Some(DecodeErrorKind::UnknownTemplate)
    );
}

#[test]
fn variable_length_fields_past_the_set_end_are_counted() {
    let mut rec = empty_record();
    rec.src_ip = "10.1.1.1".parse().unwrap();
    rec.first_count = 3;
    let messages = encode(Protocol::Ipfix, &[rec], TemplateRefresh::Once);
    let mut m = messages[0].clone();
    // The record ends with the two variable-length arrays, the fixed 30 bytes of
    // communityId and, without a label, the 5 of applicationId (3), applicationName (its
    // length byte) and applicationSource (1); claim the last array is 200 bytes long.
    let last_len_at = m.len() - 1 - 3 * 8 - 30 - 5;
    assert_eq!(m[last_len_at], 24);
    m[last_len_at] = 200;
    let mut dec = Decoder::new(DecoderConfig::default());
    let (n, err) = run(&mut dec, &m);
    assert_eq!((n, err), (0, Some(DecodeErrorKind::RecordPastEnd)));
}

#[test]
fn netflow_v5_count_past_the_end_is_counted_and_the_present_records_kept() {
    let mut m = vec![0u8; 24 + 2 * 48];
    m[0..2].copy_from_slice(&5u16.to_be_bytes());
    m[2..4].copy_from_slice(&3u16.to_be_bytes());
    let mut dec = Decoder::new(DecoderConfig::default());
    let (n, err) = run(&mut dec, &m);
    assert_eq!((n, err), (2, Some(DecodeErrorKind::BadLength)));
}

#[test]
fn random_bytes_never_panic() {
    // Mutations of valid messages: each byte flipped in turn.
    let records = sample();
    let mut all = encode(Protocol::Ipfix, &records[..10], TemplateRefresh::Once);
    all.extend(encode(
        Protocol::NetflowV9,
        &records[..10],
        TemplateRefresh::Once,
    ));
    for m in &all {
        for i in 0..m.len() {
            for bits in [0x01u8, 0x80, 0xff] {
                let mut x = m.clone();
                x[i] ^= bits;
                let mut dec = Decoder::new(DecoderConfig::default());
                dec.decode(exporter(), &x, &mut |_, _| {});
            }
        }
    }
}

#[test]
fn lost_messages_show_in_the_sequence_numbers() {
    let records = sample();
    for protocol in [Protocol::Ipfix, Protocol::NetflowV9] {
        let messages = encode(protocol, &records, TemplateRefresh::EveryMessage);
        assert!(messages.len() > 10);
        let mut dec = Decoder::new(DecoderConfig::default());
        let mut lost_records = 0;
        for (i, m) in messages.iter().enumerate() {
            if i == 3 || i == 7 {
                let mut probe = Decoder::new(DecoderConfig::default());
                lost_records += probe.decode(exporter(), m, &mut |_, _| {}).0 as u64;
                continue;
            }
            dec.decode(exporter(), m, &mut |_, _| {});
        }
        let want = match protocol {
            // IPFIX counts data records, v9 export packets.
            Protocol::Ipfix => lost_records,
            Protocol::NetflowV9 => 2,
        };
        assert_eq!(dec.stats().sequence_missing, want, "{protocol:?}");
        assert_eq!(dec.stats().sequence_resets, 0);
        // The same messages again: the sequence goes back.
        dec.decode(exporter(), &messages[0], &mut |_, _| {});
        assert_eq!(dec.stats().sequence_resets, 1);
    }
}
