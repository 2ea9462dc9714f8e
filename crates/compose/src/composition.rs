//! Compositions: the TOML file that names blocks, their settings, their connections and the
//! thread pools that run them; checked into a [`Plan`] the runtime can start.
//!
//! The format is specified in docs/specs/composition.md.
use std::collections::{BTreeMap, HashMap};
use std::fmt::{self, Write as _};

use serde::Deserialize;

use crate::registry::{BlockInfo, Configured, Registry};
use crate::BuildEnv;

/// Capacity of a queued connection when the composition does not say (messages, not packets).
pub const DEFAULT_QUEUE_CAPACITY: usize = 1024;

/// A composition that failed validation: every problem found, one per line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompositionError {
    /// What was being read (a file path, or `composition`).
    pub origin: String,
    /// The problems, each naming the block, pool or connection it is about.
    pub problems: Vec<String>,
}

impl fmt::Display for CompositionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.problems.len();
        write!(
            f,
            "{}: {n} problem{}",
            self.origin,
            if n == 1 { "" } else { "s" }
        )?;
        for p in &self.problems {
            write!(f, "\n  - {p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for CompositionError {}

/// What a queued connection does when the receiver's queue is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Policy {
    /// The sender waits for room: nothing is lost (files, the dumper, exact results).
    #[default]
    Wait,
    /// The message is dropped and counted: the sender never waits (monitoring applications
    /// that must not slow capture down).
    Drop,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    runtime: RawRuntime,
    #[serde(default)]
    pool: Vec<RawPool>,
    #[serde(default)]
    block: Vec<toml::Table>,
    #[serde(default)]
    connection: Vec<RawConnection>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRuntime {
    queue_capacity: Option<usize>,
    time_blocks: Option<bool>,
    duration: Option<String>,
    count: Option<u64>,
    stats_interval: Option<String>,
    user: Option<String>,
}

/// How a run is driven and ended (`[runtime]` keys; the command line's `--duration`,
/// `--count`, `--stats-interval` and `--user` override them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunControl {
    /// Stop after this long (ns of wall time).
    pub duration_ns: Option<u64>,
    /// Stop after this many packets in total, over every source that counts packets against
    /// the budget ([`crate::Ctx::take`]): exact, however many workers share it.
    pub count: Option<u64>,
    /// A status line on standard error this often (ns).
    pub stats_interval_ns: Option<u64>,
    /// Switch to this user once every block is built (sockets, rings and files open).
    pub user: Option<String>,
}

/// `stats_interval`: more often would be a stream, not a status line.
pub const STATS_INTERVAL_NS: std::ops::RangeInclusive<u64> = 100_000_000..=86_400_000_000_000;

impl RawRuntime {
    fn control(&self, problems: &mut Problems) -> RunControl {
        let span = |key: &str, text: &Option<String>, problems: &mut Problems| {
            let text = text.as_deref()?;
            match trawl_time::parse_span(text.trim()) {
                Ok(ns) if ns > 0 => Some(ns),
                Ok(_) => {
                    problems.add(format!("runtime: `{key}` must be more than 0"));
                    None
                }
                Err((at, wanted)) => {
                    problems.add(format!(
                        "runtime: `{key}` = `{text}` is not a duration: expected {wanted} at character {at} (examples: 30s, 500ms, 5m)"
                    ));
                    None
                }
            }
        };
        let duration_ns = span("duration", &self.duration, problems);
        let stats_interval_ns = span("stats_interval", &self.stats_interval, problems);
        if let Some(ns) = stats_interval_ns.filter(|ns| !STATS_INTERVAL_NS.contains(ns)) {
            problems.add(format!(
                "runtime: `stats_interval` must be from 100ms to 1d (is {ns} ns)"
            ));
        }
        if self.count == Some(0) {
            problems.add("runtime: `count` must be at least 1");
        }
        if self.user.as_deref().is_some_and(|u| u.trim().is_empty()) {
            problems.add("runtime: `user` is empty");
        }
        RunControl {
            duration_ns,
            count: self.count,
            stats_interval_ns,
            user: self.user.clone(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPool {
    name: String,
    cores: Option<Vec<usize>>,
    threads: Option<usize>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConnection {
    from: String,
    to: OneOrMany,
    #[serde(default)]
    policy: Policy,
    capacity: Option<usize>,
}

/// A thread the runtime will start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedThread {
    /// Its pool.
    pub pool: String,
    /// Its index within the pool.
    pub index: usize,
    /// The core it is pinned to, if the pool names cores.
    pub core: Option<usize>,
}

/// A block placed on a thread.
pub struct PlannedBlock {
    /// Name in the composition.
    pub name: String,
    /// Its type.
    pub info: BlockInfo,
    /// Index into [`Plan::threads`].
    pub thread: usize,
    /// What the block is told when it is built.
    pub env: BuildEnv,
    /// Its settings as the composition gives them (relative paths made absolute), for a
    /// reload to tell what changed ([`crate::Reloader`]).
    pub settings: toml::Table,
    pub(crate) configured: Option<Box<dyn Configured>>,
}

/// A connection from an output gate to an input gate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedConnection {
    /// Sending block (index into [`Plan::blocks`]) and output gate.
    pub from: (usize, usize),
    /// Receiving block and input gate.
    pub to: (usize, usize),
    /// Whether it goes through a queue (the blocks are on different threads) or is a call in
    /// the sender's thread.
    pub queued: bool,
    /// What a full queue does.
    pub policy: Policy,
    /// Queue capacity in messages.
    pub capacity: usize,
}

/// A checked composition, ready to run.
pub struct Plan {
    /// Threads, in pool order.
    pub threads: Vec<PlannedThread>,
    /// Blocks, in composition order.
    pub blocks: Vec<PlannedBlock>,
    /// Connections, in composition order.
    pub connections: Vec<PlannedConnection>,
    /// Blocks in an order where every block comes after the blocks that feed it.
    pub order: Vec<usize>,
    /// Whether each call into a block is timed (`busy_ns`); two clock reads per call.
    pub time_blocks: bool,
    /// Duration, packet count, status lines and user of the run.
    pub control: RunControl,
    /// Whether the problems blocks report ([`crate::Ctx::error`], [`crate::Ctx::warn`]) are
    /// written to standard error as they happen (the default). A command that prints them in
    /// its own summary turns this off and reads them from [`crate::BlockReport::messages`].
    pub print_messages: bool,
}

/// A connection while checking: (block, output), (block, input), policy, capacity.
type Edge = ((usize, usize), (usize, usize), Policy, usize);

struct Problems(Vec<String>);

impl Problems {
    fn add(&mut self, p: impl Into<String>) {
        self.0.push(p.into())
    }
}

/// Reads and checks a composition. `origin` names it in errors (the file path);
/// `cpus` are the cores this process may run on (pools naming others are refused). Relative
/// paths in block settings stay relative to the working directory (a composition built from
/// flags, or read from standard input); [`plan_relative_to`] reads a file's.
pub fn plan(
    text: &str,
    origin: &str,
    registry: &Registry,
    cpus: &[usize],
) -> Result<Plan, CompositionError> {
    plan_in(text, origin, None, registry, cpus)
}

/// [`plan`] for a composition file in `dir`: relative paths of block settings
/// ([`crate::Block::PATHS`]) are relative to `dir`.
pub fn plan_relative_to(
    text: &str,
    origin: &str,
    dir: &std::path::Path,
    registry: &Registry,
    cpus: &[usize],
) -> Result<Plan, CompositionError> {
    plan_in(text, origin, Some(dir), registry, cpus)
}

fn plan_in(
    text: &str,
    origin: &str,
    dir: Option<&std::path::Path>,
    registry: &Registry,
    cpus: &[usize],
) -> Result<Plan, CompositionError> {
    let fail = |problems: Vec<String>| CompositionError {
        origin: origin.to_string(),
        problems,
    };
    let raw: RawFile = toml::from_str(text).map_err(|e| fail(vec![toml_error(&e)]))?;
    let mut problems = Problems(Vec::new());

    // Pools and their threads. Without any pool, one unpinned thread called `main`.
    let mut raw_pools = raw.pool;
    if raw_pools.is_empty() {
        raw_pools.push(RawPool {
            name: "main".into(),
            cores: None,
            threads: None,
        });
    }
    let mut threads = Vec::new();
    let mut pool_threads: HashMap<String, Vec<usize>> = HashMap::new();
    for p in &raw_pools {
        if pool_threads.contains_key(&p.name) {
            problems.add(format!("pool `{}` is defined twice", p.name));
            continue;
        }
        let cores: Vec<Option<usize>> = match (&p.cores, p.threads) {
            (Some(_), Some(_)) => {
                problems.add(format!(
                    "pool `{}`: give either `cores` (one pinned thread per core) or `threads` \
                     (unpinned), not both",
                    p.name
                ));
                continue;
            }
            (Some(cores), None) => {
                if cores.is_empty() {
                    problems.add(format!("pool `{}`: `cores` is empty", p.name));
                }
                for (i, c) in cores.iter().enumerate() {
                    if !cpus.contains(c) {
                        problems.add(format!(
                            "pool `{}`: core {c} is out of range (this process may run on \
                             cores {})",
                            p.name,
                            cpu_list(cpus)
                        ));
                    }
                    if cores[..i].contains(c) {
                        problems.add(format!("pool `{}`: core {c} is listed twice", p.name));
                    }
                }
                cores.iter().map(|&c| Some(c)).collect()
            }
            (None, Some(0)) => {
                problems.add(format!("pool `{}`: `threads` must be at least 1", p.name));
                continue;
            }
            (None, n) => vec![None; n.unwrap_or(1)],
        };
        let ids = cores
            .into_iter()
            .enumerate()
            .map(|(index, core)| {
                threads.push(PlannedThread {
                    pool: p.name.clone(),
                    index,
                    core,
                });
                threads.len() - 1
            })
            .collect();
        pool_threads.insert(p.name.clone(), ids);
    }
    let default_pool = raw_pools[0].name.clone();

    // Blocks: reserved keys, then the rest are the type's settings.
    struct Pending {
        name: String,
        info: BlockInfo,
        pool: String,
        thread: Option<usize>,
        settings: toml::Table,
        configured: Option<Box<dyn Configured>>,
    }
    let mut blocks: Vec<Pending> = Vec::new();
    let mut by_name: HashMap<String, usize> = HashMap::new();
    for (i, mut table) in raw.block.into_iter().enumerate() {
        let name = match table.remove("name") {
            Some(toml::Value::String(s)) if valid_name(&s) => s,
            Some(toml::Value::String(s)) => {
                problems.add(format!(
                    "block #{}: name `{s}` must be letters, digits, `_` or `-`",
                    i + 1
                ));
                continue;
            }
            _ => {
                problems.add(format!("block #{}: needs a `name` (a string)", i + 1));
                continue;
            }
        };
        let type_name = match table.remove("type") {
            Some(toml::Value::String(s)) => s,
            _ => {
                problems.add(format!("block `{name}`: needs a `type` (a string)"));
                continue;
            }
        };
        let pool = match table.remove("pool") {
            None => default_pool.clone(),
            Some(toml::Value::String(s)) => s,
            Some(_) => {
                problems.add(format!("block `{name}`: `pool` must be a string"));
                continue;
            }
        };
        let thread = match table.remove("thread") {
            None => None,
            Some(toml::Value::Integer(t)) if t >= 0 => Some(t as usize),
            Some(_) => {
                problems.add(format!(
                    "block `{name}`: `thread` must be a thread index of its pool (0, 1, ...)"
                ));
                continue;
            }
        };
        if by_name.contains_key(&name) {
            problems.add(format!("block `{name}` is defined twice"));
            continue;
        }
        let Some(info) = registry.get(&type_name) else {
            problems.add(format!(
                "block `{name}`: unknown block type `{type_name}` (known types: {})",
                registry.names().join(", ")
            ));
            continue;
        };
        match pool_threads.get(&pool) {
            None => problems.add(format!(
                "block `{name}`: unknown pool `{pool}` (pools: {})",
                raw_pools
                    .iter()
                    .map(|p| p.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            Some(ids) => {
                if let Some(t) = thread.filter(|&t| t >= ids.len()) {
                    problems.add(format!(
                        "block `{name}`: thread {t} is out of range: pool `{pool}` has {} \
                         thread{}",
                        ids.len(),
                        if ids.len() == 1 { "" } else { "s" }
                    ));
                }
            }
        }
        if let Some(dir) = dir {
            crate::paths::relative_to(&mut table, info.paths, dir);
        }
        let settings = table.clone();
        let configured = match (info.configure)(table) {
            Ok(c) => Some(c),
            Err(e) => {
                problems.add(format!("block `{name}` ({type_name}): {e}"));
                None
            }
        };
        by_name.insert(name.clone(), blocks.len());
        blocks.push(Pending {
            name,
            info: *info,
            pool,
            thread,
            settings,
            configured,
        });
    }
    if blocks.is_empty() {
        problems.add("the composition has no blocks (add [[block]] tables)");
    }

    // Connections.
    let infos: Vec<BlockInfo> = blocks.iter().map(|b| b.info).collect();
    let mut edges: Vec<Edge> = Vec::new();
    let control = raw.runtime.control(&mut problems);
    let default_capacity = raw.runtime.queue_capacity.unwrap_or(DEFAULT_QUEUE_CAPACITY);
    if default_capacity == 0 {
        problems.add("runtime: `queue_capacity` must be at least 1");
    }
    for (i, c) in raw.connection.iter().enumerate() {
        let targets = match &c.to {
            OneOrMany::One(t) => vec![t.clone()],
            OneOrMany::Many(ts) => ts.clone(),
        };
        let from = endpoint(&c.from, &infos, &by_name, Side::Output);
        if let Err(e) = &from {
            problems.add(format!("connection #{} from `{}`: {e}", i + 1, c.from));
        }
        if c.capacity == Some(0) {
            problems.add(format!(
                "connection #{} from `{}`: capacity must be at least 1",
                i + 1,
                c.from
            ));
        }
        for t in targets {
            let to = endpoint(&t, &infos, &by_name, Side::Input);
            match (&from, to) {
                (_, Err(e)) => problems.add(format!("connection #{} to `{t}`: {e}", i + 1)),
                (Err(_), _) => {}
                (Ok(from), Ok(to)) => {
                    let out = blocks[from.0].info.outputs[from.1];
                    let inp = blocks[to.0].info.inputs[to.1];
                    if !out.ty.feeds(&inp.ty) {
                        problems.add(format!(
                            "connection `{}` -> `{t}`: type mismatch: `{}` sends {}, `{t}` takes {}",
                            c.from, c.from, out.ty.name, inp.ty.name
                        ));
                    } else if edges.iter().any(|e| e.0 == *from && e.1 == to) {
                        problems.add(format!("connection `{}` -> `{t}` is listed twice", c.from));
                    } else if from.0 == to.0 {
                        problems.add(format!(
                            "connection `{}` -> `{t}`: a block cannot feed itself",
                            c.from
                        ));
                    } else {
                        edges.push((*from, to, c.policy, c.capacity.unwrap_or(default_capacity)));
                    }
                }
            }
        }
    }

    // Required gates.
    for (b, block) in blocks.iter().enumerate() {
        for (g, gate) in block.info.inputs.iter().enumerate() {
            if gate.required && !edges.iter().any(|e| e.1 == (b, g)) {
                problems.add(format!(
                    "block `{}`: input `{}.{}` ({}) is required but nothing is connected to it",
                    block.name, block.name, gate.name, gate.ty.name
                ));
            }
        }
        for (g, gate) in block.info.outputs.iter().enumerate() {
            if gate.required && !edges.iter().any(|e| e.0 == (b, g)) {
                problems.add(format!(
                    "block `{}`: output `{}.{}` ({}) is required but is connected to nothing",
                    block.name, block.name, gate.name, gate.ty.name
                ));
            }
        }
    }

    // Cycles: the finish order (upstream before downstream) needs a DAG.
    let order = match topological_order(blocks.len(), &edges) {
        Ok(order) => order,
        Err(cycle) => {
            let names: Vec<&str> = cycle.iter().map(|&b| blocks[b].name.as_str()).collect();
            problems.add(format!(
                "the connections form a cycle: {} -> {}",
                names.join(" -> "),
                names[0]
            ));
            Vec::new()
        }
    };
    if !problems.0.is_empty() {
        return Err(fail(problems.0));
    }

    // Placement: explicit threads; sources spread over their pool's threads; other blocks
    // follow the first block feeding them from the same pool (so a chain stays on one thread
    // and its connections are calls), else the pool's first thread.
    let mut placed: Vec<Option<usize>> = vec![None; blocks.len()];
    let mut next_source: HashMap<&str, usize> = HashMap::new();
    for &b in &order {
        let block = &blocks[b];
        let ids = &pool_threads[&block.pool];
        let thread = if let Some(t) = block.thread {
            ids[t]
        } else if block.info.is_source() {
            let n = next_source.entry(block.pool.as_str()).or_insert(0);
            *n += 1;
            ids[(*n - 1) % ids.len()]
        } else {
            edges
                .iter()
                .filter(|e| e.1 .0 == b && blocks[e.0 .0].pool == block.pool)
                .find_map(|e| placed[e.0 .0])
                .unwrap_or(ids[0])
        };
        placed[b] = Some(thread);
    }
    let placed: Vec<usize> = placed.into_iter().map(|t| t.expect("placed")).collect();

    let connections: Vec<PlannedConnection> = edges
        .iter()
        .map(|&(from, to, policy, capacity)| PlannedConnection {
            from,
            to,
            queued: placed[from.0] != placed[to.0],
            policy,
            capacity,
        })
        .collect();

    // Threads that wait on each other's full queues in a circle would deadlock.
    if let Some(cycle) = waiting_cycle(threads.len(), &connections, &placed) {
        let names: Vec<String> = cycle
            .iter()
            .map(|&t| format!("{}[{}]", threads[t].pool, threads[t].index))
            .collect();
        return Err(fail(vec![format!(
            "queued connections with policy \"wait\" go round the threads {} -> {}: each \
             could wait for the next forever; place those blocks on one thread or give one of \
             the connections policy = \"drop\"",
            names.join(" -> "),
            names[0]
        )]));
    }

    let mut instances: BTreeMap<&str, usize> = BTreeMap::new();
    let mut planned = Vec::with_capacity(blocks.len());
    let totals: BTreeMap<&str, usize> = blocks.iter().fold(BTreeMap::new(), |mut m, b| {
        *m.entry(b.info.type_name).or_insert(0) += 1;
        m
    });
    for (b, block) in blocks.into_iter().enumerate() {
        let n = instances.entry(block.info.type_name).or_insert(0);
        let env = BuildEnv {
            name: block.name.clone(),
            input_connections: (0..block.info.inputs.len())
                .map(|g| connections.iter().filter(|c| c.to == (b, g)).count())
                .collect(),
            output_connections: (0..block.info.outputs.len())
                .map(|g| connections.iter().filter(|c| c.from == (b, g)).count())
                .collect(),
            index: b,
            instance: *n,
            instances: totals[block.info.type_name],
        };
        *n += 1;
        planned.push(PlannedBlock {
            name: block.name,
            info: block.info,
            thread: placed[b],
            env,
            settings: block.settings,
            configured: block.configured,
        });
    }
    Ok(Plan {
        threads,
        blocks: planned,
        connections,
        order,
        time_blocks: raw.runtime.time_blocks.unwrap_or(true),
        control,
        print_messages: true,
    })
}

impl Plan {
    /// A human description: threads with their blocks, then every connection and whether it
    /// is a call or a queue. `trawl check` prints it.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for (t, thread) in self.threads.iter().enumerate() {
            let core = thread
                .core
                .map_or("not pinned".to_string(), |c| format!("core {c}"));
            let _ = writeln!(s, "thread {}[{}] ({core}):", thread.pool, thread.index);
            for &b in self.order.iter().filter(|&&b| self.blocks[b].thread == t) {
                let block = &self.blocks[b];
                let _ = writeln!(s, "  {} ({})", block.name, block.info.type_name);
            }
        }
        for c in &self.connections {
            let (f, t) = (&self.blocks[c.from.0], &self.blocks[c.to.0]);
            let how = if c.queued {
                format!(
                    "queue of {} ({})",
                    c.capacity,
                    match c.policy {
                        Policy::Wait => "wait when full",
                        Policy::Drop => "drop when full",
                    }
                )
            } else {
                "direct call".to_string()
            };
            let _ = writeln!(
                s,
                "{}.{} -> {}.{}: {} ({how})",
                f.name,
                f.info.outputs[c.from.1].name,
                t.name,
                t.info.inputs[c.to.1].name,
                f.info.outputs[c.from.1].ty.name,
            );
        }
        s
    }
}

#[derive(Clone, Copy)]
enum Side {
    Input,
    Output,
}

/// Resolves `block.gate`.
fn endpoint(
    text: &str,
    infos: &[BlockInfo],
    by_name: &HashMap<String, usize>,
    side: Side,
) -> Result<(usize, usize), String> {
    let Some((block, gate)) = text.split_once('.') else {
        return Err("write endpoints as `block.gate`".into());
    };
    let Some(&b) = by_name.get(block) else {
        return Err(format!("no block is called `{block}`"));
    };
    let info = &infos[b];
    let (gates, what, other, other_what) = match side {
        Side::Input => (info.inputs, "input", info.outputs, "output"),
        Side::Output => (info.outputs, "output", info.inputs, "input"),
    };
    if let Some(g) = gates.iter().position(|g| g.name == gate) {
        return Ok((b, g));
    }
    let list = |gs: &[crate::GateDef]| {
        if gs.is_empty() {
            "none".to_string()
        } else {
            gs.iter().map(|g| g.name).collect::<Vec<_>>().join(", ")
        }
    };
    if other.iter().any(|g| g.name == gate) {
        return Err(format!(
            "`{gate}` is an {other_what} of `{block}` ({}), used here as an {what}",
            info.type_name
        ));
    }
    Err(format!(
        "`{block}` ({}) has no {what} gate `{gate}` ({what}s: {})",
        info.type_name,
        list(gates)
    ))
}

/// Kahn's algorithm; on a cycle, returns the blocks of one cycle in order.
fn topological_order(n: usize, edges: &[Edge]) -> Result<Vec<usize>, Vec<usize>> {
    let mut indegree = vec![0usize; n];
    for e in edges {
        indegree[e.1 .0] += 1;
    }
    let mut ready: Vec<usize> = (0..n).rev().filter(|&b| indegree[b] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(b) = ready.pop() {
        order.push(b);
        for e in edges.iter().filter(|e| e.0 .0 == b) {
            indegree[e.1 .0] -= 1;
            if indegree[e.1 .0] == 0 {
                ready.push(e.1 .0);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    // Walk backwards from a block still waiting until a block repeats.
    let mut at = (0..n)
        .find(|&b| indegree[b] > 0)
        .expect("a block in a cycle");
    let mut path = Vec::new();
    loop {
        if let Some(p) = path.iter().position(|&b| b == at) {
            let mut cycle: Vec<usize> = path[p..].to_vec();
            cycle.reverse();
            return Err(cycle);
        }
        path.push(at);
        at = edges
            .iter()
            .find(|e| e.1 .0 == at && indegree[e.0 .0] > 0)
            .map(|e| e.0 .0)
            .expect("a waiting block has a waiting predecessor");
    }
}

/// A cycle among threads along queued connections that wait when full.
fn waiting_cycle(
    threads: usize,
    connections: &[PlannedConnection],
    placed: &[usize],
) -> Option<Vec<usize>> {
    let mut edges: Vec<Edge> = Vec::new();
    for c in connections
        .iter()
        .filter(|c| c.queued && c.policy == Policy::Wait)
    {
        let e = ((placed[c.from.0], 0), (placed[c.to.0], 0), c.policy, 0);
        if !edges.contains(&e) {
            edges.push(e);
        }
    }
    topological_order(threads, &edges).err()
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn cpu_list(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        return "none".into();
    }
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn toml_error(e: &toml::de::Error) -> String {
    // toml's message already quotes the line and points at the column; keep it whole.
    e.to_string().trim_end().to_string()
}
