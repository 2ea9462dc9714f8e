//! `count`: the template block. It takes messages of any type and counts them and their
//! items per interval, emitting nothing. Copy this file to start a new block: a settings type,
//! gate lists, `build`, and the entry points you need (`receive`, `timer`, `finish`; sources
//! implement `poll`), then one `register` line in `lib.rs` and a section in docs/blocks.md.
use std::time::Duration;

use serde::Deserialize;
use trawl_compose::{Block, BuildEnv, Counter, Ctx, GateDef, Msg, MsgType, TimerId};

/// Counts what arrives; with `report` set, prints a line per interval to standard error.
pub struct Count {
    /// Messages and items so far (the block's own counters, shown with the runtime's).
    messages: Option<Counter>,
    items: Option<Counter>,
    report: Option<Duration>,
    /// Items at the last report, for the rate.
    last_items: u64,
    name: String,
}

/// Settings of `count`. `deny_unknown_fields` turns a typo into an error at `trawl check`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CountSettings {
    /// Print the item rate this often (e.g. `1s`); default: never.
    #[serde(default, deserialize_with = "crate::util::opt_span")]
    pub report: Option<u64>,
}

impl Block for Count {
    const TYPE: &'static str = "count";
    const SUMMARY: &'static str =
        "counts messages and items of any type (the template block; also a sink for benchmarks)";
    const INPUTS: &'static [GateDef] = &[GateDef {
        name: "in",
        // Any type: counting needs only `Msg::items`.
        ty: MsgType::ANY,
        required: true,
        doc: "messages of any type",
    }];
    const OUTPUTS: &'static [GateDef] = &[];
    type Settings = CountSettings;

    // `check` runs at `trawl check` without side effects; `build` may open files. Neither is
    // needed beyond the defaults here, except turning settings into state.
    fn build(s: CountSettings, env: &BuildEnv) -> Result<Self, String> {
        Ok(Count {
            messages: None,
            items: None,
            report: s.report.map(Duration::from_nanos),
            last_items: 0,
            name: env.name.clone(),
        })
    }

    // Counters and timers are made on the block's own thread.
    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        self.messages = Some(ctx.counter("messages"));
        self.items = Some(ctx.counter("items"));
        if let Some(period) = self.report {
            ctx.every(period);
        }
        Ok(())
    }

    // A message is shared with every other receiver: read it, never keep a borrow of it.
    // To keep data, clone the `Msg` (cheap) or copy what is needed.
    fn receive(&mut self, _input: usize, msg: &Msg, _ctx: &mut Ctx<'_>) {
        if let (Some(m), Some(i)) = (&self.messages, &self.items) {
            m.add(1);
            i.add(msg.items() as u64);
        }
    }

    fn timer(&mut self, _timer: TimerId, _ctx: &mut Ctx<'_>) {
        let items = self.items.as_ref().map_or(0, Counter::get);
        let period = self.report.unwrap_or(Duration::from_secs(1)).as_secs_f64();
        eprintln!(
            "trawl: {}: {} items/s",
            self.name,
            ((items - self.last_items) as f64 / period).round()
        );
        self.last_items = items;
    }
}
