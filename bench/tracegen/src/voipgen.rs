//! Synthetic operator VoIP trace for bench/voip.sh (issue 24): calls start at a fixed rate and
//! last `concurrent / rate` seconds, so `concurrent` calls are up at once after the ramp; each
//! has SIP over UDP (INVITE with SDP, 180, 200 with SDP, ACK, then BYE, 200) and G.711 RTP in
//! both directions every `ptime` with `frame`-byte frames. Deterministic; packets in time
//! order (Ethernet, pcap with microsecond times). Prints what it wrote as JSON.
//!
//! With `--warmup W` the trace is an operator's link in steady state: calls start at `rate`
//! from time 0 until the trace ends at `W + seconds`, where it is cut (the calls still up are
//! in progress at its end); during the first `W` seconds only their SIP is written (their RTP is
//! left out to keep the file small: with W = concurrent / rate, `concurrent` calls are set up
//! when it ends), after it everything. `--seconds 0` writes the warm-up alone: the same packets
//! as the warm-up of any longer trace, to measure the window by difference.
//! `--expect FILE` writes per call its Call-ID, how it ends (`bye_caller` or `active_at_end`)
//! and the RTP packets written each way, for an exact check of what a monitor reports.
//!
//! voipgen --concurrent N --rate R --seconds S [--warmup W] [--ptime-ms 20] [--frame 200]
//!         [--expect FILE] -o FILE
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufWriter, Write};

struct Args {
    concurrent: u64,
    rate: u64,
    seconds: u64,
    ptime_ms: u64,
    frame: usize,
    warmup: Option<u64>,
    expect: Option<String>,
    out: String,
}

