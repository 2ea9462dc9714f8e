//! The endpoints (docs/specs/api.md). Every one is a GET that reads; the answers are JSON
//! unless stated, errors `{"error": ..., "parameter": ...}` with 400 (a bad parameter,
//! named), 401 (no or a wrong token), 404 (an unknown path, or a store not served), 503 (a
//! query over its time).
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use bytes::Bytes;
use serde::Serialize;
use tokio::sync::mpsc;

use crate::params::{BadParam, Params};
use crate::server::AppState;

pub(crate) type Shared = Arc<AppState>;
type Raw = Query<Vec<(String, String)>>;

/// The OpenAPI document, served as is.
pub(crate) const OPENAPI: &str = include_str!("openapi.json");

pub(crate) fn router(state: Shared) -> Router {
    let routes = Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/v1/openapi.json", get(openapi))
        .route("/api/v1/status", get(status))
        .route("/api/v1/partial", get(crate::partial::partial));
    // A coordinator answers for its probes (crate::coordinator), a probe for its stores.
    let routes = if state.cfg.fleet.is_some() {
        use crate::coordinator as fleet;
        routes
            .route("/api/v1/query", get(fleet::query))
            .route(
                "/api/v1/query/stream",
                get(crate::fleet_stream::query_stream),
            )
            .route("/api/v1/packets", get(fleet::packets))
            .route("/api/v1/series", get(fleet::series))
    } else {
        routes
            .route("/api/v1/query", get(query))
            .route("/api/v1/packets", get(packets))
            .route("/api/v1/series", get(series))
    };
    routes
        .route("/api/v1/alarms", get(alarms))
        .route("/api/v1/alarms/stream", get(alarm_stream))
        .route("/api/v1/calls", get(crate::calls::calls))
        .route("/api/v1/logs", get(crate::logs::logs))
        .fallback(not_found)
        // Outermost: an unknown path without the token is a 401 too (paths tell nothing).
        .layer(middleware::from_fn_with_state(state.clone(), authorize))
        .with_state(state)
        // After the token check: the console's files hold no data (crate::console).
        .merge(crate::console::router())
}

/// An error answer.
#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameter: Option<&'a str>,
}

