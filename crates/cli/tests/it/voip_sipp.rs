//! Real calls (issue 24): SIPp's `uac_pcap` scenario (G.711 A-law from the package's
//! g711a.pcap, then RFC 2833 DTMF, then BYE) calls SIPp's `uas` across a veth pair into a
//! network namespace; dumpcap captures the host end and `trawl voip -r` reads the capture.
//! Every call SIPp counts as successful is found, answered, ended by the caller's BYE after
//! the scenario's pauses, with the streams SIPp played; then RTP frames dropped with editcap
//! and the file replayed with tcpreplay give the loss imposed and tshark's loss and jitter.
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use trawl_testkit::netns::VethLab;

use super::trawl;

/// Packets of SIPp's G.711 and DTMF captures (`In pcap ..., npkts N` in SIPp's output).
const G711_PACKETS: u64 = 236;
const DTMF_PACKETS: u64 = 10;
const CALLS: u64 = 2;

fn ip(args: &[&str]) {
    let s = Command::new("ip").args(args).status().expect("ip");
    assert!(s.success(), "ip {args:?}");
}

pub(crate) fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// dumpcap on `iface`, writing pcap; returns once the file header is written.
pub(crate) fn capture(iface: &str, file: &Path) -> Child {
    let child = Command::new("dumpcap")
        .args(["-q", "-P", "-i", iface, "-w"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dumpcap (package wireshark-common, with tshark)");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::metadata(file).map_or(0, |m| m.len()) < 24 {
        assert!(Instant::now() < deadline, "dumpcap did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    // The header is written when the capture is open; give the socket a moment.
    std::thread::sleep(Duration::from_millis(300));
    child
}

pub(crate) fn stop(mut child: Child) {
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let _ = child.wait();
}

pub(crate) fn voip(capture: &Path, out: &Path) -> (Vec<Value>, Vec<Value>) {
    let o = trawl(&[
        "voip",
        "-r",
        capture.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (
        jsonl(&out.join("calls.jsonl")),
        jsonl(&out.join("rtp.jsonl")),
    )
}

/// tshark's `rtp,streams` for `capture`: (SSRC, packets, lost, max jitter, mean jitter).
fn tshark_streams(capture: &Path) -> Vec<(u32, u64, i64, f64, f64)> {
    let o = Command::new("tshark")
        .args([
            "-o",
            "rtp.heuristic_rtp:TRUE",
            "-q",
            "-z",
            "rtp,streams",
            "-r",
        ])
        .arg(capture)
        .output()
        .expect("tshark");
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let ssrc = f.iter().position(|w| w.starts_with("0x"))?;
            let pct = f.iter().position(|w| w.starts_with('('))?;
            Some((
                u32::from_str_radix(&f[ssrc][2..], 16).ok()?,
                f[pct - 2].parse().ok()?,
                f[pct - 1].parse().ok()?,
                f[pct + 6].parse().ok()?,
                f[pct + 5].parse().ok()?,
            ))
        })
        .collect()
}

/// Checks trawl's streams against tshark's on the same file: each of tshark's streams is
/// one of trawl's (a different one each: SIPp replays one SSRC in every call, so streams are
/// told apart by their numbers) with the same packets and loss and jitter within 0.1 ms.
fn same_as_tshark(capture: &Path, streams: &[Value]) {
    let t = tshark_streams(capture);
    assert_eq!(t.len(), streams.len(), "{t:?}\n{streams:#?}");
    let mut left: Vec<&Value> = streams.iter().collect();
    for (ssrc, packets, lost, max_j, mean_j) in t {
        let close =
            |s: &Value, field: &str, want: f64| (s[field].as_f64().unwrap() - want).abs() <= 0.1;
        let at = left
            .iter()
            .position(|s| {
                s["ssrc"] == ssrc
                    && s["packets"] == packets
                    && s["lost"] == lost
                    && close(s, "jitter_max_ms", max_j)
                    && close(s, "jitter_mean_ms", mean_j)
            })
            .unwrap_or_else(|| {
                panic!("tshark's {ssrc:#x}: {packets} packets, lost {lost}, jitter max {max_j} mean {mean_j}; trawl's: {left:#?}")
            });
        left.remove(at);
    }
}

/// SIPp's two ends across a veth pair: the caller on the host end, the callee in the
/// namespace, and a directory with the pcaps `uac_pcap` plays.
pub(crate) struct SippLab {
    pub lab: VethLab,
    pub uac_ip: String,
    pub uas_ip: String,
    pub dir: tempfile::TempDir,
}

impl SippLab {
    pub fn new() -> SippLab {
        if let Err(e) = trawl_testkit::netns::lab_available() {
            panic!("needs root, ip and tcpreplay: {e}");
        }
        let lab = VethLab::new(1500).expect("veth lab");
        // A subnet of its own per lab: the tests of one process run at once.
        static LABS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = LABS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let net = 10 + (std::process::id() * 7 + n) % 200;
        let (uac_ip, uas_ip) = (format!("10.77.{net}.1"), format!("10.77.{net}.2"));
        ip(&["addr", "add", &format!("{uac_ip}/24"), "dev", &lab.host]);
        ip(&[
            "-n",
            &lab.ns,
            "addr",
            "add",
            &format!("{uas_ip}/24"),
            "dev",
            &lab.peer,
        ]);
        ip(&["-n", &lab.ns, "link", "set", "lo", "up"]);

        // uac_pcap plays ./pcap/g711a.pcap and ./pcap/dtmf_2833_1.pcap.
        let dir = tempfile::tempdir().unwrap();
        let pcaps = dir.path().join("pcap");
        std::fs::create_dir(&pcaps).unwrap();
        for f in ["g711a.pcap", "dtmf_2833_1.pcap"] {
            let src = PathBuf::from("/usr/share/sip-tester").join(f);
            assert!(
                src.exists(),
                "{} missing: apt-get install sip-tester",
                src.display()
            );
            std::os::unix::fs::symlink(&src, pcaps.join(f)).unwrap();
        }
        SippLab {
            lab,
            uac_ip,
            uas_ip,
            dir,
        }
    }

    /// Places `calls` calls, one at a time, and checks that SIPp counts them all successful.
    pub fn call(&self, calls: u64) {
        let m = calls.to_string();
        let mut uas = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.lab.ns,
                "sipp",
                "-sn",
                "uas",
                "-i",
                &self.uas_ip,
            ])
            .args(["-p", "5060", "-m", &m, "-nostdin"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("sipp (package sip-tester)");
        std::thread::sleep(Duration::from_millis(500));
        let stat = self.dir.path().join("uac.csv");
        let _ = std::fs::remove_file(&stat);
        let uac = Command::new("sipp")
            .current_dir(self.dir.path())
            .args([
                "-sn",
                "uac_pcap",
                &format!("{}:5060", self.uas_ip),
                "-i",
                &self.uac_ip,
            ])
            .args([
                "-p",
                "5061",
                "-m",
                &m,
                "-l",
                "1",
                "-nostdin",
                "-trace_stat",
                "-stf",
            ])
            .arg(&stat)
            .output()
            .expect("sipp");
        let _ = uas.wait();
        assert!(
            uac.status.success(),
            "{}",
            String::from_utf8_lossy(&uac.stdout)
        );
        // SIPp's own count: the last row's cumulative successful and failed calls.
        let stats = std::fs::read_to_string(&stat).unwrap();
        let rows: Vec<Vec<&str>> = stats.lines().map(|l| l.split(';').collect()).collect();
        let (header, last) = (&rows[0], &rows[rows.len() - 1]);
        let col = |name: &str| -> u64 {
            last[header.iter().position(|h| *h == name).unwrap()]
                .parse()
                .unwrap()
        };
        assert_eq!((col("SuccessfulCall(C)"), col("FailedCall(C)")), (calls, 0));
    }
}

#[test]
fn voip_sipp_calls_over_a_veth_are_found_with_outcome_duration_and_streams() {
    let sipp = SippLab::new();
    let (lab, uac_ip, dir) = (&sipp.lab, &sipp.uac_ip, &sipp.dir);
    let cap = dir.path().join("calls.pcap");
    let dumpcap = capture(&lab.host, &cap);
    sipp.call(CALLS);
    stop(dumpcap);

    let out = dir.path().join("out");
    let (calls, streams) = voip(&cap, &out);
    assert_eq!(calls.len() as u64, CALLS, "{calls:#?}");
    for c in &calls {
        assert_eq!(c["status"], 200, "{c}");
        assert_eq!(c["end_reason"], "bye_caller", "{c}");
        assert_eq!(c["caller"], format!("{uac_ip}:5061"));
        assert!(c["ringing_ns"].as_u64() < c["answer_ns"].as_u64());
        // ACK, then pauses of 8 s and 1 s, then BYE.
        let d = c["duration_ms"].as_f64().unwrap();
        assert!((9000.0..9500.0).contains(&d), "duration {d} ms");
        assert_eq!(c["streams"], 2, "{c}");
    }
    assert_eq!(streams.len() as u64, 2 * CALLS);
    for s in &streams {
        assert_eq!(s["orphan"], false, "{s}");
        assert_eq!(s["src_ip"], uac_ip.as_str());
        if s["codec"] == "PCMA" {
            assert_eq!(
                (s["packets"].as_u64(), s["lost"].as_i64()),
                (Some(G711_PACKETS), Some(0))
            );
        } else {
            // RFC 4733 §2.5.1.4: the end of an event is sent three times with one sequence
            // number, so the DTMF stream has two duplicates and a loss of -2.
            assert_eq!(s["codec"], "telephone-event");
            assert_eq!(s["packets"], DTMF_PACKETS);
            assert_eq!(
                (s["duplicated"].as_i64(), s["lost"].as_i64()),
                (Some(2), Some(-2))
            );
        }
    }
    same_as_tshark(&cap, &streams);

    // Impose loss: drop three G.711 frames of the first call, replay the file through the
    // veth (tcpreplay, four times faster), capture it again.
    let frames = Command::new("tshark")
        .args([
            "-o",
            "rtp.heuristic_rtp:TRUE",
            "-Y",
            "rtp.p_type == 8",
            "-T",
            "fields",
        ])
        .args(["-e", "frame.number", "-r"])
        .arg(&cap)
        .output()
        .unwrap();
    let frames: Vec<String> = String::from_utf8_lossy(&frames.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(frames.len() as u64, G711_PACKETS * CALLS);
    let lossy = dir.path().join("lossy.pcap");
    let drop = [&frames[50], &frames[100], &frames[101]];
    let ok = Command::new("editcap")
        .arg(&cap)
        .arg(&lossy)
        .args(drop)
        .status()
        .unwrap();
    assert!(ok.success());
    let replayed = dir.path().join("replayed.pcap");
    let dumpcap = capture(&lab.host, &replayed);
    let sent = lab
        .replay_into_host(&lossy, &["--multiplier=4"])
        .expect("tcpreplay");
    stop(dumpcap);
    let (calls, streams) = voip(&replayed, &dir.path().join("out2"));
    assert_eq!(calls.len() as u64, CALLS);
    let lost: Vec<i64> = streams
        .iter()
        .filter(|s| s["codec"] == "PCMA")
        .map(|s| s["lost"].as_i64().unwrap())
        .collect();
    assert_eq!(lost.len() as u64, CALLS);
    assert!(
        lost.contains(&3) && lost.iter().sum::<i64>() == 3,
        "{lost:?} ({sent} sent)"
    );
    same_as_tshark(&replayed, &streams);
}
