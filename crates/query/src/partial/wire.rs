//! The binary form of a partial aggregate (schema version 3; byte by byte in
//! `docs/specs/distributed.md`): what a probe's `/api/v1/partial` sends and the coordinator
//! decodes, once per probe and query.
//!
//! Columnar and packed as the aggregate holds itself in memory: the attribute list, the scan's
//! counters, the decoding tables (IPv6 addresses, interface and probe names), then per context
//! key the packed row keys (ascending, in 16 byte planes) and the five metric columns, all
//! little-endian, in one
//! zstd frame with its checksum. Decoding is bounds-checked copying into the aggregation
//! table's records: no group key is decoded to text or re-encoded, nothing is allocated per
//! group, and the inflated document is bounded by what `max_groups` allows. Every flaw is an
//! [`Error::Partial`] naming the field and its byte offset in the inflated document.
use std::collections::HashSet;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv6Addr};

use super::{
    Inner, Layout, PartialAggregate, ScanStats, Tables, IFACE_SHIFT, NO_ADDR, PARTIAL_MAGIC,
    PARTIAL_VERSION, PROBE_SHIFT, TIME_MASK, V4_TAG,
};
use crate::error::Error;
use crate::plan::Attribute;
use trawl_store::hash::FxHashMap;

/// Bytes of the header before the zstd frame: magic, then the schema version (u32 LE).
pub(super) const HEADER_LEN: usize = 8;

/// Bytes of one group in the document: its key (16) and five metrics (40).
const GROUP_BYTES: usize = 56;

/// Inflated bytes allowed per group of `max_groups`: the group (56), its share of a context
/// header (12) and of the address table (two IPv6 addresses, 32), rounded up.
const BYTES_PER_GROUP: u64 = 128;

/// Inflated bytes allowed beyond the groups: attribute list, counters, error messages and
/// names.
const SLACK_BYTES: u64 = 16 << 20;

/// Most interface or probe names (their ids are 16 bits of a context key).
const MAX_NAMES: usize = 1 << 16;

/// The binary form of `p`: [`PARTIAL_MAGIC`], [`PARTIAL_VERSION`] (u32 LE), one zstd frame.
pub(super) fn to_bytes(p: &PartialAggregate) -> Vec<u8> {
    let doc = document(p);
    let mut out = Vec::with_capacity(HEADER_LEN + doc.len() / 4);
    out.extend_from_slice(PARTIAL_MAGIC);
    out.extend_from_slice(&PARTIAL_VERSION.to_le_bytes());
    // Level 1: a probe answers many queries. The frame's checksum makes a corrupted answer an
    // error, not different numbers; its content size lets the decoder allocate once.
    let compress = |out: Vec<u8>| -> std::io::Result<Vec<u8>> {
        let mut z = zstd::stream::Encoder::new(out, 1)?;
        z.include_checksum(true)?;
        z.set_pledged_src_size(Some(doc.len() as u64))?;
        z.write_all(&doc)?;
        z.finish()
    };
    // Writing to memory fails only when memory does (no partial answer is better).
    compress(out).unwrap_or_default()
}

