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

/// The value of a fleet field for `probe` (`None`: not a fleet field).
fn fleet_value(probe: &Probe, field: Field) -> Option<Option<&str>> {
    match field {
        Field::Probe => Some(Some(probe.name.as_str())),
        Field::Site => Some(probe.site.as_deref()),
        Field::Role => Some(probe.role.as_deref()),
        _ => None,
    }
}

/// The truth of a comparison on a fleet field (a probe without the tag matches no `=` and
/// every `!=`).
fn truth(c: &Comparison, value: Option<&str>) -> bool {
    let Value::Name(want) = &c.value else {
        return false;
    };
    let eq = value == Some(want.as_str());
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
    }
}
