//! The call and stream tables' hasher: `trawl_flow::hash`'s, seeded per process. Keys come
//! from the network, so a flood could aim at collisions: the tables are bounded in size, and
//! the per-process random seed keeps crafted keys from colliding everywhere.

/// `HashMap` with the seeded Fx hasher.
pub type FxMap<K, V> = trawl_flow::hash::SeededFxMap<K, V>;
