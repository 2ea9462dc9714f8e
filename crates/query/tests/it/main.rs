//! The engine on databases written through `trawl_store::Ingest`: row-group pruning by
//! statistics, parallel scans equal to a single worker, partial aggregates of separate
//! "probes" merged through their serialised form equal to one scan over everything.
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::Path;

use trawl_flow::EndReason;
use trawl_query::{parse_attributes, scan, syntax, PartialAggregate, Query, SortBy};
use trawl_store::{Ingest, StoreConfig, StoredFlow, BLOCK_NS};

mod wire;

const T0: u64 = 1_763_251_200 * 1_000_000_000;

fn row(i: u64) -> StoredFlow {
    StoredFlow {
        src_ip: IpAddr::from([10, 0, (i / 256 % 40) as u8, (i % 256) as u8]),
        dst_ip: if i.is_multiple_of(5) {
            "2001:db8::1".parse().unwrap()
        } else {
            IpAddr::from([192, 0, 2, (i % 11) as u8])
        },
        src_port: 30_000 + (i % 3000) as u16,
        dst_port: [443, 80, 53, 8080][(i % 4) as usize],
        proto: if i % 4 == 2 { 17 } else { 6 },
        vlan: (i % 3) as u16,
        first_ns: T0 + (i % 6) * BLOCK_NS + i,
        last_ns: T0 + (i % 6) * BLOCK_NS + i + 10,
        fwd_packets: 1 + i % 13,
        rev_packets: i % 7,
        fwd_bytes: 60 + i % 1500,
        rev_bytes: 40 * (i % 7),
        fwd_ip_bytes: 0,
        rev_ip_bytes: 0,
        fwd_tcp_flags: 0,
        rev_tcp_flags: 0,
        end_reason: EndReason::Idle,
        app: None,
        extra: Default::default(),
    }
}

fn write_db(db: &Path, rows: impl Iterator<Item = u64>, row_group_rows: usize) {
    let mut ing = Ingest::open(
        db,
        StoreConfig {
            row_group_rows,
            ..StoreConfig::default()
        },
    )
    .unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    for i in rows {
        ing.push_row(eth0, row(i)).unwrap();
    }
    ing.finish().unwrap();
}

fn query(attrs: &str, cond: Option<&str>, workers: usize) -> Query {
    Query {
        attributes: parse_attributes(attrs).unwrap(),
        condition: cond.map(|c| syntax::parse(c).unwrap()),
        workers,
        ..Query::default()
    }
}

fn table(p: PartialAggregate) -> BTreeMap<String, [u64; 5]> {
    p.finish(SortBy::Bytes, None)
        .rows
        .into_iter()
        .map(|(k, m)| {
            (
                format!("{k:?}"),
                [
                    m.fwd_packets,
                    m.rev_packets,
                    m.fwd_bytes,
                    m.rev_bytes,
                    m.flows,
                ],
            )
        })
        .collect()
}

#[test]
fn statistics_prune_row_groups_without_changing_results() {
    let dir = tempfile::tempdir().unwrap();
    write_db(dir.path(), 0..60_000, 1000);
    // Blocks are sorted by source address, so one address lives in few row groups.
    let q = query("sip,dport", Some("sip = 10.0.7.9"), 2);
    let p = scan(dir.path(), &q).unwrap();
    assert!(
        p.stats.row_groups_pruned * 10 >= p.stats.row_groups * 8,
        "{:?}",
        p.stats
    );
    let full = query("sip,dport", None, 2);
    let want: BTreeMap<String, [u64; 5]> = table(scan(dir.path(), &full).unwrap())
        .into_iter()
        .filter(|(k, _)| k.contains("10.0.7.9)"))
        .collect();
    assert!(!want.is_empty());
    assert_eq!(table(p), want);
    // A port no row has: every block is skipped unopened beyond its footer.
    let p = scan(
        dir.path(),
        &query("sip", Some("dport = 9999 or vlan > 100"), 2),
    )
    .unwrap();
    assert_eq!(p.stats.blocks_pruned, p.stats.blocks);
    assert_eq!(p.stats.rows_scanned, 0);
    // Octet-aligned prefixes prune too.
    let p = scan(dir.path(), &query("sip", Some("sip = 10.0.39.0/24"), 1)).unwrap();
    assert!(p.stats.row_groups_pruned > 0);
    assert!(!p.is_empty());
}

