//! `trawl query --clickhouse`: a [`Query`] as SQL over the flow table, and the answer read
//! back into the [`QueryResult`] a local scan gives, so the output is the same.
//!
//! The local semantics are kept exactly: a row belongs to the 5-minute block of its first
//! packet (the time range and the `time` attribute), address comparisons hold only within
//! an address family, `host`/`port` mean either side, `!=` is "not =", numbers beyond a
//! field's range are clamped as the local plan clamps them; rows are ordered by the sort
//! metric and then by the group's attributes in the order of [`GroupKey`]'s fields. Two
//! statements: the shown rows (`ORDER BY ... LIMIT`), and the totals with the number of
//! groups. Both use only what ClickHouse 18.16 and current servers share.
use std::fmt::Write;
use std::net::{IpAddr, Ipv6Addr};

use trawl_query::syntax::{Comparison, Expr, Field, Net, Op, Value};
use trawl_query::{Attribute, GroupKey, Metrics, Query, QueryResult, ScanStats, SortBy};

use crate::rowbinary::ip16;
use crate::Error;

/// The statements of one query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statements {
    /// The rows shown: attributes, then forward/reverse packets and bytes and the row count.
    pub rows: String,
    /// Totals over every group: packets and bytes both ways, rows, and the number of groups.
    pub totals: String,
}

fn hex(b: &[u8; 16]) -> String {
    let mut s = String::with_capacity(32);
    for x in b {
        let _ = write!(s, "{x:02X}");
    }
    s
}

/// A 16-byte address literal.
fn lit(b: &[u8; 16]) -> String {
    format!("toFixedString(unhex('{}'), 16)", hex(b))
}

fn quote(s: &str) -> String {
    let mut out = String::from("'");
    for c in s.chars() {
        if c == '\'' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// The column holds an IPv4 address (mapped into `::ffff:0:0/96`).
fn is_v4(col: &str) -> String {
    let lo = ip16(IpAddr::from([0u8, 0, 0, 0]));
    let hi = ip16(IpAddr::from([255u8, 255, 255, 255]));
    format!("({col} >= {} AND {col} <= {})", lit(&lo), lit(&hi))
}

/// The last address of a prefix.
fn last_of(n: &Net) -> IpAddr {
    match n.addr {
        IpAddr::V4(a) => {
            let host = u32::MAX.checked_shr(u32::from(n.prefix)).unwrap_or(0);
            IpAddr::from((u32::from(a) | host).to_be_bytes())
        }
        IpAddr::V6(a) => {
            let host = u128::MAX.checked_shr(u32::from(n.prefix)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) | host))
        }
    }
}

fn ip_cmp(col: &str, op: Op, value: &Value) -> String {
    match value {
        Value::Net(n) => {
            let range = format!(
                "({col} >= {} AND {col} <= {})",
                lit(&ip16(n.addr)),
                lit(&ip16(last_of(n)))
            );
            if n.addr.is_ipv4() {
                range
            } else {
                format!("({range} AND NOT {})", is_v4(col))
            }
        }
        Value::Addr(a) => {
            let family = if a.is_ipv4() {
                is_v4(col)
            } else {
                format!("NOT {}", is_v4(col))
            };
            format!("({family} AND {col} {} {})", op.as_str(), lit(&ip16(*a)))
        }
        _ => "0".into(),
    }
}

/// The all-zero address of a row without a tunnel (`tunnel_src`, `tunnel_dst`).
const NO_TUNNEL: &str = "unhex('00000000000000000000000000000000')";

/// `ip_cmp` on a tunnel address: rows without a tunnel hold none (`""` asks for them).
fn tunnel_cmp(col: &str, op: Op, value: &Value) -> String {
    match value {
        Value::Name(n) if n.is_empty() => format!("({col} = {NO_TUNNEL})"),
        _ => format!("({col} != {NO_TUNNEL} AND {})", ip_cmp(col, op, value)),
    }
}

