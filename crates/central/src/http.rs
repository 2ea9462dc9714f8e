//! ClickHouse's HTTP interface, the few requests trawl makes: a statement with its data in
//! the body (`INSERT ... FORMAT RowBinary`), or a query in the body with its result read back
//! (`TabSeparated`). Plain HTTP/1.1 over a TCP connection per request, no TLS: a loopback or
//! private-network server, as the central tier runs beside its consumers.
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::Error;

/// A server: `http://HOST:PORT[/]`, the user and database.
#[derive(Clone, Debug)]
pub struct Server {
    /// `HOST:PORT`.
    pub addr: String,
    /// The URL as given (for messages).
    pub url: String,
    /// Database queries run in unless they name one.
    pub database: Option<String>,
    /// How long a request may take.
    pub timeout: Duration,
}

impl Server {
    /// Parses `http://HOST[:PORT][/]` (port 8123 by default).
    pub fn parse(url: &str) -> Result<Server, Error> {
        let bad = |why: &str| Error::BadUrl {
            url: url.to_string(),
            why: why.to_string(),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("expected http://HOST:PORT"))?;
        let host = rest.trim_end_matches('/');
        if host.is_empty() || host.contains('/') || host.contains('?') {
            return Err(bad("expected http://HOST:PORT with no path"));
        }
        let addr = if host
            .rsplit_once(':')
            .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
        {
            host.to_string()
        } else {
            format!("{host}:8123")
        };
        Ok(Server {
            addr,
            url: url.to_string(),
            database: None,
            timeout: Duration::from_secs(300),
        })
    }

    /// Runs `query` (in the URL) with `body` as its data; returns the response body.
    pub fn insert(&self, query: &str, body: &[u8]) -> Result<Vec<u8>, Error> {
        let mut path = format!("/?query={}", percent(query));
        if let Some(db) = &self.database {
            path.push_str(&format!("&database={}", percent(db)));
        }
        self.post(&path, body)
    }

    /// Runs `query` (in the body) and returns the response body.
    pub fn query(&self, query: &str) -> Result<Vec<u8>, Error> {
        let path = match &self.database {
            Some(db) => format!("/?database={}", percent(db)),
            None => "/".to_string(),
        };
        self.post(&path, query.as_bytes())
    }

    /// Runs `query` and returns the response as text.
    pub fn query_text(&self, query: &str) -> Result<String, Error> {
        let body = self.query(query)?;
        String::from_utf8(body).map_err(|_| Error::Server {
            url: self.url.clone(),
            status: 200,
            message: "the response is not UTF-8".into(),
        })
    }

    fn post(&self, path: &str, body: &[u8]) -> Result<Vec<u8>, Error> {
        let io = |what: &str, e: std::io::Error| Error::Http {
            url: self.url.clone(),
            what: what.to_string(),
            source: e,
        };
        let stream = TcpStream::connect(&self.addr).map_err(|e| io("connect", e))?;
        stream
            .set_read_timeout(Some(self.timeout))
            .and_then(|_| stream.set_write_timeout(Some(self.timeout)))
            .map_err(|e| io("set timeouts", e))?;
        let _ = stream.set_nodelay(true);
        let mut w = std::io::BufWriter::with_capacity(1 << 20, &stream);
        write!(
            w,
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.addr,
            body.len()
        )
        .and_then(|_| w.write_all(body))
        .and_then(|_| w.flush())
        .map_err(|e| io("send the request", e))?;
        drop(w);
        let mut r = BufReader::new(&stream);
        let (status, chunked, length) =
            read_head(&mut r).map_err(|e| io("read the response", e))?;
        let mut out = Vec::new();
        if chunked {
            read_chunked(&mut r, &mut out).map_err(|e| io("read the response", e))?;
        } else if let Some(n) = length {
            out.resize(n, 0);
            r.read_exact(&mut out)
                .map_err(|e| io("read the response", e))?;
        } else {
            r.read_to_end(&mut out)
                .map_err(|e| io("read the response", e))?;
        }
        if status != 200 {
            return Err(Error::Server {
                url: self.url.clone(),
                status,
                message: String::from_utf8_lossy(&out).trim().to_string(),
            });
        }
        Ok(out)
    }
}

/// The status, whether the body is chunked, and its length when given.
fn read_head(r: &mut impl BufRead) -> std::io::Result<(u16, bool, Option<usize>)> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_string());
    let mut line = String::new();
    r.read_line(&mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("no HTTP status line"))?;
    let (mut chunked, mut length) = (false, None);
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(bad("the response ended in its head"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim());
            if k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked") {
                chunked = true;
            } else if k == "content-length" {
                length = v.parse().ok();
            }
        }
    }
    Ok((status, chunked, length))
}

fn read_chunked(r: &mut impl BufRead, out: &mut Vec<u8>) -> std::io::Result<()> {
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line)?;
        let size = line.trim().split(';').next().unwrap_or("");
        let n = usize::from_str_radix(size, 16)
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad chunk size"))?;
        if n == 0 {
            return Ok(());
        }
        let at = out.len();
        out.resize(at + n, 0);
        r.read_exact(&mut out[at..])?;
        line.clear();
        r.read_line(&mut line)?;
    }
}

/// Percent-encodes a URL query value.
fn percent(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 3);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_urls() {
        assert_eq!(
            Server::parse("http://127.0.0.1:18123/").unwrap().addr,
            "127.0.0.1:18123"
        );
        assert_eq!(Server::parse("http://ch").unwrap().addr, "ch:8123");
        assert!(Server::parse("https://ch").is_err());
        assert!(Server::parse("http://ch/db").is_err());
    }

    #[test]
    fn chunked_bodies_are_joined() {
        let mut r = &b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"[..];
        let (status, chunked, _) = read_head(&mut r).unwrap();
        assert_eq!((status, chunked), (200, true));
        let mut out = Vec::new();
        read_chunked(&mut r, &mut out).unwrap();
        assert_eq!(out, b"abcde");
        assert_eq!(percent("a b=1"), "a%20b%3D1");
    }
}
