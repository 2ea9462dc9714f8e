//! The dumper: packet records in, segments with indexes out.
use std::path::PathBuf;

use trawl_capture::{pcap_file_header, pcap_record_header, Interface, LinkType, PacketRecord};

use crate::block::{IoThread, SegmentFile, ALIGN};
use crate::cutoff::{Cutoff, CutoffStats};
use crate::error::Error;
use crate::index::IndexBuilder;
use crate::items::FactFinder;
use crate::layout::{index_path, list_segments, sanitise, SegmentName};
use crate::pcapfile::MAX_CAPLEN;
use crate::repair::{repair_segment, RepairReport};
use crate::retention::RetentionHandle;

const HOUR_NS: u64 = 3600 * 1_000_000_000;
/// The last instant a pcap record header can hold.
pub const MAX_PCAP_TS: u64 = u32::MAX as u64 * 1_000_000_000 + 999_999_999;

/// Settings of a [`Dumper`].
#[derive(Clone, Debug)]
pub struct DumperConfig {
    /// Root directory of the store.
    pub dir: PathBuf,
    /// Capture worker number, part of every segment name (one dumper per worker).
    pub worker: u16,
    /// A segment is closed before it would exceed this many bytes.
    pub segment_bytes: u64,
    /// A segment is closed when a packet arrives this long (packet time) after its first, and
    /// always at an hour boundary (so a segment lies inside its hour directory).
    pub segment_ns: u64,
    /// Bytes per write (a multiple of 4 KiB).
    pub block_bytes: usize,
    /// Block buffers in flight between the dumper and its I/O thread.
    pub buffers: usize,
    /// An index chunk ends after this many packets...
    pub index_packets: u32,
    /// ...or this much packet time.
    pub index_ns: u64,
    /// Record hashed addresses and ports per chunk (host/port filtered retrieval skips chunks).
    pub host_index: bool,
    /// Keep only the first this-many bytes (frame lengths, both directions) of every flow.
    pub cutoff_bytes: Option<u64>,
    /// A flow silent this long starts its cutoff count again.
    pub cutoff_idle_ns: u64,
    /// Use O_DIRECT where the filesystem supports it.
    pub direct_io: bool,
    /// How often [`Dumper::tick`] makes pending data durable (wall-clock ns).
    pub flush_ns: u64,
}

impl DumperConfig {
    /// Defaults for a store in `dir`: 1 GiB / 60 s segments, 4 MiB blocks, an index entry per
    /// 4096 packets or 100 ms, host index on, no cutoff, O_DIRECT, flush every second.
    pub fn new(dir: impl Into<PathBuf>) -> DumperConfig {
        DumperConfig {
            dir: dir.into(),
            worker: 0,
            segment_bytes: 1 << 30,
            segment_ns: 60 * 1_000_000_000,
            block_bytes: 4 << 20,
            buffers: 4,
            index_packets: 4096,
            index_ns: 100_000_000,
            host_index: true,
            cutoff_bytes: None,
            cutoff_idle_ns: 60 * 1_000_000_000,
            direct_io: true,
            flush_ns: 1_000_000_000,
        }
    }

    /// Checks the sizes and times (done again by [`Dumper::new`]): for callers that refuse bad
    /// settings before they start anything.
    pub fn validate(&self) -> Result<(), Error> {
        if self.block_bytes == 0 || !self.block_bytes.is_multiple_of(ALIGN) {
            return Err(Error::Config(format!(
                "block size {} is not a positive multiple of 4096",
                self.block_bytes
            )));
        }
        if self.segment_bytes < 64 * 1024 {
            return Err(Error::Config(format!(
                "segment size {} is below the 64 KiB minimum",
                self.segment_bytes
            )));
        }
        if self.segment_ns == 0 {
            return Err(Error::Config("segment time must be positive".into()));
        }
        Ok(())
    }
}