fn num_cmp(col: &str, op: Op, value: &Value) -> String {
    let wide = matches!(col, "src_as" | "dst_as");
    let max = if wide {
        u64::from(u32::MAX)
    } else {
        u64::from(u16::MAX)
    };
    let (lo, hi) = match (value, op) {
        (Value::Range(a, b), _) => (*a, *b),
        (Value::Num(n), Op::Eq) => (*n, *n),
        (Value::Num(0), Op::Lt) => return "0".into(),
        (Value::Num(n), Op::Lt) => (0, n - 1),
        (Value::Num(n), Op::Le) => (0, *n),
        (Value::Num(n), Op::Gt) if *n >= max => return "0".into(),
        (Value::Num(n), Op::Gt) => (n + 1, max),
        (Value::Num(n), Op::Ge) => (*n, max),
        _ => return "0".into(),
    };
    format!("({col} >= {} AND {col} <= {})", lo.min(max), hi.min(max))
}

fn comparison(c: &Comparison) -> String {
    if c.op == Op::Ne {
        let eq = Comparison {
            op: Op::Eq,
            ..c.clone()
        };
        return format!("(NOT {})", comparison(&eq));
    }
    let either = |a: Field, b: Field| {
        let one = comparison(&Comparison {
            field: a,
            ..c.clone()
        });
        let other = comparison(&Comparison {
            field: b,
            ..c.clone()
        });
        format!("({one} OR {other})")
    };
    match c.field {
        Field::Host => either(Field::Sip, Field::Dip),
        Field::Port => either(Field::Sport, Field::Dport),
        Field::Sip => ip_cmp("src_ip", c.op, &c.value),
        Field::Dip => ip_cmp("dst_ip", c.op, &c.value),
        Field::Sport => num_cmp("src_port", c.op, &c.value),
        Field::Dport => num_cmp("dst_port", c.op, &c.value),
        Field::Vlan => num_cmp("vlan", c.op, &c.value),
        Field::Sas => num_cmp("src_as", c.op, &c.value),
        Field::Das => num_cmp("dst_as", c.op, &c.value),
        Field::Scountry | Field::Dcountry | Field::TunnelType => match &c.value {
            Value::Name(n) => format!("({} = {})", text_column(c.field), quote(n)),
            _ => "0".into(),
        },
        Field::TunnelSrc => tunnel_cmp("tunnel_src", c.op, &c.value),
        Field::TunnelDst => tunnel_cmp("tunnel_dst", c.op, &c.value),
        Field::Proto => match c.value {
            Value::Proto(p) => format!("(proto = {p})"),
            _ => "0".into(),
        },
        Field::Iface => match &c.value {
            Value::Name(n) => format!("(iface = {})", quote(n)),
            _ => "0".into(),
        },
        // The table's `probe` column: the probe whose records were loaded.
        Field::Probe => match &c.value {
            Value::Name(n) => format!("(probe = {})", quote(n)),
            _ => "0".into(),
        },
        // Tags of a fleet's probes file: the table has no such columns, and
        // `trawl query --clickhouse` refuses them before translating (`fleet_tags`).
        Field::Site | Field::Role => "0".into(),
    }
}

/// The text column of a country or tunnel type field.
fn text_column(f: Field) -> &'static str {
    match f {
        Field::Scountry => "src_country",
        Field::Dcountry => "dst_country",
        _ => "tunnel_type",
    }
}

/// Whether `e` compares a probe's tag (`site`, `role`), which ClickHouse's tables do not hold.
pub fn fleet_tags(e: &Expr) -> bool {
    e.comparisons()
        .iter()
        .any(|c| matches!(c.field, Field::Site | Field::Role))
}

/// The condition as a SQL expression.
pub fn condition(e: &Expr) -> String {
    match e {
        Expr::And(a, b) => format!("({} AND {})", condition(a), condition(b)),
        Expr::Or(a, b) => format!("({} OR {})", condition(a), condition(b)),
        Expr::Not(a) => format!("(NOT {})", condition(a)),
        Expr::Cmp(c) => comparison(c),
    }
}

/// The expression of an attribute in the rows statement.
fn attribute(a: Attribute, q: &Query) -> String {
    match a {
        Attribute::Time => format!(
            "intDiv(first_ns, {r}) * {r}",
            r = q.time_resolution_ns.max(1)
        ),
        Attribute::Iface => "iface".into(),
        Attribute::Sip => "src_ip".into(),
        Attribute::Dip => "dst_ip".into(),
        Attribute::Sport => "src_port".into(),
        Attribute::Dport => "dst_port".into(),
        Attribute::Proto => "proto".into(),
        Attribute::Vlan => "vlan".into(),
        Attribute::Probe => "probe".into(),
        // The ClickHouse tables keep no application label (docs/specs/clickhouse.md): every
        // row is unlabelled, the empty value a local scan gives such rows.
        Attribute::App => "''".into(),
        Attribute::Sas => "src_as".into(),
        Attribute::Das => "dst_as".into(),
        Attribute::Scountry => "src_country".into(),
        Attribute::Dcountry => "dst_country".into(),
        Attribute::TunnelType => "tunnel_type".into(),
        Attribute::TunnelSrc => "tunnel_src".into(),
        Attribute::TunnelDst => "tunnel_dst".into(),
    }
}

