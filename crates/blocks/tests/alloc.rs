//! A composition allocates nothing per message once warm: reading the same capture ten times
//! in 16-packet batches (about 6,000 messages through a meter, fanned out to two sinks, one
//! across a queue) allocates no more per extra file than opening a file costs.
#[global_allocator]
static ALLOC: trawl_testkit::alloc::CountingAllocator = trawl_testkit::alloc::CountingAllocator;

fn allocations_of(copies: usize) -> (u64, u64) {
    let file = trawl_testkit::testdata("oracle/many-protocols.pcap.gz");
    let files: Vec<String> = (0..copies)
        .map(|_| format!("\"{}\"", file.display()))
        .collect();
    let text = format!(
        r#"
        [[pool]]
        name = "a"
        [[pool]]
        name = "b"
        [[block]]
        name = "src"
        type = "pcap_source"
        pool = "a"
        batch = 16
        files = [{}]
        [[block]]
        name = "meter"
        type = "flow_meter"
        pool = "a"
        capacity = 65536
        [[block]]
        name = "near"
        type = "count"
        pool = "a"
        [[block]]
        name = "far"
        type = "count"
        pool = "b"
        # A short queue to the other thread: the source's pool holds at most the messages in
        # flight, so how far the other thread lags (which varies with the machine's load)
        # cannot make the pool grow during the longer run and count as per-file allocations.
        [[connection]]
        from = "src.packets"
        to = ["meter.packets", "far.in"]
        capacity = 8
        [[connection]]
        from = "meter.flows"
        to = "near.in"
        "#,
        files.join(", ")
    );
    let plan = trawl_compose::plan(&text, "alloc", &trawl_blocks::registry(), &[0, 1]).unwrap();
    let before = trawl_testkit::alloc::allocations();
    let report = trawl_compose::start(plan)
        .unwrap()
        .wait()
        .map_err(|(e, _)| e)
        .unwrap();
    let used = trawl_testkit::alloc::allocations() - before;
    (used, report.block("src").unwrap().msgs_out)
}

#[test]
fn messages_cost_no_allocation_once_warm() {
    let (one, one_msgs) = allocations_of(1);
    let (ten, ten_msgs) = allocations_of(10);
    assert!(one_msgs > 250, "{one_msgs} messages from one file");
    let per_file = (ten - one) / 9;
    let msgs_per_file = (ten_msgs - one_msgs) / 9;
    eprintln!(
        "allocations: one file {one}, per extra file {per_file}, messages per file {msgs_per_file}"
    );
    // Opening a file (decompressor, read buffer, interface table, filter-free source state)
    // costs a few dozen allocations; one per message would be hundreds more.
    assert!(
        per_file < msgs_per_file / 4,
        "{per_file} allocations per extra file of {msgs_per_file} messages (one file: {one})"
    );
}
