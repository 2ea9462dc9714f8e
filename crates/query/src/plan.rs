//! What a query asks (attributes, condition, time range, interfaces) and the condition
//! compiled into single-column predicates the scan evaluates.
use std::net::IpAddr;

use trawl_store::schema::col;
use trawl_store::BLOCK_NS;

use crate::syntax::{Comparison, Expr, Field, Net, Op, Value};

/// An attribute results are grouped by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Attribute {
    /// Initiator address.
    Sip,
    /// Responder address.
    Dip,
    /// Initiator port.
    Sport,
    /// Responder port.
    Dport,
    /// IP protocol.
    Proto,
    /// Interface.
    Iface,
    /// VLAN id.
    Vlan,
    /// Block start rounded down to the query's time resolution.
    Time,
    /// The probe that answered (a fleet query, `trawl query --probes`; a local scan refuses
    /// it).
    Probe,
    /// The application label (`--analyze app`; empty for rows without one).
    App,
    /// Autonomous system of the initiator address (`--geoip-asn`; 0: not known).
    Sas,
    /// Autonomous system of the responder address.
    Das,
    /// Country of the initiator address (`--geoip-country`; ISO 3166 alpha-2, empty: not
    /// known).
    Scountry,
    /// Country of the responder address.
    Dcountry,
    /// The outer tunnel's type (`--tunnel inner`; empty: not tunnelled).
    TunnelType,
    /// The outer IP header's source address (empty: not tunnelled).
    TunnelSrc,
    /// The outer IP header's destination address.
    TunnelDst,
}

impl Attribute {
    /// Number of attributes (`Attribute as usize` is below it).
    pub(crate) const COUNT: usize = 17;

    /// The name in queries and output.
    pub fn name(self) -> &'static str {
        match self {
            Attribute::Sip => "sip",
            Attribute::Dip => "dip",
            Attribute::Sport => "sport",
            Attribute::Dport => "dport",
            Attribute::Proto => "proto",
            Attribute::Iface => "iface",
            Attribute::Vlan => "vlan",
            Attribute::Time => "time",
            Attribute::Probe => "probe",
            Attribute::App => "app",
            Attribute::Sas => "sas",
            Attribute::Das => "das",
            Attribute::Scountry => "scountry",
            Attribute::Dcountry => "dcountry",
            Attribute::TunnelType => "tunnel_type",
            Attribute::TunnelSrc => "tunnel_src",
            Attribute::TunnelDst => "tunnel_dst",
        }
    }

    /// Its name in query results (JSON keys, CSV and table headers): the flow record's field
    /// name (`src_ip`, `dst_port`), so a query's output reads like the records it sums.
    /// [`Attribute::name`] (goQuery's `sip`) stays the name of the serialised partial
    /// aggregate, which other trawl processes read.
    pub fn field(self) -> &'static str {
        match self {
            Attribute::Sip => "src_ip",
            Attribute::Dip => "dst_ip",
            Attribute::Sport => "src_port",
            Attribute::Dport => "dst_port",
            Attribute::Sas => "src_as",
            Attribute::Das => "dst_as",
            Attribute::Scountry => "src_country",
            Attribute::Dcountry => "dst_country",
            other => other.name(),
        }
    }

    /// Parses a name (`sip`, `src_ip`, ...).
    pub fn parse(s: &str) -> Option<Attribute> {
        Some(match s {
            "sip" | "src_ip" => Attribute::Sip,
            "dip" | "dst_ip" => Attribute::Dip,
            "sport" | "src_port" => Attribute::Sport,
            "dport" | "dst_port" => Attribute::Dport,
            "proto" => Attribute::Proto,
            "iface" => Attribute::Iface,
            "vlan" => Attribute::Vlan,
            "time" => Attribute::Time,
            "probe" => Attribute::Probe,
            "app" => Attribute::App,
            "sas" | "src_as" => Attribute::Sas,
            "das" | "dst_as" => Attribute::Das,
            "scountry" | "src_country" => Attribute::Scountry,
            "dcountry" | "dst_country" => Attribute::Dcountry,
            "tunnel_type" => Attribute::TunnelType,
            "tunnel_src" => Attribute::TunnelSrc,
            "tunnel_dst" => Attribute::TunnelDst,
            _ => return None,
        })
    }

    /// The block column the attribute reads (`None`: from the block's path).
    pub fn column(self) -> Option<&'static str> {
        match self {
            Attribute::Sip => Some(col::SRC_IP),
            Attribute::Dip => Some(col::DST_IP),
            Attribute::Sport => Some(col::SRC_PORT),
            Attribute::Dport => Some(col::DST_PORT),
            Attribute::Proto => Some(col::PROTO),
            Attribute::Vlan => Some(col::VLAN),
            Attribute::App => Some(col::APP),
            Attribute::Sas => Some(col::SRC_AS),
            Attribute::Das => Some(col::DST_AS),
            Attribute::Scountry => Some(col::SRC_COUNTRY),
            Attribute::Dcountry => Some(col::DST_COUNTRY),
            Attribute::TunnelType => Some(col::TUNNEL_TYPE),
            Attribute::TunnelSrc => Some(col::TUNNEL_SRC),
            Attribute::TunnelDst => Some(col::TUNNEL_DST),
            Attribute::Iface | Attribute::Time | Attribute::Probe => None,
        }
    }
}

