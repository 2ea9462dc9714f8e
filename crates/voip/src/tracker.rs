//! [`Tracker`]: the call table. Calls live in a slab indexed twice, by `Call-ID` (for SIP) and
//! by media endpoint (the address and port SDP said RTP and RTCP go to), and RTP streams in a
//! second slab indexed by (source, destination, SSRC). Streams whose endpoints no SDP named are
//! kept as candidates and become orphan streams once their sequence numbers look like RTP.
//! Everything runs on packet time; both tables are bounded (oldest call evicted, counted).
//! Timeouts are kept in deadline queues, so the once-a-second sweep looks only at what is due
//! (scanning every call and stream each second was most of the time at 100,000 calls).
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, SocketAddr, SocketAddrV4};

use trawl_flow::hash::SeededFxBuild;

use crate::codec::{self, Codec};
use crate::event::SipEvent;
use crate::hash::FxMap;
use crate::index::SlotIndex;
use crate::record::{CallRecord, StreamRecord};
use crate::rtp::{self, Rtcp, RtpHeader};
use crate::sip::name_addr;
use crate::slab::Slab;
use crate::stats::{Clock, StreamMeter, StreamTally, StreamTotals};
use crate::Error;

const SECOND: u64 = 1_000_000_000;

/// Settings of the call table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrackerConfig {
    /// Calls held at once; a new call beyond it evicts the oldest (written as `evicted`).
    pub max_calls: usize,
    /// Streams held at once (call streams, orphans and candidates); beyond it new candidates
    /// are not tracked and new call streams evict nothing (both counted).
    pub max_streams: usize,
    /// A call with no SIP and no RTP for this long ends as `timeout`.
    pub call_timeout_ns: u64,
    /// After BYE, CANCEL or a failure, the call waits this long for the last packets.
    pub linger_ns: u64,
    /// An orphan stream idle this long is written; a candidate is forgotten.
    pub stream_timeout_ns: u64,
    /// Packets in sequence (each within `max_seq_gap` of the last) before a stream without
    /// signalling counts as an orphan RTP stream.
    pub orphan_packets: u64,
    /// Largest sequence step a candidate may take per packet.
    pub max_seq_gap: i64,
    /// Measure streams without signalling at all.
    pub orphans: bool,
}

impl Default for TrackerConfig {
    fn default() -> Self {
        TrackerConfig {
            max_calls: 1 << 20,
            max_streams: 1 << 22,
            call_timeout_ns: 300 * SECOND,
            linger_ns: 2 * SECOND,
            stream_timeout_ns: 60 * SECOND,
            orphan_packets: 4,
            max_seq_gap: 10,
            orphans: true,
        }
    }
}

impl TrackerConfig {
    /// Checks the bounds.
    pub fn check(&self) -> Result<(), Error> {
        if self.max_calls == 0 || self.max_calls > 1 << 26 {
            return Err(Error::Setting("max_calls"));
        }
        if self.max_streams == 0 || self.max_streams > 1 << 28 {
            return Err(Error::Setting("max_streams"));
        }
        if self.orphan_packets == 0 {
            return Err(Error::Setting("orphan_packets"));
        }
        if self.max_seq_gap < 1 {
            return Err(Error::Setting("max_seq_gap"));
        }
        Ok(())
    }
}

/// Counters of the table (what a block shows).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrackerStats {
    /// SIP messages seen.
    pub sip_messages: u64,
    /// SIP messages of no call (REGISTER, OPTIONS, unknown Call-IDs...).
    pub sip_outside_calls: u64,
    /// SDP bodies that could not be read.
    pub bad_sdp: u64,
    /// Calls started (first INVITE of a Call-ID).
    pub calls: u64,
    /// Calls evicted because the table was full.
    pub calls_evicted: u64,
    /// RTP packets counted in streams.
    pub rtp_packets: u64,
    /// RTCP packets read.
    pub rtcp_packets: u64,
    /// Streams not tracked because the stream table was full.
    pub streams_refused: u64,
    /// Calls and streams currently held.
    pub active_calls: u64,
    /// Streams currently held (candidates included).
    pub active_streams: u64,
}

/// What ended: written by the caller (block, CLI).
#[derive(Debug, Default)]
pub struct Output {
    /// Finished calls.
    pub calls: Vec<CallRecord>,
    /// Finished streams (of those calls, and orphans).
    pub streams: Vec<StreamRecord>,
}

impl Output {
    /// Records held (calls and streams).
    pub fn len(&self) -> usize {
        self.calls.len() + self.streams.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.calls.is_empty() && self.streams.is_empty()
    }
}

#[derive(Debug)]
struct Call {
    id: Box<str>,
    generation: u64,
    from: String,
    to: String,
    from_tag: String,
    caller: SocketAddr,
    callee: SocketAddr,
    caller_agent: String,
    callee_agent: String,
    tcp: bool,
    invite_cseq: u32,
    invite_ns: u64,
    ringing_ns: Option<u64>,
    answer_ns: Option<u64>,
    end_ns: Option<u64>,
    end_reason: &'static str,
    status: u16,
    reinvites: u32,
    /// Last SIP message (RTP: the streams' `last_ns`, read when the deadline is due).
    last_ns: u64,
    /// The deadline of its entry in the call queue (`u64::MAX`: none).
    due_ns: u64,
    /// Media endpoints SDP named, each with its payload type map.
    endpoints: Vec<(SocketAddr, bool)>,
    rtpmap: Vec<(u8, Codec)>,
    streams: Vec<u32>,
}

/// A stream: who it is, its call, its deadline and RTCP. What its RTP packets read and write
/// is in [`HotStream`] and [`StreamTally`], in slabs of their own at the same slot.
#[derive(Debug)]
struct Stream {
    generation: u64,
    /// The deadline of its entry in the stream queue (streams without a call only).
    due_ns: u64,
    src: SocketAddr,
    dst: SocketAddr,
    ssrc: u32,
    call: Option<u32>,
    /// What RTCP said about the stream: most streams of a busy link never get a report.
    rtcp: Option<Box<RtcpState>>,
}

/// What every RTP packet of a stream reads and writes, and nothing else: the key it is found
/// by, the clock of its payload type, its flags and its [`StreamMeter`], in three cache lines
/// (192 bytes, aligned) of a slab of their own. At 100,000 calls every packet's stream is a
/// cache miss; the whole stream was 416 bytes (7 lines) touched all over (bench/RESULTS.md,
/// "VoIP").
#[derive(Clone, Debug, Default)]
#[repr(C, align(64))]
struct HotStream {
    /// The key packed ([`packed_key`]); 0 for a key with an IPv6 address, which is then
    /// compared in [`Stream`].
    key: u128,
    /// The clock of `clock_pt`.
    clock: Clock,
    v6: bool,
    /// Attached to a call ([`Stream::call`] is set).
    in_call: bool,
    /// Written when it ends: in a call, or RTP by its sequence numbers.
    confirmed: bool,
    /// In the stream queue (a stream without a call, from its first packet).
    queued: bool,
    /// The payload type `clock` is for (255: none yet).
    clock_pt: u8,
    meter: StreamMeter,
}

