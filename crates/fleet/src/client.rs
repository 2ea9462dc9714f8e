//! One probe asked over HTTP/2 (hyper's connection-level client), optionally over TLS. Over
//! TLS the version is ALPN's choice (`h2`, else `http/1.1`); in clear text the client opens
//! with HTTP/2's preface (prior knowledge, RFC 9113 3.3) and, when the peer answers that with
//! something that is not HTTP/2 (an HTTP/1.1-only server or proxy), asks again over HTTP/1.1
//! on a new connection: the preface is no request, so nothing was scanned twice. Connecting
//! is retried with doubling back-off; anything after the connection is not (a probe that
//! answered badly would answer badly again, and a retried scan costs the probe twice).
//!
//! [`Connections`] keeps each probe's HTTP/2 connection between requests (a coordinator's
//! console asks many queries; a connection, and over TLS a handshake, per probe and query is
//! what it saves), and the runtime those connections live on.
use std::collections::HashMap;
use std::future::Future;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::time::Instant;

use crate::config::Probe;
use crate::Error;

/// First pause before a connection is tried again; doubled each time.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// How long a probe found to speak only HTTP/1.1 is asked over HTTP/1.1 before HTTP/2 is
/// tried again (it may have been upgraded, or a proxy before it removed).
const HTTP1_REMEMBERED: Duration = Duration::from_secs(600);

/// The connections kept between requests, per probe, and the runtime they (and a fleet
/// query's requests) run on. Shared by every query of a [`crate::Fleet`]; a connection the
/// probe closed (restarted, its machine gone) is noticed before it is used and replaced.
#[derive(Default)]
pub struct Connections {
    runtime: OnceLock<tokio::runtime::Runtime>,
    /// Held while the runtime is started: two first uses at once start one (a second one
    /// dropped on an async thread would panic).
    starting: Mutex<()>,
    kept: Mutex<HashMap<String, Kept>>,
}

/// What is kept of a probe.
enum Kept {
    /// Its HTTP/2 connection: requests become streams on it.
    Http2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
    /// It answered HTTP/2's preface with HTTP/1.1 at this time: asked over HTTP/1.1 (a new
    /// connection per request) until [`HTTP1_REMEMBERED`] has passed.
    Http1Only(std::time::Instant),
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self.kept.lock().map_or(0, |k| k.len());
        f.debug_struct("Connections").field("kept", &kept).finish()
    }
}

impl Drop for Connections {
    fn drop(&mut self) {
        // A runtime dropped on an async thread panics; its tasks (idle connections) are
        // abandoned instead of awaited.
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

impl Connections {
    /// The runtime the probes are asked on (started on first use: two threads, enough to
    /// decode answers while others arrive).
    pub fn runtime(&self) -> Result<&tokio::runtime::Runtime, Error> {
        if let Some(rt) = self.runtime.get() {
            return Ok(rt);
        }
        let _starting = self.starting.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(rt) = self.runtime.get() {
            return Ok(rt);
        }
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("trawl-fleet")
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        Ok(self.runtime.get_or_init(|| rt))
    }

    /// Probes with an HTTP/2 connection kept (open or not yet noticed closed).
    pub fn kept_http2(&self) -> usize {
        self.lock()
            .values()
            .filter(|k| matches!(k, Kept::Http2(_)))
            .count()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Kept>> {
        self.kept.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The key of a probe: a renamed probe or a changed URL is another connection.
    fn key(probe: &Probe) -> String {
        format!("{} {}", probe.name, probe.url)
    }

    /// The probe's kept HTTP/2 connection, when it is still open.
    fn http2(
        &self,
        probe: &Probe,
    ) -> Option<hyper::client::conn::http2::SendRequest<Empty<Bytes>>> {
        let mut kept = self.lock();
        let key = Self::key(probe);
        match kept.get(&key) {
            Some(Kept::Http2(s)) if !s.is_closed() => Some(s.clone()),
            Some(Kept::Http2(_)) => {
                kept.remove(&key);
                None
            }
            _ => None,
        }
    }

    /// Whether the probe was found to speak only HTTP/1.1 lately.
    fn http1_only(&self, probe: &Probe) -> bool {
        matches!(self.lock().get(&Self::key(probe)),
            Some(Kept::Http1Only(at)) if at.elapsed() < HTTP1_REMEMBERED)
    }

    fn keep(&self, probe: &Probe, k: Kept) {
        self.lock().insert(Self::key(probe), k);
    }

    fn forget(&self, probe: &Probe) {
        self.lock().remove(&Self::key(probe));
    }

    /// Runs a connection's task on this runtime, whichever runtime asked (a connection
    /// outlives the request that opened it).
    fn spawn<F>(&self, f: F) -> Result<(), Failure>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let rt = self.runtime().map_err(|e| Failure::Error(e.to_string()))?;
        rt.spawn(f);
        Ok(())
    }
}

/// hyper's executor for a connection's streams: this runtime's.
#[derive(Clone)]
struct OnRuntime(tokio::runtime::Handle);

impl<F> hyper::rt::Executor<F> for OnRuntime
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    fn execute(&self, fut: F) {
        self.0.spawn(fut);
    }
}

/// Why a probe gave no answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// It did not answer in time.
    Timeout,
    /// The connection was refused, or the probe refused the token (401/403).
    Refused(String),
    /// Anything else: reset, a cut answer, an error status, an unreadable body.
    Error(String),
}

/// The HTTP version a probe was asked in (its report's `protocol`, named as ALPN names it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub enum Protocol {
    /// HTTP/2.
    #[default]
    #[serde(rename = "h2")]
    Http2,
    /// HTTP/1.1: the probe (or a proxy before it) does not speak HTTP/2.
    #[serde(rename = "http/1.1")]
    Http1,
}

