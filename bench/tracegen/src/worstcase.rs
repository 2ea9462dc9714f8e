//! Trace (b): minimum-size frames spread over more than a million flows, in an order that makes
//! every packet touch a different flow.
//!
//! Every frame is 64 bytes (Ethernet + IPv4 + TCP or UDP, zero-padded; captured length = wire
//! length = 64). Flow `f` of `F` is a fixed 5-tuple derived from `f` by a bijection (so the
//! tuples are distinct by construction). Packets are dealt in rounds: round `r` visits every flow
//! once, in the order `f = p * stride mod F` for `p = 0..F` (`stride` about `0.618 F`, coprime
//! to `F`), and sends that flow's `r`-th packet. Successive packets therefore land on flows far
//! apart in any table, and a flow's next packet comes only after all others had theirs: the
//! flow table's whole working set is touched between two packets of a flow.
//!
//! 80 % of flows are TCP conversations in both directions: SYN, SYN-ACK, ACK, data both ways,
//! then FIN-ACK, FIN-ACK, ACK (one in sixteen ends with a server RST instead), with consistent
//! sequence and acknowledgement numbers. The other 20 % are UDP, half of them one-way. Every
//! checksum is valid. Timestamps advance 1 µs per packet.

use std::path::PathBuf;

use crate::checksum::{finish, sum_words};
use crate::flowstat::{FlowStats, Summary};
use crate::mix::{gcd, scramble24, splitmix64};
use crate::pcap::PcapWriter;
use crate::Error;

/// Frame size of every packet (minimum Ethernet frame).
pub const FRAME_LEN: usize = 64;
const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const TCP_LEN: usize = 20;
const UDP_LEN: usize = 8;
/// TCP payload that fills a 64-byte frame.
const TCP_DATA: usize = FRAME_LEN - ETH_LEN - IP_LEN - TCP_LEN;
/// UDP payload that fills a 64-byte frame.
const UDP_DATA: usize = FRAME_LEN - ETH_LEN - IP_LEN - UDP_LEN;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const PSH: u8 = 0x08;
const ACK: u8 = 0x10;

/// Client to server.
const C2S: usize = 0;
/// Server to client.
const S2C: usize = 1;

/// Settings of the worst-case trace.
#[derive(Debug, Clone)]
pub struct WorstcaseConfig {
    /// Packets to write.
    pub packets: u64,
    /// Distinct flows (bidirectional 5-tuples).
    pub flows: u64,
    /// Seed of every random choice.
    pub seed: u64,
    /// Timestamp of the first packet, microseconds since the epoch.
    pub base_us: u64,
    /// Idle timeout used only for the printed concurrency figure.
    pub idle_us: u64,
    /// Output file.
    pub output: PathBuf,
}

/// What the worst-case generator wrote.
#[derive(Debug)]
pub struct WorstcaseReport {
    /// Records written.
    pub packets: u64,
    /// File size.
    pub file_bytes: u64,
    /// TCP flows among `flows`.
    pub tcp_flows: u64,
    /// Stride of the flow permutation.
    pub stride: u64,
    /// Packet and flow statistics of the output.
    pub stats: FlowStats,
    /// Flow counts of the output.
    pub summary: Summary,
}

/// The fixed properties of one flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FlowSpec {
    tcp: bool,
    /// UDP only: the server never answers.
    one_way: bool,
    /// TCP only: the server resets instead of the FIN exchange.
    reset: bool,
    client: [u8; 4],
    server: [u8; 4],
    client_port: u16,
    server_port: u16,
    isn: [u32; 2],
}

const TCP_PORTS: [u16; 10] = [443, 443, 443, 443, 80, 80, 22, 8080, 993, 3389];
const UDP_PORTS: [u16; 8] = [53, 53, 53, 443, 123, 5353, 3478, 51820];

