//! The TLS analyser of `stream_log` (`crate::stream_log`): the TLS hellos of each TCP
//! connection as one log line (`tls.jsonl` of `trawl logs`, docs/specs/logs.md). Both
//! directions are reassembled (`tcp_conns`, shared with the other stream analysers), the first
//! hello of each read by `trawl_app::tls::HelloReader`; a connection whose directions both
//! start with something else is not TLS and writes nothing. The line is written as soon as
//! both directions have answered (hello or error, and the server's certificate of TLS <= 1.2),
//! which is also when the analyser stops taking the connection's bytes; else when the
//! connection ends. QUIC's hellos go to the same log through `crate::quic_conns`.
use serde_json::{json, Map, Value};
use trawl_app::reassembly::Chunk;
use trawl_app::tls::{CertificateReader, Hello, HelloKind, HelloReader};
use trawl_app::x509::Certificate;
use trawl_flow::community_id::{CommunityId, FlowTuple};

use crate::messages::Event;
use crate::tcp_conns::ConnKey;

/// IP protocol number of TCP.
const TCP: u8 = 6;

/// What one direction's hello reading came to.
enum Outcome {
    Hello { hello: Box<Hello>, ts_ns: u64 },
    Failed(Failure),
}

/// Why a direction has no hello, kept as data: most such directions are streams that are not
/// TLS, whose connection writes no line, so the text is made only for a line written.
#[derive(Clone, Copy, Debug)]
enum Failure {
    /// The hello reader's error.
    Read(trawl_app::Error),
    /// A gap of `n` bytes at stream offset `offset` before the hello was whole.
    Gap { n: u64, offset: u64 },
}

impl Failure {
    fn text(&self) -> String {
        match self {
            Failure::Read(e) => bare(e),
            Failure::Gap { n, offset } => gap_text(*n, *offset),
        }
    }
}

/// The error text of a gap in a direction's stream.
fn gap_text(n: u64, offset: u64) -> String {
    format!("gap of {n} bytes at offset {offset} (stream)")
}

#[derive(Default)]
struct TlsDir {
    reader: HelloReader,
    /// Bytes (and gaps) taken so far: the offset of a gap.
    offset: u64,
    outcome: Option<Outcome>,
    /// After a ServerHello of TLS 1.2 or before, and after any ClientHello (a client
    /// certificate, TLS 1.2 and before): reading on to the Certificate message.
    certs: Option<CertificateReader>,
    /// The direction's first certificate (the server's, or the client's after a
    /// CertificateRequest), `None` in a flight without one, or why it could not be read.
    cert: Option<Result<Option<Certificate>, String>>,
    /// The client's direction after the server's HelloRetryRequest: reading its second
    /// ClientHello (instead of a certificate).
    retry: Option<HelloReader>,
    /// The client's second ClientHello, or why it could not be read.
    second: Option<Result<Box<Hello>, String>>,
}

impl TlsDir {
    /// The server's hello was a HelloRetryRequest: a client direction still reading on after
    /// its first hello reads the second one instead.
    fn expect_second_hello(&mut self) {
        if hello_of(self, HelloKind::Client).is_some() {
            if let Some(certs) = self.certs.take() {
                self.retry = Some(HelloReader::after_retry(certs));
            }
        }
    }

    /// Feeds the reader of the second ClientHello, if one is reading.
    fn second_hello(&mut self, chunk: Chunk<'_>) {
        let Some(r) = &mut self.retry else {
            return;
        };
        let answer = match chunk {
            Chunk::Data(bytes) => r.push(bytes).map(|a| a.map(Box::new).map_err(|e| bare(&e))),
            Chunk::Gap(n) => Some(Err(gap_text(n, self.offset))),
        };
        if let Some(a) = answer {
            self.second = Some(a);
            self.retry = None;
        }
    }

    /// Feeds the certificate reader, if one is reading.
    fn certificate(&mut self, chunk: Chunk<'_>) {
        let Some(r) = &mut self.certs else {
            return;
        };
        let answer = match chunk {
            Chunk::Data(bytes) => r.push(bytes).map(|a| a.map_err(|e| bare(&e))),
            Chunk::Gap(n) => Some(Err(gap_text(n, self.offset))),
        };
        if let Some(a) = answer {
            self.cert = Some(a);
            self.certs = None;
        }
    }
}

/// An error's kind, offset and field without the crate's `tls: `/`x509: ` prefix.
fn bare(e: &trawl_app::Error) -> String {
    let text = e.to_string();
    let cut = text.strip_prefix("tls: ").or(text.strip_prefix("x509: "));
    cut.unwrap_or(&text).to_string()
}

/// One direction of a connection. The state of a direction that has no hello to offer is a
/// few bytes: before its first bytes nothing, after a failure only why (the reader's buffers,
/// the certificate slot and the retry readers, about 500 bytes, live only while a hello is
/// being read and after one). A connection whose server never answers waits in this state.
#[derive(Default)]
enum Side {
    /// No bytes yet.
    #[default]
    Fresh,
    /// Reading the hello, or after it (its certificate, a second ClientHello).
    Open(Box<TlsDir>),
    /// No hello: later bytes are ignored.
    Failed(Failure),
}

