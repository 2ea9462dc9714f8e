//! Heavy hitters per interval: bytes and packets per flow key and per host, each counted by a
//! [`SpaceSaving`] summary of `k` counters, reported at the end of each interval either as the
//! top-N or as every item over a threshold.
//!
//! Bounds per summary and interval (with `N` its total weight, reported as
//! [`Summary::total`]): every reported count satisfies `count − error ≤ true ≤ count` and
//! `error ≤ N/k`; every item whose true weight exceeds `N/k` is monitored. So a threshold
//! selection is complete (no item at or over the threshold missing) whenever the threshold
//! exceeds `N/k` ([`Summary::complete`]).
//!
//! A packet's bytes are its wire length. A host is counted for the packets it sends and the
//! packets it receives, so the host summaries' `N` is twice the interval's traffic.
use trawl_capture::PacketRecord;
use trawl_flow::decode::{decode, DecodeConfig, Decoded, OutcomeCounters};
use trawl_flow::FlowKey;

use crate::sketch::{item_hash, Counter, SpaceSaving};

/// Which items a report lists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// The `n` largest counts (at most `k`).
    Top(usize),
    /// Every item whose count reaches the threshold: bytes for the byte summaries, packets
    /// for the packet summaries.
    Threshold {
        /// Bytes.
        bytes: u64,
        /// Packets.
        packets: u64,
    },
}

/// Settings of [`HeavyHitters`].
#[derive(Clone, Copy, Debug)]
pub struct HeavyConfig {
    /// Interval length in nanoseconds.
    pub interval_ns: u64,
    /// Counters per summary.
    pub k: usize,
    /// What each report lists.
    pub selection: Selection,
    /// Decoder settings.
    pub decode: DecodeConfig,
}

impl Default for HeavyConfig {
    fn default() -> Self {
        Self {
            interval_ns: 10_000_000_000,
            k: 1024,
            selection: Selection::Top(10),
            decode: DecodeConfig::default(),
        }
    }
}

/// One summary's part of a report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Summary<K> {
    /// Selected items, largest count first.
    pub items: Vec<Counter<K>>,
    /// Total weight `N` of the interval.
    pub total: u64,
    /// `N/k`: the largest possible overcount of any item.
    pub error_bound: u64,
    /// For a threshold selection: whether it is guaranteed to list every item whose true
    /// weight reaches the threshold (threshold > N/k). Always false for a top-N selection.
    pub complete: bool,
}

/// The heavy hitters of one interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeavyReport {
    /// Interval start (ns).
    pub start_ns: u64,
    /// Interval end (ns, exclusive).
    pub end_ns: u64,
    /// Flows by bytes.
    pub flow_bytes: Summary<FlowKey>,
    /// Flows by packets.
    pub flow_packets: Summary<FlowKey>,
    /// Hosts (16-byte addresses, IPv4 mapped) by bytes sent plus received.
    pub host_bytes: Summary<[u8; 16]>,
    /// Hosts by packets sent plus received.
    pub host_packets: Summary<[u8; 16]>,
}

/// Per-interval heavy hitters. Preallocated at construction; observing a packet does not
/// allocate (a report does).
#[derive(Debug)]
pub struct HeavyHitters {
    config: HeavyConfig,
    // `FlowKey` has no `Hash`: the summaries key on its bytes.
    flow_bytes: SpaceSaving<[u8; 40]>,
    flow_packets: SpaceSaving<[u8; 40]>,
    host_bytes: SpaceSaving<[u8; 16]>,
    host_packets: SpaceSaving<[u8; 16]>,
    /// Start of the open interval, `None` before the first packet.
    start_ns: Option<u64>,
    decoded: Decoded,
    outcomes: OutcomeCounters,
    scratch: Vec<Counter<[u8; 40]>>,
    scratch_host: Vec<Counter<[u8; 16]>>,
}