#[test]
fn worker_counts_do_not_change_results() {
    let dir = tempfile::tempdir().unwrap();
    write_db(dir.path(), 0..30_000, 4096);
    for (attrs, cond) in [
        ("talk_conv", None),
        ("apps,vlan,time", Some("not dip = 2001:db8::/32")),
        ("sport", Some("sport = 30000-30100 or proto = udp")),
    ] {
        let one = table(scan(dir.path(), &query(attrs, cond, 1)).unwrap());
        let four = table(scan(dir.path(), &query(attrs, cond, 4)).unwrap());
        assert_eq!(one, four, "{attrs}");
        assert!(!one.is_empty());
    }
}

#[test]
fn partials_of_separate_probes_merge_to_the_whole() {
    let (a, b, all) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    write_db(a.path(), (0..20_000).filter(|i| i % 2 == 0), 65_536);
    write_db(b.path(), (0..20_000).filter(|i| i % 2 == 1), 65_536);
    write_db(all.path(), 0..20_000, 65_536);
    let q = query("sip,dip,proto", Some("dport != 53"), 2);
    // Each probe answers with the serialised form; the coordinator merges.
    let pa = scan(a.path(), &q).unwrap().to_json();
    let pb = scan(b.path(), &q).unwrap().to_json();
    let mut merged = PartialAggregate::from_json(&pa, 1_000_000).unwrap();
    merged
        .merge(PartialAggregate::from_json(&pb, 1_000_000).unwrap())
        .unwrap();
    let whole = scan(all.path(), &q).unwrap();
    assert_eq!(merged.stats.rows_scanned, whole.stats.rows_scanned);
    assert_eq!(table(merged), table(whole));
}

#[test]
fn group_limit_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    write_db(dir.path(), 0..10_000, 65_536);
    let q = Query {
        max_groups: 100,
        ..query("sport", None, 2)
    };
    let e = scan(dir.path(), &q).unwrap_err();
    assert!(e.to_string().contains("more than 100 groups"), "{e}");
}

/// Damaged blocks of every kind (truncated, bytes flipped anywhere, garbage with a block's
/// name) are counted with their file named, never a panic, and never change the groups of the
/// intact blocks.
#[test]
fn damaged_blocks_are_counted_and_the_rest_still_counts() {
    let dir = tempfile::tempdir().unwrap();
    write_db(dir.path(), 0..30_000, 65_536);
    let q = query("dport,proto", Some("sip = 10.0.0.0/8"), 2);
    let intact = scan(dir.path(), &q).unwrap();
    let blocks =
        trawl_store::list_blocks(dir.path(), &trawl_store::BlockFilter::default()).unwrap();
    assert_eq!(blocks.len(), 6);
    let victim = &blocks[2];
    let original = std::fs::read(&victim.path).unwrap();
    let victim_alone = {
        let other = tempfile::tempdir().unwrap();
        let rel = victim.path.strip_prefix(dir.path()).unwrap();
        std::fs::create_dir_all(other.path().join(rel).parent().unwrap()).unwrap();
        std::fs::copy(&victim.path, other.path().join(rel)).unwrap();
        table(scan(other.path(), &q).unwrap())
    };
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut failed = 0;
    for round in 0..300 {
        let mut bytes = original.clone();
        match round % 3 {
            0 => bytes.truncate(bytes.len() * (round % 60 + 1) / 61),
            1 => {
                for _ in 0..4 {
                    trawl_testkit::xorshift(&mut seed);
                    let at = (seed % bytes.len() as u64) as usize;
                    bytes[at] ^= 1 << (seed % 8);
                }
            }
            _ => {
                bytes = (0..bytes.len())
                    .map(|i| ((i as u64).wrapping_mul(seed | 1) >> 7) as u8)
                    .collect()
            }
        }
        std::fs::write(&victim.path, &bytes).unwrap();
        let p = scan(dir.path(), &q).unwrap();
        if p.stats.blocks_failed == 1 {
            failed += 1;
            // Damage is found by the direct decoder (or the footer parser), not by a panic.
            assert!(
                !p.stats.errors[0].contains("panicked"),
                "round {round}: {:?}",
                p.stats.errors
            );
            assert!(
                p.stats.errors[0].contains(victim.path.to_str().unwrap()),
                "{:?}",
                p.stats.errors
            );
            // The intact blocks' groups are exactly the total minus the victim's.
            let mut want = table(intact.clone());
            for (k, m) in &victim_alone {
                let e = want.get_mut(k).unwrap();
                for (x, y) in e.iter_mut().zip(m) {
                    *x -= y;
                }
                if e[4] == 0 {
                    want.remove(k);
                }
            }
            assert_eq!(table(p), want, "round {round}");
        }
    }
    std::fs::write(&victim.path, &original).unwrap();
    assert!(failed >= 200, "most damage is detected ({failed} of 300)");
}

