//! Runs a [`Plan`]: one thread per pool thread (pinned where the pool names cores), blocks
//! called directly within a thread and through wait-free single-producer queues between
//! threads, an orderly finish from the sources down, and counters for every block and queue.
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::block::{Counter, Ctx, Host, Poll, Timer, TimerId};
use crate::composition::{Plan, Policy};
use crate::message::Msg;
use crate::registry::Node;

/// Messages taken from one queue before the thread looks at its other work.
const DRAIN_BURST: usize = 64;
/// Empty rounds a thread spins before it parks.
const SPIN_ROUNDS: u32 = 64;
/// Longest park of an idle thread (its timers and the stop request are looked at after it).
/// Wake-ups are not missed (the fences of `Waker::wake` and the park below), so this only sets
/// how often an idle monitor wakes: 5 ms cost an idle `trawl flows -i` 2 % of a CPU.
const MAX_PARK: Duration = Duration::from_millis(50);
/// Park of a thread whose sources are idle (they wait in the kernel themselves).
const SOURCE_PARK: Duration = Duration::from_micros(500);

/// Counters of one block, written by its thread, read by anyone.
#[derive(Default)]
pub(crate) struct BlockShared {
    finished: AtomicBool,
    msgs_in: AtomicU64,
    items_in: AtomicU64,
    msgs_out: AtomicU64,
    items_out: AtomicU64,
    busy_ns: AtomicU64,
    calls: AtomicU64,
    errors: AtomicU64,
    own: Mutex<Vec<(String, Counter)>>,
    /// Errors and warnings reported, in order (the first [`MESSAGES_KEPT`]).
    messages: Mutex<Vec<Message>>,
    /// New settings from a reload, for the block's thread to hand it ([`crate::Reloader`]).
    pub(crate) reload: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// What the block answered to them.
    pub(crate) reload_answer: Mutex<Option<Result<(), String>>>,
}

/// Messages a block's report keeps; its `errors` counter counts them all.
const MESSAGES_KEPT: usize = 1000;

/// Something a block said for its report: a problem it went on after, or a final word.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Message {
    /// Which kind.
    pub kind: MessageKind,
    /// What the block said.
    pub text: String,
}

/// The kinds of [`Message`].
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum MessageKind {
    /// [`Ctx::error`]: bad input, a lost record (counted in `errors`).
    Error,
    /// [`Ctx::warn`]: not an error, but the user should know (a filter that cannot apply).
    Warning,
    /// [`Ctx::note`]: a fact for the command's summary (the victims still under attack at
    /// the end); never printed by the runtime.
    Note,
}

/// Error messages a block's report keeps (all are counted): enough for a command to list
/// in its summary, bounded against a flood of bad input.
pub const ERRORS_KEPT: usize = 20;

/// Counters of one queued connection.
#[derive(Default)]
struct QueueShared {
    pushed: AtomicU64,
    popped: AtomicU64,
    dropped: AtomicU64,
    peak: AtomicU64,
    /// Times the sender found the queue full and waited.
    waits: AtomicU64,
}

/// Lets a producer wake the consumer's thread when it parked.
struct Waker {
    sleeping: AtomicBool,
    thread: Mutex<Option<Thread>>,
}

impl Waker {
    fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            if let Ok(t) = self.thread.lock() {
                if let Some(t) = t.as_ref() {
                    t.unpark();
                }
            }
        }
    }
}

/// The state every thread shares: stop request and the first failure.
pub(crate) struct Control {
    stop: AtomicBool,
    failure: Mutex<Option<String>>,
    /// Packets the sources may still send (`[runtime] count`); `None`: no limit.
    budget: Option<AtomicU64>,
    /// [`Plan::print_messages`].
    print_messages: bool,
    /// Every counter, for blocks that report on the composition; set before any block
    /// thread starts.
    reporter: std::sync::OnceLock<Reporter>,
    /// Bumped when a reload left new settings in some blocks' [`BlockShared::reload`].
    pub(crate) reload_epoch: AtomicU64,
}

impl Control {
    fn fail(&self, message: String) {
        if let Ok(mut f) = self.failure.lock() {
            if f.is_none() {
                *f = Some(message);
            }
        }
        self.stop.store(true, Ordering::SeqCst);
    }
}

enum Route {
    Direct {
        local: usize,
        input: usize,
    },
    Queue {
        producer: rtrb::Producer<Msg>,
        shared: Arc<QueueShared>,
        policy: Policy,
        waker: Arc<Waker>,
    },
}

struct Inbound {
    consumer: rtrb::Consumer<Msg>,
    input: usize,
    shared: Arc<QueueShared>,
}

