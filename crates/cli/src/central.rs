//! The central tier on the command line: `trawl collect --kafka` (a topic into a flow
//! database), `trawl clickhouse schema|load` (the tables, and a topic into ClickHouse), and
//! `trawl query --clickhouse` (the query language over ClickHouse). The consumers are the
//! `kafka_source` and `clickhouse_sink` blocks (feature `kafka`); the SQL is
//! `trawl_central::sql`.
use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Subcommand};
use trawl_blocks::output::OutputFile;
use trawl_central::http::Server;
use trawl_central::schema::{self, SchemaOptions, ServerVersion};
use trawl_compose::{BlockReport, Document, Policy, Report};

use crate::collect::CollectArgs;
use crate::flag::{parse_duration_ns, topic, OutputFormat, SummaryFormat, TimeFormat};
use crate::query::QueryArgs;

#[derive(Args, Debug)]
pub struct ClickhouseArgs {
    #[command(subcommand)]
    pub command: ClickhouseCommand,
}

#[derive(Subcommand, Debug)]
pub enum ClickhouseCommand {
    /// Print (or run with --url) the DDL of the flow, series and alarm tables.
    Schema(SchemaArgs),
    /// Consume trawl's flow records from a Kafka topic and batch-insert them into ClickHouse
    /// (sorted Native blocks over HTTP), committing offsets after each insert (builds with the `kafka`
    /// feature).
    Load(LoadArgs),
}

#[derive(Args, Debug)]
pub struct SchemaArgs {
    /// Server generation: `current` (22.8 and later, chDB) or `18.16` (Debian's package: no
    /// TTL, no LowCardinality). With --url, the server's own version decides.
    #[arg(help_heading = topic::OUTPUT, long = "server-version", value_name = "VERSION", default_value = "current")]
    pub server_version: String,
    /// Database of the tables.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "NAME", default_value = "trawl")]
    pub database: String,
    /// A cluster: per-shard `*_local` tables (ReplicatedMergeTree, ON CLUSTER) behind
    /// Distributed tables of the plain names.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "NAME")]
    pub cluster: Option<String>,
    /// With --cluster: MergeTree per shard and no ON CLUSTER (no ZooKeeper/Keeper; run the
    /// script on every server).
    #[arg(help_heading = topic::OUTPUT, long = "no-replication", requires = "cluster")]
    pub no_replication: bool,
    /// Delete rows older than this many days (TTL; current servers only).
    #[arg(help_heading = topic::OUTPUT, long = "ttl-days", value_name = "DAYS")]
    pub ttl_days: Option<u32>,
    /// Also the Kafka-engine alternative: a Kafka table reading this topic's JSON records
    /// (BROKER[,BROKER...]/TOPIC) and a materialized view into the flow table.
    #[arg(help_heading = topic::OUTPUT, long = "kafka-engine", value_name = "BROKERS/TOPIC")]
    pub kafka_engine: Option<String>,
    /// Run the statements on this server (http://HOST:PORT) instead of printing them.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "URL")]
    pub url: Option<String>,
}

