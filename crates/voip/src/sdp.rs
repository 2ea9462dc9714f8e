//! SDP (RFC 4566) as offer/answer carries it in SIP: per media line, where RTP and RTCP are to
//! be sent (connection address, port, `a=rtcp`), and the payload types with their `rtpmap`.
use std::net::IpAddr;

use crate::codec::Codec;
use crate::Error;

/// One `m=` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Media {
    /// `audio`, `video`, `image`, ...
    pub kind: String,
    /// Address RTP is to be sent to (media-level `c=`, else session-level).
    pub addr: Option<IpAddr>,
    /// RTP port (0: the stream is rejected or disabled).
    pub port: u16,
    /// RTCP port: `a=rtcp`, else the RTP port + 1.
    pub rtcp_port: u16,
    /// Transport (`RTP/AVP`, `RTP/SAVP`, `udptl`, ...).
    pub proto: String,
    /// Payload types offered, in order of preference.
    pub payload_types: Vec<u8>,
    /// `a=rtpmap` entries.
    pub rtpmap: Vec<(u8, Codec)>,
}

impl Media {
    /// The codec `rtpmap` gives a payload type.
    pub fn codec(&self, pt: u8) -> Option<&Codec> {
        self.rtpmap.iter().find(|(p, _)| *p == pt).map(|(_, c)| c)
    }
}

/// Parses an SDP body. Lines it does not use are skipped; a media line without a valid port
/// or an unparsable address is an error naming it.
pub fn parse(body: &[u8]) -> Result<Vec<Media>, Error> {
    let text = std::str::from_utf8(body).map_err(|_| Error::Sdp("not UTF-8"))?;
    let mut session_addr = None;
    let mut media: Vec<Media> = Vec::new();
    for line in text.lines() {
        let line = line.trim_end();
        let Some((kind, value)) = line.split_once('=') else {
            continue;
        };
        match kind {
            "c" => {
                let addr = connection(value)?;
                match media.last_mut() {
                    Some(m) => m.addr = Some(addr),
                    None => session_addr = Some(addr),
                }
            }
            "m" => media.push(media_line(value, session_addr)?),
            "a" => {
                if let Some(m) = media.last_mut() {
                    attribute(value, m);
                }
            }
            _ => {}
        }
    }
    Ok(media)
}

/// `c=IN IP4 192.0.2.1` (a multicast `/ttl` suffix is dropped).
fn connection(v: &str) -> Result<IpAddr, Error> {
    let mut f = v.split_whitespace();
    let (Some("IN"), Some(_), Some(addr)) = (f.next(), f.next(), f.next()) else {
        return Err(Error::Sdp("bad c= line"));
    };
    let addr = addr.split('/').next().unwrap_or_default();
    addr.parse().map_err(|_| Error::Sdp("bad c= address"))
}

/// `m=audio 49170 RTP/AVP 0 8 101`.
fn media_line(v: &str, addr: Option<IpAddr>) -> Result<Media, Error> {
    let mut f = v.split_whitespace();
    let (Some(kind), Some(port), Some(proto)) = (f.next(), f.next(), f.next()) else {
        return Err(Error::Sdp("bad m= line"));
    };
    // `port/count` (RFC 4566 §5.14): the first port is RTP's.
    let port: u16 = port
        .split('/')
        .next()
        .unwrap_or_default()
        .parse()
        .map_err(|_| Error::Sdp("bad m= port"))?;
    Ok(Media {
        kind: kind.to_string(),
        addr,
        port,
        rtcp_port: port.wrapping_add(1),
        proto: proto.to_string(),
        payload_types: f
            .filter_map(|p| p.parse::<u8>().ok())
            .filter(|&p| p < 128)
            .collect(),
        rtpmap: Vec::new(),
    })
}

/// `a=rtpmap:101 telephone-event/8000`, `a=rtcp:53020`.
fn attribute(v: &str, m: &mut Media) {
    if let Some(map) = v.strip_prefix("rtpmap:") {
        let Some((pt, enc)) = map.split_once(' ') else {
            return;
        };
        let Ok(pt) = pt.trim().parse::<u8>() else {
            return;
        };
        let mut parts = enc.trim().split('/');
        let name = parts.next().unwrap_or_default().to_string();
        let clock_rate = parts.next().and_then(|r| r.parse().ok()).unwrap_or(0);
        m.rtpmap.retain(|(p, _)| *p != pt);
        m.rtpmap.push((pt, Codec { name, clock_rate }));
    } else if let Some(rtcp) = v.strip_prefix("rtcp:") {
        if let Some(port) = rtcp.split_whitespace().next().and_then(|p| p.parse().ok()) {
            m.rtcp_port = port;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_offer_with_session_and_media_connections() {
        let sdp = b"v=0\r\no=- 1 1 IN IP4 10.0.0.1\r\ns=-\r\nc=IN IP4 10.0.0.1\r\nt=0 0\r\n\
            m=audio 49170 RTP/AVP 0 8 101\r\na=rtpmap:101 telephone-event/8000\r\na=rtcp:49200\r\n\
            m=video 0 RTP/AVP 96\r\nc=IN IP6 2001:db8::1\r\n";
        let m = parse(sdp).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].addr, Some("10.0.0.1".parse().unwrap()));
        assert_eq!((m[0].port, m[0].rtcp_port), (49170, 49200));
        assert_eq!(m[0].payload_types, vec![0, 8, 101]);
        assert_eq!(m[0].codec(101).unwrap().name, "telephone-event");
        assert_eq!(m[1].addr, Some("2001:db8::1".parse().unwrap()));
        assert_eq!((m[1].port, m[1].rtcp_port), (0, 1));
    }

    #[test]
    fn bad_lines_are_named() {
        assert_eq!(
            parse(b"m=audio x RTP/AVP 0"),
            Err(Error::Sdp("bad m= port"))
        );
        assert_eq!(
            parse(b"c=IN IP4 999.1.1.1"),
            Err(Error::Sdp("bad c= address"))
        );
        assert_eq!(parse(b"garbage\nv=0\n").unwrap(), vec![]);
    }
}
