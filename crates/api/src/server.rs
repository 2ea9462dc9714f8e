//! The HTTP server: a tokio runtime of its own, an accept loop, TLS when configured, one
//! hyper HTTP/1.1 connection per client with bounded request heads and header time.
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::sync::{watch, Semaphore};
use tokio_rustls::TlsAcceptor;
use trawl_compose::Reporter;

use crate::auth::Token;
use crate::live::LiveSeries;
use crate::{ApiConfig, Error};

/// Longest time a client may take to send a request's head (slowloris).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// Largest request head (request line and headers): the longest condition fits many times.
const MAX_HEAD: usize = 32 * 1024;
/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 256;
/// Requests in flight on one HTTP/2 connection (a coordinator's concurrent queries).
const MAX_STREAMS: u32 = 64;
/// How long shutting down waits for requests in flight.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);
/// Nice value of the API's threads: queries, packet reads and answers run below capture and
/// below whatever else an operator runs on the probe (a fleet's coordinator, when the probes
/// share its machine, merges as answers arrive instead of after the last one).
const API_NICE: i32 = 10;

/// What the handlers share.
pub(crate) struct AppState {
    pub cfg: ApiConfig,
    pub token: Option<Token>,
    /// The running composition's counters (`trawl run`); unset under `trawl serve`.
    pub reporter: OnceLock<Reporter>,
    pub live: Mutex<LiveSeries>,
    /// The calls in progress of a VoIP monitor (`/api/v1/calls?active=1`).
    pub active_calls: Mutex<crate::calls::ActiveCalls>,
    pub started: Instant,
    /// The scans of queries, running and done (`crate::scans`).
    pub scans: Arc<crate::scans::Scans>,
}

/// A running API server.
pub struct Server {
    runtime: Option<tokio::runtime::Runtime>,
    stop: watch::Sender<bool>,
    addr: SocketAddr,
    pub(crate) state: Arc<AppState>,
}

impl Server {
    /// Checks `cfg`, reads its token and TLS files, binds its address and starts serving on
    /// threads of its own (named `trawl-api`). Errors come back before anything is served.
    pub fn start(cfg: &ApiConfig) -> Result<Server, Error> {
        cfg.check()?;
        let token = cfg.token_file.as_deref().map(Token::load).transpose()?;
        let tls = match (&cfg.tls_cert, &cfg.tls_key) {
            (Some(c), Some(k)) => Some(tls_acceptor(c, k)?),
            _ => None,
        };
        let addr = cfg.addr()?;
        let listen_error = |source| Error::Listen {
            addr: cfg.listen.clone(),
            source,
        };
        let std_listener = std::net::TcpListener::bind(addr).map_err(listen_error)?;
        std_listener.set_nonblocking(true).map_err(listen_error)?;
        let addr = std_listener.local_addr().map_err(listen_error)?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(cfg.threads)
            .max_blocking_threads(8)
            .thread_name("trawl-api")
            .on_thread_start(|| {
                if let Err(e) = trawl_packets::set_cpu_nice(API_NICE) {
                    tracing::debug!(message = "API thread keeps its CPU priority.", %e);
                }
            })
            .enable_all()
            .build()
            .map_err(Error::Runtime)?;
        let listener = {
            let _guard = runtime.enter();
            tokio::net::TcpListener::from_std(std_listener).map_err(listen_error)?
        };
        let state = Arc::new(AppState {
            cfg: cfg.clone(),
            token,
            reporter: OnceLock::new(),
            live: Mutex::new(LiveSeries::new(cfg.live_seconds)),
            active_calls: Mutex::default(),
            started: Instant::now(),
            scans: Arc::default(),
        });
        let router = crate::routes::router(state.clone());
        let (stop, stopped) = watch::channel(false);
        runtime.spawn(accept_loop(listener, tls, router, stopped));
        Ok(Server {
            runtime: Some(runtime),
            stop,
            addr,
            state,
        })
    }

    /// The address it listens on (the port chosen when `listen` asked for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves the counters of a running composition in `/api/v1/status` and `/metrics`.
    pub fn set_reporter(&self, reporter: Reporter) {
        let _ = self.state.reporter.set(reporter);
    }

    /// Stops accepting, gives requests in flight a moment, and ends the threads.
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        let _ = self.stop.send(true);
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_timeout(SHUTDOWN_GRACE);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop_now();
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    tls: Option<TlsAcceptor>,
    router: axum::Router,
    mut stopped: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return;
        };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stopped.changed() => return,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors and the like: pause rather than spin.
                tracing::warn!(message = "API cannot accept a connection.", %e);
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _permit = permit;
            match tls {
                None => serve_connection(stream, router).await,
                Some(acceptor) => {
                    if let Ok(Ok(s)) =
                        tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    {
                        serve_connection(s, router).await;
                    }
                }
            }
        });
    }
}

async fn serve_connection<I>(io: I, router: axum::Router)
where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper_util::service::TowerToHyperService::new(router);
    // HTTP/1.1, or HTTP/2 when the client opens with its preface (h2c by prior knowledge, or
    // after ALPN "h2" over TLS): the fleet's coordinator multiplexes its queries to a probe
    // over one HTTP/2 connection.
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_HEAD);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_header_list_size(MAX_HEAD as u32)
        .max_concurrent_streams(MAX_STREAMS);
    let _ = builder.serve_connection(TokioIo::new(io), service).await;
}

/// The TLS side: the certificate chain and key from PEM files, TLS 1.2 and 1.3 (rustls'
/// safe defaults), HTTP/2 or HTTP/1.1 by ALPN.
fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, Error> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let file_error = |path: &Path, what: &str, e: &dyn std::fmt::Display| Error::File {
        path: path.to_path_buf(),
        message: format!("cannot read the TLS {what}: {e}"),
    };
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| file_error(cert, "certificate", &e))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(cert, "certificate", &e))?;
    if certs.is_empty() {
        return Err(file_error(cert, "certificate", &"no CERTIFICATE block"));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| file_error(key, "key", &e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| file_error(key, "key (does it belong to the certificate?)", &e))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
