//! The HTTP API's flags (`--api`, its token and TLS files), shared by `trawl run` and
//! `trawl serve`, and `trawl serve`: the API over a flow database and a packet store,
//! without capturing.
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use trawl_api::ApiConfig;

use crate::flag::topic;

/// Where `trawl serve` listens without `--api`.
const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

#[derive(Args, Debug, Default, Clone)]
pub struct ApiArgs {
    /// Serve the HTTP API (docs/specs/api.md) on ADDR:PORT, e.g. 127.0.0.1:8080 (`trawl
    /// serve`: default 127.0.0.1:8080). Any address but loopback needs --api-token-file.
    #[arg(help_heading = topic::API, long = "api", value_name = "ADDR:PORT")]
    pub api: Option<String>,
    /// File holding the API's bearer token (at least 16 printable characters): every
    /// request must carry `Authorization: Bearer TOKEN`.
    #[arg(help_heading = topic::API, long = "api-token-file", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Serve HTTPS with this PEM certificate chain (with --api-tls-key).
    #[arg(help_heading = topic::API, long = "api-tls-cert", value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --api-tls-cert.
    #[arg(help_heading = topic::API, long = "api-tls-key", value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Longest an API query may scan (default 30): past it the answer is 503 and the scan
    /// stops.
    #[arg(help_heading = topic::API, long = "api-query-timeout", value_name = "SECONDS")]
    pub query_timeout: Option<u64>,
}

impl ApiArgs {
    /// Whether any API flag was given.
    pub fn any(&self) -> bool {
        self.api.is_some()
            || self.token_file.is_some()
            || self.tls_cert.is_some()
            || self.tls_key.is_some()
            || self.query_timeout.is_some()
    }

    /// The API's settings when `--api` was given (`default` when it was not); the token and
    /// TLS flags alone are refused rather than ignored.
    pub fn config(&self, default: Option<&str>) -> Result<Option<ApiConfig>> {
        let Some(listen) = self.api.as_deref().or(default) else {
            if self.any() {
                bail!("--api-token-file, --api-tls-* and --api-query-timeout need --api ADDR:PORT");
            }
            return Ok(None);
        };
        let config = ApiConfig {
            listen: listen.to_string(),
            token_file: self.token_file.clone(),
            tls_cert: self.tls_cert.clone(),
            tls_key: self.tls_key.clone(),
            query_timeout_s: self
                .query_timeout
                .unwrap_or(ApiConfig::default().query_timeout_s),
            ..ApiConfig::default()
        };
        config.check()?;
        Ok(Some(config))
    }
}

#[derive(Args, Debug)]
pub struct ServeArgs {
    /// The flow database `/api/v1/query` reads.
    #[arg(help_heading = topic::INPUT, short = 'd', long = "db", value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// The packet store `/api/v1/packets` reads.
    #[arg(help_heading = topic::INPUT, long = "packets", value_name = "DIR")]
    pub packets: Option<PathBuf>,
    /// The VoIP records (`trawl voip -o DIR`, `trawl run --voip DIR`) `/api/v1/calls` reads.
    #[arg(help_heading = topic::INPUT, long = "voip", value_name = "DIR")]
    pub voip: Option<PathBuf>,
    /// The application-layer logs (`trawl run --logs DIR`, `trawl logs -o DIR`)
    /// `/api/v1/logs` reads.
    #[arg(help_heading = topic::INPUT, long = "logs", value_name = "DIR")]
    pub logs: Option<PathBuf>,
    /// Serve as the coordinator of these probes (probes.toml): `/api/v1/query` and
    /// `/api/v1/series` answer for the fleet, `/api/v1/packets?probe=NAME` passes that probe's
    /// packets through (docs/specs/distributed.md).
    #[arg(help_heading = topic::FLEET, long = "probes", value_name = "FILE", conflicts_with_all = ["db", "packets"])]
    pub probes: Option<PathBuf>,
    #[command(flatten)]
    pub api: ApiArgs,
}

/// `trawl serve`: until SIGINT/SIGTERM.
pub fn serve(a: &ServeArgs) -> Result<ExitCode> {
    if a.db.is_none()
        && a.packets.is_none()
        && a.voip.is_none()
        && a.logs.is_none()
        && a.probes.is_none()
    {
        bail!(
            "nothing to serve: give --db DIR (flow database), --packets DIR (packet store), --voip DIR (VoIP records) and/or --logs DIR (application logs), or --probes FILE (a fleet)"
        );
    }
    for dir in a.db.iter().chain(&a.packets).chain(&a.voip).chain(&a.logs) {
        if !dir.is_dir() {
            bail!("{} is not a directory", dir.display());
        }
    }
    let mut config = a
        .api
        .config(Some(DEFAULT_LISTEN))?
        .expect("a default address");
    config.db = a.db.clone();
    config.packets = a.packets.clone();
    config.voip = a.voip.clone();
    config.logs = a.logs.clone();
    config.fleet = a
        .probes
        .as_deref()
        .map(trawl_fleet::Fleet::load)
        .transpose()?
        .map(std::sync::Arc::new);
    let stop = crate::signals::install_stop_signals()?;
    let server = trawl_api::Server::start(&config)?;
    let scheme = if config.tls_cert.is_some() {
        "https"
    } else {
        "http"
    };
    // The one line `trawl serve` prints: where it serves (the port, when --api asked for 0).
    eprintln!("trawl serve: serving on {scheme}://{}", server.local_addr());
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
    server.shutdown();
    Ok(ExitCode::SUCCESS)
}
