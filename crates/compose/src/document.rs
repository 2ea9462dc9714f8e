//! Compositions built in code: the commands of the CLI turn their flags into a [`Document`]
//! (as Suricata's runmodes assemble the same modules for files and live capture), print it
//! with `--print-composition`, and run it through the same [`crate::plan`] as a file. Building
//! the TOML text and parsing it back keeps one way in: what is printed is what runs.
//!
//! [`Document::set`] is `--set block.key=value`: it overrides one setting of a composition
//! read from a file or built from flags.
use std::fmt;

use toml::{Table, Value};

use crate::Policy;

/// A composition under construction (or read from TOML to be overridden).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Document {
    table: Table,
}

/// A `--set` that names no block, or a value that is not TOML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetError(pub String);

impl fmt::Display for SetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetError {}

impl Document {
    /// An empty composition.
    pub fn new() -> Document {
        Document::default()
    }

    /// Reads a composition's TOML text (only its syntax is checked here; [`crate::plan`] checks
    /// the rest).
    pub fn parse(text: &str) -> Result<Document, toml::de::Error> {
        Ok(Document {
            table: text.parse::<Table>()?,
        })
    }

    /// The `[runtime]` table, for settings such as `queue_capacity`.
    pub fn runtime(&mut self, key: &str, value: impl Into<Value>) -> &mut Document {
        let runtime = self
            .table
            .entry("runtime")
            .or_insert_with(|| Value::Table(Table::new()));
        if let Value::Table(t) = runtime {
            t.insert(key.to_string(), value.into());
        }
        self
    }

    /// A pool of threads pinned one per core.
    pub fn pool_on_cores(&mut self, name: &str, cores: &[usize]) -> &mut Document {
        let mut pool = Table::new();
        pool.insert("name".into(), name.into());
        let cores: Vec<Value> = cores.iter().map(|&c| Value::Integer(c as i64)).collect();
        pool.insert("cores".into(), Value::Array(cores));
        self.push("pool", pool);
        self
    }

    /// A pool of `threads` unpinned threads.
    pub fn pool_of_threads(&mut self, name: &str, threads: usize) -> &mut Document {
        let mut pool = Table::new();
        pool.insert("name".into(), name.into());
        pool.insert("threads".into(), Value::Integer(threads as i64));
        self.push("pool", pool);
        self
    }

