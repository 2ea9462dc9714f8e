//! Enrichment of flow records: the autonomous system and the country of their addresses,
//! from MaxMind DB files (GeoLite2 / DB-IP "ASN" and "Country" databases, read with the
//! `maxminddb` crate), and the names of collected records' interfaces, from a mapping file.
//!
//! Policy: bounded and counted. Lookups go through a direct-mapped cache of recent addresses
//! ([`CACHE_SLOTS`] entries, no allocation once built): flows repeat their addresses, so most
//! records cost two cache probes. An address the databases do not hold gets 0 and no country.
//! The mapping file is read once; its names live as long as the process, so that records
//! (which are `Copy`) can point at them.
//!
//! [`Enricher::open`] takes the files ([`EnrichFiles`]); [`Enricher::record`] fills a record's
//! `extra.src_as`, `dst_as`, `src_country`, `dst_country`, `in_if_info`, `out_if_info`.
//! Used by the collector's `ipfix_source` block (`trawl collect --geoip-asn ...`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use maxminddb::{PathElement, Reader};
use trawl_flow::{FlowRecord, InterfaceInfo};

/// Addresses the lookup cache holds (a power of two).
pub const CACHE_SLOTS: usize = 1 << 16;

/// What to enrich records with (the settings `geoip_asn`, `geoip_country`, `interfaces` of the
/// blocks that enrich).
#[derive(Clone, Debug, Default)]
pub struct EnrichFiles {
    /// A MaxMind DB with `autonomous_system_number` per network.
    pub asn: Option<PathBuf>,
    /// A MaxMind DB with `country.iso_code` per network.
    pub country: Option<PathBuf>,
    /// Interface names: CSV lines `EXPORTER,IFINDEX,NAME,DESCRIPTION` (`*` for any exporter).
    pub interfaces: Option<PathBuf>,
}

impl EnrichFiles {
    /// Whether any file is given.
    pub fn any(&self) -> bool {
        self.asn.is_some() || self.country.is_some() || self.interfaces.is_some()
    }
}

/// One cached address: its AS number and country.
#[derive(Clone, Copy)]
struct Slot {
    ip: Option<IpAddr>,
    asn: u32,
    country: [u8; 2],
}

/// What went wrong opening the files.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A database file could not be read or is no MaxMind DB.
    #[error("{}: not a readable MaxMind DB file: {source}", path.display())]
    Database {
        /// The file.
        path: PathBuf,
        /// Why.
        source: maxminddb::MaxMindDbError,
    },
    /// The interface mapping file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line of the interface mapping file is not `EXPORTER,IFINDEX,NAME[,DESCRIPTION]`.
    #[error("{}: line {line}: {why}", path.display())]
    Mapping {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        why: String,
    },
}

/// An interface mapping: (exporter or `None` for any, ifIndex) → name and description.
pub type InterfaceMap = HashMap<(Option<IpAddr>, u32), &'static InterfaceInfo>;

/// Adds AS numbers, countries and interface names to records.
pub struct Enricher {
    asn: Option<Reader<Vec<u8>>>,
    country: Option<Reader<Vec<u8>>>,
    cache: Box<[Slot]>,
    /// By (exporter, ifIndex); `None` as the exporter: any exporter (`*`).
    interfaces: InterfaceMap,
    /// Address lookups.
    pub lookups: u64,
    /// Lookups the cache answered.
    pub hits: u64,
}

impl Enricher {
    /// Opens the files; `None` when none is given. Errors name the file.
    pub fn open(files: &EnrichFiles) -> Result<Option<Enricher>, Error> {
        if !files.any() {
            return Ok(None);
        }
        let open = |p: &Option<PathBuf>| -> Result<Option<Reader<Vec<u8>>>, Error> {
            p.as_ref()
                .map(|p| {
                    Reader::open_readfile(p).map_err(|source| Error::Database {
                        path: p.clone(),
                        source,
                    })
                })
                .transpose()
        };
        let interfaces = match &files.interfaces {
            Some(p) => read_interfaces(p)?,
            None => HashMap::new(),
        };
        Ok(Some(Enricher {
            asn: open(&files.asn)?,
            country: open(&files.country)?,
            cache: vec![
                Slot {
                    ip: None,
                    asn: 0,
                    country: [0; 2],
                };
                CACHE_SLOTS
            ]
            .into_boxed_slice(),
            interfaces,
            lookups: 0,
            hits: 0,
        }))
    }

    /// Fills the record's AS numbers, countries and interface names. `exporter` is the
    /// address of whoever sent a collected record (an sFlow record's agent comes first).
    #[inline]
    pub fn record(&mut self, r: &mut FlowRecord<'_>, exporter: Option<IpAddr>) {
        if self.asn.is_some() || self.country.is_some() {
            let (asn, country) = self.lookup(r.src_ip);
            r.extra.src_as = asn;
            r.extra.src_country = country;
            let (asn, country) = self.lookup(r.dst_ip);
            r.extra.dst_as = asn;
            r.extra.dst_country = country;
        }
        if !self.interfaces.is_empty() {
            let exporter = r.extra.agent.or(exporter);
            r.extra.in_if_info = self.interface(exporter, r.extra.in_if);
            r.extra.out_if_info = self.interface(exporter, r.extra.out_if);
        }
    }

