//! Trace (a): the real seed capture replicated into a large trace of concurrent, distinct flows.
//!
//! The seed merges 492 nDPI captures taken over decades, so its own timestamps say nothing about
//! concurrency. We keep the seed's packet *order* and replace its times: the output's packet `j`
//! (of `N * K`) is stamped `base + j * span / (N * K)`. Output packet `j` is copy `j % K` of seed
//! packet `j / K`, which is exactly the k-way merge by time of K copies of the seed, copy `c`
//! shifted by `c` times a small delta (span / (N * K)).
//!
//! Each copy gets its flows' IP addresses XORed (low 24 bits of both source and destination, so
//! both directions stay one conversation) with an offset unique to the copy. On its own that
//! gives K times the seed's ~8.6 k flows: too few for a million concurrent flows in 2.2 GB, because
//! the seed's flows are heavy (about 4 KB each). So, optionally, each seed flow is also cut into
//! chunks of `split` packets and every chunk gets its own offset: long conversations become
//! successions of short ones, like clients opening new connections. Non-IP frames are copied
//! unchanged. The IPv4 header checksum is updated incrementally (so a wrong one stays wrong);
//! L4 checksums are not touched.

use std::path::PathBuf;

use crate::checksum::checksum_update;
use crate::flowstat::{bikey, find_l3, FlowStats, FxHashMap, Summary, L3};
use crate::mix::scramble24;
use crate::pcap::{Capture, PcapWriter, GLOBAL_HEADER_LEN, LINKTYPE_ETHERNET, SNAPLEN};
use crate::Error;

/// Settings of the realistic trace.
#[derive(Debug, Clone)]
pub struct RealisticConfig {
    /// The seed capture (classic pcap, Ethernet).
    pub seed_pcap: PathBuf,
    /// Output size to reach; the number of copies is `ceil(target / seed body size)`.
    pub target_bytes: u64,
    /// Time from the first to the last output packet, in microseconds.
    pub span_us: u64,
    /// Packets per flow chunk (0: do not split flows).
    pub split: u32,
    /// Idle timeout used only for the printed concurrency estimate.
    pub idle_us: u64,
    /// Timestamp of the first output packet, microseconds since the epoch.
    pub base_us: u64,
    /// Output file.
    pub output: PathBuf,
}

/// What the realistic generator wrote.
#[derive(Debug)]
pub struct RealisticReport {
    /// Copies of the seed.
    pub copies: u64,
    /// Seed records.
    pub seed_packets: u64,
    /// Flow chunks in one copy of the seed.
    pub chunks_per_copy: u64,
    /// Seed records whose original length was impossible and was set to the captured length.
    pub orig_len_clamped: u64,
    /// Records written.
    pub packets: u64,
    /// File size.
    pub file_bytes: u64,
    /// Packet and flow statistics of the output.
    pub stats: FlowStats,
    /// Flow counts of the output.
    pub summary: Summary,
}

/// Per-seed-record facts computed once and reused for every copy.
#[derive(Debug, Clone, Copy)]
struct SeedPacket {
    l3: L3,
    chunk: u32,
    orig_len: u32,
}

