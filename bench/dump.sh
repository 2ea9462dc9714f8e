#!/usr/bin/env bash
# trawl's packet-storage benchmark (issue 4), everything in one run on the same directory:
#
# 1. Writing: a large realistic trace (trace a of bench/run.sh) written to disk by
#    `trawl dump -r TRACE -w DIR` (and with `--via-ring`, the path of `trawl run --dump`:
#    ring, lossless listener, writer thread), by `tcpdump -r TRACE -w FILE` (plus the sync that puts its
#    data on disk), and the disk limit: `dd` of the same number of bytes in 4 MiB blocks
#    (O_DIRECT, and buffered + fsync). Page cache dropped before each run, the input then read
#    back into it (so every writer reads from memory and writes to disk).
# 2. Retrieval: an hour of traffic stored by trawl; one minute of it with a host filter
#    (`trawl packets --from --to -f 'host X'`) against a full scan with the same filter
#    (tcpdump over the original hour file; trawl over the whole store with a filter the index
#    cannot use). Cold cache for each.
#
#   bench/dump.sh [--quick] [--runs N] [--dir DIR] [--no-install] [--no-build]
#
# Needs root (it drops the page cache). Results: a table on stdout, bench/work/dump.csv,
# bench/work/dump-env.txt.
set -euo pipefail
export LC_ALL=C

usage() {
    cat <<'EOF'
usage: bench/dump.sh [--quick] [--runs N] [--dir DIR] [--no-install] [--no-build]

  --quick       350 MB traces instead of 2.2 GB
  --runs N      repetitions of the write measurements, interleaved (default 3)
  --dir DIR     where the outputs are written: the disk under test (default bench/work/dump-out)
  --no-install  never call apt-get
  --no-build    use the binaries already built

Environment: CARGO_TARGET_DIR (default <repo>/target), TRAWL_BENCH_SEED (seed capture, see
bench/README.md).
EOF
}

QUICK=0
RUNS=3
INSTALL=1
BUILD=1
DIR=
ARGS_GIVEN="$*"
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1 ;;
        --runs) RUNS=${2:?--runs needs a number}; shift ;;
        --dir) DIR=${2:?--dir needs a directory}; shift ;;
        --no-install) INSTALL=0 ;;
        --no-build) BUILD=0 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "dump.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

