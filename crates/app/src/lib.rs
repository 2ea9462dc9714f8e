//! The application layer as a library: what trawl reads above TCP and UDP.
//!
//! - [`CommunityId`] computes Community ID v1 of a [`FlowTuple`] (trawl-flow's, which flow
//!   records use too, re-exported).
//! - [`dns`] parses DNS messages (UDP, or TCP through [`dns::TcpFramer`]) and joins requests to
//!   responses ([`dns::Joiner`]).
//! - [`tls`] reads the first ClientHello/ServerHello of a TCP direction ([`tls::HelloReader`])
//!   and computes JA4 and JA4S.
//! - [`quic`] decrypts QUIC Initial packets and reads the hellos of their CRYPTO frames
//!   ([`quic::Connection`]).
//! - [`x509`] reads the fields the TLS log keeps of a certificate (a small bounded DER
//!   reader); [`tls::CertificateReader`] finds the server's first certificate after its hello.
//! - [`reassembly`] puts a TCP direction's segments in order ([`reassembly::Stream`]), bounded
//!   and counted, for the TLS and HTTP readers.
//! - [`classify`] labels a flow with its application from the first payload bytes of each
//!   direction (the port as a marked fallback).
//! - [`http`] finds HTTP/1.x request and response heads in a direction's bytes
//!   ([`http::HttpStream`]), skipping bodies by length, chunks or connection end.
//!
//! ```
//! use trawl_app::{CommunityId, FlowTuple};
//! let flow = FlowTuple {
//!     proto: 6,
//!     src_ip: "1.2.3.4".parse().unwrap(),
//!     dst_ip: "5.6.7.8".parse().unwrap(),
//!     src_port: 1122,
//!     dst_port: 3344,
//! };
//! assert_eq!(CommunityId::default().compute(&flow).unwrap(), "1:wCb3OG7yAFWelaUydu0D+125CLM=");
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod classify;
pub use trawl_flow::community_id;
pub mod dns;
mod error;
pub mod http;
pub mod quic;
pub mod reassembly;
mod sha256;
pub mod tls;
pub mod x509;

pub use community_id::{CommunityId, FlowTuple};
pub use error::{DnsErrorKind, Error, HttpErrorKind, QuicErrorKind, TlsErrorKind, X509ErrorKind};
