//! Recent parts (docs/specs/store.md): the rows of an open block, published by a live
//! writer, are read until their block is written, then the block alone; a writer that dies
//! leaves its parts read.
use std::path::Path;

use trawl_store::{list_blocks, read_block, BlockFilter, Ingest, StoreConfig, BLOCK_NS};

use crate::rows::{row, DAY0};

/// The rows a query reads now: (row count, recent parts among the files read).
fn readable(db: &Path) -> (usize, usize) {
    let blocks = list_blocks(db, &BlockFilter::default()).unwrap();
    let rows = blocks
        .iter()
        .map(|b| read_block(&b.path).unwrap().len())
        .sum();
    (rows, blocks.iter().filter(|b| b.recent).count())
}

/// Recent part files on disk, covered or not.
fn recent_files(db: &Path) -> usize {
    walk(db)
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "recent"))
        .count()
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else {
            out.push(e.path());
        }
    }
    out
}

#[test]
fn recent_parts_are_read_until_their_block_is_written_and_never_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path();
    let mut ing = Ingest::open(db, StoreConfig::default()).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    for i in 0..3 {
        ing.push_row(eth0, row(i, DAY0 + 10 + i)).unwrap();
    }
    assert_eq!(readable(db), (0, 0), "nothing published yet");
    ing.publish_recent().unwrap();
    assert_eq!(readable(db), (3, 1));
    // Nothing new: no further part.
    ing.publish_recent().unwrap();
    assert_eq!(ing.stats().recent_parts, 1);
    for i in 3..5 {
        ing.push_row(eth0, row(i, DAY0 + 10 + i)).unwrap();
    }
    ing.publish_recent().unwrap();
    assert_eq!(
        readable(db),
        (5, 2),
        "each part holds only the rows after the last"
    );
    // A row that is not published yet is not read; the block holds it.
    ing.push_row(eth0, row(5, DAY0 + 20)).unwrap();
    assert_eq!(readable(db).0, 5);

    // The block is written: it alone is read, though its parts are still on disk (a query
    // that listed them before may still be reading them).
    ing.advance(DAY0 + BLOCK_NS + 41 * 1_000_000_000).unwrap();
    assert_eq!(ing.stats().blocks, 1);
    assert_eq!(readable(db), (6, 0));
    assert_eq!(recent_files(db), 2);
    // The next interval's rows are published under a new token, read beside the block.
    ing.push_row(eth0, row(6, DAY0 + BLOCK_NS + 5)).unwrap();
    ing.publish_recent().unwrap();
    assert_eq!(readable(db), (7, 1));
    let stats = ing.finish().unwrap();
    assert_eq!((stats.blocks, stats.rows, stats.recent_parts), (2, 7, 3));
    assert_eq!(readable(db), (7, 0));
    assert_eq!(recent_files(db), 0, "finish removes the covered parts");
}

#[test]
fn a_dead_writers_recent_parts_stay_read_beside_a_new_writers_block() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path();
    {
        let mut ing = Ingest::open(db, StoreConfig::default()).unwrap();
        let eth0 = ing.iface("eth0").unwrap();
        for i in 0..4 {
            ing.push_row(eth0, row(i, DAY0 + 10 + i)).unwrap();
        }
        ing.publish_recent().unwrap();
        // Dropped without finish: the process died; its parts are the only copy.
    }
    assert_eq!(readable(db), (4, 1));
    let mut ing = Ingest::open(db, StoreConfig::default()).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    for i in 10..12 {
        ing.push_row(eth0, row(i, DAY0 + 30 + i)).unwrap();
    }
    ing.publish_recent().unwrap();
    assert_eq!(readable(db), (6, 2));
    ing.finish().unwrap();
    // The new block covers its own part only: the dead writer's rows are still read once.
    assert_eq!(readable(db), (6, 1));
    assert_eq!(recent_files(db), 1);
}

#[test]
fn parquet_readers_of_the_directory_do_not_see_recent_parts() {
    // pyarrow's datasets skip names starting with a dot; DuckDB's `**/*.parquet` needs the
    // extension: a recent part has neither, so a user's own reader never counts rows twice.
    let dir = tempfile::tempdir().unwrap();
    let mut ing = Ingest::open(dir.path(), StoreConfig::default()).unwrap();
    let eth0 = ing.iface("eth0").unwrap();
    ing.push_row(eth0, row(1, DAY0 + 10)).unwrap();
    ing.publish_recent().unwrap();
    let files = walk(dir.path());
    let recent: Vec<_> = files
        .iter()
        .filter_map(|p| p.file_name()?.to_str())
        .filter(|n| n.ends_with(".recent"))
        .collect();
    assert_eq!(recent.len(), 1);
    assert!(recent[0].starts_with('.') && !recent[0].ends_with(".parquet"));
}
