//! Reading as a byte stream of whole records.
use trawl_ring::{Mode, Recv};

use crate::{check, producer, push_range, seq_of};

#[test]
fn blocks_hold_whole_records() {
    let mut p = producer(1 << 16);
    let mut l = p.ring().listen(Mode::Lossless).unwrap();
    push_range(&mut p, 0, 20, 20);
    let (len, first_end) = {
        let Recv::Ready(b) = l.block().unwrap() else {
            panic!()
        };
        assert_eq!(b.record_count(), 20);
        assert_eq!(b.bytes().as_ptr() as usize % 8, 0);
        let recs: Vec<_> = b.records().collect();
        assert_eq!(recs.len(), 20);
        for (i, (rec, _)) in recs.iter().enumerate() {
            check(rec, i as u64);
        }
        assert_eq!(recs.last().unwrap().1, b.len());
        (b.len(), recs[0].1)
    };
    // Consume only the first record: the next block starts at the second.
    l.consume(first_end);
    assert_eq!(l.stats().records_read, 1);
    {
        let Recv::Ready(b) = l.block().unwrap() else {
            panic!()
        };
        assert_eq!(b.len(), len - first_end);
        assert_eq!(seq_of(&b.records().next().unwrap().0), 1);
    }
    let Recv::Ready(rec) = l.next().unwrap() else {
        panic!()
    };
    check(&rec, 1);
    let n = {
        let Recv::Ready(b) = l.block().unwrap() else {
            panic!()
        };
        b.len()
    };
    l.consume(n);
    assert_eq!(l.stats().records_read, 20);
    assert!(matches!(l.block().unwrap(), Recv::Empty));
}

#[test]
fn blocks_stop_at_the_wrap() {
    let mut p = producer(1 << 16);
    let mut l = p.ring().listen(Mode::Lossless).unwrap();
    let mut seq = 0;
    let mut next = 0;
    let mut blocks = 0;
    while p.position() < 8 << 16 {
        push_range(&mut p, seq, seq + 150, 150);
        seq += 150;
        loop {
            let n = match l.block().unwrap() {
                Recv::Ready(b) => {
                    for (rec, _) in b.records() {
                        check(&rec, next);
                        next += 1;
                    }
                    b.len()
                }
                Recv::Empty => break,
                Recv::Closed => unreachable!(),
            };
            blocks += 1;
            l.consume(n);
        }
        assert_eq!(next, seq);
    }
    // Every wrap splits a batch in two blocks.
    assert!(
        blocks > seq / 150,
        "{blocks} blocks for {} batches",
        seq / 150
    );
}

#[test]
#[should_panic(expected = "not a record boundary")]
fn consume_inside_a_record_panics() {
    let mut p = producer(1 << 16);
    let mut l = p.ring().listen(Mode::Lossless).unwrap();
    push_range(&mut p, 0, 3, 3);
    let Recv::Ready(_) = l.block().unwrap() else {
        panic!()
    };
    l.consume(8);
}

#[test]
fn block_ends_where_a_record_ends_exactly_at_the_end_of_the_buffer() {
    // 64-byte records (40 captured bytes) tile the 64 KiB buffer exactly: record 1024 starts at
    // offset 0 with no wrap marker before it.
    let mut p = producer(1 << 16);
    let mut l = p.ring().listen(Mode::Lossless).unwrap();
    let meta = trawl_capture::RecordMeta::default();
    let push = |p: &mut trawl_ring::Producer, from: u32, to: u32| {
        for i in from..to {
            let mut data = [0u8; 40];
            data[..4].copy_from_slice(&i.to_le_bytes());
            p.push(&meta, &data).unwrap();
        }
        p.publish();
    };
    let read = |l: &mut trawl_ring::Listener| {
        let mut seqs = Vec::new();
        let n = match l.block().unwrap() {
            Recv::Ready(b) => {
                for (rec, _) in b.records() {
                    seqs.push(u32::from_le_bytes(rec.data[..4].try_into().unwrap()));
                }
                b.len()
            }
            _ => return seqs,
        };
        l.consume(n);
        seqs
    };
    push(&mut p, 0, 1000);
    assert_eq!(read(&mut l), (0..1000).collect::<Vec<_>>());
    push(&mut p, 1000, 1034);
    assert_eq!(read(&mut l), (1000..1024).collect::<Vec<_>>());
    assert_eq!(read(&mut l), (1024..1034).collect::<Vec<_>>());
    assert_eq!(read(&mut l), Vec::<u32>::new());
}