pub(crate) fn error(status: StatusCode, message: &str, parameter: Option<&str>) -> Response {
    let body = serde_json::to_vec(&ErrorBody {
        error: message,
        parameter,
    })
    .unwrap_or_default();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

pub(crate) fn bad(p: BadParam) -> Response {
    error(StatusCode::BAD_REQUEST, &p.message, Some(&p.parameter))
}

fn json(body: Vec<u8>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn authorize(State(s): State<Shared>, req: Request, next: Next) -> Response {
    if let Some(token) = &s.token {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        if !token.accepts(given) {
            let mut r = error(
                StatusCode::UNAUTHORIZED,
                "a bearer token is required (Authorization: Bearer TOKEN)",
                None,
            );
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    next.run(req).await
}

async fn not_found(req: Request) -> Response {
    let path = req.uri().path().to_string();
    error(
        StatusCode::NOT_FOUND,
        &format!("no such endpoint: {path} (GET /api/v1/openapi.json lists them)"),
        None,
    )
}

async fn healthz() -> &'static str {
    "ok\n"
}

async fn openapi() -> Response {
    json(OPENAPI.as_bytes().to_vec())
}

async fn metrics(State(s): State<Shared>, Query(raw): Raw) -> Response {
    if let Err(e) = Params::parse(raw, &[]) {
        return bad(e);
    }
    let report = s.reporter.get().map(|r| r.report());
    let text = crate::metrics::render(
        report.as_ref(),
        &s.cfg.block_interfaces,
        s.started.elapsed().as_secs_f64(),
        &s.scans.counts(),
    );
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// `/api/v1/status`.
#[derive(Serialize)]
struct Status {
    /// `run` (a composition with the API block) or `serve` (stored data only).
    mode: &'static str,
    uptime_s: f64,
    db: Option<String>,
    packets: Option<String>,
    /// Capture counters summed over the capture sources, and per interface.
    capture: Capture,
    /// The API's query scans: running, started, cancelled, timed out, blocks.
    scans: crate::scans::ScanCounts,
    /// Every block's and queue's counters (`null` under `trawl serve`).
    composition: Option<trawl_compose::Report>,
    /// A coordinator's probes, by name (the console's probe selector); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    probes: Option<Vec<String>>,
}

#[derive(Serialize, Default)]
struct Capture {
    packets: u64,
    kernel_packets: u64,
    kernel_drops: u64,
    interfaces: std::collections::BTreeMap<String, CaptureIface>,
}

#[derive(Serialize, Default)]
struct CaptureIface {
    packets: u64,
    kernel_packets: u64,
    kernel_drops: u64,
}

async fn status(State(s): State<Shared>, Query(raw): Raw) -> Response {
    if let Err(e) = Params::parse(raw, &[]) {
        return bad(e);
    }
    let report = s.reporter.get().map(|r| r.report());
    let mut capture = Capture::default();
    for b in report.iter().flat_map(|r| &r.blocks).filter(|b| b.source) {
        let c = |n: &str| b.counter(n).unwrap_or(0);
        capture.packets += c("packets");
        capture.kernel_packets += c("kernel_packets");
        capture.kernel_drops += c("kernel_drops");
        if let Some(iface) = s.cfg.block_interfaces.get(&b.name) {
            let i = capture.interfaces.entry(iface.clone()).or_default();
            i.packets += c("packets");
            i.kernel_packets += c("kernel_packets");
            i.kernel_drops += c("kernel_drops");
        }
    }
    let shown = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
    let body = Status {
        mode: if report.is_some() { "run" } else { "serve" },
        uptime_s: s.started.elapsed().as_secs_f64(),
        db: shown(&s.cfg.db),
        packets: shown(&s.cfg.packets),
        capture,
        scans: s.scans.counts(),
        composition: report,
        probes: (s.cfg.fleet.as_ref()).map(|f| f.probes.iter().map(|p| p.name.clone()).collect()),
    };
    json(serde_json::to_vec(&body).unwrap_or_default())
}

// ---- /api/v1/query ----

pub(crate) const QUERY_PARAMS: &[&str] = &[
    "attrs",
    "condition",
    "from",
    "to",
    "last",
    "iface",
    "sort",
    "limit",
    "resolution",
];

/// A query as `trawl query` builds it from its flags, with the answer's sort and limit.
pub(crate) struct QueryPlan {
    pub(crate) query: trawl_query::Query,
    pub(crate) sort: trawl_query::SortBy,
    pub(crate) limit: Option<usize>,
    /// What stops the scan when the answer is no longer wanted (`planned_scan`).
    pub(crate) control: Arc<trawl_query::ScanControl>,
}

pub(crate) fn query_plan(p: &Params) -> Result<QueryPlan, BadParam> {
    use trawl_store::BLOCK_NS;
    let attrs = p.get("attrs").unwrap_or("talk_conv");
    let attributes = trawl_query::parse_attributes(attrs)
        .map_err(|e| BadParam::new("attrs", format!("invalid attrs: {e}")))?;
    let sort_text = p.get("sort").unwrap_or("bytes");
    let sort = trawl_query::SortBy::parse(sort_text).ok_or_else(|| {
        BadParam::new(
            "sort",
            format!("invalid sort {sort_text:?} (bytes, packets, flows, time)"),
        )
    })?;
    let limit = p.number("limit")?.unwrap_or(10) as usize;
    let resolution = p.duration("resolution")?.unwrap_or(BLOCK_NS);
    if resolution == 0 || !resolution.is_multiple_of(BLOCK_NS) {
        return Err(BadParam::new(
            "resolution",
            "resolution must be a multiple of 5m",
        ));
    }
    let condition = match p.get("condition") {
        None => None,
        Some(c) => Some(trawl_query::syntax::parse(c).map_err(|e| {
            BadParam::new(
                "condition",
                format!(
                    "invalid condition, at character {}:\n{}",
                    e.pos + 1,
                    e.render(c)
                ),
            )
        })?),
    };
    let (from, to) = match p.duration("last")? {
        Some(d) => {
            if p.get("from").is_some() || p.get("to").is_some() {
                return Err(BadParam::new(
                    "last",
                    "last cannot be combined with from/to",
                ));
            }
            (trawl_time::now_ns().saturating_sub(d), None)
        }
        None => (p.time("from")?.unwrap_or(0), p.time("to")?),
    };
    // Whole blocks, as `trawl query` widens its range.
    let from_ns = from - from % BLOCK_NS;
    let to_ns = to.map(|t| t.div_ceil(BLOCK_NS).saturating_mul(BLOCK_NS));
    if to_ns.is_some_and(|t| t <= from_ns) {
        return Err(BadParam::new(
            "to",
            "the time range is empty (to is not after from)",
        ));
    }
    let query = trawl_query::Query {
        attributes,
        condition,
        ifaces: p.ifaces("iface")?,
        from_ns,
        to_ns,
        time_resolution_ns: resolution,
        ..trawl_query::Query::default()
    };
    Ok(QueryPlan {
        query,
        sort,
        limit: (limit > 0).then_some(limit),
        control: Arc::default(),
    })
}

/// Runs `plan` over `db` and writes the answer as `trawl query --format json` does.
fn run_query(db: &Path, plan: QueryPlan) -> Result<Vec<u8>, String> {
    let started = Instant::now();
    if let Err(e) = trawl_store::list_ifaces(db) {
        return Err(format!("no flow database at {}: {e}", db.display()));
    }
    let partial =
        trawl_query::scan_with(db, &plan.query, &plan.control).map_err(|e| e.to_string())?;
    let mut result = partial.finish(plan.sort, plan.limit);
    result.elapsed = started.elapsed();
    let mut out = Vec::new();
    trawl_query::output::write(
        &result,
        trawl_query::output::Format::Json,
        trawl_time::Zone::Utc,
        &mut out,
    )
    .map_err(|e| e.to_string())?;
    Ok(out)
}

async fn query(State(s): State<Shared>, Query(raw): Raw) -> Response {
    match planned_scan(&s, raw, run_query).await {
        Ok(body) => json(body),
        Err(r) => r,
    }
}

/// The query of `raw` (`/api/v1/query`'s parameters) planned and handed to `work` with the
/// served database, on a blocking thread within the query timeout: 400 for bad parameters,
/// 404 without a database, 500 when the work fails, 503 past the timeout. Past the timeout,
/// or when the client goes away, the plan's `control` stops the scan (`crate::scans`).
pub(crate) async fn planned_scan<T: Send + 'static>(
    s: &Shared,
    raw: Vec<(String, String)>,
    work: impl FnOnce(&Path, QueryPlan) -> Result<T, String> + Send + 'static,
) -> Result<T, Response> {
    let mut plan = Params::parse(raw, QUERY_PARAMS)
        .and_then(|p| query_plan(&p))
        .map_err(bad)?;
    let Some(db) = s.cfg.db.clone() else {
        return Err(error(
            StatusCode::NOT_FOUND,
            "no flow database is served (--db DIR)",
            None,
        ));
    };
    let limit = Duration::from_secs(s.cfg.query_timeout_s);
    let running = s.scans.begin();
    plan.control = running.control.clone();
    let _cancel = crate::scans::CancelOnDrop(running.control.clone());
    let control = running.control.clone();
    let task = tokio::task::spawn_blocking(move || {
        let _running = running;
        work(&db, plan)
    });
    match tokio::time::timeout(limit, task).await {
        Ok(Ok(Ok(body))) => Ok(body),
        Ok(Ok(Err(e))) => Err(error(StatusCode::INTERNAL_SERVER_ERROR, &e, None)),
        Ok(Err(e)) => Err(error(
            StatusCode::INTERNAL_SERVER_ERROR,
            &format!("the query failed: {e}"),
            None,
        )),
        Err(_) => {
            s.scans.timed_out(&control);
            Err(error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!(
                    "the query took longer than {} s (narrow the time range or the condition)",
                    limit.as_secs()
                ),
                None,
            ))
        }
    }
}

// ---- /api/v1/packets ----

const PACKETS_PARAMS: &[&str] = &["from", "to", "filter", "iface", "format", "count"];

/// Chunks of the capture file sent to the client at a time.
const PACKET_CHUNK: usize = 256 * 1024;

/// The body of a capture file while it is read: chunks go to the response through a small
/// channel, so a slow client slows the reading and a client that went away stops it.
struct ChannelWriter {
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    fn send(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(
            &mut self.buf,
            Vec::with_capacity(PACKET_CHUNK),
        ));
        self.tx
            .blocking_send(Ok(chunk))
            .map_err(|_| std::io::ErrorKind::BrokenPipe.into())
    }
}

impl std::io::Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= PACKET_CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.send()
    }
}

