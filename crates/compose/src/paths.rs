//! Paths in a composition file are relative to the file's directory, not to wherever the
//! command runs: `trawl run -c lab/x.toml` with `files = ["a.pcap"]` reads `lab/a.pcap`, as a
//! person reading the file expects. Which settings are paths is each block type's own
//! declaration ([`crate::Block::PATHS`]), never a guess from a key's name. Compositions read
//! from standard input, built from flags, and `--set` values keep the working directory.
use std::path::Path;

use toml::{Table, Value};

/// A setting that names a file or directory (see [`crate::Block::PATHS`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathSetting {
    /// The setting's key in the block's table.
    pub key: &'static str,
    /// How the path is written in the value.
    pub form: PathForm,
}

/// How a path setting's value holds its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathForm {
    /// A path, or a list of paths. `-` (standard input or output) is not a path.
    Path,
    /// A destination `SCHEME:PATH` (`json:flows.jsonl`, `ipfix:out.ipfix`), or a list of them:
    /// the path of a file scheme. Network destinations (`ipfix+udp://HOST:PORT`) and `json:-`
    /// are not paths.
    Destination,
}

impl PathSetting {
    /// A setting holding a path or a list of paths.
    pub const fn path(key: &'static str) -> PathSetting {
        PathSetting {
            key,
            form: PathForm::Path,
        }
    }

    /// A setting holding a destination or a list of them.
    pub const fn destination(key: &'static str) -> PathSetting {
        PathSetting {
            key,
            form: PathForm::Destination,
        }
    }
}

/// Rewrites the relative paths of `settings` (a block's table) as `dir` joined with them.
/// A value of the wrong type is left for the block's own settings to refuse.
pub(crate) fn relative_to(settings: &mut Table, paths: &[PathSetting], dir: &Path) {
    for p in paths {
        match settings.get_mut(p.key) {
            Some(Value::String(s)) => rebase(s, p.form, dir),
            Some(Value::Array(items)) => {
                for item in items {
                    if let Value::String(s) = item {
                        rebase(s, p.form, dir);
                    }
                }
            }
            _ => {}
        }
    }
}

fn rebase(value: &mut String, form: PathForm, dir: &Path) {
    let (prefix, path) = match form {
        PathForm::Path => ("", value.as_str()),
        PathForm::Destination => match value.split_once(':') {
            // A file scheme: `json:PATH`, `ipfix:PATH`; `SCHEME+udp://...` is a network one.
            Some((scheme, rest)) if !scheme.contains('+') && !rest.starts_with("//") => {
                (&value[..scheme.len() + 1], rest)
            }
            _ => return,
        },
    };
    if path.is_empty() || path == "-" || Path::new(path).is_absolute() {
        return;
    }
    let joined = format!("{prefix}{}", dir.join(path).display());
    *value = joined;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rebased(toml_text: &str, paths: &[PathSetting]) -> Table {
        let mut t: Table = toml_text.parse().unwrap();
        relative_to(&mut t, paths, Path::new("lab/x"));
        t
    }

    #[test]
    fn relative_paths_join_the_directory_and_others_stay() {
        let t = rebased(
            r#"files = ["a.pcap", "/abs/b.pcap", "-", "../c.pcap"]
               path = "out.jsonl"
               filter = "tcp"
               count = 3"#,
            &[PathSetting::path("files"), PathSetting::path("path")],
        );
        assert_eq!(
            t["files"],
            Value::Array(
                ["lab/x/a.pcap", "/abs/b.pcap", "-", "lab/x/../c.pcap"]
                    .map(Value::from)
                    .to_vec()
            )
        );
        assert_eq!(t["path"].as_str(), Some("lab/x/out.jsonl"));
        assert_eq!(t["filter"].as_str(), Some("tcp"), "not a path setting");
    }

    #[test]
    fn destinations_rebase_only_file_schemes() {
        let t = rebased(
            r#"destinations = ["json:flows.jsonl", "ipfix:/tmp/a.ipfix", "json:-",
                               "ipfix+udp://127.0.0.1:4739", "json+tcp://h:1", "ipfix:out.ipfix"]"#,
            &[PathSetting::destination("destinations")],
        );
        assert_eq!(
            t["destinations"],
            Value::Array(
                [
                    "json:lab/x/flows.jsonl",
                    "ipfix:/tmp/a.ipfix",
                    "json:-",
                    "ipfix+udp://127.0.0.1:4739",
                    "json+tcp://h:1",
                    "ipfix:lab/x/out.ipfix"
                ]
                .map(Value::from)
                .to_vec()
            )
        );
    }
}
