//! Benchmarks of the block runtime (issue 7), each comparing side by side in one run:
//!
//! - `overhead --trace FILE`: the same work — read a capture, meter flows, hand the records
//!   on in batches of 256 — as one plain loop without blocks and as a composition
//!   (`pcap_source -> flow_meter -> count`) on one thread (direct calls) and with the meter on
//!   a second thread (queues).
//! - `handoff`: cost per message of a direct call and of a queue between two pinned threads.
//! - `chains --trace FILE --max N`: N parallel chains (`pcap_source -> flow_meter`), one per
//!   core, each over the same trace; aggregate packets/s against one chain.
//! - `synflood --trace FILE`: the SYN-flood detector as a plain loop and as a block.
//!
//! Runs alternate between the variants and the median is reported; CPU time is the process's
//! user + system time (from /proc/self/stat) so other load on the machine matters less.
use std::time::Instant;

use serde::Deserialize;
use trawl_capture::{reuse_records, FileSource, FileSourceConfig, PacketRecord, PacketSource};
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, MsgType, Payload, Poll, Pool, Registry};
use trawl_detect::synflood::{SynFloodConfig, SynFloodDetector};
use trawl_flow::{FlowConfig, FlowMeter, FlowRecord};

const USAGE: &str = "usage:
  compose-bench overhead --trace FILE [--runs 5] [--only 0|1|2]
  compose-bench handoff [--messages 2000000] [--runs 5]
  compose-bench chains --trace FILE [--max N] [--runs 3]
  compose-bench synflood --trace FILE [--runs 5]";

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opt = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let num = |name: &str, default: u64| opt(name).map_or(default, |v| v.parse().expect(name));
    let runs = num("--runs", 5) as usize;
    match args.first().map(String::as_str) {
        Some("overhead") => overhead(
            &opt("--trace").expect(USAGE),
            runs,
            opt("--only").map(|v| v.parse().expect("--only 0|1|2")),
        ),
        Some("handoff") => handoff(num("--messages", 2_000_000), runs),
        Some("chains") => chains(
            &opt("--trace").expect(USAGE),
            num("--max", 0) as usize,
            runs,
        ),
        Some("synflood") => synflood(&opt("--trace").expect(USAGE), runs),
        _ => {
            eprintln!("{USAGE}");
            std::process::exit(2);
        }
    }
}

/// User + system CPU seconds of this process so far (all threads, ended ones included).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = &stat[stat.rfind(')').expect("stat format") + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0 // USER_HZ is 100 on Linux
}

