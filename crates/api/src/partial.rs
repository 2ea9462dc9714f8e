//! `/api/v1/partial`: the probe side of a fleet query (docs/specs/distributed.md). The same
//! parameters as `/api/v1/query`; the answer is the scan's partial aggregate in its binary form
//! ([`trawl_query::PartialAggregate::to_bytes`]: magic, schema version, zstd-compressed
//! `--partial` document), sent in chunks as it is compressed out, for the coordinator to merge.
use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderValue};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;

use crate::routes::{planned_scan, Shared};

/// The media type of the binary partial aggregate.
pub(crate) const PARTIAL_TYPE: &str = "application/vnd.trawl.partial";

/// Bytes per body chunk.
const CHUNK: usize = 64 * 1024;

/// Scans the served database for the request and answers the binary partial aggregate.
pub(crate) async fn partial(
    State(s): State<Shared>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Response {
    let work = |db: &std::path::Path, plan: crate::routes::QueryPlan| {
        trawl_query::scan_with(db, &plan.query, &plan.control)
            .map(|p| p.to_bytes())
            .map_err(|e| e.to_string())
    };
    let bytes = match planned_scan(&s, raw, work).await {
        Ok(b) => b,
        Err(r) => return r,
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
