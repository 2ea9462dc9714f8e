//! `trawl voip audio --call-id ID -r STORE|FILE... -o call.wav`: a call's G.711 audio
//! as one stereo WAV file, the caller's media on the left channel and the callee's on the right
//! (8 kHz, 16-bit), from the packet store or capture files. Two passes over the packets: the
//! `trawl voip` composition finds the call and its streams (SIP/SDP, as its records say), then
//! the streams' RTP payloads are decoded (trawl_voip::audio): μ-law and A-law; other codecs are
//! named as not decodable; missing packets are silence, counted in the JSON summary.
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde_json::{json, Value};
use trawl_capture::{FileSource, PacketSource};
use trawl_flow::decode::Decoded;
use trawl_voip::audio::{assemble, place, write_wav, AudioPacket, Law, SAMPLE_RATE};

use crate::flag::{parse_time, topic};
use crate::voip::records::{run_quietly, Records};

#[derive(Args, Debug)]
pub struct AudioArgs {
    /// The call's Call-ID (as `calls.jsonl` and `trawl voip calls` give it).
    #[arg(help_heading = topic::FILTER, long = "call-id", value_name = "ID")]
    pub call_id: String,
    /// Where the call's packets are: the packet store (a directory: `trawl run --dump DIR`,
    /// `trawl dump -w DIR`), or capture files.
    #[arg(help_heading = topic::INPUT, short = 'r', long = "read", alias = "packets", value_name = "STORE|FILE", required = true)]
    pub files: Vec<PathBuf>,
    /// With a packet store: its packets from this time on (the call's SIP must be inside).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_time)]
    pub from: Option<u64>,
    /// With a packet store: up to this time (exclusive).
    #[arg(help_heading = topic::TIME, long, value_name = "TIME", allow_hyphen_values = true, value_parser = parse_time)]
    pub to: Option<u64>,
    /// The WAV file to write: stereo, the caller's media left, the callee's right.
    #[arg(help_heading = topic::OUTPUT, short = 'o', long = "output", value_name = "WAV")]
    pub out: PathBuf,
}

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Scratch> {
        let dir = std::env::temp_dir().join(format!("trawl-voip-audio-{}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Scratch(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One stream of the call, as `rtp.jsonl` describes it.
struct CallStream {
    src: SocketAddr,
    dst: SocketAddr,
    ssrc: u32,
    payload_type: u8,
    codec: String,
}

impl CallStream {
    fn of(v: &Value) -> Option<CallStream> {
        let addr = |ip: &str, port: &str| -> Option<SocketAddr> {
            let ip: IpAddr = v.get(ip)?.as_str()?.parse().ok()?;
            Some(SocketAddr::new(ip, v.get(port)?.as_u64()? as u16))
        };
        Some(CallStream {
            src: addr("src_ip", "src_port")?,
            dst: addr("dst_ip", "dst_port")?,
            ssrc: v.get("ssrc")?.as_u64()? as u32,
            payload_type: v.get("payload_type")?.as_u64()? as u8,
            codec: v.get("codec")?.as_str()?.to_string(),
        })
    }
}

/// `trawl voip audio`.
pub fn run(a: &AudioArgs) -> Result<ExitCode> {
    let scratch = Scratch::new()?;
    let files = match a.files.as_slice() {
        [store] if store.is_dir() => vec![extract(store, a, &scratch.0)?],
        many => {
            if let Some(dir) = many.iter().find(|f| f.is_dir()) {
                bail!("{}: one packet store, or capture files", dir.display());
            }
            many.to_vec()
        }
    };
    let (call, streams) = find_call(&files, &a.call_id, &scratch.0)?;
    let (decodable, other): (Vec<CallStream>, Vec<CallStream>) = streams
        .into_iter()
        .partition(|s| Law::of_codec(&s.codec).is_some());
    let not_decodable: Vec<Value> = other
        .iter()
        .map(|s| json!({"ssrc": s.ssrc, "src": s.src.to_string(), "codec": s.codec}))
        .collect();
    if decodable.is_empty() {
        let codecs: Vec<&str> = other.iter().map(|s| s.codec.as_str()).collect();
        bail!(
            "call {}: no G.711 (PCMU/PCMA) stream to decode; its streams' codecs: {} (not decodable)",
            a.call_id,
            if codecs.is_empty() { "none".to_string() } else { codecs.join(", ") }
        );
    }
    let packets = read_rtp(&files, &decodable)?;
    let caller: Option<IpAddr> = call
        .get("caller")
        .and_then(Value::as_str)
        .and_then(|c| c.parse::<SocketAddr>().ok())
        .map(|c| c.ip());
    let left_src = caller
        .filter(|ip| decodable.iter().any(|s| s.src.ip() == *ip))
        .unwrap_or(decodable[0].src.ip());
    let t0 = packets.values().filter_map(|(t, _)| *t).min().unwrap_or(0);
    let mut channels = vec![Vec::new(), Vec::new()];
    let mut summary = Vec::new();
    for (i, s) in decodable.iter().enumerate() {
        let law = Law::of_codec(&s.codec).unwrap_or(Law::A);
        let (first_ns, pkts) = packets
            .get(&i)
            .map_or((None, &[][..]), |(t, p)| (*t, &p[..]));
        let track = assemble(pkts, law, s.payload_type);
        let channel = usize::from(s.src.ip() != left_src);
        let offset =
            (first_ns.unwrap_or(t0) - t0) as u128 * u128::from(SAMPLE_RATE) / 1_000_000_000;
        place(&mut channels[channel], offset as usize, &track.samples);
        summary.push(json!({
            "ssrc": s.ssrc,
            "src": s.src.to_string(),
            "dst": s.dst.to_string(),
            "codec": s.codec,
            "channel": if channel == 0 { "left" } else { "right" },
            "offset_samples": offset as u64,
            "samples": track.samples.len(),
            "packets": pkts.len(),
            "decoded": track.decoded,
            "missing": track.missing,
            "duplicates": track.duplicates,
            "other_payloads": track.other_payloads,
            "discontinuities": track.discontinuities,
            "too_late": track.too_late,
        }));
    }
    let file = std::fs::File::create(&a.out)
        .with_context(|| format!("cannot create {}", a.out.display()))?;
    write_wav(std::io::BufWriter::new(file), &channels, SAMPLE_RATE)
        .with_context(|| format!("cannot write {}", a.out.display()))?;
    let samples = channels.iter().map(Vec::len).max().unwrap_or(0);
    eprintln!(
        "{}",
        json!({
            "command": "voip audio",
            "call_id": a.call_id,
            "wav": a.out.display().to_string(),
            "channels": 2,
            "sample_rate": SAMPLE_RATE,
            "samples": samples,
            "seconds": samples as f64 / f64::from(SAMPLE_RATE),
            "streams": summary,
            "not_decodable": not_decodable,
        })
    );
    Ok(ExitCode::SUCCESS)
}

/// The packet store's packets of the window, as a pcapng file in `scratch`.
fn extract(store_dir: &Path, a: &AudioArgs, scratch: &Path) -> Result<PathBuf> {
    let store = trawl_packets::PacketStore::open(store_dir)?;
    if !store.has_segments()? {
        bail!("{} holds no trawl packet store", store_dir.display());
    }
    let sel = trawl_packets::Selection {
        from_ns: a.from.unwrap_or(0),
        to_ns: a.to.unwrap_or(u64::MAX),
        ifaces: Vec::new(),
        filter: None,
    };
    let path = scratch.join("packets.pcapng");
    let file = std::fs::File::create(&path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    let mut writer = trawl_packets::CaptureWriter::new(std::io::BufWriter::new(file), true)?;
    let mut failure = None;
    let stats = store.read(&sel, |p| match writer.write(p) {
        Ok(()) => ControlFlow::Continue(()),
        Err(e) => {
            failure = Some(e);
            ControlFlow::Break(())
        }
    })?;
    if let Some(e) = failure {
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    if let Some(e) = stats.errors.first() {
        bail!("reading the packet store {}: {e}", store_dir.display());
    }
    writer.finish()?;
    Ok(path)
}

/// The call record and the call's streams: `trawl voip`'s composition run over `files` into
/// `scratch`.
fn find_call(files: &[PathBuf], call_id: &str, scratch: &Path) -> Result<(Value, Vec<CallStream>)> {
    let out = scratch.join("records");
    std::fs::create_dir_all(&out)?;
    run_quietly(&Records {
        files,
        out: &out,
        orphans: false,
        max_calls: None,
        call_timeout_ns: None,
        stats_every_ns: None,
        time_format: crate::flag::TimeFormat::Ns,
    })?;
    let read = |name: &str| -> Result<Vec<Value>> {
        let path = out.join(name);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        Ok(text
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .filter(|v: &Value| v.get("call_id").and_then(Value::as_str) == Some(call_id))
            .collect())
    };
    let Some(call) = read("calls.jsonl")?.into_iter().next() else {
        bail!(
            "no call with Call-ID {call_id:?} in {} (its INVITE must be in the packets read)",
            files
                .iter()
                .map(|f| f.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    let streams = read("rtp.jsonl")?
        .iter()
        .filter_map(CallStream::of)
        .collect();
    Ok((call, streams))
}

/// Per stream (by index): its first packet's capture time and its RTP packets in capture
/// order.
type StreamPackets = HashMap<usize, (Option<u64>, Vec<AudioPacket>)>;

/// The RTP packets of `streams`.
fn read_rtp(files: &[PathBuf], streams: &[CallStream]) -> Result<StreamPackets> {
    let index: HashMap<(SocketAddr, SocketAddr, u32), usize> = streams
        .iter()
        .enumerate()
        .map(|(i, s)| ((s.src, s.dst, s.ssrc), i))
        .collect();
    let mut found = StreamPackets::new();
    let mut decoded = Decoded::default();
    for f in files {
        let mut source =
            FileSource::open(f).with_context(|| format!("cannot read {}", f.display()))?;
        while let Some(batch) = source
            .next_batch()
            .with_context(|| format!("cannot read {}", f.display()))?
        {
            for pkt in batch.iter() {
                let Some(t) = trawl_blocks::voip::transport(pkt.link_type, pkt.data, &mut decoded)
                else {
                    continue;
                };
                if t.tcp {
                    continue;
                }
                let Some(h) = trawl_voip::rtp::parse_rtp(t.payload) else {
                    continue;
                };
                let Some(&i) = index.get(&(t.src, t.dst, h.ssrc)) else {
                    continue;
                };
                let pad = if t.payload[0] & 0x20 != 0 {
                    *t.payload.last().unwrap_or(&0) as usize
                } else {
                    0
                };
                let end = t.payload.len().saturating_sub(pad).max(h.header_len);
                let entry = found.entry(i).or_insert((None, Vec::new()));
                entry.0 = Some(entry.0.map_or(pkt.ts_ns, |t: u64| t.min(pkt.ts_ns)));
                entry.1.push(AudioPacket {
                    seq: h.seq,
                    timestamp: h.timestamp,
                    payload_type: h.payload_type,
                    payload: t.payload[h.header_len..end].to_vec(),
                });
            }
        }
    }
    Ok(found)
}
