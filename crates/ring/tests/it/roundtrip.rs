//! Single-threaded behaviour: exact round trips, wrap-around, closing, joining, limits.
use std::time::Duration;

use trawl_capture::{Batch, Interface, LinkType, RecordMeta};
use trawl_ring::dedup::Dedup;
use trawl_ring::{Error, Mode, Producer, Recv, RingConfig};

use crate::{check, interfaces, producer, push_range, record, seq_of};

#[test]
fn round_trip_exact_records() {
    let mut p = producer(1 << 16);
    let ring = p.ring();
    let mut lossless = ring.listen(Mode::Lossless).unwrap();
    let mut lossy = ring.listen(Mode::Lossy).unwrap();
    assert!(matches!(lossless.next().unwrap(), Recv::Empty));
    push_range(&mut p, 0, 100, 7);
    for l in [&mut lossless, &mut lossy] {
        for seq in 0..100 {
            match l.next().unwrap() {
                Recv::Ready(rec) => check(&rec, seq),
                other => panic!("record {seq}: {other:?}"),
            }
        }
        assert!(matches!(l.next().unwrap(), Recv::Empty));
    }
    let st = lossless.stats();
    assert_eq!(st.records_read, 100);
    assert_eq!(st.records_missed, 0);
    assert_eq!(st.bytes_read, p.stats().bytes_written);
    p.close();
    assert!(matches!(lossless.next().unwrap(), Recv::Closed));
    assert!(matches!(lossy.next().unwrap(), Recv::Closed));
}

#[test]
fn interface_table_is_shared() {
    let p = producer(1 << 16);
    let l = p.ring().listen(Mode::Lossy).unwrap();
    let mut want = interfaces();
    // Names are kept to 16 bytes.
    want[1].name = Some("a-very-long-inte".into());
    assert_eq!(l.interfaces(), want);
    assert_eq!(p.ring().interfaces(), want);
}

#[test]
fn wrap_around_with_odd_sizes() {
    // 64 KiB ring, records of 8..300 bytes: about 300 records per turn; 40 turns.
    let mut p = producer(1 << 16);
    let mut l = p.ring().listen(Mode::Lossless).unwrap();
    let mut seq = 0;
    let mut next = 0;
    while p.position() < 40 << 16 {
        // A batch of a bit less than half the ring, so each wraps at a different offset.
        let n = 100 + seq % 17;
        push_range(&mut p, seq, seq + n, n);
        seq += n;
        while let Recv::Ready(rec) = l.next().unwrap() {
            check(&rec, next);
            next += 1;
        }
        assert_eq!(next, seq);
    }
    let st = p.stats();
    assert_eq!(st.records_written, seq);
    assert_eq!(l.stats().records_read, seq);
    assert_eq!(l.stats().bytes_read, st.bytes_written);
    assert_eq!(st.wait_count, 0, "the listener always kept up");
}

#[test]
fn close_then_drain() {
    let mut p = producer(1 << 16);
    let ring = p.ring();
    let mut l = ring.listen(Mode::Lossless).unwrap();
    push_range(&mut p, 0, 50, 50);
    p.close();
    assert!(ring.is_closed());
    let mut buf = Vec::new();
    let meta = record(99, &mut buf);
    assert!(matches!(p.push(&meta, &buf), Err(Error::Closed)));
    let mut n = 0;
    loop {
        match l.wait(Duration::from_secs(5)).unwrap() {
            Recv::Ready(rec) => {
                check(&rec, n);
                n += 1;
            }
            Recv::Closed => break,
            Recv::Empty => panic!("timeout on a closed ring"),
        }
    }
    assert_eq!(n, 50);
    // Closed stays closed, and a listener joining now sees the end at once.
    assert!(matches!(l.next().unwrap(), Recv::Closed));
    let mut late = ring.listen(Mode::Lossy).unwrap();
    assert!(matches!(late.next().unwrap(), Recv::Closed));
    assert!(matches!(late.block().unwrap(), Recv::Closed));
}

#[test]
fn drop_closes() {
    let mut p = producer(1 << 16);
    let mut l = p.ring().listen(Mode::Lossless).unwrap();
    push_range(&mut p, 0, 3, 3);
    drop(p);
    assert_eq!(
        l.for_each(|rec| {
            assert!(seq_of(&rec) < 3);
            std::ops::ControlFlow::Continue(())
        })
        .unwrap(),
        3
    );
}

