//! Where an exporter sends: parsed from `--export` arguments and `[[export]]` tables.
use std::fmt;
use std::net::{Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::str::FromStr;

use crate::Error;

/// One export destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// `ipfix+udp://HOST:PORT`
    IpfixUdp(SocketAddr),
    /// `ipfix+tcp://HOST:PORT` (IPFIX message framing, RFC 7011 10.4)
    IpfixTcp(SocketAddr),
    /// `ipfix:/path/file.ipfix` (RFC 5655 file: messages back to back)
    IpfixFile(PathBuf),
    /// `netflow9+udp://HOST:PORT`
    Netflow9Udp(SocketAddr),
    /// `netflow5+udp://HOST:PORT`
    Netflow5Udp(SocketAddr),
    /// `json:/path` (JSON lines)
    JsonFile(PathBuf),
    /// `json:-` (JSON lines on standard output)
    JsonStdout,
    /// `json+tcp://HOST:PORT` (JSON lines on a TCP connection)
    JsonTcp(SocketAddr),
    /// A multicast live feed of flow records (IPFIX, templates in every message).
    Feed(FeedAddr),
}

/// A multicast feed: the group of the first interface, the UDP port, the TTL, and which local
/// address (interface) to send from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FeedAddr {
    /// Group of interface slot 0; interface slot `n` uses this address plus `n`.
    pub group: Ipv4Addr,
    /// UDP port.
    pub port: u16,
    /// Multicast TTL (1: this link only).
    pub ttl: u32,
    /// Local address to send from (selects the outgoing interface); None: the route's.
    pub source: Option<Ipv4Addr>,
}

impl FeedAddr {
    /// Parses `GROUP:PORT` (TTL 1, no source address).
    pub fn parse(s: &str) -> Result<FeedAddr, Error> {
        let bad = |why: &str| Error::BadDestination {
            text: s.to_string(),
            why: why.to_string(),
        };
        let (g, p) = s
            .rsplit_once(':')
            .ok_or_else(|| bad("expected GROUP:PORT, e.g. 239.255.10.1:5500"))?;
        let group: Ipv4Addr = g.parse().map_err(|_| bad("group is not an IPv4 address"))?;
        if !group.is_multicast() {
            return Err(bad("not a multicast group (224.0.0.0/4)"));
        }
        let port: u16 = p.parse().map_err(|_| bad("port is not a number"))?;
        if port == 0 {
            return Err(bad("port 0"));
        }
        Ok(FeedAddr {
            group,
            port,
            ttl: 1,
            source: None,
        })
    }

    /// The group of interface slot `slot` (the base group plus the slot).
    pub fn group_for(&self, slot: u16) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.group).wrapping_add(u32::from(slot)))
    }
}

impl fmt::Display for FeedAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.group, self.port)
    }
}

fn resolve(text: &str, hostport: &str) -> Result<SocketAddr, Error> {
    hostport
        .to_socket_addrs()
        .map_err(|e| Error::BadDestination {
            text: text.to_string(),
            why: format!("cannot resolve '{hostport}': {e}"),
        })?
        .next()
        .ok_or_else(|| Error::BadDestination {
            text: text.to_string(),
            why: format!("'{hostport}' has no address"),
        })
}

impl FromStr for Destination {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        let bad = |why: &str| Error::BadDestination {
            text: s.to_string(),
            why: why.to_string(),
        };
        let (scheme, rest) = s.split_once(':').ok_or_else(|| {
            bad("expected SCHEME:TARGET (ipfix+udp://, ipfix+tcp://, ipfix:PATH, netflow9+udp://, netflow5+udp://, json:PATH, json:-, json+tcp://)")
        })?;
        let net = |rest: &str| -> Result<SocketAddr, Error> {
            let hp = rest
                .strip_prefix("//")
                .ok_or_else(|| bad("expected //HOST:PORT"))?;
            resolve(s, hp)
        };
        let path = |rest: &str| -> Result<PathBuf, Error> {
            let p = rest.strip_prefix("//").unwrap_or(rest);
            if p.is_empty() {
                return Err(bad("empty path"));
            }
            Ok(PathBuf::from(p))
        };
        Ok(match scheme {
            "ipfix+udp" => Destination::IpfixUdp(net(rest)?),
            "ipfix+tcp" => Destination::IpfixTcp(net(rest)?),
            "ipfix" | "ipfix+file" => Destination::IpfixFile(path(rest)?),
            "netflow9+udp" | "netflow9" => Destination::Netflow9Udp(net(rest)?),
            "netflow5+udp" | "netflow5" => Destination::Netflow5Udp(net(rest)?),
            "json" if rest == "-" => Destination::JsonStdout,
            "json" => Destination::JsonFile(path(rest)?),
            "json+tcp" => Destination::JsonTcp(net(rest)?),
            "feed" | "multicast" => {
                Destination::Feed(FeedAddr::parse(rest.strip_prefix("//").unwrap_or(rest))?)
            }
            other => return Err(bad(&format!("unknown scheme '{other}'"))),
        })
    }
}

impl fmt::Display for Destination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Destination::IpfixUdp(a) => write!(f, "ipfix+udp://{a}"),
            Destination::IpfixTcp(a) => write!(f, "ipfix+tcp://{a}"),
            Destination::IpfixFile(p) => write!(f, "ipfix:{}", p.display()),
            Destination::Netflow9Udp(a) => write!(f, "netflow9+udp://{a}"),
            Destination::Netflow5Udp(a) => write!(f, "netflow5+udp://{a}"),
            Destination::JsonFile(p) => write!(f, "json:{}", p.display()),
            Destination::JsonStdout => write!(f, "json:-"),
            Destination::JsonTcp(a) => write!(f, "json+tcp://{a}"),
            Destination::Feed(a) => write!(f, "feed:{a}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_every_scheme() {
        let d: Destination = "ipfix+udp://127.0.0.1:4739".parse().unwrap();
        assert_eq!(d, Destination::IpfixUdp("127.0.0.1:4739".parse().unwrap()));
        let d: Destination = "ipfix:/tmp/x.ipfix".parse().unwrap();
        assert_eq!(d, Destination::IpfixFile("/tmp/x.ipfix".into()));
        assert_eq!(
            "json:-".parse::<Destination>().unwrap(),
            Destination::JsonStdout
        );
        assert!(matches!(
            "netflow5+udp://localhost:2055"
                .parse::<Destination>()
                .unwrap(),
            Destination::Netflow5Udp(_)
        ));
        let e = "sflow+udp://1.2.3.4:6343"
            .parse::<Destination>()
            .unwrap_err();
        assert!(e.to_string().contains("unknown scheme 'sflow+udp'"), "{e}");
        let e = "ipfix+udp:1.2.3.4".parse::<Destination>().unwrap_err();
        assert!(e.to_string().contains("//HOST:PORT"), "{e}");
        let e = FeedAddr::parse("10.0.0.1:5").unwrap_err();
        assert!(e.to_string().contains("multicast"), "{e}");
        assert_eq!(
            FeedAddr::parse("239.1.1.1:5500").unwrap().group_for(2),
            Ipv4Addr::new(239, 1, 1, 3)
        );
    }
}
