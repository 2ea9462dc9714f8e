//! TCP connections for the stream analysers (`stream_log`: TLS, HTTP, DNS over TCP): each
//! connection is tracked once, its two directions reassembled by `trawl_app::reassembly` and
//! handed to the per-connection state `S` (the analysers that still want it). Once `S` is done
//! (no analyser wants the connection) its buffers are freed and its segments skipped: the
//! connection stays in the table only so that its later packets find it (bypass).
//!
//! Bounded and counted: at most `max_conns` connections are held; a new one beyond that evicts
//! the oldest (first seen), which the analyser gets to finish like a closed one (`evicted`).
//!
//! Layout (a table of a million connections is walked by every packet, bench/RESULTS.md): the
//! hash index holds only a packed key and a slot number (48 bytes a bucket), the connections
//! live in slots allocated in fixed chunks that never move (a growing index copies 48-byte
//! buckets, not whole connections, and a freed slot is reused), creation order is a list
//! threaded through the slots (no queue of keys beside the table), and a connection's two
//! reassembly streams are boxed only while an analyser reads it (a bypassed connection keeps
//! neither; released boxes are reused).
//! Waiting out-of-order bytes are capped per direction and in all (`Budget`). A connection ends
//! at a RST, once both directions sent a FIN (a half-closed connection still carries the other
//! direction's bytes), by eviction, or at the end of the input; what still waits then is read
//! after a gap.
use std::collections::hash_map::Entry;
use std::hash::BuildHasher;
use std::net::{IpAddr, SocketAddr};

use trawl_app::reassembly::{Budget, Chunk, ReassemblyStats, Segment, Stream};
use trawl_flow::decode::{tcp_flags, Decoded};
use trawl_flow::hash::SeededFxMap;

/// A connection's key: the two endpoints, the smaller first, so both directions find it.
pub type ConnKey = (SocketAddr, SocketAddr);

/// One TCP packet as the table takes it.
pub struct TcpPacket<'a> {
    /// Packet time (ns).
    pub ts_ns: u64,
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// Header fields.
    pub seq: u32,
    /// The header's flags byte.
    pub flags: u8,
    /// Captured payload.
    pub data: &'a [u8],
    /// Payload bytes the headers announce but the capture lacks.
    pub missing: u32,
}

impl<'a> TcpPacket<'a> {
    /// The TCP packet of a decoded frame, if it is one.
    pub fn of(d: &Decoded, frame: &'a [u8], ts_ns: u64) -> Option<Self> {
        if d.proto != 6 || !d.tcp_valid {
            return None;
        }
        let start = (d.payload_offset as usize).min(frame.len());
        let end = (start + d.payload_len as usize).min(frame.len());
        Some(TcpPacket {
            ts_ns,
            src: SocketAddr::new(d.src_addr(), d.src_port),
            dst: SocketAddr::new(d.dst_addr(), d.dst_port),
            seq: d.tcp.seq,
            flags: d.tcp.flags,
            data: &frame[start..end],
            missing: d.payload_len.saturating_sub((end - start) as u32),
        })
    }
}

/// What a connection's analyser does with its directions' bytes.
pub trait ConnState {
    /// What every connection's state is made from (which analysers are on).
    type Config;
    /// The state of a new connection `key`.
    fn new(config: &Self::Config, key: ConnKey) -> Self;
    /// Takes the next chunk of direction `dir` (0: from the key's first endpoint, 1: from the
    /// second), sent by `src` at `ts_ns`.
    fn chunk(&mut self, dir: usize, src: SocketAddr, ts_ns: u64, chunk: Chunk<'_>);
    /// True once the analyser wants no more bytes of the connection (its buffers are freed).
    fn done(&self) -> bool;
    /// True when the analyser has lines to hand over before the connection ends.
    fn ready(&self) -> bool {
        false
    }
}

/// A connection held by the table.
pub struct Conn<S> {
    /// Time of its first packet (ns).
    pub first_ns: u64,
    /// Time of its latest packet (ns).
    pub last_ns: u64,
    /// Which directions sent a FIN.
    fins: [bool; 2],
    /// The analyser's state.
    pub state: S,
    /// Both directions' reassembly while the analyser reads the connection; `None` once it is
    /// done (or when it never wanted the connection).
    streams: Option<Box<[Stream; 2]>>,
}

/// Counters of the table.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnStats {
    /// Connections created.
    pub conns: u64,
    /// Connections evicted to make room.
    pub evicted: u64,
    /// Reassembly counters over all streams.
    pub reassembly: ReassemblyStats,
}

