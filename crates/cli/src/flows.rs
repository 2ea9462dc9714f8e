//! `trawl flows` and `trawl series`: their flags (input, live capture, meter, output) and the
//! checked settings the commands use ([`HiInput`], [`LiveInput`]), with every value checked
//! and converted once.
use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use trawl_capture::live::{limits, FanoutMode, LiveConfig, TimestampMode};
use trawl_capture::FileFormat;
use trawl_flow::decode::{DecodeConfig, TunnelMode};
use trawl_flow::FlowConfig;

use crate::flag::{
    check_flow_flags, flag_error, parse_duration_ns, parse_size, topic, FeaturesArg, OutputFormat,
    SummaryFormat, TimeFormat, When,
};

#[derive(Args, Debug)]
pub struct InputArgs {
    /// Capture file to read (pcap, pcapng, HPCAP raw; gzip or zstd compressed); `-` is
    /// standard input. Repeat for several files: they are merged by packet time (as mergecap
    /// does), so files of two taps or interfaces meter as one link.
    #[arg(help_heading = topic::INPUT, short = 'r', long = "read", value_name = "FILE")]
    pub read: Vec<PathBuf>,
    /// Input format: detected from the magic number by default; `hpcap` for HPCAP raw files,
    /// which have none.
    #[arg(help_heading = topic::INPUT, long = "input-format", value_enum, default_value_t = InputFormat::Auto)]
    pub input_format: InputFormat,
    /// Only packets matching this tcpdump filter expression (libpcap syntax).
    #[arg(help_heading = topic::FILTER, short = 'f', long = "filter", value_name = "BPF")]
    pub filter: Option<String>,
    /// Key tunnelled traffic (GRE, ERSPAN, VXLAN, GTP-U, Geneve, Teredo, MPLS over UDP, IP-in-IP)
    /// on the outer or the innermost IP header; `inner` adds the outer tunnel's fields to the
    /// records.
    #[arg(help_heading = topic::METER, long, value_enum, default_value_t = Tunnel::Outer)]
    pub tunnel: Tunnel,
    /// Idle timeout: a flow without packets for this long is exported.
    #[arg(help_heading = topic::METER, long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration_ns)]
    pub idle: u64,
    /// Active timeout: a longer flow is exported in parts of this length.
    #[arg(help_heading = topic::METER, long, value_name = "DURATION", default_value = "30m", value_parser = parse_duration_ns)]
    pub active: u64,
    /// How long a TCP flow lingers after FIN from both sides or RST.
    #[arg(help_heading = topic::METER, long = "tcp-linger", value_name = "DURATION", default_value = "2s", value_parser = parse_duration_ns)]
    pub tcp_linger: u64,
    /// Flow table capacity; when full, the flow idle the longest is exported.
    #[arg(help_heading = topic::METER, long, value_name = "FLOWS", default_value_t = 4 << 20)]
    pub capacity: usize,
    /// What each flow record keeps (the fewer, the less work per packet; minimal: one
    /// 64-byte line per flow).
    #[arg(help_heading = topic::METER, long, value_enum, default_value_t = FeaturesArg::Full)]
    pub features: FeaturesArg,
    /// Summary on standard error: human text, JSON (one object), or none.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    /// Progress line on standard error (default: when it is a terminal).
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = When::Auto)]
    pub progress: When,
    /// Print the composition of blocks these flags build (TOML, for `trawl check -c` and
    /// `trawl run -c`) instead of running it.
    #[arg(help_heading = topic::OUTPUT, long = "print-composition")]
    pub print_composition: bool,
    /// Live capture settings (`--help` lists them after the topics every input shares).
    #[command(flatten)]
    pub live: LiveArgs,
}