    /// Adds a block; its settings are filled in through the returned [`BlockBuilder`].
    pub fn block(&mut self, name: &str, type_name: &str) -> BlockBuilder<'_> {
        let mut block = Table::new();
        block.insert("name".into(), name.into());
        block.insert("type".into(), type_name.into());
        let blocks = self.array("block");
        blocks.push(Value::Table(block));
        let Some(Value::Table(table)) = blocks.last_mut() else {
            unreachable!("just pushed a table");
        };
        BlockBuilder { table }
    }

    /// Connects an output gate (`block.gate`) to input gates, with the given queue policy
    /// (written only when it is not the default `wait`).
    pub fn connect(&mut self, from: &str, to: &[&str], policy: Policy) -> &mut Document {
        let mut connection = Table::new();
        connection.insert("from".into(), from.into());
        let to = match to {
            [one] => Value::from(*one),
            many => Value::Array(many.iter().map(|t| Value::from(*t)).collect()),
        };
        connection.insert("to".into(), to);
        if policy == Policy::Drop {
            connection.insert("policy".into(), "drop".into());
        }
        self.push("connection", connection);
        self
    }

    /// `--set BLOCK.KEY=VALUE`: sets one setting of the block named BLOCK. VALUE is read as a
    /// TOML value (`8`, `true`, `"a b"`, `[1, 2]`); anything that is not one is a string, so
    /// `--set file.path=capture.pcap` needs no quotes.
    pub fn set(&mut self, assignment: &str) -> Result<&mut Document, SetError> {
        let (target, value) = assignment.split_once('=').ok_or_else(|| {
            SetError(format!(
                "--set `{assignment}`: expected BLOCK.KEY=VALUE (e.g. file.path=capture.pcap)"
            ))
        })?;
        let (block, key) = target.trim().split_once('.').ok_or_else(|| {
            SetError(format!(
                "--set `{assignment}`: `{target}` must be BLOCK.KEY (a block's name, a dot, a setting)"
            ))
        })?;
        if key.is_empty() || matches!(key, "name" | "type") {
            return Err(SetError(format!(
                "--set `{assignment}`: `{key}` cannot be set (a block's name and type are fixed)"
            )));
        }
        let value = parse_value(value.trim());
        let names = self.block_names();
        let table = self.block_table(block).ok_or_else(|| {
            SetError(format!(
                "--set `{assignment}`: no block is named `{block}` (blocks: {})",
                names.join(", ")
            ))
        })?;
        table.insert(key.to_string(), value);
        Ok(self)
    }

    /// Rewrites the relative paths of every block's settings ([`crate::Block::PATHS`], by
    /// each block's type in `registry`) as relative to `dir`: a composition file's, before
    /// `--set` overrides (which stay relative to the working directory) are applied.
    pub fn paths_relative_to(&mut self, dir: &std::path::Path, registry: &crate::Registry) {
        if let Some(Value::Array(blocks)) = self.table.get_mut("block") {
            for block in blocks {
                let Value::Table(t) = block else { continue };
                let info = t
                    .get("type")
                    .and_then(Value::as_str)
                    .and_then(|ty| registry.get(ty));
                if let Some(info) = info {
                    crate::paths::relative_to(t, info.paths, dir);
                }
            }
        }
    }

    /// The names of the blocks, in order.
    pub fn block_names(&self) -> Vec<String> {
        match self.table.get("block") {
            Some(Value::Array(blocks)) => blocks
                .iter()
                .filter_map(|b| b.get("name").and_then(Value::as_str).map(str::to_string))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The settings table of the block named `name`.
    pub fn block_table(&mut self, name: &str) -> Option<&mut Table> {
        match self.table.get_mut("block") {
            Some(Value::Array(blocks)) => blocks.iter_mut().find_map(|b| match b {
                Value::Table(t) if t.get("name").and_then(Value::as_str) == Some(name) => Some(t),
                _ => None,
            }),
            _ => None,
        }
    }

    /// The composition as TOML text: pools, then blocks, then connections, each in the order
    /// they were added.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        for section in ["runtime", "pool", "block", "connection"] {
            let Some(value) = self.table.get(section) else {
                continue;
            };
            let mut one = Table::new();
            one.insert(section.to_string(), value.clone());
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&toml::to_string(&one).expect("a TOML table serialises"));
        }
        // Sections this builder does not know (a file's own) keep their place at the end, so
        // `plan` reports them as unknown rather than this function dropping them.
        for (key, value) in &self.table {
            if !matches!(key.as_str(), "runtime" | "pool" | "block" | "connection") {
                let mut one = Table::new();
                one.insert(key.clone(), value.clone());
                out.push('\n');
                out.push_str(&toml::to_string(&one).expect("a TOML table serialises"));
            }
        }
        out
    }

    fn push(&mut self, section: &str, table: Table) {
        self.array(section).push(Value::Table(table));
    }

    fn array(&mut self, section: &str) -> &mut Vec<Value> {
        let entry = self
            .table
            .entry(section)
            .or_insert_with(|| Value::Array(Vec::new()));
        if !entry.is_array() {
            *entry = Value::Array(Vec::new());
        }
        entry.as_array_mut().expect("made an array above")
    }
}

/// A block being added to a [`Document`].
pub struct BlockBuilder<'a> {
    table: &'a mut Table,
}

