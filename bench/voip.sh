#!/usr/bin/env bash
# VoIP benchmark (issue 24): `trawl voip` against tshark's `-q -z rtp,streams` and against the
# read limit (a composition that only reads the file and counts packets), on synthetic operator
# traces made by voipgen (bench/tracegen/src/voipgen.rs):
#
#   dense: 1,000 concurrent calls, 100 new calls/s, G.711 20 ms RTP both ways, 200-byte
#          frames, 20 s of calls (2.2 M packets): packet rate, and tshark on the same file.
#   scale: 100,000 concurrent calls, 2,000 new calls/s, one RTP packet per 5 s each way
#          (110,000 calls): the call table at the issue's scale; memory per concurrent call.
#
#   bench/voip.sh [--no-build] [--no-tshark]
#   PROFILE=profiling bench/voip.sh ...   (the release build with symbols, for perf; default release)
#
# Each trawl run is checked: every generated call and stream found, no loss, the right number
# of packets per stream. CPU time (user + system) and peak RSS from /usr/bin/time. Results on
# stdout and in bench/work/voip.txt; the traces are deleted at the end.
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/bench/work
BUILD=1
TSHARK=1
for a in "$@"; do
    case $a in
        --no-build) BUILD=0 ;;
        --no-tshark) TSHARK=0 ;;
        *) echo "voip.sh: unknown argument $a" >&2; exit 2 ;;
    esac
done
mkdir -p "$WORK"
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROFILE=${PROFILE:-release}
if [ "$BUILD" = 1 ]; then
    (cd "$ROOT" && cargo build --profile "$PROFILE" -q -p trawl-cli -p trawl-tracegen)
fi
TRAWL=$TARGET/$PROFILE/trawl
GEN=$TARGET/$PROFILE/voipgen
OUT=$WORK/voip.txt
: >"$OUT"
say() { echo "$*" | tee -a "$OUT"; }

# measure NAME CMD...: one run; prints "NAME cpu_s wall_s max_rss_kb".
measure() {
    local name=$1
    shift
    /usr/bin/time -f "%U %S %e %M" -o "$WORK/time.txt" "$@" >/dev/null 2>"$WORK/$name.err" ||
        { cat "$WORK/$name.err" >&2; exit 1; }
    read -r user sys wall rss <"$WORK/time.txt"
    say "$(printf '%-14s cpu %7.2f s  wall %7.2f s  max_rss %8d KB' "$name" "$(echo "$user + $sys" | bc)" "$wall" "$rss")"
}

# check DIR EXPECT_JSON: every call and stream found, no loss, all packets.
check() {
    python3 - "$1" "$2" <<'PY'
import json, sys
d, want = sys.argv[1], json.loads(sys.argv[2])
calls = [json.loads(l) for l in open(d + "/calls.jsonl")]
streams = [json.loads(l) for l in open(d + "/rtp.jsonl")]
assert len(calls) == want["calls"], (len(calls), want)
assert all(c["end_reason"] == "bye_caller" and c["status"] == 200 and c["streams"] == 2 for c in calls)
assert len(streams) == want["streams"], (len(streams), want)
n = want["rtp_packets_per_stream"]
assert all(s["packets"] == n and s["lost"] == 0 and not s["orphan"] for s in streams)
print("checked: %d calls, %d streams, %d RTP packets each, no loss" % (len(calls), len(streams), n))
PY
}

{
    echo "date=$(date -u +%FT%TZ) commit=$(git -C "$ROOT" rev-parse --short HEAD)$(git -C "$ROOT" diff --quiet || echo -dirty)"
    echo "cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //') cpus=$(nproc) load=$(cut -d' ' -f1-3 /proc/loadavg)"
    echo "tshark=$(tshark --version | head -1)"
} | tee -a "$OUT"

cat >"$WORK/read.toml" <<'TOML'
[[block]]
name = "file"
type = "pcap_source"
files = ["TRACE"]
[[block]]
name = "count"
type = "count"
[[connection]]
from = "file.packets"
to = "count.in"
TOML

run_trace() {
    local name=$1
    shift
    local trace=$WORK/voip-$name.pcap
    local want
    want=$("$GEN" "$@" -o "$trace")
    say ""
    say "### $name: $want ($(du -m "$trace" | cut -f1) MB)"
    cat "$trace" >/dev/null
    sed "s|TRACE|$trace|" "$WORK/read.toml" >"$WORK/read-$name.toml"
    measure read-limit "$TRAWL" run -c "$WORK/read-$name.toml" --summary none
    measure trawl-voip "$TRAWL" voip -r "$trace" -o "$WORK/voip-$name"
    check "$WORK/voip-$name" "$want" | tee -a "$OUT"
    if [ "$TSHARK" = 1 ] && [ "$name" = dense ]; then
        measure tshark tshark -q -z rtp,streams -r "$trace"
        local n
        n=$(tshark -q -z rtp,streams -r "$trace" 2>/dev/null | grep -c ' 0x')
        say "tshark streams: $n"
    fi
    rm -f "$trace"
}

run_trace dense --concurrent 1000 --rate 100 --seconds 20
run_trace scale --concurrent 100000 --rate 2000 --seconds 55 --ptime-ms 5000
say ""
say "load_after=$(cut -d' ' -f1-3 /proc/loadavg)"
