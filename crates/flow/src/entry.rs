//! What the flow table and the meter need of a flow entry, so that one table and one meter
//! serve every layout: [`FlowEntry`] (`full`: five cache lines),
//! [`StandardEntry`](crate::standard::StandardEntry) (`standard`: two) and
//! [`MiniEntry`](crate::mini::MiniEntry) (`minimal`: one).
use crate::config::FeatureLevel;
use crate::decode::Decoded;
use crate::key::{FlowKey, Side};
use crate::record::{EndReason, FlowRecord};
use crate::state::{FlowEntry, Wides, NIL};
use crate::timing::TcpTiming;

/// The overflow records of a table's entries (values that outgrow an entry's narrow fields).
pub(crate) trait EntryStore: Default {
    /// Forgets every record (the table was cleared); memory stays for reuse.
    fn clear(&mut self);
    /// Memory the records hold.
    fn bytes(&self) -> usize;
}

/// What the table needs of an entry: its key, whether it is in use, its timer-wheel links.
pub(crate) trait TableEntry: bytemuck::Pod {
    /// Where the entry's overflow records live.
    type Store: EntryStore;
    /// Whether the entry's TCP round-trip timing is a [`TcpTiming`] in the table's array
    /// beside the entries (at `standard` and `full`); else the entry keeps what its level
    /// needs itself.
    const TIMING_BESIDE: bool = false;

    /// A free entry.
    fn vacant() -> Self;
    /// In use.
    fn is_live(&self) -> bool;
    /// Takes the (free) entry for `key`.
    fn occupy(&mut self, key: &FlowKey, store: &mut Self::Store);
    /// Frees the entry and its overflow records.
    fn vacate(&mut self, store: &mut Self::Store);
    /// Whether the entry holds `key`.
    fn has_key(&self, key: &FlowKey, store: &Self::Store) -> bool;
    /// The entry's key.
    fn key(&self, store: &Self::Store) -> FlowKey;
    /// Previous entry in its wheel slot's list, [`NIL`] for the head.
    fn wheel_prev(&self) -> u32;
    /// Next entry in its wheel slot's list, [`NIL`] for the last.
    fn wheel_next(&self) -> u32;
    /// The wheel slot of a list's head (meaningful when [`TableEntry::wheel_prev`] is `NIL`).
    fn wheel_slot(&self) -> u16;
    /// Links the entry after `prev` ([`NIL`]: as the head of `slot`'s list).
    fn set_wheel_prev(&mut self, prev: u32, slot: u16);
    /// Links `next` after the entry.
    fn set_wheel_next(&mut self, next: u32);
    /// Hints the CPU to fetch the lines a packet from `side` updates at `level`.
    fn prefetch(&self, side: usize, level: FeatureLevel);
}

/// What the meter needs of an entry: a flow's start, its packets, its record.
pub(crate) trait MeterEntry: TableEntry {
    /// Starts the flow of the entry's key with its first packet `d` from `sender` at `ts`.
    fn start(&mut self, d: &Decoded, sender: Side, ts: u64, store: &mut Self::Store);
    /// Counts one packet, what a record of `level` keeps; `timing` is the entry's round-trip
    /// record where the level has one.
    #[allow(clippy::too_many_arguments)] // The hot path: a struct would be built per packet.
    fn update(
        &mut self,
        d: &Decoded,
        sender: Side,
        ts: u64,
        wire_len: u32,
        store: &mut Self::Store,
        level: FeatureLevel,
        timing: Option<&mut TcpTiming>,
    );
    /// Clears the counters for the flow's next record (active timeout).
    fn reset_counters(&mut self, store: &mut Self::Store);
    /// The flow's TCP state bits (`state_bits`).
    fn state(&self) -> u8;
    /// Last packet of the flow's open record, for expiry and the record.
    fn last_ns(&self) -> u64;
    /// First packet of the current record.
    fn first_ns(&self) -> u64;
    /// The current record has no packet yet.
    fn is_empty_record(&self) -> bool;
    /// The current record.
    fn record<'a>(
        &self,
        store: &Self::Store,
        timing: Option<&TcpTiming>,
        reason: EndReason,
        payload: [&'a [u8]; 2],
        level: FeatureLevel,
    ) -> FlowRecord<'a>;
    /// Payload bytes kept so far per side (`full` only; zero elsewhere).
    fn payload_len(&self) -> [u16; 2];
    /// Counts `n` more payload bytes kept for `side` (`full` only).
    fn add_payload_len(&mut self, side: usize, n: u16);

