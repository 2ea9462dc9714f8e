//! `pcap_source`: capture files in, packet batches out. The one reader of capture files: every
//! command that reads files (`trawl flows -r`, `series`, `ingest`, `dump`, `detect`) runs it.
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use trawl_bpf::{ByteOrder, FileFilters, FilterSet};
use trawl_capture::{
    name_unnamed, reuse_records, FileFormat, FileSource, FileSourceConfig, Interface, MergedFiles,
    PacketRecord, PacketSource, SourceStats, MAX_SNAPLEN,
};
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, PathSetting, Poll, Pool, PoolSlot};

use crate::messages::{PacketBatch, PACKETS};

/// libpcap's snap length for compiling filters, so `greater`/`less` see whole packets.
const FILTER_SNAPLEN: u32 = MAX_SNAPLEN;

/// Reads capture files (pcap, pcapng, HPCAP raw, gzip/zstd), several merged by packet time
/// (mergecap's semantics) or one after the other, and sends their packets in batches; a bad
/// file is reported and counted, and the others are read.
pub struct PcapSource {
    files: Vec<String>,
    next_file: usize,
    source: Option<FileSource>,
    /// The current file (of the one-after-the-other path), for warnings.
    source_path: PathBuf,
    format: Option<FileFormat>,
    /// Counters of the files read to their end (or to an error) on that path.
    done: SourceStats,
    /// Several files merged by time: opened at the first poll.
    merge: bool,
    merged: Option<MergedFiles>,
    /// The filter compiled for each merged file (by position), when the merge first reads it.
    file_filters: Option<FileFilters>,
    /// Scratch of the merged path, kept across polls: records, and each one's byte order.
    spare: Vec<PacketRecord<'static>>,
    big_endian: Vec<bool>,
    files_counted: usize,
    interfaces: Arc<[Interface]>,
    /// How interfaces their file leaves unnamed are named (`iface`).
    unnamed: Option<String>,
    filter_expr: Option<String>,
    filter: Option<FilterSet>,
    batch: usize,
    stream: u32,
    pool: Pool<PacketBatch>,
    counters: Option<SourceCounters>,
    polls: u64,
}

/// Polls between two releases of the buffers spent batches still hold.
const RELEASE_EVERY: u64 = 16;

struct SourceCounters {
    packets: Counter,
    bytes: Counter,
    files: Counter,
    failed: Counter,
    rejected: Counter,
    /// What the reader delivered before the filter ([`SourceStats`]).
    records: Counter,
    captured_bytes: Counter,
    wire_bytes: Counter,
    truncated: Counter,
    skipped_blocks: Counter,
    /// Bytes read of the current file (or of all, merged) and their total, for progress.
    progress_done: Counter,
    progress_total: Counter,
}

impl SourceCounters {
    fn source(&self, s: &SourceStats) {
        self.records.set(s.records);
        self.captured_bytes.set(s.captured_bytes);
        self.wire_bytes.set(s.wire_bytes);
        self.truncated.set(s.truncated_records);
        self.skipped_blocks.set(s.skipped_blocks);
    }

    fn progress(&self, p: Option<(u64, u64)>) {
        let (done, total) = p.unwrap_or_default();
        self.progress_done.set(done);
        self.progress_total.set(total);
    }
}

/// Settings of `pcap_source`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapSourceSettings {
    /// Files to read: several are merged by packet time (mergecap's default), or read one
    /// after the other with `concatenate`.
    pub files: Vec<String>,
    /// Read the files one after the other, in the order given (mergecap -a).
    #[serde(default)]
    pub concatenate: bool,
    /// BPF expression (tcpdump syntax), compiled for each file (BSD loopback headers hold
    /// the address family in the byte order of the machine that wrote the file); packets that
    /// do not match are not sent.
    pub filter: Option<String>,
    /// Packets per batch (default 256).
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// `pcap`, `pcapng` or `hpcap`: read the files as this format instead of detecting it
    /// (HPCAP raw files have no magic number).
    pub format: Option<InputFormat>,
    /// A file that cannot be opened is reported and counted (`files_failed`) and the others
    /// are read, as the command line does, instead of failing the check (default false). `-`
    /// (standard input, alone) is allowed then.
    #[serde(default)]
    pub skip_unreadable: bool,
    /// Names the interfaces that their file leaves unnamed (pcap files, pcapng without
    /// `if_name`): each file's first is called this and its others get their index appended
    /// (`eth0`, `eth01`, ...), or with `{}` in it, the index replaces it (`if{}`: `if0`,
    /// `if1`). Each file counts its own interfaces. Default: they stay unnamed.
    pub iface: Option<String>,
}