/// The inflated document of `p`.
fn document(p: &PartialAggregate) -> Vec<u8> {
    let mut w = Vec::with_capacity(4096 + p.len() * GROUP_BYTES);
    put_u32(&mut w, p.attributes.len());
    for a in &p.attributes {
        put_str(&mut w, a.name());
    }
    for v in counters(&p.stats) {
        w.extend_from_slice(&v.to_le_bytes());
    }
    for list in [&p.stats.errors, &p.stats.ignored_files] {
        put_u32(&mut w, list.len());
        for s in list {
            put_str(&mut w, s);
        }
    }
    let t = &p.tables;
    put_u32(&mut w, t.ips.len());
    for ip in &t.ips {
        let v6 = match ip {
            IpAddr::V6(a) => *a,
            // Not reached: the tables hold IPv6 addresses only (IPv4 codes need none).
            IpAddr::V4(a) => a.to_ipv6_mapped(),
        };
        w.extend_from_slice(&v6.octets());
    }
    for names in [&t.ifaces, &t.probes] {
        put_u32(&mut w, names.len());
        for n in names {
            put_str(&mut w, n);
        }
    }
    let mut contexts: Vec<(u64, &Inner)> = p
        .maps
        .iter()
        .filter(|(_, m)| m.len() > 0)
        .map(|(&c, m)| (c, m))
        .collect();
    contexts.sort_unstable_by_key(|(c, _)| *c);
    put_u32(&mut w, contexts.len());
    let mut groups: Vec<(u128, [u64; 5])> = Vec::new();
    for (c, m) in contexts {
        groups.clear();
        groups.extend(m.iter().map(|(k, m)| {
            (
                k,
                [
                    m.fwd_packets,
                    m.rev_packets,
                    m.fwd_bytes,
                    m.rev_bytes,
                    m.flows,
                ],
            )
        }));
        // Ascending keys: the decoder checks them distinct in one comparison each.
        groups.sort_unstable_by_key(|g| g.0);
        w.extend_from_slice(&c.to_le_bytes());
        put_u32(&mut w, groups.len());
        // Byte planes, lowest byte first (every key's byte 0, then every key's byte 1, ...):
        // the packed layout puts the first attribute in the low bits, so ascending keys vary
        // most there; a plane of high bytes is long runs that zstd takes almost for free.
        for b in 0..16 {
            w.extend(groups.iter().map(|(k, _)| (k >> (8 * b)) as u8));
        }
        for col in 0..5 {
            for (_, m) in &groups {
                w.extend_from_slice(&m[col].to_le_bytes());
            }
        }
    }
    w
}

/// The scan counters in document order.
fn counters(s: &ScanStats) -> [u64; 10] {
    [
        s.blocks,
        s.blocks_scanned,
        s.blocks_pruned,
        s.blocks_failed,
        s.row_groups,
        s.row_groups_pruned,
        s.rows_scanned,
        s.rows_matched,
        s.bytes_scanned,
        s.column_chunks_general,
    ]
}

fn put_u32(w: &mut Vec<u8>, n: usize) {
    // Counts and lengths of an aggregate in memory fit 32 bits (names and messages are
    // short, groups are bounded by max_groups); saturate rather than wrap if not.
    w.extend_from_slice(&u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes());
}

fn put_str(w: &mut Vec<u8>, s: &str) {
    let b = &s.as_bytes()[..s.len().min(u32::MAX as usize)];
    put_u32(w, b.len());
    w.extend_from_slice(b);
}

/// Reads the binary form back (see the module doc); `max_groups` bounds the groups and the
/// inflated size.
pub(super) fn from_bytes(data: &[u8], max_groups: usize) -> Result<PartialAggregate, Error> {
    if data.len() < HEADER_LEN || &data[..4] != PARTIAL_MAGIC {
        return Err(Error::Partial(format!(
            "not a trawl partial aggregate ({} bytes, no {:?} magic)",
            data.len(),
            String::from_utf8_lossy(PARTIAL_MAGIC)
        )));
    }
    let version = u32::from_le_bytes([data[4], data[5], data[6], data[7]]);
    if version != PARTIAL_VERSION {
        return Err(Error::Partial(format!(
            "partial aggregate schema version {version} (this trawl reads {PARTIAL_VERSION})"
        )));
    }
    let limit = (max_groups as u64)
        .saturating_mul(BYTES_PER_GROUP)
        .saturating_add(SLACK_BYTES);
    let frame = &data[HEADER_LEN..];
    // The size the frame claims, trusted only up to the bound.
    let claimed = zstd::zstd_safe::get_frame_content_size(frame)
        .ok()
        .flatten()
        .unwrap_or(0)
        .min(limit);
    let mut doc = Vec::with_capacity(claimed as usize);
    zstd::stream::read::Decoder::with_buffer(frame)
        .and_then(|d| d.take(limit + 1).read_to_end(&mut doc))
        .map_err(|e| {
            Error::Partial(format!(
                "corrupt or truncated zstd data after byte {HEADER_LEN}: {e}"
            ))
        })?;
    if doc.len() as u64 > limit {
        return Err(Error::TooManyGroups(max_groups));
    }
    decode(&doc, max_groups)
}

