#!/usr/bin/env bash
# trawl's soak benchmark (issue 27, item 21): `trawl run` with every output at once (packet
# store, flow database, flows file, series file, IPFIX export to a local collector, a lossy
# shared-ring listener in another process) on a veth pair fed at a steady rate by tcpreplay
# loops of a capture, for N minutes, with retention small enough that segments and database
# blocks are deleted during the run. Every --sample seconds it records the monitor's RSS, open
# file descriptors and threads, the packets sent and seen, ring misses and waits, records
# written, and the store's and database's sizes; at the end it checks that nothing was lost
# without being counted, that the store and database hold what retention allows and all of it
# is readable, and that memory and descriptors stopped growing. Exit 1 if a check fails.
#
#   bench/soak.sh [--minutes N] [--pps N] [--capture FILE] [--sample SECS] [--no-build] ...
#
# Needs root (network namespace, AF_PACKET), ip, tcpreplay, capinfos, python3. Results: a table
# on stdout; bench/work/soak/ has the per-sample CSV, every process's log and the outputs.
set -euo pipefail
export LC_ALL=C

usage() {
    cat <<'EOF'
usage: bench/soak.sh [--minutes N] [--pps N] [--capture FILE] [--sample SECS]
                     [--store-budget SIZE] [--db-max-size SIZE] [--segment-time T] [--segment-size SIZE]
                     [--unique-ip-loops N] [--max-rss-growth MIB] [--dir DIR] [--no-build]

  --minutes N          how long traffic is sent (default 60)
  --pps N              tcpreplay's steady rate, packets per second (default 30000)
  --capture FILE       what tcpreplay loops over (default: the corpus's bench seed
                       ndpi-default-ether-merged.pcap if present, else testdata/pcaps/android.pcap)
  --sample SECS        seconds between samples (default 60)
  --store-budget SIZE  packet store --dump-max-size (default 256MiB)
  --db-max-size SIZE   flow database --db-max-size (default 8MiB)
  --segment-time T     packet store --segment-time (default 10s)
  --segment-size SIZE  packet store --segment-size (default 32MiB)
  --unique-ip-loops N  tcpreplay gives the capture new addresses every N loops: new flows
                       (default 20: at 30k packets/s about 390 records/s, 1.6 GB of
                       JSON flow records an hour)
  --max-rss-growth MIB largest RSS growth over the second half allowed, from the fitted
                       slope (default 16)
  --dir DIR            working directory (default bench/work/soak; emptied first)
  --no-build           use the release binary already built

Environment: CARGO_TARGET_DIR (default <repo>/target); TRAWL_BENCH_BIN (another trawl binary,
with --no-build).
EOF
}

MINUTES=60
PPS=30000
CAPTURE=
SAMPLE=60
STORE_BUDGET=256MiB
DB_MAX=8MiB
SEG_TIME=10s
SEG_SIZE=32MiB
UNIQUE_LOOPS=20
MAX_RSS_GROWTH=16
DIR=
BUILD=1
ARGS_GIVEN="$*"
while [ $# -gt 0 ]; do
    case $1 in
        --minutes) MINUTES=${2:?--minutes needs a number}; shift ;;
        --pps) PPS=${2:?--pps needs a number}; shift ;;
        --capture) CAPTURE=${2:?--capture needs a file}; shift ;;
        --sample) SAMPLE=${2:?--sample needs seconds}; shift ;;
        --store-budget) STORE_BUDGET=${2:?}; shift ;;
        --db-max-size) DB_MAX=${2:?}; shift ;;
        --segment-time) SEG_TIME=${2:?}; shift ;;
        --segment-size) SEG_SIZE=${2:?}; shift ;;
        --unique-ip-loops) UNIQUE_LOOPS=${2:?}; shift ;;
        --max-rss-growth) MAX_RSS_GROWTH=${2:?}; shift ;;
        --dir) DIR=${2:?--dir needs a directory}; shift ;;
        --no-build) BUILD=0 ;;
        -h | --help) usage; exit 0 ;;
        *) echo "soak.sh: unknown argument $1" >&2; usage >&2; exit 2 ;;
    esac
    shift
done

