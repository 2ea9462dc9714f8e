//! Integration tests of trawl-export.