#[test]
fn new_listener_starts_at_write_position() {
    let mut p = producer(1 << 16);
    let ring = p.ring();
    push_range(&mut p, 0, 10, 10);
    let mut l = ring.listen(Mode::Lossless).unwrap();
    assert!(matches!(l.next().unwrap(), Recv::Empty));
    push_range(&mut p, 10, 15, 5);
    for seq in 10..15 {
        let Recv::Ready(rec) = l.next().unwrap() else {
            panic!()
        };
        check(&rec, seq);
    }
    // Pushed but not published: not visible.
    let mut buf = Vec::new();
    let meta = record(15, &mut buf);
    p.push(&meta, &buf).unwrap();
    assert!(matches!(l.next().unwrap(), Recv::Empty));
    p.publish();
    let Recv::Ready(rec) = l.next().unwrap() else {
        panic!()
    };
    check(&rec, 15);
}

#[test]
fn long_records_are_truncated() {
    let mut cfg = RingConfig::with_capacity(1 << 16);
    cfg.max_record = Some(128);
    let mut p = Producer::new(&cfg).unwrap();
    p.set_interfaces(&interfaces()).unwrap();
    let mut l = p.ring().listen(Mode::Lossless).unwrap();
    let meta = RecordMeta {
        ts_ns: 5,
        wire_len: 300,
        ..RecordMeta::default()
    };
    let data: Vec<u8> = (0..300).map(|i| i as u8).collect();
    p.push(&meta, &data).unwrap();
    p.publish();
    let Recv::Ready(rec) = l.next().unwrap() else {
        panic!()
    };
    assert_eq!(rec.data, &data[..104]);
    assert_eq!(rec.wire_len, 300);
    assert_eq!(p.stats().records_truncated, 1);
}

#[test]
fn records_must_name_a_known_interface() {
    let mut p = Producer::new(&RingConfig::with_capacity(1 << 16)).unwrap();
    let meta = RecordMeta::default();
    assert!(matches!(
        p.push(&meta, &[1, 2, 3]),
        Err(Error::UnknownInterface { iface: 0 })
    ));
    for _ in 0..16 {
        p.add_interface(&interfaces()[0]).unwrap();
    }
    assert!(matches!(
        p.add_interface(&interfaces()[0]),
        Err(Error::TooManyInterfaces { max: 16 })
    ));
}

#[test]
fn push_batch_syncs_interfaces() {
    let mut p = Producer::new(&RingConfig::with_capacity(1 << 16)).unwrap();
    let mut l = p.ring().listen(Mode::Lossless).unwrap();
    let ifaces = vec![
        Interface {
            link_type: LinkType::RAW,
            snaplen: 0,
            name: None,
        },
        Interface {
            link_type: LinkType::IPV6,
            snaplen: 9000,
            name: Some("wg0".into()),
        },
    ];
    let bytes: Vec<u8> = (0..100).collect();
    let metas = [
        RecordMeta {
            ts_ns: 1,
            offset: 0,
            caplen: 40,
            wire_len: 40,
            iface: 1,
            direction: trawl_capture::Direction::Outbound,
        },
        RecordMeta {
            ts_ns: 2,
            offset: 40,
            caplen: 60,
            wire_len: 1500,
            iface: 0,
            direction: trawl_capture::Direction::Inbound,
        },
    ];
    let batch = Batch::new(&metas, &bytes, &ifaces);
    assert_eq!(p.push_batch(&batch).unwrap(), 2);
    p.publish();
    assert_eq!(l.interfaces(), ifaces);
    let Recv::Ready(a) = l.next().unwrap() else {
        panic!()
    };
    assert_eq!(
        (a.ts_ns, a.data, a.link_type, a.wire_len),
        (1, &bytes[..40], LinkType::IPV6, 40)
    );
    assert_eq!(a.direction, trawl_capture::Direction::Outbound);
    let Recv::Ready(b) = l.next().unwrap() else {
        panic!()
    };
    assert_eq!(
        (b.ts_ns, b.data, b.link_type, b.wire_len),
        (2, &bytes[40..], LinkType::RAW, 1500)
    );
    assert_eq!(b.direction, trawl_capture::Direction::Inbound);
}

