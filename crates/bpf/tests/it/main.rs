//! Integration tests of trawl-bpf: libpcap is the oracle.

mod corpus;
mod differential;
mod errors;
mod oracle;
