//! `trawl query`: attributes, condition and time range in; a table, JSON or CSV out.
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use trawl_blocks::output::OutputFile;
use trawl_fleet::{ProbeReport, Status};
use trawl_query::output::{self, Format};
use trawl_query::{parse_attributes, scan, syntax, Query, SortBy};
use trawl_store::BLOCK_NS;

use trawl_time::Zone;

use crate::flag::{parse_duration_ns, parse_time, topic};

pub const QUERY_HELP: &str =
    "Times (--from, --to; the same forms in every command): RFC 3339 (2026-11-22T12:05:00Z,
offsets allowed), local wall-clock times in the zone of TZ ('2026-11-22 14:00[:SS]', a date
2026-11-22), Unix epoch seconds (or ms/us/ns, told apart by size), 'now', or relative to
now: -15m, -1d4h, '2h ago'. The range is widened to whole 5-minute blocks. The table shows
times in UTC (--local: in TZ's zone); JSON and CSV in UTC.

Condition (--condition): comparisons joined by and/or/not and parentheses, e.g.
  'sip = 10.0.0.0/8 and (dport = 443 or dport = 8000-8100) and not proto = udp'
  fields: sip dip host snet dnet sport dport port proto vlan iface; operators = != < > <= >=
  fleet queries (--probes, --probe) also: probe site role (= and != only)

Fleet queries (docs/specs/distributed.md): --probes FILE or --probe [NAME=]URL asks every
probe's API (/api/v1/partial) concurrently and merges the answers; `probe` is an attribute
(talk_conv,probe). The output adds each probe's status (ok, timeout, refused, error,
skipped), groups, blocks scanned and time: a `probes` array in JSON, lines after the table,
standard error with CSV. A probe that did not answer makes the answer incomplete (exit 1).

Exit codes:
  0  success
  1  some blocks could not be read (the others were; the errors are listed), or some probes
     did not answer (the answer is the merge of the others)
  2  usage error: bad option, condition, attribute or time";

