//! The capture-file part of a command's plan: one `pcap_source` block that reads every `-r`
//! file (merged by time, the filter compiled per file) and emits their packets on
//! `file.packets`.
use std::path::PathBuf;

use trawl_capture::FileFormat;
use trawl_compose::{Document, Policy};

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

/// The block that spreads the files' packets over the meters of `--workers N`.
pub const LANES: &str = "lanes";

/// The pool of the meters of `--workers N` over files (one thread each); the source, the
/// lanes and the writers stay on the first pool's thread.
pub const METERS_POOL: &str = "capture";

/// Messages the queues of `--workers N` over files hold: 64 batches of packets (16,384) keep
/// a meter busy for milliseconds, and their bytes stay in the caches between the reading
/// thread and the meter. The default (1,024 batches, 20-85 MB of packets in flight, since
/// the reader is faster than the meters) had the meters read every packet from memory, and
/// the file reader allocate fresh buffers all the time (it keeps 32 for reuse while batches
/// hold them).
const QUEUE: usize = 64;

/// `--workers N` over files: the packets of `gate` spread over `workers` meters by a
/// symmetric hash of their flow's addresses (`packet_lanes`, on the reading thread), each
/// meter on a thread of its own. Returns the gates the meters are fed from (one per meter,
/// all the lanes' output), and with one worker `gate` alone, as before.
pub fn spread(
    doc: &mut Document,
    gate: String,
    workers: usize,
    tunnel: trawl_flow::decode::TunnelMode,
) -> Vec<super::consumers::PacketGate> {
    if workers <= 1 {
        return vec![super::consumers::PacketGate::files(gate)];
    }
    doc.pool_of_threads("main", 1);
    doc.pool_of_threads(METERS_POOL, workers);
    doc.runtime("queue_capacity", QUEUE as i64);
    let tunnel = match tunnel {
        trawl_flow::decode::TunnelMode::Outer => "outer",
        trawl_flow::decode::TunnelMode::Inner => "inner",
    };
    doc.block(LANES, "packet_lanes")
        .on("main", Some(0))
        .set("lanes", workers as i64)
        .set("tunnel", tunnel);
    doc.connect(&gate, &[&format!("{LANES}.packets")], Policy::Wait);
    (0..workers)
        .map(|w| super::consumers::PacketGate {
            gate: format!("{LANES}.packets"),
            iface: 0,
            thread: Some(w),
        })
        .collect()
}

/// Gives each of `meters` (the meters [`spread`]'s gates feed, in order) its lane.
pub fn set_lanes(doc: &mut Document, meters: &[String]) {
    if meters.len() <= 1 {
        return;
    }
    for (lane, name) in meters.iter().enumerate() {
        if let Some(t) = doc.block_table(name) {
            t.insert("lane".into(), toml::Value::Integer(lane as i64));
            t.insert("lanes".into(), toml::Value::Integer(meters.len() as i64));
        }
    }
}