impl Side {
    fn dir(&self) -> Option<&TlsDir> {
        match self {
            Side::Open(d) => Some(d),
            _ => None,
        }
    }

    fn failure(&self) -> Option<Failure> {
        match self {
            Side::Failed(f) => Some(*f),
            _ => None,
        }
    }

    fn hello(&self, kind: HelloKind) -> Option<(&Hello, u64)> {
        self.dir().and_then(|d| hello_of(d, kind))
    }
}

/// A connection's two hello readers.
#[derive(Default)]
pub struct TlsConn {
    sides: [Side; 2],
    written: bool,
}

impl TlsDir {
    /// Takes the direction's next chunk; true when it was read for the hello (none before).
    fn read(&mut self, ts_ns: u64, chunk: Chunk<'_>) -> bool {
        if self.outcome.is_some() {
            if self.retry.is_some() {
                self.second_hello(chunk);
            } else {
                self.certificate(chunk);
            }
            if let Chunk::Data(bytes) = chunk {
                self.offset += bytes.len() as u64;
            }
            return false;
        }
        self.outcome = match chunk {
            Chunk::Data(bytes) => {
                self.offset += bytes.len() as u64;
                match self.reader.push(bytes) {
                    Some(Ok(hello)) => Some(Outcome::Hello {
                        hello: Box::new(hello),
                        ts_ns,
                    }),
                    Some(Err(e)) => Some(Outcome::Failed(Failure::Read(e))),
                    None => None,
                }
            }
            Chunk::Gap(n) => Some(Outcome::Failed(Failure::Gap {
                n,
                offset: self.offset,
            })),
        };
        if let Some(Outcome::Hello { hello, .. }) = &self.outcome {
            // TLS 1.3 encrypts the Certificate message: read on only before it. The client's
            // version is the server's to choose: its direction is read on in any case, and its
            // next record in TLS 1.3 (ChangeCipherSpec or application data) ends the reading.
            if hello.kind == HelloKind::Client || hello.version() <= 0x0303 {
                let mut certs = self.reader.certificate_reader();
                // The bytes that came with the hello.
                if let Some(a) = certs.push(&[]) {
                    self.cert = Some(a.map_err(|e| bare(&e)));
                } else {
                    self.certs = Some(certs);
                }
            }
        }
        if self.outcome.is_some() {
            // The reader's buffers are not needed any more.
            self.reader = HelloReader::new();
        }
        true
    }

    /// Why the direction has no hello, once it failed.
    fn failed(&self) -> Option<Failure> {
        match self.outcome {
            Some(Outcome::Failed(f)) => Some(f),
            _ => None,
        }
    }
}

impl TlsConn {
    /// Takes the next chunk of direction `dir` (as `tcp_conns` numbers them), at `ts_ns`.
    pub(crate) fn chunk(&mut self, dir: usize, ts_ns: u64, chunk: Chunk<'_>) {
        let side = &mut self.sides[dir];
        // A failed direction keeps only why (a stream that is not TLS is never boxed).
        let reading_hello = match side {
            Side::Failed(_) => return,
            Side::Fresh => {
                let mut d = TlsDir::default();
                let reading = d.read(ts_ns, chunk);
                *side = match d.failed() {
                    Some(f) => Side::Failed(f),
                    None => Side::Open(Box::new(d)),
                };
                reading
            }
            Side::Open(d) => {
                let reading = d.read(ts_ns, chunk);
                if let Some(f) = d.failed() {
                    *side = Side::Failed(f);
                }
                reading
            }
        };
        if reading_hello
            && side
                .hello(HelloKind::Server)
                .is_some_and(|(h, _)| h.retry_request)
        {
            if let Side::Open(other) = &mut self.sides[1 - dir] {
                other.expect_second_hello();
            }
        }
    }

    /// True while no direction is reading or has read a hello (nothing boxed: the state of a
    /// connection that is not TLS, or not yet).
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> bool {
        self.sides.iter().all(|s| !matches!(s, Side::Open(_)))
    }

    /// True once both directions answered (and the certificate was read): the line can be
    /// written and the connection's bytes are not wanted any more.
    pub(crate) fn done(&self) -> bool {
        self.sides.iter().all(|s| match s {
            Side::Fresh => false,
            Side::Failed(_) => true,
            Side::Open(d) => d.outcome.is_some() && d.certs.is_none() && d.retry.is_none(),
        })
    }
}

/// Writes the connection's line once, if one of its directions had a hello.
pub(crate) fn write_line(key: ConnKey, first_ns: u64, conn: &mut TlsConn, out: &mut Vec<Event>) {
    if conn.written {
        return;
    }
    if let Some(e) = line(key, first_ns, conn) {
        conn.written = true;
        out.push(e);
    }
}

fn hello_of(d: &TlsDir, kind: HelloKind) -> Option<(&Hello, u64)> {
    match &d.outcome {
        Some(Outcome::Hello { hello, ts_ns }) if hello.kind == kind => Some((hello, *ts_ns)),
        _ => None,
    }
}