fn where_clause(q: &Query) -> String {
    let mut parts = Vec::new();
    if q.from_ns > 0 {
        parts.push(format!("first_ns >= {}", q.from_ns));
    }
    if let Some(to) = q.to_ns {
        parts.push(format!("first_ns < {to}"));
    }
    if !q.ifaces.is_empty() {
        let list: Vec<String> = q.ifaces.iter().map(|i| quote(i)).collect();
        parts.push(format!("iface IN ({})", list.join(", ")));
    }
    if let Some(c) = &q.condition {
        parts.push(condition(c));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", parts.join(" AND "))
    }
}

const METRICS: &str =
    "sum(fwd_packets) AS fp, sum(rev_packets) AS rp, sum(fwd_bytes) AS fb, sum(rev_bytes) AS rb, count() AS n";

/// The statements for `q` over `table`, rows ordered by `sort`, at most `limit` of them.
pub fn statements(q: &Query, table: &str, sort: SortBy, limit: Option<usize>) -> Statements {
    let filter = where_clause(q);
    let attrs: Vec<(Attribute, String)> = q
        .attributes
        .iter()
        .enumerate()
        .map(|(i, a)| (*a, format!("a{i}")))
        .collect();
    let mut select: Vec<String> = attrs
        .iter()
        .map(|(a, alias)| {
            let e = attribute(*a, q);
            match a {
                // Addresses come back as text; the 16 bytes stay the grouping key.
                Attribute::Sip | Attribute::Dip => format!("IPv6NumToString({e}) AS {alias}"),
                // Empty without a tunnel, as a local scan gives it.
                Attribute::TunnelSrc | Attribute::TunnelDst => {
                    format!("if({e} = {NO_TUNNEL}, '', IPv6NumToString({e})) AS {alias}")
                }
                _ => format!("{e} AS {alias}"),
            }
        })
        .collect();
    select.push(METRICS.into());
    let group: Vec<String> = attrs
        .iter()
        .map(|(a, alias)| match a {
            Attribute::Sip | Attribute::Dip | Attribute::TunnelSrc | Attribute::TunnelDst => {
                attribute(*a, q)
            }
            _ => alias.clone(),
        })
        .collect();
    // The sort metric, then GroupKey's field order: time, iface, sip, dip, sport, dport,
    // proto, vlan (IPv4 before IPv6, as IpAddr orders them), then the enrichment and tunnel
    // attributes.
    let mut order: Vec<String> = Vec::new();
    let time = attrs.iter().find(|(a, _)| *a == Attribute::Time);
    match sort {
        SortBy::Bytes => order.extend(["fb + rb DESC".into(), "fp + rp DESC".into()]),
        SortBy::Packets => order.extend(["fp + rp DESC".into(), "fb + rb DESC".into()]),
        SortBy::Flows => order.extend(["n DESC".into(), "fb + rb DESC".into()]),
        SortBy::Time => {
            if let Some((_, alias)) = time {
                order.push(format!("{alias} ASC"));
            }
            order.push("fb + rb DESC".into());
        }
    }
    // GroupKey's order (addresses as text, as it holds them, after the IPv4/IPv6 split).
    for k in GroupKey::FIELD_ORDER {
        if let Some((a, alias)) = attrs.iter().find(|(a, _)| *a == k) {
            match a {
                Attribute::Sip | Attribute::Dip => {
                    let col = attribute(*a, q);
                    order.push(format!("NOT {} ASC", is_v4(&col)));
                    order.push(format!("{col} ASC"));
                }
                _ => order.push(format!("{alias} ASC")),
            }
        }
    }
    let mut rows = format!("SELECT {} FROM {table}{filter}", select.join(", "));
    if !group.is_empty() {
        let _ = write!(rows, " GROUP BY {}", group.join(", "));
    }
    let _ = write!(rows, " ORDER BY {}", order.join(", "));
    if let Some(n) = limit {
        let _ = write!(rows, " LIMIT {n}");
    }
    rows.push_str(" FORMAT TabSeparated");
    let groups = if attrs.is_empty() {
        "if(count() > 0, 1, 0)".to_string()
    } else {
        let keys: Vec<String> = attrs.iter().map(|(a, _)| attribute(*a, q)).collect();
        format!("uniqExact({})", keys.join(", "))
    };
    let totals =
        format!("SELECT {METRICS}, {groups} AS g FROM {table}{filter} FORMAT TabSeparated");
    Statements { rows, totals }
}