struct Local {
    name: String,
    /// Taken out while the block is being called (a block is never re-entered: the
    /// connections form no cycle).
    node: Option<Box<dyn Node>>,
    shared: Arc<BlockShared>,
    timers: Vec<Timer>,
    own: Vec<(String, Counter)>,
    output_counts: Vec<usize>,
    inbound: Vec<Inbound>,
    /// Every block feeding this one (same thread or not).
    upstream: Vec<Arc<BlockShared>>,
    /// Threads to wake when this block finishes (those of its queued receivers).
    downstream_wakers: Vec<Arc<Waker>>,
    is_source: bool,
    source_done: bool,
    finished: bool,
}

struct Worker {
    locals: Vec<Local>,
    /// Per local block, per output gate, where messages go.
    routes: Vec<Vec<Vec<Route>>>,
    control: Arc<Control>,
    /// Time spent in nested calls (direct receivers) of the call in progress, so each block
    /// is charged only its own time.
    nested_ns: u64,
    /// Time every call (`[runtime] time_blocks`).
    time_blocks: bool,
    waker: Arc<Waker>,
    core: Option<usize>,
    /// The block being called, for the message when it panics.
    current: usize,
    /// The last [`Control::reload_epoch`] this thread acted on.
    seen_reload: u64,
}

/// A composition that is running.
pub struct Running {
    control: Arc<Control>,
    threads: Vec<JoinHandle<()>>,
    reporter: Reporter,
    started: Instant,
    run_control: crate::composition::RunControl,
    reloader: crate::Reloader,
}

/// Reads every counter of a running composition, from any thread, at any time: what
/// [`Running::report`] answers, for a block that reports on its own composition (the HTTP
/// API's status and metrics; [`Ctx::reporter`]). Cheap to clone.
#[derive(Clone)]
pub struct Reporter(Arc<ReporterInner>);

struct ReporterInner {
    blocks: Vec<(String, &'static str, String, Arc<BlockShared>, bool)>,
    queues: Vec<(String, String, usize, Arc<QueueShared>)>,
    direct: Vec<(String, String)>,
    started: Instant,
}

impl std::fmt::Debug for Reporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reporter")
            .field("blocks", &self.0.blocks.len())
            .finish_non_exhaustive()
    }
}

/// Counters of one block.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct BlockReport {
    /// Name in the composition.
    pub name: String,
    /// Block type.
    #[serde(rename = "type")]
    pub type_name: String,
    /// Thread it runs on (`pool[index]`).
    pub thread: String,
    /// Messages received.
    pub msgs_in: u64,
    /// Items in them (packets, records, rows).
    pub items_in: u64,
    /// Messages emitted.
    pub msgs_out: u64,
    /// Items in them.
    pub items_out: u64,
    /// Time spent in the block's own code, ns.
    pub busy_ns: u64,
    /// Calls into the block.
    pub calls: u64,
    /// Problems it reported and went on after.
    pub errors: u64,
    /// The first of them ([`ERRORS_KEPT`]), in the order reported: the errors among
    /// `messages`, not kept apart.
    pub error_messages: Vec<String>,
    /// Whether it has finished.
    pub finished: bool,
    /// The block's own counters.
    pub counters: Vec<(String, u64)>,
    /// A source (no input gates): its `packets` and `kernel_drops` make the status line.
    #[serde(skip)]
    pub source: bool,
    /// The errors and warnings it reported, in order (the first thousand).
    pub messages: Vec<Message>,
}

/// Counters of one connection.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ConnectionReport {
    /// `block.gate` it leaves.
    pub from: String,
    /// `block.gate` it feeds.
    pub to: String,
    /// Through a queue (else a direct call, and the counters below stay 0).
    pub queued: bool,
    /// Queue capacity in messages.
    pub capacity: usize,
    /// Messages put into the queue.
    pub pushed: u64,
    /// Messages dropped because the queue was full (policy "drop") or the receiver was gone.
    pub dropped: u64,
    /// Messages in the queue now.
    pub occupancy: u64,
    /// Most messages the receiver found waiting at once.
    pub peak: u64,
    /// Times the sender waited for room (policy "wait").
    pub waits: u64,
}

/// Every counter of a running or finished composition.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// Seconds since the start.
    pub elapsed_s: f64,
    /// Blocks, in composition order.
    pub blocks: Vec<BlockReport>,
    /// Connections, in composition order.
    pub connections: Vec<ConnectionReport>,
}

impl Report {
    /// The counter `name` summed over the blocks of type `type_name`.
    pub fn sum(&self, type_name: &str, name: &str) -> u64 {
        self.blocks
            .iter()
            .filter(|b| b.type_name == type_name)
            .map(|b| b.counter(name).unwrap_or(0))
            .sum()
    }

