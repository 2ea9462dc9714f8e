//! The partial aggregate: what one scan (one worker, one probe) produces, merged by addition.
//! Its serialised form (`PartialAggregate::to_json`, documented in `docs/query.md`) is what a
//! probe will return to a central coordinator when queries are distributed.
use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use trawl_store::hash::FxHashMap;

use crate::error::Error;
use crate::plan::Attribute;

/// Version of the serialised partial aggregate.
pub const PARTIAL_VERSION: u32 = 1;

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
        self.fwd_packets += o.fwd_packets;
        self.rev_packets += o.rev_packets;
        self.fwd_bytes += o.fwd_bytes;
        self.rev_bytes += o.rev_bytes;
        self.flows += o.flows;
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
    /// One message per failed block: file and what was wrong.
    pub errors: Vec<String>,
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
        self.errors.extend(o.errors.iter().cloned());
    }
}

/// Groups and their metrics, plus the scan's counters.
#[derive(Clone, Debug, Default)]
pub struct PartialAggregate {
    /// Grouped-by attributes.
    pub attributes: Vec<Attribute>,
    /// The groups.
    pub groups: FxHashMap<GroupKey, Metrics>,
    /// Scan counters.
    pub stats: ScanStats,
    /// Most groups allowed (see [`crate::Query::max_groups`]).
    pub max_groups: usize,
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
    /// Adds `other`'s groups and counters. Fails when the union holds more than `max_groups`
    /// groups, or when the attributes differ.
    pub fn merge(&mut self, other: PartialAggregate) -> Result<(), Error> {
        if other.attributes != self.attributes {
            return Err(Error::Partial(
                "partial aggregates group by different attributes".into(),
            ));
        }
        self.stats.merge(&other.stats);
        let (mut big, small) = if other.groups.len() > self.groups.len() {
            (other.groups, std::mem::take(&mut self.groups))
        } else {
            (std::mem::take(&mut self.groups), other.groups)
        };
        for (k, m) in small {
            big.entry(k).or_default().add(&m);
        }
        self.groups = big;
        if self.groups.len() > self.max_groups {
            return Err(Error::TooManyGroups(self.max_groups));
        }
        Ok(())
    }

    /// The documented serialised form (JSON).
    pub fn to_json(&self) -> String {
        let mut groups: Vec<WireGroup> = self
            .groups
            .iter()
            .map(|(k, m)| WireGroup {
                key: k.clone(),
                metrics: *m,
            })
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
        let mut groups = FxHashMap::default();
        for g in w.groups {
            groups
                .entry(g.key)
                .or_insert_with(Metrics::default)
                .add(&g.metrics);
        }
        if groups.len() > max_groups {
            return Err(Error::TooManyGroups(max_groups));
        }
        Ok(PartialAggregate {
            attributes,
            groups,
            stats: w.stats,
            max_groups,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn partial(groups: &[(u16, u64)]) -> PartialAggregate {
        PartialAggregate {
            attributes: vec![Attribute::Dport],
            groups: groups
                .iter()
                .map(|&(p, b)| {
                    (
                        GroupKey {
                            dport: Some(p),
                            ..GroupKey::default()
                        },
                        Metrics {
                            fwd_bytes: b,
                            flows: 1,
                            ..Metrics::default()
                        },
                    )
                })
                .collect(),
            stats: ScanStats {
                rows_scanned: groups.len() as u64,
                ..ScanStats::default()
            },
            max_groups: 3,
        }
    }

    #[test]
    fn merges_and_round_trips() {
        let mut a = partial(&[(80, 10), (443, 5)]);
        a.merge(partial(&[(443, 7)])).unwrap();
        let back = PartialAggregate::from_json(&a.to_json(), 3).unwrap();
        assert_eq!(back.groups, a.groups);
        assert_eq!(back.stats.rows_scanned, 3);
        let k443 = GroupKey {
            dport: Some(443),
            ..GroupKey::default()
        };
        assert_eq!(back.groups[&k443].fwd_bytes, 12);
        assert_eq!(back.groups[&k443].flows, 2);
        assert!(a.to_json().starts_with(
            r#"{"version":1,"attributes":["dport"],"groups":[{"key":{"dport":80},"fwd_packets":0"#
        ));
        let err = a.merge(partial(&[(1, 1), (2, 2)])).unwrap_err();
        assert!(matches!(err, Error::TooManyGroups(3)));
    }
}
