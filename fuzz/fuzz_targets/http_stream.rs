//! Fuzzes the HTTP/1.x stream reader: any bytes as a request direction and as a response
//! direction, whole and cut into segments the first byte sizes. It must not panic; segmenting
//! never changes the heads found (until a fault, after which nothing more is read), and head
//! lengths stay within the bound.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_app::http::{Direction, HttpStream, MAX_HEAD_LEN};

fuzz_target!(|data: &[u8]| {
    let step = usize::from(data.first().copied().unwrap_or(1)).max(1);
    for dir in [Direction::Request, Direction::Response] {
        let mut whole = HttpStream::new(dir);
        let mut a = Vec::new();
        let ra = whole.push(data, |h| a.push(h));
        let mut split = HttpStream::new(dir);
        let mut b = Vec::new();
        let mut rb = Ok(());
        for seg in data.chunks(step) {
            rb = split.push(seg, |h| b.push(h));
            if rb.is_err() {
                break;
            }
        }
        if ra.is_ok() && rb.is_ok() {
            assert_eq!(a, b);
            assert_eq!(whole.stats, split.stats);
        }
        assert!(a.iter().chain(&b).all(|h| h.head_len <= MAX_HEAD_LEN));
    }
});