/// A probe's answer as soon as its head has come (the body still streaming), and the
/// version it came in.
pub type Opened = (hyper::Response<hyper::body::Incoming>, Protocol);

/// The rustls settings trusting the CA certificates of `ca` (PEM), offering `h2` and
/// `http/1.1` by ALPN.
pub fn tls_config(ca: &Path) -> Result<Arc<rustls::ClientConfig>, Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::CertificateDer;
    let err = |message: String| Error::Config {
        path: ca.to_path_buf(),
        message,
    };
    let mut roots = rustls::RootCertStore::empty();
    let certs = CertificateDer::pem_file_iter(ca).map_err(|e| err(format!("CA file: {e}")))?;
    for c in certs {
        let c = c.map_err(|e| err(format!("CA file: {e}")))?;
        roots
            .add(c)
            .map_err(|e| err(format!("CA certificate: {e}")))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut config = config;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// GETs `path` (with its query string) from `probe` before `deadline`: the body of a 200
/// answer of at most `max_body` bytes, and the version it came in.
pub async fn get(
    conns: &Connections,
    probe: &Probe,
    path: &str,
    deadline: Instant,
    retries: u32,
    max_body: usize,
) -> Result<(Bytes, Protocol), Failure> {
    let exchange = async {
        let (resp, protocol) = open(conns, probe, path, retries).await?;
        let status = resp.status();
        let body = read_body(resp.into_body(), max_body).await?;
        if status.is_success() {
            Ok((body, protocol))
        } else {
            Err(refusal(status, &body))
        }
    };
    match tokio::time::timeout_at(deadline, exchange).await {
        Ok(r) => r,
        Err(_) => Err(Failure::Timeout),
    }
}

/// Reads a body of at most `max_body` bytes. A probe that dies while answering (killed,
/// crashed, its host gone) leaves a cut body: the failure says how it ended and how many
/// bytes had come, so a killed probe is told from a slow one (`timeout`) and from garbage.
async fn read_body(mut body: hyper::body::Incoming, max_body: usize) -> Result<Bytes, Failure> {
    let mut got = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Failure::Error(cut(&e, got.len())))?;
        if let Ok(data) = frame.into_data() {
            if got.len() + data.len() > max_body {
                return Err(Failure::Error(format!(
                    "the answer is longer than {max_body} bytes (the limit --max-groups sets)"
                )));
            }
            got.extend_from_slice(&data);
        }
    }
    Ok(got.freeze())
}

/// What ended a connection early, from the error's chain: a reset, or the connection closed
/// before the message was complete (`received`: bytes of the body that had come).
fn cut(e: &hyper::Error, received: usize) -> String {
    match io_kind(e) {
        Some(std::io::ErrorKind::ConnectionReset) => {
            format!("connection reset after {received} bytes of the answer")
        }
        k if k == Some(std::io::ErrorKind::UnexpectedEof) || e.is_incomplete_message() => {
            format!("truncated answer: the connection closed after {received} bytes of it")
        }
        _ => format!("the answer was cut after {received} bytes: {e}"),
    }
}