    /// One line for operators (`--stats-interval`): packets the sources sent so far, their
    /// rate, the kernel's drops so far, each shared ring's publishing, and the errors of
    /// blocks that have any (a collector that refuses, a full disk).
    pub fn status_line(&self) -> String {
        let secs = self.elapsed_s.max(1e-9);
        let sources = self.blocks.iter().filter(|b| b.source);
        let packets: u64 = sources
            .clone()
            .map(|b| b.counter("packets").unwrap_or(0))
            .sum();
        let drops: u64 = sources
            .map(|b| b.counter("kernel_drops").unwrap_or(0))
            .sum();
        let mut line = format!(
            "trawl: {secs:.0}s: {packets} packets ({}/s), {drops} kernel drops",
            human_rate(packets as f64 / secs)
        );
        for b in self.blocks.iter().filter(|b| b.type_name == "ring") {
            line.push_str(&format!(
                "; ring {}: {} published, {} not published, producer waited {} times",
                b.name,
                b.counter("published").unwrap_or(0),
                b.counter("not_published").unwrap_or(0),
                b.counter("producer_waits").unwrap_or(0)
            ));
        }
        // Blocks with trouble so far: errors, and their own counters of losses and failures
        // (an exporter's `dropped_send` and `send_errors` while its collector refuses).
        for b in &self.blocks {
            let mut trouble: Vec<String> = Vec::new();
            if b.errors > 0 {
                trouble.push(format!("errors={}", b.errors));
            }
            trouble.extend(
                b.counters
                    .iter()
                    .filter(|(k, v)| *v > 0 && (k.starts_with("dropped") || k.ends_with("errors")))
                    .map(|(k, v)| format!("{k}={v}")),
            );
            if !trouble.is_empty() {
                line.push_str(&format!("; {}: {}", b.name, trouble.join(" ")));
            }
        }
        line
    }

    /// The counters as an aligned text table (blocks, then queues).
    pub fn table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{:<16} {:<14} {:<10} {:>10} {:>12} {:>10} {:>12} {:>9} {:>7}  counters",
            "block",
            "type",
            "thread",
            "msgs in",
            "items in",
            "msgs out",
            "items out",
            "busy s",
            "errors"
        );
        for b in &self.blocks {
            let own: Vec<String> = b.counters.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let _ = writeln!(
                s,
                "{:<16} {:<14} {:<10} {:>10} {:>12} {:>10} {:>12} {:>9.3} {:>7}  {}",
                b.name,
                b.type_name,
                b.thread,
                b.msgs_in,
                b.items_in,
                b.msgs_out,
                b.items_out,
                b.busy_ns as f64 / 1e9,
                b.errors,
                own.join(" ")
            );
        }
        let queued: Vec<&ConnectionReport> = self.connections.iter().filter(|c| c.queued).collect();
        if !queued.is_empty() {
            let _ = writeln!(
                s,
                "{:<34} {:>9} {:>12} {:>9} {:>9} {:>9} {:>9}",
                "queue", "capacity", "pushed", "dropped", "now", "peak", "waits"
            );
            for c in queued {
                let _ = writeln!(
                    s,
                    "{:<34} {:>9} {:>12} {:>9} {:>9} {:>9} {:>9}",
                    format!("{} -> {}", c.from, c.to),
                    c.capacity,
                    c.pushed,
                    c.dropped,
                    c.occupancy,
                    c.peak,
                    c.waits
                );
            }
        }
        s
    }

    /// The report of block `name`.
    pub fn block(&self, name: &str) -> Option<&BlockReport> {
        self.blocks.iter().find(|b| b.name == name)
    }
}

impl BlockReport {
    /// Fills `error_messages` from `messages`: the first [`ERRORS_KEPT`] errors.
    fn with_error_messages(mut self) -> BlockReport {
        self.error_messages = self
            .messages
            .iter()
            .filter(|m| m.kind == MessageKind::Error)
            .take(ERRORS_KEPT)
            .map(|m| m.text.clone())
            .collect();
        self
    }

    /// The block's own counter `name`.
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| *v)
    }
}

