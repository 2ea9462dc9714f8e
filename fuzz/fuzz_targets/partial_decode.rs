//! Any bytes as a probe's answer to `/api/v1/partial`: the decoder never panics and never
//! inflates past its bound; what decodes merges into an aggregate and re-encodes to bytes
//! that decode to the same groups (docs/specs/distributed.md).
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_query::{PartialAggregate, PARTIAL_MAGIC, PARTIAL_VERSION};

/// Small, so a hostile document cannot make the run slow.
const MAX_GROUPS: usize = 1000;

fuzz_target!(|data: &[u8]| {
    // Half the inputs get a valid header, so the fuzzer reaches zstd and the document.
    let mut framed;
    let input = if data.first().is_some_and(|b| b & 1 == 1) {
        framed = PARTIAL_MAGIC.to_vec();
        framed.extend_from_slice(&PARTIAL_VERSION.to_le_bytes());
        framed.extend_from_slice(&data[1..]);
        &framed[..]
    } else {
        data
    };
    let Ok(p) = PartialAggregate::from_bytes(input, MAX_GROUPS) else {
        return;
    };
    let again = PartialAggregate::from_bytes(&p.to_bytes(), MAX_GROUPS).expect("re-encoded");
    let sorted = |p: &PartialAggregate| {
        let mut g = p.groups();
        g.sort_by(|a, b| a.0.cmp(&b.0));
        g
    };
    assert_eq!(sorted(&again), sorted(&p));
    let mut merged = PartialAggregate::new(p.attributes.clone(), usize::MAX);
    merged.merge(p).expect("same attributes");
});
