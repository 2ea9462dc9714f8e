//! The `minimal` level's flow entry: what goProbe and nfdump keep (key, first and last packet,
//! packets and bytes per direction, TCP flag unions, the TCP close state) in one 64-byte cache
//! line, so that a packet reads and writes one line of flow state.
//!
//! The line holds an IPv4 key whole (addresses as 4 bytes, not IPv4-mapped 16); an IPv6 (or
//! other) key lives in the flow's [`MiniExtra`], as do counters that outgrow their narrow
//! fields and the tunnels of a flow that came through one: few flows need one.
use crate::config::FeatureLevel;
use crate::decode::Decoded;
use crate::entry::{EntryStore, MeterEntry, TableEntry};
use crate::key::{FlowKey, Side};
use crate::record::{DirectionRecord, EndReason, FlowRecord};
use crate::state::{self, Pool, NIL};
use crate::timing::TcpTiming;
use crate::tunnel::Tunnel;

/// [`MiniEntry::version`] of an entry whose key is in its [`MiniExtra`].
const KEY_IN_EXTRA: u8 = 0xff;
/// Bits of a one- or two-line entry's `seen`: the sides with a packet in the current record.
pub(crate) const SEEN_SIDES: u8 = 0b11;
/// Bit of a one- or two-line entry's `seen`: its `link` is the index of the flow's extra
/// ([`MiniExtra`], `StandardExtra`).
pub(crate) const HAS_EXTRA: u8 = 1 << 2;
/// Bit of [`MiniEntry::wheel_prev`]: the entry heads its wheel slot's list, whose number is in
/// the low bits (the table's slot numbers and entry indices are far below this bit).
const WHEEL_HEAD: u32 = 1 << 31;

/// The bytes an IPv4-mapped address starts with (`::ffff:0:0/96`).
const V4_MAPPED: [u8; 12] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff];

/// One flow at `minimal`, one cache line. Field order is the key's where it can be: bytes
/// 32..48 hold an IPv4 key as two words that compare with a [`FlowKey`]'s compact form.
#[derive(Clone, Copy, Debug, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C, align(64))]
pub(crate) struct MiniEntry {
    /// First packet of the current record.
    first_ns: u64,
    /// Last packet of the open record (either direction), for expiry and the record.
    last_ns: u64,
    /// Packets by sender side (low 32 bits; the rest in the extra).
    packets: [u32; 2],
    /// IP bytes by sender side (low 32 bits; the rest in the extra).
    ip_bytes: [u32; 2],
    /// The key's compact form ([`compact`]): low and high IPv4 address, ports, protocol,
    /// version (4; [`KEY_IN_EXTRA`] when the key is in the extra; 0 when the entry is free),
    /// VLAN.
    key: LineKey,
    /// Frame bytes less IP bytes by sender side while both sums fit 16 bits and the flow has
    /// no extra; else (bit [`HAS_EXTRA`] of `seen`) the extra's index, which holds them.
    link: u32,
    /// Union of the TCP flags by sender side.
    flags_or: [u8; 2],
    /// `state_bits`: initiator, SYN seen, FINs, RST, closing.
    state: u8,
    /// Sides seen in the current record, and [`HAS_EXTRA`].
    seen: u8,
    /// Timer-wheel links; `wheel_prev` is [`WHEEL_HEAD`] | slot for a list's head.
    wheel_prev: u32,
    wheel_next: u32,
}

/// What a minimal flow keeps outside its line, when it needs to.
#[derive(Clone, Copy, Default)]
pub(crate) struct MiniExtra {
    /// The key, when it has no compact form (not IPv4).
    key: FlowKey,
    /// High 32 bits of the packet and IP byte counts, by side.
    packets_hi: [u32; 2],
    ip_bytes_hi: [u32; 2],
    /// Frame bytes less IP bytes, by side (a frame can be shorter than its IP header says).
    link: [i64; 2],
    /// The outer tunnel of each side's first packet in the record.
    tunnels: [Tunnel; 2],
}

/// The extras of a minimal table's flows.
#[derive(Default)]
pub(crate) struct MiniStore {
    extras: Pool<MiniExtra>,
}

impl EntryStore for MiniStore {
    fn clear(&mut self) {
        self.extras.clear();
    }
    fn bytes(&self) -> usize {
        self.extras.bytes()
    }
}

