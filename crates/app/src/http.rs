//! HTTP/1.x message heads over an in-order byte stream (one direction of a connection):
//! [`HttpStream`] finds each head, reads the fields logs need, and skips the body by its
//! `Content-Length`, its chunked encoding, or to the end of the connection — counting body bytes,
//! never keeping them — so that pipelined and keep-alive messages are all found.

use std::collections::VecDeque;

use crate::{Error, HttpErrorKind};

/// Longest head accepted (start line and headers).
pub const MAX_HEAD_LEN: usize = 64 * 1024;
/// Longest chunk-size line (with extensions).
const MAX_CHUNK_LINE: usize = 1024;

/// Which direction a stream carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client to server: requests.
    Request,
    /// Server to client: responses.
    Response,
}

/// A request or response head.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Head {
    /// Request method (requests).
    pub method: Option<String>,
    /// Request target as sent (requests).
    pub uri: Option<String>,
    /// `HTTP/1.1`, `HTTP/1.0`.
    pub version: String,
    /// Status code (responses).
    pub status: Option<u16>,
    /// `Host`.
    pub host: Option<String>,
    /// `User-Agent`.
    pub user_agent: Option<String>,
    /// `Referer`.
    pub referrer: Option<String>,
    /// `Content-Type`.
    pub content_type: Option<String>,
    /// `Content-Length`, when valid.
    pub content_length: Option<u64>,
    /// `Transfer-Encoding` ends with `chunked`.
    pub chunked: bool,
    /// Length of the head in bytes (through the empty line).
    pub head_len: usize,
    /// Header lines without a colon, skipped.
    pub bad_lines: u32,
    /// Body bytes the stream had counted when this head was complete ([`HttpStats::body_bytes`]):
    /// a message's body length is the next head's value (or the final count) minus its own.
    pub body_bytes_before: u64,
}

fn http_err(offset: usize, field: &'static str, kind: HttpErrorKind) -> Error {
    Error::Http {
        offset,
        field,
        kind,
    }
}

/// Parses the head at the start of `buf`: `Ok(None)` while its empty line has not arrived.
///
/// # Errors
/// [`Error::Http`]: a start line that is not HTTP/1.x, a Content-Length that is not a number, a
/// head longer than [`MAX_HEAD_LEN`]; offsets count from the start of the head.
pub fn parse_head(dir: Direction, buf: &[u8]) -> Result<Option<Head>, Error> {
    let Some(end) = find_head_end(buf) else {
        if buf.len() > MAX_HEAD_LEN {
            return Err(http_err(0, "head", HttpErrorKind::TooLarge));
        }
        // A first line that cannot be HTTP is refused before its end arrives.
        check_start(dir, buf)?;
        return Ok(None);
    };
    if end > MAX_HEAD_LEN {
        return Err(http_err(0, "head", HttpErrorKind::TooLarge));
    }
    let text = &buf[..end];
    let mut lines = split_lines(text);
    let first = lines.next().unwrap_or(&[]);
    let mut head = start_line(dir, first)?;
    head.head_len = end;
    let mut offset = first.len();
    for line in lines {
        let line_start = offset;
        offset += line.len();
        let line = trim_eol(line);
        if line.is_empty() {
            break;
        }
        // A line without a colon is skipped and counted, as tshark and Zeek read on past it.
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            head.bad_lines += 1;
            continue;
        };
        let name = &line[..colon];
        let value = String::from_utf8_lossy(trim(&line[colon + 1..])).into_owned();
        header(&mut head, name, value, line_start)?;
    }
    Ok(Some(head))
}

/// Refuses a buffer whose first bytes cannot start an HTTP/1.x message.
fn check_start(dir: Direction, buf: &[u8]) -> Result<(), Error> {
    let ok = match dir {
        Direction::Response => {
            let n = buf.len().min(5);
            buf[..n] == b"HTTP/"[..n]
        }
        Direction::Request => buf
            .iter()
            .take(16)
            .take_while(|&&b| b != b' ')
            .all(|&b| method_char(b)),
    };
    if ok {
        Ok(())
    } else {
        Err(http_err(0, "start_line", HttpErrorKind::NotHttp))
    }
}

/// Methods are upper-case tokens (GET, M-SEARCH, VERSION_CONTROL, ...).
fn method_char(b: u8) -> bool {
    b.is_ascii_uppercase() || b == b'-' || b == b'_'
}

fn start_line(dir: Direction, line: &[u8]) -> Result<Head, Error> {
    let line = trim_eol(line);
    let mut parts = line.splitn(3, |&b| b == b' ');
    let (a, b, c) = (parts.next().unwrap_or(&[]), parts.next(), parts.next());
    let s = |x: &[u8]| String::from_utf8_lossy(x).into_owned();
    match dir {
        Direction::Request => {
            let (Some(uri), Some(version)) = (b, c) else {
                return Err(http_err(0, "request_line", HttpErrorKind::NotHttp));
            };
            if a.is_empty()
                || a.len() > 16
                || !a.iter().all(|&b| method_char(b))
                || !version.starts_with(b"HTTP/1.")
            {
                return Err(http_err(0, "request_line", HttpErrorKind::NotHttp));
            }
            Ok(Head {
                method: Some(s(a)),
                uri: Some(s(uri)),
                version: s(version),
                ..Head::default()
            })
        }
        Direction::Response => {
            let status = b
                .and_then(|b| std::str::from_utf8(b).ok())
                .and_then(|t| t.parse::<u16>().ok())
                .filter(|s| (100..1000).contains(s));
            let Some(status) = status.filter(|_| a.starts_with(b"HTTP/1.")) else {
                return Err(http_err(0, "status_line", HttpErrorKind::NotHttp));
            };
            Ok(Head {
                status: Some(status),
                version: s(a),
                ..Head::default()
            })
        }
    }
}

