//! Fuzzes the DNS analyser: any bytes as a UDP message, and the same bytes as a TCP stream cut
//! at a point the first byte chooses, through the framer and a small joiner, every record
//! rendered as a log line shows it. It must not panic;
//! sections never hold more entries than the header states, and rendered names stay within
//! the 255-byte wire bound (4 text bytes per wire byte at most, `\DDD`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_app::dns::{self, Joiner, TcpFramer};

fuzz_target!(|data: &[u8]| {
    let mut joiner = Joiner::new(4);
    let check = |bytes: &[u8], ts: u64, joiner: &mut Joiner<u8>| {
        let parsed = dns::parse(bytes);
        joiner.stats.count(&parsed);
        let Ok(m) = parsed else { return };
        assert!(m.questions.len() <= usize::from(m.counts[0]));
        assert!(m.answers.len() <= usize::from(m.counts[1]));
        assert!(m.authority.len() <= usize::from(m.counts[2]));
        assert!(m.additional.len() <= usize::from(m.counts[3]));
        let names = m.questions.iter().map(|q| &q.name).chain(m.records().map(|(_, r)| &r.name));
        assert!(names.into_iter().all(|n| n.len() <= 4 * 255));
        // The log line's rendering of every record (dns_log's `answers`) must not panic.
        for (_, r) in m.records() {
            let _ = r.data_text();
        }
        joiner.push(bytes.first().copied().unwrap_or(0) & 3, ts, m, |_| {});
        assert!(joiner.len() <= 4);
    };
    check(data, 0, &mut joiner);
    let cut = usize::from(data.first().copied().unwrap_or(0)).min(data.len());
    let mut framer = TcpFramer::new();
    let mut messages = Vec::new();
    framer.push(&data[..cut], |m| messages.push(m.to_vec()));
    framer.push(&data[cut..], |m| messages.push(m.to_vec()));
    assert!(framer.pending() <= 65_537);
    for (i, m) in messages.iter().enumerate() {
        check(m, i as u64, &mut joiner);
    }
    joiner.finish(|_| {});
    assert!(joiner.is_empty());
});