/// The compact form of an IPv4 key (see [`MiniEntry::key`]); `None` for any other key.
#[inline]
fn compact(key: &FlowKey) -> Option<[u64; 2]> {
    let k = &key.0;
    if k[37] != 4 || k[..12] != V4_MAPPED || k[16..28] != V4_MAPPED {
        return None;
    }
    let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().expect("8 bytes"));
    let mut addrs = [0u8; 8];
    addrs[..4].copy_from_slice(&k[12..16]);
    addrs[4..].copy_from_slice(&k[28..32]);
    // Ports, protocol, version, VLAN: the key's last word as it is.
    Some([word(&addrs), word(&k[32..40])])
}

/// The key of a compact form.
fn expand(compact: [u64; 2]) -> FlowKey {
    let addrs = compact[0].to_ne_bytes();
    let mut k = FlowKey::default();
    k.0[..12].copy_from_slice(&V4_MAPPED);
    k.0[12..16].copy_from_slice(&addrs[..4]);
    k.0[16..28].copy_from_slice(&V4_MAPPED);
    k.0[28..32].copy_from_slice(&addrs[4..]);
    k.0[32..40].copy_from_slice(&compact[1].to_ne_bytes());
    k
}

/// Byte of the key's version in its compact form's second word.
const VERSION_BYTE: usize = 5;

/// A flow key as a one- or two-line entry holds it: an IPv4 key whole in two words ([`compact`]),
/// any other key in the entry's overflow record with a marker here. Shared by the `minimal`
/// and `standard` entries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(transparent)]
pub(crate) struct LineKey(pub [u64; 2]);

impl LineKey {
    /// No key: the entry is free.
    pub(crate) const FREE: LineKey = LineKey([0; 2]);

    /// Puts `key` in the line: `true` when it fits; `false` when the marker is in place and
    /// the key must live in the overflow record.
    #[inline]
    pub(crate) fn set(&mut self, key: &FlowKey) -> bool {
        match compact(key) {
            Some(c) => {
                self.0 = c;
                true
            }
            None => {
                let mut marker = [0u8; 8];
                marker[VERSION_BYTE] = KEY_IN_EXTRA;
                self.0 = [0, u64::from_ne_bytes(marker)];
                false
            }
        }
    }

    /// The key's IP version; [`KEY_IN_EXTRA`] when the key is elsewhere; 0 for a free entry.
    #[inline]
    fn version(&self) -> u8 {
        self.0[1].to_ne_bytes()[VERSION_BYTE]
    }

    /// An entry holds a key.
    #[inline]
    pub(crate) fn is_live(&self) -> bool {
        self.version() != 0
    }

    /// The key lives in the overflow record.
    #[inline]
    pub(crate) fn in_extra(&self) -> bool {
        self.version() == KEY_IN_EXTRA
    }

    /// Whether this is `key`; `extra` gives the overflow record's key.
    #[inline]
    pub(crate) fn is(&self, key: &FlowKey, extra: impl FnOnce() -> Option<FlowKey>) -> bool {
        match compact(key) {
            Some(c) => self.0 == c,
            None => self.in_extra() && extra().is_some_and(|x| x == *key),
        }
    }

    /// The whole key; `extra` gives the overflow record's key.
    pub(crate) fn key(&self, extra: impl FnOnce() -> Option<FlowKey>) -> FlowKey {
        if self.in_extra() {
            extra().unwrap_or_default()
        } else {
            expand(self.0)
        }
    }
}

/// A timer-wheel `prev` link that also names the slot of a list's head ([`WHEEL_HEAD`]).
pub(crate) mod head_link {
    use super::WHEEL_HEAD;
    use crate::state::NIL;

    /// The previous entry, [`NIL`] for a head.
    #[inline]
    pub(crate) fn prev(raw: u32) -> u32 {
        if raw & WHEEL_HEAD != 0 {
            NIL
        } else {
            raw
        }
    }

    /// The slot of a head.
    #[inline]
    pub(crate) fn slot(raw: u32) -> u16 {
        (raw & !WHEEL_HEAD) as u16
    }

    /// The link to `prev`, or (`prev` = [`NIL`]) the head of `slot`.
    #[inline]
    pub(crate) fn encode(prev: u32, slot: u16) -> u32 {
        if prev == NIL {
            WHEEL_HEAD | u32::from(slot)
        } else {
            prev
        }
    }
}

