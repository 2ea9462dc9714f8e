//! The `anonymize` and `keep` settings of the blocks that emit flow records (`flow_meter`,
//! `ipfix_source`): with them, every record leaves the block with its addresses anonymized
//! (Crypto-PAn, `trawl-anon`), so every consumer (writers, flow database, exporters, feeds)
//! gets anonymized records from one place (docs/specs/anonymization.md). Packets go through
//! the `packet_anonymizer` block.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use trawl_anon::{Anonymizer, CryptoPan, Key, PacketRewriter, Prefix, RewriteOutcome};
use trawl_capture::PacketRecord;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, PathSetting, Pool};
use trawl_flow::FlowRecord;

use crate::messages::{PacketBatch, PACKETS};

/// Checks `keep` (prefixes, only with a key), as `check` does before anything is built.
pub fn check(key: Option<&Path>, keep: &[String]) -> Result<(), String> {
    if key.is_none() && !keep.is_empty() {
        return Err("`keep` needs `anonymize` (the key file)".into());
    }
    for p in keep {
        p.parse::<Prefix>().map_err(|e| format!("`keep`: {e}"))?;
    }
    Ok(())
}

/// The anonymizer of a block's settings: None without a key file; the key is read now, so a
/// missing or malformed key stops the composition before it runs.
pub fn anonymizer(key: Option<&Path>, keep: &[String]) -> Result<Option<Anonymizer>, String> {
    check(key, keep)?;
    let Some(path) = key else { return Ok(None) };
    let key = Key::from_file(path).map_err(|e| format!("`anonymize`: {e}"))?;
    let keep = keep
        .iter()
        .map(|p| p.parse().expect("checked above"))
        .collect();
    Ok(Some(Anonymizer::new(CryptoPan::new(&key), keep)))
}

/// Anonymizes a record's addresses in place.
#[inline]
pub fn record(anon: &mut Anonymizer, r: &mut FlowRecord<'_>) {
    r.src_ip = anon.ip(r.src_ip);
    r.dst_ip = anon.ip(r.dst_ip);
    // An sFlow agent's address names a device as much as the exporter's does.
    r.extra.agent = r.extra.agent.map(|a| anon.ip(a));
}

/// `packet_anonymizer`: every packet with the IP addresses it carries anonymized
/// (`trawl_anon::PacketRewriter`: IPv4/IPv6 headers, ARP, ICMP-quoted headers, tunnels),
/// checksums updated, optionally cut after the innermost transport header. `trawl anonymize`
/// is `pcap_source` → this → `pcap_writer`.
pub struct PacketAnonymizer {
    rewriter: PacketRewriter,
    pool: Pool<PacketBatch>,
    /// Per [`RewriteOutcome`], in discriminant order.
    counters: Vec<Counter>,
}

/// Settings of `packet_anonymizer`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PacketAnonymizerSettings {
    /// The key file: 32 bytes, raw or as 64 hex digits.
    pub key: PathBuf,
    /// Prefixes whose addresses stay as they are (`10.0.0.0/8`).
    #[serde(default)]
    pub keep: Vec<String>,
    /// Cut every packet after its innermost transport header (the original length stays the
    /// wire length).
    #[serde(default)]
    pub truncate_payload: bool,
}

impl Block for PacketAnonymizer {
    const TYPE: &'static str = "packet_anonymizer";
    const SUMMARY: &'static str = "rewrites every IP address packets carry with Crypto-PAn \
        (checksums updated), optionally cutting payloads";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "packets to anonymize",
    }];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "packets",
        ty: PACKETS,
        required: true,
        doc: "the same packets, anonymized (frames it cannot read pass unchanged, counted)",
    }];
    const PATHS: &'static [PathSetting] = &[PathSetting::path("key")];
    type Settings = PacketAnonymizerSettings;

    fn check(s: &PacketAnonymizerSettings) -> Result<(), String> {
        check(Some(&s.key), &s.keep)
    }

    fn build(s: PacketAnonymizerSettings, _env: &BuildEnv) -> Result<Self, String> {
        let anon = anonymizer(Some(&s.key), &s.keep)?.expect("a key was given");
        Ok(PacketAnonymizer {
            rewriter: PacketRewriter::new(anon, s.truncate_payload),
            pool: Pool::new(PacketBatch::default),
            counters: Vec::new(),
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.counters = RewriteOutcome::ALL
            .iter()
            .map(|o| ctx.counter(o.name()))
            .collect();
        Ok(())
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let Some(input) = msg.get::<PacketBatch>() else {
            return;
        };
        let before = *self.rewriter.counters();
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.metas.clear();
        out.bytes.clear();
        out.shared = None;
        out.interfaces.clone_from(&input.interfaces);
        out.big_endian = input.big_endian;
        out.live = input.live;
        out.stream = input.stream;
        for p in input.batch().iter() {
            let (_, data) = self.rewriter.rewrite(p.link_type.0, p.data);
            out.push(&PacketRecord { data, ..p });
        }
        for ((c, now), was) in self
            .counters
            .iter()
            .zip(self.rewriter.counters())
            .zip(before)
        {
            c.add(now - was);
        }
        if !out.metas.is_empty() {
            ctx.emit(0, slot.into_msg());
        }
    }
}