/// Live capture settings (with `-i`).
#[derive(Args, Debug)]
pub struct LiveArgs {
    /// Capture live from this interface (AF_PACKET; needs root or CAP_NET_RAW). Repeat for
    /// several interfaces.
    #[arg(
        help_heading = topic::INPUT,
        short = 'i',
        long = "interface",
        value_name = "IFACE",
        conflicts_with = "read"
    )]
    pub interface: Vec<String>,
    /// Stop a live capture after this long (default: run until SIGINT/SIGTERM).
    #[arg(help_heading = topic::LIVE, long, value_name = "DURATION", value_parser = parse_duration_ns, requires = "interface")]
    pub duration: Option<u64>,
    /// Stop a live capture after this many packets (counted after the filter).
    #[arg(help_heading = topic::LIVE, long, value_name = "N", requires = "interface")]
    pub count: Option<u64>,
    /// Bytes kept of each captured packet (64 to 262144).
    #[arg(help_heading = topic::LIVE, long, value_name = "BYTES", default_value_t = u64::from(trawl_capture::MAX_SNAPLEN))]
    pub snaplen: u64,
    /// Capture ring block size (power of two, e.g. 1MiB, 4MiB).
    #[arg(help_heading = topic::LIVE, long = "block-size", value_name = "SIZE", default_value = "1MiB", value_parser = parse_size)]
    pub block_size: usize,
    /// Number of capture ring blocks per worker (ring = block size × blocks).
    #[arg(help_heading = topic::LIVE, long, value_name = "N", default_value_t = 64)]
    pub blocks: usize,
    /// Do not put the interface in promiscuous mode.
    #[arg(help_heading = topic::LIVE, long = "no-promiscuous")]
    pub no_promiscuous: bool,
    /// Capture workers per interface (1 to 64), each with its own socket in a fanout group and
    /// its own flow table. With -r (flows, series): meters the files' packets on N threads,
    /// each with its own flow table, spread by a symmetric hash of the addresses (records as
    /// one worker's, in another order).
    #[arg(help_heading = topic::LIVE, long, value_name = "N", default_value_t = 1)]
    pub workers: usize,
    /// Pin workers to these CPUs, in order (e.g. `2,3`); default: not pinned.
    #[arg(help_heading = topic::LIVE, long, value_name = "LIST", value_delimiter = ',')]
    pub cpus: Vec<usize>,
    /// How a fanout group spreads packets over workers: `symmetric` (XOR of the IP addresses,
    /// both directions on one worker) or `kernel` (the kernel's flow hash).
    #[arg(help_heading = topic::LIVE, long, value_enum, default_value_t = FanoutArg::Symmetric)]
    pub fanout: FanoutArg,
    /// Switch to this user once the capture sockets are open (as tcpdump -Z).
    #[arg(help_heading = topic::LIVE, long, value_name = "USER")]
    pub user: Option<String>,
    /// Timestamp source: NIC hardware timestamps where the NIC has them, else the kernel's.
    #[arg(help_heading = topic::LIVE, long, value_enum, default_value_t = TimestampArg::Hardware)]
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

/// Where and how results are written (both commands).
#[derive(Args, Debug)]
pub struct OutputArgs {
    /// Output format: JSON lines, or CSV with a header line.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = OutputFormat::Json)]
    pub format: OutputFormat,
    /// Output file (`-` for standard output).
    #[arg(help_heading = topic::OUTPUT, short = 'o', long = "output", value_name = "PATH", default_value = "-")]
    pub output: PathBuf,
    /// Times (`first_ns`, `last_ns`, a row's `second`): integers (ns since the epoch;
    /// seconds for rows) or RFC 3339 text in UTC, under the same names.
    #[arg(help_heading = topic::OUTPUT, long = "time-format", value_enum, default_value_t = TimeFormat::Ns)]
    pub time_format: TimeFormat,
    #[command(flatten)]
    pub anonymize: crate::flag::AnonymizeKey,
}

#[derive(Args, Debug)]
pub struct FlowsArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    #[command(flatten)]
    pub geo: crate::enrich::GeoArgs,
    /// Leading transport payload bytes kept per direction and written (hex) with each record
    /// (at most 65535, and capacity × 2 × N at most 16GiB).
    #[arg(help_heading = topic::METER, long = "payload-bytes", value_name = "N", default_value_t = 0)]
    pub payload_bytes: usize,
    #[command(flatten)]
    pub analysis: crate::flag::AnalyzeArgs,
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
    #[command(flatten)]
    pub stored: crate::stored::StoredSeriesArgs,
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

impl Tunnel {
    /// The decoder's mode of the flag.
    pub fn mode(self) -> TunnelMode {
        match self {
            Tunnel::Outer => TunnelMode::Outer,
            Tunnel::Inner => TunnelMode::Inner,
        }
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
    /// `--workers` with files: meters sharing the packets (1: the reading thread meters them).
    pub workers: usize,
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
        let tunnel = a.tunnel.mode();
        let flow = FlowConfig {
            idle_timeout_ns: a.idle,
            active_timeout_ns: a.active,
            tcp_linger_ns: a.tcp_linger,
            capacity: a.capacity,
            payload_bytes,
            features: a.features.level(),
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
        let workers = limits::WORKERS
            .check_usize(a.live.workers)
            .map_err(flag_error)?;
        Ok(HiInput {
            files: a.read.clone(),
            workers,
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
