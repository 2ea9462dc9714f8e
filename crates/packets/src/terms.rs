//! What a tcpdump filter expression says every matching packet must carry, for the host index.
//!
//! Deliberately conservative: only an expression that is a plain conjunction (`and`/`&&`) of
//! primitives is read, and only `[src|dst] [ip|ip6|tcp|udp|sctp] host ADDR` and
//! `[src|dst] [tcp|udp|sctp] port N` primitives yield items; anything else (other primitives,
//! `or`, `not`, parentheses, tunnel keywords that make libpcap look inside packets) adds no
//! requirement. An item returned here is carried by every packet the filter accepts, so
//! skipping a chunk that lacks it never loses a match; libpcap's filter still decides per
//! packet.
use std::net::IpAddr;

use crate::items::{addr_item, port_item};

/// Items every packet matching `expr` carries (empty: the index cannot help).
pub fn required_items(expr: &str) -> Vec<u32> {
    let spaced = expr
        .replace('(', " ( ")
        .replace(')', " ) ")
        .replace("&&", " and ")
        .replace("||", " or ")
        .replace('!', " not ");
    let tokens: Vec<String> = spaced.split_whitespace().map(str::to_lowercase).collect();
    const BAIL: [&str; 6] = ["or", "not", "(", ")", "vxlan", "geneve"];
    if tokens.iter().any(|t| BAIL.contains(&t.as_str())) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for primitive in tokens.split(|t| t == "and") {
        if let Some(item) = primitive_item(primitive) {
            out.push(item);
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

fn primitive_item(p: &[String]) -> Option<u32> {
    let (value, kind, qualifiers) = match p {
        [q @ .., kind, value] => (value.as_str(), kind.as_str(), q),
        _ => return None,
    };
    const QUALIFIERS: [&str; 7] = ["src", "dst", "ip", "ip6", "tcp", "udp", "sctp"];
    if !qualifiers.iter().all(|q| QUALIFIERS.contains(&q.as_str())) {
        return None;
    }
    match kind {
        "host" => {
            // `ip host` / `ip6 host` / `host`: a transport qualifier makes no sense here.
            if qualifiers
                .iter()
                .any(|q| matches!(q.as_str(), "tcp" | "udp" | "sctp"))
            {
                return None;
            }
            let ip: IpAddr = value.parse().ok()?;
            let v6 = match ip {
                IpAddr::V4(a) => a.to_ipv6_mapped(),
                IpAddr::V6(a) => a,
            };
            Some(addr_item(&v6.octets()))
        }
        "port" => {
            if qualifiers
                .iter()
                .any(|q| matches!(q.as_str(), "ip" | "ip6"))
            {
                return None;
            }
            let port: u16 = value.parse().ok()?;
            Some(port_item(port))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4(s: &str) -> u32 {
        let a: std::net::Ipv4Addr = s.parse().unwrap();
        addr_item(&a.to_ipv6_mapped().octets())
    }

    #[test]
    fn reads_conjunctions_of_hosts_and_ports() {
        let mut want = vec![v4("10.0.0.1"), port_item(443)];
        want.sort_unstable();
        assert_eq!(required_items("host 10.0.0.1 and tcp port 443"), want);
        assert_eq!(required_items("src host 10.0.0.1 && dst port 443"), want);
        assert_eq!(required_items("HOST 10.0.0.1"), vec![v4("10.0.0.1")]);
        let six: std::net::Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert_eq!(
            required_items("ip6 host 2001:db8::1 and tcp"),
            vec![addr_item(&six.octets())]
        );
        // Unknown primitives add nothing but do not stop the others.
        assert_eq!(
            required_items("net 10.0.0.0/8 and host 10.0.0.1 and greater 100"),
            vec![v4("10.0.0.1")]
        );
    }

    #[test]
    fn gives_up_on_anything_not_a_plain_conjunction() {
        for e in [
            "host 10.0.0.1 or host 10.0.0.2",
            "not host 10.0.0.1",
            "!host 10.0.0.1",
            "(host 10.0.0.1)",
            "host 10.0.0.1 || port 1",
            "vxlan and host 10.0.0.1",
            "host example.com",
            "port http",
            "ether host 00:11:22:33:44:55",
            "tcp host 10.0.0.1",
            "portrange 1-100",
            "",
        ] {
            assert!(required_items(e).is_empty(), "{e}");
        }
    }
}