/// A cursor over the inflated document; every read is bounds-checked.
struct Reader<'a> {
    doc: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    /// An error about `what` at byte `at`.
    fn flaw(&self, at: usize, what: &str, msg: impl std::fmt::Display) -> Error {
        Error::Partial(format!(
            "{what} at byte {at} of the inflated document: {msg}"
        ))
    }

    fn left(&self) -> usize {
        self.doc.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], Error> {
        if n > self.left() {
            return Err(self.flaw(
                self.at,
                what,
                format!("needs {n} bytes, {} left (truncated)", self.left()),
            ));
        }
        let s = &self.doc[self.at..self.at + n];
        self.at += n;
        Ok(s)
    }

    fn u32(&mut self, what: &str) -> Result<u32, Error> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self, what: &str) -> Result<u64, Error> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    /// A count of items of at least `width` bytes each, at most `most`: checked against the
    /// bytes left before anything is allocated for them.
    fn count(&mut self, what: &str, width: usize, most: usize) -> Result<usize, Error> {
        let at = self.at;
        let n = self.u32(what)? as usize;
        if n > most {
            return Err(self.flaw(at, what, format!("{n} (at most {most})")));
        }
        if n.saturating_mul(width) > self.left() {
            return Err(self.flaw(
                at,
                what,
                format!(
                    "{n} items of {width} bytes, {} bytes left (truncated)",
                    self.left()
                ),
            ));
        }
        Ok(n)
    }

    fn string(&mut self, what: &str) -> Result<String, Error> {
        let n = self.count(what, 1, usize::MAX)?;
        let at = self.at;
        let b = self.take(n, what)?;
        String::from_utf8(b.to_vec()).map_err(|e| self.flaw(at, what, format!("not UTF-8: {e}")))
    }

    fn strings(&mut self, what: &str, most: usize) -> Result<Vec<String>, Error> {
        let n = self.count(what, 4, most)?;
        (0..n).map(|_| self.string(what)).collect()
    }
}

