//! The flow database: `query` runs trawl's query engine (the one `trawl query` and the API
//! use) and returns its rows as a table; `blocks` lists the block files `trawl.open_db` opens
//! as a pyarrow dataset; `parse_time` is every command's time syntax.
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::builder::{StringBuilder, TimestampNanosecondBuilder, UInt16Builder};
use arrow_array::{ArrayRef, RecordBatch, UInt64Array};
use arrow_schema::{DataType, Field, Schema, TimeUnit};
use pyo3::prelude::*;
use trawl_flow::ProtoName;
use trawl_query::{parse_attributes, scan, syntax, Attribute, Query, QueryResult, SortBy};
use trawl_store::{BlockFilter, BLOCK_NS};

use crate::{arrow_out, trawl_error, without_gil};

/// `trawl.query`: see `trawl/__init__.py`. Times are ns since the epoch, already parsed.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (db, attrs, condition, start_ns, end_ns, ifaces, limit, sort))]
pub fn query(
    py: Python<'_>,
    db: PathBuf,
    attrs: &str,
    condition: Option<String>,
    start_ns: Option<u64>,
    end_ns: Option<u64>,
    ifaces: Vec<String>,
    limit: Option<usize>,
    sort: &str,
) -> PyResult<Py<PyAny>> {
    let attributes = parse_attributes(attrs).map_err(trawl_error)?;
    let sort = SortBy::parse(sort).ok_or_else(|| {
        trawl_error(format!(
            "sort: {sort:?} is not one of bytes, packets, flows, time"
        ))
    })?;
    for i in &ifaces {
        if !trawl_store::layout::valid_iface(i) {
            return Err(trawl_error(format!("invalid interface name {i:?}")));
        }
    }
    let condition = match condition.as_deref().filter(|c| !c.trim().is_empty()) {
        None => None,
        Some(c) => Some(syntax::parse(c).map_err(|e| {
            trawl_error(format!(
                "invalid condition, at character {}:\n{}",
                e.pos + 1,
                e.render(c)
            ))
        })?),
    };
    // Whole blocks, as `trawl query` widens its range.
    let from = start_ns.unwrap_or(0);
    let from_ns = from - from % BLOCK_NS;
    let to_ns = end_ns.map(|t| t.div_ceil(BLOCK_NS).saturating_mul(BLOCK_NS));
    if to_ns.is_some_and(|t| t <= from_ns) {
        return Err(trawl_error(
            "the time range is empty (end is not after start)",
        ));
    }
    check_database(&db)?;
    let q = Query {
        attributes,
        condition,
        ifaces,
        from_ns,
        to_ns,
        ..Query::default()
    };
    let result = without_gil(py, |interrupt| {
        interrupt.check()?;
        let partial = scan(&db, &q).map_err(trawl_error)?;
        if partial.stats.blocks_failed > 0 {
            return Err(trawl_error(format!(
                "{} block(s) could not be read: {}",
                partial.stats.blocks_failed,
                partial.stats.errors.join("; ")
            )));
        }
        Ok(partial.finish(sort, limit))
    })?;
    let batch = result_batch(&result);
    arrow_out::table(py, batch.schema(), vec![batch])
}

/// As `trawl query`: a directory without `iface=` directories is no database (an empty one is
/// an empty database).
fn check_database(db: &std::path::Path) -> PyResult<()> {
    let ifaces = trawl_store::list_ifaces(db)
        .map_err(|e| trawl_error(format!("no flow database at {}: {e}", db.display())))?;
    let empty = std::fs::read_dir(db)
        .map_err(|e| trawl_error(format!("{}: {e}", db.display())))?
        .next()
        .is_none();
    if ifaces.is_empty() && !empty {
        return Err(trawl_error(format!(
            "{} holds no trawl flow database (no iface=NAME directory)",
            db.display()
        )));
    }
    Ok(())
}

/// Reads one metric of a group.
type MetricOf = fn(&trawl_query::Metrics) -> u64;

/// A query result as one batch: the attributes under their field names (`src_ip`, `dst_port`,
/// `time` as `timestamp[ns, UTC]`), then the metrics, as `trawl query --format json`'s rows.
fn result_batch(r: &QueryResult) -> RecordBatch {
    let mut fields = Vec::new();
    let mut cols: Vec<ArrayRef> = Vec::new();
    for &a in &r.attributes {
        let keys = r.rows.iter().map(|(k, _)| k);
        let (ty, col): (DataType, ArrayRef) = match a {
            Attribute::Sport | Attribute::Dport | Attribute::Vlan => {
                let mut b = UInt16Builder::new();
                for k in keys {
                    b.append_option(match a {
                        Attribute::Sport => k.sport,
                        Attribute::Dport => k.dport,
                        _ => k.vlan,
                    });
                }
                (DataType::UInt16, Arc::new(b.finish()))
            }
            Attribute::Time => {
                let mut b = TimestampNanosecondBuilder::new().with_timezone("UTC");
                for k in keys {
                    b.append_option(k.time_ns.map(|t| t as i64));
                }
                let ty = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
                (ty, Arc::new(b.finish()))
            }
            _ => {
                let mut b = StringBuilder::new();
                for k in keys {
                    b.append_option(match a {
                        Attribute::Sip => k.sip.map(|x| x.to_string()),
                        Attribute::Dip => k.dip.map(|x| x.to_string()),
                        Attribute::Proto => k.proto.map(|p| ProtoName(p).to_string()),
                        _ => k.iface.clone(),
                    });
                }
                (DataType::Utf8, Arc::new(b.finish()))
            }
        };
        fields.push(Field::new(a.field(), ty, true));
        cols.push(col);
    }
    let metrics: [(&str, MetricOf); 5] = [
        ("fwd_packets", |m| m.fwd_packets),
        ("rev_packets", |m| m.rev_packets),
        ("fwd_bytes", |m| m.fwd_bytes),
        ("rev_bytes", |m| m.rev_bytes),
        ("flows", |m| m.flows),
    ];
    for (name, get) in metrics {
        fields.push(Field::new(name, DataType::UInt64, false));
        let values: UInt64Array = r
            .rows
            .iter()
            .map(|(_, m)| get(m))
            .collect::<Vec<_>>()
            .into();
        cols.push(Arc::new(values));
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), cols).expect("columns match the schema")
}

/// The block files of the database at `db` (optionally of some interfaces and a time range),
/// sorted by start: what `trawl.open_db` makes a dataset of.
#[pyfunction]
#[pyo3(signature = (db, ifaces, start_ns, end_ns))]
pub fn blocks(
    py: Python<'_>,
    db: PathBuf,
    ifaces: Vec<String>,
    start_ns: Option<u64>,
    end_ns: Option<u64>,
) -> PyResult<Vec<PathBuf>> {
    check_database(&db)?;
    without_gil(py, |_| {
        let filter = BlockFilter {
            ifaces: &ifaces,
            from_ns: start_ns.map_or(0, |t| t - t % BLOCK_NS),
            to_ns: end_ns.map(|t| t.div_ceil(BLOCK_NS).saturating_mul(BLOCK_NS)),
        };
        let listed = trawl_store::list_blocks(&db, &filter).map_err(trawl_error)?;
        Ok(listed.into_iter().map(|b| b.path).collect())
    })
}

/// A time in any form the commands take (`--from`, `--to`): RFC 3339, `-15m`, `now`, epoch
/// numbers; ns since the epoch.
#[pyfunction]
pub fn parse_time(text: &str) -> PyResult<u64> {
    trawl_time::parse_instant(text, trawl_time::now_ns()).map_err(trawl_error)
}
