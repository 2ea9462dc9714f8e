#!/usr/bin/env bash
# trawl's export benchmark (issue 5):
#   1. records exported per CPU second (producer + exporter thread): IPFIX over UDP to a sink
#      socket that never reads, at 1472-byte messages (Ethernet MTU) with UDP segmentation
#      offload (the default) and without, 8972 (jumbo) and 65000; as root also into a veth
#      whose peer is down (dropped at transmit: no receive path; it takes whole segmented
#      trains, as a NIC with UDP segmentation offload does);
#   2. collector records decoded per CPU second: the same IPFIX stream (synthetic records,
#      deterministic) replayed at a fixed pace into `trawl collect` (without output, into a
#      flow database, as JSON) and into nfdump's nfcapd, one after the other, each receiver's
#      CPU time read from /proc around the replay. Two forms of the stream: one datagram per
#      send, messages as long as whole records allow (what other exporters send), and trawl's
#      exporter layout (full messages filled to 1472 bytes, sent in UDP_SEGMENT trains, which
#      the kernel cuts into datagrams for nfcapd and hands to trawl collect as UDP_GRO trains).
#
#   bench/export.sh [--records N] [--stream-records N] [--rate DATAGRAMS_PER_S] [--no-install]
#                   [--no-export] [--repeat N]
#
# TRAWL_BIN=PATH measures that trawl binary as the collector instead of building one here
# (old against new: run it once with each, alternately; a `bench`-profile build has symbols
# for perf and takes the time of one release build).
#
# Each receiver takes the stream --repeat times (default 3), the receivers in turn; the run
# with the median CPU time is reported.
#
# Installs nfdump when missing (apt-get). Prints a table and ratios; raw output in
# bench/work/export/.
set -euo pipefail
export LC_ALL=C

RECORDS=4000000
STREAM_RECORDS=1000000
RATE=40000
INSTALL=1
EXPORT=1
REPEAT=3
while [ $# -gt 0 ]; do
    case $1 in
        --records) RECORDS=$2; shift ;;
        --stream-records) STREAM_RECORDS=$2; shift ;;
        --rate) RATE=$2; shift ;;
        --no-install) INSTALL=0 ;;
        --no-export) EXPORT=0 ;;
        --repeat) REPEAT=$2; shift ;;
        *) echo "export.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=$ROOT/bench/work/export
mkdir -p "$WORK"
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
note() { echo "== $*" >&2; }

if ! command -v nfcapd >/dev/null 2>&1; then
    [ "$INSTALL" = 1 ] || { echo "export.sh: nfcapd missing (apt-get install nfdump)" >&2; exit 1; }
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends nfdump
fi

if [ -z "${TRAWL_BIN:-}" ]; then
    note "building (release)"
    (cd "$ROOT" && cargo build --release -q -p trawl-cli)
fi
BENCH_BIN=$(cd "$ROOT" && cargo bench -q -p trawl-export --bench export_throughput --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
TRAWL=${TRAWL_BIN:-$TARGET_DIR/release/trawl}
[ -x "$BENCH_BIN" ] && [ -x "$TRAWL" ] || { echo "export.sh: build products missing" >&2; exit 1; }

# CPU time of all live threads of a process, ns (schedstat: exact, where the user/system
# split of /proc/PID/stat is tick-sampled and, on this VM, biased towards whichever mode the
# timer tick wakes a sleeping process in).
cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.0f", s }'; }

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs)"
    echo "kernel: $(uname -r)"
    echo "nfdump: $(nfdump -V 2>&1 | head -1)"
    echo "rustc: $(rustc --version)"
} > "$WORK/env.txt"

: > "$WORK/encode.txt"
if [ "$EXPORT" = 1 ]; then
note "export: $RECORDS records per message size, to a loopback socket that never reads"
for m in "1472 - gso" "1472 - nogso" "8972 - gso" "65000 - gso"; do
    # shellcheck disable=SC2086
    "$BENCH_BIN" encode "$RECORDS" $m | sed 's/^/bench=loopback /' | tee -a "$WORK/encode.txt"
