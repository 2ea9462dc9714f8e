//! Reading a whole block back into rows (tests, exports, repairs; the query engine reads only
//! the columns it needs, see `trawl-query`).
use std::fs::File;
use std::net::IpAddr;
use std::path::Path;

use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, UInt16Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, RecordBatch};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;
use parquet::basic::Type as PhysicalType;
use parquet::file::metadata::ParquetMetaDataReader;
use trawl_flow::{EndReason, ProtoName, RecordExtra, Tunnel, TunnelType};

use crate::pages::{Chunk, DictColumn, DictType, PageCodec, PageDecoder, Values};

use crate::error::{Error, Result};
use crate::schema::{col, StoredExtra, StoredFlow, StoredRtt, LATER_COLUMNS};

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

/// The layout of the block file at `path`: its row groups, and the most data pages any one
/// column chunk holds (dictionary pages not counted). For tests and diagnostics of the page
/// decoder, which must meet chunks of many pages.
pub fn block_shape(path: &Path) -> Result<(usize, usize)> {
    use parquet::column::page::Page;
    use parquet::file::reader::FileReader;
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let r = parquet::file::serialized_reader::SerializedFileReader::new(file)
        .map_err(|e| Error::block(path, e))?;
    let mut most = 0;
    for g in 0..r.num_row_groups() {
        let rg = r.get_row_group(g).map_err(|e| Error::block(path, e))?;
        for c in 0..rg.num_columns() {
            let mut pages = rg
                .get_column_page_reader(c)
                .map_err(|e| Error::block(path, e))?;
            let mut n = 0;
            while let Some(p) = pages.get_next_page().map_err(|e| Error::block(path, e))? {
                n += usize::from(!matches!(p, Page::DictionaryPage { .. }));
            }
            most = most.max(n);
        }
    }
    Ok((r.num_row_groups(), most))
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
    // Blocks written before the label columns have none: no row has a label.
    let optional = |name: &str| match batch.column_by_name(name) {
        Some(_) => strings(batch, name),
        None => Ok(vec![String::new(); batch.num_rows()]),
    };
    let (app, app_source) = (optional(col::APP)?, optional(col::APP_SOURCE)?);
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
            app: crate::schema::app_from_text(&app[i], &app_source[i])?,
            extra: StoredExtra::default(),
        });
    }
    let start = rows.len() - batch.num_rows();
    decode_extra(batch, &mut rows[start..])
}

