//! Export and collector throughput, driven by `bench/export.sh` (harness-less bench binary).
//!
//! ```text
//! export_throughput encode RECORDS [MAX_MESSAGE [TARGET|- [gso|nogso]]]
//!                                                IPFIX over UDP to a sink socket that never
//!                                                reads (or to TARGET): records exported per CPU
//!                                                second, and allocations per record; with UDP
//!                                                segmentation offload (default) or without
//! export_throughput stream RECORDS FILE [fill]   the same IPFIX datagrams into FILE
//!                                                (2-byte length + datagram each); `fill`:
//!                                                full messages padded to 1472 bytes
//! export_throughput replay FILE HOST:PORT RATE [gso]
//!                                                sends FILE's datagrams at RATE datagrams/s;
//!                                                `gso`: full-size ones in trains (UDP_SEGMENT)
//! export_throughput decode FILE                  decodes FILE's datagrams in process
//! export_throughput pb RECORDS                  the Kafka exporter's Protobuf (delimited) encoding
//!                                                alone, in process: CPU per record
//! export_throughput pbdump RECORDS FILE         RECORDS random records (every field, values
//!                                                of every magnitude, zero or not; IPv4 and
//!                                                IPv6; tunnels, labels, the extra fields) as
//!                                                Protobuf, plain and delimited, into FILE: two
//!                                                builds' files compare byte for byte
//! export_throughput to RECORDS DESTINATION       records delivered per CPU second of the
//!                                                whole process to any `--export` destination
//!                                                (`json:/dev/null`, `kafka://...`: librdkafka's
//!                                                threads counted, the records of acknowledged
//!                                                messages), waiting for every acknowledgement;
//!                                                records from a ring of 1,024 (in cache)
//! ```
//! Records are synthetic but shaped like real ones (IPv4, TCP/UDP mix, varied addresses,
//! ports, counters and first-packet arrays), deterministic (a fixed LCG).
use std::io::{Read, Write};
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use trawl_export::decode::empty_record;
use trawl_export::{
    Destination, ExportConfig, ExportHub, MessageEncoder, Protocol, TemplateRefresh,
};
use trawl_flow::FlowRecord;

#[global_allocator]
static ALLOC: trawl_testkit::alloc::CountingAllocator = trawl_testkit::alloc::CountingAllocator;

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

fn records(n: usize) -> Vec<FlowRecord<'static>> {
    let mut rng = Lcg(42);
    let base = 1_700_000_000_000_000_000u64;
    (0..n)
        .map(|i| {
            let mut r = empty_record();
            let a = rng.next() as u32;
            r.src_ip = std::net::Ipv4Addr::from(0x0a00_0000 | (a & 0xffff)).into();
            r.dst_ip = std::net::Ipv4Addr::from(0xc000_0200 | (a >> 16 & 0xff)).into();
            r.proto = if i % 4 == 0 { 17 } else { 6 };
            r.src_port = 1024 + (rng.next() % 60000) as u16;
            r.dst_port = [80, 443, 53, 22][i % 4];
            r.first_ns = base + i as u64 * 1_000_000;
            r.last_ns = r.first_ns + rng.next() % 30_000_000_000;
            r.fwd.packets = 1 + rng.next() % 50;
            r.rev.packets = rng.next() % 60;
            r.fwd.ip_bytes = r.fwd.packets * (40 + rng.next() % 1400);
            r.rev.ip_bytes = r.rev.packets * (40 + rng.next() % 1400);
            r.fwd.bytes = r.fwd.ip_bytes + 14 * r.fwd.packets;
            r.rev.bytes = r.rev.ip_bytes + 14 * r.rev.packets;
            r.fwd.len_mean = 512.25;
            r.rev.iat_mean_ns = 12_345.5;
            r.fwd.tcp_flags = 0x1b;
            r.first_count = ((r.fwd.packets + r.rev.packets) as usize).min(10);
            for k in 0..r.first_count {
                r.first_lengths[k] = if k % 2 == 0 { 60 } else { -1500 };
                r.first_iats_ns[k] = (k as i64) * 1000;
            }
            r
        })
        .collect()
}

/// Process CPU time (all threads), from /proc (USER_HZ is 100 on Linux).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = after
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    (f[11] + f[12]) as f64 / 100.0
}

