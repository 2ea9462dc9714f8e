//! A fleet query: every probe the condition does not exclude is asked concurrently (at most
//! [`Fleet::concurrency`] at once, each within [`Fleet::timeout`]); partial aggregates are
//! decoded on the runtime's blocking threads and merged on the caller's thread in the order
//! they arrive; a probe that fails is reported, never merged, and never fails the query. The
//! members of a pair (probes on the same link) are merged with each other by taking each
//! group's larger side, so their flows count once.
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tokio::sync::Semaphore;
use trawl_query::{Attribute, PartialAggregate, Query};

use crate::client::{self, Failure, Protocol};
use crate::condition::{for_probe, ForProbe};
use crate::config::{Fleet, Probe};
use crate::Error;

/// What became of a probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Answered; its groups are merged.
    Ok,
    /// No answer within the timeout.
    Timeout,
    /// Connection refused, or the token refused.
    Refused,
    /// Any other failure (see the message).
    Error,
    /// Not asked: the condition excludes it (`probe`, `site`, `role`).
    Skipped,
    /// Asked, not answered yet (only in the reports [`run_with`] shows while it runs).
    Pending,
}

/// One probe's part of an answer.
#[derive(Clone, Debug, Serialize)]
pub struct ProbeReport {
    /// The probe's name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// The pair it belongs to (its groups and its pair's other member's count once).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair: Option<String>,
    /// What became of it.
    pub status: Status,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Groups it returned.
    pub groups: u64,
    /// Blocks it read.
    pub blocks_scanned: u64,
    /// Rows it read.
    pub rows_scanned: u64,
    /// Time from asking it to its decoded answer, ms.
    pub time_ms: f64,
    /// The HTTP version it answered in (`h2`, or `http/1.1` when it does not speak HTTP/2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub protocol: Option<Protocol>,
}

impl ProbeReport {
    /// The report of `probe` before it is asked (`skipped` until it answers or fails).
    pub fn of(probe: &Probe) -> ProbeReport {
        ProbeReport {
            name: probe.name.clone(),
            url: probe.url.clone(),
            pair: probe.pair.clone(),
            status: Status::Skipped,
            message: None,
            groups: 0,
            blocks_scanned: 0,
            rows_scanned: 0,
            time_ms: 0.0,
            protocol: None,
        }
    }

    /// Marks it failed (`timeout`: the limit it did not meet, for the message).
    pub fn fail(&mut self, f: Failure, timeout: std::time::Duration) {
        let (status, message) = match f {
            Failure::Timeout => (Status::Timeout, format!("no answer within {timeout:?}")),
            Failure::Refused(m) => (Status::Refused, m),
            Failure::Error(m) => (Status::Error, m),
        };
        tracing::warn!(message = "Probe failed.", probe = %self.name, ?status, reason = %message);
        self.status = status;
        self.message = Some(message);
    }
}

/// Whether a report misses a probe's data.
pub fn incomplete(probes: &[ProbeReport]) -> bool {
    probes
        .iter()
        .any(|p| !matches!(p.status, Status::Ok | Status::Skipped))
}

/// The JSON document of a fleet query, written to `out`: the local query's
/// (`trawl_query::output::to_json`) with `incomplete` and the `probes` reports added, its rows
/// written one by one (never all of them as one document in memory).
pub fn write_json(
    result: &trawl_query::QueryResult,
    probes: &[ProbeReport],
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    trawl_query::output::write_json_with_rows(head(result, probes), result, out)
}

/// [`write_json`]'s document without its rows.
fn head(result: &trawl_query::QueryResult, probes: &[ProbeReport]) -> serde_json::Value {
    let mut doc = trawl_query::output::without_rows(result);
    doc["incomplete"] = serde_json::json!(incomplete(probes));
    doc["probes"] = serde_json::to_value(probes).unwrap_or_default();
    doc
}

/// A fleet query's answer: the merged partial aggregate and every probe's report (in the
/// probes file's order).
#[derive(Debug)]
pub struct FleetAnswer {
    /// The merge of the probes that answered.
    pub partial: PartialAggregate,
    /// One per probe.
    pub probes: Vec<ProbeReport>,
}

impl FleetAnswer {
    /// Whether a probe that should have answered did not: the answer misses its data.
    pub fn incomplete(&self) -> bool {
        incomplete(&self.probes)
    }
}

