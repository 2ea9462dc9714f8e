//! `/api/v1/series` of a coordinator (`trawl serve --probes`; docs/specs/distributed.md): the
//! probes' own series, asked concurrently, either summed over the probes per second (the
//! default: the fleet's traffic, as one interface named `all`) or each probe's rows tagged with
//! the probe (`per=probe`). `probe=NAME[,NAME]` takes some probes only. A probe that does not
//! answer is in `probes` with its status and makes the answer `incomplete`: a sum that misses
//! a probe never passes for the fleet's.
use std::collections::BTreeMap;

use axum::extract::{Query, State};
use axum::response::Response;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use trawl_fleet::client::{self, Failure};
use trawl_fleet::{Fleet, Probe, ProbeReport, Status};

use crate::coordinator::{fleet_of, forwarded, json};
use crate::params::{BadParam, Params};
use crate::routes::{bad, Shared};

/// Largest series answer taken from one probe.
const MAX_SERIES_BODY: usize = 256 << 20;

/// The interface name of summed rows (as `trawl run` names its summed live rows).
const SUMMED: &str = "all";

/// The counters of a series row (what is summed).
#[derive(Clone, Debug, Default, Deserialize, Serialize, PartialEq, Eq)]
struct Counters {
    packets: u64,
    bytes: u64,
    active_flows: u64,
    new_flows: u64,
    in_packets: u64,
    in_bytes: u64,
    out_packets: u64,
    out_bytes: u64,
}

impl Counters {
    fn add(&mut self, o: &Counters) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.active_flows += o.active_flows;
        self.new_flows += o.new_flows;
        self.in_packets += o.in_packets;
        self.in_bytes += o.in_bytes;
        self.out_packets += o.out_packets;
        self.out_bytes += o.out_bytes;
    }
}

/// A probe's series row as summed (its interface and source do not matter).
#[derive(Debug, Deserialize)]
struct ProbeRow {
    second: u64,
    #[serde(flatten)]
    counters: Counters,
}

/// One second of the fleet: the sum of every row of that second (all interfaces) of the
/// probes that answered, and how many probes had a row for it.
#[derive(Debug, Serialize, PartialEq, Eq)]
struct SummedRow {
    iface: &'static str,
    second: u64,
    probes_summed: usize,
    #[serde(flatten)]
    counters: Counters,
}

/// A probe's rows read for summing; a row without the counters is a broken answer.
fn counted(rows: &[serde_json::Value]) -> Result<Vec<ProbeRow>, String> {
    rows.iter()
        .map(|r| {
            serde_json::from_value(r.clone())
                .map_err(|e| format!("a series row without its counters: {e}"))
        })
        .collect()
}

/// The rows of every probe summed by `second` (a probe's rows of one second over its
/// interfaces included), oldest first.
fn sum_by_second(answers: &[(String, Vec<ProbeRow>)]) -> Vec<SummedRow> {
    let mut by_second: BTreeMap<u64, (Counters, Vec<&str>)> = BTreeMap::new();
    for (probe, rows) in answers {
        for row in rows {
            let (sum, probes) = by_second.entry(row.second).or_default();
            sum.add(&row.counters);
            if !probes.contains(&probe.as_str()) {
                probes.push(probe);
            }
        }
    }
    by_second
        .into_iter()
        .map(|(second, (counters, probes))| SummedRow {
            iface: SUMMED,
            second,
            probes_summed: probes.len(),
            counters,
        })
        .collect()
}

/// The probes `probe=NAME[,NAME]` names (all when not given).
fn chosen(fleet: &Fleet, names: Option<&str>) -> Result<Vec<Probe>, BadParam> {
    let Some(names) = names else {
        return Ok(fleet.probes.clone());
    };
    let mut out = Vec::new();
    for n in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match fleet.probes.iter().find(|p| p.name == n) {
            Some(p) => out.push(p.clone()),
            None => return Err(BadParam::new("probe", format!("no probe named {n:?}"))),
        }
    }
    Ok(out)
}