/// Records pushed before measuring.
const WARM_UP: usize = 400_000;

fn encode(n: usize, max_message: usize, target: Option<std::net::SocketAddr>, gso: bool) {
    let recs = records(n.min(1 << 20));
    // The sink: a local socket that never reads (the kernel's loopback delivery is then part
    // of the sender's cost), or TARGET, e.g. an address routed into a dummy interface, which
    // drops datagrams at transmit, as a NIC would send them.
    let sink = UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = target.unwrap_or_else(|| sink.local_addr().unwrap());
    // The producer waits for the exporter (as `trawl flows -r` does): the exporter's pace is
    // measured, in the steady state where batches circulate through the pool.
    let config = ExportConfig {
        lossless: true,
        udp_max_message: Some(max_message),
        udp_gso: gso,
        ..ExportConfig::default()
    };
    let hub = ExportHub::start(&[Destination::IpfixUdp(to, Default::default())], &config).unwrap();
    let mut handle = hub.handle(1, 0, Duration::from_millis(200));
    // Warm up: the batch pool fills, the encoder's buffer reaches its size.
    // Enough records that the queue fills (the producer outpaces the exporter), so every
    // batch the steady state needs exists before measuring.
    for r in recs.iter().cycle().take(WARM_UP) {
        handle.push(r);
    }
    std::thread::sleep(Duration::from_millis(300));
    let cpu0 = cpu_seconds();
    let wall0 = Instant::now();
    let alloc0 = trawl_testkit::alloc::allocations();
    let mut pushed = 0usize;
    while pushed < n {
        for r in &recs {
            handle.push(r);
            pushed += 1;
            if pushed == n {
                break;
            }
        }
    }
    let allocs = trawl_testkit::alloc::allocations() - alloc0;
    drop(handle);
    let reports = hub.finish();
    let cpu = cpu_seconds() - cpu0;
    let wall = wall0.elapsed().as_secs_f64();
    let r = &reports[0];
    if target.is_none() && max_message == 1472 {
        // The style rule for hot paths: once the batches circulate, no allocation per record.
        assert_eq!(allocs, 0, "the export hot path allocated {allocs} times");
    }
    println!(
        "encode: sink={to} max_message={max_message} gso={} records={} messages={} messages_per_record={:.4} bytes={} dropped={} cpu_s={cpu:.2} wall_s={wall:.2} records_per_cpu_s={:.0} allocations_per_record={:.6}{}",
        r.gso_segment.map_or("off".to_string(), |s| s.to_string()),
        r.records - WARM_UP as u64,
        r.messages,
        // Messages of warm-up and measurement together, per record of both.
        r.messages as f64 / r.records as f64,
        r.bytes,
        r.dropped_queue + r.dropped_send,
        (r.records - WARM_UP as u64) as f64 / cpu,
        allocs as f64 / n as f64,
        r.gso_refused
            .as_ref()
            .map_or(String::new(), |e| format!(" gso_refused=\"{e}\""))
    );
}

/// Records per CPU second of the process (all its threads: the exporter's, and a Kafka
/// client's) to `destination`, from the first record pushed to the last one acknowledged.
fn to_destination(n: usize, destination: &str) {
    // The records pushed come from a ring of 1,024 distinct ones (650 KB, in cache), as a
    // meter's come from the stack where it just built them: a cold source of 650 MB made the
    // pushing thread's copy a read from memory no real run has (0.2 us a record). Nothing
    // downstream keeps anything per flow, so repeating the ring costs the exporter the same.
    let recs = records(n.min(1 << 10));
    let d: Destination = destination.parse().unwrap();
    let config = ExportConfig {
        lossless: true,
        ..ExportConfig::default()
    };
    let hub = ExportHub::start(&[d], &config).unwrap();
    let mut handle = hub.handle(1, 0, Duration::from_millis(200));
    let cpu0 = cpu_seconds();
    let wall0 = Instant::now();
    for r in recs.iter().cycle().take(n) {
        handle.push(r);
    }
    drop(handle);
    let reports = hub.finish();
    let cpu = cpu_seconds() - cpu0;
    let wall = wall0.elapsed().as_secs_f64();
    let r = &reports[0];
    // What reached the destination: Kafka's acknowledged records; a file or socket takes
    // every record not dropped.
    let delivered = r
        .records_delivered
        .unwrap_or(r.records - r.dropped_queue - r.dropped_send);
    println!(
        "to: destination={destination} records={} delivered={delivered} messages={} bytes={} dropped={} spooled={} cpu_s={cpu:.2} wall_s={wall:.2} records_per_cpu_s={:.0}",
        r.records,
        r.messages,
        r.bytes,
        r.dropped_queue + r.dropped_send,
        r.spooled,
        delivered as f64 / cpu,
    );
}

