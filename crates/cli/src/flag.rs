//! What the commands' flags share: value parsers (sizes, ranges) and the small enums several
//! commands take (`--summary`, `--progress`, `--format`). A leaf: it imports nothing from the
//! commands, which import it (ripgrep's flags; issue 19's import circle through `args.rs`).
//! Durations are parsed by [`trawl_time::parse_duration_ns`].

use anyhow::Result;
use clap::ValueEnum;
use trawl_flow::FlowConfig;

pub use trawl_time::parse_duration_ns;

/// `--format`: the writer blocks' enum (one for the command line and compositions).
pub use trawl_blocks::output::TextFormat as OutputFormat;
/// `--time-format`: the writer blocks' enum (one for the command line and compositions).
pub use trawl_blocks::output::TimeFormat;

/// Every time flag (`--from`, `--to` of `query`, `packets`, `subscribe`): the forms of
/// [`trawl_time::parse_instant`] (RFC 3339, local wall-clock times in `TZ`, epoch s/ms/us/ns,
/// `now`, `-15m`, `15m ago`), relative ones counted back from now.
pub fn parse_time(s: &str) -> Result<u64, String> {
    trawl_time::parse_instant(s, trawl_time::now_ns()).map_err(|e| e.to_string())
}

/// The topics `--help` groups each command's flags under (clap help headings): one
/// vocabulary for every command, in docs/cli.md's table too.
pub mod topic {
    /// What is read: files, interfaces, a composition, a store.
    pub const INPUT: &str = "Input";
    /// Which packets or records: tcpdump filters, conditions, interfaces of a store.
    pub const FILTER: &str = "Filter";
    /// The flow meter: timeouts, table capacity, tunnels, payload bytes.
    pub const METER: &str = "Meter";
    /// What is written, where, in which format; summaries and progress.
    pub const OUTPUT: &str = "Output";
    /// Exporters and multicast feeds.
    pub const EXPORT: &str = "Export";
    /// Live capture sockets and workers (with `-i`).
    pub const LIVE: &str = "Live capture";
    /// The shared packet rings other processes attach to.
    pub const RING: &str = "Shared ring";
    /// The packet store: segments, indexes, retention.
    pub const PACKET_STORE: &str = "Packet store";
    /// The flow database: directory, interface, codec, retention.
    pub const FLOW_DB: &str = "Flow database";
    /// A time range.
    pub const TIME: &str = "Time range";
    /// A detector's or analyser's settings.
    pub const DETECTOR: &str = "Detector";
    /// How a query runs.
    pub const QUERY: &str = "Query execution";
    /// The HTTP API: address, token, TLS.
    pub const API: &str = "HTTP API";
    /// Fleet queries: the probes asked and how.
    pub const FLEET: &str = "Fleet (many probes)";
    /// When a run stops, its status and its user (in `trawl run`, also with a composition
    /// file).
    pub const RUN: &str = "Run control";
}

/// `--summary`: how the summary on standard error is written.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryFormat {
    Text,
    Json,
    None,
}

/// `--analyze`: an application-layer analyser, its block and its log file
/// (docs/specs/logs.md).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Analyzer {
    /// DNS over UDP (`dns_log`) and TCP (`stream_log`): `dns.jsonl`.
    Dns,
    /// TLS hellos over TCP and QUIC: `stream_log`, `tls.jsonl`.
    Tls,
    /// HTTP/1.x over TCP: `stream_log`, `http.jsonl`.
    Http,
    /// Application labels on flow records (`app`, `app_source`; `flow_meter`'s `app`): no
    /// log file.
    App,
}

impl Analyzer {
    /// Every analyser with a log, in the order their logs are listed.
    pub const ALL: [Analyzer; 3] = [Analyzer::Dns, Analyzer::Tls, Analyzer::Http];

    /// `dns`, `tls`, `http`: the flag's value, the summary's key, `stream_log`'s output gate.
    pub fn name(self) -> &'static str {
        match self {
            Analyzer::Dns => "dns",
            Analyzer::Tls => "tls",
            Analyzer::Http => "http",
            Analyzer::App => "app",
        }
    }

    /// The log file's name in the logs directory.
    pub fn file(self) -> String {
        format!("{}.jsonl", self.name())
    }
}

/// `--analyze` and `--logs` of the commands that meter capture files or interfaces in one
/// pass (`trawl flows`, `trawl ingest`): one struct, flattened into both, so that they cannot
/// spell the analysers two ways.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AnalyzeArgs {
    /// Application-layer analysers: `app` labels every flow record with its application
    /// (`app`, `app_source`, from the first 32 payload bytes of each direction, which the meter
    /// then keeps per flow: 64 bytes a table slot); `dns`, `tls`, `http` write the logs of
    /// --logs (default with --logs: all three).
    #[arg(help_heading = topic::METER, long, value_name = "LIST", value_enum, value_delimiter = ',')]
    pub analyze: Vec<Analyzer>,
    /// Write application-layer logs into this directory in the same pass as the records:
    /// DIR/dns.jsonl, tls.jsonl, http.jsonl (created; files replaced), the lines `trawl logs -o
    /// DIR` writes (docs/specs/logs.md), from the analysers --analyze names.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "DIR")]
    pub logs: Option<std::path::PathBuf>,
}

