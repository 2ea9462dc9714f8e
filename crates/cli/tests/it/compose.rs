//! `trawl run -c composition.toml`, `trawl check`, `trawl blocks` end to end.
use crate::{summary, testdata, trawl};

fn composition(dir: &std::path::Path, files: &[String]) -> std::path::PathBuf {
    let list: Vec<String> = files.iter().map(|f| format!("\"{f}\"")).collect();
    let text = format!(
        r#"
        # Two threads: reading and metering on one, the SYN-flood detector on the other.
        [[pool]]
        name = "read"
        threads = 1
        [[pool]]
        name = "apps"
        threads = 1

        [[block]]
        name = "files"
        type = "pcap_source"
        pool = "read"
        files = [{}]

        [[block]]
        name = "meter"
        type = "flow_meter"
        pool = "read"

        [[block]]
        name = "flows"
        type = "flow_writer"
        pool = "read"
        path = "{flows}"

        [[block]]
        name = "syn"
        type = "synflood"
        pool = "apps"

        [[block]]
        name = "alarms"
        type = "event_writer"
        pool = "apps"
        path = "{events}"

        [[connection]]
        from = "files.packets"
        to = ["meter.packets", "syn.packets"]

        [[connection]]
        from = "meter.flows"
        to = "flows.flows"

        [[connection]]
        from = "syn.alarms"
        to = "alarms.events"
        "#,
        list.join(", "),
        flows = dir.join("flows.json").display(),
        events = dir.join("events.jsonl").display(),
    );
    let path = dir.join("comp.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_composition_writes_what_trawl_flows_writes_and_reports_every_block() {
    let dir = tempfile::tempdir().unwrap();
    let sample = testdata("pcaps/android.pcap");
    let comp = composition(dir.path(), std::slice::from_ref(&sample));
    let path = comp.to_str().unwrap();
    let check = trawl(&["check", "-c", path]);
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    let plan = String::from_utf8(check.stdout).unwrap();
    assert!(
        plan.contains("files.packets -> syn.packets: packets (queue of 1024"),
        "{plan}"
    );
    assert!(
        plan.contains("files.packets -> meter.packets: packets (direct call)"),
        "{plan}"
    );

    let out = trawl(&["run", "-c", path, "--summary", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = summary(&out);
    assert_eq!(s["command"], "run");
    let block = |name: &str| {
        s["blocks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["name"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(block("files")["items_out"], 500);
    assert_eq!(block("syn")["items_in"], 500);
    assert_eq!(block("meter")["items_in"], 500);
    let plain = trawl(&["flows", "-r", &sample]);
    let written = std::fs::read(dir.path().join("flows.json")).unwrap();
    assert_eq!(
        written, plain.stdout,
        "the composition's records are trawl flows' records"
    );
    assert_eq!(
        block("flows")["items_in"].as_u64().unwrap(),
        written.iter().filter(|&&b| b == b'\n').count() as u64
    );
    assert_eq!(std::fs::read(dir.path().join("events.jsonl")).unwrap(), b"");
}

/// A damaged file is read as far as it goes, counted, and the others are read (a missing one
/// is refused before the run starts: `outputs.rs`).
#[test]
fn a_damaged_file_is_counted_and_the_others_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        testdata("pcaps/test_damaged.pcap"),
        testdata("pcaps/android.pcap"),
    ];
    let comp = composition(dir.path(), &files);
    let out = trawl(&["run", "-c", comp.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("block files:") && stderr.contains("test_damaged.pcap"),
        "{stderr}"
    );
    let written = std::fs::read_to_string(dir.path().join("flows.json")).unwrap();
    assert!(
        written.lines().count() > 20,
        "android.pcap's flows are there"
    );
}

#[test]
fn check_lists_every_problem_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        r#"
        [[block]]
        name = "src"
        type = "pcap_source"
        files = []
        [[block]]
        name = "m"
        type = "flow_metre"
        [[block]]
        name = "w"
        type = "event_writer"
        path = "/dev/null"
        [[connection]]
        from = "src.packets"
        to = "w.events"
        "#,
    )
    .unwrap();
    for cmd in ["check", "run"] {
        let out = trawl(&[cmd, "-c", path.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("bad.toml: 5 problems"), "{stderr}");
        assert!(
            stderr.contains("input `w.events` (events) is required but nothing is connected"),
            "{stderr}"
        );
        assert!(
            stderr.contains("block `src` (pcap_source): `files` is empty"),
            "{stderr}"
        );
        assert!(
            stderr.contains("unknown block type `flow_metre`"),
            "{stderr}"
        );
        assert!(
            stderr.contains("type mismatch: `src.packets` sends packets, `w.events` takes events"),
            "{stderr}"
        );
    }
}

#[test]
fn run_flags_that_belong_in_the_composition_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let comp = composition(dir.path(), &[testdata("pcaps/android.pcap")]);
    let out = trawl(&[
        "run",
        "-c",
        comp.to_str().unwrap(),
        "-i",
        "lo",
        "--flows",
        "x",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr.contains("-i/--interface, --flows cannot be combined with a composition file"),
        "{stderr}"
    );
}

/// `trawl run` speaks compositions only: an old-format configuration is refused by `run` and
/// `check` with the converter named, and the converter's composition is valid.
#[test]
fn old_run_configurations_are_refused_and_convert_config_converts_them() {
    let old = testdata("trawl-run-old-format.toml");
    for cmd in [
        &["check", "-c", old.as_str()][..],
        &["run", "-c", old.as_str()],
    ] {
        let out = trawl(cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("old format") && stderr.contains("trawl convert-config"),
            "{stderr}"
        );
    }
    let out = trawl(&["convert-config", old.as_str()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let comp = dir.path().join("converted.toml");
    std::fs::write(&comp, &out.stdout).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // The example's eth0, with its shared ring (rings are named NAME-IFACE-WORKER).
    assert!(text.contains("interface = \"eth0\""), "{text}");
    assert!(text.contains("ring = \"trawl-eth0-0\""), "{text}");
    let out = trawl(&["check", "-c", comp.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn blocks_lists_every_type_with_its_gates() {
    let out = trawl(&["blocks", "--format", "json"]);
    assert!(out.status.success());
    let list: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = list.iter().map(|b| b["type"].as_str().unwrap()).collect();
    for t in [
        "pcap_source",
        "flow_meter",
        "synflood",
        "heavy_hitters",
        "count",
    ] {
        assert!(names.contains(&t), "{names:?}");
    }
    let meter = list.iter().find(|b| b["type"] == "flow_meter").unwrap();
    assert_eq!(meter["inputs"][0]["name"], "packets");
    assert_eq!(meter["outputs"][1]["type"], "series");
    let text = trawl(&["blocks"]);
    assert!(String::from_utf8_lossy(&text.stdout).contains("synflood — detects SYN floods"));
}

/// Issue 27 item 12: a composition's meter and capture settings obey the same limits as the
/// flags, said with the settings' names; so does `trawl run`'s configuration file.
#[test]
fn out_of_range_settings_are_refused_with_the_allowed_range() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("limits.toml");
    std::fs::write(
        &path,
        r#"
        [[block]]
        name = "cap"
        type = "afpacket_source"
        interface = "lo"
        snaplen = 99999999999
        [[block]]
        name = "m"
        type = "flow_meter"
        active = "0s"
        [[block]]
        name = "w"
        type = "flow_writer"
        path = "/dev/null"
        [[connection]]
        from = "cap.packets"
        to = "m.packets"
        [[connection]]
        from = "m.flows"
        to = "w.flows"
        "#,
    )
    .unwrap();
    let out = trawl(&["check", "-c", path.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("`active` must be between 1ms and 7d (got 0s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("`snaplen` must be between 64 and 256KiB (got 99999999999)"),
        "{stderr}"
    );

    let config = dir.path().join("run.toml");
    std::fs::write(
        &config,
        "[capture]\ninterfaces = [\"lo\"]\nblocks = 1\n[flows]\nidle = \"0s\"\n",
    )
    .unwrap();
    // Old-format files are read by the converter, which checks them with their keys' names.
    let out = trawl(&["convert-config", config.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("capture.blocks must be between 2 and 65536 (got 1)"),
        "{stderr}"
    );
    std::fs::write(
        &config,
        "[capture]\ninterfaces = [\"lo\"]\n[flows]\nidle = \"0s\"\n",
    )
    .unwrap();
    let out = trawl(&["convert-config", config.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("flows.idle must be between 1ms and 1d (got 0s)"),
        "{stderr}"
    );
}

/// A composition writing to standard output whose reader goes away (`| head`) ends at once and
/// cleanly, as `trawl flows` always did: exit 0, no error (issue 19: one output with EPIPE
/// handling for commands and blocks). Before, the writer block failed the run.
#[test]
fn a_composition_whose_output_pipe_closes_ends_quietly_and_fast() {
    let dir = tempfile::tempdir().unwrap();
    let comp = dir.path().join("c.toml");
    std::fs::write(
        &comp,
        format!(
            r#"
            [[block]]
            name = "file"
            type = "pcap_source"
            files = ["{}"]
            [[block]]
            name = "meter"
            type = "flow_meter"
            idle = "1s"
            [[block]]
            name = "flows"
            type = "flow_writer"
            path = "-"
            [[connection]]
            from = "file.packets"
            to = "meter.packets"
            [[connection]]
            from = "meter.flows"
            to = "flows.flows"
            "#,
            testdata("oracle/1kxun.pcap.gz")
        ),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["run", "-c", comp.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 64];
    let _ = std::io::Read::read(&mut stdout, &mut first).unwrap();
    drop(stdout);
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("Broken pipe"), "{stderr}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20));
}

/// `trawl flows -r ... --print-composition` prints a composition that `trawl check -c`
/// accepts and that `trawl run -c` runs to the same records as the flags did (issue 19).
#[test]
fn flows_print_their_composition_which_runs_to_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let file = testdata("oracle/many-protocols.pcap.gz");
    let args = ["flows", "-r", &file, "-f", "tcp or udp", "--idle", "10s"];
    let printed = trawl(&[&args[..], &["--print-composition"]].concat());
    assert!(printed.status.success());
    let text = String::from_utf8(printed.stdout).unwrap();
    assert!(text.contains("type = \"pcap_source\""), "{text}");
    assert!(text.contains("idle = \"10s\""), "{text}");
    let comp = dir.path().join("flows.toml");
    std::fs::write(&comp, &text).unwrap();
    let checked = trawl(&["check", "-c", comp.to_str().unwrap()]);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let ran = trawl(&["run", "-c", comp.to_str().unwrap(), "--summary", "none"]);
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let flags = trawl(&[&args[..], &["--summary", "none"]].concat());
    assert!(!flags.stdout.is_empty());
    assert!(
        ran.stdout == flags.stdout,
        "the composition wrote other records"
    );
}

/// Runs trawl in `cwd`.
fn trawl_in(cwd: &std::path::Path, args: &[&str], stdin: Option<&str>) -> std::process::Output {
    use std::io::Write;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .current_dir(cwd)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run trawl");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    child.wait_with_output().unwrap()
}

/// Issue 19: paths in a composition file are relative to the file's directory, not the
/// working directory: compositions/offline.toml copied into `lab/` reads `lab/capture.pcap`
/// and writes `lab/flows.jsonl`, `lab/series.csv`, `lab/alarms.jsonl`, whichever directory
/// `trawl run -c lab/offline.toml` runs in. A composition on standard input, and `--set`
/// values, stay relative to the working directory.
#[test]
fn paths_in_a_composition_file_are_relative_to_its_directory() {
    let root = tempfile::tempdir().unwrap();
    let lab = root.path().join("lab");
    std::fs::create_dir(&lab).unwrap();
    let offline = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../compositions/offline.toml"
    ))
    .unwrap();
    std::fs::write(lab.join("offline.toml"), &offline).unwrap();
    let sample = testdata("pcaps/android.pcap");
    std::fs::copy(&sample, lab.join("capture.pcap")).unwrap();
    let want = trawl(&["flows", "-r", &sample, "--summary", "none"]).stdout;
    assert!(!want.is_empty());
    let ok = |out: &std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };

    // From the directory above, and from an unrelated one (an absolute path to the file).
    let checked = trawl_in(root.path(), &["check", "-c", "lab/offline.toml"], None);
    ok(&checked);
    for (cwd, file) in [
        (root.path().to_path_buf(), "lab/offline.toml".to_string()),
        (
            std::path::PathBuf::from("/"),
            lab.join("offline.toml").display().to_string(),
        ),
    ] {
        let _ = std::fs::remove_file(lab.join("flows.jsonl"));
        let out = trawl_in(&cwd, &["run", "-c", &file, "--summary", "none"], None);
        ok(&out);
        assert!(
            std::fs::read(lab.join("flows.jsonl")).unwrap() == want,
            "{cwd:?}"
        );
        assert!(lab.join("series.csv").exists() && lab.join("alarms.jsonl").exists());
        assert!(!cwd.join("flows.jsonl").exists());
    }

    // `--set` is the command line's: relative to the working directory.
    let elsewhere = root.path().join("elsewhere.jsonl");
    let out = trawl_in(
        root.path(),
        &[
            "run",
            "-c",
            "lab/offline.toml",
            "--set",
            "flows.path=elsewhere.jsonl",
            "--summary",
            "none",
        ],
        None,
    );
    ok(&out);
    assert!(std::fs::read(&elsewhere).unwrap() == want);

    // Standard input has no directory: the working directory's paths.
    std::fs::copy(&sample, root.path().join("capture.pcap")).unwrap();
    let out = trawl_in(
        root.path(),
        &["run", "-c", "-", "--summary", "none"],
        Some(&offline),
    );
    ok(&out);
    assert!(std::fs::read(root.path().join("flows.jsonl")).unwrap() == want);

    // A missing file is named as the path the composition's directory gives it.
    std::fs::remove_file(lab.join("capture.pcap")).unwrap();
    let out = trawl_in(root.path(), &["check", "-c", "lab/offline.toml"], None);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("lab/capture.pcap"), "{err}");
}

/// `trawl flows -r` with payload bytes and exporters, and `trawl series -r` with an exporter,
/// print their compositions too (refused before issue 19 moved them onto the runtime), and
/// `trawl run -c` runs them to the same records, payload columns and exported files.
#[test]
fn issue_19_flows_with_payload_and_exporters_print_a_composition_that_runs_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let file = testdata("oracle/443-chrome.pcap");
    for command in ["flows", "series"] {
        let run = |print: bool, tag: &str| -> (Vec<u8>, String) {
            let json = dir.path().join(format!("{command}-{tag}.json"));
            let export = format!("json:{}", json.display());
            let mut args = vec![command, "-r", &file, "--export", &export];
            if command == "flows" {
                // With exporters, records go to standard output only when -o names a file.
                args.extend(["--payload-bytes", "16", "-o", "/dev/stdout"]);
            }
            let out = if print {
                let printed = trawl(&[&args[..], &["--print-composition"]].concat());
                assert!(
                    printed.status.success(),
                    "{}",
                    String::from_utf8_lossy(&printed.stderr)
                );
                let comp = dir.path().join(format!("{command}.toml"));
                std::fs::write(&comp, &printed.stdout).unwrap();
                let checked = trawl(&["check", "-c", comp.to_str().unwrap()]);
                assert!(checked.status.success());
                trawl(&["run", "-c", comp.to_str().unwrap(), "--summary", "none"])
            } else {
                trawl(&[&args[..], &["--summary", "none"]].concat())
            };
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            (out.stdout, std::fs::read_to_string(&json).unwrap())
        };
        let (flags_out, flags_export) = run(false, "flags");
        let (comp_out, comp_export) = run(true, "composed");
        assert!(
            !flags_out.is_empty() && !flags_export.is_empty(),
            "{command}"
        );
        if command == "flows" {
            let with_payload = String::from_utf8_lossy(&flags_out)
                .lines()
                .filter(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    v["fwd_payload"].as_str().unwrap().len() == 32
                        || v["rev_payload"].as_str().unwrap().len() == 32
                })
                .count();
            assert!(with_payload > 0, "payload bytes written");
        }
        assert!(flags_out == comp_out, "{command}: other records or rows");
        assert_eq!(
            flags_export, comp_export,
            "{command}: other exported records"
        );
    }
}