/// Builds every block of `plan` (in the calling thread, so errors come back before anything
/// runs) and starts the threads.
pub fn start(plan: Plan) -> Result<Running, String> {
    let control = Arc::new(Control {
        stop: AtomicBool::new(false),
        failure: Mutex::new(None),
        budget: plan.control.count.map(AtomicU64::new),
        print_messages: plan.print_messages,
        reporter: std::sync::OnceLock::new(),
        reload_epoch: AtomicU64::new(0),
    });
    let shared: Vec<Arc<BlockShared>> = plan.blocks.iter().map(|_| Arc::default()).collect();
    let reloader = crate::Reloader::new(&plan, &shared, control.clone());
    let Plan {
        threads,
        mut blocks,
        connections,
        order,
        time_blocks,
        control: run_control,
        print_messages: _,
    } = plan;
    let wakers: Vec<Arc<Waker>> = threads
        .iter()
        .map(|_| {
            Arc::new(Waker {
                sleeping: AtomicBool::new(false),
                thread: Mutex::new(None),
            })
        })
        .collect();

    // Build in composition order; stop at the first error.
    let mut nodes: Vec<Option<Box<dyn Node>>> = Vec::with_capacity(blocks.len());
    for b in blocks.iter_mut() {
        let configured = b
            .configured
            .take()
            .ok_or_else(|| format!("block `{}` was already built", b.name))?;
        let node = configured
            .build(&b.env)
            .map_err(|e| format!("block `{}` ({}): {e}", b.name, b.info.type_name))?;
        nodes.push(Some(node));
    }

    // Each thread's blocks in topological order; `local_of[b]` = (thread, index).
    let mut local_of = vec![(0usize, 0usize); blocks.len()];
    let mut per_thread: Vec<Vec<usize>> = vec![Vec::new(); threads.len()];
    for &b in &order {
        let t = blocks[b].thread;
        local_of[b] = (t, per_thread[t].len());
        per_thread[t].push(b);
    }
    let mut locals: Vec<Vec<Local>> = per_thread
        .iter()
        .map(|ids| {
            ids.iter()
                .map(|&b| {
                    let block = &blocks[b];
                    Local {
                        name: block.name.clone(),
                        node: nodes[b].take(),
                        shared: shared[b].clone(),
                        timers: Vec::new(),
                        own: Vec::new(),
                        output_counts: block.env.output_connections.clone(),
                        inbound: Vec::new(),
                        upstream: Vec::new(),
                        downstream_wakers: Vec::new(),
                        is_source: block.info.is_source(),
                        source_done: false,
                        finished: false,
                    }
                })
                .collect()
        })
        .collect();
    let mut routes: Vec<Vec<Vec<Vec<Route>>>> = per_thread
        .iter()
        .map(|ids| {
            ids.iter()
                .map(|&b| {
                    (0..blocks[b].info.outputs.len())
                        .map(|_| Vec::new())
                        .collect()
                })
                .collect()
        })
        .collect();
    let mut queues = Vec::new();
    let mut direct = Vec::new();
    let gate_name = |(b, g): (usize, usize), output: bool| {
        let block = &blocks[b];
        let gate = if output {
            block.info.outputs[g].name
        } else {
            block.info.inputs[g].name
        };
        format!("{}.{gate}", block.name)
    };
    for c in &connections {
        let (ft, fl) = local_of[c.from.0];
        let (tt, tl) = local_of[c.to.0];
        let upstream = shared[c.from.0].clone();
        if !locals[tt][tl]
            .upstream
            .iter()
            .any(|u| Arc::ptr_eq(u, &upstream))
        {
            locals[tt][tl].upstream.push(upstream);
        }
        let (from, to) = (gate_name(c.from, true), gate_name(c.to, false));
        if c.queued {
            let (producer, consumer) = rtrb::RingBuffer::new(c.capacity);
            let qs = Arc::new(QueueShared::default());
            routes[ft][fl][c.from.1].push(Route::Queue {
                producer,
                shared: qs.clone(),
                policy: c.policy,
                waker: wakers[tt].clone(),
            });
            locals[tt][tl].inbound.push(Inbound {
                consumer,
                input: c.to.1,
                shared: qs.clone(),
            });
            locals[ft][fl].downstream_wakers.push(wakers[tt].clone());
            queues.push((from, to, c.capacity, qs));
        } else {
            routes[ft][fl][c.from.1].push(Route::Direct {
                local: tl,
                input: c.to.1,
            });
            direct.push((from, to));
        }
    }

    let block_list = blocks
        .iter()
        .enumerate()
        .map(|(b, block)| {
            let t = &threads[block.thread];
            (
                block.name.clone(),
                block.info.type_name,
                format!("{}[{}]", t.pool, t.index),
                shared[b].clone(),
                block.info.is_source(),
            )
        })
        .collect();
    let reporter = Reporter(Arc::new(ReporterInner {
        blocks: block_list,
        queues,
        direct,
        started: Instant::now(),
    }));
    let _ = control.reporter.set(reporter.clone());
    let mut handles = Vec::new();
    for (t, (locals, routes)) in locals.into_iter().zip(routes).enumerate() {
        let worker = Worker {
            locals,
            routes,
            control: control.clone(),
            nested_ns: 0,
            time_blocks,
            waker: wakers[t].clone(),
            core: threads[t].core,
            current: 0,
            seen_reload: 0,
        };
        let name = format!("trawl-{}-{}", threads[t].pool, threads[t].index);
        let control = control.clone();
        let handle = std::thread::Builder::new()
            .name(name.chars().take(15).collect())
            .spawn(move || worker.run())
            .map_err(|e| {
                control.fail(format!("cannot start thread {name}: {e}"));
                format!("cannot start thread {name}: {e}")
            })?;
        if let Ok(mut slot) = wakers[t].thread.lock() {
            *slot = Some(handle.thread().clone());
        }
        handles.push(handle);
    }
    Ok(Running {
        control,
        threads: handles,
        started: reporter.0.started,
        reporter,
        run_control,
        reloader,
    })
}

