//! [`SipEvent`]: a SIP message with what the call table needs, owned (it travels from the
//! `sip` block to `rtp_calls`), and its SDP media already parsed.
use std::net::SocketAddr;

use crate::sdp::{self, Media};
use crate::sip::{Message, StartLine};

/// A SIP message seen on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SipEvent {
    /// Capture time (ns).
    pub ts_ns: u64,
    /// Sender.
    pub src: SocketAddr,
    /// Receiver.
    pub dst: SocketAddr,
    /// Came over TCP (else UDP).
    pub tcp: bool,
    /// The request's method, or `None` for a response.
    pub method: Option<String>,
    /// The response's status code (0 for requests).
    pub code: u16,
    /// `Call-ID`.
    pub call_id: String,
    /// `From` header value.
    pub from: String,
    /// `To` header value.
    pub to: String,
    /// `CSeq` number and method.
    pub cseq: u32,
    /// `CSeq` method (what a response answers).
    pub cseq_method: String,
    /// `User-Agent` (requests) or `Server` (responses).
    pub user_agent: String,
    /// Media lines of an SDP body.
    pub media: Vec<Media>,
    /// The body claimed to be SDP and was not readable.
    pub bad_sdp: bool,
}

impl SipEvent {
    /// Copies what the call table needs out of `m`, parsing its SDP body.
    pub fn new(ts_ns: u64, src: SocketAddr, dst: SocketAddr, tcp: bool, m: &Message<'_>) -> Self {
        let (method, code) = match m.start {
            StartLine::Request { method, .. } => (Some(method.to_string()), 0),
            StartLine::Response { code } => (None, code),
        };
        let is_sdp = m
            .content_type
            .to_ascii_lowercase()
            .starts_with("application/sdp");
        let (media, bad_sdp) = if is_sdp && !m.body.is_empty() {
            match sdp::parse(m.body) {
                Ok(media) => (media, false),
                Err(_) => (Vec::new(), true),
            }
        } else {
            (Vec::new(), false)
        };
        SipEvent {
            ts_ns,
            src,
            dst,
            tcp,
            method,
            code,
            call_id: m.call_id.to_string(),
            from: m.from.to_string(),
            to: m.to.to_string(),
            cseq: m.cseq,
            cseq_method: m.cseq_method.to_string(),
            user_agent: m.user_agent.to_string(),
            media,
            bad_sdp,
        }
    }

    /// True for a request with this method.
    pub fn is(&self, method: &str) -> bool {
        self.method.as_deref() == Some(method)
    }
}