/// Parses a comma-separated attribute list; `talk_conv` is `sip,dip`, `talk_src` is `sip`,
/// `talk_dst` is `dip`, `apps` is `dport,proto`, `none` is no attribute. Duplicates are dropped, order is kept.
pub fn parse_attributes(s: &str) -> Result<Vec<Attribute>, String> {
    let mut out: Vec<Attribute> = Vec::new();
    for word in s.split(',').map(str::trim) {
        let add: Vec<Attribute> = match word {
            "talk_conv" => vec![Attribute::Sip, Attribute::Dip],
            "talk_src" => vec![Attribute::Sip],
            "talk_dst" => vec![Attribute::Dip],
            "apps" => vec![Attribute::Dport, Attribute::Proto],
            // No attribute: one row, the totals (how a fleet query asks a probe for them).
            "none" => vec![],
            w => vec![Attribute::parse(w).ok_or_else(|| {
                format!(
                    "unknown attribute {w:?} (expected sip, dip, sport, dport, proto, iface, vlan, time, probe, app, sas, das, scountry, dcountry, tunnel_type, tunnel_src, tunnel_dst, talk_conv, talk_src, talk_dst, apps or none)"
                )
            })?],
        };
        for a in add {
            if !out.contains(&a) {
                out.push(a);
            }
        }
    }
    crate::partial::Layout::of(&out).map_err(|e| e.to_string())?;
    Ok(out)
}

/// A query: what to group by, which rows, which blocks.
#[derive(Clone, Debug)]
pub struct Query {
    /// Group-by attributes, in output order (may be empty: one total row).
    pub attributes: Vec<Attribute>,
    /// Row filter.
    pub condition: Option<Expr>,
    /// Interfaces; empty for all.
    pub ifaces: Vec<String>,
    /// Blocks starting at or after this (ns; rounded down to a block boundary).
    pub from_ns: u64,
    /// Blocks starting before this (ns; rounded up to a block boundary); `None`: no bound.
    pub to_ns: Option<u64>,
    /// Resolution of the `time` attribute (ns, a multiple of 5 minutes).
    pub time_resolution_ns: u64,
    /// Scan threads.
    pub workers: usize,
    /// Most distinct groups a query may hold (per worker and merged); beyond it the query fails
    /// with [`crate::Error::TooManyGroups`] rather than growing without bound.
    pub max_groups: usize,
    /// Decode trawl's own column chunks straight from their pages (the default). Off: every
    /// column chunk goes through the `parquet` crate's Arrow reader, as chunks the direct
    /// decoder does not handle always do (slower; for comparisons and tests).
    pub direct_decoding: bool,
}

impl Default for Query {
    fn default() -> Self {
        Query {
            attributes: Vec::new(),
            condition: None,
            ifaces: Vec::new(),
            from_ns: 0,
            to_ns: None,
            time_resolution_ns: BLOCK_NS,
            workers: std::thread::available_parallelism().map_or(1, |n| n.get()),
            max_groups: 10_000_000,
            direct_decoding: true,
        }
    }
}

/// Which address column a predicate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IpCol {
    Src = 0,
    Dst = 1,
    /// The outer header's addresses (empty without a tunnel: no address matches).
    TunnelSrc = 2,
    TunnelDst = 3,
}

impl IpCol {
    pub(crate) fn column(self) -> &'static str {
        match self {
            IpCol::Src => col::SRC_IP,
            IpCol::Dst => col::DST_IP,
            IpCol::TunnelSrc => col::TUNNEL_SRC,
            IpCol::TunnelDst => col::TUNNEL_DST,
        }
    }
}

/// Which integer column a range predicate reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NumCol {
    Sport = 0,
    Dport = 1,
    Vlan = 2,
    SrcAs = 3,
    DstAs = 4,
}

