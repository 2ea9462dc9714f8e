//! Live capture: one thread per capture worker (an AF_PACKET socket in a fanout group, its own
//! flow table, its own series counter), and the main thread merging their output: flow records
//! as they come, series rows summed per second once every worker has closed that second.
//!
//! Time in a worker is packet time. When traffic pauses, the worker moves its clock on by the
//! wall-clock time elapsed since its last packet, so idle flows expire and empty seconds close
//! even when the packet clock (a NIC's hardware clock) is not the system clock.
use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use trawl_bpf::FilterSet;
use trawl_capture::live::{self, Fanout, LiveSource, LiveStats};
use trawl_capture::{PacketRecord, PacketSource, SourceStats};
use trawl_flow::format::RecordWriter;
use trawl_flow::{FlowConfig, FlowMeter, FlowRecord, MeterStats};
use trawl_ring::dedup::Dedup;
use trawl_ring::{Producer, ProducerStats};
use trawl_series::{
    SeriesConfig, SeriesCounter, SeriesMerger, SeriesRow, SeriesStats, SeriesWriter,
};

use crate::flows::LiveInput;
use crate::run::{LiveReport, Output, RunReport};

/// One capture socket and what the worker that reads it needs.
pub struct Worker {
    source: LiveSource,
    /// `iface-worker`, for ring names and messages.
    label: String,
    cpu: Option<usize>,
    /// The shared packet ring this worker produces into (`trawl run`).
    ring: Option<Producer>,
    /// Switching-duplicate removal before anything else sees the packet.
    dedup: Option<Dedup>,
    /// A filter libpcap's offline compiler cannot express for a live socket (VLAN tags are
    /// metadata there), run in user space on the restored frames instead.
    user_filter: Option<FilterSet>,
    /// Position of the interface in the `-i` list (its multicast feed group offset) and its
    /// kernel index (the IPFIX observation domain of its records).
    slot: u16,
    domain: u32,
}

/// Opens every socket (before privileges are dropped) so that every error surfaces before
/// capture starts.
pub fn open_workers(live: &LiveInput, filter: Option<&str>) -> Result<(Vec<Worker>, bool)> {
    let mut workers = Vec::new();
    let mut kernel_filter = false;
    for (i, name) in live.interfaces.iter().enumerate() {
        let link = live::link_type_of(name)?;
        let mut config = live.socket.clone();
        config.interface = name.clone();
        let mut user_filter = None;
        if let Some(expr) = filter {
            if trawl_bpf::needs_user_space_on_live_socket(expr) {
                let mut set = FilterSet::new(expr, config.snaplen);
                set.prepare(link)
                    .map_err(|e| anyhow::anyhow!("{e}"))
                    .context("invalid filter expression")?;
                user_filter = Some(set);
            } else {
                let f = trawl_bpf::Filter::compile(expr, link, config.snaplen)
                    .map_err(|e| anyhow::anyhow!("{e}"))
                    .context("invalid filter expression")?;
                config.filter = Some(f.socket_program());
                kernel_filter = true;
            }
        }
        if live.workers > 1 {
            // Unique per interface, and unlikely to meet another process's group.
            let group = (std::process::id() as u16)
                .wrapping_mul(64)
                .wrapping_add(i as u16);
            config.fanout = Some(Fanout {
                group,
                mode: live.fanout,
            });
        }
        let first = workers.len();
        for _ in 0..live.workers {
            let source = LiveSource::open(config.clone())?;
            let cpu = (!live.cpus.is_empty()).then(|| live.cpus[workers.len() % live.cpus.len()]);
            workers.push(Worker {
                label: format!("{name}-{}", workers.len() - first),
                source,
                cpu,
                ring: None,
                dedup: None,
                user_filter: user_filter.clone(),
                slot: i as u16,
                domain: crate::export::ifindex(name),
            });
        }
    }
    Ok((workers, kernel_filter))
}