/// Writes the realistic trace.
pub fn generate(cfg: &RealisticConfig) -> Result<RealisticReport, Error> {
    let seed = Capture::load(&cfg.seed_pcap)?;
    if seed.linktype != LINKTYPE_ETHERNET {
        return Err(Error::new(format!(
            "{}: offset 20: link type {} is not Ethernet (1)",
            cfg.seed_pcap.display(),
            seed.linktype
        )));
    }
    let n = seed.records.len() as u64;
    if n == 0 {
        return Err(Error::new(format!(
            "{}: seed has no packets",
            cfg.seed_pcap.display()
        )));
    }
    let body = (seed.data.len() - GLOBAL_HEADER_LEN) as u64;
    let copies = cfg.target_bytes.div_ceil(body).max(1);

    // Number each seed flow's packets to find its chunk.
    let mut seen: FxHashMap<_, u32> = FxHashMap::default();
    let mut chunks_per_copy = 0u64;
    let mut orig_len_clamped = 0u64;
    let mut max_chunk = 0u32;
    let mut prepared = Vec::with_capacity(seed.records.len());
    for rec in &seed.records {
        let frame = seed.bytes(rec);
        let chunk = match bikey(frame) {
            Some((key, _)) => {
                let count = seen.entry(key).or_insert(0);
                // split == 0: the whole flow is one chunk.
                let chunk = count.checked_div(cfg.split).unwrap_or(0);
                if count.checked_rem(cfg.split).unwrap_or(*count) == 0 {
                    chunks_per_copy += 1;
                }
                *count += 1;
                chunk
            }
            None => 0,
        };
        max_chunk = max_chunk.max(chunk);
        // One seed record (from a fuzzed capture) claims a 4 GB original length; repeated K
        // times it would swamp every byte counter, so impossible lengths become the caplen.
        let orig_len = if rec.orig_len < rec.caplen || rec.orig_len > SNAPLEN {
            orig_len_clamped += 1;
            rec.caplen
        } else {
            rec.orig_len
        };
        prepared.push(SeedPacket {
            l3: find_l3(frame),
            chunk,
            orig_len,
        });
    }
    if (u64::from(max_chunk) + 1) * copies > 1 << 24 {
        return Err(Error::new(format!(
            "{} copies x {} chunks of the longest flow exceed the 2^24 address offsets; \
             raise --split-packets or lower --target-bytes",
            copies,
            max_chunk + 1
        )));
    }

    let mut out = PcapWriter::create(&cfg.output)?;
    let total = n * copies;
    let mut stats = FlowStats::with_capacity((chunks_per_copy * copies) as usize);
    let mut buf = Vec::with_capacity(SNAPLEN as usize);
    for (i, (rec, sp)) in seed.records.iter().zip(&prepared).enumerate() {
        let frame = seed.bytes(rec);
        for c in 0..copies {
            let j = i as u64 * copies + c;
            let ts_us = cfg.base_us + j * cfg.span_us / total;
            buf.clear();
            buf.extend_from_slice(frame);
            let code = scramble24((u64::from(sp.chunk) * copies + c) as u32);
            remap(&mut buf, sp.l3, code);
            out.write_packet(ts_us, sp.orig_len, &buf)?;
            stats.observe(ts_us, sp.orig_len, &buf);
        }
    }
    let (packets, file_bytes) = out.finish()?;
    let summary = stats.summary(cfg.idle_us);
    Ok(RealisticReport {
        copies,
        seed_packets: n,
        chunks_per_copy,
        orig_len_clamped,
        packets,
        file_bytes,
        stats,
        summary,
    })
}

