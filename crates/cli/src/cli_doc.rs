//! `docs/cli.md` from clap's definitions, and the rules of the command line checked on them:
//! the flag table is generated here (`TRAWL_BLESS=1 cargo test -p trawl-cli --bin trawl
//! cli_doc` rewrites it), so the document and the flags cannot differ; a short flag means one
//! thing (one long name) in every command.
use std::collections::BTreeMap;

use clap::CommandFactory;

const DOC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/cli.md");
const BEGIN: &str =
    "<!-- flag table: generated from the clap definitions by crates/cli/src/cli_doc.rs; \
                     TRAWL_BLESS=1 cargo test -p trawl-cli --bin trawl cli_doc -->";
const END: &str = "<!-- end of the flag table -->";

/// Every command (and subcommand) with its path: `trawl`, `trawl flows`, `trawl detect
/// synflood`.
fn commands(cmd: &clap::Command, path: &str, out: &mut Vec<(String, clap::Command)>) {
    out.push((path.to_string(), cmd.clone()));
    for s in cmd.get_subcommands() {
        if s.get_name() != "help" {
            commands(s, &format!("{path} {}", s.get_name()), out);
        }
    }
}

fn all_commands() -> Vec<(String, clap::Command)> {
    let mut cmd = crate::args::LowArgs::command();
    cmd.build();
    let mut out = Vec::new();
    commands(&cmd, "trawl", &mut out);
    out
}