impl HeavyHitters {
    /// Heavy hitters with `config`.
    ///
    /// # Panics
    /// When `interval_ns` or `k` is 0.
    pub fn new(config: HeavyConfig) -> Self {
        assert!(config.interval_ns > 0, "interval must be positive");
        Self {
            config,
            flow_bytes: SpaceSaving::new(config.k),
            flow_packets: SpaceSaving::new(config.k),
            host_bytes: SpaceSaving::new(config.k),
            host_packets: SpaceSaving::new(config.k),
            start_ns: None,
            decoded: Decoded::default(),
            outcomes: OutcomeCounters::default(),
            scratch: Vec::with_capacity(config.k),
            scratch_host: Vec::with_capacity(config.k),
        }
    }

    /// Decoder outcomes so far.
    pub fn outcomes(&self) -> &OutcomeCounters {
        &self.outcomes
    }

    /// Observes one packet: closes the intervals before it (one report per interval that saw
    /// packets) and counts it if it carries IP.
    pub fn observe_packet(&mut self, pkt: &PacketRecord<'_>, reports: &mut Vec<HeavyReport>) {
        self.advance_to(pkt.ts_ns, reports);
        let outcome = decode(
            pkt.link_type,
            pkt.data,
            &self.config.decode,
            &mut self.decoded,
        );
        self.outcomes.count(outcome);
        if !outcome.has_key() {
            return;
        }
        let (key, _) = FlowKey::from_decoded(&self.decoded);
        let bytes = u64::from(pkt.wire_len);
        // One hash per item for both of its summaries.
        let h = item_hash(&key.0);
        self.flow_bytes.add_hashed(key.0, h, bytes);
        self.flow_packets.add_hashed(key.0, h, 1);
        for host in [self.decoded.src_ip, self.decoded.dst_ip] {
            let h = item_hash(&host);
            self.host_bytes.add_hashed(host, h, bytes);
            self.host_packets.add_hashed(host, h, 1);
        }
    }

    /// Closes the open interval if `ts_ns` is past its end. Intervals without packets give
    /// no report.
    pub fn advance_to(&mut self, ts_ns: u64, reports: &mut Vec<HeavyReport>) {
        let iv = self.config.interval_ns;
        match self.start_ns {
            None => self.start_ns = Some(ts_ns - ts_ns % iv),
            Some(start) if ts_ns >= start.saturating_add(iv) => {
                self.report(start, reports);
                self.start_ns = Some(ts_ns - ts_ns % iv);
            }
            Some(_) => {}
        }
    }

    /// Reports the open interval (the end of the input).
    pub fn finish(&mut self, reports: &mut Vec<HeavyReport>) {
        if let Some(start) = self.start_ns.take() {
            self.report(start, reports);
        }
    }

    fn report(&mut self, start_ns: u64, reports: &mut Vec<HeavyReport>) {
        if self.flow_packets.total() == 0 {
            // Only non-IP packets in the interval: nothing to rank.
            return;
        }
        let sel = self.config.selection;
        let report = HeavyReport {
            start_ns,
            end_ns: start_ns.saturating_add(self.config.interval_ns),
            flow_bytes: select(&self.flow_bytes, sel, true, &mut self.scratch, FlowKey),
            flow_packets: select(&self.flow_packets, sel, false, &mut self.scratch, FlowKey),
            host_bytes: select(&self.host_bytes, sel, true, &mut self.scratch_host, |a| a),
            host_packets: select(
                &self.host_packets,
                sel,
                false,
                &mut self.scratch_host,
                |a| a,
            ),
        };
        reports.push(report);
        self.flow_bytes.clear();
        self.flow_packets.clear();
        self.host_bytes.clear();
        self.host_packets.clear();
    }
}