impl HotStream {
    /// Hints the CPU to fetch the entry's three lines (a test checks they are three).
    #[inline]
    fn prefetch(&self) {
        let (_, block, delta) = self.meter.line_fields();
        mem_prefetch::prefetch_write_data::<_, 3>(&self.key);
        mem_prefetch::prefetch_write_data::<_, 3>(block);
        mem_prefetch::prefetch_write_data::<_, 3>(delta);
    }
}

/// RTCP's reports about a stream ([`Stream::rtcp`]).
#[derive(Debug, Default)]
struct RtcpState {
    reports: u32,
    lost: Option<i32>,
    fraction: Option<u8>,
    jitter: Option<u32>,
    rtt_ms: Option<f64>,
    /// Last SR this source sent: (NTP middle 32 bits, capture time).
    last_sr: Option<(u32, u64)>,
}

type StreamKey = (SocketAddr, SocketAddr, u32);

/// A key of two IPv4 endpoints in 128 bits (addresses, ports, SSRC), compared at once; `None`
/// with an IPv6 address.
#[inline]
fn packed_key(key: &StreamKey) -> Option<u128> {
    match (key.0, key.1) {
        (SocketAddr::V4(a), SocketAddr::V4(b)) => Some(packed_ends(a, b) | u128::from(key.2)),
        _ => None,
    }
}

/// Two IPv4 endpoints as [`packed_key`] packs them, the SSRC's bits 0.
#[inline]
fn packed_ends(a: SocketAddrV4, b: SocketAddrV4) -> u128 {
    u128::from(a.ip().to_bits()) << 96
        | u128::from(b.ip().to_bits()) << 64
        | u128::from(a.port()) << 48
        | u128::from(b.port()) << 32
}

/// What [`Tracker::on_packets`] does with a packet ([`Packets::push`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacketKind {
    /// A UDP datagram that is not SIP: RTP, RTCP or neither ([`Tracker::on_udp`]).
    Media,
    /// Another packet (TCP, SIP): it only moves packet time on ([`Tracker::advance`]).
    Other,
    /// Not decoded: nothing, but the SIP before it is applied before it all the same.
    Ignored,
}

/// Packets for [`Tracker::on_packets`], in order: what each packet of a capture batch is
/// ([`PacketKind`]), its time, its endpoints and where its UDP payload lies in the batch's
/// bytes, which are not copied. Two IPv4 endpoints are kept packed as the stream table keys
/// them, so that an RTP packet's key is its SSRC added in (bench/RESULTS.md, "VoIP": the
/// 64 bytes of two `SocketAddr`s were copied three times per packet between the decoder and
/// the table); other pairs are kept beside.
#[derive(Clone, Debug, Default)]
pub struct Packets {
    refs: Vec<PacketRef>,
    /// The endpoints of the packets with an IPv6 address, which their `ends` index.
    wide: Vec<(SocketAddr, SocketAddr)>,
}

/// One packet of [`Packets`].
#[derive(Clone, Copy, Debug)]
struct PacketRef {
    ts_ns: u64,
    /// Two IPv4 endpoints packed as [`packed_key`] packs them (the SSRC's bits 0); with an
    /// IPv6 address, the index of the pair in [`Packets::wide`].
    ends: u128,
    /// The payload: `len` bytes at `start` of the buffer given with the packets.
    start: u32,
    len: u32,
    kind: PacketKind,
    wide: bool,
}

/// A packet's endpoints as [`Tracker::take`] reads them.
#[derive(Clone, Copy, Debug)]
enum Ends {
    /// Packed ([`PacketRef::ends`]).
    V4(u128),
    /// Any other pair.
    Wide(SocketAddr, SocketAddr),
}

impl Ends {
    #[inline]
    fn of(src: SocketAddr, dst: SocketAddr) -> Ends {
        match packed_key(&(src, dst, 0)) {
            Some(k) => Ends::V4(k),
            None => Ends::Wide(src, dst),
        }
    }

    /// Source and destination.
    fn addrs(self) -> (SocketAddr, SocketAddr) {
        match self {
            Ends::V4(k) => {
                let ip = |bits: u128| std::net::Ipv4Addr::from_bits(bits as u32);
                (
                    SocketAddr::from((ip(k >> 96), (k >> 48) as u16)),
                    SocketAddr::from((ip(k >> 64), (k >> 32) as u16)),
                )
            }
            Ends::Wide(src, dst) => (src, dst),
        }
    }
}

impl Packets {
    /// Packets held.
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    /// True when it holds none.
    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    /// Empties it (keeping its allocations).
    pub fn clear(&mut self) {
        self.refs.clear();
        self.wide.clear();
    }

    /// Adds a packet from `src` to `dst` at `ts_ns`, of `kind`, whose UDP payload is the
    /// `len` bytes at `start` of the buffer that [`Tracker::on_packets`] will be given (a
    /// range beyond that buffer, or beyond 4 GiB, is taken as an empty payload).
    #[inline]
    pub fn push(
        &mut self,
        ts_ns: u64,
        src: SocketAddr,
        dst: SocketAddr,
        start: usize,
        len: usize,
        kind: PacketKind,
    ) {
        let (ends, wide) = match Ends::of(src, dst) {
            Ends::V4(k) => (k, false),
            Ends::Wide(src, dst) => {
                self.wide.push((src, dst));
                (self.wide.len() as u128 - 1, true)
            }
        };
        self.push_ref(ts_ns, ends, wide, start, len, kind);
    }

    /// [`Packets::push`] of two IPv4 endpoints (the decoder's common case: no `SocketAddr`
    /// put together only to be taken apart).
    #[inline]
    pub fn push_v4(
        &mut self,
        ts_ns: u64,
        (src, dst): (SocketAddrV4, SocketAddrV4),
        start: usize,
        len: usize,
        kind: PacketKind,
    ) {
        self.push_ref(ts_ns, packed_ends(src, dst), false, start, len, kind);
    }

    #[inline]
    fn push_ref(
        &mut self,
        ts_ns: u64,
        ends: u128,
        wide: bool,
        start: usize,
        len: usize,
        kind: PacketKind,
    ) {
        let (start, len) = match (u32::try_from(start), u32::try_from(len)) {
            (Ok(s), Ok(l)) => (s, l),
            _ => (0, 0),
        };
        self.refs.push(PacketRef {
            ts_ns,
            ends,
            start,
            len,
            kind,
            wide,
        });
    }

    /// Adds a packet that was not decoded ([`PacketKind::Ignored`]).
    #[inline]
    pub fn push_ignored(&mut self, ts_ns: u64) {
        self.refs.push(PacketRef {
            ts_ns,
            ends: 0,
            start: 0,
            len: 0,
            kind: PacketKind::Ignored,
            wide: false,
        });
    }

    /// A packet's endpoints.
    #[inline]
    fn ends(&self, p: &PacketRef) -> Ends {
        if p.wide {
            let (src, dst) = self.wide[p.ends as usize];
            Ends::Wide(src, dst)
        } else {
            Ends::V4(p.ends)
        }
    }
}

/// A packet's payload in `bytes` (empty when the range is not in it).
#[inline]
fn payload_of<'b>(bytes: &'b [u8], p: &PacketRef) -> &'b [u8] {
    let start = p.start as usize;
    bytes.get(start..start + p.len as usize).unwrap_or_default()
}

/// Packets between the stages of [`Tracker::on_packets`]: enough stream lookups in flight to
/// hide memory latency, few enough that what was prefetched is still cached when used.
const LEAD: usize = 8;