#[derive(Args, Debug)]
pub struct QueryArgs {
    /// Attributes to group by, comma-separated: sip, dip, sport, dport, proto, iface, vlan,
    /// time, app, sas, das, scountry, dcountry, tunnel_type, tunnel_src, tunnel_dst, or
    /// talk_conv (sip,dip), talk_src, talk_dst, apps (dport,proto).
    #[arg(value_name = "ATTRIBUTES", default_value = "talk_conv")]
    pub attributes: String,
    /// The database directory.
    #[arg(
        help_heading = topic::INPUT,
        short = 'd',
        long = "db",
        value_name = "DIR",
        default_value = "/var/lib/trawl/db"
    )]
    pub db: PathBuf,
    /// Interfaces to query (comma-separated; default all).
    #[arg(
        help_heading = topic::FILTER,
        short = 'i',
        long = "interface",
        alias = "iface",
        value_name = "LIST",
        value_delimiter = ','
    )]
    pub iface: Vec<String>,
    /// Start of the time range (forms below).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", conflicts_with = "last", allow_hyphen_values = true,
          value_parser = parse_time)]
    pub from: Option<u64>,
    /// End of the time range (exclusive).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", conflicts_with = "last", allow_hyphen_values = true,
          value_parser = parse_time)]
    pub to: Option<u64>,
    /// Show times in the table in the local zone (`TZ`) with its offset instead of UTC (JSON
    /// and CSV stay in UTC).
    #[arg(help_heading = topic::OUTPUT, long)]
    pub local: bool,
    /// The time range is the last DURATION (e.g. 1h, 30m, 7d) up to now.
    #[arg(help_heading = topic::TIME, long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub last: Option<u64>,
    /// Condition rows must meet (no short flag: `-c` is the configuration file in every
    /// command; docs/cli.md).
    #[arg(help_heading = topic::FILTER, long = "condition", value_name = "COND")]
    pub condition: Option<String>,
    /// Order of the rows.
    #[arg(help_heading = topic::OUTPUT, short = 's', long, value_name = "ORDER", default_value = "bytes")]
    pub sort: String,
    /// Rows shown (0: all).
    #[arg(help_heading = topic::OUTPUT, short = 'n', long, value_name = "N", default_value_t = 10)]
    pub limit: usize,
    /// Output format: table, json or csv (no short flag: `-f` is the tcpdump filter in every
    /// command; docs/cli.md).
    #[arg(help_heading = topic::OUTPUT, long, value_name = "FORMAT", default_value = "table")]
    pub format: String,
    /// Resolution of the `time` attribute (a multiple of 5m).
    #[arg(help_heading = topic::OUTPUT, long, value_name = "DURATION", default_value = "5m", value_parser = parse_duration_ns)]
    pub resolution: u64,
    /// Scan threads (default: one per CPU).
    #[arg(help_heading = topic::QUERY, long, value_name = "N")]
    pub workers: Option<usize>,
    /// Most result groups held in memory; a query that needs more fails with a message.
    #[arg(help_heading = topic::QUERY, long = "max-groups", value_name = "N", default_value_t = 10_000_000)]
    pub max_groups: usize,
    /// Print the partial aggregate (the serialised form a probe returns to a coordinator)
    /// instead of the result.
    #[arg(help_heading = topic::QUERY, long)]
    pub partial: bool,
    /// Read every column chunk through the general Parquet (Arrow) reader instead of decoding
    /// trawl's own pages directly: same result, slower; for comparisons.
    #[arg(help_heading = topic::QUERY, long = "general-reader", hide = true)]
    pub general_reader: bool,
    /// Ask the probes of this file (probes.toml: names, URLs, token files, tags) instead of a
    /// local database.
    #[arg(help_heading = topic::FLEET, long = "probes", value_name = "FILE", conflicts_with = "partial")]
    pub probes: Option<PathBuf>,
    /// Ask this probe's API (repeatable; NAME= optional, default the URL's HOST:PORT), with
    /// or instead of --probes.
    #[arg(help_heading = topic::FLEET, long = "probe", value_name = "[NAME=]URL", conflicts_with = "partial")]
    pub probe: Vec<String>,
    /// Longest time a probe may take to answer (fleet queries; default: the file's
    /// `timeout`, else 10s).
    #[arg(help_heading = topic::FLEET, long = "probe-timeout", value_name = "DURATION", value_parser = parse_duration_ns)]
    pub probe_timeout: Option<u64>,
    #[command(flatten)]
    pub anonymize: crate::flag::AnonymizeKey,
    /// Query ClickHouse's flow table (`trawl clickhouse load`) at this HTTP URL
    /// (http://HOST:PORT) instead of a flow database: the condition and attributes as SQL,
    /// the same output.
    #[arg(help_heading = topic::INPUT, long, value_name = "URL", conflicts_with_all = ["partial", "general_reader", "probes", "probe"])]
    pub clickhouse: Option<String>,
    /// With --clickhouse: the flow table.
    #[arg(help_heading = topic::INPUT, long = "clickhouse-table", value_name = "DB.TABLE", default_value = "trawl.flows")]
    pub clickhouse_table: String,
    /// With --clickhouse: print the SQL statements instead of running them.
    #[arg(help_heading = topic::QUERY, long = "print-sql", requires = "clickhouse")]
    pub print_sql: bool,
}

/// A query's flags, checked: what to run and how to print it.
pub struct Planned {
    pub query: Query,
    pub sort: SortBy,
    pub format: Format,
    pub zone: Zone,
}

