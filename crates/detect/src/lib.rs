//! Monitoring applications as plain library types (issue 7's algorithmic core; the block
//! runtime that will host them is not built yet).
//!
//! - [`sketch`]: [`CountMin`](sketch::CountMin) and [`SpaceSaving`](sketch::SpaceSaving), with
//!   stated error bounds and no allocation per update.
//! - [`cusum`]: a multi-channel non-parametric CUSUM change detector.
//! - [`change`]: [`ChangeDetector`](change::ChangeDetector), short- and long-term changes of
//!   per-second packets, bytes and new flows (relative CUSUMs over learned baselines).
//! - [`synflood`]: [`SynFloodDetector`](synflood::SynFloodDetector), a count-min sketch of SYNs
//!   per destination per interval watched by a CUSUM per cell, naming victims.
//! - [`heavy`]: [`HeavyHitters`](heavy::HeavyHitters), per-flow and per-host bytes and packets
//!   per interval through space-saving summaries.
//!
//! ```
//! use trawl_detect::sketch::SpaceSaving;
//! let mut top = SpaceSaving::new(2);
//! for item in ["a", "b", "a", "c", "a"] {
//!     top.add(item, 1);
//! }
//! let a = top.get(&"a").unwrap();
//! assert!(a.count - a.error <= 3 && 3 <= a.count);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod change;
pub mod cusum;
pub mod heavy;
pub mod sketch;
pub mod synflood;