impl ConnStats {
    /// The counters in the order of `stream_log::STREAM_COUNTERS`, `lines` last.
    pub fn values(&self, lines: u64) -> [u64; 11] {
        let r = &self.reassembly;
        [
            self.conns,
            self.evicted,
            r.segments,
            r.retransmitted,
            r.out_of_order,
            r.overlaps,
            r.overlap_conflicts,
            r.gaps,
            r.gap_bytes,
            r.capped,
            lines,
        ]
    }
}

/// A connection's key as the index holds it: both endpoints' addresses (an IPv4 address in
/// the low four bytes of its pair of words), ports and families, 40 bytes where the
/// `SocketAddr` pair takes 64 (a `SocketAddr`'s flow label and scope, always 0 here, are not
/// kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Packed {
    ips: [u64; 4],
    ports: u32,
    /// Bit 0: the first endpoint is IPv6; bit 1: the second.
    v6: u8,
}

impl Packed {
    fn of(key: &ConnKey) -> Packed {
        fn words(ip: IpAddr) -> [u64; 2] {
            let b = match ip {
                IpAddr::V4(a) => u128::from(u32::from(a)),
                IpAddr::V6(a) => u128::from(a),
            };
            [(b >> 64) as u64, b as u64]
        }
        let ([a0, a1], [b0, b1]) = (words(key.0.ip()), words(key.1.ip()));
        Packed {
            ips: [a0, a1, b0, b1],
            ports: u32::from(key.0.port()) << 16 | u32::from(key.1.port()),
            v6: u8::from(key.0.is_ipv6()) | u8::from(key.1.is_ipv6()) << 1,
        }
    }
}

/// No slot: the end of the creation-order list.
const NIL: u32 = u32::MAX;
/// Slots are allocated 4,096 at a time (about 700 KB), in chunks that never move.
const CHUNK_BITS: u32 = 12;
const CHUNK: usize = 1 << CHUNK_BITS;
/// Released stream boxes kept for new connections.
const SPARE_STREAMS: usize = 1024;

/// A held connection in its slot: its key, the connection, its neighbours in creation order.
struct Slot<S> {
    key: ConnKey,
    conn: Conn<S>,
    older: u32,
    newer: u32,
}

/// The slots: chunks of `CHUNK` filled in turn, freed slots reused first.
struct Slots<S> {
    chunks: Vec<Vec<Option<Slot<S>>>>,
    free: Vec<u32>,
}

impl<S> Slots<S> {
    /// Stores `slot`; its number.
    fn put(&mut self, slot: Slot<S>) -> u32 {
        if let Some(i) = self.free.pop() {
            self.chunks[(i >> CHUNK_BITS) as usize][i as usize % CHUNK] = Some(slot);
            return i;
        }
        if self.chunks.last().is_none_or(|c| c.len() == CHUNK) {
            self.chunks.push(Vec::with_capacity(CHUNK));
        }
        let n = self.chunks.len() - 1;
        let chunk = &mut self.chunks[n];
        chunk.push(Some(slot));
        (n * CHUNK + chunk.len() - 1) as u32
    }

    /// The slot `i` holds.
    ///
    /// # Panics
    /// When `i` is not held: the index and the order list only name held slots.
    fn get(&mut self, i: u32) -> &mut Slot<S> {
        self.chunks[(i >> CHUNK_BITS) as usize][i as usize % CHUNK]
            .as_mut()
            .expect("the index and the order list name held slots")
    }

