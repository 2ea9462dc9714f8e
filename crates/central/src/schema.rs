//! ClickHouse tables of flows, series and alarms (`trawl clickhouse schema`;
//! `docs/specs/clickhouse.md`). One variant per server generation where they differ: 18.16
//! (Debian's package) has no `TTL` and no `LowCardinality` by default; current servers get
//! both.
use std::fmt::Write;

/// The server generation the DDL is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerVersion {
    /// ClickHouse 18.16 (Debian 12's `clickhouse-server`): no column TTL, no
    /// `LowCardinality`.
    V18,
    /// ClickHouse 22.8 and later (and chDB).
    Current,
}

impl ServerVersion {
    /// Parses `18.16` or `current`.
    pub fn parse(s: &str) -> Option<ServerVersion> {
        match s {
            "18" | "18.16" => Some(ServerVersion::V18),
            "current" => Some(ServerVersion::Current),
            _ => None,
        }
    }

    /// The variant for a server reporting `version()` as `text` (`18.16.1`, `24.3.2.23`).
    pub fn of_server(text: &str) -> ServerVersion {
        let major: u32 = text
            .trim()
            .split('.')
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        if major < 19 {
            ServerVersion::V18
        } else {
            ServerVersion::Current
        }
    }
}

/// A column's type: plain, or a text column of few values (`LowCardinality` on current
/// servers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColType {
    /// The type, the same everywhere.
    Plain(&'static str),
    /// `String`, `LowCardinality(String)` where the server has it.
    Label,
}

impl ColType {
    /// The type's SQL name on servers of generation `v`.
    pub fn sql(self, v: ServerVersion) -> &'static str {
        match (self, v) {
            (ColType::Plain(t), _) => t,
            (ColType::Label, ServerVersion::V18) => "String",
            (ColType::Label, ServerVersion::Current) => "LowCardinality(String)",
        }
    }
}

/// The end reasons as an `Enum8` (their discriminants are `EndReason`'s).
pub const END_REASON_TYPE: &str =
    "Enum8('idle' = 0, 'active' = 1, 'fin' = 2, 'rst' = 3, 'pressure' = 4, 'end' = 5)";

/// The flow table's columns, in table (and RowBinary) order. Addresses are 16 bytes: IPv6,
/// or IPv4 mapped into `::ffff:0:0/96` (what `IPv4ToIPv6` gives), so one column holds both
/// and address ranges are byte ranges.
pub const FLOW_COLUMNS: &[(&str, ColType)] = &[
    ("date", ColType::Plain("Date")),
    ("time", ColType::Plain("DateTime")),
    ("probe", ColType::Label),
    ("iface", ColType::Label),
    ("src_ip", ColType::Plain("FixedString(16)")),
    ("dst_ip", ColType::Plain("FixedString(16)")),
    ("src_port", ColType::Plain("UInt16")),
    ("dst_port", ColType::Plain("UInt16")),
    ("proto", ColType::Plain("UInt8")),
    ("vlan", ColType::Plain("UInt16")),
    ("first_ns", ColType::Plain("UInt64")),
    ("last_ns", ColType::Plain("UInt64")),
    ("fwd_packets", ColType::Plain("UInt64")),
    ("rev_packets", ColType::Plain("UInt64")),
    ("fwd_bytes", ColType::Plain("UInt64")),
    ("rev_bytes", ColType::Plain("UInt64")),
    ("fwd_ip_bytes", ColType::Plain("UInt64")),
    ("rev_ip_bytes", ColType::Plain("UInt64")),
    ("fwd_tcp_flags", ColType::Plain("UInt8")),
    ("rev_tcp_flags", ColType::Plain("UInt8")),
    ("fwd_retrans", ColType::Plain("UInt32")),
    ("rev_retrans", ColType::Plain("UInt32")),
    ("end_reason", ColType::Plain(END_REASON_TYPE)),
    // Added later (`LATER_FLOW_COLUMNS`): a table made before gets them by `ALTER TABLE`.
    ("app", ColType::Label),
    ("app_source", ColType::Label),
    ("src_as", ColType::Plain("UInt32")),
    ("dst_as", ColType::Plain("UInt32")),
    ("src_country", ColType::Label),
    ("dst_country", ColType::Label),
    ("fwd_rtt_handshake_ns", ColType::Plain("Nullable(UInt64)")),
    ("fwd_rtt_samples", ColType::Plain("UInt32")),
    ("fwd_rtt_min_ns", ColType::Plain("Nullable(UInt64)")),
    ("fwd_rtt_max_ns", ColType::Plain("Nullable(UInt64)")),
    ("fwd_rtt_mean_ns", ColType::Plain("Nullable(Float64)")),
    ("rev_rtt_handshake_ns", ColType::Plain("Nullable(UInt64)")),
    ("rev_rtt_samples", ColType::Plain("UInt32")),
    ("rev_rtt_min_ns", ColType::Plain("Nullable(UInt64)")),
    ("rev_rtt_max_ns", ColType::Plain("Nullable(UInt64)")),
    ("rev_rtt_mean_ns", ColType::Plain("Nullable(Float64)")),
    ("tunnel_type", ColType::Label),
    ("tunnel_src", ColType::Plain("FixedString(16)")),
    ("tunnel_dst", ColType::Plain("FixedString(16)")),
    ("tunnel_id", ColType::Plain("UInt32")),
];

