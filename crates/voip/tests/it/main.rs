//! Integration tests of trawl-voip.
mod table;
