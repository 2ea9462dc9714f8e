//! The records `trawl voip` writes: [`CallRecord`] (`calls.jsonl`) and [`StreamRecord`]
//! (`rtp.jsonl`). Fields are specified in docs/specs/voip.md. Both derive `Serialize` (the
//! API's active calls) and write themselves as JSON lines without it ([`CallRecord::write_json`]).
use serde::Serialize;

use crate::json::Object;

/// One call, written when it ends, times out, is evicted or the input ends.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallRecord {
    /// `Call-ID`.
    pub call_id: String,
    /// Caller's URI (`From`).
    pub from: String,
    /// Caller's display name.
    pub from_display: String,
    /// Caller's user part (number or name).
    pub from_user: String,
    /// Callee's URI (`To`).
    pub to: String,
    /// Callee's display name.
    pub to_display: String,
    /// Callee's user part.
    pub to_user: String,
    /// Caller's signalling address (`ip:port` the first INVITE came from).
    pub caller: String,
    /// Callee side's signalling address (where the first INVITE went).
    pub callee: String,
    /// `User-Agent` of the INVITE.
    pub caller_agent: String,
    /// `Server`/`User-Agent` of the callee side's responses.
    pub callee_agent: String,
    /// Signalling over TCP.
    pub tcp: bool,
    /// First INVITE (ns).
    pub invite_ns: u64,
    /// First 180/183 (ns), if any.
    pub ringing_ns: Option<u64>,
    /// 2xx to the INVITE (ns), if answered.
    pub answer_ns: Option<u64>,
    /// End of the call: BYE, CANCEL, failure response, or the last activity for timeouts.
    pub end_ns: u64,
    /// INVITE to first 180/183 (ms).
    pub setup_ms: Option<f64>,
    /// INVITE to 2xx (ms).
    pub answer_ms: Option<f64>,
    /// 2xx to BYE (or last activity) in ms; 0 when not answered.
    pub duration_ms: f64,
    /// `bye_caller`, `bye_callee`, `cancel`, `failure`, `timeout`, `evicted`, `active_at_end`,
    /// `shutdown` (a live monitor stopped); `active` for a call still in progress.
    pub end_reason: &'static str,
    /// Final status code of the INVITE transaction (0: none seen).
    pub status: u16,
    /// re-INVITEs within the dialog.
    pub reinvites: u32,
    /// RTP streams measured for the call.
    pub streams: u32,
    /// RTP packets over all of them.
    pub rtp_packets: u64,
    /// Lowest estimated MOS of the streams (null without streams).
    pub worst_mos: Option<f64>,
}

/// One RTP stream: one SSRC from one source address and port to one destination.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamRecord {
    /// The call it belongs to; null for an orphan stream.
    pub call_id: Option<String>,
    /// Found by heuristic, without signalling.
    pub orphan: bool,
    /// Source address.
    pub src_ip: String,
    /// Source port.
    pub src_port: u16,
    /// Destination address.
    pub dst_ip: String,
    /// Destination port.
    pub dst_port: u16,
    /// SSRC (an integer).
    pub ssrc: u32,
    /// Payload type of the first packet.
    pub payload_type: u8,
    /// Its codec.
    pub codec: String,
    /// Every payload type seen.
    pub payload_types: Vec<u8>,
    /// First packet (ns).
    pub first_ns: u64,
    /// Last packet (ns).
    pub last_ns: u64,
    /// Packets received.
    pub packets: u64,
    /// RTP bytes (UDP payload).
    pub bytes: u64,
    /// Packets expected from the sequence numbers.
    pub expected: i64,
    /// Expected minus received (negative with duplicates).
    pub lost: i64,
    /// Duplicates.
    pub duplicated: u64,
    /// Late packets.
    pub out_of_order: u64,
    /// Largest interarrival jitter (ms).
    pub jitter_max_ms: f64,
    /// Mean interarrival jitter (ms).
    pub jitter_mean_ms: f64,
    /// Inter-arrival time of regular packets (ms): min, max, mean, std.
    pub iat_min_ms: f64,
    /// Largest inter-arrival time (ms).
    pub iat_max_ms: f64,
    /// Mean inter-arrival time (ms).
    pub iat_mean_ms: f64,
    /// Standard deviation of the inter-arrival time (ms).
    pub iat_std_ms: f64,
    /// Smallest RTP packet (bytes).
    pub size_min: u32,
    /// Largest RTP packet (bytes).
    pub size_max: u32,
    /// Mean size (bytes).
    pub size_mean: f64,
    /// Standard deviation of the size (bytes).
    pub size_std: f64,
    /// RTCP reports about this stream.
    pub rtcp_reports: u32,
    /// Cumulative loss the receiver last reported.
    pub rtcp_lost: Option<i32>,
    /// Fraction lost the receiver last reported (0 to 1).
    pub rtcp_fraction_lost: Option<f64>,
    /// Jitter the receiver last reported (ms).
    pub rtcp_jitter_ms: Option<f64>,
    /// Round-trip time from the last SR/RR pair (ms).
    pub rtt_ms: Option<f64>,
    /// Estimated MOS (G.107 E-model).
    pub mos: f64,
}