/// The request path of `query` for a probe whose condition is `cond` (fleet fields removed).
fn partial_path(query: &Query, cond: Option<&trawl_query::syntax::Expr>) -> String {
    let attrs: Vec<&str> = query
        .attributes
        .iter()
        .filter(|&&a| a != Attribute::Probe)
        .map(|a| a.name())
        .collect();
    let attrs = if attrs.is_empty() {
        "none".to_string()
    } else {
        attrs.join(",")
    };
    let mut params = vec![("attrs", attrs)];
    if let Some(c) = cond {
        params.push(("condition", c.to_string()));
    }
    if query.from_ns > 0 {
        params.push((
            "from",
            trawl_time::rfc3339(query.from_ns, trawl_time::Zone::Utc, false),
        ));
    }
    if let Some(t) = query.to_ns {
        params.push(("to", trawl_time::rfc3339(t, trawl_time::Zone::Utc, false)));
    }
    if !query.ifaces.is_empty() {
        params.push(("iface", query.ifaces.join(",")));
    }
    let res = query.time_resolution_ns / 1_000_000_000;
    params.push(("resolution", format!("{res}s")));
    let qs: Vec<String> = params
        .iter()
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect();
    format!("/api/v1/partial?{}", qs.join("&"))
}

/// `%`-encodes a query-string value.
pub fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Most bytes a probe's answer may have: the decoder's bound on the inflated document
/// (compressed answers are smaller).
fn max_body(max_groups: usize) -> usize {
    max_groups.saturating_mul(1024).saturating_add(1 << 20)
}

/// A probe's answer, decoded, and the HTTP version it came in.
type Answer = Result<(PartialAggregate, Protocol), Failure>;

/// A probe's outcome as it reaches the merging thread.
type Arrival = (usize, Answer, f64);

/// Asks one probe and decodes its answer.
async fn ask(
    conns: &client::Connections,
    probe: Probe,
    path: String,
    fleet: (std::time::Duration, u32),
    query: Arc<Query>,
) -> (Answer, f64) {
    let started = Instant::now();
    let deadline = tokio::time::Instant::now() + fleet.0;
    let max_groups = query.max_groups;
    let outcome = match client::get(
        conns,
        &probe,
        &path,
        deadline,
        fleet.1,
        max_body(max_groups),
    )
    .await
    {
        Err(f) => Err(f),
        Ok((body, protocol)) => {
            let name = probe.key().to_string();
            let decode = tokio::task::spawn_blocking(move || {
                PartialAggregate::from_bytes(&body, max_groups)
                    .and_then(|p| p.for_probe(&name, &query.attributes))
                    .map(|p| (p, protocol))
                    .map_err(|e| Failure::Error(e.to_string()))
            });
            match tokio::time::timeout_at(deadline, decode).await {
                Err(_) => Err(Failure::Timeout),
                Ok(Err(e)) => Err(Failure::Error(format!("decoding failed: {e}"))),
                Ok(Ok(r)) => r,
            }
        }
    };
    (outcome, started.elapsed().as_secs_f64() * 1e3)
}

/// Runs `query` over `fleet`. The query's attributes and condition may name `probe`, `site`
/// and `role`; its `max_groups` bounds each probe's answer and the merge. Fails only when the
/// merge would pass `max_groups` (or the runtime cannot start): a probe's failure is in its
/// report.
pub fn run(fleet: &Fleet, query: &Query) -> Result<FleetAnswer, Error> {
    run_with(fleet, query, |_, _, _| {})
}

