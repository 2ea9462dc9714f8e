//! `ring`: packets into a shared capture ring of `trawl_ring` (`/dev/shm/trawl-ring-NAME`),
//! which other processes read (`trawl listen --ring NAME`, a `trawl_ring` listener).
use serde::Deserialize;
use trawl_capture::{Interface, PacketRecord};
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg};
use trawl_ring::{Producer, RingConfig};

use crate::messages::{PacketBatch, PACKETS};

/// Publishes the packets it receives into a shared ring, while at least one listener is
/// attached (a listener starts at the write position when it joins, so nothing written before
/// is of use to anyone). A lossless listener that falls behind makes this block wait.
pub struct RingBlock {
    producer: Producer,
    name: String,
    /// Per upstream stream: its interface indices → the ring's.
    maps: Vec<(u32, Vec<u16>)>,
    counters: Option<RingCounters>,
}

struct RingCounters {
    published: Counter,
    bytes: Counter,
    unheard: Counter,
    truncated: Counter,
    waits: Counter,
}

/// Settings of `ring`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RingSettings {
    /// Ring name: listeners attach to `/dev/shm/trawl-ring-NAME` (`trawl listen --ring NAME`).
    /// (The key is `ring`, as `name` is the block's own name in the composition.)
    pub ring: String,
    /// Bytes of the ring's data area: a power of two from 64KiB (default 64MiB).
    #[serde(default = "default_capacity", deserialize_with = "crate::util::size")]
    pub capacity: u64,
}

fn default_capacity() -> u64 {
    64 << 20
}

impl RingSettings {
    fn config(&self) -> RingConfig {
        RingConfig::with_capacity(self.capacity as usize)
    }
}

impl Block for RingBlock {
    const TYPE: &'static str = "ring";
    const SUMMARY: &'static str =
        "publishes packets into a shared ring other processes read (`trawl listen --ring NAME`)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets to publish (any number of sources; each keeps its interfaces)",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = RingSettings;

    fn check(s: &RingSettings) -> Result<(), String> {
        trawl_ring::SharedRing::path(&s.ring).map_err(|e| format!("ring: {e}"))?;
        let cap = s.capacity;
        if !cap.is_power_of_two() || !(64 << 10..=1 << 40).contains(&cap) {
            return Err("`capacity` must be a power of two from 64KiB to 1TiB".into());
        }
        Ok(())
    }

    fn build(s: RingSettings, _env: &BuildEnv) -> Result<Self, String> {
        let producer = Producer::create_shared(&s.ring, &s.config())
            .map_err(|e| format!("cannot create the shared ring `{}`: {e}", s.ring))?;
        Ok(RingBlock {
            producer,
            name: s.ring,
            maps: Vec::new(),
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(RingCounters {
            published: ctx.counter("published"),
            bytes: ctx.counter("bytes"),
            unheard: ctx.counter("not_published"),
            truncated: ctx.counter("truncated"),
            waits: ctx.counter("producer_waits"),
        });
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(packets) = msg.get::<PacketBatch>() else {
            return;
        };
        // Interfaces first, so a listener that joins later can name every record.
        let at = match self.map(packets.stream, &packets.interfaces) {
            Ok(at) => at,
            Err(e) => {
                ctx.error(format_args!("ring {}: {e}", self.name));
                return;
            }
        };
        let c = self.counters.as_ref().expect("started");
        if !self.producer.has_listeners() {
            c.unheard.add(packets.metas.len() as u64);
            return;
        }
        let map = &self.maps[at].1;
        let batch = packets.batch();
        for (i, pkt) in batch.iter().enumerate() {
            let iface = map.get(usize::from(pkt.iface)).copied().unwrap_or(0);
            if let Err(e) = self.producer.push_record(&PacketRecord { iface, ..pkt }) {
                ctx.error(format_args!("ring {}: {e}", self.name));
                c.unheard.add((packets.metas.len() - i) as u64);
                break;
            }
        }
        self.producer.publish();
        let st = self.producer.stats();
        c.published.set(st.records_written);
        c.bytes.set(st.bytes_written);
        c.truncated.set(st.records_truncated);
        c.waits.set(st.wait_count);
    }

    fn finish(&mut self, _ctx: &mut Ctx<'_>) {
        // Listeners read to the end and then see the ring closed.
        self.producer.close();
    }
}

impl RingBlock {
    /// Where in `maps` the ring's indices of `stream`'s interfaces are (new ones registered).
    fn map(&mut self, stream: u32, ifaces: &[Interface]) -> Result<usize, trawl_ring::Error> {
        let at = match self.maps.iter().position(|(s, _)| *s == stream) {
            Some(at) => at,
            None => {
                self.maps.push((stream, Vec::new()));
                self.maps.len() - 1
            }
        };
        let known = self.maps[at].1.len();
        for iface in ifaces.iter().skip(known) {
            let index = self.producer.add_interface(iface)?;
            self.maps[at].1.push(index);
        }
        Ok(at)
    }
}