/// A deadline queue: (the instant after which the entry is due, slot, generation), earliest
/// first. An entry is live while its slot holds the same generation with the same `due_ns`;
/// others are stale and dropped when they come up. A deadline that moves later (more
/// activity) is found out when the entry comes up and pushed again, one that moves earlier
/// (BYE) pushes a new entry.
type DueQueue = BinaryHeap<Reverse<(u64, u32, u64)>>;

/// The call table.
pub struct Tracker {
    cfg: TrackerConfig,
    calls: Slab<Option<Call>>,
    free_calls: Vec<u32>,
    by_call_id: FxMap<Box<str>, u32>,
    /// Endpoint -> (call, is RTCP).
    by_endpoint: FxMap<SocketAddr, (u32, bool)>,
    /// Calls in creation order, for eviction: (slot, generation).
    order: VecDeque<(u32, u64)>,
    generation: u64,
    call_due: DueQueue,
    streams: Slab<Option<Stream>>,
    /// Each stream's packet state, at its slot in `streams` (stale at a free slot).
    hot: Slab<HotStream>,
    tallies: Slab<StreamTally>,
    stream_due: DueQueue,
    /// Slots found due by a sweep (kept to avoid allocating each second).
    due_slots: Vec<u32>,
    free_streams: Vec<u32>,
    /// Streams by key (src, dst, SSRC), hashed by [`Tracker::key_hash`].
    by_stream: SlotIndex,
    seed: SeededFxBuild,
    /// Scratch of [`Tracker::on_packets`]: each packet's stream key hash.
    hashes: Vec<Option<u64>>,
    by_ssrc: FxMap<u32, u32>,
    clock_ns: u64,
    next_sweep_ns: u64,
    stats: TrackerStats,
    rtcp: Rtcp,
    /// Set while [`Tracker::finish_in_parts`] empties the table: the indexes are dropped whole
    /// at its end instead of entry by entry (at 100,000 calls, 200,000 streams' removals from
    /// the stream and SSRC indexes were each a cache miss).
    finishing: bool,
}

impl Tracker {
    /// An empty table. The slabs grow as calls come, up to the configured sizes.
    pub fn new(cfg: TrackerConfig) -> Result<Tracker, Error> {
        cfg.check()?;
        Ok(Tracker {
            cfg,
            calls: Slab::default(),
            free_calls: Vec::new(),
            by_call_id: FxMap::default(),
            by_endpoint: FxMap::default(),
            order: VecDeque::new(),
            generation: 0,
            call_due: DueQueue::new(),
            streams: Slab::default(),
            hot: Slab::default(),
            tallies: Slab::default(),
            stream_due: DueQueue::new(),
            due_slots: Vec::new(),
            free_streams: Vec::new(),
            by_stream: SlotIndex::default(),
            seed: SeededFxBuild::default(),
            hashes: Vec::new(),
            by_ssrc: FxMap::default(),
            clock_ns: 0,
            next_sweep_ns: 0,
            stats: TrackerStats::default(),
            rtcp: Rtcp::default(),
            finishing: false,
        })
    }

    /// Counters so far.
    pub fn stats(&self) -> TrackerStats {
        TrackerStats {
            active_calls: self.by_call_id.len() as u64,
            active_streams: self.by_stream.len() as u64,
            ..self.stats
        }
    }

    /// The Call-IDs of the calls in progress (the API's active calls).
    pub fn active_calls(&self) -> impl Iterator<Item = &str> {
        self.by_call_id.keys().map(|k| &**k)
    }

    /// The calls in progress as records, without ending them (the API's active calls):
    /// `end_reason` is `active`, `end_ns` the last SIP or RTP packet so far, the streams and
    /// worst MOS those measured so far.
    pub fn active_records(&self) -> Vec<CallRecord> {
        let mut records = Vec::with_capacity(self.by_call_id.len());
        for call in self.calls.iter().flatten() {
            let mut worst: Option<f64> = None;
            let mut packets = 0;
            for &s in &call.streams {
                if let Some(stream) = self.streams[s as usize].as_ref() {
                    let rec = self.stream_record(s, stream, Some(call));
                    packets += rec.packets;
                    worst = Some(worst.map_or(rec.mos, |w: f64| w.min(rec.mos)));
                }
            }
            let last_ns = self.call_last_ns(call);
            let mut rec = call_record(call, last_ns, call.streams.len() as u32, packets, worst);
            if call.end_ns.is_none() {
                rec.end_reason = "active";
            }
            records.push(rec);
        }
        records.sort_by_key(|r| r.invite_ns);
        records
    }

    /// Moves packet time on; ends calls and streams whose time is up.
    #[inline]
    pub fn advance(&mut self, now_ns: u64, out: &mut Output) {
        self.clock_ns = self.clock_ns.max(now_ns);
        if self.clock_ns < self.next_sweep_ns {
            return;
        }
        self.next_sweep_ns = self.clock_ns + SECOND;
        self.sweep(out);
    }

    /// Writes everything still held (end of input); calls in progress end as `active_at_end`.
    pub fn finish(&mut self, out: &mut Output) {
        self.finish_as("active_at_end", out);
    }

    /// Writes everything still held; calls in progress (not yet ended by BYE, CANCEL or a
    /// failure) end as `reason` (`shutdown` when a live monitor stops).
    pub fn finish_as(&mut self, reason: &'static str, out: &mut Output) {
        self.finish_in_parts(reason, out, usize::MAX, |_| {});
    }

    /// [`Tracker::finish_as`] in parts: `part(out)` is called each time `out` holds `records`
    /// records or more, to take them away, so that the records of a full table are never
    /// all held at once (100,000 calls in progress and their streams were 1.4 GB).
    pub fn finish_in_parts(
        &mut self,
        reason: &'static str,
        out: &mut Output,
        records: usize,
        mut part: impl FnMut(&mut Output),
    ) {
        self.finishing = true;
        for slot in 0..self.calls.len() as u32 {
            let open = match &self.calls[slot as usize] {
                Some(c) => c.end_ns.is_none(),
                None => continue,
            };
            self.close_call(slot, open.then_some(reason), out);
            if out.len() >= records {
                part(out);
            }
        }
        for slot in 0..self.streams.len() as u32 {
            self.close_stream(slot, out);
            if out.len() >= records {
                part(out);
            }
        }
        // Every call and stream is closed: the indexes and queues are emptied whole.
        self.finishing = false;
        self.by_call_id = FxMap::default();
        self.by_endpoint = FxMap::default();
        self.by_stream = SlotIndex::default();
        self.by_ssrc = FxMap::default();
        self.order.clear();
        self.call_due.clear();
        self.stream_due.clear();
    }

