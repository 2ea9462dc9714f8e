//! `trawl-tracegen`: writes the deterministic pcap traces of trawl's flow-meter benchmark
//! (`bench/run.sh`, described in `bench/README.md`).
//!
//! - `realistic`: a real seed capture replicated K times into distinct, concurrent flows
//!   ([`realistic`]).
//! - `worstcase`: 64-byte frames over more than a million flows in a cache-hostile order
//!   ([`worstcase`]).
//!
//! Both print `name=value` lines (packets, bytes, distinct and peak concurrent flows) that
//! `run.sh` keeps next to the trace and checks the flow meters against.

mod checksum;
mod flowstat;
mod mix;
mod pcap;
mod realistic;
mod worstcase;

use std::fmt;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// 2024-01-01T00:00:00Z: the first timestamp of every generated trace.
const BASE_US: u64 = 1_704_067_200_000_000;

const USAGE: &str = "\
usage:
  tracegen realistic --seed-pcap FILE --target-bytes N -o OUT
                     [--span-secs 30] [--split-packets 8] [--idle-secs 30]
  tracegen worstcase --packets N --flows N -o OUT [--seed 1] [--idle-secs 30]
  tracegen head --packets N --input FILE -o OUT

realistic: replicate the seed K = ceil(N / seed size) times with per-copy (and per flow
  chunk of --split-packets packets; 0 = whole flows) IP address offsets, timestamps
  rescaled so the whole trace spans --span-secs.
worstcase: 64-byte Ethernet/IPv4/TCP|UDP frames, --flows distinct 5-tuples, 1 us apart,
  successive packets on different flows.
head: the first N records of a classic pcap (to cut a trace for a slow peer).
Prints name=value statistics on stdout. --idle-secs only affects the printed peak
concurrent flow count. Exit codes: 0 ok, 1 error, 2 bad usage.";

/// An error with its context already in the message.
#[derive(Debug)]
pub struct Error(String);

impl Error {
    /// Wraps a message.
    pub fn new(msg: String) -> Error {
        Error(msg)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parsed `--name value` options, each allowed once.
struct Opts {
    pairs: Vec<(String, String)>,
}

impl Opts {
    fn parse(args: &[String]) -> Result<Opts, String> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let name = match a.as_str() {
                "-o" => "--output",
                s if s.starts_with("--") => s,
                s => return Err(format!("unexpected argument {s:?}")),
            };
            let value = it
                .next()
                .ok_or_else(|| format!("{name} needs a value"))?
                .clone();
            if pairs.iter().any(|(n, _)| n == name) {
                return Err(format!("{name} given twice"));
            }
            pairs.push((name.to_string(), value));
        }
        Ok(Opts { pairs })
    }

    fn take(&mut self, name: &str) -> Option<String> {
        let i = self.pairs.iter().position(|(n, _)| n == name)?;
        Some(self.pairs.remove(i).1)
    }

    fn required(&mut self, name: &str) -> Result<String, String> {
        self.take(name).ok_or_else(|| format!("missing {name}"))
    }

    fn number(&mut self, name: &str, default: Option<u64>) -> Result<u64, String> {
        match self.take(name) {
            Some(v) => v
                .replace('_', "")
                .parse()
                .map_err(|e| format!("{name} {v:?}: {e}")),
            None => default.ok_or_else(|| format!("missing {name}")),
        }
    }

    fn finish(self) -> Result<(), String> {
        match self.pairs.first() {
            Some((n, _)) => Err(format!("unknown option {n}")),
            None => Ok(()),
        }
    }
}

enum Command {
    Realistic(realistic::RealisticConfig),
    Worstcase(worstcase::WorstcaseConfig),
    Head {
        packets: u64,
        input: PathBuf,
        output: PathBuf,
    },
}

