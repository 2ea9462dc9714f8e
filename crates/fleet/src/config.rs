//! `probes.toml`: the probes of a fleet, their URLs, token and CA files, and tags.
//!
//! ```toml
//! timeout = "10s"       # per probe (default 10s)
//! concurrency = 64      # probes asked at once (default 64)
//! retries = 2           # connection attempts after the first, on connect errors only
//!
//! [[probe]]
//! name = "fra1"
//! url = "https://fra1.example.net:8080"
//! token_file = "/etc/trawl/fra1.token"
//! ca_file = "/etc/trawl/probes-ca.pem"   # https only
//! site = "fra"
//! role = "edge"
//! pair = "fra-link"                      # optional: probes on the same link, counted once
//! ```
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::Error;

/// The file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FleetFile {
    timeout: Option<String>,
    concurrency: Option<usize>,
    retries: Option<u32>,
    #[serde(default)]
    probe: Vec<ProbeConfig>,
}

/// One probe as the file names it.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeConfig {
    /// Unique name: the `probe` attribute's value and what `-c 'probe = NAME'` matches.
    pub name: String,
    /// `http://HOST:PORT` or `https://HOST:PORT`, optionally with a path prefix.
    pub url: String,
    /// File holding the probe API's bearer token.
    pub token_file: Option<PathBuf>,
    /// PEM file of the CA that signed the probe's certificate (https).
    pub ca_file: Option<PathBuf>,
    /// The `site` tag (`-c 'site = fra'`).
    pub site: Option<String>,
    /// The `role` tag (`-c 'role = edge'`).
    pub role: Option<String>,
    /// The pair the probe belongs to: probes that see the same link, whose flows are counted
    /// once (docs/specs/distributed.md, "Paired probes"); the `probe` attribute's value for
    /// their groups.
    pub pair: Option<String>,
}

/// Where a probe listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `https`.
    pub tls: bool,
    /// Host name or address (the TLS server name).
    pub host: String,
    /// `HOST:PORT`, for connecting and the `Host` header.
    pub authority: String,
    /// Path prefix without the trailing `/` (often empty).
    pub prefix: String,
}

impl Endpoint {
    /// Parses `http[s]://HOST[:PORT][/PREFIX]` (port default 80/443).
    pub fn parse(url: &str) -> Result<Endpoint, String> {
        let (tls, rest) = if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else {
            return Err(format!("{url:?} is not an http:// or https:// URL"));
        };
        let (authority, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() || authority.contains('@') {
            return Err(format!(
                "{url:?} has no HOST:PORT (or has credentials in it)"
            ));
        }
        // `[::1]:8080`, `host:8080`, `host`.
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(':') && p.parse::<u16>().is_ok() => (h, Some(p)),
            _ => (authority, None),
        };
        let default = if tls { "443" } else { "80" };
        Ok(Endpoint {
            tls,
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            authority: format!("{host}:{}", port.unwrap_or(default)),
            prefix: prefix
                .trim_end_matches('/')
                .split('/')
                .filter(|s| !s.is_empty())
                .map(|s| format!("/{s}"))
                .collect(),
        })
    }
}

/// A probe ready to be asked.
#[derive(Clone, Debug)]
pub struct Probe {
    /// Its name.
    pub name: String,
    /// Its URL as given.
    pub url: String,
    /// Where it listens.
    pub endpoint: Endpoint,
    /// The bearer token (read from its file).
    pub token: Option<String>,
    /// The TLS settings for https probes.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// `site` tag.
    pub site: Option<String>,
    /// `role` tag.
    pub role: Option<String>,
    /// The pair it belongs to.
    pub pair: Option<String>,
}

impl Probe {
    /// The name its groups carry in the `probe` attribute: its pair's, else its own.
    pub fn key(&self) -> &str {
        self.pair.as_deref().unwrap_or(&self.name)
    }
}

/// The probes and how to ask them.
#[derive(Clone, Debug)]
pub struct Fleet {
    /// The probes, in the file's order.
    pub probes: Vec<Probe>,
    /// Longest time a probe may take to answer (connecting, retries and the body included).
    pub timeout: Duration,
    /// Probes asked at once.
    pub concurrency: usize,
    /// Connection attempts after the first one (connect errors only; a probe that answered
    /// badly is not asked again).
    pub retries: u32,
    /// The probes' connections kept between queries, and the runtime asking them.
    pub connections: Arc<crate::client::Connections>,
}

/// Default per-probe timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default number of probes asked at once.
pub const DEFAULT_CONCURRENCY: usize = 64;
/// Default connection retries.
pub const DEFAULT_RETRIES: u32 = 2;

impl Default for Fleet {
    fn default() -> Self {
        Fleet {
            probes: Vec::new(),
            timeout: DEFAULT_TIMEOUT,
            concurrency: DEFAULT_CONCURRENCY,
            retries: DEFAULT_RETRIES,
            connections: Arc::default(),
        }
    }
}