    /// Ends the calls and orphan streams whose time is up, in slot order (as a scan of the
    /// tables would find them), calls first. Once a second of packet time: kept out of
    /// [`Tracker::advance`], which every packet calls.
    #[inline(never)]
    fn sweep(&mut self, out: &mut Output) {
        let now = self.clock_ns;
        let mut due = std::mem::take(&mut self.due_slots);
        due.clear();
        while let Some(&Reverse((at, slot, generation))) = self.call_due.peek() {
            if at >= now {
                break;
            }
            self.call_due.pop();
            let Some(c) = &self.calls[slot as usize] else {
                continue;
            };
            if c.generation != generation || c.due_ns != at {
                continue;
            }
            let deadline = self.call_deadline(c);
            if now > deadline {
                due.push(slot);
            } else {
                self.reschedule_call(slot, deadline);
            }
        }
        due.sort_unstable();
        for &slot in &due {
            let reason = match &self.calls[slot as usize] {
                Some(c) => c.end_ns.is_none().then_some("timeout"),
                None => continue,
            };
            self.close_call(slot, reason, out);
        }
        due.clear();
        while let Some(&Reverse((at, slot, generation))) = self.stream_due.peek() {
            if at >= now {
                break;
            }
            self.stream_due.pop();
            let Some(s) = self.streams[slot as usize].as_mut() else {
                continue;
            };
            // A stream that joined a call ends with it.
            if s.generation != generation || s.due_ns != at || s.call.is_some() {
                continue;
            }
            let last_ns = self.hot[slot as usize].meter.last_ns;
            let deadline = last_ns.saturating_add(self.cfg.stream_timeout_ns);
            if now > deadline {
                due.push(slot);
            } else {
                s.due_ns = deadline;
                self.stream_due.push(Reverse((deadline, slot, generation)));
            }
        }
        due.sort_unstable();
        for &slot in &due {
            self.close_stream(slot, out);
        }
        self.due_slots = due;
    }

    /// The instant after which a call is done: its end and the linger, or its last SIP or
    /// RTP and the call timeout.
    fn call_deadline(&self, c: &Call) -> u64 {
        match c.end_ns {
            // After a 401/407 challenge the INVITE usually comes again with credentials,
            // once the user or phone has supplied them (sometimes many seconds later), and
            // a CANCEL still awaits the INVITE's final response (487, or a failure): such
            // calls wait as long as an unanswered one would.
            Some(end) if matches!(c.status, 0 | 401 | 407) => {
                end.saturating_add(self.cfg.linger_ns.max(self.cfg.call_timeout_ns))
            }
            Some(end) => end.saturating_add(self.cfg.linger_ns),
            None => self
                .call_last_ns(c)
                .saturating_add(self.cfg.call_timeout_ns),
        }
    }

    /// A call's last SIP message or RTP packet.
    fn call_last_ns(&self, c: &Call) -> u64 {
        c.streams
            .iter()
            .filter(|&&s| self.streams[s as usize].is_some())
            .map(|&s| self.hot[s as usize].meter.last_ns)
            .fold(c.last_ns, u64::max)
    }

    fn reschedule_call(&mut self, slot: u32, deadline: u64) {
        if let Some(c) = self.calls[slot as usize].as_mut() {
            c.due_ns = deadline;
            self.call_due.push(Reverse((deadline, slot, c.generation)));
        }
    }

    /// After SIP changed a call: its deadline may have come closer (BYE, CANCEL, a failure).
    fn schedule_call(&mut self, slot: u32) {
        let Some(c) = &self.calls[slot as usize] else {
            return;
        };
        let deadline = self.call_deadline(c);
        if deadline < c.due_ns {
            self.reschedule_call(slot, deadline);
        }
    }

    /// Takes one SIP message into its dialog.
    pub fn on_sip(&mut self, ev: &SipEvent, out: &mut Output) {
        self.stats.sip_messages += 1;
        self.stats.bad_sdp += ev.bad_sdp as u64;
        self.advance(ev.ts_ns, out);
        let slot = match self.by_call_id.get(ev.call_id.as_str()) {
            Some(&slot) => slot,
            None if ev.is("INVITE") => self.new_call(ev, out),
            None => {
                self.stats.sip_outside_calls += 1;
                return;
            }
        };
        let Some(call) = self.calls[slot as usize].as_mut() else {
            return;
        };
        call.last_ns = call.last_ns.max(ev.ts_ns);
        match ev.method.as_deref() {
            Some("INVITE") if ev.cseq > call.invite_cseq => {
                if call.answer_ns.is_some() {
                    call.reinvites += 1;
                } else {
                    // The INVITE again after a 401/407 challenge: the same call goes on.
                    call.invite_cseq = ev.cseq;
                    call.end_ns = None;
                    call.end_reason = "active_at_end";
                }
            }
            Some("BYE") if call.end_ns.is_none() => {
                call.end_ns = Some(ev.ts_ns);
                let by_caller = name_addr(&ev.from).tag == call.from_tag
                    && !call.from_tag.is_empty()
                    || (call.from_tag.is_empty() && ev.src == call.caller);
                call.end_reason = if by_caller {
                    "bye_caller"
                } else {
                    "bye_callee"
                };
            }
            Some("CANCEL") if call.end_ns.is_none() && call.answer_ns.is_none() => {
                call.end_ns = Some(ev.ts_ns);
                call.end_reason = "cancel";
            }
            None if ev.cseq_method == "INVITE" => Self::invite_response(call, ev),
            _ => {}
        }
        if !ev.media.is_empty() {
            self.add_media(slot, ev);
        }
        self.schedule_call(slot);
    }

    fn invite_response(call: &mut Call, ev: &SipEvent) {
        if call.callee_agent.is_empty() && ev.src != call.caller {
            call.callee_agent.clone_from(&ev.user_agent);
        }
        match ev.code {
            180 | 183 if call.ringing_ns.is_none() => call.ringing_ns = Some(ev.ts_ns),
            200..=299 if call.answer_ns.is_none() && ev.cseq == call.invite_cseq => {
                call.answer_ns = Some(ev.ts_ns);
                call.status = ev.code;
            }
            300..=699 if call.answer_ns.is_none() && ev.cseq == call.invite_cseq => {
                call.status = ev.code;
                if matches!(ev.code, 401 | 407) {
                    // A challenge: the caller usually sends the INVITE again with credentials;
                    // the call ends as a failure if it does not (timeout keeps the status).
                    call.end_ns.get_or_insert(ev.ts_ns);
                    call.end_reason = "failure";
                } else if call.end_ns.is_none() {
                    call.end_ns = Some(ev.ts_ns);
                    call.end_reason = "failure";
                } else if call.end_reason == "cancel" && ev.code != 487 {
                    call.end_reason = "failure";
                }
            }
            _ => {}
        }
    }

    fn new_call(&mut self, ev: &SipEvent, out: &mut Output) -> u32 {
        while self.by_call_id.len() >= self.cfg.max_calls {
            let Some((slot, generation)) = self.order.pop_front() else {
                break;
            };
            let live = matches!(&self.calls[slot as usize], Some(c) if c.generation == generation);
            if live {
                self.stats.calls_evicted += 1;
                self.close_call(slot, Some("evicted"), out);
            }
        }
        self.stats.calls += 1;
        self.generation += 1;
        let from = name_addr(&ev.from);
        let call = Call {
            id: ev.call_id.as_str().into(),
            generation: self.generation,
            from: ev.from.clone(),
            to: ev.to.clone(),
            from_tag: from.tag.to_string(),
            caller: ev.src,
            callee: ev.dst,
            caller_agent: ev.user_agent.clone(),
            callee_agent: String::new(),
            tcp: ev.tcp,
            invite_cseq: ev.cseq,
            invite_ns: ev.ts_ns,
            ringing_ns: None,
            answer_ns: None,
            end_ns: None,
            end_reason: "active_at_end",
            status: 0,
            reinvites: 0,
            last_ns: ev.ts_ns,
            due_ns: u64::MAX,
            endpoints: Vec::new(),
            rtpmap: Vec::new(),
            streams: Vec::new(),
        };
        let slot = match self.free_calls.pop() {
            Some(s) => {
                self.calls[s as usize] = Some(call);
                s
            }
            None => {
                self.calls.push(Some(call));
                self.calls.len() as u32 - 1
            }
        };
        self.by_call_id.insert(ev.call_id.as_str().into(), slot);
        self.order.push_back((slot, self.generation));
        slot
    }