/// The Protobuf encoding of the Kafka exporter alone (`format=protobuf-delimited`): records
/// appended to a message buffer emptied at the size of a `batch=262144` message.
fn protobuf(n: usize) {
    let recs = records(n.min(1 << 16));
    let mut out = Vec::with_capacity(1 << 19);
    let cpu0 = cpu_seconds();
    let mut bytes = 0usize;
    for r in recs.iter().cycle().take(n) {
        trawl_export::pb::encode_flow_delimited(r, None, "bench", &mut out);
        if out.len() >= 262_144 {
            bytes += out.len();
            out.clear();
        }
    }
    bytes += out.len();
    let cpu = cpu_seconds() - cpu0;
    println!(
        "pb: records={n} bytes={bytes} cpu_s={cpu:.2} ns_per_record={:.0}",
        cpu * 1e9 / n as f64
    );
}

/// A value of a random bit length (0 to `bits`), zero one time in four.
fn magnitude(rng: &mut Lcg, bits: u32) -> u64 {
    let v = rng.next() << 31 ^ rng.next();
    let len = (rng.next() % u64::from(bits + 1)) as u32;
    if rng.next().is_multiple_of(4) || len == 0 {
        0
    } else {
        (v | rng.next() << 62) >> (64 - len)
    }
}

