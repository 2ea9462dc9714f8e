//! The composition files of `compositions/`: each passes `trawl_compose::plan` with trawl's
//! registry, offline.toml runs over a capture file, and default.toml runs on a veth pair.
use std::net::UdpSocket;
use std::path::Path;
use std::time::Duration;

use crate::live::lab;
use crate::{cpus, file_packets, pcap, run, wait_for};

fn composition(name: &str) -> String {
    let path = trawl_testkit::repo_root().join("compositions").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The file with the placeholders users edit replaced: interface, directories, collector,
/// cores (those this machine has).
fn localise(text: &str, iface: &str, dir: &Path, collector: &str) -> String {
    let cores = cpus();
    let pool = if cores.len() >= 2 {
        format!("cores = [{}, {}]", cores[0], cores[1])
    } else {
        "threads = 2".to_string()
    };
    text.replace("eth0", iface)
        .replace("/var/lib/trawl", &dir.display().to_string())
        .replace("127.0.0.1:4739", collector)
        .replace("cores = [0, 1]", &pool)
}

#[test]
fn the_shipped_compositions_are_valid() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["default.toml", "synflood.toml", "offline.toml"] {
        // The offline composition's input must exist to pass the check.
        let text = localise(&composition(name), "eth0", dir.path(), "127.0.0.1:4739")
            .replace("capture.pcap", &pcap("android.pcap").display().to_string());
        let plan = trawl_compose::plan(&text, name, &trawl_blocks::registry(), &cpus())
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(!plan.describe().is_empty());
    }
    // And a broken one is refused (the check can fail).
    let broken = composition("default.toml").replace("interval = \"5m\"", "interval = \"5 min\"");
    assert!(trawl_compose::plan(&broken, "broken", &trawl_blocks::registry(), &cpus()).is_err());
}

#[test]
fn offline_toml_runs_over_a_capture_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = |f: &str| dir.path().join(f).display().to_string();
    let text = composition("offline.toml")
        .replace("capture.pcap", &pcap("android.pcap").display().to_string())
        .replace("\"flows.jsonl\"", &format!("{:?}", out("flows.jsonl")))
        .replace("\"series.csv\"", &format!("{:?}", out("series.csv")))
        .replace("\"alarms.jsonl\"", &format!("{:?}", out("alarms.jsonl")));
    let report = run(&text);
    let packets = file_packets(&pcap("android.pcap")).len() as u64;
    assert_eq!(report.block("meter").unwrap().items_in, packets);
    let flows = std::fs::read_to_string(out("flows.jsonl")).unwrap();
    assert_eq!(
        flows.lines().count() as u64,
        report.block("flows").unwrap().items_in
    );
    assert!(
        std::fs::read_to_string(out("series.csv"))
            .unwrap()
            .lines()
            .count()
            > 1
    );
}

#[test]
fn default_toml_runs_on_a_live_interface_and_stops() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let collector = UdpSocket::bind("127.0.0.1:0").unwrap();
    let text = localise(
        &composition("default.toml"),
        &lab.host,
        dir.path(),
        &collector.local_addr().unwrap().to_string(),
    )
    // Small capture rings for a test.
    .replace(
        "fanout = 4242",
        &format!(
            "fanout = {}\nblock_size = \"64KiB\"\nblocks = 16",
            6000 + std::process::id() % 20000
        ),
    );
    let plan = trawl_compose::plan(&text, "default.toml", &crate::registry(), &cpus())
        .unwrap_or_else(|e| panic!("{e}"));
    let running = trawl_compose::start(plan).unwrap_or_else(|e| panic!("cannot start: {e}"));
    let file = pcap("android.pcap");
    let sent = lab.replay_into_host(&file, &["--topspeed"]).unwrap();
    let captured = |r: &trawl_compose::Report| -> u64 {
        ["w0", "w1"]
            .iter()
            .map(|w| r.block(w).unwrap().counter("packets").unwrap_or(0))
            .sum()
    };
    wait_for(Duration::from_secs(10), || {
        captured(&running.report()) >= sent
    });
    running.stop();
    let report = running
        .wait()
        .unwrap_or_else(|(e, r)| panic!("run failed: {e}\n{}", r.table()));
    assert_eq!(captured(&report), sent, "{}", report.table());
    assert!(report.blocks.iter().all(|b| b.finished));
    // Every packet stored, every packet metered, flows stored and exported.
    assert_eq!(report.block("dump").unwrap().counter("packets"), Some(sent));
    let metered: u64 = ["m0", "m1"]
        .iter()
        .map(|m| report.block(m).unwrap().items_in)
        .sum();
    assert_eq!(metered, sent);
    let records = report.block("store").unwrap().counter("records").unwrap();
    assert!(records > 0, "{}", report.table());
    assert_eq!(
        report.block("export").unwrap().counter("records"),
        Some(records)
    );
    assert!(dir.path().join("flows").is_dir());
    assert!(dir.path().join("packets").is_dir());
    assert!(
        std::fs::read_to_string(dir.path().join("series.csv"))
            .unwrap()
            .lines()
            .count()
            > 1
    );
}

