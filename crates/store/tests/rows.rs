//! Flow database rows for the store's test binaries (`it` and `heap`), shared by path.
use std::net::IpAddr;

use trawl_flow::EndReason;
use trawl_store::StoredFlow;

/// 2025-11-16T00:00:00Z.
pub const DAY0: u64 = 1_763_251_200 * 1_000_000_000;

/// Row `i` of a test, first seen at `t`: TCP and UDP to three services, from addresses and
/// ports that `i` sets apart.
pub fn row(i: u64, t: u64) -> StoredFlow {
    StoredFlow {
        src_ip: IpAddr::from([10, 0, (i >> 8) as u8, i as u8]),
        dst_ip: IpAddr::from([192, 0, 2, (i % 7) as u8]),
        src_port: 40_000 + (i % 1000) as u16,
        dst_port: [443, 80, 53][(i % 3) as usize],
        proto: if i % 3 == 2 { 17 } else { 6 },
        vlan: 0,
        first_ns: t,
        last_ns: t + 1_000,
        fwd_packets: 1 + i % 10,
        rev_packets: i % 5,
        fwd_bytes: 100 + i,
        rev_bytes: 50 * (i % 5),
        fwd_ip_bytes: 80 + i,
        rev_ip_bytes: 40 * (i % 5),
        fwd_tcp_flags: 0x12,
        rev_tcp_flags: 0x10,
        end_reason: EndReason::Fin,
        app: None,
        extra: Default::default(),
    }
}
