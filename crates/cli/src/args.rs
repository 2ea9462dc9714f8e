//! Command-line arguments: `LowArgs` is what clap parses, `HiArgs` what the commands use,
//! with every value checked and converted once.
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use trawl_capture::live::{limits, FanoutMode, LiveConfig, TimestampMode};
use trawl_capture::FileFormat;
use trawl_flow::decode::{DecodeConfig, TunnelMode};
use trawl_flow::FlowConfig;

const EXIT_CODES: &str = "Exit codes:
  0  success (also when the output pipe is closed early)
  1  some input could not be read (the rest was processed and the summary says what failed),
     or an exporter could not send the records of capture files (destination and error named)
  2  usage error: bad option, bad filter expression, unwritable output";

/// trawl: capture once, serve packets, flows and per-second series.
#[derive(Parser, Debug)]
#[command(name = "trawl", version, about, after_help = EXIT_CODES)]
pub struct LowArgs {
    #[command(subcommand)]
    pub command: Command,
    /// More log messages on standard error: -v debug, -vv trace (default: notes, warnings
    /// and errors; without -v/-q, RUST_LOG chooses).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// Errors only on standard error (summaries are still printed; see --summary).
    #[arg(short = 'q', long = "quiet", global = true, conflicts_with = "verbose")]
    pub quiet: bool,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Meter bidirectional flows from capture files and write one record per flow.
    #[command(after_help = EXIT_CODES)]
    Flows(FlowsArgs),
    /// Write per-second rows (packets, bytes, active and new flows) from capture files.
    #[command(after_help = EXIT_CODES)]
    Series(SeriesArgs),
    /// Run the monitor: capture on interfaces into shared packet rings, meter flows and
    /// per-second series, until SIGINT/SIGTERM. A composition file (`-c`), or the default
    /// monitor built from the flags (`--print-composition` prints it).
    #[command(after_help = EXIT_CODES)]
    Run(Box<RunArgs>),
    /// Read packets from a running trawl's shared ring (another process): print them or write
    /// a pcap file.
    #[command(after_help = EXIT_CODES)]
    Listen(ListenArgs),
    /// Store capture files in a packet store (pcap segments with indexes, rotation, retention):
    /// the dumper `trawl run --dump` runs, fed from files.
    #[command(after_help = EXIT_CODES)]
    Dump(crate::dump::DumpArgs),
    /// Extract a time window (and interfaces, and a tcpdump filter) from a packet store as
    /// pcap, reading only what the indexes point to.
    #[command(after_help = EXIT_CODES)]
    Packets(crate::dump::PacketsArgs),
    /// Receive IPFIX and NetFlow v5/v9 from exporters (routers, softflowd, nProbe, another
    /// trawl) and write them as trawl flow records.
    #[command(after_help = EXIT_CODES)]
    Collect(crate::collect::CollectArgs),
    /// Print a live multicast feed of flow records or series rows (or stored series).
    #[command(after_help = EXIT_CODES)]
    Subscribe(crate::subscribe::SubscribeArgs),
    /// Meter capture files into the flow database (Parquet blocks per interface and 5-minute
    /// interval).
    #[command(after_help = EXIT_CODES)]
    Ingest(crate::ingest::IngestArgs),
    /// Query the flow database: group by attributes, filter by a condition and a time range.
    #[command(after_help = crate::query::QUERY_HELP)]
    Query(crate::query::QueryArgs),
    /// Run a detection application (SYN floods) over capture files; events as JSON lines.
    Detect(crate::detect::DetectArgs),
    /// Check a composition file (blocks, connections, pools) or a `trawl run` configuration
    /// without running it; prints where each block runs and how blocks are connected.
    #[command(after_help = EXIT_CODES)]
    Check(crate::compose::CheckArgs),
    /// List the block types compositions can use, with their gates.
    Blocks(crate::compose::BlocksArgs),
    /// Convert a `trawl run` configuration of the old format (`[capture]`, `[flows]`, ...)
    /// into the composition that runs the same monitor, on standard output.
    #[command(after_help = EXIT_CODES)]
    ConvertConfig(crate::daemon::ConvertArgs),
    /// VoIP monitoring: SIP calls and their RTP streams (loss, jitter, MOS) from capture files.
    #[command(after_help = crate::voip::VOIP_HELP)]
    Voip(crate::voip::VoipArgs),
    /// Print a shell completion script (bash, zsh, fish, ...), e.g.
    /// `trawl completions bash > /etc/bash_completion.d/trawl`.
    Completions(crate::generate::CompletionsArgs),
    /// Write man pages: trawl(1) on standard output, or one page per command into DIR.
    Man(crate::generate::ManArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Composition file to run (docs/specs/composition.md; `-` reads standard input). A
    /// `trawl run` configuration of the old format (`[capture]`, `[flows]`, ...) is refused:
    /// `trawl convert-config OLD > NEW.toml` converts it.
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Override a setting of a block of the composition (`-c`, or the one the flags build):
    /// `--set BLOCK.KEY=VALUE`, e.g. `--set store.keep_days=30`. Repeatable.
    #[arg(long = "set", value_name = "BLOCK.KEY=VALUE")]
    pub set: Vec<String>,
    /// Print the composition the flags build (TOML, valid for `trawl check -c -`) and exit.
    #[arg(long = "print-composition")]
    pub print_composition: bool,
    /// Stop after this many packets in total (over every worker).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Capture on this interface (repeat for several); adds to the file's list.
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    pub interface: Vec<String>,
    /// Capture workers per interface (1 to 64).
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Pin workers to these CPUs, in order.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub cpus: Vec<usize>,
    /// Kernel filter (tcpdump syntax).
    #[arg(short = 'f', long = "filter", value_name = "BPF")]
    pub filter: Option<String>,
    /// Switch to this user once the capture sockets and rings are open.
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Drop switching duplicates seen within this window (HPCAP's duplicate removal), e.g.
    /// `200ms`; `0` turns it off.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub dedup: Option<u64>,
    /// Name of the shared packet rings other processes attach to (`trawl listen --ring`):
    /// one per worker, `NAME-IFACE-WORKER`. Default `trawl`.
    #[arg(long, value_name = "NAME")]
    pub ring: Option<String>,
    /// Size of each shared ring's data area (power of two).
    #[arg(long = "ring-size", value_name = "SIZE", value_parser = parse_size)]
    pub ring_size: Option<usize>,
    /// Do not publish shared rings.
    #[arg(long = "no-ring")]
    pub no_ring: bool,
    /// Write flow records (JSON lines) to this file: appended to (a restarted monitor keeps
    /// its records), reopened at its path on SIGHUP (logrotate).
    #[arg(long, value_name = "PATH")]
    pub flows: Option<PathBuf>,
    /// Write per-second series rows (JSON lines) to this file (appended to, reopened on
    /// SIGHUP).
    #[arg(long, value_name = "PATH")]
    pub series: Option<PathBuf>,
    /// Stop after this long (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub duration: Option<u64>,
    /// A status line on standard error this often (packets, kernel drops so far, ring listeners). 100ms to
    /// 1d.
    #[arg(long = "stats-interval", value_name = "DURATION", value_parser = duration_in(STATS_INTERVAL))]
    pub stats_interval: Option<u64>,
    /// Store every captured packet in this packet store directory (one lossless ring listener
    /// and writer per worker).
    #[arg(long, value_name = "DIR")]
    pub dump: Option<PathBuf>,
    /// Store flow records in this flow database (Parquet blocks per interface and 5-minute
    /// interval, `trawl query -d DIR`); records are then cut at 5-minute boundaries.
    #[arg(long, value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Flow database retention: delete days older than this many days (checked every minute).
    #[arg(long = "db-keep-days", value_name = "DAYS")]
    pub db_keep_days: Option<u32>,
    /// Flow database retention: delete the oldest blocks beyond this size (e.g. `50GiB`).
    #[arg(long = "db-max-size", value_name = "SIZE", value_parser = parse_size)]
    pub db_max_size: Option<usize>,
    #[command(flatten)]
    pub store: crate::dump::StoreSettings,
    /// Summary on standard error at the end.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    #[command(flatten)]
    pub export: crate::export::ExportArgs,
}

impl RunArgs {
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
            (self.print_composition, "--print-composition"),
            (self.series.is_some(), "--series"),
            (self.dump.is_some(), "--dump"),
            (
                self.db.is_some() || self.db_keep_days.is_some() || self.db_max_size.is_some(),
                "--db",
            ),
            (
                !self.export.export.is_empty()
                    || self.export.flows_feed.is_some()
                    || self.export.series_feed.is_some(),
                "--export/--flows-feed/--series-feed",
            ),
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

#[derive(Args, Debug)]
pub struct ListenArgs {
    /// The ring's name as `trawl run` printed it (e.g. `trawl-eth0-0`), or a path to the ring
    /// file.
    #[arg(long, value_name = "NAME")]
    pub ring: String,
    /// Hold the producer back instead of missing packets when this listener falls behind.
    /// Use with care: a slow lossless listener makes the capture drop in the kernel.
    #[arg(long)]
    pub lossless: bool,
    /// Write the packets to this pcap file (nanosecond timestamps; `-` for standard output)
    /// instead of printing a line per packet.
    #[arg(short = 'w', long = "write", value_name = "PATH")]
    pub write: Option<PathBuf>,
    /// Stop after this many packets.
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
    /// Stop after this long.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub duration: Option<u64>,
    /// Summary on standard error at the end.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    /// Print packet times in the local zone (`TZ`) with its offset instead of UTC.
    #[arg(long)]
    pub local: bool,
}

#[derive(Args, Debug)]
pub struct InputArgs {
    /// Capture file to read (pcap, pcapng, HPCAP raw; gzip or zstd compressed); `-` is
    /// standard input. Repeat for several files: they are merged by packet time (as mergecap
    /// does), so files of two taps or interfaces meter as one link.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub read: Vec<PathBuf>,
    #[command(flatten)]
    pub live: LiveArgs,
    /// Input format: detected from the magic number by default; `hpcap` for HPCAP raw files,
    /// which have none.
    #[arg(long = "input-format", value_enum, default_value_t = InputFormat::Auto)]
    pub input_format: InputFormat,
    /// Only packets matching this tcpdump filter expression (libpcap syntax).
    #[arg(short = 'f', long = "filter", value_name = "BPF")]
    pub filter: Option<String>,
    /// Key tunnelled traffic (GRE, VXLAN, IP-in-IP) on the outer or the inner IP header.
    #[arg(long, value_enum, default_value_t = Tunnel::Outer)]
    pub tunnel: Tunnel,
    /// Idle timeout: a flow without packets for this long is exported.
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration_ns)]
    pub idle: u64,
    /// Active timeout: a longer flow is exported in parts of this length.
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = parse_duration_ns)]
    pub active: u64,
    /// How long a TCP flow lingers after FIN from both sides or RST.
    #[arg(long = "tcp-linger", value_name = "DURATION", default_value = "2s", value_parser = parse_duration_ns)]
    pub tcp_linger: u64,
    /// Flow table capacity; when full, the flow idle the longest is exported.
    #[arg(long, value_name = "FLOWS", default_value_t = 4 << 20)]
    pub capacity: usize,
    /// Summary on standard error: human text, JSON (one object), or none.
    #[arg(long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    /// Progress line on standard error (default: when it is a terminal).
    #[arg(long, value_enum, default_value_t = When::Auto)]
    pub progress: When,
    /// Print the composition of blocks these flags build (TOML, for `trawl check -c` and
    /// `trawl run -c`) instead of running it.
    #[arg(long = "print-composition")]
    pub print_composition: bool,
}

