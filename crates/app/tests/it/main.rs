//! Integration tests of trawl-app.
mod classify;
mod community_id;
mod dns;
mod http;
mod pcap;
mod tls;
