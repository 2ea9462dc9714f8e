//! Where records go, and what the run says about it (issue 27): a monitor's record files are
//! appended to across restarts and reopened on SIGHUP (logrotate), a collector that refuses
//! the connection fails a capture-file run, the JSON summary is one object, a composition's
//! missing input is found before any output is touched, the flow table's size is reported
//! without a per-flow figure that means nothing.
//! <https://github.com/trawl/trawl/issues/27>
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use trawl_testkit::netns::VethLab;

use crate::live::{converted, counter_sum, field_sum, lab, pcap, trawl_live, wait_json};

/// Flow records the meters of a monitor's run produced.
fn records(summary: &Value) -> u64 {
    counter_sum(summary, "flow_meter", "records")
}

/// Series rows its series writers wrote.
fn series_rows(summary: &Value) -> u64 {
    field_sum(summary, "series_writer", "items_in")
}
use crate::{testdata, trawl};

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(String::from)
        .collect()
}

/// A monitor: CSV flows (1 s idle timeout, so records leave while the monitor runs) and CSV
/// series on the lab's interface, written as an old `trawl run` configuration and converted.
fn run_config(dir: &Path, lab: &VethLab, flows: &Path, series: &Path) -> PathBuf {
    converted(
        dir,
        &format!(
            "[capture]\ninterfaces = [\"{}\"]\n[ring]\nenabled = false\n\
             [flows]\noutput = \"{}\"\nformat = \"csv\"\nidle = \"1s\"\n\
             [series]\noutput = \"{}\"\nformat = \"csv\"\n",
            lab.host,
            flows.display(),
            series.display()
        ),
    )
}

/// Runs the monitor while android.pcap (500 packets) is replayed onto its interface, stops it
/// with SIGINT, and returns its JSON summary.
fn monitor_once(lab: &VethLab, config: &Path) -> Value {
    let child = trawl_live(&["run", "-c", config.to_str().unwrap(), "--summary", "json"]);
    std::thread::sleep(Duration::from_millis(700));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, "-INT");
    let (_, summary) = wait_json(child);
    summary
}

#[test]
fn issue_27_a_restarted_monitor_appends_to_its_flow_and_series_files() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let (flows, series) = (dir.path().join("flows.csv"), dir.path().join("series.csv"));
    let config = run_config(dir.path(), &lab, &flows, &series);

    let first = monitor_once(&lab, &config);
    let (flows1, series1) = (lines(&flows), lines(&series));
    assert_eq!(flows1.len() as u64, 1 + records(&first));
    assert!(
        flows1.len() > 4 && series1.len() > 1,
        "{flows1:?} {series1:?}"
    );

    let second = monitor_once(&lab, &config);
    let (flows2, series2) = (lines(&flows), lines(&series));
    // What the first run wrote stays as it was, the second run's records follow, and the
    // header is not written again.
    assert_eq!(flows2[..flows1.len()], flows1[..]);
    assert_eq!(flows2.len() as u64, flows1.len() as u64 + records(&second));
    assert_eq!(series2[..series1.len()], series1[..]);
    assert_eq!(
        series2.len() as u64,
        series1.len() as u64 + series_rows(&second)
    );
    for l in [&flows2, &series2] {
        assert_eq!(l.iter().filter(|x| **x == l[0]).count(), 1, "one header");
    }
}

#[test]
fn issue_27_the_monitor_refuses_to_append_csv_to_a_file_of_other_columns() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let (flows, series) = (dir.path().join("flows.csv"), dir.path().join("series.csv"));
    std::fs::write(&series, "a,b\n1,2\n").unwrap();
    let config = run_config(dir.path(), &lab, &flows, &series);
    let out = trawl(&["run", "-c", config.to_str().unwrap(), "--duration", "1s"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("cannot append to") && stderr.contains("series.csv"),
        "{stderr}"
    );
    assert_eq!(std::fs::read_to_string(&series).unwrap(), "a,b\n1,2\n");
    assert!(!flows.exists(), "refused before any output is opened");
}

