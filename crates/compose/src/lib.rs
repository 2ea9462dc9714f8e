//! The block runtime of trawl (Blockmon's idea): a monitoring application is a composition of
//! small blocks joined gate to gate, each block on a thread of a pinned pool.
//!
//! - A [`Block`] is a Rust type with typed input and output gates ([`GateDef`]), settings
//!   (a serde type), and entry points the runtime calls on the block's thread: `receive` for
//!   messages, `poll` for sources, `timer`, `finish`.
//! - Messages ([`Msg`]) are immutable shared batches: fan-out clones a handle, never the
//!   payload; a sender's [`Pool`] recycles payloads once every receiver has dropped them.
//! - A connection between blocks on the same thread is a direct call; between threads it is a
//!   bounded wait-free single-producer single-consumer queue ([`Policy`] says whether a full
//!   queue makes the sender wait or drops and counts).
//! - A composition is TOML ([`plan`] checks it: unknown types, gates, type mismatches,
//!   cycles, unconnected required gates, cores out of range); [`start`] runs it, and
//!   [`Running::report`] gives every block's and queue's counters at any time.
//!
//! The composition format is specified in docs/specs/composition.md; docs/blocks.md lists the
//! blocks trawl ships.
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod block;
mod composition;
mod document;
mod message;
mod paths;
mod registry;
mod reload;
mod runtime;

pub use block::{Block, BuildEnv, Counter, Ctx, GateDef, Poll, TimerId};
pub use composition::{
    plan, plan_relative_to, CompositionError, Plan, PlannedBlock, PlannedConnection, PlannedThread,
    Policy, RunControl, DEFAULT_QUEUE_CAPACITY, STATS_INTERVAL_NS,
};
pub use document::{BlockBuilder, Document, SetError};
pub use message::{Msg, MsgType, Payload, Pool, PoolSlot};
pub use paths::{PathForm, PathSetting};
pub use registry::{BlockInfo, Registry};
pub use reload::{ReloadOutcome, Reloader};
pub use runtime::{
    human_rate, start, BlockReport, ConnectionReport, Message, MessageKind, Report, Reporter,
    Running, ERRORS_KEPT,
};