/// Adds `frame_less_ip` to `side`'s 16-bit half of `link`, if the sum fits; `false` when it
/// must move to the overflow record.
#[inline]
pub(crate) fn add_link16(link: &mut u32, side: usize, frame_less_ip: i64) -> bool {
    let shift = 16 * side;
    let sum = i64::from((*link >> shift) as u16) + frame_less_ip;
    if (0..=i64::from(u16::MAX)).contains(&sum) {
        *link = (*link & !(0xffff << shift)) | ((sum as u32) << shift);
        return true;
    }
    false
}

/// Methods a one- or two-line entry shares, for an entry with fields `packets`, `ip_bytes`
/// (`[u32; 2]`, low 32 bits), `link` (two 16-bit link-layer sums, or with [`HAS_EXTRA`] in
/// `seen` the index of its overflow record `$extra` in the store's `extras`, which has
/// `packets_hi`, `ip_bytes_hi` and `link: [i64; 2]`).
macro_rules! line_entry_methods {
    ($extra:ty, $store:ty) => {
        #[inline]
        fn extra<'s>(&self, store: &'s $store) -> Option<&'s $extra> {
            if self.seen & HAS_EXTRA != 0 {
                store.extras.get(self.link)
            } else {
                None
            }
        }

        /// The flow's extra, taken now if it has none (its link sums move into it).
        #[cold]
        #[inline(never)]
        fn extra_mut<'s>(&mut self, store: &'s mut $store) -> &'s mut $extra {
            if self.seen & HAS_EXTRA == 0 {
                let link = [self.link as u16, (self.link >> 16) as u16];
                self.link = NIL;
                self.seen |= HAS_EXTRA;
                let x = store.extras.get_or_take(&mut self.link);
                x.link = [i64::from(link[0]), i64::from(link[1])];
                return x;
            }
            store.extras.get_or_take(&mut self.link)
        }

        /// Counts a packet of `ip_len` IP bytes and `wire_len` frame bytes from `side`.
        #[inline]
        fn count_packet(&mut self, side: usize, ip_len: u32, wire_len: u32, store: &mut $store) {
            let (packets, c_packets) = self.packets[side].overflowing_add(1);
            let (ip_bytes, c_ip_bytes) = self.ip_bytes[side].overflowing_add(ip_len);
            self.packets[side] = packets;
            self.ip_bytes[side] = ip_bytes;
            if c_packets | c_ip_bytes {
                let x = self.extra_mut(store);
                x.packets_hi[side] += c_packets as u32;
                x.ip_bytes_hi[side] += c_ip_bytes as u32;
            }
            let frame_less_ip = i64::from(wire_len) - i64::from(ip_len);
            if self.seen & HAS_EXTRA == 0 && add_link16(&mut self.link, side, frame_less_ip) {
                return;
            }
            self.extra_mut(store).link[side] += frame_less_ip;
        }

        /// The record's initiator, and the record with its key, tunnel, times and end reason
        /// (the caller adds the counters).
        fn base_record<'a>(&self, store: &$store, reason: EndReason) -> (Side, FlowRecord<'a>) {
            let init = state::initiator(self.state);
            let tunnel = self
                .extra(store)
                .map_or_else(Tunnel::default, |x| state::record_tunnel(&x.tunnels, init));
            let times = if self.seen & SEEN_SIDES == 0 {
                [0, 0]
            } else {
                [MeterEntry::first_ns(self), MeterEntry::last_ns(self)]
            };
            let key = TableEntry::key(self, store);
            (init, FlowRecord::minimal(&key, init, tunnel, times, reason))
        }

        /// Exact packets, IP bytes and frame bytes of `side`.
        fn counts(&self, side: usize, store: &$store) -> [u64; 3] {
            let join = state::join;
            let x = self.extra(store);
            let packets = join(x.map_or(0, |x| x.packets_hi[side]), self.packets[side]);
            let ip_bytes = join(x.map_or(0, |x| x.ip_bytes_hi[side]), self.ip_bytes[side]);
            let link = match x {
                Some(x) => x.link[side],
                None => i64::from((self.link >> (16 * side)) as u16),
            };
            [packets, ip_bytes, ip_bytes.wrapping_add_signed(link)]
        }
    };
}
pub(crate) use line_entry_methods;

