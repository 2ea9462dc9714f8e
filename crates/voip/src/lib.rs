//! VoIP monitoring (VoIPCallMon's design): SIP dialogs and their RTP streams, with call
//! quality, on packet time.
//!
//! - [`sip`] parses SIP messages (UDP datagrams or stream bytes) and [`sdp`] their SDP bodies;
//!   [`SipEvent`] is what the call table takes from one.
//! - [`Tracker`] is the call table: calls by Call-ID and by media endpoint, RTP streams by
//!   (source, destination, SSRC), orphan streams by heuristic, bounded sizes, timeouts.
//! - [`stats`] measures a stream (RFC 3550 loss and jitter, as tshark computes them) and
//!   [`codec`] names codecs and estimates MOS (G.107 E-model).
//! - [`CallRecord`] and [`StreamRecord`] are what ends up in `calls.jsonl` and `rtp.jsonl`;
//!   [`lookup`] finds calls in those files by caller, callee and time; [`audio`] decodes a
//!   call's G.711 streams to a WAV file.
//!
//! ```
//! use trawl_voip::{sip, SipEvent, Tracker, TrackerConfig, Output};
//! let invite = b"INVITE sip:bob@b.org SIP/2.0\r\nCall-ID: c1\r\nFrom: <sip:alice@a.org>;tag=1\r\n\
//!     To: <sip:bob@b.org>\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n";
//! let msg = sip::parse(invite).unwrap();
//! let (a, b) = ("10.0.0.1:5060".parse().unwrap(), "10.0.0.2:5060".parse().unwrap());
//! let mut table = Tracker::new(TrackerConfig::default()).unwrap();
//! let mut out = Output::default();
//! table.on_sip(&SipEvent::new(1_000, a, b, false, &msg), &mut out);
//! table.finish(&mut out);
//! assert_eq!(out.calls[0].from_user, "alice");
//! assert_eq!(out.calls[0].end_reason, "active_at_end");
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod audio;
pub mod codec;
mod error;
mod event;
mod hash;
mod index;
mod json;
pub mod lookup;
mod record;
pub mod rtp;
pub mod sdp;
pub mod sip;
mod slab;
pub mod stats;
mod tracker;

pub use error::Error;
pub use event::SipEvent;
pub use record::{CallRecord, StreamRecord};
pub use tracker::{Output, PacketKind, Packets, Tracker, TrackerConfig, TrackerStats};
