//! The condition language: parsing with positioned errors, and printing back (the printed form
//! parses to the same tree).
//!
//! ```text
//! condition  := or
//! or         := and ( ("or" | "||" | "|") and )*
//! and        := unary ( ("and" | "&&" | "&") unary )*
//! unary      := ("not" | "!") unary | "(" condition ")" | comparison
//! comparison := FIELD OP VALUE
//! FIELD      := sip | src_ip | dip | dst_ip | host | snet | dnet | net
//!             | sport | src_port | dport | dst_port | port | proto | vlan | iface
//!             | sas | src_as | das | dst_as | scountry | src_country | dcountry
//!             | dst_country | tunnel_type | tunnel_src | tunnel_dst
//! OP         := = | == | != | < | > | <= | >=
//! VALUE      := address | address/prefix | number | number-number | protocol name | name
//!             | "text" (quoted; `""` is the empty value)
//! ```
//!
//! Depth is bounded: at most [`MAX_NESTING`] `(` and `not` open at once, and a tree at most
//! [`MAX_DEPTH`] nodes deep (a chain of `and`/`or` is as deep as it is long). The parser, the
//! printer and the plan all recurse on the tree; a condition past either bound is a parse
//! error at the token that crosses it, not a stack overflow.
use std::fmt;
use std::net::IpAddr;

use trawl_flow::ProtoName;

/// A condition that does not parse: what was expected, and where (a 0-based character offset
/// into the condition text).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("condition, at character {}: {message}", pos + 1)]
pub struct ParseError {
    /// Character offset (0-based) of the offending token.
    pub pos: usize,
    /// What was wrong.
    pub message: String,
}

impl ParseError {
    /// The condition with a caret under the offending character, for terminals.
    pub fn render(&self, condition: &str) -> String {
        format!("{condition}\n{}^ {}", " ".repeat(self.pos), self.message)
    }
}

/// A field a comparison reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Field {
    /// Initiator address (`sip`, `src_ip`; `snet` with a prefix).
    Sip,
    /// Responder address (`dip`, `dst_ip`; `dnet`).
    Dip,
    /// Either address (`host`, `net`): `=` holds when one side matches, `!=` when neither does.
    Host,
    /// Initiator port.
    Sport,
    /// Responder port.
    Dport,
    /// Either port, like `Host`.
    Port,
    /// IP protocol.
    Proto,
    /// VLAN id.
    Vlan,
    /// Interface name.
    Iface,
    /// The probe's name (fleet queries: resolved by the coordinator, never sent to a probe).
    Probe,
    /// The probe's `site` tag (fleet queries).
    Site,
    /// The probe's `role` tag (fleet queries).
    Role,
    /// Autonomous system of the initiator address (0: not known).
    Sas,
    /// Autonomous system of the responder address.
    Das,
    /// Country of the initiator address (two letters; empty: not known).
    Scountry,
    /// Country of the responder address.
    Dcountry,
    /// The outer tunnel's type (empty: not tunnelled).
    TunnelType,
    /// The outer header's source address (`""`: not tunnelled).
    TunnelSrc,
    /// The outer header's destination address.
    TunnelDst,
}

impl Field {
    fn parse(s: &str) -> Option<Field> {
        Some(match s {
            "sip" | "src_ip" | "snet" => Field::Sip,
            "dip" | "dst_ip" | "dnet" => Field::Dip,
            "host" | "net" => Field::Host,
            "sport" | "src_port" => Field::Sport,
            "dport" | "dst_port" => Field::Dport,
            "port" => Field::Port,
            "proto" => Field::Proto,
            "vlan" => Field::Vlan,
            "iface" => Field::Iface,
            "probe" => Field::Probe,
            "site" => Field::Site,
            "role" => Field::Role,
            "sas" | "src_as" => Field::Sas,
            "das" | "dst_as" => Field::Das,
            "scountry" | "src_country" => Field::Scountry,
            "dcountry" | "dst_country" => Field::Dcountry,
            "tunnel_type" => Field::TunnelType,
            "tunnel_src" => Field::TunnelSrc,
            "tunnel_dst" => Field::TunnelDst,
            _ => return None,
        })
    }