impl NumCol {
    pub(crate) fn column(self) -> &'static str {
        match self {
            NumCol::Sport => col::SRC_PORT,
            NumCol::Dport => col::DST_PORT,
            NumCol::Vlan => col::VLAN,
            NumCol::SrcAs => col::SRC_AS,
            NumCol::DstAs => col::DST_AS,
        }
    }
}

/// A predicate on an address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IpPred {
    In(Net),
    /// Ordered comparison within the address family (`<`, `>`, `<=`, `>=`, `=`).
    Cmp(Op, IpAddr),
}

impl IpPred {
    pub(crate) fn eval(&self, ip: &IpAddr) -> bool {
        match self {
            IpPred::In(n) => n.contains(ip),
            IpPred::Cmp(op, a) => {
                if a.is_ipv4() != ip.is_ipv4() {
                    return false;
                }
                match op {
                    Op::Eq => ip == a,
                    Op::Ne => ip != a,
                    Op::Lt => ip < a,
                    Op::Gt => ip > a,
                    Op::Le => ip <= a,
                    Op::Ge => ip >= a,
                }
            }
        }
    }
}

/// A single-column predicate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Leaf {
    Ip(IpCol, IpPred),
    /// Inclusive range.
    Num(NumCol, u32, u32),
    Proto(u8),
    Iface(String),
    /// A text column (country, tunnel type, or a tunnel address compared with the empty
    /// value) equal to this text.
    Text(&'static str, Box<[u8]>),
}

/// The condition as a tree over leaves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Node {
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Not(Box<Node>),
    Const(bool),
    Leaf(usize),
}

/// A compiled condition.
#[derive(Clone, Debug, Default)]
pub(crate) struct Program {
    pub root: Option<Node>,
    pub leaves: Vec<Leaf>,
}

impl Program {
    pub(crate) fn compile(expr: Option<&Expr>) -> Program {
        let mut p = Program::default();
        p.root = expr.map(|e| p.node(e));
        p
    }

    fn leaf(&mut self, l: Leaf) -> Node {
        let i = self.leaves.iter().position(|x| *x == l).unwrap_or_else(|| {
            self.leaves.push(l);
            self.leaves.len() - 1
        });
        Node::Leaf(i)
    }

    fn node(&mut self, e: &Expr) -> Node {
        match e {
            Expr::And(a, b) => Node::And(Box::new(self.node(a)), Box::new(self.node(b))),
            Expr::Or(a, b) => Node::Or(Box::new(self.node(a)), Box::new(self.node(b))),
            Expr::Not(a) => Node::Not(Box::new(self.node(a))),
            Expr::Cmp(c) => self.comparison(c),
        }
    }

