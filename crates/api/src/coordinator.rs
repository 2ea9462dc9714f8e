//! `trawl serve --probes FILE`: the API of a whole fleet (docs/specs/distributed.md). The
//! coordinator holds no data: `/api/v1/query` fans out to the probes' `/api/v1/partial` and
//! merges (the answer of `trawl query --probes --format json`), `/api/v1/series` gathers every
//! probe's rows tagged with the probe, and `/api/v1/packets?probe=NAME` passes that probe's
//! pcap stream through as it comes (stores are never copied to the centre).
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use trawl_fleet::client::{self, Failure};
use trawl_fleet::{Fleet, ProbeReport, Status};

use crate::params::{BadParam, Params};
use crate::routes::{bad, error, query_plan, Shared, QUERY_PARAMS};

type Raw = Query<Vec<(String, String)>>;

/// Largest series answer taken from one probe.
const MAX_SERIES_BODY: usize = 256 << 20;

fn fleet_of(s: &Shared) -> Arc<Fleet> {
    s.cfg.fleet.clone().unwrap_or_default()
}

fn json(v: &serde_json::Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(v).unwrap_or_default(),
    )
        .into_response()
}

/// `/api/v1/query` over the fleet.
pub(crate) async fn query(State(s): State<Shared>, Query(raw): Raw) -> Response {
    let plan = match Params::parse(raw, QUERY_PARAMS).and_then(|p| query_plan(&p)) {
        Ok(q) => q,
        Err(e) => return bad(e),
    };
    let fleet = fleet_of(&s);
    let task = tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        trawl_fleet::run(&fleet, &plan.query).map(|answer| {
            let mut result = answer.partial.finish(plan.sort, plan.limit);
            result.elapsed = started.elapsed();
            trawl_fleet::to_json(&result, &answer.probes)
        })
    });
    match task.await {
        Ok(Ok(doc)) => json(&doc),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
    }
}

/// The query string of `raw` without `skip`.
fn forwarded(raw: &[(String, String)], skip: &str) -> String {
    raw.iter()
        .filter(|(k, _)| k != skip)
        .map(|(k, v)| format!("{}={}", trawl_fleet::encode(k), trawl_fleet::encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// `/api/v1/series` over the fleet: every probe's rows with a `probe` field, sorted by second,
/// probe and interface, and the probes' reports.
pub(crate) async fn series(State(s): State<Shared>, Query(raw): Raw) -> Response {
    const SERIES_PARAMS: &[&str] = &["iface", "from", "to", "step"];
    if let Err(e) = Params::parse(raw.clone(), SERIES_PARAMS) {
        return bad(e);
    }
    let fleet = fleet_of(&s);
    let path = format!("/api/v1/series?{}", forwarded(&raw, ""));
    // Owned probes: futures that borrow them are not `Send` for every lifetime axum asks.
    let asks = fleet.probes.clone().into_iter().map(|p| {
        let path = path.clone();
        let (timeout, retries) = (fleet.timeout, fleet.retries);
        async move {
            let started = std::time::Instant::now();
            let deadline = tokio::time::Instant::now() + timeout;
            let got = client::get(&p, &path, deadline, retries, MAX_SERIES_BODY).await;
            (p, got, started.elapsed())
        }
    });
    let answers: Vec<_> = futures_util::stream::iter(asks)
        .buffer_unordered(fleet.concurrency.max(1))
        .collect()
        .await;
    let mut rows = Vec::new();
    let mut step = serde_json::Value::Null;
    let mut reports: Vec<ProbeReport> = fleet.probes.iter().map(ProbeReport::of).collect();
    for (p, got, took) in answers {
        let Some(r) = reports.iter_mut().find(|r| r.name == p.name) else {
            continue;
        };
        r.time_ms = took.as_secs_f64() * 1e3;
        let doc = got.and_then(|b| {
            serde_json::from_slice::<serde_json::Value>(&b)
                .map_err(|e| Failure::Error(format!("the series answer is not JSON: {e}")))
        });
        match doc {
            Ok(mut d) => {
                r.status = Status::Ok;
                step = d["step"].take();
                let probe_rows = d["rows"]
                    .as_array_mut()
                    .map(std::mem::take)
                    .unwrap_or_default();
                r.groups = probe_rows.len() as u64;
                rows.extend(probe_rows.into_iter().map(|mut row| {
                    row["probe"] = serde_json::json!(p.name);
                    row
                }));
            }
            Err(f) => r.fail(f, fleet.timeout),
        }
    }
    let key = |r: &serde_json::Value| {
        (
            r["second"].as_u64().unwrap_or(0),
            r["probe"].as_str().unwrap_or("").to_string(),
            r["iface"].as_str().unwrap_or("").to_string(),
        )
    };
    rows.sort_by_key(key);
    json(&serde_json::json!({
        "step": step,
        "rows": rows,
        "incomplete": trawl_fleet::incomplete(&reports),
        "probes": reports,
    }))
}

/// `/api/v1/packets?probe=NAME&...`: the probe's own answer (status, type, body) passed through
/// as it streams.
pub(crate) async fn packets(State(s): State<Shared>, Query(raw): Raw) -> Response {
    const PARAMS: &[&str] = &["probe", "from", "to", "filter", "iface", "format", "count"];
    let params = match Params::parse(raw.clone(), PARAMS) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    let fleet = fleet_of(&s);
    let Some(name) = params.get("probe") else {
        return bad(BadParam::new(
            "probe",
            "probe=NAME is required: packets stay on the probe that captured them",
        ));
    };
    let Some(probe) = fleet.probes.iter().find(|p| p.name == name) else {
        return bad(BadParam::new("probe", format!("no probe named {name:?}")));
    };
    let path = format!("/api/v1/packets?{}", forwarded(&raw, "probe"));
    let opened = tokio::time::timeout(fleet.timeout, client::open(probe, &path, fleet.retries));
    let resp = match opened.await {
        Ok(Ok(r)) => r,
        Ok(Err(Failure::Refused(m))) | Ok(Err(Failure::Error(m))) => {
            return error(StatusCode::BAD_GATEWAY, &format!("probe {name}: {m}"), None)
        }
        Ok(Err(Failure::Timeout)) | Err(_) => {
            return error(
                StatusCode::GATEWAY_TIMEOUT,
                &format!("probe {name}: no answer within {:?}", fleet.timeout),
                None,
            )
        }
    };
    let (head, body) = resp.into_parts();
    let mut out = Response::new(Body::new(body));
    *out.status_mut() = head.status;
    for h in [header::CONTENT_TYPE, header::CONTENT_DISPOSITION] {
        if let Some(v) = head.headers.get(&h) {
            out.headers_mut().insert(h, v.clone());
        }
    }
    out
}
