//! Reloading a running composition (SIGHUP on `trawl run -c FILE`): the file is planned
//! again and compared with what runs. Settings a block declares reloadable
//! ([`crate::Block::RELOADABLE`]: an output's path, a detector's threshold) are handed to the
//! block on its own thread, which takes them over without losing state. Anything structural
//! (blocks added, removed or retyped, connections, pools and threads, `[runtime]`, any other
//! setting) would mean rebuilding blocks that hold flow tables, rings and open stores: the
//! whole reload is then refused, each change named, and the running composition is left as
//! it was. Either every change applies or none is attempted.
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::composition::{Plan, PlannedConnection, PlannedThread, RunControl};
use crate::runtime::{BlockShared, Control};

/// How long a reload waits for the blocks' threads to take their new settings (each looks
/// at least every 50 ms, between calls).
const APPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// What a reload did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// Nothing differs from what runs.
    Unchanged,
    /// These settings changed (`block.key`), each taken over by its block.
    Applied(Vec<String>),
    /// Nothing was changed: these differences need a restart.
    Refused(Vec<String>),
    /// Some blocks could not take their settings over (each message names its block): they
    /// keep their old settings; `applied` are the changes that did take effect.
    Failed {
        /// Changes that took effect.
        applied: Vec<String>,
        /// One message per block that kept its old settings.
        errors: Vec<String>,
    },
}

/// What is compared between the running composition and a new plan of its file.
struct Shape {
    blocks: Vec<(String, &'static str, usize)>,
    connections: Vec<PlannedConnection>,
    threads: Vec<PlannedThread>,
    control: RunControl,
    time_blocks: bool,
}

impl Shape {
    fn of(plan: &Plan) -> Shape {
        Shape {
            blocks: plan
                .blocks
                .iter()
                .map(|b| (b.name.clone(), b.info.type_name, b.thread))
                .collect(),
            connections: plan.connections.clone(),
            threads: plan.threads.clone(),
            control: plan.control.clone(),
            time_blocks: plan.time_blocks,
        }
    }

    /// Every structural difference, in words.
    fn differences(&self, new: &Shape) -> Vec<String> {
        let mut out = Vec::new();
        let names = |s: &Shape| -> BTreeSet<String> {
            s.blocks.iter().map(|(n, _, _)| n.clone()).collect()
        };
        let (old_names, new_names) = (names(self), names(new));
        for n in new_names.difference(&old_names) {
            out.push(format!("block `{n}` added"));
        }
        for n in old_names.difference(&new_names) {
            out.push(format!("block `{n}` removed"));
        }
        for (name, ty, thread) in &self.blocks {
            let Some((_, new_ty, new_thread)) = new.blocks.iter().find(|(n, _, _)| n == name)
            else {
                continue;
            };
            if ty != new_ty {
                out.push(format!("block `{name}` changed type ({ty} to {new_ty})"));
            } else if thread != new_thread {
                out.push(format!("block `{name}` moved to another pool or thread"));
            }
        }
        // Indexes into the block lists differ when blocks moved: only then compare by index.
        if out.is_empty() && self.blocks != new.blocks {
            out.push("blocks reordered".into());
        }
        if out.is_empty() && self.connections != new.connections {
            out.push("connections changed".into());
        }
        if self.threads != new.threads {
            out.push("pools changed".into());
        }
        if self.control != new.control || self.time_blocks != new.time_blocks {
            out.push("[runtime] changed".into());
        }
        out
    }
}

/// One running block as a reload sees it.
struct Slot {
    name: String,
    type_name: &'static str,
    reloadable: &'static [&'static str],
    settings: toml::Table,
    shared: Arc<BlockShared>,
}

/// Reloads a running composition's settings ([`crate::Running::reloader`]). Cheap to clone;
/// used from the thread that supervises the run.
#[derive(Clone)]
pub struct Reloader(Arc<Inner>);

struct Inner {
    control: Arc<Control>,
    shape: Shape,
    slots: Mutex<Vec<Slot>>,
}

impl Reloader {
    pub(crate) fn new(plan: &Plan, shared: &[Arc<BlockShared>], control: Arc<Control>) -> Self {
        let slots = plan
            .blocks
            .iter()
            .zip(shared)
            .map(|(b, s)| Slot {
                name: b.name.clone(),
                type_name: b.info.type_name,
                reloadable: b.info.reloadable,
                settings: b.settings.clone(),
                shared: s.clone(),
            })
            .collect();
        Reloader(Arc::new(Inner {
            control,
            shape: Shape::of(plan),
            slots: Mutex::new(slots),
        }))
    }

