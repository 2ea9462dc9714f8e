//! The flow meter (being written).
pub mod decode;