/// Counters of a dumper.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DumperStats {
    /// Packets written.
    pub packets: u64,
    /// Bytes of segment files written (headers included).
    pub bytes: u64,
    /// Segments closed with their index.
    pub segments: u64,
    /// Records cut to the 256 KiB maximum the store keeps.
    pub truncated: u64,
    /// Timestamps after 2106-02-07 (pcap's 32-bit seconds) stored as [`MAX_PCAP_TS`].
    pub timestamps_clamped: u64,
    /// Segments repaired at start (left open by a crash).
    pub repaired: u64,
    /// Bytes cut off repaired segments (torn records, padding).
    pub repaired_bytes_cut: u64,
    /// Per-connection cutoff.
    pub cutoff: CutoffStats,
    /// Whether blocks went out with O_DIRECT (false: buffered, the filesystem refused it).
    pub direct_io: bool,
}

impl DumperStats {
    /// Adds another dumper's counters (several workers); `direct_io` holds if it held for all.
    pub fn merge(&mut self, o: &DumperStats) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.segments += o.segments;
        self.truncated += o.truncated;
        self.timestamps_clamped += o.timestamps_clamped;
        self.repaired += o.repaired;
        self.repaired_bytes_cut += o.repaired_bytes_cut;
        self.cutoff.packets_cut += o.cutoff.packets_cut;
        self.cutoff.bytes_cut += o.cutoff.bytes_cut;
        self.cutoff.flows_cut += o.cutoff.flows_cut;
        self.cutoff.evictions += o.cutoff.evictions;
        self.direct_io &= o.direct_io;
    }
}

/// Which stream a packet belongs to: one per interface of the source.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StreamId {
    /// Interface name as used in segment names.
    pub iface: String,
    /// Worker number.
    pub worker: u16,
}

struct OpenSegment {
    file: SegmentFile,
    index: IndexBuilder,
    name: SegmentName,
    /// Packet time at which the segment is closed.
    deadline: u64,
    /// Wall clock of the last write (idle streams close their segment).
    last_write_wall: u64,
}

struct Stream {
    iface: String,
    link: LinkType,
    snaplen: u32,
    open: Option<OpenSegment>,
    /// Name time of the stream's latest segment: names increase in write order, so readers
    /// that sort a stream's segments by name read them in the order they were written, even
    /// when the input's timestamps repeat or go back.
    last_start: u64,
}

/// Writes packet records into segments (see the crate documentation).
pub struct Dumper {
    config: DumperConfig,
    io: IoThread,
    streams: Vec<Stream>,
    /// Source interface index → its stream in `streams`.
    stream_of: Vec<Option<usize>>,
    facts: FactFinder,
    cutoff: Option<Cutoff>,
    retention: Option<RetentionHandle>,
    stats: DumperStats,
    last_flush_wall: u64,
    repaired_streams: Vec<String>,
    /// Reports of segments repaired at start, for the caller to show.
    pub repairs: Vec<RepairReport>,
}

impl Dumper {
    /// A dumper; nothing is created on disk before the first packet.
    pub fn new(config: DumperConfig, retention: Option<RetentionHandle>) -> Result<Dumper, Error> {
        config.validate()?;
        let io = IoThread::new(
            config.block_bytes,
            config.buffers.max(2),
            &format!("trawl-dump-io{}", config.worker),
        )?;
        let cutoff = config
            .cutoff_bytes
            .map(|limit| Cutoff::new(limit, config.cutoff_idle_ns, 20));
        Ok(Dumper {
            io,
            streams: Vec::new(),
            stream_of: Vec::new(),
            facts: FactFinder::new(config.cutoff_bytes.is_some()),
            cutoff,
            retention,
            stats: DumperStats {
                direct_io: config.direct_io,
                ..DumperStats::default()
            },
            last_flush_wall: 0,
            repaired_streams: Vec::new(),
            repairs: Vec::new(),
            config,
        })
    }

    /// The settings.
    pub fn config(&self) -> &DumperConfig {
        &self.config
    }