/// A condition on columns that are not grouped by: they are read first, the others only for
/// the stretches of rows where it can hold. The result equals the condition applied to a
/// full scan.
#[test]
fn conditions_read_first_give_exact_results() {
    let dir = tempfile::tempdir().unwrap();
    write_db(dir.path(), 0..40_000, 65_536);
    let all = scan(dir.path(), &query("sip,dip,sport,dport", None, 2)).unwrap();
    type Hit = fn([u8; 4], Option<u16>) -> bool;
    let cases: [(&str, Hit); 2] = [
        (
            "sip = 10.0.3.0/24 and dport = 443 or sip = 10.0.30.7",
            |s, d| (s[..3] == [10, 0, 3] && d == Some(443)) || s == [10, 0, 30, 7],
        ),
        // Conjuncts on the source address: those alone decide the first pass.
        ("dport = 443 and sip = 10.0.3.0/24", |s, d| {
            s[..3] == [10, 0, 3] && d == Some(443)
        }),
    ];
    for (cond, hit) in cases {
        let p = scan(dir.path(), &query("dip,sport", Some(cond), 2)).unwrap();
        assert_eq!(p.stats.rows_scanned, all.stats.rows_scanned);
        let mut want: BTreeMap<(Option<IpAddr>, Option<u16>), [u64; 5]> = BTreeMap::new();
        for (k, m) in all.groups() {
            let sip = match k.sip {
                Some(IpAddr::V4(a)) => a.octets(),
                _ => continue,
            };
            if hit(sip, k.dport) {
                let w = want.entry((k.dip, k.sport)).or_default();
                for (x, y) in w.iter_mut().zip([
                    m.fwd_packets,
                    m.rev_packets,
                    m.fwd_bytes,
                    m.rev_bytes,
                    m.flows,
                ]) {
                    *x += y;
                }
            }
        }
        let got: BTreeMap<(Option<IpAddr>, Option<u16>), [u64; 5]> = p
            .groups()
            .into_iter()
            .map(|(k, m)| {
                (
                    (k.dip, k.sport),
                    [
                        m.fwd_packets,
                        m.rev_packets,
                        m.fwd_bytes,
                        m.rev_bytes,
                        m.flows,
                    ],
                )
            })
            .collect();
        assert!(got.len() > 10, "{cond}");
        assert_eq!(got, want, "{cond}");
    }
}