    /// Registers the RTP and RTCP endpoints of an offer or answer.
    fn add_media(&mut self, slot: u32, ev: &SipEvent) {
        for m in &ev.media {
            let Some(addr) = m.addr else { continue };
            if m.port == 0 || !m.proto.to_ascii_uppercase().starts_with("RTP/") {
                continue;
            }
            let Some(call) = self.calls[slot as usize].as_mut() else {
                return;
            };
            for (pt, codec) in &m.rtpmap {
                if !call.rtpmap.iter().any(|(p, _)| p == pt) {
                    call.rtpmap.push((*pt, codec.clone()));
                }
            }
            for (port, rtcp) in [(m.port, false), (m.rtcp_port, true)] {
                let ep = SocketAddr::new(addr, port);
                if let Some(&(old, _)) = self.by_endpoint.get(&ep) {
                    if old != slot {
                        self.move_endpoint(ep, old);
                    }
                }
                self.by_endpoint.insert(ep, (slot, rtcp));
                if let Some(call) = self.calls[slot as usize].as_mut() {
                    if !call.endpoints.contains(&(ep, rtcp)) {
                        call.endpoints.push((ep, rtcp));
                    }
                }
            }
        }
    }

    /// The endpoint `ep` of call `old` is now another call's (a media port reused, as by
    /// consecutive calls of one phone): the old call keeps the streams it measured, but their
    /// later packets start new streams, which join the new call.
    fn move_endpoint(&mut self, ep: SocketAddr, old: u32) {
        let Some(c) = self.calls[old as usize].as_mut() else {
            return;
        };
        c.endpoints.retain(|(e, _)| *e != ep);
        for &st in &c.streams {
            if let Some(s) = self.streams[st as usize].as_ref() {
                let hash = key_hash(&self.seed, &(s.src, s.dst, s.ssrc));
                if s.src == ep || s.dst == ep {
                    self.by_stream.remove(hash, st);
                }
            }
        }
    }

    /// Takes one UDP datagram that is not SIP: RTP or RTCP of a call, an orphan stream
    /// candidate, or nothing.
    pub fn on_udp(
        &mut self,
        ts_ns: u64,
        src: SocketAddr,
        dst: SocketAddr,
        payload: &[u8],
        out: &mut Output,
    ) {
        let ends = Ends::of(src, dst);
        let hash = self.media_hash(ends, payload);
        self.take(ts_ns, ends, payload, hash, out);
    }

    /// Takes packets in order, as [`Tracker::on_udp`] and [`Tracker::advance`] would one by
    /// one ([`PacketKind`]); `before(table, ts_ns, out)` is called before each packet
    /// is taken (to apply the SIP messages up to its time). A software pipeline: packet
    /// `i + 2 * LEAD` is hashed and its index line prefetched, `i + LEAD` has its stream's
    /// `HotStream` lines prefetched, and packet `i` is taken: at 100,000 calls every RTP
    /// packet's stream is a cache miss otherwise. The early stages only read and prefetch,
    /// so the result is the same as one by one.
    pub fn on_packets(
        &mut self,
        packets: &Packets,
        bytes: &[u8],
        out: &mut Output,
        mut before: impl FnMut(&mut Tracker, u64, &mut Output),
    ) {
        let mut hashes = std::mem::take(&mut self.hashes);
        hashes.clear();
        let refs = &packets.refs[..];
        let n = refs.len();
        for step in 0..n + 2 * LEAD {
            if let Some(p) = refs.get(step) {
                let hash = match p.kind {
                    PacketKind::Media => self.media_hash(packets.ends(p), payload_of(bytes, p)),
                    _ => None,
                };
                if let Some(h) = hash {
                    self.by_stream.prefetch(h);
                }
                hashes.push(hash);
            }
            if let Some(Some(h)) = step.checked_sub(LEAD).and_then(|i| hashes.get(i)) {
                self.by_stream.candidates(*h, |slot| {
                    if let Some(e) = self.hot.get(slot as usize) {
                        e.prefetch();
                    }
                });
            }
            if let Some(i) = step.checked_sub(2 * LEAD) {
                let p = &refs[i];
                before(self, p.ts_ns, out);
                match p.kind {
                    PacketKind::Media => {
                        let payload = payload_of(bytes, p);
                        self.take(p.ts_ns, packets.ends(p), payload, hashes[i], out)
                    }
                    PacketKind::Other => self.advance(p.ts_ns, out),
                    PacketKind::Ignored => {}
                }
            }
        }
        self.hashes = hashes;
    }

    /// The stream key hash of a datagram that may be RTP (what [`rtp::parse_rtp`] needs
    /// first: 12 bytes, version 2), `None` for others.
    #[inline]
    fn media_hash(&self, ends: Ends, b: &[u8]) -> Option<u64> {
        if b.len() < rtp::HEADER_LEN || b[0] >> 6 != 2 {
            return None;
        }
        let ssrc = u32::from_be_bytes([b[8], b[9], b[10], b[11]]);
        Some(match ends {
            // What `key_hash` does with a packed key, without unpacking it.
            Ends::V4(k) => {
                let mut h = self.seed.build_hasher();
                h.write_u128(k | u128::from(ssrc));
                h.finish()
            }
            Ends::Wide(src, dst) => self.key_hash(&(src, dst, ssrc)),
        })
    }

    /// The stream index's hash of a key (seeded per process: keys come from the network).
    #[inline]
    fn key_hash(&self, key: &StreamKey) -> u64 {
        key_hash(&self.seed, key)
    }
}

/// See [`Tracker::key_hash`].
#[inline]
fn key_hash(seed: &SeededFxBuild, key: &StreamKey) -> u64 {
    let mut h = seed.build_hasher();
    match packed_key(key) {
        Some(k) => h.write_u128(k),
        None => {
            for a in [key.0, key.1] {
                h.write_u128(match a.ip() {
                    IpAddr::V4(ip) => ip.to_ipv6_mapped().to_bits(),
                    IpAddr::V6(ip) => ip.to_bits(),
                });
                h.write_u16(a.port());
            }
            h.write_u32(key.2);
        }
    }
    h.finish()
}