/// [`run`], calling `on_arrival(i, reports, merged)` each time probe `i`'s outcome is in its
/// report and, when it answered, merged (a pair's members are merged once both are in), in
/// the order the probes answer: what a stream of partial results shows.
pub fn run_with(
    fleet: &Fleet,
    query: &Query,
    mut on_arrival: impl FnMut(usize, &[ProbeReport], &PartialAggregate),
) -> Result<FleetAnswer, Error> {
    let runtime = fleet.connections.runtime()?;
    let mut reports: Vec<ProbeReport> = fleet.probes.iter().map(ProbeReport::of).collect();
    let (tx, rx) = std::sync::mpsc::channel::<Arrival>();
    let permits = Arc::new(Semaphore::new(fleet.concurrency.max(1)));
    let shared = Arc::new(query.clone());
    let mut merger = Merger::new(query);
    let mut asked = 0;
    let mut tasks = Vec::new();
    for (i, probe) in fleet.probes.iter().enumerate() {
        let cond = match for_probe(query.condition.as_ref(), probe) {
            ForProbe::Excluded => continue,
            ForProbe::All => None,
            ForProbe::Where(e) => Some(e),
        };
        let path = partial_path(query, cond.as_ref());
        let (probe, tx, permits, q) = (probe.clone(), tx.clone(), permits.clone(), shared.clone());
        let settings = (fleet.timeout, fleet.retries);
        let conns = fleet.connections.clone();
        merger.expect(&probe);
        reports[i].status = Status::Pending;
        asked += 1;
        tasks.push(runtime.spawn(async move {
            let Ok(_permit) = permits.acquire_owned().await else {
                return;
            };
            let (outcome, ms) = ask(&conns, probe, path, settings, q).await;
            let _ = tx.send((i, outcome, ms));
        }));
    }
    drop(tx);
    let started = Instant::now();
    for (i, outcome, ms) in rx.iter().take(asked) {
        let arrived = started.elapsed();
        let r = &mut reports[i];
        r.time_ms = ms;
        let answered = match outcome {
            Ok((p, protocol)) => {
                r.status = Status::Ok;
                r.protocol = Some(protocol);
                r.groups = p.len() as u64;
                r.blocks_scanned = p.stats.blocks_scanned;
                r.rows_scanned = p.stats.rows_scanned;
                Some(p)
            }
            Err(f) => {
                r.fail(f, fleet.timeout);
                None
            }
        };
        merger.arrive(&fleet.probes[i], answered)?;
        tracing::debug!(
            message = "Probe merged.",
            probe = %fleet.probes[i].name,
            arrived_ms = arrived.as_secs_f64() * 1e3,
            merged_ms = started.elapsed().as_secs_f64() * 1e3,
            groups = merger.merged.len()
        );
        on_arrival(i, &reports, &merger.merged);
    }
    // Probes still connecting or answering past their timeout are abandoned, not awaited (the
    // runtime and the connections stay for the next query).
    tasks.iter().for_each(|t| t.abort());
    Ok(FleetAnswer {
        partial: merger.merged,
        probes: reports,
    })
}

/// Merges the probes' answers as they arrive: a probe's at once; a pair's members first into
/// the pair's own aggregate (each group the larger side: [`PartialAggregate::merge_larger`]),
/// which joins the whole when every member asked has arrived (answered or failed).
struct Merger {
    merged: PartialAggregate,
    /// Per pair: members still to arrive, and the pair's aggregate so far.
    pairs: HashMap<String, (usize, Option<PartialAggregate>)>,
    /// Probes asked and not arrived yet.
    waiting: usize,
    /// Answers merged into `merged` (a pair's counts once).
    merged_answers: usize,
}

impl Merger {
    fn new(query: &Query) -> Merger {
        Merger {
            merged: PartialAggregate::new(query.attributes.clone(), query.max_groups),
            pairs: HashMap::new(),
            waiting: 0,
            merged_answers: 0,
        }
    }

    /// `probe` is asked.
    fn expect(&mut self, probe: &Probe) {
        self.waiting += 1;
        if let Some(pair) = &probe.pair {
            self.pairs.entry(pair.clone()).or_default().0 += 1;
        }
    }

    /// `probe` arrived with its answer (`None`: it failed).
    fn arrive(&mut self, probe: &Probe, answer: Option<PartialAggregate>) -> Result<(), Error> {
        self.waiting = self.waiting.saturating_sub(1);
        let Some(pair) = &probe.pair else {
            if let Some(p) = answer {
                self.merge(p)?;
            }
            return Ok(());
        };
        let Some((waiting, so_far)) = self.pairs.get_mut(pair) else {
            return Ok(());
        };
        *waiting = waiting.saturating_sub(1);
        if let Some(p) = answer {
            match so_far {
                Some(a) => a.merge_larger(p)?,
                None => *so_far = Some(p),
            }
        }
        if *waiting == 0 {
            if let Some(a) = so_far.take() {
                self.merge(a)?;
            }
        }
        Ok(())
    }

