//! The per-connection cutoff (Time Machine's idea): keep only the first N bytes of every flow,
//! since the bulk of traffic is the tail of a few big transfers and the beginnings carry what
//! forensics needs.
//!
//! Flows are tracked in a direct-mapped table keyed by the hash of the bidirectional flow key:
//! constant memory, no allocation. A flow whose slot is taken by another flow active within the
//! idle timeout is counted as an eviction and starts counting afresh when it comes back (its
//! later packets may be kept again: the cutoff errs towards keeping).

/// Counters of the cutoff.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CutoffStats {
    /// Packets not written because their flow was past the cutoff.
    pub packets_cut: u64,
    /// Their captured bytes.
    pub bytes_cut: u64,
    /// Flows that reached the cutoff.
    pub flows_cut: u64,
    /// Flows pushed out of the table by another flow while still active.
    pub evictions: u64,
}

#[derive(Clone, Copy, Default)]
struct Slot {
    tag: u64,
    bytes: u64,
    last_ns: u64,
    cut: bool,
}

pub(crate) struct Cutoff {
    limit: u64,
    idle_ns: u64,
    slots: Vec<Slot>,
    mask: usize,
    pub stats: CutoffStats,
}

impl Cutoff {
    /// Keeps `limit` bytes (frame lengths, both directions) per flow; a flow silent for
    /// `idle_ns` starts over. `slots_log2` sizes the table.
    pub fn new(limit: u64, idle_ns: u64, slots_log2: u32) -> Cutoff {
        Cutoff {
            limit,
            idle_ns,
            slots: vec![Slot::default(); 1 << slots_log2],
            mask: (1 << slots_log2) - 1,
            stats: CutoffStats::default(),
        }
    }

    /// Whether to keep a packet of `wire_len` bytes of the flow hashed `flow_hash` at `ts`.
    /// The packet that crosses the limit is kept whole.
    pub fn admit(&mut self, flow_hash: u64, ts_ns: u64, wire_len: u32, caplen: u32) -> bool {
        // Tag 0 marks an empty slot; the hash's low bits pick the slot, so use it whole as tag.
        let tag = flow_hash | 1;
        let slot = &mut self.slots[(flow_hash >> 20) as usize & self.mask];
        let fresh = slot.tag != tag || ts_ns.saturating_sub(slot.last_ns) > self.idle_ns;
        if fresh {
            if slot.tag != 0
                && slot.tag != tag
                && ts_ns.saturating_sub(slot.last_ns) <= self.idle_ns
            {
                self.stats.evictions += 1;
            }
            *slot = Slot {
                tag,
                bytes: 0,
                last_ns: ts_ns,
                cut: false,
            };
        }
        slot.last_ns = slot.last_ns.max(ts_ns);
        let before = slot.bytes;
        slot.bytes = before.saturating_add(u64::from(wire_len));
        if before < self.limit {
            return true;
        }
        if !slot.cut {
            slot.cut = true;
            self.stats.flows_cut += 1;
        }
        self.stats.packets_cut += 1;
        self.stats.bytes_cut += u64::from(caplen);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_bytes_of_each_flow() {
        let mut c = Cutoff::new(1000, 60_000_000_000, 10);
        let kept: Vec<bool> = (0..5).map(|i| c.admit(42, i, 400, 400)).collect();
        // 0, 400, 800 are below 1000: kept (the third crosses it); 1200, 1600 are cut.
        assert_eq!(kept, [true, true, true, false, false]);
        assert_eq!(c.stats.packets_cut, 2);
        assert_eq!(c.stats.bytes_cut, 800);
        assert_eq!(c.stats.flows_cut, 1);
        // Another flow is independent.
        assert!(c.admit(7 << 20, 10, 400, 400));
        // After the idle timeout the flow starts over.
        assert!(c.admit(42, 61_000_000_000, 400, 400));
    }
}