/// Fills the [`StoredExtra`] of `rows` (as many as the batch has) from the batch's
/// enrichment, round-trip and tunnel columns. A block written before them lacks them (each
/// column missing gives its "not known" value); any other defect is an error naming the column.
fn decode_extra(batch: &RecordBatch, rows: &mut [StoredFlow]) -> std::result::Result<(), String> {
    let has = |name: &str| batch.column_by_name(name).is_some();
    if !LATER_COLUMNS.iter().any(|c| has(c)) {
        return Ok(());
    }
    let n = batch.num_rows();
    let u32s = |name: &str| match has(name) {
        true => prim::<UInt32Type>(batch, name),
        false => Ok(vec![0; n]),
    };
    let texts = |name: &str| match has(name) {
        true => strings(batch, name),
        false => Ok(vec![String::new(); n]),
    };
    // Nullable: `None` for null and for a missing column.
    fn nullable<T: arrow_array::ArrowPrimitiveType>(
        batch: &RecordBatch,
        name: &str,
    ) -> std::result::Result<Vec<Option<T::Native>>, String> {
        let Some(a) = batch.column_by_name(name) else {
            return Ok(vec![None; batch.num_rows()]);
        };
        let p = a
            .as_primitive_opt::<T>()
            .ok_or_else(|| format!("column {name}: unexpected type {}", a.data_type()))?;
        Ok(p.iter().collect())
    }
    let country = |name: &str, v: Vec<String>| -> std::result::Result<Vec<[u8; 2]>, String> {
        v.iter()
            .map(|s| {
                RecordExtra::parse_country(s)
                    .ok_or_else(|| format!("column {name}: not a country code: {s:?}"))
            })
            .collect()
    };
    let (sas, das) = (u32s(col::SRC_AS)?, u32s(col::DST_AS)?);
    let scountry = country(col::SRC_COUNTRY, texts(col::SRC_COUNTRY)?)?;
    let dcountry = country(col::DST_COUNTRY, texts(col::DST_COUNTRY)?)?;
    type Rtt = (
        Vec<Option<u64>>,
        Vec<u32>,
        Vec<Option<u64>>,
        Vec<Option<u64>>,
        Vec<Option<f64>>,
    );
    let rtt = |names: [&str; 5]| -> std::result::Result<Rtt, String> {
        Ok((
            nullable::<UInt64Type>(batch, names[0])?,
            u32s(names[1])?,
            nullable::<UInt64Type>(batch, names[2])?,
            nullable::<UInt64Type>(batch, names[3])?,
            nullable::<Float64Type>(batch, names[4])?,
        ))
    };
    let fwd = rtt([
        col::FWD_RTT_HANDSHAKE_NS,
        col::FWD_RTT_SAMPLES,
        col::FWD_RTT_MIN_NS,
        col::FWD_RTT_MAX_NS,
        col::FWD_RTT_MEAN_NS,
    ])?;
    let rev = rtt([
        col::REV_RTT_HANDSHAKE_NS,
        col::REV_RTT_SAMPLES,
        col::REV_RTT_MIN_NS,
        col::REV_RTT_MAX_NS,
        col::REV_RTT_MEAN_NS,
    ])?;
    let at = |r: &Rtt, i: usize| StoredRtt {
        handshake_ns: r.0[i],
        samples: r.1[i],
        min_ns: r.2[i].unwrap_or(0),
        max_ns: r.3[i].unwrap_or(0),
        mean_ns: r.4[i].unwrap_or(0.0),
    };
    let ttype = texts(col::TUNNEL_TYPE)?;
    let (tsrc, tdst) = (texts(col::TUNNEL_SRC)?, texts(col::TUNNEL_DST)?);
    let tid = u32s(col::TUNNEL_ID)?;
    for (i, row) in rows.iter_mut().enumerate().take(n) {
        let mut tunnel = Tunnel::default();
        if !ttype[i].is_empty() {
            tunnel.kind = TunnelType::from_name(&ttype[i]);
            if !tunnel.is_some() {
                return Err(format!("column tunnel_type: unknown value {:?}", ttype[i]));
            }
            for (src, name, text) in [
                (true, col::TUNNEL_SRC, &tsrc[i]),
                (false, col::TUNNEL_DST, &tdst[i]),
            ] {
                let a: IpAddr = text
                    .parse()
                    .map_err(|_| format!("column {name}: bad address {text:?}"))?;
                tunnel.set_addr(src, a);
            }
            tunnel.id = tid[i];
        }
        row.extra = StoredExtra {
            src_as: sas[i],
            dst_as: das[i],
            src_country: scountry[i],
            dst_country: dcountry[i],
            fwd_rtt: at(&fwd, i),
            rev_rtt: at(&rev, i),
            tunnel,
        };
    }
    Ok(())
}

/// Fills the [`StoredExtra`] of the rows of the block file at `path` (all of them, in file
/// order) through the general reader: the direct decoder reads required columns only, and
/// the round-trip columns hold nulls.
fn read_extra(path: &Path, rows: &mut [StoredFlow]) -> Result<()> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| Error::block(path, e))?;
    let parquet_schema = builder.parquet_schema();
    let leaves: Vec<usize> = (0..parquet_schema.num_columns())
        .filter(|&i| LATER_COLUMNS.contains(&parquet_schema.column(i).name()))
        .collect();
    if leaves.is_empty() {
        return Ok(());
    }
    let mask = ProjectionMask::leaves(parquet_schema, leaves);
    let reader = builder
        .with_projection(mask)
        .with_batch_size(65_536)
        .build()
        .map_err(|e| Error::block(path, e))?;
    let mut at = 0;
    for batch in reader {
        let batch = batch.map_err(|e| Error::block(path, e))?;
        let end = at + batch.num_rows();
        let part = rows
            .get_mut(at..end)
            .ok_or_else(|| Error::block(path, "more rows in the later columns than the block"))?;
        decode_extra(&batch, part).map_err(|m| Error::block(path, m))?;
        at = end;
    }
    Ok(())
}