die() { echo "soak.sh: error: $*" >&2; exit 1; }
note() { echo "== $(date -u +%H:%M:%S) $*" >&2; }

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH=$ROOT/bench
WORK=$BENCH/work
DIR=${DIR:-$WORK/soak}
TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target}
TRAWL=${TRAWL_BENCH_BIN:-$TARGET_DIR/release/trawl}
[ "$(id -u)" = 0 ] || die "needs root (network namespace, packet sockets)"
for c in ip tcpreplay capinfos python3; do
    command -v "$c" >/dev/null || die "missing $c (apt-get install iproute2 tcpreplay wireshark-common python3)"
done

if [ -z "$CAPTURE" ]; then
    # The corpus as the tests find it: $TRAWL_CORPUS, else ../shared/corpus beside the repository.
    for c in "${TRAWL_CORPUS:-$ROOT/../shared/corpus}/bench/ndpi-default-ether-merged.pcap" \
        "$ROOT/testdata/pcaps/android.pcap"; do
        [ -f "$c" ] && { CAPTURE=$(realpath "$c"); break; }
    done
fi
[ -f "$CAPTURE" ] || die "capture $CAPTURE not found"
# tcpreplay refuses a record whose original length exceeds 262144 (the nDPI seed has one that
# claims 4 GB, from a fuzzed capture) and the veth cannot carry more than 65535 + 14 bytes:
# a copy with original lengths clamped to the captured ones, longer frames and frames shorter
# than an Ethernet header (the kernel refuses to send them) left out.
mkdir -p "$WORK"
REPLAY=$WORK/soak-replay.pcap
python3 - "$CAPTURE" "$REPLAY" <<'PY' || die "cannot prepare $CAPTURE for tcpreplay (classic pcap only)"
import struct, sys
src, dst = sys.argv[1:]
with open(src, "rb") as f, open(dst + ".tmp", "wb") as o:
    h = f.read(24)
    e = {b"\xd4\xc3\xb2\xa1": "<", b"\x4d\x3c\xb2\xa1": "<", b"\xa1\xb2\xc3\xd4": ">",
         b"\xa1\xb2\x3c\x4d": ">"}[h[:4]]
    o.write(h)
    kept = left = 0
    while (r := f.read(16)) and len(r) == 16:
        ts, frac, cap, orig = struct.unpack(e + "IIII", r)
        data = f.read(cap)
        if cap > 65535 + 14 or cap < 14:
            left += 1
            continue
        o.write(struct.pack(e + "IIII", ts, frac, cap, cap if orig > 262144 or orig < cap else orig))
        o.write(data)
        kept += 1
print(f"{dst}: {kept} packets, {left} longer than the veth carries or shorter than 14 bytes left out", file=sys.stderr)
PY
mv "$REPLAY.tmp" "$REPLAY"

if [ "$BUILD" = 1 ]; then
    note "building (release, target dir $TARGET_DIR)"
    (cd "$ROOT" && cargo build --release -q -p trawl-cli) || die "build failed"
fi
[ -x "$TRAWL" ] || die "$TRAWL missing"

# bytes SIZE: 256MiB, 1GiB, 1000 -> bytes (the forms the retention flags take).
bytes() {
    python3 -c 'import re,sys; m=re.fullmatch(r"(\d+)(|KiB|MiB|GiB|TiB)", sys.argv[1]); m or sys.exit("bad size " + sys.argv[1]); print(int(m[1]) * 1024 ** ["", "KiB", "MiB", "GiB", "TiB"].index(m[2]))' "$1"
}
STORE_BUDGET_B=$(bytes "$STORE_BUDGET")
DB_MAX_B=$(bytes "$DB_MAX")

rm -rf "$DIR"
mkdir -p "$DIR"
STORE=$DIR/store
DB=$DIR/db
FLOWS=$DIR/flows.jsonl
SERIES=$DIR/series.jsonl
CSV=$DIR/samples.csv

# ---------------------------------------------------------------------------------------------
# The veth pair: both ends in one namespace (its own loopback for the collector, forwarding off,
# nothing leaks to the host); no IPv6, no addresses, so only tcpreplay's frames cross it.
# MTU 65535: the nDPI seed has frames up to 37.5 kB.
# ---------------------------------------------------------------------------------------------
NS=soak$$
IF_S=sk$$s
IF_C=sk$$c
RING=soak
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        fi
    done
    ip netns del "$NS" 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ip netns add "$NS"