/// Low-cardinality group-bys are summed per batch by local key — directly indexed when the
/// key space is small (sources, protocols), through a slot index otherwise (ports) — and
/// equal the same groups summed from a full conversation-level scan.
#[test]
fn dense_group_bys_equal_sums_of_the_full_scan() {
    let dir = tempfile::tempdir().unwrap();
    write_db(dir.path(), 0..40_000, 65_536);
    let all = scan(dir.path(), &query("sip,dip,sport,dport,proto", None, 2)).unwrap();
    for (attrs, cond) in [
        ("sip", None),
        ("proto", None),
        ("sip,proto", Some("dport = 443 or dport = 53")),
        ("dport", None),
        ("sport,proto", None),
    ] {
        let p = scan(dir.path(), &query(attrs, cond, 2)).unwrap();
        let mut want: BTreeMap<String, [u64; 5]> = BTreeMap::new();
        for (k, m) in all.groups() {
            if cond.is_some() && !matches!(k.dport, Some(443 | 53)) {
                continue;
            }
            let key = trawl_query::GroupKey {
                sip: attrs.contains("sip").then_some(k.sip).flatten(),
                sport: attrs.contains("sport").then_some(k.sport).flatten(),
                dport: (attrs == "dport").then_some(k.dport).flatten(),
                proto: attrs.contains("proto").then_some(k.proto).flatten(),
                ..Default::default()
            };
            let w = want.entry(format!("{key:?}")).or_default();
            for (x, y) in w.iter_mut().zip([
                m.fwd_packets,
                m.rev_packets,
                m.fwd_bytes,
                m.rev_bytes,
                m.flows,
            ]) {
                *x += y;
            }
        }
        let got: BTreeMap<String, [u64; 5]> = p
            .groups()
            .into_iter()
            .map(|(k, m)| {
                (
                    format!("{k:?}"),
                    [
                        m.fwd_packets,
                        m.rev_packets,
                        m.fwd_bytes,
                        m.rev_bytes,
                        m.flows,
                    ],
                )
            })
            .collect();
        assert!(!got.is_empty(), "{attrs}");
        assert_eq!(got, want, "{attrs}");
    }
}

/// Writes `row(i)` for each of `indices` as one Parquet file at `path` the way another tool
/// might: source address, protocol and end reason as plain optional strings, destination
/// address and ports dictionary-encoded until the dictionary outgrows 256 bytes (source
/// ports do), counters
/// PLAIN, data pages v2, the given codec — no trawl metadata.
fn write_foreign(path: &Path, indices: &[u64], codec: parquet::basic::Compression) {
    write_foreign_with(path, indices, codec, &|_, r| r.src_ip.to_string());
}

