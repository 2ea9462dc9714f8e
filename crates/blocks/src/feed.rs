//! `series_feed`: per-second rows to a live multicast feed (IPFIX over UDP multicast, the
//! template in every message, as `trawl series --series-feed` sends them and `trawl
//! subscribe` reads them). Flow records reach a feed through `flow_export` (`feed:GROUP:PORT`).
use std::net::Ipv4Addr;

use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg};
use trawl_export::feed::SeriesFeed;
use trawl_export::FeedAddr;

use crate::messages::{SeriesBatch, SERIES};

/// Sends every row it receives to a multicast group, one message per row.
pub struct SeriesFeedBlock {
    feed: SeriesFeed,
    slot: u16,
    domain: u32,
    counters: Option<[Counter; 2]>,
}

/// Settings of `series_feed`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SeriesFeedSettings {
    /// `GROUP:PORT`, the multicast group of interface slot 0 (e.g. `239.255.10.2:5501`).
    pub group: String,
    /// Interface slot of these rows: they go to the group plus this (default 0).
    #[serde(default)]
    pub slot: u16,
    /// IPFIX observation domain of the rows (default 1, as `trawl` uses for files).
    pub domain: Option<u32>,
    /// Take the observation domain from this interface's kernel index instead.
    pub interface: Option<String>,
    /// Multicast TTL (default 1: the link only).
    pub ttl: Option<u32>,
    /// Send from this local IPv4 address (its interface carries the feed).
    pub source: Option<Ipv4Addr>,
    /// Private Enterprise Number of trawl's own IPFIX elements (default 32473).
    pub pen: Option<u32>,
}

impl SeriesFeedSettings {
    fn addr(&self) -> Result<FeedAddr, String> {
        let mut f = FeedAddr::parse(&self.group).map_err(|e| format!("`group`: {e}"))?;
        f.ttl = self.ttl.unwrap_or(f.ttl);
        f.source = self.source;
        Ok(f)
    }
}

impl Block for SeriesFeedBlock {
    const TYPE: &'static str = "series_feed";
    const SUMMARY: &'static str =
        "sends per-second rows to a live multicast feed (IPFIX over UDP, `trawl subscribe`)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "series",
        ty: SERIES,
        required: true,
        doc: "rows to send (from one counter or a series_merge)",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = SeriesFeedSettings;

    fn check(s: &SeriesFeedSettings) -> Result<(), String> {
        s.addr()?;
        if s.domain.is_some() && s.interface.is_some() {
            return Err("give `domain` or `interface`, not both".into());
        }
        Ok(())
    }

    fn build(s: SeriesFeedSettings, _env: &BuildEnv) -> Result<Self, String> {
        let domain = match &s.interface {
            Some(name) => crate::export::ifindex(name)
                .ok_or_else(|| format!("no interface named {name:?} (`interface`)"))?,
            None => s.domain.unwrap_or(1),
        };
        let pen = s.pen.unwrap_or(trawl_export::ie::DEFAULT_PEN);
        let feed = SeriesFeed::open(s.addr()?, domain, pen).map_err(|e| e.to_string())?;
        Ok(SeriesFeedBlock {
            feed,
            slot: s.slot,
            domain,
            counters: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = Some([ctx.counter("rows"), ctx.counter("send_errors")]);
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, _ctx: &mut Ctx<'_>) {
        let Some(b) = msg.get::<SeriesBatch>() else {
            return;
        };
        for r in &b.rows {
            if self.slot == 0 {
                self.feed.send(r);
            } else {
                self.feed.send_slot(self.slot, self.domain, r);
            }
        }
        if let Some([rows, errors]) = &self.counters {
            rows.set(self.feed.rows);
            errors.set(self.feed.send_errors);
        }
    }
}
