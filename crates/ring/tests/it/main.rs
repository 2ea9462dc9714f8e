//! Integration tests of the ring with real threads, real processes and real shared-memory files:
//! round trips, lossless back-pressure, lossy skipping, joining and leaving, wrap-around,
//! closing, a listener in a second process, a dead listener reclaimed, duplicate removal.
mod blocks;
mod process;
mod roundtrip;
mod threads;

use trawl_capture::{Direction, Interface, LinkType, PacketRecord, RecordMeta};
use trawl_ring::{Producer, RingConfig};

/// Odd sizes from 8 to 300 bytes, so records of every padding and wrap remainder occur.
pub fn len_of(seq: u64) -> usize {
    8 + (seq.wrapping_mul(7919) % 293) as usize
}

/// Record `seq`: its sequence number in the first 8 bytes, then bytes derived from it.
pub fn record(seq: u64, buf: &mut Vec<u8>) -> RecordMeta {
    let len = len_of(seq);
    buf.clear();
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend((8..len).map(|k| (seq as u8).wrapping_mul(31).wrapping_add(k as u8)));
    RecordMeta {
        ts_ns: seq * 1000 + 7,
        offset: 0,
        caplen: len as u32,
        wire_len: len as u32 + (seq % 3) as u32,
        iface: (seq % 2) as u16,
        direction: match seq % 3 {
            0 => Direction::Unknown,
            1 => Direction::Inbound,
            _ => Direction::Outbound,
        },
    }
}

/// Checks that `rec` is exactly record `seq` (metadata and every byte).
#[track_caller]
pub fn check(rec: &PacketRecord<'_>, seq: u64) {
    let mut buf = Vec::new();
    let meta = record(seq, &mut buf);
    let got = u64::from_le_bytes(rec.data[..8].try_into().unwrap());
    assert_eq!(got, seq, "sequence");
    assert_eq!(rec.data, &buf[..], "bytes of record {seq}");
    assert_eq!(rec.ts_ns, meta.ts_ns);
    assert_eq!(rec.wire_len, meta.wire_len);
    assert_eq!(rec.iface, meta.iface);
    assert_eq!(rec.direction, meta.direction);
    assert_eq!(rec.link_type, interfaces()[meta.iface as usize].link_type);
}

/// The sequence number of a record.
pub fn seq_of(rec: &PacketRecord<'_>) -> u64 {
    u64::from_le_bytes(rec.data[..8].try_into().unwrap())
}

/// Two interfaces of different link types.
pub fn interfaces() -> Vec<Interface> {
    vec![
        Interface {
            link_type: LinkType::ETHERNET,
            snaplen: 65535,
            name: Some("eth0".into()),
        },
        Interface {
            link_type: LinkType::LINUX_SLL,
            snaplen: 262144,
            name: Some("a-very-long-interface-name".into()),
        },
    ]
}

/// An in-process producer of `capacity` bytes with the test interfaces.
pub fn producer(capacity: usize) -> Producer {
    let mut p = Producer::new(&RingConfig::with_capacity(capacity)).unwrap();
    p.set_interfaces(&interfaces()).unwrap();
    p
}

/// Pushes records `from..to`, publishing every `batch` records and at the end.
pub fn push_range(p: &mut Producer, from: u64, to: u64, batch: u64) {
    let mut buf = Vec::new();
    for seq in from..to {
        let meta = record(seq, &mut buf);
        assert!(p.push(&meta, &buf).unwrap());
        if (seq + 1 - from).is_multiple_of(batch) {
            p.publish();
        }
    }
    p.publish();
}
