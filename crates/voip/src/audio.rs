//! The audio of a call's G.711 RTP streams (`trawl voip audio`): μ-law (PCMU) and A-law (PCMA)
//! decoded to 16-bit linear PCM as ITU-T G.711's reference expansion (the Sun `g711.c` that sox
//! and ffmpeg use), each packet placed by its RTP timestamp, missing packets left as silence
//! (counted), written as a WAV file of 8 kHz 16-bit samples.
use std::io::{self, Write};

/// G.711's sampling rate: one sample per byte and RTP timestamp unit.
pub const SAMPLE_RATE: u32 = 8000;

/// A jump between consecutive packets' RTP timestamps larger than this (10 s), or backwards,
/// is a discontinuity (a restarted sender, a switch to T.38): the packet is placed where its
/// sequence number says instead, so one bad timestamp cannot make hours of silence.
const MAX_JUMP: i64 = 10 * SAMPLE_RATE as i64;

/// The longest track made (4 hours of samples); later packets are dropped (counted).
const MAX_SAMPLES: usize = 4 * 3600 * SAMPLE_RATE as usize;

/// The two G.711 companding laws.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Law {
    /// μ-law, PCMU, static payload type 0.
    Mu,
    /// A-law, PCMA, static payload type 8.
    A,
}

impl Law {
    /// The law of a codec as `rtp.jsonl` names it (`PCMU`, `PCMA`); `None` for any other
    /// codec (not decodable).
    pub fn of_codec(codec: &str) -> Option<Law> {
        match codec.to_ascii_uppercase().as_str() {
            "PCMU" => Some(Law::Mu),
            "PCMA" => Some(Law::A),
            _ => None,
        }
    }

    /// One byte expanded to a 16-bit sample.
    #[inline]
    pub fn decode(self, byte: u8) -> i16 {
        match self {
            Law::Mu => ulaw_to_linear(byte),
            Law::A => alaw_to_linear(byte),
        }
    }
}

/// μ-law to linear (G.711; Sun's `ulaw2linear`): −32124 to 32124.
pub fn ulaw_to_linear(byte: u8) -> i16 {
    let u = !byte;
    let t = ((i32::from(u & 0x0f) << 3) + 0x84) << ((u & 0x70) >> 4);
    let v = if u & 0x80 != 0 { 0x84 - t } else { t - 0x84 };
    v as i16
}

/// A-law to linear (G.711; Sun's `alaw2linear`): −32256 to 32256.
pub fn alaw_to_linear(byte: u8) -> i16 {
    let a = byte ^ 0x55;
    let mut t = i32::from(a & 0x0f) << 4;
    let seg = (a & 0x70) >> 4;
    match seg {
        0 => t += 8,
        1 => t += 0x108,
        _ => {
            t += 0x108;
            t <<= seg - 1;
        }
    }
    (if a & 0x80 != 0 { t } else { -t }) as i16
}

/// One RTP packet of a stream, as captured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AudioPacket {
    /// Sequence number.
    pub seq: u16,
    /// RTP timestamp.
    pub timestamp: u32,
    /// Payload type.
    pub payload_type: u8,
    /// The payload (after the header, without padding).
    pub payload: Vec<u8>,
}

/// A stream's audio and what became of its packets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Track {
    /// The samples from the first packet (by sequence number) on.
    pub samples: Vec<i16>,
    /// G.711 packets decoded.
    pub decoded: u64,
    /// Packets missing by sequence number (their time is silence).
    pub missing: u64,
    /// Packets received twice (the second ignored).
    pub duplicates: u64,
    /// Packets of another payload type in the stream (comfort noise, DTMF events): silence.
    pub other_payloads: u64,
    /// Packets placed by sequence number because their timestamp jumped.
    pub discontinuities: u64,
    /// Packets beyond the longest track made (dropped).
    pub too_late: u64,
}