/// Decodes the inflated document.
fn decode(doc: &[u8], max_groups: usize) -> Result<PartialAggregate, Error> {
    let mut r = Reader { doc, at: 0 };
    let attributes = attributes(&mut r)?;
    let stats = stats(&mut r)?;
    let tables = tables(&mut r, max_groups)?;
    let check = Checker::new(&attributes, &tables).map_err(|e| r.flaw(4, "attribute", e))?;
    let contexts = r.count("context count", 12 + GROUP_BYTES, max_groups)?;
    let mut maps: FxHashMap<u64, Inner> = FxHashMap::default();
    let mut total = 0usize;
    let mut previous: Option<u64> = None;
    for ci in 0..contexts {
        let at = r.at;
        let c = r.u64("context key")?;
        if previous.is_some_and(|p| p >= c) {
            return Err(r.flaw(at, "context key", format!("{c:#x} does not ascend")));
        }
        previous = Some(c);
        check
            .context(c)
            .map_err(|m| r.flaw(at, "context key", format!("{c:#x}: {m}")))?;
        let at = r.at;
        let n = r.u32("group count")? as usize;
        if n == 0 {
            return Err(r.flaw(at, "group count", format!("context {ci} has no group")));
        }
        total = total.saturating_add(n);
        if total > max_groups {
            return Err(Error::TooManyGroups(max_groups));
        }
        let keys_at = r.at;
        let planes = r.take(n.saturating_mul(16), "group keys")?;
        let columns = r.take(n.saturating_mul(40), "metric columns")?;
        // The keys from their 16 byte planes, a plane at a time (one allocation a context).
        let mut keys = vec![0u128; n];
        for (b, plane) in planes.chunks_exact(n).enumerate() {
            for (k, &byte) in keys.iter_mut().zip(plane) {
                *k |= u128::from(byte) << (8 * b);
            }
        }
        let key = |i: usize| keys[i];
        let mut before: Option<u128> = None;
        for i in 0..n {
            let k = key(i);
            // The place of its lowest byte (a key's bytes are a plane, n bytes, apart).
            let flaw = |m: String| {
                r.flaw(
                    keys_at + i,
                    "group key",
                    format!("context {ci} key {i}: {m}"),
                )
            };
            if before.is_some_and(|b| b >= k) {
                return Err(flaw("keys do not ascend".into()));
            }
            before = Some(k);
            check.key(k).map_err(flaw)?;
        }
        let metric = |col: usize, i: usize| {
            let at = (col * n + i) * 8;
            u64::from_le_bytes(columns[at..at + 8].try_into().unwrap_or_default())
        };
        let groups = (0..n).map(|i| {
            (
                key(i),
                [
                    metric(0, i),
                    metric(1, i),
                    metric(2, i),
                    metric(3, i),
                    metric(4, i),
                ],
            )
        });
        maps.insert(c, Inner::from_distinct(groups));
    }
    if r.left() > 0 {
        return Err(r.flaw(
            r.at,
            "end",
            format!("{} bytes after the last context", r.left()),
        ));
    }
    Ok(PartialAggregate {
        attributes,
        stats,
        max_groups,
        tables: std::sync::Arc::new(tables),
        maps,
    })
}

fn attributes(r: &mut Reader<'_>) -> Result<Vec<Attribute>, Error> {
    let n = r.count("attribute count", 4, 64)?;
    (0..n)
        .map(|_| {
            let at = r.at;
            let name = r.string("attribute")?;
            Attribute::parse(&name)
                .ok_or_else(|| r.flaw(at, "attribute", format!("unknown: {name:?}")))
        })
        .collect()
}

fn stats(r: &mut Reader<'_>) -> Result<ScanStats, Error> {
    let mut c = [0u64; 10];
    for v in &mut c {
        *v = r.u64("scan counters")?;
    }
    let [blocks, blocks_scanned, blocks_pruned, blocks_failed, row_groups, row_groups_pruned, rows_scanned, rows_matched, bytes_scanned, column_chunks_general] =
        c;
    Ok(ScanStats {
        blocks,
        blocks_scanned,
        blocks_pruned,
        blocks_failed,
        row_groups,
        row_groups_pruned,
        rows_scanned,
        rows_matched,
        bytes_scanned,
        column_chunks_general,
        errors: r.strings("scan error messages", usize::MAX)?,
        ignored_files: r.strings("ignored files", usize::MAX)?,
    })
}

fn tables(r: &mut Reader<'_>, max_groups: usize) -> Result<Tables, Error> {
    // Two addresses per group at most are referenced: a longer table is not an aggregate's.
    let n = r.count("IPv6 address count", 16, max_groups.saturating_mul(2))?;
    let mut t = Tables {
        ips: Vec::with_capacity(n),
        ..Tables::default()
    };
    t.ip_ids.reserve(n);
    for id in 0..n as u32 {
        let at = r.at;
        let b: [u8; 16] = r.take(16, "IPv6 address")?.try_into().unwrap_or_default();
        let ip = IpAddr::V6(Ipv6Addr::from(b));
        if let Some(first) = t.ip_ids.insert(ip, id) {
            return Err(r.flaw(
                at,
                "IPv6 address",
                format!("{ip} listed twice (ids {first} and {id})"),
            ));
        }
        t.ips.push(ip);
    }
    t.ifaces = names(r, "interface names")?;
    t.probes = names(r, "probe names")?;
    Ok(t)
}