    /// Frees slot `i`, returning what it held.
    fn take(&mut self, i: u32) -> Option<Slot<S>> {
        let s = self.chunks[(i >> CHUNK_BITS) as usize][i as usize % CHUNK].take();
        self.free.push(i);
        s
    }
}

/// The connections of the stream analysers.
pub struct ConnTable<S: ConnState> {
    config: S::Config,
    /// Keys come off the wire: the seeded fast hash (SipHash is slow on small keys,
    /// `trawl_flow::hash`).
    index: SeededFxMap<Packed, u32>,
    slots: Slots<S>,
    /// The oldest and newest held connections (creation order), `NIL` when none.
    oldest: u32,
    newest: u32,
    /// Stream boxes of connections no longer read, for the next ones: the allocations are
    /// what is kept (hence boxes in a `Vec`).
    #[allow(clippy::vec_box)]
    spare: Vec<Box<[Stream; 2]>>,
    /// Connections being read (with streams), counted by a hash of their key (`reading_at`).
    /// A packet that carries nothing (no payload, no SYN, FIN or RST) starts no connection
    /// and changes nothing in one no analyser reads, so when its count is 0 it is skipped
    /// without the table look-up: the bypass of pure ACKs. Counts saturate (a saturated one
    /// stays, which costs only look-ups).
    reading: Vec<u16>,
    max_conns: usize,
    budget: Budget,
    /// Counters.
    pub stats: ConnStats,
}

impl<S: ConnState> ConnTable<S> {
    /// A table of at most `max_conns` connections (below 2^32), `max_stream`/`max_total` bytes
    /// of out-of-order data per direction and in all, each connection's state made from
    /// `config`.
    pub fn new(config: S::Config, max_conns: usize, max_stream: usize, max_total: usize) -> Self {
        ConnTable {
            config,
            index: SeededFxMap::default(),
            slots: Slots {
                chunks: Vec::new(),
                free: Vec::new(),
            },
            oldest: NIL,
            newest: NIL,
            spare: Vec::new(),
            // About one count per connection held, at most 2^22 (8 MB).
            reading: vec![0; max_conns.clamp(1024, 1 << 22).next_power_of_two()],
            max_conns: max_conns.clamp(1, NIL as usize - 1),
            budget: Budget::new(max_stream, max_total),
            stats: ConnStats::default(),
        }
    }

    /// Connections held now.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when no connection is held.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Out-of-order bytes held now.
    pub fn held(&self) -> usize {
        self.budget.held
    }

