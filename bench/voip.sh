#!/usr/bin/env bash
# VoIP benchmark (issue 24): `trawl voip` against tshark's `-q -z rtp,streams` and against the
# read limit (a composition that only reads the file and counts packets), on synthetic operator
# traces made by voipgen (bench/tracegen/src/voipgen.rs):
#
#   dense:    1,000 concurrent calls, 100 new calls/s, G.711 20 ms RTP both ways, 200-byte
#             frames, 20 s of calls (2.2 M packets), every call whole.
#   operator: the issue's trace: 100,000 concurrent calls, 1,000 new calls/s (each 100 s of
#             RTP after a 1 s set-up), G.711 20 ms both ways, 200-byte frames. 102 s of
#             warm-up sets the calls up (their SIP only: the RTP of those 102 s would be
#             200 GB), then WINDOW (1) s of everything: 10 M RTP packets per second, about
#             1,000 calls ending and 1,000 starting per second. The same trace cut at the
#             window (`--seconds 0`: the warm-up alone) is measured too: the difference is the
#             window's cost.
#   steady:   the operator trace with one second more (`--seconds WINDOW+1`). The window's first
#             second holds the first RTP packet of every one of the 200,000 streams (the
#             warm-up carries no RTP), which a link in its steady state never sees at once
#             (1,000 new calls a second start 2,000 streams); the extra second is 10 M RTP
#             packets of the steady state: steady - operator is their cost (both traces end
#             with the same calls and streams in progress, so the records written at the end
#             cancel out).
#
#   bench/voip.sh [--no-build] [--no-tshark]
#   WINDOW=2 bench/voip.sh ...            (seconds of the operator trace's window)
#   PROFILE=profiling bench/voip.sh ...   (the release build with symbols, for perf; default release)
#
# Each trawl run is checked against what voipgen wrote (`--expect`): every call with its end
# (BYE, or in progress at the cut) and status, every stream with exactly its packets, no loss,
# no orphans. CPU time (user + system) and peak RSS from /usr/bin/time. Results on stdout and
# in bench/work/voip.txt; the traces are deleted at the end.
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$ROOT/bench/work
BUILD=1
TSHARK=1
WINDOW=${WINDOW:-1}
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

# measure NAME CMD...: one run (its output in $WORK/NAME.out); prints "NAME cpu_s wall_s max_rss_kb".
declare -A CPU
measure() {
    local name=$1
    shift
    /usr/bin/time -f "%U %S %e %M" -o "$WORK/time.txt" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" ||
        { cat "$WORK/$name.err" >&2; exit 1; }
    read -r user sys wall rss <"$WORK/time.txt"
    CPU[$name]=$(echo "$user + $sys" | bc)
    say "$(printf '%-20s cpu %7.2f s  wall %7.2f s  max_rss %8d KB' "$name" "$(echo "$user + $sys" | bc)" "$wall" "$rss")"
}

