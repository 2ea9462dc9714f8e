//! `trawl run`'s flags, and its configuration files of the old format
//! (`testdata/trawl-run-old-format.toml`, once `trawl.example.toml`), read into a [`RunPlan`]
//! that `plan::live` turns into a composition: `trawl run -i` runs it, `trawl convert-config`
//! prints it. Unknown keys are errors, so a typo is caught instead of silently ignored.
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Deserialize;
use trawl_flow::decode::{DecodeConfig, TunnelMode};
use trawl_flow::FlowConfig;

use crate::flag::{duration_in, parse_duration_ns, parse_size, topic, OutputFormat, SummaryFormat};
use crate::flows::{FanoutArg, LiveArgs, LiveInput, TimestampArg};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Composition file to run (docs/specs/composition.md; `-` reads standard input). A
    /// `trawl run` configuration of the old format (`[capture]`, `[flows]`, ...) is refused:
    /// `trawl convert-config OLD > NEW.toml` converts it.
    #[arg(help_heading = topic::INPUT, short = 'c', long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override a setting of a block of the composition (`-c`, or the one the flags build):
    /// `--set BLOCK.KEY=VALUE`, e.g. `--set store.keep_days=30`. Repeatable.
    #[arg(help_heading = topic::RUN, long = "set", value_name = "BLOCK.KEY=VALUE")]
    pub set: Vec<String>,
    /// Print the composition the flags build (TOML, valid for `trawl check -c -`) and exit.
    #[arg(help_heading = topic::OUTPUT, long = "print-composition")]
    pub print_composition: bool,
    /// Stop after this many packets in total (over every worker).
    #[arg(help_heading = topic::RUN, long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Capture on this interface (repeat for several); adds to the file's list.
    #[arg(help_heading = topic::INPUT, short = 'i', long = "interface", value_name = "IFACE")]
    pub interface: Vec<String>,
    /// Capture workers per interface (1 to 64).
    #[arg(help_heading = topic::LIVE, long, value_name = "N")]
    pub workers: Option<usize>,
    /// Pin workers to these CPUs, in order.
    #[arg(help_heading = topic::LIVE, long, value_name = "LIST", value_delimiter = ',')]
    pub cpus: Vec<usize>,
    /// Kernel filter (tcpdump syntax).
    #[arg(help_heading = topic::FILTER, short = 'f', long = "filter", value_name = "BPF")]
    pub filter: Option<String>,
    /// Switch to this user once the capture sockets and rings are open.
    #[arg(help_heading = topic::RUN, long, value_name = "USER")]
    pub user: Option<String>,
    /// Drop switching duplicates seen within this window (HPCAP's duplicate removal), e.g.
    /// `200ms`; `0` turns it off.
    #[arg(help_heading = topic::LIVE, long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub dedup: Option<u64>,
    /// Name of the shared packet rings other processes attach to (`trawl listen --ring`):
    /// one per worker, `NAME-IFACE-WORKER`. Default `trawl`.
    #[arg(help_heading = topic::RING, long, value_name = "NAME")]
    pub ring: Option<String>,
    /// Size of each shared ring's data area (power of two).
    #[arg(help_heading = topic::RING, long = "ring-size", value_name = "SIZE", value_parser = parse_size)]
    pub ring_size: Option<usize>,
    /// Do not publish shared rings.
    #[arg(help_heading = topic::RING, long = "no-ring")]
    pub no_ring: bool,
    /// Write flow records (JSON lines) to this file: appended to (a restarted monitor keeps
    /// its records), reopened at its path on SIGHUP (logrotate).
    #[arg(help_heading = topic::OUTPUT, long, value_name = "PATH")]
    pub flows: Option<PathBuf>,
    /// What each flow record keeps (overrides `flows.features`; default full).
    #[arg(help_heading = topic::METER, long, value_enum)]
    pub features: Option<crate::flag::FeaturesArg>,
    /// Write per-second series rows (JSON lines) to this file (appended to, reopened on
    /// SIGHUP).
    #[arg(help_heading = topic::OUTPUT, long, value_name = "PATH")]
    pub series: Option<PathBuf>,
    /// Stop after this long (default: until SIGINT/SIGTERM).
    #[arg(help_heading = topic::RUN, long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub duration: Option<u64>,
    /// A status line on standard error this often (packets, kernel drops so far, ring listeners). 100ms to
    /// 1d.
    #[arg(help_heading = topic::RUN, long = "stats-interval", value_name = "DURATION", value_parser = duration_in(STATS_INTERVAL))]
    pub stats_interval: Option<u64>,
    /// Store every captured packet in this packet store directory (one lossless ring listener
    /// and writer per worker).
    #[arg(help_heading = topic::PACKET_STORE, long, value_name = "DIR")]
    pub dump: Option<PathBuf>,
    /// Store flow records in this flow database (Parquet blocks per interface and 5-minute
    /// interval, `trawl query -d DIR`); records are then cut at 5-minute boundaries.
    #[arg(help_heading = topic::FLOW_DB, long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Flow database retention: delete days older than this many days (checked every minute).
    #[arg(help_heading = topic::FLOW_DB, long = "db-keep-days", value_name = "DAYS")]
    pub db_keep_days: Option<u32>,
    /// Flow database retention: delete the oldest blocks beyond this size (e.g. `50GiB`).
    #[arg(help_heading = topic::FLOW_DB, long = "db-max-size", value_name = "SIZE", value_parser = parse_size)]
    pub db_max_size: Option<usize>,
    /// With --db: do not watch the per-second series for changes (`series_change`, whose
    /// alarms go into the database, `trawl alarms`). The series themselves are always stored.
    #[arg(help_heading = topic::FLOW_DB, long = "no-series-change")]
    pub no_series_change: bool,
    /// With --db: do not watch for SYN floods (`synflood` per interface, whose alarms name
    /// the victim and go into the database, `trawl alarms`; never with --anonymize).
    #[arg(help_heading = topic::FLOW_DB, long = "no-synflood")]
    pub no_synflood: bool,
    /// With --db: do not store each minute's heaviest flows and hosts (`heavy_hitters` per
    /// interface; its reports, naming the top sources, go into the database as alarms; never
    /// with --anonymize).
    #[arg(help_heading = topic::FLOW_DB, long = "no-heavy-hitters")]
    pub no_heavy_hitters: bool,
    /// VoIP monitoring into DIR: SIP calls and their RTP streams (as `trawl voip`), a record
    /// per call and per stream as each call ends, in DIR/calls-YYYY-MM-DD.jsonl and
    /// DIR/rtp-YYYY-MM-DD.jsonl (one file per UTC day of the record's end); calls still in
    /// progress when the monitor stops end as `shutdown`.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "DIR")]
    pub voip: Option<PathBuf>,
    #[command(flatten)]
    pub store: crate::dump::StoreSettings,
    /// Write application-layer logs into this directory, one file per analyser and UTC hour
    /// of the lines' time: DIR/dns-YYYY-MM-DDTHH.jsonl, tls-..., http-... (appended to, each
    /// closed and fsynced when its hour is over; docs/specs/logs.md), from the analysers
    /// `--analyze` names.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "DIR")]
    pub logs: Option<PathBuf>,
    /// With --logs: delete the files of hours that ended longer ago than this (e.g. `7d`,
    /// `36h`; at least 1h; checked every minute). Default: keep everything.
    #[arg(help_heading = topic::OUTPUT, long = "logs-retention", value_name = "DURATION", value_parser = logs_retention, requires = "logs")]
    pub logs_retention: Option<u64>,
    /// The analysers to run: `dns`, `tls`, `http` write the logs of --logs (default with
    /// --logs: all three); `app` labels the flow records of --flows, --db and --export with
    /// their application (`app`, `app_source`; CSV gets the two columns).
    #[arg(help_heading = topic::OUTPUT, long, value_name = "LIST", value_enum, value_delimiter = ',')]
    pub analyze: Vec<crate::flag::Analyzer>,
    /// Summary on standard error at the end.
    #[arg(help_heading = topic::RUN, long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    #[command(flatten)]
    pub export: crate::export::ExportArgs,
    #[command(flatten)]
    pub anonymize: crate::flag::AnonymizeKey,
    #[command(flatten)]
    pub geo: crate::enrich::GeoArgs,
    #[command(flatten)]
    pub api: crate::serve::ApiArgs,
}