/// How many of [`FLOW_COLUMNS`] the first flow tables had: the others (from `app` on) are
/// added to an existing table by the `ALTER TABLE ... ADD COLUMN` statements of [`ddl`].
pub const FIRST_FLOW_COLUMNS: usize = 23;

/// Per-second series rows (the fields of `trawl series -o json`).
pub const SERIES_COLUMNS: &[(&str, ColType)] = &[
    ("date", ColType::Plain("Date")),
    ("time", ColType::Plain("DateTime")),
    ("probe", ColType::Label),
    ("iface", ColType::Label),
    ("packets", ColType::Plain("UInt64")),
    ("bytes", ColType::Plain("UInt64")),
    ("active_flows", ColType::Plain("UInt64")),
    ("new_flows", ColType::Plain("UInt64")),
    ("in_packets", ColType::Plain("UInt64")),
    ("in_bytes", ColType::Plain("UInt64")),
    ("out_packets", ColType::Plain("UInt64")),
    ("out_bytes", ColType::Plain("UInt64")),
];

/// Alarms (`trawl alarms -o json`): `end_ns` 0 while open, the detector's event as JSON text.
pub const ALARM_COLUMNS: &[(&str, ColType)] = &[
    ("date", ColType::Plain("Date")),
    ("time", ColType::Plain("DateTime")),
    ("probe", ColType::Label),
    ("iface", ColType::Label),
    ("detector", ColType::Label),
    ("ts_ns", ColType::Plain("UInt64")),
    ("start_ns", ColType::Plain("UInt64")),
    ("end_ns", ColType::Plain("UInt64")),
    ("rate", ColType::Plain("Float64")),
    ("event", ColType::Plain("String")),
];

/// What `trawl clickhouse schema` prints.
#[derive(Clone, Debug)]
pub struct SchemaOptions {
    /// Database name.
    pub database: String,
    /// Server generation.
    pub version: ServerVersion,
    /// Cluster name: per-shard `*_local` tables (replicated when `replicated`) behind
    /// `Distributed` tables of the plain names.
    pub cluster: Option<String>,
    /// With a cluster: `ReplicatedMergeTree` and `ON CLUSTER` (both need ZooKeeper or
    /// ClickHouse Keeper); off: `MergeTree` per shard, the script run on every server.
    pub replicated: bool,
    /// Rows older than this many days are deleted by the server (current servers; on 18.16
    /// drop old partitions with `ALTER TABLE ... DROP PARTITION` instead).
    pub ttl_days: Option<u32>,
}