/// Live capture settings (with `-i`).
#[derive(Args, Debug)]
pub struct LiveArgs {
    /// Capture live from this interface (AF_PACKET; needs root or CAP_NET_RAW). Repeat for
    /// several interfaces.
    #[arg(
        short = 'i',
        long = "interface",
        value_name = "IFACE",
        conflicts_with = "read"
    )]
    pub interface: Vec<String>,
    /// Stop a live capture after this long (default: run until SIGINT/SIGTERM).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_ns, requires = "interface")]
    pub duration: Option<u64>,
    /// Stop a live capture after this many packets (counted after the filter).
    #[arg(long, value_name = "N", requires = "interface")]
    pub count: Option<u64>,
    /// Bytes kept of each captured packet (64 to 262144).
    #[arg(long, value_name = "BYTES", default_value_t = u64::from(trawl_capture::MAX_SNAPLEN))]
    pub snaplen: u64,
    /// Capture ring block size (power of two, e.g. 1MiB, 4MiB).
    #[arg(long = "block-size", value_name = "SIZE", default_value = "1MiB", value_parser = parse_size)]
    pub block_size: usize,
    /// Number of capture ring blocks per worker (ring = block size × blocks).
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub blocks: usize,
    /// Do not put the interface in promiscuous mode.
    #[arg(long = "no-promiscuous")]
    pub no_promiscuous: bool,
    /// Capture workers per interface (1 to 64), each with its own socket in a fanout group and
    /// its own flow table.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub workers: usize,
    /// Pin workers to these CPUs, in order (e.g. `2,3`); default: not pinned.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub cpus: Vec<usize>,
    /// How a fanout group spreads packets over workers: `symmetric` (XOR of the IP addresses,
    /// both directions on one worker) or `kernel` (the kernel's flow hash).
    #[arg(long, value_enum, default_value_t = FanoutArg::Symmetric)]
    pub fanout: FanoutArg,
    /// Switch to this user once the capture sockets are open (as tcpdump -Z).
    #[arg(long, value_name = "USER")]
    pub user: Option<String>,
    /// Timestamp source: NIC hardware timestamps where the NIC has them, else the kernel's.
    #[arg(long, value_enum, default_value_t = TimestampArg::Hardware)]
    pub timestamps: TimestampArg,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanoutArg {
    Symmetric,
    Kernel,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampArg {
    /// Hardware where available, software otherwise.
    Hardware,
    /// Software (kernel) only.
    Software,
}

/// Parses `4096`, `64KiB`, `1MiB`, `4M`, `1GiB` into bytes (binary units; see
/// [`trawl_time::parse_size`]).
pub fn parse_size(s: &str) -> Result<usize, String> {
    let n = trawl_time::parse_size(s)?;
    usize::try_from(n).map_err(|_| format!("size '{s}' out of range"))
}

/// Where and how results are written (both commands).
#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Output format: JSON lines, or CSV with a header line.
    #[arg(long, value_enum, default_value_t = OutputFormat::Json)]
    pub format: OutputFormat,
    /// Output file (`-` for standard output).
    #[arg(short = 'o', long = "output", value_name = "PATH", default_value = "-")]
    pub output: PathBuf,
    /// Times (`first_ns`, `last_ns`, a row's `second`): integers (ns since the epoch;
    /// seconds for rows) or RFC 3339 text in UTC, under the same names.
    #[arg(long = "time-format", value_enum, default_value_t = TimeFormat::Ns)]
    pub time_format: TimeFormat,
}