/// `trawl run`'s flags alone, for reading a line of them without the whole command line.
#[derive(clap::Parser)]
#[command(name = "trawl run")]
struct RunLine {
    #[command(flatten)]
    run: RunArgs,
}

impl RunArgs {
    /// Parses the flags of `trawl run` (without `trawl run` itself).
    pub fn parse_line<I, T>(flags: I) -> Result<RunArgs, clap::Error>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        use clap::Parser;
        let line = std::iter::once(std::ffi::OsString::from("trawl run"))
            .chain(flags.into_iter().map(Into::into));
        RunLine::try_parse_from(line).map(|l| l.run)
    }

    /// With a composition file, everything but the run's own controls (duration, status
    /// lines, summary, user) belongs in the composition: say so rather than ignore a flag.
    pub fn refuse_with_composition(&self) -> anyhow::Result<()> {
        let set: Vec<&str> = [
            (!self.interface.is_empty(), "-i/--interface"),
            (self.workers.is_some(), "--workers"),
            (!self.cpus.is_empty(), "--cpus"),
            (self.filter.is_some(), "-f/--filter"),
            (self.dedup.is_some(), "--dedup"),
            (
                self.ring.is_some() || self.ring_size.is_some() || self.no_ring,
                "--ring",
            ),
            (self.flows.is_some(), "--flows"),
            (self.anonymize.key.is_some(), "--anonymize"),
            (self.print_composition, "--print-composition"),
            (self.series.is_some(), "--series"),
            (self.dump.is_some(), "--dump"),
            (
                self.db.is_some()
                    || self.db_keep_days.is_some()
                    || self.db_max_size.is_some()
                    || self.no_series_change
                    || self.no_synflood
                    || self.no_heavy_hitters,
                "--db",
            ),
            (
                !self.export.export.is_empty()
                    || self.export.flows_feed.is_some()
                    || self.export.series_feed.is_some(),
                "--export/--flows-feed/--series-feed",
            ),
            (self.api.any(), "--api (the http_api block)"),
            (self.logs.is_some(), "--logs"),
            (self.logs_retention.is_some(), "--logs-retention"),
            (!self.analyze.is_empty(), "--analyze"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        if !set.is_empty() {
            anyhow::bail!(
                "{} cannot be combined with a composition file: set it in the composition's \
                 blocks or with --set BLOCK.KEY=VALUE (only --duration, --count, \
                 --stats-interval, --summary and --user apply)",
                set.join(", ")
            );
        }
        Ok(())
    }
}

/// `--stats-interval`: more often than this would be a stream, not a status line.
const STATS_INTERVAL: trawl_time::Limit = trawl_time::Limit::new(
    "stats_interval",
    trawl_time::Unit::Nanos,
    100_000_000,
    86_400 * 1_000_000_000,
);

/// A duration or size as TOML gives it: a string with a unit (`"30s"`, `"4MiB"`) or a bare
/// number (seconds, bytes).
#[derive(Deserialize, Debug, Clone)]
#[serde(untagged)]
enum Quantity {
    Number(u64),
    Text(String),
}

impl Quantity {
    fn duration_ns(&self, key: &str) -> Result<u64> {
        match self {
            Quantity::Number(n) => Ok(n.saturating_mul(1_000_000_000)),
            Quantity::Text(s) => parse_duration_ns(s).map_err(|e| anyhow::anyhow!("{key}: {e}")),
        }
    }

    fn bytes(&self, key: &str) -> Result<usize> {
        match self {
            Quantity::Number(n) => Ok(*n as usize),
            Quantity::Text(s) => parse_size(s).map_err(|e| anyhow::anyhow!("{key}: {e}")),
        }
    }
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    capture: Capture,
    #[serde(default)]
    ring: Ring,
    #[serde(default)]
    flows: Flows,
    #[serde(default)]
    series: Series,
    #[serde(default)]
    dump: crate::dump::StoreSettings,
    #[serde(default)]
    store: StoreTable,
    #[serde(default)]
    export: Vec<ExportTable>,
    #[serde(default)]
    feeds: Feeds,
    #[serde(default)]
    ipfix: Ipfix,
}

/// One `[[export]]` table: a destination as `--export` takes it.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct ExportTable {
    to: String,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct Feeds {
    flows: Option<String>,
    series: Option<String>,
    ttl: Option<u32>,
    source: Option<std::net::Ipv4Addr>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct Ipfix {
    pen: Option<u32>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct Capture {
    #[serde(default)]
    interfaces: Vec<String>,
    snaplen: Option<u64>,
    block_size: Option<Quantity>,
    blocks: Option<usize>,
    workers: Option<usize>,
    #[serde(default)]
    cpus: Vec<usize>,
    fanout: Option<String>,
    promiscuous: Option<bool>,
    filter: Option<String>,
    user: Option<String>,
    timestamps: Option<String>,
    dedup: Option<Quantity>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct Ring {
    enabled: Option<bool>,
    name: Option<String>,
    size: Option<Quantity>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct Flows {
    output: Option<PathBuf>,
    format: Option<String>,
    idle: Option<Quantity>,
    active: Option<Quantity>,
    tcp_linger: Option<Quantity>,
    capacity: Option<usize>,
    tunnel: Option<String>,
    features: Option<String>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct Series {
    output: Option<PathBuf>,
    format: Option<String>,
}

#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct StoreTable {
    db: Option<PathBuf>,
    codec: Option<String>,
    keep_days: Option<u32>,
    max_size: Option<Quantity>,
}

/// Everything `trawl run` needs, checked.
#[derive(Debug)]
pub struct RunPlan {
    pub live: LiveInput,
    pub filter: Option<String>,
    pub flow: FlowConfig,
    /// Duplicate-removal window, 0 = off.
    pub dedup_ns: u64,
    /// Shared ring name prefix and size, None = no rings.
    pub ring: Option<(String, usize)>,
    pub flows: Option<(PathBuf, OutputFormat)>,
    pub series: Option<(PathBuf, OutputFormat)>,
    pub stats_interval_ns: Option<u64>,
    /// Flow database, None = flow records are not stored.
    pub store: Option<StoreOutput>,
    /// Exporters and feeds: the file's, plus the command line's `--export`; the command
    /// line's feeds and PEN win.
    pub export: crate::export::ExportPlan,
    /// The packet store's settings as given (checked into `dump`), for the composition.
    pub dump_settings: Option<crate::dump::StoreSettings>,
    /// `--anonymize`/`--keep`, set on every `flow_meter`.
    pub anonymize: crate::flag::AnonymizeKey,
    /// `--geoip-asn`, `--geoip-country`, set on every `flow_meter`: records in the database,
    /// the files and the exports carry AS numbers and countries.
    pub geo: crate::enrich::GeoArgs,
    /// The HTTP API (`--api`): its address, token and TLS; the plan adds what it serves.
    pub api: Option<trawl_api::ApiConfig>,
    /// Application-layer logs (`--logs`, `--analyze`).
    pub logs: Option<crate::plan::logs::LogsOut>,
    /// `--analyze app`: the meters label records with their application, CSV writers add the
    /// columns.
    pub app: bool,
    /// VoIP records' directory (`--voip`), None = no VoIP monitoring.
    pub voip: Option<PathBuf>,
}

/// `--logs-retention`: a duration of at least an hour (whole hours' files are deleted).
fn logs_retention(s: &str) -> Result<u64, String> {
    let ns = trawl_time::parse_duration_ns(s)?;
    if ns < trawl_blocks::hourly_out::HOUR_NS {
        return Err(format!(
            "{s} is less than an hour: the logs are kept by whole hours"
        ));
    }
    Ok(ns)
}

fn format_of(s: Option<&str>, key: &str) -> Result<OutputFormat> {
    match s.unwrap_or("json") {
        "json" => Ok(OutputFormat::Json),
        "csv" => Ok(OutputFormat::Csv),
        other => bail!("{key}: unknown format '{other}' (json or csv)"),
    }
}

/// The capture values the file gives, checked by the capture's own limits (the same rule as
/// the flags and the `afpacket_source` block) and said with the file's keys; values from flags
/// are checked, under their flags' names, by `LiveInput::from_low`.
fn check_capture_file(c: &Capture, low: &LiveArgs) -> Result<()> {
    use trawl_capture::live::limits;
    let said = |key: &'static str| move |e: trawl_time::OutOfRange| anyhow::anyhow!(e.spelled(key));
    if let Some(v) = c.snaplen {
        limits::SNAPLEN.check(v).map_err(said("capture.snaplen"))?;
    }
    if c.block_size.is_some() {
        limits::BLOCK_SIZE
            .check_usize(low.block_size)
            .map_err(said("capture.block_size"))?;
    }
    if let Some(v) = c.blocks {
        limits::BLOCKS
            .check_usize(v)
            .map_err(said("capture.blocks"))?;
    }
    if let Some(v) = c.workers {
        limits::WORKERS
            .check_usize(v)
            .map_err(said("capture.workers"))?;
    }
    Ok(())
}

fn read_file(path: &Path) -> Result<File> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read configuration {}", path.display()))?;
    toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))
}

/// Where `trawl run` stores flow records (`--db`, `[store]`).
#[derive(Clone, Debug)]
pub struct StoreOutput {
    pub db: std::path::PathBuf,
    pub config: trawl_store::StoreConfig,
    /// Applied every minute while the run goes, and once at its end.
    pub retention: trawl_store::Retention,
    /// Watch each interface's series for changes and store the alarms (`series_change`).
    pub change: bool,
    /// Watch each interface's packets for SYN floods and store the alarms (`synflood`).
    pub synflood: bool,
    /// Store each interface's heavy hitters every minute as alarms (`heavy_hitters`).
    pub heavy_hitters: bool,
}

/// The packet store's settings, checked.
fn dump_plan(s: &crate::dump::StoreSettings) -> Result<crate::dump::StorePlan> {
    let dir = s.dir.as_ref().expect("a store has a directory");
    crate::dump::StorePlan::new(dir, s).context("dump")
}

impl RunPlan {
    pub fn new(a: &RunArgs) -> Result<RunPlan> {
        let file = match &a.config {
            Some(p) => read_file(p)?,
            None => File::default(),
        };
        let c = &file.capture;
        let mut interfaces = c.interfaces.clone();
        interfaces.extend(a.interface.iter().cloned());
        if interfaces.is_empty() {
            bail!("no interface to capture on: give -i IFACE or [capture] interfaces in the configuration");
        }
        let fanout = match c.fanout.as_deref().unwrap_or("symmetric") {
            "symmetric" => FanoutArg::Symmetric,
            "kernel" => FanoutArg::Kernel,
            other => bail!("capture.fanout: unknown mode '{other}' (symmetric or kernel)"),
        };
        let timestamps = match c.timestamps.as_deref().unwrap_or("hardware") {
            "hardware" => TimestampArg::Hardware,
            "software" => TimestampArg::Software,
            other => bail!("capture.timestamps: unknown source '{other}' (hardware or software)"),
        };
        let low = LiveArgs {
            interface: interfaces,
            duration: a.duration,
            count: a.count,
            snaplen: c.snaplen.unwrap_or(u64::from(trawl_capture::MAX_SNAPLEN)),
            block_size: match &c.block_size {
                Some(q) => q.bytes("capture.block_size")?,
                None => 1 << 20,
            },
            blocks: c.blocks.unwrap_or(64),
            no_promiscuous: !c.promiscuous.unwrap_or(true),
            workers: a.workers.or(c.workers).unwrap_or(1),
            cpus: if a.cpus.is_empty() {
                c.cpus.clone()
            } else {
                a.cpus.clone()
            },
            fanout,
            user: a.user.clone().or_else(|| c.user.clone()),
            timestamps,
        };
        check_capture_file(c, &low)?;
        let live = LiveInput::from_low(&low)?;
        let dedup_ns = match (a.dedup, &c.dedup) {
            (Some(d), _) => d,
            (None, Some(q)) => q.duration_ns("capture.dedup")?,
            (None, None) => 0,
        };
        let ring_enabled = !a.no_ring && file.ring.enabled.unwrap_or(true);
        let ring = if ring_enabled {
            let size = match (a.ring_size, &file.ring.size) {
                (Some(s), _) => s,
                (None, Some(q)) => q.bytes("ring.size")?,
                (None, None) => 64 << 20,
            };
            let name = a
                .ring
                .clone()
                .or_else(|| file.ring.name.clone())
                .unwrap_or_else(|| "trawl".into());
            if name.is_empty() || name.contains('/') {
                bail!("ring name '{name}' must be non-empty and contain no '/'");
            }
            Some((name, size))
        } else {
            None
        };
        let f = &file.flows;
        let duration = |q: &Option<Quantity>, key: &str, default: u64| -> Result<u64> {
            q.as_ref().map_or(Ok(default), |q| q.duration_ns(key))
        };
        let tunnel = match f.tunnel.as_deref().unwrap_or("outer") {
            "outer" => TunnelMode::Outer,
            "inner" => TunnelMode::Inner,
            other => bail!("flows.tunnel: unknown mode '{other}' (outer or inner)"),
        };
        let features = match (a.features, f.features.as_deref()) {
            (Some(arg), _) => arg.level(),
            (None, None) => trawl_flow::FeatureLevel::Full,
            (None, Some(name)) => trawl_flow::FeatureLevel::from_name(name).ok_or_else(|| {
                anyhow::anyhow!(
                    "flows.features: unknown level '{name}' (minimal, standard or full)"
                )
            })?,
        };
        let defaults = FlowConfig::default();
        let flow = FlowConfig {
            features,
            idle_timeout_ns: duration(&f.idle, "flows.idle", defaults.idle_timeout_ns)?,
            active_timeout_ns: duration(&f.active, "flows.active", defaults.active_timeout_ns)?,
            tcp_linger_ns: duration(&f.tcp_linger, "flows.tcp_linger", defaults.tcp_linger_ns)?,
            capacity: f.capacity.unwrap_or(defaults.capacity),
            decode: DecodeConfig { tunnel },
            ..defaults
        };
        // The same rule as the flags and the `flow_meter` block, said with the file's key.
        flow.check()
            .map_err(|e| anyhow::anyhow!(e.spelled(&format!("flows.{}", e.name))))?;
        let flows = match (&a.flows, &f.output) {
            (Some(p), _) | (None, Some(p)) => {
                Some((p.clone(), format_of(f.format.as_deref(), "flows.format")?))
            }
            (None, None) => None,
        };
        let series = match (&a.series, &file.series.output) {
            (Some(p), _) | (None, Some(p)) => Some((
                p.clone(),
                format_of(file.series.format.as_deref(), "series.format")?,
            )),
            (None, None) => None,
        };
        let mut export_args = a.export.clone();
        let mut listed: Vec<String> = file.export.iter().map(|e| e.to.clone()).collect();
        listed.append(&mut export_args.export);
        export_args.export = listed;
        export_args.flows_feed = export_args.flows_feed.or(file.feeds.flows.clone());
        export_args.series_feed = export_args.series_feed.or(file.feeds.series.clone());
        export_args.feed_source = export_args.feed_source.or(file.feeds.source);
        if let Some(ttl) = file.feeds.ttl {
            // The option's default is 1; the file's value applies unless the option differs.
            if export_args.feed_ttl == 1 {
                export_args.feed_ttl = ttl;
            }
        }
        export_args.pen = export_args.pen.or(file.ipfix.pen);
        let export = crate::export::ExportPlan::from_args(&export_args)
            .context("export settings ([[export]], [feeds], --export)")?;
        let dump_settings = a.dump.as_ref().or(file.dump.dir.as_ref()).map(|dir| {
            let mut s = a.store.clone().or(&file.dump);
            s.dir = Some(dir.clone());
            s
        });
        if let Some(s) = &dump_settings {
            // Checked here, with the file's and the flags' names, before any block is built.
            dump_plan(s)?;
        }
        if a.anonymize.key.is_some() && (dump_settings.is_some() || ring.is_some()) {
            // Packets are kept as captured; `trawl anonymize` rewrites extracted ones.
            tracing::warn!(
                "--anonymize applies to flow records only: the packet store and the shared \
                 rings hold packets as captured (anonymize extracted packets with trawl anonymize)"
            );
        }
        let app = crate::plan::logs::check(
            &a.analyze,
            a.logs.is_some(),
            flows.is_some()
                || a.db.is_some()
                || file.store.db.is_some()
                || !export.destinations.is_empty(),
        )?;
        Ok(RunPlan {
            app,
            logs: a.logs.as_ref().map(|dir| crate::plan::logs::LogsOut {
                hourly: true,
                retention_ns: a.logs_retention,
                ..crate::plan::logs::LogsOut::new(dir.clone(), &a.analyze)
            }),
            anonymize: a.anonymize.clone(),
            geo: a.geo.clone(),
            api: a.api.config(None)?,
            voip: a.voip.clone(),
            export,
            dump_settings,
            live,
            filter: a
                .filter
                .clone()
                .or_else(|| c.filter.clone())
                .filter(|f| !f.trim().is_empty()),
            flow,
            dedup_ns,
            ring,
            flows,
            series,
            stats_interval_ns: a.stats_interval,
            store: match a.db.as_ref().or(file.store.db.as_ref()) {
                Some(db) => {
                    let mut config = trawl_store::StoreConfig::default();
                    if let Some(c) = &file.store.codec {
                        config.codec = trawl_store::Codec::parse(c).ok_or_else(|| {
                            anyhow::anyhow!(
                                "store.codec: unknown codec '{c}' (lz4, zstd, zstd:N, none)"
                            )
                        })?;
                    }
                    let max_bytes = match (a.db_max_size, &file.store.max_size) {
                        (Some(b), _) => Some(b as u64),
                        (None, Some(q)) => Some(q.bytes("store.max_size")? as u64),
                        (None, None) => None,
                    };
                    Some(StoreOutput {
                        db: db.clone(),
                        config,
                        retention: trawl_store::Retention {
                            max_age_days: a.db_keep_days.or(file.store.keep_days),
                            max_bytes,
                        },
                        change: !a.no_series_change,
                        synflood: !a.no_synflood,
                        heavy_hitters: !a.no_heavy_hitters,
                    })
                }
                None => None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(toml_text: &str, argv: &[&str]) -> Result<RunPlan> {
        // A file of its own per call, straight in the temporary directory: tests run in
        // parallel, and a shared subdirectory removed by the last one out could vanish between
        // another test's creating it and writing its file.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("trawl-config-{}-{n}.toml", std::process::id()));
        std::fs::write(&path, toml_text).unwrap();
        let mut full = vec!["-c", path.to_str().unwrap()];
        full.extend_from_slice(argv);
        let a = RunArgs::parse_line(full).unwrap();
        let plan = RunPlan::new(&a);
        let _ = std::fs::remove_file(&path);
        plan
    }

    #[test]
    fn the_example_configuration_parses() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/trawl-run-old-format.toml"
        ))
        .expect("testdata/trawl-run-old-format.toml");
        let p = plan(&text, &[]).expect("example is valid");
        assert_eq!(p.live.interfaces, vec!["eth0".to_string()]);
        assert!(p.ring.is_some());
        assert!(
            p.dump_settings.is_none(),
            "no store unless a directory is named"
        );
        assert!(
            p.store.is_none(),
            "no flow database unless a directory is named"
        );
        let p = plan(&text, &["--dump", "/tmp/x", "--cutoff", "2MiB"]).unwrap();
        let d = dump_plan(&p.dump_settings.expect("store asked for")).unwrap();
        assert_eq!(d.dumper.segment_bytes, 1 << 30);
        assert_eq!(d.dumper.cutoff_bytes, Some(2 << 20));
        assert_eq!(d.dumper.dir, std::path::PathBuf::from("/tmp/x"));
    }

    #[test]
    fn the_store_table() {
        let p = plan(
            "[capture]\ninterfaces = [\"lo\"]\n[store]\ndb = \"/srv/f\"\ncodec = \"zstd\"\n",
            &[],
        )
        .unwrap();
        let st = p.store.expect("flow database asked for");
        assert_eq!(st.db, std::path::PathBuf::from("/srv/f"));
        assert_eq!(st.retention, trawl_store::Retention::default());
        assert_eq!(st.config.codec, trawl_store::Codec::parse("zstd").unwrap());
        let p = plan(
            "[capture]\ninterfaces = [\"lo\"]\n[store]\nkeep_days = 30\nmax_size = \"2GiB\"\n",
            &["--db", "/srv/g", "--db-keep-days", "7"],
        )
        .unwrap();
        let st = p.store.unwrap();
        assert_eq!(st.db, std::path::PathBuf::from("/srv/g"));
        assert_eq!(st.retention.max_age_days, Some(7), "the command line wins");
        assert_eq!(st.retention.max_bytes, Some(2 << 30));
        let e = plan(
            "[capture]\ninterfaces = [\"lo\"]\n[store]\ndb = \"/x\"\ncodec = \"gzip\"\n",
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("store.codec"), "{e}");
    }

    #[test]
    fn the_dump_table_and_its_mistakes() {
        let p = plan(
            "[capture]\ninterfaces = [\"lo\"]\n[dump]\ndir = \"/srv/p\"\nsegment_time = \"10s\"\nretention_size = \"50%\"\n",
            &["--segment-size", "256MiB"],
        )
        .unwrap();
        let d = dump_plan(&p.dump_settings.unwrap()).unwrap();
        assert_eq!(d.dumper.segment_ns, 10_000_000_000);
        assert_eq!(d.dumper.segment_bytes, 256 << 20);
        assert_eq!(d.budget, Some(trawl_packets::Budget::Percent(50.0)));
        let e = plan(
            "[capture]\ninterfaces = [\"lo\"]\n[dump]\ndir = \"/srv/p\"\nsegmnet_time = 1\n",
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("segmnet_time"), "{e}");
        let e = plan(
            "[capture]\ninterfaces = [\"lo\"]\n[dump]\ndir = \"/srv/p\"\nretention_size = \"120%\"\n",
            &[],
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("dump-max-size"), "{e:#}");
    }

    #[test]
    fn exports_come_from_the_file_and_the_command_line() {
        let p = plan(
            "[capture]\ninterfaces = [\"lo\"]\n[[export]]\nto = \"ipfix+udp://127.0.0.1:4739\"\n[[export]]\nto = \"json:-\"\n[feeds]\nflows = \"239.255.77.1:5500\"\nseries = \"239.255.77.2:5501\"\nttl = 4\n[ipfix]\npen = 99\n",
            &["--export", "netflow5+udp://127.0.0.1:2055"],
        )
        .unwrap();
        let d: Vec<String> = p
            .export
            .destinations
            .iter()
            .map(|d| d.to_string())
            .collect();
        assert_eq!(
            d,
            vec![
                "ipfix+udp://127.0.0.1:4739",
                "json:-",
                "netflow5+udp://127.0.0.1:2055",
                "feed:239.255.77.1:5500"
            ]
        );
        assert_eq!(p.export.pen, 99);
        assert_eq!(p.export.series_feed.unwrap().ttl, 4);
        let e = plan(
            "[capture]\ninterfaces = [\"lo\"]\n[[export]]\nto = \"ipfix+sctp://127.0.0.1:4739\"\n",
            &[],
        )
        .unwrap_err();
        assert!(
            format!("{e:#}").contains("unknown scheme 'ipfix+sctp'"),
            "{e:#}"
        );
    }

    #[test]
    fn command_line_wins_over_the_file() {
        let p = plan(
            "[capture]\ninterfaces = [\"lo\"]\nworkers = 2\ndedup = \"200ms\"\n[flows]\nidle = 10\n",
            &["--workers", "3", "-i", "lo2"],
        )
        .unwrap();
        assert_eq!(p.live.workers, 3);
        assert_eq!(p.live.interfaces, vec!["lo".to_string(), "lo2".to_string()]);
        assert_eq!(p.dedup_ns, 200_000_000);
        assert_eq!(p.flow.idle_timeout_ns, 10_000_000_000);
    }

    #[test]
    fn mistakes_are_named() {
        let e = plan("[capture]\ninterfaces = [\"lo\"]\nworkerz = 2\n", &[]).unwrap_err();
        assert!(e.to_string().contains("workerz"), "{e}");
        let e = plan(
            "[capture]\ninterfaces = [\"lo\"]\nfanout = \"random\"\n",
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("capture.fanout"), "{e}");
        let e = plan(
            "[capture]\ninterfaces = [\"lo\"]\n[flows]\nidle = \"3 fortnights\"\n",
            &[],
        )
        .unwrap_err();
        assert!(e.to_string().contains("flows.idle"), "{e}");
        let e = plan("", &[]).unwrap_err();
        assert!(e.to_string().contains("no interface"), "{e}");
    }
}
