//! Any text as a `trawl query` condition: the parser never panics, an error's position lies
//! inside the input, and what parses prints to a canonical form that parses back to the same
//! expression (the round trip the error messages and `--partial` rely on).
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_query::syntax::parse;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text) {
        Ok(e) => {
            let printed = e.to_string();
            let again = parse(&printed)
                .unwrap_or_else(|err| panic!("canonical form {printed:?} does not parse: {err:?}"));
            assert_eq!(again, e, "{printed:?}");
        }
        Err(err) => assert!(err.pos <= text.chars().count(), "{err:?} in {text:?}"),
    }
});