impl Default for SchemaOptions {
    fn default() -> Self {
        SchemaOptions {
            database: "trawl".into(),
            version: ServerVersion::Current,
            cluster: None,
            replicated: true,
            ttl_days: None,
        }
    }
}

/// A table's columns, in order.
pub type Columns = &'static [(&'static str, ColType)];

/// The three tables: name, columns, sorting key.
const TABLES: [(&str, Columns, &str); 3] = [
    (
        "flows",
        FLOW_COLUMNS,
        "time, probe, iface, src_ip, dst_ip, src_port, dst_port, proto",
    ),
    ("series", SERIES_COLUMNS, "time, probe, iface"),
    ("alarms", ALARM_COLUMNS, "time, probe, iface, detector"),
];

/// A table of [`ddl`] by its name (`flows`, `series`, `alarms`): its columns and its
/// sorting key (the `ORDER BY` columns, comma-separated).
pub fn table(name: &str) -> Option<(Columns, &'static str)> {
    TABLES
        .iter()
        .find(|(n, _, _)| *n == name)
        .map(|(_, cols, order)| (*cols, *order))
}

fn columns(cols: &[(&str, ColType)], v: ServerVersion) -> String {
    let mut s = String::new();
    for (i, (name, ty)) in cols.iter().enumerate() {
        let sep = if i + 1 < cols.len() { "," } else { "" };
        let _ = writeln!(s, "    {name} {}{sep}", ty.sql(v));
    }
    s
}

/// ` ON CLUSTER NAME` of a replicated cluster's statements, else nothing: distributed DDL
/// needs ZooKeeper/Keeper, as replication does; without replication the script is run on
/// every server instead.
fn on_cluster(o: &SchemaOptions) -> String {
    o.cluster
        .as_ref()
        .filter(|_| o.replicated)
        .map(|c| format!(" ON CLUSTER {c}"))
        .unwrap_or_default()
}

/// The DDL statements, in the order to run them (each without a trailing `;`).
pub fn ddl(o: &SchemaOptions) -> Vec<String> {
    let db = &o.database;
    let on = on_cluster(o);
    let mut out = vec![format!("CREATE DATABASE IF NOT EXISTS {db}{on}")];
    for (name, cols, order) in TABLES {
        let local = if o.cluster.is_some() {
            format!("{name}_local")
        } else {
            name.to_string()
        };
        let engine = match (&o.cluster, o.replicated) {
            (Some(_), true) => format!(
                "ReplicatedMergeTree('/clickhouse/tables/{{shard}}/{db}/{local}', '{{replica}}')"
            ),
            _ => "MergeTree()".to_string(),
        };
        let ttl = match (o.version, o.ttl_days) {
            (ServerVersion::Current, Some(days)) => {
                format!("\nTTL date + INTERVAL {days} DAY")
            }
            _ => String::new(),
        };
        out.push(format!(
            "CREATE TABLE IF NOT EXISTS {db}.{local}{on}\n(\n{})\nENGINE = {engine}\n\
             PARTITION BY date\nORDER BY ({order}){ttl}\nSETTINGS index_granularity = 8192",
            columns(cols, o.version)
        ));
        let mut tables = vec![local.clone()];
        if let Some(cluster) = &o.cluster {
            out.push(format!(
                "CREATE TABLE IF NOT EXISTS {db}.{name}{on} AS {db}.{local}\n\
                 ENGINE = Distributed({cluster}, {db}, {local}, rand())"
            ));
            tables.push(name.to_string());
        }
        if name == "flows" && o.version == ServerVersion::Current {
            // A table made by an earlier trawl gets the columns added since (no-ops on the
            // table just created). 18.16 has no `IF NOT EXISTS` here: see `add_flow_columns`.
            for table in tables {
                out.extend(add_flow_columns(o, &table, None));
            }
        }
    }
    out
}

/// The flow tables of `o`: the one table, or the per-shard local table then the
/// distributed one.
pub fn flow_tables(o: &SchemaOptions) -> Vec<String> {
    match o.cluster {
        Some(_) => vec!["flows_local".into(), "flows".into()],
        None => vec!["flows".into()],
    }
}

