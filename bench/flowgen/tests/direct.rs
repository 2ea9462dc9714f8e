//! A database of the benchmark's traffic (`flowgen`'s) with several row groups per block and
//! several data pages per column chunk: the direct page decoder reads every block as the
//! `parquet` crate's Arrow reader does, and queries give the same groups either way.
use std::path::Path;

use trawl_flowgen::{row, world, Rng, START_NS};
use trawl_query::{parse_attributes, scan, syntax, Query};
use trawl_store::{list_blocks, read_block, read_block_direct, BlockFilter, Codec};
use trawl_store::{Ingest, StoreConfig, BLOCK_NS};

/// Rows of the test blocks: the first spans two row groups of several pages each.
const BLOCK_ROWS: [u64; 3] = [80_000, 3_000, 45_000];

fn build(db: &Path, codec: Codec) {
    let w = world(1);
    let config = StoreConfig {
        codec,
        ..StoreConfig::default()
    };
    let mut ing = Ingest::open(db, config).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    for (k, &n) in BLOCK_ROWS.iter().enumerate() {
        let block = START_NS + 12 * 12 * BLOCK_NS + k as u64 * BLOCK_NS;
        let mut r = Rng(block);
        for _ in 0..n {
            ing.push_row(eth0, row(&mut r, &w, block)).unwrap();
        }
    }
    ing.finish().unwrap();
}

#[test]
fn the_direct_decoder_reads_a_flowgen_database_as_the_arrow_reader_does() {
    for codec in [Codec::Lz4, Codec::Zstd(3)] {
        let dir = tempfile::tempdir().unwrap();
        build(dir.path(), codec);
        let blocks = list_blocks(dir.path(), &BlockFilter::default()).unwrap();
        assert_eq!(blocks.len(), BLOCK_ROWS.len());
        let (groups, pages) = trawl_store::block_shape(&blocks[0].path).unwrap();
        assert!(
            groups == 2 && pages >= 3,
            "{groups} row groups, {pages} pages"
        );
        for b in &blocks {
            let want = read_block(&b.path).unwrap();
            assert!(read_block_direct(&b.path).unwrap() == want, "{codec:?}");
        }
        // The queries of the benchmark and a few more, every column kind the engine reads:
        // the same groups with direct decoding as through the general reader.
        for (attrs, cond) in [
            ("sip", None),
            ("apps", None),
            ("talk_conv", None),
            ("talk_conv", Some("sip = 10.1.0.0/16 and dport = 443")),
            ("dip,proto", Some("not dport = 443 or proto = udp")),
            (
                "sport,vlan",
                Some("sip = 10.0.0.0/12 and dport = 1024-65535"),
            ),
            ("time,dport", Some("dip = 2a00::/16 or snet = 10.3.0.0/16")),
        ] {
            let q = Query {
                attributes: parse_attributes(attrs).unwrap(),
                condition: cond.map(|c| syntax::parse(c).unwrap()),
                workers: 2,
                ..Query::default()
            };
            let direct = scan(dir.path(), &q).unwrap();
            let general = scan(
                dir.path(),
                &Query {
                    direct_decoding: false,
                    ..q.clone()
                },
            )
            .unwrap();
            let sorted = |p: &trawl_query::PartialAggregate| {
                let mut g: Vec<String> = p
                    .groups()
                    .iter()
                    .map(|(k, m)| format!("{k:?} {m:?}"))
                    .collect();
                g.sort();
                g
            };
            let g = sorted(&direct);
            assert!(!g.is_empty(), "{attrs} {cond:?}");
            assert_eq!(g, sorted(&general), "{codec:?} {attrs} {cond:?}");
            assert_eq!(direct.stats.rows_matched, general.stats.rows_matched);
            assert_eq!(direct.stats.blocks_failed, 0);
            assert_eq!(direct.stats.column_chunks_general, 0);
            assert!(general.stats.column_chunks_general > 0);
        }
    }
}