    fn interface(&self, exporter: Option<IpAddr>, if_index: u32) -> Option<&'static InterfaceInfo> {
        if if_index == 0 {
            return None;
        }
        exporter
            .and_then(|e| self.interfaces.get(&(Some(e), if_index)))
            .or_else(|| self.interfaces.get(&(None, if_index)))
            .copied()
    }

    /// The AS number and country of `ip`, from the cache or the databases.
    fn lookup(&mut self, ip: IpAddr) -> (u32, [u8; 2]) {
        self.lookups += 1;
        let i = slot_of(ip);
        let slot = self.cache[i];
        if slot.ip == Some(ip) {
            self.hits += 1;
            return (slot.asn, slot.country);
        }
        let asn = self.asn.as_ref().map_or(0, |db| {
            db.lookup(ip)
                .ok()
                .and_then(|r| {
                    r.decode_path::<u32>(&[PathElement::Key("autonomous_system_number")])
                        .ok()
                })
                .flatten()
                .unwrap_or(0)
        });
        let country = self.country.as_ref().map_or([0; 2], |db| {
            db.lookup(ip)
                .ok()
                .and_then(|r| {
                    r.decode_path::<&str>(&[
                        PathElement::Key("country"),
                        PathElement::Key("iso_code"),
                    ])
                    .ok()
                })
                .flatten()
                .and_then(|c| <[u8; 2]>::try_from(c.as_bytes()).ok())
                .unwrap_or([0; 2])
        });
        self.cache[i] = Slot {
            ip: Some(ip),
            asn,
            country,
        };
        (asn, country)
    }
}

/// The cache slot of an address: a multiplicative hash of its bytes.
#[inline]
fn slot_of(ip: IpAddr) -> usize {
    let x = match ip {
        IpAddr::V4(a) => u64::from(u32::from(a)),
        IpAddr::V6(a) => {
            let v = u128::from(a);
            (v as u64) ^ ((v >> 64) as u64)
        }
    };
    (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> (64 - CACHE_SLOTS.trailing_zeros())) as usize
}

/// Reads an interface mapping: CSV lines `EXPORTER,IFINDEX,NAME,DESCRIPTION` (the description
/// may hold commas, or be quoted); `#` comments, blank lines and a header line starting with
/// `exporter` are skipped. `*` as the exporter names an ifIndex of every exporter.
pub fn read_interfaces(path: &Path) -> Result<InterfaceMap, Error> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let mut map = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with("exporter") {
            continue;
        }
        let bad = |why: &str| Error::Mapping {
            path: path.to_path_buf(),
            line: n + 1,
            why: why.to_string(),
        };
        let mut parts = line.splitn(4, ',');
        let (Some(exporter), Some(if_index), Some(name)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(bad("expected EXPORTER,IFINDEX,NAME[,DESCRIPTION]"));
        };
        let exporter = match exporter.trim() {
            "*" => None,
            e => Some(
                e.parse::<IpAddr>()
                    .map_err(|_| bad(&format!("exporter {e:?} is not an address or `*`")))?,
            ),
        };
        let if_index: u32 = if_index
            .trim()
            .parse()
            .map_err(|_| bad(&format!("ifIndex {:?} is not a number", if_index.trim())))?;
        let unquote = |s: &str| -> Box<str> {
            let s = s.trim();
            s.strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .map_or(s.to_string(), |s| s.replace("\"\"", "\""))
                .into()
        };
        // Leaked on purpose: records point at the names for the rest of the run.
        let info: &'static InterfaceInfo = Box::leak(Box::new(InterfaceInfo {
            name: unquote(name),
            description: unquote(parts.next().unwrap_or("")),
        }));
        map.insert((exporter, if_index), info);
    }
    Ok(map)
}

/// A record with every field zero, addresses 0.0.0.0 (tests and benchmarks fill it in).
#[doc(hidden)]
pub fn record() -> FlowRecord<'static> {
    FlowRecord::empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interface_mapping_by_exporter_then_any() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ifaces.csv");
        std::fs::write(
            &p,
            "exporter,ifindex,name,description\n# a comment\n\
             192.0.2.1,3,xe-0/0/3,\"uplink, transit A\"\n*,3,any3,\n",
        )
        .unwrap();
        let files = EnrichFiles {
            interfaces: Some(p),
            ..EnrichFiles::default()
        };
        let mut e = Enricher::open(&files).unwrap().unwrap();
        let mut r = record();
        r.extra.in_if = 3;
        r.extra.out_if = 4;
        e.record(&mut r, Some("192.0.2.1".parse().unwrap()));
        let i = r.extra.in_if_info.unwrap();
        assert_eq!(
            (&*i.name, &*i.description),
            ("xe-0/0/3", "uplink, transit A")
        );
        assert_eq!(r.extra.out_if_info, None);
        e.record(&mut r, Some("192.0.2.9".parse().unwrap()));
        assert_eq!(&*r.extra.in_if_info.unwrap().name, "any3");
    }

    #[test]
    fn bad_mapping_line_names_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ifaces.csv");
        std::fs::write(&p, "192.0.2.1,3,a\nnot-an-address,4,b\n").unwrap();
        let e = read_interfaces(&p).unwrap_err().to_string();
        assert!(e.contains("ifaces.csv: line 2: exporter"), "{e}");
    }
}
