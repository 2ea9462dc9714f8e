//! Shared rings across processes: the test binary re-runs itself as the listener process
//! (`child_entry`, selected by the `TRAWL_RING_CHILD` variable).
use std::io::{BufRead, BufReader, Write};
use std::ops::ControlFlow;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use trawl_ring::{Error, Mode, Producer, Recv, RingConfig, SharedRing};

use crate::{check, interfaces, push_range, record, seq_of};

const CHILD_VAR: &str = "TRAWL_RING_CHILD";

/// Runs only as a child: `TRAWL_RING_CHILD=read:NAME` reads ring NAME to its end and prints a
/// checksum; `hold:NAME` joins as lossless, says so, and sleeps until killed.
#[test]
fn child_entry() {
    let Ok(what) = std::env::var(CHILD_VAR) else {
        return;
    };
    let (cmd, name) = what.split_once(':').unwrap();
    match cmd {
        "read" => {
            let mut l = SharedRing::attach(name, Mode::Lossless).unwrap();
            let mut want = interfaces();
            want[1].name = Some("a-very-long-inte".into());
            assert_eq!(l.interfaces(), want);
            println!("RING-CHILD ready");
            let mut next = 0u64;
            let mut sum = 0u64;
            l.for_each(|rec| {
                check(&rec, next);
                sum = rec
                    .data
                    .iter()
                    .fold(sum, |s, &b| s.wrapping_mul(31).wrapping_add(b as u64));
                next += 1;
                ControlFlow::Continue(())
            })
            .unwrap();
            let st = l.stats();
            println!(
                "RING-CHILD done {next} {sum} {} {}",
                st.records_read, st.records_missed
            );
        }
        "hold" => {
            let _l = SharedRing::attach(name, Mode::Lossless).unwrap();
            println!("RING-CHILD ready");
            std::thread::sleep(Duration::from_secs(60));
        }
        "produce" => {
            // Creates the ring, waits for a line on stdin, publishes ten records, never closes.
            let mut p = shared_producer(name, 1 << 16);
            println!("RING-CHILD ready");
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            push_range(&mut p, 0, 10, 10);
            println!("RING-CHILD pushed");
            std::thread::sleep(Duration::from_secs(60));
        }
        other => panic!("unknown child command {other}"),
    }
}

fn spawn_child(cmd: &str, name: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "process::child_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_VAR, format!("{cmd}:{name}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Reads the child's stdout up to a line starting with `prefix`; returns the rest of it.
fn expect_line(out: &mut impl BufRead, prefix: &str) -> String {
    let mut line = String::new();
    loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "child ended before {prefix:?}"
        );
        // libtest prints "test process::child_entry ... " without a newline before the test's
        // own output.
        if let Some(i) = line.find(prefix) {
            return line[i + prefix.len()..].trim_end().to_string();
        }
    }
}

fn unique(name: &str) -> String {
    format!("test-{}-{name}", std::process::id())
}

fn shared_producer(name: &str, capacity: usize) -> Producer {
    let mut cfg = RingConfig::with_capacity(capacity);
    cfg.dead_after = Duration::from_secs(1);
    let mut p = Producer::create_shared(name, &cfg).unwrap();
    p.set_interfaces(&interfaces()).unwrap();
    p
}

#[test]
fn listener_in_a_second_process_reads_everything() {
    let name = unique("copy");
    let mut p = shared_producer(&name, 1 << 20);
    let ring = p.ring();
    assert_eq!(ring.path().unwrap(), SharedRing::path(&name).unwrap());
    let mut child = spawn_child("read", &name);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    expect_line(&mut out, "RING-CHILD ready");
    assert!(ring.listeners().iter().any(|l| l.pid == child.id()));
    let n = 300_000;
    push_range(&mut p, 0, n, 64);
    p.close();
    let mut buf = Vec::new();
    let mut sum = 0u64;
    for seq in 0..n {
        record(seq, &mut buf);
        sum = buf
            .iter()
            .fold(sum, |s, &b| s.wrapping_mul(31).wrapping_add(b as u64));
    }
    let done = expect_line(&mut out, "RING-CHILD done ");
    assert_eq!(done, format!("{n} {sum} {n} 0"));
    assert!(child.wait().unwrap().success());
    drop(p);
    assert!(
        !SharedRing::path(&name).unwrap().exists(),
        "the producer removes its file"
    );
}