/// `--progress` and the like: on, off, or when standard error is a terminal.
/// `--features`: what each flow record keeps (docs/specs/flow-record.md).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum FeaturesArg {
    /// Key, times, packets and bytes per direction, TCP flag unions, end reason.
    Minimal,
    /// `minimal` + lengths and gaps (min/max/mean), TCP event counts, retransmissions,
    /// handshake and per-direction round-trip times.
    Standard,
    /// Everything (`standard` + MAC addresses, standard deviations, the first packets,
    /// PSH/URG/ECE/CWR counts, payload bytes).
    #[default]
    Full,
}

impl FeaturesArg {
    /// The meter's level.
    pub fn level(self) -> trawl_flow::FeatureLevel {
        match self {
            FeaturesArg::Minimal => trawl_flow::FeatureLevel::Minimal,
            FeaturesArg::Standard => trawl_flow::FeatureLevel::Standard,
            FeaturesArg::Full => trawl_flow::FeatureLevel::Full,
        }
    }
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Auto,
    Always,
    Never,
}

/// Parses `4096`, `64KiB`, `1MiB`, `4M`, `1GiB` into bytes (binary units; see
/// [`trawl_time::parse_size`]).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let n = trawl_time::parse_size(s)?;
    usize::try_from(n).map_err(|_| format!("size '{s}' out of range"))
}

/// A clap value parser for a duration flag with an allowed range.
pub fn duration_in(limit: trawl_time::Limit) -> impl Fn(&str) -> Result<u64, String> + Clone {
    move |s| {
        limit
            .check(parse_duration_ns(s)?)
            .map_err(|e| e.spelled(&e.flag()))
    }
}

/// A clap value parser for a count flag with an allowed range.
pub fn count_in(limit: trawl_time::Limit) -> impl Fn(&str) -> Result<usize, String> + Clone {
    move |s| {
        let n: u64 = s
            .trim()
            .parse()
            .map_err(|_| format!("'{s}' is not a whole number"))?;
        let n = limit.check(n).map_err(|e| e.spelled(&e.flag()))?;
        usize::try_from(n).map_err(|_| format!("'{s}' is too large"))
    }
}

/// A setting out of range, said as its command-line flag (`--tcp-linger must be ...`).
pub fn flag_error(e: trawl_time::OutOfRange) -> anyhow::Error {
    anyhow::anyhow!(e.spelled(&e.flag()))
}

/// Checks the flow meter's settings (the same rule as `trawl run`'s configuration and the
/// `flow_meter` block), naming the flag of the one out of range.
pub fn check_flow_flags(flow: &FlowConfig) -> Result<()> {
    flow.check().map_err(flag_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("4MiB"), Ok(4 << 20));
        assert_eq!(parse_size("1g"), Ok(1 << 30));
        assert_eq!(parse_size("2TiB"), Ok(2 << 40));
        assert_eq!(parse_size("3t"), Ok(3 << 40));
        assert!(parse_size("4 parsecs").is_err());
    }
}

/// `--anonymize KEYFILE` (`--key` for `trawl anonymize`) and `--keep PREFIX`: Crypto-PAn
/// for every address an output carries. One struct, flattened into every command that
/// writes addresses.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct AnonymizeKey {
    /// Anonymize every IP address written (prefix-preserving Crypto-PAn, the same mapping
    /// for every output and trace with the same key): the key file holds 32 random bytes, raw
    /// or as 64 hex digits (`head -c 32 /dev/urandom > KEY`). See docs/specs/anonymization.md.
    #[arg(help_heading = topic::OUTPUT, long = "anonymize", value_name = "KEYFILE")]
    pub key: Option<std::path::PathBuf>,
    /// With --anonymize: leave addresses inside this prefix unchanged (e.g. `10.0.0.0/8`;
    /// repeat for several). Weaker: it shows the kept network as it is, and an anonymized
    /// outside address may equal a kept one.
    #[arg(help_heading = topic::OUTPUT, long = "keep", value_name = "PREFIX", requires = "key")]
    pub keep: Vec<trawl_anon::Prefix>,
}

impl AnonymizeKey {
    /// Sets the `anonymize` and `keep` settings of a block that emits flow records
    /// (`flow_meter`, `ipfix_source`; `trawl_blocks::anon`).
    pub fn set_on<'a>(
        &self,
        b: trawl_compose::BlockBuilder<'a>,
    ) -> trawl_compose::BlockBuilder<'a> {
        b.set_some(
            "anonymize",
            self.key.as_ref().map(|k| k.to_string_lossy().into_owned()),
        )
        .set_some("keep", keep_setting(&self.keep))
    }

    /// The anonymizer, when a key was given (the key file read now, so errors come first).
    pub fn anonymizer(&self) -> Result<Option<trawl_anon::Anonymizer>> {
        self.key
            .as_deref()
            .map(|k| anonymizer(k, &self.keep))
            .transpose()
    }
}

/// The `keep` setting of the blocks that anonymize: the prefixes as text, none when empty.
pub fn keep_setting(keep: &[trawl_anon::Prefix]) -> Option<toml::Value> {
    let keep: Vec<toml::Value> = keep
        .iter()
        .map(|p| toml::Value::from(format!("{}/{}", p.addr, p.len)))
        .collect();
    (!keep.is_empty()).then_some(toml::Value::Array(keep))
}

/// Crypto-PAn with the key in `key_file`, keeping `keep` as they are.
pub fn anonymizer(
    key_file: &std::path::Path,
    keep: &[trawl_anon::Prefix],
) -> Result<trawl_anon::Anonymizer> {
    let key = trawl_anon::Key::from_file(key_file)?;
    Ok(trawl_anon::Anonymizer::new(
        trawl_anon::CryptoPan::new(&key),
        keep.to_vec(),
    ))
}