fn header(head: &mut Head, name: &[u8], value: String, offset: usize) -> Result<(), Error> {
    let is = |n: &str| name.eq_ignore_ascii_case(n.as_bytes());
    if is("host") {
        head.host.get_or_insert(value);
    } else if is("user-agent") {
        head.user_agent.get_or_insert(value);
    } else if is("referer") {
        head.referrer.get_or_insert(value);
    } else if is("content-type") {
        head.content_type.get_or_insert(value);
    } else if is("content-length") {
        let Ok(n) = value.parse::<u64>() else {
            return Err(http_err(offset, "content-length", HttpErrorKind::Malformed));
        };
        head.content_length = Some(n);
    } else if is("transfer-encoding") {
        head.chunked = value
            .rsplit(',')
            .next()
            .is_some_and(|last| last.trim().eq_ignore_ascii_case("chunked"));
    }
    Ok(())
}

/// Offset just past the empty line that ends a head (CRLF CRLF, or bare LF LF).
fn find_head_end(buf: &[u8]) -> Option<usize> {
    find_head_end_from(buf, 0)
}

/// [`find_head_end`] looking for line ends from `from` on.
fn find_head_end_from(buf: &[u8], from: usize) -> Option<usize> {
    let mut i = from.min(buf.len());
    while let Some(p) = buf[i..].iter().position(|&b| b == b'\n') {
        let nl = i + p;
        let rest = &buf[nl + 1..];
        if rest.first() == Some(&b'\n') {
            return Some(nl + 2);
        }
        if rest.starts_with(b"\r\n") {
            return Some(nl + 3);
        }
        if rest.len() < 2 && (rest.is_empty() || rest[0] == b'\r') {
            return None;
        }
        i = nl + 1;
    }
    None
}

fn split_lines(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split_inclusive(|&b| b == b'\n')
}

fn trim_eol(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn trim(v: &[u8]) -> &[u8] {
    let start = v
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(v.len());
    let end = v
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(start, |e| e + 1);
    &v[start..end]
}

/// Where a stream is between heads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Body {
    /// Waiting for a head.
    Head,
    /// A body of this many more bytes.
    Length(u64),
    /// At a chunk-size line.
    ChunkSize,
    /// Inside a chunk: data bytes left, then its CRLF.
    ChunkData(u64),
    /// The CRLF after a chunk's data: bytes left of it.
    ChunkEnd(u8),
    /// Trailer lines after the last chunk, until an empty line.
    Trailer,
    /// A response without length: everything to the end of the connection.
    UntilClose,
    /// A fault: nothing more is read.
    Failed,
}

/// What a stream counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HttpStats {
    /// Heads found.
    pub heads: u64,
    /// Body bytes skipped (chunk framing not counted).
    pub body_bytes: u64,
}

/// One direction of an HTTP/1.x connection, fed in order.
#[derive(Debug)]
pub struct HttpStream {
    dir: Direction,
    state: Body,
    /// Bytes of a head or of a chunk-size/trailer line not yet complete.
    buf: Vec<u8>,
    /// For each final response still to come that the caller announced, in order: whether it
    /// has no body (it answers a HEAD request). Responses beyond the announced ones have bodies
    /// as their headers say.
    expected: VecDeque<bool>,
    /// Offset in the stream of `buf[0]` (for errors).
    offset: usize,
    /// What was counted.
    pub stats: HttpStats,
}

impl HttpStream {
    /// A stream at the start of a connection.
    pub fn new(dir: Direction) -> Self {
        Self {
            dir,
            state: Body::Head,
            buf: Vec::new(),
            expected: VecDeque::new(),
            offset: 0,
            stats: HttpStats::default(),
        }
    }

    /// Tells a response stream that one more response will answer a HEAD request (no body
    /// whatever its headers say).
    pub fn expect_bodyless_response(&mut self) {
        self.expected.push_back(true);
    }

    /// Tells a response stream about the next request on the connection, in order: its final
    /// response has no body when the request was a HEAD (`bodyless`). With pipelining, the
    /// caller announces every request so that each flag meets its own response.
    pub fn expect_response(&mut self, bodyless: bool) {
        self.expected.push_back(bodyless);
    }