fn field<T: std::str::FromStr>(line: &str, s: Option<&str>, what: &str) -> Result<T, Error> {
    s.and_then(|v| v.parse().ok())
        .ok_or_else(|| Error::BadAnswer {
            what: format!("{what} in the line {line:?}"),
        })
}

/// An address as `IPv6NumToString` prints it: IPv4-mapped addresses are IPv4.
fn address(text: &str) -> Option<IpAddr> {
    let a: Ipv6Addr = text.parse().ok()?;
    Some(match a.to_ipv4_mapped() {
        Some(v4) => IpAddr::V4(v4),
        None => IpAddr::V6(a),
    })
}

/// Unescapes a TabSeparated text field (`\t`, `\n`, `\\`, ...).
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('0') => out.push('\0'),
            Some(o) => out.push(o),
            None => {}
        }
    }
    out
}

fn metrics(line: &str, cells: &mut std::str::Split<'_, char>) -> Result<Metrics, Error> {
    Ok(Metrics {
        fwd_packets: field(line, cells.next(), "fwd_packets")?,
        rev_packets: field(line, cells.next(), "rev_packets")?,
        fwd_bytes: field(line, cells.next(), "fwd_bytes")?,
        rev_bytes: field(line, cells.next(), "rev_bytes")?,
        flows: field(line, cells.next(), "flows")?,
    })
}

/// Reads the two statements' answers (TabSeparated) into the result a local scan gives.
pub fn result(q: &Query, rows_tsv: &str, totals_tsv: &str) -> Result<QueryResult, Error> {
    let mut rows = Vec::new();
    for line in rows_tsv.lines().filter(|l| !l.is_empty()) {
        let mut cells = line.split('\t');
        let mut key = GroupKey::default();
        for a in &q.attributes {
            let cell = cells.next();
            match a {
                Attribute::Time => key.time_ns = Some(field(line, cell, "time")?),
                Attribute::Probe => {
                    key.probe = Some(unescape(cell.ok_or_else(|| Error::BadAnswer {
                        what: format!("probe in the line {line:?}"),
                    })?))
                }
                Attribute::Iface => {
                    key.iface = Some(unescape(cell.ok_or_else(|| Error::BadAnswer {
                        what: format!("iface in the line {line:?}"),
                    })?))
                }
                Attribute::Sip => {
                    key.sip = Some(cell.and_then(address).ok_or_else(|| bad_ip(line))?)
                }
                Attribute::Dip => {
                    key.dip = Some(cell.and_then(address).ok_or_else(|| bad_ip(line))?)
                }
                Attribute::Sport => key.sport = Some(field(line, cell, "src_port")?),
                Attribute::Dport => key.dport = Some(field(line, cell, "dst_port")?),
                Attribute::Proto => key.proto = Some(field(line, cell, "proto")?),
                Attribute::Vlan => key.vlan = Some(field(line, cell, "vlan")?),
                Attribute::App => key.app = Some(unescape(cell.unwrap_or_default())),
                Attribute::Sas => key.sas = Some(field(line, cell, "src_as")?),
                Attribute::Das => key.das = Some(field(line, cell, "dst_as")?),
                Attribute::Scountry => key.scountry = Some(unescape(cell.unwrap_or_default())),
                Attribute::Dcountry => key.dcountry = Some(unescape(cell.unwrap_or_default())),
                Attribute::TunnelType => key.tunnel_type = Some(unescape(cell.unwrap_or_default())),
                Attribute::TunnelSrc | Attribute::TunnelDst => {
                    let text = match cell.unwrap_or_default() {
                        "" => String::new(),
                        t => address(t).ok_or_else(|| bad_ip(line))?.to_string(),
                    };
                    if *a == Attribute::TunnelSrc {
                        key.tunnel_src = Some(text);
                    } else {
                        key.tunnel_dst = Some(text);
                    }
                }
            }
        }
        let m = metrics(line, &mut cells)?;
        // Without attributes the one aggregate row exists even over no rows; a local scan
        // then has no group.
        if m.flows > 0 {
            rows.push((key, m));
        }
    }
    let line = totals_tsv.lines().next().unwrap_or("");
    let mut cells = line.split('\t');
    let totals = metrics(line, &mut cells)?;
    let groups: u64 = field(line, cells.next(), "groups")?;
    Ok(QueryResult {
        attributes: q.attributes.clone(),
        rows: rows.into(),
        totals,
        groups,
        stats: ScanStats {
            rows_scanned: totals.flows,
            rows_matched: totals.flows,
            ..ScanStats::default()
        },
        elapsed: std::time::Duration::ZERO,
    })
}