/// The kind of the I/O error under `e`, if one is: in the error's chain, or held by an
/// HTTP/2 error (which has no chain of its own). HTTP/2's I/O errors other than a reset are
/// the connection ending under an open stream (`BrokenPipe`; "bytes remaining on stream" when
/// it ends before the length the answer declared): read as a close, HTTP/1.1's
/// `UnexpectedEof`.
fn io_kind(e: &hyper::Error) -> Option<std::io::ErrorKind> {
    use std::io::ErrorKind;
    std::iter::successors(std::error::Error::source(e), |s| s.source()).find_map(|s| {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        let kind = s.downcast_ref::<h2::Error>()?.get_io()?.kind();
        Some(match kind {
            ErrorKind::ConnectionReset => kind,
            _ => ErrorKind::UnexpectedEof,
        })
    })
}

/// What ended a connection before the answer's head: a reset or a close are named as such.
fn no_answer(e: &hyper::Error) -> String {
    match io_kind(e) {
        Some(std::io::ErrorKind::ConnectionReset) => {
            "connection reset before the answer began".to_string()
        }
        Some(std::io::ErrorKind::UnexpectedEof) => {
            "the connection closed before the answer began".to_string()
        }
        _ if e.is_incomplete_message() => {
            "the connection closed before the answer began".to_string()
        }
        _ => format!("no answer: {e}"),
    }
}

/// The failure of a non-2xx answer: the API's error message (`{"error": ...}`) with the
/// status; 401 and 403 are a refused token.
pub fn refusal(status: hyper::StatusCode, body: &[u8]) -> Failure {
    let message = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(&body[..body.len().min(200)]).into_owned());
    let text = format!("HTTP {}: {message}", status.as_u16());
    if status == hyper::StatusCode::UNAUTHORIZED || status == hyper::StatusCode::FORBIDDEN {
        Failure::Refused(text)
    } else {
        Failure::Error(text)
    }
}

/// Sends `GET path` to `probe` and returns its answer as soon as its head has arrived, the
/// body still streaming (what a proxy passes on). No deadline: the caller sets one. The
/// probe's kept HTTP/2 connection carries the request when it is still open; otherwise a new
/// connection is made, and kept when it turns out to be HTTP/2.
pub async fn open(
    conns: &Connections,
    probe: &Probe,
    path: &str,
    retries: u32,
) -> Result<Opened, Failure> {
    if let Some(mut sender) = conns.http2(probe) {
        // `ready` fails on a connection the probe closed since (restarted, idle timeout):
        // nothing was sent on it, so the request goes out on a new one.
        if sender.ready().await.is_ok() {
            return request_on(sender, probe, path).await.map_err(|f| match f {
                H2Failure::NotHttp2(why) => Failure::Error(format!("HTTP/2: {why}")),
                H2Failure::Failed(f) => f,
            });
        }
        tracing::debug!(message = "Kept connection closed, connecting again.", probe = %probe.name);
        conns.forget(probe);
    }
    let tcp = connect(&probe.endpoint.authority, retries).await?;
    match &probe.tls {
        None if conns.http1_only(probe) => request_h1(conns, tcp, probe, path).await,
        None => match request_h2(conns, tcp, probe, path).await {
            Err(H2Failure::NotHttp2(why)) => {
                tracing::debug!(message = "Probe does not speak HTTP/2, asking over HTTP/1.1.", probe = %probe.name, %why);
                conns.keep(probe, Kept::Http1Only(std::time::Instant::now()));
                let tcp = connect(&probe.endpoint.authority, retries).await?;
                request_h1(conns, tcp, probe, path).await
            }
            Err(H2Failure::Failed(f)) => Err(f),
            Ok(r) => Ok(r),
        },
        Some(config) => {
            let name = rustls::pki_types::ServerName::try_from(probe.endpoint.host.clone())
                .map_err(|e| Failure::Error(format!("TLS server name: {e}")))?;
            let tls = tokio_rustls::TlsConnector::from(config.clone())
                .connect(name, tcp)
                .await
                .map_err(|e| Failure::Error(format!("TLS handshake: {e}")))?;
            if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                request_h2(conns, tls, probe, path)
                    .await
                    .map_err(|f| match f {
                        H2Failure::NotHttp2(why) => {
                            Failure::Error(format!("HTTP/2 chosen by ALPN, then: {why}"))
                        }
                        H2Failure::Failed(f) => f,
                    })
            } else {
                request_h1(conns, tls, probe, path).await
            }
        }
    }
}

