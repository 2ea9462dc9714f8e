//! The partial aggregate: what one scan (one worker, one probe) produces, merged by addition.
//! Its serialised form (`PartialAggregate::to_json`, documented in `docs/query.md`) is what
//! `trawl query --partial` prints; [`PartialAggregate::to_bytes`] is its binary, columnar
//! form (module `wire`): what a probe's `/api/v1/partial` returns to the coordinator of a
//! fleet query (`docs/specs/distributed.md`).
use std::cmp::Ordering;
use std::net::IpAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use trawl_store::hash::FxHashMap;

use crate::error::Error;
use crate::plan::Attribute;

mod wire;

/// Schema version of the binary form ([`PartialAggregate::to_bytes`]), after its magic.
/// Version 1 was the JSON document zstd-compressed; 2 columnar with a fixed bit position per
/// attribute in a packed key; 3 packs the attributes asked for in their order (`Layout`)
/// and knows the enrichment and tunnel attributes.
pub const PARTIAL_VERSION: u32 = 3;

/// Version of the JSON document ([`PartialAggregate::to_json`], `trawl query --partial`).
pub const PARTIAL_JSON_VERSION: u32 = 1;

/// The first bytes of the binary form ([`PartialAggregate::to_bytes`]).
pub const PARTIAL_MAGIC: &[u8; 4] = b"TRPA";

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
    /// Application label (`trawl_flow::App::name`; empty: rows without one).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub app: Option<String>,
    /// Autonomous system of the initiator address (0: not known).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sas: Option<u32>,
    /// Autonomous system of the responder address (0: not known).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub das: Option<u32>,
    /// Country of the initiator address (two letters; empty: not known).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub scountry: Option<String>,
    /// Country of the responder address (two letters; empty: not known).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub dcountry: Option<String>,
    /// The outer tunnel's type (`trawl_flow::TunnelType::name`; empty: not tunnelled).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tunnel_type: Option<String>,
    /// The outer header's source address as text (empty: not tunnelled).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tunnel_src: Option<String>,
    /// The outer header's destination address as text (empty: not tunnelled).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tunnel_dst: Option<String>,
}

impl GroupKey {
    /// The attributes of a key's fields in their order: the order its derived `Ord` compares
    /// them in, which breaks ties between rows of equal metrics wherever an answer is sorted
    /// (here, and in SQL for a central store).
    pub const FIELD_ORDER: [Attribute; 17] = [
        Attribute::Time,
        Attribute::Iface,
        Attribute::Sip,
        Attribute::Dip,
        Attribute::Sport,
        Attribute::Dport,
        Attribute::Proto,
        Attribute::Vlan,
        Attribute::Probe,
        Attribute::App,
        Attribute::Sas,
        Attribute::Das,
        Attribute::Scountry,
        Attribute::Dcountry,
        Attribute::TunnelType,
        Attribute::TunnelSrc,
        Attribute::TunnelDst,
    ];
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

/// The code of "no address" (a tunnel address of a flow not tunnelled): the tag clear and an
/// id no table reaches (address tables are bounded far below 2^32 entries).
pub(crate) const NO_ADDR: u64 = u32::MAX as u64;

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

    /// The text of an optional address's code (empty for [`NO_ADDR`]).
    fn ip_text(&self, code: u64) -> String {
        let mut s = String::new();
        self.push_ip_text(&mut s, code);
        s
    }

    /// [`Tables::ip_text`], appended to `s`.
    fn push_ip_text(&self, s: &mut String, code: u64) {
        if code != NO_ADDR {
            use std::fmt::Write;
            let _ = write!(s, "{}", self.ip(code));
        }
    }

    /// The code of an optional address given as text (empty: [`NO_ADDR`]).
    fn ip_text_code(&mut self, text: &str) -> Result<u64, Error> {
        if text.is_empty() {
            return Ok(NO_ADDR);
        }
        let ip = text
            .parse()
            .map_err(|_| Error::Partial(format!("{text:?} is not an address")))?;
        Ok(self.ip_code(ip))
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

/// Bits of an attribute's value in a packed row key (0: the attribute is part of the context
/// key, or of none). Addresses are 33-bit codes (see [`V4_TAG`]), countries two letters
/// (26 × 26 + 1 values), the VLAN id 12 bits, the application and tunnel type their numbers.
pub(crate) fn width(a: Attribute) -> u32 {
    match a {
        Attribute::Sip | Attribute::Dip | Attribute::TunnelSrc | Attribute::TunnelDst => 33,
        Attribute::Sas | Attribute::Das => 32,
        Attribute::Sport | Attribute::Dport => 16,
        Attribute::Vlan => 12,
        Attribute::Scountry | Attribute::Dcountry => 10,
        Attribute::Proto => 8,
        Attribute::App => 6,
        Attribute::TunnelType => 4,
        Attribute::Iface | Attribute::Time | Attribute::Probe => 0,
    }
}

/// Most bits of a packed row key: bit 127 stays clear, so a key is never all ones (the
/// aggregation table stores key + 1) and groups keyed by an address's text are told apart by
/// it (`exec::TEXT_TAG`).
pub const KEY_BITS: u32 = 127;

/// Where each grouped-by attribute sits in a packed row key: the attributes a query asks for,
/// in its order, from bit 0 up, each as wide as [`width`] says — as goProbe packs only the
/// attributes asked for. Any list whose widths add up to [`KEY_BITS`] or less packs; every
/// list of the original attributes does (124 bits for all of them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Per attribute (`Attribute as usize`), its bit position, or [`Layout::ABSENT`].
    at: [u8; Attribute::COUNT],
    /// Bits used.
    bits: u32,
}

impl Layout {
    const ABSENT: u8 = u8::MAX;

