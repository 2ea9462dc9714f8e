//! `/api/v1/calls`: VoIP calls (issue 24). `active=1`: the calls in progress of a running
//! monitor (`trawl run --voip DIR --api`), as its `rtp_calls` block last sent them (every
//! second); otherwise the finished calls in the records of the served VoIP directory
//! (`trawl voip -o DIR`, `trawl run --voip DIR`, served by `voip = DIR`). Both are filtered by
//! time (`from`, `to`: calls that overlap the range) and by user (`user`: user part, number,
//! URI or display name; `role=caller|callee` for one side), as `trawl voip calls` filters.
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use trawl_voip::lookup::{find_calls, CallQuery, Side};

use crate::params::{BadParam, Params};
use crate::routes::{bad, error, Shared};

/// The parameters `/api/v1/calls` takes.
const CALLS_PARAMS: &[&str] = &["active", "from", "to", "user", "role"];

/// The calls in progress as the `http_api` block last received them; `None` until a
/// composition sends them (no `rtp_calls` connected: not a VoIP monitor).
#[derive(Default)]
pub(crate) struct ActiveCalls(pub Option<Vec<Value>>);

/// What the request asks for: active or finished calls, and which.
fn parse(p: &Params) -> Result<(bool, CallQuery), BadParam> {
    let active = match p.get("active") {
        None | Some("0") | Some("false") => false,
        Some("1") | Some("true") => true,
        Some(v) => {
            return Err(BadParam::new(
                "active",
                format!("invalid active {v:?}: 1 or 0"),
            ))
        }
    };
    let side = match p.get("role") {
        None => Side::Either,
        Some("caller") => Side::Caller,
        Some("callee") => Side::Callee,
        Some(v) => {
            return Err(BadParam::new(
                "role",
                format!("invalid role {v:?}: caller or callee"),
            ))
        }
    };
    let from_ns = p.time("from")?.unwrap_or(0);
    let to_ns = p.time("to")?.unwrap_or(u64::MAX);
    if to_ns <= from_ns {
        return Err(BadParam::new("to", "to must be after from"));
    }
    Ok((
        active,
        CallQuery {
            user: p.get("user").map(str::to_string),
            side,
            from_ns,
            to_ns,
        },
    ))
}

fn answer(active: bool, calls: Vec<Value>) -> Response {
    let body = serde_json::json!({ "active": active, "calls": calls });
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&body).unwrap_or_default(),
    )
        .into_response()
}

/// `GET /api/v1/calls`.
pub(crate) async fn calls(
    State(s): State<Shared>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Response {
    let (active, query) = match Params::parse(raw, CALLS_PARAMS).and_then(|p| parse(&p)) {
        Ok(q) => q,
        Err(e) => return bad(e),
    };
    if active {
        let held = s.active_calls.lock().map(|a| a.0.clone()).unwrap_or(None);
        let Some(calls) = held else {
            return error(
                StatusCode::NOT_FOUND,
                "no calls in progress are served: not a VoIP monitor (trawl run --voip DIR --api)",
                Some("active"),
            );
        };
        let calls = calls.into_iter().filter(|c| query.matches(c)).collect();
        return answer(true, calls);
    }
    let Some(dir) = s.cfg.voip.clone() else {
        return error(
            StatusCode::NOT_FOUND,
            "no VoIP records are served (--voip DIR)",
            None,
        );
    };
    match tokio::task::spawn_blocking(move || find_calls(&dir, &query)).await {
        Ok(Ok(calls)) => answer(false, calls),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
    }
}
