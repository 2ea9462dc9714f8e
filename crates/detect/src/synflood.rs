//! SYN-flood detection: a count-min sketch of TCP SYNs per destination address per interval,
//! a non-parametric CUSUM on every sketch cell (the channels), and a Space-Saving summary of
//! the interval's SYN destinations that turns alarmed cells back into victim addresses.
//!
//! A destination is *in alarm* when every one of its `depth` cells is in alarm: like the
//! count-min estimate (the minimum over rows), a lone colliding cell cannot raise it. An alarm
//! starts at the end of the interval in which that first holds for a destination the interval's
//! summary holds, and ends at the end of the first interval in which one of its cells clears.
//!
//! While a destination is in alarm, the sources of its SYNs are counted too (a Space-Saving
//! summary of [`SOURCE_COUNTERS`] counters per alarm), and the alarm's end names the
//! [`TOP_SOURCES`] largest ([`TopSources`]): the flood's senders, when they are few (a botnet's,
//! a misbehaving client's); spoofed random sources give small counts none of which stands out.
//!
//! The detector works on packet timestamps only: the same packets give the same events, live
//! or from a file. Intervals close when a packet from a later interval arrives, or when the
//! caller advances the clock ([`SynFloodDetector::advance_to`]) or ends the input
//! ([`SynFloodDetector::finish`]).
use std::net::IpAddr;

use trawl_capture::PacketRecord;
use trawl_flow::decode::{decode, tcp_flags, DecodeConfig, Decoded, OutcomeCounters};

use crate::cusum::{Cusum, CusumConfig};
use crate::sketch::{addr_fingerprint, CountMin, Counter, SpaceSaving};

/// Nanoseconds per second.
const SECOND_NS: u64 = 1_000_000_000;

/// Sources an alarm's end names at most.
pub const TOP_SOURCES: usize = 5;

/// Counters of the Space-Saving summary of an alarm's sources: a source that sent more than
/// 1/`SOURCE_COUNTERS` of the victim's SYNs during the alarm is among them.
pub const SOURCE_COUNTERS: usize = 64;

/// The largest sources of an alarm's SYNs, largest first (counts are Space-Saving's: at most
/// `error_bound` over the true count).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TopSources {
    addrs: [[u8; 16]; TOP_SOURCES],
    syns: [u64; TOP_SOURCES],
    len: usize,
    /// SYNs to the victim counted during the alarm (from every source).
    pub total: u64,
    /// The largest overcount of any source's count (`total / SOURCE_COUNTERS`).
    pub error_bound: u64,
}

impl TopSources {
    fn of(summary: &SpaceSaving<[u8; 16]>, scratch: &mut Vec<Counter<[u8; 16]>>) -> TopSources {
        summary.top(scratch);
        let mut t = TopSources {
            total: summary.total(),
            error_bound: summary.error_bound(),
            ..TopSources::default()
        };
        for c in scratch.iter().take(TOP_SOURCES) {
            t.addrs[t.len] = c.item;
            t.syns[t.len] = c.count;
            t.len += 1;
        }
        t
    }

    /// The sources and their SYNs, largest first.
    pub fn iter(&self) -> impl Iterator<Item = (IpAddr, u64)> + '_ {
        self.addrs[..self.len]
            .iter()
            .zip(&self.syns)
            .map(|(a, &n)| (to_ip(a), n))
    }

    /// How many sources are named.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is (no SYN counted during the alarm).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Settings of a [`SynFloodDetector`].
#[derive(Clone, Copy, Debug)]
pub struct SynFloodConfig {
    /// Interval length in nanoseconds (default 1 s).
    pub interval_ns: u64,
    /// Count-min relative error ε: a destination's per-interval count is overestimated by at
    /// most ε·(SYNs in the interval) with probability 1 − δ.
    pub epsilon: f64,
    /// Count-min failure probability δ.
    pub delta: f64,
    /// Seed of the sketch's hash functions.
    pub seed: u64,
    /// CUSUM settings per cell, in SYNs per interval.
    pub cusum: CusumConfig,
    /// Counters of the per-interval Space-Saving summary of SYN destinations: every
    /// destination that receives more than 1/`candidates` of an interval's SYNs is named.
    pub candidates: usize,
    /// Decoder settings for [`SynFloodDetector::observe_packet`].
    pub decode: DecodeConfig,
}

