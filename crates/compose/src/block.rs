//! What a block is: a Rust type with typed gates, settings and a few entry points the runtime
//! calls on the block's thread.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;

use crate::message::{Msg, MsgType};

/// One gate of a block: a named input or output carrying one message type.
#[derive(Clone, Copy, Debug)]
pub struct GateDef {
    /// Name used in compositions (`block.gate`).
    pub name: &'static str,
    /// Message type; connections must agree on it.
    pub ty: MsgType,
    /// A required gate must be connected for the composition to be valid.
    pub required: bool,
    /// One line for `trawl blocks` and docs/blocks.md.
    pub doc: &'static str,
}

/// What a source's [`Block::poll`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Poll {
    /// Produced something (or made progress); poll again soon.
    Busy,
    /// Nothing to do right now (a quiet interface); the thread may rest briefly.
    Idle,
    /// The source is exhausted (end of its files) or was told to stop: it will not be polled
    /// again, and its [`Block::finish`] runs next.
    Done,
}

/// Identifies a timer of a block, in the order the block created them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimerId(pub usize);

/// Where a block is built: what the runtime tells it about its place in the composition.
#[derive(Clone, Debug)]
pub struct BuildEnv {
    /// The block's name in the composition.
    pub name: String,
    /// How many connections feed each input gate (index = gate).
    pub input_connections: Vec<usize>,
    /// How many connections leave each output gate; an output with none need not be filled.
    pub output_connections: Vec<usize>,
    /// Position of this block in the composition (0, 1, ...): unique among all its blocks,
    /// so sources use it to number the streams they send.
    pub index: usize,
    /// Index of this block among the blocks of its type in the composition (0, 1, ...).
    pub instance: usize,
    /// How many blocks of this type the composition has.
    pub instances: usize,
}

/// A block type. Implement it for a struct, register it with
/// [`crate::Registry::register`], and compositions can use it by its [`Block::TYPE`].
///
/// The runtime calls every method on the block's own thread, one at a time: a block needs no
/// locks for its own state. Messages received are shared with other receivers and read-only;
/// a block emits new messages through [`Ctx::emit`].
pub trait Block: Send + Sized + 'static {
    /// The type name used in compositions (`type = "flow_meter"`).
    const TYPE: &'static str;
    /// One sentence for `trawl blocks` and docs/blocks.md.
    const SUMMARY: &'static str;
    /// Input gates, by index.
    const INPUTS: &'static [GateDef];
    /// Output gates, by index.
    const OUTPUTS: &'static [GateDef];
    /// The block's settings: every key of its composition table except `name`, `type`,
    /// `pool` and `thread`. Use `#[serde(deny_unknown_fields)]` so typos are errors.
    type Settings: DeserializeOwned;
    /// The settings that name files or directories. In a composition file, relative ones are
    /// relative to the file's directory (`trawl run -c lab/x.toml` with `path = "a.pcap"`
    /// reads `lab/a.pcap`); the planner rewrites them before the settings are parsed, so a
    /// block cannot forget to. Declared here, per block type, rather than guessed from key
    /// names.
    const PATHS: &'static [crate::PathSetting] = &[];

    /// The settings a reload (SIGHUP on `trawl run -c FILE`, [`crate::Reloader`]) may change
    /// while the block runs, by key: [`Block::reconfigure`] applies them. A change to any
    /// other key is structural (the block would have to be rebuilt, losing its state) and
    /// the reload is refused.
    const RELOADABLE: &'static [&'static str] = &[];

    /// Checks settings beyond their syntax (ranges, filters that must compile, paths that must
    /// exist), without side effects: `trawl check` calls it.
    fn check(_settings: &Self::Settings) -> Result<(), String> {
        Ok(())
    }

    /// Makes the block (may open files and sockets). Runs on the thread that starts the
    /// composition, before any block thread starts.
    fn build(settings: Self::Settings, env: &BuildEnv) -> Result<Self, String>;

    /// Called on the block's thread before anything else: create timers and counters here.
    fn start(&mut self, _ctx: &mut Ctx<'_>) -> Result<(), String> {
        Ok(())
    }

    /// A message arrived on input gate `input`.
    fn receive(&mut self, _input: usize, _msg: &Msg, _ctx: &mut Ctx<'_>) {}

    /// Sources (blocks without inputs) produce here; the runtime calls it in a loop until it
    /// returns [`Poll::Done`]. Blocks with inputs are never polled.
    fn poll(&mut self, _ctx: &mut Ctx<'_>) -> Poll {
        Poll::Done
    }

    /// A timer created with [`Ctx::every`] or [`Ctx::after`] fired.
    fn timer(&mut self, _timer: TimerId, _ctx: &mut Ctx<'_>) {}

    /// A reload changed some of the [`Block::RELOADABLE`] settings (the others are as the
    /// block was built with): take them over without losing state. On an error the block
    /// keeps its settings, and the reload reports the error.
    fn reconfigure(&mut self, _settings: Self::Settings, _ctx: &mut Ctx<'_>) -> Result<(), String> {
        Err("its settings cannot change while it runs".into())
    }

    /// No more input will come (every upstream block finished and its queues are empty, or
    /// the source is done): flush what is held. Messages emitted here are delivered.
    fn finish(&mut self, _ctx: &mut Ctx<'_>) {}
}

/// A block's own counter (flows in the table, alarms raised, ...), shown with the runtime's
/// counters of the block. Cheap: an atomic that only the block's thread writes (with a plain
/// load and store, no locked instruction) and any thread may read. Keep it with its block:
/// two threads adding to one counter would lose counts.
#[derive(Clone, Debug)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    /// Adds `n`.
    #[inline]
    pub fn add(&self, n: u64) {
        self.0
            .store(self.0.load(Ordering::Relaxed) + n, Ordering::Relaxed);
    }

    /// Sets the value (gauges: occupancy, active flows).
    #[inline]
    pub fn set(&self, v: u64) {
        self.0.store(v, Ordering::Relaxed);
    }

    /// The current value.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    pub(crate) fn new() -> Counter {
        Counter(Arc::new(AtomicU64::new(0)))
    }
}

