//! `/api/v1/partial`: the probe side of a fleet query (docs/specs/distributed.md). The same
//! parameters as `/api/v1/query`; the answer is the scan's partial aggregate in its binary form
//! ([`trawl_query::PartialAggregate::to_bytes`]: magic, schema version, zstd-compressed
//! `--partial` document), sent in chunks as it is compressed out, for the coordinator to merge.
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::params::Params;
use crate::routes::{bad, error, query_plan, Shared, QUERY_PARAMS};

/// The media type of the binary partial aggregate.
pub(crate) const PARTIAL_TYPE: &str = "application/vnd.trawl.partial";

/// Bytes per body chunk.
const CHUNK: usize = 64 * 1024;

/// Scans the served database for the request and answers the binary partial aggregate.
pub(crate) async fn partial(
    State(s): State<Shared>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Response {
    let plan = match Params::parse(raw, QUERY_PARAMS).and_then(|p| query_plan(&p)) {
        Ok(q) => q,
        Err(e) => return bad(e),
    };
    let Some(db) = s.cfg.db.clone() else {
        return error(
            StatusCode::NOT_FOUND,
            "no flow database is served (--db DIR)",
            None,
        );
    };
    let limit = Duration::from_secs(s.cfg.query_timeout_s);
    let task = tokio::task::spawn_blocking(move || {
        trawl_query::scan(&db, &plan.query)
            .map(|p| p.to_bytes())
            .map_err(|e| e.to_string())
    });
    let bytes = match tokio::time::timeout(limit, task).await {
        Ok(Ok(Ok(b))) => b,
        Ok(Ok(Err(e))) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e, None),
        Ok(Err(e)) => {
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                &format!("the query failed: {e}"),
                None,
            )
        }
        Err(_) => {
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("the query took longer than {} s", limit.as_secs()),
                None,
            )
        }
    };
    let bytes = Bytes::from(bytes);
    let chunks: Vec<Result<Bytes, std::io::Error>> = (0..bytes.len())
        .step_by(CHUNK)
        .map(|at| Ok(bytes.slice(at..(at + CHUNK).min(bytes.len()))))
        .collect();
    let mut r = Body::from_stream(futures_util::stream::iter(chunks)).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(PARTIAL_TYPE));
    r
}
