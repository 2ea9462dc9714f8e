//! Fuzzes TCP stream reassembly: segments cut from a true stream (64 bytes of pattern) at
//! offsets, lengths and in an order the input chooses, some with altered bytes or a tail the
//! capture cut off. It must not panic; the stream's waiting bytes stay within the cap and the
//! budget follows them; what is delivered (bytes and gaps) adds up to the stream's offset; and
//! without altered bytes every delivered byte is the true one at its offset.
#![no_main]

use libfuzzer_sys::fuzz_target;
use trawl_app::reassembly::{Budget, Chunk, ReassemblyStats, Segment, Stream};

const TRUE_LEN: usize = 300;

fuzz_target!(|data: &[u8]| {
    let truth: Vec<u8> = (0..TRUE_LEN).map(|i| (i * 7 + 3) as u8).collect();
    let isn = u32::from_le_bytes([
        data.first().copied().unwrap_or(0),
        data.get(1).copied().unwrap_or(0),
        0xff,
        0xff,
    ]);
    let mut stream = Stream::new();
    let max_stream = 16 + usize::from(data.get(2).copied().unwrap_or(0) % 64);
    let mut budget = Budget::new(max_stream, 1 << 20);
    let mut stats = ReassemblyStats::default();
    let mut delivered: Vec<Option<u8>> = Vec::new();
    let mut altered = false;
    for op in data.get(3..).unwrap_or(&[]).chunks_exact(3) {
        let start = usize::from(op[0]) % TRUE_LEN;
        let len = (usize::from(op[1]) % 40).min(TRUE_LEN - start);
        let mut bytes = truth[start..start + len].to_vec();
        if op[2] & 1 != 0 && !bytes.is_empty() {
            bytes[0] ^= 0x55;
            altered = true;
        }
        let missing = if op[2] & 2 != 0 { (len / 2) as u32 } else { 0 };
        let captured = len - missing as usize;
        let seg = Segment {
            seq: isn.wrapping_add(start as u32),
            syn: false,
            data: &bytes[..captured],
            missing,
        };
        stream.push(seg, &mut budget, &mut stats, &mut |c| match c {
            Chunk::Data(d) => delivered.extend(d.iter().map(|&b| Some(b))),
            Chunk::Gap(n) => delivered.extend((0..n).map(|_| None)),
        });
        assert!(stream.held() <= max_stream, "held {} > {max_stream}", stream.held());
        assert_eq!(budget.held, stream.held());
        assert_eq!(delivered.len() as u64, stream.offset());
    }
    stream.flush(&mut budget, &mut stats, &mut |c| match c {
        Chunk::Data(d) => delivered.extend(d.iter().map(|&b| Some(b))),
        Chunk::Gap(n) => delivered.extend((0..n).map(|_| None)),
    });
    assert_eq!(budget.held, 0);
    assert_eq!(delivered.len() as u64, stream.offset());
    if !altered {
        // Offsets are from the first segment's start.
        let first = data
            .get(3..)
            .and_then(|d| d.first())
            .map_or(0, |&b| usize::from(b) % TRUE_LEN);
        for (i, b) in delivered.iter().enumerate() {
            if let Some(b) = b {
                assert_eq!(Some(b), truth.get(first + i), "byte {i}");
            }
        }
    }
});
