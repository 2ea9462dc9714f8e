//! The fleet fields of a condition (`probe`, `site`, `role`) are known to the coordinator,
//! not to the probes: each probe's condition is the query's with those comparisons replaced by
//! their truth for that probe, simplified. A probe the condition excludes is not asked.
use trawl_query::syntax::{Comparison, Expr, Field, Op, Value};

use crate::config::Probe;

/// What a condition means for one probe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ForProbe {
    /// No row of the probe can match: it is not asked.
    Excluded,
    /// Every row matches (no condition is sent).
    All,
    /// The probe's rows must meet this condition (free of fleet fields).
    Where(Expr),
}

/// The values of a fleet field for `probe` (`None`: not a fleet field). `probe` is the
/// probe's name and, for a member of a pair, the pair's name (its groups' `probe` value).
fn fleet_value(probe: &Probe, field: Field) -> Option<[Option<&str>; 2]> {
    match field {
        Field::Probe => Some([Some(probe.name.as_str()), probe.pair.as_deref()]),
        Field::Site => Some([probe.site.as_deref(), None]),
        Field::Role => Some([probe.role.as_deref(), None]),
        _ => None,
    }
}

/// The truth of a comparison on a fleet field (a probe without the tag matches no `=` and
/// every `!=`).
fn truth(c: &Comparison, values: [Option<&str>; 2]) -> bool {
    let Value::Name(want) = &c.value else {
        return false;
    };
    let eq = values.contains(&Some(want.as_str()));
    if c.op == Op::Ne {
        !eq
    } else {
        eq
    }
}

/// `cond` for `probe`.
pub fn for_probe(cond: Option<&Expr>, probe: &Probe) -> ForProbe {
    match cond {
        None => ForProbe::All,
        Some(e) => resolve(e, probe),
    }
}

fn resolve(e: &Expr, probe: &Probe) -> ForProbe {
    use ForProbe::*;
    match e {
        Expr::Cmp(c) => match fleet_value(probe, c.field) {
            Some(v) if truth(c, v) => All,
            Some(_) => Excluded,
            None => Where(e.clone()),
        },
        Expr::Not(a) => match resolve(a, probe) {
            All => Excluded,
            Excluded => All,
            Where(x) => Where(Expr::Not(Box::new(x))),
        },
        Expr::And(a, b) => match (resolve(a, probe), resolve(b, probe)) {
            (Excluded, _) | (_, Excluded) => Excluded,
            (All, x) | (x, All) => x,
            (Where(x), Where(y)) => Where(Expr::And(Box::new(x), Box::new(y))),
        },
        Expr::Or(a, b) => match (resolve(a, probe), resolve(b, probe)) {
            (All, _) | (_, All) => All,
            (Excluded, x) | (x, Excluded) => x,
            (Where(x), Where(y)) => Where(Expr::Or(Box::new(x), Box::new(y))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use trawl_query::syntax::parse;

    fn probe(name: &str, site: Option<&str>) -> Probe {
        Probe {
            name: name.into(),
            url: String::new(),
            endpoint: crate::config::Endpoint::parse("http://127.0.0.1:1").unwrap(),
            token: None,
            tls: None,
            site: site.map(Into::into),
            role: None,
            pair: None,
        }
    }

    fn show(f: ForProbe) -> String {
        match f {
            ForProbe::Excluded => "excluded".into(),
            ForProbe::All => "all".into(),
            ForProbe::Where(e) => e.to_string(),
        }
    }

    #[test]
    fn fleet_fields_resolve_per_probe() {
        let fra = probe("fra1", Some("fra"));
        let ams = probe("ams1", None);
        let c = parse("probe = fra1 and dport = 443").unwrap();
        assert_eq!(show(for_probe(Some(&c), &fra)), "dport = 443");
        assert_eq!(show(for_probe(Some(&c), &ams)), "excluded");
        let c = parse("site = fra or dport = 53").unwrap();
        assert_eq!(show(for_probe(Some(&c), &fra)), "all");
        assert_eq!(show(for_probe(Some(&c), &ams)), "dport = 53");
        let c = parse("not site = fra and (probe != ams1 or proto = udp)").unwrap();
        assert_eq!(show(for_probe(Some(&c), &fra)), "excluded");
        assert_eq!(show(for_probe(Some(&c), &ams)), "proto = udp");
        assert_eq!(show(for_probe(None, &ams)), "all");
        // A pair member is its own name and its pair's.
        let east = Probe {
            pair: Some("tap".into()),
            ..probe("east", None)
        };
        let c = parse("probe = tap and dport = 53").unwrap();
        assert_eq!(show(for_probe(Some(&c), &east)), "dport = 53");
        assert_eq!(show(for_probe(Some(&c), &ams)), "excluded");
        let c = parse("probe != tap").unwrap();
        assert_eq!(show(for_probe(Some(&c), &east)), "excluded");
    }
}