    /// The canonical name.
    pub fn name(self) -> &'static str {
        match self {
            Field::Sip => "sip",
            Field::Dip => "dip",
            Field::Host => "host",
            Field::Sport => "sport",
            Field::Dport => "dport",
            Field::Port => "port",
            Field::Proto => "proto",
            Field::Vlan => "vlan",
            Field::Iface => "iface",
            Field::Probe => "probe",
            Field::Site => "site",
            Field::Role => "role",
            Field::Sas => "sas",
            Field::Das => "das",
            Field::Scountry => "scountry",
            Field::Dcountry => "dcountry",
            Field::TunnelType => "tunnel_type",
            Field::TunnelSrc => "tunnel_src",
            Field::TunnelDst => "tunnel_dst",
        }
    }
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `=` (membership for prefixes and ranges).
    Eq,
    /// `!=`.
    Ne,
    /// `<`.
    Lt,
    /// `>`.
    Gt,
    /// `<=`.
    Le,
    /// `>=`.
    Ge,
}

impl Op {
    /// The operator's text.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Lt => "<",
            Op::Gt => ">",
            Op::Le => "<=",
            Op::Ge => ">=",
        }
    }
}

/// An address prefix (`10.0.0.0/8`), host bits cleared.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Net {
    /// Network address.
    pub addr: IpAddr,
    /// Prefix length.
    pub prefix: u8,
}

impl Net {
    /// Whether `ip` lies in the prefix (never across address families).
    #[inline]
    pub fn contains(&self, ip: &IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(*a) & mask == u32::from(n)
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(*a) & mask == u128::from(n)
            }
            _ => false,
        }
    }
}

/// A comparison's right-hand side.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Value {
    /// An address.
    Addr(IpAddr),
    /// A prefix.
    Net(Net),
    /// A number.
    Num(u64),
    /// An inclusive range of numbers (`1024-65535`).
    Range(u64, u64),
    /// A protocol (by name or number).
    Proto(u8),
    /// A name (interface, probe, tag).
    Name(String),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Addr(a) => write!(f, "{a}"),
            Value::Net(n) => write!(f, "{}/{}", n.addr, n.prefix),
            Value::Num(n) => write!(f, "{n}"),
            Value::Range(a, b) => write!(f, "{a}-{b}"),
            Value::Proto(p) => write!(f, "{}", ProtoName(*p)),
            // Quoted when it would not read back as that one word (the empty value, spaces,
            // a keyword).
            Value::Name(n)
                if n.is_empty()
                    || !n.chars().all(word_char)
                    || ["and", "or", "not"].contains(&n.to_ascii_lowercase().as_str()) =>
            {
                write!(f, "\"{n}\"")
            }
            Value::Name(n) => f.write_str(n),
        }
    }
}

/// One comparison.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Comparison {
    /// Field read.
    pub field: Field,
    /// Operator.
    pub op: Op,
    /// Right-hand side.
    pub value: Value,
}

/// A parsed condition.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// Both hold.
    And(Box<Expr>, Box<Expr>),
    /// Either holds.
    Or(Box<Expr>, Box<Expr>),
    /// Does not hold.
    Not(Box<Expr>),
    /// A comparison.
    Cmp(Comparison),
}

impl Expr {
    fn prec(&self) -> u8 {
        match self {
            Expr::Or(..) => 0,
            Expr::And(..) => 1,
            Expr::Not(_) | Expr::Cmp(_) => 2,
        }
    }

    /// Whether a comparison reads a fleet field (`probe`, `site`, `role`), which only a fleet
    /// query resolves.
    pub fn has_fleet_fields(&self) -> bool {
        self.comparisons()
            .iter()
            .any(|c| matches!(c.field, Field::Probe | Field::Site | Field::Role))
    }

