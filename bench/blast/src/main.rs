//! `blast`: sends a pcap's frames in a loop on an interface as fast as AF_PACKET allows, or at a
//! paced rate, for the live-capture benchmark (`bench/capture.sh`).
//!
//! The trace is loaded into memory once. Each thread opens its own `AF_PACKET` socket bound to
//! the interface (protocol 0, so it receives nothing), optionally pinned to a CPU, with
//! `PACKET_QDISC_BYPASS` (frames go straight to the driver), and sends `sendmmsg` batches that
//! point into the loaded trace (no copy in user space). A rate is kept with a token bucket
//! checked once per batch: a batch may leave when the schedule says its first packet is due;
//! a sender that falls more than a batch behind loses the excess credit instead of bursting.
//! At the end it prints one JSON line on standard output: packets, bytes, achieved rate.

mod pcap;
mod tx;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

/// Set by SIGINT/SIGTERM: every thread stops after its current batch.
static STOP: AtomicBool = AtomicBool::new(false);

/// Send a pcap's frames in a loop on an interface through AF_PACKET (needs root or
/// CAP_NET_RAW), then print what was sent as one JSON line.
///
/// Exit codes: 0 done (also when stopped by SIGINT/SIGTERM), 1 error, 2 bad usage.
#[derive(Parser, Debug)]
#[command(name = "blast", version)]
struct Args {
    /// Interface to send on.
    #[arg(short = 'i', long = "interface", value_name = "IFACE")]
    interface: String,
    /// Classic pcap of Ethernet frames to send (loaded into memory; pcapng: convert with
    /// `editcap -F pcap`).
    #[arg(short = 'r', long = "read", value_name = "PCAP")]
    read: PathBuf,
    /// Target rate in packets per second over all threads; 0: as fast as possible.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pps: u64,
    /// Packets to send in all (the trace is repeated as needed).
    #[arg(short = 'c', long, value_name = "N")]
    count: Option<u64>,
    /// Stop after this long (e.g. 10s, 500ms; a bare number is seconds). Without --count or
    /// --duration: until SIGINT/SIGTERM.
    #[arg(short = 'd', long, value_name = "DURATION", value_parser = parse_duration)]
    duration: Option<Duration>,
    /// Sending threads, each with its own socket; count and rate are split between them.
    #[arg(short = 't', long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: u16,
    /// Pin thread k to the k-th CPU of this list (cycled), e.g. `0` or `0,1`.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    cpus: Vec<usize>,
    /// Packets per sendmmsg call (at most 1024, the kernel's limit).
    #[arg(short = 'b', long, value_name = "N", default_value_t = 128,
          value_parser = clap::value_parser!(u16).range(1..=1024))]
    batch: u16,
    /// With --pps: shrink batches so that they leave at most this many microseconds apart
    /// (smoother traffic at low rates).
    #[arg(long = "spacing-us", value_name = "US", default_value_t = 50)]
    spacing_us: u64,
    /// How frames reach the kernel: `mmsg` (sendmmsg of iovecs into the trace) or `ring`
    /// (a PACKET_TX_RING, one send per batch).
    #[arg(long, value_enum, default_value_t = tx::Mode::Mmsg)]
    mode: tx::Mode,
    /// Slots of each thread's TX ring (--mode ring; at least twice the batch).
    #[arg(long = "ring-slots", value_name = "N", default_value_t = 4096)]
    ring_slots: usize,
    /// Go through the interface's qdisc (by default PACKET_QDISC_BYPASS hands frames
    /// straight to the driver).
    #[arg(long = "no-qdisc-bypass")]
    no_qdisc_bypass: bool,
    /// Socket send buffer in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20)]
    sndbuf: usize,
    /// Largest frame sent (bigger trace frames are left out); default: the interface MTU + 14.
    #[arg(long = "max-frame", value_name = "BYTES")]
    max_frame: Option<usize>,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    let (number, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix("us") {
        (v, 1e-6)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else if let Some(v) = s.strip_suffix('m') {
        (v, 60.0)
    } else {
        (s, 1.0)
    };
    let secs: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (examples: 10s, 500ms, 2m, 1.5)"))?;
    Duration::try_from_secs_f64(secs * scale).map_err(|e| format!("'{s}': {e}"))
}

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

fn install_signal_handlers() -> Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: sigaction is a plain C struct for which all zeroes is valid (empty mask, no
        // flags: no SA_RESTART, so a blocked sendmmsg returns EINTR).
        let mut action: libc::sigaction = unsafe { std::mem::zeroed() };
        action.sa_sigaction = on_signal as *const () as libc::sighandler_t;
        // SAFETY: `action` is valid; the handler only stores to an atomic, which is
        // async-signal-safe.
        if unsafe { libc::sigaction(sig, &action, std::ptr::null_mut()) } != 0 {
            return Err(std::io::Error::last_os_error()).context("sigaction");
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("blast: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<()> {
    let ifindex = tx::ifindex(&args.interface)?;
    let max_frame = match args.max_frame {
        Some(m) => m,
        None => tx::mtu(&args.interface)? + 14,
    };
    let trace = pcap::load(&args.read, max_frame)?;
    if trace.skipped > 0 {
        eprintln!(
            "blast: left out {} frame(s) shorter than 14 or longer than {max_frame} bytes",
            trace.skipped
        );
    }
    install_signal_handlers()?;

    let threads = usize::from(args.threads);
    let batch = usize::from(args.batch);
    let thread_pps = args.pps as f64 / threads as f64;
    // With a rate, a batch holds at most `spacing_us` worth of packets.
    let thread_batch = if args.pps > 0 {
        ((thread_pps * args.spacing_us as f64 / 1e6) as usize).clamp(1, batch)
    } else {
        batch
    };
    let largest = trace.frames.iter().map(|&(_, len)| len).max().unwrap_or(0);
    let ring = (args.mode == tx::Mode::Ring).then(|| (largest, args.ring_slots.max(2 * batch)));
    let mut sockets = Vec::with_capacity(threads);
    for _ in 0..threads {
        sockets.push(tx::Socket::open(
            ifindex,
            !args.no_qdisc_bypass,
            args.sndbuf,
            ring,
        )?);
    }

    let barrier = Barrier::new(threads + 1);
    let n = trace.frames.len();
    let (results, elapsed) = std::thread::scope(|scope| {
        let mut handles = Vec::with_capacity(threads);
        for (t, sock) in sockets.into_iter().enumerate() {
            let count = args
                .count
                .map(|c| c / threads as u64 + u64::from((t as u64) < c % threads as u64));
            let cpu = (!args.cpus.is_empty()).then(|| args.cpus[t % args.cpus.len()]);
            let (trace, barrier) = (&trace, &barrier);
            let duration = args.duration;
            handles.push(scope.spawn(move || -> Result<tx::Sent> {
                let pinned = cpu.map(tx::pin_to_cpu).transpose();
                barrier.wait();
                pinned?;
                let plan = tx::Plan {
                    count,
                    deadline: duration.map(|d| Instant::now() + d),
                    pps: thread_pps,
                    batch: thread_batch,
                    first_frame: t * n / threads,
                };
                tx::run(&sock, trace, &plan, &STOP)
            }));
        }
        barrier.wait();
        let start = Instant::now();
        let results: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().expect("sender thread panicked"))
            .collect();
        (results, start.elapsed())
    });

    let mut total = tx::Sent::default();
    for r in results {
        let s = r?;
        total.packets += s.packets;
        total.bytes += s.bytes;
        total.calls += s.calls;
        total.retries += s.retries;
        total.rejected += s.rejected;
        total.late += s.late;
    }
    if total.packets == 0 && !STOP.load(Ordering::Relaxed) {
        bail!("nothing was sent");
    }
    let secs = elapsed.as_secs_f64().max(1e-9);
    println!(
        concat!(
            "{{\"interface\":{},\"trace\":{},\"trace_packets\":{},\"trace_bytes\":{},",
            "\"skipped_frames\":{},\"threads\":{},\"batch\":{},\"qdisc_bypass\":{},",
            "\"mode\":\"{}\",\"target_pps\":{},\"packets\":{},\"bytes\":{},\"elapsed_s\":{:.6},",
            "\"pps\":{:.0},\"bits_per_s\":{:.0},\"calls\":{},\"retries\":{},\"rejected\":{},",
            "\"late\":{},",
            "\"interrupted\":{}}}"
        ),
        json_string(&args.interface),
        json_string(&args.read.display().to_string()),
        n,
        trace.pass_bytes(),
        trace.skipped,
        threads,
        thread_batch,
        !args.no_qdisc_bypass,
        match args.mode {
            tx::Mode::Mmsg => "mmsg",
            tx::Mode::Ring => "ring",
        },
        args.pps,
        total.packets,
        total.bytes,
        secs,
        total.packets as f64 / secs,
        total.bytes as f64 * 8.0 / secs,
        total.calls,
        total.retries,
        total.rejected,
        total.late,
        STOP.load(Ordering::Relaxed),
    );
    Ok(())
}

/// `s` as a JSON string literal.
fn json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn json_strings() {
        assert_eq!(json_string("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }

    #[test]
    fn args() {
        Args::command().debug_assert();
    }

    use clap::CommandFactory;
}
