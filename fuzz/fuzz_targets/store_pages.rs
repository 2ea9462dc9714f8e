//! Any bytes as a column chunk of a trawl block through the direct page decoder
//! (`trawl_store::pages`), as each column kind, each codec, with and without a mask of the
//! rows needed, whole and a page at a time: never a panic (and no allocation beyond what
//! the chunk's size and row count justify), and what decodes holds one value per row, every
//! dictionary index inside the dictionary.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_store::pages::{
    Chunk, DictColumn, DictType, PageCodec, PageCursor, PageDecoder, PageError, Values,
};

fuzz_target!(|data: &[u8]| {
    // Byte 0: kind (bits 0-1), codec (bits 2-3), a mask of needed rows (bit 4);
    // bytes 1-2: rows (little-endian); the rest is the chunk.
    if data.len() < 3 {
        return;
    }
    let ctl = data[0];
    let rows = usize::from(u16::from_le_bytes([data[1], data[2]]));
    let codec = match ctl >> 2 & 3 {
        0 => PageCodec::None,
        1 => PageCodec::Lz4Raw,
        _ => PageCodec::Zstd,
    };
    let chunk = Chunk {
        bytes: &data[3..],
        offset: 4,
        codec,
        rows,
    };
    let mask: Vec<bool> = (0..rows).map(|i| i % 7 < 2).collect();
    let needed = (ctl & 16 != 0).then_some(&mask[..]);
    let mut dec = PageDecoder::default();
    let offset_ok = |e: &PageError| match e {
        PageError::Corrupt { offset, .. } => {
            assert!(*offset >= 4 && *offset <= 4 + data.len() as u64, "{e}")
        }
        PageError::Unsupported(_) => {}
    };
    match ctl & 3 {
        0 | 1 => {
            let ty = if ctl & 3 == 0 {
                DictType::Bytes
            } else {
                DictType::Int32
            };
            let mut out = DictColumn::default();
            match dec.dict_chunk(&chunk, ty, needed, &mut out) {
                Ok(()) => {
                    assert_eq!(out.keys.len(), rows);
                    let n = out.dict_len();
                    assert!(out.keys.as_slice().iter().all(|&k| (k as usize) < n));
                    for k in 0..n {
                        let _ = (out.bytes(k), out.int(k));
                    }
                }
                Err(e) => offset_ok(&e),
            }
        }
        2 => {
            let mut out = Values::default();
            match dec.u64_chunk(&chunk, needed, &mut out) {
                Ok(()) => assert_eq!(out.len(), rows),
                Err(e) => offset_ok(&e),
            }
            let mut ints = Values::default();
            match dec.i32_chunk(&chunk, &mut ints) {
                Ok(()) => assert_eq!(ints.len(), rows),
                Err(e) => offset_ok(&e),
            }
        }
        _ => {
            // A page at a time, as the query engine reads counters.
            match dec.u64_pages_supported(&chunk) {
                Ok(_) => {}
                Err(e) => offset_ok(&e),
            }
            let mut at = PageCursor::default();
            let mut out = Values::default();
            let mut next = 0;
            loop {
                match dec.u64_page(&chunk, &mut at, needed, &mut out) {
                    Ok(Some(r)) => {
                        assert_eq!(r.start, next);
                        assert_eq!(r.len(), out.len());
                        next = r.end;
                        assert!(next <= rows);
                    }
                    Ok(None) => {
                        assert_eq!(next, rows);
                        break;
                    }
                    Err(e) => {
                        offset_ok(&e);
                        break;
                    }
                }
            }
        }
    }
});