impl Running {
    /// Drives the run to its end as `[runtime]` says: switches to `user` (every block is
    /// built by now: sockets, rings and files are open), calls `status` with the counters every
    /// `stats_interval`, and stops the sources when `stop` is set (the first SIGINT/SIGTERM),
    /// at `duration`, or when the packet budget (`count`) is spent. Returns as
    /// [`Running::wait`] does; a user that cannot be switched to stops the run and fails it.
    pub fn supervise(
        self,
        stop: &AtomicBool,
        status: impl FnMut(&Report),
    ) -> Result<Report, (String, Report)> {
        self.supervise_with(stop, status, None)
    }

    /// [`Running::supervise`], also calling `progress` (when given) with the counters about
    /// every 50 ms while the run goes (a command's progress line).
    pub fn supervise_with(
        self,
        stop: &AtomicBool,
        mut status: impl FnMut(&Report),
        mut progress: Option<&mut dyn FnMut(&Report)>,
    ) -> Result<Report, (String, Report)> {
        if let Some(user) = &self.run_control.user {
            if let Err(e) = trawl_capture::live::drop_privileges(user) {
                self.stop();
                let failure = format!("cannot switch to user {user}: {e}");
                return match self.wait() {
                    Ok(r) | Err((_, r)) => Err((failure, r)),
                };
            }
        }
        let deadline = self
            .run_control
            .duration_ns
            .map(|ns| self.started + Duration::from_nanos(ns));
        let every = self.run_control.stats_interval_ns.map(Duration::from_nanos);
        let mut next_status = every.map(|d| self.started + d);
        let mut stopped = false;
        while !self.is_finished() {
            // Often enough for a signal, a deadline or a progress line to be seen at once; an
            // idle monitor's main thread wakes 20 times a second for it.
            std::thread::sleep(Duration::from_millis(50));
            let now = Instant::now();
            if !stopped && (stop.load(Ordering::Relaxed) || deadline.is_some_and(|d| now >= d)) {
                self.stop();
                stopped = true;
            }
            if let (Some(every), Some(at)) = (every, next_status) {
                if now >= at {
                    status(&self.report());
                    next_status = Some(at + every);
                }
            }
            if let Some(p) = progress.as_mut() {
                p(&self.report());
            }
        }
        self.wait()
    }

    /// Asks the sources to stop; everything already produced still flows through and every
    /// block finishes. Returns at once; [`Running::wait`] waits for the end.
    pub fn stop(&self) {
        self.control.stop.store(true, Ordering::SeqCst);
    }

    /// True when every thread has ended.
    pub fn is_finished(&self) -> bool {
        self.threads.iter().all(|t| t.is_finished())
    }

    /// Every counter now.
    pub fn report(&self) -> Report {
        self.reporter.report()
    }

    /// A handle that reads the counters from another thread.
    pub fn reporter(&self) -> Reporter {
        self.reporter.clone()
    }

    /// A handle that reloads the composition's settings while it runs.
    pub fn reloader(&self) -> crate::Reloader {
        self.reloader.clone()
    }

    /// Waits for every block to finish. Returns the final counters, or the first failure
    /// (a block's [`Ctx::fail`], a panic, a core that cannot be pinned) with them.
    pub fn wait(mut self) -> Result<Report, (String, Report)> {
        let mut panicked = false;
        for t in std::mem::take(&mut self.threads) {
            panicked |= t.join().is_err();
        }
        let report = self.report();
        let failure = self.control.failure.lock().ok().and_then(|f| f.clone());
        match (failure, panicked) {
            (Some(f), _) => Err((f, report)),
            (None, true) => Err(("a block thread panicked".into(), report)),
            (None, false) => Ok(report),
        }
    }
}