impl Tracker {
    fn take(
        &mut self,
        ts_ns: u64,
        ends: Ends,
        payload: &[u8],
        hash: Option<u64>,
        out: &mut Output,
    ) {
        self.advance(ts_ns, out);
        if rtp::is_rtcp(payload) {
            let (src, dst) = ends.addrs();
            self.on_rtcp(ts_ns, src, dst, payload);
            return;
        }
        let (Some(h), Some(hash)) = (rtp::parse_rtp(payload), hash) else {
            return;
        };
        let (streams, hot) = (&self.streams, &self.hot);
        let found = match ends {
            // Two IPv4 endpoints: the hot line alone tells.
            Ends::V4(k) => {
                let k = k | u128::from(h.ssrc);
                self.by_stream.find(hash, |slot| {
                    hot[slot as usize].key == k && !hot[slot as usize].v6
                })
            }
            Ends::Wide(src, dst) => {
                let key = (src, dst, h.ssrc);
                self.by_stream.find(hash, |slot| {
                    hot[slot as usize].v6
                        && matches!(&streams[slot as usize], Some(s) if (s.src, s.dst, s.ssrc) == key)
                })
            }
        };
        let slot = match found {
            Some(s) => s,
            None => {
                let (src, dst) = ends.addrs();
                match self.new_stream((src, dst, h.ssrc), hash) {
                    Some(s) => s,
                    None => return,
                }
            }
        };
        self.stream_packet(slot, ts_ns, &h, payload.len());
    }

    fn endpoint_call(&self, src: SocketAddr, dst: SocketAddr) -> Option<u32> {
        [dst, src]
            .iter()
            .find_map(|ep| self.by_endpoint.get(ep).filter(|(_, rtcp)| !rtcp))
            .map(|&(c, _)| c)
    }

    fn new_stream(&mut self, key: StreamKey, hash: u64) -> Option<u32> {
        let call = self.endpoint_call(key.0, key.1);
        if call.is_none() && !self.orphan_candidate(key.0, key.1) {
            return None;
        }
        if self.by_stream.len() >= self.cfg.max_streams {
            self.stats.streams_refused += 1;
            return None;
        }
        self.generation += 1;
        let stream = Stream {
            generation: self.generation,
            due_ns: u64::MAX,
            src: key.0,
            dst: key.1,
            ssrc: key.2,
            call: None,
            rtcp: None,
        };
        let packed = packed_key(&key);
        let hot = HotStream {
            key: packed.unwrap_or(0),
            v6: packed.is_none(),
            clock_pt: 255,
            ..HotStream::default()
        };
        let slot = match self.free_streams.pop() {
            Some(s) => {
                self.streams[s as usize] = Some(stream);
                self.hot[s as usize] = hot;
                self.tallies[s as usize] = StreamTally::default();
                s
            }
            None => {
                self.streams.push(Some(stream));
                self.hot.push(hot);
                self.tallies.push(StreamTally::default());
                self.streams.len() as u32 - 1
            }
        };
        self.by_stream.insert(hash, slot);
        self.by_ssrc.insert(key.2, slot);
        if let Some(c) = call {
            self.attach(slot, c);
        }
        Some(slot)
    }

    /// Ports a stream without signalling may use: unprivileged, not SIP's.
    fn orphan_candidate(&self, src: SocketAddr, dst: SocketAddr) -> bool {
        let ok = |p: u16| p >= 1024 && p != 5060 && p != 5061;
        self.cfg.orphans && ok(src.port()) && ok(dst.port())
    }

    fn attach(&mut self, stream: u32, call: u32) {
        if let (Some(s), Some(c)) = (
            self.streams[stream as usize].as_mut(),
            self.calls[call as usize].as_mut(),
        ) {
            s.call = Some(call);
            c.streams.push(stream);
            let e = &mut self.hot[stream as usize];
            e.in_call = true;
            e.confirmed = true;
            // The call's SDP may map the payload type to another clock.
            e.clock_pt = 255;
        }
    }

    fn stream_packet(&mut self, slot: u32, ts_ns: u64, h: &RtpHeader, len: usize) {
        let i = slot as usize;
        if !self.hot[i].in_call {
            // Lazily: the SDP naming this stream's endpoints may arrive after its first packets.
            let call = self.streams[i]
                .as_ref()
                .and_then(|s| self.endpoint_call(s.src, s.dst));
            if let Some(c) = call {
                self.attach(slot, c);
            }
        }
        if self.hot[i].clock_pt != h.payload_type {
            self.set_clock(slot, h.payload_type);
        }
        let e = &mut self.hot[i];
        let tally = &mut self.tallies[i];
        e.meter.add(tally, ts_ns, h, len, e.clock);
        self.stats.rtp_packets += 1;
        if !e.confirmed
            && e.meter.packets >= self.cfg.orphan_packets
            && e.meter.looks_continuous(tally, self.cfg.max_seq_gap)
        {
            e.confirmed = true;
        }
        // A stream without a call waits in the stream queue (its call's deadline reads
        // the packet times of the streams it has).
        if !e.in_call && !e.queued {
            e.queued = true;
            if let Some(s) = self.streams[i].as_mut() {
                s.due_ns = ts_ns.saturating_add(self.cfg.stream_timeout_ns);
                self.stream_due
                    .push(Reverse((s.due_ns, slot, s.generation)));
            }
        }
    }

    /// The clock of the payload type `pt` for the stream at `slot`: its call's SDP, else
    /// the static table.
    fn set_clock(&mut self, slot: u32, pt: u8) {
        let map = self.streams[slot as usize]
            .as_ref()
            .and_then(|s| s.call)
            .and_then(|c| self.calls[c as usize].as_ref())
            .and_then(|c| c.rtpmap.iter().find(|(p, _)| *p == pt))
            .map(|(_, codec)| codec);
        let e = &mut self.hot[slot as usize];
        e.clock = Clock::new(codec::clock_rate(pt, map));
        e.clock_pt = pt;
    }

    fn on_rtcp(&mut self, ts_ns: u64, src: SocketAddr, dst: SocketAddr, payload: &[u8]) {
        let known = self.by_endpoint.contains_key(&dst) || self.by_endpoint.contains_key(&src);
        rtp::parse_rtcp(payload, &mut self.rtcp);
        if !known && self.rtcp.reports.is_empty() && self.rtcp.sender_reports.is_empty() {
            return;
        }
        self.stats.rtcp_packets += 1;
        for i in 0..self.rtcp.sender_reports.len() {
            let (ssrc, ntp) = self.rtcp.sender_reports[i];
            if let Some(s) = self.stream_of_ssrc(ssrc) {
                s.rtcp.get_or_insert_default().last_sr = Some((ntp, ts_ns));
            }
        }
        for i in 0..self.rtcp.reports.len() {
            let r = self.rtcp.reports[i];
            let Some(s) = self.stream_of_ssrc(r.source) else {
                continue;
            };
            let s = s.rtcp.get_or_insert_default();
            s.reports += 1;
            s.lost = Some(r.cumulative_lost);
            s.fraction = Some(r.fraction_lost);
            s.jitter = Some(r.jitter);
            if let Some((ntp, sr_ns)) = s.last_sr {
                if r.lsr != 0 && r.lsr == ntp && ts_ns >= sr_ns {
                    let dlsr_ns = r.dlsr as u64 * SECOND / 65536;
                    s.rtt_ms = Some((ts_ns - sr_ns).saturating_sub(dlsr_ns) as f64 / 1e6);
                }
            }
        }
    }

    fn stream_of_ssrc(&mut self, ssrc: u32) -> Option<&mut Stream> {
        let slot = *self.by_ssrc.get(&ssrc)?;
        self.streams[slot as usize]
            .as_mut()
            .filter(|s| s.ssrc == ssrc)
    }