/// [`write_foreign`] with the source address text of row `i` given by `sip`.
fn write_foreign_with(
    path: &Path,
    indices: &[u64],
    codec: parquet::basic::Compression,
    sip: &dyn Fn(u64, &StoredFlow) -> String,
) {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, RecordBatch, StringArray, UInt16Array, UInt64Array, UInt8Array};
    use arrow_schema::{DataType, Field, Schema};
    use parquet::arrow::ArrowWriter;
    use parquet::basic::Encoding;
    use parquet::file::properties::{WriterProperties, WriterVersion};
    use parquet::schema::types::ColumnPath;

    let rows: Vec<StoredFlow> = indices.iter().map(|&i| row(i)).collect();
    let sips: Vec<String> = indices.iter().zip(&rows).map(|(&i, r)| sip(i, r)).collect();
    let text = |f: &dyn Fn(&StoredFlow) -> String| -> ArrayRef {
        Arc::new(StringArray::from_iter_values(rows.iter().map(f)))
    };
    let u16s = |f: fn(&StoredFlow) -> u16| -> ArrayRef {
        Arc::new(UInt16Array::from_iter_values(rows.iter().map(f)))
    };
    let u64s = |f: fn(&StoredFlow) -> u64| -> ArrayRef {
        Arc::new(UInt64Array::from_iter_values(rows.iter().map(f)))
    };
    let u8s = |f: fn(&StoredFlow) -> u8| -> ArrayRef {
        Arc::new(UInt8Array::from_iter_values(rows.iter().map(f)))
    };
    let columns: Vec<(&str, ArrayRef, bool)> = vec![
        (
            "src_ip",
            Arc::new(StringArray::from_iter_values(sips.iter())) as ArrayRef,
            true,
        ),
        ("dst_ip", text(&|r| r.dst_ip.to_string()), false),
        ("src_port", u16s(|r| r.src_port), false),
        ("dst_port", u16s(|r| r.dst_port), false),
        (
            "proto",
            text(&|r| trawl_flow::ProtoName(r.proto).to_string()),
            true,
        ),
        ("vlan", u16s(|r| r.vlan), false),
        ("first_ns", u64s(|r| r.first_ns), false),
        ("last_ns", u64s(|r| r.last_ns), false),
        ("fwd_packets", u64s(|r| r.fwd_packets), false),
        ("rev_packets", u64s(|r| r.rev_packets), false),
        ("fwd_bytes", u64s(|r| r.fwd_bytes), false),
        ("rev_bytes", u64s(|r| r.rev_bytes), false),
        ("fwd_ip_bytes", u64s(|r| r.fwd_ip_bytes), false),
        ("rev_ip_bytes", u64s(|r| r.rev_ip_bytes), false),
        ("fwd_tcp_flags", u8s(|r| r.fwd_tcp_flags), false),
        ("rev_tcp_flags", u8s(|r| r.rev_tcp_flags), false),
        (
            "end_reason",
            text(&|r| r.end_reason.name().to_string()),
            true,
        ),
    ];
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(n, a, nullable)| {
                let t: DataType = a.data_type().clone();
                Field::new(*n, t, *nullable)
            })
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(
        schema.clone(),
        columns.into_iter().map(|(_, a, _)| a).collect(),
    )
    .unwrap();
    let mut props = WriterProperties::builder()
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_compression(codec)
        .set_max_row_group_row_count(Some(7_000))
        .set_dictionary_enabled(false);
    // Dictionaries of at most 256 bytes: that of the source ports overflows, and their chunks
    // go on in PLAIN pages after a dictionary-encoded one.
    props = props.set_dictionary_page_size_limit(256);
    for c in ["src_port", "dst_port", "vlan", "dst_ip"] {
        props = props.set_column_dictionary_enabled(ColumnPath::from(c), true);
    }
    for c in ["fwd_packets", "rev_packets", "fwd_bytes", "rev_bytes"] {
        props = props.set_column_encoding(ColumnPath::from(c), Encoding::PLAIN);
    }
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let mut w = ArrowWriter::try_new(
        std::fs::File::create(path).unwrap(),
        schema,
        Some(props.build()),
    )
    .unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