/// Applies the selection to one summary.
fn select<K: Copy + Eq + std::hash::Hash, R>(
    ss: &SpaceSaving<K>,
    sel: Selection,
    is_bytes: bool,
    scratch: &mut Vec<Counter<K>>,
    map: impl Fn(K) -> R,
) -> Summary<R> {
    ss.top(scratch);
    let (take, complete) = match sel {
        Selection::Top(n) => (n.min(scratch.len()), false),
        Selection::Threshold { bytes, packets } => {
            let t = if is_bytes { bytes } else { packets };
            (
                scratch.partition_point(|c| c.count >= t),
                t > ss.error_bound(),
            )
        }
    };
    Summary {
        items: scratch[..take]
            .iter()
            .map(|c| Counter {
                item: map(c.item),
                count: c.count,
                error: c.error,
            })
            .collect(),
        total: ss.total(),
        error_bound: ss.error_bound(),
        complete,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use trawl_capture::{FileSource, PacketSource};

    /// Exact per-interval counts: interval start → (flow bytes, flow packets, host bytes,
    /// host packets).
    type Exact = HashMap<
        u64,
        (
            HashMap<[u8; 40], u64>,
            HashMap<[u8; 40], u64>,
            HashMap<[u8; 16], u64>,
            HashMap<[u8; 16], u64>,
        ),
    >;

    /// Runs the summaries and a naive exact aggregator over the same capture.
    fn run(name: &str, config: HeavyConfig) -> (Vec<HeavyReport>, Exact) {
        let path = format!("{}/../../testdata/pcaps/{name}", env!("CARGO_MANIFEST_DIR"));
        let mut source = FileSource::open(&path).expect("capture");
        let mut hh = HeavyHitters::new(config);
        let mut reports = Vec::new();
        let mut exact = Exact::new();
        let mut d = Decoded::default();
        let iv = config.interval_ns;
        // Mirrors the detector's interval rule: an interval starts at the first packet's
        // aligned time and is replaced by the aligned interval of the first later packet.
        let mut open: Option<u64> = None;
        while let Some(batch) = source.next_batch().expect("read") {
            for pkt in batch.iter() {
                hh.observe_packet(&pkt, &mut reports);
                match open {
                    Some(s) if pkt.ts_ns < s + iv => {}
                    _ => open = Some(pkt.ts_ns - pkt.ts_ns % iv),
                }
                if !decode(pkt.link_type, pkt.data, &config.decode, &mut d).has_key() {
                    continue;
                }
                let e = exact.entry(open.unwrap()).or_default();
                let (key, _) = FlowKey::from_decoded(&d);
                *e.0.entry(key.0).or_default() += u64::from(pkt.wire_len);
                *e.1.entry(key.0).or_default() += 1;
                for h in [d.src_ip, d.dst_ip] {
                    *e.2.entry(h).or_default() += u64::from(pkt.wire_len);
                    *e.3.entry(h).or_default() += 1;
                }
            }
        }
        hh.finish(&mut reports);
        (reports, exact)
    }

    /// Checks one summary against exact counts: the Space-Saving bounds, and for a top-N
    /// selection with `n` = k that every item over N/k is listed.
    fn check<K: Copy + Eq + std::hash::Hash + std::fmt::Debug>(
        what: &str,
        s: &Summary<K>,
        exact: &HashMap<K, u64>,
        k: u64,
        selection: Selection,
        is_bytes: bool,
    ) {
        assert_eq!(s.total, exact.values().sum::<u64>(), "{what}: total");
        assert_eq!(s.error_bound, s.total / k);
        for c in &s.items {
            let t = exact[&c.item];
            assert!(
                c.count - c.error <= t && t <= c.count,
                "{what}: {c:?} true {t}"
            );
            assert!(c.error <= s.error_bound);
        }
        assert!(s.items.windows(2).all(|w| w[0].count >= w[1].count));
        let listed = |item: &K| s.items.iter().any(|c| &c.item == item);
        match selection {
            Selection::Top(n) if n >= k as usize => {
                for (item, &t) in exact {
                    if t > s.total / k {
                        assert!(listed(item), "{what}: {item:?} ({t} > N/k) missing");
                    }
                }
            }
            Selection::Top(n) => assert_eq!(s.items.len(), n.min(exact.len()).min(k as usize)),
            Selection::Threshold { bytes, packets } => {
                let th = if is_bytes { bytes } else { packets };
                assert!(s.items.iter().all(|c| c.count >= th));
                assert_eq!(s.complete, th > s.total / k);
                if s.complete {
                    for (item, &t) in exact {
                        if t >= th {
                            assert!(listed(item), "{what}: {item:?} ({t} ≥ {th}) missing");
                        }
                    }
                }
            }
        }
    }

    fn check_all(name: &str, config: HeavyConfig) -> usize {
        let (reports, exact) = run(name, config);
        assert_eq!(
            reports.len(),
            exact.len(),
            "one report per interval with IP"
        );
        let k = config.k as u64;
        let sel = config.selection;
        for r in &reports {
            let e = &exact[&r.start_ns];
            let unwrap = |s: &Summary<FlowKey>| Summary {
                items: s
                    .items
                    .iter()
                    .map(|c| Counter {
                        item: c.item.0,
                        count: c.count,
                        error: c.error,
                    })
                    .collect::<Vec<_>>(),
                total: s.total,
                error_bound: s.error_bound,
                complete: s.complete,
            };
            check("flow bytes", &unwrap(&r.flow_bytes), &e.0, k, sel, true);
            check(
                "flow packets",
                &unwrap(&r.flow_packets),
                &e.1,
                k,
                sel,
                false,
            );
            check("host bytes", &r.host_bytes, &e.2, k, sel, true);
            check("host packets", &r.host_packets, &e.3, k, sel, false);
        }
        reports.len()
    }

    /// Small k forces evictions, so the bounds are exercised, not trivially exact.
    #[test]
    fn top_k_bounds_against_exact_counts() {
        for (name, iv_s) in [
            ("android.pcap", 10),
            ("android.pcap", 1000),
            ("raw_ip.pcap", 1),
        ] {
            for k in [4, 8, 64] {
                let config = HeavyConfig {
                    interval_ns: iv_s * 1_000_000_000,
                    k,
                    selection: Selection::Top(k),
                    ..HeavyConfig::default()
                };
                assert!(check_all(name, config) > 0, "{name}");
            }
        }
        // Top-3 of 8 counters: the three largest counts.
        let config = HeavyConfig {
            interval_ns: 1000 * 1_000_000_000,
            k: 8,
            selection: Selection::Top(3),
            ..HeavyConfig::default()
        };
        assert_eq!(check_all("android.pcap", config), 1);
    }

    #[test]
    fn threshold_selection_complete_when_over_n_over_k() {
        for (bytes, packets) in [(5_000, 20), (50_000, 100), (10, 1)] {
            let config = HeavyConfig {
                interval_ns: 1000 * 1_000_000_000,
                k: 16,
                selection: Selection::Threshold { bytes, packets },
                ..HeavyConfig::default()
            };
            check_all("android.pcap", config);
        }
        // With all of android.pcap in one interval (500 packets, N/k = 31 for 16 counters),
        // a 100-packet threshold is complete and names the real heavy flow(s).
        let config = HeavyConfig {
            interval_ns: 1000 * 1_000_000_000,
            k: 16,
            selection: Selection::Threshold {
                bytes: 50_000,
                packets: 100,
            },
            ..HeavyConfig::default()
        };
        let (reports, exact) = run("android.pcap", config);
        let r = &reports[0];
        assert!(r.host_packets.complete && r.flow_packets.complete);
        let heavy_hosts = exact[&r.start_ns].3.values().filter(|&&t| t >= 100).count();
        assert!(heavy_hosts > 0);
        assert!(r.host_packets.items.len() >= heavy_hosts);
    }
}
