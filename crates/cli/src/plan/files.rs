//! The capture-file part of a command's plan: one `pcap_source` block that reads every `-r`
//! file (merged by time, the filter compiled per file) and emits their packets on
//! `file.packets`.
use std::path::PathBuf;

use trawl_capture::FileFormat;
use trawl_compose::Document;

/// The name of the source block in the plans of the file commands.
pub const SOURCE: &str = "file";

/// `-r FILE...` with its filter and forced format.
#[derive(Clone, Debug)]
pub struct FileInput {
    pub files: Vec<PathBuf>,
    pub filter: Option<String>,
    pub format: Option<FileFormat>,
}

/// Records per batch: the reader's default, so that batches (and with them the order in
/// which the meter expires flows) are those of every other reader of files.
const BATCH: i64 = 256;

impl FileInput {
    /// Adds the `pcap_source`; returns its packet gate.
    pub fn add(&self, doc: &mut Document) -> String {
        let files: Vec<toml::Value> = self
            .files
            .iter()
            .map(|p| toml::Value::from(p.to_string_lossy().into_owned()))
            .collect();
        let format = self.format.and_then(|f| match f {
            FileFormat::Pcap => Some("pcap"),
            FileFormat::Pcapng => Some("pcapng"),
            FileFormat::HpcapRaw => Some("hpcap"),
            // A format the block does not name yet is detected, as without `--input-format`.
            _ => None,
        });
        doc.block(SOURCE, "pcap_source")
            .set("files", toml::Value::Array(files))
            .set_some("filter", self.filter.as_deref())
            .set_some("format", format)
            .set("batch", BATCH)
            // As every command reading files always did: a file that cannot be read is
            // reported and counted, and the others are read.
            .set("skip_unreadable", true);
        format!("{SOURCE}.packets")
    }
}