impl Worker {
    /// The name of the interface this worker captures on (the label is `iface-worker`).
    fn iface_name(&self) -> String {
        self.source
            .interfaces()
            .first()
            .and_then(|i| i.name.clone())
            .unwrap_or_else(|| self.label.clone())
    }
}

/// Where each worker's timestamps come from, for the summary.
pub fn timestamp_sources(workers: &[Worker]) -> Vec<&'static str> {
    workers
        .iter()
        .map(|w| match w.source.timestamp_source() {
            live::TimestampSource::Hardware => "hardware",
            live::TimestampSource::Software => "software",
        })
        .collect()
}

impl LiveOutcome {
    /// The summary's view of the run: `workers` opened by [`open_workers`] (which said whether
    /// the filter runs in the kernel) on the interfaces of `live`.
    pub fn report(
        &self,
        live: &LiveInput,
        workers: usize,
        kernel_filter: bool,
        timestamp_sources: Vec<&'static str>,
    ) -> RunReport {
        RunReport {
            input_errors: self.errors.clone(),
            source: self.source,
            filter_rejected: self.filter_rejected,
            elapsed: self.elapsed,
            live: Some(LiveReport {
                interfaces: live.interfaces.clone(),
                workers,
                stats: self.live,
                kernel_filter,
                user: live.user.clone(),
                timestamp_sources,
                duplicates: self.duplicates,
                ring: self.ring,
            }),
            ..RunReport::default()
        }
    }
}

/// Switches to `--user` once everything privileged (sockets, rings) is open.
pub fn drop_privileges(live: &LiveInput) -> Result<()> {
    if let Some(user) = &live.user {
        live::drop_privileges(user)
            .with_context(|| format!("cannot switch to user '{user}' (--user)"))?;
    }
    Ok(())
}

/// Where a live run writes: flow records, merged series rows, or both (`trawl run`).
pub struct Outputs<'a> {
    pub flows: Option<(&'a mut Output, RecordWriter)>,
    pub series: Option<(&'a mut Output, SeriesWriter)>,
    /// Flow exporters (IPFIX, NetFlow, JSON, multicast feed): each worker pushes its records.
    pub export: Option<&'a trawl_export::ExportHub>,
    /// Multicast feed of the merged series rows.
    pub series_feed: Option<&'a mut trawl_export::feed::SeriesFeed>,
    /// The flow database: every worker writes its records into it (Parquet blocks per
    /// interface and 5-minute interval; workers of one interface add parts to a block).
    pub store: Option<&'a StoreOutput>,
}

/// Where `trawl run` stores flow records (`--db`, `[store]`).
#[derive(Clone, Debug)]
pub struct StoreOutput {
    pub db: std::path::PathBuf,
    pub config: trawl_store::StoreConfig,
    /// Applied every minute while the run goes, and once at its end.
    pub retention: trawl_store::Retention,
}

impl Outputs<'_> {
    fn failed(&self) -> bool {
        self.flows.as_ref().is_some_and(|(o, _)| o.failed())
            || self.series.as_ref().is_some_and(|(o, _)| o.failed())
    }
}

enum Msg {
    /// Formatted flow records.
    Records(Vec<u8>),
    /// A worker's row for one second.
    Row(usize, SeriesRow),
    /// The worker has emitted every second before this one.
    Watermark(usize, u64),
    /// The worker is done (its report follows through the join handle).
    Done(usize),
}

struct WorkerReport {
    source: SourceStats,
    live: LiveStats,
    meter: MeterStats,
    table: trawl_flow::TableSize,
    series: SeriesStats,
    filter_rejected: u64,
    duplicates: u64,
    ring: Option<ProducerStats>,
    store: Option<trawl_store::IngestStats>,
    error: Option<String>,
}