    /// The layout of `attributes`; fails when their values need more than [`KEY_BITS`] bits,
    /// naming the attributes and their widths.
    pub(crate) fn of(attributes: &[Attribute]) -> Result<Layout, Error> {
        let mut l = Layout {
            at: [Self::ABSENT; Attribute::COUNT],
            bits: 0,
        };
        for &a in attributes {
            let w = width(a);
            if w == 0 || l.at[a as usize] != Self::ABSENT {
                continue;
            }
            l.at[a as usize] = l.bits as u8;
            l.bits += w;
            if l.bits > KEY_BITS {
                let wide: Vec<String> = attributes
                    .iter()
                    .filter(|&&a| width(a) > 0)
                    .map(|&a| format!("{} ({} bits)", a.name(), width(a)))
                    .collect();
                let total: u32 = attributes.iter().map(|&a| width(a)).sum();
                return Err(Error::KeyTooWide(format!(
                    "the attributes {} need {total} bits of group key, more than the {KEY_BITS} it holds: group by fewer of them (or narrow with a condition instead)",
                    wide.join(", ")
                )));
            }
        }
        Ok(l)
    }

    /// The bit position of `a` (0 for an attribute not packed: its values are 0).
    #[inline]
    pub(crate) fn shift(&self, a: Attribute) -> u32 {
        match self.at[a as usize] {
            Self::ABSENT => 0,
            s => u32::from(s),
        }
    }

    /// Whether `a` is packed.
    #[inline]
    pub(crate) fn has(&self, a: Attribute) -> bool {
        self.at[a as usize] != Self::ABSENT
    }

    /// `code` in the place of `a` (nothing for an attribute not packed).
    #[inline]
    pub(crate) fn put(&self, a: Attribute, code: u64) -> u128 {
        if self.has(a) {
            u128::from(code) << self.shift(a)
        } else {
            0
        }
    }

    /// The value of `a` in key `k`.
    #[inline]
    pub(crate) fn get(&self, k: u128, a: Attribute) -> u64 {
        ((k >> self.shift(a)) & ((1u128 << width(a)) - 1)) as u64
    }

    /// The bits the packed attributes use.
    pub(crate) fn mask(&self) -> u128 {
        (1u128 << self.bits) - 1
    }