/// logrotate's way: rename the file, send SIGHUP; records of before the signal are in the
/// renamed file, records of after it in a new file at the path (with its own header), none
/// lost or written twice.
/// Runs `trawl run -c config` on the lab with traffic before and after logrotate's move: the
/// two files renamed to `NAME.1`, then SIGHUP. Returns the summary and the renamed paths.
fn rotated_run(
    lab: &VethLab,
    config: &Path,
    flows: &Path,
    series: &Path,
) -> (serde_json::Value, PathBuf, PathBuf) {
    let child = trawl_live(&["run", "-c", config.to_str().unwrap(), "--summary", "json"]);
    std::thread::sleep(Duration::from_millis(700));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    // The replayed flows end by the 1 s idle timeout and reach the writers.
    std::thread::sleep(Duration::from_millis(3000));
    let old_flows = flows.with_extension("csv.1");
    let old_series = series.with_extension("csv.1");
    std::fs::rename(flows, &old_flows).unwrap();
    std::fs::rename(series, &old_series).unwrap();
    signal(&child, "-HUP");
    std::thread::sleep(Duration::from_millis(500));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    std::thread::sleep(Duration::from_millis(300));
    signal(&child, "-INT");
    let (_, summary) = wait_json(child);
    (summary, old_flows, old_series)
}

#[test]
fn issue_27_sighup_reopens_the_monitor_files_at_their_paths() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let (flows, series) = (dir.path().join("flows.csv"), dir.path().join("series.csv"));
    let config = run_config(dir.path(), &lab, &flows, &series);
    let (summary, old_flows, old_series) = rotated_run(&lab, &config, &flows, &series);

    let (before, after) = (lines(&old_flows), lines(&flows));
    assert_eq!(before[0], after[0], "the new file has the header");
    assert!(before.len() > 1 && after.len() > 1, "{before:?} {after:?}");
    assert_eq!(
        (before.len() - 1 + after.len() - 1) as u64,
        records(&summary),
        "every record once"
    );
    // A series writer writes its header with its first rows, and the replay's seconds stay
    // open for late packets (`series_window`, 4 s): the renamed file may hold nothing yet.
    let (before, after) = (lines(&old_series), lines(&series));
    let header = after.first().or(before.first()).expect("a series header");
    for file in [&before, &after] {
        assert!(file.first().is_none_or(|h| h == header), "{file:?}");
    }
    let seconds: Vec<u64> = before
        .iter()
        .skip(1)
        .chain(after.iter().skip(1))
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect();
    assert!(seconds.windows(2).all(|w| w[0] < w[1]), "{seconds:?}");
    assert_eq!(seconds.len() as u64, series_rows(&summary));
}

/// A live composition: capture on the lab's interface into a flow meter, records and rows to
/// CSV writers.
fn live_composition(dir: &Path, lab: &VethLab) -> PathBuf {
    let path = dir.join("comp.toml");
    std::fs::write(
        &path,
        format!(
            r#"
            [[block]]
            name = "capture"
            type = "afpacket_source"
            interface = "{}"
            [[block]]
            name = "meter"
            type = "flow_meter"
            idle = "1s"
            [[block]]
            name = "flows"
            type = "flow_writer"
            format = "csv"
            path = "{}"
            [[block]]
            name = "series"
            type = "series_writer"
            format = "csv"
            path = "{}"
            [[connection]]
            from = "capture.packets"
            to = "meter.packets"
            [[connection]]
            from = "meter.flows"
            to = "flows.flows"
            [[connection]]
            from = "meter.series"
            to = "series.series"
            "#,
            lab.host,
            dir.join("flows.csv").display(),
            dir.join("series.csv").display()
        ),
    )
    .unwrap();
    path
}

