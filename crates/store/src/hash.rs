//! The fast non-cryptographic hasher of the store and the query engine (addresses, packed
//! group keys): the deterministic one of `trawl_flow::hash`, re-exported. The keys come from
//! the database, not from an adversary choosing collisions in real time.
pub use trawl_flow::hash::{FxBuildHasher, FxHashMap, FxHasher};
