#!/usr/bin/env bash
# The HTTP API's cost over `trawl query`: the same queries as `trawl query --format json`
# (a process per query, as a script would run it) and as GET /api/v1/query of a running
# `trawl serve` (Python's urllib, a connection per request), over one flow database.
# Issue 20 asks: an API query costs at most 5 ms more than the same `trawl query`.
#
#   bench/api.sh [ROWS] [DAYS]       (default 5000000 rows over 1 day)
#
# Environment: CARGO_TARGET_DIR (default <repo>/target), TRAWL_BENCH_DB (default
# bench/work/flowdb-ROWS-lz4, reused when complete), TRAWL_BENCH_THREADS (default 2: scan
# threads of both), TRAWL_BENCH_RUNS (default 11; the median is reported).
set -euo pipefail
export LC_ALL=C
ROWS=${1:-5000000}
DAYS=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
target=${CARGO_TARGET_DIR:-$repo/target}
threads=${TRAWL_BENCH_THREADS:-2}
runs=${TRAWL_BENCH_RUNS:-11}
db=${TRAWL_BENCH_DB:-$here/work/flowdb-$ROWS-lz4}
mkdir -p "$here/work"

(cd "$repo" && cargo build --release -q -p trawl-cli -p trawl-flowgen)
trawl=$target/release/trawl

if [ ! -f "$db/.complete" ]; then
    rm -rf "$db"
    echo "generating $ROWS rows over $DAYS days into $db ..." >&2
    "$target/release/flowgen" --db "$db" --rows "$ROWS" --days "$DAYS" --threads "$threads" \
        > "$db.flowgen.json"
    touch "$db/.complete"
fi

log=$(mktemp)
"$trawl" serve --db "$db" --api 127.0.0.1:0 2> "$log" &
serve=$!
trap 'kill $serve 2>/dev/null; rm -f "$log"' EXIT
for _ in $(seq 100); do grep -q 'serving on' "$log" && break; sleep 0.1; done
base=$(grep -o 'http://[0-9.:]*' "$log")

python3 - "$trawl" "$db" "$threads" "$runs" "$base" <<'PY'
import json, statistics, subprocess, sys, time, urllib.parse, urllib.request
trawl, db, threads, runs, base = sys.argv[1:]
runs = int(runs)
# (name, trawl query flags, API parameters)
queries = [
    ("top 10 talkers (talk_conv)", ["talk_conv"], {"attrs": "talk_conv"}),
    ("top 10 sources (sip)", ["sip"], {"attrs": "sip"}),
    ("top 10 ports (apps)", ["apps"], {"attrs": "apps"}),
    ("conversations, sip = 10.1.0.0/16 and dport = 443, top 100",
     ["talk_conv", "--condition", "sip = 10.1.0.0/16 and dport = 443", "-n", "100"],
     {"attrs": "talk_conv", "condition": "sip = 10.1.0.0/16 and dport = 443", "limit": "100"}),
]
def cli(flags):
    cmd = [trawl, "query", "-d", db, "--workers", threads, "--format", "json"] + flags
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True).stdout
    return time.perf_counter() - t, json.loads(out)
def api(params):
    url = f"{base}/api/v1/query?{urllib.parse.urlencode(params)}"
    t = time.perf_counter()
    with urllib.request.urlopen(url) as r:
        body = r.read()
    return time.perf_counter() - t, json.loads(body)
def rows(v):
    return v["rows"]
print(f"database: {db}; median of {runs} runs; trawl query --workers {threads}; API: its default workers")
print(f"load average at the start: {open('/proc/loadavg').read().split()[:3]}\n")
print(f"{'query':<60} {'query ms':>9} {'API ms':>8} {'API-query':>10} {'engine ms (q/API)':>18}  same rows")
worst = -1e9
for name, flags, params in queries:
    cli(flags); api(params)  # warm the page cache and the server
    ct, at, ce, ae = [], [], [], []
    for _ in range(runs):
        t, c = cli(flags); ct.append(t); ce.append(c["stats"]["duration_ms"])
        t, a = api(params); at.append(t); ae.append(a["stats"]["duration_ms"])
    c_ms, a_ms = statistics.median(ct) * 1e3, statistics.median(at) * 1e3
    same = "yes" if rows(c) == rows(a) else "NO"
    worst = max(worst, a_ms - c_ms)
    print(f"{name:<60} {c_ms:9.1f} {a_ms:8.1f} {a_ms - c_ms:10.1f} {statistics.median(ce):8.1f}/{statistics.median(ae):<8.1f}  {same}")
print(f"\nworst API - query: {worst:.1f} ms (asked: at most +5 ms)")
print(f"load average at the end: {open('/proc/loadavg').read().split()[:3]}")
PY