/// A timer of a block.
pub(crate) struct Timer {
    pub due: Instant,
    pub period: Option<Duration>,
}

/// What a [`Ctx`] asks of the thread running the block (implemented by the runtime).
pub(crate) trait Host {
    fn emit(&mut self, block: usize, output: usize, msg: Msg);
    fn is_connected(&self, block: usize, output: usize) -> bool;
    fn add_timer(&mut self, block: usize, timer: Timer) -> TimerId;
    fn add_counter(&mut self, block: usize, name: &str) -> Counter;
    fn error(&mut self, block: usize, message: String, log: bool);
    fn warn(&mut self, block: usize, message: String);
    fn note(&mut self, block: usize, message: String);
    fn fail(&mut self, block: usize, message: String);
    fn stop(&mut self);
    fn stopping(&self) -> bool;
    fn name(&self, block: usize) -> &str;
    fn take(&mut self, want: u64) -> u64;
    fn reporter(&self) -> Option<crate::Reporter>;
}

/// The block's handle on the runtime during a call: emit messages, create timers and counters,
/// report errors, see whether the composition is stopping.
pub struct Ctx<'a> {
    pub(crate) host: &'a mut dyn Host,
    pub(crate) block: usize,
}

impl Ctx<'_> {
    /// Sends `msg` out of output gate `output` to every block connected to it: blocks on
    /// this thread are called now (they return before `emit` does), blocks on other threads
    /// get it through their queue. Sending on a gate nothing is connected to drops the
    /// message (cheaply).
    #[inline]
    pub fn emit(&mut self, output: usize, msg: Msg) {
        self.host.emit(self.block, output, msg);
    }

    /// Whether anything is connected to output gate `output` (so the block can skip building
    /// messages nobody reads).
    #[inline]
    pub fn is_connected(&self, output: usize) -> bool {
        self.host.is_connected(self.block, output)
    }

    /// A timer that fires every `period`, first after one period.
    pub fn every(&mut self, period: Duration) -> TimerId {
        let period = period.max(Duration::from_micros(100));
        self.host.add_timer(
            self.block,
            Timer {
                due: Instant::now() + period,
                period: Some(period),
            },
        )
    }

    /// A timer that fires once, after `delay`.
    pub fn after(&mut self, delay: Duration) -> TimerId {
        self.host.add_timer(
            self.block,
            Timer {
                due: Instant::now() + delay,
                period: None,
            },
        )
    }

    /// A named counter of this block, reported with the runtime's counters.
    pub fn counter(&mut self, name: &str) -> Counter {
        self.host.add_counter(self.block, name)
    }

    /// Reports a problem that does not stop the block (bad input, a lost record): counted in
    /// the block's `errors` and written to standard error (the first ten in full).
    pub fn error(&mut self, message: impl std::fmt::Display) {
        self.host.error(self.block, message.to_string(), true);
    }

    /// Like [`Ctx::error`] (counted, kept in the report's `error_messages`) but not written
    /// out: for blocks whose command lists the errors in its own summary (`trawl collect`).
    pub fn note_error(&mut self, message: impl std::fmt::Display) {
        self.host.error(self.block, message.to_string(), false);
    }

    /// Reports something the user should know that is not an error (a filter that cannot
    /// apply to some packets): kept in the block's report, not counted in `errors`.
    pub fn warn(&mut self, message: impl std::fmt::Display) {
        self.host.warn(self.block, message.to_string());
    }

    /// Leaves a fact for the command that runs the composition to put in its summary (kept
    /// in the block's report, not printed).
    pub fn note(&mut self, message: impl std::fmt::Display) {
        self.host.note(self.block, message.to_string());
    }

    /// Stops the composition cleanly, as [`crate::Running::stop`] does: sources end, what
    /// was produced flows through and every block finishes. For a block whose reader went
    /// away (standard output closed by `head`): the run is over, but nothing failed.
    pub fn stop(&mut self) {
        self.host.stop();
    }

    /// Reports a problem the block cannot go on after (an output that cannot be written): the
    /// whole composition stops and the run fails with this message.
    pub fn fail(&mut self, message: impl std::fmt::Display) {
        self.host.fail(self.block, message.to_string());
    }

    /// True once the composition is stopping (a signal, a failure, a duration reached):
    /// sources should return [`Poll::Done`].
    #[inline]
    pub fn stopping(&self) -> bool {
        self.host.stopping()
    }

    /// The block's name in the composition.
    pub fn name(&self) -> &str {
        self.host.name(self.block)
    }

    /// Reads every block's and queue's counters of this composition, from any thread (a
    /// block that serves them, as the HTTP API does). Available from [`Block::start`] on.
    pub fn reporter(&self) -> Option<crate::Reporter> {
        self.host.reporter()
    }

    /// Takes up to `want` packets from the run's packet budget (`[runtime] count`, shared by
    /// every source, so the total is exact however many workers there are) and returns how
    /// many the source may send: `want` without a budget. Once the budget is spent the
    /// composition stops. Sources of packets call it before they emit.
    #[inline]
    pub fn take(&mut self, want: u64) -> u64 {
        self.host.take(want)
    }
}