done
# The loopback sink makes the sender pay the kernel's receive path too. As root, also send
# into a veth whose peer is down: the datagrams are dropped at transmit, as a NIC's queue
# would take them (198.51.100.0/24 is a documentation prefix; a permanent neighbour entry
# avoids ARP). A veth takes whole segmented trains, as a NIC with UDP segmentation offload
# does.
if [ "$(id -u)" -eq 0 ]; then
    dev=tbx$$
    ip link add "$dev" type veth peer name "${dev}p"
    trap 'ip link del "$dev" 2>/dev/null || true' EXIT
    ip link set "$dev" mtu 9000 up
    ip addr add 198.51.100.1/24 dev "$dev"
    ip neigh replace 198.51.100.2 lladdr 02:00:00:00:00:02 dev "$dev" nud permanent
    for m in "1472 gso" "1472 nogso" "8972 gso"; do
        # shellcheck disable=SC2086
        set -- $m
        "$BENCH_BIN" encode "$RECORDS" "$1" 198.51.100.2:4739 "$2" | sed 's/^/bench=veth-uso /' | tee -a "$WORK/encode.txt"
    done
    ip link del "$dev"
    trap - EXIT
fi
fi

note "collector: $STREAM_RECORDS records as IPFIX datagrams, replayed at $RATE datagrams/s"
"$BENCH_BIN" stream "$STREAM_RECORDS" "$WORK/stream.bin" | tee "$WORK/stream.txt"
"$BENCH_BIN" stream "$STREAM_RECORDS" "$WORK/stream-fill.bin" fill > "$WORK/stream-fill.txt"
DATAGRAMS=$(sed -n 's/.*datagrams=\([0-9]*\).*/\1/p' "$WORK/stream.txt")

# One receiver on PORT (the word PORT in its command is replaced): starts it, replays the
# stream into it, prints the CPU time (ns) it used meanwhile.
receive() { # label, stream (plain|trains), port, receiver command...
    local label=$1 form=$2 PORT=$3
    shift 3
    local file=$WORK/stream.bin replay_opt=
    if [ "$form" = trains ]; then file=$WORK/stream-fill.bin; replay_opt=gso; fi
    local cmd=("${@//PORT/$PORT}")
    "${cmd[@]}" > /dev/null 2> "$WORK/$label-$form.err" &
    local pid=$!
    sleep 1
    local c0 c1
    c0=$(cpu_ns $pid)
    "$BENCH_BIN" replay "$file" "127.0.0.1:$PORT" "$RATE" $replay_opt > "$WORK/replay-$label-$form.txt"
    sleep 1
    c1=$(cpu_ns $pid)
    kill -INT $pid
    wait $pid || true
    echo "$((c1 - c0))"
}
trawl_flows() { tail -1 "$WORK/$1.err" | sed -n 's/.*"flows":\([0-9]*\).*/\1/p'; }
nfcapd_flows() {
    local n
    n=$(nfdump -R "$WORK/nfcapd" -q -o csv 2>/dev/null | grep -c . || true)
    # `-q -o csv` has a header line in nfdump 1.7: subtract it when present.
    if nfdump -R "$WORK/nfcapd" -q -o csv 2>/dev/null | head -1 | grep -q '^ts,'; then n=$((n - 1)); fi
    echo "$n"
}

