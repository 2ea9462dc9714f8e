//! The partial aggregate: what one scan (one worker, one probe) produces, merged by addition.
//! Its serialised form (`PartialAggregate::to_json`, documented in `docs/query.md`) is what
//! `trawl query --partial` prints; [`PartialAggregate::to_bytes`] is the same document
//! behind a magic and schema version, zstd-compressed: what a probe's `/api/v1/partial`
//! returns to the coordinator of a fleet query (`docs/specs/distributed.md`).
use std::io::Read;
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use trawl_store::hash::FxHashMap;

use crate::error::Error;
use crate::plan::Attribute;

/// Version of the serialised partial aggregate.
pub const PARTIAL_VERSION: u32 = 1;

/// The first bytes of the binary form ([`PartialAggregate::to_bytes`]).
pub const PARTIAL_MAGIC: &[u8; 4] = b"TRPA";

/// Bytes of the binary form's header: magic, then the schema version (u32, little-endian).
const HEADER_LEN: usize = 8;

/// The summed metrics of a group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Metrics {
    /// Initiator → responder packets.
    pub fwd_packets: u64,
    /// Responder → initiator packets.
    pub rev_packets: u64,
    /// Initiator → responder bytes.
    pub fwd_bytes: u64,
    /// Responder → initiator bytes.
    pub rev_bytes: u64,
    /// Stored flow rows (one per flow and 5-minute block it was active in).
    pub flows: u64,
}

impl Metrics {
    /// Adds `o`.
    #[inline]
    pub fn add(&mut self, o: &Metrics) {
        self.fwd_packets = self.fwd_packets.wrapping_add(o.fwd_packets);
        self.rev_packets = self.rev_packets.wrapping_add(o.rev_packets);
        self.fwd_bytes = self.fwd_bytes.wrapping_add(o.fwd_bytes);
        self.rev_bytes = self.rev_bytes.wrapping_add(o.rev_bytes);
        self.flows = self.flows.wrapping_add(o.flows);
    }
    /// Packets both ways.
    pub fn packets(&self) -> u64 {
        self.fwd_packets + self.rev_packets
    }
    /// Bytes both ways.
    pub fn bytes(&self) -> u64 {
        self.fwd_bytes + self.rev_bytes
    }
}

/// The attribute values of a group (attributes not grouped by are `None`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct GroupKey {
    /// Block start rounded to the resolution, ns.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub time_ns: Option<u64>,
    /// Interface.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub iface: Option<String>,
    /// Initiator address.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sip: Option<IpAddr>,
    /// Responder address.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dip: Option<IpAddr>,
    /// Initiator port.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sport: Option<u16>,
    /// Responder port.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dport: Option<u16>,
    /// IP protocol number.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub proto: Option<u8>,
    /// VLAN id.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub vlan: Option<u16>,
    /// The probe that answered (fleet queries only).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub probe: Option<String>,
}

/// Counters of a scan.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanStats {
    /// Blocks of the time range and interfaces.
    pub blocks: u64,
    /// Of those, blocks read.
    pub blocks_scanned: u64,
    /// Blocks skipped whole because statistics showed no row could match.
    pub blocks_pruned: u64,
    /// Blocks that could not be read (their errors are in `errors`).
    pub blocks_failed: u64,
    /// Row groups in the blocks opened.
    pub row_groups: u64,
    /// Row groups skipped by statistics.
    pub row_groups_pruned: u64,
    /// Rows read.
    pub rows_scanned: u64,
    /// Rows that matched the condition.
    pub rows_matched: u64,
    /// Bytes of the block files read.
    pub bytes_scanned: u64,
    /// Column chunks read through the general Parquet reader because the direct page
    /// decoder does not handle them (files written by other tools; 0 for trawl's own).
    #[serde(default)]
    pub column_chunks_general: u64,
    /// One message per failed block: file and what was wrong.
    pub errors: Vec<String>,
    /// Parquet files in the database that are not blocks (misnamed or misplaced), so no query
    /// reads them: their paths.
    #[serde(default)]
    pub ignored_files: Vec<String>,
}

impl ScanStats {
    /// Adds another scan's counters.
    pub fn merge(&mut self, o: &ScanStats) {
        self.blocks += o.blocks;
        self.blocks_scanned += o.blocks_scanned;
        self.blocks_pruned += o.blocks_pruned;
        self.blocks_failed += o.blocks_failed;
        self.row_groups += o.row_groups;
        self.row_groups_pruned += o.row_groups_pruned;
        self.rows_scanned += o.rows_scanned;
        self.rows_matched += o.rows_matched;
        self.bytes_scanned += o.bytes_scanned;
        self.column_chunks_general += o.column_chunks_general;
        self.errors.extend(o.errors.iter().cloned());
        self.ignored_files.extend(o.ignored_files.iter().cloned());
    }
}

