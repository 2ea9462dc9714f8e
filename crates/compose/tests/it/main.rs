//! The runtime with small test blocks: numbers flow from sources through transforms to sinks
//! that keep what they saw, so every delivery, drop and finish can be checked exactly.
mod check;
mod run;

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use serde::Deserialize;
use trawl_compose::{
    Block, BuildEnv, Counter, Ctx, GateDef, Msg, MsgType, Payload, Poll, Pool, Registry, TimerId,
};

/// A batch of numbers.
#[derive(Default)]
pub struct Numbers(pub Vec<u64>);

impl Payload for Numbers {
    fn items(&self) -> usize {
        self.0.len()
    }
}

/// Another payload type, for type checks.
pub struct Text(pub String);
impl Payload for Text {}

pub const NUMBERS: MsgType = MsgType::of::<Numbers>("numbers");
pub const TEXT: MsgType = MsgType::of::<Text>("text");

/// What each sink saw, by sink name: the numbers in arrival order, and whether it finished.
#[derive(Default, Clone, Debug)]
pub struct Seen {
    pub numbers: Vec<u64>,
    pub finished: bool,
    pub finished_after_input: bool,
    /// Fewest holders of a message seen on arrival (2+ means it was shared, not copied).
    pub min_holders: usize,
}

pub fn seen() -> &'static Mutex<HashMap<String, Seen>> {
    static SEEN: OnceLock<Mutex<HashMap<String, Seen>>> = OnceLock::new();
    SEEN.get_or_init(Default::default)
}

pub fn seen_by(name: &str) -> Seen {
    seen()
        .lock()
        .unwrap()
        .get(name)
        .cloned()
        .unwrap_or_default()
}

/// Emits `0..count` in batches of `batch`, or forever (until stopped) when `count` is absent.
pub struct Source {
    next: u64,
    count: Option<u64>,
    batch: usize,
    pool: Pool<Numbers>,
    allocated: Option<Counter>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSettings {
    count: Option<u64>,
    #[serde(default = "default_batch")]
    batch: usize,
    #[serde(default)]
    start: u64,
}

fn default_batch() -> usize {
    10
}

impl Block for Source {
    const TYPE: &'static str = "numbers";
    const SUMMARY: &'static str = "counts upwards";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "out",
        ty: NUMBERS,
        required: false,
        doc: "the numbers",
    }];
    type Settings = SourceSettings;

    fn check(s: &SourceSettings) -> Result<(), String> {
        if s.batch == 0 {
            return Err("batch must be at least 1".into());
        }
        Ok(())
    }

    fn build(s: SourceSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(Source {
            next: s.start,
            count: s.count.map(|c| c + s.start),
            batch: s.batch,
            pool: Pool::new(Numbers::default),
            allocated: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.allocated = Some(ctx.counter("allocated"));
        Ok(())
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        if self.count.is_some_and(|c| self.next >= c) || ctx.stopping() {
            return Poll::Done;
        }
        let end = self.count.map_or(self.next + self.batch as u64, |c| {
            c.min(self.next + self.batch as u64)
        });
        // The run's budget (`[runtime] count`), as packet sources take it.
        let end = self.next + ctx.take(end - self.next);
        if end == self.next {
            return Poll::Done;
        }
        let mut slot = self.pool.take();
        let batch = slot.get_mut();
        batch.0.clear();
        batch.0.extend(self.next..end);
        self.next = end;
        ctx.emit(0, slot.into_msg());
        if let Some(a) = &self.allocated {
            a.set(self.pool.allocated());
        }
        Poll::Busy
    }
}

/// Multiplies by `factor`; emits the running total once at finish on its second output.
pub struct Scale {
    factor: u64,
    total: u64,
    pool: Pool<Numbers>,
    fail_at: Option<u64>,
    panic_at: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleSettings {
    #[serde(default = "one")]
    factor: u64,
    fail_at: Option<u64>,
    panic_at: Option<u64>,
}

fn one() -> u64 {
    1
}

impl Block for Scale {
    const TYPE: &'static str = "scale";
    const SUMMARY: &'static str = "multiplies";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "in",
        ty: NUMBERS,
        required: true,
        doc: "numbers",
    }];
    const OUTPUTS: &'static [GateDef] = &[
        GateDef {
            name: "out",
            ty: NUMBERS,
            required: false,
            doc: "scaled",
        },
        GateDef {
            name: "total",
            ty: NUMBERS,
            required: false,
            doc: "the sum of everything scaled, at the end",
        },
    ];
    type Settings = ScaleSettings;

    fn build(s: ScaleSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(Scale {
            factor: s.factor,
            total: 0,
            pool: Pool::new(Numbers::default),
            fail_at: s.fail_at,
            panic_at: s.panic_at,
        })
    }

    fn receive(&mut self, _input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        let numbers = msg.get::<Numbers>().expect("numbers");
        let mut slot = self.pool.take();
        let out = slot.get_mut();
        out.0.clear();
        for &n in &numbers.0 {
            if Some(n) == self.fail_at {
                ctx.fail(format!("cannot go on at {n}"));
            }
            if Some(n) == self.panic_at {
                panic!("boom at {n}");
            }
            out.0.push(n * self.factor);
            self.total += n * self.factor;
        }
        ctx.emit(0, slot.into_msg());
    }

    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        ctx.emit(1, Msg::new(Numbers(vec![self.total])));
    }
}