    /// The packed attributes that hold address codes, with their positions.
    pub(crate) fn addresses(&self) -> Vec<u32> {
        [
            Attribute::Sip,
            Attribute::Dip,
            Attribute::TunnelSrc,
            Attribute::TunnelDst,
        ]
        .into_iter()
        .filter(|&a| self.has(a))
        .map(|a| self.shift(a))
        .collect()
    }
}

/// The 10-bit code of a country (two ASCII capitals; empty: 0), `None` for other text.
pub(crate) fn country_code(text: &[u8]) -> Option<u64> {
    match text {
        [] => Some(0),
        [a @ b'A'..=b'Z', b @ b'A'..=b'Z'] => {
            Some(u64::from(a - b'A') * 26 + u64::from(b - b'A') + 1)
        }
        _ => None,
    }
}

/// The country of a code (0 and codes beyond the letters: empty), appended to `s`.
fn push_country(s: &mut String, code: u64) {
    if code == 0 || code > 26 * 26 {
        return;
    }
    let c = code - 1;
    s.push(char::from(b'A' + (c / 26) as u8));
    s.push(char::from(b'A' + (c % 26) as u8));
}

/// Name `id` of `names` (empty past them).
fn name_of(names: &[String], id: u64) -> &str {
    names.get(id as usize).map_or("", String::as_str)
}

/// The packed value of attribute `a` of a row (context `ctx`, key `k`): the time bucket,
/// interface id or probe id from the context, any other attribute from the key.
#[inline]
fn packed_value(l: &Layout, a: Attribute, ctx: u64, k: u128) -> u64 {
    match a {
        Attribute::Time => ctx & TIME_MASK,
        Attribute::Iface => ctx >> IFACE_SHIFT,
        Attribute::Probe => (ctx >> PROBE_SHIFT) & 0xffff,
        _ => l.get(k, a),
    }
}

/// Sets an optional text field of a key: `None` when the attribute is not grouped by, else
/// the text `fill` appends to its (cleared, reused) buffer.
fn set_text(field: &mut Option<String>, grouped: bool, fill: impl FnOnce(&mut String)) {
    if !grouped {
        *field = None;
        return;
    }
    let s = field.get_or_insert_with(String::new);
    s.clear();
    fill(s);
}

/// The code of a tunnel type's name (empty: 0), `None` for an unknown name.
pub(crate) fn tunnel_type_code(name: &[u8]) -> Option<u64> {
    let t = trawl_flow::TunnelType::ALL
        .into_iter()
        .find(|t| t.name().as_bytes() == name)?;
    Some(t as u64)
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

    /// Makes room for `groups` groups in each context this aggregate holds (a fleet's merge
    /// sizes its table for the answers still to come once the first is in).
    pub fn reserve(&mut self, groups: usize) {
        for m in self.maps.values_mut() {
            m.reserve(groups);
        }
    }

    /// Number of contexts: the combinations of interface, probe and time bucket grouped by,
    /// each a table of its own.
    pub fn contexts(&self) -> usize {
        self.maps.len()
    }

    /// Number of groups.
    pub fn len(&self) -> usize {
        self.maps.values().map(|m| m.len()).sum()
    }

    /// Whether there is no group.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The layout of this aggregate's packed keys.
    pub(crate) fn layout(&self) -> Layout {
        // Checked when the attribute list was parsed or read; a list built by hand that does
        // not pack gets a layout of what fits.
        Layout::of(&self.attributes).unwrap_or_else(|_| {
            let fits: Vec<Attribute> = self
                .attributes
                .iter()
                .scan(0, |bits, &a| {
                    *bits += width(a);
                    (*bits <= KEY_BITS).then_some(a)
                })
                .collect();
            Layout::of(&fits).unwrap_or(Layout {
                at: [Layout::ABSENT; Attribute::COUNT],
                bits: 0,
            })
        })
    }

    pub(crate) fn decode(&self, l: &Layout, ctx: u64, k: u128) -> GroupKey {
        let mut key = GroupKey::default();
        self.decode_into(l, ctx, k, &mut key);
        key
    }

    /// [`PartialAggregate::decode`] into `key`, whose text buffers are reused: an answer's
    /// rows are written one at a time through one key.
    pub(crate) fn decode_into(&self, l: &Layout, ctx: u64, k: u128, key: &mut GroupKey) {
        let has = |a| self.attributes.contains(&a);
        let field = |a: Attribute| packed_value(l, a, ctx, k);
        let t = &self.tables;
        key.time_ns = has(Attribute::Time).then(|| field(Attribute::Time) * trawl_store::BLOCK_NS);
        set_text(&mut key.iface, has(Attribute::Iface), |s| {
            s.push_str(name_of(&t.ifaces, field(Attribute::Iface)))
        });
        key.sip = has(Attribute::Sip).then(|| t.ip(field(Attribute::Sip)));
        key.dip = has(Attribute::Dip).then(|| t.ip(field(Attribute::Dip)));
        key.sport = has(Attribute::Sport).then(|| field(Attribute::Sport) as u16);
        key.dport = has(Attribute::Dport).then(|| field(Attribute::Dport) as u16);
        key.proto = has(Attribute::Proto).then(|| field(Attribute::Proto) as u8);
        key.vlan = has(Attribute::Vlan).then(|| field(Attribute::Vlan) as u16);
        set_text(&mut key.app, has(Attribute::App), |s| {
            s.push_str(app_name(field(Attribute::App)))
        });
        set_text(&mut key.probe, has(Attribute::Probe), |s| {
            s.push_str(name_of(&t.probes, field(Attribute::Probe)))
        });
        key.sas = has(Attribute::Sas).then(|| field(Attribute::Sas) as u32);
        key.das = has(Attribute::Das).then(|| field(Attribute::Das) as u32);
        set_text(&mut key.scountry, has(Attribute::Scountry), |s| {
            push_country(s, field(Attribute::Scountry))
        });
        set_text(&mut key.dcountry, has(Attribute::Dcountry), |s| {
            push_country(s, field(Attribute::Dcountry))
        });
        set_text(&mut key.tunnel_type, has(Attribute::TunnelType), |s| {
            s.push_str(trawl_flow::TunnelType::from_u8(field(Attribute::TunnelType) as u8).name())
        });
        set_text(&mut key.tunnel_src, has(Attribute::TunnelSrc), |s| {
            t.push_ip_text(s, field(Attribute::TunnelSrc))
        });
        set_text(&mut key.tunnel_dst, has(Attribute::TunnelDst), |s| {
            t.push_ip_text(s, field(Attribute::TunnelDst))
        });
    }

    /// The order of the decoded keys of `rows` (packed `(context, key)` pairs of this
    /// aggregate), on the packed keys: [`KeyOrder::cmp`] of two rows is the order of their
    /// [`GroupKey`]s, without decoding either.
    pub(crate) fn key_order(&self, l: &Layout, rows: &[(u64, u128)]) -> KeyOrder {
        let t = &self.tables;
        let has = |a| self.attributes.contains(&a);
        let fields = GroupKey::FIELD_ORDER;
        let steps = fields
            .into_iter()
            .filter(|&a| has(a))
            .map(|a| {
                let rank = match a {
                    Attribute::Time
                    | Attribute::Sport
                    | Attribute::Dport
                    | Attribute::Proto
                    | Attribute::Vlan
                    | Attribute::Sas
                    | Attribute::Das => Rank::Value,
                    Attribute::Iface => Rank::by_text(t.ifaces.iter().map(String::as_str)),
                    Attribute::Probe => Rank::by_text(t.probes.iter().map(String::as_str)),
                    Attribute::App => Rank::by_text((0..1u64 << width(a)).map(app_name)),
                    Attribute::TunnelType => Rank::by_text(
                        (0..1u64 << width(a))
                            .map(|c| trawl_flow::TunnelType::from_u8(c as u8).name()),
                    ),
                    Attribute::Sip | Attribute::Dip => Rank::Address,
                    Attribute::Scountry | Attribute::Dcountry => Rank::Country,
                    Attribute::TunnelSrc | Attribute::TunnelDst => {
                        // Compared as their text: the codes present, ranked by it.
                        let mut codes: Vec<u64> = rows.iter().map(|r| l.get(r.1, a)).collect();
                        codes.sort_unstable();
                        codes.dedup();
                        let mut texts: Vec<(String, u64)> =
                            codes.into_iter().map(|c| (t.ip_text(c), c)).collect();
                        let mut ranks = FxHashMap::default();
                        dense_ranks(&mut texts, |code, r| {
                            ranks.insert(code, r);
                        });
                        Rank::Codes(ranks)
                    }
                };
                (a, rank)
            })
            .collect();
        KeyOrder {
            layout: *l,
            tables: self.tables.clone(),
            steps,
        }
    }

    /// The packed form of `key` (values of attributes not packed are ignored). Fails on a
    /// value the key cannot hold: a country that is not two letters, an unknown tunnel type,
    /// a tunnel address that is not one.
    fn encode(l: &Layout, tables: &mut Tables, key: &GroupKey) -> Result<(u64, u128), Error> {
        let ctx = context(
            key.iface.as_deref().map(|i| tables.iface_id(i)),
            key.probe.as_deref().map(|p| tables.probe_id(p)),
            key.time_ns,
        );
        let bad = |what: &str, v: &str| Error::Partial(format!("{v:?} is not a {what}"));
        let country = |c: &Option<String>| -> Result<u64, Error> {
            let c = c.as_deref().unwrap_or("");
            country_code(c.as_bytes()).ok_or_else(|| bad("country code", c))
        };
        let mut k = 0u128;
        if let Some(ip) = key.sip {
            k |= l.put(Attribute::Sip, tables.ip_code(ip));
        }
        if let Some(ip) = key.dip {
            k |= l.put(Attribute::Dip, tables.ip_code(ip));
        }
        k |= l.put(Attribute::Sport, u64::from(key.sport.unwrap_or(0)));
        k |= l.put(Attribute::Dport, u64::from(key.dport.unwrap_or(0)));
        k |= l.put(Attribute::Proto, u64::from(key.proto.unwrap_or(0)));
        if key.vlan.is_some_and(|v| v > 4095) {
            return Err(bad("VLAN id", &key.vlan.unwrap_or(0).to_string()));
        }
        k |= l.put(Attribute::Vlan, u64::from(key.vlan.unwrap_or(0)));
        k |= l.put(Attribute::App, u64::from(app_code(key.app.as_deref())));
        k |= l.put(Attribute::Sas, u64::from(key.sas.unwrap_or(0)));
        k |= l.put(Attribute::Das, u64::from(key.das.unwrap_or(0)));
        k |= l.put(Attribute::Scountry, country(&key.scountry)?);
        k |= l.put(Attribute::Dcountry, country(&key.dcountry)?);
        if l.has(Attribute::TunnelType) {
            let t = key.tunnel_type.as_deref().unwrap_or("");
            let code = tunnel_type_code(t.as_bytes()).ok_or_else(|| bad("tunnel type", t))?;
            k |= l.put(Attribute::TunnelType, code);
        }
        for (a, v) in [
            (Attribute::TunnelSrc, &key.tunnel_src),
            (Attribute::TunnelDst, &key.tunnel_dst),
        ] {
            if l.has(a) {
                k |= l.put(a, tables.ip_text_code(v.as_deref().unwrap_or(""))?);
            }
        }
        Ok((ctx, k))
    }

    /// Every group, decoded (unordered).
    pub fn groups(&self) -> Vec<(GroupKey, Metrics)> {
        let l = self.layout();
        self.maps
            .iter()
            .flat_map(|(&c, m)| m.iter().map(move |(k, v)| (self.decode(&l, c, k), v)))
            .collect()
    }

    /// Adds `other`'s groups and counters. Fails when the union holds more than `max_groups`
    /// groups, or when the attributes differ.
    ///
    /// `other`'s table ids (IPv6 addresses, interfaces, probes) are translated into this
    /// aggregate's through maps built once, and its packed keys added as they are (or with
    /// their address ids replaced): no group is decoded to a [`GroupKey`] and encoded again.
    pub fn merge(&mut self, other: PartialAggregate) -> Result<(), Error> {
        if other.attributes != self.attributes {
            return Err(Error::Partial(
                "partial aggregates group by different attributes".into(),
            ));
        }
        self.stats.merge(&other.stats);
        if other.is_empty() {
            return Ok(());
        }
        let blank = self.is_empty()
            && self.tables.ips.is_empty()
            && self.tables.ifaces.is_empty()
            && self.tables.probes.is_empty();
        let ids = if blank {
            self.tables = other.tables.clone();
            None
        } else if Arc::ptr_eq(&self.tables, &other.tables) {
            None
        } else {
            let l = self.layout();
            let mine = Arc::make_mut(&mut self.tables);
            Some(IdMap::new(mine, &other.tables, &self.attributes, &l))
        };
        for (c, theirs) in other.maps {
            let (c, keys) = match &ids {
                None => (c, None),
                Some(ids) => (ids.context(c), (!ids.keys_unchanged()).then_some(ids)),
            };
            let map = keys.map(|ids| move |k| ids.key(k));
            let map = map.as_ref().map(|f| f as &dyn Fn(u128) -> u128);
            match self.maps.entry(c) {
                std::collections::hash_map::Entry::Occupied(mut e) => {
                    e.get_mut().absorb(theirs, map)
                }
                std::collections::hash_map::Entry::Vacant(e) => {
                    if map.is_none() {
                        e.insert(theirs);
                    } else {
                        e.insert(Inner::default()).absorb(theirs, map);
                    }
                }
            }
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
        let l = self.layout();
        for (key, m) in best {
            let (c, k) = Self::encode(&l, &mut tables, &key)?;
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
            version: PARTIAL_JSON_VERSION,
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
    /// ([`PARTIAL_VERSION`], u32 little-endian), then one zstd frame holding the attribute
    /// list, the scan's counters, the decoding tables and per context the packed keys and
    /// metric columns (`docs/specs/distributed.md`).
    pub fn to_bytes(&self) -> Vec<u8> {
        wire::to_bytes(self)
    }

    /// Reads the binary form back. Every flaw is an [`Error::Partial`] naming it: a wrong
    /// magic or schema version, a corrupt or truncated zstd frame, a field out of bounds or
    /// inconsistent (named with its byte offset in the inflated document); a document over
    /// the size `max_groups` allows, or more groups, is [`Error::TooManyGroups`] (so a hostile
    /// probe cannot make the coordinator allocate without bound).
    pub fn from_bytes(data: &[u8], max_groups: usize) -> Result<PartialAggregate, Error> {
        wire::from_bytes(data, max_groups)
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
        if w.version != PARTIAL_JSON_VERSION {
            return Err(Error::Partial(format!(
                "partial aggregate version {} (this trawl reads {PARTIAL_JSON_VERSION})",
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
        let l = Layout::of(&attributes)?;
        let mut tables = Tables::default();
        let mut maps: FxHashMap<u64, Inner> = FxHashMap::default();
        for g in w.groups {
            // Values of attributes not grouped by would make keys that decode alike.
            let key = only(g.key, &attributes);
            let (c, k) = Self::encode(&l, &mut tables, &key)?;
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

/// Another aggregate's table ids in terms of this one's (built once per merge).
struct IdMap {
    /// Per IPv6 id of the other aggregate, its address code here (empty when no address is
    /// grouped by).
    ips: Vec<u64>,
    /// Whether every address keeps its id.
    ips_same: bool,
    /// Per interface id there, the id here (`None`: interface not grouped by).
    ifaces: Option<Vec<u64>>,
    /// Per probe id there, the id here (`None`: probe not grouped by).
    probes: Option<Vec<u64>>,
    /// Bit positions of the address attributes grouped by.
    addrs: Vec<u32>,
}

impl IdMap {
    fn new(mine: &mut Tables, theirs: &Tables, attributes: &[Attribute], l: &Layout) -> IdMap {
        let has = |a| attributes.contains(&a);
        let addrs = l.addresses();
        let ips: Vec<u64> = if addrs.is_empty() {
            Vec::new()
        } else {
            theirs.ips.iter().map(|&ip| mine.ip_code(ip)).collect()
        };
        let ips_same = ips.iter().enumerate().all(|(i, &c)| c == i as u64);
        let ifaces = has(Attribute::Iface).then(|| {
            theirs
                .ifaces
                .iter()
                .map(|n| u64::from(mine.iface_id(n)))
                .collect()
        });
        let probes = has(Attribute::Probe).then(|| {
            theirs
                .probes
                .iter()
                .map(|n| u64::from(mine.probe_id(n)))
                .collect()
        });
        IdMap {
            ips,
            ips_same,
            ifaces,
            probes,
            addrs,
        }
    }

    /// Whether row keys stay as they are (only context keys may change).
    fn keys_unchanged(&self) -> bool {
        self.ips_same
    }

    /// The context key here of context key `c` there.
    fn context(&self, c: u64) -> u64 {
        let map = |ids: &Option<Vec<u64>>, v: u64| match ids {
            Some(ids) => ids.get(v as usize).copied().unwrap_or(v),
            None => v,
        };
        let iface = map(&self.ifaces, c >> IFACE_SHIFT);
        let probe = map(&self.probes, (c >> PROBE_SHIFT) & 0xffff);
        (iface << IFACE_SHIFT) | ((probe & 0xffff) << PROBE_SHIFT) | (c & TIME_MASK)
    }

    /// The row key here of row key `k` there: IPv6 address ids replaced.
    fn key(&self, mut k: u128) -> u128 {
        const CODE: u128 = (1 << 33) - 1;
        for &s in &self.addrs {
            let code = ((k >> s) & CODE) as u64;
            if code & V4_TAG == 0 && code != NO_ADDR {
                let to = self.ips.get(code as usize).copied().unwrap_or(code);
                k = (k & !(CODE << s)) | (u128::from(to) << s);
            }
        }
        k
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
        app: key.app.filter(|_| has(Attribute::App)),
        sas: key.sas.filter(|_| has(Attribute::Sas)),
        das: key.das.filter(|_| has(Attribute::Das)),
        scountry: key.scountry.filter(|_| has(Attribute::Scountry)),
        dcountry: key.dcountry.filter(|_| has(Attribute::Dcountry)),
        tunnel_type: key.tunnel_type.filter(|_| has(Attribute::TunnelType)),
        tunnel_src: key.tunnel_src.filter(|_| has(Attribute::TunnelSrc)),
        tunnel_dst: key.tunnel_dst.filter(|_| has(Attribute::TunnelDst)),
    }
}

/// Compares packed keys of one aggregate in the order of their decoded [`GroupKey`]s: per
/// attribute grouped by, in `GroupKey`'s field order, a number whose order is the decoded
/// value's (the value itself, or its rank among the names or addresses it can decode to).
/// Sorting a large answer decoded each row first, and most rows of a `-n 0` fleet answer tie
/// on their metrics: the keys' order without decoding them lets the rows kept stay packed
/// until they are written.
pub(crate) struct KeyOrder {
    layout: Layout,
    /// The IPv6 addresses codes stand for.
    tables: Arc<Tables>,
    steps: Vec<(Attribute, Rank)>,
}

/// How an attribute's packed value becomes a number in its decoded value's order.
enum Rank {
    /// The value's own order (ports, protocol, VLAN, AS numbers, the time bucket).
    Value,
    /// Ids (or codes) into names, by rank; an id past the names decodes as the empty name,
    /// whose rank is the last entry.
    Text(Vec<u32>),
    /// Address codes: compared as the addresses they stand for (IPv4 by value; IPv6 ids
    /// through the table: a top-N's ties are few, and ranking every address of a large
    /// table first cost more than they do).
    Address,
    /// Country codes: letters in code order, 0 (and codes past them: empty) first.
    Country,
    /// Codes of the rows present, by the rank of their text.
    Codes(FxHashMap<u64, u32>),
}

impl Rank {
    /// Ranks of `names` by id, plus the empty name's rank last.
    fn by_text<'a>(names: impl Iterator<Item = &'a str>) -> Rank {
        let mut named: Vec<(&str, usize)> = names.zip(0..).collect();
        let n = named.len();
        named.push(("", n));
        let mut ranks = vec![0u32; n + 1];
        dense_ranks(&mut named, |id, r| ranks[id] = r);
        Rank::Text(ranks)
    }
}

/// Sorts `items` and gives each its dense rank by text (equal texts, equal ranks; ranks
/// counted from 0 without gaps): `put(item, rank)`.
fn dense_ranks<T: Ord, I: Ord + Copy>(items: &mut [(T, I)], mut put: impl FnMut(I, u32)) {
    items.sort_unstable();
    let mut r = 0u32;
    for i in 0..items.len() {
        if i > 0 && items[i - 1].0 != items[i].0 {
            r += 1;
        }
        put(items[i].1, r);
    }
}

impl KeyOrder {
    /// The packed value of attribute `a` of a row.
    #[inline]
    fn value(&self, a: Attribute, ctx: u64, k: u128) -> u64 {
        packed_value(&self.layout, a, ctx, k)
    }

    /// The order of rows `a` and `b`'s decoded keys.
    #[inline]
    pub(crate) fn cmp(&self, a: (u64, u128), b: (u64, u128)) -> Ordering {
        for (attr, rank) in &self.steps {
            let (x, y) = (self.value(*attr, a.0, a.1), self.value(*attr, b.0, b.1));
            if x == y {
                continue;
            }
            let o = match rank {
                Rank::Value => x.cmp(&y),
                Rank::Text(r) => {
                    let at = |v: u64| r.get(v as usize).copied().unwrap_or(r[r.len() - 1]);
                    at(x).cmp(&at(y))
                }
                Rank::Address => self.tables.ip(x).cmp(&self.tables.ip(y)),
                Rank::Country => {
                    let letters = |v: u64| if v > 26 * 26 { 0 } else { v };
                    letters(x).cmp(&letters(y))
                }
                Rank::Codes(r) => {
                    let at = |v: u64| r.get(&v).copied().unwrap_or(0);
                    at(x).cmp(&at(y))
                }
            };
            if o.is_ne() {
                return o;
            }
        }
        Ordering::Equal
    }
}

/// The name of an application code of a packed key (0 and unknown codes: empty).
fn app_name(code: u64) -> &'static str {
    u8::try_from(code)
        .ok()
        .and_then(trawl_flow::App::from_id)
        .map_or("", |a| a.name())
}

/// The code of an application name (empty or unknown: 0).
fn app_code(name: Option<&str>) -> u8 {
    name.and_then(trawl_flow::App::from_name)
        .map_or(0, |a| a as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partial(groups: &[(u16, u64)]) -> PartialAggregate {
        partial_of(groups, 3)
    }

    fn partial_of(groups: &[(u16, u64)], max_groups: usize) -> PartialAggregate {
        let wire = Wire {
            version: PARTIAL_JSON_VERSION,
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
        PartialAggregate::from_json(&serde_json::to_string(&wire).unwrap(), max_groups).unwrap()
    }

    /// Merges large enough to run on every core (`AggTable::absorb` splits the partitions
    /// between threads) give what adding group by group gives, for hashed groups and for the
    /// packed ones a binary answer decodes into.
    #[test]
    fn a_large_merge_on_every_core_adds_every_group_once() {
        let a: Vec<(u16, u64)> = (0..40_000u16).map(|p| (p, u64::from(p) + 1)).collect();
        let b: Vec<(u16, u64)> = (20_000..60_000u16).map(|p| (p, 7)).collect();
        let mut want = std::collections::HashMap::new();
        for &(p, bytes) in a.iter().chain(&b) {
            *want.entry(p).or_insert(0) += bytes;
        }
        let as_sent = |g: &[(u16, u64)]| {
            PartialAggregate::from_bytes(&partial_of(g, 100_000).to_bytes(), 100_000).unwrap()
        };
        for (mut into, other) in [
            (partial_of(&a, 100_000), partial_of(&b, 100_000)),
            (as_sent(&a), as_sent(&b)),
            (as_sent(&b), partial_of(&a, 100_000)),
        ] {
            into.merge(other).unwrap();
            let got: std::collections::HashMap<u16, u64> = into
                .groups()
                .into_iter()
                .map(|(k, m)| (k.dport.unwrap(), m.fwd_bytes))
                .collect();
            assert_eq!(got.len(), 60_000);
            assert_eq!(got, want);
        }
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

    fn sorted(p: &PartialAggregate) -> Vec<(GroupKey, Metrics)> {
        let mut g = p.groups();
        g.sort_by(|x, y| x.0.cmp(&y.0));
        g
    }

    /// The JSON document `doc` as a probe sends it: encoded to the binary form and decoded.
    fn through_bytes(doc: &str) -> PartialAggregate {
        let sent = PartialAggregate::from_json(doc, 10).unwrap().to_bytes();
        PartialAggregate::from_bytes(&sent, 10).unwrap()
    }

    /// The reference merge of `docs`: every group decoded and added by its key, in key order.
    fn added_by_key(docs: &[&str]) -> Vec<(GroupKey, Metrics)> {
        let mut want: std::collections::BTreeMap<GroupKey, Metrics> = Default::default();
        for d in docs {
            for (k, m) in PartialAggregate::from_json(d, 10).unwrap().groups() {
                want.entry(k).or_default().add(&m);
            }
        }
        want.into_iter().collect()
    }

    /// A binary answer around `doc` (an inflated document written by hand).
    fn framed(doc: &[u8]) -> Vec<u8> {
        let mut out = PARTIAL_MAGIC.to_vec();
        out.extend_from_slice(&PARTIAL_VERSION.to_le_bytes());
        out.extend(zstd::encode_all(doc, 1).unwrap());
        out
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
        assert_eq!(&bytes[..8], b"TRPA\x03\0\0\0");
        let back = PartialAggregate::from_bytes(&bytes, 3).unwrap();
        assert_eq!(back.to_json(), a.to_json());
        let msg = |r: Result<PartialAggregate, Error>| r.unwrap_err().to_string();
        let truncated = msg(PartialAggregate::from_bytes(&bytes[..bytes.len() - 3], 3));
        assert!(
            truncated.contains("corrupt or truncated zstd"),
            "{truncated}"
        );
        // A version 1 answer (an older probe: the JSON document compressed) is refused, and
        // so is version 2 (the fixed bit position per attribute).
        for old in [1, 2] {
            let mut v = bytes.clone();
            v[4] = old;
            let version = msg(PartialAggregate::from_bytes(&v, 3));
            assert!(
                version.contains(&format!("schema version {old} (this trawl reads 3)")),
                "{version}"
            );
        }
        let magic = msg(PartialAggregate::from_bytes(b"{\"version\":1}", 3));
        assert!(magic.contains("no \"TRPA\" magic"), "{magic}");
        let mut corrupt = bytes.clone();
        let mid = corrupt.len() / 2;
        corrupt[mid] ^= 0xff;
        assert!(PartialAggregate::from_bytes(&corrupt, 3).is_err());
        let too_many = PartialAggregate::from_bytes(&bytes, 1).unwrap_err();
        assert!(matches!(too_many, Error::TooManyGroups(1)), "{too_many}");
    }

    /// The inflated document of `a`, for the tests that damage it.
    fn doc_of(a: &PartialAggregate) -> Vec<u8> {
        zstd::decode_all(&a.to_bytes()[8..]).unwrap()
    }

    /// The fuzz seed written by hand from docs/specs/distributed.md (with the `zstd` tool)
    /// decodes to what the spec says: the layout in the spec is the decoder's.
    #[test]
    fn the_spec_layout_written_by_hand_decodes() {
        let seeds = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fuzz/regressions/partial_decode/"
        );
        let valid = std::fs::read(format!("{seeds}valid-two-dport-groups")).unwrap();
        let p = PartialAggregate::from_bytes(&valid, 10).unwrap();
        assert_eq!(
            p.to_json(),
            partial(&[(80, 10), (443, 5)])
                .to_json()
                .replace("\"rows_scanned\":2", "\"rows_scanned\":0")
        );
        let bad = std::fs::read(format!("{seeds}keys-out-of-order")).unwrap();
        let e = PartialAggregate::from_bytes(&bad, 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("keys do not ascend"), "{e}");
    }

    #[test]
    fn damaged_documents_are_named_with_field_and_offset() {
        let a = partial(&[(80, 10), (443, 5)]);
        let doc = doc_of(&a);
        // Attributes: count 1, "dport" (4 + 4 + 5 = 13 bytes); 10 counters (80); no error
        // message, no ignored file (8); no address, interface or probe (12); the context
        // count (4) at 113, the context at 117: key 0 (8), 2 groups (4), keys at 129,
        // columns at 161.
        let (keys_at, cols_at) = (129, 161);
        assert_eq!(doc.len(), cols_at + 2 * 40);
        let err = |d: &[u8]| {
            PartialAggregate::from_bytes(&framed(d), 10)
                .unwrap_err()
                .to_string()
        };
        for cut in [3, 20, keys_at + 5, cols_at + 39, doc.len() - 1] {
            let e = err(&doc[..cut]);
            assert!(
                e.contains("truncated") && e.contains("at byte"),
                "{cut}: {e}"
            );
        }
        let mut unknown = doc.clone();
        unknown[8] = b'x';
        assert!(err(&unknown)
            .contains("attribute at byte 4 of the inflated document: unknown: \"xport\""));
        // The two keys swapped: in each of the 16 byte planes (2 bytes each here).
        let mut swapped = doc.clone();
        for plane in swapped[keys_at..keys_at + 32].chunks_exact_mut(2) {
            plane.swap(0, 1);
        }
        let e = err(&swapped);
        assert!(e.contains(&format!("group key at byte {} of the inflated document: context 0 key 1: keys do not ascend", keys_at + 1)), "{e}");
        // Key 0's byte 15: the last plane's first byte.
        let mut sip_bits = doc.clone();
        sip_bits[keys_at + 15 * 2] = 0x10;
        let e = err(&sip_bits);
        assert!(e.contains("sets bits of attributes not grouped by"), "{e}");
        let mut iface = doc.clone();
        iface[117 + 6] = 1; // bits 48..56: the interface id
        let e = err(&iface);
        assert!(
            e.contains("context key at byte 117")
                && e.contains("iface id 1 but iface is not grouped by"),
            "{e}"
        );
        let mut extra = doc.clone();
        extra.push(0);
        assert!(err(&extra).contains("1 bytes after the last context"));
        let mut huge = doc.clone();
        huge[113..117].copy_from_slice(&u32::MAX.to_le_bytes());
        let e = err(&huge);
        assert!(
            e.contains("context count at byte 113") && e.contains("at most 10"),
            "{e}"
        );
    }

    #[test]
    fn addresses_beyond_the_table_and_repeated_ones_are_refused() {
        let json = |groups: &str| {
            format!(
                r#"{{"version":1,"attributes":["sip"],"groups":[{groups}],"stats":{{"blocks":0,"blocks_scanned":0,"blocks_pruned":0,"blocks_failed":0,"row_groups":0,"row_groups_pruned":0,"rows_scanned":0,"rows_matched":0,"bytes_scanned":0,"errors":[]}}}}"#
            )
        };
        let g = |ip: &str| {
            format!(
                r#"{{"key":{{"sip":"{ip}"}},"fwd_packets":1,"rev_packets":0,"fwd_bytes":0,"rev_bytes":0,"flows":1}}"#
            )
        };
        let a = PartialAggregate::from_json(
            &json(&[g("2001:db8::1"), g("2001:db8::2"), g("10.0.0.1")].join(",")),
            10,
        )
        .unwrap();
        let back = PartialAggregate::from_bytes(&a.to_bytes(), 10).unwrap();
        assert_eq!(sorted(&back), sorted(&a));
        let doc = doc_of(&a);
        // After "sip" (11 bytes), the counters (80) and two empty lists (8): 2 addresses.
        let ips_at = 99;
        assert_eq!(&doc[ips_at..ips_at + 4], &2u32.to_le_bytes());
        let mut twice = doc.clone();
        twice.copy_within(ips_at + 4..ips_at + 20, ips_at + 20);
        let e = PartialAggregate::from_bytes(&framed(&twice), 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("listed twice (ids 0 and 1)"), "{e}");
        // One address fewer in the table: the key that used id 1 points beyond it.
        let mut short = doc[..ips_at].to_vec();
        short.extend_from_slice(&1u32.to_le_bytes());
        short.extend_from_slice(&doc[ips_at + 4..ips_at + 20]);
        short.extend_from_slice(&doc[ips_at + 36..]);
        let e = PartialAggregate::from_bytes(&framed(&short), 10)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sip address id 1 beyond the 1 IPv6 addresses listed"),
            "{e}"
        );
    }

    /// Merging translates the other aggregate's address, interface and probe ids: IPv6 keys
    /// of two probes whose tables number the same addresses differently merge by address.
    #[test]
    fn merge_translates_table_ids() {
        let doc = |groups: &[(&str, &str)]| {
            let groups: Vec<String> = groups
                .iter()
                .enumerate()
                .map(|(i, (iface, ip))| format!(r#"{{"key":{{"iface":"{iface}","dip":"{ip}"}},"fwd_packets":{i},"rev_packets":0,"fwd_bytes":0,"rev_bytes":0,"flows":1}}"#))
                .collect();
            format!(
                r#"{{"version":1,"attributes":["iface","dip"],"groups":[{}],"stats":{{"blocks":0,"blocks_scanned":0,"blocks_pruned":0,"blocks_failed":0,"row_groups":0,"row_groups_pruned":0,"rows_scanned":0,"rows_matched":0,"bytes_scanned":0,"errors":[]}}}}"#,
                groups.join(",")
            )
        };
        let one = doc(&[
            ("eth0", "2001:db8::1"),
            ("eth1", "2001:db8::2"),
            ("eth2", "192.0.2.1"),
        ]);
        // Other ids for the same names and addresses (eth1 = 0, 2001:db8::2 = 0).
        let two = doc(&[
            ("eth1", "2001:db8::2"),
            ("eth2", "2001:db8::1"),
            ("eth0", "2001:db8::2"),
        ]);
        let mut by_bytes = through_bytes(&one);
        by_bytes.merge(through_bytes(&two)).unwrap();
        // The reference: every group decoded and added by its key.
        let want = added_by_key(&[one.as_str(), two.as_str()]);
        assert_eq!(sorted(&by_bytes), want);
        assert_eq!(by_bytes.len(), 5);
    }

    /// The packed key follows the attribute list: each attribute from bit 0 up in the order
    /// asked, so the same attributes in another order pack elsewhere; a list that needs more
    /// than 127 bits is refused naming its attributes.
    #[test]
    fn layouts_follow_the_attribute_list() {
        use Attribute::*;
        let l = Layout::of(&[Dport, Iface, Sas, Scountry]).unwrap();
        assert_eq!(
            (l.shift(Dport), l.shift(Sas), l.shift(Scountry)),
            (0, 16, 48)
        );
        assert_eq!(l.mask(), (1 << 58) - 1);
        assert!(!l.has(Sip) && l.put(Sip, 5) == 0);
        let k = l.put(Sas, u64::from(u32::MAX)) | l.put(Scountry, 676) | l.put(Dport, 443);
        assert_eq!(
            (l.get(k, Dport), l.get(k, Sas), l.get(k, Scountry)),
            (443, u64::from(u32::MAX), 676)
        );
        let every_old = [Sip, Dip, Sport, Dport, Proto, Vlan, App, Iface, Time, Probe];
        assert_eq!(Layout::of(&every_old).unwrap().bits, 124);
        assert_eq!(
            Layout::of(&[Sip, Dip, Sas, Dport, Scountry]).unwrap().bits,
            124
        );
        let e = Layout::of(&[Sip, Dip, TunnelSrc, TunnelDst])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sip (33 bits), dip (33 bits), tunnel_src (33 bits), tunnel_dst (33 bits) need 132 bits")
                && e.contains("127"),
            "{e}"
        );
        assert!(crate::parse_attributes("talk_conv,sas,das")
            .unwrap_err()
            .contains("need 130 bits"));
        for (text, code) in [("", 0), ("AA", 1), ("DE", 3 * 26 + 4 + 1), ("ZZ", 676)] {
            assert_eq!(country_code(text.as_bytes()), Some(code));
            let mut name = String::new();
            push_country(&mut name, code);
            assert_eq!(name, text);
        }
        for bad in ["de", "D", "DEU", "D1"] {
            assert_eq!(country_code(bad.as_bytes()), None, "{bad}");
        }
    }

    /// Groups of the enrichment and tunnel attributes (empty values and the "no address"
    /// code among them) survive the JSON and binary forms and a merge of two probes whose
    /// address tables differ; damaged codes in a binary answer are refused.
    #[test]
    fn enrichment_and_tunnel_groups_round_trip_and_merge() {
        let doc = |groups: &[(&str, &str, &str, u32)]| {
            let groups: Vec<String> = groups
                .iter()
                .map(|(c, t, src, asn)| format!(r#"{{"key":{{"scountry":"{c}","tunnel_type":"{t}","tunnel_src":"{src}","das":{asn}}},"fwd_packets":1,"rev_packets":0,"fwd_bytes":{asn},"rev_bytes":0,"flows":1}}"#))
                .collect();
            format!(
                r#"{{"version":1,"attributes":["tunnel_src","scountry","das","tunnel_type"],"groups":[{}],"stats":{{"blocks":0,"blocks_scanned":0,"blocks_pruned":0,"blocks_failed":0,"row_groups":0,"row_groups_pruned":0,"rows_scanned":0,"rows_matched":0,"bytes_scanned":0,"errors":[]}}}}"#,
                groups.join(",")
            )
        };
        let one = doc(&[
            ("DE", "gtpu", "2001:db8::1", 13335),
            ("", "", "", 0),
            ("JP", "vxlan", "192.0.2.1", u32::MAX),
        ]);
        let two = doc(&[("", "", "", 0), ("DE", "gtpu", "2001:db8::2", 13335)]);
        let a = PartialAggregate::from_json(&one, 10).unwrap();
        assert_eq!(
            PartialAggregate::from_json(&a.to_json(), 10)
                .unwrap()
                .to_json(),
            a.to_json()
        );
        let sent = PartialAggregate::from_bytes(&a.to_bytes(), 10).unwrap();
        assert_eq!(sorted(&sent), sorted(&a));
        let none = sorted(&a)
            .into_iter()
            .find(|(k, _)| k.tunnel_src.as_deref() == Some(""))
            .unwrap();
        assert_eq!(
            (
                none.0.scountry.as_deref(),
                none.0.tunnel_type.as_deref(),
                none.0.das
            ),
            (Some(""), Some(""), Some(0))
        );
        let mut merged = sent;
        merged.merge(through_bytes(&two)).unwrap();
        let want = added_by_key(&[one.as_str(), two.as_str()]);
        assert_eq!(sorted(&merged), want);
        assert_eq!(merged.len(), 4);
        for (bad, what) in [
            (r#""scountry":"DE""#, r#""scountry":"de""#),
            (r#""tunnel_type":"gtpu""#, r#""tunnel_type":"ppp""#),
            (r#""tunnel_src":"192.0.2.1""#, r#""tunnel_src":"host""#),
        ] {
            let e = PartialAggregate::from_json(&one.replacen(bad, what, 1), 10).unwrap_err();
            assert!(e.to_string().contains("is not a"), "{e}");
        }
        // A country code beyond ZZ in a binary answer: the first key's bits 33..43 (after
        // tunnel_src), keys at byte 4 + 4 + 10 + 4 + 8 + 3 + 4 + 11 + 80 + 8 + 4 + 16 + 12 + 4 + 12.
        let doc = doc_of(&a);
        let keys_at = doc.len() - 3 * 56;
        let mut far = doc.clone();
        // Key 0 of 3: byte b is at plane b (3 bytes each), place 0.
        let k = (0..16).fold(0u128, |k, b| {
            k | u128::from(far[keys_at + 3 * b]) << (8 * b)
        });
        let k = k | (1023u128 << 33);
        for b in 0..16 {
            far[keys_at + 3 * b] = (k >> (8 * b)) as u8;
        }
        let e = PartialAggregate::from_bytes(&framed(&far), 10)
            .unwrap_err()
            .to_string();
        assert!(e.contains("scountry code 1023 beyond 676"), "{e}");
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