/// The [`TableEntry`] methods a one- or two-line entry shares: its [`LineKey`] `key` (a key
/// that is not compact in its extra's `key`) and its timer-wheel links `wheel_prev` (a
/// [`head_link`]) and `wheel_next`.
macro_rules! line_table_methods {
    ($store:ty) => {
        fn occupy(&mut self, key: &FlowKey, store: &mut $store) {
            self.seen = 0;
            self.link = 0;
            if !self.key.set(key) {
                self.extra_mut(store).key = *key;
            }
        }
        #[inline]
        fn is_live(&self) -> bool {
            self.key.is_live()
        }
        #[inline]
        fn has_key(&self, key: &FlowKey, store: &$store) -> bool {
            self.key.is(key, || self.extra(store).map(|x| x.key))
        }
        fn key(&self, store: &$store) -> FlowKey {
            self.key.key(|| self.extra(store).map(|x| x.key))
        }
        #[inline]
        fn wheel_prev(&self) -> u32 {
            head_link::prev(self.wheel_prev)
        }
        #[inline]
        fn wheel_next(&self) -> u32 {
            self.wheel_next
        }
        #[inline]
        fn wheel_slot(&self) -> u16 {
            head_link::slot(self.wheel_prev)
        }
        #[inline]
        fn set_wheel_prev(&mut self, prev: u32, slot: u16) {
            self.wheel_prev = head_link::encode(prev, slot);
        }
        #[inline]
        fn set_wheel_next(&mut self, next: u32) {
            self.wheel_next = next;
        }
    };
}
pub(crate) use line_table_methods;

impl MiniEntry {
    line_entry_methods!(MiniExtra, MiniStore);
}

impl TableEntry for MiniEntry {
    type Store = MiniStore;

    fn vacant() -> Self {
        MiniEntry {
            first_ns: 0,
            last_ns: 0,
            packets: [0; 2],
            ip_bytes: [0; 2],
            key: LineKey::FREE,
            link: 0,
            flags_or: [0; 2],
            state: 0,
            seen: 0,
            wheel_prev: NIL,
            wheel_next: NIL,
        }
    }

    fn vacate(&mut self, store: &mut MiniStore) {
        if self.seen & HAS_EXTRA != 0 {
            store.extras.release(&mut self.link);
        }
        self.seen = 0;
        self.link = 0;
        self.key = LineKey::FREE;
    }

    line_table_methods!(MiniStore);

    #[inline]
    fn prefetch(&self, _side: usize, _level: FeatureLevel) {
        mem_prefetch::prefetch_write_data::<_, 3>(self);
    }
}

impl MeterEntry for MiniEntry {
    fn start(&mut self, d: &Decoded, sender: Side, ts: u64, store: &mut MiniStore) {
        self.state = 0;
        self.reset_counters(store);
        self.last_ns = ts;
        state::orient_first(&mut self.state, d, sender);
    }

    #[inline]
    fn update(
        &mut self,
        d: &Decoded,
        sender: Side,
        ts: u64,
        wire_len: u32,
        store: &mut MiniStore,
        _level: FeatureLevel,
        _timing: Option<&mut TcpTiming>,
    ) {
        let side = sender as usize;
        if d.tcp_valid {
            state::learn_from_syn(&mut self.state, d, sender);
        }
        // Packets can arrive out of time order: first and last are the extremes.
        if self.seen & SEEN_SIDES == 0 {
            self.first_ns = ts;
        } else {
            self.first_ns = self.first_ns.min(ts);
        }
        self.last_ns = self.last_ns.max(ts);
        if self.seen & (1 << side) == 0 {
            self.seen |= 1 << side;
            if d.tunnel.is_some() {
                self.extra_mut(store).tunnels[side] = d.tunnel;
            }
        }
        self.count_packet(side, d.ip_len, wire_len, store);
        if d.tcp_valid {
            let f = d.tcp.flags;
            self.flags_or[side] |= f;
            state::note_close(&mut self.state, f, sender);
        }
    }