    fn comparison(&mut self, c: &Comparison) -> Node {
        // `!=` is "not =" for every field; for host and port that means "neither side".
        if c.op == Op::Ne {
            let eq = Comparison {
                op: Op::Eq,
                ..c.clone()
            };
            return Node::Not(Box::new(self.comparison(&eq)));
        }
        let either = |p: &mut Program, a: Field, b: Field| {
            let l = p.comparison(&Comparison {
                field: a,
                ..c.clone()
            });
            let r = p.comparison(&Comparison {
                field: b,
                ..c.clone()
            });
            Node::Or(Box::new(l), Box::new(r))
        };
        match c.field {
            Field::Host => either(self, Field::Sip, Field::Dip),
            Field::Port => either(self, Field::Sport, Field::Dport),
            Field::TunnelSrc | Field::TunnelDst if c.value == Value::Name(String::new()) => {
                let column = if c.field == Field::TunnelSrc {
                    col::TUNNEL_SRC
                } else {
                    col::TUNNEL_DST
                };
                self.leaf(Leaf::Text(column, Box::default()))
            }
            Field::Sip | Field::Dip | Field::TunnelSrc | Field::TunnelDst => {
                let col = match c.field {
                    Field::Sip => IpCol::Src,
                    Field::Dip => IpCol::Dst,
                    Field::TunnelSrc => IpCol::TunnelSrc,
                    _ => IpCol::TunnelDst,
                };
                let pred = match &c.value {
                    Value::Net(n) => IpPred::In(*n),
                    Value::Addr(a) => IpPred::Cmp(c.op, *a),
                    _ => return Node::Const(false),
                };
                self.leaf(Leaf::Ip(col, pred))
            }
            Field::Sport | Field::Dport | Field::Vlan | Field::Sas | Field::Das => {
                let (col, max) = match c.field {
                    Field::Sport => (NumCol::Sport, u64::from(u16::MAX)),
                    Field::Dport => (NumCol::Dport, u64::from(u16::MAX)),
                    Field::Sas => (NumCol::SrcAs, u64::from(u32::MAX)),
                    Field::Das => (NumCol::DstAs, u64::from(u32::MAX)),
                    _ => (NumCol::Vlan, u64::from(u16::MAX)),
                };
                let (lo, hi) = match (&c.value, c.op) {
                    (Value::Range(a, b), _) => (*a, *b),
                    (Value::Num(n), Op::Eq) => (*n, *n),
                    (Value::Num(n), Op::Lt) if *n == 0 => return Node::Const(false),
                    (Value::Num(n), Op::Lt) => (0, n - 1),
                    (Value::Num(n), Op::Le) => (0, *n),
                    (Value::Num(n), Op::Gt) if *n >= max => return Node::Const(false),
                    (Value::Num(n), Op::Gt) => (n + 1, max),
                    (Value::Num(n), Op::Ge) => (*n, max),
                    _ => return Node::Const(false),
                };
                self.leaf(Leaf::Num(col, lo.min(max) as u32, hi.min(max) as u32))
            }
            Field::Scountry | Field::Dcountry | Field::TunnelType => {
                let column = match c.field {
                    Field::Scountry => col::SRC_COUNTRY,
                    Field::Dcountry => col::DST_COUNTRY,
                    _ => col::TUNNEL_TYPE,
                };
                match &c.value {
                    Value::Name(n) => self.leaf(Leaf::Text(column, n.as_bytes().into())),
                    _ => Node::Const(false),
                }
            }
            Field::Proto => match c.value {
                Value::Proto(p) => self.leaf(Leaf::Proto(p)),
                _ => Node::Const(false),
            },
            Field::Iface => match &c.value {
                Value::Name(n) => self.leaf(Leaf::Iface(n.clone())),
                _ => Node::Const(false),
            },
            // Fleet fields: the coordinator resolves them before a probe sees the condition,
            // and a local scan refuses them (`exec::scan`).
            Field::Probe | Field::Site | Field::Role => Node::Const(false),
        }
    }

    /// The block columns the condition reads.
    pub(crate) fn columns(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for l in &self.leaves {
            let c = match l {
                Leaf::Ip(c, _) => c.column(),
                Leaf::Num(c, ..) => c.column(),
                Leaf::Proto(_) => col::PROTO,
                Leaf::Text(c, _) => c,
                Leaf::Iface(_) => continue,
            };
            if !out.contains(&c) {
                out.push(c);
            }
        }
        out
    }
}

/// Three-valued evaluation (for pruning): `Some(b)` when every row has value `b`.
pub(crate) fn eval3(node: &Node, leaf: &dyn Fn(usize) -> Option<bool>) -> Option<bool> {
    match node {
        Node::Const(b) => Some(*b),
        Node::Leaf(i) => leaf(*i),
        Node::Not(a) => eval3(a, leaf).map(|b| !b),
        Node::And(a, b) => match (eval3(a, leaf), eval3(b, leaf)) {
            (Some(false), _) | (_, Some(false)) => Some(false),
            (Some(true), Some(true)) => Some(true),
            _ => None,
        },
        Node::Or(a, b) => match (eval3(a, leaf), eval3(b, leaf)) {
            (Some(true), _) | (_, Some(true)) => Some(true),
            (Some(false), Some(false)) => Some(false),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attribute_lists() {
        use Attribute::*;
        assert_eq!(parse_attributes("talk_conv").unwrap(), vec![Sip, Dip]);
        assert_eq!(
            parse_attributes("apps,sip").unwrap(),
            vec![Dport, Proto, Sip]
        );
        assert_eq!(
            parse_attributes("sip,src_ip,time").unwrap(),
            vec![Sip, Time]
        );
        assert!(parse_attributes("sip,bogus").unwrap_err().contains("bogus"));
    }

    #[test]
    fn host_and_port_desugar_to_either_side() {
        let e = crate::syntax::parse("host != 10.0.0.1 and port < 1024").unwrap();
        let p = Program::compile(Some(&e));
        assert_eq!(p.leaves.len(), 4);
        assert_eq!(
            p.columns(),
            vec![col::SRC_IP, col::DST_IP, col::SRC_PORT, col::DST_PORT]
        );
        assert!(matches!(p.root, Some(Node::And(ref a, _)) if matches!(**a, Node::Not(_))));
        let e = crate::syntax::parse("dport < 0").unwrap();
        assert_eq!(Program::compile(Some(&e)).root, Some(Node::Const(false)));
    }
}
