//! TLS ClientHello and ServerHello, read from the first handshake records of one direction of a
//! TCP connection ([`HelloReader`]: a hello split over several records or segments, given in
//! order, is put back together), with JA4 and JA4S fingerprints.
//!
//! JA4 (TLS client fingerprint, BSD-3-Clause) and JA4S (server, FoxIO License 1.1: free for
//! internal use, not for monetization; patent pending — see docs/specs/logs.md; only with the
//! `ja4s` feature, off by default) follow FoxIO's
//! published specification (<https://github.com/FoxIO-LLC/ja4>, technical_details/JA4.md) as
//! their reference implementation computes it: the test oracle is that implementation's
//! published outputs for its test captures.

use crate::sha256;
use crate::x509::{parse_certificate, Certificate, MAX_CERT_LEN};
use crate::{Error, TlsErrorKind, X509ErrorKind};

/// Largest hello accepted (handshake message body); real ones are a few KiB, post-quantum key
/// shares included.
pub const MAX_HELLO_LEN: usize = 64 * 1024;
/// Largest TLS record (2^14 plus the expansion RFC 8446 allows).
const MAX_RECORD_LEN: usize = 16_384 + 2_048;
/// The `random` of a ServerHello that is a HelloRetryRequest (RFC 8446 4.1.3: SHA-256 of
/// "HelloRetryRequest").
pub const HELLO_RETRY_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
    0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];
/// TLS record type of ChangeCipherSpec.
const CHANGE_CIPHER_SPEC: u8 = 20;

const EXT_SERVER_NAME: u16 = 0;
const EXT_SIGNATURE_ALGORITHMS: u16 = 13;
const EXT_ALPN: u16 = 16;
const EXT_SUPPORTED_VERSIONS: u16 = 43;
const EXT_KEY_SHARE: u16 = 51;
const EXT_QUIC_TRANSPORT_PARAMETERS: u16 = 57;

/// True for the 16 GREASE values (RFC 8701): 0x0a0a, 0x1a1a, ... 0xfafa.
pub fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

/// Which hello.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HelloKind {
    /// ClientHello (handshake type 1).
    Client,
    /// ServerHello (handshake type 2; a HelloRetryRequest is one too).
    Server,
}

/// What a hello says. Lists keep wire order and GREASE values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Client or server.
    pub kind: HelloKind,
    /// The hello's `legacy_version` field (0x0303 for TLS 1.3).
    pub legacy_version: u16,
    /// Cipher suites offered (client) or the one chosen (server).
    pub ciphers: Vec<u16>,
    /// Extension types in order.
    pub extensions: Vec<u16>,
    /// The first `host_name` of the server_name extension (client), bytes as sent, lossily
    /// decoded as UTF-8.
    pub sni: Option<String>,
    /// ALPN protocol names (client: offered, in order; server: the chosen one).
    pub alpn: Vec<Vec<u8>>,
    /// supported_versions (client: offered; server: the one selected).
    pub supported_versions: Vec<u16>,
    /// signature_algorithms (client), in order.
    pub signature_algorithms: Vec<u16>,
    /// key_share groups: a ClientHello's entries in order (GREASE kept), a ServerHello's
    /// entry, a HelloRetryRequest's selected group.
    pub key_share: Vec<u16>,
    /// A ServerHello whose `random` is [`HELLO_RETRY_RANDOM`]: a HelloRetryRequest, which the
    /// client answers with a second ClientHello.
    pub retry_request: bool,
    /// Read from QUIC CRYPTO frames (`crate::quic`) rather than TLS records over TCP: JA4 and
    /// JA4S start with `q`.
    pub quic: bool,
}

impl Hello {
    /// The version the hello stands for: the highest non-GREASE supported_versions entry when
    /// the extension is there, else `legacy_version`.
    pub fn version(&self) -> u16 {
        let supported = self
            .supported_versions
            .iter()
            .copied()
            .filter(|&v| !is_grease(v))
            .max();
        match supported {
            Some(v) if self.extensions.contains(&EXT_SUPPORTED_VERSIONS) => v,
            _ => self.legacy_version,
        }
    }

    /// The JA4 fingerprint of a ClientHello: `t` (or `q` when read from QUIC or carrying QUIC
    /// transport parameters), version, `d`/`i` for SNI, cipher and extension counts, ALPN first/last
    /// characters, then the truncated SHA-256 of the sorted ciphers and of the sorted extensions
    /// (without SNI and ALPN) followed by the signature algorithms. GREASE is ignored.
    pub fn ja4(&self) -> String {
        let (a, ciphers, exts) = self.ja4_parts();
        format!("{a}_{}_{}", hash12(&ciphers), hash12(&exts))
    }