    /// Every comparison, left to right.
    pub fn comparisons(&self) -> Vec<&Comparison> {
        let mut out = Vec::new();
        fn walk<'a>(e: &'a Expr, out: &mut Vec<&'a Comparison>) {
            match e {
                Expr::And(a, b) | Expr::Or(a, b) => {
                    walk(a, out);
                    walk(b, out);
                }
                Expr::Not(a) => walk(a, out),
                Expr::Cmp(c) => out.push(c),
            }
        }
        walk(self, &mut out);
        out
    }
}

/// Prints the canonical form: lowercase keywords, canonical field names, single spaces, and
/// parentheses exactly where precedence needs them (`and` binds tighter than `or`; both are
/// left-associative).
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |f: &mut fmt::Formatter<'_>, e: &Expr, min: u8| {
            if e.prec() < min {
                write!(f, "({e})")
            } else {
                write!(f, "{e}")
            }
        };
        match self {
            Expr::Or(a, b) => {
                side(f, a, 0)?;
                f.write_str(" or ")?;
                side(f, b, 1)
            }
            Expr::And(a, b) => {
                side(f, a, 1)?;
                f.write_str(" and ")?;
                side(f, b, 2)
            }
            Expr::Not(a) => {
                f.write_str("not ")?;
                side(f, a, 2)
            }
            Expr::Cmp(c) => write!(f, "{} {} {}", c.field.name(), c.op.as_str(), c.value),
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String),
    Op(Op),
    And,
    Or,
    Not,
    Open,
    Close,
    End,
}

fn describe(t: &Tok) -> String {
    match t {
        Tok::Word(w) => format!("{w:?}"),
        Tok::Op(o) => format!("operator {:?}", o.as_str()),
        Tok::And => "\"and\"".into(),
        Tok::Or => "\"or\"".into(),
        Tok::Not => "\"not\"".into(),
        Tok::Open => "\"(\"".into(),
        Tok::Close => "\")\"".into(),
        Tok::End => "the end of the condition".into(),
    }
}

/// A character of an unquoted word.
fn word_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '/' | '_' | '-')
}

fn lex(input: &str) -> Result<Vec<(Tok, usize)>, ParseError> {
    let chars: Vec<char> = input.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        let next = chars.get(i + 1).copied();
        let tok = match c {
            c if c.is_whitespace() => {
                i += 1;
                continue;
            }
            '(' => Tok::Open,
            ')' => Tok::Close,
            '"' => {
                // A quoted value: everything up to the next quote, keywords included.
                let Some(len) = chars[i + 1..].iter().position(|&c| c == '"') else {
                    return Err(ParseError {
                        pos: start,
                        message: "the quote is not closed".into(),
                    });
                };
                let w: String = chars[i + 1..i + 1 + len].iter().collect();
                i += len + 1;
                Tok::Word(w)
            }
            '=' => {
                if next == Some('=') {
                    i += 1;
                }
                Tok::Op(Op::Eq)
            }
            '!' if next == Some('=') => {
                i += 1;
                Tok::Op(Op::Ne)
            }
            '!' => Tok::Not,
            '<' | '>' => {
                let eq = next == Some('=');
                if eq {
                    i += 1;
                }
                Tok::Op(match (c, eq) {
                    ('<', false) => Op::Lt,
                    ('<', true) => Op::Le,
                    ('>', false) => Op::Gt,
                    _ => Op::Ge,
                })
            }
            '&' | '|' => {
                if next == Some(c) {
                    i += 1;
                }
                if c == '&' {
                    Tok::And
                } else {
                    Tok::Or
                }
            }
            c if word_char(c) => {
                let mut j = i;
                while j < chars.len() && word_char(chars[j]) {
                    j += 1;
                }
                let w: String = chars[i..j].iter().collect();
                i = j - 1;
                match w.to_ascii_lowercase().as_str() {
                    "and" => Tok::And,
                    "or" => Tok::Or,
                    "not" => Tok::Not,
                    _ => Tok::Word(w),
                }
            }
            other => {
                return Err(ParseError {
                    pos: start,
                    message: format!("unexpected character {other:?}"),
                })
            }
        };
        out.push((tok, start));
        i += 1;
    }
    out.push((Tok::End, chars.len()));
    Ok(out)
}