/// Reads every row of the block file at `path` with the direct page decoder
/// ([`crate::pages`]) alone, as the query engine reads trawl's own blocks. A column chunk the
/// direct decoder does not handle (another writer's encoding or codec) is an error here, where
/// [`read_block`] reads any Parquet file: this is the reference the tests hold the direct
/// decoder to, and a check of a block's pages. Errors name the file, row group, column and
/// file offset. The enrichment, round-trip and tunnel columns (which the query engine does
/// not decode this way) are read through the general reader.
pub fn read_block_direct(path: &Path) -> Result<Vec<StoredFlow>> {
    let bytes = std::fs::read(path).map_err(|e| Error::io(path, e))?;
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let meta = ParquetMetaDataReader::new()
        .parse_and_finish(&file)
        .map_err(|e| Error::block(path, e))?;
    let schema = meta.file_metadata().schema_descr();
    let mut dec = PageDecoder::default();
    let mut rows = Vec::new();
    // Decoded columns of a row group: dictionaries, 64-bit and 32-bit integers by name.
    let mut dicts: Vec<DictColumn> = vec![DictColumn::default(); 7];
    let mut app_dicts: Vec<DictColumn> = vec![DictColumn::default(); 2];
    let mut u64s: Vec<Values<u64>> = vec![Values::default(); 8];
    let mut i32s: Vec<Values<i32>> = vec![Values::default(); 2];
    const DICTS: [(&str, DictType); 7] = [
        (col::SRC_IP, DictType::Bytes),
        (col::DST_IP, DictType::Bytes),
        (col::SRC_PORT, DictType::Int32),
        (col::DST_PORT, DictType::Int32),
        (col::PROTO, DictType::Bytes),
        (col::VLAN, DictType::Int32),
        (col::END_REASON, DictType::Bytes),
    ];
    const I32S: [&str; 2] = [col::FWD_TCP_FLAGS, col::REV_TCP_FLAGS];
    for (g, rg) in meta.row_groups().iter().enumerate() {
        let n = usize::try_from(rg.num_rows()).unwrap_or(usize::MAX);
        let chunk = |name: &str, want: PhysicalType| -> Result<Chunk<'_>> {
            let fail = |m: String| Error::block(path, format!("row group {g}, column {name}: {m}"));
            let i = schema
                .columns()
                .iter()
                .position(|c| c.name() == name)
                .ok_or_else(|| fail("missing".into()))?;
            let (c, d) = (rg.column(i), schema.column(i));
            if c.column_type() != want || d.max_def_level() != 0 || d.max_rep_level() != 0 {
                return Err(fail("not a required column of the expected type".into()));
            }
            let codec = PageCodec::of(c.compression())
                .ok_or_else(|| fail(format!("codec {} not handled", c.compression())))?;
            let (start, len) = c.byte_range();
            let bytes = usize::try_from(start)
                .ok()
                .zip(usize::try_from(len).ok())
                .and_then(|(s, l)| bytes.get(s..s.checked_add(l)?))
                .ok_or_else(|| fail(format!("byte range {start}+{len} beyond the file")))?;
            Ok(Chunk {
                bytes,
                offset: start,
                codec,
                rows: n,
            })
        };
        let fail = |name: &str, e: crate::pages::PageError| {
            Error::block(path, format!("row group {g}, column {name}: {e}"))
        };
        for ((name, ty), out) in DICTS.iter().zip(&mut dicts) {
            let phys = match ty {
                DictType::Bytes => PhysicalType::BYTE_ARRAY,
                DictType::Int32 => PhysicalType::INT32,
            };
            dec.dict_chunk(&chunk(name, phys)?, *ty, None, out)
                .map_err(|e| fail(name, e))?;
        }
        // The label columns, in blocks written since they exist (older rows: no label).
        let has_app = schema.columns().iter().any(|c| c.name() == col::APP);
        if has_app {
            for (name, out) in [col::APP, col::APP_SOURCE].into_iter().zip(&mut app_dicts) {
                dec.dict_chunk(
                    &chunk(name, PhysicalType::BYTE_ARRAY)?,
                    DictType::Bytes,
                    None,
                    out,
                )
                .map_err(|e| fail(name, e))?;
            }
        }
        for (name, out) in crate::schema::U64_COLUMNS.iter().zip(&mut u64s) {
            dec.u64_chunk(&chunk(name, PhysicalType::INT64)?, None, out)
                .map_err(|e| fail(name, e))?;
        }
        for (name, out) in I32S.iter().zip(&mut i32s) {
            dec.i32_chunk(&chunk(name, PhysicalType::INT32)?, out)
                .map_err(|e| fail(name, e))?;
        }
        let text = |d: &DictColumn, name: &str, i: usize| -> Result<String> {
            let k = d.keys.as_slice()[i] as usize;
            String::from_utf8(d.bytes(k).to_vec())
                .map_err(|_| Error::block(path, format!("row group {g}, column {name}: not UTF-8")))
        };
        let int = |d: &DictColumn, name: &str, i: usize| -> Result<u16> {
            u16::try_from(d.int(d.keys.as_slice()[i] as usize)).map_err(|_| {
                Error::block(
                    path,
                    format!("row group {g}, column {name}: beyond 16 bits"),
                )
            })
        };
        let ip = |d: &DictColumn, name: &str, i: usize| -> Result<IpAddr> {
            let t = text(d, name, i)?;
            t.parse().map_err(|_| {
                Error::block(
                    path,
                    format!("row group {g}, column {name}: bad address {t:?}"),
                )
            })
        };
        let u = |c: usize, i: usize| u64s[c].as_slice()[i];
        let flags = |c: usize, i: usize| -> Result<u8> {
            u8::try_from(i32s[c].as_slice()[i]).map_err(|_| {
                Error::block(
                    path,
                    format!("row group {g}, column {}: beyond 8 bits", I32S[c]),
                )
            })
        };
        for i in 0..n {
            let proto = text(&dicts[4], col::PROTO, i)?;
            let reason = text(&dicts[6], col::END_REASON, i)?;
            let app = match has_app {
                true => crate::schema::app_from_text(
                    &text(&app_dicts[0], col::APP, i)?,
                    &text(&app_dicts[1], col::APP_SOURCE, i)?,
                )
                .map_err(|m| Error::block(path, format!("row group {g}, {m}")))?,
                false => None,
            };
            rows.push(StoredFlow {
                src_ip: ip(&dicts[0], col::SRC_IP, i)?,
                dst_ip: ip(&dicts[1], col::DST_IP, i)?,
                src_port: int(&dicts[2], col::SRC_PORT, i)?,
                dst_port: int(&dicts[3], col::DST_PORT, i)?,
                proto: proto_number(&proto).ok_or_else(|| {
                    Error::block(path, format!("column proto: unknown protocol {proto:?}"))
                })?,
                vlan: int(&dicts[5], col::VLAN, i)?,
                first_ns: u(0, i),
                last_ns: u(1, i),
                fwd_packets: u(2, i),
                rev_packets: u(3, i),
                fwd_bytes: u(4, i),
                rev_bytes: u(5, i),
                fwd_ip_bytes: u(6, i),
                rev_ip_bytes: u(7, i),
                fwd_tcp_flags: flags(0, i)?,
                rev_tcp_flags: flags(1, i)?,
                end_reason: EndReason::ALL
                    .into_iter()
                    .find(|e| e.name() == reason)
                    .ok_or_else(|| {
                        Error::block(path, format!("column end_reason: unknown value {reason:?}"))
                    })?,
                app,
                extra: StoredExtra::default(),
            });
        }
    }
    read_extra(path, &mut rows)?;
    Ok(rows)
}