/// `/api/v1/series` over the fleet.
pub(crate) async fn series(
    State(s): State<Shared>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Response {
    const PARAMS: &[&str] = &["iface", "from", "to", "step", "probe", "per"];
    let params = match Params::parse(raw.clone(), PARAMS) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    let per_probe = match params.get("per") {
        None => false,
        Some("probe") => true,
        Some(other) => {
            return bad(BadParam::new(
                "per",
                format!(
                    "per={other:?}: per=probe gives each probe's rows; without it they are summed"
                ),
            ))
        }
    };
    let fleet = fleet_of(&s);
    let asked = match chosen(&fleet, params.get("probe")) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    // `iface=all` is the summed rows' own name: every interface of every probe.
    let mut skip = vec!["probe", "per"];
    if params.get("iface") == Some(SUMMED) {
        skip.push("iface");
    }
    let path = format!("/api/v1/series?{}", forwarded(&raw, &skip));
    let (answers, mut reports) = ask_all(&fleet, asked, &path).await;
    let step = answers
        .iter()
        .find_map(|(_, d)| d["step"].as_str().map(str::to_string))
        .unwrap_or_else(|| params.get("step").unwrap_or("1s").to_string());
    let answers = answers.into_iter().map(|(name, mut d)| {
        let rows = d["rows"]
            .as_array_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        (name, rows)
    });
    let rows = if per_probe {
        serde_json::json!(tagged(answers.collect()))
    } else {
        let mut counts = Vec::new();
        for (name, rows) in answers {
            match counted(&rows) {
                Ok(c) => counts.push((name, c)),
                Err(e) => {
                    if let Some(r) = reports.iter_mut().find(|r| r.name == name) {
                        r.fail(Failure::Error(e), fleet.timeout);
                    }
                }
            }
        }
        serde_json::json!(sum_by_second(&counts))
    };
    json(&serde_json::json!({
        "step": step,
        "rows": rows,
        "incomplete": trawl_fleet::incomplete(&reports),
        "probes": reports,
    }))
}

/// Every probe's rows with a `probe` field, sorted by second, probe and interface.
fn tagged(answers: Vec<(String, Vec<serde_json::Value>)>) -> Vec<serde_json::Value> {
    let mut rows: Vec<serde_json::Value> = answers
        .into_iter()
        .flat_map(|(name, rows)| {
            rows.into_iter().map(move |mut row| {
                row["probe"] = serde_json::json!(name);
                row
            })
        })
        .collect();
    let key = |r: &serde_json::Value| {
        (
            r["second"].as_u64().unwrap_or(0),
            r["probe"].as_str().unwrap_or("").to_string(),
            r["iface"].as_str().unwrap_or("").to_string(),
        )
    };
    rows.sort_by_key(key);
    rows
}

/// Asks `asked` for `path` concurrently: the JSON answers of those that gave one, and a report
/// per probe of the fleet (`skipped`: not asked).
async fn ask_all(
    fleet: &Fleet,
    asked: Vec<Probe>,
    path: &str,
) -> (Vec<(String, serde_json::Value)>, Vec<ProbeReport>) {
    // Owned probes: futures that borrow them are not `Send` for every lifetime axum asks.
    let asks = asked.into_iter().map(|p| {
        let path = path.to_string();
        let (timeout, retries) = (fleet.timeout, fleet.retries);
        let conns = fleet.connections.clone();
        async move {
            let started = std::time::Instant::now();
            let deadline = tokio::time::Instant::now() + timeout;
            let got = client::get(&conns, &p, &path, deadline, retries, MAX_SERIES_BODY).await;
            (p, got, started.elapsed())
        }
    });
    let answers: Vec<_> = futures_util::stream::iter(asks)
        .buffer_unordered(fleet.concurrency.max(1))
        .collect()
        .await;
    let mut docs = Vec::new();
    let mut reports: Vec<ProbeReport> = fleet.probes.iter().map(ProbeReport::of).collect();
    for (p, got, took) in answers {
        let Some(r) = reports.iter_mut().find(|r| r.name == p.name) else {
            continue;
        };
        r.time_ms = took.as_secs_f64() * 1e3;
        let doc = got.and_then(|(b, protocol)| {
            r.protocol = Some(protocol);
            serde_json::from_slice::<serde_json::Value>(&b)
                .map_err(|e| Failure::Error(format!("the series answer is not JSON: {e}")))
        });
        match doc {
            Ok(d) => {
                r.status = Status::Ok;
                r.groups = d["rows"].as_array().map_or(0, |a| a.len() as u64);
                docs.push((p.name, d));
            }
            Err(f) => r.fail(f, fleet.timeout),
        }
    }
    (docs, reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_every_probe_and_interface_by_second() {
        let row = |second: u64, iface: &str, packets: u64| {
            serde_json::json!({"iface": iface, "source": "stored", "second": second,
                "packets": packets, "bytes": packets * 100, "active_flows": 1, "new_flows": 0,
                "in_packets": packets, "in_bytes": 0, "out_packets": 0, "out_bytes": 0})
        };
        let answers = [
            (
                "a",
                vec![row(10, "eth0", 1), row(10, "eth1", 2), row(11, "eth0", 4)],
            ),
            ("b", vec![row(11, "eth0", 8)]),
        ];
        let answers: Vec<(String, Vec<ProbeRow>)> = answers
            .iter()
            .map(|(n, rows)| (n.to_string(), counted(rows).unwrap()))
            .collect();
        let got = sum_by_second(&answers);
        let summed: Vec<(u64, usize, u64, u64)> = got
            .iter()
            .map(|r| {
                (
                    r.second,
                    r.probes_summed,
                    r.counters.packets,
                    r.counters.active_flows,
                )
            })
            .collect();
        assert_eq!(summed, vec![(10, 1, 3, 2), (11, 2, 12, 2)]);
        assert_eq!(got[1].counters.bytes, 1200);
        let no_counters = counted(&[serde_json::json!({"second": 1})]).unwrap_err();
        assert!(
            no_counters.contains("without its counters"),
            "{no_counters}"
        );
    }
}
