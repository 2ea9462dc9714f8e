//! `/api/v1/logs`: the application-layer log lines (issue 23, docs/specs/logs.md) of the served
//! logs directory (`trawl run --logs DIR --api`, `trawl serve --logs DIR`): the hourly files
//! `TYPE-YYYY-MM-DDTHH.jsonl` of the hours that overlap `[from, to)` (only those are opened),
//! and the one file `TYPE.jsonl` of `trawl logs -o DIR` if there is one; lines with `ts_ns` in
//! `[from, to)`, optionally only those of one IP address or Community ID, newest first, at
//! most `limit`.
use std::io::BufRead;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use trawl_blocks::hourly_out::{hour_files, hour_start};

use crate::params::{BadParam, Params};
use crate::routes::{bad, error, Shared};

/// The parameters `/api/v1/logs` takes.
const LOGS_PARAMS: &[&str] = &["type", "from", "to", "limit", "filter"];

/// The log types, the names of their files.
const TYPES: &[&str] = &["dns", "tls", "http"];

/// `limit`'s default and most.
const DEFAULT_LIMIT: usize = 1_000;
const MAX_LIMIT: usize = 10_000;

/// What a request asks for.
#[derive(Debug)]
pub(crate) struct LogQuery {
    pub kind: &'static str,
    pub from_ns: u64,
    pub to_ns: u64,
    pub limit: usize,
    pub filter: Option<Filter>,
}

/// `filter=`: the lines of one address (either end) or one flow.
#[derive(Debug, PartialEq)]
pub(crate) enum Filter {
    Ip(IpAddr),
    CommunityId(String),
}

impl Filter {
    fn matches(&self, line: &Value) -> bool {
        match self {
            Filter::Ip(ip) => ["src_ip", "dst_ip"].iter().any(|k| {
                line[k]
                    .as_str()
                    .and_then(|s| s.parse::<IpAddr>().ok())
                    .is_some_and(|a| a == *ip)
            }),
            Filter::CommunityId(id) => line["community_id"].as_str() == Some(id.as_str()),
        }
    }
}

fn parse(p: &Params) -> Result<LogQuery, BadParam> {
    let kind = match p.get("type") {
        None => return Err(BadParam::new("type", "type is required: dns, tls or http")),
        Some(t) => *TYPES.iter().find(|k| **k == t).ok_or_else(|| {
            BadParam::new("type", format!("invalid type {t:?}: dns, tls or http"))
        })?,
    };
    let from_ns = p.time("from")?.unwrap_or(0);
    let to_ns = p.time("to")?.unwrap_or(u64::MAX);
    if to_ns <= from_ns {
        return Err(BadParam::new("to", "to must be after from"));
    }
    let limit = match p.number("limit")? {
        None => DEFAULT_LIMIT,
        Some(n) if (1..=MAX_LIMIT as u64).contains(&n) => n as usize,
        Some(n) => {
            return Err(BadParam::new(
                "limit",
                format!("invalid limit {n}: 1 to {MAX_LIMIT}"),
            ))
        }
    };
    let filter = p
        .get("filter")
        .map(|f| {
            let f = f.trim();
            if let Ok(ip) = f.parse::<IpAddr>() {
                Ok(Filter::Ip(ip))
            } else if f.starts_with("1:") {
                Ok(Filter::CommunityId(f.to_string()))
            } else {
                Err(BadParam::new(
                    "filter",
                    format!("invalid filter {f:?}: an IP address or a Community ID (1:...)"),
                ))
            }
        })
        .transpose()?;
    Ok(LogQuery {
        kind,
        from_ns,
        to_ns,
        limit,
        filter,
    })
}

/// The answer: the lines, newest first, and whether more lines matched than `limit`.
#[derive(Debug, Default)]
pub(crate) struct Found {
    pub lines: Vec<(u64, Value)>,
    pub truncated: bool,
}

/// The files to read, newest first: the hours of `[from, to)` that have a file, then
/// `TYPE.jsonl` (whose lines may be of any time).
fn files(dir: &Path, q: &LogQuery) -> std::io::Result<Vec<PathBuf>> {
    let first = hour_start(q.from_ns);
    let mut out: Vec<PathBuf> = hour_files(dir, q.kind)?
        .range(first..q.to_ns)
        .rev()
        .map(|(_, p)| p.clone())
        .collect();
    let single = dir.join(format!("{}.jsonl", q.kind));
    if single.is_file() {
        out.push(single);
    }
    Ok(out)
}

/// Reads the lines `q` asks for from the logs in `dir`.
pub(crate) fn find_lines(dir: &Path, q: &LogQuery) -> Result<Found, String> {
    let mut found = Found::default();
    let files = files(dir, q).map_err(|e| format!("{}: {e}", dir.display()))?;
    for path in files {
        let hourly = is_hour_file(&path, q.kind);
        // An hour's lines are all newer than an earlier hour's: once more than `limit` are
        // found, the earlier hours cannot give newer ones. The one unrotated file can hold
        // any time: it is read, and merged by sorting.
        if hourly && found.truncated {
            continue;
        }
        found.lines.extend(read_matching(&path, q)?);
        found.lines.sort_by_key(|l| std::cmp::Reverse(l.0));
        if found.lines.len() > q.limit {
            found.truncated = true;
            found.lines.truncate(q.limit);
        }
    }
    Ok(found)
}

