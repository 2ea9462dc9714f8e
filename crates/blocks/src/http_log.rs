//! The HTTP analyser of `stream_log` (`crate::stream_log`): HTTP/1.x requests joined to their
//! responses, one log line per pair (`http.jsonl` of `trawl logs`, docs/specs/logs.md). Both
//! directions of each TCP connection are reassembled (`tcp_conns`, shared with the other stream
//! analysers) and read by `trawl_app::http::HttpStream`, which skips bodies by their length or
//! chunk sizes without keeping them; responses meet requests in order on the connection
//! (pipelining: the n-th final response answers the n-th request; 1xx responses are interim and
//! answer none). A pair is written once its response's body has ended (the next response's head,
//! or the connection's end); requests left without a response are written at the end,
//! unanswered. A connection that is not HTTP is dropped by the analyser at its first bytes.
use std::collections::VecDeque;

use serde_json::{json, Map, Value};
use trawl_app::http::{Direction, Head, HttpStream};
use trawl_app::reassembly::Chunk;
use trawl_flow::community_id::{CommunityId, FlowTuple};

use crate::messages::Event;
use crate::tcp_conns::ConnKey;

/// IP protocol number of TCP.
const TCP: u8 = 6;

/// Requests waiting for their response on one connection; beyond it the oldest is written
/// unanswered (a client pipelining this deep is not waiting for answers).
const MAX_PENDING_REQUESTS: usize = 64;

/// A head and the packet time that completed it.
struct Seen {
    head: Head,
    ts_ns: u64,
}

/// A request/response pair (either may be missing) with its body lengths, ready to write.
pub struct Pair {
    /// The direction the requests travel (0 or 1, as `tcp_conns` numbers them).
    request_dir: usize,
    request: Option<Seen>,
    response: Option<Seen>,
    request_body_len: Option<u64>,
    response_body_len: Option<u64>,
    error: Option<String>,
}

/// One direction's reader: its stream, or why it stopped.
struct HttpDir {
    stream: HttpStream,
    /// Bytes taken (the offset of a gap).
    offset: u64,
    error: Option<Stop>,
}

/// Why a direction stopped, kept as data: most directions that stop are streams that are not
/// HTTP, whose connection writes no line, so the text is made only for a line written.
#[derive(Clone, Copy)]
enum Stop {
    /// The parser's error.
    Read(trawl_app::Error),
    /// A gap of `n` bytes at stream offset `offset`.
    Gap { n: u64, offset: u64 },
}

impl Stop {
    fn text(self) -> String {
        match self {
            Stop::Read(e) => {
                let text = e.to_string();
                text.strip_prefix("http: ").unwrap_or(&text).to_string()
            }
            Stop::Gap { n, offset } => format!("gap of {n} bytes at offset {offset} (stream)"),
        }
    }
}

/// A connection's HTTP state.
#[derive(Default)]
pub struct HttpConn {
    /// Per direction, from its first bytes on (`None` before).
    dirs: [Option<HttpDir>; 2],
    /// Which direction carries requests, once known.
    request_dir: Option<usize>,
    /// Requests waiting for their response, in order.
    requests: VecDeque<Seen>,
    /// The latest final response with its request: its body is still being counted.
    current: Option<(Option<Seen>, Seen)>,
    /// Heads found in the connection.
    heads: u64,
    /// Requests (whether HEAD) seen before the response direction started: its stream, once
    /// made, is told about them in order.
    announced: Vec<bool>,
    /// Pairs ready to be written.
    ready: Vec<Pair>,
}

impl HttpConn {
    fn body_len(&self, dir: usize, seen: &Seen, next: Option<&Seen>) -> Option<u64> {
        let d = self.dirs[dir].as_ref()?;
        let end = next.map_or(d.stream.stats.body_bytes, |n| n.head.body_bytes_before);
        Some(end.saturating_sub(seen.head.body_bytes_before))
    }

    /// The pair of `request` and `response`, body lengths as far as counted now.
    fn pair(
        &self,
        request: Option<Seen>,
        response: Option<Seen>,
        next_response: Option<&Seen>,
    ) -> Pair {
        let rq = self.request_dir.unwrap_or(0);
        let request_body_len = request
            .as_ref()
            .and_then(|r| self.body_len(rq, r, self.requests.front()));
        let response_body_len = response
            .as_ref()
            .and_then(|r| self.body_len(1 - rq, r, next_response));
        let error = [rq, 1 - rq]
            .into_iter()
            .find_map(|i| self.dirs[i].as_ref().and_then(|d| d.error))
            .map(Stop::text);
        Pair {
            request_dir: rq,
            request,
            response,
            request_body_len,
            response_body_len,
            error,
        }
    }

    fn on_request(&mut self, seen: Seen) {
        // The response stream learns of every request in order, so that the response to a
        // HEAD (no body whatever its headers say) is the one read without a body.
        let head = seen.head.method.as_deref() == Some("HEAD");
        match self.dirs[1 - self.request_dir.unwrap_or(0)].as_mut() {
            Some(d) => d.stream.expect_response(head),
            None => self.announced.push(head),
        }
        if self.requests.len() >= MAX_PENDING_REQUESTS {
            let old = self.requests.pop_front();
            let p = self.pair(old, None, None);
            self.ready.push(p);
        }
        self.requests.push_back(seen);
    }

    fn on_response(&mut self, seen: Seen) {
        // 1xx are interim (100 Continue, 103 Early Hints): the final response follows.
        // 101 Switching Protocols ends HTTP/1.x on the connection but answers the request.
        if matches!(seen.head.status, Some(s) if (100..200).contains(&s) && s != 101) {
            return;
        }
        if let Some((req, resp)) = self.current.take() {
            let p = self.pair(req, Some(resp), Some(&seen));
            self.ready.push(p);
        }
        let req = self.requests.pop_front();
        self.current = Some((req, seen));
    }