impl Drop for ChannelWriter {
    fn drop(&mut self) {
        let _ = self.send();
    }
}

struct PacketsPlan {
    sel: trawl_packets::Selection,
    /// `format`: `Some(true)` pcapng, `Some(false)` pcap, `None` as the selection asks.
    format: Option<bool>,
    count: u64,
}

fn packets_plan(p: &Params) -> Result<PacketsPlan, BadParam> {
    let from = p.time("from")?.unwrap_or(0);
    let to = p.time("to")?.unwrap_or(u64::MAX);
    if to <= from {
        return Err(BadParam::new("to", "to must be after from"));
    }
    let filter = p.get("filter").map(str::to_string);
    if let Some(f) = &filter {
        let mut set = trawl_bpf::FilterSet::new(f, trawl_capture::MAX_SNAPLEN);
        set.prepare(trawl_capture::LinkType::ETHERNET)
            .map_err(|e| BadParam::new("filter", format!("invalid filter expression: {e}")))?;
    }
    let format = match p.get("format") {
        None => None,
        Some("pcap") => Some(false),
        Some("pcapng") => Some(true),
        Some(other) => {
            return Err(BadParam::new(
                "format",
                format!("invalid format {other:?} (pcap, pcapng)"),
            ))
        }
    };
    Ok(PacketsPlan {
        sel: trawl_packets::Selection {
            from_ns: from,
            to_ns: to,
            ifaces: p.ifaces("iface")?,
            filter,
        },
        format,
        count: p.number("count")?.unwrap_or(u64::MAX),
    })
}