    /// Adds an answer (or a pair's). The answers come in a burst at the end, when the probes
    /// share a machine or a query's cost: after the second, the merged table is sized once for
    /// the union to expect (the groups the second added, again for every answer still to
    /// come; within `--max-groups`) instead of doubling under the burst.
    fn merge(&mut self, p: PartialAggregate) -> Result<(), Error> {
        let before = self.merged.len();
        self.merged.merge(p)?;
        self.merged_answers += 1;
        if self.merged_answers == 2 && self.waiting > 0 && self.merged.contexts() == 1 {
            let added = self.merged.len() - before;
            let want = self.merged.len() + added.saturating_mul(self.waiting);
            self.merged.reserve(want.min(self.merged.max_groups));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_leaves_out_the_probe_attribute() {
        let q = Query {
            attributes: trawl_query::parse_attributes("probe,dport").unwrap(),
            condition: Some(trawl_query::syntax::parse("dport = 443").unwrap()),
            ..Query::default()
        };
        let c = q.condition.clone();
        assert_eq!(
            partial_path(&q, c.as_ref()),
            "/api/v1/partial?attrs=dport&condition=dport%20%3D%20443&resolution=300s"
        );
        let q = Query {
            attributes: trawl_query::parse_attributes("probe").unwrap(),
            ..Query::default()
        };
        assert!(partial_path(&q, None).starts_with("/api/v1/partial?attrs=none&"));
    }

    /// A `dport` aggregate of `(port, bytes)` groups.
    fn dports(groups: &[(u16, u64)]) -> PartialAggregate {
        let groups: Vec<String> = groups
            .iter()
            .map(|(p, b)| format!(r#"{{"key":{{"dport":{p}}},"fwd_packets":1,"rev_packets":0,"fwd_bytes":{b},"rev_bytes":0,"flows":1}}"#))
            .collect();
        let doc = format!(
            r#"{{"version":1,"attributes":["dport"],"groups":[{}],"stats":{{"blocks":0,"blocks_scanned":0,"blocks_pruned":0,"blocks_failed":0,"row_groups":0,"row_groups_pruned":0,"rows_scanned":0,"rows_matched":0,"bytes_scanned":0,"errors":[]}}}}"#,
            groups.join(",")
        );
        PartialAggregate::from_json(&doc, 100).unwrap()
    }

    fn bytes_by_port(p: &PartialAggregate) -> Vec<(u16, u64)> {
        let mut g: Vec<(u16, u64)> = p
            .groups()
            .into_iter()
            .map(|(k, m)| (k.dport.unwrap(), m.bytes()))
            .collect();
        g.sort();
        g
    }

    #[test]
    fn a_pair_counts_once_and_joins_when_both_are_in() {
        let mut fleet = Fleet::default();
        for (name, pair) in [("east", Some("tap")), ("west", Some("tap")), ("ams1", None)] {
            fleet
                .add(
                    crate::ProbeConfig {
                        name: name.into(),
                        url: "http://127.0.0.1:1".into(),
                        pair: pair.map(Into::into),
                        ..crate::ProbeConfig::default()
                    },
                    std::path::Path::new("."),
                )
                .unwrap();
        }
        let q = Query {
            attributes: vec![Attribute::Dport],
            max_groups: 100,
            ..Query::default()
        };
        let mut m = Merger::new(&q);
        fleet.probes.iter().for_each(|p| m.expect(p));
        m.arrive(&fleet.probes[0], Some(dports(&[(80, 10), (443, 5)])))
            .unwrap();
        assert!(m.merged.is_empty(), "a pair joins when both members are in");
        m.arrive(&fleet.probes[2], Some(dports(&[(53, 1)])))
            .unwrap();
        m.arrive(&fleet.probes[1], Some(dports(&[(80, 10), (443, 7)])))
            .unwrap();
        assert_eq!(bytes_by_port(&m.merged), vec![(53, 1), (80, 10), (443, 7)]);
        // One member down: the other's groups.
        let mut m = Merger::new(&q);
        fleet.probes.iter().for_each(|p| m.expect(p));
        m.arrive(&fleet.probes[1], None).unwrap();
        m.arrive(&fleet.probes[0], Some(dports(&[(80, 10)])))
            .unwrap();
        assert_eq!(bytes_by_port(&m.merged), vec![(80, 10)]);
    }
}
