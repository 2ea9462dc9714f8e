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