/// A capture format forced by `format`.
#[derive(Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum InputFormat {
    /// libpcap's format.
    Pcap,
    /// pcapng.
    Pcapng,
    /// HPCAP raw.
    Hpcap,
}

impl InputFormat {
    fn file_format(self) -> FileFormat {
        match self {
            InputFormat::Pcap => FileFormat::Pcap,
            InputFormat::Pcapng => FileFormat::Pcapng,
            InputFormat::Hpcap => FileFormat::HpcapRaw,
        }
    }
}

fn default_batch() -> usize {
    256
}

impl Block for PcapSource {
    const TYPE: &'static str = "pcap_source";
    const SUMMARY: &'static str =
        "reads capture files (pcap, pcapng, HPCAP raw, gzip/zstd) and sends their packets";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "the packets, in time order across files (in file order with `concatenate`)",
    }];
    type Settings = PcapSourceSettings;
    const PATHS: &'static [PathSetting] = &[PathSetting::path("files")];

    fn check(s: &PcapSourceSettings) -> Result<(), String> {
        if s.files.is_empty() {
            return Err("`files` is empty".into());
        }
        if s.files.len() > 1 && s.files.iter().any(|f| f == "-") {
            return Err(
                "standard input (`-`) cannot be merged with other files (it cannot be \
                        read twice); give it alone"
                    .into(),
            );
        }
        // Inputs are checked before any block is built, so a missing file fails the run before
        // writers open (or create) their outputs.
        for f in s.files.iter().filter(|_| !s.skip_unreadable) {
            std::fs::File::open(f).map_err(|e| format!("cannot read `{f}`: {e}"))?;
        }
        if s.batch == 0 || s.batch > 1 << 16 {
            return Err("`batch` must be between 1 and 65536".into());
        }
        if let Some(expr) = &s.filter {
            trawl_bpf::Filter::compile(expr, trawl_capture::LinkType::ETHERNET, FILTER_SNAPLEN)
                .map_err(|e| format!("filter: {e}"))?;
        }
        Ok(())
    }

    fn build(s: PcapSourceSettings, env: &BuildEnv) -> Result<Self, String> {
        Ok(PcapSource {
            merge: s.files.len() > 1 && !s.concatenate,
            files: s.files,
            next_file: 0,
            source: None,
            source_path: PathBuf::new(),
            format: s.format.map(InputFormat::file_format),
            done: SourceStats::default(),
            merged: None,
            file_filters: s
                .filter
                .as_deref()
                .map(|e| FileFilters::new(e, FILTER_SNAPLEN)),
            spare: Vec::new(),
            big_endian: Vec::new(),
            files_counted: 0,
            interfaces: Arc::from(Vec::new()),
            unnamed: s.iface,
            filter_expr: s.filter,
            filter: None,
            batch: s.batch,
            stream: env.index as u32,
            pool: Pool::new(PacketBatch::default),
            counters: None,
            polls: 0,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some(SourceCounters {
            packets: ctx.counter("packets"),
            bytes: ctx.counter("bytes"),
            files: ctx.counter("files"),
            failed: ctx.counter("files_failed"),
            rejected: ctx.counter("filter_rejected"),
            records: ctx.counter("records"),
            captured_bytes: ctx.counter("captured_bytes"),
            wire_bytes: ctx.counter("wire_bytes"),
            truncated: ctx.counter("truncated_records"),
            skipped_blocks: ctx.counter("skipped_blocks"),
            progress_done: ctx.counter("progress_bytes"),
            progress_total: ctx.counter("progress_total"),
        });
        Ok(())
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        if ctx.stopping() {
            return Poll::Done;
        }
        // Spent batches still hold the source buffers they shared: let go of those now and
        // then, so the source can read into them again instead of into fresh memory.
        self.polls += 1;
        if self.polls.is_multiple_of(RELEASE_EVERY) {
            self.pool.for_each_unheld(|b| b.shared = None);
        }
        if self.merge {
            return self.poll_merged(ctx);
        }
        let Some(source) = self.source.as_mut() else {
            return self.open_next(ctx);
        };
        let big_endian = source.big_endian();
        let (batch, shared_bytes) = match source.next_shared_batch() {
            Ok(Some(read)) => read,
            Ok(None) => {
                self.close_file();
                return Poll::Busy;
            }
            Err(e) => {
                ctx.error(e);
                self.close_file();
                return Poll::Busy;
            }
        };
        if self.interfaces.len() != batch.interfaces().len() {
            self.interfaces = named(batch.interfaces(), self.unnamed.as_deref());
        }
        let mut slot = file_batch(&mut self.pool, &self.interfaces, self.stream, big_endian);
        let out = slot.get_mut();
        let mut rejected = 0u64;
        // The records' bytes stay in the source's buffer, shared with the batch (no copy);
        // the source reads on into another buffer while this one is held.
        out.fill_shared(&batch, shared_bytes);
        if let Some(filter) = self.filter.as_mut() {
            let path = &self.source_path;
            out.retain(|p| {
                let keep = passes(filter, p, path, ctx);
                rejected += u64::from(!keep);
                keep
            });
        }
        let c = self.counters.as_ref().expect("started");
        let source = self.source.as_ref().expect("read above");
        let mut stats = self.done;
        stats.add(&source.stats());
        c.source(&stats);
        c.progress(source.progress());
        c.rejected.add(rejected);
        c.packets.add(out.metas.len() as u64);
        c.bytes
            .add(out.metas.iter().map(|m| u64::from(m.wire_len)).sum());
        if !out.metas.is_empty() {
            ctx.emit(0, slot.into_msg());
        }
        Poll::Busy
    }
}

impl PcapSource {
    /// The next packets of the files merged by time. Records come from several files'
    /// buffers, so the batch copies their bytes; a batch holds records of one byte order (what
    /// filters downstream compile BSD loopback headers for), so a merge of files of both
    /// orders sends a batch per run of one order.
    fn poll_merged(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        let config = FileSourceConfig {
            batch_size: self.batch,
            format: self.format,
        };
        let files = &self.files;
        let unnamed = &self.unnamed;
        let merged = self.merged.get_or_insert_with(|| {
            let paths: Vec<std::path::PathBuf> = files.iter().map(Into::into).collect();
            let mut merged = MergedFiles::open(&paths, &config);
            merged.name_unnamed(unnamed.clone());
            merged
        });
        let mut records = reuse_records(std::mem::take(&mut self.spare));
        let big_endian = &mut self.big_endian;
        big_endian.clear();
        let filters = &mut self.file_filters;
        let mut rejected = 0u64;
        let mut warnings = Vec::new();
        let interfaces = merged.next_batch(&mut records, |pkt, file| {
            let keep = filters.as_mut().is_none_or(|f| {
                match f.for_file(file.order, file.big_endian).matches(
                    pkt.link_type,
                    pkt.data,
                    pkt.wire_len,
                ) {
                    Ok(keep) => keep,
                    Err(e) => {
                        warnings.push(never_match(file.path, pkt, &e));
                        false
                    }
                }
            });
            if keep {
                big_endian.push(file.big_endian);
            } else {
                rejected += 1;
            }
            keep
        });
        let done = interfaces.is_none();
        if let Some(table) = interfaces {
            if self.interfaces.len() != table.len() {
                self.interfaces = Arc::from(table.to_vec());
            }
        }
        for w in warnings {
            ctx.warn(w);
        }
        let c = self.counters.as_ref().expect("started");
        c.rejected.add(rejected);
        let mut start = 0;
        while start < records.len() {
            let order = big_endian[start];
            let run = big_endian[start..]
                .iter()
                .take_while(|&&b| b == order)
                .count();
            let mut slot = file_batch(&mut self.pool, &self.interfaces, self.stream, order);
            let out = slot.get_mut();
            out.fill_records(&records[start..start + run]);
            c.packets.add(out.metas.len() as u64);
            c.bytes
                .add(out.metas.iter().map(|m| u64::from(m.wire_len)).sum());
            ctx.emit(0, slot.into_msg());
            start += run;
        }
        self.spare = reuse_records(records);
        let merged = self.merged.as_mut().expect("opened above");
        for e in merged.errors.drain(..) {
            ctx.error(e);
        }
        c.files.add((merged.files_read - self.files_counted) as u64);
        c.failed.set(merged.files_failed as u64);
        c.source(&merged.stats());
        c.progress(Some(merged.progress()));
        self.files_counted = merged.files_read;
        if done {
            Poll::Done
        } else {
            Poll::Busy
        }
    }

    fn open_next(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        let Some(path) = self.files.get(self.next_file) else {
            return Poll::Done;
        };
        self.next_file += 1;
        let config = FileSourceConfig {
            batch_size: self.batch,
            format: self.format,
        };
        let opened = if path == "-" {
            FileSource::from_reader("<stdin>", std::io::stdin(), config)
        } else {
            FileSource::with_config(path, config)
        };
        match opened {
            Ok(source) => {
                self.source_path = PathBuf::from(path);
                if let Some(expr) = &self.filter_expr {
                    let order = ByteOrder::of_file(source.big_endian());
                    self.filter = Some(FilterSet::new_for(expr, FILTER_SNAPLEN, order));
                }
                self.interfaces = named(source.interfaces(), self.unnamed.as_deref());
                self.source = Some(source);
                if let Some(c) = &self.counters {
                    c.files.add(1);
                }
            }
            Err(e) => {
                if let Some(c) = &self.counters {
                    c.failed.add(1);
                }
                ctx.error(e);
            }
        }
        Poll::Busy
    }

    /// The current file is read (or failed): its counters join those of the files before.
    fn close_file(&mut self) {
        if let Some(source) = self.source.take() {
            self.done.add(&source.stats());
            // What the file held after its last batch (blocks without packets, a file with
            // none at all) is counted too.
            if let Some(c) = &self.counters {
                c.source(&self.done);
            }
        }
    }
}

/// The interface table of one file, its unnamed interfaces named after `unnamed`.
fn named(table: &[Interface], unnamed: Option<&str>) -> Arc<[Interface]> {
    let mut table = table.to_vec();
    if let Some(pattern) = unnamed {
        for (i, iface) in table.iter_mut().enumerate() {
            name_unnamed(iface, pattern, i);
        }
    }
    Arc::from(table)
}

/// Whether `pkt` (of the file `path`) passes `filter`. A link type the expression cannot be
/// compiled for is a warning (libpcap refuses it; such packets never pass).
#[inline]
fn passes(filter: &mut FilterSet, pkt: &PacketRecord<'_>, path: &Path, ctx: &mut Ctx<'_>) -> bool {
    match filter.matches(pkt.link_type, pkt.data, pkt.wire_len) {
        Ok(keep) => keep,
        Err(e) => {
            ctx.warn(never_match(path, pkt, &e));
            false
        }
    }
}

fn never_match(path: &Path, pkt: &PacketRecord<'_>, e: &impl std::fmt::Display) -> String {
    format!(
        "{}: packets of link type {} never match: {e}",
        path.display(),
        pkt.link_type.0
    )
}

/// A pooled batch for `stream` with its header set for file records of one byte order (what
/// filters downstream compile BSD loopback headers for); the caller fills in the records.
fn file_batch<'p>(
    pool: &'p mut Pool<PacketBatch>,
    interfaces: &Arc<[Interface]>,
    stream: u32,
    big_endian: bool,
) -> PoolSlot<'p, PacketBatch> {
    let mut slot = pool.take();
    let out = slot.get_mut();
    out.interfaces.clone_from(interfaces);
    out.big_endian = big_endian;
    out.live = false;
    out.stream = stream;
    slot
}
