//! Transport payloads of a capture, as the tests feed them to the analysers.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use trawl_capture::{FileSource, PacketSource};
use trawl_flow::decode::{decode, DecodeConfig, Decoded, TunnelMode};

/// One packet's transport payload (cut at the captured length).
pub struct Payload {
    /// 1-based frame number, as tshark counts.
    pub frame: usize,
    /// Capture time.
    pub ts_ns: u64,
    /// 6 or 17.
    pub proto: u8,
    /// Source address and port.
    pub src: (IpAddr, u16),
    /// Destination address and port.
    pub dst: (IpAddr, u16),
    /// The bytes.
    pub data: Vec<u8>,
}

/// The testdata directory of the app tests.
pub fn testdata(sub: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/app")
        .join(sub)
}

/// Every capture file (`.pcap`, `.pcapng`) in `dir`, sorted.
pub fn captures(dir: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| {
            matches!(
                p.extension().and_then(|e| e.to_str()),
                Some("pcap" | "pcapng")
            )
        })
        .collect();
    out.sort();
    out
}

/// TCP and UDP payloads of every packet of `path` (empty TCP payloads skipped), up to the end
/// of the file or the first record that cannot be read.
pub fn payloads(path: &Path) -> Vec<Payload> {
    let mut src = FileSource::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // Tunnels (GRE, VXLAN, IP-in-IP) descended: the application data is inside.
    let config = DecodeConfig {
        tunnel: TunnelMode::Inner,
    };
    let mut d = Decoded::default();
    let mut out = Vec::new();
    let mut frame = 0;
    while let Some(batch) = src
        .next_batch()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    {
        for pkt in batch.iter() {
            frame += 1;
            if !decode(pkt.link_type, pkt.data, &config, &mut d).has_key()
                || !matches!(d.proto, 6 | 17)
            {
                continue;
            }
            let start = (d.payload_offset as usize).min(pkt.data.len());
            let end = (start + d.payload_len as usize).min(pkt.data.len());
            if d.proto == 6 && start == end {
                continue;
            }
            out.push(Payload {
                frame,
                ts_ns: pkt.ts_ns,
                proto: d.proto,
                src: (d.src_addr(), d.src_port),
                dst: (d.dst_addr(), d.dst_port),
                data: pkt.data[start..end].to_vec(),
            });
        }
    }
    out
}

/// Golden rows of a tshark `-T fields` file: frame number → fields (comment lines skipped).
pub fn golden(path: &Path) -> HashMap<usize, Vec<String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let fields: Vec<String> = l.split('\t').map(str::to_string).collect();
            (fields[0].parse().unwrap(), fields)
        })
        .collect()
}

/// Compares trawl's row of a frame with tshark's field by field: each field that differs is
/// printed and recorded in `diffs` as (capture, frame, field).
pub fn compare_fields(
    name: &str,
    frame: usize,
    fields: &[&str],
    mine: &[String],
    theirs: &[String],
    diffs: &mut std::collections::BTreeSet<(String, usize, String)>,
) {
    for (i, field) in fields.iter().enumerate() {
        let t = theirs.get(i).map(String::as_str).unwrap_or("");
        if mine[i] != t {
            println!(
                "{name} frame {frame} {field}: tshark {t:?}, trawl {:?}",
                mine[i]
            );
            diffs.insert((name.to_string(), frame, field.to_string()));
        }
    }
}
