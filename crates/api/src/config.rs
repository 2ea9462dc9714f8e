//! The API's settings: the `http_api` block's table in a composition, and what `trawl serve`
//! and `trawl run --api` fill in from their flags.
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

use crate::Error;

/// Where and what the API serves.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiConfig {
    /// `ADDR:PORT` to listen on (port 0: any free port). Default `127.0.0.1:8080`.
    pub listen: String,
    /// File holding the bearer token every request must carry (`Authorization: Bearer
    /// TOKEN`); required when `listen` is not a loopback address.
    pub token_file: Option<PathBuf>,
    /// PEM certificate chain: serve HTTPS (with `tls_key`).
    pub tls_cert: Option<PathBuf>,
    /// PEM private key of `tls_cert`.
    pub tls_key: Option<PathBuf>,
    /// The flow database `/api/v1/query` reads.
    pub db: Option<PathBuf>,
    /// The packet store `/api/v1/packets` reads.
    pub packets: Option<PathBuf>,
    /// The VoIP records (`trawl voip -o DIR`, `trawl run --voip DIR`) whose finished calls
    /// `/api/v1/calls` reads.
    pub voip: Option<PathBuf>,
    /// The application-layer logs (`trawl run --logs DIR`: hourly files; `trawl logs -o DIR`)
    /// `/api/v1/logs` reads.
    pub logs: Option<PathBuf>,
    /// The interface name the live rows of the `series` input are served under when they
    /// name none (a sum over several interfaces, or rows not from live capture); rows that
    /// name their interface are served under it, each interface's apart.
    pub iface: String,
    /// Live per-second rows kept for `/api/v1/series` (the newest; default one hour).
    pub live_seconds: usize,
    /// Longest a query may take before the answer is 503 (seconds).
    pub query_timeout_s: u64,
    /// Worker threads of the API's runtime.
    pub threads: usize,
    /// Interface label per block name in `/metrics` (`{ cap_eth0_0 = "eth0" }`).
    pub block_interfaces: std::collections::BTreeMap<String, String>,
    /// The probes of a coordinator (`trawl serve --probes FILE`): `/api/v1/query`,
    /// `/api/v1/series` and `/api/v1/packets?probe=` answer for them (docs/specs/distributed.md).
    #[serde(skip)]
    pub fleet: Option<std::sync::Arc<trawl_fleet::Fleet>>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        ApiConfig {
            listen: "127.0.0.1:8080".into(),
            token_file: None,
            tls_cert: None,
            tls_key: None,
            db: None,
            packets: None,
            voip: None,
            logs: None,
            iface: "all".into(),
            live_seconds: 3600,
            query_timeout_s: 30,
            threads: 2,
            block_interfaces: Default::default(),
            fleet: None,
        }
    }
}

/// The most threads the API's runtime may have: it serves operators, not traffic.
const MAX_THREADS: usize = 16;

impl ApiConfig {
    /// The address to listen on.
    pub fn addr(&self) -> Result<SocketAddr, Error> {
        self.listen.parse().map_err(|_| {
            Error::Config(format!(
                "listen = {:?}: not an ADDR:PORT (e.g. 127.0.0.1:8080, [::1]:8080)",
                self.listen
            ))
        })
    }

    /// Checks the settings without touching files: an address off loopback needs a token
    /// file, TLS needs both files, counts are in range.
    pub fn check(&self) -> Result<(), Error> {
        let addr = self.addr()?;
        if !addr.ip().is_loopback() && self.token_file.is_none() {
            return Err(Error::Config(format!(
                "listen = {addr} is not a loopback address: a token file is required \
                 (--api-token-file / token_file) so that only holders of the token are served"
            )));
        }
        if self.tls_cert.is_some() != self.tls_key.is_some() {
            return Err(Error::Config(
                "TLS needs both a certificate and its key (--api-tls-cert and --api-tls-key)"
                    .into(),
            ));
        }
        if !trawl_store::layout::valid_iface(&self.iface) {
            return Err(Error::Config(format!(
                "iface = {:?} is not an interface name",
                self.iface
            )));
        }
        if self.threads == 0 || self.threads > MAX_THREADS {
            return Err(Error::Config(format!(
                "threads = {} (1 to {MAX_THREADS})",
                self.threads
            )));
        }
        if self.query_timeout_s == 0 {
            return Err(Error::Config("query_timeout_s must be at least 1".into()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listening(listen: &str) -> ApiConfig {
        ApiConfig {
            listen: listen.into(),
            ..ApiConfig::default()
        }
    }

    #[test]
    fn only_loopback_goes_without_a_token() {
        for ok in ["127.0.0.1:8080", "127.0.0.2:0", "[::1]:8080"] {
            assert!(listening(ok).check().is_ok(), "{ok}");
        }
        for refused in ["0.0.0.0:8080", "192.0.2.1:80", "[::]:8080"] {
            let e = listening(refused).check().unwrap_err().to_string();
            assert!(e.contains("token"), "{refused}: {e}");
        }
        let with_token = ApiConfig {
            token_file: Some("/t".into()),
            ..listening("0.0.0.0:8080")
        };
        assert!(with_token.check().is_ok());
        assert!(
            listening("localhost:8080").check().is_err(),
            "names are not addresses"
        );
    }

    #[test]
    fn tls_needs_both_files() {
        let half = ApiConfig {
            tls_cert: Some("/c".into()),
            ..ApiConfig::default()
        };
        assert!(half.check().unwrap_err().to_string().contains("both"));
    }
}
