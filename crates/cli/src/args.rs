//! The command line as clap parses it: [`LowArgs`] and the [`Command`] enum, assembled from
//! each command's flags, which live beside the command (`flows::FlowsArgs`,
//! `dump::DumpArgs`, ...). Only `main` imports this module; the commands import their own
//! flags and the shared value parsers of `flag`, so the module graph has no circle.
use clap::{Parser, Subcommand};

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
    Flows(crate::flows::FlowsArgs),
    /// Write per-second rows (packets, bytes, active and new flows) from capture files, or
    /// read those stored in a flow database (`-d DB`, with `--step 1s|1m|1h`).
    #[command(after_help = EXIT_CODES)]
    Series(crate::flows::SeriesArgs),
    /// Run the monitor: capture on interfaces into shared packet rings, meter flows and
    /// per-second series, until SIGINT/SIGTERM. A composition file (`-c`), or the default
    /// monitor built from the flags (`--print-composition` prints it).
    #[command(after_help = EXIT_CODES)]
    Run(Box<crate::config::RunArgs>),
    /// Read packets from a running trawl's shared ring (another process): print them or write
    /// a pcap file.
    #[command(after_help = EXIT_CODES)]
    Listen(crate::daemon::ListenArgs),
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
    /// ClickHouse as the central store: the tables' DDL (`schema`), and loading a Kafka
    /// topic of flow records into them (`load`); `trawl query --clickhouse` queries them.
    #[command(after_help = EXIT_CODES)]
    Clickhouse(crate::central::ClickhouseArgs),
    /// Print the alarms stored in the flow database (`trawl run --db`, `trawl ingest`: the
    /// series change detector's, and any detector an `alarm_store` block keeps).
    #[command(after_help = EXIT_CODES)]
    Alarms(crate::stored::AlarmsArgs),
    /// Serve the HTTP API (queries, packets, status, metrics; docs/specs/api.md) over a flow
    /// database and a packet store, without capturing, until SIGINT/SIGTERM.
    #[command(after_help = EXIT_CODES)]
    Serve(crate::serve::ServeArgs),
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
    #[command(after_help = crate::voip::VOIP_HELP, args_conflicts_with_subcommands = true,
              subcommand_negates_reqs = true)]
    Voip(crate::voip::VoipArgs),
    /// Application-layer logs from capture files: DNS request/response pairs (dns.jsonl), TLS
    /// hellos (tls.jsonl) and HTTP/1.x request/response pairs (http.jsonl), each line with the
    /// flow's Community ID.
    #[command(after_help = crate::logs::LOGS_HELP)]
    Logs(crate::logs::LogsArgs),
    /// Anonymize a capture file: every IP address in IP, ARP, ICMP-quoted and tunnel headers
    /// rewritten with prefix-preserving Crypto-PAn, checksums updated; optionally payloads cut.
    #[command(after_help = EXIT_CODES)]
    Anonymize(crate::anonymize::AnonymizeArgs),
    /// Print a shell completion script (bash, zsh, fish, ...), e.g.
    /// `trawl completions bash > /etc/bash_completion.d/trawl`.
    Completions(crate::generate::CompletionsArgs),
    /// Write man pages: trawl(1) on standard output, or one page per command into DIR.
    Man(crate::generate::ManArgs),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clap_definition_is_consistent() {
        use clap::CommandFactory;
        LowArgs::command().debug_assert();
    }
}
