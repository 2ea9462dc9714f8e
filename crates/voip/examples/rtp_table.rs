//! The call table's RTP path alone, at an operator's scale: `CALLS` calls set up by SIP (INVITE
//! and 200 with SDP), then G.711 20 ms RTP both ways for `SECONDS` seconds, taken in batches
//! of 256 as the `rtp_calls` block takes them. Prints nanoseconds per RTP packet of the table
//! (packet building not counted), batched ([`Tracker::on_packets`]) and one by one
//! ([`Tracker::on_udp`]).
//!
//! cargo run --profile bench -p trawl-voip --example rtp_table [CALLS [SECONDS]]
//! (`ONE_BY_ONE=1`: one by one instead of batched)
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use trawl_voip::{sip, Output, PacketKind, Packets, SipEvent, Tracker, TrackerConfig};

fn endpoint(call: u32, side: u8) -> SocketAddr {
    let [_, a, b, c] = call.to_be_bytes();
    let ip = IpAddr::V4(Ipv4Addr::new(10, side * 16 + a, b, c));
    SocketAddr::new(ip, 16_384 + 2 * (call % 8_000) as u16)
}

fn message(start: &str, call: u32, cseq: &str, media: Option<SocketAddr>) -> Vec<u8> {
    let body = media.map_or(String::new(), |m| {
        format!(
            "v=0\r\no=- 1 1 IN IP4 {ip}\r\ns=-\r\nc=IN IP4 {ip}\r\nt=0 0\r\nm=audio {port} RTP/AVP 8\r\na=rtpmap:8 PCMA/8000\r\n",
            ip = m.ip(),
            port = m.port()
        )
    });
    format!(
        "{start}\r\nFrom: <sip:a{call}@op>;tag=a{call}\r\nTo: <sip:b{call}@op>\r\nCall-ID: {call}@bench\r\n\
         CSeq: {cseq}\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// CPU time of this thread so far (s), from /proc (user + system clock ticks of 1/100 s).
fn cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("/proc");
    // The fields after the command's closing parenthesis; utime and stime are 14th and 15th.
    let rest = &stat[stat.rfind(')').expect("stat") + 2..];
    let f: Vec<u64> = rest
        .split(' ')
        .skip(11)
        .take(2)
        .map(|v| v.parse().expect("ticks"))
        .collect();
    (f[0] + f[1]) as f64 / 100.0
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Only build the packets (subtracted from the others).
    Build,
    Batched,
    OneByOne,
}

fn run(calls: u32, seconds: u32, mode: Mode) -> (f64, u64, Output) {
    let mut table = Tracker::new(TrackerConfig::default()).expect("config");
    let mut out = Output::default();
    let sig = |c: u32, s: u8| SocketAddr::new(endpoint(c, s).ip(), 5060);
    for c in 0..calls {
        let (a, b) = (endpoint(c, 0), endpoint(c, 1));
        let ts = u64::from(c) * 1_000;
        let invite = message(
            &format!("INVITE sip:b{c}@op SIP/2.0"),
            c,
            "1 INVITE",
            Some(a),
        );
        let ok = message("SIP/2.0 200 OK", c, "1 INVITE", Some(b));
        for (m, ts, src, dst) in [
            (invite, ts, sig(c, 0), sig(c, 1)),
            (ok, ts + 1, sig(c, 1), sig(c, 0)),
        ] {
            let m = sip::parse(&m).expect("SIP");
            table.on_sip(&SipEvent::new(ts, src, dst, false, &m), &mut out);
        }
    }
    let start_ns = u64::from(calls) * 1_000 + 1_000_000;
    let mut payloads = vec![0u8; 172 * 256];
    let mut meta = Vec::with_capacity(256);
    let mut batch = Packets::default();
    let mut packets = 0u64;
    let cpu = cpu_s();
    for tick in 0..seconds * 50 {
        let mut c = 0;
        while c < calls {
            meta.clear();
            while meta.len() < 256 && c < calls {
                for side in 0..2u8 {
                    let p = &mut payloads[meta.len() * 172..][..172];
                    p[0] = 0x80;
                    p[1] = 8;
                    p[2..4].copy_from_slice(&(tick as u16).to_be_bytes());
                    p[4..8].copy_from_slice(&(tick * 160).to_be_bytes());
                    p[8..12].copy_from_slice(&(2 * c + u32::from(side)).to_be_bytes());
                    let ts = start_ns + u64::from(tick) * 20_000_000 + u64::from(c) * 100;
                    let (src, dst) = (endpoint(c, side), endpoint(c, 1 - side));
                    meta.push((ts, src, dst));
                }
                c += 1;
            }
            batch.clear();
            for (i, &(ts_ns, src, dst)) in meta.iter().enumerate() {
                batch.push(ts_ns, src, dst, i * 172, 172, PacketKind::Media);
            }
            match mode {
                Mode::Build => {
                    std::hint::black_box(&batch);
                }
                Mode::Batched => table.on_packets(&batch, &payloads, &mut out, |_, _, _| {}),
                Mode::OneByOne => {
                    for (i, &(ts_ns, src, dst)) in meta.iter().enumerate() {
                        let payload = &payloads[i * 172..][..172];
                        table.on_udp(ts_ns, src, dst, payload, &mut out);
                    }
                }
            }
            packets += batch.len() as u64;
        }
    }
    let spent = cpu_s() - cpu;
    table.finish(&mut out);
    (spent, packets, out)
}

fn main() {
    let mut args = std::env::args()
        .skip(1)
        .map(|a| a.parse::<u32>().expect("a number"));
    let calls = args.next().unwrap_or(100_000);
    let seconds = args.next().unwrap_or(2);
    let (build, _, _) = run(calls, seconds, Mode::Build);
    let one_by_one = std::env::var_os("ONE_BY_ONE").is_some();
    for (mode, name) in [
        (Mode::Batched, "on_packets"),
        (Mode::OneByOne, "on_udp one by one"),
    ] {
        if (mode == Mode::OneByOne) != one_by_one {
            continue;
        }
        let (spent, packets, out) = run(calls, seconds, mode);
        let counted: u64 = out.streams.iter().map(|s| s.packets).sum();
        assert_eq!(counted, packets, "every packet counted in a stream");
        assert!(out.streams.iter().all(|s| s.lost == 0 && !s.orphan));
        let table = (spent - build).max(0.01);
        println!(
            "{calls} calls, {packets} RTP packets, {name}: {:.1} CPU ns per packet ({:.2} M/s; {:.2} CPU s, building the packets {:.2} s of it)",
            table * 1e9 / packets as f64,
            packets as f64 / table / 1e6,
            spent,
            build
        );
    }
}
