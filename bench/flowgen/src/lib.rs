//! The synthetic traffic of `flowgen` (the query benchmark's database, `bench/query.sh`), as
//! a library so that tests can build the same kind of database: an enterprise edge's flows —
//! a few thousand internal hosts in 10.0.0.0/12 (a few percent IPv6) talking to tens of
//! thousands of external servers whose popularity follows a power law; destination ports
//! drawn from a skewed list of services plus random high ports; ephemeral source ports;
//! TCP/UDP/ICMP about 80/18/2; heavy-tailed byte counts; a diurnal curve over the days.
//! Deterministic for a seed.
//!
//! ```
//! let w = trawl_flowgen::world(1);
//! let mut r = trawl_flowgen::Rng(7);
//! let row = trawl_flowgen::row(&mut r, &w, trawl_flowgen::START_NS);
//! assert!(row.first_ns >= trawl_flowgen::START_NS);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use trawl_flow::EndReason;
use trawl_store::{StoredFlow, BLOCK_NS};

/// 2025-11-16T00:00:00Z: the first day.
pub const START_NS: u64 = 1_763_251_200 * 1_000_000_000;

/// A splitmix64 generator.
pub struct Rng(pub u64);

impl Rng {
    #[inline]
    /// The next 64 random bits.
    #[allow(clippy::should_implement_trait)] // An endless generator, not an iterator.
    pub fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    #[inline]
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Index in 0..n, skewed towards 0 (power law: P(i) falls off like a Zipf with s ≈ 1).
    #[inline]
    pub fn skewed(&mut self, n: usize, power: f64) -> usize {
        ((n as f64) * self.unit().powf(power)) as usize % n.max(1)
    }
}

/// Relative traffic of a block by time of day: low at night, peaks in the working day.
pub fn diurnal(block_start: u64) -> f64 {
    let hour = (block_start % 86_400_000_000_000) as f64 / 3_600_000_000_000.0;
    let x = ((hour - 14.0) / 24.0 * std::f64::consts::TAU).cos();
    0.6 + 0.4 * x
}

const SERVICES: [(u16, u8); 24] = [
    (443, 6),
    (80, 6),
    (53, 17),
    (443, 17),
    (123, 17),
    (22, 6),
    (993, 6),
    (8080, 6),
    (3478, 17),
    (5228, 6),
    (25, 6),
    (587, 6),
    (1194, 17),
    (3389, 6),
    (445, 6),
    (8443, 6),
    (5060, 17),
    (161, 17),
    (514, 17),
    (389, 6),
    (636, 6),
    (3306, 6),
    (5432, 6),
    (9000, 6),
];

/// The hosts: internal clients and external servers.
pub struct World {
    internal: Vec<IpAddr>,
    /// External servers by family (index 0: IPv4, 1: IPv6), most popular first.
    external: [Vec<IpAddr>; 2],
}

/// The hosts of a seed.
pub fn world(seed: u64) -> World {
    let mut r = Rng(seed ^ 0xA5A5);
    let mut internal = Vec::new();
    for i in 0..4000u32 {
        if i.is_multiple_of(25) {
            internal.push(IpAddr::V6(Ipv6Addr::new(
                0x2001,
                0xdb8,
                0x10,
                (i >> 8) as u16,
                0,
                0,
                0,
                (r.next() & 0xffff) as u16 | 1,
            )));
        } else {
            // 10.0.0.0/12, clustered in a few /16s like real subnets.
            let subnet = (r.skewed(16, 2.0)) as u32;
            internal.push(IpAddr::V4(Ipv4Addr::from(
                0x0A00_0000 | subnet << 16 | (r.next() as u32 & 0xffff).max(1),
            )));
        }
    }
    let mut external = [Vec::new(), Vec::new()];
    for i in 0..40_000u32 {
        if i.is_multiple_of(20) {
            external[1].push(IpAddr::V6(Ipv6Addr::new(
                0x2a00,
                (r.next() & 0xffff) as u16,
                (r.next() & 0xffff) as u16,
                0,
                0,
                0,
                0,
                (r.next() & 0xff) as u16 + 1,
            )));
        } else {
            let mut a = r.next() as u32;
            // Public-looking: avoid 0/8, 10/8, 127/8 and multicast.
            let first = (a >> 24).clamp(11, 223);
            a = (first << 24) | (a & 0x00ff_ffff);
            if first == 127 {
                a ^= 0x0100_0000;
            }
            external[0].push(IpAddr::V4(Ipv4Addr::from(a)));
        }
    }
    World { internal, external }
}

/// One flow row of the 5-minute block starting at `block` (ns).
pub fn row(r: &mut Rng, w: &World, block: u64) -> StoredFlow {
    let client = w.internal[r.skewed(w.internal.len(), 3.0)];
    let inbound = r.next() % 100 < 7;
    let (proto, dport): (u8, u16) = if r.next() % 100 < 12 {
        // Random high port (P2P, RTP, ...).
        (
            if r.next().is_multiple_of(2) { 6 } else { 17 },
            1024 + (r.next() % 64_000) as u16,
        )
    } else if r.next() % 100 < 2 {
        (1, 0)
    } else {
        let (port, proto) = SERVICES[r.skewed(SERVICES.len(), 2.2)];
        (proto, port)
    };
    let servers = &w.external[usize::from(client.is_ipv6())];
    let server = servers[r.skewed(servers.len(), 4.0)];
    let (src, dst) = if inbound {
        (server, client)
    } else {
        (client, server)
    };
    let sport = if proto == 1 {
        8
    } else {
        32_768 + (r.next() % 28_232) as u16
    };
    let dport = if proto == 1 { 0 } else { dport };
    // Heavy-tailed sizes: most flows are small, a few carry most bytes.
    let fwd_packets = 1 + (r.unit().powf(6.0) * 2_000.0) as u64;
    let rev_packets = if proto == 1 {
        fwd_packets
    } else {
        (fwd_packets as f64 * (0.5 + r.unit() * 2.0)) as u64
    };
    let fwd_bytes = fwd_packets * (60 + r.next() % 200);
    let rev_bytes = rev_packets * (60 + r.next() % 1_400);
    let first_ns = block + r.next() % BLOCK_NS;
    let last_ns = (first_ns + r.next() % 120_000_000_000).min(block + BLOCK_NS - 1);
    let end_reason = match r.next() % 10 {
        0..=4 => EndReason::Fin,
        5..=7 => EndReason::Idle,
        8 => EndReason::Rst,
        _ => EndReason::Active,
    };
    StoredFlow {
        src_ip: src,
        dst_ip: dst,
        src_port: sport,
        dst_port: dport,
        proto,
        vlan: 0,
        first_ns,
        last_ns,
        fwd_packets,
        rev_packets,
        fwd_bytes,
        rev_bytes,
        fwd_ip_bytes: fwd_bytes - 14 * fwd_packets,
        rev_ip_bytes: rev_bytes - 14 * rev_packets,
        fwd_tcp_flags: if proto == 6 { 0x1b } else { 0 },
        rev_tcp_flags: if proto == 6 { 0x1b } else { 0 },
        end_reason,
        app: None,
        extra: Default::default(),
    }
}
