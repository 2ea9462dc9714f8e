//! Port attribution for non-first IP fragments: the first fragment's ports are remembered by
//! (addresses, protocol, fragment id) in a fixed-size two-way set-associative table, so memory
//! stays bounded whatever the traffic; an overwritten or timed-out entry just leaves later
//! fragments of that datagram unmatched (counted).
use crate::decode::Decoded;

#[derive(Clone, Copy, Default)]
struct Slot {
    src: [u8; 16],
    dst: [u8; 16],
    id: u32,
    proto: u8,
    used: bool,
    ports: (u16, u16),
    ts_ns: u64,
}

impl Slot {
    fn matches(&self, d: &Decoded) -> bool {
        self.used
            && self.id == d.fragment_id
            && self.proto == d.proto
            && self.src == d.src_ip
            && self.dst == d.dst_ip
    }
}

/// Remembers first fragments' ports.
pub(crate) struct FragmentTracker {
    slots: Vec<Slot>,
    sets_mask: usize,
    timeout_ns: u64,
}

impl FragmentTracker {
    /// A table of about `slots` entries (rounded up to a power of two, at least 2).
    pub(crate) fn new(slots: usize, timeout_ns: u64) -> Self {
        let sets = (slots / 2).max(1).next_power_of_two();
        FragmentTracker {
            slots: vec![Slot::default(); sets * 2],
            sets_mask: sets - 1,
            timeout_ns,
        }
    }

    fn set_of(&self, d: &Decoded) -> usize {
        let mut h = (d.fragment_id as u64) ^ ((d.proto as u64) << 32);
        for c in d.src_ip[8..]
            .chunks_exact(8)
            .chain(d.dst_ip[8..].chunks_exact(8))
        {
            h = (h ^ u64::from_le_bytes(c.try_into().expect("8 bytes")))
                .wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
        ((h >> 32) as usize & self.sets_mask) * 2
    }

    /// Remembers the ports of a first fragment.
    pub(crate) fn remember(&mut self, d: &Decoded, ts_ns: u64) {
        let base = self.set_of(d);
        // Reuse the slot of the same datagram, else the older of the two.
        let way = if self.slots[base].matches(d) || !self.slots[base].used {
            0
        } else if self.slots[base + 1].matches(d) || !self.slots[base + 1].used {
            1
        } else if self.slots[base].ts_ns <= self.slots[base + 1].ts_ns {
            0
        } else {
            1
        };
        self.slots[base + way] = Slot {
            src: d.src_ip,
            dst: d.dst_ip,
            id: d.fragment_id,
            proto: d.proto,
            used: true,
            ports: (d.src_port, d.dst_port),
            ts_ns,
        };
    }

    /// The ports of the datagram a non-first fragment belongs to, if its first fragment was
    /// seen within the timeout.
    pub(crate) fn lookup(&self, d: &Decoded, ts_ns: u64) -> Option<(u16, u16)> {
        let base = self.set_of(d);
        self.slots[base..base + 2]
            .iter()
            .find(|s| s.matches(d) && ts_ns.saturating_sub(s.ts_ns) <= self.timeout_ns)
            .map(|s| s.ports)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(id: u32, sport: u16) -> Decoded {
        Decoded {
            ip_version: 4,
            proto: 17,
            fragment_id: id,
            src_port: sport,
            dst_port: 53,
            src_ip: [1; 16],
            dst_ip: [2; 16],
            ..Decoded::default()
        }
    }

    #[test]
    fn remembers_and_times_out() {
        let mut t = FragmentTracker::new(8, 1000);
        t.remember(&frag(7, 1234), 100);
        assert_eq!(t.lookup(&frag(7, 0), 500), Some((1234, 53)));
        assert_eq!(t.lookup(&frag(8, 0), 500), None);
        assert_eq!(t.lookup(&frag(7, 0), 1101), None);
    }

    #[test]
    fn bounded_memory_evicts_older() {
        let mut t = FragmentTracker::new(2, u64::MAX);
        for id in 0..100 {
            t.remember(&frag(id, id as u16), id as u64);
        }
        assert_eq!(t.lookup(&frag(99, 0), 100), Some((99, 53)));
        assert_eq!(t.lookup(&frag(0, 0), 100), None);
        assert_eq!(t.slots.len(), 2);
    }
}
