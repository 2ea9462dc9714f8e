//! Fuzzes the packet rewriter of `trawl anonymize`: the first byte picks a link type and
//! whether payloads are cut, the rest is the frame. It must never panic; frames it does not
//! rewrite come back unchanged, rewritten ones keep their length (or are cut, never grown),
//! and the same bytes always give the same result.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_anon::{Anonymizer, CryptoPan, Key, PacketRewriter, RewriteOutcome};

const LINKS: [u16; 12] = [1, 113, 276, 0, 108, 101, 12, 14, 228, 229, 105, 127];

fuzz_target!(|input: &[u8]| {
    let Some((&pick, data)) = input.split_first() else {
        return;
    };
    let link = LINKS[usize::from(pick & 0x7f) % LINKS.len()];
    let truncate = pick & 0x80 != 0;
    let key = Key::from_bytes(&[0x5a; 32]).expect("32 bytes");
    let mut rewriter = PacketRewriter::new(Anonymizer::new(CryptoPan::new(&key), Vec::new()), truncate);
    let (outcome, out) = rewriter.rewrite(link, data);
    let first = (outcome, out.to_vec());
    match outcome {
        RewriteOutcome::Rewritten | RewriteOutcome::Partial => {
            assert!(out.len() <= data.len());
            if !truncate {
                assert_eq!(out.len(), data.len());
            }
        }
        _ => assert_eq!(out, data),
    }
    if link == 105 || link == 127 {
        assert_eq!(outcome, RewriteOutcome::UnsupportedLinkType);
    }
    let (again, out) = rewriter.rewrite(link, data);
    assert_eq!(first, (again, out.to_vec()));
});
