//! RTP and RTCP headers (RFC 3550 §5.1, §6.4): the fields stream statistics need, read from
//! untrusted bytes without panicking.

/// The fields of an RTP header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RtpHeader {
    /// Marker bit.
    pub marker: bool,
    /// Payload type (7 bits).
    pub payload_type: u8,
    /// Sequence number.
    pub seq: u16,
    /// Media timestamp.
    pub timestamp: u32,
    /// Synchronisation source.
    pub ssrc: u32,
    /// Bytes of header (fixed part, CSRCs, extension); the payload follows.
    pub header_len: usize,
}

/// Fixed part of an RTP header.
pub const HEADER_LEN: usize = 12;

/// Reads an RTP header: version 2, CSRC list and extension inside the datagram, padding no
/// longer than the payload. `None` for anything else (the caller counts it).
pub fn parse_rtp(b: &[u8]) -> Option<RtpHeader> {
    if b.len() < HEADER_LEN || b[0] >> 6 != 2 {
        return None;
    }
    let pt = b[1] & 0x7f;
    // 72..=76 with the marker bit are RTCP's SR/RR/SDES/BYE/APP (RFC 5761 §4).
    if (72..=76).contains(&pt) {
        return None;
    }
    let cc = (b[0] & 0x0f) as usize;
    let mut len = HEADER_LEN + 4 * cc;
    if b[0] & 0x10 != 0 {
        let ext = b.get(len + 2..len + 4)?;
        len += 4 + 4 * u16::from_be_bytes([ext[0], ext[1]]) as usize;
    }
    if len > b.len() {
        return None;
    }
    if b[0] & 0x20 != 0 {
        let pad = *b.last()? as usize;
        if pad == 0 || len + pad > b.len() {
            return None;
        }
    }
    Some(RtpHeader {
        marker: b[1] & 0x80 != 0,
        payload_type: pt,
        seq: u16::from_be_bytes([b[2], b[3]]),
        timestamp: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        ssrc: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
        header_len: len,
    })
}

/// True when `b` starts with an RTCP packet (version 2, SR/RR/SDES/BYE/APP/XR).
pub fn is_rtcp(b: &[u8]) -> bool {
    b.len() >= 8 && b[0] >> 6 == 2 && (200..=207).contains(&b[1])
}

/// A reception report block of an SR or RR about one source.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReportBlock {
    /// SSRC of the sender that sent the report.
    pub reporter: u32,
    /// SSRC of the source reported on.
    pub source: u32,
    /// Fraction lost since the last report, in 1/256.
    pub fraction_lost: u8,
    /// Cumulative packets lost (24-bit signed).
    pub cumulative_lost: i32,
    /// Interarrival jitter, in timestamp units.
    pub jitter: u32,
    /// Middle 32 bits of the NTP time of the last SR received from the source (0: none).
    pub lsr: u32,
    /// Delay since that SR, in 1/65536 s.
    pub dlsr: u32,
}

/// What one RTCP compound packet says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rtcp {
    /// Sender reports: (sender SSRC, middle 32 bits of their NTP timestamp).
    pub sender_reports: Vec<(u32, u32)>,
    /// Report blocks of SRs and RRs.
    pub reports: Vec<ReportBlock>,
}

/// Reads a compound RTCP packet; stops at the first packet whose length does not fit.
pub fn parse_rtcp(mut b: &[u8], out: &mut Rtcp) {
    out.sender_reports.clear();
    out.reports.clear();
    while b.len() >= 8 && b[0] >> 6 == 2 {
        let count = (b[0] & 0x1f) as usize;
        let pt = b[1];
        let len = 4 * (u16::from_be_bytes([b[2], b[3]]) as usize + 1);
        // Every packet type has its sender's SSRC: a one-word packet is malformed.
        if len < 8 {
            return;
        }
        let Some(pkt) = b.get(..len) else { return };
        let reporter = be32(pkt, 4);
        let blocks_at = match pt {
            200 if pkt.len() >= 28 => {
                let ntp_mid = (be32(pkt, 8) << 16) | (be32(pkt, 12) >> 16);
                out.sender_reports.push((reporter, ntp_mid));
                28
            }
            201 => 8,
            _ => {
                b = &b[len..];
                continue;
            }
        };
        for i in 0..count {
            let at = blocks_at + 24 * i;
            if at + 24 > pkt.len() {
                break;
            }
            let lost = be32(pkt, at + 4) & 0x00ff_ffff;
            // Sign-extend the 24-bit count.
            let cumulative_lost = ((lost << 8) as i32) >> 8;
            out.reports.push(ReportBlock {
                reporter,
                source: be32(pkt, at),
                fraction_lost: pkt[at + 4],
                cumulative_lost,
                jitter: be32(pkt, at + 12),
                lsr: be32(pkt, at + 16),
                dlsr: be32(pkt, at + 20),
            });
        }
        b = &b[len..];
    }
}

fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The middle 32 bits of the NTP time of `ts_ns` (Unix nanoseconds), as LSR is written.
pub fn ntp_mid32(ts_ns: u64) -> u32 {
    const NTP_UNIX_OFFSET: u64 = 2_208_988_800;
    let secs = ts_ns / 1_000_000_000 + NTP_UNIX_OFFSET;
    let frac = ((ts_ns % 1_000_000_000) << 32) / 1_000_000_000;
    ((secs << 16) as u32) | ((frac >> 16) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_rtp_reads_the_fixed_header() {
        let pkt = [
            0x80, 0x88, 0x12, 0x34, // v2, marker, PT 8, seq 0x1234
            0, 0, 0, 160, //          timestamp
            0xde, 0xad, 0xbe, 0xef, // SSRC
            0xd5, 0xd5, // payload
        ];
        let h = parse_rtp(&pkt).unwrap();
        assert_eq!((h.marker, h.payload_type, h.seq), (true, 8, 0x1234));
        assert_eq!((h.timestamp, h.ssrc, h.header_len), (160, 0xdeadbeef, 12));
    }

    #[test]
    fn truncated_csrc_list_or_extension_is_not_rtp() {
        let mut pkt = vec![0x83, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(parse_rtp(&pkt), None, "3 CSRCs missing");
        pkt[0] = 0x90;
        assert_eq!(parse_rtp(&pkt), None, "extension header missing");
        pkt[0] = 0x40;
        assert_eq!(parse_rtp(&pkt), None, "version 1");
        assert_eq!(parse_rtp(b"INVITE sip:a@b SIP/2.0\r\n"), None);
    }

    #[test]
    fn parse_rtcp_reads_sr_and_rr_blocks() {
        #[rustfmt::skip]
        let pkt = [
            0x81, 200, 0, 12, 0, 0, 0, 1,          // SR, 1 block, length 12 words, SSRC 1
            0x00, 0x01, 0x23, 0x45, 0x67, 0x89, 0, 0, // NTP
            0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,    // RTP ts, packets, octets
            0, 0, 0, 2, 0x40, 0xff, 0xff, 0xfe,    // source 2, fraction 64, lost -2
            0, 0, 0, 0, 0, 0, 0, 9,                // ext. highest seq, jitter 9
            0, 0, 0, 5, 0, 1, 0, 0,                // LSR 5, DLSR 1 s
        ];
        let mut r = Rtcp::default();
        parse_rtcp(&pkt, &mut r);
        assert_eq!(r.sender_reports, vec![(1, 0x2345_6789)]);
        let b = r.reports[0];
        assert_eq!((b.source, b.fraction_lost, b.cumulative_lost), (2, 64, -2));
        assert_eq!((b.jitter, b.lsr, b.dlsr), (9, 5, 65536));
        parse_rtcp(&pkt[..40], &mut r);
        assert!(r.reports.is_empty(), "a cut packet yields nothing");
    }

    #[test]
    fn truncated_rtcp_of_one_word_yields_nothing() {
        // Found by the rtp_stream fuzz target: length 0 (one word) in front of more bytes.
        let mut r = Rtcp::default();
        parse_rtcp(&[0x81, 201, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0], &mut r);
        assert!(r.reports.is_empty() && r.sender_reports.is_empty());
    }
}