impl Default for SynFloodConfig {
    fn default() -> Self {
        Self {
            interval_ns: SECOND_NS,
            epsilon: 0.001,
            delta: 0.01,
            seed: 0x5359_4e46_4c4f_4f44, // "SYNFLOOD"
            cusum: CusumConfig::default(),
            candidates: 64,
            decode: DecodeConfig::default(),
        }
    }
}

/// An alarm starting or ending.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SynFloodEvent {
    /// A destination went into alarm.
    Start {
        /// The victim.
        victim: IpAddr,
        /// Start of the interval in which the victim's cells began to rise: the estimated
        /// start of the flood.
        onset_ns: u64,
        /// End of the interval that raised the alarm.
        detected_ns: u64,
        /// SYNs per second to the victim in that interval (an upper estimate).
        rate: f64,
    },
    /// A destination's alarm ended.
    End {
        /// The victim.
        victim: IpAddr,
        /// The onset reported at the start.
        onset_ns: u64,
        /// End of the interval in which one of its cells cleared.
        end_ns: u64,
        /// Highest SYN/s over the alarm's intervals.
        peak_rate: f64,
        /// Estimated SYNs to the victim over the alarm's intervals (upper estimate).
        syns: u64,
        /// The sources that sent the victim most SYNs while the alarm lasted.
        top_sources: TopSources,
    },
}

impl SynFloodEvent {
    /// The victim address.
    pub fn victim(&self) -> IpAddr {
        match *self {
            SynFloodEvent::Start { victim, .. } | SynFloodEvent::End { victim, .. } => victim,
        }
    }
}

/// A destination currently in alarm.
#[derive(Debug)]
struct Active {
    addr: [u8; 16],
    fp: u64,
    onset_ns: u64,
    peak_rate: f64,
    syns: u64,
    /// The sources of its SYNs since the alarm started.
    sources: SpaceSaving<[u8; 16]>,
}

/// Counters of a detector.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SynFloodStats {
    /// Packets observed.
    pub packets: u64,
    /// Of those, SYNs without ACK.
    pub syns: u64,
    /// Intervals closed (including idle ones crossed in one step).
    pub intervals: u64,
}

/// The SYN-flood detector. Preallocates everything at construction; observing a packet does
/// not allocate (closing an interval may grow the caller's event vector).
#[derive(Debug)]
pub struct SynFloodDetector {
    config: SynFloodConfig,
    sketch: CountMin,
    cusum: Cusum,
    candidates: SpaceSaving<[u8; 16]>,
    active: Vec<Active>,
    /// Source summaries of ended alarms, cleared, for the next ones (no allocation per alarm
    /// once a few have been).
    spare: Vec<SpaceSaving<[u8; 16]>>,
    scratch: Vec<Counter<[u8; 16]>>,
    /// Start of the first interval; interval `n` starts at `base_ns + n · interval_ns`.
    base_ns: Option<u64>,
    /// Start of the open interval.
    start_ns: u64,
    decoded: Decoded,
    outcomes: OutcomeCounters,
    stats: SynFloodStats,
}