/// `--time-format`: the writer blocks' enum (one for the command line and compositions).
pub use trawl_blocks::output::TimeFormat;

#[derive(Args, Debug)]
pub struct FlowsArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Leading transport payload bytes kept per direction and written (hex) with each record
    /// (at most 65535, and capacity × 2 × N at most 16GiB).
    #[arg(long = "payload-bytes", value_name = "N", default_value_t = 0)]
    pub payload_bytes: usize,
    #[command(flatten)]
    pub export: crate::export::ExportArgs,
}

#[derive(Args, Debug)]
pub struct SeriesArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub export: crate::export::ExportArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    Auto,
    Pcap,
    Pcapng,
    Hpcap,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tunnel {
    Outer,
    Inner,
}

/// `--format`: the writer blocks' enum (one for the command line and compositions).
pub use trawl_blocks::output::TextFormat as OutputFormat;

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum SummaryFormat {
    Text,
    Json,
    None,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    Auto,
    Always,
    Never,
}

/// Parses `30s`, `500ms`, `2m`, `1h`, `1d`, `250us`, `10ns`, or a plain number of seconds.
pub fn parse_duration_ns(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (examples: 30s, 500ms, 2m, 1h)"))?;
    let scale = match unit {
        "" | "s" => 1e9,
        "ms" => 1e6,
        "us" | "µs" => 1e3,
        "ns" => 1.0,
        "m" => 60e9,
        "h" => 3600e9,
        "d" => 86400e9,
        other => {
            return Err(format!(
                "unknown duration unit '{other}' in '{s}' (use ns, us, ms, s, m, h, d)"
            ))
        }
    };
    let ns = value * scale;
    if !ns.is_finite() || ns < 0.0 || ns > u64::MAX as f64 {
        return Err(format!("duration '{s}' out of range"));
    }
    Ok(ns as u64)
}