/// An answer other than the file: its status, message and the parameter at fault.
struct Refusal(StatusCode, String, Option<&'static str>);

/// Opens the store and decides the file format before the answer starts (a mixed selection
/// asked as pcap is a 400, not a broken download).
fn open_packets(
    dir: &Path,
    plan: &PacketsPlan,
) -> Result<(trawl_packets::PacketStore, bool), Refusal> {
    let internal =
        |e: &dyn std::fmt::Display| Refusal(StatusCode::INTERNAL_SERVER_ERROR, e.to_string(), None);
    let store = trawl_packets::PacketStore::open(dir).map_err(|e| internal(&e))?;
    let links = store.link_types(&plan.sel).map_err(|e| internal(&e))?;
    let pcapng = trawl_packets::choose_pcapng(plan.format, &links)
        .map_err(|e| Refusal(StatusCode::BAD_REQUEST, e, Some("format")))?;
    Ok((store, pcapng))
}

/// Streams the selection into `tx` (on a blocking thread); an error after the start ends the
/// body with an error, so the client sees a cut transfer, not a short file.
fn stream_packets(
    store: trawl_packets::PacketStore,
    plan: PacketsPlan,
    pcapng: bool,
    tx: mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    // Capture keeps the disk first, as `trawl packets` does.
    let _ = trawl_packets::set_io_priority(trawl_packets::IoPriority::BestEffort(7));
    let failed = tx.clone();
    let sink = ChannelWriter {
        tx,
        buf: Vec::with_capacity(PACKET_CHUNK),
    };
    let mut writer = match trawl_packets::CaptureWriter::new(sink, pcapng) {
        Ok(w) => w,
        Err(e) => {
            let _ = failed.blocking_send(Err(e));
            return;
        }
    };
    let mut written = 0u64;
    let mut failure: Option<std::io::Error> = None;
    let read = store.read(&plan.sel, |p| {
        if written >= plan.count {
            return ControlFlow::Break(());
        }
        match writer.write(p) {
            Ok(()) => {
                written += 1;
                ControlFlow::Continue(())
            }
            Err(e) => {
                failure = Some(e);
                ControlFlow::Break(())
            }
        }
    });
    let failure = match (read, failure) {
        (Err(e), _) => Some(std::io::Error::other(e.to_string())),
        (Ok(_), Some(e)) => Some(e),
        (Ok(_), None) => writer.finish().err(),
    };
    if let Some(e) = failure.filter(|e| e.kind() != std::io::ErrorKind::BrokenPipe) {
        let _ = failed.blocking_send(Err(e));
    }
}

async fn packets(State(s): State<Shared>, Query(raw): Raw) -> Response {
    let plan = match Params::parse(raw, PACKETS_PARAMS).and_then(|p| packets_plan(&p)) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    let Some(dir) = s.cfg.packets.clone() else {
        return error(
            StatusCode::NOT_FOUND,
            "no packet store is served (--packets DIR)",
            None,
        );
    };
    let opened = tokio::task::spawn_blocking(move || {
        open_packets(&dir, &plan).map(|(store, pcapng)| (store, pcapng, plan))
    })
    .await;
    let (store, pcapng, plan) = match opened {
        Ok(Ok(o)) => o,
        Ok(Err(Refusal(status, message, parameter))) => return error(status, &message, parameter),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
    };
    let (tx, mut rx) = mpsc::channel(4);
    tokio::task::spawn_blocking(move || stream_packets(store, plan, pcapng, tx));
    let body = Body::from_stream(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
    let content_type = if pcapng {
        "application/x-pcapng"
    } else {
        "application/vnd.tcpdump.pcap"
    };
    let name = if pcapng {
        "attachment; filename=\"trawl.pcapng\""
    } else {
        "attachment; filename=\"trawl.pcap\""
    };
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CONTENT_DISPOSITION, name),
        ],
        body,
    )
        .into_response()
}