/// A block written by another tool (plain optional strings, PLAIN counters, v2 pages, other
/// codecs): the chunks the direct decoder does not handle are read by the general reader,
/// the others directly, chosen chunk by chunk, and the groups are those of the same rows
/// written by trawl.
#[test]
fn foreign_blocks_are_read_through_the_general_reader_chunk_by_chunk() {
    use parquet::basic::{Compression, ZstdLevel};
    let ours = tempfile::tempdir().unwrap();
    write_db(ours.path(), 0..20_000, 65_536);
    for codec in [
        Compression::LZ4_RAW,
        Compression::ZSTD(ZstdLevel::try_new(1).unwrap()),
        // Hadoop's framed LZ4: not for the direct decoder at all.
        Compression::LZ4,
    ] {
        let theirs = tempfile::tempdir().unwrap();
        // The rows of each of our blocks (interval i % 6) in a file of the same interval.
        for k in 0..6u64 {
            let start = T0 + k * BLOCK_NS;
            let path = theirs.path().join(format!(
                "iface=eth0/date=2025-11-16/{}",
                trawl_store::layout::block_file_name(start, 0)
            ));
            let mine: Vec<u64> = (0..20_000).filter(|i| i % 6 == k).collect();
            write_foreign(&path, &mine, codec);
        }
        // (Attributes, condition, columns read.)
        for (attrs, cond, columns) in [
            ("sip,dip,sport,dport,proto,vlan", None, 10),
            ("sip", None, 5),
            ("apps", Some("sip = 10.0.3.0/24 or dport = 53"), 7),
        ] {
            let q = query(attrs, cond, 2);
            let want = scan(ours.path(), &q).unwrap();
            let got = scan(theirs.path(), &q).unwrap();
            assert_eq!(got.stats.blocks_failed, 0, "{:?}", got.stats.errors);
            let (got_t, want_t) = (table(got.clone()), table(want));
            assert!(!want_t.is_empty());
            assert!(
                got_t == want_t,
                "{codec:?} {attrs}: {} groups, want {}",
                got_t.len(),
                want_t.len()
            );
            let general = got.stats.column_chunks_general;
            assert!(general > 0, "{codec:?}");
            if codec != Compression::LZ4 {
                // Ports and counters were read directly.
                let read = got.stats.row_groups * columns;
                assert!(general < read, "{codec:?}: {general} of {read}");
            }
        }
    }
}

/// The chunks of such a file: a dictionary page, dictionary-encoded data pages, then others
/// (which the direct decoder leaves to the general reader after decoding the first).
#[test]
fn foreign_files_do_mix_dictionary_and_plain_pages() {
    use parquet::column::page::Page;
    use parquet::file::reader::FileReader;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.parquet");
    let rows: Vec<u64> = (0..6_000).collect();
    write_foreign(&path, &rows, parquet::basic::Compression::LZ4_RAW);
    let r = parquet::file::serialized_reader::SerializedFileReader::new(
        std::fs::File::open(&path).unwrap(),
    )
    .unwrap();
    let rg = r.get_row_group(0).unwrap();
    // src_port: column 2 (3,000 distinct ports, 12 KB of dictionary).
    let mut pages = rg.get_column_page_reader(2).unwrap();
    let mut kinds = Vec::new();
    while let Some(p) = pages.get_next_page().unwrap() {
        kinds.push(match p {
            Page::DictionaryPage { .. } => "dict".to_string(),
            Page::DataPage { encoding, .. } | Page::DataPageV2 { encoding, .. } => {
                format!("{encoding}")
            }
        });
    }
    assert_eq!(kinds.first().map(String::as_str), Some("dict"), "{kinds:?}");
    assert!(kinds.iter().any(|k| k == "RLE_DICTIONARY"), "{kinds:?}");
    // (The fallback of a v2 writer for 32-bit integers.)
    assert!(
        kinds.iter().any(|k| k == "DELTA_BINARY_PACKED"),
        "{kinds:?}"
    );
}

/// A damaged page of one of trawl's blocks fails that block with an error naming the file,
/// the row group, the column and the page's offset — from the direct decoder, not a panic.
#[test]
fn a_damaged_page_is_an_error_naming_where() {
    let dir = tempfile::tempdir().unwrap();
    write_db(dir.path(), 0..30_000, 2_000);
    let blocks =
        trawl_store::list_blocks(dir.path(), &trawl_store::BlockFilter::default()).unwrap();
    let victim = &blocks[1];
    let meta = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&std::fs::File::open(&victim.path).unwrap())
        .unwrap();
    // The header of the first data page of dst_port in row group 1.
    let at = meta.row_group(1).column(3).data_page_offset() as usize;
    let mut bytes = std::fs::read(&victim.path).unwrap();
    bytes[at..at + 3].copy_from_slice(&[0xff, 0xff, 0xff]);
    std::fs::write(&victim.path, &bytes).unwrap();
    let p = scan(dir.path(), &query("dport", None, 2)).unwrap();
    assert_eq!(p.stats.blocks_failed, 1);
    let e = &p.stats.errors[0];
    assert!(
        e.contains(victim.path.to_str().unwrap())
            && e.contains(&format!(
                "row group 1, column dst_port: at offset {at}: page header"
            )),
        "{e}"
    );
}