impl FlowSpec {
    /// Flow `f` of a trace with seed `seed`. Distinct `f < 2^16 * 64512` give distinct
    /// (client, client port) pairs, hence distinct 5-tuples.
    fn new(seed: u64, f: u64) -> FlowSpec {
        let h = splitmix64(seed ^ f.wrapping_mul(0xa076_1d64_78bd_642f));
        let client_idx = f & 0xffff;
        let hc = splitmix64(seed.wrapping_add(client_idx));
        // Bijective on the client index, so 65536 distinct hosts spread over 10/8.
        let c = scramble24(client_idx as u32 + 1);
        let client = [10, (c >> 16) as u8, (c >> 8) as u8, c as u8];
        // For a fixed client, `f >> 16` differs between its flows, so ports differ.
        let client_port = 1024 + (((f >> 16) + hc % 64_512) % 64_512) as u16;
        let s = (h >> 8) % 4096;
        let server = [172, 16 + (s >> 8) as u8, s as u8, 1 + (h >> 20) as u8 % 254];
        let tcp = h % 10 < 8;
        let server_port = if tcp {
            TCP_PORTS[((h >> 32) % TCP_PORTS.len() as u64) as usize]
        } else {
            UDP_PORTS[((h >> 32) % UDP_PORTS.len() as u64) as usize]
        };
        FlowSpec {
            tcp,
            one_way: !tcp && (h >> 50) & 1 == 1,
            reset: tcp && (h >> 52).is_multiple_of(16),
            client,
            server,
            client_port,
            server_port,
            isn: [(h >> 3) as u32, (hc >> 7) as u32],
        }
    }
}

/// Direction, TCP flags and payload length of packet `r` of a TCP flow of `n` packets.
fn tcp_step(r: u64, n: u64, reset: bool) -> (usize, u8, usize) {
    match r {
        0 => (C2S, SYN, 0),
        1 => (S2C, SYN | ACK, 0),
        2 => (C2S, ACK, 0),
        _ if reset && n >= 4 && r == n - 1 => (S2C, RST | ACK, 0),
        _ if !reset && n >= 6 && r == n - 3 => (C2S, FIN | ACK, 0),
        _ if !reset && n >= 6 && r == n - 2 => (S2C, FIN | ACK, 0),
        _ if !reset && n >= 6 && r == n - 1 => (C2S, ACK, 0),
        _ if (r - 3).is_multiple_of(2) => (C2S, PSH | ACK, TCP_DATA),
        _ => (S2C, PSH | ACK, TCP_DATA),
    }
}

