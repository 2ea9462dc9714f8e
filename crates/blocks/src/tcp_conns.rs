//! TCP connections for the stream analysers (`stream_log`: TLS, HTTP, DNS over TCP): each
//! connection is tracked once, its two directions reassembled by `trawl_app::reassembly` and
//! handed to the per-connection state `S` (the analysers that still want it). Once `S` is done
//! (no analyser wants the connection) its buffers are freed and its segments skipped: the
//! connection stays in the table only so that its later packets find it (bypass).
//!
//! Bounded and counted: at most `max_conns` connections are held; a new one beyond that evicts
//! the oldest (first seen), which the analyser gets to finish like a closed one (`evicted`).
//! Waiting out-of-order bytes are capped per direction and in all (`Budget`). A connection ends
//! at a RST, once both directions sent a FIN (a half-closed connection still carries the other
//! direction's bytes), by eviction, or at the end of the input; what still waits then is read
//! after a gap.
use std::collections::hash_map::Entry;
use std::collections::VecDeque;
use std::net::SocketAddr;

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
    streams: [Stream; 2],
    id: u64,
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

/// The connections of the stream analysers.
pub struct ConnTable<S: ConnState> {
    config: S::Config,
    /// Keys come off the wire: the seeded fast hash (SipHash is slow on small keys,
    /// `trawl_flow::hash`).
    conns: SeededFxMap<ConnKey, Conn<S>>,
    /// Keys in creation order with their ids (entries of removed connections are skipped).
    order: VecDeque<(ConnKey, u64)>,
    next_id: u64,
    max_conns: usize,
    budget: Budget,
    /// Counters.
    pub stats: ConnStats,
}

impl<S: ConnState> ConnTable<S> {
    /// A table of at most `max_conns` connections, `max_stream`/`max_total` bytes of
    /// out-of-order data per direction and in all, each connection's state made from `config`.
    pub fn new(config: S::Config, max_conns: usize, max_stream: usize, max_total: usize) -> Self {
        ConnTable {
            config,
            conns: SeededFxMap::default(),
            order: VecDeque::new(),
            next_id: 0,
            max_conns: max_conns.max(1),
            budget: Budget::new(max_stream, max_total),
            stats: ConnStats::default(),
        }
    }

    /// Connections held now.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// True when no connection is held.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
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
        let dir = usize::from(p.src != key.0);
        let syn = p.flags & tcp_flags::SYN != 0;
        // Pure ACKs and the last FIN/RST of a connection already ended start nothing.
        let starts = syn || !p.data.is_empty() || p.missing > 0;
        if starts && self.conns.len() >= self.max_conns && !self.conns.contains_key(&key) {
            self.make_room(report);
        }
        if starts && self.order.len() >= 2 * self.max_conns {
            // Drop the entries of connections that ended, so the queue stays bounded too.
            let conns = &self.conns;
            self.order
                .retain(|(k, id)| conns.get(k).is_some_and(|c| c.id == *id));
        }
        // One look-up per packet: the entry is the connection, or where a new one goes.
        let conn = match self.conns.entry(key) {
            Entry::Occupied(o) => o.into_mut(),
            Entry::Vacant(_) if !starts => return,
            Entry::Vacant(v) => {
                self.next_id += 1;
                self.stats.conns += 1;
                self.order.push_back((key, self.next_id));
                v.insert(Conn {
                    first_ns: p.ts_ns,
                    last_ns: p.ts_ns,
                    fins: [false; 2],
                    state: S::new(&self.config, key),
                    streams: [Stream::new(), Stream::new()],
                    id: self.next_id,
                })
            }
        };
        conn.last_ns = p.ts_ns;
        if !conn.state.done() {
            let seg = Segment {
                seq: p.seq,
                syn,
                data: p.data,
                missing: p.missing,
            };
            let (streams, state) = (&mut conn.streams, &mut conn.state);
            let (src, ts) = (p.src, p.ts_ns);
            streams[dir].push(
                seg,
                &mut self.budget,
                &mut self.stats.reassembly,
                &mut |c| state.chunk(dir, src, ts, c),
            );
            if state.done() {
                for s in streams.iter_mut() {
                    s.release(&mut self.budget);
                }
                report(key, conn, false);
            } else if state.ready() {
                report(key, conn, false);
            }
        }
        conn.fins[dir] |= p.flags & tcp_flags::FIN != 0;
        if p.flags & tcp_flags::RST != 0 || conn.fins == [true; 2] {
            self.end(key, report);
        }
    }

    /// Ends every connection (the end of the input).
    pub fn finish(&mut self, report: &mut impl FnMut(ConnKey, &mut Conn<S>, bool)) {
        let keys: Vec<ConnKey> = self.order.drain(..).map(|(k, _)| k).collect();
        for key in keys {
            self.end(key, report);
        }
    }

    fn make_room(&mut self, report: &mut impl FnMut(ConnKey, &mut Conn<S>, bool)) {
        while self.conns.len() >= self.max_conns {
            let Some((key, id)) = self.order.pop_front() else {
                return;
            };
            if self.conns.get(&key).is_some_and(|c| c.id == id) {
                self.stats.evicted += 1;
                self.end(key, report);
            }
        }
    }

    /// Reads what is in order and what waits (after a gap) of both directions, then hands the
    /// connection over.
    fn end(&mut self, key: ConnKey, report: &mut impl FnMut(ConnKey, &mut Conn<S>, bool)) {
        let Some(mut conn) = self.conns.remove(&key) else {
            return;
        };
        let ts = conn.last_ns;
        for (dir, src) in [(0, key.0), (1, key.1)] {
            let (streams, state) = (&mut conn.streams, &mut conn.state);
            if state.done() {
                streams[dir].release(&mut self.budget);
            } else {
                streams[dir].flush(&mut self.budget, &mut self.stats.reassembly, &mut |c| {
                    state.chunk(dir, src, ts, c)
                });
            }
        }
        report(key, &mut conn, true);
    }
}