    /// The connection ended: what is left is written.
    fn finish(&mut self) {
        if let Some((req, resp)) = self.current.take() {
            let p = self.pair(req, Some(resp), None);
            self.ready.push(p);
        }
        while let Some(req) = self.requests.pop_front() {
            let p = self.pair(Some(req), None, None);
            self.ready.push(p);
        }
    }
}

impl HttpConn {
    /// Takes the next chunk of direction `dir` (as `tcp_conns` numbers them), at `ts_ns`.
    pub(crate) fn chunk(&mut self, dir: usize, ts_ns: u64, chunk: Chunk<'_>) {
        if self.dirs[dir].is_none() {
            let Chunk::Data(bytes) = chunk else {
                return;
            };
            // The first bytes tell the direction: a status line starts with `HTTP/`.
            let response = bytes.starts_with(b"HTTP/");
            let request_dir = *self
                .request_dir
                .get_or_insert(if response { 1 - dir } else { dir });
            let kind = if dir == request_dir {
                Direction::Request
            } else {
                Direction::Response
            };
            let mut stream = HttpStream::new(kind);
            if kind == Direction::Response {
                for head in std::mem::take(&mut self.announced) {
                    stream.expect_response(head);
                }
            }
            self.dirs[dir] = Some(HttpDir {
                stream,
                offset: 0,
                error: None,
            });
        }
        let is_request = Some(dir) == self.request_dir;
        let d = self.dirs[dir].as_mut().expect("created above");
        if d.error.is_some() {
            return;
        }
        let mut heads = Vec::new();
        match chunk {
            Chunk::Data(bytes) => {
                d.offset += bytes.len() as u64;
                if let Err(e) = d.stream.push(bytes, |h| heads.push(h)) {
                    d.error = Some(Stop::Read(e));
                }
            }
            Chunk::Gap(n) => {
                d.error = Some(Stop::Gap {
                    n,
                    offset: d.offset,
                });
            }
        }
        for head in heads {
            self.heads += 1;
            let seen = Seen { head, ts_ns };
            if is_request {
                self.on_request(seen);
            } else {
                self.on_response(seen);
            }
        }
    }

    /// True once the analyser wants no more of the connection's bytes.
    pub(crate) fn done(&self) -> bool {
        // Not HTTP (nothing found and a direction refused), or both directions stopped.
        let failed = |d: &Option<HttpDir>| d.as_ref().is_some_and(|d| d.error.is_some());
        (self.heads == 0 && self.dirs.iter().any(failed)) || self.dirs.iter().all(failed)
    }

    /// True when nothing is left to write, now or at the connection's end.
    pub(crate) fn idle(&self) -> bool {
        self.ready.is_empty() && self.current.is_none() && self.requests.is_empty()
    }

    /// True when pairs wait to be written.
    pub(crate) fn ready(&self) -> bool {
        !self.ready.is_empty()
    }
}

/// Writes the connection's ready pairs (all that is left when it `ended`).
pub(crate) fn write_lines(key: ConnKey, conn: &mut HttpConn, ended: bool, out: &mut Vec<Event>) {
    if ended {
        conn.finish();
    }
    for p in conn.ready.drain(..) {
        out.push(line(key, &p));
    }
}

/// The log line of a pair (fields of docs/specs/logs.md, HTTP).
fn line(key: ConnKey, p: &Pair) -> Event {
    let (client, server) = if p.request_dir == 0 {
        key
    } else {
        (key.1, key.0)
    };
    let ts_ns = p
        .request
        .as_ref()
        .or(p.response.as_ref())
        .map_or(0, |s| s.ts_ns);
    let tuple = FlowTuple {
        proto: TCP,
        src_ip: client.ip(),
        dst_ip: server.ip(),
        src_port: client.port(),
        dst_port: server.port(),
    };
    let mut j = Map::new();
    j.insert("ts_ns".into(), json!(ts_ns));
    if let Some(id) = CommunityId::default().text(&tuple) {
        j.insert("community_id".into(), json!(id.as_str()));
    }
    j.insert("src_ip".into(), json!(client.ip().to_string()));
    j.insert("src_port".into(), json!(client.port()));
    j.insert("dst_ip".into(), json!(server.ip().to_string()));
    j.insert("dst_port".into(), json!(server.port()));
    j.insert("proto".into(), json!(TCP));
    let (rq, rs) = (
        p.request.as_ref().map(|s| &s.head),
        p.response.as_ref().map(|s| &s.head),
    );
    if let Some(h) = rq {
        let mut put = |k: &str, v: &Option<String>| {
            if let Some(v) = v {
                j.insert(k.into(), json!(v));
            }
        };
        put("method", &h.method);
        put("host", &h.host);
        put("uri", &h.uri);
        put("user_agent", &h.user_agent);
        put("referrer", &h.referrer);
    }
    if let Some(h) = rq.or(rs) {
        j.insert("version".into(), json!(h.version));
    }
    if let Some(s) = rs.and_then(|h| h.status) {
        j.insert("status".into(), json!(s));
    }
    // The type of what came back, else of what was sent.
    if let Some(ct) = rs
        .and_then(|h| h.content_type.as_ref())
        .or_else(|| rq.and_then(|h| h.content_type.as_ref()))
    {
        j.insert("content_type".into(), json!(ct));
    }
    if let Some(n) = p.request_body_len {
        j.insert("request_body_len".into(), json!(n));
    }
    if let Some(n) = p.response_body_len {
        j.insert("response_body_len".into(), json!(n));
    }
    if let Some(e) = &p.error {
        j.insert("error".into(), json!(e));
    }
    Event {
        ts_ns,
        json: Value::Object(j),
    }
}