/// What a live run hands back for the summary.
pub struct LiveOutcome {
    pub source: SourceStats,
    pub live: LiveStats,
    pub meter: MeterStats,
    /// The workers' flow tables together.
    pub table: trawl_flow::TableSize,
    pub series: SeriesStats,
    pub filter_rejected: u64,
    /// Switching duplicates removed.
    pub duplicates: u64,
    /// Shared rings' producer counters, summed.
    pub ring: Option<ProducerStats>,
    /// Flow database writers' counters, summed.
    pub store: Option<trawl_store::IngestStats>,
    pub errors: Vec<String>,
    pub elapsed: Duration,
}

const CHUNK: usize = 256 << 10;

/// Runs the workers until `stop`, the duration or the packet count, writing `product` to
/// `out`.
pub fn run(
    live: &LiveInput,
    flow: &FlowConfig,
    workers: Vec<Worker>,
    mut outputs: Outputs<'_>,
    stop: Arc<AtomicBool>,
    progress: bool,
    status: Option<(Duration, Vec<(String, trawl_ring::Ring)>)>,
) -> LiveOutcome {
    let started = Instant::now();
    let n = workers.len();
    let remaining = Arc::new(AtomicU64::new(live.count.unwrap_or(u64::MAX)));
    let packets_seen = Arc::new(Seen::default());
    let (tx, rx) = mpsc::sync_channel::<Msg>(1024);
    let writer = outputs.flows.as_ref().map(|(_, w)| w.clone());
    let series_mode = outputs.series.is_some() || outputs.series_feed.is_some();
    // The flow database needs records cut at its 5-minute boundaries (exact time-range sums);
    // the other outputs then get the same cut records.
    let mut flow = flow.clone();
    if outputs.store.is_some() {
        flow.interval_align_ns = trawl_store::BLOCK_NS;
    }
    let flow = &flow;
    // Each interface's own series for its multicast group (the merged series of all of them
    // goes to the series output): only with a feed and several interfaces.
    let slots: Vec<(u16, u32)> = workers.iter().map(|w| (w.slot, w.domain)).collect();
    let interfaces = slots
        .iter()
        .map(|(s, _)| usize::from(*s) + 1)
        .max()
        .unwrap_or(0);
    let mut per_interface: Vec<(u16, u32, SeriesMerger)> = Vec::new();
    if outputs.series_feed.is_some() && interfaces > 1 {
        for slot in 0..interfaces as u16 {
            let mut m = SeriesMerger::new(n);
            let mut domain = 0;
            for (i, (s, d)) in slots.iter().enumerate() {
                if *s == slot {
                    domain = *d;
                } else {
                    // Other interfaces' workers never hold this interface's rows back.
                    m.watermark(i, u64::MAX);
                }
            }
            per_interface.push((slot, domain, m));
        }
    }
    let mut handles = Vec::new();
    for (index, w) in workers.into_iter().enumerate() {
        let tx = tx.clone();
        let stop = stop.clone();
        let remaining = remaining.clone();
        let seen = packets_seen.clone();
        let flow = flow.clone();
        // Each worker meters one interface: its records say which.
        let writer = writer.clone().map(|r| r.with_iface(&w.iface_name()));
        let export = outputs
            .export
            .map(|h| crate::export::handle(h, w.domain, w.slot).with_iface(&w.iface_name()));
        let store = outputs.store.cloned();
        let handle = std::thread::Builder::new()
            .name(format!("capture-{index}"))
            .spawn(move || {
                worker_loop(
                    index,
                    w,
                    flow,
                    writer,
                    export,
                    store,
                    series_mode,
                    &tx,
                    &stop,
                    &remaining,
                    &seen,
                )
            })
            .expect("spawn capture worker");
        handles.push(handle);
    }
    drop(tx);

    let deadline = live.duration_ns.map(|d| started + Duration::from_nanos(d));
    let mut merger = SeriesMerger::new(n);
    let mut last_progress = Instant::now();
    let mut last_status = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(Msg::Records(bytes)) => {
                if let Some((out, _)) = outputs.flows.as_mut() {
                    out.buf().extend_from_slice(&bytes);
                    out.maybe_flush();
                }
            }
            Ok(Msg::Row(w, row)) => {
                merger.add(row);
                if let Some((_, _, m)) = per_interface.get_mut(usize::from(slots[w].0)) {
                    m.add(row);
                }
            }
            Ok(Msg::Watermark(w, s)) => {
                merger.watermark(w, s);
                for (_, _, m) in per_interface.iter_mut() {
                    m.watermark(w, s);
                }
            }
            Ok(Msg::Done(w)) => {
                merger.watermark(w, u64::MAX);
                for (_, _, m) in per_interface.iter_mut() {
                    m.watermark(w, u64::MAX);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        drain_series(&mut merger, &mut per_interface, &mut outputs);
        if outputs.failed() {
            stop.store(true, Ordering::Relaxed);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            stop.store(true, Ordering::Relaxed);
        }
        if let Some((every, rings)) = &status {
            if last_status.elapsed() >= *every {
                last_status = Instant::now();
                let mut line = status_line(&packets_seen, started, rings);
                if let Some(trouble) = outputs.export.and_then(crate::export::status) {
                    line.push_str("; ");
                    line.push_str(&trouble);
                }
                eprintln!("{line}");
            }
        }
        if progress && last_progress.elapsed() >= Duration::from_millis(250) {
            last_progress = Instant::now();
            let p = packets_seen.packets.load(Ordering::Relaxed);
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            eprint!(
                "\r\x1b[K{} packets ({}/s) on {} worker(s)",
                p,
                trawl_compose::human_rate(p as f64 / secs),
                n
            );
        }
    }
    drain_series(&mut merger, &mut per_interface, &mut outputs);
    if progress {
        eprint!("\r\x1b[K");
    }
    let mut outcome = LiveOutcome {
        source: SourceStats::default(),
        live: LiveStats::default(),
        meter: MeterStats::default(),
        table: Default::default(),
        series: SeriesStats::default(),
        filter_rejected: 0,
        duplicates: 0,
        ring: None,
        store: None,
        errors: Vec::new(),
        elapsed: Duration::ZERO,
    };
    for h in handles {
        match h.join() {
            Ok(r) => {
                outcome.source.add(&r.source);
                outcome.live.merge(&r.live);
                outcome.meter.merge(&r.meter);
                outcome.table.merge(&r.table);
                outcome.series.rows = merger.rows();
                outcome.series.late_packets += r.series.late_packets;
                outcome.series.skipped_empty_seconds += r.series.skipped_empty_seconds;
                outcome.filter_rejected += r.filter_rejected;
                outcome.duplicates += r.duplicates;
                if let Some(p) = r.ring {
                    outcome
                        .ring
                        .get_or_insert_with(ProducerStats::default)
                        .merge(&p);
                }
                if let Some(st) = r.store {
                    outcome
                        .store
                        .get_or_insert_with(Default::default)
                        .merge(&st);
                }
                outcome.errors.extend(r.error);
            }
            Err(_) => outcome.errors.push("a capture worker panicked".into()),
        }
    }
    outcome.elapsed = started.elapsed();
    outcome
}

/// Writes the rows every worker has closed to the series output and the series feed (with
/// several interfaces, each interface's rows to its own group).
fn drain_series(
    merger: &mut SeriesMerger,
    per_interface: &mut [(u16, u32, SeriesMerger)],
    outputs: &mut Outputs<'_>,
) {
    let Outputs {
        series,
        series_feed,
        ..
    } = outputs;
    let whole_to_feed = per_interface.is_empty();
    merger.drain(|row| {
        if let Some((out, sw)) = series.as_mut() {
            sw.write(row, out.buf());
        }
        if let Some(feed) = series_feed.as_mut().filter(|_| whole_to_feed) {
            feed.send(row);
        }
    });
    if let Some(feed) = series_feed.as_mut() {
        for (slot, domain, m) in per_interface.iter_mut() {
            m.drain(|row| feed.send_slot(*slot, *domain, row));
        }
    }
    if let Some((out, _)) = series.as_mut() {
        out.maybe_flush();
    }
}

#[allow(clippy::too_many_arguments)]
fn worker_loop(
    index: usize,
    mut w: Worker,
    flow: FlowConfig,
    writer: Option<RecordWriter>,
    export: Option<trawl_export::ExportHandle>,
    store: Option<StoreOutput>,
    series_mode: bool,
    tx: &mpsc::SyncSender<Msg>,
    stop: &AtomicBool,
    remaining: &AtomicU64,
    seen: &Seen,
) -> WorkerReport {
    if let Some(cpu) = w.cpu {
        // Pinning is best effort: capture still works unpinned, and the summary says so.
        if let Err(e) = live::pin_current_thread(cpu) {
            eprintln!("trawl: warning: cannot pin worker {index} to CPU {cpu}: {e}");
        }
    }
    // Flows are computed only when something consumes them: `trawl run` without flow or series
    // outputs is a pure capture server feeding its rings, and counts packets only.
    let mut store_error = None;
    let store = store.and_then(|s| match WorkerStore::open(&s, &w) {
        Ok(ws) => Some(ws),
        Err(e) => {
            store_error = Some(format!("flow database {}: {e}", s.db.display()));
            None
        }
    });
    let mut meter = (writer.is_some() || export.is_some() || store.is_some() || series_mode)
        .then(|| FlowMeter::new(flow));
    let mut counted = MeterStats::default();
    let state = RefCell::new(WorkerState {
        writer,
        export,
        store,
        buf: Vec::with_capacity(CHUNK * 2),
        series: series_mode.then(|| SeriesCounter::new(SeriesConfig::default())),
        rows: Vec::new(),
        last_send: Instant::now(),
    });
    let mut sink = |r: &FlowRecord<'_>| state.borrow_mut().record(r);
    let mut spare: Vec<PacketRecord<'static>> = Vec::with_capacity(1 << 14);
    let mut filter_rejected = 0u64;
    let mut error = None;
    let mut ring_errors: Option<String> = None;
    // The packet clock and the wall clock at the newest packet.
    let mut clock: Option<(u64, Instant)> = None;
    let mut drops_told = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let batch = match w.source.next_batch() {
            Ok(Some(b)) => b,
            Ok(None) => break,
            Err(e) => {
                error = Some(e.to_string());
                break;
            }
        };
        let mut selected = trawl_capture::reuse_records(std::mem::take(&mut spare));
        if w.user_filter.is_none() && w.dedup.is_none() {
            // Straight into the batch: built on the stack for the checks' sake and copied from
            // there, each record stalled on store forwarding.
            selected.extend(batch.iter());
        } else {
            for pkt in batch.iter() {
                if let Some(f) = w.user_filter.as_mut() {
                    if !f
                        .matches(pkt.link_type, pkt.data, pkt.wire_len)
                        .unwrap_or(false)
                    {
                        filter_rejected += 1;
                        continue;
                    }
                }
                if let Some(d) = w.dedup.as_mut() {
                    if d.is_duplicate(pkt.ts_ns, pkt.wire_len, pkt.data) {
                        continue;
                    }
                }
                selected.push(pkt);
            }
        }
        if !selected.is_empty() {
            let want = selected.len() as u64;
            let granted = reserve(remaining, want);
            selected.truncate(granted as usize);
            if granted < want {
                stop.store(true, Ordering::Relaxed);
            }
            seen.packets.fetch_add(granted, Ordering::Relaxed);
        }
        // Nobody attached: nothing to publish (a listener that joins starts at the current
        // write position and would never read what is written now).
        if let Some(p) = w.ring.as_mut().filter(|p| p.has_listeners()) {
            for pkt in &selected {
                if let Err(e) = p.push_record(pkt) {
                    ring_errors.get_or_insert_with(|| format!("ring of {}: {e}", w.label));
                    break;
                }
            }
            p.publish();
        }
        match meter.as_mut() {
            Some(m) => m.process_batch(&selected, &mut sink, |i, o| {
                let p = &selected[i];
                state.borrow_mut().observe(p, o);
            }),
            None => {
                counted.packets += selected.len() as u64;
                counted.wire_bytes += selected.iter().map(|p| u64::from(p.wire_len)).sum::<u64>();
            }
        }
        let now = match (selected.iter().map(|p| p.ts_ns).max(), clock) {
            (Some(ts), _) => {
                let ts = clock.map_or(ts, |(c, _)| c.max(ts));
                clock = Some((ts, Instant::now()));
                ts
            }
            (None, Some((ts, at))) => ts + at.elapsed().as_nanos() as u64,
            (None, None) => trawl_time::now_ns(),
        };
        spare = trawl_capture::reuse_records(selected);
        if let Some(m) = meter.as_mut() {
            m.advance(now, &mut sink);
        }
        state.borrow_mut().tick(now, index, tx);
        // The source polls the kernel's counters every 100 ms: pass on what it found.
        let drops = w.source.live_stats().kernel_drops;
        seen.kernel_drops
            .fetch_add(drops - drops_told, Ordering::Relaxed);
        drops_told = drops;
    }
    w.source.refresh_kernel_stats();
    if let Some(p) = w.ring.as_mut() {
        p.close();
    }
    if let Some(m) = meter.as_mut() {
        m.flush(&mut sink);
    }
    state.borrow_mut().finish(index, tx);
    let (store, store_finish_error) = match state.borrow_mut().store.take() {
        Some(ws) => {
            let earlier = ws.error.clone();
            match ws.ingest.finish() {
                Ok(st) => (Some(st), earlier),
                Err(e) => (None, Some(format!("flow database: {e}"))),
            }
        }
        None => (None, None),
    };
    let series = state
        .borrow()
        .series
        .as_ref()
        .map(|s| s.stats())
        .unwrap_or_default();
    let _ = tx.send(Msg::Done(index));
    WorkerReport {
        source: w.source.stats(),
        live: w.source.live_stats(),
        meter: meter.as_ref().map_or(counted, |m| *m.stats()),
        table: meter.as_ref().map(|m| m.table_size()).unwrap_or_default(),
        series,
        filter_rejected,
        duplicates: w.dedup.as_ref().map_or(0, |d| d.stats().duplicates),
        ring: w.ring.as_ref().map(|p| p.stats()),
        store,
        error: error
            .map(|e| format!("worker {index}: {e}"))
            .or(ring_errors)
            .or(store_error)
            .or(store_finish_error),
    }
}