/// Fills `frame` with one packet of `spec` in direction `dir`; returns nothing, all 64 bytes
/// are written (padding zeroed).
#[allow(clippy::too_many_arguments)] // reason: one call site; a struct would only rename them
fn build(
    frame: &mut [u8; FRAME_LEN],
    spec: &FlowSpec,
    dir: usize,
    flags: u8,
    payload: usize,
    seq: u32,
    ack: u32,
    ip_id: u16,
) {
    *frame = [0; FRAME_LEN];
    let (src, dst, sport, dport, ttl, mac_src, mac_dst) = if dir == C2S {
        (
            spec.client,
            spec.server,
            spec.client_port,
            spec.server_port,
            64,
            1,
            2,
        )
    } else {
        (
            spec.server,
            spec.client,
            spec.server_port,
            spec.client_port,
            57,
            2,
            1,
        )
    };
    // Locally administered MACs: one for the client side, one for the server side.
    frame[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, mac_dst]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, mac_src]);
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let l4_len = if spec.tcp { TCP_LEN } else { UDP_LEN } + payload;
    let ip = &mut frame[ETH_LEN..ETH_LEN + IP_LEN];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((IP_LEN + l4_len) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&ip_id.to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = ttl;
    ip[9] = if spec.tcp { 6 } else { 17 };
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let hc = finish(sum_words(0, ip));
    ip[10..12].copy_from_slice(&hc.to_be_bytes());

    let l4 = ETH_LEN + IP_LEN;
    frame[l4..l4 + 2].copy_from_slice(&sport.to_be_bytes());
    frame[l4 + 2..l4 + 4].copy_from_slice(&dport.to_be_bytes());
    let data_off = if spec.tcp {
        frame[l4 + 4..l4 + 8].copy_from_slice(&seq.to_be_bytes());
        frame[l4 + 8..l4 + 12].copy_from_slice(&ack.to_be_bytes());
        frame[l4 + 12] = 5 << 4;
        frame[l4 + 13] = flags;
        frame[l4 + 14..l4 + 16].copy_from_slice(&64_240u16.to_be_bytes());
        l4 + TCP_LEN
    } else {
        frame[l4 + 4..l4 + 6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        l4 + UDP_LEN
    };
    for (k, b) in frame[data_off..data_off + payload].iter_mut().enumerate() {
        // Printable, varying payload so nothing compresses to a constant.
        *b = b'a' + ((seq as usize + k) % 26) as u8;
    }
    // Pseudo-header: addresses, protocol, L4 length.
    let mut sum = sum_words(0, &src);
    sum = sum_words(sum, &dst);
    sum += u32::from(frame[ETH_LEN + 9]) + l4_len as u32;
    let mut c = finish(sum_words(sum, &frame[l4..l4 + l4_len]));
    if !spec.tcp && c == 0 {
        c = 0xffff; // UDP sends a computed zero as all ones (RFC 768)
    }
    let at = if spec.tcp { l4 + 16 } else { l4 + 6 };
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// Writes the worst-case trace.
pub fn generate(cfg: &WorstcaseConfig) -> Result<WorstcaseReport, Error> {
    let flows = cfg.flows;
    if flows == 0 || flows > (1 << 16) * 64_512 {
        return Err(Error::new(format!(
            "--flows {flows} out of range 1..={}",
            (1u64 << 16) * 64_512
        )));
    }
    if cfg.packets < flows {
        return Err(Error::new(format!(
            "--packets {} is less than --flows {flows}: every flow needs a packet",
            cfg.packets
        )));
    }
    // Golden-ratio stride: successive positions land far apart, and coprime means a full cycle.
    let mut stride = (((flows as f64) * 0.618_033_988_75) as u64).max(1);
    while gcd(stride, flows) != 1 {
        stride += 1;
    }
    let full_rounds = cfg.packets / flows;
    let extra = cfg.packets % flows;

    // Next sequence number per flow and direction; the only per-flow state.
    let mut next_seq = vec![[0u32; 2]; flows as usize];
    let mut out = PcapWriter::create(&cfg.output)?;
    let mut stats = FlowStats::with_capacity(flows as usize);
    let mut frame = [0u8; FRAME_LEN];
    let mut tcp_flows = 0u64;
    for j in 0..cfg.packets {
        let p = j % flows;
        let r = j / flows;
        let f = (p * stride) % flows;
        // The positions p < extra get one more packet, in the last (partial) round.
        let n = full_rounds + u64::from(p < extra);
        let spec = FlowSpec::new(cfg.seed, f);
        let (dir, flags, payload) = if spec.tcp {
            tcp_step(r, n, spec.reset)
        } else {
            let dir = if spec.one_way { C2S } else { (r % 2) as usize };
            (dir, 0, UDP_DATA)
        };
        let state = &mut next_seq[f as usize];
        if r == 0 {
            *state = spec.isn;
            tcp_flows += u64::from(spec.tcp);
        }
        let seq = state[dir];
        let ack = if flags & ACK != 0 { state[1 - dir] } else { 0 };
        let consumed = payload as u32 + u32::from(flags & (SYN | FIN) != 0);
        state[dir] = seq.wrapping_add(consumed);
        build(&mut frame, &spec, dir, flags, payload, seq, ack, r as u16);
        let ts_us = cfg.base_us + j;
        out.write_packet(ts_us, FRAME_LEN as u32, &frame)?;
        stats.observe(ts_us, FRAME_LEN as u32, &frame);
    }
    let (packets, file_bytes) = out.finish()?;
    let summary = stats.summary(cfg.idle_us);
    Ok(WorstcaseReport {
        packets,
        file_bytes,
        tcp_flows,
        stride,
        stats,
        summary,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::checksum;
    use crate::flowstat::bikey;
    use crate::pcap::Capture;
    use std::collections::HashMap;

    #[test]
    fn tcp_sequence_of_a_closed_flow() {
        let steps: Vec<_> = (0..8).map(|r| tcp_step(r, 8, false)).collect();
        let flags: Vec<u8> = steps.iter().map(|s| s.1).collect();
        assert_eq!(
            flags,
            [
                SYN,
                SYN | ACK,
                ACK,
                PSH | ACK,
                PSH | ACK,
                FIN | ACK,
                FIN | ACK,
                ACK
            ]
        );
        let dirs: Vec<usize> = steps.iter().map(|s| s.0).collect();
        assert_eq!(dirs, [C2S, S2C, C2S, C2S, S2C, C2S, S2C, C2S]);
        assert_eq!(tcp_step(7, 8, true), (S2C, RST | ACK, 0));
        // Too short to close: handshake then data.
        assert_eq!(tcp_step(3, 4, false), (C2S, PSH | ACK, TCP_DATA));
    }

    #[test]
    fn flow_specs_are_distinct() {
        let mut seen = HashMap::new();
        for f in 0..300_000u64 {
            let s = FlowSpec::new(7, f);
            let key = (s.client, s.client_port, s.server, s.server_port, s.tcp);
            assert!(
                seen.insert(key, f).is_none(),
                "flow {f} repeats {:?}",
                seen[&key]
            );
        }
    }

    #[test]
    fn build_emits_valid_checksums() {
        for f in 0..200 {
            let spec = FlowSpec::new(1, f);
            let mut frame = [0u8; FRAME_LEN];
            let payload = if spec.tcp { TCP_DATA } else { UDP_DATA };
            build(&mut frame, &spec, S2C, PSH | ACK, payload, 1000, 2000, 3);
            assert_eq!(checksum(&frame[14..34]), 0, "IPv4 header of flow {f}");
            let l4_len = usize::from(u16::from_be_bytes([frame[16], frame[17]])) - IP_LEN;
            let mut sum = sum_words(0, &frame[26..34]);
            sum += u32::from(frame[23]) + l4_len as u32;
            assert_eq!(
                finish(sum_words(sum, &frame[34..34 + l4_len])),
                0,
                "L4 of flow {f}"
            );
            assert_eq!(&frame[26..30], &spec.server);
        }
    }

    #[test]
    fn generate_small_trace() {
        let dir = std::env::temp_dir().join(format!("tracegen-worst-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cfg = WorstcaseConfig {
            packets: 1_050,
            flows: 100,
            seed: 42,
            base_us: 1_704_067_200_000_000,
            idle_us: 30_000_000,
            output: dir.join("b.pcap"),
        };
        let r = generate(&cfg).unwrap();
        assert_eq!(r.packets, 1_050);
        assert_eq!(r.file_bytes, 24 + 1_050 * 80);
        assert_eq!(r.summary.biflows, 100);
        assert_eq!(r.summary.peak_concurrent, 100);
        assert!(
            r.summary.uniflows > 150,
            "most flows two-way: {}",
            r.summary.uniflows
        );

        let cap = Capture::load(&cfg.output).unwrap();
        let mut per_flow: HashMap<_, Vec<u8>> = HashMap::new();
        let mut prev_key = None;
        for (i, rec) in cap.records.iter().enumerate() {
            assert_eq!((rec.caplen, rec.orig_len), (64, 64));
            assert_eq!(rec.ts_us, cfg.base_us + i as u64);
            let b = cap.bytes(rec);
            let (key, _) = bikey(b).unwrap();
            assert_ne!(
                Some(key),
                prev_key,
                "packet {i} hits the same flow as the one before"
            );
            prev_key = Some(key);
            if key.proto == 6 {
                per_flow.entry(key).or_default().push(b[47]);
            }
        }
        // Every TCP flow opens with a handshake and ends with FIN or RST.
        assert_eq!(per_flow.len() as u64, r.tcp_flows);
        for (key, flags) in &per_flow {
            assert_eq!(&flags[..3], &[SYN, SYN | ACK, ACK], "{key:?}");
            let last = *flags.last().unwrap();
            assert!(last == ACK || last == RST | ACK, "{key:?}: {flags:?}");
            assert!(flags.iter().any(|&f| f & (FIN | RST) != 0), "{key:?}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn too_few_packets_is_an_error() {
        let cfg = WorstcaseConfig {
            packets: 5,
            flows: 10,
            seed: 1,
            base_us: 0,
            idle_us: 0,
            output: std::env::temp_dir().join("never-written.pcap"),
        };
        assert!(generate(&cfg)
            .unwrap_err()
            .to_string()
            .contains("--packets 5"));
    }
}