/// `ALTER TABLE DB.table ADD COLUMN` statements giving a flow table of an earlier trawl the
/// columns added since ([`FIRST_FLOW_COLUMNS`] on), in order: with `existing` (the table's
/// column names, from `system.columns`) only those it lacks, as plain `ADD COLUMN` (what
/// 18.16 understands); without, all of them with `IF NOT EXISTS` (current servers).
pub fn add_flow_columns(
    o: &SchemaOptions,
    table: &str,
    existing: Option<&[String]>,
) -> Vec<String> {
    let db = &o.database;
    let on = on_cluster(o);
    let if_not = if existing.is_none() {
        " IF NOT EXISTS"
    } else {
        ""
    };
    FLOW_COLUMNS[FIRST_FLOW_COLUMNS..]
        .iter()
        .filter(|(c, _)| existing.is_none_or(|e| !e.iter().any(|n| n == c)))
        .map(|(c, ty)| {
            format!(
                "ALTER TABLE {db}.{table}{on} ADD COLUMN{if_not} {c} {}",
                ty.sql(o.version)
            )
        })
        .collect()
}

/// The statements as a script: `;` after each, a blank line between.
pub fn script(statements: &[String]) -> String {
    let mut s = String::new();
    for st in statements {
        s.push_str(st);
        s.push_str(";\n\n");
    }
    s
}

/// The Kafka-engine alternative: ClickHouse reads the JSON topic itself (a `Kafka` table
/// with the record's fields), and a materialized view converts each row into the flow
/// table. For operators who prefer no consumer process; `trawl clickhouse load` is the
/// other way. JSON only: 18.16 reads no Protobuf.
pub fn kafka_engine_ddl(database: &str, brokers: &str, topic: &str, group: &str) -> Vec<String> {
    kafka_view_ddl(
        database,
        &format!("Kafka('{brokers}', '{topic}', '{group}', 'JSONEachRow')"),
        topic,
    )
}

/// The statements of [`kafka_engine_ddl`] with the queue table's engine given (`engine`,
/// e.g. `Null`: JSON lines inserted into it go through the view, which is how the view is
/// tested without brokers): the database, the queue table `flows_queue`, the view
/// `flows_mv`. `iface` is the `iface` of records that name neither an interface nor a probe
/// (`trawl clickhouse load` uses the topic's name).
pub fn kafka_view_ddl(database: &str, engine: &str, iface: &str) -> Vec<String> {
    let db = database;
    let mut queue = String::new();
    let fields = kafka_queue_fields();
    for (i, (n, t)) in fields.iter().enumerate() {
        let sep = if i + 1 < fields.len() { "," } else { "" };
        let _ = writeln!(queue, "    {n} {t}{sep}");
    }
    let names: Vec<String> = (0..=255u8)
        .filter_map(|p| trawl_flow::ProtoName(p).name().map(|n| format!("'{n}'")))
        .collect();
    let numbers: Vec<String> = (0..=255u8)
        .filter(|p| trawl_flow::ProtoName(*p).name().is_some())
        .map(|p| p.to_string())
        .collect();
    vec![
        format!("CREATE DATABASE IF NOT EXISTS {db}"),
        format!("CREATE TABLE IF NOT EXISTS {db}.flows_queue\n(\n{queue})\nENGINE = {engine}"),
        format!(
            "CREATE MATERIALIZED VIEW IF NOT EXISTS {db}.flows_mv TO {db}.flows AS\nSELECT\n    \
             toDate(toUInt16(intDiv(first_ns, 86400000000000))) AS date,\n    \
             toDateTime(intDiv(first_ns, 1000000000)) AS time,\n    \
             probe,\n    \
             if(iface != '', iface, if(probe != '', probe, '{iface}')) AS iface,\n    \
             {} AS src_ip,\n    {} AS dst_ip,\n    \
             toUInt16(src_port) AS src_port, toUInt16(dst_port) AS dst_port,\n    \
             toUInt8(transform(proto, [{}], [{}], toUInt64(toUInt8OrZero(proto)))) AS proto,\n    \
             toUInt16(vlan) AS vlan, first_ns, last_ns, fwd_packets, rev_packets, fwd_bytes, rev_bytes,\n    \
             fwd_ip_bytes, rev_ip_bytes, toUInt8(fwd_tcp_flags) AS fwd_tcp_flags,\n    \
             toUInt8(rev_tcp_flags) AS rev_tcp_flags, toUInt32(fwd_retrans) AS fwd_retrans,\n    \
             toUInt32(rev_retrans) AS rev_retrans,\n    \
             CAST(if(end_reason = '', 'end', end_reason) AS {END_REASON_TYPE}) AS end_reason,\n    \
             app, app_source,\n    \
             toUInt32(src_as) AS src_as, toUInt32(dst_as) AS dst_as, src_country, dst_country,\n    \
             {},\n    {},\n    \
             ifNull(tunnel_type, '') AS tunnel_type,\n    \
             {} AS tunnel_src,\n    {} AS tunnel_dst,\n    \
             toUInt32(ifNull(tunnel_id, 0)) AS tunnel_id\n\
             FROM {db}.flows_queue",
            ip_num("src_ip"),
            ip_num("dst_ip"),
            names.join(", "),
            numbers.join(", "),
            rtt_columns("fwd"),
            rtt_columns("rev"),
            ip_num("ifNull(tunnel_src, '::')"),
            ip_num("ifNull(tunnel_dst, '::')"),
        ),
    ]
}