/// Grouped by one address alone, groups are keyed by the address text until the end of the
/// scan: two texts of one address (another writer's capitals) are one group, and a block with
/// a text that is not an address fails whole, naming its file, while the others count.
#[test]
fn address_texts_are_checked_and_merged() {
    use parquet::basic::Compression;
    let dir = tempfile::tempdir().unwrap();
    let block = |k: u64| {
        dir.path().join(format!(
            "iface=eth0/date=2025-11-16/{}",
            trawl_store::layout::block_file_name(T0 + k * BLOCK_NS, 0)
        ))
    };
    let rows = |k: u64| -> Vec<u64> { (0..3_000).filter(|i| i % 6 == k).collect() };
    // Block 0: every fifth source written 2001:DB8::1 rather than 2001:db8::1.
    let v6 = |i: u64, r: &StoredFlow| {
        if i.is_multiple_of(5) {
            "2001:DB8::1".to_string()
        } else if i % 5 == 1 {
            "2001:db8::1".to_string()
        } else {
            r.src_ip.to_string()
        }
    };
    write_foreign_with(&block(0), &rows(0), Compression::LZ4_RAW, &v6);
    write_foreign_with(&block(1), &rows(1), Compression::LZ4_RAW, &v6);
    let q = query("sip", None, 2);
    let p = scan(dir.path(), &q).unwrap();
    assert_eq!(p.stats.blocks_failed, 0, "{:?}", p.stats.errors);
    let v6_rows = (0..3_000u64).filter(|i| i % 6 < 2 && i % 5 < 2).count() as u64;
    let g = p.groups();
    let one: Vec<_> = g
        .iter()
        .filter(|(k, _)| k.sip == Some("2001:db8::1".parse().unwrap()))
        .collect();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].1.flows, v6_rows);
    let good = table(p);
    // Block 2: the sources of block 0 (so that it adds to groups that exist), and one that
    // is not an address.
    write_foreign_with(&block(2), &rows(2), Compression::LZ4_RAW, &|i, _| {
        if i == 1_004 {
            "10.0.0.256".to_string()
        } else {
            v6(i - 2, &row(i - 2))
        }
    });
    let p = scan(dir.path(), &q).unwrap();
    assert_eq!(p.stats.blocks_failed, 1);
    let e = &p.stats.errors[0];
    assert!(
        e.contains(block(2).to_str().unwrap()) && e.contains("not an address: \"10.0.0.256\""),
        "{e}"
    );
    // The two good blocks' groups, exactly (one worker or two).
    assert!(table(p) == good);
    let p = scan(dir.path(), &query("sip", None, 1)).unwrap();
    assert!(table(p) == good);
}

/// Issue 20: a scan can be stopped from outside (the API's query timeout): cancelled, it ends
/// with `Error::Cancelled` before reading a block; left alone, it counts every block it
/// finished in its control.
#[test]
fn issue_20_a_cancelled_scan_stops_and_a_scan_counts_its_blocks() {
    let dir = tempfile::tempdir().unwrap();
    write_db(dir.path(), 0..6_000, 1000);
    let q = query("sip,dport", None, 2);
    let control = trawl_query::ScanControl::default();
    let p = trawl_query::scan_with(dir.path(), &q, &control).unwrap();
    assert!(p.stats.blocks >= 6, "{:?}", p.stats);
    assert_eq!(control.blocks_done(), p.stats.blocks);
    let stopped = trawl_query::ScanControl::default();
    stopped.cancel();
    let e = trawl_query::scan_with(dir.path(), &q, &stopped).unwrap_err();
    assert!(matches!(e, trawl_query::Error::Cancelled), "{e}");
    assert_eq!(stopped.blocks_done(), 0);
}
