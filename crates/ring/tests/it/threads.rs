//! A producer thread and listener threads running at the same time.
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use trawl_ring::{ListenerStats, Mode, Recv};

use crate::{check, producer, push_range, seq_of};

/// Records in the big lossless run (the data of each is checked byte for byte).
const MANY: u64 = 1_000_000;

#[test]
fn lossless_listeners_get_everything_in_order() {
    let mut p = producer(1 << 20);
    let ring = p.ring();
    // Three ways of reading: wait(), for_each(), and blocks.
    let mut by_wait = ring.listen(Mode::Lossless).unwrap();
    let mut by_loop = ring.listen(Mode::Lossless).unwrap();
    let mut by_block = ring.listen(Mode::Lossless).unwrap();
    let a = thread::spawn(move || {
        let mut next = 0;
        loop {
            match by_wait.wait(Duration::from_secs(10)).unwrap() {
                Recv::Ready(rec) => {
                    check(&rec, next);
                    next += 1;
                }
                Recv::Closed => break,
                Recv::Empty => panic!("no record for 10 s"),
            }
        }
        (next, by_wait.stats())
    });
    let b = thread::spawn(move || {
        let mut next = 0;
        let n = by_loop
            .for_each(|rec| {
                assert_eq!(seq_of(&rec), next);
                if next.is_multiple_of(7) {
                    check(&rec, next);
                }
                next += 1;
                ControlFlow::Continue(())
            })
            .unwrap();
        (n, by_loop.stats())
    });
    let c = thread::spawn(move || {
        let mut next = 0;
        loop {
            let n = match by_block.block().unwrap() {
                Recv::Ready(b) => {
                    for (rec, _) in b.records() {
                        assert_eq!(seq_of(&rec), next);
                        next += 1;
                    }
                    b.len()
                }
                Recv::Empty => {
                    thread::yield_now();
                    continue;
                }
                Recv::Closed => break,
            };
            by_block.consume(n);
        }
        (next, by_block.stats())
    });
    push_range(&mut p, 0, MANY, 64);
    p.close();
    let written = p.stats();
    for h in [a, b, c] {
        let (n, st) = h.join().unwrap();
        assert_eq!(n, MANY);
        assert_eq!(
            st,
            ListenerStats {
                records_read: MANY,
                bytes_read: written.bytes_written,
                records_missed: 0,
                bytes_missed: 0
            }
        );
    }
    assert!(
        written.bytes_written > 100 << 20,
        "many turns of the 1 MiB ring"
    );
}

#[test]
fn slow_lossless_listener_holds_the_producer_back() {
    let mut p = producer(1 << 16);
    let mut l = p.ring().listen(Mode::Lossless).unwrap();
    let reader = thread::spawn(move || {
        let mut next = 0;
        l.for_each(|rec| {
            check(&rec, next);
            next += 1;
            if next.is_multiple_of(500) {
                thread::sleep(Duration::from_millis(2));
            }
            ControlFlow::Continue(())
        })
        .unwrap();
        (next, l.stats())
    });
    // About 20 rings' worth.
    let n = 8_000;
    push_range(&mut p, 0, n, 32);
    p.close();
    let (got, st) = reader.join().unwrap();
    assert_eq!(got, n);
    assert_eq!(st.records_missed, 0);
    let ps = p.stats();
    assert!(ps.wait_count > 0, "the producer had to wait: {ps:?}");
    assert!(ps.wait_ns > 10_000_000, "and waited for the sleeps: {ps:?}");
    assert_eq!(ps.lossy_skips, 0);
}

#[test]
fn slow_lossy_listener_misses_and_counts_exactly() {
    let mut p = producer(1 << 16);
    let mut l = p.ring().listen(Mode::Lossy).unwrap();
    let reader = thread::spawn(move || {
        let mut last: Option<u64> = None;
        let mut gaps = 0;
        let mut read = 0u64;
        l.for_each(|rec| {
            let s = seq_of(&rec);
            check(&rec, s);
            if let Some(prev) = last {
                assert!(s > prev, "in order");
                gaps += (s != prev + 1) as u64;
            }
            last = Some(s);
            read += 1;
            if read.is_multiple_of(100) {
                // Slow: holds its record (and the lease) for a while now and then.
                thread::sleep(Duration::from_micros(500));
            }
            ControlFlow::Continue(())
        })
        .unwrap();
        (l.stats(), gaps, last)
    });
    let n = 200_000;
    push_range(&mut p, 0, n, 16);
    p.close();
    let (st, gaps, last) = reader.join().unwrap();
    let ps = p.stats();
    assert!(st.records_missed > 0 && gaps > 0, "{st:?}");
    assert!(st.records_read > 0);
    assert_eq!(st.records_read + st.records_missed, n, "{st:?}");
    assert_eq!(st.bytes_read + st.bytes_missed, ps.bytes_written);
    assert_eq!(last, Some(n - 1), "read to the end");
}