/// Checks the flags and builds the query (the database is not looked at).
pub fn plan(a: &QueryArgs) -> Result<Planned> {
    let attributes = parse_attributes(&a.attributes).map_err(|e| anyhow!(e))?;
    let sort = SortBy::parse(&a.sort)
        .with_context(|| format!("invalid --sort {:?} (bytes, packets, flows, time)", a.sort))?;
    let format = Format::parse(&a.format)
        .with_context(|| format!("invalid --format {:?} (table, json, csv)", a.format))?;
    if a.resolution == 0 || !a.resolution.is_multiple_of(BLOCK_NS) {
        bail!("--resolution must be a multiple of 5m");
    }
    for i in &a.iface {
        if !trawl_store::layout::valid_iface(i) {
            bail!("invalid interface name {i:?}");
        }
    }
    let condition = match a.condition.as_deref().filter(|c| !c.trim().is_empty()) {
        None => None,
        Some(c) => Some(syntax::parse(c).map_err(|e| {
            anyhow!(
                "invalid condition, at character {}:\n{}",
                e.pos + 1,
                e.render(c)
            )
        })?),
    };
    // The same time syntax as every command's (args::parse_time).
    let (from, to) = match a.last {
        Some(d) => (trawl_time::now_ns().saturating_sub(d), None),
        None => (a.from.unwrap_or(0), a.to),
    };
    // Whole blocks: the block holding `from` through the block holding the instant before `to`.
    let from_ns = from - from % BLOCK_NS;
    let to_ns = to.map(|t| t.div_ceil(BLOCK_NS).saturating_mul(BLOCK_NS));
    if to_ns.is_some_and(|t| t <= from_ns) {
        bail!("the time range is empty (--to is not after --from)");
    }
    let query = Query {
        attributes,
        condition,
        ifaces: a.iface.clone(),
        from_ns,
        to_ns,
        time_resolution_ns: a.resolution,
        workers: a.workers.unwrap_or(Query::default().workers).max(1),
        max_groups: a.max_groups.max(1),
        direct_decoding: !a.general_reader,
    };
    let zone = if a.local { Zone::Local } else { Zone::Utc };
    Ok(Planned {
        query,
        sort,
        format,
        zone,
    })
}

