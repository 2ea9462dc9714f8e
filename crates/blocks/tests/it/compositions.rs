//! The composition files of `compositions/`.