/// Random records for `pbdump`: every field of every magnitude.
fn random_record(rng: &mut Lcg) -> FlowRecord<'static> {
    use std::net::IpAddr;
    let mut r = empty_record();
    let addr = |rng: &mut Lcg| -> IpAddr {
        let w = u128::from(rng.next()) << 96
            ^ u128::from(rng.next()) << 64
            ^ u128::from(rng.next()) << 32
            ^ u128::from(rng.next());
        match rng.next() % 4 {
            0 => std::net::Ipv6Addr::from(w).into(),
            1 => std::net::Ipv6Addr::from(w & 0xffff_ffff).into(),
            _ => std::net::Ipv4Addr::from((w as u32) >> (rng.next() % 24)).into(),
        }
    };
    r.src_ip = addr(rng);
    r.dst_ip = addr(rng);
    r.src_port = magnitude(rng, 16) as u16;
    r.dst_port = magnitude(rng, 16) as u16;
    r.proto = [6, 17, 1, 58, 47, 0, 132][(rng.next() % 7) as usize];
    r.vlan = magnitude(rng, 12) as u16;
    r.src_mac = (rng.next() << 16 ^ rng.next()).to_be_bytes()[2..]
        .try_into()
        .unwrap();
    r.dst_mac = (magnitude(rng, 48)).to_be_bytes()[2..].try_into().unwrap();
    r.first_ns = magnitude(rng, 64);
    r.last_ns = magnitude(rng, 64);
    let double = |rng: &mut Lcg| match rng.next() % 5 {
        0 => 0.0,
        1 => -0.0,
        2 => magnitude(rng, 40) as f64 / 7.0,
        3 => f64::from_bits(rng.next() << 32 ^ rng.next()),
        _ => -(magnitude(rng, 20) as f64),
    };
    for d in [&mut r.fwd, &mut r.rev] {
        (d.packets, d.bytes, d.ip_bytes) =
            (magnitude(rng, 64), magnitude(rng, 64), magnitude(rng, 40));
        (d.len_min, d.len_max) = (magnitude(rng, 32) as u32, magnitude(rng, 16) as u32);
        (d.len_mean, d.len_std, d.iat_mean_ns, d.iat_std_ns) =
            (double(rng), double(rng), double(rng), double(rng));
        (d.iat_min_ns, d.iat_max_ns) = (magnitude(rng, 64), magnitude(rng, 50));
        for c in [
            &mut d.syn,
            &mut d.syn_ack,
            &mut d.fin,
            &mut d.rst,
            &mut d.psh,
            &mut d.urg,
            &mut d.ece,
            &mut d.cwr,
            &mut d.zero_window,
            &mut d.retransmissions,
            &mut d.rtt_samples,
        ] {
            *c = magnitude(rng, 32) as u32;
        }
        d.tcp_flags = magnitude(rng, 8) as u8;
        d.rtt_handshake_ns = (rng.next().is_multiple_of(3)).then(|| magnitude(rng, 64));
        (d.rtt_min_ns, d.rtt_max_ns, d.rtt_mean_ns) =
            (magnitude(rng, 64), magnitude(rng, 30), double(rng));
    }
    r.first_count = (rng.next() % 11) as usize;
    for k in 0..r.first_count {
        let sign = if rng.next().is_multiple_of(2) { 1 } else { -1 };
        r.first_lengths[k] = sign * magnitude(rng, 63) as i64;
        r.first_iats_ns[k] = if rng.next().is_multiple_of(9) {
            i64::MIN
        } else {
            -sign * magnitude(rng, 40) as i64
        };
    }
    use trawl_flow::{App, AppLabel, AppSource, EndReason, TunnelType};
    r.end_reason = EndReason::ALL[(rng.next() % EndReason::COUNT as u64) as usize];
    if rng.next().is_multiple_of(3) {
        let source = if rng.next().is_multiple_of(2) {
            AppSource::Payload
        } else {
            AppSource::Port
        };
        r.app = Some(AppLabel {
            app: [App::Tls, App::Dns, App::Http, App::Ssh][(rng.next() % 4) as usize],
            source,
        });
    }
    if rng.next().is_multiple_of(4) {
        r.tunnel.kind = [
            TunnelType::Gre,
            TunnelType::Vxlan,
            TunnelType::GtpU,
            TunnelType::Geneve,
        ][(rng.next() % 4) as usize];
        r.tunnel.ip_version = if rng.next().is_multiple_of(2) { 4 } else { 6 };
        r.tunnel.id = magnitude(rng, 32) as u32;
        for b in r.tunnel.src_ip.iter_mut().chain(r.tunnel.dst_ip.iter_mut()) {
            *b = rng.next() as u8;
        }
    }
    let x = &mut r.extra;
    x.sampling_rate = magnitude(rng, 32) as u32;
    x.agent = (rng.next().is_multiple_of(3)).then(|| addr(rng));
    (x.in_if, x.out_if, x.src_as, x.dst_as) = (
        magnitude(rng, 32) as u32,
        magnitude(rng, 32) as u32,
        magnitude(rng, 32) as u32,
        magnitude(rng, 32) as u32,
    );
    let country = |rng: &mut Lcg| match rng.next() % 3 {
        0 => *b"DE",
        1 => [0, 0],
        _ => [b'a' + (rng.next() % 26) as u8, (rng.next() % 256) as u8],
    };
    (x.src_country, x.dst_country) = (country(rng), country(rng));
    r
}

/// `n` random records, each as a Protobuf message and as a delimited one (with and without an
/// interface, probe names of every length class), into `path`.
fn pbdump(n: usize, path: &str) {
    let mut rng = Lcg(7);
    let mut out = Vec::new();
    let long = "p".repeat(200);
    for i in 0..n {
        let r = random_record(&mut rng);
        let iface = ["eth0", "", "a-very-long-interface-name"][i % 3];
        let probe = ["probe-1", "", &long][i % 3 / 2 + (i % 5 == 0) as usize];
        trawl_export::pb::encode_flow(&r, (i % 2 == 0).then_some(iface), probe, &mut out);
        trawl_export::pb::encode_flow_delimited(&r, (i % 2 == 1).then_some(iface), probe, &mut out);
    }
    std::fs::write(path, &out).unwrap();
    println!("pbdump: records={n} bytes={}", out.len());
}