# Background processes call `ip netns exec` directly (it execs: $! is then their PID).
nsx() { ip netns exec "$NS" "$@"; }
ip -n "$NS" link add "$IF_S" type veth peer name "$IF_C"
for i in "$IF_S" "$IF_C"; do
    nsx sysctl -qw "net.ipv6.conf.$i.disable_ipv6=1"
    ip -n "$NS" link set dev "$i" addrgenmode none mtu 65535 up
done
ip -n "$NS" link set dev lo up
# counter IF NAME: an interface statistic (sysfs as the namespace sees it).
counter() { nsx cat "/sys/class/net/$1/statistics/$2"; }

# A port free in the fresh namespace: any.
PORT=4739

note "collector: trawl collect --listen udp://127.0.0.1:$PORT (in netns $NS)"
ip netns exec "$NS" "$TRAWL" collect --listen "udp://127.0.0.1:$PORT" --no-output --summary json \
    2>"$DIR/collect.log" &
COLLECT_PID=$!
PIDS+=("$COLLECT_PID")

RUN_CMD=("$TRAWL" run -i "$IF_C" --ring "$RING" --stats-interval 10s --summary json
    --dump "$STORE" --segment-time "$SEG_TIME" --segment-size "$SEG_SIZE"
    --dump-max-size "$STORE_BUDGET"
    --db "$DB" --db-max-size "$DB_MAX"
    --flows "$FLOWS" --series "$SERIES"
    --export "ipfix+udp://127.0.0.1:$PORT")
note "monitor: ${RUN_CMD[*]}"
ip netns exec "$NS" "${RUN_CMD[@]}" 2>"$DIR/run.log" &
RUN_PID=$!
PIDS+=("$RUN_PID")

# Ready when it announces its ring (after the capture socket is bound).
for _ in $(seq 1 100); do
    grep -q "publishing packets on ring" "$DIR/run.log" 2>/dev/null && break
    kill -0 "$RUN_PID" 2>/dev/null || { cat "$DIR/run.log" >&2; die "trawl run exited"; }
    sleep 0.1
done
grep -q "publishing packets on ring" "$DIR/run.log" || die "trawl run did not start"
RING_NAME=$(sed -n "s/.*publishing packets on ring '\([^']*\)'.*/\1/p" "$DIR/run.log" | head -1)

# A lossy listener in another process: the shared ring's cross-process path for the whole run.
note "listener: trawl listen --ring $RING_NAME -w /dev/null"
"$TRAWL" listen --ring "$RING_NAME" -w /dev/null --summary json 2>"$DIR/listen.log" &
LISTEN_PID=$!
PIDS+=("$LISTEN_PID")
sleep 1

note "sender: tcpreplay --pps $PPS --loop 0 --unique-ip --unique-ip-loops $UNIQUE_LOOPS $CAPTURE, $MINUTES min"
ip netns exec "$NS" tcpreplay -i "$IF_S" -K --pps "$PPS" --loop 0 --unique-ip --unique-ip-loops "$UNIQUE_LOOPS" \
    --no-flow-stats     --duration $((MINUTES * 60)) "$REPLAY" >"$DIR/tcpreplay.log" 2>&1 &
SEND_PID=$!
PIDS+=("$SEND_PID")
START=$(date +%s)

