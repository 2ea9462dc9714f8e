//! SIP's TCP streams put back in order: a small reassembly per direction of each connection
//! that carries SIP. Segments are placed by sequence number: a segment ahead of the next
//! expected byte waits (at most [`MAX_WAITING`] segments and [`WINDOW`] bytes ahead), a
//! retransmission adds only what is new. A connection is followed from its first segment that
//! starts a SIP message; one whose first message's start arrives after its continuation loses
//! that message (nothing is kept for connections not known to carry SIP).
use std::collections::HashMap;
use std::net::SocketAddr;

/// Out-of-order segments held per direction.
pub(crate) const MAX_WAITING: usize = 32;
/// How far ahead of the next expected byte a held segment may start, and the most bytes held
/// out of order per direction.
pub(crate) const WINDOW: u32 = 64 * 1024;
/// A direction idle this long (packet time) may be forgotten when the table is full.
const IDLE_NS: u64 = 60_000_000_000;

type Key = (SocketAddr, SocketAddr);

/// One direction of a connection.
#[derive(Default)]
struct Direction {
    /// Sequence number of the next byte expected.
    next: u32,
    /// In-order bytes not yet taken by the parser (the start of an incomplete message).
    buf: Vec<u8>,
    /// Segments ahead of `next`: (sequence number, bytes).
    waiting: Vec<(u32, Vec<u8>)>,
    last_ns: u64,
}

/// What became of a segment.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Placed {
    /// New in-order bytes: parse the direction's buffer.
    Ready,
    /// Held until the bytes before it come, or a retransmission of bytes already had.
    Held,
    /// Not followed: no SIP message starts it and the connection is not known.
    Ignored,
    /// The table is full: take the segment alone, as it is.
    Untracked,
}

/// Counters of the reassembly.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpStats {
    /// Segments that arrived ahead of a missing one and waited.
    pub reordered: u64,
    /// Times a direction gave up waiting for missing bytes (more held than allowed) and went
    /// on from the next segment that starts a SIP message.
    pub gaps: u64,
}

/// The directions followed.
pub(crate) struct TcpStreams {
    dirs: HashMap<Key, Direction>,
    max: usize,
    pub stats: TcpStats,
}

impl TcpStreams {
    pub(crate) fn new(max: usize) -> TcpStreams {
        TcpStreams {
            dirs: HashMap::new(),
            max,
            stats: TcpStats::default(),
        }
    }

    /// Takes one segment of `src` → `dst` starting at sequence number `seq`. `starts_sip`
    /// says whether `payload` begins a SIP message (a new direction starts only with one).
    pub(crate) fn segment(
        &mut self,
        ts_ns: u64,
        key: Key,
        seq: u32,
        payload: &[u8],
        starts_sip: bool,
    ) -> Placed {
        if payload.is_empty() {
            return Placed::Ignored;
        }
        if !self.dirs.contains_key(&key) {
            if !starts_sip {
                return Placed::Ignored;
            }
            if self.dirs.len() >= self.max && !self.forget_idle(ts_ns) {
                return Placed::Untracked;
            }
            self.dirs.insert(
                key,
                Direction {
                    next: seq,
                    ..Direction::default()
                },
            );
        }
        let Some(d) = self.dirs.get_mut(&key) else {
            return Placed::Ignored;
        };
        d.last_ns = ts_ns;
        let mut ahead = seq.wrapping_sub(d.next) as i32;
        if ahead < -(WINDOW as i32) && starts_sip {
            // Far behind: not a retransmission but a new connection on the same addresses
            // and ports (its FIN missed).
            *d = Direction {
                next: seq,
                last_ns: ts_ns,
                ..Direction::default()
            };
            ahead = 0;
        }
        if ahead > 0 {
            let held: usize = d.waiting.iter().map(|(_, b)| b.len()).sum();
            if ahead as u32 <= WINDOW
                && d.waiting.len() < MAX_WAITING
                && held + payload.len() <= WINDOW as usize
            {
                d.waiting.push((seq, payload.to_vec()));
                self.stats.reordered += 1;
                return Placed::Held;
            }
            // Missing bytes that are not coming (lost before the capture): go on from the
            // earliest held segment or this one that starts a SIP message.
            self.stats.gaps += 1;
            d.waiting.push((seq, payload.to_vec()));
            d.waiting.sort_by_key(|(s, _)| s.wrapping_sub(d.next));
            d.buf.clear();
            let restart = d
                .waiting
                .iter()
                .position(|(_, b)| trawl_voip::sip::looks_like_sip(b));
            match restart {
                Some(i) => {
                    d.waiting.drain(..i);
                    d.next = d.waiting[0].0;
                }
                None => {
                    self.dirs.remove(&key);
                    return Placed::Ignored;
                }
            }
        } else {
            // In order, or overlapping what was had: keep what is new.
            let skip = ahead.unsigned_abs() as usize;
            if skip >= payload.len() {
                return Placed::Held;
            }
            d.buf.extend_from_slice(&payload[skip..]);
            d.next = seq.wrapping_add(payload.len() as u32);
        }
        Self::take_waiting(d);
        Placed::Ready
    }

