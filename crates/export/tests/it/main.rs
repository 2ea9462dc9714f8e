//! Integration tests of trawl-export: encoder ↔ decoder round trips on metered captures,
//! malformed and hostile input, sequence numbers and template refresh, bounded queues.
mod decoder;
mod exporter;
#[cfg(feature = "kafka")]
mod kafka;
mod sflow;

use std::path::Path;

use trawl_capture::{FileSource, PacketSource};
use trawl_flow::{FlowConfig, FlowMeter, FlowRecord};

/// Every record of a capture, payload-free (what exporters carry).
pub fn meter(path: &Path) -> Vec<FlowRecord<'static>> {
    let mut source = FileSource::open(path).unwrap();
    let mut meter = FlowMeter::new(FlowConfig {
        capacity: 1 << 16,
        ..FlowConfig::default()
    });
    let mut out = Vec::new();
    let mut sink = |r: &FlowRecord<'_>| {
        out.push(FlowRecord {
            fwd_payload: &[],
            rev_payload: &[],
            ..*r
        })
    };
    while let Some(b) = source.next_batch().unwrap() {
        for p in b.iter() {
            meter.process(&p, &mut sink);
        }
    }
    meter.flush(&mut sink);
    out
}

/// The sample every test exports: IPv4 and IPv6, TCP, UDP, ICMP.
pub fn sample() -> Vec<FlowRecord<'static>> {
    meter(&trawl_testkit::testdata("oracle/1kxun.pcap.gz"))
}