/// One line for operators: packets so far, and each ring's listeners with their backlog and
/// misses.
/// What the capture workers have seen so far, for the status and progress lines.
#[derive(Default)]
struct Seen {
    /// Packets taken (after the user filter and dedup).
    packets: AtomicU64,
    /// Packets the kernel dropped, as the sources last polled it: a status line tells when
    /// drops happened, the summary only how many.
    kernel_drops: AtomicU64,
}

fn status_line(seen: &Seen, started: Instant, rings: &[(String, trawl_ring::Ring)]) -> String {
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let packets = seen.packets.load(Ordering::Relaxed);
    let mut line = format!(
        "trawl: {:.0}s: {packets} packets ({}/s), {} kernel drops",
        secs,
        trawl_compose::human_rate(packets as f64 / secs),
        seen.kernel_drops.load(Ordering::Relaxed)
    );
    for (name, ring) in rings {
        let listeners = ring.listeners();
        let missed: u64 = listeners.iter().map(|l| l.stats.records_missed).sum();
        let waits = ring.stats().wait_count;
        line.push_str(&format!(
            "; ring {name}: {} listener(s), {missed} missed, producer waited {waits} times",
            listeners.len()
        ));
    }
    line
}

/// Takes up to `want` packets from the shared `--count` budget; returns how many were granted.
fn reserve(remaining: &AtomicU64, want: u64) -> u64 {
    let mut granted = 0;
    let _ = remaining.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| {
        granted = r.min(want);
        Some(r - granted)
    });
    granted
}