# ---------------------------------------------------------------------------------------------
# Samples
# ---------------------------------------------------------------------------------------------
proc_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null || echo 0; }
nfds() { find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
FLOW_OFF=0
FLOW_LINES=0
: >"$DIR/segments.seen"
: >"$DIR/blocks.seen"
echo "t_s,rss_kib,hwm_kib,anon_kib,shmem_kib,fds,threads,collect_rss_kib,listen_rss_kib,sent_tx,sent_tx_dropped,cap_rx,cap_rx_dropped,status_s,status_packets,ring_missed,producer_waits,unaccounted,flow_lines,flow_bytes,series_lines,segments,store_bytes,segments_deleted,blocks,db_bytes,blocks_deleted,load1" >"$CSV"
sample() {
    # Counters of files that come and go: a missing one is a zero, not an error.
    set +e +o pipefail
    local t=$(($(date +%s) - START)) st status_s status_pkts missed waits size add segs sbytes blks dbytes
    # The last status line: "trawl: 60s: N packets (...); ring NAME: L listener(s), M missed,
    # producer waited W times; ..." (one ring part per ring, the store's in-process ring too).
    st=$(grep '^trawl: [0-9]*s: ' "$DIR/run.log" | tail -1 || true)
    status_s=$(sed -n 's/^trawl: \([0-9]*\)s: .*/\1/p' <<<"$st")
    status_pkts=$(sed -n 's/^trawl: [0-9]*s: \([0-9]*\) packets.*/\1/p' <<<"$st")
    missed=$(grep -o '[0-9]* missed' <<<"$st" | awk '{ s += $1 } END { print s + 0 }')
    waits=$(grep -o 'waited [0-9]* times' <<<"$st" | awk '{ s += $2 } END { print s + 0 }')
    size=$(stat -c %s "$FLOWS" 2>/dev/null || echo 0)
    # New whole lines only (a record may be half written at the end).
    add=$(tail -c +$((FLOW_OFF + 1)) "$FLOWS" 2>/dev/null | head -c $((size - FLOW_OFF)) | wc -l)
    FLOW_LINES=$((FLOW_LINES + add))
    FLOW_OFF=$size
    find "$STORE" -name '*.pcap' -printf '%P\n' 2>/dev/null | sort >"$DIR/segments.now"
    sort -u "$DIR/segments.seen" "$DIR/segments.now" -o "$DIR/segments.seen"
    segs=$(wc -l <"$DIR/segments.now")
    sbytes=$(find "$STORE" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
    find "$DB" -name '*.parquet' -printf '%P\n' 2>/dev/null | sort >"$DIR/blocks.now"
    sort -u "$DIR/blocks.seen" "$DIR/blocks.now" -o "$DIR/blocks.seen"
    blks=$(wc -l <"$DIR/blocks.now")
    dbytes=$(find "$DB" -name '*.parquet' -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
    local tx rx
    tx=$(counter "$IF_S" tx_packets)
    rx=$(counter "$IF_C" rx_packets)
    echo "$t,$(proc_kb "$RUN_PID" VmRSS),$(proc_kb "$RUN_PID" VmHWM),$(proc_kb "$RUN_PID" RssAnon),$(proc_kb "$RUN_PID" RssShmem),$(nfds "$RUN_PID"),$(proc_kb "$RUN_PID" Threads),$(proc_kb "$COLLECT_PID" VmRSS),$(proc_kb "$LISTEN_PID" VmRSS),$tx,$(counter "$IF_S" tx_dropped),$rx,$(counter "$IF_C" rx_dropped),${status_s:-0},${status_pkts:-0},$missed,$waits,$((rx - ${status_pkts:-0})),$FLOW_LINES,$size,$(wc -l <"$SERIES" 2>/dev/null || echo 0),$segs,$sbytes,$(($(wc -l <"$DIR/segments.seen") - segs)),$blks,$dbytes,$(($(wc -l <"$DIR/blocks.seen") - blks)),$(cut -d' ' -f1 /proc/loadavg)" >>"$CSV"
    tail -1 "$CSV" | awk -F, '{ printf "== t=%ss rss=%.1fMiB fds=%s sent=%s seen=%s (status %ss) missed=%s records=%s segments=%s (-%s) blocks=%s (-%s) load=%s\n", $1, $2 / 1024, $6, $10, $15, $14, $16, $19, $22, $24, $25, $27, $28 }' >&2
    set -e -o pipefail
}

# SIGINT/SIGTERM from here on ends the soak early but still stops everything in order, reads
# back and checks (the report says how long traffic was sent).
STOP_EARLY=0
trap 'STOP_EARLY=1' INT TERM
sample
END=$((START + MINUTES * 60))
while [ "$STOP_EARLY" = 0 ]; do
    now=$(date +%s)
    [ "$now" -ge "$END" ] && break
    next=$((now + SAMPLE))
    [ "$next" -gt "$END" ] && next=$END
    while [ "$(date +%s)" -lt "$next" ]; do
        kill -0 "$RUN_PID" 2>/dev/null || { tail "$DIR/run.log" >&2; die "trawl run exited during the soak"; }
        kill -0 "$SEND_PID" 2>/dev/null || break
        [ "$STOP_EARLY" = 0 ] || break
        sleep 1
    done
    kill -0 "$SEND_PID" 2>/dev/null || break
    [ "$STOP_EARLY" = 0 ] || break
    sample
done
trap 'exit 130' INT TERM
[ "$STOP_EARLY" = 0 ] || note "stopped early after $(($(date +%s) - START)) s"

# ---------------------------------------------------------------------------------------------
# Stop: sender (it ends by --duration), drain, listener, monitor, collector.
# ---------------------------------------------------------------------------------------------
stop() { # stop PID NAME: SIGINT, wait up to 120 s, then SIGKILL (a failure).
    local pid=$1 name=$2 i
    kill -INT "$pid" 2>/dev/null || true
    for i in $(seq 1 1200); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid" 2>/dev/null || true
        echo "$name" >>"$DIR/killed"
    fi
    wait "$pid" 2>/dev/null && echo 0 >"$DIR/$name.rc" || echo $? >"$DIR/$name.rc"
}
: >"$DIR/killed"
if kill -0 "$SEND_PID" 2>/dev/null; then
    # --duration ends it within a second or two; SIGINT if not (or at once when stopped early).
    [ "$STOP_EARLY" = 1 ] || sleep 3
    stop "$SEND_PID" tcpreplay
else
    wait "$SEND_PID" && echo 0 >"$DIR/tcpreplay.rc" || echo $? >"$DIR/tcpreplay.rc"
fi
SENT_SECONDS=$(($(date +%s) - START))
sleep 3 # the last blocks reach the monitor (10 ms block timeout) and the store's writer
sample
echo "sent_tx=$(counter "$IF_S" tx_packets) sent_tx_dropped=$(counter "$IF_S" tx_dropped) cap_rx=$(counter "$IF_C" rx_packets) cap_rx_dropped=$(counter "$IF_C" rx_dropped)" >"$DIR/counters.txt"
stop "$LISTEN_PID" listen
stop "$RUN_PID" run
sleep 2 # the exporter's last datagrams reach the collector
stop "$COLLECT_PID" collect
nsx cat /proc/net/snmp >"$DIR/snmp.txt"
# What the store and database hold once the monitor has closed its last segment and written
# its last blocks (and run retention a last time).
{
    echo "segments=$(find "$STORE" -name '*.pcap' | wc -l)"
    echo "store_bytes=$(find "$STORE" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')"
    echo "blocks=$(find "$DB" -name '*.parquet' | wc -l)"
    echo "db_bytes=$(find "$DB" -name '*.parquet' -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')"
    find "$STORE" -name '*.pcap' -printf '%P\n' | sort -u - "$DIR/segments.seen" | wc -l | sed 's/^/segments_ever=/'
    find "$DB" -name '*.parquet' -printf '%P\n' | sort -u - "$DIR/blocks.seen" | wc -l | sed 's/^/blocks_ever=/'
} >"$DIR/final.txt"

# Readback: the whole packet store through trawl, each segment on its own through capinfos;
# the whole database through trawl query (and DuckDB, when its Python module is installed, in
# soak-report.py).
note "reading back the packet store and the database"
set +e
"$TRAWL" packets -r "$STORE" -w - --summary json 2>"$DIR/packets.log" | wc -c >"$DIR/packets.bytes"
echo "${PIPESTATUS[0]}" >"$DIR/packets.rc"
: >"$DIR/capinfos.txt"
find "$STORE" -name '*.pcap' | sort | while read -r seg; do
    if n=$(capinfos -M -c -T -r "$seg" 2>>"$DIR/capinfos.err" | awk -F'\t' '{ print $2 }'); then
        echo "$seg $n ok" >>"$DIR/capinfos.txt"
    else
        echo "$seg 0 failed" >>"$DIR/capinfos.txt"
    fi
done
"$TRAWL" query -d "$DB" talk_conv --limit 0 --format json >"$DIR/query.json" 2>"$DIR/query.log"
echo $? >"$DIR/query.rc"
set -e

# ---------------------------------------------------------------------------------------------
# Checks and the table
# ---------------------------------------------------------------------------------------------
export DIR MINUTES PPS CAPTURE STORE_BUDGET_B DB_MAX_B MAX_RSS_GROWTH SENT_SECONDS ARGS_GIVEN
export RUN_CMDLINE="${RUN_CMD[*]}"
python3 "$BENCH/soak-report.py"