    /// Ends a call: its record, its streams' records, its index entries.
    fn close_call(&mut self, slot: u32, reason: Option<&'static str>, out: &mut Output) {
        let Some(mut call) = self.calls[slot as usize].take() else {
            return;
        };
        self.free_calls.push(slot);
        if !self.finishing {
            self.by_call_id.remove(&call.id);
            for (ep, _) in &call.endpoints {
                if matches!(self.by_endpoint.get(ep), Some(&(c, _)) if c == slot) {
                    self.by_endpoint.remove(ep);
                }
            }
        }
        if let Some(r) = reason {
            call.end_reason = r;
        }
        let mut worst: Option<f64> = None;
        let mut rtp_packets = 0;
        let streams = std::mem::take(&mut call.streams);
        let n_streams = streams.len() as u32;
        for s in streams {
            let Some(stream) = self.streams[s as usize].as_ref() else {
                continue;
            };
            let rec = self.stream_record(s, stream, Some(&call));
            rtp_packets += rec.packets;
            worst = Some(worst.map_or(rec.mos, |w: f64| w.min(rec.mos)));
            call.last_ns = call.last_ns.max(rec.last_ns);
            out.streams.push(rec);
            self.free_stream(s);
        }
        out.calls.push(call_record(
            &call,
            call.last_ns,
            n_streams,
            rtp_packets,
            worst,
        ));
    }

    /// Ends a stream that has no call: written when confirmed as RTP, dropped otherwise.
    fn close_stream(&mut self, slot: u32, out: &mut Output) {
        let Some(s) = self.streams[slot as usize].as_ref() else {
            return;
        };
        if s.call.is_some() {
            return;
        }
        if self.hot[slot as usize].confirmed {
            out.streams.push(self.stream_record(slot, s, None));
        }
        self.free_stream(slot);
    }

    fn free_stream(&mut self, slot: u32) {
        if let Some(s) = self.streams[slot as usize].take() {
            if !self.finishing {
                let hash = self.key_hash(&(s.src, s.dst, s.ssrc));
                self.by_stream.remove(hash, slot);
                if self.by_ssrc.get(&s.ssrc) == Some(&slot) {
                    self.by_ssrc.remove(&s.ssrc);
                }
            }
            self.free_streams.push(slot);
        }
    }
}

fn ms_between(from: u64, to: u64) -> f64 {
    to.saturating_sub(from) as f64 / 1e6
}

/// A call's record; `last_ns` its last SIP or RTP packet, the end of a call that has none.
fn call_record(
    c: &Call,
    last_ns: u64,
    streams: u32,
    rtp_packets: u64,
    worst_mos: Option<f64>,
) -> CallRecord {
    let from = name_addr(&c.from);
    let to = name_addr(&c.to);
    let end_ns = c.end_ns.unwrap_or(last_ns);
    CallRecord {
        call_id: c.id.to_string(),
        from: from.uri.to_string(),
        from_display: from.display.to_string(),
        from_user: from.user.to_string(),
        to: to.uri.to_string(),
        to_display: to.display.to_string(),
        to_user: to.user.to_string(),
        caller: c.caller.to_string(),
        callee: c.callee.to_string(),
        caller_agent: c.caller_agent.clone(),
        callee_agent: c.callee_agent.clone(),
        tcp: c.tcp,
        invite_ns: c.invite_ns,
        ringing_ns: c.ringing_ns,
        answer_ns: c.answer_ns,
        end_ns,
        setup_ms: c.ringing_ns.map(|t| ms_between(c.invite_ns, t)),
        answer_ms: c.answer_ns.map(|t| ms_between(c.invite_ns, t)),
        duration_ms: c.answer_ns.map_or(0.0, |t| ms_between(t, end_ns)),
        end_reason: c.end_reason,
        status: c.status,
        reinvites: c.reinvites,
        streams,
        rtp_packets,
        worst_mos,
    }
}

impl Tracker {
    /// The record of the stream `s` at `slot`.
    fn stream_record(&self, slot: u32, s: &Stream, call: Option<&Call>) -> StreamRecord {
        let i = slot as usize;
        stream_record(s, &self.hot[i].meter.totals(&self.tallies[i]), call)
    }
}