    /// Writes one packet of interface `iface_index` (described by `iface`). Returns whether it
    /// was kept (false: past its flow's cutoff).
    #[inline]
    pub fn write(
        &mut self,
        iface_index: u16,
        iface: &Interface,
        pkt: &PacketRecord<'_>,
    ) -> Result<bool, Error> {
        let data = &pkt.data[..pkt.data.len().min(MAX_CAPLEN as usize)];
        if data.len() < pkt.data.len() {
            self.stats.truncated += 1;
        }
        let need_facts = self.cutoff.is_some() || self.config.host_index;
        let facts = if need_facts {
            self.facts.facts(pkt.link_type, data)
        } else {
            Default::default()
        };
        if let (Some(c), Some(h)) = (self.cutoff.as_mut(), facts.flow_hash) {
            if !c.admit(h, pkt.ts_ns, pkt.wire_len, data.len() as u32) {
                return Ok(false);
            }
        }
        // pcap seconds are 32 bits: later times (corrupt or far-future captures) are stored as
        // the last instant pcap can express, and counted.
        let ts = if pkt.ts_ns > MAX_PCAP_TS {
            self.stats.timestamps_clamped += 1;
            MAX_PCAP_TS
        } else {
            pkt.ts_ns
        };
        let record_len = 16 + data.len() as u64;
        let i = match self.stream_of.get(usize::from(iface_index)) {
            Some(Some(slot)) => *slot,
            _ => self.add_stream(iface_index, iface)?,
        };
        let rotate = match &self.streams[i].open {
            None => false,
            Some(o) => {
                ts >= o.deadline
                    || (o.file.len() + record_len > self.config.segment_bytes
                        && o.index.packets() > 0)
            }
        };
        if rotate {
            self.close_stream(i)?;
        }
        let stream = &mut self.streams[i];
        if stream.open.is_none() {
            let o = open_segment(&self.config, &mut self.io, stream, ts)?;
            stream.last_start = o.name.start_ns;
            stream.open = Some(o);
            self.stats.direct_io &= stream.open.as_ref().expect("just opened").file.direct();
        }
        let o = stream.open.as_mut().expect("opened above");
        let items = facts.items.as_ref().map(|(items, n)| &items[..*n]);
        o.index.add(o.file.len(), ts, items);
        o.file.append(
            &mut self.io,
            &pcap_record_header(ts, data.len() as u32, pkt.wire_len),
        )?;
        o.file.append(&mut self.io, data)?;
        self.stats.packets += 1;
        self.stats.bytes += record_len;
        Ok(true)
    }

    /// Periodic work for live capture (call about every 100 ms–1 s with the wall clock): makes
    /// pending data durable every `flush_ns`, and closes the segment of a stream that has been
    /// silent for a whole segment time, so that it gets its index.
    pub fn tick(&mut self, now_wall_ns: u64) -> Result<(), Error> {
        if now_wall_ns.saturating_sub(self.last_flush_wall) < self.config.flush_ns {
            return Ok(());
        }
        self.last_flush_wall = now_wall_ns;
        for i in 0..self.streams.len() {
            let idle = match self.streams[i].open.as_ref() {
                Some(o) => now_wall_ns.saturating_sub(o.last_write_wall) >= self.config.segment_ns,
                None => continue,
            };
            if idle {
                self.close_stream(i)?;
            } else if let Some(o) = self.streams[i].open.as_mut() {
                o.file.flush(&mut self.io)?;
            }
        }
        Ok(())
    }

    /// Notes that packets were written at wall-clock `now` (for the idle rule of
    /// [`Dumper::tick`]); live writers call it once per batch.
    pub fn touch(&mut self, now_wall_ns: u64) {
        for s in self.streams.iter_mut() {
            if let Some(o) = s.open.as_mut() {
                o.last_write_wall = now_wall_ns;
            }
        }
    }

    /// Counters so far.
    pub fn stats(&self) -> DumperStats {
        let mut s = self.stats;
        if let Some(c) = &self.cutoff {
            s.cutoff = c.stats;
        }
        s
    }

    /// The stream names written so far (interface names as in segment names).
    pub fn streams(&self) -> Vec<StreamId> {
        self.streams
            .iter()
            .map(|s| StreamId {
                iface: s.iface.clone(),
                worker: self.config.worker,
            })
            .collect()
    }

    /// Closes every open segment (writing its tail and index) and returns the counters.
    pub fn finish(mut self) -> Result<DumperStats, Error> {
        for i in 0..self.streams.len() {
            self.close_stream(i)?;
        }
        Ok(self.stats())
    }