impl CallRecord {
    /// Appends the record as one JSON object (no newline): the bytes `serde_json` writes for
    /// its `Value` (keys sorted), without building one (the `json` module).
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut o = Object::new(out);
        o.opt_float("answer_ms", self.answer_ms);
        o.opt_uint("answer_ns", self.answer_ns);
        o.str("call_id", &self.call_id);
        o.str("callee", &self.callee);
        o.str("callee_agent", &self.callee_agent);
        o.str("caller", &self.caller);
        o.str("caller_agent", &self.caller_agent);
        o.float("duration_ms", self.duration_ms);
        o.uint("end_ns", self.end_ns);
        o.str("end_reason", self.end_reason);
        o.str("from", &self.from);
        o.str("from_display", &self.from_display);
        o.str("from_user", &self.from_user);
        o.uint("invite_ns", self.invite_ns);
        o.uint("reinvites", self.reinvites.into());
        o.opt_uint("ringing_ns", self.ringing_ns);
        o.uint("rtp_packets", self.rtp_packets);
        o.opt_float("setup_ms", self.setup_ms);
        o.uint("status", self.status.into());
        o.uint("streams", self.streams.into());
        o.bool("tcp", self.tcp);
        o.str("to", &self.to);
        o.str("to_display", &self.to_display);
        o.str("to_user", &self.to_user);
        o.opt_float("worst_mos", self.worst_mos);
        o.end();
    }
}

