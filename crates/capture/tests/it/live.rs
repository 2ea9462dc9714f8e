//! Leases of live capture ring blocks (`LiveSource::next_lent_batch`) on a real veth pair, with
//! tcpreplay sending a committed capture slowly from a network namespace while the test holds
//! leases: blocks go back to the kernel in ring order and only once their leases have ended,
//! past half of the ring held nothing more is lent, and every packet arrives intact either way.
use std::time::{Duration, Instant};

use trawl_capture::live::{BlockLease, LiveConfig, LiveSource};
use trawl_capture::{FileSource, PacketSource, RecordMeta};
use trawl_testkit::netns::{lab_available, VethLab};

use crate::pcap;

/// Packets replayed per test, at [`RATE`]: slow enough that the kernel retires a block for
/// every packet or two (10 ms block timeout), so a handful of packets fill several blocks.
const PACKETS: usize = 40;
const RATE: &str = "--pps=100";

fn lab() -> VethLab {
    if let Err(e) = lab_available() {
        panic!("live capture tests need a lab: {e}");
    }
    VethLab::new(9000).unwrap_or_else(|e| panic!("cannot make a veth lab: {e}"))
}

/// A ring of `blocks` blocks of one page.
fn small_ring(iface: &str, blocks: usize) -> LiveConfig {
    let mut c = LiveConfig::new(iface);
    c.block_size = 4096;
    c.block_count = blocks;
    c.poll_timeout = Duration::from_millis(50);
    c
}

/// The first [`PACKETS`] packets of android.pcap.
fn sent() -> Vec<Vec<u8>> {
    let mut src = FileSource::open(pcap("android.pcap")).expect("open capture");
    let mut v = Vec::new();
    while let Some(b) = src.next_batch().expect("read capture") {
        v.extend(b.iter().map(|p| p.data.to_vec()));
    }
    v.truncate(PACKETS);
    v
}

/// Replays the packets of [`sent`] into the lab's host end, slowly, on another thread, while
/// `read` runs; returns what `read` returned.
fn while_replaying<T>(lab: &VethLab, read: impl FnOnce() -> T) -> T {
    std::thread::scope(|s| {
        let replay = s.spawn(|| {
            let limit = format!("--limit={PACKETS}");
            lab.replay_into_host(&pcap("android.pcap"), &[RATE, &limit])
                .expect("tcpreplay")
        });
        let got = read();
        assert_eq!(replay.join().expect("replay thread") as usize, PACKETS);
        got
    })
}

/// The next batch with packets: their bytes, their records, and the lease if the block was
/// lent.
fn next_packets(src: &mut LiveSource) -> (Vec<Vec<u8>>, Vec<RecordMeta>, Option<BlockLease>) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let (batch, lease) = src.next_lent_batch().expect("capture");
        if !batch.is_empty() {
            let packets = batch.iter().map(|p| p.data.to_vec()).collect();
            return (packets, batch.metas().to_vec(), lease);
        }
    }
    panic!("no packets for 10 s");
}

/// Reads on until `got` holds `want` packets (or 10 s passed), dropping leases at once.
fn read_rest(src: &mut LiveSource, got: &mut Vec<Vec<u8>>, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while got.len() < want && Instant::now() < deadline {
        let (batch, _lease) = src.next_lent_batch().expect("capture");
        got.extend(batch.iter().map(|p| p.data.to_vec()));
    }
}