    /// The stream of a source interface seen for the first time. Interfaces with the same name
    /// and link type share a stream (a pcapng file declares its interfaces again in every
    /// section); the same name with another link type gets `NAME.linkN`.
    fn add_stream(&mut self, index: u16, iface: &Interface) -> Result<usize, Error> {
        let mut name = match &iface.name {
            Some(n) => sanitise(n),
            None => format!("if{index}"),
        };
        let same_name = |s: &Stream, name: &str| s.iface == name;
        if let Some(s) = self.streams.iter().find(|s| same_name(s, &name)) {
            if s.link != iface.link_type {
                name = format!("{name}.link{}", iface.link_type.0);
            }
        }
        let slot = match self
            .streams
            .iter()
            .position(|s| same_name(s, &name) && s.link == iface.link_type)
        {
            Some(slot) => slot,
            None => {
                let last_start = self.repair_stream(&name)?;
                self.streams.push(Stream {
                    last_start,
                    iface: name,
                    link: iface.link_type,
                    snaplen: if iface.snaplen == 0 {
                        MAX_CAPLEN
                    } else {
                        iface.snaplen.min(MAX_CAPLEN)
                    },
                    open: None,
                });
                self.streams.len() - 1
            }
        };
        let i = usize::from(index);
        if self.stream_of.len() <= i {
            self.stream_of.resize(i + 1, None);
        }
        self.stream_of[i] = Some(slot);
        Ok(slot)
    }

    fn close_stream(&mut self, i: usize) -> Result<(), Error> {
        let Some(o) = self.streams[i].open.take() else {
            return Ok(());
        };
        let path = o.file.path().to_path_buf();
        let len = o.file.close(&mut self.io)?;
        let index = o.index.finish(len);
        index.write_atomic(&index_path(&path))?;
        self.stats.segments += 1;
        if let Some(r) = &self.retention {
            r.closed(&path, o.name.start_ns, len, index.last_ts);
        }
        Ok(())
    }

    /// Repairs this stream's segments that a crash left without an index (only this stream's:
    /// other writers may be writing theirs right now). Returns the latest name time of the
    /// stream's existing segments (0 if none).
    pub fn prepare_stream(&mut self, iface: &str) -> Result<u64, Error> {
        self.repair_stream(&sanitise(iface))
    }

    fn repair_stream(&mut self, iface: &str) -> Result<u64, Error> {
        let mut last_start = 0;
        let prepared = self.repaired_streams.iter().any(|s| s == iface);
        for seg in list_segments(&self.config.dir)? {
            if seg.name.worker != self.config.worker || seg.name.iface != iface {
                continue;
            }
            last_start = last_start.max(seg.name.start_ns);
            if seg.indexed || prepared {
                continue;
            }
            let report = repair_segment(
                &seg.path,
                self.config.host_index,
                self.config.index_packets,
                self.config.index_ns,
            )?;
            self.stats.repaired += 1;
            self.stats.repaired_bytes_cut += report.cut_bytes;
            if let (Some(r), Some(last)) = (&self.retention, report.last_ts) {
                if !report.removed {
                    r.closed(&seg.path, seg.name.start_ns, report.kept_bytes, last);
                }
            }
            self.repairs.push(report);
        }
        if !prepared {
            self.repaired_streams.push(iface.to_string());
        }
        Ok(last_start)
    }
}

fn open_segment(
    config: &DumperConfig,
    io: &mut IoThread,
    stream: &Stream,
    ts: u64,
) -> Result<OpenSegment, Error> {
    let mut name = SegmentName::new(
        ts.max(stream.last_start.saturating_add(1)),
        config.worker,
        &stream.iface,
    );
    let mut file = loop {
        match SegmentFile::create(&name.path_in(&config.dir), io, config.direct_io) {
            Ok(f) => break f,
            // Same name from another run of this stream: the next nanosecond keeps the order.
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::AlreadyExists => {
                name.start_ns += 1;
            }
            Err(e) => return Err(e),
        }
    };
    file.append(io, &pcap_file_header(stream.link, stream.snaplen))?;
    let next_hour = (ts / HOUR_NS + 1).saturating_mul(HOUR_NS);
    Ok(OpenSegment {
        file,
        index: IndexBuilder::new(
            stream.link,
            stream.snaplen,
            config.host_index,
            config.index_packets,
            config.index_ns,
        ),
        name,
        deadline: ts.saturating_add(config.segment_ns).min(next_hour),
        last_write_wall: trawl_time::now_ns(),
    })
}