/// XORs the low 24 bits of both IP addresses with `code` (fixing the IPv4 header checksum).
/// Frames whose addresses are not fully captured are left alone.
fn remap(frame: &mut [u8], l3: L3, code: u32) {
    if code == 0 {
        return;
    }
    let x = [(code >> 16) as u8, (code >> 8) as u8, code as u8];
    match l3 {
        L3::V4(o) if frame.len() >= o + 20 => {
            let mut old = [0u8; 8];
            old.copy_from_slice(&frame[o + 12..o + 20]);
            for k in 0..3 {
                frame[o + 13 + k] ^= x[k];
                frame[o + 17 + k] ^= x[k];
            }
            let hc = u16::from_be_bytes([frame[o + 10], frame[o + 11]]);
            let hc = checksum_update(hc, &old, &frame[o + 12..o + 20]);
            frame[o + 10..o + 12].copy_from_slice(&hc.to_be_bytes());
        }
        L3::V6(o) if frame.len() >= o + 40 => {
            for k in 0..3 {
                frame[o + 21 + k] ^= x[k];
                frame[o + 37 + k] ^= x[k];
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::checksum;

    // Ethernet + IPv4 (header checksum left 0, filled in by the test) + UDP.
    const V4_UDP: [u8; 42] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, // MACs
        0x08, 0x00, // IPv4
        0x45, 0x00, 0x00, 0x1c, 0x12, 0x34, 0x00, 0x00, 0x40, 0x11, 0x00, 0x00, // csum at 24
        0xc0, 0xa8, 0x01, 0x02, 0x08, 0x08, 0x08, 0x08, // 192.168.1.2 -> 8.8.8.8
        0xd4, 0x31, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00, // 54321 -> 53
    ];

    fn with_valid_checksum() -> [u8; 42] {
        let mut f = V4_UDP;
        let c = checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        f
    }

    #[test]
    fn remap_v4_keeps_checksum_valid_and_first_octet() {
        let mut f = with_valid_checksum();
        remap(&mut f, L3::V4(14), 0x12_3456);
        assert_eq!(&f[26..30], &[0xc0, 0xa8 ^ 0x12, 0x01 ^ 0x34, 0x02 ^ 0x56]);
        assert_eq!(&f[30..34], &[0x08, 0x08 ^ 0x12, 0x08 ^ 0x34, 0x08 ^ 0x56]);
        // A valid header sums to zero.
        assert_eq!(checksum(&f[14..34]), 0);
        // Ports untouched.
        assert_eq!(&f[34..38], &V4_UDP[34..38]);
    }

    #[test]
    fn remap_is_an_involution_and_both_directions_agree() {
        let orig = with_valid_checksum();
        let mut f = orig;
        remap(&mut f, L3::V4(14), 0x00_0a0b);
        remap(&mut f, L3::V4(14), 0x00_0a0b);
        assert_eq!(f, orig);

        let mut rev = orig;
        rev[26..30].copy_from_slice(&orig[30..34]);
        rev[30..34].copy_from_slice(&orig[26..30]);
        rev[34..36].copy_from_slice(&orig[36..38]);
        rev[36..38].copy_from_slice(&orig[34..36]);
        let mut fwd = orig;
        remap(&mut fwd, L3::V4(14), 77);
        remap(&mut rev, L3::V4(14), 77);
        assert_eq!(bikey(&fwd).unwrap().0, bikey(&rev).unwrap().0);
        assert_ne!(bikey(&fwd).unwrap().0, bikey(&orig).unwrap().0);
    }

    #[test]
    fn remap_keeps_a_wrong_checksum_wrong() {
        let mut f = with_valid_checksum();
        f[25] ^= 0xff;
        remap(&mut f, L3::V4(14), 5);
        assert_ne!(checksum(&f[14..34]), 0);
    }

    #[test]
    fn remap_v6_low_bytes() {
        let mut f = vec![0u8; 14 + 40];
        f[12] = 0x86;
        f[13] = 0xdd;
        f[14] = 0x60;
        f[20] = 17;
        for (k, b) in f[22..54].iter_mut().enumerate() {
            *b = k as u8;
        }
        let orig = f.clone();
        remap(&mut f, L3::V6(14), 0xff_0001);
        assert_eq!(&f[22..35], &orig[22..35]);
        assert_eq!(&f[35..38], &[13 ^ 0xff, 14, 15 ^ 1]);
        assert_eq!(&f[38..51], &orig[38..51]);
        assert_eq!(&f[51..54], &[29 ^ 0xff, 30, 31 ^ 1]);
    }

    #[test]
    fn truncated_and_non_ip_frames_untouched() {
        let mut short = V4_UDP[..30].to_vec();
        let before = short.clone();
        let l3 = find_l3(&short);
        assert_eq!(l3, L3::Other);
        remap(&mut short, l3, 99);
        assert_eq!(short, before);
        let mut arp = V4_UDP;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = arp;
        let l3 = find_l3(&arp);
        remap(&mut arp, l3, 99);
        assert_eq!(arp, before);
    }

    #[test]
    fn generate_small_trace_from_tiny_seed() {
        let dir = std::env::temp_dir().join(format!("tracegen-real-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let seed_path = dir.join("seed.pcap");
        let mut w = PcapWriter::create(&seed_path).unwrap();
        let f = with_valid_checksum();
        // One flow of 5 packets plus one ARP frame, timestamps out of order as in the seed.
        for t in [5, 3, 9, 1, 7] {
            w.write_packet(t, 60, &f).unwrap();
        }
        let mut arp = f;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        w.write_packet(2, 42, &arp).unwrap();
        w.finish().unwrap();
        let seed_body = std::fs::metadata(&seed_path).unwrap().len() - 24;

        let cfg = RealisticConfig {
            seed_pcap: seed_path,
            target_bytes: seed_body * 3,
            span_us: 1_000,
            split: 2,
            idle_us: 10_000,
            base_us: 1_704_067_200_000_000,
            output: dir.join("out.pcap"),
        };
        let r = generate(&cfg).unwrap();
        assert_eq!(r.copies, 3);
        assert_eq!(r.packets, 18);
        assert_eq!(r.chunks_per_copy, 3); // 5 packets in chunks of 2
        assert_eq!(r.summary.biflows, 9);
        assert_eq!(r.summary.peak_concurrent, 9);
        let out = Capture::load(&cfg.output).unwrap();
        assert_eq!(out.data.len() as u64, r.file_bytes);
        assert!(out.records.windows(2).all(|w| w[0].ts_us < w[1].ts_us));
        assert_eq!(out.records[0].ts_us, cfg.base_us);
        // Copy 0 of the first packet is the seed packet itself.
        assert_eq!(out.bytes(&out.records[0]), &f[..]);
        // Every IPv4 header checksum is still valid.
        for rec in &out.records {
            let b = out.bytes(rec);
            if let L3::V4(o) = find_l3(b) {
                assert_eq!(checksum(&b[o..o + 20]), 0);
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
