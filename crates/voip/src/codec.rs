//! Payload types, codecs and clock rates (RFC 3551 static types, SDP `rtpmap` for dynamic
//! ones), and the ITU-T G.107 E-model estimate of a stream's MOS.

/// A payload type's codec name and RTP clock rate (0: no jitter can be computed, as for
/// `telephone-event`, whose timestamp stands still during an event).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Codec {
    /// Encoding name as SDP writes it (`PCMU`, `opus`, ...).
    pub name: String,
    /// RTP clock rate in Hz; 0 when unknown or meaningless for jitter.
    pub clock_rate: u32,
}

/// The static payload types of RFC 3551 (and the clock rates tshark uses for them).
pub fn static_codec(pt: u8) -> Option<(&'static str, u32)> {
    Some(match pt {
        0 => ("PCMU", 8000),
        3 => ("GSM", 8000),
        4 => ("G723", 8000),
        5 => ("DVI4", 8000),
        6 => ("DVI4", 16000),
        7 => ("LPC", 8000),
        8 => ("PCMA", 8000),
        9 => ("G722", 8000),
        10 | 11 => ("L16", 44100),
        12 => ("QCELP", 8000),
        13 => ("CN", 8000),
        14 => ("MPA", 90000),
        15 => ("G728", 8000),
        16 => ("DVI4", 11025),
        17 => ("DVI4", 22050),
        18 => ("G729", 8000),
        19 => ("CN", 8000),
        25 => ("CelB", 90000),
        26 => ("JPEG", 90000),
        28 => ("nv", 90000),
        31 => ("H261", 90000),
        32 => ("MPV", 90000),
        33 => ("MP2T", 90000),
        34 => ("H263", 90000),
        _ => return None,
    })
}

/// The clock rate jitter is computed with: the SDP's `rtpmap` when it has one, else the static
/// table; `telephone-event` and unknown dynamic types have none (tshark skips them too).
pub fn clock_rate(pt: u8, mapped: Option<&Codec>) -> u32 {
    match mapped {
        Some(c) if c.name.eq_ignore_ascii_case("telephone-event") => 0,
        Some(c) if c.clock_rate != 0 => c.clock_rate,
        _ if pt < 96 => static_codec(pt).map_or(0, |(_, r)| r),
        _ => 0,
    }
}

/// The name of a payload type's codec: the SDP's, else the static table's, else `PT<n>`.
pub fn codec_name(pt: u8, mapped: Option<&Codec>) -> String {
    match (mapped, static_codec(pt)) {
        (Some(c), _) => c.name.clone(),
        (None, Some((name, _))) => name.to_string(),
        (None, None) => format!("PT{pt}"),
    }
}

/// E-model equipment impairment `Ie` and packet-loss robustness `Bpl` (ITU-T G.113 Appendix
/// I) of the narrowband codecs the model covers; G.711 with packet-loss concealment.
fn impairment(codec: &str) -> (f64, f64) {
    match codec.to_ascii_uppercase().as_str() {
        "PCMU" | "PCMA" => (0.0, 25.1),
        "G729" | "G729A" => (11.0, 19.0),
        "G723" => (15.0, 16.1),
        "GSM" => (20.0, 10.0),
        "ILBC" => (11.0, 32.0),
        "AMR" => (5.0, 10.0),
        // Codecs the model does not tabulate are scored as G.711: the loss and delay terms
        // still count, the codec's own impairment is unknown (docs/specs/voip.md).
        _ => (0.0, 25.1),
    }
}

/// Estimated MOS (1 to 4.5) from the ITU-T G.107 E-model with default values except the
/// codec's impairment, random loss `loss_pct` (percent of expected packets) and one-way
/// delay `delay_ms` (mouth to ear, including the jitter buffer).
pub fn mos(codec: &str, loss_pct: f64, delay_ms: f64) -> f64 {
    let (ie, bpl) = impairment(codec);
    let ppl = loss_pct.clamp(0.0, 100.0);
    // Random loss: BurstR = 1.
    let ie_eff = ie + (95.0 - ie) * ppl / (ppl + bpl);
    let d = delay_ms.max(0.0);
    let id = 0.024 * d + if d > 177.3 { 0.11 * (d - 177.3) } else { 0.0 };
    let r = 93.2 - id - ie_eff;
    r_to_mos(r)
}

/// G.107's mapping from the rating factor R to MOS.
pub fn r_to_mos(r: f64) -> f64 {
    if r <= 0.0 {
        1.0
    } else if r >= 100.0 {
        4.5
    } else {
        1.0 + 0.035 * r + r * (r - 60.0) * (100.0 - r) * 7e-6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn g711_without_impairment_scores_the_models_maximum() {
        // R = 93.2 gives 4.41, the E-model's well-known ceiling for G.711.
        assert!((mos("PCMA", 0.0, 0.0) - 4.41).abs() < 0.01);
        assert!(mos("PCMU", 5.0, 0.0) < mos("PCMU", 1.0, 0.0));
        assert!(mos("PCMU", 0.0, 400.0) < mos("PCMU", 0.0, 100.0));
        assert_eq!(r_to_mos(-5.0), 1.0);
    }

    #[test]
    fn telephone_event_has_no_clock_for_jitter() {
        let te = Codec {
            name: "telephone-event".into(),
            clock_rate: 8000,
        };
        assert_eq!(clock_rate(101, Some(&te)), 0);
        assert_eq!(clock_rate(8, None), 8000);
        assert_eq!(clock_rate(100, None), 0);
        assert_eq!(codec_name(18, None), "G729");
        assert_eq!(codec_name(120, None), "PT120");
    }
}
