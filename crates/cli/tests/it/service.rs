//! trawl as a service and in a container: systemd's notification protocol (readiness,
//! watchdog, status, stopping) spoken to a socket of the test's own, as systemd would listen;
//! and `trawl run` capturing as an unprivileged user holding CAP_NET_RAW alone, inside a
//! network namespace, as a container runs it.
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::live::{lab, pcap};

/// Every datagram that arrives on `sock` until `child` exits (and a moment after).
fn datagrams_until_exit(sock: &UnixDatagram, child: &mut std::process::Child) -> Vec<String> {
    sock.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut exited_at = None;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match sock.recv(&mut buf) {
            Ok(n) => got.push(String::from_utf8_lossy(&buf[..n]).into_owned()),
            Err(_) => {
                if exited_at.is_some_and(|t: Instant| t.elapsed() > Duration::from_millis(300)) {
                    break;
                }
            }
        }
        if exited_at.is_none() && child.try_wait().unwrap().is_some() {
            exited_at = Some(Instant::now());
        }
        assert!(Instant::now() < deadline, "trawl run did not end: {got:?}");
    }
    got
}

#[test]
fn run_tells_systemd_ready_status_watchdog_and_stopping() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let sock_path = dir.path().join("notify");
    let sock = UnixDatagram::bind(&sock_path).unwrap();
    let flows = dir.path().join("flows.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["run", "-i", &lab.host, "--no-ring", "--duration", "2500ms"])
        .args(["--stats-interval", "500ms", "--summary", "none", "--flows"])
        .arg(&flows)
        .env("NOTIFY_SOCKET", &sock_path)
        // 300 ms: a ping every 150 ms, about 16 in the run.
        .env("WATCHDOG_USEC", "300000")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let got = datagrams_until_exit(&sock, &mut child);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = got.first().map(String::as_str).unwrap_or_default();
    assert!(
        first.starts_with("READY=1"),
        "first message {first:?} of {got:?}"
    );
    let pings = got.iter().filter(|m| *m == "WATCHDOG=1").count();
    assert!((8..=30).contains(&pings), "{pings} watchdog pings: {got:?}");
    assert!(
        got.iter()
            .any(|m| m.starts_with("STATUS=") && m.contains("packets")),
        "no status line: {got:?}"
    );
    assert!(
        got.last().unwrap().starts_with("STOPPING=1"),
        "last message: {got:?}"
    );
}

/// Runs `trawl run` in the lab's namespace on its end of the veth pair as user nobody with
/// `caps` as its only capabilities (ambient, inheritable and bounding set: as `podman run
/// --cap-drop all --cap-add ...` leaves a container).
fn run_as_nobody(
    lab: &trawl_testkit::netns::VethLab,
    caps: &str,
    flows: &std::path::Path,
) -> std::process::Child {
    Command::new("ip")
        .args(["netns", "exec", &lab.ns, "setpriv"])
        .args(["--reuid", "65534", "--regid", "65534", "--clear-groups"])
        .args([
            "--inh-caps",
            caps,
            "--ambient-caps",
            caps,
            "--bounding-set",
            caps,
        ])
        .args(["--", env!("CARGO_BIN_EXE_trawl"), "run", "-i", &lab.peer])
        .args([
            "--no-ring",
            "--duration",
            "3s",
            "--summary",
            "json",
            "--flows",
        ])
        .arg(flows)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn run_captures_in_a_namespace_as_nobody_with_only_cap_net_raw() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let flows = dir.path().join("flows.jsonl");
    let child = run_as_nobody(&lab, "-all,+net_raw", &flows);
    std::thread::sleep(Duration::from_millis(800));
    // Out of the host end: into the namespace's end, where trawl captures.
    let sent = lab
        .replay_out_of_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    let (_, summary) = crate::live::wait_json(child);
    assert_eq!(summary["packets"].as_u64(), Some(sent), "{summary}");
    let records = std::fs::read_to_string(&flows).unwrap();
    assert!(records.lines().count() > 10, "{records}");
    let meta = std::fs::metadata(&flows).unwrap();
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 65534);

    // Without the capability, the same command is refused: CAP_NET_RAW is what it needs.
    let flows = dir.path().join("refused.jsonl");
    let out = run_as_nobody(&lab, "-all", &flows)
        .wait_with_output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("CAP_NET_RAW") || stderr.contains("ermission"),
        "{stderr}"
    );
}
