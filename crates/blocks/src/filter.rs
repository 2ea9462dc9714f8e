//! `packet_filter`: packets matching a BPF expression pass, the others are counted.
use serde::Deserialize;
use trawl_bpf::{ByteOrder, Filter, FilterSet};
use trawl_capture::LinkType;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, Pool};

use crate::messages::{PacketBatch, PACKETS};

const SNAPLEN: u32 = trawl_capture::MAX_SNAPLEN;

/// Applies a tcpdump-syntax filter (libpcap's compiler, trawl's interpreter) in user space.
pub struct PacketFilter {
    expr: String,
    /// One filter set per byte order, made when first needed.
    sets: [Option<FilterSet>; 2],
    pool: Pool<PacketBatch>,
    rejected: Option<Counter>,
}

/// Settings of `packet_filter`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketFilterSettings {
    /// The expression, e.g. `tcp port 80`.
    pub expr: String,
}

impl Block for PacketFilter {
    const TYPE: &'static str = "packet_filter";
    const SUMMARY: &'static str =
        "passes the packets that match a BPF expression (tcpdump syntax) and counts the rest";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets to filter",
    }];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "the matching packets",
    }];
    type Settings = PacketFilterSettings;

    fn check(s: &PacketFilterSettings) -> Result<(), String> {
        Filter::compile(&s.expr, LinkType::ETHERNET, SNAPLEN)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn build(s: PacketFilterSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(PacketFilter {
            expr: s.expr,
            sets: [None, None],
            pool: Pool::new(PacketBatch::default),
            rejected: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.rejected = Some(ctx.counter("rejected"));
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(input) = msg.get::<PacketBatch>() else {
            return;
        };
        let (i, order) = if input.big_endian {
            (1, ByteOrder::Big)
        } else {
            (0, ByteOrder::Little)
        };
        let expr = &self.expr;
        let set = self.sets[i].get_or_insert_with(|| FilterSet::new_for(expr, SNAPLEN, order));
        // Spent batches still share their sources' buffers (a live source's ring blocks go
        // back to the kernel only when nobody holds them): let go of those first.
        self.pool.for_each_unheld(|b| b.shared = None);
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.interfaces.clone_from(&input.interfaces);
        out.big_endian = input.big_endian;
        out.live = input.live;
        out.stream = input.stream;
        let mut rejected = 0u64;
        let keep = |p: &trawl_capture::PacketRecord<'_>| {
            let keep = set
                .matches(p.link_type, p.data, p.wire_len)
                .unwrap_or(false);
            rejected += u64::from(!keep);
            keep
        };
        match &input.shared {
            // The input shares its source's buffer: so does the output (no copy).
            Some(buffer) => {
                out.fill_shared(&input.batch(), buffer.clone());
                out.retain(keep);
            }
            None => out.fill(&input.batch(), keep),
        }
        if let Some(c) = &self.rejected {
            c.add(rejected);
        }
        if !out.metas.is_empty() {
            ctx.emit(0, slot.into_msg());
        }
    }
}
