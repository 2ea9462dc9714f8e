#!/usr/bin/env bash
# The block runtime's benchmark (issue 7), everything side by side in one run:
#
# 1. Framework overhead: the same work (read a trace, meter flows, hand records on in batches
#    of 256) as one plain loop without blocks, as a composition on one thread (direct calls),
#    and with the meter on a second core (queues). On a worst-case trace (64-byte packets) and
#    a realistic one. Target: under 10 % (Blockmon's was 10-15 %).
# 2. Queue hand-off: cost per message of a direct call and of a queue between two pinned
#    threads, with and without per-call timing.
# 3. Parallel chains: N chains (pcap_source -> flow_meter), one per core, against one.
# 4. The SYN-flood detector as a block against the same detector in a plain loop, on the
#    worst-case trace (the detector decodes every packet; its own worst case, every packet a SYN
#    to a new destination, is in crates/detect/examples/synflood_rate.rs).
#
#   bench/compose.sh [--quick] [--runs N] [--no-build]
#
# Traces: 5 M 64-byte packets over 1 M flows, and trace (a) of bench/run.sh (2.2 GB realistic);
# --quick: 1 M packets and the 350 MB realistic trace.
#
# CPU time (user + system) of the process is what the ratios use; the machine's 2 vCPUs are
# shared, so run it on a quiet machine. Results on stdout; bench/work/compose-env.txt.
set -euo pipefail
export LC_ALL=C

QUICK=0
RUNS=5
BUILD=1
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=1 ;;
        --runs) RUNS=${2:?--runs needs a number}; shift ;;
        --no-build) BUILD=0 ;;
        -h | --help) sed -n '2,19p' "$0"; exit 0 ;;
        *) echo "compose.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "compose.sh: error: $*" >&2; exit 1; }
note() { echo "== $*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
WORK=$BENCH/work
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
CB=$TARGET_DIR/release/compose-bench
TRACEGEN=$TARGET_DIR/release/tracegen
mkdir -p "$WORK"
# shellcheck source=bench/lib.sh
. "$BENCH/lib.sh"

if [ "$BUILD" = 1 ]; then
    note "building (release, target dir $TARGET_DIR)"
    (cd "$ROOT" && cargo build --release -q -p trawl-compose-bench -p trawl-tracegen) || die "build failed"
fi
[ -x "$CB" ] && [ -x "$TRACEGEN" ] || die "binaries missing in $TARGET_DIR/release"

if [ "$QUICK" = 1 ]; then
    B=$(make_trace worst-1m worstcase --packets 1000000 --flows 100000)
    A=$(make_trace a-quick realistic --target-bytes 350000000)
else
    B=$(make_trace worst-5m worstcase --packets 5000000 --flows 1000000)
    A=$(make_trace a realistic --target-bytes 2200000000)
fi
cat "$A" "$B" >/dev/null # into the page cache

{
    echo "date=$(date -u +%FT%TZ)"
    echo "commit=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo -dirty)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
    echo "cpus=$(nproc)"
    echo "load_before=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "rustc=$(rustc --version 2>/dev/null || echo unknown)"
} | tee "$WORK/compose-env.txt"

echo
echo "### Framework overhead, worst-case trace ($(basename "$B"))"
"$CB" overhead --trace "$B" --runs "$RUNS"
echo
echo "### Framework overhead, realistic trace ($(basename "$A"))"
"$CB" overhead --trace "$A" --runs "$RUNS"
echo
echo "### Queue hand-off"
"$CB" handoff --messages 2000000 --runs "$RUNS"
echo
echo "### Parallel chains ($(basename "$B"))"
"$CB" chains --trace "$B" --runs "$((RUNS > 3 ? 3 : RUNS))"
echo
echo "### SYN-flood detector as a block ($(basename "$B"))"
"$CB" synflood --trace "$B" --runs "$RUNS"
echo
echo "load_after=$(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/compose-env.txt"