/// Keeps what arrives (in [`seen`]), optionally slowly.
pub struct Sink {
    name: String,
    delay: Duration,
    numbers: Vec<u64>,
    min_holders: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SinkSettings {
    #[serde(default)]
    delay_us: u64,
}

impl Block for Sink {
    const TYPE: &'static str = "sink";
    const SUMMARY: &'static str = "keeps numbers";
    const INPUTS: &'static [GateDef] = &[
        GateDef {
            name: "in",
            ty: NUMBERS,
            required: false,
            doc: "numbers",
        },
        GateDef {
            name: "anything",
            ty: MsgType::ANY,
            required: false,
            doc: "counted only",
        },
    ];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = SinkSettings;

    fn build(s: SinkSettings, env: &BuildEnv) -> Result<Self, String> {
        seen().lock().unwrap().remove(&env.name);
        Ok(Sink {
            name: env.name.clone(),
            delay: Duration::from_micros(s.delay_us),
            numbers: Vec::new(),
            min_holders: usize::MAX,
        })
    }

    fn receive(&mut self, input: usize, msg: &Msg, _ctx: &mut Ctx<'_>) {
        self.min_holders = self.min_holders.min(msg.holders());
        if input == 0 {
            self.numbers
                .extend_from_slice(&msg.get::<Numbers>().expect("numbers").0);
        }
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
    }

    fn finish(&mut self, _ctx: &mut Ctx<'_>) {
        let mut all = seen().lock().unwrap();
        let s = all.entry(self.name.clone()).or_default();
        s.numbers = std::mem::take(&mut self.numbers);
        s.finished = true;
        s.finished_after_input = true;
        s.min_holders = self.min_holders;
    }
}

/// Emits text; exists to make type mismatches.
pub struct Talker;

impl Block for Talker {
    const TYPE: &'static str = "talker";
    const SUMMARY: &'static str = "says things";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[GateDef {
        name: "out",
        ty: TEXT,
        required: true,
        doc: "text",
    }];
    type Settings = toml::Table;

    fn build(_s: toml::Table, _env: &BuildEnv) -> Result<Self, String> {
        Ok(Talker)
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        ctx.emit(0, Msg::new(Text("hello".into())));
        Poll::Done
    }
}

/// Reports `count` problems at its first poll, a warning before each error (`warning N`,
/// `error N`), then ends.
pub struct Complainer {
    count: u64,
}

#[derive(Deserialize)]
pub struct ComplainerSettings {
    count: u64,
}

