//! SIP messages (RFC 3261 §7): start line, the headers a call record needs (compact forms
//! included), and the body. Borrowed from the datagram or stream bytes; never panics.
use crate::Error;

/// Request or response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartLine<'a> {
    /// `METHOD uri SIP/2.0`.
    Request {
        /// The method (`INVITE`, `BYE`, ...).
        method: &'a str,
        /// The Request-URI.
        uri: &'a str,
    },
    /// `SIP/2.0 code reason`.
    Response {
        /// Status code.
        code: u16,
    },
}

/// One SIP message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    /// Request or response line.
    pub start: StartLine<'a>,
    /// `Call-ID` (`i`).
    pub call_id: &'a str,
    /// `From` (`f`).
    pub from: &'a str,
    /// `To` (`t`).
    pub to: &'a str,
    /// `CSeq` number.
    pub cseq: u32,
    /// `CSeq` method.
    pub cseq_method: &'a str,
    /// `User-Agent`, or `Server` in responses.
    pub user_agent: &'a str,
    /// `Content-Type` (`c`).
    pub content_type: &'a str,
    /// The body (`Content-Length` bytes when given, else the rest).
    pub body: &'a [u8],
    /// Bytes the message takes (start line to the end of the body): the next message on a
    /// stream starts here.
    pub len: usize,
}

/// True when `b` starts like a SIP message: a response or a request line ending in SIP/2.0.
pub fn looks_like_sip(b: &[u8]) -> bool {
    // Every start line begins with a capital letter: RTP (0x80..) is refused at the first byte.
    if !matches!(b.first(), Some(b'A'..=b'Z')) {
        return false;
    }
    if b.starts_with(b"SIP/2.0 ") {
        return true;
    }
    let line = &b[..b.len().min(256)];
    let Some(end) = line.iter().position(|&c| c == b'\r' || c == b'\n') else {
        return false;
    };
    line[..end].ends_with(b" SIP/2.0")
}

/// Where the header block ends (just past the empty line), if it is complete.
pub fn header_end(b: &[u8]) -> Option<usize> {
    b.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| p + 4)
        .or_else(|| b.windows(2).position(|w| w == b"\n\n").map(|p| p + 2))
}

/// Parses one message from the start of `b`. A body shorter than its `Content-Length` is
/// [`Error::Incomplete`] (a stream reader waits for more bytes).
pub fn parse(b: &[u8]) -> Result<Message<'_>, Error> {
    let head_len = header_end(b).ok_or(Error::Incomplete)?;
    let head = std::str::from_utf8(&b[..head_len]).map_err(|_| Error::Sip("header not UTF-8"))?;
    let mut lines = head.split('\n').map(|l| l.trim_end_matches('\r'));
    let first = lines.next().unwrap_or_default();
    let start = start_line(first)?;
    let mut m = Message {
        start,
        call_id: "",
        from: "",
        to: "",
        cseq: 0,
        cseq_method: "",
        user_agent: "",
        content_type: "",
        body: &[],
        len: 0,
    };
    let mut content_length = None;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "call-id" | "i" => m.call_id = value,
            "from" | "f" => m.from = value,
            "to" | "t" => m.to = value,
            "cseq" => {
                let (n, method) = value.split_once(' ').unwrap_or((value, ""));
                m.cseq = n.trim().parse().map_err(|_| Error::Sip("bad CSeq"))?;
                m.cseq_method = method.trim();
            }
            "user-agent" => m.user_agent = value,
            "server" if m.user_agent.is_empty() => m.user_agent = value,
            "content-type" | "c" => m.content_type = value,
            "content-length" | "l" => {
                content_length = Some(
                    value
                        .parse::<usize>()
                        .map_err(|_| Error::Sip("bad Content-Length"))?,
                )
            }
            _ => {}
        }
    }
    if m.call_id.is_empty() {
        return Err(Error::Sip("no Call-ID"));
    }
    let rest = &b[head_len..];
    let body_len = match content_length {
        Some(n) if n > rest.len() => return Err(Error::Incomplete),
        Some(n) => n,
        None => rest.len(),
    };
    m.body = &rest[..body_len];
    m.len = head_len + body_len;
    Ok(m)
}

