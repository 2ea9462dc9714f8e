//! The CLI as a person meets it: completions and man pages generated from the clap
//! definitions, the message when a command has no input, log levels, and `trawl collect
//! --print-composition` giving a composition that `trawl run -c` runs to the same records.
use std::path::Path;
use std::process::{Command, Output};

fn trawl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(args)
        .output()
        .expect("run trawl")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The subcommands `trawl --help` lists.
fn subcommands() -> Vec<String> {
    let help = stdout(&trawl(&["--help"]));
    let section = help
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands section");
    let names: Vec<String> = section
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(names.len() > 10, "{help}");
    names
}

/// The long flags `trawl COMMAND --help` lists.
fn long_flags(command: &str) -> Vec<String> {
    let help = stdout(&trawl(&[command, "--help"]));
    let mut flags: Vec<String> = help
        .split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[' || c == ']')
        .filter(|w| w.starts_with("--") && w.len() > 2)
        .map(|w| {
            w.trim_end_matches(|c: char| !c.is_ascii_alphanumeric())
                .to_string()
        })
        .collect();
    flags.sort();
    flags.dedup();
    flags
}

#[test]
fn bash_completion_mentions_every_subcommand() {
    let out = trawl(&["completions", "bash"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let script = stdout(&out);
    for name in subcommands() {
        // The case that completes the subcommand's own arguments.
        assert!(
            script.contains(&format!("trawl,{name})")),
            "the bash completion does not complete `{name}`"
        );
    }
    for shell in ["zsh", "fish"] {
        let out = trawl(&["completions", shell]);
        assert!(
            out.status.success() && stdout(&out).contains("collect"),
            "{shell}"
        );
    }
}

#[test]
fn man_page_of_flows_lists_its_flags() {
    let dir = tempfile::tempdir().unwrap();
    let out = trawl(&["man", &dir.path().display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    for name in subcommands().iter().filter(|n| *n != "help") {
        assert!(
            dir.path().join(format!("trawl-{name}.1")).exists(),
            "no man page for `{name}`"
        );
    }
    let page = std::fs::read_to_string(dir.path().join("trawl-flows.1")).unwrap();
    let flags = long_flags("flows");
    assert!(
        flags.iter().any(|f| f == "--read") && flags.len() > 15,
        "{flags:?}"
    );
    for flag in flags {
        // roff writes a hyphen as `\-`.
        let roff = flag.replace('-', "\\-");
        assert!(page.contains(&roff), "trawl-flows.1 does not list {flag}");
    }
    // Without a directory: trawl(1) on standard output.
    let out = trawl(&["man"]);
    assert!(out.status.success() && stdout(&out).starts_with(".ie"));
}

#[test]
fn flows_and_series_without_input_say_give_r_file_or_i_iface() {
    for command in ["flows", "series"] {
        let out = trawl(&[command]);
        assert_eq!(out.status.code(), Some(2), "{command}: a usage error");
        assert!(
            stderr(&out).contains("give -r FILE or -i IFACE"),
            "{command}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn log_lines_name_their_component_and_quiet_hides_notes() {
    // An empty database: `trawl query` notes that it holds no block (an info event).
    let db = tempfile::tempdir().unwrap();
    let db = db.path().display().to_string();
    let out = trawl(&["query", "-d", &db, "sip"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let line = stderr(&out)
        .lines()
        .find(|l| l.contains("holds no block"))
        .map(str::to_string)
        .unwrap_or_else(|| panic!("no note: {}", stderr(&out)));
    assert!(line.contains("INFO trawl::query:"), "{line}");
    let quiet = trawl(&["-q", "query", "-d", &db, "sip"]);
    assert!(quiet.status.success() && !stderr(&quiet).contains("holds no block"));
    let filtered = Command::new(env!("CARGO_BIN_EXE_trawl"))
        .args(["query", "-d", &db, "sip"])
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    assert!(
        !stderr(&filtered).contains("holds no block"),
        "RUST_LOG=warn"
    );
}

/// An IPFIX file of the records `trawl flows` meters from a committed capture.
fn ipfix_file(dir: &Path) -> String {
    let file = dir.join("sample.ipfix").display().to_string();
    let capture = trawl_testkit::testdata("oracle/many-protocols.pcap.gz");
    let out = trawl(&[
        "flows",
        "-r",
        &capture.display().to_string(),
        "--summary",
        "none",
        "-o",
        "/dev/null",
        "--export",
        &format!("ipfix:{file}"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    file
}

#[test]
fn collect_print_composition_runs_to_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let file = ipfix_file(dir.path());
    let direct = dir.path().join("direct.csv").display().to_string();
    let composed = dir.path().join("composed.csv").display().to_string();
    let flags = |out: &str| {
        vec![
            "collect".to_string(),
            "-r".into(),
            file.clone(),
            "--format".into(),
            "csv".into(),
            "-o".into(),
            out.to_string(),
            "--summary".into(),
            "none".into(),
        ]
    };
    let args: Vec<String> = flags(&direct);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = trawl(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut print = flags(&composed);
    print.push("--print-composition".into());
    let print: Vec<&str> = print.iter().map(String::as_str).collect();
    let out = trawl(&print);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        !Path::new(&composed).exists(),
        "printing the composition runs nothing"
    );
    let text = stdout(&out);
    assert!(text.contains("type = \"ipfix_source\""), "{text}");
    let toml = dir.path().join("collect.toml");
    std::fs::write(&toml, &text).unwrap();
    let toml = toml.display().to_string();
    let check = trawl(&["check", "-c", &toml]);
    assert!(check.status.success(), "{}", stderr(&check));
    let run = trawl(&["run", "-c", &toml, "--summary", "none"]);
    assert!(run.status.success(), "{}", stderr(&run));
    let a = std::fs::read_to_string(&direct).unwrap();
    assert!(a.lines().count() > 200);
    assert_eq!(a, std::fs::read_to_string(&composed).unwrap());
}

#[test]
fn flows_help_groups_its_flags_by_topic() {
    // Issue 19: `--help` groups options by topic, in this order (the first flag of each topic
    // decides), and each flag under its own.
    let help = stdout(&trawl(&["flows", "--help"]));
    let headings: Vec<&str> = help
        .lines()
        .filter(|l| !l.starts_with(' ') && l.ends_with(':'))
        .collect();
    assert_eq!(
        headings,
        [
            "Options:",
            "Input:",
            "Filter:",
            "Meter:",
            "Output:",
            "Live capture:",
            "Export:",
            "Exit codes:"
        ],
        "{help}"
    );
    // A topic's lines: from its heading to the next.
    let section = |name: &str| -> String {
        help.lines()
            .skip_while(|l| *l != format!("{name}:"))
            .skip(1)
            .take_while(|l| l.is_empty() || l.starts_with(' '))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(section("Input").contains("--read"), "{help}");
    assert!(section("Input").contains("--interface"), "{help}");
    assert!(section("Filter").contains("--filter"), "{help}");
    assert!(section("Meter").contains("--idle"), "{help}");
    assert!(section("Output").contains("--format"), "{help}");
    assert!(section("Live capture").contains("--workers"), "{help}");
    assert!(section("Export").contains("--export"), "{help}");
}
