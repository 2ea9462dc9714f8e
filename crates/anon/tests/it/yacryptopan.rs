//! Agreement with an independent implementation, PyPI's `yacryptopan` (installed by
//! scripts/deps.sh), on 100 000 seeded random IPv4 and 100 000 IPv6 addresses. The oracle is
//! required: without python3 and the package the test fails.

use std::io::Write;
use std::net::IpAddr;
use std::process::{Command, Stdio};

use trawl_anon::{CryptoPan, Key};

use crate::Rng;

const COUNT: usize = 100_000;

/// Starts yacryptopan on `addrs` (a thread feeds stdin); join the handle for its output.
fn spawn_oracle(key_hex: &str, addrs: Vec<IpAddr>) -> std::thread::JoinHandle<Vec<IpAddr>> {
    let script =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/yacryptopan_oracle.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(key_hex)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs (scripts/deps.sh installs it and yacryptopan)");
    let mut stdin = child.stdin.take().unwrap();
    let input: String = addrs.iter().map(|a| format!("{a}\n")).collect();
    std::thread::spawn(move || {
        let feeder = std::thread::spawn(move || stdin.write_all(input.as_bytes()).unwrap());
        let out = child.wait_with_output().unwrap();
        feeder.join().unwrap();
        assert!(
            out.status.success(),
            "yacryptopan oracle failed (is `pip install yacryptopan` done?)"
        );
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect()
    })
}

#[test]
fn agrees_with_yacryptopan_on_100k_random_v4_and_v6() {
    let mut rng = Rng::new(0x2025_cafe);
    let key: Vec<u8> = (0..32).map(|_| rng.next_u64() as u8).collect();
    let key_hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let v4: Vec<IpAddr> = (0..COUNT).map(|_| IpAddr::V4(rng.v4())).collect();
    let v6: Vec<IpAddr> = (0..COUNT).map(|_| IpAddr::V6(rng.v6())).collect();
    // Two interpreters at once: the IPv6 half alone takes yacryptopan about two minutes.
    let oracle_v4 = spawn_oracle(&key_hex, v4.clone());
    let oracle_v6 = spawn_oracle(&key_hex, v6.clone());
    let pan = CryptoPan::new(&Key::from_bytes(&key).unwrap());
    for (addrs, oracle) in [(v4, oracle_v4), (v6, oracle_v6)] {
        let expected = oracle.join().unwrap();
        assert_eq!(expected.len(), COUNT);
        for (a, e) in addrs.iter().zip(&expected) {
            let got = match a {
                IpAddr::V4(a) => IpAddr::V4(pan.v4(*a)),
                IpAddr::V6(a) => IpAddr::V6(pan.v6(*a)),
            };
            assert_eq!(got, *e, "{a}");
        }
    }
}