#[test]
fn bad_settings_are_refused_when_the_composition_is_checked() {
    let cases = [
        (
            "afpacket_source",
            "interface = \"eth0\"\nblock_size = 5000",
            "block_size",
        ),
        (
            "afpacket_source",
            "interface = \"eth0\"\nfilter = \"port\"",
            "filter",
        ),
        ("ring", "ring = \"x\"\ncapacity = \"3MiB\"", "capacity"),
        (
            "dumper",
            "dir = \"/tmp/x\"\nwrite_block = 1000",
            "write_block",
        ),
        (
            "dumper",
            "dir = \"/tmp/x\"\nretention_size = \"120%\"",
            "retention_size",
        ),
        ("flow_store", "dir = \"/tmp/x\"\niface = \"a/b\"", "iface"),
        (
            "flow_store",
            "dir = \"/tmp/x\"\niface = \"a\"\ncodec = \"gzip\"",
            "codec",
        ),
        (
            "flow_export",
            "destinations = [\"ipfix+carrier-pigeon://x\"]",
            "destination",
        ),
        ("flow_export", "destinations = []", "destinations"),
    ];
    // The same compositions with good settings pass: the failures are the settings'.
    for (ty, settings) in [
        ("afpacket_source", "interface = \"eth0\""),
        ("ring", "ring = \"x\""),
        ("dumper", "dir = \"/tmp/x\"\nretention_size = \"80%\""),
        ("flow_store", "dir = \"/tmp/x\"\niface = \"a\""),
        ("flow_export", "destinations = [\"json:-\"]"),
    ] {
        if let Err(e) = trawl_compose::plan(
            &around(ty, settings),
            "t",
            &trawl_blocks::registry(),
            &cpus(),
        ) {
            panic!("{ty}: {e}");
        }
    }
    for (ty, settings, word) in cases {
        let text = around(ty, settings);
        let err = match trawl_compose::plan(&text, "t", &trawl_blocks::registry(), &cpus()) {
            Ok(_) => panic!("{ty} with {settings:?} was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(word), "{ty}: {err}");
    }
}

/// A composition where a `ty` block with `settings` is fed (or feeds) what it needs.
fn around(ty: &str, settings: &str) -> String {
    let (gate, src) = if ty == "afpacket_source" {
        ("", String::new())
    } else {
        let input = match ty {
            "flow_store" | "flow_export" => "flows",
            _ => "packets",
        };
        (input, pcap("android.pcap").display().to_string())
    };
    if gate.is_empty() {
        format!(
            "[[block]]\nname = \"b\"\ntype = \"{ty}\"\n{settings}\n\
             [[block]]\nname = \"c\"\ntype = \"count\"\n\
             [[connection]]\nfrom = \"b.packets\"\nto = \"c.in\"\n"
        )
    } else if gate == "flows" {
        format!(
            "[[block]]\nname = \"s\"\ntype = \"pcap_source\"\nfiles = [\"{src}\"]\n\
             [[block]]\nname = \"m\"\ntype = \"flow_meter\"\n\
             [[block]]\nname = \"b\"\ntype = \"{ty}\"\n{settings}\n\
             [[connection]]\nfrom = \"s.packets\"\nto = \"m.packets\"\n\
             [[connection]]\nfrom = \"m.flows\"\nto = \"b.flows\"\n"
        )
    } else {
        format!(
            "[[block]]\nname = \"s\"\ntype = \"pcap_source\"\nfiles = [\"{src}\"]\n\
             [[block]]\nname = \"b\"\ntype = \"{ty}\"\n{settings}\n\
             [[connection]]\nfrom = \"s.packets\"\nto = \"b.packets\"\n"
        )
    }
}