impl Reporter {
    /// Every counter now.
    pub fn report(&self) -> Report {
        let inner = &*self.0;
        let blocks = inner
            .blocks
            .iter()
            .map(|(name, type_name, thread, s, source)| BlockReport {
                source: *source,
                name: name.clone(),
                type_name: type_name.to_string(),
                thread: thread.clone(),
                msgs_in: s.msgs_in.load(Ordering::Relaxed),
                items_in: s.items_in.load(Ordering::Relaxed),
                msgs_out: s.msgs_out.load(Ordering::Relaxed),
                items_out: s.items_out.load(Ordering::Relaxed),
                busy_ns: s.busy_ns.load(Ordering::Relaxed),
                calls: s.calls.load(Ordering::Relaxed),
                errors: s.errors.load(Ordering::Relaxed),
                error_messages: Vec::new(),
                finished: s.finished.load(Ordering::Acquire),
                counters: s
                    .own
                    .lock()
                    .map(|own| own.iter().map(|(k, c)| (k.clone(), c.get())).collect())
                    .unwrap_or_default(),
                messages: s.messages.lock().map(|m| m.clone()).unwrap_or_default(),
            })
            .map(BlockReport::with_error_messages)
            .collect();
        let mut connections: Vec<ConnectionReport> = inner
            .queues
            .iter()
            .map(|(from, to, capacity, q)| {
                let pushed = q.pushed.load(Ordering::Relaxed);
                ConnectionReport {
                    from: from.clone(),
                    to: to.clone(),
                    queued: true,
                    capacity: *capacity,
                    pushed,
                    dropped: q.dropped.load(Ordering::Relaxed),
                    occupancy: pushed.saturating_sub(q.popped.load(Ordering::Relaxed)),
                    peak: q.peak.load(Ordering::Relaxed),
                    waits: q.waits.load(Ordering::Relaxed),
                }
            })
            .collect();
        connections.extend(inner.direct.iter().map(|(from, to)| ConnectionReport {
            from: from.clone(),
            to: to.clone(),
            queued: false,
            capacity: 0,
            pushed: 0,
            dropped: 0,
            occupancy: 0,
            peak: 0,
            waits: 0,
        }));
        Report {
            elapsed_s: inner.started.elapsed().as_secs_f64(),
            blocks,
            connections,
        }
    }
}

