#!/usr/bin/env bash
# trawl's export benchmark (issue 5):
#   1. records exported per CPU second (producer + exporter thread): IPFIX over UDP to a sink
#      socket that never reads, at 1472-byte messages (Ethernet MTU), 8972 (jumbo) and 65000;
#      as root also into a veth whose peer is down (dropped at transmit: no receive path);
#   2. collector records decoded per CPU second: the same IPFIX stream (synthetic records,
#      deterministic) replayed at a fixed pace into `trawl collect` and into nfdump's nfcapd,
#      one after the other, each receiver's CPU time read from /proc around the replay.
#
#   bench/export.sh [--records N] [--stream-records N] [--rate DATAGRAMS_PER_S] [--no-install]
#
# Installs nfdump when missing (apt-get). Prints a table and ratios; raw output in
# bench/work/export/.
set -euo pipefail
export LC_ALL=C

RECORDS=4000000
STREAM_RECORDS=1000000
RATE=40000
INSTALL=1
while [ $# -gt 0 ]; do
    case $1 in
        --records) RECORDS=$2; shift ;;
        --stream-records) STREAM_RECORDS=$2; shift ;;
        --rate) RATE=$2; shift ;;
        --no-install) INSTALL=0 ;;
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

note "building (release)"
(cd "$ROOT" && cargo build --release -q -p trawl-cli)
BENCH_BIN=$(cd "$ROOT" && cargo bench -q -p trawl-export --bench export_throughput --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' | tail -1)
TRAWL=$TARGET_DIR/release/trawl
[ -x "$BENCH_BIN" ] && [ -x "$TRAWL" ] || { echo "export.sh: build products missing" >&2; exit 1; }

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK=$(getconf CLK_TCK)

{
    echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //') ($(nproc) CPUs)"
    echo "kernel: $(uname -r)"
    echo "nfdump: $(nfdump -V 2>&1 | head -1)"
    echo "rustc: $(rustc --version)"
} > "$WORK/env.txt"

note "export: $RECORDS records per message size, to a loopback socket that never reads"
: > "$WORK/encode.txt"
for m in 1472 8972 65000; do
    "$BENCH_BIN" encode "$RECORDS" "$m" | tee -a "$WORK/encode.txt"
done
# The loopback sink makes the sender pay the kernel's receive path too. As root, also send
# into a veth whose peer is down: the datagrams are dropped at transmit, as a NIC's queue
# would take them (198.51.100.0/24 is a documentation prefix; a permanent neighbour entry
# avoids ARP).
if [ "$(id -u)" -eq 0 ]; then
    dev=tbx$$
    ip link add "$dev" type veth peer name "${dev}p"
    trap 'ip link del "$dev" 2>/dev/null || true' EXIT
    ip link set "$dev" mtu 9000 up
    ip addr add 198.51.100.1/24 dev "$dev"
    ip neigh replace 198.51.100.2 lladdr 02:00:00:00:00:02 dev "$dev" nud permanent
    for m in 1472 8972; do
        "$BENCH_BIN" encode "$RECORDS" "$m" 198.51.100.2:4739 | tee -a "$WORK/encode.txt"
    done
    ip link del "$dev"
    trap - EXIT
fi

note "collector: $STREAM_RECORDS records as IPFIX datagrams, replayed at $RATE datagrams/s"
"$BENCH_BIN" stream "$STREAM_RECORDS" "$WORK/stream.bin" | tee "$WORK/stream.txt"
DATAGRAMS=$(sed -n 's/.*datagrams=\([0-9]*\).*/\1/p' "$WORK/stream.txt")

# trawl collect, twice: JSON records to /dev/null (formatting included: that is its output
# today), and --no-output (decoding only).
run_trawl() { # label, options...
    local label=$1 port=$2
    shift 2
    "$TRAWL" collect --listen "udp://127.0.0.1:$port" "$@" --summary json 2> "$WORK/trawl-collect-$label.err" &
    local pid=$!
    sleep 1
    local c0 c1
    c0=$(cpu_ticks $pid)
    "$BENCH_BIN" replay "$WORK/stream.bin" "127.0.0.1:$port" "$RATE" > "$WORK/replay-trawl-$label.txt"
    sleep 1
    c1=$(cpu_ticks $pid)
    kill -INT $pid
    wait $pid || true
    echo "$((c1 - c0)) $(tail -1 "$WORK/trawl-collect-$label.err" | sed -n 's/.*"flows":\([0-9]*\).*/\1/p')"
}
read -r TJ_TICKS TJ_FLOWS < <(run_trawl json 47391 -o /dev/null)
read -r TD_TICKS TD_FLOWS < <(run_trawl decode 47393 --no-output)

# nfcapd: writes its binary flow files (that is its output).
PORT=47392
rm -rf "$WORK/nfcapd" && mkdir -p "$WORK/nfcapd"
nfcapd -p $PORT -b 127.0.0.1 -w "$WORK/nfcapd" > "$WORK/nfcapd.log" 2>&1 &
NPID=$!
sleep 1
N0=$(cpu_ticks $NPID)
"$BENCH_BIN" replay "$WORK/stream.bin" "127.0.0.1:$PORT" "$RATE" > "$WORK/replay-nfcapd.txt"
sleep 1
N1=$(cpu_ticks $NPID)
kill -TERM $NPID
wait $NPID || true
NF_FLOWS=$(nfdump -R "$WORK/nfcapd" -q -o csv 2>/dev/null | grep -c . || true)
# `-q -o csv` has a header line in nfdump 1.7: subtract it when present.
if nfdump -R "$WORK/nfcapd" -q -o csv 2>/dev/null | head -1 | grep -q '^ts,'; then NF_FLOWS=$((NF_FLOWS - 1)); fi

python3 - "$TICK" "$TJ_TICKS" "$TJ_FLOWS" "$TD_TICKS" "$TD_FLOWS" "$N0" "$N1" "$NF_FLOWS" "$STREAM_RECORDS" "$DATAGRAMS" "$WORK/encode.txt" <<'PY' | tee "$WORK/summary.txt"
import re, sys
tick, tjt, tjf, tdt, tdf, n0, n1, nf, sent, dgrams, enc = sys.argv[1:]
tick = float(tick)
print("export (IPFIX over UDP; producer + exporter CPU):")
for line in open(enc):
    kv = dict(re.findall(r"(\w+)=([\d.]+)", line))
    sink = "loopback socket" if "127.0.0.1" in line else "veth, dropped at transmit"
    print(f"  {sink:26} max message {kv['max_message']:>5} B: {float(kv['records_per_cpu_s'])/1e6:5.2f} M records/CPU-s, "
          f"{int(kv['messages'])/max(float(kv['cpu_s']),1e-9)/1e3:6.0f} k messages/CPU-s, allocations/record {kv['allocations_per_record']}")
print(f"collector ({sent} records in {dgrams} datagrams, the same stream to each receiver):")
ncpu = (int(n1) - int(n0)) / tick
nf = int(nf or 0)
nr = nf / ncpu if ncpu > 0 else float('nan')
rows = [("trawl collect (JSON to /dev/null)", int(tjt) / tick, int(tjf or 0)),
        ("trawl collect --no-output", int(tdt) / tick, int(tdf or 0))]
for name, cpu, n in rows:
    r = n / cpu if cpu > 0 else float('nan')
    print(f"  {name:34} {n:>8} records, {cpu:5.2f} CPU-s, {r/1e3:6.0f} k records/CPU-s, {r/nr:4.2f}x nfcapd")
print(f"  {'nfcapd (nfcapd files)':34} {nf:>8} records, {ncpu:5.2f} CPU-s, {nr/1e3:6.0f} k records/CPU-s")
PY
