//! Flow export and live feeds for `trawl flows`, `trawl series` and `trawl run`: the
//! command-line options, the exporters started from them, and their lines in the summary.
use std::net::Ipv4Addr;

use anyhow::{Context, Result};
use clap::Args;
use trawl_export::{Destination, ExporterReport, FeedAddr};

use crate::flag::{topic, SummaryFormat};

/// Export options shared by the capture commands.
#[derive(Args, Debug, Default, Clone)]
pub struct ExportArgs {
    /// Export flow records (repeat for several): ipfix+udp://HOST:PORT, ipfix+tcp://HOST:PORT,
    /// ipfix:/path/file.ipfix (IPFIX ones take ?biflow=off: each biflow as two one-way
    /// records), netflow9+udp://HOST:PORT, netflow5+udp://HOST:PORT, json:/path, json:-
    /// (standard output), json+tcp://HOST:PORT,
    /// kafka://BROKER[,BROKER...]/TOPIC[?key=probe|flow&format=json|protobuf&spool=DIR&spool_size=SIZE&series=TOPIC&alarms=TOPIC]
    /// (builds with the `kafka` feature; docs/specs/kafka.md). With --export, records go to
    /// standard output only if -o names a file or json:- is given.
    #[arg(help_heading = topic::EXPORT, long = "export", value_name = "DEST")]
    pub export: Vec<String>,
    /// Live feed of flow records: IPFIX over UDP multicast to GROUP:PORT (interface n of the
    /// -i list uses GROUP+n).
    #[arg(help_heading = topic::EXPORT, long = "flows-feed", value_name = "GROUP:PORT")]
    pub flows_feed: Option<String>,
    /// Live feed of per-second series rows: IPFIX over UDP multicast to GROUP:PORT.
    #[arg(help_heading = topic::EXPORT, long = "series-feed", value_name = "GROUP:PORT")]
    pub series_feed: Option<String>,
    /// Multicast TTL of the feeds (1 keeps them on the link).
    #[arg(help_heading = topic::EXPORT, long = "feed-ttl", value_name = "N", default_value_t = 1)]
    pub feed_ttl: u32,
    /// Send the feeds from this local address (its interface carries them).
    #[arg(help_heading = topic::EXPORT, long = "feed-source", value_name = "ADDR")]
    pub feed_source: Option<Ipv4Addr>,
    /// Private Enterprise Number of trawl's own IPFIX elements (default: 32473, RFC 5612's
    /// documentation number).
    #[arg(help_heading = topic::EXPORT, long = "pen", value_name = "N")]
    pub pen: Option<u32>,
}

/// Checked export settings.
#[derive(Debug, Default, Clone)]
pub struct ExportPlan {
    pub destinations: Vec<Destination>,
    pub series_feed: Option<FeedAddr>,
    pub pen: u32,
}

impl ExportPlan {
    pub fn from_args(a: &ExportArgs) -> Result<ExportPlan> {
        let mut destinations = Vec::new();
        for d in &a.export {
            destinations.push(d.parse::<Destination>().context("--export")?);
        }
        let feed = |s: &Option<String>, opt: &str| -> Result<Option<FeedAddr>> {
            s.as_deref()
                .map(|s| {
                    let mut f = FeedAddr::parse(s).with_context(|| opt.to_string())?;
                    f.ttl = a.feed_ttl;
                    f.source = a.feed_source;
                    Ok(f)
                })
                .transpose()
        };
        if let Some(f) = feed(&a.flows_feed, "--flows-feed")? {
            destinations.push(Destination::Feed(f));
        }
        Ok(ExportPlan {
            destinations,
            series_feed: feed(&a.series_feed, "--series-feed")?,
            pen: a.pen.unwrap_or(trawl_export::ie::DEFAULT_PEN),
        })
    }

    /// Whether flow records go anywhere besides the main output.
    pub fn exports_flows(&self) -> bool {
        !self.destinations.is_empty()
    }
}

/// What a series feed sent: rows, and rows that could not be sent.
#[derive(Clone, Copy, Debug, Default)]
pub struct FeedReport {
    pub rows: u64,
    pub send_errors: u64,
}