/// A worker's writer into the flow database.
struct WorkerStore {
    ingest: trawl_store::Ingest,
    iface: trawl_store::IfaceId,
    /// First error; the worker stops storing after it (capture and the other outputs go on).
    error: Option<String>,
}

impl WorkerStore {
    fn open(s: &StoreOutput, w: &Worker) -> trawl_store::Result<WorkerStore> {
        let mut ingest = trawl_store::Ingest::open(&s.db, s.config.clone())?;
        let iface = ingest.iface(&w.iface_name())?;
        Ok(WorkerStore {
            ingest,
            iface,
            error: None,
        })
    }
}

struct WorkerState {
    writer: Option<RecordWriter>,
    export: Option<trawl_export::ExportHandle>,
    store: Option<WorkerStore>,
    buf: Vec<u8>,
    series: Option<SeriesCounter>,
    rows: Vec<SeriesRow>,
    last_send: Instant,
}

impl WorkerState {
    fn record(&mut self, r: &FlowRecord<'_>) {
        if let Some(w) = self.writer.as_mut() {
            w.write(r, &mut self.buf);
        }
        if let Some(e) = self.export.as_mut() {
            e.push(r);
        }
        if let Some(ws) = self.store.as_mut().filter(|ws| ws.error.is_none()) {
            if let Err(e) = ws.ingest.push(ws.iface, r) {
                ws.error = Some(format!("flow database: {e}"));
            }
        }
    }