// ---- /api/v1/series ----

const SERIES_PARAMS: &[&str] = &["iface", "from", "to", "step"];

/// One row of `/api/v1/series`: the fields of `trawl series --format json`, with the interface
/// and where the row comes from.
#[derive(Serialize)]
struct SeriesAnswerRow {
    iface: String,
    source: &'static str,
    second: u64,
    packets: u64,
    bytes: u64,
    active_flows: u64,
    new_flows: u64,
    in_packets: u64,
    in_bytes: u64,
    out_packets: u64,
    out_bytes: u64,
}

impl SeriesAnswerRow {
    fn of(iface: &str, source: &'static str, r: &trawl_series::SeriesRow) -> Self {
        SeriesAnswerRow {
            iface: iface.to_string(),
            source,
            second: r.second,
            packets: r.packets,
            bytes: r.bytes,
            active_flows: r.active_flows,
            new_flows: r.new_flows,
            in_packets: r.in_packets,
            in_bytes: r.in_bytes,
            out_packets: r.out_packets,
            out_bytes: r.out_bytes,
        }
    }
}

#[derive(Serialize)]
struct SeriesAnswer {
    step: &'static str,
    rows: Vec<SeriesAnswerRow>,
}

/// What `/api/v1/series` was asked.
struct SeriesPlan {
    from_ns: u64,
    to_ns: u64,
    step: trawl_store::series::Step,
    ifaces: Vec<String>,
}

