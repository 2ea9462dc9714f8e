//! The sidecar index of a segment (`<segment>.idx`, layout in `docs/specs/packet-store.md`):
//! the segment's time range and one entry per chunk of packets (offset, packet count, time
//! range, and the sorted distinct items — hashed addresses and ports — of its packets).
//!
//! A chunk ends after `every_packets` packets, `every_ns` of packet time, or 4096 distinct
//! items, whichever comes first, so an entry points at most a few MB of data.
use std::io::Write;
use std::path::Path;

use trawl_capture::LinkType;

use crate::error::Error;

const MAGIC: &[u8; 8] = b"TRWLPIDX";
/// Version of the index layout.
pub const INDEX_VERSION: u16 = 1;
const HEADER_LEN: usize = 64;
const CHUNK_LEN: usize = 40;
const FLAG_HOST_INDEX: u16 = 1;
const CHUNK_UNINDEXED: u32 = 1;
/// Distinct items after which a chunk is closed early (keeps the per-chunk set small).
const MAX_CHUNK_ITEMS: usize = 4096;

/// One chunk of a segment: a run of consecutive packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// File offset of its first packet record.
    pub offset: u64,
    /// Packets in it.
    pub packets: u32,
    /// Earliest packet timestamp in it.
    pub min_ts: u64,
    /// Latest packet timestamp in it.
    pub max_ts: u64,
    /// False when a packet in it could not be indexed (host lookups must read it).
    pub indexed: bool,
    items_start: u32,
    items_len: u32,
}

/// A segment's index, as read from disk or built by the dumper or by repair.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentIndex {
    /// Link type of every packet in the segment.
    pub link_type: LinkType,
    /// Snap length in the segment's pcap header.
    pub snaplen: u32,
    /// Packets in the segment.
    pub packets: u64,
    /// Length of the segment file in bytes (header included).
    pub segment_len: u64,
    /// Earliest packet timestamp (0 when empty).
    pub first_ts: u64,
    /// Latest packet timestamp (0 when empty).
    pub last_ts: u64,
    /// Whether chunks carry items (the dumper's `host_index` setting).
    pub host_index: bool,
    /// The chunks, in file order.
    pub chunks: Vec<Chunk>,
    items: Vec<u32>,
}

impl SegmentIndex {
    /// The sorted distinct items of chunk `i`.
    pub fn chunk_items(&self, i: usize) -> &[u32] {
        let c = &self.chunks[i];
        &self.items[c.items_start as usize..(c.items_start + c.items_len) as usize]
    }

    /// End offset (exclusive) of chunk `i`.
    pub fn chunk_end(&self, i: usize) -> u64 {
        self.chunks
            .get(i + 1)
            .map_or(self.segment_len, |c| c.offset)
    }

    /// Whether chunk `i` may hold a packet carrying every item of `required` (false only when
    /// the index proves it does not).
    pub fn chunk_may_match(&self, i: usize, required: &[u32]) -> bool {
        if required.is_empty() || !self.host_index || !self.chunks[i].indexed {
            return true;
        }
        let items = self.chunk_items(i);
        required.iter().all(|r| items.binary_search(r).is_ok())
    }