/// Every field a `kafka://` JSON flow record may carry, with the type the queue table reads
/// it as: 18.16's engine has no setting to skip unknown fields, so a record with a field
/// the table lacks would stop it. The writer's own field list with everything on (label,
/// round trips, tunnel, collected, enrichment and interface-name fields), and `probe`,
/// which `trawl clickhouse load` reads from a record that names one. Fields a record can
/// write as `null` are `Nullable` (18.16 reads `null` into a number as 0, into a `String`
/// not at all).
pub fn kafka_queue_fields() -> Vec<(String, &'static str)> {
    let mut w =
        trawl_flow::format::RecordWriter::new(trawl_flow::format::RecordFormat::Json, false)
            .with_iface("x");
    w.set_app(true);
    w.set_tunnel_fields(true);
    w.set_extra_fields(true, true);
    w.set_interface_fields(true);
    let mut names = w.field_names();
    let at = names
        .iter()
        .position(|n| n == "iface")
        .map_or(names.len(), |i| i + 1);
    names.insert(at, "probe".into());
    names
        .into_iter()
        .map(|n| {
            let t = match n.as_str() {
                "src_ip" | "dst_ip" | "proto" | "iface" | "probe" | "src_mac" | "dst_mac"
                | "end_reason" | "community_id" | "app" | "app_source" | "src_country"
                | "dst_country" | "in_if_name" | "in_if_description" | "out_if_name"
                | "out_if_description" => "String",
                "tunnel_type" | "tunnel_src" | "tunnel_dst" | "agent" => "Nullable(String)",
                "first_lengths" | "first_iats_ns" => "Array(Int64)",
                n if n.ends_with("_rtt_mean_ns") => "Nullable(Float64)",
                n if n.contains("_rtt_") && !n.ends_with("_samples") => "Nullable(UInt64)",
                "tunnel_id" => "Nullable(UInt64)",
                n if n.ends_with("_mean")
                    || n.ends_with("_std")
                    || n.ends_with("_mean_ns")
                    || n.ends_with("_std_ns") =>
                {
                    "Float64"
                }
                _ => "UInt64",
            };
            (n, t)
        })
        .collect()
}

/// An address column (or expression) of text as the 16 bytes of the flow table: IPv6, or
/// IPv4 mapped, as [`crate::rowbinary::ip16`] writes it. IPv4 text is mapped as text
/// (`::ffff:a.b.c.d`) so that one function reads both: current servers evaluate both
/// branches of an `if`, and their `IPv4StringToNum` throws on IPv6 text.
fn ip_num(text: &str) -> String {
    format!("IPv6StringToNum(if(position({text}, ':') > 0, {text}, concat('::ffff:', {text})))")
}

