//! The block types a composition may name.
use std::any::Any;
use std::collections::BTreeMap;

use serde::Deserialize;

use crate::block::{Block, BuildEnv, Ctx, GateDef, Poll, TimerId};
use crate::message::Msg;

/// A block with its type erased, as the runtime holds it.
pub(crate) trait Node: Send {
    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String>;
    fn receive(&mut self, input: usize, msg: &Msg, ctx: &mut Ctx<'_>);
    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll;
    fn timer(&mut self, timer: TimerId, ctx: &mut Ctx<'_>);
    fn finish(&mut self, ctx: &mut Ctx<'_>);
    /// `settings` are the block's own [`Block::Settings`], from [`Configured::into_settings`].
    fn reconfigure(
        &mut self,
        settings: Box<dyn Any + Send>,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), String>;
}

impl<B: Block> Node for B
where
    B::Settings: 'static,
{
    fn start(&mut self, ctx: &mut Ctx<'_>) -> Result<(), String> {
        Block::start(self, ctx)
    }
    #[inline]
    fn receive(&mut self, input: usize, msg: &Msg, ctx: &mut Ctx<'_>) {
        Block::receive(self, input, msg, ctx)
    }
    #[inline]
    fn poll(&mut self, ctx: &mut Ctx<'_>) -> Poll {
        Block::poll(self, ctx)
    }
    fn timer(&mut self, timer: TimerId, ctx: &mut Ctx<'_>) {
        Block::timer(self, timer, ctx)
    }
    fn finish(&mut self, ctx: &mut Ctx<'_>) {
        Block::finish(self, ctx)
    }
    fn reconfigure(
        &mut self,
        settings: Box<dyn Any + Send>,
        ctx: &mut Ctx<'_>,
    ) -> Result<(), String> {
        let settings = settings
            .downcast::<B::Settings>()
            .map_err(|_| format!("internal error: settings of another type than {}", B::TYPE))?;
        Block::reconfigure(self, *settings, ctx)
    }
}

/// Settings that parsed and checked, waiting for the block to be built.
pub(crate) trait Configured: Send {
    fn build(self: Box<Self>, env: &BuildEnv) -> Result<Box<dyn Node>, String>;
    /// The parsed settings, for [`Node::reconfigure`] of a block already running.
    fn into_settings(self: Box<Self>) -> Box<dyn Any + Send>;
}

struct Settled<B: Block>(B::Settings);

impl<B: Block> Configured for Settled<B>
where
    B::Settings: Send + 'static,
{
    fn build(self: Box<Self>, env: &BuildEnv) -> Result<Box<dyn Node>, String> {
        Ok(Box::new(B::build(self.0, env)?))
    }
    fn into_settings(self: Box<Self>) -> Box<dyn Any + Send> {
        Box::new(self.0)
    }
}

fn configure<B: Block>(settings: toml::Table) -> Result<Box<dyn Configured>, String>
where
    B::Settings: Send + 'static,
{
    let parsed = B::Settings::deserialize(toml::Value::Table(settings))
        .map_err(|e| e.to_string().trim_end().to_string())?;
    B::check(&parsed)?;
    Ok(Box::new(Settled::<B>(parsed)))
}

/// What the registry knows of a block type.
#[derive(Clone, Copy)]
pub struct BlockInfo {
    /// Type name used in compositions.
    pub type_name: &'static str,
    /// One sentence.
    pub summary: &'static str,
    /// Input gates.
    pub inputs: &'static [GateDef],
    /// Output gates.
    pub outputs: &'static [GateDef],
    /// The settings that are paths ([`Block::PATHS`]).
    pub paths: &'static [crate::PathSetting],
    /// The settings a reload may change ([`Block::RELOADABLE`]).
    pub reloadable: &'static [&'static str],
    pub(crate) configure: fn(toml::Table) -> Result<Box<dyn Configured>, String>,
}

impl BlockInfo {
    /// A source is a block without inputs: the runtime polls it.
    pub fn is_source(&self) -> bool {
        self.inputs.is_empty()
    }
}

/// The block types known to a runtime.
#[derive(Default, Clone)]
pub struct Registry {
    types: BTreeMap<&'static str, BlockInfo>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Adds block type `B`.
    ///
    /// # Panics
    /// Panics when another type already uses `B::TYPE` or two of its gates share a name:
    /// both are programming errors.
    pub fn register<B: Block>(&mut self) -> &mut Registry
    where
        B::Settings: Send + 'static,
    {
        for gates in [B::INPUTS, B::OUTPUTS] {
            for (i, g) in gates.iter().enumerate() {
                assert!(
                    gates[..i].iter().all(|o| o.name != g.name),
                    "block type {} has two gates named {}",
                    B::TYPE,
                    g.name
                );
            }
        }
        let info = BlockInfo {
            type_name: B::TYPE,
            summary: B::SUMMARY,
            inputs: B::INPUTS,
            outputs: B::OUTPUTS,
            paths: B::PATHS,
            reloadable: B::RELOADABLE,
            configure: configure::<B>,
        };
        assert!(
            self.types.insert(B::TYPE, info).is_none(),
            "block type {} registered twice",
            B::TYPE
        );
        self
    }

    /// The type called `name`.
    pub fn get(&self, name: &str) -> Option<&BlockInfo> {
        self.types.get(name)
    }

    /// Every type, by name.
    pub fn iter(&self) -> impl Iterator<Item = &BlockInfo> {
        self.types.values()
    }

    /// The names of every type, for error messages.
    pub fn names(&self) -> Vec<&'static str> {
        self.types.keys().copied().collect()
    }
}