/// The flags a command defines itself (clap's own --help/--version and the global flags
/// propagated from `trawl` left out).
fn own_args(cmd: &clap::Command, top: bool) -> Vec<&clap::Arg> {
    cmd.get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .filter(|a| top || !a.is_global_set())
        .collect()
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// One table row: flag spellings, value, default, topic, meaning.
fn row(a: &clap::Arg) -> String {
    let mut names = Vec::new();
    if let Some(s) = a.get_short() {
        names.push(format!("`-{s}`"));
    }
    if let Some(l) = a.get_long() {
        names.push(format!("`--{l}`"));
    }
    if names.is_empty() {
        names.push(format!(
            "`{}` (positional)",
            a.get_value_names()
                .and_then(|v| v.first())
                .map_or_else(|| a.get_id().to_string(), |v| v.to_string())
        ));
    }
    let aliases: Vec<String> = a
        .get_all_aliases()
        .unwrap_or_default()
        .into_iter()
        .map(|l| format!("`--{l}`"))
        .collect();
    let names = if aliases.is_empty() {
        names.join(" ")
    } else {
        format!("{} (old: {})", names.join(" "), aliases.join(" "))
    };
    let takes_value = a.get_num_args().is_some_and(|n| n.takes_values());
    let possible: Vec<String> = a
        .get_possible_values()
        .iter()
        .filter(|v| !v.is_hide_set())
        .map(|v| v.get_name().to_string())
        .collect();
    let value = if !takes_value {
        String::new()
    } else if !possible.is_empty() && possible != ["true", "false"] {
        possible.join("|")
    } else {
        a.get_value_names()
            .map(|v| {
                v.iter()
                    .map(|s| s.to_string())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default()
    };
    let default: Vec<String> = a
        .get_default_values()
        .iter()
        .map(|v| v.to_string_lossy().into_owned())
        .collect();
    let default = if default.is_empty() || !takes_value {
        String::new()
    } else {
        format!("`{}`", default.join(","))
    };
    let topic = a.get_help_heading().unwrap_or("");
    let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
    format!(
        "| {} | {} | {} | {} | {} |",
        cell(&names),
        cell(&value),
        cell(&default),
        topic,
        cell(&help)
    )
}

/// The generated part of docs/cli.md.
pub(crate) fn table() -> String {
    let mut out = String::new();
    for (path, cmd) in all_commands() {
        // Hidden flags (comparisons, tests) are not part of the command line a person learns.
        let args: Vec<&clap::Arg> = own_args(&cmd, path == "trawl")
            .into_iter()
            .filter(|a| !a.is_hide_set())
            .collect();
        if args.is_empty() {
            continue;
        }
        if path == "trawl" {
            out.push_str("### `trawl` (every command)\n\n");
        } else {
            out.push_str(&format!("### `{path}`\n\n"));
        }
        if let Some(about) = cmd.get_about() {
            out.push_str(&format!("{}\n\n", about.to_string().replace('\n', " ")));
        }
        out.push_str("| Flag | Value | Default | Topic | Meaning |\n|---|---|---|---|---|\n");
        for a in args {
            out.push_str(&row(a));
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// Short flag → the long names it stands for, and where.
fn short_meanings() -> BTreeMap<char, BTreeMap<String, Vec<String>>> {
    let mut meanings: BTreeMap<char, BTreeMap<String, Vec<String>>> = BTreeMap::new();
    for (path, cmd) in all_commands() {
        for a in own_args(&cmd, path == "trawl") {
            let shorts = a
                .get_short()
                .into_iter()
                .chain(a.get_all_short_aliases().unwrap_or_default());
            for s in shorts {
                let long = a.get_long().unwrap_or(a.get_id().as_str()).to_string();
                meanings
                    .entry(s)
                    .or_default()
                    .entry(long)
                    .or_default()
                    .push(path.clone());
            }
        }
    }
    meanings
}

#[test]
fn a_short_flag_means_one_thing_in_every_command() {
    let meanings = short_meanings();
    assert!(
        meanings.contains_key(&'r') && meanings.contains_key(&'i'),
        "{meanings:?}"
    );
    let clashes: Vec<String> = meanings
        .iter()
        .filter(|(_, longs)| longs.len() > 1)
        .map(|(s, longs)| format!("-{s}: {longs:?}"))
        .collect();
    assert!(
        clashes.is_empty(),
        "short flags with two meanings (docs/cli.md says which wins):\n{}",
        clashes.join("\n")
    );
}

#[test]
fn docs_cli_md_is_the_flags_of_the_binary() {
    let doc = std::fs::read_to_string(DOC).expect("docs/cli.md");
    let (head, rest) = doc
        .split_once(BEGIN)
        .expect("docs/cli.md has the table's begin marker");
    let (_, tail) = rest
        .split_once(END)
        .expect("docs/cli.md has the table's end marker");
    let want = format!("{head}{BEGIN}\n\n{}{END}{tail}", table());
    if std::env::var_os("TRAWL_BLESS").is_some() {
        std::fs::write(DOC, &want).unwrap();
        return;
    }
    assert!(
        doc == want,
        "docs/cli.md's flag table differs from the flags (TRAWL_BLESS=1 cargo test -p trawl-cli \
         --bin trawl cli_doc rewrites it; review the diff)"
    );
}

/// Parses a whole command line (`trawl ...`).
fn parse(line: &[&str]) -> crate::args::Command {
    use clap::Parser;
    crate::args::LowArgs::try_parse_from(line)
        .unwrap_or_else(|e| panic!("{line:?}: {e}"))
        .command
}

#[test]
fn renamed_flags_keep_their_old_spelling_as_an_alias() {
    use crate::args::Command;
    let Command::Ingest(new) = parse(&[
        "trawl",
        "ingest",
        "-r",
        "a.pcap",
        "-d",
        "db",
        "--interface",
        "x",
        "--db-keep-days",
        "3",
        "--db-max-size",
        "1GiB",
    ]) else {
        panic!()
    };
    let Command::Ingest(old) = parse(&[
        "trawl",
        "ingest",
        "-r",
        "a.pcap",
        "-d",
        "db",
        "--iface",
        "x",
        "--keep-days",
        "3",
        "--max-size",
        "1GiB",
    ]) else {
        panic!()
    };
    assert_eq!(format!("{new:?}"), format!("{old:?}"));
    let Command::Packets(new) = parse(&["trawl", "packets", "-r", "store", "-w", "-"]) else {
        panic!()
    };
    let Command::Packets(old) = parse(&["trawl", "packets", "--dir", "store", "-w", "-"]) else {
        panic!()
    };
    assert_eq!(format!("{new:?}"), format!("{old:?}"));
    let Command::Dump(new) = parse(&[
        "trawl",
        "dump",
        "-r",
        "a.pcap",
        "-w",
        "d",
        "-i",
        "eth0",
        "--dump-max-size",
        "80%",
        "--dump-max-age",
        "7d",
    ]) else {
        panic!()
    };
    let Command::Dump(old) = parse(&[
        "trawl",
        "dump",
        "-r",
        "a.pcap",
        "-w",
        "d",
        "--iface",
        "eth0",
        "--retention-size",
        "80%",
        "--retention-age",
        "7d",
    ]) else {
        panic!()
    };
    assert_eq!(format!("{new:?}"), format!("{old:?}"));
    for (new, old) in [
        (
            vec!["trawl", "query", "-i", "a,b", "sip"],
            vec!["trawl", "query", "--iface", "a,b", "sip"],
        ),
        (
            vec!["trawl", "collect", "-r", "f.ipfix", "-i", "edge"],
            vec!["trawl", "collect", "-r", "f.ipfix", "--iface", "edge"],
        ),
        (
            vec!["trawl", "subscribe", "flows", "--db", "d", "-i", "x"],
            vec!["trawl", "subscribe", "flows", "--db", "d", "--iface", "x"],
        ),
    ] {
        assert_eq!(
            format!("{:?}", parse(&new)),
            format!("{:?}", parse(&old)),
            "{old:?}"
        );
    }
}

#[test]
fn every_flag_has_a_help_topic() {
    // `--help` groups flags by topic (crate::flag::topic); a flag without one would land in a
    // heap of "Options" at the top.
    let topics = [
        crate::flag::topic::INPUT,
        crate::flag::topic::FILTER,
        crate::flag::topic::METER,
        crate::flag::topic::OUTPUT,
        crate::flag::topic::EXPORT,
        crate::flag::topic::LIVE,
        crate::flag::topic::RING,
        crate::flag::topic::PACKET_STORE,
        crate::flag::topic::FLOW_DB,
        crate::flag::topic::TIME,
        crate::flag::topic::DETECTOR,
        crate::flag::topic::QUERY,
        crate::flag::topic::API,
        crate::flag::topic::FLEET,
        crate::flag::topic::RUN,
    ];
    let mut missing = Vec::new();
    for (path, cmd) in all_commands() {
        if path == "trawl" {
            continue;
        }
        for a in own_args(&cmd, false) {
            if a.is_positional() {
                continue;
            }
            match a.get_help_heading() {
                Some(h) if topics.contains(&h) => {}
                other => missing.push(format!("{path} {}: {other:?}", a.get_id())),
            }
        }
    }
    assert!(
        missing.is_empty(),
        "flags without a topic:\n{}",
        missing.join("\n")
    );
}