fn args() -> Args {
    let mut a = Args {
        concurrent: 1000,
        rate: 100,
        seconds: 20,
        ptime_ms: 20,
        frame: 200,
        warmup: None,
        expect: None,
        out: String::new(),
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    for pair in argv.chunks(2) {
        let v = pair.get(1).cloned().unwrap_or_default();
        let n = || v.parse::<u64>().expect("a number");
        match pair[0].as_str() {
            "--concurrent" => a.concurrent = n(),
            "--rate" => a.rate = n(),
            "--seconds" => a.seconds = n(),
            "--ptime-ms" => a.ptime_ms = n(),
            "--frame" => a.frame = n() as usize,
            "--warmup" => a.warmup = Some(n()),
            "--expect" => a.expect = Some(v),
            "-o" => a.out = v,
            other => panic!("voipgen: unknown argument {other}"),
        }
    }
    assert!(!a.out.is_empty(), "voipgen: -o FILE");
    assert!(a.frame >= 54 && a.frame <= 1514, "--frame 54..=1514");
    a
}

/// Addresses of call `i`: caller and callee IPv4 and their RTP ports.
fn endpoints(i: u64) -> ([u8; 4], [u8; 4], u16) {
    let h = (i % 65_536) as u16;
    let port = 16_384 + 2 * ((i / 65_536) % 8_000) as u16;
    let [x, y] = h.to_be_bytes();
    ([10, 1, x, y], [10, 2, x, y], port)
}

fn checksum(data: &[u8]) -> u16 {
    let mut sum = 0u32;
    for c in data.chunks(2) {
        sum += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Ethernet + IPv4 + UDP around `payload`.
fn frame(buf: &mut Vec<u8>, src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, payload: &[u8]) {
    buf.clear();
    buf.extend_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 8, 0]);
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    let c = checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    buf.extend_from_slice(&ip);
    buf.extend_from_slice(&sport.to_be_bytes());
    buf.extend_from_slice(&dport.to_be_bytes());
    buf.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(payload);
}

fn sdp(ip: [u8; 4], port: u16) -> String {
    let ip = format!("{}.{}.{}.{}", ip[0], ip[1], ip[2], ip[3]);
    format!(
        "v=0\r\no=- 1 1 IN IP4 {ip}\r\ns=-\r\nc=IN IP4 {ip}\r\nt=0 0\r\nm=audio {port} RTP/AVP 8\r\na=rtpmap:8 PCMA/8000\r\n"
    )
}

fn sip(start: &str, i: u64, cseq: &str, body: &str) -> String {
    format!(
        "{start}\r\nVia: SIP/2.0/UDP gen;branch=z9hG4bK{i}\r\nFrom: <sip:a{i}@op.example>;tag=a{i}\r\n\
         To: <sip:b{i}@op.example>;tag=b{i}\r\nCall-ID: {i}@voipgen\r\nCSeq: {cseq}\r\n\
         User-Agent: voipgen\r\nContent-Type: application/sdp\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Events of a call, in order: SIP steps, then RTP packets, then the end.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Next {
    at_us: u64,
    call: u64,
    step: u64,
}

/// The first step from RTP step `step` (at `at`) on whose time is at least `from`: RTP steps
/// go two per tick (forward, then backward 1 ms later), ticks `ptime` apart, and the BYE
/// (`rtp_end`) comes a tick after the last one.
fn first_step_from(at: u64, step: u64, rtp_end: u64, ptime: u64, from: u64) -> (u64, u64) {
    let time = |t4: u64, s: u64| t4 + (s - 4) / 2 * ptime + (s - 4) % 2 * 1_000;
    let t4 = at - (step - 4) / 2 * ptime - (step - 4) % 2 * 1_000;
    let k = (from.saturating_sub(t4)).div_ceil(ptime);
    let mut best = (4 + 2 * k).min(rtp_end);
    // The backward packet of the tick before may already be inside.
    if k >= 1 {
        let back = 4 + 2 * (k - 1) + 1;
        if back >= step && back < best && time(t4, back) >= from {
            best = back;
        }
    }
    let best = best.max(step);
    (time(t4, best), best)
}

/// What was written of each call, for `--expect`.
#[derive(Clone, Copy, Default)]
struct Written {
    answered: bool,
    bye: bool,
    forward: u32,
    backward: u32,
}

fn main() {
    let a = args();
    let duration_us = a.concurrent * 1_000_000 / a.rate;
    let warmup = a.warmup.unwrap_or(0);
    // Operator mode: calls start until the trace is cut at its end; else they all complete.
    let end_us = a.warmup.map(|w| (w + a.seconds) * 1_000_000);
    let media_from_us = warmup * 1_000_000;
    let calls = a.rate * (warmup + a.seconds);
    let ptime_us = a.ptime_ms * 1000;
    let payload = a.frame - 42 - 12;
    let mut out = BufWriter::with_capacity(1 << 20, File::create(&a.out).expect("create"));
    let mut hdr = Vec::new();
    hdr.extend_from_slice(&0xa1b2_c3d4u32.to_le_bytes());
    hdr.extend_from_slice(&2u16.to_le_bytes());
    hdr.extend_from_slice(&4u16.to_le_bytes());
    hdr.extend_from_slice(&[0; 8]);
    hdr.extend_from_slice(&65_535u32.to_le_bytes());
    hdr.extend_from_slice(&1u32.to_le_bytes());
    out.write_all(&hdr).unwrap();
    let base_us = 1_700_000_000_000_000u64;
    let mut heap = BinaryHeap::new();
    for call in 0..calls {
        heap.push(Reverse(Next {
            at_us: call * 1_000_000 / a.rate,
            call,
            step: 0,
        }));
    }
    let (mut packets, mut rtp_packets, mut bytes) = (0u64, 0u64, 0u64);
    // Calls set up and not yet ended by BYE; their number when the media window opens.
    let (mut up, mut up_at_window) = (0u64, None);
    let (mut window_packets, mut window_rtp_packets) = (0u64, 0u64);
    let mut written = vec![Written::default(); calls as usize];
    let mut buf = Vec::with_capacity(2048);
    let mut rtp = vec![0u8; 12 + payload];
    let rtp_steps = duration_us / ptime_us;
    while let Some(Reverse(n)) = heap.pop() {
        if end_us.is_some_and(|end| n.at_us >= end) {
            // In time order: everything left is after the cut.
            break;
        }
        let in_window = n.at_us >= media_from_us;
        if in_window && up_at_window.is_none() {
            up_at_window = Some(up);
        }
        let (caller, callee, port) = endpoints(n.call);
        let i = n.call;
        let w = &mut written[i as usize];
        // Steps: 0 INVITE, 1 180, 2 200, 3 ACK, 4.. RTP (two per tick), then BYE, 200.
        let rtp_end = 4 + 2 * rtp_steps;
        let mut write = true;
        match n.step {
            0 => {
                let m = sip(
                    &format!("INVITE sip:b{i}@op.example SIP/2.0"),
                    i,
                    "1 INVITE",
                    &sdp(caller, port),
                );
                frame(&mut buf, caller, 5060, callee, 5060, m.as_bytes());
                up += 1;
            }
            1 => frame(
                &mut buf,
                callee,
                5060,
                caller,
                5060,
                sip("SIP/2.0 180 Ringing", i, "1 INVITE", "").as_bytes(),
            ),
            2 => {
                let m = sip("SIP/2.0 200 OK", i, "1 INVITE", &sdp(callee, port));
                frame(&mut buf, callee, 5060, caller, 5060, m.as_bytes());
                w.answered = true;
            }
            3 => frame(
                &mut buf,
                caller,
                5060,
                callee,
                5060,
                sip(&format!("ACK sip:b{i}@op.example SIP/2.0"), i, "1 ACK", "").as_bytes(),
            ),
            // RTP before the window is left out (the sequence numbers go on as if sent).
            s if s < rtp_end && !in_window => write = false,
            s if s < rtp_end => {
                let k = (s - 4) / 2;
                let forward = (s - 4) % 2 == 0;
                rtp[0] = 0x80;
                rtp[1] = 8;
                rtp[2..4].copy_from_slice(&(k as u16).to_be_bytes());
                rtp[4..8].copy_from_slice(&((k * 8 * a.ptime_ms) as u32).to_be_bytes());
                let ssrc = (i as u32).wrapping_mul(2).wrapping_add(!forward as u32);
                rtp[8..12].copy_from_slice(&ssrc.to_be_bytes());
                if forward {
                    frame(&mut buf, caller, port, callee, port, &rtp);
                    w.forward += 1;
                } else {
                    frame(&mut buf, callee, port, caller, port, &rtp);
                    w.backward += 1;
                }
                rtp_packets += 1;
                window_rtp_packets += 1;
            }
            s if s == rtp_end => {
                frame(
                    &mut buf,
                    caller,
                    5060,
                    callee,
                    5060,
                    sip(&format!("BYE sip:b{i}@op.example SIP/2.0"), i, "2 BYE", "").as_bytes(),
                );
                w.bye = true;
                up -= 1;
            }
            _ => frame(
                &mut buf,
                callee,
                5060,
                caller,
                5060,
                sip("SIP/2.0 200 OK", i, "2 BYE", "").as_bytes(),
            ),
        }
        if write {
            let ts = base_us + n.at_us;
            let mut rec = [0u8; 16];
            rec[0..4].copy_from_slice(&((ts / 1_000_000) as u32).to_le_bytes());
            rec[4..8].copy_from_slice(&((ts % 1_000_000) as u32).to_le_bytes());
            rec[8..12].copy_from_slice(&(buf.len() as u32).to_le_bytes());
            rec[12..16].copy_from_slice(&(buf.len() as u32).to_le_bytes());
            out.write_all(&rec).unwrap();
            out.write_all(&buf).unwrap();
            packets += 1;
            window_packets += in_window as u64;
            bytes += buf.len() as u64;
        }
        // SIP steps 1 ms apart (200 OK 1 s after 180); RTP every ptime, the two directions
        // 1 ms apart; BYE one ptime after the last RTP.
        let next = match n.step {
            1 => Some(1_000_000),
            s if s < 3 => Some(1_000),
            3 => Some(ptime_us),
            s if s < rtp_end => Some(if (s - 4) % 2 == 0 {
                1_000
            } else {
                ptime_us - 1_000
            }),
            s if s == rtp_end => Some(1_000),
            _ => None,
        };
        let mut following = next.map(|d| (n.at_us + d, n.step + 1));
        if let Some((at, step)) = following {
            if (4..rtp_end).contains(&step) && at < media_from_us {
                // RTP left out before the window: on to its first step in the window (or
                // the BYE), not through the heap step by step (billions of steps).
                following = Some(first_step_from(at, step, rtp_end, ptime_us, media_from_us));
            }
        }
        if let Some((at_us, step)) = following {
            heap.push(Reverse(Next {
                at_us,
                call: n.call,
                step,
            }));
        }
    }
    out.flush().unwrap();
    if let Some(path) = &a.expect {
        let mut e = BufWriter::new(File::create(path).expect("create the expect file"));
        for (i, w) in written.iter().enumerate() {
            let reason = if w.bye { "bye_caller" } else { "active_at_end" };
            let status = if w.answered { 200 } else { 0 };
            writeln!(
                e,
                "{i}@voipgen {reason} {status} {} {}",
                w.forward, w.backward
            )
            .unwrap();
        }
        e.flush().unwrap();
    }
    let streams: u64 = written
        .iter()
        .map(|w| (w.forward > 0) as u64 + (w.backward > 0) as u64)
        .sum();
    let ended = written.iter().filter(|w| w.bye).count();
    println!(
        "{{\"calls\":{calls},\"ended\":{ended},\"streams\":{streams},\"rtp_packets\":{rtp_packets},\"packets\":{packets},\"bytes\":{bytes},\"concurrent\":{},\"rate\":{},\"window_s\":{},\"window_packets\":{window_packets},\"window_rtp_packets\":{window_rtp_packets},\"calls_up_at_window\":{},\"window_from_ns\":{}}}",
        a.concurrent,
        a.rate,
        if a.warmup.is_some() { a.seconds } else { 0 },
        up_at_window.unwrap_or(up),
        (base_us + media_from_us) * 1000
    );
}