/// Most `(` and `not` open at once.
pub const MAX_NESTING: usize = 128;
/// Deepest tree (nesting plus the length of `and`/`or` chains): about as many comparisons as
/// a condition may hold.
pub const MAX_DEPTH: usize = 4096;

struct Parser {
    toks: Vec<(Tok, usize)>,
    at: usize,
    /// `(` and `not` open at the current token.
    nesting: usize,
}

/// A parsed subtree and its depth (a comparison is 1).
type Sub = (Expr, usize);

impl Parser {
    fn peek(&self) -> &(Tok, usize) {
        &self.toks[self.at.min(self.toks.len() - 1)]
    }
    fn bump(&mut self) -> (Tok, usize) {
        let t = self.peek().clone();
        self.at += 1;
        t
    }
    fn err<T>(pos: usize, message: impl Into<String>) -> Result<T, ParseError> {
        Err(ParseError {
            pos,
            message: message.into(),
        })
    }

    /// `e`, one level deeper, unless that passes [`MAX_DEPTH`] (`pos`: the operator's).
    fn deeper(e: Expr, depth: usize, pos: usize) -> Result<Sub, ParseError> {
        if depth + 1 > MAX_DEPTH {
            return Self::err(
                pos,
                format!("the condition is nested or chained deeper than {MAX_DEPTH} levels"),
            );
        }
        Ok((e, depth + 1))
    }

    fn or(&mut self) -> Result<Sub, ParseError> {
        let (mut e, mut depth) = self.and()?;
        while self.peek().0 == Tok::Or {
            let (_, pos) = self.bump();
            let (b, db) = self.and()?;
            (e, depth) = Self::deeper(Expr::Or(Box::new(e), Box::new(b)), depth.max(db), pos)?;
        }
        Ok((e, depth))
    }

    fn and(&mut self) -> Result<Sub, ParseError> {
        let (mut e, mut depth) = self.unary()?;
        while self.peek().0 == Tok::And {
            let (_, pos) = self.bump();
            let (b, db) = self.unary()?;
            (e, depth) = Self::deeper(Expr::And(Box::new(e), Box::new(b)), depth.max(db), pos)?;
        }
        Ok((e, depth))
    }

    fn unary(&mut self) -> Result<Sub, ParseError> {
        let (tok, pos) = self.peek().clone();
        if matches!(tok, Tok::Not | Tok::Open) {
            if self.nesting >= MAX_NESTING {
                return Self::err(
                    pos,
                    format!("more than {MAX_NESTING} \"(\" and \"not\" nested"),
                );
            }
            self.nesting += 1;
            let e = self.nested();
            self.nesting -= 1;
            return e;
        }
        self.comparison()
    }

    /// `not X` or `( X )`.
    fn nested(&mut self) -> Result<Sub, ParseError> {
        let (tok, pos) = self.bump();
        match tok {
            Tok::Not => {
                let (e, depth) = self.unary()?;
                Self::deeper(Expr::Not(Box::new(e)), depth, pos)
            }
            _ => {
                let e = self.or()?;
                let (t, p) = self.bump();
                if t != Tok::Close {
                    return Self::err(
                        p,
                        format!(
                            "expected \")\" to close the \"(\" at character {}, found {}",
                            pos + 1,
                            describe(&t)
                        ),
                    );
                }
                Ok(e)
            }
        }
    }

