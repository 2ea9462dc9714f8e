//! `trawl run` (a composition, or the monitor its flags build), `trawl convert-config` and
//! `trawl listen` (a client of another trawl's shared ring).
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use trawl_blocks::output::OutputFile;
use trawl_capture::{Direction, PcapWriter};
use trawl_ring::{Mode, Recv, SharedRing};

use crate::config::RunArgs;
use crate::flag::{parse_duration_ns, topic, SummaryFormat};

/// `trawl run`: a composition file (`-c`), or the default monitor built from the flags.
pub fn run(a: &RunArgs) -> Result<ExitCode> {
    if a.config.is_some() {
        return crate::compose::run(a);
    }
    let doc = monitor_document(a)?;
    if a.print_composition {
        print!("{}", doc.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    let plan = crate::config::RunPlan::new(a)?;
    let rings: Vec<String> = match &plan.ring {
        Some((prefix, _)) => plan
            .live
            .interfaces
            .iter()
            .flat_map(|iface| (0..plan.live.workers).map(move |w| format!("{prefix}-{iface}-{w}")))
            .map(|name| format!("publishing packets on ring '{name}' (trawl listen --ring {name})"))
            .collect(),
        None => Vec::new(),
    };
    let composition = crate::compose::Composition {
        text: doc.to_toml(),
        origin: "the composition of trawl run's flags (--print-composition shows it)".into(),
        dir: None,
    };
    crate::compose::run_composition(&composition, a, &rings)
}

/// The composition `trawl run`'s flags (or an old configuration file) describe, with the
/// `--set` overrides applied.
fn monitor_document(a: &RunArgs) -> Result<trawl_compose::Document> {
    let plan = crate::config::RunPlan::new(a)?;
    let mut doc = crate::plan::live::monitor(&plan)?;
    for s in &a.set {
        doc.set(s)?;
    }
    Ok(doc)
}

/// `trawl convert-config OLD`: the composition of a `trawl run` configuration of the old
/// format (`[capture]`, `[flows]`, ...), on standard output.
pub fn convert_config(a: &ConvertArgs) -> Result<ExitCode> {
    let args = RunArgs::parse_line(["-c".as_ref(), a.config.as_os_str()])?;
    let doc = monitor_document(&args)?;
    println!(
        "# Converted by `trawl convert-config {}` from a trawl run configuration of the old\n\
         # format. Check it with `trawl check -c FILE`, run it with `trawl run -c FILE`.",
        a.config.display()
    );
    print!("{}", doc.to_toml());
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct ConvertArgs {
    /// The old `trawl run` configuration (`[capture]`, `[ring]`, `[flows]`, ...).
    pub config: std::path::PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct ListenArgs {
    /// The ring's name as `trawl run` printed it (e.g. `trawl-eth0-0`), or a path to the ring
    /// file.
    #[arg(help_heading = topic::INPUT, long, value_name = "NAME")]
    pub ring: String,
    /// Hold the producer back instead of missing packets when this listener falls behind.
    /// Use with care: a slow lossless listener makes the capture drop in the kernel.
    #[arg(help_heading = topic::INPUT, long)]
    pub lossless: bool,
    /// Write the packets to this pcap file (nanosecond timestamps; `-` for standard output)
    /// instead of printing a line per packet.
    #[arg(help_heading = topic::OUTPUT, short = 'w', long = "write", value_name = "PATH")]
    pub write: Option<PathBuf>,
    /// Stop after this many packets.
    #[arg(help_heading = topic::RUN, long, value_name = "N")]
    pub count: Option<u64>,
    /// Stop after this long.
    #[arg(help_heading = topic::RUN, long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub duration: Option<u64>,
    /// Summary on standard error at the end.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    /// Print packet times in the local zone (`TZ`) with its offset instead of UTC.
    #[arg(help_heading = topic::OUTPUT, long)]
    pub local: bool,
}

/// `trawl listen`.
pub fn listen(a: &ListenArgs) -> Result<ExitCode> {
    let mode = if a.lossless {
        Mode::Lossless
    } else {
        Mode::Lossy
    };
    let mut listener = if a.ring.contains('/') {
        SharedRing::open_at(std::path::Path::new(&a.ring))
            .and_then(|r| r.listen(mode))
            .with_context(|| format!("cannot attach to ring file {}", a.ring))?
    } else {
        SharedRing::attach(&a.ring, mode).with_context(|| {
            format!(
                "cannot attach to ring '{}' (is `trawl run` running with that ring?)",
                a.ring
            )
        })?
    };
    let stop = crate::signals::install_stop_signals()?;
    // A `ring` block adds its sources' interfaces when their first packets come: a pcap file
    // needs the link type, so wait for them (the packets wait in the ring meanwhile).
    let waited = Instant::now();
    while a.write.is_some()
        && listener.interfaces().is_empty()
        && waited.elapsed() < Duration::from_secs(3600)
        && !stop.load(std::sync::atomic::Ordering::Relaxed)
        && a.duration
            .is_none_or(|d| waited.elapsed() < Duration::from_nanos(d))
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    let interfaces = listener.interfaces();
    let mut pcap = match &a.write {
        Some(path) => {
            let Some(first) = interfaces.first() else {
                bail!("ring '{}' names no interface yet", a.ring);
            };
            if interfaces.iter().any(|i| i.link_type != first.link_type) {
                bail!(
                    "ring '{}' carries several link types; a pcap file holds one",
                    a.ring
                );
            }
            let sink = OutputFile::create(path)
                .with_context(|| format!("cannot create output file {}", path.display()))?;
            Some(PcapWriter::new(
                sink,
                first.link_type,
                first.snaplen.max(65_535),
            )?)
        }
        None => None,
    };
    let mut text = OutputFile::create(std::path::Path::new("-"))?;
    let zone = if a.local {
        trawl_time::Zone::Local
    } else {
        trawl_time::Zone::Utc
    };
    let started = Instant::now();
    let deadline = a.duration.map(|d| started + Duration::from_nanos(d));
    let limit = a.count.unwrap_or(u64::MAX);
    let mut packets = 0u64;
    let mut closed = false;
    while packets < limit && !stop.load(std::sync::atomic::Ordering::Relaxed) {
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        match listener.wait(Duration::from_millis(100))? {
            Recv::Ready(p) => {
                packets += 1;
                match pcap.as_mut() {
                    Some(w) => match w.write(p.ts_ns, p.wire_len, p.data) {
                        Ok(()) => {}
                        // The reader went away (`-w - | tshark -c 10 -r -`): done, no error.
                        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => break,
                        Err(e) => return Err(e).context("cannot write the capture"),
                    },
                    None => {
                        let dir = match p.direction {
                            Direction::Inbound => "in",
                            Direction::Outbound => "out",
                            Direction::Unknown => "-",
                        };
                        let name = interfaces
                            .get(usize::from(p.iface))
                            .and_then(|i| i.name.as_deref())
                            .unwrap_or("?");
                        let r = writeln!(
                            text,
                            "{} {name} {dir} {} bytes (captured {})",
                            trawl_time::rfc3339(p.ts_ns, zone, true),
                            p.wire_len,
                            p.data.len()
                        );
                        if r.is_err() {
                            break;
                        }
                    }
                }
            }
            Recv::Empty => {}
            Recv::Closed => {
                closed = true;
                break;
            }
        }
    }
    listener.release();
    text.finish().context("cannot write output")?;
    if let Some(w) = pcap {
        let finished = match w.finish() {
            Ok(out) => out.finish(),
            Err(e) => Err(e),
        };
        match finished {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                return Err(e).context("cannot write the capture")
            }
            _ => {}
        }
    }
    let st = listener.stats();
    match a.summary {
        SummaryFormat::None => {}
        SummaryFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "command": "listen",
                "ring": a.ring,
                "mode": if a.lossless { "lossless" } else { "lossy" },
                "packets": packets,
                "records_read": st.records_read,
                "bytes_read": st.bytes_read,
                "records_missed": st.records_missed,
                "bytes_missed": st.bytes_missed,
                "ring_closed": closed,
                "elapsed_s": started.elapsed().as_secs_f64(),
            })
        ),
        SummaryFormat::Text => eprintln!(
            "trawl listen: {packets} packets from ring '{}' ({} missed){}",
            a.ring,
            st.records_missed,
            if closed {
                "; the producer closed the ring"
            } else {
                ""
            }
        ),
    }
    Ok(ExitCode::SUCCESS)
}