fn block_items_in(summary: &Value, name: &str) -> u64 {
    summary["blocks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == name)
        .unwrap()["items_in"]
        .as_u64()
        .unwrap()
}

#[test]
fn issue_27_composition_writers_append_across_restarts_and_reopen_on_sighup() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let comp = live_composition(dir.path(), &lab);
    let (flows, series) = (dir.path().join("flows.csv"), dir.path().join("series.csv"));
    // A previous run's records.
    let first = monitor_once(&lab, &comp);
    let flows1 = lines(&flows);
    assert_eq!(flows1.len() as u64, 1 + block_items_in(&first, "flows"));
    assert!(flows1.len() > 4, "{flows1:?}");

    // Restarted: appends; then rotated while it runs.
    let (second, old_flows, old_series) = rotated_run(&lab, &comp, &flows, &series);

    let (before, after) = (lines(&old_flows), lines(&flows));
    assert_eq!(
        before[..flows1.len()],
        flows1[..],
        "the first run's records stay"
    );
    assert!(before.len() > flows1.len(), "records before the signal");
    assert_eq!(after[0], flows1[0], "the new file starts with the header");
    assert!(after.len() > 1, "records after the signal");
    assert_eq!(
        (before.len() - flows1.len() + after.len() - 1) as u64,
        block_items_in(&second, "flows"),
        "every record of the second run once"
    );
    let (before, after) = (lines(&old_series), lines(&series));
    assert_eq!(before[0], after[0]);
    assert_eq!(
        before
            .iter()
            .chain(&after)
            .filter(|l| **l == before[0])
            .count(),
        2,
        "one header per file"
    );
}

#[test]
fn issue_27_a_collector_that_refuses_fails_a_file_run_with_its_error() {
    // A port nobody listens on: bound, then closed.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dest = format!("ipfix+tcp://127.0.0.1:{port}");
    let sample = testdata("pcaps/android.pcap");
    let out = trawl(&["flows", "-r", &sample, "-o", "/dev/null", "--export", &dest]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&format!("trawl: error: export to {dest} failed"))
            && stderr.contains("Connection refused"),
        "{stderr}"
    );
    let out = trawl(&[
        "flows",
        "-r",
        &sample,
        "-o",
        "/dev/null",
        "--export",
        &dest,
        "--summary",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let s = one_json_object(&out.stderr);
    let e = &s["exporters"][0];
    assert_eq!(e["destination"], dest.as_str());
    assert_eq!(e["dropped_send"], s["records"]);
    assert!(
        e["last_error"]
            .as_str()
            .is_some_and(|m| m.contains("Connection refused")),
        "{e}"
    );
}

/// Standard error of a `--summary json` run: exactly one JSON object, nothing else.
fn one_json_object(stderr: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stderr);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "one line on standard error: {text}");
    let v: Value = serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("{e}: {text}"));
    assert!(v.is_object(), "{text}");
    v
}

#[test]
fn issue_27_the_json_summary_is_one_object_with_the_exporters_inside() {
    // A collector that accepts and reads everything.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reader = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut s, &mut got).unwrap();
        got.len()
    });
    let dest = format!("ipfix+tcp://127.0.0.1:{port}");
    let sample = testdata("pcaps/android.pcap");
    let out = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args([
            "flows",
            "-r",
            &sample,
            "-o",
            "/dev/null",
            "--summary",
            "json",
        ])
        .args(["--export", &dest])
        .stdout(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = one_json_object(&out.stderr);
    assert_eq!(s["command"], "flows");
    let e = &s["exporters"][0];
    assert_eq!(e["destination"], dest.as_str());
    assert_eq!(e["records"], s["records"]);
    assert_eq!(e["dropped_send"], 0);
    assert_eq!(e["last_error"], Value::Null);
    assert_eq!(reader.join().unwrap() as u64, e["bytes"].as_u64().unwrap());
}

#[test]
fn issue_27_a_missing_input_fails_check_and_run_before_outputs_are_touched() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pcap");
    let (flows, series) = (
        dir.path().join("flows.jsonl"),
        dir.path().join("series.csv"),
    );
    std::fs::write(&flows, "{\"kept\":1}\n").unwrap();
    let comp = dir.path().join("comp.toml");
    std::fs::write(
        &comp,
        format!(
            r#"
            [[block]]
            name = "file"
            type = "pcap_source"
            files = ["{}", "{}"]
            [[block]]
            name = "meter"
            type = "flow_meter"
            [[block]]
            name = "flows"
            type = "flow_writer"
            path = "{}"
            [[block]]
            name = "series"
            type = "series_writer"
            path = "{}"
            [[connection]]
            from = "file.packets"
            to = "meter.packets"
            [[connection]]
            from = "meter.flows"
            to = "flows.flows"
            [[connection]]
            from = "meter.series"
            to = "series.series"
            "#,
            testdata("pcaps/android.pcap"),
            missing.display(),
            flows.display(),
            series.display()
        ),
    )
    .unwrap();
    let comp = comp.to_str().unwrap();
    for args in [vec!["check", "-c", comp], vec!["run", "-c", comp]] {
        let out = trawl(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(&format!("cannot read `{}`", missing.display())),
            "{args:?}: {stderr}"
        );
        assert!(!String::from_utf8_lossy(&out.stdout).contains("valid"));
        // No writer was built: the flow file is as it was, the series file was not created.
        assert_eq!(std::fs::read_to_string(&flows).unwrap(), "{\"kept\":1}\n");
        assert!(!series.exists(), "{args:?}");
    }
}

