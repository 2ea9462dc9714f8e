//! Settings of the flow meter.
use crate::decode::DecodeConfig;

/// Flow meter settings. Times are in nanoseconds.
#[derive(Clone, Debug)]
pub struct FlowConfig {
    /// A flow with no packet for this long is exported (reason `idle`). Default 30 s.
    pub idle_timeout_ns: u64,
    /// A flow older than this is exported (reason `active`) and keeps being counted in a new
    /// record. Default 30 min.
    pub active_timeout_ns: u64,
    /// After FIN from both sides or a RST, a TCP flow lingers this long for the final ACKs and
    /// retransmissions before it is exported (reason `fin` / `rst`). Default 2 s.
    pub tcp_linger_ns: u64,
    /// When non-zero, a record also ends (reason `active`) when a packet arrives in a later
    /// interval of this length, aligned to multiples of it since the Unix epoch, than the
    /// record's first packet: every record then holds the packets of one aligned interval, so
    /// a store of 5-minute blocks sums time ranges exactly. Default 0 (off).
    pub interval_align_ns: u64,
    /// Maximum concurrent flows. When full, the flow idle the longest is exported
    /// (reason `pressure`). Default 4 Mi; at most 2^26 - 2 (the index addresses 26 bits).
    pub capacity: usize,
    /// Bytes of transport payload kept per direction and reported in the record. Default 0.
    pub payload_bytes: usize,
    /// Decoder settings (tunnel keying).
    pub decode: DecodeConfig,
    /// Non-first fragments remembered for port attribution: the fragment table's size.
    /// Default 8192 (two ways of 4096).
    pub fragment_slots: usize,
    /// How long a first fragment's ports are remembered. Default 30 s (Linux `ipfrag_time`).
    pub fragment_timeout_ns: u64,
}

/// One second in nanoseconds.
pub const SECOND_NS: u64 = 1_000_000_000;

impl Default for FlowConfig {
    fn default() -> Self {
        FlowConfig {
            idle_timeout_ns: 30 * SECOND_NS,
            active_timeout_ns: 30 * 60 * SECOND_NS,
            tcp_linger_ns: 2 * SECOND_NS,
            interval_align_ns: 0,
            capacity: 4 << 20,
            payload_bytes: 0,
            decode: DecodeConfig::default(),
            fragment_slots: 8192,
            fragment_timeout_ns: 30 * SECOND_NS,
        }
    }
}