    /// JA4 with the hashed parts shown in full (FoxIO's `ja4_r`).
    pub fn ja4_r(&self) -> String {
        let (a, ciphers, exts) = self.ja4_parts();
        format!("{a}_{ciphers}_{exts}")
    }

    fn ja4_parts(&self) -> (String, String, String) {
        let exts: Vec<u16> = self
            .extensions
            .iter()
            .copied()
            .filter(|&e| !is_grease(e))
            .collect();
        let mut ciphers: Vec<u16> = self
            .ciphers
            .iter()
            .copied()
            .filter(|&c| !is_grease(c))
            .collect();
        let proto = if self.quic || exts.contains(&EXT_QUIC_TRANSPORT_PARAMETERS) {
            'q'
        } else {
            't'
        };
        let sni = if exts.contains(&EXT_SERVER_NAME) {
            'd'
        } else {
            'i'
        };
        let a = format!(
            "{proto}{}{sni}{:02}{:02}{}",
            version_code(self.version()),
            ciphers.len().min(99),
            exts.len().min(99),
            alpn_code(&self.alpn)
        );
        ciphers.sort_unstable();
        let mut sorted: Vec<u16> = exts
            .into_iter()
            .filter(|&e| e != EXT_SERVER_NAME && e != EXT_ALPN)
            .collect();
        sorted.sort_unstable();
        let mut ext_part = hex_list(&sorted);
        if !self.signature_algorithms.is_empty() {
            ext_part.push('_');
            ext_part.push_str(&hex_list(&self.signature_algorithms));
        }
        (a, hex_list(&ciphers), ext_part)
    }

    #[cfg(feature = "ja4s")]
    /// The JA4S fingerprint of a ServerHello: `t` (`q` over QUIC), version, extension count, ALPN first/last
    /// characters, the chosen cipher, and the truncated SHA-256 of the extensions in order
    /// (GREASE included, as FoxIO's implementation does).
    pub fn ja4s(&self) -> String {
        let (a, exts) = self.ja4s_parts();
        format!("{a}_{}", hash12(&exts))
    }

    #[cfg(feature = "ja4s")]
    /// JA4S with the extension list in full (FoxIO's `ja4s_r`).
    pub fn ja4s_r(&self) -> String {
        let (a, exts) = self.ja4s_parts();
        format!("{a}_{exts}")
    }

    /// JA4S when this build has the `ja4s` feature, else `None`: callers (the `tls_log` block)
    /// need no feature of their own to follow the build's choice.
    pub fn ja4s_if_built(&self) -> Option<String> {
        #[cfg(feature = "ja4s")]
        return Some(self.ja4s());
        #[cfg(not(feature = "ja4s"))]
        None
    }

    #[cfg(feature = "ja4s")]
    fn ja4s_parts(&self) -> (String, String) {
        let cipher = self
            .ciphers
            .first()
            .map_or(String::new(), |c| format!("{c:04x}"));
        let a = format!(
            "{}{}{:02}{}_{cipher}",
            if self.quic { 'q' } else { 't' },
            version_code(self.version()),
            self.extensions.len().min(99),
            alpn_code(&self.alpn)
        );
        (a, hex_list(&self.extensions))
    }
}

fn version_code(v: u16) -> &'static str {
    match v {
        0x0304 => "13",
        0x0303 => "12",
        0x0302 => "11",
        0x0301 => "10",
        0x0300 => "s3",
        0x0002 => "s2",
        _ => "00",
    }
}

/// First and last character of the first ALPN name, as FoxIO's implementation takes them from
/// tshark's rendering: a non-ASCII byte counts as `9`, a one-character name gives that
/// character and `0`, no or an empty name `00`.
fn alpn_code(alpn: &[Vec<u8>]) -> String {
    let Some(first) = alpn.first().filter(|a| !a.is_empty()) else {
        return "00".to_string();
    };
    let text = String::from_utf8_lossy(first);
    let mut chars = text.chars().map(|ch| if ch.is_ascii() { ch } else { '9' });
    let head = chars.next().unwrap_or('0');
    let tail = chars.next_back().unwrap_or('0');
    format!("{head}{tail}")
}

fn hex_list(v: &[u16]) -> String {
    let mut s = String::with_capacity(v.len() * 5);
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("{x:04x}"));
    }
    s
}