impl StreamRecord {
    /// Appends the record as one JSON object (no newline), as [`CallRecord::write_json`].
    pub fn write_json(&self, out: &mut Vec<u8>) {
        let mut o = Object::new(out);
        o.uint("bytes", self.bytes);
        o.opt_str("call_id", self.call_id.as_deref());
        o.str("codec", &self.codec);
        o.str("dst_ip", &self.dst_ip);
        o.uint("dst_port", self.dst_port.into());
        o.uint("duplicated", self.duplicated);
        o.int("expected", self.expected);
        o.uint("first_ns", self.first_ns);
        o.float("iat_max_ms", self.iat_max_ms);
        o.float("iat_mean_ms", self.iat_mean_ms);
        o.float("iat_min_ms", self.iat_min_ms);
        o.float("iat_std_ms", self.iat_std_ms);
        o.float("jitter_max_ms", self.jitter_max_ms);
        o.float("jitter_mean_ms", self.jitter_mean_ms);
        o.uint("last_ns", self.last_ns);
        o.int("lost", self.lost);
        o.float("mos", self.mos);
        o.bool("orphan", self.orphan);
        o.uint("out_of_order", self.out_of_order);
        o.uint("packets", self.packets);
        o.uint("payload_type", self.payload_type.into());
        o.uint_list(
            "payload_types",
            self.payload_types.iter().map(|&p| u64::from(p)),
        );
        o.opt_float("rtcp_fraction_lost", self.rtcp_fraction_lost);
        o.opt_float("rtcp_jitter_ms", self.rtcp_jitter_ms);
        o.opt_int("rtcp_lost", self.rtcp_lost.map(i64::from));
        o.uint("rtcp_reports", self.rtcp_reports.into());
        o.opt_float("rtt_ms", self.rtt_ms);
        o.uint("size_max", self.size_max.into());
        o.float("size_mean", self.size_mean);
        o.uint("size_min", self.size_min.into());
        o.float("size_std", self.size_std);
        o.str("src_ip", &self.src_ip);
        o.uint("src_port", self.src_port.into());
        o.uint("ssrc", self.ssrc.into());
        o.end();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the files held before: the record's `serde_json::Value`, written.
    fn via_value(r: &impl Serialize) -> String {
        serde_json::to_value(r).unwrap().to_string()
    }

    fn call() -> CallRecord {
        CallRecord {
            call_id: "a84b4c76e66710@pc33.example.com".into(),
            from: "sip:alice@example.com".into(),
            from_display: "Alice \"A\" \\ Smith\u{1}\n\té".into(),
            from_user: "alice".into(),
            to: "sip:bob@example.org".into(),
            to_display: String::new(),
            to_user: "bob".into(),
            caller: "[2001:db8::1]:5060".into(),
            callee: "10.0.0.2:5060".into(),
            caller_agent: "SIPp/3.7".into(),
            callee_agent: "</script>\u{7f}".into(),
            tcp: true,
            invite_ns: 1_795_823_999_999_000_001,
            ringing_ns: Some(1_795_823_999_999_100_000),
            answer_ns: None,
            end_ns: u64::MAX,
            setup_ms: Some(0.1),
            answer_ms: None,
            duration_ms: 0.0,
            end_reason: "bye_callee",
            status: 487,
            reinvites: 3,
            streams: 2,
            rtp_packets: 9_999,
            worst_mos: Some(4.41),
        }
    }

    fn stream() -> StreamRecord {
        StreamRecord {
            call_id: Some("c1".into()),
            orphan: false,
            src_ip: "10.0.0.1".into(),
            src_port: 4000,
            dst_ip: "2001:db8::2".into(),
            dst_port: 65535,
            ssrc: u32::MAX,
            payload_type: 8,
            codec: "PCMA".into(),
            payload_types: vec![0, 8, 101, 127],
            first_ns: 1,
            last_ns: 1_795_823_999_999_000_001,
            packets: 5_000,
            bytes: 860_000,
            expected: -3,
            lost: i64::MIN,
            duplicated: 2,
            out_of_order: 1,
            jitter_max_ms: 1.0 / 3.0,
            jitter_mean_ms: 1e-7,
            iat_min_ms: 19.999_999_999_999_996,
            iat_max_ms: 1e21,
            iat_mean_ms: 20.0,
            iat_std_ms: f64::NAN,
            size_min: 0,
            size_max: u32::MAX,
            size_mean: 172.5,
            size_std: f64::INFINITY,
            rtcp_reports: 4,
            rtcp_lost: Some(-8_388_608),
            rtcp_fraction_lost: Some(0.25),
            rtcp_jitter_ms: None,
            rtt_ms: Some(-0.0),
            mos: 4.5,
        }
    }

    #[test]
    fn call_json_is_the_value_json() {
        let mut c = call();
        for round in 0..4 {
            let mut out = Vec::new();
            c.write_json(&mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                via_value(&c),
                "round {round}"
            );
            // Every optional field the other way, and other values.
            c.ringing_ns = c.ringing_ns.xor(Some(7));
            c.answer_ns = c.answer_ns.xor(Some(8));
            c.setup_ms = c.setup_ms.xor(Some(2.5e-9));
            c.answer_ms = c.answer_ms.xor(Some(123_456.789));
            c.worst_mos = c.worst_mos.xor(Some(1.0));
            c.tcp = !c.tcp;
            c.duration_ms = 60_000.000_000_1 * round as f64;
            c.from_display = "\u{1f}\r\u{8}\u{c}/".repeat(round);
        }
    }

    #[test]
    fn stream_json_is_the_value_json() {
        let mut s = stream();
        for round in 0..3 {
            let mut out = Vec::new();
            s.write_json(&mut out);
            assert_eq!(
                String::from_utf8(out).unwrap(),
                via_value(&s),
                "round {round}"
            );
            s.call_id = s.call_id.xor(Some("x\"y".into()));
            s.orphan = !s.orphan;
            s.rtcp_lost = s.rtcp_lost.xor(Some(7));
            s.rtcp_fraction_lost = s.rtcp_fraction_lost.xor(Some(1.0));
            s.rtcp_jitter_ms = s.rtcp_jitter_ms.xor(Some(f64::MIN_POSITIVE));
            s.rtt_ms = s.rtt_ms.xor(Some(f64::MAX));
            s.payload_types.clear();
            s.expected = i64::MAX;
        }
    }
}
