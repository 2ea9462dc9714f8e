//! `trawl voip audio` (issue 24): the G.711 audio of sip.pcap's call against sox decoding the
//! payloads tshark reads from the same packets, sample for sample; a dropped packet is
//! silence and counted; the packet store gives the same file as the capture; other codecs are
//! named as not decodable.
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::{testdata, trawl};

/// An RTP packet as tshark reads it: sequence number, timestamp, payload type, payload.
struct TsharkRtp {
    frame: u64,
    seq: u16,
    timestamp: u32,
    pt: u8,
    payload: Vec<u8>,
}

fn tshark_rtp(capture: &Path, ssrc: u32) -> Vec<TsharkRtp> {
    let out = Command::new("tshark")
        .args(["-o", "rtp.heuristic_rtp:TRUE", "-Y"])
        .arg(format!("rtp.ssrc == {ssrc:#x}"))
        .args(["-T", "fields", "-E", "separator=/t"])
        .args(["-e", "frame.number", "-e", "rtp.seq", "-e", "rtp.timestamp"])
        .args(["-e", "rtp.p_type", "-e", "rtp.payload", "-r"])
        .arg(capture)
        .output()
        .expect("tshark");
    assert!(out.status.success());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let hex: String = f[4].chars().filter(|c| *c != ':').collect();
            TsharkRtp {
                frame: f[0].parse().unwrap(),
                seq: f[1].parse().unwrap(),
                timestamp: f[2].parse().unwrap(),
                pt: f[3].parse().unwrap(),
                payload: (0..hex.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                    .collect(),
            }
        })
        .collect()
}

/// `bytes` of A-law decoded by sox to 16-bit samples.
fn sox_alaw(bytes: &[u8], dir: &Path) -> Vec<i16> {
    let (inp, out) = (dir.join("in.al"), dir.join("out.s16"));
    std::fs::write(&inp, bytes).unwrap();
    let ok = Command::new("sox")
        .args([
            "-D", "-t", "raw", "-e", "a-law", "-b", "8", "-r", "8000", "-c", "1",
        ])
        .arg(&inp)
        .args(["-t", "raw", "-e", "signed-integer", "-b", "16", "-L"])
        .arg(&out)
        .status()
        .expect("sox (apt-get install sox)");
    assert!(ok.success());
    std::fs::read(&out)
        .unwrap()
        .chunks(2)
        .map(|c| i16::from_le_bytes([c[0], c[1]]))
        .collect()
}

/// The samples the stream should give: each packet's payload, decoded by sox, at its RTP
/// timestamp's offset from the first packet's; silence elsewhere.
fn expected_samples(packets: &[TsharkRtp], dir: &Path) -> Vec<i16> {
    let all: Vec<u8> = packets.iter().flat_map(|p| p.payload.clone()).collect();
    let decoded = sox_alaw(&all, dir);
    let ts0 = packets.iter().min_by_key(|p| p.seq).unwrap().timestamp;
    let mut samples = Vec::new();
    let mut at = 0;
    for p in packets {
        let n = p.payload.len();
        assert_eq!(p.pt, 8, "the test's stream is PCMA throughout");
        let start = p.timestamp.wrapping_sub(ts0) as usize;
        if samples.len() < start + n {
            samples.resize(start + n, 0);
        }
        samples[start..start + n].copy_from_slice(&decoded[at..at + n]);
        at += n;
    }
    samples
}

/// A WAV file's format and its channels.
fn read_wav(path: &Path) -> (u16, u32, Vec<Vec<i16>>) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(
        (&b[..4], &b[8..16], &b[36..40]),
        (&b"RIFF"[..], &b"WAVEfmt "[..], &b"data"[..])
    );
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
    let (format, channels, bits) = (u16_at(20), u16_at(22), u16_at(34));
    assert_eq!((format, bits), (1, 16), "PCM, 16-bit");
    let rate = u32::from_le_bytes(b[24..28].try_into().unwrap());
    let len = u32::from_le_bytes(b[40..44].try_into().unwrap()) as usize;
    assert_eq!(44 + len, b.len());
    let mut out = vec![Vec::new(); channels as usize];
    for (i, c) in b[44..].chunks(2).enumerate() {
        out[i % channels as usize].push(i16::from_le_bytes([c[0], c[1]]));
    }
    (channels, rate, out)
}