impl SynFloodDetector {
    /// A detector with `config`.
    ///
    /// # Panics
    /// When the settings are invalid (see [`CountMin::with_error`], [`Cusum::new`]) or
    /// `interval_ns` or `candidates` is 0.
    pub fn new(config: SynFloodConfig) -> Self {
        assert!(config.interval_ns > 0, "interval must be positive");
        let sketch = CountMin::with_error(config.epsilon, config.delta, config.seed);
        let cusum = Cusum::new(sketch.cells().len(), config.cusum);
        Self {
            config,
            cusum,
            candidates: SpaceSaving::new(config.candidates),
            active: Vec::with_capacity(config.candidates),
            spare: Vec::new(),
            scratch: Vec::with_capacity(SOURCE_COUNTERS),
            base_ns: None,
            start_ns: 0,
            decoded: Decoded::default(),
            outcomes: OutcomeCounters::default(),
            stats: SynFloodStats::default(),
            sketch,
        }
    }

    /// The settings.
    pub fn config(&self) -> &SynFloodConfig {
        &self.config
    }

    /// Takes over new CUSUM limits (threshold, drift, ceiling, low) without losing the
    /// sketch, the sums or the alarms in progress: [`Cusum::set_limits`].
    ///
    /// # Panics
    /// When the limits are inconsistent, as [`Cusum::new`].
    pub fn set_cusum_limits(&mut self, limits: CusumConfig) {
        self.cusum.set_limits(limits);
        self.config.cusum = *self.cusum.config();
    }

    /// Counters so far.
    pub fn stats(&self) -> SynFloodStats {
        self.stats
    }

    /// Decoder outcomes of [`observe_packet`](Self::observe_packet) so far.
    pub fn outcomes(&self) -> &OutcomeCounters {
        &self.outcomes
    }

    /// Victims currently in alarm.
    pub fn active(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.active.iter().map(|a| to_ip(&a.addr))
    }

    /// Decodes a captured packet and observes it: a SYN without ACK counts for its destination;
    /// any packet advances the clock.
    pub fn observe_packet(&mut self, pkt: &PacketRecord<'_>, events: &mut Vec<SynFloodEvent>) {
        let outcome = decode(
            pkt.link_type,
            pkt.data,
            &self.config.decode,
            &mut self.decoded,
        );
        self.outcomes.count(outcome);
        let d = &self.decoded;
        let syn = outcome.has_key()
            && d.proto == 6
            && d.tcp_valid
            && d.tcp.flags & (tcp_flags::SYN | tcp_flags::ACK) == tcp_flags::SYN;
        let (src, dst) = (d.src_ip, d.dst_ip);
        self.observe(pkt.ts_ns, &dst, syn, events);
        if syn {
            self.count_source(&src, &dst);
        }
    }

    /// Counts a SYN's source for its destination's alarm, if the destination is in one.
    #[inline]
    fn count_source(&mut self, src: &[u8; 16], dst: &[u8; 16]) {
        if let Some(a) = self.active.iter_mut().find(|a| a.addr == *dst) {
            a.sources.add(*src, 1);
        }
    }

    /// [`observe`](Self::observe) with the packet's source (IPv4 mapped into IPv6): a SYN to
    /// a destination in alarm counts for the alarm's top sources.
    pub fn observe_from(
        &mut self,
        ts_ns: u64,
        src: &[u8; 16],
        dst: &[u8; 16],
        syn: bool,
        events: &mut Vec<SynFloodEvent>,
    ) {
        self.observe(ts_ns, dst, syn, events);
        if syn {
            self.count_source(src, dst);
        }
    }

    /// Observes one packet: `dst` is its destination (IPv4 mapped into IPv6, as in
    /// [`Decoded::dst_ip`]), `syn` whether it is a TCP SYN without ACK.
    #[inline]
    pub fn observe(
        &mut self,
        ts_ns: u64,
        dst: &[u8; 16],
        syn: bool,
        events: &mut Vec<SynFloodEvent>,
    ) {
        self.advance_to(ts_ns, events);
        self.stats.packets += 1;
        if syn {
            self.stats.syns += 1;
            self.sketch.add(addr_fingerprint(dst), 1);
            self.candidates.add(*dst, 1);
        }
    }