fn series_plan(p: &Params) -> Result<SeriesPlan, BadParam> {
    let from_ns = p.time("from")?.unwrap_or(0);
    let to_ns = p.time("to")?.unwrap_or(u64::MAX);
    if to_ns <= from_ns {
        return Err(BadParam::new("to", "to must be after from"));
    }
    let step_text = p.get("step").unwrap_or("1s");
    let step = trawl_store::series::Step::parse(step_text)
        .ok_or_else(|| BadParam::new("step", format!("invalid step {step_text:?} (1s, 1m, 1h)")))?;
    Ok(SeriesPlan {
        from_ns,
        to_ns,
        step,
        ifaces: p.ifaces("iface")?,
    })
}

/// The stored rows of `plan`, per interface (every interface with stored series when the
/// plan names none), tagged `stored`.
fn stored_series(db: &Path, plan: &SeriesPlan) -> Result<Vec<SeriesAnswerRow>, String> {
    use trawl_store::series;
    let ifaces = if plan.ifaces.is_empty() {
        series::list_ifaces(db).map_err(|e| e.to_string())?
    } else {
        plan.ifaces.clone()
    };
    let mut rows = Vec::new();
    for iface in &ifaces {
        // The reader walks its files' spans from `from` to `to`: only over the days stored,
        // not from 1970 to the end of time when the request leaves the window open.
        let Some((first, end)) = stored_days(db, iface) else {
            continue;
        };
        let (from_ns, to_ns) = (plan.from_ns.max(first), plan.to_ns.min(end));
        if from_ns >= to_ns {
            continue;
        }
        let stored =
            series::read(db, Some(iface), from_ns, to_ns, plan.step).map_err(|e| e.to_string())?;
        rows.extend(
            stored
                .iter()
                .map(|r| SeriesAnswerRow::of(iface, "stored", r)),
        );
    }
    Ok(rows)
}

/// The start of the first and the end of the last day with stored seconds of `iface` (the
/// rollups are made from them), from the directory names alone.
fn stored_days(db: &Path, iface: &str) -> Option<(u64, u64)> {
    const DAY_NS: u64 = 86_400 * 1_000_000_000;
    let dir = db
        .join(trawl_store::series::SERIES_DIR)
        .join(format!("iface={iface}"))
        .join(format!("step={}", trawl_store::series::Step::Second.name()));
    let days: Vec<u64> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            trawl_store::layout::Date::parse(name.strip_prefix("date=")?)?.start_ns()
        })
        .collect();
    Some((*days.iter().min()?, days.iter().max()? + DAY_NS))
}

async fn series(State(s): State<Shared>, Query(raw): Raw) -> Response {
    let plan = match Params::parse(raw, SERIES_PARAMS).and_then(|p| series_plan(&p)) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    let step = plan.step;
    let with_live = step == trawl_store::series::Step::Second && s.reporter.get().is_some();
    // Each interface's own rows (those of `iface=` when given).
    let live = if with_live {
        let (from_s, to_s) = (
            plan.from_ns / 1_000_000_000,
            plan.to_ns.div_ceil(1_000_000_000),
        );
        s.live
            .lock()
            .map(|l| l.between(&plan.ifaces, from_s, to_s))
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let mut rows = match s.cfg.db.clone() {
        None => Vec::new(),
        Some(db) => match tokio::task::spawn_blocking(move || stored_series(&db, &plan)).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e, None),
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
        },
    };
    // Live rows for the seconds the store does not have yet (the newest: a monitor stores a
    // second once its 5-minute file is complete), per interface.
    for (iface, live_rows) in &live {
        let stored_until = rows
            .iter()
            .filter(|r| r.iface == *iface)
            .map(|r| r.second + 1)
            .max()
            .unwrap_or(0);
        rows.extend(
            live_rows
                .iter()
                .filter(|r| r.second >= stored_until)
                .map(|r| SeriesAnswerRow::of(iface, "live", r)),
        );
    }
    rows.sort_by(|a, b| (a.second, &a.iface).cmp(&(b.second, &b.iface)));
    json(
        serde_json::to_vec(&SeriesAnswer {
            step: step.name(),
            rows,
        })
        .unwrap_or_default(),
    )
}

