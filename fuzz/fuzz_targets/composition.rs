//! Any text as a composition file, checked against trawl's block registry: the checker never
//! panics, a rejected composition names at least one problem, and an accepted one has every
//! block placed on a thread and every connection between existing gates of equal types.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let registry = trawl_blocks::registry();
    match trawl_compose::plan(text, "fuzz.toml", &registry, &[0, 1]) {
        Ok(plan) => {
            assert_eq!(plan.order.len(), plan.blocks.len());
            for b in &plan.blocks {
                assert!(b.thread < plan.threads.len());
            }
            for c in &plan.connections {
                let out = plan.blocks[c.from.0].info.outputs[c.from.1];
                let inp = plan.blocks[c.to.0].info.inputs[c.to.1];
                assert!(out.ty.feeds(&inp.ty));
                assert!(c.capacity > 0);
            }
            let _ = plan.describe();
        }
        Err(e) => assert!(!e.problems.is_empty()),
    }
});