    /// Closes every interval that ends at or before `ts_ns` (a timer tick or a packet's
    /// timestamp). Earlier timestamps than the open interval's start count into it.
    pub fn advance_to(&mut self, ts_ns: u64, events: &mut Vec<SynFloodEvent>) {
        let iv = self.config.interval_ns;
        let base = match self.base_ns {
            Some(b) => b,
            None => {
                let b = ts_ns - ts_ns % iv;
                self.base_ns = Some(b);
                self.start_ns = b;
                return;
            }
        };
        // Saturating: some captures carry timestamps near the end of the u64 range.
        if ts_ns < self.start_ns.saturating_add(iv) {
            return;
        }
        self.close_interval(base, events);
        // Intervals without packets: step zeros until every CUSUM has settled, then jump. Each
        // zero interval lowers every y by at least `drift`, so this takes at most
        // ⌈ceiling / drift⌉ rounds however long the gap (captures span years at times).
        let mut pending = (ts_ns - self.start_ns) / iv;
        while pending > 0 {
            if self.active.is_empty() && self.cusum.all_zero() {
                self.cusum.skip_idle(pending);
                self.stats.intervals += pending;
                self.start_ns += pending * iv;
                break;
            }
            self.close_interval(base, events);
            pending -= 1;
        }
    }

    /// Closes the open interval (the end of the input). Alarms still active stay active: their
    /// end has not been seen.
    pub fn finish(&mut self, events: &mut Vec<SynFloodEvent>) {
        if let Some(base) = self.base_ns {
            self.close_interval(base, events);
        }
    }

    fn close_interval(&mut self, base: u64, events: &mut Vec<SynFloodEvent>) {
        let iv = self.config.interval_ns;
        let end_ns = self.start_ns.saturating_add(iv);
        let per_s = SECOND_NS as f64 / iv as f64;
        self.cusum.step(self.sketch.cells(), |_, _| {});
        let (sketch, cusum) = (&self.sketch, &self.cusum);
        let all_alarm =
            |fp: u64| (0..sketch.depth()).all(|r| cusum.in_alarm(sketch.cell_index(r, fp)));
        // Alarms in progress: end them or account the interval.
        let mut i = 0;
        while i < self.active.len() {
            let a = &mut self.active[i];
            if all_alarm(a.fp) {
                let est = sketch.estimate(a.fp);
                a.syns += est;
                a.peak_rate = a.peak_rate.max(est as f64 * per_s);
                i += 1;
                continue;
            }
            let a = self.active.remove(i);
            events.push(SynFloodEvent::End {
                victim: to_ip(&a.addr),
                onset_ns: a.onset_ns,
                end_ns,
                peak_rate: a.peak_rate,
                syns: a.syns,
                top_sources: TopSources::of(&a.sources, &mut self.scratch),
            });
            let mut sources = a.sources;
            sources.clear();
            self.spare.push(sources);
        }
        // New alarms: the interval's heavy SYN destinations whose cells are all in alarm.
        for &Counter { item, count, .. } in self.candidates.counters() {
            let fp = addr_fingerprint(&item);
            if self.active.iter().any(|a| a.addr == item) || !all_alarm(fp) {
                continue;
            }
            // Both summaries only overestimate: the smaller is the better estimate.
            let est = sketch.estimate(fp).min(count);
            let onset = (0..sketch.depth())
                .map(|r| cusum.onset(sketch.cell_index(r, fp)))
                .max()
                .unwrap_or(0);
            let onset_ns = base + onset * iv;
            let rate = est as f64 * per_s;
            events.push(SynFloodEvent::Start {
                victim: to_ip(&item),
                onset_ns,
                detected_ns: end_ns,
                rate,
            });
            let sources = self
                .spare
                .pop()
                .unwrap_or_else(|| SpaceSaving::new(SOURCE_COUNTERS));
            self.active.push(Active {
                addr: item,
                fp,
                onset_ns,
                peak_rate: rate,
                syns: est,
                sources,
            });
        }
        self.sketch.clear();
        self.candidates.clear();
        self.start_ns = end_ns;
        self.stats.intervals += 1;
    }
}