    fn observe(&mut self, p: &PacketRecord<'_>, o: &trawl_flow::PacketOutcome) {
        if let Some(s) = self.series.as_mut() {
            let rows = &mut self.rows;
            s.observe(p.ts_ns, p.wire_len, p.direction, o, &mut |r: &SeriesRow| {
                rows.push(*r)
            });
        }
    }

    fn tick(&mut self, now: u64, index: usize, tx: &mpsc::SyncSender<Msg>) {
        if let Some(e) = self.export.as_mut() {
            e.tick();
        }
        // Blocks whose interval (plus the grace time) the packet clock has passed.
        if let Some(ws) = self.store.as_mut().filter(|ws| ws.error.is_none()) {
            if let Err(e) = ws.ingest.advance(now) {
                ws.error = Some(format!("flow database: {e}"));
            }
        }
        if let Some(s) = self.series.as_mut() {
            let rows = &mut self.rows;
            s.advance(now, &mut |r: &SeriesRow| rows.push(*r));
            for r in self.rows.drain(..) {
                let _ = tx.send(Msg::Row(index, r));
            }
            if let Some(w) = s.emitted_before() {
                let _ = tx.send(Msg::Watermark(index, w));
            }
        }
        if self.buf.len() >= CHUNK
            || (!self.buf.is_empty() && self.last_send.elapsed() >= Duration::from_millis(200))
        {
            let full = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK * 2));
            let _ = tx.send(Msg::Records(full));
            self.last_send = Instant::now();
        }
    }

    fn finish(&mut self, index: usize, tx: &mpsc::SyncSender<Msg>) {
        if let Some(e) = self.export.as_mut() {
            e.flush();
        }
        if let Some(s) = self.series.as_mut() {
            let rows = &mut self.rows;
            s.finish(&mut |r: &SeriesRow| rows.push(*r));
            for r in self.rows.drain(..) {
                let _ = tx.send(Msg::Row(index, r));
            }
            let _ = tx.send(Msg::Watermark(index, u64::MAX));
        }
        if !self.buf.is_empty() {
            let _ = tx.send(Msg::Records(std::mem::take(&mut self.buf)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_budget_is_shared_exactly() {
        let r = AtomicU64::new(10);
        assert_eq!(reserve(&r, 4), 4);
        assert_eq!(reserve(&r, 8), 6);
        assert_eq!(reserve(&r, 1), 0);
    }
}