/// `TLS 1.3` ... `SSL 3.0`, other values in hex.
fn version_name(v: u16) -> String {
    match v {
        0x0304 => "TLS 1.3".into(),
        0x0303 => "TLS 1.2".into(),
        0x0302 => "TLS 1.1".into(),
        0x0301 => "TLS 1.0".into(),
        0x0300 => "SSL 3.0".into(),
        _ => format!("0x{v:04x}"),
    }
}

/// The log line of a connection (fields of docs/specs/logs.md, TLS), `None` without a hello.
fn line(key: ConnKey, first_ns: u64, conn: &TlsConn) -> Option<Event> {
    let sides = &conn.sides;
    let client_dir = (0..2)
        .find(|&i| sides[i].hello(HelloKind::Client).is_some())
        .or_else(|| {
            (0..2)
                .find(|&i| sides[i].hello(HelloKind::Server).is_some())
                .map(|i| 1 - i)
        })?;
    let (client, server) = if client_dir == 0 { key } else { (key.1, key.0) };
    let ch = sides[client_dir].hello(HelloKind::Client);
    let sh = sides[1 - client_dir].hello(HelloKind::Server);
    let ts_ns = ch.or(sh).map_or(first_ns, |(_, t)| t);
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
    j.insert("first_ns".into(), json!(first_ns));
    hello_fields(&mut j, ch.map(|h| h.0), sh.map(|h| h.0));
    let (client, server) = (sides[client_dir].dir(), sides[1 - client_dir].dir());
    if let Some(cert) = server.and_then(|d| d.cert.as_ref()) {
        cert_fields(&mut j, "cert_", cert);
    }
    if let Some(cert) = client.and_then(|d| d.cert.as_ref()) {
        cert_fields(&mut j, "client_cert_", cert);
    }
    let second = client.and_then(|d| d.second.as_ref());
    retry_fields(&mut j, second.map(|r| r.as_deref().map_err(String::clone)));
    // Why a direction has no hello (the client's first).
    let error = [client_dir, 1 - client_dir]
        .into_iter()
        .find_map(|i| sides[i].failure());
    if let Some(e) = error {
        j.insert("error".into(), json!(e.text()));
    }
    Some(Event {
        ts_ns,
        json: Value::Object(j),
    })
}

/// The fields of the hellos (version, SNI, ALPN, JA4 of the client's; cipher, ALPN, JA4S of
/// the server's), for TLS over TCP and QUIC alike.
pub(crate) fn hello_fields(j: &mut Map<String, Value>, ch: Option<&Hello>, sh: Option<&Hello>) {
    if let Some(h) = sh.or(ch) {
        j.insert("version".into(), json!(version_name(h.version())));
    }
    if let Some(h) = ch {
        if let Some(sni) = &h.sni {
            j.insert("sni".into(), json!(sni));
        }
        j.insert("alpn".into(), json!(alpn_texts(h)));
        j.insert("supported_versions".into(), json!(h.supported_versions));
        j.insert("key_share".into(), json!(h.key_share));
        j.insert("ja4".into(), json!(h.ja4()));
    }
    if let Some(h) = sh {
        if h.retry_request {
            j.insert("hrr".into(), json!(true));
            if let Some(g) = h.key_share.first() {
                j.insert("hrr_group".into(), json!(g));
            }
        }
        if let Some(a) = alpn_texts(h).into_iter().next() {
            j.insert("alpn_server".into(), json!(a));
        }
        if let Some(c) = h.ciphers.first() {
            j.insert("cipher".into(), json!(c));
        }
        if let Some(ja4s) = h.ja4s_if_built() {
            j.insert("ja4s".into(), json!(ja4s));
        }
    }
}

/// The fields of the client's second ClientHello after a HelloRetryRequest (`retry_*`), or
/// why it could not be read, for TLS over TCP and QUIC alike.
pub(crate) fn retry_fields(j: &mut Map<String, Value>, second: Option<Result<&Hello, String>>) {
    match second {
        Some(Ok(h)) => {
            j.insert("retry_ja4".into(), json!(h.ja4()));
            j.insert("retry_key_share".into(), json!(h.key_share));
        }
        Some(Err(e)) => {
            j.insert("retry_error".into(), json!(e));
        }
        None => {}
    }
}

/// A certificate's fields (docs/specs/logs.md) under `prefix` (`cert_`: the server's,
/// `client_cert_`: the client's), or why it could not be read.
fn cert_fields(
    j: &mut Map<String, Value>,
    prefix: &str,
    cert: &Result<Option<Certificate>, String>,
) {
    let mut put = |name: &str, v: Value| {
        j.insert(format!("{prefix}{name}"), v);
    };
    match cert {
        Ok(Some(c)) => {
            put("subject", json!(c.subject));
            put("issuer", json!(c.issuer));
            put("not_before", json!(c.not_before));
            put("not_after", json!(c.not_after));
            put("serial", json!(c.serial));
            put("san_dns", json!(c.san_dns));
        }
        Ok(None) => {}
        Err(e) => put("error", json!(e)),
    }
}

fn alpn_texts(h: &Hello) -> Vec<String> {
    h.alpn
        .iter()
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}