impl Block for Complainer {
    const TYPE: &'static str = "complainer";
    const SUMMARY: &'static str = "reports errors and warnings";
    const INPUTS: &'static [GateDef] = &[];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = ComplainerSettings;

    fn build(s: ComplainerSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(Complainer { count: s.count })
    }

    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        for i in 0..self.count {
            ctx.warn(format_args!("warning {i}"));
            ctx.note_error(format_args!("error {i}"));
        }
        Poll::Done
    }
}

/// Records, at start, the CPUs its thread may run on (`Cpus_allowed_list` of
/// /proc/thread-self/status), under its name in [`affinity`].
pub struct Where;

pub fn affinity() -> &'static Mutex<HashMap<String, String>> {
    static A: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    A.get_or_init(Default::default)
}

impl Block for Where {
    const TYPE: &'static str = "where";
    const SUMMARY: &'static str = "notes its thread's CPUs";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "in",
        ty: MsgType::ANY,
        required: false,
        doc: "ignored",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = toml::Table;

    fn build(_s: toml::Table, _env: &BuildEnv) -> Result<Self, String> {
        Ok(Where)
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim()
            .to_string();
        affinity()
            .lock()
            .unwrap()
            .insert(ctx.name().to_string(), cpus);
        Ok(())
    }
}

/// Counts timer ticks until stopped.
pub struct Ticker {
    ticks: Option<Counter>,
    period: Duration,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TickerSettings {
    period_ms: u64,
}

impl Block for Ticker {
    const TYPE: &'static str = "ticker";
    const SUMMARY: &'static str = "ticks";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "in",
        ty: NUMBERS,
        required: false,
        doc: "ignored",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = TickerSettings;

    fn build(s: TickerSettings, _env: &BuildEnv) -> Result<Self, String> {
        Ok(Ticker {
            ticks: None,
            period: Duration::from_millis(s.period_ms),
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.ticks = Some(ctx.counter("ticks"));
        ctx.every(self.period);
        Ok(())
    }

    fn timer(&mut self, _t: TimerId, _ctx: &mut Ctx<'_>) {
        if let Some(t) = &self.ticks {
            t.add(1);
        }
    }
}

pub fn registry() -> Registry {
    let mut r = Registry::new();
    r.register::<Source>()
        .register::<Scale>()
        .register::<Sink>()
        .register::<Talker>()
        .register::<Complainer>()
        .register::<Ticker>()
        .register::<Where>()
        .register::<Observer>();
    r
}

/// Every CPU this test may pin to.
pub fn cpus() -> Vec<usize> {
    trawl_capture::live::allowed_cpus()
}

/// Reads the whole composition's counters through [`Ctx::reporter`] (as the HTTP API does):
/// at its finish it records how many items the block named in `watch` has sent.
pub struct Observer {
    name: String,
    watch: String,
    reporter: Option<trawl_compose::Reporter>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ObserverSettings {
    watch: String,
}

impl Block for Observer {
    const TYPE: &'static str = "observer";
    const SUMMARY: &'static str = "reports another block's counters";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "in",
        ty: MsgType::ANY,
        required: true,
        doc: "anything; the block finishes after it",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = ObserverSettings;

    fn build(s: ObserverSettings, env: &BuildEnv) -> Result<Self, String> {
        seen().lock().unwrap().remove(&env.name);
        Ok(Observer {
            name: env.name.clone(),
            watch: s.watch,
            reporter: None,
        })
    }

    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.reporter = ctx.reporter();
        Ok(())
    }

    fn finish(&mut self, _ctx: &mut Ctx<'_>) {
        let sent = self
            .reporter
            .as_ref()
            .and_then(|r| r.report().block(&self.watch).map(|b| b.items_out));
        let mut all = seen().lock().unwrap();
        let s = all.entry(self.name.clone()).or_default();
        s.numbers = sent.into_iter().collect();
        s.finished = true;
    }
}
