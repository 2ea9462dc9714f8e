//! `/api/v1/query/stream` of a coordinator (docs/specs/distributed.md): the fleet query of
//! `/api/v1/query` as Server-Sent Events, so the fastest probes show first. As each probe's
//! outcome comes in (in that order), a `probe` event (its report) and a `partial` event (the
//! running answer: the merged top-N so far, the reports so far, `pending` probes `incomplete`)
//! are sent; the last event is `result`, the document `/api/v1/query` answers for the same
//! parameters (or `error` when the merge fails), and the stream ends.
use std::convert::Infallible;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tokio::sync::mpsc;
use trawl_fleet::ProbeReport;
use trawl_query::PartialAggregate;

use crate::coordinator::fleet_of;
use crate::params::Params;
use crate::routes::{bad, query_plan, Shared, QUERY_PARAMS};

/// An event of the stream, named.
fn event(name: &str, data: &impl Serialize) -> Event {
    Event::default()
        .event(name)
        .data(serde_json::to_string(data).unwrap_or_default())
}

/// An event whose data is a fleet query's document.
fn answer_event(name: &str, result: &trawl_query::QueryResult, probes: &[ProbeReport]) -> Event {
    let doc = crate::coordinator::fleet_document(result, probes);
    Event::default()
        .event(name)
        .data(String::from_utf8_lossy(&doc))
}

/// `/api/v1/query/stream` over the fleet.
pub(crate) async fn query_stream(
    State(s): State<Shared>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Response {
    let plan = match Params::parse(raw, QUERY_PARAMS).and_then(|p| query_plan(&p)) {
        Ok(q) => q,
        Err(e) => return bad(e),
    };
    let fleet = fleet_of(&s);
    // Unbounded: at most two events per probe and one more, each sent once.
    let (tx, rx) = mpsc::unbounded_channel::<Event>();
    tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        let on_arrival = |i: usize, reports: &[ProbeReport], merged: &PartialAggregate| {
            let _ = tx.send(event("probe", &reports[i]));
            let mut so_far = merged.clone().finish(plan.sort, plan.limit);
            so_far.elapsed = started.elapsed();
            let _ = tx.send(answer_event("partial", &so_far, reports));
        };
        let last = match trawl_fleet::run_with(&fleet, &plan.query, on_arrival) {
            Ok(answer) => {
                let mut result = answer.partial.finish(plan.sort, plan.limit);
                result.elapsed = started.elapsed();
                answer_event("result", &result, &answer.probes)
            }
            Err(e) => event("error", &serde_json::json!({ "error": e.to_string() })),
        };
        let _ = tx.send(last);
    });
    let events = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}