    /// Takes the next bytes; calls `on_head` with each head completed.
    ///
    /// # Errors
    /// The first fault (offset in the stream); the stream reads nothing more after it.
    pub fn push(&mut self, mut bytes: &[u8], mut on_head: impl FnMut(Head)) -> Result<(), Error> {
        while !bytes.is_empty() {
            let used = match self.step(bytes, &mut on_head) {
                Ok(n) => n,
                Err(e) => {
                    self.state = Body::Failed;
                    self.buf = Vec::new();
                    return Err(e);
                }
            };
            self.offset += used;
            bytes = &bytes[used..];
        }
        Ok(())
    }

    /// Consumes some of `bytes` in the current state; returns how many.
    fn step(&mut self, bytes: &[u8], on_head: &mut impl FnMut(Head)) -> Result<usize, Error> {
        match self.state {
            Body::Failed => Ok(bytes.len()),
            Body::UntilClose => {
                self.stats.body_bytes += bytes.len() as u64;
                Ok(bytes.len())
            }
            Body::Length(n) | Body::ChunkData(n) => {
                let take = (bytes.len() as u64).min(n);
                self.stats.body_bytes += take;
                let left = n - take;
                self.state = match (self.state, left) {
                    (Body::Length(_), 0) => Body::Head,
                    (Body::Length(_), l) => Body::Length(l),
                    (_, 0) => Body::ChunkEnd(2),
                    (_, l) => Body::ChunkData(l),
                };
                Ok(take as usize)
            }
            Body::ChunkEnd(n) => {
                let take = bytes.len().min(usize::from(n));
                self.state = if take == usize::from(n) {
                    Body::ChunkSize
                } else {
                    Body::ChunkEnd(n - take as u8)
                };
                Ok(take)
            }
            Body::ChunkSize | Body::Trailer => self.line(bytes),
            Body::Head => self.head(bytes, on_head),
        }
    }

    /// Accumulates a chunk-size or trailer line.
    fn line(&mut self, bytes: &[u8]) -> Result<usize, Error> {
        let (take, done) = match bytes.iter().position(|&b| b == b'\n') {
            Some(p) => (p + 1, true),
            None => (bytes.len(), false),
        };
        self.buf.extend_from_slice(&bytes[..take]);
        if self.buf.len() > MAX_CHUNK_LINE {
            return Err(http_err(self.offset, "chunk_size", HttpErrorKind::TooLarge));
        }
        if !done {
            return Ok(take);
        }
        let line = trim_eol(&self.buf);
        self.state = if self.state == Body::Trailer {
            if line.is_empty() {
                Body::Head
            } else {
                Body::Trailer
            }
        } else {
            let digits = line.split(|&b| b == b';').next().map(trim).unwrap_or(&[]);
            let size = std::str::from_utf8(digits)
                .ok()
                .and_then(|t| u64::from_str_radix(t, 16).ok());
            match size {
                Some(0) => Body::Trailer,
                Some(n) => Body::ChunkData(n),
                None => {
                    return Err(http_err(
                        self.offset + take - self.buf.len(),
                        "chunk_size",
                        HttpErrorKind::Malformed,
                    ))
                }
            }
        };
        self.buf.clear();
        Ok(take)
    }

    /// Accumulates a head; on its end, reports it and chooses how its body is read.
    fn head(&mut self, bytes: &[u8], on_head: &mut impl FnMut(Head)) -> Result<usize, Error> {
        let before = self.buf.len();
        // Look at most one head's worth ahead so a body is not copied into the head buffer.
        let take = bytes.len().min(MAX_HEAD_LEN + 4 - before.min(MAX_HEAD_LEN));
        self.buf.extend_from_slice(&bytes[..take]);
        let at = |e: Error| match e {
            Error::Http {
                offset,
                field,
                kind,
            } => Error::Http {
                offset: offset + self.offset - before,
                field,
                kind,
            },
            other => other,
        };
        // Only the new bytes (and the 2 before, for a CR LF CR LF across pushes) can end the
        // head: a head fed a byte at a time is scanned once, not once per byte.
        if self.buf.len() <= MAX_HEAD_LEN
            && find_head_end_from(&self.buf, before.saturating_sub(2)).is_none()
        {
            check_start(self.dir, &self.buf).map_err(at)?;
            return Ok(take);
        }
        let Some(head) = parse_head(self.dir, &self.buf).map_err(at)? else {
            return Ok(take);
        };
        let used = head.head_len - before;
        self.buf.clear();
        self.stats.heads += 1;
        self.state = self.body_of(&head);
        let mut head = head;
        head.body_bytes_before = self.stats.body_bytes;
        on_head(head);
        Ok(used)
    }

    fn body_of(&mut self, head: &Head) -> Body {
        if let Some(status) = head.status {
            // Interim (1xx) responses answer no request: the flag waits for the final one.
            let bodyless = if status >= 200 {
                self.expected.pop_front().unwrap_or(false)
            } else {
                false
            };
            if bodyless || status < 200 || status == 204 || status == 304 {
                return Body::Head;
            }
        }
        match (head.chunked, head.content_length, head.status) {
            (true, _, _) => Body::ChunkSize,
            (false, Some(0), _) => Body::Head,
            (false, Some(n), _) => Body::Length(n),
            (false, None, Some(_)) => Body::UntilClose,
            (false, None, None) => Body::Head,
        }
    }
}