/// The first 12 hex digits of the SHA-256 of `s`; twelve zeros for an empty string.
fn hash12(s: &str) -> String {
    if s.is_empty() {
        return "000000000000".to_string();
    }
    sha256::digest(s.as_bytes())[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn tls_err(offset: usize, field: &'static str, kind: TlsErrorKind) -> Error {
    Error::Tls {
        offset,
        field,
        kind,
    }
}

/// Parses a hello handshake message body (`msg_type` 1 or 2, without the 4-byte handshake
/// header). Offsets in errors count from the start of the body.
///
/// # Errors
/// [`Error::Tls`] when a field runs past the body or a length is inconsistent.
pub fn parse_hello(kind: HelloKind, body: &[u8]) -> Result<Hello, Error> {
    let mut c = Cursor { buf: body, pos: 0 };
    let legacy_version = c.u16("legacy_version")?;
    let random = c.take(32, "random")?;
    // TLS 1.3 drafts before 22 (0x7f00-0x7f15) had no session id or compression in the
    // ServerHello (arkime--tls13.pcap: draft 18).
    let draft_server = kind == HelloKind::Server && (0x7f00..=0x7f15).contains(&legacy_version);
    if !draft_server {
        let sid = c.u8("session_id.length")?;
        c.take(usize::from(sid), "session_id")?;
    }
    let mut hello = Hello {
        kind,
        legacy_version,
        ciphers: Vec::new(),
        extensions: Vec::new(),
        sni: None,
        alpn: Vec::new(),
        supported_versions: Vec::new(),
        signature_algorithms: Vec::new(),
        key_share: Vec::new(),
        retry_request: kind == HelloKind::Server && random == HELLO_RETRY_RANDOM,
        quic: false,
    };
    match kind {
        HelloKind::Client => {
            let n = c.u16("cipher_suites.length")?;
            let list = c.take(usize::from(n), "cipher_suites")?;
            hello.ciphers = u16_list(list);
            let n = c.u8("compression_methods.length")?;
            c.take(usize::from(n), "compression_methods")?;
        }
        HelloKind::Server => {
            hello.ciphers.push(c.u16("cipher_suite")?);
            if !draft_server {
                c.u8("compression_method")?;
            }
        }
    }
    // Extensions are optional (a hello may end after compression).
    if c.pos == body.len() {
        return Ok(hello);
    }
    let n = usize::from(c.u16("extensions.length")?);
    let end = c.pos + n;
    if end > body.len() {
        return Err(tls_err(
            c.pos - 2,
            "extensions.length",
            TlsErrorKind::Truncated,
        ));
    }
    while c.pos < end {
        let ty = c.u16("extension.type")?;
        let len = usize::from(c.u16("extension.length")?);
        if c.pos + len > end {
            return Err(tls_err(
                c.pos - 2,
                "extension.length",
                TlsErrorKind::Truncated,
            ));
        }
        let start = c.pos;
        let data = c.take(len, "extension.data")?;
        hello.extensions.push(ty);
        extension(&mut hello, ty, data, start)?;
    }
    Ok(hello)
}

/// Reads the extensions the logs and fingerprints use.
fn extension(hello: &mut Hello, ty: u16, data: &[u8], start: usize) -> Result<(), Error> {
    let mut c = Cursor { buf: data, pos: 0 };
    let at = |e: Error| match e {
        Error::Tls {
            offset,
            field,
            kind,
        } => Error::Tls {
            offset: offset + start,
            field,
            kind,
        },
        other => other,
    };
    match ty {
        EXT_SERVER_NAME if hello.kind == HelloKind::Client && !data.is_empty() => {
            let n = usize::from(c.u16("server_name.list_length").map_err(at)?);
            let list = c.take(n, "server_name.list").map_err(at)?;
            let mut l = Cursor { buf: list, pos: 0 };
            while l.pos < list.len() {
                let name_type = l.u8("server_name.type").map_err(at)?;
                let len = usize::from(l.u16("server_name.length").map_err(at)?);
                let name = l.take(len, "server_name.host_name").map_err(at)?;
                if name_type == 0 && hello.sni.is_none() {
                    hello.sni = Some(String::from_utf8_lossy(name).into_owned());
                }
            }
        }
        EXT_ALPN => {
            let n = usize::from(c.u16("alpn.list_length").map_err(at)?);
            let list = c.take(n, "alpn.list").map_err(at)?;
            let mut l = Cursor { buf: list, pos: 0 };
            while l.pos < list.len() {
                let len = usize::from(l.u8("alpn.name_length").map_err(at)?);
                hello
                    .alpn
                    .push(l.take(len, "alpn.name").map_err(at)?.to_vec());
            }
        }
        EXT_SUPPORTED_VERSIONS => match hello.kind {
            HelloKind::Client => {
                let n = usize::from(c.u8("supported_versions.length").map_err(at)?);
                hello.supported_versions = u16_list(c.take(n, "supported_versions").map_err(at)?);
            }
            HelloKind::Server => hello
                .supported_versions
                .push(c.u16("supported_versions.selected").map_err(at)?),
        },
        EXT_KEY_SHARE => match hello.kind {
            HelloKind::Client => {
                let n = usize::from(c.u16("key_share.length").map_err(at)?);
                let list = c.take(n, "key_share.entries").map_err(at)?;
                let mut l = Cursor { buf: list, pos: 0 };
                while l.pos < list.len() {
                    hello.key_share.push(l.u16("key_share.group").map_err(at)?);
                    let len = usize::from(l.u16("key_share.key_exchange_length").map_err(at)?);
                    l.take(len, "key_share.key_exchange").map_err(at)?;
                }
            }
            // A ServerHello's entry starts with its group; a HelloRetryRequest's is the group.
            HelloKind::Server => hello.key_share.push(c.u16("key_share.group").map_err(at)?),
        },
        EXT_SIGNATURE_ALGORITHMS if hello.kind == HelloKind::Client => {
            let n = usize::from(c.u16("signature_algorithms.length").map_err(at)?);
            hello.signature_algorithms = u16_list(c.take(n, "signature_algorithms").map_err(at)?);
        }
        _ => {}
    }
    Ok(())
}

/// Big-endian u16s of `b` (a trailing odd byte ignored).
fn u16_list(b: &[u8]) -> Vec<u16> {
    b.chunks_exact(2)
        .map(|p| u16::from_be_bytes([p[0], p[1]]))
        .collect()
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], Error> {
        let Some(b) = self.buf.get(self.pos..self.pos + n) else {
            return Err(tls_err(self.pos, field, TlsErrorKind::Truncated));
        };
        self.pos += n;
        Ok(b)
    }

    fn u8(&mut self, field: &'static str) -> Result<u8, Error> {
        Ok(self.take(1, field)?[0])
    }

    fn u16(&mut self, field: &'static str) -> Result<u16, Error> {
        let b = self.take(2, field)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
}

/// Reads the first hello of one direction of a TCP connection from its in-order bytes: TLS
/// records of type handshake are unwrapped and their payloads joined until the first handshake
/// message is whole. Between pushes it holds at most [`MAX_HELLO_LEN`] plus one record (during
/// a push, also the pushed bytes).
#[derive(Debug, Default)]
pub struct HelloReader {
    /// Stream bytes not yet unwrapped (at most one record).
    raw: Vec<u8>,
    /// Handshake payload joined so far.
    handshake: Vec<u8>,
    /// Stream offset of `raw[0]`.
    offset: usize,
    finished: bool,
    /// Reading a client's second hello after a HelloRetryRequest: ChangeCipherSpec records
    /// (TLS 1.3's middlebox compatibility) are passed over.
    retry: bool,
}

impl HelloReader {
    /// A reader at the start of a direction.
    pub fn new() -> Self {
        Self::default()
    }

    /// True once a hello was returned or reading failed: later bytes are ignored.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Takes the next bytes of the direction. `None` while the hello is incomplete (or after
    /// the reader finished); the hello, or why there is none, once.
    ///
    /// Errors: [`TlsErrorKind::NotHandshake`] when the bytes are not a TLS handshake record
    /// holding a hello (offset in the stream), [`TlsErrorKind::TooLarge`] past the bounds,
    /// [`TlsErrorKind::Truncated`] from the hello's own fields (offset in the hello body).
    pub fn push(&mut self, bytes: &[u8]) -> Option<Result<Hello, Error>> {
        if self.finished {
            return None;
        }
        self.raw.extend_from_slice(bytes);
        let result = self.advance();
        match &result {
            Some(Ok(_)) => {
                self.finished = true;
                // What follows the hello stays for `certificate_reader`.
                let used = self.hello_len().map_or(self.handshake.len(), |l| 4 + l);
                self.handshake.drain(..used.min(self.handshake.len()));
            }
            Some(Err(_)) => {
                self.finished = true;
                self.raw = Vec::new();
                self.handshake = Vec::new();
            }
            None => {}
        }
        result
    }

    /// A reader of a client's second ClientHello, answering a HelloRetryRequest: it reads
    /// the direction from where `certs` (the reader of the client's bytes after its first
    /// hello) got to, the bytes it holds included, passing ChangeCipherSpec records over.
    /// Stream offsets in its errors count from there.
    pub fn after_retry(certs: CertificateReader) -> HelloReader {
        HelloReader {
            raw: certs.raw,
            handshake: certs.handshake,
            offset: 0,
            finished: false,
            retry: true,
        }
    }

    /// After a hello was returned: a reader of the handshake messages that follow it (the
    /// bytes already taken past the hello included), for the server's Certificate.
    pub fn certificate_reader(&mut self) -> CertificateReader {
        CertificateReader {
            raw: std::mem::take(&mut self.raw),
            handshake: std::mem::take(&mut self.handshake),
            ..CertificateReader::default()
        }
    }

    /// The body length of the first handshake message, once its header is there.
    fn hello_len(&self) -> Option<usize> {
        let hs = self.handshake.get(..4)?;
        Some((usize::from(hs[1]) << 16) | (usize::from(hs[2]) << 8) | usize::from(hs[3]))
    }

    /// Unwraps the whole records in `raw`. Consumed records are dropped once at the end, so a
    /// large push of many small records costs linear time (no shift per record).
    fn advance(&mut self) -> Option<Result<Hello, Error>> {
        let mut pos = 0;
        let result = loop {
            let rec = &self.raw[pos..];
            if rec.len() < 5 {
                break None;
            }
            let at = self.offset + pos;
            let len = usize::from(u16::from_be_bytes([rec[3], rec[4]]));
            if self.retry && rec[0] == CHANGE_CIPHER_SPEC && self.handshake.is_empty() {
                if rec.len() < 5 + len {
                    break None;
                }
                pos += 5 + len;
                continue;
            }
            if rec[0] != 22 {
                let sslv2 = at == 0 && rec[0] & 0x80 != 0;
                let field = if sslv2 {
                    "record.type (SSLv2 hello)"
                } else {
                    "record.type"
                };
                break Some(Err(tls_err(at, field, TlsErrorKind::NotHandshake)));
            }
            if rec[1] != 3 {
                break Some(Err(tls_err(
                    at + 1,
                    "record.version",
                    TlsErrorKind::NotHandshake,
                )));
            }
            if len > MAX_RECORD_LEN {
                break Some(Err(tls_err(
                    at + 3,
                    "record.length",
                    TlsErrorKind::TooLarge,
                )));
            }
            if rec.len() < 5 + len {
                break None;
            }
            self.handshake.extend_from_slice(&rec[5..5 + len]);
            pos += 5 + len;
            if let Some(done) = self.hello() {
                break Some(done);
            }
        };
        self.raw.drain(..pos);
        self.offset += pos;
        result
    }

    /// The hello once the joined handshake payload holds all of it.
    fn hello(&self) -> Option<Result<Hello, Error>> {
        let hs = &self.handshake;
        let kind = match *hs.first()? {
            1 => HelloKind::Client,
            2 => HelloKind::Server,
            _ => {
                return Some(Err(tls_err(
                    0,
                    "handshake.type",
                    TlsErrorKind::NotHandshake,
                )))
            }
        };
        if hs.len() < 4 {
            return None;
        }
        let len = (usize::from(hs[1]) << 16) | (usize::from(hs[2]) << 8) | usize::from(hs[3]);
        if len > MAX_HELLO_LEN {
            return Some(Err(tls_err(1, "handshake.length", TlsErrorKind::TooLarge)));
        }
        if hs.len() < 4 + len {
            return None;
        }
        Some(parse_hello(kind, &hs[4..4 + len]))
    }
}

/// Handshake bytes after the ServerHello a [`CertificateReader`] reads at most before giving up
/// (messages it skips included).
pub const MAX_FLIGHT_LEN: usize = 256 * 1024;

/// Reads the server's first certificate from the handshake messages after its ServerHello
/// (TLS 1.2 and before, where the Certificate message is in clear): records of type handshake
/// are unwrapped, messages other than Certificate skipped without being held, the first
/// certificate of the Certificate message parsed ([`parse_certificate`]). Holds at most one
/// record plus the first certificate ([`MAX_CERT_LEN`]); reads at most [`MAX_FLIGHT_LEN`].
#[derive(Debug, Default)]
pub struct CertificateReader {
    raw: Vec<u8>,
    handshake: Vec<u8>,
    /// Bytes of a skipped message still to come.
    skip: usize,
    /// Handshake bytes unwrapped so far (offsets in errors).
    read: usize,
    finished: bool,
}

impl CertificateReader {
    /// True once an answer was given: later bytes are ignored.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Takes the direction's next bytes. `None` while undecided; once: the certificate,
    /// `Ok(None)` when the flight has none (ServerHelloDone, an empty list, or a record other
    /// than handshake first: resumption, TLS 1.3), or why it could not be read.
    pub fn push(&mut self, bytes: &[u8]) -> Option<Result<Option<Certificate>, Error>> {
        if self.finished {
            return None;
        }
        self.raw.extend_from_slice(bytes);
        let result = self.advance();
        if result.is_some() {
            self.finished = true;
            self.raw = Vec::new();
            self.handshake = Vec::new();
        }
        result
    }

    fn advance(&mut self) -> Option<Result<Option<Certificate>, Error>> {
        let mut pos = 0;
        let result = loop {
            if let Some(r) = self.message() {
                break Some(r);
            }
            let rec = &self.raw[pos..];
            if rec.len() < 5 {
                break None;
            }
            if rec[0] != 22 {
                break Some(Ok(None));
            }
            let len = usize::from(u16::from_be_bytes([rec[3], rec[4]]));
            if len > MAX_RECORD_LEN {
                break Some(Err(x509_err(
                    self.read,
                    "record.length",
                    X509ErrorKind::TooLarge,
                )));
            }
            if rec.len() < 5 + len {
                break None;
            }
            self.read += len;
            if self.read > MAX_FLIGHT_LEN {
                break Some(Err(x509_err(
                    self.read,
                    "handshake",
                    X509ErrorKind::TooLarge,
                )));
            }
            let skipped = self.skip.min(len);
            self.skip -= skipped;
            self.handshake.extend_from_slice(&rec[5 + skipped..5 + len]);
            pos += 5 + len;
        };
        self.raw.drain(..pos.min(self.raw.len()));
        result
    }

    /// The answer once the joined messages give one; skips the messages before Certificate.
    fn message(&mut self) -> Option<Result<Option<Certificate>, Error>> {
        loop {
            let hs = &self.handshake;
            if hs.len() < 4 {
                return None;
            }
            let len = u24(&hs[1..4]);
            match hs[0] {
                11 => return self.certificate(len),
                // ServerHelloDone: no certificate in this flight.
                14 => return Some(Ok(None)),
                _ if hs.len() >= 4 + len => {
                    self.handshake.drain(..4 + len);
                }
                _ => {
                    self.skip = 4 + len - hs.len();
                    self.handshake.clear();
                    return None;
                }
            }
        }
    }

    /// The first certificate of the Certificate message at the start of `handshake`.
    fn certificate(&self, len: usize) -> Option<Result<Option<Certificate>, Error>> {
        let hs = &self.handshake;
        if len < 6 {
            // An empty certificate_list (or one too short to hold a certificate).
            return Some(Ok(None));
        }
        let head = hs.get(4..10)?;
        let cert_len = u24(&head[3..6]);
        if cert_len > MAX_CERT_LEN {
            return Some(Err(x509_err(
                7,
                "certificate.length",
                X509ErrorKind::TooLarge,
            )));
        }
        if cert_len + 6 > len {
            return Some(Err(x509_err(
                7,
                "certificate.length",
                X509ErrorKind::Truncated,
            )));
        }
        let der = hs.get(10..10 + cert_len)?;
        Some(parse_certificate(der).map(Some))
    }
}

fn u24(b: &[u8]) -> usize {
    (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2])
}

fn x509_err(offset: usize, field: &'static str, kind: X509ErrorKind) -> Error {
    Error::X509 {
        offset,
        field,
        kind,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grease_values() {
        let grease: Vec<u16> = (0..=u16::MAX).filter(|&v| is_grease(v)).collect();
        assert_eq!(grease.len(), 16);
        assert_eq!((grease[0], grease[15]), (0x0a0a, 0xfafa));
    }

    /// The example of FoxIO's JA4.md (and of their implementation's unit test).
    #[test]
    fn ja4_spec_example() {
        let hello = Hello {
            kind: HelloKind::Client,
            legacy_version: 0x0303,
            ciphers: vec![
                0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013,
                0xc014, 0x009c, 0x009d, 0x002f, 0x0035,
            ],
            extensions: vec![
                0x001b, 0x0000, 0x0033, 0x0010, 0x4469, 0x0017, 0x002d, 0x000d, 0x0005, 0x0023,
                0x0012, 0x002b, 0xff01, 0x000b, 0x000a, 0x0015,
            ],
            sni: Some("example.com".into()),
            alpn: vec![b"h2".to_vec()],
            supported_versions: vec![0x0304],
            signature_algorithms: vec![
                0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601,
            ],
            key_share: vec![0x001d],
            retry_request: false,
            quic: false,
        };
        assert_eq!(hello.ja4(), "t13d1516h2_8daaf6152771_e5627efa2ab1");
        assert_eq!(
            hello.ja4_r(),
            "t13d1516h2_002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9_0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01_0403,0804,0401,0503,0805,0501,0806,0601"
        );
    }

    fn record(body: &[u8]) -> Vec<u8> {
        let mut r = vec![22, 3, 3];
        r.extend_from_slice(&(body.len() as u16).to_be_bytes());
        r.extend_from_slice(body);
        r
    }

    fn message(ty: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![ty];
        m.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
        m.extend_from_slice(body);
        m
    }

    /// A server direction: ServerHello and a 3000-byte ServerKeyExchange-like message in one
    /// record set, then the Certificate over three records, then ServerHelloDone.
    fn server_flight(cert: &[u8]) -> Vec<u8> {
        let mut hello = vec![3, 3];
        hello.extend_from_slice(&[0; 32]);
        hello.extend_from_slice(&[0, 0x13, 0x01, 0]);
        let mut list = (cert.len() as u32).to_be_bytes()[1..].to_vec();
        list.extend_from_slice(cert);
        let mut body = ((list.len()) as u32).to_be_bytes()[1..].to_vec();
        body.extend_from_slice(&list);
        let certificate = message(11, &body);
        let other = message(12, &[7; 3000]);
        let mut stream = record(&[message(2, &hello), other[..1000].to_vec()].concat());
        stream.extend(record(&other[1000..]));
        let third = certificate.len() / 3;
        stream.extend(record(&certificate[..third]));
        stream.extend(record(&certificate[third..2 * third]));
        stream.extend(record(&certificate[2 * third..]));
        stream.extend(record(&message(14, &[])));
        stream
    }

    /// Pushes `stream` in pieces of `step` bytes: the hello, then the certificate reader's
    /// answer.
    fn read_flight(stream: &[u8], step: usize) -> Option<Result<Option<Certificate>, Error>> {
        let mut hello = HelloReader::new();
        let mut certs: Option<CertificateReader> = None;
        for piece in stream.chunks(step) {
            if let Some(c) = &mut certs {
                if let Some(a) = c.push(piece) {
                    return Some(a);
                }
            } else if let Some(h) = hello.push(piece) {
                assert_eq!(h.unwrap().ciphers, [0x1301]);
                let mut c = hello.certificate_reader();
                if let Some(a) = c.push(&[]) {
                    return Some(a);
                }
                certs = Some(c);
            }
        }
        None
    }

    #[test]
    fn certificate_after_the_hello_in_any_segmentation() {
        let stream = server_flight(&crate::x509::tests::sample());
        for step in [1, 7, 100, 1500, stream.len()] {
            let got = read_flight(&stream, step);
            let c = got.unwrap().unwrap().expect("a certificate");
            assert_eq!(c.subject, "CN=www.example.org", "step {step}");
            assert_eq!(c.serial, "009A0B");
        }
    }

    #[test]
    fn certificate_reader_answers_none_at_server_hello_done_and_names_bad_der() {
        let mut stream = server_flight(&crate::x509::tests::sample());
        // Certificate message type changed to another: the flight ends at ServerHelloDone.
        let at = stream
            .windows(4)
            .position(|w| w[0] == 11 && w[1] == 0)
            .unwrap();
        stream[at] = 13;
        assert!(matches!(read_flight(&stream, 50), Some(Ok(None))));
        let bad = server_flight(&[0x30, 0x03, 0x02, 0x01]);
        let got = read_flight(&bad, 50).unwrap();
        assert!(matches!(got, Err(Error::X509 { .. })), "{got:?}");
    }

    /// An extension: type, length, data.
    fn ext(ty: u16, data: &[u8]) -> Vec<u8> {
        [
            &ty.to_be_bytes()[..],
            &(data.len() as u16).to_be_bytes(),
            data,
        ]
        .concat()
    }

    /// A hello body: version 0x0303, `random`, an empty session id, `middle` (ciphers and
    /// compression), then `exts`.
    fn hello_body(random: &[u8; 32], middle: &[u8], exts: &[Vec<u8>]) -> Vec<u8> {
        let exts = exts.concat();
        let len = (exts.len() as u16).to_be_bytes();
        [&[3, 3][..], random, &[0], middle, &len, &exts].concat()
    }

    /// A ClientHello offering TLS 1.3 with key shares of `groups` (32-byte keys).
    fn client_hello(groups: &[u16]) -> Vec<u8> {
        let mut entries = Vec::new();
        for g in groups {
            entries.extend_from_slice(&g.to_be_bytes());
            entries.extend_from_slice(&[0, 32]);
            entries.extend_from_slice(&[0x42; 32]);
        }
        let shares = [&(entries.len() as u16).to_be_bytes()[..], &entries].concat();
        let ciphers = [0, 2, 0x13, 0x01, 1, 0];
        let exts = [ext(43, &[2, 3, 4]), ext(51, &shares)];
        message(1, &hello_body(&[1; 32], &ciphers, &exts))
    }

    #[test]
    fn parse_hello_retry_request_and_key_shares() {
        let hrr = hello_body(
            &HELLO_RETRY_RANDOM,
            &[0x13, 0x01, 0],
            &[ext(43, &[3, 4]), ext(51, &[0, 23])],
        );
        let h = parse_hello(HelloKind::Server, &hrr).unwrap();
        assert!(h.retry_request);
        assert_eq!((h.key_share.as_slice(), h.version()), (&[23][..], 0x0304));
        let mut sh = hrr.clone();
        sh[2] ^= 1;
        let h = parse_hello(HelloKind::Server, &sh).unwrap();
        assert!(!h.retry_request, "another random: a ServerHello");
        let ch = client_hello(&[0x0a0a, 29]);
        let h = parse_hello(HelloKind::Client, &ch[4..]).unwrap();
        assert_eq!(h.key_share, [0x0a0a, 29]);
        // A key_share entry running past the extension is truncated.
        let mut bad = ch[4..].to_vec();
        let n = bad.len();
        bad[n - 34] = 0xff;
        let e = parse_hello(HelloKind::Client, &bad).unwrap_err();
        assert!(e.to_string().contains("key_share"), "{e}");
    }

    /// After a HelloRetryRequest the client sends a ChangeCipherSpec record (middlebox
    /// compatibility) and its second ClientHello: read from where the reader of its first
    /// flight got to, in any segmentation.
    #[test]
    fn second_client_hello_after_change_cipher_spec() {
        let mut stream = record(&client_hello(&[29]));
        let first_len = stream.len();
        stream.extend_from_slice(&[20, 3, 3, 0, 1, 1]);
        // The second hello over two records: its first 4 bytes, then the rest.
        let second = client_hello(&[23]);
        stream.extend(record(&second[..4]));
        stream.extend(record(&second[4..]));
        for step in [1, 5, 40, stream.len()] {
            let mut first = HelloReader::new();
            let mut retry: Option<HelloReader> = None;
            let mut got = None;
            for piece in stream.chunks(step) {
                match &mut retry {
                    Some(r) => {
                        if let Some(a) = r.push(piece) {
                            got = Some(a.unwrap());
                        }
                    }
                    None => {
                        if let Some(h) = first.push(piece) {
                            assert_eq!(h.unwrap().key_share, [29]);
                            let mut r = HelloReader::after_retry(first.certificate_reader());
                            if let Some(a) = r.push(&[]) {
                                got = Some(a.unwrap());
                            }
                            retry = Some(r);
                        }
                    }
                }
            }
            let h = got.unwrap_or_else(|| panic!("no second hello at step {step}"));
            assert_eq!(
                (h.kind, h.key_share.as_slice()),
                (HelloKind::Client, &[23][..])
            );
        }
        // A reader of a first hello does not pass a ChangeCipherSpec over.
        let mut plain = HelloReader::new();
        let e = plain.push(&stream[first_len..]).unwrap().unwrap_err();
        assert!(e.to_string().contains("record.type"), "{e}");
    }

    #[test]
    fn alpn_codes() {
        assert_eq!(alpn_code(&[]), "00");
        assert_eq!(alpn_code(&[Vec::new()]), "00");
        assert_eq!(alpn_code(&[b"http/1.1".to_vec()]), "h1");
        assert_eq!(alpn_code(&[b"a".to_vec()]), "a0");
        assert_eq!(alpn_code(&[vec![0xab, 0xcd]]), "99");
        assert_eq!(alpn_code(&[vec![b'x', 0xcd]]), "x9");
    }
}