#[derive(Args, Debug)]
pub struct LoadArgs {
    /// The topic: BROKER[,BROKER...]/TOPIC; `TOPIC?format=goflow2`: GoFlow2's messages
    /// (`-format=bin`) instead of trawl's records.
    #[arg(help_heading = topic::INPUT, long, value_name = "BROKERS/TOPIC")]
    pub kafka: String,
    /// Also the series topic of the same brokers (`kafka://...?series=TOPIC`), into the
    /// series table of the flow table's database.
    #[arg(help_heading = topic::INPUT, long = "series-topic", value_name = "TOPIC")]
    pub series_topic: Option<String>,
    /// Also the alarms topic of the same brokers (`kafka://...?alarms=TOPIC`), into the
    /// alarms table of the flow table's database.
    #[arg(help_heading = topic::INPUT, long = "alarms-topic", value_name = "TOPIC")]
    pub alarms_topic: Option<String>,
    /// Consumer group whose offsets are committed.
    #[arg(help_heading = topic::INPUT, long = "kafka-group", value_name = "NAME", default_value = "trawl-clickhouse")]
    pub kafka_group: String,
    /// Stop once every partition is read to its end, instead of waiting for more.
    #[arg(help_heading = topic::RUN, long = "kafka-end")]
    pub kafka_end: bool,
    /// ClickHouse's HTTP interface, http://HOST:PORT.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "URL")]
    pub url: String,
    /// The flow table.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "DB.TABLE", default_value = "trawl.flows")]
    pub table: String,
    /// Create the database and tables first (`trawl clickhouse schema` for the server's
    /// version), if they do not exist.
    #[arg(help_heading = topic::OUTPUT, long)]
    pub create: bool,
    /// The `probe` column of records that name no probe.
    #[arg(help_heading = topic::OUTPUT, long, value_name = "NAME", default_value = "")]
    pub probe: String,
    /// Rows per insert at most.
    #[arg(help_heading = topic::OUTPUT, long = "batch-rows", value_name = "N", default_value_t = 1 << 18)]
    pub batch_rows: usize,
    /// Insert a batch at least this often once it has rows.
    #[arg(help_heading = topic::OUTPUT, long = "batch-interval", value_name = "DURATION", value_parser = parse_duration_ns, default_value = "1s")]
    pub batch_interval: u64,
    /// Stop after this long (default: until SIGINT/SIGTERM, or the end with --kafka-end).
    #[arg(help_heading = topic::RUN, long, value_name = "DURATION", value_parser = parse_duration_ns)]
    pub duration: Option<u64>,
    /// Summary on standard error at the end.
    #[arg(help_heading = topic::OUTPUT, long, value_enum, default_value_t = SummaryFormat::Text)]
    pub summary: SummaryFormat,
    /// Print the composition these flags build (TOML, for `trawl run -c`) and exit.
    #[arg(help_heading = topic::OUTPUT, long = "print-composition")]
    pub print_composition: bool,
}

pub fn clickhouse(a: &ClickhouseArgs) -> Result<ExitCode> {
    match &a.command {
        ClickhouseCommand::Schema(s) => print_schema(s),
        ClickhouseCommand::Load(l) => load(l),
    }
}

fn print_schema(a: &SchemaArgs) -> Result<ExitCode> {
    let server = a.url.as_deref().map(Server::parse).transpose()?;
    let version = match &server {
        Some(s) => ServerVersion::of_server(&s.query_text("SELECT version()")?),
        None => ServerVersion::parse(&a.server_version).with_context(|| {
            format!(
                "invalid --server-version {:?} (18.16 or current)",
                a.server_version
            )
        })?,
    };
    let o = SchemaOptions {
        database: a.database.clone(),
        version,
        cluster: a.cluster.clone(),
        replicated: !a.no_replication,
        ttl_days: a.ttl_days,
    };
    let mut statements = schema::ddl(&o);
    if let Some(k) = &a.kafka_engine {
        let (brokers, topic) = k
            .rsplit_once('/')
            .with_context(|| format!("invalid --kafka-engine {k:?}: expected BROKERS/TOPIC"))?;
        statements.extend(
            schema::kafka_engine_ddl(&a.database, brokers, topic, "trawl-clickhouse-engine")
                .into_iter()
                .skip(1),
        );
    }
    match server {
        Some(s) => create(&s, &o, &statements)?,
        None => print!("{}", schema::script(&statements)),
    }
    Ok(ExitCode::SUCCESS)
}

/// Runs `statements` (the DDL of `o`, and more) on `server`, then gives flow tables an
/// earlier trawl made the columns added since (`ALTER TABLE ... ADD COLUMN` of those the
/// server's `system.columns` lacks).
fn create(server: &Server, o: &SchemaOptions, statements: &[String]) -> Result<()> {
    for st in statements {
        server
            .query(st)
            .with_context(|| format!("running {}", first_line(st)))?;
    }
    for table in schema::flow_tables(o) {
        let existing: Vec<String> = server
            .query_text(&format!(
                "SELECT name FROM system.columns WHERE database = '{}' AND table = '{table}'",
                o.database
            ))?
            .lines()
            .map(str::to_string)
            .collect();
        for st in schema::add_flow_columns(o, &table, Some(&existing)) {
            server.query(&st).with_context(|| format!("running {st}"))?;
        }
    }
    Ok(())
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or(s)
}

const SINK: &str = "load";

/// The consumers are blocks of builds with the `kafka` feature.
fn need_kafka(flag: &str) -> Result<()> {
    if !cfg!(feature = "kafka") {
        bail!("{flag} needs a trawl built with the `kafka` feature (cargo build -p trawl-cli --features kafka)");
    }
    Ok(())
}

