//! NetFlow v5: fixed 48-byte unidirectional IPv4 records, at most 30 per packet. A biflow
//! becomes up to two v5 records (the reverse one only when the responder sent packets); IPv6
//! flows cannot be expressed and are counted as skipped.
use std::net::IpAddr;

use trawl_flow::FlowRecord;

/// Header length.
pub const HEADER_LEN: usize = 24;
/// Record length.
pub const RECORD_LEN: usize = 48;
/// Most records in one packet (Cisco's limit, which collectors check).
pub const MAX_RECORDS: usize = 30;

/// Counters of a v5 encoder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct V5Stats {
    /// Packets closed.
    pub messages: u64,
    /// v5 records written (a biflow gives one or two).
    pub records: u64,
    /// Flow records that could not be written (IPv6).
    pub skipped_ipv6: u64,
    /// Counters above 2^32-1 written as 2^32-1 (v5 counters are 32-bit).
    pub saturated: u64,
    /// Times before the virtual boot time, written as 0.
    pub clamped_times: u64,
}

/// Builds NetFlow v5 packets.
#[derive(Debug)]
pub struct V5Encoder {
    buf: Vec<u8>,
    count: usize,
    /// Flows sent before the open packet (the v5 sequence number).
    sequence: u32,
    engine_id: u8,
    boot_ms: Option<u64>,
    clock_ms: u64,
    stats: V5Stats,
}

impl V5Encoder {
    /// An encoder whose packets carry `engine_id` (trawl uses the low byte of the observation
    /// domain).
    pub fn new(engine_id: u8) -> Self {
        V5Encoder {
            buf: Vec::with_capacity(HEADER_LEN + RECORD_LEN * MAX_RECORDS),
            count: 0,
            sequence: 0,
            engine_id,
            boot_ms: None,
            clock_ms: 0,
            stats: V5Stats::default(),
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> V5Stats {
        self.stats
    }

    /// Whether records wait in the open packet.
    pub fn has_pending(&self) -> bool {
        self.count > 0
    }

    fn uptime(&mut self, ns: u64) -> u32 {
        let ms = ns / 1_000_000;
        let boot = self.boot_ms.unwrap_or(0);
        if ms < boot {
            self.stats.clamped_times += 1;
            return 0;
        }
        (ms - boot).min(u64::from(u32::MAX)) as u32
    }

    fn sat(&mut self, v: u64) -> u32 {
        if v > u64::from(u32::MAX) {
            self.stats.saturated += 1;
            u32::MAX
        } else {
            v as u32
        }
    }

    /// Appends the flow's one or two records, emitting full packets.
    pub fn add_flow(&mut self, r: &FlowRecord<'_>, emit: &mut dyn FnMut(&[u8])) {
        let (IpAddr::V4(src), IpAddr::V4(dst)) = (r.src_ip, r.dst_ip) else {
            self.stats.skipped_ipv6 += 1;
            return;
        };
        // As for v9 (see `MessageEncoder::add_flow`): a virtual boot a day before the first
        // record, and a new packet with a new boot for a record outside its 49 days.
        let (first_ms, last_ms) = (r.first_ns / 1_000_000, r.last_ns / 1_000_000);
        let fits = |boot: u64| first_ms >= boot && last_ms - boot <= u64::from(u32::MAX);
        if !self.boot_ms.is_some_and(fits) {
            self.flush(emit);
            self.boot_ms = Some(first_ms.saturating_sub(86_400_000));
        }
        self.clock_ms = self.clock_ms.max(last_ms);
        let sides = [
            (src, dst, r.src_port, r.dst_port, &r.fwd),
            (dst, src, r.dst_port, r.src_port, &r.rev),
        ];
        for (i, (a, b, pa, pb, d)) in sides.into_iter().enumerate() {
            if i == 1 && d.packets == 0 {
                continue;
            }
            if self.count == MAX_RECORDS {
                self.flush(emit);
            }
            if self.count == 0 {
                self.buf.clear();
                self.buf.resize(HEADER_LEN, 0);
            }
            let packets = self.sat(d.packets);
            let octets = self.sat(d.ip_bytes);
            // The record's times: v5 has no per-direction times in a trawl record, so both
            // directions carry the biflow's first and last packet.
            let first = self.uptime(r.first_ns);
            let last = self.uptime(r.last_ns);
            let b_ = &mut self.buf;
            b_.extend_from_slice(&a.octets());
            b_.extend_from_slice(&b.octets());
            b_.extend_from_slice(&[0; 4]); // nexthop
            b_.extend_from_slice(&[0; 4]); // input, output interface (SNMP index)
            b_.extend_from_slice(&packets.to_be_bytes());
            b_.extend_from_slice(&octets.to_be_bytes());
            b_.extend_from_slice(&first.to_be_bytes());
            b_.extend_from_slice(&last.to_be_bytes());
            b_.extend_from_slice(&pa.to_be_bytes());
            b_.extend_from_slice(&pb.to_be_bytes());
            b_.push(0); // pad1
            b_.push(d.tcp_flags);
            b_.push(r.proto);
            b_.push(0); // tos
            b_.extend_from_slice(&[0; 4]); // src_as, dst_as
            b_.extend_from_slice(&[0; 4]); // src_mask, dst_mask, pad2
            self.count += 1;
            self.stats.records += 1;
        }
    }

    /// Closes the open packet (if any) and passes it to `emit`.
    pub fn flush(&mut self, emit: &mut dyn FnMut(&[u8])) {
        if self.count == 0 {
            return;
        }
        let secs = self.clock_ms / 1000;
        let uptime = (secs * 1000).saturating_sub(self.boot_ms.unwrap_or(0)) as u32;
        let h = &mut self.buf[..HEADER_LEN];
        h[0..2].copy_from_slice(&5u16.to_be_bytes());
        h[2..4].copy_from_slice(&(self.count as u16).to_be_bytes());
        h[4..8].copy_from_slice(&uptime.to_be_bytes());
        h[8..12].copy_from_slice(&(secs as u32).to_be_bytes());
        h[12..16].copy_from_slice(&0u32.to_be_bytes());
        h[16..20].copy_from_slice(&self.sequence.to_be_bytes());
        h[20] = 0; // engine type
        h[21] = self.engine_id;
        h[22..24].copy_from_slice(&0u16.to_be_bytes()); // no sampling
        self.sequence = self.sequence.wrapping_add(self.count as u32);
        self.stats.messages += 1;
        self.clock_ms = 0;
        emit(&self.buf);
        self.count = 0;
        self.buf.clear();
    }
}
