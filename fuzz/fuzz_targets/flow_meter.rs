//! Fuzzes the flow meter: a sequence of packets built from the input (few addresses and ports,
//! so packets meet in flows; TCP flags, sequence numbers and windows as the input says; times
//! that step forwards by up to hours or go backwards; frame lengths past 65535; some frames
//! raw bytes) through a small table with short timeouts, so eviction, idle and active expiry,
//! FIN/RST lingering, late packets and the narrow counters' exact overflow all run. Built with
//! debug assertions, so an arithmetic overflow anywhere is a crash.
//!
//! Checked: no panic; every packet the meter counted in a flow is in exactly one record
//! (packets and wire bytes add up per direction); a record's times and lengths are ordered.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_capture::{Direction, LinkType, PacketRecord};
use trawl_flow::decode::{DecodeConfig, TunnelMode};
use trawl_flow::{FlowConfig, FlowMeter, FlowRecord};

/// Reads the input front to back; zeros once it runs out.
struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    fn u32(&mut self) -> u32 {
        u32::from_be_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    fn take(&mut self, n: usize) -> &[u8] {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
}

/// An Ethernet frame with IPv4 or IPv6 and TCP, UDP or ICMP, from the input's choices.
fn frame(b: &mut Bytes<'_>, out: &mut Vec<u8>) {
    out.clear();
    let shape = b.u8();
    let v6 = shape & 1 != 0;
    let proto = [6u8, 6, 17, 1][usize::from(shape >> 1) & 3];
    let proto = if v6 && proto == 1 { 58 } else { proto };
    // Four hosts and four ports: packets of a few flows, in both directions.
    let hosts = b.u8();
    let (src, dst) = (hosts & 3, (hosts >> 2) & 3);
    let ports = b.u8();
    let port = |i: u8| [80u16, 443, 40000, 53][usize::from(i & 3)];
    let (sport, dport) = (port(ports), port(ports >> 2));
    let payload = usize::from(b.u8() & 0x3f);
    out.extend_from_slice(&[2, 0, 0, 0, 0, dst, 2, 0, 0, 0, 0, src]);
    let l4_len = match proto {
        6 => 20,
        17 => 8,
        _ => 8,
    } + payload;
    if v6 {
        out.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
        out.extend_from_slice(&(l4_len as u16).to_be_bytes());
        out.extend_from_slice(&[proto, 64]);
        for host in [src, dst] {
            out.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, host]);
        }
    } else {
        let id = b.u16();
        // Now and then a fragment (first or not), so fragment tracking runs too.
        let frag = match b.u8() & 7 {
            0 => 0x2000u16,
            1 => 0x0004,
            _ => 0x4000,
        };
        out.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
        out.extend_from_slice(&((20 + l4_len) as u16).to_be_bytes());
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&frag.to_be_bytes());
        out.extend_from_slice(&[64, proto, 0, 0, 10, 0, 0, src, 10, 0, 0, dst]);
    }
    match proto {
        6 => {
            out.extend_from_slice(&sport.to_be_bytes());
            out.extend_from_slice(&dport.to_be_bytes());
            out.extend_from_slice(&b.u32().to_be_bytes());
            out.extend_from_slice(&b.u32().to_be_bytes());
            let flags = b.u8();
            // A zero window now and then.
            let window = if flags & 0x40 != 0 { 0 } else { 512u16 };
            out.extend_from_slice(&[0x50, flags]);
            out.extend_from_slice(&window.to_be_bytes());
            out.extend_from_slice(&[0, 0, 0, 0]);
        }
        17 => {
            out.extend_from_slice(&sport.to_be_bytes());
            out.extend_from_slice(&dport.to_be_bytes());
            out.extend_from_slice(&(l4_len as u16).to_be_bytes());
            out.extend_from_slice(&[0, 0]);
        }
        _ => out.extend_from_slice(&[b.u8(), b.u8(), 0, 0, 0, 0, 0, 0]),
    }
    out.extend(std::iter::repeat_n(0xab, payload));
}