    /// The bytes of the `.idx` file.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(HEADER_LEN + self.chunks.len() * CHUNK_LEN + 8);
        b.extend_from_slice(MAGIC);
        b.extend_from_slice(&INDEX_VERSION.to_le_bytes());
        let flags = if self.host_index { FLAG_HOST_INDEX } else { 0 };
        b.extend_from_slice(&flags.to_le_bytes());
        b.extend_from_slice(&u32::from(self.link_type.0).to_le_bytes());
        b.extend_from_slice(&self.snaplen.to_le_bytes());
        b.extend_from_slice(&(self.chunks.len() as u32).to_le_bytes());
        for v in [
            self.packets,
            self.segment_len,
            self.first_ts,
            self.last_ts,
            self.items.len() as u64,
        ] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        debug_assert_eq!(b.len(), HEADER_LEN);
        for c in &self.chunks {
            b.extend_from_slice(&c.offset.to_le_bytes());
            b.extend_from_slice(&c.min_ts.to_le_bytes());
            b.extend_from_slice(&c.max_ts.to_le_bytes());
            b.extend_from_slice(&c.packets.to_le_bytes());
            b.extend_from_slice(&c.items_len.to_le_bytes());
            let flags = if c.indexed { 0 } else { CHUNK_UNINDEXED };
            b.extend_from_slice(&flags.to_le_bytes());
            b.extend_from_slice(&0u32.to_le_bytes());
        }
        for i in &self.items {
            b.extend_from_slice(&i.to_le_bytes());
        }
        let sum = checksum(&b);
        b.extend_from_slice(&sum.to_le_bytes());
        b
    }

    /// Parses `.idx` bytes; `path` is for error messages.
    pub fn decode(path: &Path, b: &[u8]) -> Result<SegmentIndex, Error> {
        let bad = |offset: usize, field: &'static str, detail: String| Error::Corrupt {
            path: path.to_path_buf(),
            offset: offset as u64,
            field,
            detail,
        };
        if b.len() < HEADER_LEN + 8 {
            return Err(bad(0, "header", format!("{} bytes is too short", b.len())));
        }
        if &b[..8] != MAGIC {
            return Err(bad(0, "magic", "not a trawl packet index".into()));
        }
        let u16_at = |o: usize| u16::from_le_bytes(b[o..o + 2].try_into().expect("2 bytes"));
        let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4 bytes"));
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8 bytes"));
        let version = u16_at(8);
        if version != INDEX_VERSION {
            return Err(bad(8, "version", format!("{version} (this trawl reads 1)")));
        }
        let body = b.len() - 8;
        let stored = u64_at(body);
        if checksum(&b[..body]) != stored {
            return Err(bad(body, "checksum", "does not match the contents".into()));
        }
        let flags = u16_at(10);
        let link = u32_at(12);
        let chunks_n = u32_at(20) as usize;
        let items_n = u64_at(56) as usize;
        let want = HEADER_LEN + chunks_n * CHUNK_LEN + items_n * 4;
        if want != body {
            return Err(bad(
                20,
                "chunk/item counts",
                format!("say {want} bytes, the file has {body}"),
            ));
        }
        let mut chunks = Vec::with_capacity(chunks_n);
        let mut items_start = 0u64;
        for i in 0..chunks_n {
            let o = HEADER_LEN + i * CHUNK_LEN;
            let items_len = u32_at(o + 28);
            chunks.push(Chunk {
                offset: u64_at(o),
                min_ts: u64_at(o + 8),
                max_ts: u64_at(o + 16),
                packets: u32_at(o + 24),
                items_len,
                indexed: u32_at(o + 32) & CHUNK_UNINDEXED == 0,
                items_start: items_start as u32,
            });
            items_start += u64::from(items_len);
        }
        if items_start != items_n as u64 {
            return Err(bad(
                56,
                "item count",
                format!("{items_n}, chunks name {items_start}"),
            ));
        }
        let io = HEADER_LEN + chunks_n * CHUNK_LEN;
        let items = (0..items_n).map(|i| u32_at(io + i * 4)).collect();
        let segment_len = u64_at(32);
        if chunks
            .windows(2)
            .any(|w| w[1].offset <= w[0].offset || w[1].offset > segment_len)
        {
            return Err(bad(HEADER_LEN, "chunk offsets", "not increasing".into()));
        }
        Ok(SegmentIndex {
            link_type: LinkType(link as u16),
            snaplen: u32_at(16),
            packets: u64_at(24),
            segment_len,
            first_ts: u64_at(40),
            last_ts: u64_at(48),
            host_index: flags & FLAG_HOST_INDEX != 0,
            chunks,
            items,
        })
    }

    /// The time range and packet count from an index's 64-byte header alone: enough to skip a
    /// segment without reading its chunk table (the full read checks the checksum).
    pub fn read_time_range(path: &Path) -> Result<(u64, u64, u64), Error> {
        use std::io::Read;
        let mut h = [0u8; HEADER_LEN];
        std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut h))
            .map_err(Error::io(path, "reading the index header"))?;
        let bad = |offset: u64, field: &'static str, detail: String| Error::Corrupt {
            path: path.to_path_buf(),
            offset,
            field,
            detail,
        };
        if &h[..8] != MAGIC {
            return Err(bad(0, "magic", "not a trawl packet index".into()));
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if version != INDEX_VERSION {
            return Err(bad(8, "version", format!("{version} (this trawl reads 1)")));
        }
        let u64_at = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().expect("8 bytes"));
        Ok((u64_at(40), u64_at(48), u64_at(24)))
    }

    /// Reads and parses an index file.
    pub fn read(path: &Path) -> Result<SegmentIndex, Error> {
        let b = std::fs::read(path).map_err(Error::io(path, "reading the index"))?;
        SegmentIndex::decode(path, &b)
    }

    /// Writes the index next to its segment atomically (temporary file, fsync, rename), so a
    /// reader sees no index or a whole one.
    pub fn write_atomic(&self, path: &Path) -> Result<(), Error> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let mut f = std::fs::File::create(&tmp).map_err(Error::io(&tmp, "creating the index"))?;
        f.write_all(&self.encode())
            .and_then(|()| f.sync_data())
            .map_err(Error::io(&tmp, "writing the index"))?;
        std::fs::rename(&tmp, path).map_err(Error::io(path, "renaming the index into place"))
    }
}

