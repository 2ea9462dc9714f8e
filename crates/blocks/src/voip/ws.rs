//! SIP over WebSocket (RFC 7118), without TLS: a TCP connection that starts with an HTTP
//! Upgrade asking for the `sip` subprotocol, then carries each SIP message in one WebSocket
//! message (RFC 6455 frames: a text or binary frame, or several with continuations; the
//! client's masked). `sip` follows such a connection like SIP over TCP and reads the
//! messages out of the frames: the handshake is skipped, control frames (ping, pong, close)
//! are skipped, a message split over frames is parsed once its last frame is there.
//!
//! Each direction's bytes tell which they are without state: a SIP start line begins with a
//! capital letter, an HTTP handshake with `GET ` or `HTTP/1.1 `, and a frame's first byte has
//! its reserved bits clear and a defined opcode, which no letter and no keep-alive CR or LF
//! has (CR is the reserved opcode 13; LF is a pong without FIN, which RFC 6455 forbids).

/// Whether a direction's first segment opens SIP over WebSocket: the client's Upgrade
/// request or the server's `101` answer, naming the `sip` subprotocol.
pub(crate) fn is_sip_handshake(payload: &[u8]) -> bool {
    (payload.starts_with(b"GET ") || payload.starts_with(b"HTTP/1.1 101"))
        && contains_ignore_case(head(payload), b"sec-websocket-protocol: sip")
}

/// Whether the bytes start an HTTP message (the handshake, in a direction already followed).
pub(crate) fn is_http(b: &[u8]) -> bool {
    b.starts_with(b"GET ") || b.starts_with(b"HTTP/1.1 ")
}

/// Whether `b` can be the first byte of a frame: reserved bits clear, a defined opcode, and
/// a control frame (ping, pong, close) not fragmented.
pub(crate) fn is_frame_start(b: u8) -> bool {
    let opcode = b & 0x0f;
    b & 0x70 == 0 && (opcode <= 2 || (b & 0x80 != 0 && (8..=10).contains(&opcode)))
}

/// Whether a direction's first segment (the connection's start not captured) is a frame
/// whose message starts with a SIP start line.
pub(crate) fn frame_starts_sip(payload: &[u8]) -> bool {
    let Some(&first) = payload.first() else {
        return false;
    };
    if !is_frame_start(first) || !matches!(first & 0x0f, 1 | 2) {
        return false;
    }
    let Some(h) = header(payload) else {
        return false;
    };
    let end = payload.len().min(h.len + 256);
    let mut start = payload[h.len..end].to_vec();
    unmask(&mut start, h.mask, 0);
    trawl_voip::sip::looks_like_sip(&start)
}

/// What [`message`] found at the start of the bytes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frames {
    /// A whole message (its payload, unmasked, in the output buffer) in this many bytes.
    Message(usize),
    /// Control frames only, this many bytes of them: nothing to parse.
    Control(usize),
    /// The message's frames are not all there yet.
    Incomplete,
    /// Not frames after all (reserved bits, a message longer than allowed).
    Invalid,
}

/// Longest message taken: SIP over TCP keeps no more per direction either.
const MAX_MESSAGE: usize = 64 * 1024;

/// A frame's header: its length, payload length, mask key, FIN and opcode.
struct Header {
    len: usize,
    payload: usize,
    mask: Option<[u8; 4]>,
    fin: bool,
    opcode: u8,
}

fn header(b: &[u8]) -> Option<Header> {
    let (b0, b1) = (*b.first()?, *b.get(1)?);
    let (mut len, mut payload) = (2, usize::from(b1 & 0x7f));
    if payload == 126 {
        payload = usize::from(u16::from_be_bytes(b.get(2..4)?.try_into().ok()?));
        len = 4;
    } else if payload == 127 {
        let n = u64::from_be_bytes(b.get(2..10)?.try_into().ok()?);
        payload = usize::try_from(n).unwrap_or(usize::MAX);
        len = 10;
    }
    let mask = if b1 & 0x80 != 0 {
        let key: [u8; 4] = b.get(len..len + 4)?.try_into().ok()?;
        len += 4;
        Some(key)
    } else {
        None
    };
    Some(Header {
        len,
        payload,
        mask,
        fin: b0 & 0x80 != 0,
        opcode: b0 & 0x0f,
    })
}

/// XORs `data` with the mask key, `data` starting `offset` bytes into the frame's payload.
fn unmask(data: &mut [u8], mask: Option<[u8; 4]>, offset: usize) {
    if let Some(key) = mask {
        for (i, byte) in data.iter_mut().enumerate() {
            *byte ^= key[(offset + i) % 4];
        }
    }
}

