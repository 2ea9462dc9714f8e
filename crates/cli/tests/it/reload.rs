//! SIGHUP rereads a running composition (issue 25): settings its blocks can take over while
//! they run (a writer's path, a detector's threshold) are applied without a restart; a
//! structural change (a block added, a setting a block cannot change) is refused with a log
//! line naming each change, and the composition keeps running as it was.
//! <https://github.com/trawl/trawl/issues/25>
use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use trawl_testkit::netns::VethLab;

use crate::live::{counter_sum, lab, pcap, trawl_live};

/// A monitor of the lab's interface: flow records (1 s idle timeout, so they leave while it
/// runs) to the CSV file `flows`, and a SYN-flood detector. `extra` adds a second writer.
fn composition(lab: &VethLab, flows: &Path, threshold: u32, idle: &str, extra: bool) -> String {
    let mut text = format!(
        r#"
        [[block]]
        name = "capture"
        type = "afpacket_source"
        interface = "{}"
        [[block]]
        name = "meter"
        type = "flow_meter"
        idle = "{idle}"
        [[block]]
        name = "flows"
        type = "flow_writer"
        format = "csv"
        path = "{}"
        [[block]]
        name = "syn"
        type = "synflood"
        threshold = {threshold}
        [[connection]]
        from = "capture.packets"
        to = "meter.packets"
        [[connection]]
        from = "capture.packets"
        to = "syn.packets"
        [[connection]]
        from = "meter.flows"
        to = "flows.flows"
        "#,
        lab.host,
        flows.display(),
    );
    if extra {
        text.push_str(&format!(
            "[[block]]\nname = \"extra\"\ntype = \"flow_writer\"\npath = \"{}\"\n\
             [[connection]]\nfrom = \"meter.flows\"\nto = \"extra.flows\"\n",
            flows.with_extension("extra").display()
        ));
    }
    text
}

fn hangup(child: &Child) {
    let status = Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits until the run has built its blocks: its writer's file exists (SIGHUP is watched
/// from before).
fn wait_for(path: &Path) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "{} never made",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(String::from)
        .collect()
}

#[test]
fn issue_25_sighup_applies_a_new_writer_path_and_threshold_and_refuses_structural_changes() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let comp = dir.path().join("monitor.toml");
    let [a, b, c] = ["a.csv", "b.csv", "c.csv"].map(|f| dir.path().join(f));
    std::fs::write(&comp, composition(&lab, &a, 20, "1s", false)).unwrap();
    let child = trawl_live(&["run", "-c", comp.to_str().unwrap(), "--summary", "json"]);
    wait_for(&a);
    // The socket is open before the file (blocks are built in composition order).
    std::thread::sleep(Duration::from_millis(300));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    // The replayed flows end by the 1 s idle timeout and reach the writer.
    std::thread::sleep(Duration::from_millis(3000));

    // Reloadable: the writer's path and the detector's threshold.
    std::fs::write(&comp, composition(&lab, &b, 30, "1s", false)).unwrap();
    hangup(&child);
    std::thread::sleep(Duration::from_millis(500));
    // Structural (a block added, the meter's timeout): refused whole, the path too.
    std::fs::write(&comp, composition(&lab, &c, 40, "2s", true)).unwrap();
    hangup(&child);
    std::thread::sleep(Duration::from_millis(500));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    std::thread::sleep(Duration::from_millis(300));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().expect("trawl ran");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary: serde_json::Value =
        serde_json::from_str(stderr.lines().last().unwrap()).expect("JSON summary");

    let origin = comp.display();
    assert!(
        stderr.contains(&format!(
            "trawl: reload of {origin}: applied flows.path, syn.threshold\n"
        )),
        "{stderr}"
    );
    let refused = stderr
        .lines()
        .find(|l| l.starts_with(&format!("trawl: reload of {origin} refused")))
        .unwrap_or_else(|| panic!("no refusal: {stderr}"));
    assert!(
        refused.contains("block `extra` added")
            && refused.contains("block `meter`: `idle` cannot change while it runs")
            && refused.ends_with("the composition keeps running as it was"),
        "{refused}"
    );
    assert!(!c.exists() && !c.with_extension("extra").exists());

    // Every record once: those of before the reload in the first file, the rest in the new.
    let (before, after) = (lines(&a), lines(&b));
    assert!(before.len() > 1 && after.len() > 1, "{before:?} {after:?}");
    assert_eq!(before[0], after[0], "the new file starts with the header");
    assert_eq!(
        (before.len() - 1 + after.len() - 1) as u64,
        counter_sum(&summary, "flow_meter", "records")
    );
}

#[test]
fn issue_25_sighup_refuses_a_setting_its_block_cannot_change() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let comp = dir.path().join("monitor.toml");
    let flows = dir.path().join("flows.csv");
    std::fs::write(&comp, composition(&lab, &flows, 20, "1s", false)).unwrap();
    let child = trawl_live(&["run", "-c", comp.to_str().unwrap(), "--summary", "json"]);
    wait_for(&flows);
    std::fs::write(&comp, composition(&lab, &flows, 20, "2s", false)).unwrap();
    hangup(&child);
    std::thread::sleep(Duration::from_millis(300));
    // A composition that does not plan: refused with the checker's message.
    std::fs::write(&comp, "[[block]]\nname = \"x\"\n").unwrap();
    hangup(&child);
    std::thread::sleep(Duration::from_millis(300));
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = child.wait_with_output().expect("trawl ran");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let origin = comp.display();
    let refusals: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with(&format!("trawl: reload of {origin} refused")))
        .collect();
    assert_eq!(refusals.len(), 2, "{stderr}");
    assert!(
        refusals[0].contains("block `meter`: `idle` cannot change while it runs"),
        "{}",
        refusals[0]
    );
    assert!(refusals[1].contains("needs a `type`"), "{}", refusals[1]);
}