    /// Compares `new` (the composition's file planned again) with what runs and applies its
    /// reloadable changes, all or nothing; waits until the blocks have taken them.
    pub fn reload(&self, mut new: Plan) -> ReloadOutcome {
        let Ok(mut slots) = self.0.slots.lock() else {
            return ReloadOutcome::Refused(vec!["internal error: reload state poisoned".into()]);
        };
        let mut refused = self.0.shape.differences(&Shape::of(&new));
        // Settings are compared by block name, so a refusal names them all, whatever else
        // changed; (running block, new block, keys).
        let mut changes: Vec<(usize, usize, Vec<String>)> = Vec::new();
        for (i, slot) in slots.iter().enumerate() {
            let Some(j) = new.blocks.iter().position(|b| b.name == slot.name) else {
                continue;
            };
            if new.blocks[j].info.type_name != slot.type_name {
                continue;
            }
            let keys = changed_keys(&slot.settings, &new.blocks[j].settings);
            for k in keys
                .iter()
                .filter(|k| !slot.reloadable.contains(&k.as_str()))
            {
                refused.push(format!(
                    "block `{}`: `{k}` cannot change while it runs{}",
                    slot.name,
                    reloadable_list(slot.reloadable)
                ));
            }
            if !keys.is_empty() {
                changes.push((i, j, keys));
            }
        }
        if !refused.is_empty() {
            return ReloadOutcome::Refused(refused);
        }
        if changes.is_empty() {
            return ReloadOutcome::Unchanged;
        }
        for (i, j, _) in &changes {
            let settings = new.blocks[*j].configured.take().map(|c| c.into_settings());
            let shared = &slots[*i].shared;
            if let (Some(s), Ok(mut pending)) = (settings, shared.reload.lock()) {
                *pending = Some(s);
            }
        }
        self.0.control.reload_epoch.fetch_add(1, Ordering::SeqCst);
        let (mut applied, mut errors) = (Vec::new(), Vec::new());
        for (i, j, keys) in changes {
            let slot = &mut slots[i];
            match wait_answer(&slot.shared) {
                Ok(()) => {
                    slot.settings = std::mem::take(&mut new.blocks[j].settings);
                    applied.extend(keys.iter().map(|k| format!("{}.{k}", slot.name)));
                }
                Err(e) => errors.push(format!("block `{}`: {e}", slot.name)),
            }
        }
        if errors.is_empty() {
            ReloadOutcome::Applied(applied)
        } else {
            ReloadOutcome::Failed { applied, errors }
        }
    }
}

/// The keys whose values differ (added, removed or changed), sorted.
fn changed_keys(old: &toml::Table, new: &toml::Table) -> Vec<String> {
    let keys: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    keys.into_iter()
        .filter(|k| old.get(*k) != new.get(*k))
        .cloned()
        .collect()
}

fn reloadable_list(keys: &[&str]) -> String {
    if keys.is_empty() {
        " (none of its settings can)".into()
    } else {
        format!(" (only {} can)", keys.join(", "))
    }
}

/// Waits for the block's thread to answer; a block that finished (or whose thread ended)
/// never does.
fn wait_answer(shared: &BlockShared) -> Result<(), String> {
    let deadline = Instant::now() + APPLY_TIMEOUT;
    loop {
        if let Some(answer) = shared.reload_answer.lock().ok().and_then(|mut a| a.take()) {
            return answer;
        }
        if Instant::now() >= deadline {
            // Withdrawn, so a thread that comes late does not apply it unreported.
            if let Ok(mut pending) = shared.reload.lock() {
                if pending.take().is_none() {
                    // Taken meanwhile: its answer is on the way.
                    drop(pending);
                    std::thread::sleep(Duration::from_millis(100));
                    if let Some(a) = shared.reload_answer.lock().ok().and_then(|mut a| a.take()) {
                        return a;
                    }
                }
            }
            return Err("did not take the new settings (it has finished)".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_keys_names_added_removed_and_changed() {
        let old: toml::Table = toml::from_str("a = 1\nb = \"x\"\nc = true").unwrap();
        let new: toml::Table = toml::from_str("a = 1\nb = \"y\"\nd = 2").unwrap();
        assert_eq!(changed_keys(&old, &new), ["b", "c", "d"]);
        assert!(changed_keys(&old, &old).is_empty());
    }
}