#[test]
fn dead_listener_process_is_reclaimed() {
    let name = unique("dead");
    let mut p = shared_producer(&name, 1 << 16);
    let ring = p.ring();
    let mut alive = ring.listen(Mode::Lossless).unwrap();
    let mut child = spawn_child("hold", &name);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    expect_line(&mut out, "RING-CHILD ready");
    assert_eq!(ring.listeners().len(), 2);
    child.kill().unwrap();
    // Not reaped yet: the child is a zombie while the producer runs into it.
    let t0 = Instant::now();
    let reader = std::thread::spawn(move || {
        let mut next = 0;
        alive
            .for_each(|rec| {
                assert_eq!(seq_of(&rec), next);
                next += 1;
                ControlFlow::Continue(())
            })
            .unwrap()
    });
    // Three rings' worth: the dead lossless listener blocks the producer until it is reclaimed.
    let n = 2_000;
    push_range(&mut p, 0, n, 16);
    let took = t0.elapsed();
    p.close();
    assert_eq!(reader.join().unwrap(), n);
    let st = p.stats();
    assert_eq!(st.listeners_reclaimed, 1);
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_secs(10),
        "{took:?}"
    );
    assert_eq!(ring.listeners().len(), 0);
    child.wait().unwrap();
}

#[test]
fn shared_ring_names_and_errors() {
    assert!(matches!(
        SharedRing::path("a/b"),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        SharedRing::path(""),
        Err(Error::InvalidName { .. })
    ));
    assert!(matches!(
        SharedRing::path(".."),
        Err(Error::InvalidName { .. })
    ));
    let name = unique("errors");
    assert!(matches!(
        SharedRing::attach(&name, Mode::Lossy),
        Err(Error::Io { .. })
    ));
    // A file that is not a ring is refused by clients and replaced by a producer.
    let path = SharedRing::path(&name).unwrap();
    std::fs::write(&path, vec![7u8; 20_000]).unwrap();
    assert!(matches!(
        SharedRing::open(&name),
        Err(Error::NotARing { .. })
    ));
    let mut p = shared_producer(&name, 1 << 16);
    // A running producer keeps its name.
    assert!(matches!(
        Producer::create_shared(&name, &RingConfig::with_capacity(1 << 16)),
        Err(Error::InUse { .. })
    ));
    let mut l = SharedRing::attach(&name, Mode::Lossy).unwrap();
    push_range(&mut p, 0, 10, 10);
    let Recv::Ready(rec) = l.next().unwrap() else {
        panic!()
    };
    check(&rec, 0);
    drop(p);
    assert!(!path.exists());
    // The mapping outlives the name: the listener drains, then sees the end.
    let mut n = 1;
    while let Recv::Ready(_) = l.next().unwrap() {
        n += 1;
    }
    assert_eq!(n, 10);
    assert!(matches!(l.next().unwrap(), Recv::Closed));
}

#[test]
fn producer_process_dies() {
    let name = unique("orphan");
    let mut child = spawn_child("produce", &name);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    expect_line(&mut out, "RING-CHILD ready");
    let mut l = SharedRing::attach(&name, Mode::Lossless).unwrap();
    assert_eq!(SharedRing::open(&name).unwrap().producer_pid(), child.id());
    writeln!(child.stdin.take().unwrap(), "go").unwrap();
    expect_line(&mut out, "RING-CHILD pushed");
    child.kill().unwrap();
    child.wait().unwrap();
    // What was published is still read; then the listener learns the producer is gone.
    for seq in 0..10 {
        let Recv::Ready(rec) = l.wait(Duration::from_secs(5)).unwrap() else {
            panic!("record {seq}")
        };
        check(&rec, seq);
    }
    let t0 = Instant::now();
    match l.wait(Duration::from_secs(10)) {
        Err(Error::ProducerGone { pid }) => assert_eq!(pid, child.id()),
        other => panic!("{other:?}"),
    }
    assert!(t0.elapsed() < Duration::from_secs(3));
    drop(l);
    // The dead producer's file is replaced by the next producer of that name.
    let p = shared_producer(&name, 1 << 16);
    assert_eq!(p.ring().producer_pid(), std::process::id());
}
