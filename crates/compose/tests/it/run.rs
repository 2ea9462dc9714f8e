//! Running compositions: deliveries, queues, fan-out and fan-in, finish order, timers, stop,
//! failures and panics.
use std::time::{Duration, Instant};

use crate::{cpus, registry, seen_by};

fn run(text: &str) -> trawl_compose::Report {
    let plan = trawl_compose::plan(text, "test", &registry(), &cpus()).expect("valid");
    trawl_compose::start(plan)
        .expect("starts")
        .wait()
        .map_err(|(e, _)| e)
        .expect("runs")
}

fn sum(n: u64) -> u64 {
    n * (n - 1) / 2
}

#[test]
fn a_chain_on_one_thread_delivers_everything_in_order_by_direct_calls() {
    let report = run(r#"
        [[block]]
        name = "src"
        type = "numbers"
        count = 10000
        batch = 7
        [[block]]
        name = "x3"
        type = "scale"
        factor = 3
        [[block]]
        name = "chain_sink"
        type = "sink"
        [[connection]]
        from = "src.out"
        to = "x3.in"
        [[connection]]
        from = "x3.out"
        to = "chain_sink.in"
    "#);
    let s = seen_by("chain_sink");
    assert!(s.finished);
    assert_eq!(s.numbers, (0..10000).map(|n| n * 3).collect::<Vec<u64>>());
    assert!(report.connections.iter().all(|c| !c.queued));
    let src = report.block("src").unwrap();
    assert_eq!(src.items_out, 10000);
    assert_eq!(src.msgs_out, 10000u64.div_ceil(7));
    assert!(
        src.counter("allocated").unwrap() <= 2,
        "direct calls return every payload before the next is taken: {:?}",
        src.counters
    );
    let x3 = report.block("x3").unwrap();
    assert_eq!((x3.msgs_in, x3.items_in), (src.msgs_out, 10000));
    assert!(report.blocks.iter().all(|b| b.finished && b.errors == 0));
}

#[test]
fn queues_between_pinned_threads_lose_nothing_when_the_sender_waits() {
    let cpus = cpus();
    let (a, b) = (cpus[0], *cpus.last().unwrap());
    let report = run(&format!(
        r#"
        [[pool]]
        name = "capture"
        cores = [{a}]
        [[pool]]
        name = "apps"
        cores = [{b}]
        [[block]]
        name = "src"
        type = "numbers"
        pool = "capture"
        count = 200000
        batch = 3
        [[block]]
        name = "queued_sink"
        type = "sink"
        pool = "apps"
        [[connection]]
        from = "src.out"
        to = "queued_sink.in"
        capacity = 4
    "#
    ));
    let s = seen_by("queued_sink");
    assert_eq!(s.numbers.len(), 200000);
    assert!(s.numbers.windows(2).all(|w| w[0] + 1 == w[1]), "order kept");
    let q = &report.connections[0];
    assert!(q.queued);
    assert_eq!(
        (q.pushed, q.dropped, q.occupancy),
        (200000u64.div_ceil(3), 0, 0)
    );
    assert!(q.peak <= 4);
    // The pool holds at most what can be in flight: the queue, the receiver's message and
    // the one being filled.
    let allocated = report.block("src").unwrap().counter("allocated").unwrap();
    assert!(allocated <= 4 + 2 + 1, "allocated {allocated}");
}

#[test]
fn a_full_queue_with_policy_drop_drops_and_counts_instead_of_waiting() {
    let report = run(r#"
        [[pool]]
        name = "fast"
        [[pool]]
        name = "slow"
        [[block]]
        name = "src"
        type = "numbers"
        pool = "fast"
        count = 20000
        batch = 10
        [[block]]
        name = "slow_sink"
        type = "sink"
        pool = "slow"
        delay_us = 200
        [[connection]]
        from = "src.out"
        to = "slow_sink.in"
        capacity = 2
        policy = "drop"
    "#);
    let s = seen_by("slow_sink");
    let q = &report.connections[0];
    assert!(q.dropped > 0, "a 200 µs sink keeps up with nothing");
    assert_eq!(q.pushed + q.dropped, 2000);
    assert_eq!(s.numbers.len() as u64, q.pushed * 10);
    assert_eq!(report.block("slow_sink").unwrap().msgs_in, q.pushed);
}

#[test]
fn fan_out_shares_one_payload_and_fan_in_finishes_after_every_sender() {
    let report = run(r#"
        [[pool]]
        name = "a"
        [[pool]]
        name = "b"
        [[pool]]
        name = "c"
        [[block]]
        name = "low"
        type = "numbers"
        pool = "a"
        count = 5000
        [[block]]
        name = "high"
        type = "numbers"
        pool = "b"
        count = 5000
        start = 5000
        [[block]]
        name = "both"
        type = "sink"
        pool = "c"
        [[block]]
        name = "twin1"
        type = "sink"
        pool = "a"
        [[block]]
        name = "twin2"
        type = "sink"
        pool = "a"
        [[connection]]
        from = "low.out"
        to = ["both.in", "twin1.in", "twin2.in"]
        [[connection]]
        from = "high.out"
        to = "both.in"
    "#);
    let mut both = seen_by("both").numbers;
    both.sort_unstable();
    assert_eq!(both, (0..10000).collect::<Vec<u64>>());
    for twin in ["twin1", "twin2"] {
        let s = seen_by(twin);
        assert_eq!(s.numbers, (0..5000).collect::<Vec<u64>>());
        assert!(
            s.min_holders >= 2,
            "{twin} saw a message only it held: fan-out copied ({})",
            s.min_holders
        );
    }
    let low = report.block("low").unwrap();
    assert_eq!(
        low.items_out, 5000,
        "counted once per message, not per receiver"
    );
}

#[test]
fn messages_emitted_at_finish_reach_blocks_downstream_before_they_finish() {
    run(r#"
        [[pool]]
        name = "one"
        [[pool]]
        name = "two"
        [[block]]
        name = "src"
        type = "numbers"
        pool = "one"
        count = 1000
        [[block]]
        name = "x2"
        type = "scale"
        pool = "one"
        factor = 2
        [[block]]
        name = "totals"
        type = "sink"
        pool = "two"
        [[block]]
        name = "totals_direct"
        type = "sink"
        pool = "one"
        [[connection]]
        from = "src.out"
        to = "x2.in"
        [[connection]]
        from = "x2.total"
        to = ["totals.in", "totals_direct.in"]
    "#);
    assert_eq!(seen_by("totals").numbers, vec![2 * sum(1000)]);
    assert_eq!(seen_by("totals_direct").numbers, vec![2 * sum(1000)]);
}

#[test]
fn stop_ends_an_endless_source_and_every_block_finishes() {
    let text = r#"
        [[pool]]
        name = "p"
        threads = 2
        [[block]]
        name = "forever"
        type = "numbers"
        pool = "p"
        [[block]]
        name = "tick"
        type = "ticker"
        pool = "p"
        thread = 1
        period_ms = 5
        [[block]]
        name = "endless_sink"
        type = "sink"
        pool = "p"
        thread = 1
        [[connection]]
        from = "forever.out"
        to = ["endless_sink.in", "tick.in"]
    "#;
    let plan = trawl_compose::plan(text, "test", &registry(), &cpus()).unwrap();
    let running = trawl_compose::start(plan).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let live = running.report();
    assert!(!running.is_finished());
    assert!(live.block("forever").unwrap().items_out > 0);
    running.stop();
    let t0 = Instant::now();
    let report = running.wait().map_err(|(e, _)| e).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert!(report.blocks.iter().all(|b| b.finished));
    let sent = report.block("forever").unwrap().items_out;
    assert_eq!(seen_by("endless_sink").numbers.len() as u64, sent);
    let ticks = report.block("tick").unwrap().counter("ticks").unwrap();
    assert!(ticks >= 5, "a 5 ms timer over 100+ ms ticked {ticks} times");
}

#[test]
fn a_failing_block_stops_the_run_and_names_itself() {
    let text = r#"
        [[block]]
        name = "forever"
        type = "numbers"
        [[block]]
        name = "fragile"
        type = "scale"
        fail_at = 500
        [[connection]]
        from = "forever.out"
        to = "fragile.in"
    "#;
    let plan = trawl_compose::plan(text, "test", &registry(), &cpus()).unwrap();
    let (err, report) = trawl_compose::start(plan).unwrap().wait().unwrap_err();
    assert_eq!(err, "block `fragile`: cannot go on at 500");
    assert!(report.blocks.iter().all(|b| b.finished));
}

#[test]
fn a_panicking_block_fails_the_run_without_hanging_the_threads_after_it() {
    let text = r#"
        [[pool]]
        name = "a"
        [[pool]]
        name = "b"
        [[block]]
        name = "forever"
        type = "numbers"
        pool = "a"
        [[block]]
        name = "bomb"
        type = "scale"
        pool = "a"
        panic_at = 777
        [[block]]
        name = "after_bomb"
        type = "sink"
        pool = "b"
        [[connection]]
        from = "forever.out"
        to = "bomb.in"
        [[connection]]
        from = "bomb.out"
        to = "after_bomb.in"
    "#;
    let plan = trawl_compose::plan(text, "test", &registry(), &cpus()).unwrap();
    let (err, _) = trawl_compose::start(plan).unwrap().wait().unwrap_err();
    assert_eq!(err, "block `bomb` panicked: boom at 777");
    let s = seen_by("after_bomb");
    assert!(s.finished, "the block after the panic finished");
    assert_eq!(s.numbers, (0..770).collect::<Vec<u64>>());
}

#[test]
fn busy_time_and_calls_are_counted() {
    let report = run(r#"
        [[block]]
        name = "src"
        type = "numbers"
        count = 1000
        [[block]]
        name = "slowish"
        type = "sink"
        delay_us = 100
        [[connection]]
        from = "src.out"
        to = "slowish.in"
    "#);
    let b = report.block("slowish").unwrap();
    assert_eq!(b.calls, 1 + 100 + 1, "start, 100 messages and the finish");
    assert!(b.busy_ns >= 100 * 100_000, "busy {} ns", b.busy_ns);
    let table = report.table();
    assert!(table.contains("slowish"), "{table}");
}

#[test]
fn time_blocks_false_counts_calls_but_not_time() {
    let report = run(r#"
        [runtime]
        time_blocks = false
        [[block]]
        name = "src"
        type = "numbers"
        count = 1000
        [[block]]
        name = "untimed"
        type = "sink"
        delay_us = 10
        [[connection]]
        from = "src.out"
        to = "untimed.in"
    "#);
    let b = report.block("untimed").unwrap();
    assert_eq!((b.calls, b.busy_ns), (102, 0));
    assert_eq!(seen_by("untimed").numbers.len(), 1000);
}

#[test]
fn pool_threads_are_pinned_to_their_cores() {
    let cpus = cpus();
    let last = *cpus.last().unwrap();
    run(&format!(
        r#"
        [[pool]]
        name = "first"
        cores = [{first}]
        [[pool]]
        name = "last"
        cores = [{last}]
        [[pool]]
        name = "free"
        threads = 1
        [[block]]
        name = "on_first"
        type = "where"
        pool = "first"
        [[block]]
        name = "on_last"
        type = "where"
        pool = "last"
        [[block]]
        name = "unpinned"
        type = "where"
        pool = "free"
        "#,
        first = cpus[0]
    ));
    let a = crate::affinity().lock().unwrap().clone();
    assert_eq!(a["on_first"], cpus[0].to_string());
    assert_eq!(a["on_last"], last.to_string());
    if cpus.len() > 1 {
        assert!(
            a["unpinned"].contains('-') || a["unpinned"].contains(','),
            "{a:?}"
        );
    }
}

/// `[runtime] count` is one budget for every source: two unbounded sources on two threads
/// send exactly `count` numbers between them, and the run then stops by itself.
#[test]
fn issue_19_runtime_count_is_exact_across_sources() {
    let text = r#"
        [runtime]
        count = 100003
        [[pool]]
        name = "p"
        threads = 2
        [[block]]
        name = "a"
        type = "numbers"
        batch = 64
        thread = 0
        [[block]]
        name = "b"
        type = "numbers"
        batch = 100
        start = 1000000000
        thread = 1
        [[block]]
        name = "budget_sink"
        type = "sink"
        [[connection]]
        from = "a.out"
        to = "budget_sink.in"
        [[connection]]
        from = "b.out"
        to = "budget_sink.in"
    "#;
    let plan = trawl_compose::plan(text, "test", &registry(), &cpus()).expect("valid");
    assert_eq!(plan.control.count, Some(100_003));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let report = trawl_compose::start(plan)
        .expect("starts")
        .supervise(&stop, |_| {})
        .map_err(|(e, _)| e)
        .expect("runs");
    assert_eq!(seen_by("budget_sink").numbers.len(), 100_003);
    let sent: u64 = report.blocks[..2].iter().map(|b| b.items_out).sum();
    assert_eq!(sent, 100_003);
}

/// `[runtime] duration` stops a run whose sources never end; `stats_interval` calls the
/// status callback while it runs.
#[test]
fn issue_19_runtime_duration_stops_and_stats_interval_reports() {
    let text = r#"
        [runtime]
        duration = "600ms"
        stats_interval = "100ms"
        [[block]]
        name = "src"
        type = "numbers"
        [[block]]
        name = "timed_sink"
        type = "sink"
        [[connection]]
        from = "src.out"
        to = "timed_sink.in"
    "#;
    let plan = trawl_compose::plan(text, "test", &registry(), &cpus()).expect("valid");
    let stop = std::sync::atomic::AtomicBool::new(false);
    let started = Instant::now();
    let mut statuses = Vec::new();
    let report = trawl_compose::start(plan)
        .expect("starts")
        .supervise(&stop, |r| statuses.push(r.status_line()))
        .map_err(|(e, _)| e)
        .expect("runs");
    let took = started.elapsed();
    assert!(
        took >= Duration::from_millis(600) && took < Duration::from_secs(5),
        "{took:?}"
    );
    assert!(statuses.len() >= 3, "{statuses:?}");
    assert!(
        statuses.iter().all(|s| s.contains(" kernel drops")),
        "{statuses:?}"
    );
    assert!(report.blocks[0].items_out > 0);
}

#[test]
fn a_blocks_error_messages_are_the_first_errors_of_its_messages() {
    // The report keeps what a block said once (`messages`, every kind); `error_messages` is
    // the first `ERRORS_KEPT` errors of it, not a second store that could disagree.
    let report = run(r#"
        [[block]]
        name = "moaner"
        type = "complainer"
        count = 600
    "#);
    let b = report.block("moaner").unwrap();
    assert_eq!(b.errors, 600);
    assert_eq!(b.messages.len(), 1000, "the first thousand kept");
    let errors: Vec<String> = b
        .messages
        .iter()
        .filter(|m| m.kind == trawl_compose::MessageKind::Error)
        .map(|m| m.text.clone())
        .collect();
    assert_eq!(errors.len(), 500);
    assert_eq!(b.error_messages, errors[..trawl_compose::ERRORS_KEPT]);
}

#[test]
fn a_block_reads_the_counters_of_the_whole_composition_through_its_reporter() {
    run(r#"
        [[pool]]
        name = "a"
        threads = 2
        [[block]]
        name = "src"
        type = "numbers"
        count = 1000
        batch = 10
        pool = "a"
        thread = 0
        [[block]]
        name = "obs"
        type = "observer"
        watch = "src"
        pool = "a"
        thread = 1
        [[connection]]
        from = "src.out"
        to = "obs.in"
    "#);
    // The observer (another thread) saw the source's counters at its finish: every item.
    assert_eq!(seen_by("obs").numbers, [1000]);
}