/// The std address of a 16-byte address, IPv4-mapped addresses as IPv4 (the decoder maps
/// IPv4 that way; a literal `::ffff:a.b.c.d` IPv6 destination is shown as IPv4 too).
fn to_ip(addr: &[u8; 16]) -> IpAddr {
    let v6 = std::net::Ipv6Addr::from(*addr);
    match v6.to_ipv4_mapped() {
        Some(v4) => v4.into(),
        None => v6.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sketch::mix64;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use trawl_capture::{Direction, FileSource, LinkType, PacketSource};

    /// A packet held for replay: timestamp, link type, bytes.
    type Held = (u64, LinkType, Vec<u8>);

    fn capture_path(name: &str) -> String {
        format!("{}/../../testdata/pcaps/{name}", env!("CARGO_MANIFEST_DIR"))
    }

    /// Every readable record of a capture (a damaged tail ends the list).
    fn load(name: &str) -> Vec<Held> {
        let path = capture_path(name);
        let mut held = Vec::new();
        let Ok(mut source) = FileSource::open(&path) else {
            return held;
        };
        while let Ok(Some(batch)) = source.next_batch() {
            for pkt in batch.iter() {
                held.push((pkt.ts_ns, pkt.link_type, pkt.data.to_vec()));
            }
        }
        held
    }

    /// An Ethernet frame carrying a TCP SYN (no options) from `src` to `dst` port 80.
    /// Checksums are left 0: the decoder does not verify them.
    fn syn_frame(src: IpAddr, dst: IpAddr, sport: u16) -> Vec<u8> {
        let mut f = vec![0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2];
        match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                f.extend_from_slice(&[0x08, 0x00]);
                // Version 4, IHL 5, total length 40, DF, TTL 64, protocol 6.
                f.extend_from_slice(&[0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, 6, 0, 0]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                f.extend_from_slice(&[0x86, 0xdd]);
                // Version 6, payload length 20, next header 6, hop limit 64.
                f.extend_from_slice(&[0x60, 0, 0, 0, 0, 20, 6, 64]);
                f.extend_from_slice(&s.octets());
                f.extend_from_slice(&d.octets());
            }
            _ => panic!("mixed address families"),
        }
        f.extend_from_slice(&sport.to_be_bytes());
        f.extend_from_slice(&80u16.to_be_bytes());
        f.extend_from_slice(&[0x12, 0x34, 0x56, 0x78, 0, 0, 0, 0]); // seq, ack
        f.extend_from_slice(&[0x50, tcp_flags::SYN, 0xff, 0xff, 0, 0, 0, 0]); // offset 5, SYN
        f
    }

    /// An injected flood: `rate` SYN/s to `victim` from `start_s` (seconds after the
    /// capture's first packet) for `secs` seconds, from spoofed random sources.
    #[derive(Clone, Copy, Debug)]
    struct Flood {
        victim: IpAddr,
        rate: u64,
        start_s: f64,
        secs: f64,
    }

    impl Flood {
        fn start_ns(&self, t0: u64) -> u64 {
            t0 + (self.start_s * 1e9) as u64
        }
        fn end_ns(&self, t0: u64) -> u64 {
            self.start_ns(t0) + (self.secs * 1e9) as u64
        }
        fn packets(&self, t0: u64, seed: u64) -> Vec<Held> {
            let n = (self.rate as f64 * self.secs) as u64;
            let gap = SECOND_NS / self.rate;
            let mut s = seed;
            (0..n)
                .map(|i| {
                    s = mix64(s);
                    let src = match self.victim {
                        IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::from((s >> 32) as u32)),
                        IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::from(s as u128 | 0x2001 << 112)),
                    };
                    let ts = self.start_ns(t0) + i * gap;
                    (
                        ts,
                        LinkType::ETHERNET,
                        syn_frame(src, self.victim, s as u16),
                    )
                })
                .collect()
        }
    }

    /// Runs a detector over packets in timestamp order (stable: capture order among equals).
    fn run(mut packets: Vec<Held>, config: SynFloodConfig) -> (Vec<SynFloodEvent>, SynFloodStats) {
        packets.sort_by_key(|p| p.0);
        let mut det = SynFloodDetector::new(config);
        let mut events = Vec::new();
        for (ts_ns, link_type, data) in &packets {
            let pkt = PacketRecord {
                ts_ns: *ts_ns,
                wire_len: data.len() as u32,
                iface: 0,
                direction: Direction::Unknown,
                link_type: *link_type,
                data,
            };
            det.observe_packet(&pkt, &mut events);
        }
        det.finish(&mut events);
        (events, det.stats())
    }

    /// The clean corpus raises no alarm: every committed capture, through the default
    /// detector. Captures span up to years (idle gaps), so this also exercises the gap skip.
    #[test]
    fn no_alarm_on_clean_corpus() {
        let dir = capture_path("");
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .expect("testdata/pcaps")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n != "README.md")
            .collect();
        names.sort();
        let (mut files, mut syns) = (0, 0);
        for name in &names {
            let packets = load(name);
            if packets.is_empty() {
                continue;
            }
            files += 1;
            let (events, stats) = run(packets, SynFloodConfig::default());
            syns += stats.syns;
            assert!(events.is_empty(), "{name}: {events:?}");
        }
        // The corpus does hold SYNs (android.pcap alone has 25), so silence is a result.
        assert!(files > 30 && syns >= 25, "{files} files, {syns} SYNs");
    }

    /// Real traffic (android.pcap, 500 packets over 102 s) with five injected floods: four
    /// rates, IPv4 and IPv6 victims, two overlapping in time.
    #[test]
    fn injected_floods_detected_with_victim_onset_and_end() {
        let real = load("android.pcap");
        let t0 = real.iter().map(|p| p.0).min().expect("packets");
        let last = real.iter().map(|p| p.0).max().expect("packets");
        let floods = [
            Flood {
                victim: "10.66.0.1".parse().unwrap(),
                rate: 1000,
                start_s: 10.3,
                secs: 8.0,
            },
            Flood {
                victim: "10.66.0.2".parse().unwrap(),
                rate: 200,
                start_s: 30.7,
                secs: 10.0,
            },
            Flood {
                victim: "192.168.5.5".parse().unwrap(),
                rate: 300,
                start_s: 33.2,
                secs: 5.0,
            },
            Flood {
                victim: "2001:db8::66".parse().unwrap(),
                rate: 50,
                start_s: 50.1,
                secs: 15.0,
            },
            Flood {
                victim: "10.66.0.4".parse().unwrap(),
                rate: 20,
                start_s: 75.5,
                secs: 12.0,
            },
        ];
        let mut packets = real.clone();
        for (i, f) in floods.iter().enumerate() {
            assert!(
                f.end_ns(t0) + 10 * SECOND_NS < last,
                "flood must end inside the capture"
            );
            packets.extend(f.packets(t0, i as u64 + 1));
        }
        let config = SynFloodConfig::default();
        let (events, stats) = run(packets, config);
        let injected: u64 = floods.iter().map(|f| (f.rate as f64 * f.secs) as u64).sum();
        assert_eq!(stats.syns, injected + 25);

        // Exactly one start and one end per victim, nothing else.
        assert_eq!(events.len(), 2 * floods.len(), "{events:#?}");
        // The end of an alarm: y ≤ ceiling, and after the flood each quiet interval lowers it
        // by ≥ drift, so at most ⌈ceiling / drift⌉ intervals plus the partial last one.
        let c = config.cusum;
        let end_bound = ((c.ceiling / c.drift).ceil() as u64 + 1) * config.interval_ns;
        for f in &floods {
            let mine: Vec<_> = events.iter().filter(|e| e.victim() == f.victim).collect();
            assert_eq!(mine.len(), 2, "{:?}: {mine:?}", f.victim);
            let SynFloodEvent::Start {
                onset_ns,
                detected_ns,
                rate,
                ..
            } = *mine[0]
            else {
                panic!("start first: {mine:?}")
            };
            let SynFloodEvent::End {
                end_ns,
                peak_rate,
                syns,
                ..
            } = *mine[1]
            else {
                panic!("then end: {mine:?}")
            };
            let start = f.start_ns(t0);
            let delay_s = (detected_ns - start) as f64 / 1e9;
            eprintln!(
                "victim {} at {} SYN/s: detected after {delay_s:.2} s (onset {:+.2} s), \
                 end {:.2} s after the flood, peak {peak_rate} SYN/s, {syns} SYNs",
                f.victim,
                f.rate,
                (onset_ns as f64 - start as f64) / 1e9,
                (end_ns - f.end_ns(t0)) as f64 / 1e9,
            );
            assert!(detected_ns > start);
            // Bounded delay: the alarm needs y > threshold; a full interval adds
            // rate − drift − mean (the mean learns part of the rise, hence the extra interval),
            // and the flood may begin just after an interval started.
            let gain = f.rate as f64 - c.drift;
            let intervals = (c.threshold / gain).floor() as u64 + 2;
            assert!(
                detected_ns - start <= intervals * config.interval_ns,
                "{:?}: delay {delay_s} s over {intervals} intervals",
                f.victim
            );
            // The onset names the interval the flood began in, or the next one when the flood
            // began so late in its interval that the partial count stayed under the drift.
            let first = start - start % config.interval_ns;
            let late = ((first + config.interval_ns - start) as f64 / 1e9 * f.rate as f64) as u64;
            let expected = if late as f64 <= c.drift {
                first + config.interval_ns
            } else {
                first
            };
            assert!(
                onset_ns == expected || onset_ns == first,
                "{:?}: onset {onset_ns} vs {expected}",
                f.victim
            );
            assert!(end_ns > f.end_ns(t0) && end_ns - f.end_ns(t0) <= end_bound);
            // The raising interval's count exceeded mean + drift (else y could not have risen)
            // and is a (possibly partial) interval of this flood.
            assert!(
                rate > c.drift && rate <= f.rate as f64 * 1.05 + 2.0,
                "rate {rate}"
            );
            // Estimates only overcount; the sketch's ε·N slack is tiny at these volumes.
            assert!(peak_rate >= f.rate as f64 && peak_rate <= f.rate as f64 * 1.05 + 2.0);
            let sent = (f.rate as f64 * f.secs) as u64;
            assert!(syns <= sent + 25, "{syns} > {sent}");
        }
    }

    /// A flood at a rate just under the drift never alarms: the detector's documented floor.
    #[test]
    fn flood_below_drift_is_not_detected() {
        let real = load("android.pcap");
        let t0 = real.iter().map(|p| p.0).min().expect("packets");
        let flood = Flood {
            victim: "10.66.0.9".parse().unwrap(),
            rate: 8,
            start_s: 20.0,
            secs: 30.0,
        };
        let mut packets = real;
        packets.extend(flood.packets(t0, 7));
        let (events, _) = run(packets, SynFloodConfig::default());
        assert!(events.is_empty(), "{events:?}");
    }

    /// The plain `observe` API and interval closing by the clock alone.
    #[test]
    fn observe_and_advance_by_clock() {
        let mut det = SynFloodDetector::new(SynFloodConfig::default());
        assert!(SynFloodConfig::default().cusum.warmup > 0);
        let victim: [u8; 16] = Ipv4Addr::new(10, 0, 0, 7).to_ipv6_mapped().octets();
        let other: [u8; 16] = Ipv4Addr::new(10, 0, 0, 8).to_ipv6_mapped().octets();
        let mut events = Vec::new();
        // Quiet traffic through the warm-up intervals, which only teach the means.
        let warm = SynFloodConfig::default().cusum.warmup;
        for i in 0..warm * 10 {
            det.observe(i * SECOND_NS / 10, &other, true, &mut events);
        }
        let t0 = warm * SECOND_NS;
        for i in 0..500u64 {
            // 100 SYN/s to the victim for 5 s; one non-SYN to another host each time.
            det.observe(t0 + i * SECOND_NS / 100, &victim, true, &mut events);
            det.observe(t0 + i * SECOND_NS / 100, &other, false, &mut events);
        }
        assert_eq!(det.active().count(), 1);
        det.advance_to(t0 + 60 * SECOND_NS, &mut events);
        assert_eq!(det.active().count(), 0);
        let victims: Vec<_> = events.iter().map(|e| e.victim()).collect();
        let v: IpAddr = Ipv4Addr::new(10, 0, 0, 7).into();
        assert_eq!(victims, vec![v, v]);
        assert!(matches!(
            events[0],
            SynFloodEvent::Start { detected_ns, .. } if detected_ns == t0 + SECOND_NS
        ));
    }

    /// Issue 20: an alarm's end names the sources of the flood during it, the injected
    /// senders first (three bots sending 60, 40 and 25 SYN/s among 100 SYN/s from spoofed
    /// random sources), with counts that do not undercount.
    #[test]
    fn issue_20_the_end_of_an_alarm_names_its_top_sources() {
        let mut det = SynFloodDetector::new(SynFloodConfig::default());
        let v4 = |a, b, c, d| Ipv4Addr::new(a, b, c, d).to_ipv6_mapped().octets();
        let (victim, other) = (v4(10, 0, 0, 7), v4(10, 0, 0, 8));
        let bots = [v4(203, 0, 113, 1), v4(203, 0, 113, 2), v4(203, 0, 113, 3)];
        let mut events = Vec::new();
        let warm = SynFloodConfig::default().cusum.warmup;
        for i in 0..warm * 10 {
            det.observe_from(i * SECOND_NS / 10, &other, &other, true, &mut events);
        }
        let t0 = warm * SECOND_NS;
        let mut s = 1u64;
        let mut sent = [0u64; 3];
        // 5 s of 225 SYN/s: per 9 SYNs, 2.4, 1.6 and 1 from the bots, 4 spoofed.
        for i in 0..1125u64 {
            let ts = t0 + i * SECOND_NS / 225;
            let src = match i % 45 {
                0..=11 => 0,
                12..=19 => 1,
                20..=24 => 2,
                _ => 3,
            };
            let from = if src < 3 {
                sent[src] += 1;
                bots[src]
            } else {
                s = mix64(s);
                v4(198, 18, (s >> 8) as u8, s as u8)
            };
            det.observe_from(ts, &from, &victim, true, &mut events);
        }
        det.advance_to(t0 + 60 * SECOND_NS, &mut events);
        let Some(SynFloodEvent::End { top_sources, .. }) = events.last().copied() else {
            panic!("no end: {events:?}");
        };
        let named: Vec<(IpAddr, u64)> = top_sources.iter().collect();
        assert_eq!(named.len(), TOP_SOURCES, "{named:?}");
        let ip = |a: &[u8; 16]| to_ip(a);
        for (k, bot) in bots.iter().enumerate() {
            assert_eq!(named[k].0, ip(bot), "{named:?}");
            // Counted from the alarm's start: at most what the bot sent, at least what it
            // sent after the detection's first second, plus the summary's error.
            assert!(named[k].1 <= sent[k] + top_sources.error_bound, "{named:?}");
            assert!(named[k].1 * 5 >= sent[k] * 3, "{named:?} of {sent:?}");
        }
        assert!(top_sources.total > 0 && top_sources.total < 1125);
    }
}