/// Connects, trying again after connect errors (`retries` times, back-off doubling).
async fn connect(authority: &str, retries: u32) -> Result<TcpStream, Failure> {
    let mut pause = FIRST_BACKOFF;
    let mut attempt = 0;
    loop {
        match TcpStream::connect(authority).await {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) if attempt < retries => {
                tracing::debug!(message = "Probe connection failed, retrying.", authority, %e);
                attempt += 1;
                tokio::time::sleep(pause).await;
                pause *= 2;
            }
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                return Err(Failure::Refused(format!(
                    "connection refused ({authority})"
                )))
            }
            Err(e) => {
                return Err(Failure::Error(format!(
                    "cannot connect to {authority}: {e}"
                )))
            }
        }
    }
}

/// Why an HTTP/2 request got no answer.
enum H2Failure {
    /// The peer answered the preface with something that is not HTTP/2 (why).
    NotHttp2(String),
    /// Any other failure.
    Failed(Failure),
}

/// The request of `path` to `probe`, with its token.
fn get_request(
    probe: &Probe,
    path: &str,
    host: bool,
) -> Result<hyper::Request<Empty<Bytes>>, Failure> {
    let mut req = hyper::Request::get(format!("{}{path}", probe.endpoint.prefix));
    if host {
        req = req.header(header::HOST, &probe.endpoint.authority);
    }
    if let Some(t) = &probe.token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    req.body(Empty::<Bytes>::new())
        .map_err(|e| Failure::Error(format!("request: {e}")))
}

async fn request_h1<S>(
    conns: &Connections,
    io: S,
    probe: &Probe,
    path: &str,
) -> Result<Opened, Failure>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| Failure::Error(format!("HTTP handshake: {e}")))?;
    // The connection task ends with the answer (or when the request is dropped).
    conns.spawn(async move {
        let _ = conn.await;
    })?;
    let resp = sender
        .send_request(get_request(probe, path, true)?)
        .await
        .map_err(|e| Failure::Error(no_answer(&e)))?;
    Ok((resp, Protocol::Http1))
}

/// A new HTTP/2 connection over `io` and the request on it; the connection is kept for the
/// probe's next requests once it has answered as HTTP/2.
async fn request_h2<S>(
    conns: &Connections,
    io: S,
    probe: &Probe,
    path: &str,
) -> Result<Opened, H2Failure>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let failed = |m: String| H2Failure::Failed(Failure::Error(m));
    let handle = conns.runtime().map_err(|e| failed(e.to_string()))?.handle();
    let (sender, conn) = hyper::client::conn::http2::Builder::new(OnRuntime(handle.clone()))
        .timer(TokioTimer::new())
        .handshake(TokioIo::new(io))
        .await
        .map_err(|e| failed(format!("HTTP/2 handshake: {e}")))?;
    handle.spawn(async move {
        let _ = conn.await;
    });
    let answer = request_on(sender.clone(), probe, path).await?;
    conns.keep(probe, Kept::Http2(sender));
    Ok(answer)
}

/// The request of `path` as a stream of an HTTP/2 connection.
async fn request_on(
    mut sender: hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    probe: &Probe,
    path: &str,
) -> Result<Opened, H2Failure> {
    // The URI carries the authority (HTTP/2's `:authority`), not a Host header.
    let mut req = get_request(probe, path, false).map_err(H2Failure::Failed)?;
    *req.uri_mut() = format!(
        "http://{}{}{path}",
        probe.endpoint.authority, probe.endpoint.prefix
    )
    .parse()
    .map_err(|e| H2Failure::Failed(Failure::Error(format!("request URI: {e}"))))?;
    match sender.send_request(req).await {
        Ok(resp) => Ok((resp, Protocol::Http2)),
        Err(e) if not_http2(&e) => Err(H2Failure::NotHttp2(e.to_string())),
        Err(e) => Err(H2Failure::Failed(Failure::Error(no_answer(&e)))),
    }
}

/// Whether an HTTP/2 request failed because the peer's bytes were not HTTP/2 frames (an
/// HTTP/1.1 server answering the preface: its status line read as a frame header), rather than
/// a connection that was closed or reset.
fn not_http2(e: &hyper::Error) -> bool {
    io_kind(e).is_none() && !e.is_canceled() && !e.is_timeout() && !e.is_incomplete_message()
}