/// One direction's round-trip columns in the flow table's order: the handshake, the
/// samples, then min, max, mean (null without samples, as the record writes them).
fn rtt_columns(dir: &str) -> String {
    format!(
        "{dir}_rtt_handshake_ns, toUInt32({dir}_rtt_samples) AS {dir}_rtt_samples, \
         {dir}_rtt_min_ns, {dir}_rtt_max_ns, {dir}_rtt_mean_ns"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_server_tables_have_no_cluster_words() {
        let s = script(&ddl(&SchemaOptions {
            version: ServerVersion::V18,
            ttl_days: Some(30),
            ..SchemaOptions::default()
        }));
        assert!(s.contains("CREATE TABLE IF NOT EXISTS trawl.flows\n"));
        assert!(s.contains("ENGINE = MergeTree()"));
        assert!(!s.contains("TTL"), "18.16 has no TTL");
        assert!(!s.contains("LowCardinality"));
        assert!(!s.contains("Distributed"));
        let s = script(&ddl(&SchemaOptions {
            ttl_days: Some(30),
            ..SchemaOptions::default()
        }));
        assert!(s.contains("TTL date + INTERVAL 30 DAY"));
        assert!(s.contains("probe LowCardinality(String)"));
    }

    #[test]
    fn cluster_tables_are_local_and_distributed() {
        let st = ddl(&SchemaOptions {
            cluster: Some("trawl".into()),
            ..SchemaOptions::default()
        });
        // Database, then local + distributed per table, and the flow tables' later columns
        // for each.
        let later = FLOW_COLUMNS.len() - FIRST_FLOW_COLUMNS;
        // 18.16: none (the server's columns decide, `add_flow_columns`).
        let v18 = ddl(&SchemaOptions {
            cluster: Some("trawl".into()),
            version: ServerVersion::V18,
            ..SchemaOptions::default()
        });
        assert_eq!(v18.len(), 7);
        let o = SchemaOptions::default();
        let have: Vec<String> = FLOW_COLUMNS[..FIRST_FLOW_COLUMNS + 2]
            .iter()
            .map(|(c, _)| c.to_string())
            .collect();
        let add = add_flow_columns(&o, "flows", Some(&have));
        assert_eq!(add.len(), later - 2);
        assert_eq!(
            add[0], "ALTER TABLE trawl.flows ADD COLUMN src_as UInt32",
            "{add:?}"
        );
        assert_eq!(st.len(), 7 + 2 * later);
        assert!(st[3].starts_with(
            "ALTER TABLE trawl.flows_local ON CLUSTER trawl ADD COLUMN IF NOT EXISTS app "
        ));
        assert!(st[3 + later].starts_with("ALTER TABLE trawl.flows ON CLUSTER trawl"));
        assert!(st[1].contains("trawl.flows_local ON CLUSTER trawl"));
        assert!(st[1].contains(
            "ReplicatedMergeTree('/clickhouse/tables/{shard}/trawl/flows_local', '{replica}')"
        ));
        assert!(st[2].contains("Distributed(trawl, trawl, flows_local, rand())"));
    }

    /// The queue table reads every field of the JSON record with its JSON type: the
    /// Community ID is text (`1:` and base64), which a `UInt64` column would reject.
    #[test]
    fn kafka_queue_reads_the_community_id_as_text() {
        let st = kafka_engine_ddl("trawl", "b:9092", "t", "g");
        assert!(st[1].contains("    community_id String"), "{}", st[1]);
        assert!(st[1].contains("    end_reason String,\n"), "{}", st[1]);
    }

    #[test]
    fn server_versions() {
        assert_eq!(ServerVersion::of_server("18.16.1"), ServerVersion::V18);
        assert_eq!(
            ServerVersion::of_server("24.3.2.23"),
            ServerVersion::Current
        );
    }
}
