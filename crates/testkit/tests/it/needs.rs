//! The missing-oracle policy end to end, on this test binary run again as a child with a
//! chosen environment: under CI a missing oracle fails the test; elsewhere the test passes as
//! a skip that is written to the skip log (which `scripts/test.sh` prints), never silently.
use std::path::Path;
use std::process::{Command, Output};

/// Runs one test of this binary (ignored ones included) with `env` on top of a clean CI /
/// corpus / skip-log environment.
fn run_child(test: &str, env: &[(&str, &str)], log: &Path) -> Output {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--include-ignored", "--test-threads=1"])
        .env_remove("CI")
        .env_remove("TRAWL_CORPUS")
        .env("TRAWL_SKIP_LOG", log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

/// Run only by `missing_oracles_fail_under_ci_and_are_logged_otherwise`, as a child.
#[test]
#[ignore = "a probe run as a child process by missing_oracles_fail_under_ci_and_are_logged_otherwise"]
fn probe_missing_tool() {
    assert!(!trawl_testkit::require_tool("trawl-no-such-tool"));
}

#[test]
fn missing_oracles_fail_under_ci_and_are_logged_otherwise() {
    let dir = std::env::temp_dir().join(format!("trawl-needs-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let log = dir.join("skipped.txt");
    let probe = "needs::probe_missing_tool";
    let sweep = "corpus_sweep::every_corpus_capture_through_the_flow_meter";

    // A missing tool: a logged skip outside CI ...
    let out = run_child(probe, &[], &log);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("SKIPPED needs::probe_missing_tool: needs the tool `trawl-no-such-tool`"),
        "{text}"
    );
    // ... and a failure naming it under CI.
    let out = run_child(probe, &[("CI", "true")], &log);
    assert!(!out.status.success(), "passed under CI without the tool");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("missing under CI: the tool `trawl-no-such-tool`"),
        "{stdout}"
    );

    // The corpus: TRAWL_CORPUS=none opts out (a logged skip, CI or not); a corpus directory
    // that is not one fails, CI or not.
    std::fs::remove_file(&log).unwrap();
    let out = run_child(sweep, &[("CI", "true"), ("TRAWL_CORPUS", "none")], &log);
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("needs the shared corpus (TRAWL_CORPUS=none)"),
        "{text}"
    );
    let nowhere = dir.join("no-corpus-here");
    let out = run_child(sweep, &[("TRAWL_CORPUS", nowhere.to_str().unwrap())], &log);
    assert!(!out.status.success(), "passed without a corpus");
    assert!(String::from_utf8_lossy(&out.stdout).contains("no-corpus-here/MANIFEST.tsv"));
    std::fs::remove_dir_all(&dir).unwrap();
}