    /// Takes a packet. `report` gets the connection when its analyser turns done (`false`) and
    /// each connection that ends, closed or evicted (`true`, removed from the table).
    pub fn packet(
        &mut self,
        p: &TcpPacket<'_>,
        report: &mut impl FnMut(ConnKey, &mut Conn<S>, bool),
    ) {
        let key = if p.src <= p.dst {
            (p.src, p.dst)
        } else {
            (p.dst, p.src)
        };
        let packed = Packed::of(&key);
        let at = self.reading_at(&packed);
        let quiet = p.flags & (tcp_flags::SYN | tcp_flags::FIN | tcp_flags::RST) == 0
            && p.data.is_empty()
            && p.missing == 0;
        if quiet && self.reading[at] == 0 {
            return;
        }
        let dir = usize::from(p.src != key.0);
        let syn = p.flags & tcp_flags::SYN != 0;
        // Pure ACKs and the last FIN/RST of a connection already ended start nothing.
        let starts = syn || !p.data.is_empty() || p.missing > 0;
        if starts && self.index.len() >= self.max_conns && !self.index.contains_key(&packed) {
            self.make_room(report);
        }
        // One look-up per packet: the entry is the connection, or where a new one goes.
        let i = match self.index.entry(packed) {
            Entry::Occupied(o) => *o.get(),
            Entry::Vacant(_) if !starts => return,
            Entry::Vacant(v) => {
                self.stats.conns += 1;
                let state = S::new(&self.config, key);
                let streams = if state.done() {
                    None
                } else {
                    self.reading[at] = self.reading[at].saturating_add(1);
                    Some(self.spare.pop().unwrap_or_default())
                };
                let i = self.slots.put(Slot {
                    key,
                    conn: Conn {
                        first_ns: p.ts_ns,
                        last_ns: p.ts_ns,
                        fins: [false; 2],
                        state,
                        streams,
                    },
                    older: self.newest,
                    newer: NIL,
                });
                v.insert(i);
                match self.newest {
                    NIL => self.oldest = i,
                    n => self.slots.get(n).newer = i,
                }
                self.newest = i;
                i
            }
        };
        let conn = &mut self.slots.get(i).conn;
        conn.last_ns = p.ts_ns;
        if let Some(streams) = &mut conn.streams {
            let seg = Segment {
                seq: p.seq,
                syn,
                data: p.data,
                missing: p.missing,
            };
            let state = &mut conn.state;
            let (src, ts) = (p.src, p.ts_ns);
            streams[dir].push(
                seg,
                &mut self.budget,
                &mut self.stats.reassembly,
                &mut |c| state.chunk(dir, src, ts, c),
            );
            if state.done() {
                if let Some(s) = conn.streams.take() {
                    recycle(s, &mut self.budget, &mut self.spare);
                    uncount(&mut self.reading[at]);
                }
                report(key, conn, false);
            } else if state.ready() {
                report(key, conn, false);
            }
        }
        conn.fins[dir] |= p.flags & tcp_flags::FIN != 0;
        if p.flags & tcp_flags::RST != 0 || conn.fins == [true; 2] {
            self.end(i, report);
        }
    }

    /// Ends every connection, oldest first (the end of the input).
    pub fn finish(&mut self, report: &mut impl FnMut(ConnKey, &mut Conn<S>, bool)) {
        while self.oldest != NIL {
            self.end(self.oldest, report);
        }
    }

    fn make_room(&mut self, report: &mut impl FnMut(ConnKey, &mut Conn<S>, bool)) {
        while self.index.len() >= self.max_conns && self.oldest != NIL {
            self.stats.evicted += 1;
            self.end(self.oldest, report);
        }
    }

    /// Removes the connection of slot `i`, reads what is in order and what waits (after a gap)
    /// of both directions, then hands the connection over.
    fn end(&mut self, i: u32, report: &mut impl FnMut(ConnKey, &mut Conn<S>, bool)) {
        let Some(Slot {
            key,
            mut conn,
            older,
            newer,
        }) = self.slots.take(i)
        else {
            return;
        };
        self.index.remove(&Packed::of(&key));
        match older {
            NIL => self.oldest = newer,
            o => self.slots.get(o).newer = newer,
        }
        match newer {
            NIL => self.newest = older,
            n => self.slots.get(n).older = older,
        }
        if let Some(mut streams) = conn.streams.take() {
            let ts = conn.last_ns;
            for (dir, src) in [(0, key.0), (1, key.1)] {
                let state = &mut conn.state;
                if state.done() {
                    streams[dir].release(&mut self.budget);
                } else {
                    streams[dir].flush(&mut self.budget, &mut self.stats.reassembly, &mut |c| {
                        state.chunk(dir, src, ts, c)
                    });
                }
            }
            recycle(streams, &mut self.budget, &mut self.spare);
            let at = self.reading_at(&Packed::of(&key));
            uncount(&mut self.reading[at]);
        }
        report(key, &mut conn, true);
    }

    /// The count of `reading` a connection is in.
    fn reading_at(&self, key: &Packed) -> usize {
        // The high bits: hashbrown picks buckets with the low ones.
        (self.index.hasher().hash_one(key) >> 40) as usize & (self.reading.len() - 1)
    }
}

/// One connection fewer in a count of `reading` (a saturated count stays).
fn uncount(n: &mut u16) {
    if *n < u16::MAX {
        *n -= 1;
    }
}