/// A list of distinct names.
fn names(r: &mut Reader<'_>, what: &str) -> Result<Vec<String>, Error> {
    let at = r.at;
    let names = r.strings(what, MAX_NAMES)?;
    let mut seen = HashSet::with_capacity(names.len());
    for n in &names {
        if !seen.insert(n.as_str()) {
            return Err(r.flaw(at, what, format!("{n:?} listed twice")));
        }
    }
    Ok(names)
}

/// What a packed key and a context key of these attributes and tables may hold.
struct Checker {
    layout: Layout,
    /// Bits a row key may set.
    key_mask: u128,
    /// Address attributes grouped by, with their bit positions.
    addrs: Vec<(Attribute, u32)>,
    /// Attributes whose codes stop short of their width (countries, tunnel types), with
    /// the largest code.
    bounded: Vec<(Attribute, u64)>,
    ips: usize,
    ifaces: Option<usize>,
    probes: Option<usize>,
    time: bool,
}

impl Checker {
    fn new(attributes: &[Attribute], t: &Tables) -> Result<Checker, Error> {
        let has = |a| attributes.contains(&a);
        let layout = Layout::of(attributes)?;
        let bounded = [
            (Attribute::Scountry, 26 * 26),
            (Attribute::Dcountry, 26 * 26),
            (
                Attribute::TunnelType,
                trawl_flow::TunnelType::ALL.len() as u64 - 1,
            ),
        ];
        Ok(Checker {
            layout,
            key_mask: layout.mask(),
            addrs: [
                Attribute::Sip,
                Attribute::Dip,
                Attribute::TunnelSrc,
                Attribute::TunnelDst,
            ]
            .into_iter()
            .filter(|&a| has(a))
            .map(|a| (a, layout.shift(a)))
            .collect(),
            bounded: bounded.into_iter().filter(|&(a, _)| has(a)).collect(),
            ips: t.ips.len(),
            ifaces: has(Attribute::Iface).then_some(t.ifaces.len()),
            probes: has(Attribute::Probe).then_some(t.probes.len()),
            time: has(Attribute::Time),
        })
    }

    fn key(&self, k: u128) -> Result<(), String> {
        if k & !self.key_mask != 0 {
            return Err(format!(
                "{k:#x} sets bits of attributes not grouped by ({:#x})",
                k & !self.key_mask
            ));
        }
        for &(a, s) in &self.addrs {
            let code = ((k >> s) as u64) & ((1 << 33) - 1);
            let optional = matches!(a, Attribute::TunnelSrc | Attribute::TunnelDst);
            if code & V4_TAG == 0 && code as usize >= self.ips && !(optional && code == NO_ADDR) {
                return Err(format!(
                    "{} address id {code} beyond the {} IPv6 addresses listed",
                    a.name(),
                    self.ips
                ));
            }
        }
        for &(a, most) in &self.bounded {
            let code = self.layout.get(k, a);
            if code > most {
                return Err(format!("{} code {code} beyond {most}", a.name()));
            }
        }
        Ok(())
    }

    fn context(&self, c: u64) -> Result<(), String> {
        let id = |what: &str, v: u64, listed: Option<usize>| match listed {
            None if v != 0 => Err(format!("{what} id {v} but {what} is not grouped by")),
            Some(n) if v as usize >= n => Err(format!("{what} id {v} beyond the {n} names listed")),
            _ => Ok(()),
        };
        id("iface", c >> IFACE_SHIFT, self.ifaces)?;
        id("probe", (c >> PROBE_SHIFT) & 0xffff, self.probes)?;
        if !self.time && c & TIME_MASK != 0 {
            return Err("a time bucket but time is not grouped by".into());
        }
        Ok(())
    }
}