/// Reads the frames at the start of `b` up to the end of the first data message: its payload
/// (frames joined, unmasked) into `out`. Control frames before and between are skipped.
pub(crate) fn message(b: &[u8], out: &mut Vec<u8>) -> Frames {
    out.clear();
    let mut at = 0;
    let mut in_message = false;
    while at < b.len() {
        if !is_frame_start(b[at]) {
            return Frames::Invalid;
        }
        let Some(h) = header(&b[at..]) else {
            return Frames::Incomplete;
        };
        if h.payload > MAX_MESSAGE || out.len() + h.payload > MAX_MESSAGE {
            return Frames::Invalid;
        }
        let end = at + h.len + h.payload;
        if end > b.len() {
            return Frames::Incomplete;
        }
        let control = h.opcode >= 8;
        // A continuation needs a message begun; a new data frame needs none in progress.
        if !control && ((h.opcode == 0) != in_message) {
            return Frames::Invalid;
        }
        if !control {
            let from = out.len();
            out.extend_from_slice(&b[at + h.len..end]);
            unmask(&mut out[from..], h.mask, 0);
            in_message = !h.fin;
            if h.fin {
                return Frames::Message(end);
            }
        } else if !in_message && !b[end..].first().is_some_and(|&c| is_frame_start(c)) {
            // Only control frames here (a ping, a close): taken on their own.
            return Frames::Control(end);
        }
        at = end;
    }
    Frames::Incomplete
}

/// The first 1024 bytes: where an HTTP request's headers are.
fn head(b: &[u8]) -> &[u8] {
    &b[..b.len().min(1024)]
}

fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame: FIN, opcode, payload, masked with `key` when given.
    fn frame(fin: bool, opcode: u8, payload: &[u8], key: Option<[u8; 4]>) -> Vec<u8> {
        let mut f = vec![(u8::from(fin) << 7) | opcode];
        let m = if key.is_some() { 0x80 } else { 0 };
        match payload.len() {
            n if n < 126 => f.push(m | n as u8),
            n => {
                f.push(m | 126);
                f.extend_from_slice(&(n as u16).to_be_bytes());
            }
        }
        let mut p = payload.to_vec();
        if let Some(k) = key {
            f.extend_from_slice(&k);
            unmask(&mut p, Some(k), 0);
        }
        f.extend_from_slice(&p);
        f
    }

    #[test]
    fn parse_masked_message_split_over_frames_with_a_ping_between() {
        let sip = b"OPTIONS sip:b@b.org SIP/2.0\r\nContent-Length: 0\r\n\r\n".repeat(4);
        let key = Some([1, 2, 3, 4]);
        let mut b = frame(false, 1, &sip[..150], key);
        b.extend(frame(true, 9, b"hi", key));
        let whole = b.len() + frame(true, 0, &sip[150..], key).len();
        b.extend(frame(true, 0, &sip[150..], key));
        b.extend(frame(true, 2, b"next", None));
        let mut out = Vec::new();
        for cut in [1, 3, 150, whole - 1] {
            assert_eq!(message(&b[..cut], &mut out), Frames::Incomplete, "{cut}");
        }
        assert_eq!(message(&b, &mut out), Frames::Message(whole));
        assert_eq!(out, sip);
        assert_eq!(
            message(&b[whole..], &mut out),
            Frames::Message(b.len() - whole)
        );
        assert_eq!(out, b"next");
        assert!(frame_starts_sip(&b) && !frame_starts_sip(&b[whole..]));
    }

    #[test]
    fn parse_control_frames_alone_and_refuse_what_is_not_frames() {
        let mut out = Vec::new();
        let close = frame(true, 8, &[3, 232], None);
        assert_eq!(message(&close, &mut out), Frames::Control(close.len()));
        assert_eq!(message(b"INVITE", &mut out), Frames::Invalid);
        // A continuation with no message begun.
        assert_eq!(
            message(&frame(true, 0, b"x", None), &mut out),
            Frames::Invalid
        );
        for c in [b'\r', b'\n', b'A', b'S', b'Z'] {
            assert!(!is_frame_start(c), "{c}");
        }
    }

    #[test]
    fn handshake_names_the_sip_subprotocol() {
        let get = b"GET / HTTP/1.1\r\nHost: b\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                    Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: sip\r\n\
                    Sec-WebSocket-Version: 13\r\n\r\n";
        assert!(is_sip_handshake(get));
        let ok = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                   SEC-WEBSOCKET-PROTOCOL: sip\r\n\r\n";
        assert!(is_sip_handshake(ok));
        assert!(!is_sip_handshake(b"GET / HTTP/1.1\r\nHost: b\r\n\r\n"));
    }
}
