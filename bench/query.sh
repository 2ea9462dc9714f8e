#!/usr/bin/env bash
# The flow-database benchmark: the same queries with trawl and with DuckDB over the same
# Parquet files, in one run. See bench/README.md.
#
#   bench/query.sh [ROWS] [DAYS]       (default 50000000 rows over 4 days)
#
# Environment: CARGO_TARGET_DIR (default <repo>/target), TRAWL_BENCH_DB (default
# bench/work/flowdb-ROWS-CODEC; a database generated before — DB/.complete and
# DB.flowgen.json present — is reused, not regenerated), TRAWL_BENCH_THREADS (default 2: threads of both engines and of
# the generator), TRAWL_BENCH_RUNS (default 3; the median is reported), TRAWL_BENCH_CODEC (lz4,
# the store's default; or zstd).
set -euo pipefail
export LC_ALL=C
ROWS=${1:-50000000}
DAYS=${2:-4}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
target=${CARGO_TARGET_DIR:-$repo/target}
threads=${TRAWL_BENCH_THREADS:-2}
runs=${TRAWL_BENCH_RUNS:-3}
codec=${TRAWL_BENCH_CODEC:-lz4}
db=${TRAWL_BENCH_DB:-$here/work/flowdb-$ROWS-$codec}
mkdir -p "$here/work"

if ! python3 -c 'import duckdb' 2>/dev/null; then
    pip install --quiet duckdb 2>/dev/null || pip install --quiet --break-system-packages duckdb
fi
(cd "$repo" && cargo build --release -q -p trawl-cli -p trawl-flowgen)
trawl=$target/release/trawl

if [ ! -f "$db/.complete" ]; then
    rm -rf "$db"
    echo "generating $ROWS rows over $DAYS days into $db ..." >&2
    "$target/release/flowgen" --db "$db" --rows "$ROWS" --days "$DAYS" --threads "$threads" \
        --codec "$codec" > "$db.flowgen.json"
    touch "$db/.complete"
fi
gen=$(cat "$db.flowgen.json")

# 1-hour window: 12:00-13:00 UTC of the second day (2025-11-17).
from=2025-11-17T12:00:00Z
to=2025-11-17T13:00:00Z
from_ns=1763380800000000000
to_ns=1763384400000000000

python3 - "$trawl" "$db" "$threads" "$runs" "$gen" "$from" "$to" "$from_ns" "$to_ns" <<'PY'
import json, subprocess, sys, time, statistics, os
import duckdb
trawl, db, threads, runs, gen, frm, to, from_ns, to_ns = sys.argv[1:]
threads, runs = int(threads), int(runs)
gen = json.loads(gen)
src = f"read_parquet('{db}/iface=*/*/*.parquet', hive_partitioning=true)"
M = "sum(fwd_packets), sum(rev_packets), sum(fwd_bytes), sum(rev_bytes), count(*)"
order = "ORDER BY sum(fwd_bytes)+sum(rev_bytes) DESC, sum(fwd_packets)+sum(rev_packets) DESC"
queries = [
  ("top 10 talkers (talk_conv) by bytes", ["talk_conv"], None, None,
   f"SELECT src_ip, dst_ip, {M} FROM {src} GROUP BY ALL {order} LIMIT 10"),
  ("top 10 sources (sip) by bytes", ["sip"], None, None,
   f"SELECT src_ip, {M} FROM {src} GROUP BY ALL {order} LIMIT 10"),
  ("top 10 ports (apps) by bytes", ["apps"], None, None,
   f"SELECT dst_port, proto, {M} FROM {src} GROUP BY ALL {order} LIMIT 10"),
  ("CIDR-filtered conversations (sip = 10.1.0.0/16 and dport = 443), top 100", ["talk_conv", "--condition", "sip = 10.1.0.0/16 and dport = 443", "-n", "100"], None, None,
   f"SELECT src_ip, dst_ip, {M} FROM {src} WHERE src_ip LIKE '10.1.%' AND dst_port = 443 GROUP BY ALL {order} LIMIT 100"),
  ("1-hour window, top 10 talkers", ["talk_conv", "--from", frm, "--to", to], None, None,
   f"SELECT src_ip, dst_ip, {M} FROM {src} WHERE first_ns >= {from_ns} AND first_ns < {to_ns} GROUP BY ALL {order} LIMIT 10"),
]
con = duckdb.connect()
con.execute(f"SET threads={threads}")
def run_trawl(args):
    cmd = [trawl, "query", "-d", db, "--workers", str(threads), "--format", "json", "--max-groups", "200000000"] + args
    t = time.time(); out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout; dt = time.time() - t
    return dt, json.loads(out)
def run_duck(sql):
    t = time.time(); rows = con.execute(sql).fetchall(); return time.time() - t, rows
print(f"database: {gen['rows']} rows, {gen['blocks']} blocks, {gen['bytes']/1e6:.1f} MB, {gen['bytes_per_row']} bytes/row")
print(f"generation + ingest (flowgen, {gen['threads']} threads): {gen['rows_per_s']:.0f} rows/s wall, {gen['rows_per_cpu_s']:.0f} rows per CPU-second")
if "ingest_rows_per_thread_s" in gen:
    print(f"ingest alone (time inside trawl_store::Ingest): {gen['ingest_rows_per_thread_s']:.0f} rows/s per thread")
print(f"threads per engine: {threads}; median of {runs} runs; DuckDB {duckdb.__version__}")
print(f"load average at the start: {open('/proc/loadavg').read().split()[:3]}\n")
print(f"{'query':<75} {'trawl s':>8} {'duckdb s':>9} {'ratio':>6}  same result")
ratios = []
for name, args, _, _, sql in queries:
    # One warm-up each, so both read from the page cache.
    run_trawl(args); run_duck(sql)
    tt, dt = [], []
    for _ in range(runs):
        a, res = run_trawl(args); tt.append(a)
        b, rows = run_duck(sql); dt.append(b)
    t, d = statistics.median(tt), statistics.median(dt)
    # Compare the sums of every row shown (trawl's JSON vs DuckDB's tuples).
    mine = [(r["fwd_packets"], r["rev_packets"], r["fwd_bytes"], r["rev_bytes"], r["flows"]) for r in res["rows"]]
    theirs = [tuple(x[-5:]) for x in rows]
    same = "yes" if mine == theirs else "NO"
    ratios.append(d / t)
    print(f"{name:<75} {t:8.3f} {d:9.3f} {d/t:6.2f}  {same}")
print(f"\nratio = DuckDB time / trawl time (above 1: trawl faster)")
print(f"load average at the end: {open('/proc/loadavg').read().split()[:3]}")
PY