fn start_line(line: &str) -> Result<StartLine<'_>, Error> {
    if let Some(rest) = line.strip_prefix("SIP/2.0 ") {
        let code = rest.get(..3).and_then(|c| c.parse().ok());
        return match code {
            Some(code @ 100..=699) => Ok(StartLine::Response { code }),
            _ => Err(Error::Sip("bad status code")),
        };
    }
    let mut parts = line.split(' ');
    let (Some(method), Some(uri), Some("SIP/2.0"), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(Error::Sip("bad request line"));
    };
    if method.is_empty() || !method.bytes().all(|c| c.is_ascii_uppercase()) {
        return Err(Error::Sip("bad method"));
    }
    Ok(StartLine::Request { method, uri })
}

/// A `From`/`To` value taken apart: display name, URI, user part and tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NameAddr<'a> {
    /// Display name, unquoted (may be empty).
    pub display: &'a str,
    /// The URI (`sip:alice@example.com`).
    pub uri: &'a str,
    /// The user part of the URI (the number or name), or the `tel:` number.
    pub user: &'a str,
    /// The `tag` parameter.
    pub tag: &'a str,
}

/// Splits a `From`/`To` header value.
pub fn name_addr(v: &str) -> NameAddr<'_> {
    let (display, uri, params) = match (v.find('<'), v.find('>')) {
        (Some(l), Some(r)) if l < r => (v[..l].trim().trim_matches('"'), &v[l + 1..r], &v[r + 1..]),
        _ => {
            let (uri, params) = v.split_once(';').unwrap_or((v, ""));
            ("", uri.trim(), params)
        }
    };
    let tag = params
        .split(';')
        .find_map(|p| p.trim().strip_prefix("tag="))
        .unwrap_or("");
    let scheme_less = uri.split_once(':').map_or(uri, |(_, r)| r);
    let user = match scheme_less.split_once('@') {
        Some((user, _)) => user,
        None if uri.starts_with("tel:") => scheme_less,
        None => "",
    };
    let user = user.split([';', ':']).next().unwrap_or("");
    NameAddr {
        display,
        uri,
        user,
        tag,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INVITE: &[u8] = b"INVITE sip:bob@biloxi.com SIP/2.0\r\n\
        Via: SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bK776asdhds\r\n\
        To: Bob <sip:bob@biloxi.com>\r\n\
        f: \"Alice\" <sip:alice@atlanta.com>;tag=1928301774\r\n\
        i: a84b4c76e66710@pc33.atlanta.com\r\n\
        CSeq: 314159 INVITE\r\n\
        User-Agent: softphone 1.0\r\n\
        Content-Type: application/sdp\r\n\
        l: 4\r\n\r\nv=0\r\nNEXT";

    #[test]
    fn parse_request_with_compact_headers() {
        let m = parse(INVITE).unwrap();
        assert_eq!(
            m.start,
            StartLine::Request {
                method: "INVITE",
                uri: "sip:bob@biloxi.com"
            }
        );
        assert_eq!(m.call_id, "a84b4c76e66710@pc33.atlanta.com");
        assert_eq!((m.cseq, m.cseq_method), (314159, "INVITE"));
        assert_eq!(m.user_agent, "softphone 1.0");
        assert_eq!(m.body, b"v=0\r");
        assert_eq!(&INVITE[m.len..], b"\nNEXT");
        let from = name_addr(m.from);
        assert_eq!(
            (from.display, from.uri, from.user, from.tag),
            ("Alice", "sip:alice@atlanta.com", "alice", "1928301774")
        );
        assert_eq!(name_addr("<tel:+1555;phone-context=x>").user, "+1555");
        assert_eq!(name_addr("sip:carol@c.org;tag=9").tag, "9");
    }

    #[test]
    fn truncated_body_is_incomplete_and_garbage_is_an_error() {
        assert_eq!(parse(&INVITE[..INVITE.len() - 8]), Err(Error::Incomplete));
        assert_eq!(parse(b"SIP/2.0 200 OK\r\n"), Err(Error::Incomplete));
        assert!(parse(b"SIP/2.0 999 no\r\n\r\n").is_err());
        assert!(parse(b"GET / HTTP/1.1\r\nCall-ID: x\r\n\r\n").is_err());
        assert!(looks_like_sip(INVITE));
        assert!(!looks_like_sip(b"GET / HTTP/1.1\r\n"));
    }
}
