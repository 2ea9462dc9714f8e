//! Writes a synthetic stored series (bench/series.sh): `DAYS` days of per-second rows of one
//! interface ending at the start of today (UTC), through `SeriesIngest` as a monitor writes
//! them (seconds files, then minute and hour rollups as the hours pass).
//!
//! `cargo run --release -p trawl-store --example series_synth -- DB DAYS [IFACE]`
use trawl_series::SeriesRow;
use trawl_store::series::SeriesIngest;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(db), Some(days)) = (args.get(1), args.get(2).and_then(|d| d.parse::<u64>().ok()))
    else {
        eprintln!("usage: series_synth DB DAYS [IFACE]");
        std::process::exit(2);
    };
    let iface = args.get(3).map_or("eth0", String::as_str);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    let end = now - now % 86_400;
    let start = end - days * 86_400;
    let mut w = SeriesIngest::open(db, iface).expect("open the series");
    for s in start..end {
        // A daily cycle with some noise: deterministic, varied enough for the encoders.
        let h = s.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 54;
        let day = ((s % 86_400) as f64 / 86_400.0 * std::f64::consts::TAU).sin();
        let packets = (50_000.0 + 30_000.0 * day) as u64 + h;
        w.push(&SeriesRow {
            second: s,
            packets,
            bytes: packets * 700,
            active_flows: packets / 20,
            new_flows: packets / 100,
            ..SeriesRow::default()
        });
        if s % 300 == 299 {
            w.advance(s + 1).expect("write");
        }
    }
    let stats = w.finish().expect("finish");
    println!(
        "{} rows, {} seconds files, {} rollups, {} bytes",
        stats.rows, stats.files, stats.rollups, stats.bytes
    );
}