/// Decodes the packets of one stream (capture order) whose G.711 payload type is `pt`
/// (`law`): sorted by extended sequence number (RFC 3550 A.1), duplicates dropped, each
/// payload at its timestamp's offset from the first packet's.
pub fn assemble(packets: &[AudioPacket], law: Law, pt: u8) -> Track {
    let mut t = Track::default();
    let mut ordered: Vec<(i64, &AudioPacket)> = Vec::with_capacity(packets.len());
    let mut last: Option<(u16, i64)> = None;
    for p in packets {
        let ext = match last {
            None => i64::from(p.seq),
            Some((seq, ext)) => ext + i64::from(p.seq.wrapping_sub(seq) as i16),
        };
        // The highest number so far carries the wrap-around count on.
        if last.is_none_or(|(_, e)| ext > e) {
            last = Some((p.seq, ext));
        }
        ordered.push((ext, p));
    }
    ordered.sort_by_key(|(ext, _)| *ext);
    ordered.dedup_by(|b, a| {
        let same = a.0 == b.0;
        t.duplicates += u64::from(same);
        same
    });
    let Some(&(first_ext, first)) = ordered.first() else {
        return t;
    };
    // Where the previous packet went: (extended seq, position, its length in samples).
    let mut prev = (first_ext, 0i64, 0i64);
    for &(ext, p) in &ordered {
        t.missing += (ext - prev.0 - 1).max(0) as u64;
        let by_time = i64::from(p.timestamp.wrapping_sub(first.timestamp) as i32);
        let frame = if prev.2 > 0 {
            prev.2
        } else {
            p.payload.len() as i64
        };
        let by_seq = prev.1 + frame * (ext - prev.0);
        let at = if ext == first_ext {
            0
        } else if by_time <= prev.1 || (by_time - by_seq).abs() > MAX_JUMP {
            t.discontinuities += 1;
            by_seq
        } else {
            by_time
        };
        let len = if p.payload_type == pt {
            p.payload.len() as i64
        } else {
            t.other_payloads += 1;
            0
        };
        prev = (ext, at, if len > 0 { len } else { prev.2 });
        if len == 0 {
            continue;
        }
        let start = at as usize;
        if start + p.payload.len() > MAX_SAMPLES {
            t.too_late += 1;
            continue;
        }
        if t.samples.len() < start + p.payload.len() {
            t.samples.resize(start + p.payload.len(), 0);
        }
        for (s, b) in t.samples[start..].iter_mut().zip(&p.payload) {
            *s = law.decode(*b);
        }
        t.decoded += 1;
    }
    t
}

/// Copies `samples` into `channel` from sample `offset` on, growing it (with silence) as
/// needed: several streams of one direction (a re-INVITE's new SSRC) share a channel.
pub fn place(channel: &mut Vec<i16>, offset: usize, samples: &[i16]) {
    let end = offset + samples.len();
    if channel.len() < end {
        channel.resize(end, 0);
    }
    channel[offset..end].copy_from_slice(samples);
}