die() { echo "dump.sh: error: $*" >&2; exit 1; }
note() { echo "== $*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
WORK=$BENCH/work
DIR=${DIR:-$WORK/dump-out}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TRAWL=$TARGET_DIR/release/trawl
TRACEGEN=$TARGET_DIR/release/tracegen
mkdir -p "$WORK" "$DIR"
[ "$(id -u)" = 0 ] || die "needs root (drops the page cache between runs)"

# shellcheck source=bench/lib.sh
. "$BENCH/lib.sh"

for c in tcpdump dd /usr/bin/time; do
    if ! command -v "$c" >/dev/null 2>&1; then
        [ "$INSTALL" = 1 ] || die "missing $c (apt-get install tcpdump time coreutils)"
        note "installing tcpdump time"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq tcpdump time >/dev/null
        break
    fi
done

if [ "$BUILD" = 1 ]; then
    note "building (release, target dir $TARGET_DIR)"
    (cd "$ROOT" && cargo build --release -q -p trawl-cli -p trawl-tracegen) || die "build failed"
fi
[ -x "$TRAWL" ] && [ -x "$TRACEGEN" ] || die "binaries missing in $TARGET_DIR/release"

if [ "$QUICK" = 1 ]; then
    SIZE=350000000
    SUFFIX=-quick
else
    SIZE=2200000000
    SUFFIX=
fi

# Trace (a) of bench/run.sh: same arguments, so the two scripts share the file.
WTRACE=$(make_trace "a$SUFFIX" realistic --target-bytes "$SIZE")
HTRACE=$(make_trace "hour$SUFFIX" realistic --target-bytes "$SIZE" --span-secs 3600)
WBYTES=$(stat -c %s "$WTRACE")

cold() { sync; echo 3 >/proc/sys/vm/drop_caches; }
# The input and every program's binary back in the page cache: writers are measured reading
# from memory and writing to disk, none of them paying for loading itself.
warm() { cat "$1" "$TRAWL" "$(command -v tcpdump)" "$(command -v dd)" >/dev/null; }

CSV=$WORK/dump.csv
echo "phase,tool,run,bytes,wall_s,user_s,sys_s,note" >"$CSV"
# timed PHASE TOOL RUN BYTES CMD...: wall and CPU time of CMD, one CSV row.
timed() {
    local phase=$1 tool=$2 run=$3 bytes=$4 log=$DIR/$2.log
    shift 4
    /usr/bin/time -f "%e %U %S" -o "$DIR/time.txt" "$@" >"$log" 2>&1 || {
        cat "$log" >&2
        die "$tool failed"
    }
    read -r wall user sys <"$DIR/time.txt"
    echo "$phase,$tool,$run,$bytes,$wall,$user,$sys," >>"$CSV"
    note "$phase $tool run $run: ${wall}s"
}

BLOCKS=$(((WBYTES + 4194303) / 4194304))
note "write phase: $WTRACE ($WBYTES bytes) into $DIR, $RUNS runs"
for run in $(seq 1 "$RUNS"); do
    for tool in dd-direct trawl tcpdump trawl-ring dd-fsync trawl-buffered tcpdump-nosync read; do
        rm -rf "$DIR/store" "$DIR/tcpdump.pcap" "$DIR/dd.bin"
        cold
        warm "$WTRACE"
        case $tool in
            dd-direct) timed write "$tool" "$run" "$WBYTES" \
                dd if=/dev/zero of="$DIR/dd.bin" bs=4M count="$BLOCKS" oflag=direct ;;
            dd-fsync) timed write "$tool" "$run" "$WBYTES" \
                dd if=/dev/zero of="$DIR/dd.bin" bs=4M count="$BLOCKS" conv=fsync ;;
            trawl) timed write "$tool" "$run" "$WBYTES" \
                "$TRAWL" dump -r "$WTRACE" -w "$DIR/store" --summary json ;;
            trawl-ring) timed write "$tool" "$run" "$WBYTES" \
                "$TRAWL" dump -r "$WTRACE" -w "$DIR/store" --via-ring --summary json ;;
            trawl-buffered) timed write "$tool" "$run" "$WBYTES" \
                "$TRAWL" dump -r "$WTRACE" -w "$DIR/store" --direct-io false --summary json ;;
            # tcpdump leaves its data in the page cache: the sync is what puts it on disk.
            tcpdump) timed write "$tool" "$run" "$WBYTES" \
                sh -c "tcpdump -r '$WTRACE' -w '$DIR/tcpdump.pcap' && sync '$DIR/tcpdump.pcap'" ;;
            tcpdump-nosync) timed write "$tool" "$run" "$WBYTES" \
                tcpdump -r "$WTRACE" -w "$DIR/tcpdump.pcap" ;;
            read) timed write "$tool" "$run" "$WBYTES" cat "$WTRACE" ;;
        esac
    done
done
rm -rf "$DIR/store" "$DIR/tcpdump.pcap" "$DIR/dd.bin"

note "retrieval phase: storing $HTRACE"
"$TRAWL" dump -r "$HTRACE" -w "$DIR/hour" --summary json 2>"$DIR/hour-dump.json"
# The window: one minute from the middle of the hour; the host: the source of its first IPv4
# packet.
first=$("$TRAWL" packets -r "$DIR/hour" --count 1 -w - --summary none | tcpdump -r - -tt -n 2>/dev/null | awk '{print $1}')
from=$(awk -v f="$first" 'BEGIN { printf "%.6f", f + 1800 }')
to=$(awk -v f="$from" 'BEGIN { printf "%.6f", f + 60 }')
host=$("$TRAWL" packets -r "$DIR/hour" --from "$from" -f ip --count 1 -w - --summary none |
    tcpdump -r - -n 2>/dev/null | awk '{ split($3, a, "."); print a[1] "." a[2] "." a[3] "." a[4] }')