/// Decoding tables of packed group keys: IPv6 address ids and interface ids index these.
#[derive(Clone, Debug, Default)]
pub(crate) struct Tables {
    /// IPv6 addresses by id.
    pub ips: Vec<IpAddr>,
    pub ip_ids: FxHashMap<IpAddr, u32>,
    pub ifaces: Vec<String>,
    /// Probe names by id (fleet queries).
    pub probes: Vec<String>,
}

/// Tag bit of an address code: set for IPv4 (the low 32 bits are the address itself, no
/// table needed), clear for IPv6 (the low 32 bits are an id into [`Tables::ips`]).
pub(crate) const V4_TAG: u64 = 1 << 32;

impl Tables {
    /// The 33-bit code of `ip`, interning IPv6 addresses.
    pub(crate) fn ip_code(&mut self, ip: IpAddr) -> u64 {
        match ip {
            IpAddr::V4(a) => V4_TAG | u64::from(u32::from(a)),
            IpAddr::V6(_) => {
                let n = self.ips.len() as u32;
                let id = *self.ip_ids.entry(ip).or_insert(n);
                if id == n {
                    self.ips.push(ip);
                }
                u64::from(id)
            }
        }
    }

    /// The address of a code.
    pub(crate) fn ip(&self, code: u64) -> IpAddr {
        if code & V4_TAG != 0 {
            IpAddr::V4((code as u32).into())
        } else {
            self.ips
                .get(code as usize)
                .copied()
                .unwrap_or(IpAddr::V4(0.into()))
        }
    }
    fn iface_id(&mut self, name: &str) -> u32 {
        intern(&mut self.ifaces, name)
    }
    fn probe_id(&mut self, name: &str) -> u32 {
        intern(&mut self.probes, name)
    }
}

/// The index of `name` in `names`, added when missing.
fn intern(names: &mut Vec<String>, name: &str) -> u32 {
    match names.iter().position(|i| i == name) {
        Some(i) => i as u32,
        None => {
            names.push(name.to_string());
            names.len() as u32 - 1
        }
    }
}

/// Bit position of each attribute in a packed row key (sip code 33 bits, dip code 33, sport 16,
/// dport 16, proto 8, vlan 16: 122 bits). Interface id and time bucket live in the per-block
/// context key.
pub(crate) fn shift(a: Attribute) -> u32 {
    match a {
        Attribute::Sip => 89,
        Attribute::Dip => 56,
        Attribute::Sport => 40,
        Attribute::Dport => 24,
        Attribute::Proto => 16,
        Attribute::Vlan | Attribute::Iface | Attribute::Time | Attribute::Probe => 0,
    }
}

/// Bits of a context key below the interface id.
const IFACE_SHIFT: u32 = 48;
/// Bits of a context key below the probe id.
const PROBE_SHIFT: u32 = 32;
/// The time bucket's bits of a context key (5-minute units: 32 bits reach 40,000 years).
pub(crate) const TIME_MASK: u64 = (1 << PROBE_SHIFT) - 1;

/// Context key of a block: interface id in the top 16 bits, probe id in the next 16, time
/// bucket (in 5-minute units) below; 0 for attributes not grouped by.
pub(crate) fn context(iface: Option<u32>, probe: Option<u32>, time_ns: Option<u64>) -> u64 {
    (u64::from(iface.unwrap_or(0)) << IFACE_SHIFT)
        | (u64::from(probe.unwrap_or(0) & 0xffff) << PROBE_SHIFT)
        | time_ns.map_or(0, |t| (t / trawl_store::BLOCK_NS) & TIME_MASK)
}

/// Groups of one context: packed row key → metrics.
pub(crate) type Inner = crate::agg::AggTable;

/// Groups and their metrics, plus the scan's counters. Held packed (addresses as ids into a
/// table, attributes as bit fields) so merging and top-N never touch the full key; decoded to
/// [`GroupKey`]s for output and for the serialised form.
#[derive(Clone, Debug, Default)]
pub struct PartialAggregate {
    /// Grouped-by attributes.
    pub attributes: Vec<Attribute>,
    /// Scan counters.
    pub stats: ScanStats,
    /// Most groups allowed (see [`crate::Query::max_groups`]).
    pub max_groups: usize,
    pub(crate) tables: Arc<Tables>,
    pub(crate) maps: FxHashMap<u64, Inner>,
}