fn bad_ip(line: &str) -> Error {
    Error::BadAnswer {
        what: format!("an address in the line {line:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_query::{parse_attributes, syntax};

    fn q(attrs: &str, cond: Option<&str>) -> Query {
        Query {
            attributes: parse_attributes(attrs).unwrap(),
            condition: cond.map(|c| syntax::parse(c).unwrap()),
            ..Query::default()
        }
    }

    #[test]
    fn prefixes_are_byte_ranges_within_their_family() {
        let e = syntax::parse("sip = 10.0.0.0/8").unwrap();
        assert_eq!(
            condition(&e),
            "(src_ip >= toFixedString(unhex('00000000000000000000FFFF0A000000'), 16) AND \
             src_ip <= toFixedString(unhex('00000000000000000000FFFF0AFFFFFF'), 16))"
        );
        let e = syntax::parse("dnet = 2001:db8::/32").unwrap();
        let s = condition(&e);
        assert!(
            s.contains("unhex('20010DB8000000000000000000000000')"),
            "{s}"
        );
        assert!(
            s.contains("unhex('20010DB8FFFFFFFFFFFFFFFFFFFFFFFF')"),
            "{s}"
        );
        assert!(s.contains("AND NOT (dst_ip >="), "{s}");
    }

    #[test]
    fn not_equal_host_and_ports_desugar_as_the_local_plan() {
        let e = syntax::parse("host != 10.0.0.1 and port < 1024").unwrap();
        let s = condition(&e);
        assert!(s.starts_with("((NOT ((("), "{s}");
        assert!(
            s.contains(
                "(src_port >= 0 AND src_port <= 1023) OR (dst_port >= 0 AND dst_port <= 1023)"
            ),
            "{s}"
        );
        assert_eq!(condition(&syntax::parse("dport < 0").unwrap()), "0");
        assert_eq!(condition(&syntax::parse("dport > 65535").unwrap()), "0");
        assert_eq!(
            condition(&syntax::parse("proto = udp or iface = eth0").unwrap()),
            "((proto = 17) OR (iface = 'eth0'))"
        );
    }

    #[test]
    fn statements_group_order_and_limit() {
        let mut query = q("talk_conv,dport", Some("proto = tcp"));
        query.from_ns = 300_000_000_000;
        query.to_ns = Some(900_000_000_000);
        let st = statements(&query, "trawl.flows", SortBy::Bytes, Some(10));
        assert_eq!(
            st.rows,
            "SELECT IPv6NumToString(src_ip) AS a0, IPv6NumToString(dst_ip) AS a1, dst_port AS a2, \
             sum(fwd_packets) AS fp, sum(rev_packets) AS rp, sum(fwd_bytes) AS fb, sum(rev_bytes) AS rb, count() AS n \
             FROM trawl.flows WHERE first_ns >= 300000000000 AND first_ns < 900000000000 AND (proto = 6) \
             GROUP BY src_ip, dst_ip, a2 \
             ORDER BY fb + rb DESC, fp + rp DESC, \
             NOT (src_ip >= toFixedString(unhex('00000000000000000000FFFF00000000'), 16) AND src_ip <= toFixedString(unhex('00000000000000000000FFFFFFFFFFFF'), 16)) ASC, src_ip ASC, \
             NOT (dst_ip >= toFixedString(unhex('00000000000000000000FFFF00000000'), 16) AND dst_ip <= toFixedString(unhex('00000000000000000000FFFFFFFFFFFF'), 16)) ASC, dst_ip ASC, \
             a2 ASC LIMIT 10 FORMAT TabSeparated"
        );
        assert!(
            st.totals
                .contains("uniqExact(src_ip, dst_ip, dst_port) AS g"),
            "{}",
            st.totals
        );
        let st = statements(&q("time", None), "f", SortBy::Time, None);
        assert!(st
            .rows
            .contains("intDiv(first_ns, 300000000000) * 300000000000 AS a0"));
        assert!(
            st.rows
                .contains("ORDER BY a0 ASC, fb + rb DESC, a0 ASC FORMAT"),
            "{}",
            st.rows
        );
    }

    /// The enrichment and tunnel attributes and fields: the table's columns, a tunnel
    /// address empty (all zero) without a tunnel, and read back as a local scan keys them.
    #[test]
    fn enrichment_and_tunnel_attributes_translate_and_read_back() {
        let query = q(
            "sas,dcountry,tunnel_type,tunnel_src",
            Some("das = 64496-64511 and scountry = de and tunnel_dst = \"\" or tunnel_src = 10.0.0.0/8"),
        );
        let st = statements(&query, "f", SortBy::Bytes, None);
        let zero = "unhex('00000000000000000000000000000000')";
        assert!(
            st.rows.starts_with(&format!(
                "SELECT src_as AS a0, dst_country AS a1, tunnel_type AS a2, \
                 if(tunnel_src = {zero}, '', IPv6NumToString(tunnel_src)) AS a3, "
            )),
            "{}",
            st.rows
        );
        assert!(
            st.rows.contains(&format!(
                "WHERE ((((dst_as >= 64496 AND dst_as <= 64511) AND (src_country = 'DE')) AND (tunnel_dst = {zero})) \
                 OR (tunnel_src != {zero} AND (tunnel_src >= "
            )),
            "{}",
            st.rows
        );
        assert!(
            st.rows.contains("GROUP BY a0, a1, a2, tunnel_src ORDER BY fb + rb DESC, fp + rp DESC, a0 ASC, a1 ASC, a2 ASC, a3 ASC"),
            "{}",
            st.rows
        );
        assert_eq!(condition(&syntax::parse("sas > 4294967295").unwrap()), "0");
        let r = result(
            &query,
            "4294967295\tDE\tgtpu\t::ffff:192.0.2.1\t1\t2\t3\t4\t1\n0\t\t\t\t5\t6\t7\t8\t2\n",
            "6\t8\t10\t12\t3\t2\n",
        )
        .unwrap();
        let rows = r.rows.to_vec();
        let k = &rows[0].0;
        assert_eq!(
            (
                k.sas,
                k.dcountry.as_deref(),
                k.tunnel_type.as_deref(),
                k.tunnel_src.as_deref()
            ),
            (Some(u32::MAX), Some("DE"), Some("gtpu"), Some("192.0.2.1"))
        );
        let k = &rows[1].0;
        assert_eq!(
            (k.sas, k.dcountry.as_deref(), k.tunnel_src.as_deref()),
            (Some(0), Some(""), Some(""))
        );
    }

    #[test]
    fn answers_read_back() {
        let query = q("sip,dport,iface", None);
        let r = result(
            &query,
            "::ffff:10.0.0.1\t443\teth0\t1\t2\t3\t4\t1\n2001:db8::1\t53\tx\\ty\t5\t6\t7\t8\t2\n",
            "6\t8\t10\t12\t3\t2\n",
        )
        .unwrap();
        let rows = r.rows.to_vec();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].0.sip, Some("10.0.0.1".parse().unwrap()));
        assert_eq!(rows[1].0.iface.as_deref(), Some("x\ty"));
        assert_eq!(rows[1].1.flows, 2);
        assert_eq!((r.totals.rev_bytes, r.groups), (12, 2));
        // No attributes over no rows: no group.
        let none = Query {
            attributes: Vec::new(),
            ..Query::default()
        };
        let r = result(&none, "0\t0\t0\t0\t0\n", "0\t0\t0\t0\t0\t0\n").unwrap();
        assert!(r.rows.is_empty());
    }
}