    fn reset_counters(&mut self, store: &mut MiniStore) {
        self.last_ns = 0;
        self.packets = [0; 2];
        self.ip_bytes = [0; 2];
        self.flags_or = [0; 2];
        self.first_ns = 0;
        if self.seen & HAS_EXTRA != 0 {
            if self.key.in_extra() {
                // The key stays; the counts and tunnels start again.
                let x = store.extras.get_or_take(&mut self.link);
                *x = MiniExtra {
                    key: x.key,
                    ..MiniExtra::default()
                };
                self.seen = HAS_EXTRA;
                return;
            }
            store.extras.release(&mut self.link);
        }
        self.link = 0;
        self.seen = 0;
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
        self.first_ns
    }
    #[inline]
    fn is_empty_record(&self) -> bool {
        self.seen & SEEN_SIDES == 0
    }

    fn record<'a>(
        &self,
        store: &MiniStore,
        _timing: Option<&TcpTiming>,
        reason: EndReason,
        _payload: [&'a [u8]; 2],
        _level: FeatureLevel,
    ) -> FlowRecord<'a> {
        let (init, base) = self.base_record(store, reason);
        let direction = |side: Side| {
            let [packets, ip_bytes, bytes] = self.counts(side as usize, store);
            DirectionRecord {
                packets,
                bytes,
                ip_bytes,
                tcp_flags: self.flags_or[side as usize],
                ..DirectionRecord::default()
            }
        };
        FlowRecord {
            fwd: direction(init),
            rev: direction(init.flip()),
            ..base
        }
    }

    #[inline]
    fn payload_len(&self) -> [u16; 2] {
        [0; 2]
    }
    /// Never called: payloads need `full` (the configuration refuses them elsewhere).
    #[inline]
    fn add_payload_len(&mut self, _side: usize, _n: u16) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entry_is_one_line() {
        assert_eq!(core::mem::size_of::<MiniEntry>(), 64);
        assert_eq!(core::mem::align_of::<MiniEntry>(), 64);
    }

    #[test]
    fn ipv4_keys_are_compact_and_come_back_whole() {
        let mut k = FlowKey::default();
        k.0[..12].copy_from_slice(&V4_MAPPED);
        k.0[12..16].copy_from_slice(&[10, 0, 0, 1]);
        k.0[16..28].copy_from_slice(&V4_MAPPED);
        k.0[28..32].copy_from_slice(&[192, 168, 1, 9]);
        k.0[32..40].copy_from_slice(&[0, 80, 0xc3, 0x50, 6, 4, 0, 7]);
        let c = compact(&k).expect("IPv4");
        assert_eq!(expand(c), k);
        assert_eq!(c[1].to_ne_bytes()[VERSION_BYTE], 4);
        let mut v6 = k;
        v6.0[37] = 6;
        assert_eq!(compact(&v6), None);
        let mut unmapped = k;
        unmapped.0[3] = 1;
        assert_eq!(compact(&unmapped), None);
    }

    #[test]
    fn ipv6_keys_live_in_the_extra_and_match_only_themselves() {
        let mut store = MiniStore::default();
        let mut v6 = FlowKey::default();
        v6.0[0] = 0x20;
        v6.0[37] = 6;
        let mut e = MiniEntry::vacant();
        assert!(!e.is_live());
        e.occupy(&v6, &mut store);
        assert!(e.is_live());
        assert!(e.has_key(&v6, &store));
        assert_eq!(e.key(&store), v6);
        let mut other = v6;
        other.0[1] = 1;
        assert!(!e.has_key(&other, &store));
        e.vacate(&mut store);
        assert!(!e.is_live());
    }

    #[test]
    fn link_sums_move_to_the_extra_exactly() {
        let mut store = MiniStore::default();
        let mut e = MiniEntry::vacant();
        let mut k = FlowKey::default();
        k.0[..12].copy_from_slice(&V4_MAPPED);
        k.0[16..28].copy_from_slice(&V4_MAPPED);
        k.0[37] = 4;
        e.occupy(&k, &mut store);
        let mut expected = 0i64;
        for i in 0..10_000i64 {
            // Mostly 14 bytes of Ethernet, sometimes a frame shorter than its IP length.
            let d = if i % 7 == 0 { -3 } else { 14 };
            e.count_packet(1, 100, (100 + d) as u32, &mut store);
            expected += d;
        }
        assert!(e.seen & HAS_EXTRA != 0);
        let [_, ip, frame] = e.counts(1, &store);
        assert_eq!(frame as i64 - ip as i64, expected);
        let [_, _, low] = e.counts(0, &store);
        assert_eq!(low, 0);
    }
}