    fn comparison(&mut self) -> Result<Sub, ParseError> {
        let (tok, pos) = self.bump();
        match tok {
            Tok::Word(w) => {
                let field = Field::parse(&w.to_ascii_lowercase()).ok_or_else(|| ParseError {
                    pos,
                    message: format!(
                        "unknown field {w:?} (expected sip, dip, host, snet, dnet, sport, dport, port, proto, vlan, iface, sas, das, scountry, dcountry, tunnel_type, tunnel_src, tunnel_dst, probe, site or role)"
                    ),
                })?;
                let (t, opos) = self.bump();
                let Tok::Op(op) = t else {
                    return Self::err(opos, format!("expected a comparison operator (=, !=, <, >, <=, >=) after {:?}, found {}", w, describe(&t)));
                };
                let (t, vpos) = self.bump();
                let Tok::Word(v) = t else {
                    return Self::err(
                        vpos,
                        format!(
                            "expected a value after {:?}, found {}",
                            op.as_str(),
                            describe(&t)
                        ),
                    );
                };
                let value = value(field, op, &v, &w).map_err(|m| ParseError {
                    pos: vpos,
                    message: m,
                })?;
                Ok((Expr::Cmp(Comparison { field, op, value }), 1))
            }
            t => Self::err(
                pos,
                format!(
                    "expected a comparison, \"not\" or \"(\", found {}",
                    describe(&t)
                ),
            ),
        }
    }
}

fn net(s: &str) -> Result<Net, String> {
    let (a, p) = s.split_once('/').unwrap_or((s, ""));
    let addr: IpAddr = a
        .parse()
        .map_err(|_| format!("{a:?} is not an IPv4 or IPv6 address"))?;
    let max = if addr.is_ipv4() { 32 } else { 128 };
    let prefix: u8 = p
        .parse()
        .ok()
        .filter(|&n| n <= max)
        .ok_or_else(|| format!("prefix length {p:?} is not a number from 0 to {max}"))?;
    let addr = match addr {
        IpAddr::V4(v) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((u32::from(v) & mask).into())
        }
        IpAddr::V6(v) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((u128::from(v) & mask).into())
        }
    };
    Ok(Net { addr, prefix })
}

fn value(field: Field, op: Op, v: &str, fname: &str) -> Result<Value, String> {
    let ordered = !matches!(op, Op::Eq | Op::Ne);
    match field {
        Field::TunnelSrc | Field::TunnelDst if v.is_empty() => {
            if ordered {
                return Err(format!(
                    "the empty value takes = or !=, not {}",
                    op.as_str()
                ));
            }
            Ok(Value::Name(String::new()))
        }
        Field::Sip | Field::Dip | Field::Host | Field::TunnelSrc | Field::TunnelDst => {
            let is_net = v.contains('/') || matches!(fname, "snet" | "dnet" | "net");
            if is_net {
                if ordered {
                    return Err(format!("a prefix takes = or !=, not {}", op.as_str()));
                }
                let n = if v.contains('/') {
                    net(v)?
                } else {
                    let a: IpAddr = v
                        .parse()
                        .map_err(|_| format!("{v:?} is not an address or prefix"))?;
                    Net {
                        addr: a,
                        prefix: if a.is_ipv4() { 32 } else { 128 },
                    }
                };
                Ok(Value::Net(n))
            } else {
                v.parse()
                    .map(Value::Addr)
                    .map_err(|_| format!("{v:?} is not an IPv4 or IPv6 address"))
            }
        }
        Field::Sport | Field::Dport | Field::Port | Field::Vlan | Field::Sas | Field::Das => {
            let max = match field {
                Field::Vlan => 4095,
                Field::Sas | Field::Das => u64::from(u32::MAX),
                _ => 65535,
            };
            let num = |s: &str| -> Result<u64, String> {
                s.parse::<u64>()
                    .ok()
                    .filter(|&n| n <= max)
                    .ok_or_else(|| format!("{s:?} is not a number from 0 to {max}"))
            };
            match v.split_once('-') {
                Some((a, b)) => {
                    if ordered {
                        return Err(format!("a range takes = or !=, not {}", op.as_str()));
                    }
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(format!("range {v:?} is empty (start above end)"));
                    }
                    Ok(Value::Range(a, b))
                }
                None => num(v).map(Value::Num),
            }
        }
        Field::Proto => {
            if ordered {
                return Err(format!("proto takes = or !=, not {}", op.as_str()));
            }
            let lower = v.to_ascii_lowercase();
            trawl_store::proto_number(&lower)
                .map(Value::Proto)
                .ok_or_else(|| {
                    format!("{v:?} is not a protocol name (tcp, udp, icmp, ...) or number 0-255")
                })
        }
        Field::Scountry | Field::Dcountry => {
            if ordered {
                return Err(format!(
                    "{} takes = or !=, not {}",
                    field.name(),
                    op.as_str()
                ));
            }
            let upper = v.to_ascii_uppercase();
            if !(upper.is_empty()
                || upper.len() == 2 && upper.bytes().all(|b| b.is_ascii_uppercase()))
            {
                return Err(format!(
                    "{v:?} is not a country code (two letters, ISO 3166; \"\" for not known)"
                ));
            }
            Ok(Value::Name(upper))
        }
        Field::TunnelType => {
            if ordered {
                return Err(format!("tunnel_type takes = or !=, not {}", op.as_str()));
            }
            let lower = v.to_ascii_lowercase();
            if !lower.is_empty()
                && trawl_flow::TunnelType::from_name(&lower) == trawl_flow::TunnelType::None
            {
                let names: Vec<&str> = trawl_flow::TunnelType::ALL[1..]
                    .iter()
                    .map(|t| t.name())
                    .collect();
                return Err(format!(
                    "{v:?} is not a tunnel type ({}; \"\" for none)",
                    names.join(", ")
                ));
            }
            Ok(Value::Name(lower))
        }
        Field::Iface | Field::Probe | Field::Site | Field::Role => {
            if ordered {
                return Err(format!(
                    "{} takes = or !=, not {}",
                    field.name(),
                    op.as_str()
                ));
            }
            Ok(Value::Name(v.to_string()))
        }
    }
}