/// FNV-1a 64 over the index bytes: catches torn or edited files (not an adversary).
fn checksum(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// Builds an index while a segment is written (or scanned by repair).
pub(crate) struct IndexBuilder {
    index: SegmentIndex,
    every_packets: u32,
    every_ns: u64,
    open: Option<Chunk>,
    chunk_first_ts: u64,
    set: ItemSet,
}

impl IndexBuilder {
    pub fn new(
        link_type: LinkType,
        snaplen: u32,
        host_index: bool,
        every_packets: u32,
        every_ns: u64,
    ) -> IndexBuilder {
        IndexBuilder {
            index: SegmentIndex {
                link_type,
                snaplen,
                packets: 0,
                segment_len: 0,
                first_ts: u64::MAX,
                last_ts: 0,
                host_index,
                chunks: Vec::new(),
                items: Vec::new(),
            },
            every_packets: every_packets.max(1),
            every_ns: every_ns.max(1),
            open: None,
            chunk_first_ts: 0,
            set: ItemSet::new(),
        }
    }

    /// Records a packet whose record starts at file offset `offset`. `items` is `None` for a
    /// packet the host index cannot describe.
    #[inline]
    pub fn add(&mut self, offset: u64, ts: u64, items: Option<&[u32]>) {
        let full = match &self.open {
            None => true,
            Some(c) => {
                c.packets >= self.every_packets
                    || ts.abs_diff(self.chunk_first_ts) >= self.every_ns
                    || self.set.len() >= MAX_CHUNK_ITEMS
            }
        };
        if full {
            self.close_chunk();
            self.open = Some(Chunk {
                offset,
                packets: 0,
                min_ts: ts,
                max_ts: ts,
                indexed: true,
                items_start: 0,
                items_len: 0,
            });
            self.chunk_first_ts = ts;
        }
        let c = self.open.as_mut().expect("a chunk is open");
        c.packets += 1;
        c.min_ts = c.min_ts.min(ts);
        c.max_ts = c.max_ts.max(ts);
        if self.index.host_index {
            match items {
                Some(items) => items.iter().for_each(|&i| self.set.insert(i)),
                None => c.indexed = false,
            }
        }
        self.index.packets += 1;
        self.index.first_ts = self.index.first_ts.min(ts);
        self.index.last_ts = self.index.last_ts.max(ts);
    }

    fn close_chunk(&mut self) {
        if let Some(mut c) = self.open.take() {
            c.items_start = self.index.items.len() as u32;
            let start = self.index.items.len();
            self.set.drain_into(&mut self.index.items);
            self.index.items[start..].sort_unstable();
            c.items_len = (self.index.items.len() - start) as u32;
            self.index.chunks.push(c);
        }
    }

    /// Packets so far.
    pub fn packets(&self) -> u64 {
        self.index.packets
    }

    /// Earliest and latest timestamps so far (`None` before the first packet).
    pub fn time_range(&self) -> Option<(u64, u64)> {
        (self.index.packets > 0).then_some((self.index.first_ts, self.index.last_ts))
    }

    /// The index of a segment of `segment_len` bytes.
    pub fn finish(mut self, segment_len: u64) -> SegmentIndex {
        self.close_chunk();
        self.index.segment_len = segment_len;
        if self.index.packets == 0 {
            self.index.first_ts = 0;
        }
        self.index
    }
}

/// A small open-addressing set of items for the chunk being built: one multiply and a probe or
/// two per insert instead of pushing duplicates and sorting them.
struct ItemSet {
    slots: Vec<u32>,
    has_zero: bool,
    members: Vec<u32>,
}

impl ItemSet {
    const SLOTS: usize = MAX_CHUNK_ITEMS * 4;

    fn new() -> ItemSet {
        ItemSet {
            slots: vec![0; Self::SLOTS],
            has_zero: false,
            members: Vec::with_capacity(MAX_CHUNK_ITEMS + 4),
        }
    }

    fn len(&self) -> usize {
        self.members.len()
    }

    #[inline]
    fn insert(&mut self, item: u32) {
        if item == 0 {
            if !self.has_zero {
                self.has_zero = true;
                self.members.push(0);
            }
            return;
        }
        let mask = Self::SLOTS - 1;
        let mut i = (item.wrapping_mul(0x9e37_79b9) >> 18) as usize & mask;
        loop {
            match self.slots[i] {
                0 => {
                    self.slots[i] = item;
                    self.members.push(item);
                    return;
                }
                s if s == item => return,
                _ => i = (i + 1) & mask,
            }
        }
    }

    fn drain_into(&mut self, out: &mut Vec<u32>) {
        out.extend_from_slice(&self.members);
        if self.members.len() * 8 < Self::SLOTS {
            let mask = Self::SLOTS - 1;
            for &m in &self.members {
                // Clear by probing again: cheaper than wiping 64 KiB for a few items.
                let mut i = (m.wrapping_mul(0x9e37_79b9) >> 18) as usize & mask;
                while self.slots[i] != 0 {
                    self.slots[i] = 0;
                    i = (i + 1) & mask;
                }
            }
        } else {
            self.slots.fill(0);
        }
        self.members.clear();
        self.has_zero = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_chunks_and_round_trips() {
        let mut b = IndexBuilder::new(LinkType::ETHERNET, 65535, true, 3, 1_000);
        for i in 0..8u64 {
            let items = [7u32, 1000 + (i as u32 % 2)];
            b.add(
                24 + i * 100,
                10_000 + i * 10,
                (i != 5).then_some(&items[..]),
            );
        }
        // The time rule: a packet 1000 ns after the chunk's first starts a new chunk.
        b.add(900, 20_000, Some(&[0]));
        let idx = b.finish(1000);
        assert_eq!(idx.packets, 9);
        assert_eq!((idx.first_ts, idx.last_ts), (10_000, 20_000));
        let sizes: Vec<u32> = idx.chunks.iter().map(|c| c.packets).collect();
        assert_eq!(sizes, [3, 3, 2, 1]);
        assert_eq!(idx.chunk_items(0), &[7, 1000, 1001]);
        assert!(!idx.chunks[1].indexed);
        assert_eq!(idx.chunk_items(3), &[0]);
        assert_eq!(idx.chunk_end(3), 1000);
        assert!(idx.chunk_may_match(0, &[7, 1001]));
        assert!(!idx.chunk_may_match(0, &[7, 5]));
        assert!(
            idx.chunk_may_match(1, &[5]),
            "unindexed chunks always may match"
        );
        let bytes = idx.encode();
        let back = SegmentIndex::decode(Path::new("x.idx"), &bytes).unwrap();
        assert_eq!(back, idx);
        // Any flipped byte is caught.
        for at in [0, 9, 30, 70, bytes.len() - 12] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x40;
            assert!(
                SegmentIndex::decode(Path::new("x.idx"), &bad).is_err(),
                "{at}"
            );
        }
        let err = SegmentIndex::decode(Path::new("x.idx"), &bytes[..40]).unwrap_err();
        assert!(err.to_string().contains("x.idx: offset 0: header"), "{err}");
    }

    #[test]
    fn item_set_closes_chunks_when_large() {
        let mut b = IndexBuilder::new(LinkType::ETHERNET, 65535, true, 1 << 30, u64::MAX);
        for i in 0..5000u32 {
            b.add(u64::from(i) * 60, 1, Some(&[i * 2 + 1]));
        }
        let idx = b.finish(5000 * 60);
        assert_eq!(idx.chunks.len(), 2);
        assert_eq!(idx.chunks[0].packets as usize, MAX_CHUNK_ITEMS);
        assert_eq!(idx.chunk_items(1).len(), 5000 - MAX_CHUNK_ITEMS);
        assert!(idx.chunk_items(0).windows(2).all(|w| w[0] < w[1]));
    }
}