/// Returns the waiting bytes of a connection's streams to `budget` and keeps the box, made
/// new, for another connection (up to `SPARE_STREAMS` of them).
#[allow(clippy::vec_box)]
fn recycle(mut streams: Box<[Stream; 2]>, budget: &mut Budget, spare: &mut Vec<Box<[Stream; 2]>>) {
    for s in streams.iter_mut() {
        s.release(budget);
    }
    if spare.len() < SPARE_STREAMS {
        *streams = Default::default();
        spare.push(streams);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state that keeps what it is given and is done after `limit` chunks.
    struct Rec {
        chunks: Vec<(usize, Result<Vec<u8>, u64>)>,
        limit: usize,
    }

    impl ConnState for Rec {
        type Config = usize;

        fn new(limit: &usize, _key: ConnKey) -> Self {
            Rec {
                chunks: Vec::new(),
                limit: *limit,
            }
        }

        fn chunk(&mut self, dir: usize, _src: SocketAddr, _ts_ns: u64, chunk: Chunk<'_>) {
            self.chunks.push((
                dir,
                match chunk {
                    Chunk::Data(b) => Ok(b.to_vec()),
                    Chunk::Gap(n) => Err(n),
                },
            ));
        }

        fn done(&self) -> bool {
            self.chunks.len() >= self.limit
        }
    }

    fn seg<'a>(
        src: &str,
        dst: &str,
        ts_ns: u64,
        seq: u32,
        flags: u8,
        data: &'a [u8],
    ) -> TcpPacket<'a> {
        TcpPacket {
            ts_ns,
            src: src.parse().unwrap(),
            dst: dst.parse().unwrap(),
            seq,
            flags,
            data,
            missing: 0,
        }
    }

    /// (first endpoint's port, ended, last_ns, chunks) of each report.
    type Reports = Vec<(u16, bool, u64, Vec<(usize, Result<Vec<u8>, u64>)>)>;

    fn feed(t: &mut ConnTable<Rec>, packets: &[TcpPacket<'_>], out: &mut Reports) {
        for p in packets {
            t.packet(p, &mut |k, c, ended| {
                out.push((k.0.port(), ended, c.last_ns, c.state.chunks.clone()))
            });
        }
    }

    #[test]
    fn the_oldest_held_is_evicted_and_the_end_of_input_ends_in_creation_order() {
        let mut t = ConnTable::new(10, 3, 1 << 16, 1 << 20);
        let mut out = Reports::new();
        let open = |port: u16| format!("10.0.0.1:{port}");
        let (a, b, c, d, e) = (open(1), open(2), open(3), open(4), open(5));
        let s = "10.0.0.9:80";
        feed(
            &mut t,
            &[
                seg(&a, s, 1, 0, tcp_flags::SYN, b""),
                seg(&b, s, 2, 0, tcp_flags::SYN, b""),
                seg(&c, s, 3, 0, tcp_flags::SYN, b""),
                // b ends: its slot is reused by d, which is newer than c all the same.
                seg(&b, s, 4, 1, tcp_flags::RST, b""),
                seg(&d, s, 5, 0, tcp_flags::SYN, b""),
                // Full: e evicts the oldest held, a.
                seg(&e, s, 6, 0, tcp_flags::SYN, b""),
                // b again, after its end: a new connection, the newest (c goes).
                seg(&b, s, 7, 0, tcp_flags::SYN, b""),
            ],
            &mut out,
        );
        assert_eq!(t.stats.conns, 6);
        assert_eq!(t.stats.evicted, 2);
        assert_eq!(t.len(), 3);
        t.finish(&mut |k, c, ended| out.push((k.0.port(), ended, c.last_ns, Vec::new())));
        let order: Vec<(u16, bool)> = out.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(
            order,
            [
                (2, true),
                (1, true),
                (3, true),
                (4, true),
                (5, true),
                (2, true)
            ]
        );
        assert!(t.is_empty());
        assert_eq!(t.slots.free.len(), t.slots.chunks[0].len());
    }

    #[test]
    fn families_are_kept_apart_in_the_packed_key() {
        let v4: ConnKey = ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:2".parse().unwrap());
        let v6: ConnKey = (
            "[::a00:1]:1".parse().unwrap(),
            "[::a00:2]:2".parse().unwrap(),
        );
        assert_ne!(Packed::of(&v4), Packed::of(&v6));
        assert_eq!(Packed::of(&v4), Packed::of(&v4));
        let swapped = (v4.1, v4.0);
        assert_ne!(Packed::of(&v4), Packed::of(&swapped));
    }

    #[test]
    fn a_pure_ack_is_read_while_the_connection_is_and_skipped_after() {
        let mut t = ConnTable::new(3, 16, 1 << 16, 1 << 20);
        let mut out = Reports::new();
        let (c, s) = ("10.0.0.1:40000", "10.0.0.2:80");
        feed(
            &mut t,
            &[
                seg(c, s, 1, 100, tcp_flags::SYN, b""),
                // The server's first packet is a pure ACK: it fixes where its stream starts...
                seg(s, c, 2, 500, tcp_flags::ACK, b""),
                // ...so its data 4 bytes later waits behind a gap.
                seg(s, c, 3, 504, tcp_flags::ACK, b"late"),
                seg(c, s, 4, 101, tcp_flags::ACK, b"one"),
                seg(c, s, 5, 104, tcp_flags::ACK, b"two"),
            ],
            &mut out,
        );
        // Done after three chunks (the server's gap and bytes, flushed at the end, would be
        // the 3rd and 4th): the client's two and nothing else yet.
        assert_eq!(t.stats.reassembly.out_of_order, 1);
        feed(&mut t, &[seg(c, s, 6, 107, tcp_flags::ACK, b"3")], &mut out);
        // Done now: a report, the streams boxed away, later pure ACKs skipped unseen.
        assert_eq!(out.len(), 1);
        let (_, ended, last_ns, chunks) = &out[0];
        assert!(!ended);
        assert_eq!(*last_ns, 6);
        assert_eq!(
            chunks,
            &[
                (0, Ok(b"one".to_vec())),
                (0, Ok(b"two".to_vec())),
                (0, Ok(b"3".to_vec()))
            ]
        );
        assert_eq!(t.spare.len(), 1);
        assert_eq!(t.held(), 0);
        feed(
            &mut t,
            &[
                seg(s, c, 7, 508, tcp_flags::ACK, b""),
                seg(c, s, 8, 108, tcp_flags::ACK, b""),
            ],
            &mut out,
        );
        t.finish(&mut |k, c, ended| out.push((k.0.port(), ended, c.last_ns, Vec::new())));
        // Its time is that of the last packet seen: the pure ACKs after it were not.
        assert!(out[1].1 && out[1].2 == 6, "{:?}", out[1]);
        assert!(t.is_empty());
        assert!(t.reading.iter().all(|&n| n == 0));
    }

    #[test]
    fn a_connection_read_to_its_end_gets_its_waiting_bytes_after_a_gap() {
        let mut t = ConnTable::new(10, 16, 1 << 16, 1 << 20);
        let mut out = Reports::new();
        let (c, s) = ("10.0.0.1:40000", "10.0.0.2:80");
        feed(
            &mut t,
            &[
                seg(c, s, 1, 100, tcp_flags::SYN, b""),
                seg(s, c, 2, 500, tcp_flags::ACK, b""),
                seg(s, c, 3, 504, tcp_flags::ACK, b"late"),
            ],
            &mut out,
        );
        t.finish(&mut |k, c, ended| {
            out.push((k.0.port(), ended, c.last_ns, c.state.chunks.clone()))
        });
        assert_eq!(
            out,
            [(40000, true, 3, vec![(1, Err(4)), (1, Ok(b"late".to_vec()))])]
        );
        assert!(t.reading.iter().all(|&n| n == 0));
    }
}