/// Every time flag (`--from`, `--to` of `query`, `packets`, `subscribe`): the forms of
/// [`trawl_time::parse_instant`] (RFC 3339, local wall-clock times in `TZ`, epoch s/ms/us/ns,
/// `now`, `-15m`, `15m ago`), relative ones counted back from now.
pub fn parse_time(s: &str) -> Result<u64, String> {
    trawl_time::parse_instant(s, trawl_time::now_ns()).map_err(|e| e.to_string())
}

/// `--stats-interval`: more often than this would be a stream, not a status line.
const STATS_INTERVAL: trawl_time::Limit = trawl_time::Limit::new(
    "stats_interval",
    trawl_time::Unit::Nanos,
    100_000_000,
    86_400 * 1_000_000_000,
);

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

/// Checked settings shared by the commands that read captures.
#[derive(Debug)]
pub struct HiInput {
    pub files: Vec<PathBuf>,
    /// Live capture instead of files.
    pub live: Option<LiveInput>,
    pub forced_format: Option<FileFormat>,
    pub filter: Option<String>,
    pub flow: FlowConfig,
    pub summary: SummaryFormat,
    pub progress: bool,
    /// `--print-composition`: print the plan, do not run it.
    pub print_composition: bool,
}

impl HiInput {
    pub fn from_low(a: &InputArgs, payload_bytes: usize) -> Result<HiInput> {
        use std::io::IsTerminal;
        if a.read.is_empty() && a.live.interface.is_empty() {
            // Usage error (exit 2), in the words a person can act on: clap's own message named
            // only --read, as if a file were the only way in.
            bail!("no input: give -r FILE or -i IFACE");
        }
        let forced_format = match a.input_format {
            InputFormat::Auto => None,
            InputFormat::Pcap => Some(FileFormat::Pcap),
            InputFormat::Pcapng => Some(FileFormat::Pcapng),
            InputFormat::Hpcap => Some(FileFormat::HpcapRaw),
        };
        let tunnel = match a.tunnel {
            Tunnel::Outer => TunnelMode::Outer,
            Tunnel::Inner => TunnelMode::Inner,
        };
        let flow = FlowConfig {
            idle_timeout_ns: a.idle,
            active_timeout_ns: a.active,
            tcp_linger_ns: a.tcp_linger,
            capacity: a.capacity,
            payload_bytes,
            decode: DecodeConfig { tunnel },
            ..FlowConfig::default()
        };
        check_flow_flags(&flow)?;
        let progress = match a.progress {
            When::Always => true,
            When::Never => false,
            When::Auto => std::io::stderr().is_terminal(),
        };
        let filter = a.filter.clone().filter(|f| !f.trim().is_empty());
        if a.read.len() > 1 && a.read.iter().any(|p| p.as_os_str() == "-") {
            bail!(
                "standard input (-r -) cannot be merged with other files (it cannot be read \
                 twice); give it alone"
            );
        }
        let live = if a.live.interface.is_empty() {
            None
        } else {
            Some(LiveInput::from_low(&a.live)?)
        };
        Ok(HiInput {
            files: a.read.clone(),
            live,
            forced_format,
            filter,
            flow,
            summary: a.summary,
            progress,
            print_composition: a.print_composition,
        })
    }
}

