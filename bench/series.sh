#!/usr/bin/env bash
# Stored series (issue 20): (1) how fast 30 days of series answer from the rollups, (2) what
# storing the series (and watching them: series_change, alarm_store) costs `trawl ingest`.
#
#   bench/series.sh [TRACE]        (default bench/work/a-quick.pcap, see bench/README.md)
#
# (1) writes 30 days of synthetic per-second rows (2.6 M, through trawl_store::series as a
#     monitor writes them: seconds files, minute and hour rollups) into bench/work/series-30d,
#     then times `trawl series -d DB --from -31d --step 1h` (and 1m, and 1s for one day),
#     wall clock, median of TRAWL_BENCH_RUNS (default 7) runs after one warm-up.
# (2) bench/ab.sh: `trawl ingest -r TRACE` without the series (`--no-series-store`, hidden)
#     against the default (series stored, series_change on), alternated, a fresh database each
#     run; the ratio of the median CPU times is the cost.
set -euo pipefail
export LC_ALL=C
here=$(cd "$(dirname "$0")" && pwd)
repo=$(dirname "$here")
target=${CARGO_TARGET_DIR:-$repo/target}
runs=${TRAWL_BENCH_RUNS:-7}
trace=${1:-$here/work/a-quick.pcap}
work=$here/work
mkdir -p "$work"
(cd "$repo" && cargo build --release -q -p trawl-cli && cargo build --release -q -p trawl-store --example series_synth)
trawl=$target/release/trawl

db=$work/series-30d
if [ ! -f "$db/.complete" ]; then
    rm -rf "$db"
    "$target/release/examples/series_synth" "$db" 30
    touch "$db/.complete"
fi
echo "store: $(du -sh "$db/series" | cut -f1), $(find "$db/series" -name '*.parquet' | wc -l) files"
ms() { # median wall ms of `trawl ARGS` over $runs runs
    "$trawl" "$@" >/dev/null
    for ((i = 0; i < runs; i++)); do
        local t0 t1
        t0=$(date +%s%N)
        "$trawl" "$@" >/dev/null
        t1=$(date +%s%N)
        echo $(((t1 - t0) / 1000))
    done | sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)] / 1000}'
}
for step in 1h 1m; do
    rows=$("$trawl" series -d "$db" --from -31d --step $step | wc -l)
    echo "series -d --from -31d --step $step: $rows rows, median $(ms series -d "$db" --from -31d --step $step) ms"
done
rows=$("$trawl" series -d "$db" --from -1d --step 1s | wc -l)
echo "series -d --from -1d --step 1s: $rows rows, median $(ms series -d "$db" --from -1d --step 1s) ms"

[ -f "$trace" ] || { echo "no trace $trace: skipping the ingest cost (bench/README.md makes it)"; exit 0; }
bin=$(mktemp -d)
trap 'rm -rf "$bin" "$work/series-ingest-db"' EXIT
for side in without with; do
    flag=""
    [ $side = without ] && flag="--no-series-store"
    cat >"$bin/$side" <<WRAP
#!/bin/sh
rm -rf "$work/series-ingest-db"
exec "$trawl" "\$@" $flag
WRAP
    chmod +x "$bin/$side"
done
"$here/ab.sh" --runs "$runs" "$bin/without" "$bin/with" -- ingest -r "$trace" -d "$work/series-ingest-db" \
    --summary none
