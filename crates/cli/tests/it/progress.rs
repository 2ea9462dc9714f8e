//! Progress on every long command (issue 19): `flows`, `ingest`, `detect`, `dump`,
//! `packets` and `collect -r` draw one progress line (bar, rate, time left) when standard
//! error is a terminal (a real pty, through `script`), and nothing when it is not.
//! <https://github.com/trawl/trawl/issues/19>
use std::path::Path;
use std::process::Command;

use trawl_capture::{LinkType, PcapWriter};

/// Ethernet / IPv4 / UDP from 10.x.y.z:1024 to 192.0.2.1:53, 60 bytes: packet `i` of
/// `flows` conversations.
fn frame(i: u32, flows: u32) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 46, 0, 1, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&(0x0a00_0000 | (i % flows)).to_be_bytes());
    f.extend_from_slice(&[192, 0, 2, 1]);
    f.extend_from_slice(&[4, 0, 0, 53, 0, 26, 0, 0]);
    f.resize(60, 0);
    f
}

/// A capture of `packets` packets of `flows` conversations, 4 ms apart, in `dir`: sized so
/// that each command runs for a good part of a second in a debug build, long enough for a
/// few redraws of its progress line.
fn capture(dir: &Path, name: &str, packets: u32, flows: u32) -> String {
    let path = dir.join(name);
    let file = std::fs::File::create(&path).unwrap();
    let mut w = PcapWriter::new(std::io::BufWriter::new(file), LinkType::ETHERNET, 65535).unwrap();
    let t0 = 1_764_165_600_000_000_000u64;
    for i in 0..packets {
        let f = frame(i, flows);
        w.write(t0 + u64::from(i) * 4_000_000, f.len() as u32, &f)
            .unwrap();
    }
    w.finish().unwrap();
    path.to_str().unwrap().to_string()
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_trawl")
}

/// Runs trawl with standard error (and output) on a pseudo-terminal: `script` allocates one,
/// as an interactive shell would have. What the terminal received.
fn on_pty(args: &[&str]) -> String {
    let line = std::iter::once(bin())
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let out = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .output()
        .expect("run script");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{args:?}: {text}");
    text
}

/// Runs trawl with standard error on a pipe: what it wrote there.
fn on_pipe(args: &[&str]) -> String {
    let out = Command::new(bin()).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{args:?}: {text}");
    text
}

/// A progress line: redrawn in place, with a bar and the time left when the input's size is
/// known.
fn has_bar(text: &str) -> bool {
    text.contains("\r\x1b[K[") && text.contains("% ") && text.contains(" ETA ")
}

#[test]
fn long_commands_show_progress_on_a_terminal_and_not_in_a_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = &capture(dir.path(), "many.pcap", 150_000, 700);
    let p = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (flows, db, store, out, ipfix) = (
        p("flows.jsonl"),
        p("db"),
        p("store"),
        p("out.pcap"),
        p("flows.ipfix"),
    );
    // The commands, each twice (the second run writes over the first's output).
    let commands: Vec<(&str, Vec<&str>)> = vec![
        (
            "flows",
            vec!["flows", "-r", pcap, "-o", &flows, "--summary", "none"],
        ),
        (
            "ingest",
            vec!["ingest", "-r", pcap, "--db", &db, "--summary", "none"],
        ),
        ("detect", vec!["detect", "synflood", "-r", pcap]),
        (
            "dump",
            vec!["dump", "-r", pcap, "-w", &store, "--summary", "none"],
        ),
        (
            "packets",
            vec!["packets", "-r", &store, "-w", &out, "--summary", "none"],
        ),
    ];
    for (name, args) in &commands {
        let pty = on_pty(args);
        assert!(
            has_bar(&pty),
            "{name}: no progress line on a terminal: {pty:?}"
        );
        let pipe = on_pipe(args);
        assert!(
            !pipe.contains('\r'),
            "{name}: a progress line in a pipe: {pipe:?}"
        );
    }
    // An IPFIX file to collect: 40,000 records (a collector's work is per record).
    let records = &capture(dir.path(), "flows.pcap", 40_000, 40_000);
    let export = format!("ipfix:{ipfix}");
    on_pipe(&[
        "flows",
        "-r",
        records,
        "-o",
        "/dev/null",
        "--summary",
        "none",
        "--export",
        &export,
    ]);
    let collect = ["collect", "-r", &ipfix, "-o", &flows, "--summary", "none"];
    let pty = on_pty(&collect);
    assert!(
        has_bar(&pty),
        "collect: no progress line on a terminal: {pty:?}"
    );
    assert!(
        !on_pipe(&collect).contains('\r'),
        "collect: a progress line in a pipe"
    );
}
