#!/usr/bin/env bash
# Parallel metering of files (issue 26): `trawl flows -r TRACE -o /dev/null --workers N`
# against one worker, alternated, the file in the page cache. Prints per run the wall time,
# CPU time (user + system) and packets per wall-second, and the ratios of the medians: packets
# per wall-second (N workers against one) and CPU time (N workers' against one's).
#
#   bench/workers.sh [--runs N] [--workers N] [--format json|csv] TRACE...
#
# Environment: CARGO_TARGET_DIR (default <repo>/target), TRAWL_BIN (a trawl binary instead
# of the one built here).
set -euo pipefail
export LC_ALL=C
RUNS=3
WORKERS=2
FORMAT=json
while [ $# -gt 0 ]; do
    case $1 in
        --runs) RUNS=$2; shift ;;
        --workers) WORKERS=$2; shift ;;
        --format) FORMAT=$2; shift ;;
        --*) echo "workers.sh: unknown option $1" >&2; exit 2 ;;
        *) break ;;
    esac
    shift
done
[ $# -gt 0 ] || { echo "usage: bench/workers.sh [--runs N] [--workers N] TRACE..." >&2; exit 2; }
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
if [ -z "${TRAWL_BIN:-}" ]; then
    (cd "$ROOT" && cargo build --release -q -p trawl-cli)
fi
TRAWL=${TRAWL_BIN:-$TARGET_DIR/release/trawl}

echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
for trace in "$@"; do
    cat "$trace" > /dev/null
    packets=$("$TRAWL" flows -r "$trace" -o /dev/null --summary json 2>&1 | tail -1 |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["packets_read"])')
    echo "trace $trace: $packets packets"
    for n in 1 "$WORKERS"; do : > "/tmp/workers-bench-$n.txt"; done
    for _ in $(seq "$RUNS"); do
        for n in 1 "$WORKERS"; do
            /usr/bin/time -f "%e %U %S" -o /tmp/workers-bench-t.txt \
                "$TRAWL" flows -r "$trace" -o /dev/null --format "$FORMAT" --workers "$n" \
                --summary none
            read -r wall user sys < /tmp/workers-bench-t.txt
            echo "$wall $user $sys" >> "/tmp/workers-bench-$n.txt"
            printf '  --workers %s: %6.2f s wall, %6.2f s CPU, %6.2f M packets/wall-s\n' "$n" \
                "$wall" "$(echo "$user + $sys" | bc)" "$(echo "$packets / $wall / 1000000" | bc -l)"
        done
    done
    # med FILE COLUMN: the median of a column (1 wall, 2+3 CPU).
    med() { awk -v c="$2" '{ print (c == 1 ? $1 : $2 + $3) }' "$1" | sort -n |
        awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
    one=$(med /tmp/workers-bench-1.txt 1)
    many=$(med "/tmp/workers-bench-$WORKERS.txt" 1)
    printf '  median wall: 1 worker %s s, %s workers %s s: %.2fx packets per wall-second\n' \
        "$one" "$WORKERS" "$many" "$(echo "$one / $many" | bc -l)"
    one=$(med /tmp/workers-bench-1.txt 2)
    many=$(med "/tmp/workers-bench-$WORKERS.txt" 2)
    printf '  median CPU: 1 worker %s s, %s workers %s s: %.2fx the CPU of one\n' \
        "$one" "$WORKERS" "$many" "$(echo "$many / $one" | bc -l)"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f /tmp/workers-bench-*.txt