[ -n "$host" ] || die "no IPv4 packet in the window"
note "window $from..$to, host $host"
HBYTES=$(stat -c %s "$HTRACE")
for run in $(seq 1 "$RUNS"); do
    cold
    cat "$TRAWL" "$(command -v tcpdump)" >/dev/null
    timed extract trawl-window "$run" "$HBYTES" \
        "$TRAWL" packets -r "$DIR/hour" --from "$from" --to "$to" -f "host $host" \
        -w "$DIR/window.pcap" --summary json
    cold
    cat "$TRAWL" >/dev/null
    timed extract trawl-window-noindex "$run" "$HBYTES" \
        "$TRAWL" packets -r "$DIR/hour" --from "$from" --to "$to" -f "host $host or host $host" \
        -w "$DIR/window2.pcap" --summary json
    cold
    cat "$TRAWL" >/dev/null
    timed extract trawl-fullscan "$run" "$HBYTES" \
        "$TRAWL" packets -r "$DIR/hour" -f "host $host or host $host" -w "$DIR/full.pcap" --summary json
    cold
    cat "$(command -v tcpdump)" >/dev/null
    timed extract tcpdump-fullscan "$run" "$HBYTES" \
        tcpdump -r "$HTRACE" -w "$DIR/full-tcpdump.pcap" "host $host"
done
# The same packets both ways (the window is a subset of the full scan).
n_trawl=$(tcpdump -r "$DIR/full.pcap" -n 2>/dev/null | wc -l)
n_tcpdump=$(tcpdump -r "$DIR/full-tcpdump.pcap" -n 2>/dev/null | wc -l)
[ "$n_trawl" = "$n_tcpdump" ] || die "full scans disagree: trawl $n_trawl packets, tcpdump $n_tcpdump"
n_window=$(tcpdump -r "$DIR/window.pcap" -n 2>/dev/null | wc -l)
n_window2=$(tcpdump -r "$DIR/window2.pcap" -n 2>/dev/null | wc -l)
[ "$n_window" = "$n_window2" ] || die "window with and without the index disagree: $n_window vs $n_window2"
rm -rf "$DIR/hour" "$DIR"/*.pcap

{
    echo "date=$(date -u +%FT%TZ)"
    echo "args=$ARGS_GIVEN"
    echo "kernel=$(uname -r)"
    echo "cpus=$(nproc)"
    echo "fs=$(df -T "$DIR" | awk 'NR==2 {print $1, $2}')"
    echo "tcpdump=$(tcpdump --version 2>&1 | head -1)"
    echo "trace_write=$WTRACE bytes=$WBYTES"
    echo "trace_hour=$HTRACE bytes=$HBYTES window=$from..$to host=$host packets_window=$n_window packets_full=$n_trawl"
} >"$WORK/dump-env.txt"

# Medians per tool, MB/s and ratios.
awk -F, '
function median(tool,   n, i, j, t, v) {
    n = cnt[tool]
    for (i = 1; i <= n; i++) v[i] = w[tool, i]
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
NR > 1 { cnt[$2]++; w[$2, cnt[$2]] = $5; bytes[$2] = $4; phase[$2] = $1; cpu[$2] += $6 + $7 }
END {
    printf "%-22s %9s %9s %9s %s\n", "tool", "median_s", "MB/s", "cpu_s", "ratio"
    split("read dd-direct dd-fsync trawl trawl-ring trawl-buffered tcpdump tcpdump-nosync", wt, " ")
    dd = median("dd-direct"); tr = median("trawl"); td = median("tcpdump")
    for (k = 1; k <= 8; k++) {
        t = wt[k]; if (!(t in cnt)) continue
        m = median(t)
        r = ""
        if (t == "trawl" || t == "trawl-ring") r = sprintf("%.2f of dd-direct, %.2fx tcpdump (with sync), %.2fx tcpdump-nosync", dd / m, td / m, median("tcpdump-nosync") / m)
        if (t == "trawl-buffered") r = sprintf("%.2f of dd-fsync", median("dd-fsync") / m)
        printf "%-22s %9.2f %9.0f %9.2f %s\n", t, m, bytes[t] / m / 1e6, cpu[t] / cnt[t], r
    }
    split("trawl-window trawl-window-noindex trawl-fullscan tcpdump-fullscan", et, " ")
    win = median("trawl-window")
    for (k = 1; k <= 4; k++) {
        t = et[k]; if (!(t in cnt)) continue
        m = median(t)
        printf "%-22s %9.2f %9s %9.2f window/this = 1/%.1f\n", t, m, "-", cpu[t] / cnt[t], m / win
    }
}' "$CSV"
note "rows in $CSV, environment in $WORK/dump-env.txt"
