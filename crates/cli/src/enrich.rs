//! The enrichment flags (`--geoip-asn`, `--geoip-country`, `--interfaces`): AS numbers,
//! countries and interface names added to records (`trawl_blocks::enrich`).
use std::path::PathBuf;

use clap::Args;

use crate::flag::topic;

/// Flags of the commands that enrich collected records.
#[derive(Args, Debug, Clone, Default)]
pub struct EnrichArgs {
    /// Add `src_as` and `dst_as` to every record: the autonomous system of each address from
    /// this MaxMind DB file (GeoLite2-ASN or DB-IP ASN format).
    #[arg(help_heading = topic::OUTPUT, long = "geoip-asn", value_name = "FILE")]
    pub asn: Option<PathBuf>,
    /// Add `src_country` and `dst_country` (ISO 3166 codes) from this MaxMind DB file
    /// (GeoLite2-Country, GeoIP2-City or DB-IP Country format).
    #[arg(help_heading = topic::OUTPUT, long = "geoip-country", value_name = "FILE")]
    pub country: Option<PathBuf>,
    /// Add the names and descriptions of the records' `in_if` / `out_if` from this file:
    /// CSV lines EXPORTER,IFINDEX,NAME,DESCRIPTION (EXPORTER an address or `*`; an sFlow
    /// record's exporter is its agent).
    #[arg(help_heading = topic::OUTPUT, long = "interfaces", value_name = "FILE")]
    pub interfaces: Option<PathBuf>,
}

/// The enrichment flags of the commands that meter packets (`trawl flows`, `trawl ingest`):
/// AS numbers and countries (their records have no exporter interfaces to name).
#[derive(Args, Debug, Clone, Default)]
pub struct GeoArgs {
    /// Add `src_as` and `dst_as` to every record: the autonomous system of each address from
    /// this MaxMind DB file (GeoLite2-ASN or DB-IP ASN format); IPFIX exports carry them as
    /// bgpSourceAsNumber/bgpDestinationAsNumber.
    #[arg(help_heading = topic::OUTPUT, long = "geoip-asn", value_name = "FILE")]
    pub asn: Option<PathBuf>,
    /// Add `src_country` and `dst_country` (ISO 3166 codes) from this MaxMind DB file
    /// (GeoLite2-Country, GeoIP2-City or DB-IP Country format).
    #[arg(help_heading = topic::OUTPUT, long = "geoip-country", value_name = "FILE")]
    pub country: Option<PathBuf>,
}

impl GeoArgs {
    /// Sets the `geoip_asn` and `geoip_country` settings of a block (`flow_meter`): looked
    /// up before `anonymize` changes the addresses.
    pub fn set_on<'a>(
        &self,
        b: trawl_compose::BlockBuilder<'a>,
    ) -> trawl_compose::BlockBuilder<'a> {
        let text = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
        b.set_some("geoip_asn", text(&self.asn))
            .set_some("geoip_country", text(&self.country))
    }

    /// Whether records get AS numbers and countries.
    pub fn any(&self) -> bool {
        self.asn.is_some() || self.country.is_some()
    }
}

impl EnrichArgs {
    /// Sets the `geoip_asn`, `geoip_country` and `interfaces` settings of a block.
    pub fn set_on<'a>(
        &self,
        b: trawl_compose::BlockBuilder<'a>,
    ) -> trawl_compose::BlockBuilder<'a> {
        let text = |p: &Option<PathBuf>| p.as_ref().map(|p| p.to_string_lossy().into_owned());
        b.set_some("geoip_asn", text(&self.asn))
            .set_some("geoip_country", text(&self.country))
            .set_some("interfaces", text(&self.interfaces))
    }

    /// Whether records get AS numbers and countries.
    pub fn geoip(&self) -> bool {
        self.asn.is_some() || self.country.is_some()
    }
}
