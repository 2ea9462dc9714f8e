//! The records `trawl voip` writes: [`CallRecord`] (`calls.jsonl`) and [`StreamRecord`]
//! (`rtp.jsonl`). Fields are specified in docs/specs/voip.md.
use serde::Serialize;

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
