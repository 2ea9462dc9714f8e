//! Integration tests of trawl-app.
mod community_id;
mod dns;
mod pcap;
mod tls;