impl Fleet {
    /// Reads a probes file; token and CA files are read now, so a missing one is an error
    /// before any probe is asked.
    pub fn load(path: &Path) -> Result<Fleet, Error> {
        let err = |message: String| Error::Config {
            path: path.to_path_buf(),
            message,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let file: FleetFile = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        let mut fleet = Fleet::default();
        if let Some(t) = &file.timeout {
            let ns =
                trawl_time::parse_duration_ns(t).map_err(|e| err(format!("timeout {t:?}: {e}")))?;
            fleet.timeout = Duration::from_nanos(ns);
        }
        fleet.concurrency = file.concurrency.unwrap_or(DEFAULT_CONCURRENCY).max(1);
        fleet.retries = file.retries.unwrap_or(DEFAULT_RETRIES);
        // Relative token and CA paths are relative to the probes file.
        let base = path.parent().unwrap_or(Path::new("."));
        for p in file.probe {
            fleet.add(p, base)?;
        }
        if fleet.probes.is_empty() {
            return Err(err("no [[probe]] in the file".into()));
        }
        fleet.check_pairs().map_err(err)?;
        Ok(fleet)
    }

    /// Adds a probe (`base`: the directory relative file names are in).
    pub fn add(&mut self, p: ProbeConfig, base: &Path) -> Result<(), Error> {
        let bad = |message: String| Error::Probe {
            probe: p.name.clone(),
            message,
        };
        if p.name.is_empty() || p.name.len() > 64 || p.name.chars().any(char::is_whitespace) {
            return Err(bad(
                "a name must be 1 to 64 characters without spaces".into()
            ));
        }
        if self.probes.iter().any(|q| q.name == p.name) {
            return Err(bad("the name is given twice".into()));
        }
        let endpoint = Endpoint::parse(&p.url).map_err(bad)?;
        let token = match &p.token_file {
            None => None,
            Some(f) => {
                let f = base.join(f);
                let text = std::fs::read_to_string(&f).map_err(|e| Error::Config {
                    path: f.clone(),
                    message: format!("token file: {e}"),
                })?;
                Some(text.trim().to_string())
            }
        };
        let tls = match (endpoint.tls, &p.ca_file) {
            (false, _) => None,
            (true, None) => return Err(bad("an https probe needs ca_file".into())),
            (true, Some(ca)) => Some(crate::client::tls_config(&base.join(ca))?),
        };
        self.probes.push(Probe {
            name: p.name,
            url: p.url,
            endpoint,
            token,
            tls,
            site: p.site,
            role: p.role,
            pair: p.pair,
        });
        Ok(())
    }

    /// A pair has two or more members (one alone is a typo) and a name no probe has (the
    /// `probe` attribute could not tell them apart).
    fn check_pairs(&self) -> Result<(), String> {
        for pair in self.probes.iter().filter_map(|p| p.pair.as_deref()) {
            let members = self
                .probes
                .iter()
                .filter(|p| p.pair.as_deref() == Some(pair))
                .count();
            if members < 2 {
                return Err(format!("pair {pair:?} has one probe: a pair needs two"));
            }
            if self.probes.iter().any(|p| p.name == pair) {
                return Err(format!("pair {pair:?} has the name of a probe"));
            }
        }
        Ok(())
    }

    /// Adds `--probe [NAME=]URL` (no token; the name defaults to the URL's `HOST:PORT`).
    pub fn add_url(&mut self, arg: &str) -> Result<(), Error> {
        let (name, url) = match arg.split_once('=') {
            Some((n, u)) if !n.contains('/') => (n.to_string(), u.to_string()),
            _ => {
                let e = Endpoint::parse(arg).map_err(|message| Error::Probe {
                    probe: arg.to_string(),
                    message,
                })?;
                (e.authority, arg.to_string())
            }
        };
        self.add(
            ProbeConfig {
                name,
                url,
                ..ProbeConfig::default()
            },
            Path::new("."),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_endpoints() {
        let e = Endpoint::parse("http://127.0.0.1:8080").unwrap();
        assert_eq!(
            (e.tls, e.authority.as_str(), e.prefix.as_str()),
            (false, "127.0.0.1:8080", "")
        );
        let e = Endpoint::parse("https://probe.example/trawl/").unwrap();
        assert_eq!(
            (e.tls, e.authority.as_str(), e.prefix.as_str()),
            (true, "probe.example:443", "/trawl")
        );
        let e = Endpoint::parse("http://[::1]:9000").unwrap();
        assert_eq!(
            (e.host.as_str(), e.authority.as_str()),
            ("::1", "[::1]:9000")
        );
        assert!(Endpoint::parse("ftp://x").is_err());
        assert!(Endpoint::parse("http://").is_err());
    }

    #[test]
    fn a_pair_needs_two_probes_and_a_name_of_its_own() {
        let probe = |name: &str, pair: &str| ProbeConfig {
            name: name.into(),
            url: "http://127.0.0.1:1".into(),
            pair: Some(pair.into()),
            ..ProbeConfig::default()
        };
        let mut fleet = Fleet::default();
        fleet.add(probe("a1", "link"), Path::new(".")).unwrap();
        let alone = fleet.check_pairs().unwrap_err();
        assert!(alone.contains("pair \"link\" has one probe"), "{alone}");
        fleet.add(probe("a2", "link"), Path::new(".")).unwrap();
        fleet.check_pairs().unwrap();
        assert_eq!(fleet.probes[1].key(), "link");
        fleet.add(probe("link", "a1"), Path::new(".")).unwrap();
        assert!(fleet
            .check_pairs()
            .unwrap_err()
            .contains("the name of a probe"));
    }
}