#[derive(Serialize, Deserialize)]
struct Wire {
    version: u32,
    attributes: Vec<String>,
    groups: Vec<WireGroup>,
    stats: ScanStats,
}

#[derive(Serialize, Deserialize)]
struct WireGroup {
    key: GroupKey,
    #[serde(flatten)]
    metrics: Metrics,
}

impl PartialAggregate {
    /// An empty aggregate.
    pub fn new(attributes: Vec<Attribute>, max_groups: usize) -> PartialAggregate {
        PartialAggregate {
            attributes,
            max_groups,
            ..PartialAggregate::default()
        }
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.maps.values().map(|m| m.len()).sum()
    }

    /// Whether there is no group.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub(crate) fn decode(&self, ctx: u64, k: u128) -> GroupKey {
        let has = |a| self.attributes.contains(&a);
        let field =
            |a: Attribute, bits: u32| -> u64 { ((k >> shift(a)) & ((1u128 << bits) - 1)) as u64 };
        let t = &self.tables;
        GroupKey {
            time_ns: has(Attribute::Time).then_some((ctx & TIME_MASK) * trawl_store::BLOCK_NS),
            iface: has(Attribute::Iface).then(|| {
                t.ifaces
                    .get((ctx >> IFACE_SHIFT) as usize)
                    .cloned()
                    .unwrap_or_default()
            }),
            sip: has(Attribute::Sip).then(|| t.ip(field(Attribute::Sip, 33))),
            dip: has(Attribute::Dip).then(|| t.ip(field(Attribute::Dip, 33))),
            sport: has(Attribute::Sport).then(|| field(Attribute::Sport, 16) as u16),
            dport: has(Attribute::Dport).then(|| field(Attribute::Dport, 16) as u16),
            proto: has(Attribute::Proto).then(|| field(Attribute::Proto, 8) as u8),
            vlan: has(Attribute::Vlan).then(|| field(Attribute::Vlan, 16) as u16),
            probe: has(Attribute::Probe).then(|| {
                t.probes
                    .get(((ctx >> PROBE_SHIFT) & 0xffff) as usize)
                    .cloned()
                    .unwrap_or_default()
            }),
        }
    }

    fn encode(tables: &mut Tables, key: &GroupKey) -> (u64, u128) {
        let ctx = context(
            key.iface.as_deref().map(|i| tables.iface_id(i)),
            key.probe.as_deref().map(|p| tables.probe_id(p)),
            key.time_ns,
        );
        let mut k = 0u128;
        if let Some(ip) = key.sip {
            k |= u128::from(tables.ip_code(ip)) << shift(Attribute::Sip);
        }
        if let Some(ip) = key.dip {
            k |= u128::from(tables.ip_code(ip)) << shift(Attribute::Dip);
        }
        k |= u128::from(key.sport.unwrap_or(0)) << shift(Attribute::Sport);
        k |= u128::from(key.dport.unwrap_or(0)) << shift(Attribute::Dport);
        k |= u128::from(key.proto.unwrap_or(0)) << shift(Attribute::Proto);
        k |= u128::from(key.vlan.unwrap_or(0)) << shift(Attribute::Vlan);
        (ctx, k)
    }

    /// Every group, decoded (unordered).
    pub fn groups(&self) -> Vec<(GroupKey, Metrics)> {
        self.maps
            .iter()
            .flat_map(|(&c, m)| m.iter().map(move |(k, v)| (self.decode(c, k), v)))
            .collect()
    }

    /// Adds `other`'s groups and counters. Fails when the union holds more than `max_groups`
    /// groups, or when the attributes differ.
    pub fn merge(&mut self, mut other: PartialAggregate) -> Result<(), Error> {
        if other.attributes != self.attributes {
            return Err(Error::Partial(
                "partial aggregates group by different attributes".into(),
            ));
        }
        self.stats.merge(&other.stats);
        if !Arc::ptr_eq(&self.tables, &other.tables) && !other.is_empty() {
            if self.is_empty()
                && self.tables.ips.is_empty()
                && self.tables.ifaces.is_empty()
                && self.tables.probes.is_empty()
            {
                self.tables = other.tables.clone();
            } else {
                // Another probe's ids: re-encode its groups with this aggregate's tables.
                let groups = other.groups();
                let tables = Arc::make_mut(&mut self.tables);
                other.maps.clear();
                for (g, m) in groups {
                    let (c, k) = Self::encode(tables, &g);
                    other.maps.entry(c).or_default().add(k, &m);
                }
            }
        }
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        for (c, theirs) in other.maps {
            let mine = self.maps.remove(&c).unwrap_or_default();
            self.maps.insert(c, mine.merge(theirs, threads));
        }
        if self.len() > self.max_groups {
            return Err(Error::TooManyGroups(self.max_groups));
        }
        Ok(())
    }

    /// Merges `other` as the aggregate of another probe on the same link (a pair, docs/specs/
    /// distributed.md): per group, the metrics of the one that saw more bytes (then more
    /// packets; on a tie this aggregate's) are kept, never the sum, so a flow both saw counts
    /// once. The scan counters are added (both probes did the work). Fails like
    /// [`PartialAggregate::merge`].
    pub fn merge_larger(&mut self, other: PartialAggregate) -> Result<(), Error> {
        if other.attributes != self.attributes {
            return Err(Error::Partial(
                "partial aggregates group by different attributes".into(),
            ));
        }
        let mut best: FxHashMap<GroupKey, Metrics> = self.groups().into_iter().collect();
        for (key, m) in other.groups() {
            let kept = best.entry(key).or_default();
            if (m.bytes(), m.packets()) > (kept.bytes(), kept.packets()) {
                *kept = m;
            }
        }
        // Rebuilt from the decoded groups: a pair is two answers, not the fleet's hundreds.
        let mut tables = Tables::default();
        let mut maps: FxHashMap<u64, Inner> = FxHashMap::default();
        for (key, m) in best {
            let (c, k) = Self::encode(&mut tables, &key);
            maps.entry(c).or_default().add(k, &m);
        }
        self.tables = Arc::new(tables);
        self.maps = maps;
        self.stats.merge(&other.stats);
        if self.len() > self.max_groups {
            return Err(Error::TooManyGroups(self.max_groups));
        }
        Ok(())
    }

    /// The documented serialised form (JSON).
    pub fn to_json(&self) -> String {
        let mut groups: Vec<WireGroup> = self
            .groups()
            .into_iter()
            .map(|(key, metrics)| WireGroup { key, metrics })
            .collect();
        groups.sort_by(|a, b| a.key.cmp(&b.key));
        let w = Wire {
            version: PARTIAL_VERSION,
            attributes: self
                .attributes
                .iter()
                .map(|a| a.name().to_string())
                .collect(),
            groups,
            stats: self.stats.clone(),
        };
        serde_json::to_string(&w).unwrap_or_default()
    }

    /// The binary form a probe sends: [`PARTIAL_MAGIC`], the schema version
    /// ([`PARTIAL_VERSION`], u32 little-endian), then the JSON document of
    /// [`PartialAggregate::to_json`] as one zstd frame.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_LEN + 1024);
        out.extend_from_slice(PARTIAL_MAGIC);
        out.extend_from_slice(&PARTIAL_VERSION.to_le_bytes());
        // Level 1: the document is mostly repeated keys, and a probe answers many queries.
        // The frame's checksum makes a corrupted answer an error, not different numbers.
        let compress = |out: Vec<u8>| -> std::io::Result<Vec<u8>> {
            let mut z = zstd::stream::Encoder::new(out, 1)?;
            z.include_checksum(true)?;
            std::io::Write::write_all(&mut z, self.to_json().as_bytes())?;
            z.finish()
        };
        // Writing to memory fails only when memory does (no partial answer is better).
        compress(out).unwrap_or_default()
    }

    /// Reads the binary form back. Every flaw is an [`Error::Partial`] naming it: a wrong
    /// magic or schema version, a corrupt or truncated zstd frame, a document over the size
    /// `max_groups` allows (so a hostile probe cannot make the coordinator inflate without
    /// bound), a document that does not parse.
    pub fn from_bytes(data: &[u8], max_groups: usize) -> Result<PartialAggregate, Error> {
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
        // A group's JSON is about 150 bytes; 1 KiB each is generous.
        let limit = (max_groups as u64)
            .saturating_mul(1024)
            .saturating_add(1 << 20);
        let mut text = Vec::new();
        zstd::stream::read::Decoder::new(&data[HEADER_LEN..])
            .and_then(|d| d.take(limit + 1).read_to_end(&mut text))
            .map_err(|e| {
                Error::Partial(format!(
                    "corrupt or truncated zstd data after byte {HEADER_LEN}: {e}"
                ))
            })?;
        if text.len() as u64 > limit {
            return Err(Error::TooManyGroups(max_groups));
        }
        let text = std::str::from_utf8(&text)
            .map_err(|e| Error::Partial(format!("the document is not UTF-8: {e}")))?;
        Self::from_json(text, max_groups)
    }

    /// The aggregate of the probe `name` as part of a fleet query grouped by `attributes`:
    /// its groups (grouped by `attributes` without [`Attribute::Probe`]) keyed by the probe too
    /// when `attributes` holds it. Fails when the probe grouped by other attributes.
    pub fn for_probe(
        mut self,
        name: &str,
        attributes: &[Attribute],
    ) -> Result<PartialAggregate, Error> {
        let local: Vec<Attribute> = attributes
            .iter()
            .copied()
            .filter(|&a| a != Attribute::Probe)
            .collect();
        if self.attributes != local {
            return Err(Error::Partial(format!(
                "the probe grouped by {:?}, not the {:?} asked",
                self.attributes, local
            )));
        }
        if local.len() != attributes.len() {
            // The probe's id is 0 in its own tables, and a context key holds probe id 0
            // already: only the table and the attribute list change.
            let tables = Arc::make_mut(&mut self.tables);
            tables.probes = vec![name.to_string()];
        }
        self.attributes = attributes.to_vec();
        Ok(self)
    }

    /// Reads the serialised form back.
    pub fn from_json(s: &str, max_groups: usize) -> Result<PartialAggregate, Error> {
        let w: Wire = serde_json::from_str(s).map_err(|e| Error::Partial(e.to_string()))?;
        if w.version != PARTIAL_VERSION {
            return Err(Error::Partial(format!(
                "partial aggregate version {} (this trawl reads {PARTIAL_VERSION})",
                w.version
            )));
        }
        let attributes = w
            .attributes
            .iter()
            .map(|a| {
                Attribute::parse(a)
                    .ok_or_else(|| Error::Partial(format!("unknown attribute {a:?}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut tables = Tables::default();
        let mut maps: FxHashMap<u64, Inner> = FxHashMap::default();
        for g in w.groups {
            // Values of attributes not grouped by would make keys that decode alike.
            let key = only(g.key, &attributes);
            let (c, k) = Self::encode(&mut tables, &key);
            maps.entry(c).or_default().add(k, &g.metrics);
        }
        let p = PartialAggregate {
            attributes,
            stats: w.stats,
            max_groups,
            tables: Arc::new(tables),
            maps,
        };
        if p.len() > max_groups {
            return Err(Error::TooManyGroups(max_groups));
        }
        Ok(p)
    }
}

/// `key` without the values of attributes not in `attributes`.
fn only(key: GroupKey, attributes: &[Attribute]) -> GroupKey {
    let has = |a| attributes.contains(&a);
    GroupKey {
        time_ns: key.time_ns.filter(|_| has(Attribute::Time)),
        iface: key.iface.filter(|_| has(Attribute::Iface)),
        sip: key.sip.filter(|_| has(Attribute::Sip)),
        dip: key.dip.filter(|_| has(Attribute::Dip)),
        sport: key.sport.filter(|_| has(Attribute::Sport)),
        dport: key.dport.filter(|_| has(Attribute::Dport)),
        proto: key.proto.filter(|_| has(Attribute::Proto)),
        vlan: key.vlan.filter(|_| has(Attribute::Vlan)),
        probe: key.probe.filter(|_| has(Attribute::Probe)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partial(groups: &[(u16, u64)]) -> PartialAggregate {
        let wire = Wire {
            version: PARTIAL_VERSION,
            attributes: vec!["dport".into()],
            groups: groups
                .iter()
                .map(|&(p, b)| WireGroup {
                    key: GroupKey {
                        dport: Some(p),
                        ..GroupKey::default()
                    },
                    metrics: Metrics {
                        fwd_bytes: b,
                        flows: 1,
                        ..Metrics::default()
                    },
                })
                .collect(),
            stats: ScanStats {
                rows_scanned: groups.len() as u64,
                ..ScanStats::default()
            },
        };
        PartialAggregate::from_json(&serde_json::to_string(&wire).unwrap(), 3).unwrap()
    }

    #[test]
    fn merges_and_round_trips() {
        let mut a = partial(&[(80, 10), (443, 5)]);
        a.merge(partial(&[(443, 7)])).unwrap();
        let back = PartialAggregate::from_json(&a.to_json(), 3).unwrap();
        let sorted = |p: &PartialAggregate| {
            let mut g = p.groups();
            g.sort_by(|x, y| x.0.cmp(&y.0));
            g
        };
        assert_eq!(sorted(&back), sorted(&a));
        let back_groups: std::collections::HashMap<GroupKey, Metrics> =
            back.groups().into_iter().collect();
        assert_eq!(back.stats.rows_scanned, 3);
        let k443 = GroupKey {
            dport: Some(443),
            ..GroupKey::default()
        };
        assert_eq!(back_groups[&k443].fwd_bytes, 12);
        assert_eq!(back_groups[&k443].flows, 2);
        assert!(a.to_json().starts_with(
            r#"{"version":1,"attributes":["dport"],"groups":[{"key":{"dport":80},"fwd_packets":0"#
        ));
        let err = a.merge(partial(&[(1, 1), (2, 2)])).unwrap_err();
        assert!(matches!(err, Error::TooManyGroups(3)));
    }

    #[test]
    fn merge_larger_keeps_each_groups_larger_side() {
        let mut a = partial(&[(80, 10), (443, 5)]);
        a.merge_larger(partial(&[(443, 7), (53, 1)])).unwrap();
        let mut g: Vec<(Option<u16>, u64, u64)> = a
            .groups()
            .into_iter()
            .map(|(k, m)| (k.dport, m.fwd_bytes, m.flows))
            .collect();
        g.sort();
        assert_eq!(
            g,
            vec![(Some(53), 1, 1), (Some(80), 10, 1), (Some(443), 7, 1)]
        );
        assert_eq!(a.stats.rows_scanned, 4);
        let same = partial(&[(80, 10), (443, 5)]);
        let mut twice = same.clone();
        twice.merge_larger(same.clone()).unwrap();
        assert_eq!(
            twice
                .to_json()
                .replace("\"rows_scanned\":4", "\"rows_scanned\":2"),
            same.to_json()
        );
    }

    #[test]
    fn binary_form_round_trips_and_names_its_flaws() {
        let a = partial(&[(80, 10), (443, 5)]);
        let bytes = a.to_bytes();
        assert_eq!(&bytes[..8], b"TRPA\x01\0\0\0");
        let back = PartialAggregate::from_bytes(&bytes, 3).unwrap();
        assert_eq!(back.to_json(), a.to_json());
        let msg = |r: Result<PartialAggregate, Error>| r.unwrap_err().to_string();
        let truncated = msg(PartialAggregate::from_bytes(&bytes[..bytes.len() - 3], 3));
        assert!(
            truncated.contains("corrupt or truncated zstd"),
            "{truncated}"
        );
        let mut v2 = bytes.clone();
        v2[4] = 2;
        let version = msg(PartialAggregate::from_bytes(&v2, 3));
        assert!(
            version.contains("schema version 2 (this trawl reads 1)"),
            "{version}"
        );
        let magic = msg(PartialAggregate::from_bytes(b"{\"version\":1}", 3));
        assert!(magic.contains("no \"TRPA\" magic"), "{magic}");
        let mut corrupt = bytes.clone();
        let mid = corrupt.len() / 2;
        corrupt[mid] ^= 0xff;
        assert!(PartialAggregate::from_bytes(&corrupt, 3).is_err());
    }

    #[test]
    fn for_probe_keys_groups_by_probe_and_merges_probes_apart() {
        let attrs = vec![Attribute::Dport, Attribute::Probe];
        let mut a = partial(&[(80, 10), (443, 5)])
            .for_probe("fra1", &attrs)
            .unwrap();
        a.max_groups = 10;
        a.merge(partial(&[(443, 7)]).for_probe("ams1", &attrs).unwrap())
            .unwrap();
        let mut g: Vec<(Option<String>, Option<u16>, u64)> = a
            .groups()
            .into_iter()
            .map(|(k, m)| (k.probe, k.dport, m.fwd_bytes))
            .collect();
        g.sort();
        let p = |s: &str| Some(s.to_string());
        assert_eq!(
            g,
            vec![
                (p("ams1"), Some(443), 7),
                (p("fra1"), Some(80), 10),
                (p("fra1"), Some(443), 5)
            ]
        );
        let wrong = partial(&[(1, 1)]).for_probe("x", &[Attribute::Sip]);
        assert!(wrong.unwrap_err().to_string().contains("grouped by"));
    }
}