/// Parses a condition.
pub fn parse(input: &str) -> Result<Expr, ParseError> {
    let toks = lex(input)?;
    let mut p = Parser {
        toks,
        at: 0,
        nesting: 0,
    };
    if p.peek().0 == Tok::End {
        return Parser::err(0, "the condition is empty");
    }
    let (e, _) = p.or()?;
    let (t, pos) = p.bump();
    if t != Tok::End {
        return Parser::err(
            pos,
            format!(
                "expected \"and\", \"or\" or the end, found {}",
                describe(&t)
            ),
        );
    }
    Ok(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_precedence_and_round_trips() {
        let cases = [
            ("sip = 10.0.0.0/8", "sip = 10.0.0.0/8"),
            ("snet = 10.1.2.3/16", "sip = 10.1.0.0/16"),
            ("dport=443 and proto=TCP", "dport = 443 and proto = tcp"),
            (
                "src_country = de and dst_as = 4294967295 or tunnel_src = \"\"",
                "scountry = DE and das = 4294967295 or tunnel_src = \"\"",
            ),
            (
                "tunnel_type != GTPU and tunnel_dst = 2001:db8::/32 and sas = 64496-64511",
                "tunnel_type != gtpu and tunnel_dst = 2001:db8::/32 and sas = 64496-64511",
            ),
            (
                "dcountry = \"\" and iface = \"a b\"",
                "dcountry = \"\" and iface = \"a b\"",
            ),
            ("iface = \"Or\" or iface = x", "iface = \"Or\" or iface = x"),
        ];
        for (input, printed) in cases {
            let e = parse(input).unwrap();
            assert_eq!(e.to_string(), printed);
            assert_eq!(parse(&e.to_string()).unwrap(), e);
        }
        let e = parse("sport = 1 or dport = 2 and not proto = udp").unwrap();
        assert!(matches!(e, Expr::Or(..)));
        assert_eq!(e.to_string(), "sport = 1 or dport = 2 and not proto = udp");
        let e = parse("(sport = 1 or dport = 2) & !(proto = udp | vlan >= 3)").unwrap();
        assert_eq!(
            e.to_string(),
            "(sport = 1 or dport = 2) and not (proto = udp or vlan >= 3)"
        );
        assert_eq!(parse(&e.to_string()).unwrap(), e);
        let e = parse("host = 2001:db8::1 and dport = 1024-2048 and port != 53").unwrap();
        assert_eq!(
            e.to_string(),
            "host = 2001:db8::1 and dport = 1024-2048 and port != 53"
        );
        // Left-associative: a or (b or c) keeps its parentheses, (a or b) or c loses them.
        let e = parse("vlan = 1 or (vlan = 2 or vlan = 3)").unwrap();
        assert_eq!(e.to_string(), "vlan = 1 or (vlan = 2 or vlan = 3)");
        assert_eq!(parse(&e.to_string()).unwrap(), e);
    }

    #[test]
    fn errors_point_at_the_offending_character() {
        let cases = [
            ("", 0, "empty"),
            ("sip = 10.0.0.300", 6, "not an IPv4"),
            ("sip = 10.0.0.0/33", 6, "prefix length"),
            ("dport > 1-5", 8, "range takes"),
            ("dport = 70000", 8, "0 to 65535"),
            ("proto = foo", 8, "protocol"),
            ("color = red", 0, "unknown field"),
            ("sip 10.0.0.1", 4, "comparison operator"),
            ("sip = ", 6, "expected a value"),
            ("(sip = 1.2.3.4", 14, "to close"),
            ("sip = 1.2.3.4)", 13, "expected \"and\""),
            ("sip = 1.2.3.4 and", 17, "expected a comparison"),
            ("dport = 80 # x", 11, "unexpected character"),
            ("dport = 443 or or", 15, "expected a comparison"),
            ("vlan = 5000", 7, "0 to 4095"),
            ("dport = 9-3", 8, "empty"),
            ("scountry = DEU", 11, "not a country code"),
            ("scountry < DE", 11, "takes = or !="),
            ("tunnel_type = ppp", 14, "gre, vxlan"),
            ("das = 4294967296", 6, "0 to 4294967295"),
            ("tunnel_src > \"\"", 13, "empty value takes"),
            ("iface = \"eth0", 8, "quote is not closed"),
        ];
        for (input, pos, text) in cases {
            let e = parse(input).unwrap_err();
            assert_eq!(e.pos, pos, "{input:?}: {e}");
            assert!(e.message.contains(text), "{input:?}: {e}");
        }
        let e = parse("sip = 10.0.0.300").unwrap_err();
        assert_eq!(
            e.render("sip = 10.0.0.300")
                .lines()
                .nth(1)
                .unwrap()
                .find('^'),
            Some(6)
        );
    }

    #[test]
    fn depth_is_bounded() {
        let nested = |n: usize| format!("{}vlan = 1{}", "(".repeat(n), ")".repeat(n));
        assert!(parse(&nested(MAX_NESTING)).is_ok());
        let e = parse(&nested(MAX_NESTING + 1)).unwrap_err();
        assert_eq!(e.pos, MAX_NESTING, "{e}");
        let nots = format!("{}vlan = 1", "! ".repeat(MAX_NESTING + 1));
        assert_eq!(parse(&nots).unwrap_err().pos, 2 * MAX_NESTING);
        let chain = |n: usize| vec!["vlan = 1"; n].join(" and ");
        assert!(parse(&chain(MAX_DEPTH)).is_ok());
        let e = parse(&chain(MAX_DEPTH + 1)).unwrap_err();
        assert!(e.message.contains("deeper than"), "{e}");
        // The operator that crosses the bound: the last "and".
        assert_eq!(e.pos, chain(MAX_DEPTH + 1).rfind("and").unwrap());
    }

    #[test]
    fn prefixes_contain() {
        let n = net("10.1.2.3/8").unwrap();
        assert_eq!(n.addr.to_string(), "10.0.0.0");
        assert!(n.contains(&"10.200.0.1".parse().unwrap()));
        assert!(!n.contains(&"11.0.0.1".parse().unwrap()));
        assert!(!n.contains(&"::ffff:10.0.0.1".parse().unwrap()));
        let all = net("0.0.0.0/0").unwrap();
        assert!(all.contains(&"1.2.3.4".parse().unwrap()));
        let v6 = net("2001:db8::/32").unwrap();
        assert!(v6.contains(&"2001:db8:1::5".parse().unwrap()));
        assert!(!v6.contains(&"2001:db9::5".parse().unwrap()));
    }
}