/// Checked live capture settings.
#[derive(Debug, Clone)]
pub struct LiveInput {
    pub interfaces: Vec<String>,
    pub duration_ns: Option<u64>,
    pub count: Option<u64>,
    pub workers: usize,
    pub cpus: Vec<usize>,
    pub user: Option<String>,
    pub fanout: FanoutMode,
    /// Settings of each socket, except the interface name, filter and fanout group.
    pub socket: LiveConfig,
}

impl LiveInput {
    pub fn from_low(a: &LiveArgs) -> Result<LiveInput> {
        let workers = limits::WORKERS.check_usize(a.workers).map_err(flag_error)?;
        let allowed = trawl_capture::live::allowed_cpus();
        if let Some(c) = a.cpus.iter().find(|c| !allowed.contains(c)) {
            bail!("--cpus: CPU {c} is not available to this process (available: {allowed:?})");
        }
        let mut socket = LiveConfig::new("");
        socket.snaplen = u32::try_from(limits::SNAPLEN.check(a.snaplen).map_err(flag_error)?)
            .expect("within the limit");
        socket.block_size = a.block_size;
        socket.block_count = a.blocks;
        socket.check().map_err(flag_error)?;
        socket.promiscuous = !a.no_promiscuous;
        socket.timestamps = match a.timestamps {
            TimestampArg::Hardware => TimestampMode::PreferHardware,
            TimestampArg::Software => TimestampMode::Software,
        };
        Ok(LiveInput {
            interfaces: a.interface.clone(),
            duration_ns: a.duration,
            count: a.count,
            workers,
            cpus: a.cpus.clone(),
            user: a.user.clone(),
            fanout: match a.fanout {
                FanoutArg::Symmetric => FanoutMode::Symmetric,
                FanoutArg::Kernel => FanoutMode::KernelHash,
            },
            socket,
        })
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

/// Opens the output: a file, or standard output for `-`.
pub fn open_output(path: &PathBuf) -> Result<Box<dyn std::io::Write>> {
    if path.as_os_str() == "-" {
        Ok(Box::new(std::io::stdout().lock()))
    } else {
        let f = std::fs::File::create(path)
            .with_context(|| format!("cannot create output file {}", path.display()))?;
        Ok(Box::new(f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ns("30s"), Ok(30_000_000_000));
        assert_eq!(parse_duration_ns("30"), Ok(30_000_000_000));
        assert_eq!(parse_duration_ns("1.5m"), Ok(90_000_000_000));
        assert_eq!(parse_duration_ns("250ms"), Ok(250_000_000));
        assert_eq!(parse_duration_ns("1h"), Ok(3_600_000_000_000));
        assert!(parse_duration_ns("5 parsecs").is_err());
        assert!(parse_duration_ns("").is_err());
    }

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

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        LowArgs::command().debug_assert();
    }
}