    /// Appends the held segments that now continue the bytes had, in order.
    fn take_waiting(d: &mut Direction) {
        loop {
            let next = d.next;
            let fits = d
                .waiting
                .iter()
                .position(|(s, _)| s.wrapping_sub(next) as i32 <= 0);
            let Some(i) = fits else {
                return;
            };
            let (s, bytes) = d.waiting.swap_remove(i);
            let skip = next.wrapping_sub(s) as usize;
            if skip < bytes.len() {
                d.buf.extend_from_slice(&bytes[skip..]);
                d.next = s.wrapping_add(bytes.len() as u32);
            }
        }
    }

    /// The in-order bytes of `key` not taken yet.
    pub(crate) fn buffer(&mut self, key: &Key) -> Option<&mut Vec<u8>> {
        self.dirs.get_mut(key).map(|d| &mut d.buf)
    }

    /// Forgets a direction (FIN or RST seen, or its bytes make no sense).
    pub(crate) fn close(&mut self, key: &Key) {
        self.dirs.remove(key);
    }

    /// Forgets the directions idle for [`IDLE_NS`]; whether any went.
    fn forget_idle(&mut self, now_ns: u64) -> bool {
        let before = self.dirs.len();
        self.dirs
            .retain(|_, d| now_ns.saturating_sub(d.last_ns) < IDLE_NS);
        self.dirs.len() < before
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> Key {
        (
            "10.0.0.1:5060".parse().unwrap(),
            "10.0.0.2:5060".parse().unwrap(),
        )
    }

    #[test]
    fn segments_out_of_order_come_out_in_order() {
        let mut t = TcpStreams::new(8);
        let k = key();
        assert_eq!(t.segment(1, k, 100, b"INVITE ", true), Placed::Ready);
        assert_eq!(t.segment(2, k, 111, b"CDEF", false), Placed::Held);
        assert_eq!(t.segment(3, k, 107, b"AB", false), Placed::Ready);
        assert_eq!(t.buffer(&k).unwrap().as_slice(), b"INVITE AB");
        // The missing two bytes, then a retransmission overlapping them and what follows.
        assert_eq!(t.segment(4, k, 109, b"xyCD", false), Placed::Ready);
        assert_eq!(t.buffer(&k).unwrap().as_slice(), b"INVITE ABxyCDEF");
        assert_eq!(t.segment(5, k, 100, b"INVITE", false), Placed::Held);
        assert_eq!(t.stats.reordered, 1);
        // A new connection on the same ports, far behind: followed from its first message.
        let again = 100u32.wrapping_sub(10 * WINDOW);
        assert_eq!(t.segment(6, k, again, b"ACK", true), Placed::Ready);
        assert_eq!(t.buffer(&k).unwrap().as_slice(), b"ACK");
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut t = TcpStreams::new(8);
        let k = key();
        t.segment(1, k, u32::MAX - 1, b"OPTIONS", true);
        t.segment(2, k, 8, b"!", false);
        t.segment(3, k, 5, b"abc", false);
        assert_eq!(t.buffer(&k).unwrap().as_slice(), b"OPTIONSabc!");
    }

    #[test]
    fn a_gap_that_is_never_filled_is_skipped_at_the_next_message() {
        let mut t = TcpStreams::new(8);
        let k = key();
        t.segment(1, k, 0, b"BYE sip:a", true);
        // Byte 9 onwards lost; later segments wait, then give up at the window.
        let far = 9 + 10 + WINDOW;
        let register = b"REGISTER sip:b SIP/2.0\r\n";
        assert_eq!(t.segment(2, k, 19, register, false), Placed::Held);
        assert_eq!(t.segment(3, k, far, b"x", false), Placed::Ready);
        assert_eq!(t.buffer(&k).unwrap().as_slice(), register);
        assert_eq!(t.stats.gaps, 1);
    }

    #[test]
    fn a_full_table_forgets_idle_directions_or_leaves_new_ones_untracked() {
        let mut t = TcpStreams::new(1);
        let a = key();
        let b = ("10.0.0.3:5060".parse().unwrap(), a.1);
        t.segment(0, a, 0, b"INVITE", true);
        assert_eq!(t.segment(1, b, 0, b"INVITE", true), Placed::Untracked);
        assert_eq!(t.segment(IDLE_NS + 1, b, 0, b"INVITE", true), Placed::Ready);
        assert_eq!(t.dirs.len(), 1);
    }
}