/// Wall and CPU seconds of `f`.
fn measure(f: impl FnOnce() -> u64) -> (f64, f64, u64) {
    let (c0, t0) = (cpu_seconds(), Instant::now());
    let n = f();
    (t0.elapsed().as_secs_f64(), cpu_seconds() - c0, n)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn run_composition(text: &str, registry: &Registry) -> trawl_compose::Report {
    let plan = trawl_compose::plan(
        text,
        "bench",
        registry,
        &trawl_capture::live::allowed_cpus(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    trawl_compose::start(plan)
        .expect("start")
        .wait()
        .unwrap_or_else(|(e, _)| panic!("{e}"))
}

/// The plain loop: read, meter, batch records by 256 (the same work the composition does).
fn plain_meter(trace: &str) -> u64 {
    let mut source = FileSource::with_config(
        trace,
        FileSourceConfig {
            batch_size: 256,
            ..FileSourceConfig::default()
        },
    )
    .expect("trace");
    let mut meter = FlowMeter::new(FlowConfig::default());
    let mut batch: Vec<FlowRecord<'static>> = Vec::with_capacity(256);
    let mut records = 0u64;
    let mut scratch: Vec<PacketRecord<'static>> = Vec::new();
    let mut sink = |r: &FlowRecord<'_>| {
        batch.push(FlowRecord {
            fwd_payload: &[],
            rev_payload: &[],
            ..*r
        });
        if batch.len() == 256 {
            records += 256;
            batch.clear();
        }
    };
    let mut packets = 0u64;
    while let Ok(Some(b)) = source.next_batch() {
        let mut selected = reuse_records(std::mem::take(&mut scratch));
        selected.extend(b.iter());
        packets += selected.len() as u64;
        meter.process_batch(&selected, &mut sink, |_, _| {});
        scratch = reuse_records(selected);
    }
    meter.flush(&mut sink);
    std::hint::black_box(records);
    packets
}

fn meter_composition(trace: &str, split: bool) -> String {
    let cpus = trawl_capture::live::allowed_cpus();
    let (a, b) = (cpus[0], *cpus.last().unwrap());
    format!(
        r#"
        [[pool]]
        name = "read"
        cores = [{a}]
        [[pool]]
        name = "meter"
        cores = [{b}]
        [[block]]
        name = "src"
        type = "pcap_source"
        pool = "read"
        files = ["{trace}"]
        [[block]]
        name = "meter"
        type = "flow_meter"
        pool = "{pool}"
        [[block]]
        name = "sink"
        type = "count"
        pool = "{pool}"
        [[connection]]
        from = "src.packets"
        to = "meter.packets"
        [[connection]]
        from = "meter.flows"
        to = "sink.in"
        "#,
        pool = if split { "meter" } else { "read" }
    )
}

fn overhead(trace: &str, runs: usize, only: Option<usize>) {
    let registry = trawl_blocks::registry();
    let variants = [
        "plain loop",
        "composition, one thread",
        "composition, meter on 2nd core",
    ];
    let mut wall = vec![Vec::new(); 3];
    let mut cpu = vec![Vec::new(); 3];
    let mut packets = 0;
    // Warm the page cache.
    plain_meter(trace);
    for _ in 0..runs {
        for (v, (w, c)) in wall.iter_mut().zip(cpu.iter_mut()).enumerate() {
            if only.is_some_and(|o| o != v) {
                w.push(f64::NAN);
                c.push(f64::NAN);
                continue;
            }
            let (tw, tc, n) = match v {
                0 => measure(|| plain_meter(trace)),
                _ => measure(|| {
                    let r = run_composition(&meter_composition(trace, v == 2), &registry);
                    r.block("src").unwrap().items_out
                }),
            };
            packets = n;
            w.push(tw);
            c.push(tc);
        }
    }
    println!("trace={trace} packets={packets} runs={runs}");
    println!("| variant | wall s | CPU s | M packets/CPU-s | CPU / plain | wall / plain |");
    println!("|---|---:|---:|---:|---:|---:|");
    let (w0, c0) = (median(wall[0].clone()), median(cpu[0].clone()));
    for (v, name) in variants.iter().enumerate() {
        let (w, c) = (median(wall[v].clone()), median(cpu[v].clone()));
        println!(
            "| {name} | {w:.3} | {c:.3} | {:.2} | {:.3} | {:.3} |",
            packets as f64 / c / 1e6,
            c / c0,
            w / w0
        );
    }
}

/// A tiny payload for the hand-off measurement.
#[derive(Default)]
struct Tick(u64);
impl Payload for Tick {}
const TICK: MsgType = MsgType::of::<Tick>("tick");

/// Emits `count` pooled ticks as fast as it can.
struct Ticks {
    left: u64,
    pool: Pool<Tick>,
}

#[derive(Deserialize)]
struct TicksSettings {
    count: u64,
}

impl Block for Ticks {
    const TYPE: &'static str = "ticks";
    const SUMMARY: &'static str = "emits ticks";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "out",
        ty: TICK,
        required: true,
        doc: "ticks",
    }];
    type Settings = TicksSettings;

    fn build(s: TicksSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(Ticks {
            left: s.count,
            pool: Pool::new(Tick::default),
        })
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        // A burst per poll, as a source emitting one message per batch read would.
        for _ in 0..64 {
            if self.left == 0 {
                return Poll::Done;
            }
            self.left -= 1;
            let mut slot = self.pool.take();
            slot.get_mut().0 = self.left;
            ctx.emit(0, slot.into_msg());
        }
        Poll::Busy
    }
}

fn handoff(messages: u64, runs: usize) {
    let mut registry = trawl_blocks::registry();
    registry.register::<Ticks>();
    let cpus = trawl_capture::live::allowed_cpus();
    let (a, b) = (cpus[0], *cpus.last().unwrap());
    let text = |queued: bool, timed: bool| {
        format!(
            r#"
            [runtime]
            time_blocks = {timed}
            [[pool]]
            name = "a"
            cores = [{a}]
            [[pool]]
            name = "b"
            cores = [{b}]
            [[block]]
            name = "src"
            type = "ticks"
            pool = "a"
            count = {messages}
            [[block]]
            name = "sink"
            type = "count"
            pool = "{}"
            [[connection]]
            from = "src.out"
            to = "sink.in"
            capacity = 1024
            "#,
            if queued { "b" } else { "a" }
        )
    };
    println!("messages={messages} runs={runs} cores={a},{b}");
    println!("| connection | blocks timed | ns per message (wall) | sender waits |");
    println!("|---|---|---:|---:|");
    for (queued, timed) in [(false, true), (false, false), (true, true), (true, false)] {
        let mut ns = Vec::new();
        let mut waits = 0;
        for _ in 0..runs {
            let t0 = Instant::now();
            let r = run_composition(&text(queued, timed), &registry);
            ns.push(t0.elapsed().as_nanos() as f64 / messages as f64);
            assert_eq!(r.block("sink").unwrap().msgs_in, messages);
            waits = r.connections[0].waits;
        }
        println!(
            "| {} | {} | {:.1} | {waits} |",
            if queued {
                "queue between two pinned threads"
            } else {
                "direct call, one thread"
            },
            if timed { "yes" } else { "no" },
            median(ns)
        );
    }
}

