//! Query-string parameters: each endpoint names the ones it takes; an unknown one, or a
//! value that does not parse, is a 400 whose message names the parameter (typos are caught,
//! not ignored).
use std::collections::BTreeMap;

/// A request's parameters, by name (a repeated name keeps its last value).
pub(crate) struct Params {
    values: BTreeMap<String, String>,
}

/// A bad parameter: its name and what is wrong, for the 400 answer.
#[derive(Debug)]
pub(crate) struct BadParam {
    pub parameter: String,
    pub message: String,
}

impl BadParam {
    pub(crate) fn new(parameter: &str, message: impl Into<String>) -> BadParam {
        BadParam {
            parameter: parameter.to_string(),
            message: message.into(),
        }
    }
}

impl Params {
    /// The parameters of `raw`, refusing names not in `allowed`.
    pub(crate) fn parse(raw: Vec<(String, String)>, allowed: &[&str]) -> Result<Params, BadParam> {
        let mut values = BTreeMap::new();
        for (k, v) in raw {
            if !allowed.contains(&k.as_str()) {
                return Err(BadParam::new(
                    &k,
                    format!(
                        "unknown parameter {k:?} (this endpoint takes {})",
                        allowed.join(", ")
                    ),
                ));
            }
            values.insert(k, v);
        }
        Ok(Params { values })
    }

    /// The value of `name`, when given and not empty.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.values
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.trim().is_empty())
    }

    /// An instant (the command line's forms: RFC 3339, epoch seconds/ms/us/ns, `-15m`,
    /// `now`), in ns since the epoch.
    pub(crate) fn time(&self, name: &str) -> Result<Option<u64>, BadParam> {
        self.get(name)
            .map(|v| {
                trawl_time::parse_instant(v, trawl_time::now_ns())
                    .map_err(|e| BadParam::new(name, format!("invalid {name} {v:?}: {e}")))
            })
            .transpose()
    }

    /// A count.
    pub(crate) fn number(&self, name: &str) -> Result<Option<u64>, BadParam> {
        self.get(name)
            .map(|v| {
                v.parse::<u64>().map_err(|_| {
                    BadParam::new(name, format!("invalid {name} {v:?}: not a whole number"))
                })
            })
            .transpose()
    }

    /// A duration (`5m`, `1h`), in ns.
    pub(crate) fn duration(&self, name: &str) -> Result<Option<u64>, BadParam> {
        self.get(name)
            .map(|v| {
                trawl_time::parse_duration_ns(v)
                    .map_err(|e| BadParam::new(name, format!("invalid {name} {v:?}: {e}")))
            })
            .transpose()
    }

    /// A comma-separated list of interface names (checked: they never reach a path
    /// unchecked).
    pub(crate) fn ifaces(&self, name: &str) -> Result<Vec<String>, BadParam> {
        let Some(v) = self.get(name) else {
            return Ok(Vec::new());
        };
        v.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|i| {
                if trawl_store::layout::valid_iface(i) {
                    Ok(i.to_string())
                } else {
                    Err(BadParam::new(
                        name,
                        format!("invalid interface name {i:?} in {name}"),
                    ))
                }
            })
            .collect()
    }
}