fn stream_record(s: &Stream, st: &StreamTotals, call: Option<&Call>) -> StreamRecord {
    let pt = st.first_pt;
    let mapped = call
        .and_then(|c| c.rtpmap.iter().find(|(p, _)| *p == pt))
        .map(|(_, codec)| codec);
    let codec = codec::codec_name(pt, mapped);
    let lost = st.lost;
    let loss_pct = if st.expected > 0 {
        lost.max(0) as f64 * 100.0 / st.expected as f64
    } else {
        0.0
    };
    // One-way delay: half the RTCP round trip when known, plus a jitter buffer of twice the
    // largest jitter and one 20 ms packet of packetisation.
    let rtcp = s.rtcp.as_deref();
    let rtt_ms = rtcp.and_then(|r| r.rtt_ms);
    let delay = rtt_ms.map_or(0.0, |r| r / 2.0) + 2.0 * st.jitter_max_ms + 20.0;
    let clock = codec::clock_rate(pt, mapped);
    StreamRecord {
        call_id: call.map(|c| c.id.to_string()),
        orphan: call.is_none(),
        src_ip: s.src.ip().to_string(),
        src_port: s.src.port(),
        dst_ip: s.dst.ip().to_string(),
        dst_port: s.dst.port(),
        ssrc: s.ssrc,
        payload_type: pt,
        codec: codec.clone(),
        payload_types: (0..128u8).filter(|p| st.pts & (1u128 << p) != 0).collect(),
        first_ns: st.first_ns,
        last_ns: st.last_ns,
        packets: st.packets,
        bytes: st.bytes,
        expected: st.expected,
        lost,
        duplicated: st.duplicated,
        out_of_order: st.out_of_order,
        jitter_max_ms: st.jitter_max_ms,
        jitter_mean_ms: st.jitter_mean_ms,
        iat_min_ms: st.delta.min,
        iat_max_ms: st.delta.max,
        iat_mean_ms: st.delta.mean(),
        iat_std_ms: st.delta.std(),
        size_min: st.size.min as u32,
        size_max: st.size.max as u32,
        size_mean: st.size.mean(),
        size_std: st.size.std(),
        rtcp_reports: rtcp.map_or(0, |r| r.reports),
        rtcp_lost: rtcp.and_then(|r| r.lost),
        rtcp_fraction_lost: rtcp.and_then(|r| r.fraction).map(|f| f as f64 / 256.0),
        rtcp_jitter_ms: rtcp
            .and_then(|r| r.jitter)
            .filter(|_| clock != 0)
            .map(|j| j as f64 * 1000.0 / clock as f64),
        rtt_ms,
        mos: (codec::mos(&codec, loss_pct, delay) * 100.0).round() / 100.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hot entry is three cache lines and its prefetch names a field on each.
    #[test]
    fn a_hot_stream_is_three_lines_and_its_prefetch_covers_them() {
        assert_eq!(std::mem::size_of::<HotStream>(), 192);
        assert_eq!(std::mem::align_of::<HotStream>(), 64);
        let e = HotStream::default();
        let start = &e as *const HotStream as usize;
        let (_, block, delta) = e.meter.line_fields();
        let lines = [
            &e.key as *const u128 as usize,
            block as *const u64 as usize,
            delta as *const _ as usize,
        ]
        .map(|a| (a - start) / 64);
        assert_eq!(lines, [0, 1, 2]);
    }

    /// Batches through the pipeline give the records of the same packets one by one: IPv4
    /// and IPv6 streams (the packed and the kept endpoints), RTCP, late and duplicate
    /// packets, packets that only move time on, undecoded ones, and payloads out of range.
    #[test]
    fn batches_are_the_packets_one_by_one() {
        let v4: [SocketAddr; 3] =
            ["10.0.0.1:4000", "10.0.0.2:4002", "192.168.7.9:30000"].map(|a| a.parse().unwrap());
        let v6: SocketAddr = "[2001:db8::7]:5004".parse().unwrap();
        let pairs = [
            (v4[0], v4[1]),
            (v4[1], v4[0]),
            (v4[2], v4[1]),
            (v6, v4[0]),
            (v4[2], v6),
        ];
        let mut bytes = Vec::new();
        // (time, pair, payload range, kind)
        let mut packets = Vec::new();
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut seqs = [0u16; 5];
        for i in 0..4000u64 {
            let r = next();
            let pair = (r % 5) as usize;
            let start = bytes.len();
            let kind = match r >> 8 & 15 {
                0 => {
                    // An RTCP receiver report about SSRC 7 + pair.
                    bytes.extend_from_slice(&[0x81, 201, 0, 7, 0, 0, 0, 9]);
                    bytes.extend_from_slice(&(7 + pair as u32).to_be_bytes());
                    bytes.extend_from_slice(&[0; 20]);
                    PacketKind::Media
                }
                1 => PacketKind::Other,
                2 => PacketKind::Ignored,
                _ => {
                    // RTP, mostly in order, sometimes late, repeated or ahead.
                    let step = match r >> 12 & 15 {
                        0 => 0u16,
                        1 => 3u16.wrapping_neg(),
                        2 => 40,
                        _ => 1,
                    };
                    seqs[pair] = seqs[pair].wrapping_add(step);
                    let seq = seqs[pair];
                    let pt = if r >> 16 & 31 == 0 { 13 } else { 8 };
                    bytes.extend_from_slice(&[0x80, pt]);
                    bytes.extend_from_slice(&seq.to_be_bytes());
                    bytes.extend_from_slice(&(u32::from(seq) * 160).to_be_bytes());
                    bytes.extend_from_slice(&(7 + pair as u32).to_be_bytes());
                    bytes.resize(bytes.len() + 160 + (r >> 24 & 1) as usize * 20, 0xd5);
                    PacketKind::Media
                }
            };
            let len = bytes.len() - start;
            let ts = i * 5_000_000 + (r >> 32) % 3_000_000;
            packets.push((ts, pairs[pair], start, len, kind));
        }
        // A payload beyond the buffer is an empty one.
        packets.push((
            packets.len() as u64 * 5_000_000,
            pairs[0],
            bytes.len(),
            50,
            PacketKind::Media,
        ));
        let cfg = TrackerConfig {
            orphan_packets: 2,
            stream_timeout_ns: 3 * SECOND,
            ..TrackerConfig::default()
        };
        let records = |out: &Output| {
            let mut text = Vec::new();
            for s in &out.streams {
                s.write_json(&mut text);
                text.push(b'\n');
            }
            text
        };
        let mut one = Tracker::new(cfg).unwrap();
        let mut one_out = Output::default();
        for &(ts, (src, dst), start, len, kind) in &packets {
            match kind {
                PacketKind::Media => {
                    let payload = bytes.get(start..start + len).unwrap_or_default();
                    one.on_udp(ts, src, dst, payload, &mut one_out);
                }
                PacketKind::Other => one.advance(ts, &mut one_out),
                PacketKind::Ignored => {}
            }
        }
        one.finish(&mut one_out);
        let mut batched = Tracker::new(cfg).unwrap();
        let mut out = Output::default();
        let mut list = Packets::default();
        let mut taken = 0;
        for chunk in packets.chunks(37) {
            list.clear();
            for &(ts, (src, dst), start, len, kind) in chunk {
                match (kind, src, dst) {
                    (PacketKind::Ignored, _, _) => list.push_ignored(ts),
                    // Every other IPv4 pair as the decoder gives it.
                    (_, SocketAddr::V4(a), SocketAddr::V4(b)) if ts % 2 == 0 => {
                        list.push_v4(ts, (a, b), start, len, kind)
                    }
                    _ => list.push(ts, src, dst, start, len, kind),
                }
            }
            assert_eq!(list.len(), chunk.len());
            batched.on_packets(&list, &bytes, &mut out, |_, _, _| taken += 1);
        }
        batched.finish(&mut out);
        assert_eq!(taken, packets.len());
        assert!(one_out.streams.len() >= 5, "{}", one_out.streams.len());
        assert!(one.stats().rtcp_packets > 0 && one.stats().rtp_packets > 3000);
        assert_eq!(batched.stats(), one.stats());
        assert_eq!(
            String::from_utf8(records(&out)).unwrap(),
            String::from_utf8(records(&one_out)).unwrap()
        );
    }

    #[test]
    fn unpacked_endpoints_are_the_endpoints_packed() {
        for (a, b) in [
            ("10.1.2.3:4000", "192.168.0.1:65535"),
            ("0.0.0.0:0", "255.255.255.255:1"),
        ] {
            let (a, b): (SocketAddr, SocketAddr) = (a.parse().unwrap(), b.parse().unwrap());
            assert!(matches!(Ends::of(a, b), Ends::V4(_)));
            assert_eq!(Ends::of(a, b).addrs(), (a, b));
        }
        let v6: SocketAddr = "[2001:db8::1]:4000".parse().unwrap();
        let a: SocketAddr = "10.1.2.3:4000".parse().unwrap();
        assert!(matches!(Ends::of(a, v6), Ends::Wide(x, y) if (x, y) == (a, v6)));
        // The hash of a packet's key is the index's, packed or not.
        let t = Tracker::new(TrackerConfig::default()).unwrap();
        let b: SocketAddr = "192.168.0.1:65535".parse().unwrap();
        let rtp = [0x80, 8, 0, 1, 0, 0, 0, 160, 0xde, 0xad, 0xbe, 0xef];
        for (src, dst) in [(a, b), (b, a), (a, v6), (v6, a)] {
            let want = t.key_hash(&(src, dst, 0xdead_beef));
            assert_eq!(t.media_hash(Ends::of(src, dst), &rtp), Some(want));
        }
        assert_eq!(t.media_hash(Ends::of(a, b), &rtp[..11]), None);
    }

    #[test]
    fn packed_keys_are_the_ipv4_keys_whole() {
        let a: SocketAddr = "10.1.2.3:4000".parse().unwrap();
        let b: SocketAddr = "192.168.0.1:65535".parse().unwrap();
        let v6: SocketAddr = "[2001:db8::1]:4000".parse().unwrap();
        assert_eq!(
            packed_key(&(a, b, 0xdead_beef)),
            Some(0x0a01_0203_c0a8_0001_0fa0_ffff_dead_beef)
        );
        assert_ne!(packed_key(&(a, b, 1)), packed_key(&(b, a, 1)));
        assert_eq!(packed_key(&(a, v6, 1)), None);
        assert_eq!(packed_key(&(v6, a, 1)), None);
    }
}