pub fn run(a: &QueryArgs) -> Result<ExitCode> {
    // Partial aggregates keep their keys packed: they would need decoding to be anonymized.
    if a.partial && a.anonymize.key.is_some() {
        bail!("--partial cannot be combined with --anonymize");
    }
    let mut anon = a.anonymize.anonymizer()?;
    let Planned {
        query,
        sort,
        format,
        zone,
    } = plan(a)?;
    let fleet = fleet(a)?;
    if fleet.is_none() {
        check_database(&a.db)?;
    }
    let started = Instant::now();
    let (partial, probes) = match &fleet {
        Some(f) => {
            let answer = trawl_fleet::run(f, &query)?;
            (answer.partial, Some(answer.probes))
        }
        None => (scan(&a.db, &query)?, None),
    };
    let incomplete = probes.as_deref().is_some_and(trawl_fleet::incomplete);
    let failed = partial.stats.blocks_failed > 0 || incomplete;
    warn_ignored(&partial.stats.ignored_files);
    if partial.stats.blocks == 0 && probes.is_none() {
        tracing::info!("{}", empty_range_note(&a.db, &a.iface)?);
    }
    let mut out = OutputFile::create(Path::new("-")).context("cannot write output")?;
    // A reader that went away (EPIPE) ends the output early and is no error.
    // The answer, kept past the output's end and then left to the process's exit to free:
    // a fleet's merged table is a million groups, and freeing it (and closing fifty
    // connections) one allocation at a time only delays the last byte and the exit status.
    let mut answer = None;
    let _ = if a.partial {
        writeln!(out, "{}", partial.to_json())
    } else {
        let mut result = partial.finish(sort, (a.limit > 0).then_some(a.limit));
        result.elapsed = started.elapsed();
        if let Some(anon) = &mut anon {
            // The rows shown: the database itself is as it was ingested.
            for (key, _) in result.rows.decoded_mut() {
                key.sip = key.sip.map(|ip| anon.ip(ip));
                key.dip = key.dip.map(|ip| anon.ip(ip));
            }
        }
        let written = match &probes {
            None => output::write(&result, format, zone, &mut out),
            Some(p) => write_fleet(&result, p, format, zone, &mut out),
        };
        answer = Some(result);
        written
    };
    out.finish().context("cannot write output")?;
    std::mem::forget((answer, fleet));
    Ok(if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// The fleet of `--probes` and `--probe`, when given.
fn fleet(a: &QueryArgs) -> Result<Option<trawl_fleet::Fleet>> {
    if a.probes.is_none() && a.probe.is_empty() {
        return Ok(None);
    }
    let mut fleet = match &a.probes {
        Some(f) => trawl_fleet::Fleet::load(f)?,
        None => trawl_fleet::Fleet::default(),
    };
    for url in &a.probe {
        fleet.add_url(url)?;
    }
    if let Some(t) = a.probe_timeout {
        fleet.timeout = std::time::Duration::from_nanos(t);
    }
    Ok(Some(fleet))
}

/// A fleet query's answer: the local query's output plus each probe's report (in the JSON
/// document; after the table; on standard error with CSV, whose rows stay one table).
fn write_fleet(
    result: &trawl_query::QueryResult,
    probes: &[ProbeReport],
    format: Format,
    zone: Zone,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let incomplete = trawl_fleet::incomplete(probes);
    match format {
        Format::Json => {
            trawl_fleet::write_json(result, probes, out)?;
            writeln!(out)
        }
        Format::Table => {
            output::write(result, format, zone, out)?;
            writeln!(out)?;
            for line in probe_lines(probes, incomplete) {
                writeln!(out, "{line}")?;
            }
            Ok(())
        }
        Format::Csv => {
            output::write(result, format, zone, out)?;
            for line in probe_lines(probes, incomplete) {
                eprintln!("{line}");
            }
            Ok(())
        }
    }
}

/// One line per probe, then what the answer misses.
fn probe_lines(probes: &[ProbeReport], incomplete: bool) -> Vec<String> {
    let width = probes
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(5)
        .max(5);
    let mut lines = vec![format!(
        "{:width$}  {:8}  {:>9}  {:>8}  {:>9}  message",
        "probe", "status", "groups", "blocks", "time_ms"
    )];
    for p in probes {
        let status = serde_json::to_value(p.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        lines.push(format!(
            "{:width$}  {:8}  {:>9}  {:>8}  {:>9.1}  {}",
            p.name,
            status,
            p.groups,
            p.blocks_scanned,
            p.time_ms,
            p.message.as_deref().unwrap_or("")
        ));
    }
    if incomplete {
        let missing: Vec<&str> = probes
            .iter()
            .filter(|p| !matches!(p.status, Status::Ok | Status::Skipped))
            .map(|p| p.name.as_str())
            .collect();
        lines.push(format!(
            "INCOMPLETE: no data from {} (the rows are the merge of the other probes)",
            missing.join(", ")
        ));
    }
    lines
}

/// A directory without a single `iface=NAME` directory is not a flow database: querying it
/// would answer an empty result as if the database held no matching flow. An empty directory
/// is an empty database (retention deleted every block, or none was written yet).
fn check_database(db: &Path) -> Result<()> {
    let ifaces = match trawl_store::list_ifaces(db) {
        Ok(i) => i,
        Err(e) => bail!("no flow database at {}: {e}", db.display()),
    };
    if ifaces.is_empty() && !crate::dump::is_empty_dir(db)? {
        bail!(
            "{} holds no trawl flow database (no iface=NAME directory)",
            db.display()
        );
    }
    Ok(())
}

/// Stray Parquet files are not read: say so, naming a few.
fn warn_ignored(files: &[String]) {
    const SHOWN: usize = 5;
    if files.is_empty() {
        return;
    }
    let mut names = files[..files.len().min(SHOWN)].join(", ");
    if files.len() > SHOWN {
        names.push_str(&format!(" and {} more", files.len() - SHOWN));
    }
    tracing::warn!(
        "{} Parquet file(s) in the database are not blocks and were not read \
         (blocks are iface=NAME/date=YYYY-MM-DD/HHMM.parquet or HHMM_N.parquet, HHMM a multiple \
         of 5 minutes): {names}",
        files.len()
    );
}

/// What an empty time range (or interface list) is next to: the span and interfaces the
/// database does hold.
fn empty_range_note(db: &Path, asked: &[String]) -> Result<String> {
    let all = trawl_store::list_blocks(db, &trawl_store::BlockFilter::default())?;
    let (Some(first), Some(last)) = (all.first(), all.last()) else {
        return Ok(format!(
            "{} holds no block: none written yet, or retention deleted them all",
            db.display()
        ));
    };
    let ifaces = trawl_store::list_ifaces(db)?;
    let iface_note = if asked.iter().any(|i| !ifaces.contains(i)) {
        format!(" (interfaces {})", ifaces.join(", "))
    } else {
        String::new()
    };
    Ok(format!(
        "no block in the time range{}; the database holds {} .. {}{iface_note}",
        if asked.is_empty() {
            ""
        } else {
            " and interfaces"
        },
        output::rfc3339(first.start_ns),
        output::rfc3339(last.start_ns + BLOCK_NS),
    ))
}