fn load(a: &LoadArgs) -> Result<ExitCode> {
    need_kafka("trawl clickhouse load")?;
    let mut doc = Document::new();
    if let Some(ns) = a.duration {
        doc.runtime("duration", format!("{}ms", ns / 1_000_000));
    }
    doc.pool_of_threads("main", 1);
    let database = a.table.split_once('.').map_or("default", |(d, _)| d);
    let table_of =
        |topic: &Option<String>, t: &str| topic.as_ref().map(|_| format!("{database}.{t}"));
    doc.block(SINK, "clickhouse_sink")
        .on("main", None)
        .set_some("series", a.series_topic.clone())
        .set_some("series_table", table_of(&a.series_topic, "series"))
        .set_some("alarms", a.alarms_topic.clone())
        .set_some("alarms_table", table_of(&a.alarms_topic, "alarms"))
        .set("kafka", a.kafka.clone())
        .set("group", a.kafka_group.clone())
        .set("url", a.url.clone())
        .set("table", a.table.clone())
        .set("probe", a.probe.clone())
        .set("batch_rows", a.batch_rows as i64)
        .set(
            "batch_interval",
            format!("{}ms", (a.batch_interval / 1_000_000).max(1)),
        )
        .set("stop_at_end", a.kafka_end);
    if a.print_composition {
        print!("{}", doc.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    if a.create {
        let server = Server::parse(&a.url)?;
        let version = ServerVersion::of_server(&server.query_text("SELECT version()")?);
        let o = SchemaOptions {
            database: database.to_string(),
            version,
            ..SchemaOptions::default()
        };
        create(&server, &o, &schema::ddl(&o))?;
    }
    let (failure, report, elapsed) = run_composition(&doc, "clickhouse load")?;
    let b = report.block(SINK).context("the composition has no sink")?;
    let n = |k: &str| b.counter(k).unwrap_or(0);
    let rows = n("rows_inserted");
    match a.summary {
        SummaryFormat::None => {}
        SummaryFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "command": "clickhouse load",
                "records": n("records"),
                "series_rows": n("series_rows"),
                "alarms": n("alarms"),
                "bad_messages": n("bad_messages"),
                "inserts": n("inserts"),
                "insert_errors": n("insert_errors"),
                "rows_inserted": rows,
                "bytes_inserted": n("bytes_inserted"),
                "elapsed_s": elapsed,
                "rows_per_s": rows as f64 / elapsed.max(1e-9),
                "errors": b.error_messages,
            })
        ),
        SummaryFormat::Text => {
            eprintln!(
                "clickhouse load: {} records, {} series rows, {} alarms consumed, {rows} rows \
                 inserted in {} inserts ({} failed), {} bad messages; {:.0} rows/s",
                n("records"),
                n("series_rows"),
                n("alarms"),
                n("inserts"),
                n("insert_errors"),
                n("bad_messages"),
                rows as f64 / elapsed.max(1e-9)
            );
            for e in &b.error_messages {
                eprintln!("  {e}");
            }
        }
    }
    if let Some(f) = failure {
        bail!(f);
    }
    let consumed = n("records") + n("series_rows") + n("alarms");
    Ok(if consumed > rows || n("bad_messages") > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Runs a composition until it ends or a signal stops it: the failure (if any), the
/// report, and the seconds it ran.
fn run_composition(doc: &Document, name: &str) -> Result<(Option<String>, Report, f64)> {
    let cpus = trawl_capture::live::allowed_cpus();
    let plan = trawl_compose::plan(&doc.to_toml(), name, &trawl_api::registry(), &cpus)
        .map_err(anyhow::Error::from)?;
    let stop = crate::signals::install_stop_signals()?;
    let started = Instant::now();
    let running = trawl_compose::start(plan).map_err(anyhow::Error::msg)?;
    let result = running.supervise_with(&stop, |_| {}, None);
    let elapsed = started.elapsed().as_secs_f64();
    Ok(match result {
        Ok(r) => (None, r, elapsed),
        Err((f, r)) => (Some(f), r, elapsed),
    })
}

const SOURCE: &str = "collect";
const WRITER: &str = "out";

/// `trawl collect --kafka BROKERS/TOPIC --db DIR`.
pub fn collect(a: &CollectArgs) -> Result<ExitCode> {
    let kafka = a.kafka.as_deref().context("--kafka is required here")?;
    need_kafka("--kafka")?;
    let db = a.db.as_ref().context("--kafka needs --db DIR")?;
    let mut doc = Document::new();
    if let Some(ns) = a.duration {
        doc.runtime("duration", format!("{}ms", ns / 1_000_000));
    }
    doc.pool_of_threads("main", 1);
    doc.block(SOURCE, "kafka_source")
        .on("main", None)
        .set("kafka", kafka.to_string())
        .set("group", a.kafka_group.clone())
        .set("dir", db.display().to_string())
        .set("stop_at_end", a.kafka_end)
        .set("idle", format!("{}ms", (a.kafka_idle / 1_000_000).max(1)))
        .set_some("keep_days", a.db_keep_days.map(i64::from))
        .set_some("max_size", a.db_max_size.map(|b| b as i64));
    if !a.no_output {
        doc.block(WRITER, "flow_writer")
            .on("main", None)
            .set("path", a.output.display().to_string())
            .set(
                "format",
                match a.format {
                    OutputFormat::Json => "json",
                    OutputFormat::Csv => "csv",
                },
            )
            .set("mode", "truncate")
            .set_some(
                "time_format",
                (a.time_format != TimeFormat::Ns).then_some(a.time_format.name()),
            );
        let to = format!("{WRITER}.flows");
        doc.connect(&format!("{SOURCE}.flows"), &[to.as_str()], Policy::Wait);
    }
    if a.print_composition {
        print!("{}", doc.to_toml());
        return Ok(ExitCode::SUCCESS);
    }
    let (failure, report, _) = run_composition(&doc, "collect")?;
    let b = report
        .block(SOURCE)
        .context("the composition has no source")?;
    print_collect_summary(a.summary, b);
    if let Some(f) = failure {
        bail!(f);
    }
    Ok(
        if b.counter("bad_messages").unwrap_or(0) > 0 || b.errors > 0 {
            ExitCode::from(1)
        } else {
            ExitCode::SUCCESS
        },
    )
}

fn print_collect_summary(format: SummaryFormat, b: &BlockReport) {
    let n = |k: &str| b.counter(k).unwrap_or(0);
    match format {
        SummaryFormat::None => {}
        SummaryFormat::Json => eprintln!(
            "{}",
            serde_json::json!({
                "command": "collect",
                "kafka": {
                    "records": n("records"),
                    "bad_messages": n("bad_messages"),
                    "commits": n("commits"),
                },
                "store": {
                    "rows": n("rows"),
                    "blocks": n("blocks"),
                    "extra_parts": n("extra_parts"),
                    "bytes": n("bytes"),
                },
                "error_messages": b.error_messages,
            })
        ),
        SummaryFormat::Text => {
            eprintln!(
                "collect: {} records from Kafka ({} bad messages); {} rows stored in {} blocks \
                 ({} further parts); {} commits",
                n("records"),
                n("bad_messages"),
                n("rows"),
                n("blocks"),
                n("extra_parts"),
                n("commits"),
            );
            for e in &b.error_messages {
                eprintln!("  {e}");
            }
        }
    }
}

/// `trawl query --clickhouse URL`: the query as SQL, the answer in the local query's output.
pub fn query(a: &QueryArgs) -> Result<ExitCode> {
    let url = a
        .clickhouse
        .as_deref()
        .context("--clickhouse is required here")?;
    if a.anonymize.key.is_some() {
        bail!("--anonymize is not applied to ClickHouse answers: query without it");
    }
    let planned = crate::query::plan(a)?;
    if planned
        .query
        .condition
        .as_ref()
        .is_some_and(trawl_central::sql::fleet_tags)
    {
        bail!("`site` and `role` are tags of a probes file (--probes): ClickHouse's tables do not hold them");
    }
    let server = Server::parse(url)?;
    let st = trawl_central::sql::statements(
        &planned.query,
        &a.clickhouse_table,
        planned.sort,
        (a.limit > 0).then_some(a.limit),
    );
    if a.print_sql {
        println!("{};\n{};", st.rows, st.totals);
        return Ok(ExitCode::SUCCESS);
    }
    let started = Instant::now();
    let rows = server.query_text(&st.rows)?;
    let totals = server.query_text(&st.totals)?;
    let mut result =
        trawl_central::sql::result(&planned.query, &rows, &totals).map_err(|e| anyhow!(e))?;
    result.elapsed = started.elapsed();
    let mut out = OutputFile::create(Path::new("-")).context("cannot write output")?;
    let _ = trawl_query::output::write(&result, planned.format, planned.zone, &mut out);
    out.finish().context("cannot write output")?;
    Ok(ExitCode::SUCCESS)
}
