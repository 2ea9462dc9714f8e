//! What a test needs that the repository does not hold: the shared corpus, tools run as
//! oracles (tshark, DuckDB), and what to do when one is missing.
//!
//! Policy: a test never passes for a reason it did not check. When something is missing,
//! - under CI (`CI` set to anything but `false`/`0`) the test panics, naming what is missing
//!   and how to provide it or opt out;
//! - elsewhere the test is skipped: it says `SKIPPED` on stderr and appends one line to the
//!   skip log (`$TRAWL_SKIP_LOG`, else `target/trawl-skipped.txt`), which `scripts/test.sh`
//!   prints at the end, because the harness swallows the output of tests that pass.
//!
//! The one explicit opt-out is `TRAWL_CORPUS=none`: the corpus sweeps are skipped (and said
//! so) even under CI. Every other missing oracle is installed by `scripts/deps.sh`.
use std::ffi::{OsStr, OsString};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::repo_root;

/// What a test that reads the corpus does.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    /// Read the corpus in this directory.
    Run(PathBuf),
    /// Stop, and note why.
    Skip(String),
    /// Fail with this message.
    Fail(String),
}

/// The corpus is `$TRAWL_CORPUS` (a directory, or `none` to opt out), else
/// `../shared/corpus` beside the repository (`repo`); a directory counts when it holds
/// `MANIFEST.tsv`.
fn corpus_verdict(var: Option<OsString>, repo: &Path, ci: bool) -> Verdict {
    const HOW: &str = "set TRAWL_CORPUS=DIR to where it is, or TRAWL_CORPUS=none to skip the \
                       corpus tests";
    let explicit = var.filter(|v| !v.is_empty());
    if explicit.as_deref() == Some(OsStr::new("none")) {
        return Verdict::Skip("the shared corpus (TRAWL_CORPUS=none)".into());
    }
    let dir = explicit
        .clone()
        .map(PathBuf::from)
        .unwrap_or_else(|| repo.join("../shared/corpus"));
    if dir.join("MANIFEST.tsv").is_file() {
        return Verdict::Run(dir);
    }
    let what = format!("the shared corpus (no {}/MANIFEST.tsv)", dir.display());
    // A wrong explicit setting is a mistake, not a reason to skip.
    if explicit.is_some() || ci {
        Verdict::Fail(format!("missing: {what}; {HOW}"))
    } else {
        Verdict::Skip(format!("{what}; {HOW}"))
    }
}

/// The shared corpus directory for a test that reads it, or `None` when the test must stop
/// because the user opted out (`TRAWL_CORPUS=none`) or, outside CI, because there is none
/// (both noted as skips).
///
/// # Panics
/// Panics when the corpus is missing under CI, or when `TRAWL_CORPUS` names a directory that
/// holds no corpus.
pub fn corpus() -> Option<PathBuf> {
    match corpus_verdict(std::env::var_os("TRAWL_CORPUS"), &repo_root(), in_ci()) {
        Verdict::Run(dir) => Some(dir),
        Verdict::Skip(why) => {
            note_skip(&why);
            None
        }
        Verdict::Fail(msg) => panic!("{msg}"),
    }
}

/// Whether `tool` is on `PATH`. When it is not: panics under CI, records a skip elsewhere.
pub fn require_tool(tool: &str) -> bool {
    if on_path(tool) {
        return true;
    }
    skip_or_fail(
        &format!("the tool `{tool}` (not on PATH)"),
        "scripts/deps.sh installs it",
    );
    false
}

/// Whether `python3 -c 'import MODULE'` succeeds. When it does not: panics under CI, records a
/// skip elsewhere.
pub fn require_python_module(module: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        skip_or_fail(
            &format!("the Python module `{module}` (python3 -c 'import {module}' fails)"),
            "scripts/deps.sh installs it (pip)",
        );
    }
    ok
}

fn on_path(tool: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let Some(path) = std::env::var_os("PATH") else {
        return false;
    };
    std::env::split_paths(&path).any(|d| {
        std::fs::metadata(d.join(tool))
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

/// Whether this run is CI's: `CI` set to anything but empty, `false` or `0`.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.as_str(), "" | "false" | "0"))
}

/// A test cannot run because `what` is missing: panics under CI (`how` says how to provide it
/// or opt out), else records a skip.
///
/// # Panics
/// Under CI, always.
pub fn skip_or_fail(what: &str, how: &str) {
    if in_ci() {
        panic!(
            "missing under CI: {what}; {how} (outside CI, i.e. CI unset, the test is skipped \
             with a note instead)"
        );
    }
    note_skip(&format!("{what}; {how}"));
}

/// The skip log: `$TRAWL_SKIP_LOG`, else `target/trawl-skipped.txt` under the repository.
pub fn skip_log() -> PathBuf {
    std::env::var_os("TRAWL_SKIP_LOG")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("target/trawl-skipped.txt"))
}

/// Says `SKIPPED` on stderr and appends a line naming the test to the skip log.
fn note_skip(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("(unnamed test)")
        .to_string();
    let line = format!("SKIPPED {test}: needs {why}");
    eprintln!("{line}");
    let log = skip_log();
    if let Some(dir) = log.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    // One short append per skip: O_APPEND keeps lines of parallel tests whole.
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
    if let Err(e) = written {
        panic!(
            "{line}; and the skip log {} cannot be written: {e}",
            log.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_verdicts() {
        let repo = Path::new("/nonexistent/repo");
        let default = repo.join("../shared/corpus");
        let v = |var: Option<&str>, ci| corpus_verdict(var.map(OsString::from), repo, ci);
        // Opting out works everywhere, CI included.
        assert!(matches!(v(Some("none"), true), Verdict::Skip(_)));
        // Missing where it is looked for by default: a skip outside CI, a failure under CI.
        assert!(matches!(v(None, false), Verdict::Skip(w) if w.contains("TRAWL_CORPUS=none")));
        assert!(matches!(v(Some(""), false), Verdict::Skip(_)));
        let Verdict::Fail(msg) = v(None, true) else {
            panic!("a missing corpus under CI must fail");
        };
        assert!(msg.contains(&default.display().to_string()) && msg.contains("TRAWL_CORPUS=none"));
        // A wrong explicit directory fails even outside CI.
        assert!(matches!(
            v(Some("/nonexistent/corpus"), false),
            Verdict::Fail(_)
        ));
        let here = std::env::temp_dir().join(format!("trawl-needs-{}", std::process::id()));
        std::fs::create_dir_all(&here).unwrap();
        std::fs::write(here.join("MANIFEST.tsv"), "").unwrap();
        assert_eq!(
            v(Some(here.to_str().unwrap()), true),
            Verdict::Run(here.clone())
        );
        std::fs::remove_dir_all(&here).unwrap();
    }

    #[test]
    fn tools_are_looked_up_on_path() {
        assert!(on_path("sh"));
        assert!(!on_path("trawl-no-such-tool"));
    }
}
