//! The `http_api` block: the HTTP API as part of a running composition. Its server starts
//! when the block is built (on the thread that starts the composition, before any capture
//! thread is pinned, so the runtime's threads never share a capture core's affinity); from
//! `start` on it serves the composition's counters; its `series` input keeps the newest
//! per-second rows for `/api/v1/series`; `finish` stops the server.
use trawl_blocks::messages::{Events, SeriesBatch, EVENTS, SERIES};
use trawl_compose::{Block, BuildEnv, Ctx, GateDef, Msg, PathSetting};

use crate::{ApiConfig, Server};

/// The `http_api` block.
pub struct HttpApi {
    server: Option<Server>,
}

impl Block for HttpApi {
    const TYPE: &'static str = "http_api";
    const SUMMARY: &'static str = "The HTTP API (docs/specs/api.md): the flow database, packet \
        store, live series and every counter of the composition, read-only, over HTTP(S).";
    const INPUTS: &'static [GateDef] = &[
        GateDef {
            name: "series",
            ty: SERIES,
            required: true,
            doc: "per-second rows served as live rows of /api/v1/series (the run ends the API)",
        },
        GateDef {
            name: "calls",
            ty: EVENTS,
            required: false,
            doc: "the calls in progress, from `rtp_calls`' `active` output (each batch replaces \
                  the last): /api/v1/calls?active=1",
        },
    ];
    const OUTPUTS: &'static [GateDef] = &[];
    const PATHS: &'static [PathSetting] = &[
        PathSetting::path("token_file"),
        PathSetting::path("tls_cert"),
        PathSetting::path("tls_key"),
        PathSetting::path("db"),
        PathSetting::path("packets"),
        PathSetting::path("voip"),
        PathSetting::path("logs"),
    ];
    type Settings = ApiConfig;

    fn check(s: &ApiConfig) -> Result<(), String> {
        s.check().map_err(|e| e.to_string())
    }

    fn build(s: ApiConfig, _env: &BuildEnv) -> Result<Self, String> {
        let server = Server::start(&s).map_err(|e| e.to_string())?;
        tracing::info!("HTTP API on {}", server.local_addr());
        Ok(HttpApi {
            server: Some(server),
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        if let (Some(server), Some(reporter)) = (&self.server, ctx.reporter()) {
            server.set_reporter(reporter);
        }
        Ok(())
    }

    fn receive(&mut self, input: usize, msg: &Msg, _ctx: &mut Ctx<'_>) {
        let Some(server) = &self.server else {
            return;
        };
        if input == 1 {
            if let (Some(calls), Ok(mut held)) =
                (msg.get::<Events>(), server.state.active_calls.lock())
            {
                held.0 = Some(calls.iter().map(|e| e.to_event().json).collect());
            }
            return;
        }
        let Some(batch) = msg.get::<SeriesBatch>() else {
            return;
        };
        // Rows of one interface name it; a sum over several goes under the `iface` setting.
        let iface = batch.iface.as_deref().unwrap_or(&server.state.cfg.iface);
        if let Ok(mut live) = server.state.live.lock() {
            live.extend(iface, &batch.rows);
        }
    }

    fn finish(&mut self, _ctx: &mut Ctx<'_>) {
        if let Some(server) = self.server.take() {
            server.shutdown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn docs_blocks_md_documents_the_block_and_its_gate() {
        let doc = include_str!("../../../docs/blocks.md");
        let start = doc
            .find("\n## `http_api`")
            .expect("docs/blocks.md has an http_api section");
        let section = &doc[start + 1..];
        let section = &section[..section.find("\n## ").unwrap_or(section.len())];
        for g in HttpApi::INPUTS {
            assert!(section.contains(&format!("`{}`", g.name)) && section.contains(g.ty.name));
        }
    }
}