# check DIR EXPECT_FILE: every call with its end and status, every stream with its packets.
check() {
    python3 - "$1" "$2" <<'PY'
import json, sys
d, expect = sys.argv[1], sys.argv[2]
want = {}
for line in open(expect):
    call_id, reason, status, fwd, bwd = line.split()
    want[call_id] = (reason, int(status), int(fwd), int(bwd))
calls = [json.loads(l) for l in open(d + "/calls.jsonl")]
streams = [json.loads(l) for l in open(d + "/rtp.jsonl")]
assert len(calls) == len(want), ("calls", len(calls), len(want))
got_streams = {}
for s in streams:
    assert not s["orphan"] and s["lost"] == 0 and s["duplicated"] == 0, s
    got_streams[(s["call_id"], s["ssrc"] % 2)] = s["packets"]
n_streams, n_packets = 0, 0
for c in calls:
    reason, status, fwd, bwd = want[c["call_id"]]
    n = (fwd > 0) + (bwd > 0)
    assert (c["end_reason"], c["status"], c["streams"], c["rtp_packets"]) == (reason, status, n, fwd + bwd), (c, want[c["call_id"]])
    for direction, packets in ((0, fwd), (1, bwd)):
        if packets:
            assert got_streams[(c["call_id"], direction)] == packets, (c["call_id"], direction)
    n_streams += n
    n_packets += fwd + bwd
assert len(streams) == n_streams, ("streams", len(streams), n_streams)
ended = sum(1 for c in calls if c["end_reason"] == "bye_caller")
print("checked: %d calls (%d ended by BYE, %d in progress at the end), %d streams, %d RTP packets, each stream exact, no loss"
      % (len(calls), ended, len(calls) - ended, len(streams), n_packets))
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
    want=$("$GEN" "$@" --expect "$WORK/voip-$name.expect" -o "$trace")
    echo "$want" >"$WORK/voip-$name.json"
    say ""
    say "### $name: voipgen $* ($(du -m "$trace" | cut -f1) MB)"
    say "$want"
    cat "$trace" >/dev/null
    sed "s|TRACE|$trace|" "$WORK/read.toml" >"$WORK/read-$name.toml"
    measure "$name-read-limit" "$TRAWL" run -c "$WORK/read-$name.toml" --summary none
    measure "$name-trawl" "$TRAWL" voip -r "$trace" -o "$WORK/voip-$name"
    check "$WORK/voip-$name" "$WORK/voip-$name.expect" | tee -a "$OUT"
    if [ "$TSHARK" = 1 ] && [ "$name" != warmup ] && [ "$name" != steady ]; then
        measure "$name-tshark" tshark -q -z rtp,streams -r "$trace"
        say "tshark streams: $(grep -c ' 0x' "$WORK/$name-tshark.out")"
    fi
    rm -f "$trace"
}

run_trace dense --concurrent 1000 --rate 100 --seconds 20
OPERATOR="--concurrent 100000 --rate 1000 --warmup 102"
# shellcheck disable=SC2086 # word splitting intended
run_trace warmup $OPERATOR --seconds 0
# shellcheck disable=SC2086
run_trace operator $OPERATOR --seconds "$WINDOW"
# shellcheck disable=SC2086
run_trace steady $OPERATOR --seconds "$((WINDOW + 1))"
# The window by difference: what the operator trace cost beyond its warm-up.
python3 - "${CPU[operator-trawl]}" "${CPU[warmup-trawl]}" "$WORK/voip-operator.json" "$WORK/voip-warmup.json" \
    "${CPU[steady-trawl]}" "$WORK/voip-steady.json" <<'PY' | tee -a "$OUT"
import json, sys
full, warm, longer = float(sys.argv[1]), float(sys.argv[2]), float(sys.argv[5])
op, wu, st = json.load(open(sys.argv[3])), json.load(open(sys.argv[4])), json.load(open(sys.argv[6]))
print("operator trace, all of it: %.2f M packets (%.2f M RTP) in %.2f CPU s: %.2f M packets/CPU s"
      % (op["packets"] / 1e6, op["rtp_packets"] / 1e6, full, op["packets"] / full / 1e6))
print("warm-up alone: %d calls set up (%d packets) in %.2f CPU s: %.0f k calls/CPU s"
      % (wu["calls"], wu["packets"], warm, wu["calls"] / warm / 1e3))
d = full - warm
print("window (%d s, %d calls up when it opens): %.2f M packets (%.2f M RTP) in %.2f CPU s: %.2f M RTP packets/CPU s"
      % (op["window_s"], op["calls_up_at_window"], op["window_packets"] / 1e6, op["window_rtp_packets"] / 1e6, d,
         op["window_rtp_packets"] / d / 1e6 if d > 0 else float("inf")))
s = longer - full
rtp = st["window_rtp_packets"] - op["window_rtp_packets"]
print("steady state (the window's second %d, %d streams started in it): %.2f M RTP packets in %.2f CPU s: %.2f M RTP packets/CPU s"
      % (st["window_s"], st["streams"] - op["streams"], rtp / 1e6, s, rtp / s / 1e6 if s > 0 else float("inf")))
PY
say ""
say "load_after=$(cut -d' ' -f1-3 /proc/loadavg)"