: > "$WORK/collect.txt"
port=47390
for form in plain trains; do
for _ in $(seq "$REPEAT"); do
    port=$((port + 5))
    t=$(receive nodb "$form" $port "$TRAWL" collect --listen udp://127.0.0.1:PORT --no-output --summary json)
    echo "$form trawl-no-output $t $(trawl_flows nodb-$form)" >> "$WORK/collect.txt"
    rm -rf "$WORK/db"
    t=$(receive db "$form" $((port + 1)) "$TRAWL" collect --listen udp://127.0.0.1:PORT --no-output --db "$WORK/db" --summary json)
    echo "$form trawl-db $t $(trawl_flows db-$form)" >> "$WORK/collect.txt"
    t=$(receive nowait "$form" $((port + 4)) "$TRAWL" collect --listen udp://127.0.0.1:PORT --no-output --recv-wait 0 --summary json)
    echo "$form trawl-no-wait $t $(trawl_flows nowait-$form)" >> "$WORK/collect.txt"
    t=$(receive json "$form" $((port + 2)) "$TRAWL" collect --listen udp://127.0.0.1:PORT -o /dev/null --summary json)
    echo "$form trawl-json $t $(trawl_flows json-$form)" >> "$WORK/collect.txt"
    # nfcapd: writes its binary flow files (that is its output); SIGINT ends it cleanly too.
    rm -rf "$WORK/nfcapd" && mkdir -p "$WORK/nfcapd"
    t=$(receive nfcapd "$form" $((port + 3)) nfcapd -p PORT -b 127.0.0.1 -w "$WORK/nfcapd")
    echo "$form nfcapd $t $(nfcapd_flows)" >> "$WORK/collect.txt"
done
done
cat "$WORK/collect.txt"

python3 - "$STREAM_RECORDS" "$DATAGRAMS" "$RATE" "$WORK/encode.txt" "$WORK/collect.txt" <<'PY' | tee "$WORK/summary.txt"
import re, sys
sent, dgrams, rate, enc, col = sys.argv[1:]
print("export (IPFIX over UDP; producer + exporter CPU):")
for line in open(enc):
    kv = dict(re.findall(r"(\w+)=([\w.-]+)", line))
    sink = {"loopback": "loopback socket", "veth-uso": "veth, dropped at transmit"}[kv["bench"]]
    print(f"  {sink:26} max message {kv['max_message']:>5} B, offload {kv['gso']:>5}: "
          f"{float(kv['records_per_cpu_s'])/1e6:5.2f} M records/CPU-s, "
          f"{float(kv['records_per_cpu_s'])*float(kv['messages_per_record'])/1e3:6.0f} k datagrams/CPU-s, "
          f"allocations/record {kv['allocations_per_record']}")
rows = [l.split() for l in open(col) if l.strip()]
for form in ("plain", "trains"):
    what = {"plain": "one datagram per send", "trains": "trawl's layout in UDP_SEGMENT trains"}[form]
    print(f"collector, {what} ({sent} records in {dgrams} datagrams at {rate}/s):")
    runs = {}
    for r in rows:
        if r[0] == form:
            runs.setdefault(r[1], []).append((int(r[2]) / 1e9, int(r[3] or 0)))
    # The run with the median CPU time of each receiver (and the spread of all its runs).
    got = {key: sorted(v)[len(v) // 2] for key, v in runs.items()}
    spread = {key: (min(c for c, _ in v), max(c for c, _ in v)) for key, v in runs.items()}
    ncpu, nf = got["nfcapd"]
    nr = nf / ncpu if ncpu > 0 else float("nan")
    names = {"trawl-no-output": "trawl collect --no-output", "trawl-db": "trawl collect --db",
             "trawl-no-wait": "trawl collect --no-output --recv-wait 0",
             "trawl-json": "trawl collect (JSON to /dev/null)", "nfcapd": "nfcapd (nfcapd files)"}
    for key in ("trawl-no-output", "trawl-no-wait", "trawl-db", "trawl-json", "nfcapd"):
        cpu, n = got[key]
        lo, hi = spread[key]
        r = n / cpu if cpu > 0 else float("nan")
        print(f"  {names[key]:40} {n:>8} records, {cpu:5.3f} CPU-s (runs {lo:5.3f}-{hi:5.3f}), "
              f"{r/1e3:6.0f} k records/CPU-s, {r/nr:4.2f}x nfcapd")
PY
