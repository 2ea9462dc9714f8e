//! Settings of the flow meter, and their allowed ranges ([`limits`]): one rule for the
//! command line, `trawl run`'s configuration and the `flow_meter` block, checked by
//! [`FlowConfig::check`].
use trawl_time::OutOfRange;

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
    /// What each record keeps ([`FeatureLevel`]). Default `full`.
    pub features: FeatureLevel,
}

/// How much a flow record keeps, and so how much work a packet costs the meter
/// (`--features`, `flow_meter`'s `features`). Each level's records are a projection of
/// `full`'s: a field a level keeps has the value `full` gives it; the others are zero in the
/// [`FlowRecord`](crate::FlowRecord) and absent from JSON, CSV and IPFIX
/// (`docs/specs/flow-record.md` lists them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FeatureLevel {
    /// What goProbe and nfdump keep: key, first/last time, packets and bytes per direction,
    /// TCP flag unions, end reason.
    Minimal,
    /// `minimal` + per-direction length and gap min/max/mean, the handshake's round-trip
    /// halves, retransmissions, SYN/SYN-ACK/FIN/RST counts, zero windows.
    Standard,
    /// Everything: `standard` + MAC addresses, standard deviations, PSH/URG/ECE/CWR counts,
    /// per-direction round-trip samples, the first packets' lengths and gaps, payload bytes.
    #[default]
    Full,
}

impl FeatureLevel {
    /// Every level, smallest first.
    pub const ALL: [FeatureLevel; 3] = [
        FeatureLevel::Minimal,
        FeatureLevel::Standard,
        FeatureLevel::Full,
    ];

    /// The level's name (`minimal`, `standard`, `full`).
    pub const fn name(self) -> &'static str {
        match self {
            FeatureLevel::Minimal => "minimal",
            FeatureLevel::Standard => "standard",
            FeatureLevel::Full => "full",
        }
    }

    /// The level named `name`.
    pub fn from_name(name: &str) -> Option<FeatureLevel> {
        FeatureLevel::ALL.into_iter().find(|l| l.name() == name)
    }

    /// Whether records keep `standard`'s statistics (lengths, gaps, TCP event counts, RTT).
    #[inline]
    pub const fn has_standard(self) -> bool {
        !matches!(self, FeatureLevel::Minimal)
    }

    /// Whether records keep everything.
    #[inline]
    pub const fn is_full(self) -> bool {
        matches!(self, FeatureLevel::Full)
    }
}

impl core::fmt::Display for FeatureLevel {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
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
            features: FeatureLevel::Full,
        }
    }
}

/// Allowed values of the meter's settings.
pub mod limits {
    use trawl_time::{Limit, Unit};

    const MS: u64 = 1_000_000;
    const SECOND: u64 = 1_000 * MS;
    const HOUR: u64 = 3_600 * SECOND;
    const DAY: u64 = 24 * HOUR;

    /// Idle timeout: 0 would end every flow at its first packet; below a millisecond is below
    /// the timer wheel's resolution (67 ms ticks) anyway.
    pub const IDLE: Limit = Limit::new("idle", Unit::Nanos, MS, DAY);
    /// Active timeout: as the idle timeout (0 made one record per packet).
    pub const ACTIVE: Limit = Limit::new("active", Unit::Nanos, MS, 7 * DAY);
    /// TCP linger after FIN/RST: 0 exports at once.
    pub const TCP_LINGER: Limit = Limit::new("tcp_linger", Unit::Nanos, 0, HOUR);
    /// Interval records are cut at: 0 is off.
    pub const INTERVAL: Limit = Limit::new("interval", Unit::Nanos, SECOND, DAY).or_zero();
    /// Flow table capacity: the index addresses 26 bits.
    pub const CAPACITY: Limit = Limit::new("capacity", Unit::Count, 1, crate::MAX_CAPACITY as u64);
    /// Payload bytes kept per direction: kept lengths are 16-bit.
    pub const PAYLOAD_BYTES: Limit = Limit::new("payload_bytes", Unit::Count, 0, 65_535);
    /// The payload table (capacity × 2 directions × payload bytes) is allocated up front.
    pub const PAYLOAD_TABLE_MAX: u64 = 16 << 30;
}

impl FlowConfig {
    /// Checks every setting against [`limits`]: the first one out of range.
    pub fn check(&self) -> Result<(), OutOfRange> {
        limits::IDLE.check(self.idle_timeout_ns)?;
        limits::ACTIVE.check(self.active_timeout_ns)?;
        limits::TCP_LINGER.check(self.tcp_linger_ns)?;
        limits::INTERVAL.check(self.interval_align_ns)?;
        limits::CAPACITY.check_usize(self.capacity)?;
        limits::PAYLOAD_BYTES.check_usize(self.payload_bytes)?;
        if self.payload_bytes > 0 && !self.features.is_full() {
            return Err(OutOfRange {
                name: "payload_bytes",
                value: self.payload_bytes.to_string(),
                allowed: format!(
                    "0 with features {} (payload bytes are kept at the full level only)",
                    self.features
                ),
            });
        }
        let table = self.capacity as u64 * 2 * self.payload_bytes as u64;
        if table > limits::PAYLOAD_TABLE_MAX {
            return Err(OutOfRange {
                name: "payload_bytes",
                value: self.payload_bytes.to_string(),
                allowed: format!(
                    "at most {} with a capacity of {} flows (capacity × 2 × payload bytes is \
                     allocated up front, at most 16GiB)",
                    limits::PAYLOAD_TABLE_MAX / (2 * self.capacity as u64),
                    self.capacity
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_pass_and_each_limit_is_checked() {
        assert_eq!(FlowConfig::default().check(), Ok(()));
        let bad = |c: FlowConfig| c.check().unwrap_err().name;
        let d = FlowConfig::default;
        assert_eq!(
            bad(FlowConfig {
                idle_timeout_ns: 0,
                ..d()
            }),
            "idle"
        );
        assert_eq!(
            bad(FlowConfig {
                active_timeout_ns: 0,
                ..d()
            }),
            "active"
        );
        assert_eq!(bad(FlowConfig { capacity: 0, ..d() }), "capacity");
        assert_eq!(
            bad(FlowConfig {
                interval_align_ns: 5,
                ..d()
            }),
            "interval"
        );
        assert_eq!(
            bad(FlowConfig {
                payload_bytes: 65_536,
                ..d()
            }),
            "payload_bytes"
        );
        // Within its own range, but too much with the default capacity.
        let e = FlowConfig {
            payload_bytes: 4096,
            ..d()
        }
        .check()
        .unwrap_err();
        assert!(
            e.allowed
                .starts_with("at most 2048 with a capacity of 4194304"),
            "{e}"
        );
    }
}
