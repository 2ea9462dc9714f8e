//! Crash repair: a segment left without an index (its writer was killed, or the machine lost
//! power) is cut back to its last complete record and indexed.
use std::fs::OpenOptions;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::index::IndexBuilder;
use crate::items::FactFinder;
use crate::layout::index_path;
use crate::pcapfile::{parse_file_header, scan, FILE_HEADER_LEN};

/// What repair did to one segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairReport {
    /// The segment.
    pub path: PathBuf,
    /// Whole records kept.
    pub packets: u64,
    /// Bytes kept (file header included).
    pub kept_bytes: u64,
    /// Bytes cut off the end (a torn record, flush padding).
    pub cut_bytes: u64,
    /// The file was removed: not even a whole file header survived.
    pub removed: bool,
    /// Latest packet timestamp kept.
    pub last_ts: Option<u64>,
    /// Why the readable part ended early, with its offset (`None`: it ended cleanly).
    pub stopped: Option<(u64, &'static str)>,
}

/// Repairs one segment: keeps every whole record, truncates the rest, writes the index.
pub fn repair_segment(
    path: &Path,
    host_index: bool,
    index_packets: u32,
    index_ns: u64,
) -> Result<RepairReport, Error> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(Error::io(path, "opening the segment for repair"))?;
    let len = file
        .metadata()
        .map_err(Error::io(path, "reading the segment's size"))?
        .len();
    let mut head = [0u8; FILE_HEADER_LEN as usize];
    use std::os::unix::fs::FileExt;
    let got = file.read_at(&mut head, 0).unwrap_or(0);
    let header = match parse_file_header(path, &head[..got]) {
        Ok(h) if got == head.len() => h,
        _ => {
            // Killed before the first block reached the disk: there is nothing to keep.
            drop(file);
            std::fs::remove_file(path).map_err(Error::io(path, "removing an empty segment"))?;
            return Ok(RepairReport {
                path: path.to_path_buf(),
                packets: 0,
                kept_bytes: 0,
                cut_bytes: len,
                removed: true,
                last_ts: None,
                stopped: Some((0, "file header")),
            });
        }
    };
    let mut builder = IndexBuilder::new(
        header.link,
        header.snaplen,
        host_index,
        index_packets,
        index_ns,
    );
    let mut facts = FactFinder::new(false);
    let mut buf = Vec::new();
    let end = scan(
        &file,
        path,
        &header,
        FILE_HEADER_LEN,
        len,
        &mut buf,
        |offset, rec, data| {
            let f = if host_index {
                facts.facts(header.link, data)
            } else {
                Default::default()
            };
            let items = f.items.as_ref().map(|(items, n)| &items[..*n]);
            builder.add(offset, rec.ts_ns, items);
            ControlFlow::Continue(())
        },
    )?;
    if end.good_end < len {
        file.set_len(end.good_end)
            .map_err(Error::io(path, "truncating the torn tail"))?;
    }
    file.sync_all()
        .map_err(Error::io(path, "syncing the repaired segment"))?;
    let last_ts = builder.time_range().map(|(_, last)| last);
    let packets = builder.packets();
    builder
        .finish(end.good_end)
        .write_atomic(&index_path(path))?;
    let stopped = end.stopped.map(|(at, why)| {
        (
            at,
            match why {
                crate::pcapfile::Stop::Padding => "zero padding",
                crate::pcapfile::Stop::Bad(field) => field,
            },
        )
    });
    Ok(RepairReport {
        path: path.to_path_buf(),
        packets,
        kept_bytes: end.good_end,
        cut_bytes: len - end.good_end,
        removed: false,
        last_ts,
        stopped,
    })
}