// ---- /api/v1/alarms ----

const ALARMS_PARAMS: &[&str] = &["from", "to", "iface"];

/// How often the alarm stream looks for new alarms in the store.
const ALARM_POLL: Duration = Duration::from_secs(1);

#[derive(Serialize)]
struct AlarmsAnswer {
    alarms: Vec<trawl_store::alarms::Alarm>,
}

/// The stored alarms of `[from, to)`, of `ifaces` when given.
fn read_alarms(
    db: &Path,
    from_ns: u64,
    to_ns: u64,
    ifaces: &[String],
) -> Result<Vec<trawl_store::alarms::Alarm>, String> {
    let mut alarms = trawl_store::alarms::read(db, from_ns, to_ns).map_err(|e| e.to_string())?;
    if !ifaces.is_empty() {
        alarms.retain(|a| a.iface.as_ref().is_some_and(|i| ifaces.contains(i)));
    }
    Ok(alarms)
}

fn alarms_window(p: &Params, default_from: u64) -> Result<(u64, u64, Vec<String>), BadParam> {
    let from = p.time("from")?.unwrap_or(default_from);
    let to = p.time("to")?.unwrap_or(u64::MAX);
    if to <= from {
        return Err(BadParam::new("to", "to must be after from"));
    }
    Ok((from, to, p.ifaces("iface")?))
}

async fn alarms(State(s): State<Shared>, Query(raw): Raw) -> Response {
    let window = Params::parse(raw, ALARMS_PARAMS).and_then(|p| alarms_window(&p, 0));
    let (from, to, ifaces) = match window {
        Ok(w) => w,
        Err(e) => return bad(e),
    };
    let Some(db) = s.cfg.db.clone() else {
        return error(
            StatusCode::NOT_FOUND,
            "no database is served (--db DIR)",
            None,
        );
    };
    match tokio::task::spawn_blocking(move || read_alarms(&db, from, to, &ifaces)).await {
        Ok(Ok(alarms)) => json(serde_json::to_vec(&AlarmsAnswer { alarms }).unwrap_or_default()),
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e, None),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
    }
}

/// `/api/v1/alarms/stream`: Server-Sent Events, one `alarm` event per alarm stored from
/// `from` on (default: now, so only new ones), as the store gets them (looked for every
/// second), until the client goes.
async fn alarm_stream(State(s): State<Shared>, Query(raw): Raw) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let window =
        Params::parse(raw, ALARMS_PARAMS).and_then(|p| alarms_window(&p, trawl_time::now_ns()));
    let (from, to, ifaces) = match window {
        Ok(w) => w,
        Err(e) => return bad(e),
    };
    let Some(db) = s.cfg.db.clone() else {
        return error(
            StatusCode::NOT_FOUND,
            "no database is served (--db DIR)",
            None,
        );
    };
    // State: alarms sent so far of the window (they are read back oldest first) and those
    // read but not sent yet.
    let state = (db, 0usize, std::collections::VecDeque::new(), true);
    let events =
        futures_util::stream::unfold(state, move |(db, mut sent, mut pending, mut first)| {
            let ifaces = ifaces.clone();
            async move {
                loop {
                    if let Some(a) = pending.pop_front() {
                        let data = serde_json::to_string(&a).unwrap_or_default();
                        let event = Event::default().event("alarm").data(data);
                        return Some((
                            Ok::<_, std::convert::Infallible>(event),
                            (db, sent, pending, first),
                        ));
                    }
                    if !first {
                        tokio::time::sleep(ALARM_POLL).await;
                    }
                    first = false;
                    let path = db.clone();
                    let f = ifaces.clone();
                    let read =
                        tokio::task::spawn_blocking(move || read_alarms(&path, from, to, &f)).await;
                    if let Ok(Ok(all)) = read {
                        if all.len() > sent {
                            pending.extend(all.into_iter().skip(sent));
                            sent += pending.len();
                        }
                    }
                }
            }
        });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}
