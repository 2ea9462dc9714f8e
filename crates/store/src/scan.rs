//! The database's rows by time range in packet-time order: the stored side of the subscriber
//! API (`trawl_export::feed`), which hands them out in the same callback shape as a live feed.
use std::ops::{ControlFlow, Range};
use std::path::Path;

use crate::error::Result;
use crate::layout::{block_start, list_blocks, BlockFilter};
use crate::reader::read_block;
use crate::schema::StoredFlow;

/// Calls `f` with the interface and every stored row whose first packet lies in `range` (ns
/// since the epoch), of the interfaces `ifaces` (all when empty), in order of first packet
/// (one 5-minute interval of all interfaces at a time; rows of equal times in interface
/// order), until `f` returns `Break`. Returns how many rows `f` was given. A block that cannot
/// be read is an error naming its file.
pub fn for_each_row(
    db: &Path,
    ifaces: &[String],
    range: Range<u64>,
    f: &mut dyn FnMut(&str, &StoredFlow) -> ControlFlow<()>,
) -> Result<u64> {
    if range.is_empty() {
        return Ok(0);
    }
    // A row lives in the block of its first packet: the blocks from the interval holding the
    // range's start up to its end.
    let blocks = list_blocks(
        db,
        &BlockFilter {
            ifaces,
            from_ns: block_start(range.start),
            to_ns: Some(range.end),
        },
    )?;
    let mut delivered = 0;
    let mut rows: Vec<(usize, StoredFlow)> = Vec::new();
    for group in blocks.chunk_by(|a, b| a.start_ns == b.start_ns) {
        rows.clear();
        for (i, b) in group.iter().enumerate() {
            rows.extend(
                read_block(&b.path)?
                    .into_iter()
                    .filter(|r| range.contains(&r.first_ns))
                    .map(|r| (i, r)),
            );
        }
        rows.sort_by(|(i, a), (j, b)| {
            (a.first_ns, &group[*i].iface).cmp(&(b.first_ns, &group[*j].iface))
        });
        for (i, r) in &rows {
            delivered += 1;
            if f(&group[*i].iface, r).is_break() {
                return Ok(delivered);
            }
        }
    }
    Ok(delivered)
}