    /// A closing flow (RST, or FIN both ways) waits out the linger only.
    #[inline]
    fn is_closing(&self) -> bool {
        self.state() & crate::state::state_bits::CLOSING != 0
    }
}

impl EntryStore for Wides {
    fn clear(&mut self) {
        Wides::clear(self)
    }
    fn bytes(&self) -> usize {
        Wides::bytes(self)
    }
}

impl TableEntry for FlowEntry {
    type Store = Wides;
    const TIMING_BESIDE: bool = true;

    fn vacant() -> Self {
        FlowEntry::empty()
    }
    #[inline]
    fn is_live(&self) -> bool {
        self.live != 0
    }
    fn occupy(&mut self, key: &FlowKey, _: &mut Wides) {
        self.key = *key;
        self.live = 1;
    }
    fn vacate(&mut self, store: &mut Wides) {
        self.live = 0;
        store.release(self);
    }
    #[inline]
    fn has_key(&self, key: &FlowKey, _: &Wides) -> bool {
        self.key == *key
    }
    #[inline]
    fn key(&self, _: &Wides) -> FlowKey {
        self.key
    }
    #[inline]
    fn wheel_prev(&self) -> u32 {
        self.wheel_prev
    }
    #[inline]
    fn wheel_next(&self) -> u32 {
        self.wheel_next
    }
    #[inline]
    fn wheel_slot(&self) -> u16 {
        self.wheel_slot
    }
    #[inline]
    fn set_wheel_prev(&mut self, prev: u32, slot: u16) {
        self.wheel_prev = prev;
        if prev == NIL {
            self.wheel_slot = slot;
        }
    }
    #[inline]
    fn set_wheel_next(&mut self, next: u32) {
        self.wheel_next = next;
    }
    /// The header line and the direction's line; at `full` the early-packet line (needed by
    /// most packets: the first ten of each flow; fetching it for the others costs bandwidth,
    /// not waiting).
    #[inline]
    fn prefetch(&self, side: usize, level: FeatureLevel) {
        mem_prefetch::prefetch_write_data::<_, 3>(&self.key);
        mem_prefetch::prefetch_write_data::<_, 3>(&self.dirs[side]);
        if level.is_full() {
            mem_prefetch::prefetch_write_data::<_, 3>(&self.early);
        }
    }
}

impl MeterEntry for FlowEntry {
    fn start(&mut self, d: &Decoded, sender: Side, ts: u64, store: &mut Wides) {
        FlowEntry::start(self, self.key, d, sender, ts, store);
    }
    #[inline]
    fn update(
        &mut self,
        d: &Decoded,
        sender: Side,
        ts: u64,
        wire_len: u32,
        store: &mut Wides,
        level: FeatureLevel,
        timing: Option<&mut TcpTiming>,
    ) {
        self.update_at(d, sender, ts, wire_len, store, level, timing);
    }
    fn reset_counters(&mut self, store: &mut Wides) {
        FlowEntry::reset_counters(self, store);
    }
    #[inline]
    fn state(&self) -> u8 {
        self.state
    }
    #[inline]
    fn last_ns(&self) -> u64 {
        self.last_ns
    }
    #[inline]
    fn first_ns(&self) -> u64 {
        FlowEntry::first_ns(self)
    }
    #[inline]
    fn is_empty_record(&self) -> bool {
        FlowEntry::is_empty_record(self)
    }
    fn record<'a>(
        &self,
        store: &Wides,
        timing: Option<&TcpTiming>,
        reason: EndReason,
        payload: [&'a [u8]; 2],
        level: FeatureLevel,
    ) -> FlowRecord<'a> {
        FlowRecord::from_entry(self, store, timing, reason, payload, level)
    }
    #[inline]
    fn payload_len(&self) -> [u16; 2] {
        self.payload_len
    }
    #[inline]
    fn add_payload_len(&mut self, side: usize, n: u16) {
        self.payload_len[side] += n;
    }
}