fn chains(trace: &str, max: usize, runs: usize) {
    let registry = trawl_blocks::registry();
    let cpus = trawl_capture::live::allowed_cpus();
    let max = if max == 0 {
        cpus.len()
    } else {
        max.min(cpus.len())
    };
    plain_meter(trace);
    println!("trace={trace} cores={cpus:?} runs={runs}");
    println!(
        "| chains | wall s | CPU s | M packets/s (wall) | vs 1 chain | per-chain efficiency |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    let mut base = 0.0;
    for n in 1..=max {
        let mut text = format!(
            "[[pool]]\nname = \"workers\"\ncores = [{}]\n",
            cpus[..n]
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        for i in 0..n {
            text += &format!(
                "[[block]]\nname = \"src{i}\"\ntype = \"pcap_source\"\npool = \"workers\"\nfiles = [\"{trace}\"]\n\
                 [[block]]\nname = \"meter{i}\"\ntype = \"flow_meter\"\npool = \"workers\"\n\
                 [[block]]\nname = \"sink{i}\"\ntype = \"count\"\npool = \"workers\"\n\
                 [[connection]]\nfrom = \"src{i}.packets\"\nto = \"meter{i}.packets\"\n\
                 [[connection]]\nfrom = \"meter{i}.flows\"\nto = \"sink{i}.in\"\n"
            );
        }
        let (mut wall, mut cpu, mut packets) = (Vec::new(), Vec::new(), 0);
        for _ in 0..runs {
            let (w, c, p) = measure(|| {
                let r = run_composition(&text, &registry);
                (0..n)
                    .map(|i| r.block(&format!("src{i}")).unwrap().items_out)
                    .sum()
            });
            wall.push(w);
            cpu.push(c);
            packets = p;
        }
        let (w, c) = (median(wall), median(cpu));
        let rate = packets as f64 / w / 1e6;
        if n == 1 {
            base = rate;
        }
        println!(
            "| {n} | {w:.3} | {c:.3} | {rate:.2} | {:.2}x | {:.0} % |",
            rate / base,
            100.0 * rate / base / n as f64
        );
    }
}

fn plain_synflood(trace: &str) -> u64 {
    let mut source = FileSource::open(trace).expect("trace");
    let mut det = SynFloodDetector::new(SynFloodConfig::default());
    let mut events = Vec::new();
    let mut packets = 0;
    while let Ok(Some(b)) = source.next_batch() {
        for pkt in b.iter() {
            det.observe_packet(&pkt, &mut events);
        }
        packets += b.len() as u64;
        events.clear();
    }
    det.finish(&mut events);
    packets
}

fn synflood(trace: &str, runs: usize) {
    let registry = trawl_blocks::registry();
    let text = format!(
        r#"
        [[block]]
        name = "src"
        type = "pcap_source"
        files = ["{trace}"]
        [[block]]
        name = "syn"
        type = "synflood"
        [[block]]
        name = "sink"
        type = "count"
        [[connection]]
        from = "src.packets"
        to = "syn.packets"
        [[connection]]
        from = "syn.alarms"
        to = "sink.in"
        "#
    );
    plain_synflood(trace);
    let (mut pw, mut pc, mut bw, mut bc, mut packets) = (vec![], vec![], vec![], vec![], 0);
    for _ in 0..runs {
        let (w, c, n) = measure(|| plain_synflood(trace));
        pw.push(w);
        pc.push(c);
        packets = n;
        let (w, c, _) = measure(|| {
            run_composition(&text, &registry)
                .block("src")
                .unwrap()
                .items_out
        });
        bw.push(w);
        bc.push(c);
    }
    let (pc, bc) = (median(pc), median(bc));
    println!("trace={trace} packets={packets} runs={runs}");
    println!("| variant | wall s | CPU s | M packets/CPU-s | CPU / plain |");
    println!("|---|---:|---:|---:|---:|");
    println!(
        "| plain loop (read + detector) | {:.3} | {pc:.3} | {:.2} | 1.000 |",
        median(pw),
        packets as f64 / pc / 1e6
    );
    println!(
        "| composition pcap_source -> synflood | {:.3} | {bc:.3} | {:.2} | {:.3} |",
        median(bw),
        packets as f64 / bc / 1e6,
        bc / pc
    );
}
