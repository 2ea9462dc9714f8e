//! Zero-copy packet views (being written).
#![no_std]
#![forbid(unsafe_code)]