#[test]
fn listeners_join_and_leave_while_running() {
    let mut p = producer(1 << 18);
    let ring = p.ring();
    let mut steady = ring.listen(Mode::Lossless).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let steady = thread::spawn(move || {
        let mut next = 0;
        steady
            .for_each(|rec| {
                assert_eq!(seq_of(&rec), next);
                next += 1;
                ControlFlow::Continue(())
            })
            .unwrap()
    });
    let start = Arc::new(Barrier::new(2));
    let joiner = {
        let ring = ring.clone();
        let stop = stop.clone();
        let start = start.clone();
        thread::spawn(move || {
            start.wait();
            let mut joins = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // Every record published before joining is behind the new listener.
                let before = ring.stats().records_written;
                let mode = if joins.is_multiple_of(2) {
                    Mode::Lossy
                } else {
                    Mode::Lossless
                };
                let mut l = ring.listen(mode).unwrap();
                let mut prev = None;
                for _ in 0..50 {
                    match l.wait(Duration::from_secs(5)).unwrap() {
                        Recv::Ready(rec) => {
                            let s = seq_of(&rec);
                            check(&rec, s);
                            assert!(s >= before, "joined at {before}, read {s}");
                            assert!(prev.is_none_or(|p| s > p));
                            prev = Some(s);
                        }
                        Recv::Closed | Recv::Empty => break,
                    }
                }
                drop(l);
                joins += 1;
            }
            joins
        })
    };
    start.wait();
    let n = 400_000;
    push_range(&mut p, 0, n, 32);
    stop.store(true, Ordering::Relaxed);
    p.close();
    assert_eq!(steady.join().unwrap(), n);
    let joins = joiner.join().unwrap();
    assert!(joins >= 2, "{joins} joins");
    // Everybody left but nobody was reclaimed.
    assert_eq!(ring.listeners().len(), 0);
    assert_eq!(p.stats().listeners_reclaimed, 0);
}

#[test]
fn lossy_block_reader_and_lossless_reader_together() {
    let mut p = producer(1 << 16);
    let ring = p.ring();
    let mut dumper = ring.listen(Mode::Lossless).unwrap();
    let mut monitor = ring.listen(Mode::Lossy).unwrap();
    let dumper = thread::spawn(move || {
        let mut next = 0;
        loop {
            match dumper.wait(Duration::from_secs(10)).unwrap() {
                Recv::Ready(rec) => {
                    assert_eq!(seq_of(&rec), next);
                    next += 1;
                }
                Recv::Closed => return next,
                Recv::Empty => panic!("no record for 10 s"),
            }
        }
    });
    let monitor = thread::spawn(move || {
        let mut last: Option<u64> = None;
        let mut blocks = 0u64;
        loop {
            let n = match monitor.block().unwrap() {
                Recv::Ready(b) => {
                    for (rec, _) in b.records() {
                        let s = seq_of(&rec);
                        check(&rec, s);
                        assert!(last.is_none_or(|l| s > l));
                        last = Some(s);
                    }
                    b.len()
                }
                Recv::Empty => {
                    thread::sleep(Duration::from_micros(50));
                    continue;
                }
                Recv::Closed => break,
            };
            blocks += 1;
            if blocks.is_multiple_of(32) {
                // Slow: holds a block for a while now and then, long enough for the producer
                // to go round the 64 KiB ring.
                thread::sleep(Duration::from_millis(1));
            }
            monitor.consume(n);
        }
        (monitor.stats(), last)
    });
    let n = 150_000;
    push_range(&mut p, 0, n, 16);
    p.close();
    assert_eq!(dumper.join().unwrap(), n);
    let (st, last) = monitor.join().unwrap();
    assert_eq!(last, Some(n - 1));
    assert!(st.records_missed > 0, "{st:?}");
    assert_eq!(st.records_read + st.records_missed, n, "{st:?}");
    assert_eq!(st.bytes_read + st.bytes_missed, p.stats().bytes_written);
}
