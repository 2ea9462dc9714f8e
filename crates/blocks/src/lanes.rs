//! `packet_lanes`: spreads one packet stream over several `flow_meter`s (`trawl flows -r F
//! --workers N`). Each packet gets a lane, `0..lanes`, from a symmetric hash of the addresses
//! its flow is keyed on (as the live fanout's XOR striping does), so both directions of a
//! conversation and every fragment of a datagram meet in the same meter; packets without a flow
//! key (ARP, broken headers) all take lane 0. The batch goes on whole, its lanes beside it
//! ([`PacketBatch::lanes`]): every meter sees every packet's time (their clocks move as one
//! meter's would) and meters only its own lane's packets.
use serde::Deserialize;
use trawl_capture::Batch;
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, Msg, Pool};
use trawl_flow::decode::{decode, outer_addresses, DecodeConfig, Decoded, TunnelMode};

use crate::messages::{PacketBatch, PACKETS};
use crate::meter::Tunnel;

/// Most lanes (meters) one stream is spread over.
pub const MAX_LANES: usize = 64;

/// The lane of each packet, from the addresses the meters key its flow on.
pub struct LaneHasher {
    config: DecodeConfig,
    decoded: Decoded,
    lanes: usize,
}

impl LaneHasher {
    /// A hasher into `lanes` lanes (1 to [`MAX_LANES`]) keying flows as a meter with `tunnel`.
    pub fn new(lanes: usize, tunnel: Tunnel) -> LaneHasher {
        LaneHasher {
            config: DecodeConfig {
                tunnel: match tunnel {
                    Tunnel::Outer => TunnelMode::Outer,
                    Tunnel::Inner => TunnelMode::Inner,
                },
            },
            decoded: Decoded::default(),
            lanes: lanes.clamp(1, MAX_LANES),
        }
    }

    /// Replaces `out` with the lane of every packet of `batch`, in order.
    pub fn fill(&mut self, batch: &Batch<'_>, out: &mut Vec<u8>) {
        out.clear();
        let lanes = self.lanes;
        let decoded = &mut self.decoded;
        match self.config.tunnel {
            // The outermost IP header keys the flow: its addresses are all a lane needs, and
            // reading them costs a fraction of a decode (the meter decodes the packet anyway).
            TunnelMode::Outer => out.extend(batch.iter().map(|p| {
                outer_addresses(p.link_type, p.data, decoded)
                    .map_or(0, |(src, dst)| lane_of(&src, &dst, lanes))
            })),
            // Only a whole decode finds the innermost header.
            TunnelMode::Inner => out.extend(batch.iter().map(|p| {
                let outcome = decode(p.link_type, p.data, &self.config, decoded);
                if outcome.has_key() {
                    lane_of(&decoded.src_ip, &decoded.dst_ip, lanes)
                } else {
                    0
                }
            })),
        }
    }
}

/// The lane of a flow between addresses `a` and `b` (16 bytes each, IPv4 mapped): the same
/// for (a, b) and (b, a). The XOR of the addresses, mixed so that neighbouring addresses
/// spread, scaled to `lanes` without a division.
#[inline]
pub fn lane_of(a: &[u8; 16], b: &[u8; 16], lanes: usize) -> u8 {
    let x = u128::from_le_bytes(*a) ^ u128::from_le_bytes(*b);
    let folded = (x as u64) ^ ((x >> 64) as u64);
    let mixed = folded.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (((mixed >> 32) * lanes as u64) >> 32) as u8
}

/// Settings of `packet_lanes`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketLanesSettings {
    /// How many meters share the stream, 2 to 64.
    pub lanes: usize,
    /// As the meters' `tunnel`: which IP header keys the flow, so lanes follow the meters' keys.
    #[serde(default)]
    pub tunnel: Tunnel,
}

/// Tags each packet with its meter's lane.
pub struct PacketLanes {
    hasher: LaneHasher,
    pool: Pool<PacketBatch>,
}

impl Block for PacketLanes {
    const TYPE: &'static str = "packet_lanes";
    const SUMMARY: &'static str =
        "tags each packet with a lane by a symmetric hash of its flow's addresses, so several flow_meters (each with `lane`) share one stream";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets to spread",
    }];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "the same packets, each batch with the lane of every packet",
    }];
    type Settings = PacketLanesSettings;

    fn check(s: &PacketLanesSettings) -> Result<(), String> {
        if !(2..=MAX_LANES).contains(&s.lanes) {
            return Err(format!("`lanes` must be 2 to {MAX_LANES}, not {}", s.lanes));
        }
        Ok(())
    }

    fn build(s: PacketLanesSettings, _env: &BuildEnv) -> Result<Self, String> {
        Self::check(&s)?;
        Ok(PacketLanes {
            hasher: LaneHasher::new(s.lanes, s.tunnel),
            pool: Pool::new(PacketBatch::default),
        })
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(input) = msg.get::<PacketBatch>() else {
            return;
        };
        // Spent batches still share the source's buffer: let go of a few per batch (the
        // pool is as deep as the meters' queues).
        self.pool.release_some(|b| b.shared = None);
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.interfaces.clone_from(&input.interfaces);
        out.big_endian = input.big_endian;
        out.live = input.live;
        out.stream = input.stream;
        match &input.shared {
            // The records stay in the source's buffer: only their metadata is copied.
            Some(buffer) => out.fill_shared(&input.batch(), buffer.clone()),
            None => out.fill(&input.batch(), |_| true),
        }
        let mut lanes = std::mem::take(&mut out.lanes);
        self.hasher.fill(&out.batch(), &mut lanes);
        out.lanes = lanes;
        out.lane_count = self.hasher.lanes as u8;
        ctx.emit(0, slot.into_msg());
    }
}

#[cfg(test)]
mod tests {
    use super::lane_of;

    fn v4(a: [u8; 4]) -> [u8; 16] {
        let mut m = [0u8; 16];
        m[10] = 0xff;
        m[11] = 0xff;
        m[12..].copy_from_slice(&a);
        m
    }

    #[test]
    fn both_directions_take_one_lane() {
        for i in 0..200u8 {
            let a = v4([10, 0, i, 1]);
            let b = v4([192, 168, 1, i.wrapping_mul(7)]);
            for lanes in 1..=8 {
                let l = lane_of(&a, &b, lanes);
                assert_eq!(l, lane_of(&b, &a, lanes));
                assert!((l as usize) < lanes);
            }
        }
    }

    #[test]
    fn neighbouring_hosts_spread_over_the_lanes() {
        let server = v4([10, 0, 0, 1]);
        let mut seen = [0usize; 4];
        for i in 0..=255u8 {
            seen[lane_of(&server, &v4([10, 0, 1, i]), 4) as usize] += 1;
        }
        // 256 clients of one server: every lane gets a fair share.
        assert!(seen.iter().all(|&n| n > 32), "{seen:?}");
    }
}
