//! `pcap_source`: capture files in, packet batches out.
use std::sync::Arc;

use serde::Deserialize;
use trawl_bpf::{ByteOrder, FileFilters, FilterSet};
use trawl_capture::{
    reuse_records, FileSource, FileSourceConfig, Interface, MergedFiles, PacketRecord, PacketSource,
};
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Poll, Pool, PoolSlot};

use crate::messages::{PacketBatch, PACKETS};

/// libpcap's snap length for compiling filters, so `greater`/`less` see whole packets.
const FILTER_SNAPLEN: u32 = 262_144;

/// Reads capture files (pcap, pcapng, HPCAP raw, gzip/zstd), several merged by packet time
/// (mergecap's semantics) or one after the other, and sends their packets in batches; a bad
/// file is reported and counted, and the others are read.
pub struct PcapSource {
    files: Vec<String>,
    next_file: usize,
    source: Option<FileSource>,
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
    rejected: Counter,
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
    /// BPF expression (tcpdump syntax); packets that do not match are not sent.
    pub filter: Option<String>,
    /// Packets per batch (default 256).
    #[serde(default = "default_batch")]
    pub batch: usize,
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

    fn check(s: &PcapSourceSettings) -> Result<(), String> {
        if s.files.is_empty() {
            return Err("`files` is empty".into());
        }
        // Inputs are checked before any block is built, so a missing file fails the run before
        // writers open (or create) their outputs.
        for f in &s.files {
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
            merged: None,
            file_filters: s
                .filter
                .as_deref()
                .map(|e| FileFilters::new(e, FILTER_SNAPLEN)),
            spare: Vec::new(),
            big_endian: Vec::new(),
            files_counted: 0,
            interfaces: Arc::from(Vec::new()),
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
            rejected: ctx.counter("filter_rejected"),
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
                self.source = None;
                return Poll::Busy;
            }
            Err(e) => {
                ctx.error(e);
                self.source = None;
                return Poll::Busy;
            }
        };
        if self.interfaces.len() != batch.interfaces().len() {
            self.interfaces = Arc::from(batch.interfaces().to_vec());
        }
        let mut slot = file_batch(&mut self.pool, &self.interfaces, self.stream, big_endian);
        let out = slot.get_mut();
        let mut rejected = 0u64;
        // The records' bytes stay in the source's buffer, shared with the batch (no copy);
        // the source reads on into another buffer while this one is held.
        out.fill_shared(&batch, shared_bytes);
        if let Some(filter) = self.filter.as_mut() {
            out.retain(|p| {
                let keep = filter
                    .matches(p.link_type, p.data, p.wire_len)
                    .unwrap_or(false);
                rejected += u64::from(!keep);
                keep
            });
        }
        let c = self.counters.as_ref().expect("started");
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
            ..FileSourceConfig::default()
        };
        let files = &self.files;
        let merged = self.merged.get_or_insert_with(|| {
            let paths: Vec<std::path::PathBuf> = files.iter().map(Into::into).collect();
            MergedFiles::open(&paths, &config)
        });
        let mut records = reuse_records(std::mem::take(&mut self.spare));
        let big_endian = &mut self.big_endian;
        big_endian.clear();
        let filters = &mut self.file_filters;
        let mut rejected = 0u64;
        let interfaces = merged.next_batch(&mut records, |pkt, file| {
            let keep = filters.as_mut().is_none_or(|f| {
                f.for_file(file.order, file.big_endian)
                    .matches(pkt.link_type, pkt.data, pkt.wire_len)
                    .unwrap_or(false)
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
            ..FileSourceConfig::default()
        };
        match FileSource::with_config(path, config) {
            Ok(source) => {
                if let Some(expr) = &self.filter_expr {
                    let order = ByteOrder::of_file(source.big_endian());
                    self.filter = Some(FilterSet::new_for(expr, FILTER_SNAPLEN, order));
                }
                self.interfaces = Arc::from(source.interfaces().to_vec());
                self.source = Some(source);
                if let Some(c) = &self.counters {
                    c.files.add(1);
                }
            }
            Err(e) => ctx.error(e),
        }
        Poll::Busy
    }
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