impl Worker {
    fn run(mut self) {
        if let Some(core) = self.core {
            if let Err(e) = trawl_capture::live::pin_current_thread(core) {
                self.control
                    .fail(format!("cannot pin a thread to core {core}: {e}"));
            }
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| self.serve()));
        if let Err(panic) = outcome {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "panic".into());
            let name = self
                .locals
                .get(self.current)
                .map_or("?", |l| l.name.as_str());
            self.control
                .fail(format!("block `{name}` panicked: {what}"));
            // Let the blocks downstream drain and finish.
            for l in &self.locals {
                l.shared.finished.store(true, Ordering::Release);
                for w in &l.downstream_wakers {
                    w.wake();
                }
            }
        }
    }

    fn serve(&mut self) {
        for i in 0..self.locals.len() {
            self.call(i, |node, ctx| {
                if let Err(e) = node.start(ctx) {
                    ctx.fail(e);
                }
            });
            let l = &self.locals[i];
            if let Ok(mut own) = l.shared.own.lock() {
                own.clone_from(&l.own);
            }
        }
        let mut idle_rounds = 0u32;
        loop {
            let mut busy = false;
            let mut sources_active = false;
            let stopping = self.control.stop.load(Ordering::Relaxed);
            let epoch = self.control.reload_epoch.load(Ordering::Acquire);
            if epoch != self.seen_reload {
                self.seen_reload = epoch;
                self.reconfigure();
            }
            for i in 0..self.locals.len() {
                let l = &self.locals[i];
                if !l.is_source || l.source_done {
                    continue;
                }
                if stopping {
                    self.locals[i].source_done = true;
                    continue;
                }
                sources_active = true;
                let mut outcome = Poll::Done;
                self.call(i, |node, ctx| outcome = node.poll(ctx));
                match outcome {
                    Poll::Busy => busy = true,
                    Poll::Idle => {}
                    Poll::Done => self.locals[i].source_done = true,
                }
            }
            for i in 0..self.locals.len() {
                for q in 0..self.locals[i].inbound.len() {
                    busy |= self.drain(i, q);
                }
            }
            let next_due = self.fire_timers();
            let all_finished = self.finish_ready();
            if all_finished {
                return;
            }
            if busy {
                idle_rounds = 0;
                continue;
            }
            idle_rounds += 1;
            if idle_rounds < SPIN_ROUNDS {
                std::hint::spin_loop();
                continue;
            }
            let mut park = if sources_active {
                SOURCE_PARK
            } else {
                MAX_PARK
            };
            if let Some(due) = next_due {
                park = park.min(due.saturating_duration_since(Instant::now()));
            }
            self.waker.sleeping.store(true, Ordering::SeqCst);
            // Pairs with the fence in `Waker::wake`: either this thread sees the message a
            // producer pushed, or the producer sees `sleeping` and unparks it (a SeqCst store
            // alone may pass the queues' loads below).
            fence(Ordering::SeqCst);
            if !self.has_input() && !park.is_zero() {
                std::thread::park_timeout(park);
            }
            self.waker.sleeping.store(false, Ordering::SeqCst);
        }
    }

    /// Hands every block of this thread the settings a reload left for it, and leaves its
    /// answer for the reloader. Between calls, on the block's own thread: a block needs no
    /// lock for it.
    fn reconfigure(&mut self) {
        for i in 0..self.locals.len() {
            let l = &self.locals[i];
            let Some(settings) = l.shared.reload.lock().ok().and_then(|mut p| p.take()) else {
                continue;
            };
            let mut answer = Err("it has finished".to_string());
            if !l.finished {
                self.call(i, |node, ctx| answer = node.reconfigure(settings, ctx));
            }
            if let Ok(mut a) = self.locals[i].shared.reload_answer.lock() {
                *a = Some(answer);
            }
        }
    }

    /// Whether any inbound queue holds a message.
    fn has_input(&self) -> bool {
        self.locals
            .iter()
            .any(|l| l.inbound.iter().any(|q| !q.consumer.is_empty()))
    }

    /// Delivers up to a burst of messages from queue `q` of block `i`.
    fn drain(&mut self, i: usize, q: usize) -> bool {
        let mut any = false;
        for _ in 0..DRAIN_BURST {
            let inbound = &mut self.locals[i].inbound[q];
            let waiting = inbound.consumer.slots() as u64;
            let Ok(msg) = inbound.consumer.pop() else {
                break;
            };
            let shared = &inbound.shared;
            if waiting > shared.peak.load(Ordering::Relaxed) {
                shared.peak.store(waiting, Ordering::Relaxed);
            }
            bump(&shared.popped, 1);
            let input = inbound.input;
            self.deliver(i, input, msg);
            any = true;
        }
        any
    }

    /// Runs due timers; returns the next deadline.
    fn fire_timers(&mut self) -> Option<Instant> {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        for i in 0..self.locals.len() {
            if self.locals[i].finished {
                continue;
            }
            for t in 0..self.locals[i].timers.len() {
                let timer = &mut self.locals[i].timers[t];
                if timer.due > now {
                    next = Some(next.map_or(timer.due, |n| n.min(timer.due)));
                    continue;
                }
                match timer.period {
                    Some(p) => {
                        // Skip missed periods rather than firing a burst.
                        while timer.due <= now {
                            timer.due += p;
                        }
                        next = Some(next.map_or(timer.due, |n| n.min(timer.due)));
                    }
                    None => timer.due = now + Duration::from_secs(1 << 40),
                }
                self.call(i, |node, ctx| node.timer(TimerId(t), ctx));
            }
        }
        next
    }

    /// Finishes, in topological order, every block whose input has ended. Returns true when
    /// all of this thread's blocks have finished.
    fn finish_ready(&mut self) -> bool {
        let mut all = true;
        for i in 0..self.locals.len() {
            let l = &self.locals[i];
            if l.finished {
                continue;
            }
            let ready = if l.is_source {
                l.source_done
            } else {
                // Finished flags first (acquire), then the queues: whatever a finished
                // upstream pushed is visible by then.
                l.upstream
                    .iter()
                    .all(|u| u.finished.load(Ordering::Acquire))
                    && l.inbound.iter().all(|q| q.consumer.is_empty())
            };
            if !ready {
                all = false;
                continue;
            }
            self.call(i, |node, ctx| node.finish(ctx));
            let l = &mut self.locals[i];
            l.finished = true;
            l.shared.finished.store(true, Ordering::Release);
            for w in &l.downstream_wakers {
                w.wake();
            }
        }
        all
    }

    #[inline]
    fn deliver(&mut self, i: usize, input: usize, msg: Msg) {
        let s = &self.locals[i].shared;
        bump(&s.msgs_in, 1);
        bump(&s.items_in, msg.items() as u64);
        self.call(i, |node, ctx| node.receive(input, &msg, ctx));
    }

    /// Calls block `i`, charging it the time spent in its own code.
    #[inline]
    fn call(&mut self, i: usize, f: impl FnOnce(&mut dyn Node, &mut Ctx<'_>)) {
        let Some(mut node) = self.locals[i].node.take() else {
            // Only a cycle could re-enter a block, and plans have none.
            debug_assert!(false, "block re-entered");
            return;
        };
        let caller = self.current;
        self.current = i;
        let nested_before = self.nested_ns;
        self.nested_ns = 0;
        let started = self.time_blocks.then(Instant::now);
        {
            let mut ctx = Ctx {
                host: self,
                block: i,
            };
            f(&mut *node, &mut ctx);
        }
        let own = match started {
            Some(t) => {
                let total = t.elapsed().as_nanos() as u64;
                let own = total.saturating_sub(self.nested_ns);
                self.nested_ns = nested_before + total;
                own
            }
            None => 0,
        };
        self.current = caller;
        let local = &mut self.locals[i];
        local.node = Some(node);
        if own > 0 {
            bump(&local.shared.busy_ns, own);
        }
        bump(&local.shared.calls, 1);
    }
}

impl Host for Worker {
    fn reporter(&self) -> Option<Reporter> {
        self.control.reporter.get().cloned()
    }

