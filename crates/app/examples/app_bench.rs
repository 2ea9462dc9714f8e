//! Messages per second of the DNS and TLS parsers over the application payloads of the given
//! captures (bench/RESULTS.md, "Application-layer parsers"):
//!
//! ```text
//! cargo run --release -p trawl-app --example app_bench -- [--rounds N] CAPTURE...
//! ```
//!
//! The payloads are read once into memory (UDP datagrams on ports 53/5353/5355 and DNS-over-TCP
//! messages; for TLS the first bytes of every TCP direction, up to 64 KiB), then each parser
//! runs over all of them `N` times (default 200). CPU time of the parsing loop only.

use std::collections::HashMap;
use std::hint::black_box;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Instant;

use trawl_app::dns::{self, TcpFramer};
use trawl_app::tls::{HelloKind, HelloReader};

#[allow(dead_code)]
#[path = "../tests/it/pcap.rs"]
mod pcap;

type Endpoint = (IpAddr, u16);

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut rounds = 200;
    if args.first().map(String::as_str) == Some("--rounds") {
        rounds = args[1].parse().expect("--rounds N");
        args.drain(..2);
    }
    let mut dns_msgs: Vec<Vec<u8>> = Vec::new();
    let mut tls_dirs: Vec<Vec<u8>> = Vec::new();
    let mut skipped = 0;
    for path in &args {
        // Captures trawl's reader cannot read to the end (cut inside a record) are left out.
        if !readable(path) {
            skipped += 1;
            continue;
        }
        let mut framers: HashMap<(Endpoint, Endpoint), TcpFramer> = HashMap::new();
        let mut streams: HashMap<(Endpoint, Endpoint), Vec<u8>> = HashMap::new();
        for p in pcap::payloads(&PathBuf::from(path)) {
            let dns_port = |port: u16| [53, 5353, 5355].contains(&port);
            if p.proto == 17 && (dns_port(p.src.1) || dns_port(p.dst.1)) {
                dns_msgs.push(p.data.clone());
            } else if p.proto == 6 {
                if p.src.1 == 53 || p.dst.1 == 53 {
                    framers
                        .entry((p.src, p.dst))
                        .or_default()
                        .push(&p.data, |m| dns_msgs.push(m.to_vec()));
                }
                let s = streams.entry((p.src, p.dst)).or_default();
                if s.len() < 65_536 {
                    s.extend_from_slice(&p.data);
                }
            }
        }
        // Only directions that start like a TLS handshake record: the parser's work, not the
        // refusal of other protocols at their first byte.
        tls_dirs.extend(streams.into_values().filter(|s| s.first() == Some(&22)));
    }
    let dns_bytes: usize = dns_msgs.iter().map(Vec::len).sum();
    let tls_bytes: usize = tls_dirs.iter().map(Vec::len).sum();
    println!("captures {} ({skipped} unreadable, skipped), DNS messages {} ({dns_bytes} bytes), TLS directions {} ({tls_bytes} bytes), rounds {rounds}", args.len(), dns_msgs.len(), tls_dirs.len());

    let t = Instant::now();
    let mut ok = 0u64;
    for _ in 0..rounds {
        for m in &dns_msgs {
            ok += u64::from(black_box(dns::parse(black_box(m))).is_ok());
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let n = (dns_msgs.len() * rounds) as f64;
    println!(
        "dns::parse      {:>12.0} messages/s  {:>8.1} MB/s  ({ok} parsed)",
        n / secs,
        (dns_bytes * rounds) as f64 / secs / 1e6
    );

    let t = Instant::now();
    let mut hellos = 0u64;
    let mut ja4 = 0usize;
    for _ in 0..rounds {
        for d in &tls_dirs {
            let mut r = HelloReader::new();
            if let Some(Ok(h)) = r.push(black_box(d)) {
                hellos += 1;
                let fingerprint = if h.kind == HelloKind::Client {
                    h.ja4()
                } else {
                    server_fingerprint(&h)
                };
                ja4 += black_box(fingerprint).len();
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let n = (tls_dirs.len() * rounds) as f64;
    println!("tls hello+ja4/s {:>12.0} hellos/s    {:>8.1} MB/s  ({hellos} hellos, {ja4} fingerprint bytes)", n / secs, (tls_bytes * rounds) as f64 / secs / 1e6);
}

/// True when trawl's capture reader reads `path` to its end without an error.
fn readable(path: &str) -> bool {
    use trawl_capture::PacketSource;
    let Ok(mut src) = trawl_capture::FileSource::open(path) else {
        return false;
    };
    loop {
        match src.next_batch() {
            Ok(Some(_)) => {}
            Ok(None) => return true,
            Err(_) => return false,
        }
    }
}

/// JA4S with the `ja4s` feature (its licence: see the crate's Cargo.toml), else the hello's
/// cipher.
#[cfg(feature = "ja4s")]
fn server_fingerprint(h: &trawl_app::tls::Hello) -> String {
    h.ja4s()
}

#[cfg(not(feature = "ja4s"))]
fn server_fingerprint(h: &trawl_app::tls::Hello) -> String {
    format!("{:?}", h.ciphers.first())
}
