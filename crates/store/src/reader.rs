//! Reading a whole block back into rows (tests, exports, repairs; the query engine reads only
//! the columns it needs, see `trawl-query`).
use std::fs::File;
use std::net::IpAddr;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int32Type, UInt16Type, UInt64Type, UInt8Type};
use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use trawl_flow::{EndReason, ProtoName};

use crate::error::{Error, Result};
use crate::schema::{col, StoredFlow};

/// Reads every row of the block file at `path`. Any defect (not Parquet, truncated, a column
/// missing or of another type, an unparsable address) is an [`Error::Block`] naming the file
/// and what was wrong.
pub fn read_block(path: &Path) -> Result<Vec<StoredFlow>> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .map_err(|e| Error::block(path, e))?
        .with_batch_size(65_536)
        .build()
        .map_err(|e| Error::block(path, e))?;
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.map_err(|e| Error::block(path, e))?;
        decode(&batch, &mut rows).map_err(|m| Error::block(path, m))?;
    }
    Ok(rows)
}

fn strings(batch: &RecordBatch, name: &str) -> std::result::Result<Vec<String>, String> {
    let a = batch
        .column_by_name(name)
        .ok_or_else(|| format!("column {name} missing"))?;
    let d = a.as_dictionary_opt::<Int32Type>().ok_or_else(|| {
        format!(
            "column {name}: expected dictionary of strings, found {}",
            a.data_type()
        )
    })?;
    let values = d
        .values()
        .as_string_opt::<i32>()
        .ok_or_else(|| format!("column {name}: dictionary values are not strings"))?;
    d.keys()
        .iter()
        .map(|k| {
            let k = k.ok_or_else(|| format!("column {name}: null"))? as usize;
            if k >= values.len() {
                return Err(format!("column {name}: dictionary index {k} out of range"));
            }
            Ok(values.value(k).to_string())
        })
        .collect()
}

fn prim<T: arrow_array::ArrowPrimitiveType>(
    batch: &RecordBatch,
    name: &str,
) -> std::result::Result<Vec<T::Native>, String> {
    let a = batch
        .column_by_name(name)
        .ok_or_else(|| format!("column {name} missing"))?;
    let p = a
        .as_primitive_opt::<T>()
        .ok_or_else(|| format!("column {name}: unexpected type {}", a.data_type()))?;
    if p.null_count() > 0 {
        return Err(format!("column {name}: null"));
    }
    Ok(p.values().to_vec())
}

/// Parses a protocol name as written by the store (`tcp`, or a number).
pub fn proto_number(name: &str) -> Option<u8> {
    (0..=255u8)
        .find(|&p| ProtoName(p).name() == Some(name))
        .or_else(|| name.parse().ok())
}

fn decode(batch: &RecordBatch, rows: &mut Vec<StoredFlow>) -> std::result::Result<(), String> {
    let ip = |v: Vec<String>, name: &str| -> std::result::Result<Vec<IpAddr>, String> {
        v.iter()
            .map(|s| {
                s.parse()
                    .map_err(|_| format!("column {name}: bad address {s:?}"))
            })
            .collect()
    };
    let sip = ip(strings(batch, col::SRC_IP)?, col::SRC_IP)?;
    let dip = ip(strings(batch, col::DST_IP)?, col::DST_IP)?;
    let proto = strings(batch, col::PROTO)?;
    let reason = strings(batch, col::END_REASON)?;
    let sport = prim::<UInt16Type>(batch, col::SRC_PORT)?;
    let dport = prim::<UInt16Type>(batch, col::DST_PORT)?;
    let vlan = prim::<UInt16Type>(batch, col::VLAN)?;
    let u64s = |n| prim::<UInt64Type>(batch, n);
    let (first, last) = (u64s(col::FIRST_NS)?, u64s(col::LAST_NS)?);
    let (fp, rp) = (u64s(col::FWD_PACKETS)?, u64s(col::REV_PACKETS)?);
    let (fb, rb) = (u64s(col::FWD_BYTES)?, u64s(col::REV_BYTES)?);
    let (fib, rib) = (u64s(col::FWD_IP_BYTES)?, u64s(col::REV_IP_BYTES)?);
    let ff = prim::<UInt8Type>(batch, col::FWD_TCP_FLAGS)?;
    let rf = prim::<UInt8Type>(batch, col::REV_TCP_FLAGS)?;
    for i in 0..batch.num_rows() {
        rows.push(StoredFlow {
            src_ip: sip[i],
            dst_ip: dip[i],
            src_port: sport[i],
            dst_port: dport[i],
            proto: proto_number(&proto[i])
                .ok_or_else(|| format!("column proto: unknown protocol {:?}", proto[i]))?,
            vlan: vlan[i],
            first_ns: first[i],
            last_ns: last[i],
            fwd_packets: fp[i],
            rev_packets: rp[i],
            fwd_bytes: fb[i],
            rev_bytes: rb[i],
            fwd_ip_bytes: fib[i],
            rev_ip_bytes: rib[i],
            fwd_tcp_flags: ff[i],
            rev_tcp_flags: rf[i],
            end_reason: EndReason::ALL
                .into_iter()
                .find(|e| e.name() == reason[i])
                .ok_or_else(|| format!("column end_reason: unknown value {:?}", reason[i]))?,
        });
    }
    Ok(())
}
