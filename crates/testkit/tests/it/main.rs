//! Integration tests: trawl's flows against tshark's, and every corpus capture through the
//! whole pipeline.
mod community_id;
mod corpus_sweep;
mod feature_levels;
mod goldens;
mod ip_pairs;
mod needs;
mod oracle;
mod tcp_analysis;
mod tcp_rtt;