/// The exporters' part of the summary: in text, their lines printed now (before the run's
/// summary); in JSON, sections for the run's one summary object (`exporters`,
/// `series_feed`), so that a script reads a single object.
pub fn report(
    format: SummaryFormat,
    reports: &[ExporterReport],
    series_feed: Option<FeedReport>,
) -> Vec<(&'static str, serde_json::Value)> {
    let mut sections = Vec::new();
    if reports.is_empty() && series_feed.is_none() {
        return sections;
    }
    match format {
        SummaryFormat::None => {}
        SummaryFormat::Json => {
            let exporters: Vec<serde_json::Value> = reports
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "destination": r.destination,
                        "records": r.records,
                        "dropped_queue": r.dropped_queue,
                        "dropped_send": r.dropped_send,
                        "messages": r.messages,
                        "bytes": r.bytes,
                        "send_errors": r.send_errors,
                        "last_error": r.last_error,
                        "gso_segment": r.gso_segment,
                        "gso_refused": r.gso_refused,
                        "spooled": r.spooled,
                        "spool_dropped": r.spool_dropped,
                        "spool_resent": r.spool_resent,
                        "spool_pending": r.spool_pending,
                        "rejected": r.rejected,
                        "rejected_reasons": r
                            .rejected_reasons
                            .iter()
                            .map(|(reason, n)| (reason.clone(), serde_json::Value::from(*n)))
                            .collect::<serde_json::Map<_, _>>(),
                        "series_rows": r.series_rows,
                        "alarms": r.alarms,
                        "dropped_extra": r.dropped_extra,
                    })
                })
                .collect();
            sections.push(("exporters", exporters.into()));
            if let Some(f) = series_feed {
                sections.push((
                    "series_feed",
                    serde_json::json!({
                        "rows": f.rows,
                        "send_errors": f.send_errors,
                    }),
                ));
            }
        }
        SummaryFormat::Text => {
            for r in reports {
                eprintln!(
                    "export {}: {} records, {} messages, {} bytes; dropped {} (queue full), {} (not sent){}{}{}{}",
                    r.destination,
                    r.records,
                    r.messages,
                    r.bytes,
                    r.dropped_queue,
                    r.dropped_send,
                    spool_text(r),
                    rejected_text(r),
                    r.last_error
                        .as_ref()
                        .map(|e| format!("; {} send errors, last: {e}", r.send_errors))
                        .unwrap_or_default(),
                    r.gso_refused
                        .as_ref()
                        .map(|e| format!("; UDP segmentation offload off: {e}"))
                        .unwrap_or_default()
                );
            }
            if let Some(f) = series_feed {
                eprintln!(
                    "series feed: {} rows sent, {} send errors",
                    f.rows, f.send_errors
                );
            }
        }
    }
    sections
}

/// A Kafka exporter's spool, when it was used: `; spool: N in, N sent, N dropped, N left`.
fn spool_text(r: &ExporterReport) -> String {
    if r.spooled + r.spool_resent + r.spool_pending == 0 {
        return String::new();
    }
    format!(
        "; spool: {} in, {} sent, {} dropped (full), {} left for the next run",
        r.spooled, r.spool_resent, r.spool_dropped, r.spool_pending
    )
}

/// Messages a Kafka exporter's brokers refused for good, by reason:
/// `; rejected N (REASON: N, ...)`.
fn rejected_text(r: &ExporterReport) -> String {
    if r.rejected == 0 {
        return String::new();
    }
    let each: Vec<String> = r
        .rejected_reasons
        .iter()
        .map(|(reason, n)| format!("{reason}: {n}"))
        .collect();
    format!("; rejected {} ({})", r.rejected, each.join(", "))
}

/// One line per exporter that lost records or failed to send (destination, records not
/// sent, the last error): a capture-file run with any of these has failed, since its
/// exporters were waited for and nothing needed to be dropped. Messages a Kafka exporter
/// spooled are not lost, so its send errors alone are no failure.
pub fn failures(reports: &[ExporterReport]) -> Vec<String> {
    reports
        .iter()
        // A Kafka exporter with a spool loses nothing to a send error: the message waits in
        // the spool (sent later in the run, or by the next one); only drops fail the run.
        .filter(|r| r.dropped_send + r.dropped_queue > 0 || r.send_errors > 0 && r.spooled == 0)
        .map(|r| {
            format!(
                "export to {} failed: {} of {} records not sent, {} send errors (last: {})",
                r.destination,
                r.dropped_send + r.dropped_queue,
                r.records,
                r.send_errors,
                r.last_error.as_deref().unwrap_or("none recorded")
            )
        })
        .collect()
}
