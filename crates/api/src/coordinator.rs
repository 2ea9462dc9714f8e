//! `trawl serve --probes FILE`: the API of a whole fleet (docs/specs/distributed.md). The
//! coordinator holds no data: `/api/v1/query` fans out to the probes' `/api/v1/partial` and
//! merges (the answer of `trawl query --probes --format json`), `/api/v1/series` sums the
//! probes' series by second or gives each probe's (`fleet_series`), and
//! `/api/v1/packets?probe=NAME` passes that probe's pcap stream through as it comes (stores
//! are never copied to the centre).
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use trawl_fleet::client::{self, Failure};
use trawl_fleet::Fleet;

use crate::params::{BadParam, Params};
use crate::routes::{bad, error, query_plan, Shared, QUERY_PARAMS};

type Raw = Query<Vec<(String, String)>>;

pub(crate) use crate::fleet_series::series;

pub(crate) fn fleet_of(s: &Shared) -> Arc<Fleet> {
    s.cfg.fleet.clone().unwrap_or_default()
}

pub(crate) fn json(v: &serde_json::Value) -> Response {
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
            fleet_document(&result, &answer.probes)
        })
    });
    match task.await {
        Ok(Ok(doc)) => ([(header::CONTENT_TYPE, "application/json")], doc).into_response(),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
    }
}

/// The fleet query's JSON document, its rows written one by one (no tree of values for an
/// answer of a hundred thousand rows).
pub(crate) fn fleet_document(
    result: &trawl_query::QueryResult,
    probes: &[trawl_fleet::ProbeReport],
) -> Vec<u8> {
    let mut doc = Vec::new();
    // Writing into memory does not fail.
    let _ = trawl_fleet::write_json(result, probes, &mut doc);
    doc
}

/// The query string of `raw` without the parameters `skip` names.
pub(crate) fn forwarded(raw: &[(String, String)], skip: &[&str]) -> String {
    raw.iter()
        .filter(|(k, _)| !skip.contains(&k.as_str()))
        .map(|(k, v)| format!("{}={}", trawl_fleet::encode(k), trawl_fleet::encode(v)))
        .collect::<Vec<_>>()
        .join("&")
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
    let path = format!("/api/v1/packets?{}", forwarded(&raw, &["probe"]));
    let opened = tokio::time::timeout(
        fleet.timeout,
        client::open(&fleet.connections, probe, &path, fleet.retries),
    );
    let resp = match opened.await {
        Ok(Ok((r, _))) => r,
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