#[test]
fn issue_27_a_small_capture_reports_the_table_size_not_bytes_per_flow() {
    let sample = testdata("pcaps/android.pcap");
    let out = trawl(&[
        "flows",
        "-r",
        &sample,
        "-o",
        "/dev/null",
        "--summary",
        "json",
    ]);
    assert!(out.status.success());
    let s = one_json_object(&out.stderr);
    assert_eq!(s["peak_flows"], 53);
    assert_eq!(s["table_capacity"], 4_194_304);
    assert!(s["table_bytes"].as_u64().unwrap() > 4_194_304 * 320);
    assert_eq!(s["bytes_per_flow"], Value::Null, "{s}");
    let out = trawl(&["flows", "-r", &sample, "-o", "/dev/null"]);
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("flow table: 4194304 flows (") && text.contains("peak 53 concurrent;"),
        "{text}"
    );
    assert!(!text.contains("per flow"), "{text}");
}

/// Live, records a refusing collector did not get are counted, the status lines show the
/// exporter's losses while the run goes, and the end names the error. Capture went on; the
/// run exits 1 as every composition whose block counted an error does (one engine: a
/// refusing collector fails `trawl run -c` and `trawl run -i` alike).
#[test]
fn issue_27_a_refusing_collector_is_named_in_live_status_lines_and_summary() {
    let lab = lab();
    let dir = tempfile::tempdir().unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dest = format!("ipfix+tcp://127.0.0.1:{port}");
    let config = converted(
        dir.path(),
        &format!(
            "[capture]\ninterfaces = [\"{}\"]\n[ring]\nenabled = false\n[flows]\nidle = \"1s\"\n\
             [[export]]\nto = \"{dest}\"\n",
            lab.host
        ),
    );
    let child = trawl_live(&[
        "run",
        "-c",
        config.to_str().unwrap(),
        "--stats-interval",
        "500ms",
        "--summary",
        "json",
    ]);
    std::thread::sleep(Duration::from_millis(700));
    lab.replay_into_host(&pcap("android.pcap"), &["--topspeed"])
        .expect("replay");
    // Records end by the idle timeout, go to the exporter, and a status line follows.
    std::thread::sleep(Duration::from_millis(3000));
    signal(&child, "-INT");
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let summary: Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert!(summary["failure"].is_null(), "{summary}");
    let export = format!("export_{}: ", lab.host);
    let status: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("trawl: ") && l.contains(" packets (") && l.contains(&export))
        .collect();
    assert!(
        status.iter().any(|l| l.contains("dropped_send=")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("export {dest}: ")) && stderr.contains("Connection refused"),
        "{stderr}"
    );
    // The status lines also say how many packets the kernel dropped so far (the soak needs to
    // know when drops happened, not only how many): the same count as the summary's at the end.
    let drops = summary["kernel_drops"].as_u64().unwrap();
    let last = status.last().expect("a status line");
    assert!(last.contains(" kernel drops"), "{last}");
    let told: u64 = last
        .split(" kernel drops")
        .next()
        .and_then(|head| head.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no drop count in {last}"));
    assert!(told <= drops, "{last} / {drops}");
    assert!(
        counter_sum(&summary, "flow_export", "dropped_send") > 0,
        "{summary}"
    );
    assert!(
        field_sum(&summary, "flow_export", "errors") > 0,
        "{summary}"
    );
}