fn parse_command(args: &[String]) -> Result<Command, String> {
    let (cmd, rest) = args.split_first().ok_or("missing command")?;
    let mut o = Opts::parse(rest)?;
    let idle_us = o.number("--idle-secs", Some(30))? * 1_000_000;
    let cmd = match cmd.as_str() {
        "realistic" => Command::Realistic(realistic::RealisticConfig {
            seed_pcap: PathBuf::from(o.required("--seed-pcap")?),
            target_bytes: o.number("--target-bytes", None)?,
            span_us: o.number("--span-secs", Some(30))? * 1_000_000,
            split: u32::try_from(o.number("--split-packets", Some(8))?)
                .map_err(|_| "--split-packets too large")?,
            idle_us,
            base_us: BASE_US,
            output: PathBuf::from(o.required("--output")?),
        }),
        "worstcase" => Command::Worstcase(worstcase::WorstcaseConfig {
            packets: o.number("--packets", None)?,
            flows: o.number("--flows", None)?,
            seed: o.number("--seed", Some(1))?,
            base_us: BASE_US,
            idle_us,
            output: PathBuf::from(o.required("--output")?),
        }),
        "head" => Command::Head {
            packets: o.number("--packets", None)?,
            input: PathBuf::from(o.required("--input")?),
            output: PathBuf::from(o.required("--output")?),
        },
        other => return Err(format!("unknown command {other:?}")),
    };
    o.finish()?;
    Ok(cmd)
}

fn run(cmd: Command) -> Result<(), Error> {
    let started = Instant::now();
    match cmd {
        Command::Realistic(cfg) => {
            let r = realistic::generate(&cfg)?;
            println!("trace={}", cfg.output.display());
            println!("kind=realistic");
            println!("seed_packets={}", r.seed_packets);
            println!("copies={}", r.copies);
            println!("split_packets={}", cfg.split);
            println!("flow_chunks_per_copy={}", r.chunks_per_copy);
            println!("orig_len_clamped_per_copy={}", r.orig_len_clamped);
            println!("span_secs={}", cfg.span_us / 1_000_000);
            print_common(r.packets, r.file_bytes, &r.stats, &r.summary, cfg.idle_us);
        }
        Command::Worstcase(cfg) => {
            let r = worstcase::generate(&cfg)?;
            println!("trace={}", cfg.output.display());
            println!("kind=worstcase");
            println!("seed={}", cfg.seed);
            println!("tcp_flows={}", r.tcp_flows);
            println!("stride={}", r.stride);
            print_common(r.packets, r.file_bytes, &r.stats, &r.summary, cfg.idle_us);
        }
        Command::Head {
            packets,
            input,
            output,
        } => {
            let (written, bytes) = pcap::head(&input, packets, &output)?;
            println!("trace={}", output.display());
            println!("kind=head");
            println!("input={}", input.display());
            println!("packets={written}");
            println!("file_bytes={bytes}");
        }
    }
    println!("generate_secs={:.1}", started.elapsed().as_secs_f64());
    Ok(())
}

fn print_common(
    packets: u64,
    file_bytes: u64,
    stats: &flowstat::FlowStats,
    s: &flowstat::Summary,
    idle_us: u64,
) {
    println!("packets={packets}");
    println!("ip_packets={}", stats.ip_packets);
    println!("file_bytes={file_bytes}");
    println!("wire_bytes={}", stats.wire_bytes);
    println!("biflows={}", s.biflows);
    println!("uniflows={}", s.uniflows);
    println!(
        "peak_concurrent_flows_idle{}s={}",
        idle_us / 1_000_000,
        s.peak_concurrent
    );
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "-h" || a == "--help") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let cmd = match parse_command(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tracegen: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(cmd) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tracegen: error: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parse_worstcase() {
        let Command::Worstcase(c) = parse_command(&args(
            "worstcase --packets 20_000_000 --flows 1200000 -o b.pcap",
        ))
        .unwrap() else {
            panic!("wrong command");
        };
        assert_eq!((c.packets, c.flows, c.seed), (20_000_000, 1_200_000, 1));
        assert_eq!(c.output, PathBuf::from("b.pcap"));
    }

    #[test]
    fn parse_realistic_defaults() {
        let Command::Realistic(c) = parse_command(&args(
            "realistic --seed-pcap s.pcap --target-bytes 2200000000 -o a.pcap",
        ))
        .unwrap() else {
            panic!("wrong command");
        };
        assert_eq!(c.span_us, 30_000_000);
        assert_eq!(c.split, 8);
        assert_eq!(c.idle_us, 30_000_000);
    }

    #[test]
    fn parse_errors_name_the_option() {
        let err = |s| parse_command(&args(s)).err().unwrap();
        assert!(err("worstcase --flows 1 -o x").contains("--packets"));
        assert!(err("worstcase --packets 1 --flows 1 -o x --bogus 1").contains("--bogus"));
        assert!(err("worstcase --packets x --flows 1 -o x").contains("--packets \"x\""));
        assert!(err("worstcase --packets 1 --packets 2").contains("twice"));
        assert!(err("bogus").contains("bogus"));
        assert!(err("worstcase --packets").contains("needs a value"));
    }
}