impl BlockBuilder<'_> {
    /// Places the block in a pool (and optionally on one of its threads).
    pub fn on(self, pool: &str, thread: Option<usize>) -> Self {
        self.table.insert("pool".into(), pool.into());
        if let Some(t) = thread {
            self.table.insert("thread".into(), Value::Integer(t as i64));
        }
        self
    }

    /// Sets a setting.
    pub fn set(self, key: &str, value: impl Into<Value>) -> Self {
        self.table.insert(key.to_string(), value.into());
        self
    }

    /// Sets a setting when there is a value.
    pub fn set_some(self, key: &str, value: Option<impl Into<Value>>) -> Self {
        match value {
            Some(v) => self.set(key, v),
            None => self,
        }
    }
}

/// A `--set` value: TOML when it parses as a value, else the text as a string.
fn parse_value(text: &str) -> Value {
    format!("v = {text}")
        .parse::<Table>()
        .ok()
        .and_then(|mut t| t.remove("v"))
        .unwrap_or_else(|| Value::String(text.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Document {
        let mut doc = Document::new();
        doc.pool_of_threads("main", 1);
        doc.block("file", "pcap_source")
            .set("path", "a.pcap")
            .set_some("filter", None::<&str>);
        doc.block("meter", "flow_meter").set("idle", "30s");
        doc.connect("file.packets", &["meter.packets"], Policy::Wait);
        doc.connect("meter.flows", &["a.flows", "b.flows"], Policy::Drop);
        doc
    }

    #[test]
    fn the_text_reads_back_as_the_same_document() {
        let doc = sample();
        let text = doc.to_toml();
        assert_eq!(Document::parse(&text).unwrap(), doc);
        assert!(text.contains("[[block]]\nname = \"file\"\ntype = \"pcap_source\""));
        assert!(
            !text.contains("filter"),
            "an absent optional setting is not written"
        );
        assert!(text.contains("policy = \"drop\""));
        assert_eq!(
            text.matches("policy").count(),
            1,
            "wait is the default, not written"
        );
        let pool = text.find("[[pool]]").unwrap();
        let block = text.find("[[block]]").unwrap();
        let conn = text.find("[[connection]]").unwrap();
        assert!(pool < block && block < conn, "{text}");
    }

    #[test]
    fn set_overrides_one_setting_with_toml_or_text() {
        let mut doc = sample();
        doc.set("file.path=other.pcap").unwrap();
        doc.set("meter.max_flows=8").unwrap();
        doc.set("meter.ports=[1, 2]").unwrap();
        doc.set("file.filter = tcp port 80").unwrap();
        let file = doc.block_table("file").unwrap().clone();
        assert_eq!(file["path"].as_str(), Some("other.pcap"));
        assert_eq!(file["filter"].as_str(), Some("tcp port 80"));
        let meter = doc.block_table("meter").unwrap().clone();
        assert_eq!(meter["max_flows"].as_integer(), Some(8));
        assert_eq!(meter["ports"].as_array().map(Vec::len), Some(2));
    }

    #[test]
    fn set_names_what_is_wrong() {
        let mut doc = sample();
        let e = doc.set("nope.path=x").unwrap_err().0;
        assert!(
            e.contains("no block is named `nope`") && e.contains("file, meter"),
            "{e}"
        );
        assert!(doc
            .set("file.path")
            .unwrap_err()
            .0
            .contains("BLOCK.KEY=VALUE"));
        assert!(doc
            .set("path=x")
            .unwrap_err()
            .0
            .contains("must be BLOCK.KEY"));
        assert!(doc
            .set("file.type=x")
            .unwrap_err()
            .0
            .contains("cannot be set"));
    }

    #[test]
    fn unknown_sections_survive_to_be_reported_by_plan() {
        let mut doc =
            Document::parse("[[block]]\nname = \"a\"\ntype = \"t\"\n[extra]\nx = 1\n").unwrap();
        doc.set("a.k=1").unwrap();
        assert!(doc.to_toml().contains("[extra]"));
    }
}
