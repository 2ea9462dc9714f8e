//! Plans: the compositions the commands build from their flags.
pub mod live;