/// Per-direction packet and byte totals of a set of records, keyed by the record's flow.
#[derive(Default)]
struct Totals {
    packets: u64,
    bytes: u64,
}

fuzz_target!(|input: &[u8]| {
    let mut b = Bytes(input);
    let knobs = b.u8();
    let config = FlowConfig {
        capacity: 1 + usize::from(b.u8() & 7),
        idle_timeout_ns: [1_000, 1_000_000_000, 30_000_000_000, u64::MAX / 4][usize::from(knobs & 3)],
        active_timeout_ns: [5_000, 10_000_000_000, 1_800_000_000_000, u64::MAX / 2]
            [usize::from((knobs >> 2) & 3)],
        tcp_linger_ns: [0, 2_000_000_000][usize::from((knobs >> 4) & 1)],
        interval_align_ns: [0, 60_000_000_000][usize::from((knobs >> 5) & 1)],
        payload_bytes: [0, 4][usize::from((knobs >> 6) & 1)],
        decode: DecodeConfig {
            tunnel: if knobs >> 7 != 0 {
                TunnelMode::Inner
            } else {
                TunnelMode::Outer
            },
        },
        fragment_slots: 4,
        ..FlowConfig::default()
    };
    let mut meter = FlowMeter::new(config);
    let mut ts: u64 = 1_700_000_000_000_000_000;
    let mut frames: Vec<Vec<u8>> = Vec::new();
    let mut meta: Vec<(u64, u32)> = Vec::new();
    while !b.0.is_empty() && frames.len() < 512 {
        let step = b.u8();
        // Mostly small steps; sometimes past 2^32 ns (narrow gaps), hours, or backwards.
        ts = match step >> 5 {
            0 => ts.saturating_sub(u64::from(b.u16())),
            1 => ts + (1u64 << 32) + u64::from(b.u16()),
            2 => ts + 3_600_000_000_000,
            _ => ts + u64::from(b.u16()) * 1_000,
        };
        let mut f = Vec::new();
        if step & 0x0f == 0 {
            // Raw bytes: whatever the decoder makes of them.
            let n = usize::from(b.u8());
            f.extend_from_slice(b.take(n));
        } else {
            frame(&mut b, &mut f);
        }
        // The wire length: the frame's, or longer (snaplen), at times past 65535.
        let wire = match step & 0x10 {
            0 => f.len() as u32,
            _ => f.len() as u32 + u32::from(b.u16()) * 2,
        };
        frames.push(f);
        meta.push((ts, wire));
    }
    let records: Vec<PacketRecord<'_>> = frames
        .iter()
        .zip(&meta)
        .map(|(f, &(ts_ns, wire_len))| PacketRecord {
            ts_ns,
            wire_len,
            iface: 0,
            direction: Direction::Unknown,
            link_type: LinkType::ETHERNET,
            data: f,
        })
        .collect();

    let mut counted = Totals::default();
    let mut emitted = Totals::default();
    let mut sink = |r: &FlowRecord<'_>| {
        assert!(r.first_ns <= r.last_ns, "{r:?}");
        for d in [&r.fwd, &r.rev] {
            if d.packets > 0 {
                assert!(d.len_min <= d.len_max, "{r:?}");
                assert!(d.iat_min_ns <= d.iat_max_ns || d.packets < 2, "{r:?}");
            }
            emitted.packets += d.packets;
            emitted.bytes += d.bytes;
        }
        assert!(r.first_count <= r.first_lengths.len());
    };
    // Batches of several sizes, so the pipeline's start and end run with every fill.
    let cut = 1 + usize::from(knobs) % 37;
    for chunk in records.chunks(cut) {
        meter.process_batch(chunk, &mut sink, |i, o| {
            if o.in_flow {
                counted.packets += 1;
                counted.bytes += u64::from(chunk[i].wire_len);
            }
        });
    }
    meter.flush(&mut sink);
    assert_eq!(emitted.packets, counted.packets, "packets in records");
    assert_eq!(emitted.bytes, counted.bytes, "bytes in records");
    assert_eq!(meter.active_flows(), 0);
});
