//! Times the direct page decoder on the column chunks of a database (throwaway measurement).
use std::os::unix::fs::FileExt;
use std::time::Instant;

use parquet::file::metadata::ParquetMetaDataReader;
use trawl_store::pages::{Chunk, DictColumn, DictType, PageCodec, PageDecoder, Values};
use trawl_store::{list_blocks, BlockFilter};

fn main() {
    let db = std::env::args().nth(1).expect("DB");
    let cols: Vec<usize> = std::env::args()
        .nth(2)
        .unwrap_or("0,8,9,10,11".into())
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    let blocks = list_blocks(std::path::Path::new(&db), &BlockFilter::default()).unwrap();
    let mut bufs = Vec::new();
    for b in &blocks {
        let f = std::fs::File::open(&b.path).unwrap();
        let meta = ParquetMetaDataReader::new().parse_and_finish(&f).unwrap();
        for rg in meta.row_groups() {
            for &c in &cols {
                let cc = rg.column(c);
                let (s, l) = cc.byte_range();
                let mut v = vec![0u8; l as usize];
                f.read_exact_at(&mut v, s).unwrap();
                bufs.push((
                    c,
                    v,
                    PageCodec::of(cc.compression()).unwrap(),
                    rg.num_rows() as usize,
                ));
            }
        }
    }
    let mut dec = PageDecoder::default();
    let mut d = DictColumn::default();
    let mut u = Values::default();
    // CPU time of this thread (ns), from /proc: immune to waiting for a core.
    let cpu = || -> f64 {
        let s = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap();
        s.split_whitespace().next().unwrap().parse::<f64>().unwrap()
    };
    for _ in 0..3 {
        for &c in &cols {
            let t = cpu();
            let mut n = 0;
            for (cc, v, codec, rows) in &bufs {
                if *cc != c {
                    continue;
                }
                let chunk = Chunk {
                    bytes: v,
                    offset: 0,
                    codec: *codec,
                    rows: *rows,
                };
                if c < 6 {
                    let ty = if matches!(c, 0 | 1 | 4) {
                        DictType::Bytes
                    } else {
                        DictType::Int32
                    };
                    dec.dict_chunk(&chunk, ty, None, &mut d).unwrap();
                } else {
                    dec.u64_chunk(&chunk, None, &mut u).unwrap();
                }
                n += rows;
            }
            let s = (cpu() - t) / 1e9;
            print!("col {c}: {:.3} s ({:.2} ns/v)  ", s, s * 1e9 / n as f64);
        }
        println!();
    }
}