#[test]
fn lent_blocks_go_back_to_the_kernel_in_ring_order_once_their_leases_end() {
    let lab = lab();
    let mut src = LiveSource::open(small_ring(&lab.host, 8)).expect("open capture");
    let got = while_replaying(&lab, || {
        let mut got = Vec::new();
        let mut leases = Vec::new();
        for _ in 0..3 {
            let (packets, _, lease) = next_packets(&mut src);
            got.extend(packets);
            leases.push(lease.expect("a block is lent while most of the ring is free"));
        }
        assert_eq!(src.blocks_held(), 3, "each lent block stays held");
        // The two newer leases end first: their blocks must wait behind the oldest one (the
        // kernel fills blocks in ring order).
        let oldest = leases.remove(0);
        leases.clear();
        let (packets, _, fourth) = next_packets(&mut src);
        got.extend(packets);
        assert_eq!(
            src.blocks_held(),
            4,
            "blocks went back to the kernel past a block still lent"
        );
        drop((oldest, fourth));
        // Every lease has ended: the next call gives all four back before it reads on.
        let (batch, _) = src.next_lent_batch().expect("capture");
        let n = batch.len();
        got.extend(batch.iter().map(|p| p.data.to_vec()));
        assert!(src.blocks_held() <= 1, "held {} blocks", src.blocks_held());
        assert!(n > 0 || src.blocks_held() == 0);
        read_rest(&mut src, &mut got, PACKETS);
        got
    });
    assert!(got == sent(), "captured packets differ from the file's");
    src.refresh_kernel_stats();
    let live = src.live_stats();
    assert_eq!(live.kernel_drops, 0, "{live:?}");
    assert_eq!(live.blocks_copied, 0, "{live:?}");
}

#[test]
fn past_half_the_ring_held_blocks_are_not_lent_and_their_packets_arrive_anyway() {
    let lab = lab();
    // Four blocks: at most two held when a block is lent.
    let mut src = LiveSource::open(small_ring(&lab.host, 4)).expect("open capture");
    let got = while_replaying(&lab, || {
        let mut got = Vec::new();
        let (first, _, a) = next_packets(&mut src);
        let (second, _, b) = next_packets(&mut src);
        assert!(a.is_some() && b.is_some(), "the first two blocks are lent");
        // The lease's bytes are the packets the batch had, later batches notwithstanding.
        let (third, _, c) = next_packets(&mut src);
        assert!(
            c.is_none(),
            "a third block was lent with two leases out of four blocks"
        );
        assert_eq!(src.live_stats().blocks_copied, 1);
        assert_eq!(src.blocks_held(), 3);
        got.extend(first);
        got.extend(second);
        got.extend(third);
        drop((a, b));
        // Leases ended: blocks are lent again.
        let (fourth, _, d) = next_packets(&mut src);
        assert!(d.is_some(), "no block lent after the leases ended");
        assert!(src.blocks_held() <= 1, "held {} blocks", src.blocks_held());
        got.extend(fourth);
        drop(d);
        read_rest(&mut src, &mut got, PACKETS);
        got
    });
    assert!(got == sent(), "captured packets differ from the file's");
    src.refresh_kernel_stats();
    let live = src.live_stats();
    assert_eq!(live.kernel_drops, 0, "{live:?}");
    assert_eq!(live.blocks_copied, 1, "{live:?}");
    assert!(live.blocks_lent >= 3, "{live:?}");
}

#[test]
fn a_lease_keeps_its_packets_while_the_capture_reads_on() {
    let lab = lab();
    let mut src = LiveSource::open(small_ring(&lab.host, 16)).expect("open capture");
    let got = while_replaying(&lab, || {
        // The first block's lease goes to another thread, which reads the packets through it
        // only after the capture has read on (and given back what it could) for a while.
        let (packets, metas, lease) = next_packets(&mut src);
        let lease = lease.expect("lent");
        let reader = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            metas
                .iter()
                .map(|m| lease.bytes()[m.offset..m.offset + m.caplen as usize].to_vec())
                .collect::<Vec<_>>()
        });
        let mut rest = Vec::new();
        read_rest(&mut src, &mut rest, PACKETS - packets.len());
        let mut got = reader.join().expect("reader thread");
        assert!(got == packets, "the lease's bytes changed under it");
        got.extend(rest);
        got
    });
    assert!(got == sent(), "captured packets differ from the file's");
    src.refresh_kernel_stats();
    assert_eq!(src.live_stats().kernel_drops, 0);
}