    #[inline]
    fn emit(&mut self, block: usize, output: usize, msg: Msg) {
        let shared = &self.locals[block].shared;
        bump(&shared.msgs_out, 1);
        bump(&shared.items_out, msg.items() as u64);
        let n = self.routes[block][output].len();
        for r in 0..n {
            match &mut self.routes[block][output][r] {
                Route::Direct { local, input } => {
                    let (to, input) = (*local, *input);
                    self.deliver(to, input, msg.clone());
                }
                Route::Queue {
                    producer,
                    shared,
                    policy,
                    waker,
                } => push(producer, shared, *policy, waker, &self.control, msg.clone()),
            }
        }
    }

    fn is_connected(&self, block: usize, output: usize) -> bool {
        self.locals[block]
            .output_counts
            .get(output)
            .is_some_and(|&n| n > 0)
    }

    fn add_timer(&mut self, block: usize, timer: Timer) -> TimerId {
        let timers = &mut self.locals[block].timers;
        timers.push(timer);
        TimerId(timers.len() - 1)
    }

    fn add_counter(&mut self, block: usize, name: &str) -> Counter {
        let c = Counter::new();
        self.locals[block].own.push((name.to_string(), c.clone()));
        c
    }

    fn error(&mut self, block: usize, message: String, log: bool) {
        let l = &self.locals[block];
        let n = l.shared.errors.fetch_add(1, Ordering::Relaxed);
        let print = self.control.print_messages && log;
        keep_message(&l.shared, MessageKind::Error, message.as_str());
        if !print {
            return;
        }
        // The first errors are shown in full; the counter says how many followed.
        if n < 10 {
            tracing::warn!("block {}: {message}", l.name);
        } else if n == 10 {
            tracing::warn!("block {}: more errors; see its `errors` counter", l.name);
        }
    }

    fn warn(&mut self, block: usize, message: String) {
        let l = &self.locals[block];
        if self.control.print_messages {
            eprintln!("trawl: block {}: warning: {message}", l.name);
        }
        keep_message(&l.shared, MessageKind::Warning, message.as_str());
    }

    fn note(&mut self, block: usize, message: String) {
        keep_message(&self.locals[block].shared, MessageKind::Note, &message);
    }

    fn fail(&mut self, block: usize, message: String) {
        let name = &self.locals[block].name;
        self.control.fail(format!("block `{name}`: {message}"));
    }

    fn stop(&mut self) {
        self.control.stop.store(true, Ordering::SeqCst);
    }

    fn stopping(&self) -> bool {
        self.control.stop.load(Ordering::Relaxed)
    }

    fn name(&self, block: usize) -> &str {
        &self.locals[block].name
    }

    fn take(&mut self, want: u64) -> u64 {
        let Some(budget) = &self.control.budget else {
            return want;
        };
        let mut granted = 0;
        let _ = budget.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
            granted = left.min(want);
            Some(left - granted)
        });
        if granted < want || budget.load(Ordering::Relaxed) == 0 {
            // The budget is spent: every source ends at its next poll.
            self.control.stop.store(true, Ordering::SeqCst);
        }
        granted
    }
}

/// Keeps a block's error or warning for its report (the first [`MESSAGES_KEPT`]).
fn keep_message(shared: &BlockShared, kind: MessageKind, text: &str) {
    if let Ok(mut m) = shared.messages.lock() {
        if m.len() < MESSAGES_KEPT {
            m.push(Message {
                kind,
                text: text.to_string(),
            });
        }
    }
}

/// Puts a message into a queue: wait-free when there is room; when full, waits (policy
/// "wait", unless the run is failing or the receiver is gone) or drops and counts.
fn push(
    producer: &mut rtrb::Producer<Msg>,
    shared: &QueueShared,
    policy: Policy,
    waker: &Waker,
    control: &Control,
    mut msg: Msg,
) {
    let mut waited = false;
    let mut spins = 0u32;
    loop {
        match producer.push(msg) {
            Ok(()) => {
                bump(&shared.pushed, 1);
                waker.wake();
                return;
            }
            Err(rtrb::PushError::Full(back)) => {
                let failing = control
                    .failure
                    .try_lock()
                    .map(|f| f.is_some())
                    .unwrap_or(false);
                if policy == Policy::Drop || producer.is_abandoned() || failing {
                    bump(&shared.dropped, 1);
                    return;
                }
                if !waited {
                    waited = true;
                    bump(&shared.waits, 1);
                }
                msg = back;
                waker.wake();
                spins += 1;
                if spins < 128 {
                    std::hint::spin_loop();
                } else {
                    std::thread::sleep(Duration::from_micros(20));
                }
            }
        }
    }
}

/// A rate with a metric suffix: `950`, `12.3k`, `4.56M` (the status line's, and the CLI's
/// progress lines and summaries).
pub fn human_rate(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// Adds to a counter that only the calling thread writes (readers only load it): a load and a
/// store, not a locked read-modify-write, which costs several times more on the hot path.
#[inline]
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}