fn jsonl(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `trawl voip audio ARGS`: its JSON summary.
fn audio(args: &[&str]) -> Value {
    let mut argv = vec!["voip", "audio"];
    argv.extend_from_slice(args);
    let out = trawl(&argv);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {stderr}");
    serde_json::from_str(stderr.lines().last().unwrap()).unwrap()
}

#[test]
fn voip_audio_is_the_calls_g711_as_sox_decodes_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let capture = testdata("oracle/sip.pcap");
    let records = d.join("records");
    let o = trawl(&["voip", "-r", &capture, "-o", records.to_str().unwrap()]);
    assert!(o.status.success());
    let streams = jsonl(&records.join("rtp.jsonl"));
    assert_eq!(streams.len(), 1);
    let s = &streams[0];
    assert!(
        s["codec"].as_str().unwrap().eq_ignore_ascii_case("PCMA"),
        "{s}"
    );
    let call_id = s["call_id"].as_str().unwrap();
    let calls = jsonl(&records.join("calls.jsonl"));
    let call = calls.iter().find(|c| c["call_id"] == call_id).unwrap();
    let caller_ip = call["caller"].as_str().unwrap().rsplit_once(':').unwrap().0;
    let (mine, other) = if s["src_ip"] == caller_ip {
        (0, 1)
    } else {
        (1, 0)
    };

    let packets = tshark_rtp(Path::new(&capture), s["ssrc"].as_u64().unwrap() as u32);
    assert_eq!(packets.len() as u64, s["packets"].as_u64().unwrap());
    let want = expected_samples(&packets, d);
    let wav = d.join("call.wav");
    let summary = audio(&[
        "--call-id",
        call_id,
        "-r",
        &capture,
        "-o",
        wav.to_str().unwrap(),
    ]);
    let (channels, rate, got) = read_wav(&wav);
    assert_eq!((channels, rate), (2, 8000));
    assert_eq!(got[mine], want, "the stream's channel");
    assert!(got[other].iter().all(|v| *v == 0), "no media the other way");
    let st = &summary["streams"][0];
    assert_eq!(
        (st["decoded"].as_u64(), st["missing"].as_u64()),
        (Some(packets.len() as u64), Some(0))
    );

    // The same call from the packet store.
    let store = d.join("store");
    let o = trawl(&[
        "dump",
        "-r",
        &capture,
        "-w",
        store.to_str().unwrap(),
        "--summary",
        "none",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stored = d.join("stored.wav");
    audio(&[
        "--call-id",
        call_id,
        "-r",
        store.to_str().unwrap(),
        "-o",
        stored.to_str().unwrap(),
    ]);
    assert_eq!(
        std::fs::read(&stored).unwrap(),
        std::fs::read(&wav).unwrap()
    );

    // A packet dropped from the middle: its time is silence, and it is counted.
    let lossy = d.join("lossy.pcap");
    let dropped = &packets[4];
    let ok = Command::new("editcap")
        .arg(&capture)
        .arg(&lossy)
        .arg(dropped.frame.to_string())
        .status()
        .unwrap();
    assert!(ok.success());
    let lossy_wav = d.join("lossy.wav");
    let summary = audio(&[
        "--call-id",
        call_id,
        "-r",
        lossy.to_str().unwrap(),
        "-o",
        lossy_wav.to_str().unwrap(),
    ]);
    assert_eq!(summary["streams"][0]["missing"], 1);
    let (_, _, got) = read_wav(&lossy_wav);
    let mut want_lossy = want.clone();
    let start = dropped
        .timestamp
        .wrapping_sub(packets.iter().min_by_key(|p| p.seq).unwrap().timestamp)
        as usize;
    want_lossy[start..start + dropped.payload.len()].fill(0);
    assert_eq!(got[mine], want_lossy);
}

#[test]
fn voip_audio_names_codecs_it_cannot_decode_and_unknown_calls() {
    let dir = tempfile::tempdir().unwrap();
    let wav = dir.path().join("x.wav");
    let w = wav.to_str().unwrap();
    // The VoLTE call is AMR.
    let capture = testdata("voip/gtp-iphone.pcap");
    let records = dir.path().join("records");
    assert!(
        trawl(&["voip", "-r", &capture, "-o", records.to_str().unwrap()])
            .status
            .success()
    );
    let calls = jsonl(&records.join("calls.jsonl"));
    let id = calls[0]["call_id"].as_str().unwrap();
    let out = trawl(&["voip", "audio", "--call-id", id, "-r", &capture, "-o", w]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("AMR") && err.contains("not decodable"),
        "{err}"
    );
    let out = trawl(&[
        "voip",
        "audio",
        "--call-id",
        "nosuchcall",
        "-r",
        &capture,
        "-o",
        w,
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no call with Call-ID \"nosuchcall\""));
}