/// Writes `channels` (the shorter ones padded with silence) as a WAV file: RIFF, PCM format
/// 1, 16-bit little-endian samples interleaved, `rate` Hz.
pub fn write_wav(mut w: impl Write, channels: &[Vec<i16>], rate: u32) -> io::Result<()> {
    let n = channels.iter().map(Vec::len).max().unwrap_or(0);
    let nch = channels.len().max(1) as u32;
    let data_len = u32::try_from(n as u64 * u64::from(nch) * 2)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "audio longer than WAV holds"))?;
    let mut head = Vec::with_capacity(44);
    head.extend_from_slice(b"RIFF");
    head.extend_from_slice(&(36 + data_len).to_le_bytes());
    head.extend_from_slice(b"WAVEfmt ");
    head.extend_from_slice(&16u32.to_le_bytes());
    head.extend_from_slice(&1u16.to_le_bytes());
    head.extend_from_slice(&(nch as u16).to_le_bytes());
    head.extend_from_slice(&rate.to_le_bytes());
    head.extend_from_slice(&(rate * nch * 2).to_le_bytes());
    head.extend_from_slice(&((nch * 2) as u16).to_le_bytes());
    head.extend_from_slice(&16u16.to_le_bytes());
    head.extend_from_slice(b"data");
    head.extend_from_slice(&data_len.to_le_bytes());
    w.write_all(&head)?;
    let mut buf = Vec::with_capacity(64 * 1024);
    for i in 0..n {
        for c in channels {
            buf.extend_from_slice(&c.get(i).copied().unwrap_or(0).to_le_bytes());
        }
        if buf.len() >= 60 * 1024 {
            w.write_all(&buf)?;
            buf.clear();
        }
    }
    w.write_all(&buf)?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g711_expansion_is_the_reference_one() {
        // Ends, silence and a middle value of Sun's g711.c tables (as sox's, and CPython's
        // audioop.ulaw2lin / alaw2lin give the same).
        assert_eq!(ulaw_to_linear(0x00), -32124);
        assert_eq!(ulaw_to_linear(0x80), 32124);
        assert_eq!(ulaw_to_linear(0xff), 0);
        assert_eq!(ulaw_to_linear(0x7f), 0);
        assert_eq!(ulaw_to_linear(0x9c), 9852);
        assert_eq!(alaw_to_linear(0xd5), 8);
        assert_eq!(alaw_to_linear(0x55), -8);
        assert_eq!(alaw_to_linear(0xaa), 32256);
        assert_eq!(alaw_to_linear(0x2a), -32256);
        assert_eq!(alaw_to_linear(0xa8), 30208);
    }

    fn pkt(seq: u16, ts: u32, pt: u8) -> AudioPacket {
        AudioPacket {
            seq,
            timestamp: ts,
            payload_type: pt,
            payload: vec![0x00; 4],
        }
    }

    #[test]
    fn packets_go_where_their_timestamps_say_gaps_are_silence() {
        // Across the sequence wrap, one lost, one reordered, one duplicated, one CN.
        let packets = [
            pkt(65534, 1000, 0),
            pkt(0, 1008, 0),
            pkt(65535, 1004, 0),
            pkt(0, 1008, 0),
            pkt(2, 1016, 0),
            pkt(3, 1020, 13),
            pkt(4, 1028, 0),
        ];
        let t = assemble(&packets, Law::Mu, 0);
        let loud = ulaw_to_linear(0);
        let mut want = vec![loud; 12];
        want.extend([0; 4]); // seq 1 missing
        want.extend([loud; 4]);
        want.extend([0; 8]); // CN at 1020, nothing until 1028
        want.extend([loud; 4]);
        assert_eq!(t.samples, want);
        assert_eq!(
            (t.decoded, t.missing, t.duplicates, t.other_payloads),
            (5, 1, 1, 1)
        );
    }

    #[test]
    fn a_timestamp_jump_is_placed_by_sequence_number() {
        let packets = [pkt(1, 0, 8), pkt(2, 4, 8), pkt(3, 4 + 3_000_000, 8)];
        let t = assemble(&packets, Law::A, 8);
        assert_eq!(t.samples.len(), 12);
        assert_eq!(t.discontinuities, 1);
    }

    #[test]
    fn wav_header_and_interleaving() {
        let mut out = Vec::new();
        write_wav(&mut out, &[vec![1, 2], vec![-1]], 8000).unwrap();
        assert_eq!(&out[..4], b"RIFF");
        assert_eq!(u32::from_le_bytes(out[4..8].try_into().unwrap()), 36 + 8);
        assert_eq!(&out[8..16], b"WAVEfmt ");
        assert_eq!(u16::from_le_bytes([out[22], out[23]]), 2, "channels");
        assert_eq!(u32::from_le_bytes(out[24..28].try_into().unwrap()), 8000);
        assert_eq!(&out[36..40], b"data");
        let samples: Vec<i16> = out[44..]
            .chunks(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(samples, [1, -1, 2, 0]);
    }
}