#[test]
fn slots_are_limited_and_freed() {
    let p = producer(1 << 16);
    let ring = p.ring();
    let mut all: Vec<_> = (0..64).map(|_| ring.listen(Mode::Lossy).unwrap()).collect();
    assert!(matches!(
        ring.listen(Mode::Lossy),
        Err(Error::NoFreeSlot { slots: 64 })
    ));
    assert_eq!(ring.listeners().len(), 64);
    let freed = all.swap_remove(17).slot_index();
    let again = ring.listen(Mode::Lossless).unwrap();
    assert_eq!(again.slot_index(), freed);
    drop(all);
    assert_eq!(ring.listeners().len(), 1);
    assert_eq!(ring.listeners()[0].mode, Mode::Lossless);
}

#[test]
fn idle_lossy_listener_is_skipped_and_counts_exactly() {
    let mut p = producer(1 << 16);
    let ring = p.ring();
    let mut l = ring.listen(Mode::Lossy).unwrap();
    // Ten rings' worth while the listener does not read: the producer never waits.
    let mut seq = 0;
    while p.position() < 10 << 16 {
        push_range(&mut p, seq, seq + 64, 64);
        seq += 64;
    }
    p.close();
    let st = p.stats();
    assert_eq!(st.wait_count, 0);
    assert!(st.lossy_skips > 0);
    let mut last = None;
    let n = l
        .for_each(|rec| {
            let s = seq_of(&rec);
            check(&rec, s);
            assert!(last.is_none_or(|l| s == l + 1), "contiguous after the skip");
            last = Some(s);
            std::ops::ControlFlow::Continue(())
        })
        .unwrap();
    let ls = l.stats();
    assert_eq!(ls.records_read, n);
    assert!(ls.records_missed > 0);
    assert_eq!(ls.records_read + ls.records_missed, seq);
    assert_eq!(ls.bytes_read + ls.bytes_missed, st.bytes_written);
    assert_eq!(last, Some(seq - 1));
}

#[test]
fn dedup_drops_duplicates_before_the_ring() {
    let mut p = producer(1 << 16);
    p.set_dedup(Some(Dedup::new(Dedup::DEFAULT_WINDOW_NS, 10)));
    let mut l = p.ring().listen(Mode::Lossless).unwrap();
    let mut buf = Vec::new();
    let ms = 1_000_000;
    for (seq, ts, kept) in [
        (1, 0, true),
        (1, 50 * ms, false), // switching duplicate
        (2, 60 * ms, true),
        (1, 400 * ms, true),  // outside the window of the last copy
        (2, 100 * ms, false), // within the window (out of order)
    ] {
        let mut meta = record(seq, &mut buf);
        meta.ts_ns = ts;
        assert_eq!(p.push(&meta, &buf).unwrap(), kept, "seq {seq} at {ts}");
    }
    p.close();
    assert_eq!(p.stats().duplicates_dropped, 2);
    assert_eq!(p.stats().records_written, 3);
    assert_eq!(p.dedup().unwrap().stats().checked, 5);
    let mut seqs = Vec::new();
    l.for_each(|r| {
        seqs.push(seq_of(&r));
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(seqs, [1, 2, 1]);
}

#[test]
fn invalid_configs_are_refused() {
    for cap in [1000, 1 << 15, 3 << 16] {
        assert!(matches!(
            Producer::new(&RingConfig::with_capacity(cap)),
            Err(Error::InvalidConfig(_))
        ));
    }
    let mut cfg = RingConfig::with_capacity(1 << 16);
    cfg.max_record = Some(1 << 15);
    assert!(matches!(Producer::new(&cfg), Err(Error::InvalidConfig(_))));
}

#[test]
fn has_listeners_follows_joins_and_leaves() {
    let p = producer(1 << 16);
    let ring = p.ring();
    assert!(!p.has_listeners());
    let a = ring.listen(Mode::Lossy).unwrap();
    assert!(p.has_listeners());
    let b = ring.listen(Mode::Lossless).unwrap();
    drop(a);
    assert!(p.has_listeners(), "one left, one still there");
    drop(b);
    assert!(!p.has_listeners());
}