fn is_hour_file(path: &Path, kind: &str) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| trawl_blocks::hourly_out::hour_of_file(kind, n).is_some())
}

/// The lines of `path` in `q`'s window and filter, with their `ts_ns`. A line that is not
/// JSON (a file being written ends mid-line) is skipped.
fn read_matching(path: &Path, q: &LogQuery) -> Result<Vec<(u64, Value)>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for line in std::io::BufReader::new(f).lines() {
        let line = line.map_err(|e| format!("{}: {e}", path.display()))?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let Some(ts) = v["ts_ns"].as_u64() else {
            continue;
        };
        if ts < q.from_ns || ts >= q.to_ns || q.filter.as_ref().is_some_and(|f| !f.matches(&v)) {
            continue;
        }
        out.push((ts, v));
        // Bounded by `limit` per file: keep the newest.
        if out.len() >= 2 * q.limit + HOUR_LINES_SLACK {
            out.sort_by_key(|l| std::cmp::Reverse(l.0));
            out.truncate(q.limit + 1);
        }
    }
    Ok(out)
}

/// Lines collected past `2 × limit` before a file's matches are cut back to the newest.
const HOUR_LINES_SLACK: usize = 1_024;

/// `GET /api/v1/logs`.
pub(crate) async fn logs(
    State(s): State<Shared>,
    Query(raw): Query<Vec<(String, String)>>,
) -> Response {
    let query = match Params::parse(raw, LOGS_PARAMS).and_then(|p| parse(&p)) {
        Ok(q) => q,
        Err(e) => return bad(e),
    };
    let Some(dir) = s.cfg.logs.clone() else {
        return error(
            StatusCode::NOT_FOUND,
            "no logs are served (--logs DIR)",
            None,
        );
    };
    let kind = query.kind;
    match tokio::task::spawn_blocking(move || find_lines(&dir, &query)).await {
        Ok(Ok(found)) => {
            let lines: Vec<Value> = found.lines.into_iter().map(|(_, v)| v).collect();
            let body = serde_json::json!({
                "type": kind,
                "lines": lines,
                "truncated": found.truncated,
            });
            (
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                serde_json::to_vec(&body).unwrap_or_default(),
            )
                .into_response()
        }
        Ok(Err(e)) => error(StatusCode::INTERNAL_SERVER_ERROR, &e, None),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_blocks::hourly_out::HOUR_NS;

    fn q(kind: &'static str, from_ns: u64, to_ns: u64, limit: usize) -> LogQuery {
        LogQuery {
            kind,
            from_ns,
            to_ns,
            limit,
            filter: None,
        }
    }

    /// Writes `dir/name` with lines of these times and client addresses.
    fn file(dir: &Path, name: &str, lines: &[(u64, &str)]) {
        let text: String = lines
            .iter()
            .map(|(ts, ip)| {
                format!("{{\"ts_ns\":{ts},\"src_ip\":\"{ip}\",\"dst_ip\":\"10.0.0.1\"}}\n")
            })
            .collect();
        std::fs::write(dir.join(name), text).unwrap();
    }

    fn times(f: &Found) -> Vec<u64> {
        f.lines.iter().map(|(t, _)| *t).collect()
    }

    #[test]
    fn only_the_window_s_hours_are_read_newest_first() {
        let dir = tempfile::tempdir().unwrap();
        let h = 1_795_762_800 * 1_000_000_000; // 2026-11-27T07:00Z
        assert_eq!(
            trawl_blocks::hourly_out::hour_file_name("dns", h),
            "dns-2026-11-27T07.jsonl"
        );
        file(
            dir.path(),
            "dns-2026-11-27T07.jsonl",
            &[(h + 5, "::1"), (h + 9, "10.0.0.2")],
        );
        file(
            dir.path(),
            "dns-2026-11-27T08.jsonl",
            &[(h + HOUR_NS + 1, "10.0.0.2")],
        );
        // Not the window's hour: never opened (its bad line would be skipped anyway, its
        // time is outside): unreadable, it would fail the answer.
        std::fs::create_dir(dir.path().join("dns-2026-11-27T09.jsonl")).unwrap();
        file(dir.path(), "tls-2026-11-27T07.jsonl", &[(h + 6, "::1")]);

        let all = find_lines(dir.path(), &q("dns", h, h + 2 * HOUR_NS, 10)).unwrap();
        assert_eq!(times(&all), [h + HOUR_NS + 1, h + 9, h + 5]);
        assert!(!all.truncated);
        let cut = find_lines(dir.path(), &q("dns", h + 6, h + 2 * HOUR_NS, 1)).unwrap();
        assert_eq!(times(&cut), [h + HOUR_NS + 1]);
        assert!(cut.truncated);
        let mut by_ip = q("dns", 0, h + 2 * HOUR_NS, 10);
        by_ip.filter = Some(Filter::Ip("0:0::1".parse().unwrap()));
        assert_eq!(times(&find_lines(dir.path(), &by_ip).unwrap()), [h + 5]);
        // The window's end is exclusive.
        let before = find_lines(dir.path(), &q("dns", h, h + 9, 10)).unwrap();
        assert_eq!(times(&before), [h + 5]);
    }
}