fn stream(n: usize, path: &str, fill: bool) {
    let recs = records(n);
    let mut enc = MessageEncoder::flows(
        Protocol::Ipfix,
        1,
        32473,
        1472,
        TemplateRefresh::UDP_DEFAULT,
    );
    // As trawl's exporter lays messages out for segmentation offload: full ones padded.
    enc.set_fill(fill);
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut count = 0u64;
    let mut emit = |m: &[u8]| {
        out.write_all(&(m.len() as u16).to_be_bytes()).unwrap();
        out.write_all(m).unwrap();
        count += 1;
    };
    for r in &recs {
        enc.add_flow(r, 1_700_000_000, &mut emit);
    }
    enc.flush(1_700_000_000, &mut emit);
    println!("stream: records={n} datagrams={count}");
}

fn replay(path: &str, to: &str, rate: f64, gso: bool) {
    let mut data = Vec::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_end(&mut data)
        .unwrap();
    let s = UdpSocket::bind("0.0.0.0:0").unwrap();
    s.connect(to).unwrap();
    // With offload: each burst's full-size datagrams go as trains (as trawl's exporter sends
    // them); the kernel cuts them back into datagrams for a receiver without UDP_GRO.
    let mut batch = if gso {
        trawl_export::socket::SendBatch::with_gso(&s, 1472)
    } else {
        trawl_export::socket::SendBatch::default()
    };
    assert!(!gso || batch.gso_segment().is_some(), "no UDP_SEGMENT here");
    let started = Instant::now();
    let (mut off, mut sent) = (0usize, 0u64);
    while off + 2 <= data.len() {
        let len = usize::from(u16::from_be_bytes([data[off], data[off + 1]]));
        let _ = batch.push(&s, &data[off + 2..off + 2 + len]);
        off += 2 + len;
        sent += 1;
        // Paced in bursts of 32 so that neither receiver is overrun.
        if sent % 32 == 0 {
            let _ = batch.flush(&s);
            let due = started + Duration::from_secs_f64(sent as f64 / rate);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    }
    let _ = batch.flush(&s);
    println!(
        "replay: datagrams={sent} wall_s={:.2}",
        started.elapsed().as_secs_f64()
    );
}

/// Decodes a stream file in process (no sockets): the decoder's own pace.
fn decode(path: &str) {
    let mut data = Vec::new();
    std::fs::File::open(path)
        .unwrap()
        .read_to_end(&mut data)
        .unwrap();
    let mut dec = trawl_export::Decoder::new(trawl_export::DecoderConfig::default());
    let from = "127.0.0.1:1".parse().unwrap();
    let cpu0 = cpu_seconds();
    let mut records = 0usize;
    let mut packets = 0u64;
    for _ in 0..10 {
        let mut off = 0usize;
        while off + 2 <= data.len() {
            let len = usize::from(u16::from_be_bytes([data[off], data[off + 1]]));
            let (n, _) = dec.decode(from, &data[off + 2..off + 2 + len], &mut |_, item| {
                if let trawl_export::Item::Flow(r) = item {
                    packets += r.fwd.packets;
                }
            });
            records += n;
            off += 2 + len;
        }
    }
    let cpu = cpu_seconds() - cpu0;
    println!(
        "decode: records={records} cpu_s={cpu:.2} records_per_cpu_s={:.0} (checksum {packets})",
        records as f64 / cpu
    );
}

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    match args.first().map(String::as_str) {
        Some("encode") => encode(
            args[1].parse().unwrap(),
            args.get(2).map_or(1472, |m| m.parse().unwrap()),
            args.get(3)
                .filter(|t| *t != "-")
                .map(|t| t.parse().unwrap()),
            args.get(4).is_none_or(|g| g != "nogso"),
        ),
        Some("stream") => stream(
            args[1].parse().unwrap(),
            &args[2],
            args.get(3).is_some_and(|f| f == "fill"),
        ),
        Some("decode") => decode(&args[1]),
        Some("pbdump") => pbdump(args[1].parse().unwrap(), &args[2]),
        Some("pb") => protobuf(args[1].parse().unwrap()),
        Some("to") => to_destination(args[1].parse().unwrap(), &args[2]),
        Some("replay") => replay(
            &args[1],
            &args[2],
            args[3].parse().unwrap(),
            args.get(4).is_some_and(|g| g == "gso"),
        ),
        // `cargo bench` with no arguments: a quick run that checks the allocation rule.
        _ => encode(500_000, 1472, None, true),
    }
}
