//! Address prefixes (`10.0.0.0/8`, `2001:db8::/32`) for `--keep`.

use std::net::IpAddr;
use std::str::FromStr;

use crate::Error;

/// An IPv4 or IPv6 prefix; addresses of the other family never match it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    /// The network address (bits past `len` cleared).
    pub addr: IpAddr,
    /// The prefix length in bits.
    pub len: u8,
}

impl Prefix {
    /// Whether `addr` lies inside this prefix.
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self.addr, addr) {
            (IpAddr::V4(p), IpAddr::V4(a)) => {
                mask(u128::from(u32::from(a)) << 96, self.len) == u128::from(u32::from(p)) << 96
            }
            (IpAddr::V6(p), IpAddr::V6(a)) => mask(u128::from(a), self.len) == u128::from(p),
            _ => false,
        }
    }
}

/// `bits` with all but the first `len` (of 128) cleared.
fn mask(bits: u128, len: u8) -> u128 {
    match len {
        0 => 0,
        len => bits & (u128::MAX << (128 - u32::from(len))),
    }
}

impl FromStr for Prefix {
    type Err = Error;

    /// `ADDRESS/LENGTH`, or a bare address (a host prefix). Host bits past the length are
    /// cleared, as `ip route` does, so `10.1.2.3/8` keeps `10.0.0.0/8`.
    fn from_str(text: &str) -> Result<Prefix, Error> {
        let err = |reason| Error::Prefix {
            text: text.to_owned(),
            reason,
        };
        let (addr, len) = match text.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (text, None),
        };
        let addr: IpAddr = addr
            .parse()
            .map_err(|_| err("not an IPv4 or IPv6 address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match len {
            Some(l) => l
                .parse::<u8>()
                .map_err(|_| err("the length is not a number"))?,
            None => max,
        };
        if len > max {
            return Err(err("the length is longer than the address"));
        }
        let addr = match addr {
            IpAddr::V4(a) => {
                IpAddr::V4(((mask(u128::from(u32::from(a)) << 96, len) >> 96) as u32).into())
            }
            IpAddr::V6(a) => IpAddr::V6(mask(u128::from(a), len).into()),
        };
        Ok(Prefix { addr, len })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_contains() {
        let p: Prefix = "10.1.2.3/8".parse().unwrap();
        assert_eq!(p.addr, IpAddr::from([10, 0, 0, 0]));
        assert!(p.contains("10.255.0.1".parse().unwrap()));
        assert!(!p.contains("11.0.0.1".parse().unwrap()));
        assert!(!p.contains("::a00:1".parse().unwrap()));
        let all: Prefix = "::/0".parse().unwrap();
        assert!(all.contains("2001:db8::1".parse().unwrap()));
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("ten/8".parse::<Prefix>().is_err());
    }
}
