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
# One run measures the window too: `trawl voip --stats-every 1s` writes the process's CPU time
# (every thread, getrusage) when the packets' time reaches each second and at the input's end
# (stats.jsonl), so the window is the operator run's end line less its line at the window's
# start (voipgen's window_from_ns), and the steady second the steady run's end line less its
# line a second later: no difference of two processes (bench/RESULTS.md, "Session of
# 2026-11-28 late morning: VoIP"). The differences of runs are still printed.
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
    # The trace's gigabytes are written back now rather than by the kernel's flushers during
    # the runs measured (reclaim and compaction then land in trawl's system time).
    sync "$trace"
    say ""
    say "### $name: voipgen $* ($(du -m "$trace" | cut -f1) MB)"
    say "$want"
    cat "$trace" >/dev/null
    sed "s|TRACE|$trace|" "$WORK/read.toml" >"$WORK/read-$name.toml"
    measure "$name-read-limit" "$TRAWL" run -c "$WORK/read-$name.toml" --summary none
    measure "$name-trawl" "$TRAWL" voip -r "$trace" -o "$WORK/voip-$name" --stats-every 1s
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
# The window in one run: the process's CPU time (every thread) when the packets' time reaches
# the window's start and at the input's end (before the calls in progress are written), from
# `trawl voip --stats-every 1s` (stats.jsonl); the steady trace's window is its first second,
# its steady state the second after.
python3 - "$WORK" <<'PY' | tee -a "$OUT"
import json, sys
work = sys.argv[1]
def run(name):
    meta = json.load(open("%s/voip-%s.json" % (work, name)))
    lines = {}
    for l in open("%s/voip-%s/stats.jsonl" % (work, name)):
        l = json.loads(l)
        lines["end" if l["end"] else l["ts_ns"]] = l
    return meta, lines
def say(what, a, b, rtp):
    cpu = b["cpu_s"] - a["cpu_s"]
    print("%s, one run: %.2f M RTP packets in %.2f CPU s (user %.2f, system %.2f): %.2f M RTP packets/CPU s"
          % (what, rtp / 1e6, cpu, b["cpu_user_s"] - a["cpu_user_s"], b["cpu_system_s"] - a["cpu_system_s"],
             rtp / cpu / 1e6))
    assert b["rtp_packets"] - a["rtp_packets"] == rtp, (a, b, rtp)
op, lines = run("operator")
start = op["window_from_ns"]
say("window (operator trace, %d s)" % op["window_s"], lines[start], lines["end"], op["window_rtp_packets"])
print("memory: peak RSS %d KB with %d calls held (%d streams): %.2f KB per call with its streams"
      % (lines["end"]["max_rss_kb"], lines["end"]["active_calls"], lines["end"]["active_streams"],
         lines["end"]["max_rss_kb"] / lines["end"]["active_calls"]))
st, lines = run("steady")
second = start + op["window_s"] * 10**9
say("window (steady trace, its first %d s)" % op["window_s"], lines[start], lines[second], op["window_rtp_packets"])
say("steady second (steady trace)", lines[second], lines["end"], st["window_rtp_packets"] - op["window_rtp_packets"])
PY
say ""
say "load_after=$(cut -d' ' -f1-3 /proc/loadavg)"
